"""The quantile methods that read raw values (not a histogram), their result and ``auto``'s
choice among them: :class:`QuantilesResult`, :func:`auto_method` and the registered methods.

The mechanisms (in :mod:`.exponential` and :mod:`.joint_exp`), all on public bounds [a, b]:

* :func:`exponential_quantile`: one quantile by the exponential mechanism (Smith, "Privacy-
  preserving statistical estimation with optimal convergence rates", STOC 2011), on a finite
  public grid, sampled **exactly** (:func:`exact_choice`).
* :func:`approximate_quantiles`: many quantiles by the recursive split of Kaplan, Schnapp and
  Stemmer ("Differentially Private Approximate Quantiles", ICML 2022): the middle quantile by
  the exponential mechanism, then each half of the data for each half of the levels, with
  the budget split over the floor(log2 m) + 1 levels of the recursion.  Exact.
* :func:`joint_exponential_quantiles`: JointExp (Gillenwater, Joseph and Kulesza,
  "Differentially Private Quantiles", ICML 2021): one exponential mechanism over ordered
  vectors of m outputs, sampled by its dynamic program, on a fine public grid
  (:class:`JointGrid`: outputs never computed from data values).  Its tables are
  log-space floats (double, or long double where the double float-error charge would exceed
  1% of epsilon: :func:`joint_precision`); every choice is drawn exactly by those numbers
  (:func:`_exact_log_choice`), so the law is within :func:`joint_log_error_bound` nats of the
  definition (not exact).

The grid (:class:`QuantileGrid`): integer bounds use the integers a..b; real bounds cut
[a, b] into ``cells`` equal cells and report a cell's midpoint, so the resolution is
(b - a) / cells.  A value's cell is a public function of the value (clipped into [a, b]).

Neighbouring relations.  ``"add_remove"``: one record added or removed, the number of
records n private.  ``"replace"``: one record changes value, n public.  The single-quantile
score -dist(qn, [#{z < c}, #{z <= c}]) changes by at most max(q, 1 - q) under add/remove and
by at most 1 under replace; each mechanism's docstring states its sensitivity.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from ..answers.describe import Labels, self_description
from ..errors import DataError, ParameterError
from ..privacy.exact_choice import MAX_GRID
from ..registry import QUANTILE_METHODS, Citation, Entry
from .bins import RecordCount, histogram_bins
from .exponential import approximate_quantiles
from .grid import QuantileGrid
from .joint_exp import JointCharge, JointGrid, joint_exponential_run


@dataclass
class QuantilesResult:
    """Private quantiles and how they were made.

    ``values``: one estimate per level of ``q``.  ``method``: the mechanism used (``auto``
    names its choice and ``reason``).  ``epsilon``: the total spent, bounds and record count
    included; ``bounds``: (a, b) used, ``bounds_source``: "public" or "private",
    ``bounds_epsilon``: the part of epsilon spent finding them; ``count``: the record count
    the bins and auto used, its source and cost (``count_epsilon``); ``bins``: the histogram
    route's equal bins on binned bounds; ``float_error``: JointExp's :class:`JointCharge`
    (working precision, the epsilon it ran at after paying for its float error); ``grid``:
    JointExp's public grid (:class:`JointGrid`), which every value lies on.
    :meth:`confidence_interval` gives honest intervals for the histogram route; JointExp and
    the recursive split have none and say so.
    """

    q: np.ndarray
    values: np.ndarray
    method: str
    epsilon: float
    bounds: tuple[float, float]
    bounds_source: str
    bounds_epsilon: float
    neighbours: str
    seeded: bool
    reason: str = ""
    release: object = None  # the histogram route's Release
    count: RecordCount | None = None  # the record count used (bins, auto), its source and cost
    bins: int | None = None  # equal bins of the histogram route on binned bounds
    float_error: JointCharge | None = None  # JointExp: its precision and the epsilon its float error cost
    grid: JointGrid | None = None  # JointExp: the public grid of its outputs
    privacy_unit: dict | None = None  # the privacy unit's record (dprange.privacy.units), None: one row, one person

    @property
    def count_epsilon(self) -> float:
        """The part of epsilon spent on a noisy record count (0 when none was drawn)."""
        return 0.0 if self.count is None else self.count.epsilon

    @property
    def has_intervals(self) -> bool:
        return self.release is not None

    def confidence_interval(self, alpha: float = 0.05, simultaneous: bool = False):
        """(lower, upper) arrays at level 1 - alpha: bin edges that hold whatever the data look
        like inside a bin (histogram route only; ``simultaneous``: all levels at once)."""
        if self.release is None:
            raise ParameterError(
                f"method {self.method!r} has no honest confidence intervals; use method='histogram' for intervals"
            )
        answer = self.release.quantile(self.q)  # type: ignore[attr-defined]
        return answer.confidence_interval(alpha, simultaneous=simultaneous)

    def to_dict(self, alpha: float = 0.05) -> dict:
        out = {
            "q": self.q.tolist(),
            "values": np.asarray(self.values, dtype=float).tolist(),
            "method": self.method,
            "reason": self.reason,
            "privacy": {"epsilon": self.epsilon, "neighbours": self.neighbours, "seeded": self.seeded},
            "bounds": {
                "lower": self.bounds[0],
                "upper": self.bounds[1],
                "source": self.bounds_source,
                "epsilon": self.bounds_epsilon,
            },
            "record_count": None if self.count is None else self.count.to_dict(),
            "bins": self.bins,
            "float_error": None if self.float_error is None else self.float_error.to_dict(),
            "grid": None if self.grid is None else self.grid.to_dict(),
            "intervals": None,
        }
        if self.release is not None:
            lower, upper = self.confidence_interval(alpha)
            both = self.confidence_interval(alpha, simultaneous=True)
            out["intervals"] = {
                "alpha": alpha,
                "lower": lower.tolist(),
                "upper": upper.tolist(),
                "simultaneous_lower": both[0].tolist(),
                "simultaneous_upper": both[1].tolist(),
            }
        return out

    def to_document(self, alpha: float = 0.05, *, labels: Labels | None = None, explanation: str = "") -> dict:
        """The result as a self-describing saved file (``"kind": "quantiles"``, version 1; the
        published schema, :mod:`dprange.answers.describe`): :meth:`to_dict` with the input's
        ``labels``, the privacy statement in words, the software and ``explanation``."""
        guarantee = SimpleNamespace(
            epsilon=self.epsilon,
            delta=0.0,
            neighbours=self.neighbours,
            total=True if self.neighbours == "replace" else None,  # replace: the number of records is public
            seeded=self.seeded,
        )
        return {
            "kind": "quantiles",
            "version": 1,
            **self_description(labels or Labels(), guarantee, public_domain=self.bounds_source == "public"),
            "explanation": explanation,
            **self.to_dict(alpha),
        }

    def __repr__(self) -> str:
        return (
            f"QuantilesResult(method={self.method!r}, values={np.array2string(np.asarray(self.values), threshold=6)})"
        )


#: auto's thresholds on the number of levels m (docs/quantiles.md has the numbers behind them).
AUTO_JOINT_FROM = 2


AUTO_HISTOGRAM_FROM = 10


#: binned bounds with more bins than m^2: JointExp below this many levels, the recursive split from it
AUTO_SPLIT_FROM = 12


def auto_reads_count(m: int, *, binned: bool) -> bool:
    """Whether :func:`auto_method` uses the record count for m levels: on binned bounds (real,
    or integer ranges too wide for one bin per value) from two levels on, where the choice
    compares the histogram route's bins with m^2 (and the route's bins need it anyway)."""
    return binned and m >= AUTO_JOINT_FROM


def auto_method(
    m: int,
    epsilon: float,
    *,
    integer: bool,
    width: float,
    joint_ok: bool = True,
    n: int | None = None,
    binned: bool = True,
) -> tuple[str, str]:
    """(method, reason) from public or paid-for facts only: m, epsilon, whether the histogram
    route bins the bounds (``binned``: real bounds or an integer range wider than 2^17; see
    :func:`dprange.api.histogram_binned`) and n, the record count that is public (replace),
    declared (n_max) or noisy (a declared share of epsilon), or None when none may be used.

    * m = 1: the exponential mechanism ("approximate" with one level: exact sampler), as
      accurate as JointExp with one level (the same law up to the grid);
    * binned bounds with n known: the histogram route while its bins,
      :func:`dprange.quantile_mechanisms.bins.histogram_bins` (n epsilon), i.e. about n epsilon / 32, are at
      most m^2; beyond, JointExp for m <= 11 (``joint_ok``: a public n_max or n public under
      replace, and :func:`joint_affordable`; else the exact recursive split) and the recursive
      split for m >= 12.  The
      histogram route's error per quantile does not depend on m but grows with its depth
      (log bins); JointExp's and the split's fall with n epsilon and grow with m (JointExp's
      quickly, the split's as log m), so the crossing moves to larger n epsilon as m grows.
      The split's depth floor(log2 m) + 1 (Kaplan, Schnapp and Stemmer, ICML 2022) is 4 from
      m = 8 to 15 while JointExp's error keeps growing with m, hence the switch at 12 (the
      calibration behind both thresholds: docs/quantiles.md, "The automatic choice" and
      "Between 9 and 18 levels");
    * otherwise (integer bounds with one bin per value, or n unknown) by m alone: JointExp
      (or the split without ``joint_ok``) for 2 <= m <= 9, the histogram route from m = 10.
      One bin per value has no interpolation error, so there n epsilon does not set the
      route's error the same way; with n unknown the bins follow epsilon alone.
    """
    if m < AUTO_JOINT_FROM:
        return "approximate", "one level: the exponential mechanism (exact sampler)"
    joint = "joint_exp" if joint_ok else "approximate"
    joint_why = (
        "JointExp"
        if joint_ok
        else "the exact split (JointExp needs a declared n_max under add/remove and a float-error charge below "
        "half of epsilon)"
    )
    if binned and n is not None:
        bins = histogram_bins(n * epsilon)
        facts = f"m = {m} levels, n x epsilon = {n * epsilon:.4g}: {bins} bins"
        if bins <= m * m:
            return "histogram", f"{facts} <= m^2; the histogram route"
        if m < AUTO_SPLIT_FROM:
            return joint, f"{facts} > m^2; {joint_why}"
        return "approximate", f"{facts} > m^2; the recursive split"
    if m < AUTO_HISTOGRAM_FROM:
        return joint, f"m = {m} levels (2..{AUTO_HISTOGRAM_FROM - 1}): {joint_why}"
    return "histogram", f"m = {m} >= {AUTO_HISTOGRAM_FROM} levels: the histogram route is the most accurate"


def as_values(values) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        raise DataError("quantiles needs numeric values (a flat list or array of numbers)") from None
    if not np.all(np.isfinite(arr)):
        raise DataError("values contain NaN, missing or infinite entries; drop them before computing quantiles")
    return arr


def _run_joint_exp(values, levels, epsilon, bounds, *, integer, neighbours, rng, cells, bins, n_max=None):
    """(estimates, :class:`JointCharge`): the charge takes the place of a Release."""
    return joint_exponential_run(
        values, levels, epsilon, bounds, integer=integer, neighbours=neighbours, rng=rng, n_max=n_max, cells=cells
    )


def _run_approximate(values, levels, epsilon, bounds, *, integer, neighbours, rng, cells, bins):
    """The recursive split; integer ranges wider than the exact sampler's grid (e.g. private
    bounds of +-2^40) use real cells and floor the outputs."""
    fits = integer and bounds[1] - bounds[0] + 1 <= MAX_GRID
    grid = QuantileGrid.from_bounds(bounds, integer=fits, cells=cells)
    estimates = approximate_quantiles(values, levels, epsilon, grid, neighbours=neighbours, rng=rng)
    return (np.floor(estimates) if integer and not fits else estimates), None


def register_quantile_method(name: str, factory, summary: str, citation: Citation) -> None:
    """Register a quantile method: ``factory(values, levels, epsilon, bounds, *, integer,
    neighbours, rng, cells, bins) -> (estimates, Release or None)``; JointExp returns its
    :class:`JointCharge` in place of the Release (``quantiles`` moves it to ``float_error``)."""
    QUANTILE_METHODS.register(Entry("quantile method", name, summary, citation, factory=factory, auto=True))


register_quantile_method(
    "joint_exp",
    _run_joint_exp,
    "JointExp: one exponential mechanism over ordered output vectors, sampled by dynamic programming, its "
    "outputs values of a public grid (log-space float weights, each choice drawn exactly by them; the float "
    "error, bounded at a declared n_max, is charged to epsilon; long double where that charge would exceed 1% "
    "of epsilon); no intervals",
    Citation("Gillenwater, Joseph and Kulesza", "Differentially Private Quantiles", "ICML 2021"),
)


register_quantile_method(
    "approximate",
    _run_approximate,
    "the recursive split: exponential mechanisms over floor(log2 m) + 1 levels, sampled exactly; no intervals",
    Citation("Kaplan, Schnapp and Stemmer", "Differentially Private Approximate Quantiles", "ICML 2022"),
)

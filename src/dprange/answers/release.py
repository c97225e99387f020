"""Release: a private estimate of a histogram and its answers, each with an exact error bar.

A :class:`Release` holds three things: the estimate x-hat of the histogram, its *error model*
(``range_variance(lo, hi)``: the exact variance of the estimated count of bins lo..hi, computed
implicitly in O(depth) per query, never an n x n covariance) and its
:class:`~dprange.answers.provenance.Provenance` (mechanism, privacy parameters, noise, inference).  It
answers ranges, prefixes, the histogram, the total and workloads, in bin indices or in the
domain's units (:meth:`Release.count_between`, :meth:`Release.count_below`), as
:class:`~dprange.answers.types.Answer` objects: the value, ``stderr`` and
``confidence_interval(alpha)``.  The other jobs live in their own modules, behind thin methods:

* CDF and quantiles (post-processing): :mod:`dprange.answers.cdf`;
* parametric bootstrap (from the measurements' public design, not the mechanism):
  :mod:`dprange.answers.bootstrap`;
* saving and loading: :mod:`dprange.answers.codec`.
"""

from __future__ import annotations

import copy
from functools import cached_property

import numpy as np

from ..domain import UNORDERED_MESSAGE, Domain
from ..errors import ParameterError
from ..inference.tree import bin_variances
from .bootstrap import bootstrap, check_reps
from .cdf import CumulativeEstimate
from .codec import load_path, release_from_dict, release_from_json
from .describe import Labels
from .provenance import Provenance
from .tables import release_table, save_csv, to_frame
from .types import NO_MEASUREMENTS, Answer, CDFAnswer, QuantileAnswer, check_bin_ranges, one_sided_factor
from .writers import release_dict, save_json, save_npz


class Release:
    """A private histogram estimate with exact error bars (see module doc).

    ``estimate``: the estimated bin counts; ``error_model``: ``range_variance(lo, hi)`` and
    ``query_variance(weights)``; ``provenance``: a :class:`~dprange.answers.provenance.Provenance`;
    ``domain``: the bins' values (default the integers 0..n-1); ``measurements``: the noisy
    measurements the estimate came from (public design and noise), which
    :meth:`bootstrap` re-draws (None for a loaded release).
    """

    def __init__(
        self,
        estimate,
        error_model,
        provenance: Provenance,
        *,
        domain: Domain | None = None,
        measurements=None,
        input_labels: Labels | None = None,
    ):
        if not isinstance(provenance, Provenance):
            raise ParameterError(f"a Release needs a Provenance record, got {type(provenance).__name__}")
        self.estimate = np.asarray(estimate, dtype=float)
        self.n = self.estimate.size
        self.error_model = error_model
        self.provenance = provenance
        self.domain = domain if domain is not None else Domain.integers(0, self.n - 1)
        if self.domain.size != self.n:
            raise ParameterError(f"domain has {self.domain.size} bins but the estimate has {self.n}")
        self.measurements = measurements
        #: Public descriptions of the input (column, units, file): :class:`~dprange.answers.describe.Labels`.
        self.input_labels = input_labels if input_labels is not None else Labels()

    def with_labels(self, column=None, units=None, source=None) -> Release:
        """This release described: ``column`` (its name), ``units`` and ``source`` (the input
        file), saved in its JSON and shown on tables (a copy; the answers do not change)."""
        labelled = copy.copy(self)
        labelled.input_labels = Labels.of(column, units, source)
        return labelled

    # ----------------------------------------------------------------- provenance
    @property
    def mechanism(self) -> str:
        return self.provenance.mechanism

    @property
    def parameters(self) -> dict:
        return self.provenance.parameters

    @property
    def epsilon(self) -> float:
        return self.provenance.epsilon

    @property
    def delta(self) -> float:
        return self.provenance.delta

    @property
    def neighbours(self) -> str:
        return self.provenance.neighbours

    @property
    def public_total(self) -> float | None:
        """The public number of records (replace neighbours), else None."""
        return self.provenance.total

    @property
    def inference(self) -> str:
        return self.provenance.inference

    @property
    def inference_options(self) -> dict:
        return self.provenance.inference_options

    @property
    def noise(self) -> str | None:
        return self.provenance.noise

    @property
    def converged(self) -> bool:
        """False when NNLS / L1 inference (ADMM) stopped at its iteration limit without meeting
        its tolerance (a ConvergenceWarning was raised): the estimate is not the optimum."""
        return self.provenance.converged

    @property
    def seeded(self) -> bool:
        """True when the noise came from a seeded generator (predictable: not for publication)."""
        return self.provenance.seeded

    @property
    def noise_scales(self) -> list[float] | None:
        """Noise scales of the measured levels (Laplace-type noise), for honest tail factors."""
        scales = self.provenance.noise_scales
        return None if scales is None else list(scales)

    @property
    def _tails(self) -> str:
        """Laplace-aware intervals unless the noise is Gaussian (see :mod:`dprange.answers`)."""
        return "normal" if self.noise == "gaussian" else "laplace"

    @property
    def exact_error_bars(self) -> bool:
        """True for least-squares releases (exact standard errors); False for NNLS / L1."""
        return self.provenance.exact_error_bars

    def _one_sided_factor(self, alpha: float) -> float:
        """k with P(error > k sd) <= alpha / 2 for every linear answer (:mod:`dprange.answers`)."""
        return one_sided_factor(alpha, self.noise, self.noise_scales)

    # ----------------------------------------------------------------- bootstrap
    def bootstrap(self, lo, hi, *, reps: int = 200, rng=None) -> np.ndarray:
        """Parametric-bootstrap standard errors of the ranges lo..hi (inclusive bin indices).

        Each replicate re-draws the noise of every measurement around the released estimate
        (the measurements' public design and noise, never the data) and reruns the inference
        (post-processing).  This is how NNLS / L1 releases get error bars; for GLS releases
        it reproduces the exact standard errors up to Monte-Carlo error.  O(reps x inference
        cost).  A release without measurements (loaded from a file) raises ParameterError.
        """
        if self.measurements is None:
            raise ParameterError(NO_MEASUREMENTS)
        reps = check_reps(reps)
        lo, hi = self._check_ranges(lo, hi)
        return bootstrap(
            self.measurements, self.estimate, self.inference, lo, hi, reps=reps, rng=rng, options=self.inference_options
        )

    # ----------------------------------------------------------------- answers in bins
    @cached_property
    def _prefix_sums(self) -> np.ndarray:
        return np.concatenate([[0.0], np.cumsum(self.estimate)])

    def _check_ranges(self, lo, hi):
        return check_bin_ranges(lo, hi, self.n)

    def range(self, lo, hi) -> Answer:
        """Estimated count of bins lo..hi (inclusive indices; arrays of queries welcome).

        Values cost O(1) per query (prefix sums); standard errors O(depth) per query, on use.
        """
        lo, hi = self._check_ranges(lo, hi)
        scalar = lo.ndim == 0
        sums = self._prefix_sums
        value = sums[hi + 1] - sums[lo]
        return Answer(
            value,
            lambda: self.error_model.range_variance(lo, hi),
            scalar=scalar,
            tails=self._tails,
            factor=self._one_sided_factor,
        )

    def answer(self, workload) -> Answer:
        """Answers to every query of a :mod:`dprange.workloads` workload, with exact errors."""
        if getattr(workload, "n", None) != self.n:
            raise ParameterError(f"the workload must be over {self.n} bins")
        lohi = workload.ranges()
        if lohi is not None:
            return self.range(*lohi)
        W = workload.dense()
        return Answer(
            W @ self.estimate,
            lambda: self.error_model.query_variance(W),
            tails=self._tails,
            factor=self._one_sided_factor,
        )

    def prefix(self, j) -> Answer:
        """Estimated count of bins 0..j."""
        return self.range(0, j)

    def histogram(self) -> Answer:
        """Estimated count of every bin."""
        return Answer(
            self.estimate,
            lambda: bin_variances(self.error_model, self.n),
            tails=self._tails,
            factor=self._one_sided_factor,
        )

    def total(self) -> Answer:
        """The total count: public (variance 0) in the replace model, else estimated."""
        if self.public_total is not None:
            return Answer(self.public_total, 0.0, scalar=True, tails=self._tails, factor=self._one_sided_factor)
        return self.range(0, self.n - 1)

    # ----------------------------------------------------------------- answers by label
    @property
    def labels(self) -> list[str]:
        """A label per bin (:meth:`dprange.Domain.bin_labels`): the categories of a categorical
        domain, the integers, or the intervals."""
        return self.domain.bin_labels()

    def count_of(self, labels) -> Answer:
        """Estimated number of records in the chosen categories of a categorical domain: one
        label, or a list of labels whose counts are summed (each bin once), with exact
        standard errors and confidence intervals as :meth:`range`."""
        bins = np.unique(self.domain.bins_of_labels(labels))
        if bins.size and bins[-1] - bins[0] + 1 == bins.size:  # consecutive bins: a range
            return self.range(int(bins[0]), int(bins[-1]))
        weights = np.zeros((1, self.n))
        weights[0, bins] = 1.0
        return Answer(
            float(self.estimate[bins].sum()),
            lambda: np.asarray(self.error_model.query_variance(weights), dtype=float).reshape(()),
            scalar=True,
            tails=self._tails,
            factor=self._one_sided_factor,
        )

    # ----------------------------------------------------------------- answers in domain units
    def bins_of(self, a, b) -> tuple:
        """The inclusive bin-index range (lo, hi) that :meth:`count_between` (a, b) answers.

        Integer domains: the bins of the integers a..b (a <= b, both in the domain).  Interval
        domains: a and b must be bin edges (a < b; a value that is not an edge raises
        ParameterError naming the nearest edges), and the bins are those between them.
        Scalars give ints; arrays (broadcast) give int64 arrays.
        """
        return bins_between(self.domain, a, b)

    def count_between(self, a, b) -> Answer:
        """Estimated number of records with a <= value <= b, in the domain's units.

        Integer domains: exactly the bins of the integers a..b.  Interval domains: a and b
        must be bin edges (records whose value lies in [a, b); the top bin includes the
        domain's upper bound), so the count never assumes how records spread inside a bin.
        The answer is the range of :meth:`bins_of` (a, b), with exact standard errors and
        confidence intervals as :meth:`range`.
        """
        return self.range(*self.bins_of(a, b))

    def count_below(self, v) -> Answer:
        """Estimated number of records with value < v (strictly below), in the domain's units.

        Integer domains: v is an integer from the domain's lower bound to one past its upper
        bound; interval domains: v is a bin edge.  Below the domain's lower bound the count
        is 0 exactly (standard error 0).  Exact standard errors and confidence intervals as
        :meth:`range` (the fraction of records at or below a value: :meth:`cdf_at`).
        """
        stop = self._bin_bounds(v, "v", past_top=True)
        last = np.maximum(stop - 1, 0)
        empty = stop == 0
        value = np.where(empty, 0.0, self._prefix_sums[stop])

        def variance():
            return np.where(empty, 0.0, self.error_model.range_variance(np.zeros_like(last), last))

        return Answer(value, variance, scalar=stop.ndim == 0, tails=self._tails, factor=self._one_sided_factor)

    def _bin_bounds(self, values, name: str, *, past_top: bool = False) -> np.ndarray:
        """The number of bins wholly below each value (:func:`bin_bounds`)."""
        return bin_bounds(self.domain, values, name, past_top=past_top)

    # ----------------------------------------------------------------- CDF and quantiles
    @cached_property
    def _cumulative(self) -> CumulativeEstimate:
        """The CDF and quantiles of this release (:mod:`dprange.answers.cdf`), built once;
        ParameterError on a categorical domain (unordered)."""
        if self.domain.categorical:
            raise ParameterError(UNORDERED_MESSAGE)
        return CumulativeEstimate(self.estimate, self.error_model, self.provenance, self.domain, self._one_sided_factor)

    def consistent_cumulative(self, loss="l2") -> np.ndarray:
        """The closest valid cumulative counts: integers, non-decreasing, ending at the total
        (:meth:`dprange.answers.cdf.CumulativeEstimate.consistent_cumulative`)."""
        return self._cumulative.consistent_cumulative(loss)

    def cdf(self, consistent: bool = False, loss="l2") -> Answer:
        """F_j = (estimated count of bins 0..j) / total for every bin j, with standard errors
        (:meth:`dprange.answers.cdf.CumulativeEstimate.cdf`)."""
        return self._cumulative.cdf(consistent, loss)

    def cdf_at(self, values) -> CDFAnswer:
        """The CDF at values in domain units, F(v) = fraction of records <= v, with intervals
        that hold however records spread inside a bin (:meth:`dprange.answers.cdf.CumulativeEstimate.cdf_at`)."""
        return self._cumulative.cdf_at(values)

    def cdf_band(self, alpha: float = 0.05):
        """(lower, upper) pointwise bounds on F_j at the right edge of every bin j
        (:meth:`dprange.answers.cdf.CumulativeEstimate.cdf_band`)."""
        return self._cumulative.cdf_band(alpha)

    def quantile_bins(self, q, alpha: float = 0.05, *, simultaneous: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Bin indices (first, last) of the confidence interval of quantile(s) q
        (:meth:`dprange.answers.cdf.CumulativeEstimate.quantile_bins`)."""
        return self._cumulative.quantile_bins(q, alpha, simultaneous=simultaneous)

    def quantile(self, q, consistent: bool = True, loss="l2") -> QuantileAnswer:
        """Quantile(s) q in [0, 1] in domain units, with bin-edge confidence intervals
        (:meth:`dprange.answers.cdf.CumulativeEstimate.quantile`)."""
        return self._cumulative.quantile(q, consistent, loss)

    def _read_quantiles(self, cdf_values: np.ndarray, q: np.ndarray) -> np.ndarray:
        return self._cumulative._read_quantiles(cdf_values, q)

    # ----------------------------------------------------------------- serialisation
    def to_dict(self, *, alpha: float = 0.05, cdf: bool = False) -> dict:
        """Everything needed to use and audit the release, as JSON-friendly types (NaN and
        inf as None): provenance, domain, histogram, error model and deciles, so that
        :meth:`from_dict` gives back a release with the same answers and standard errors
        (:mod:`dprange.answers.codec`); the input's labels, the privacy statement in words
        and the software version (:mod:`dprange.answers.describe`); with ``cdf=True`` the CDF
        at every bin's right edge with its pointwise (1 - alpha) band (the CLI asks for it
        with ``--workload prefix``).  The format: docs/release-format.md and its JSON Schema.
        Builds Python lists: for large releases use :meth:`to_json` with a path or
        :meth:`to_npz`, which stream."""

        return release_dict(self, alpha, cdf=cdf)

    def to_json(self, path=None, *, alpha: float = 0.05, cdf: bool = False):
        """The release as JSON (the dictionary of :meth:`to_dict`).

        Without ``path``, returns the text.  With ``path``, streams it to the file
        atomically (a temporary file in the same folder, then ``os.replace``: a failure
        never leaves a partial file) and returns the path."""

        return save_json(self, path, alpha, cdf=cdf)

    # ----------------------------------------------------------------- tables
    def to_frame(self, table: str = "histogram", *, alpha: float = 0.05, q=None, simultaneous: bool = False):
        """One table of the release as a pandas DataFrame: ``"histogram"`` (bins, counts,
        standard errors, intervals), ``"cdf"`` (the CDF and its band) or ``"quantiles"``
        (levels ``q``, default the deciles, with their points, bins and intervals; all at once
        with ``simultaneous=True``).  Columns: :mod:`dprange.answers.tables`."""
        return to_frame(release_table(self, table, alpha=alpha, q=q, simultaneous=simultaneous))

    def to_pandas(self, table: str = "histogram", *, alpha: float = 0.05, q=None, simultaneous: bool = False):
        """:meth:`to_frame` (the name pandas users look for)."""
        return self.to_frame(table, alpha=alpha, q=q, simultaneous=simultaneous)

    def to_csv(self, path=None, table: str = "histogram", *, alpha: float = 0.05, q=None, simultaneous=False):
        """The table of :meth:`to_frame` as CSV (no pandas needed): the text without
        ``path``, else the path written atomically."""
        return save_csv(release_table(self, table, alpha=alpha, q=q, simultaneous=simultaneous), path)

    @classmethod
    def from_dict(cls, data: dict) -> Release:
        """The release described by :meth:`to_dict`: the same answers and standard errors.
        It has no measurements, so :meth:`bootstrap` raises ParameterError.  DataError for a
        corrupt dictionary or one of an unknown format version."""

        return release_from_dict(data, cls)

    @classmethod
    def from_json(cls, text_or_path) -> Release:
        """The release saved by :meth:`to_json`, from its text (a string starting with '{',
        or UTF-8 bytes) or from a file path (see :meth:`from_dict`)."""

        return release_from_json(text_or_path, cls)

    def to_npz(self, path, *, alpha: float = 0.05) -> str:
        """Save the release as a NumPy .npz archive (estimate, standard errors, JSON metadata),
        atomically; read it back with :func:`dprange.load_release`.  Returns the path."""

        return save_npz(self, path, alpha)

    def __repr__(self) -> str:
        return (
            f"Release(mechanism={self.mechanism!r}, bins={self.n}, epsilon={self.epsilon}, "
            f"delta={self.delta}, neighbours={self.neighbours!r})"
        )


def bin_bounds(domain: Domain, values, name: str, *, past_top: bool = False) -> np.ndarray:
    """The number of bins wholly below each value: the value's offset from the domain's
    lower bound on integer domains (values lo..hi, or lo..hi + 1 with ``past_top``), the
    index of the edge it is on interval domains; else ParameterError (and on categories,
    which have no order)."""
    if domain.categorical:
        raise ParameterError(UNORDERED_MESSAGE)
    if values is None or isinstance(values, (str, bytes, bool, np.bool_)):
        raise ParameterError(f"{name} must be a number in the domain's units, got {values!r}")
    try:
        v = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a number (or an array of numbers) in the domain's units") from None
    if not np.all(np.isfinite(v)):
        raise ParameterError(f"{name} must be finite numbers in the domain's units")
    dom = domain
    if dom.kind == "integers":
        top = dom.hi + 1 if past_top else dom.hi
        if np.any(np.mod(v, 1) != 0) or np.any((v < dom.lo) | (v > top)):
            raise ParameterError(f"{name} must be an integer from {dom.lo} to {top} on this integer domain")
        return (v - dom.lo).astype(np.int64)
    return _edge_index(v, dom.edges, name)


def bins_between(domain: Domain, a, b) -> tuple:
    """The inclusive bin-index range (lo, hi) of the values a..b of ``domain``
    (:meth:`Release.bins_of`)."""
    first, stop = bin_bounds(domain, a, "a"), bin_bounds(domain, b, "b")
    if domain.kind == "integers":
        stop = stop + 1  # b itself is counted
    first, stop = np.broadcast_arrays(first, stop)
    if np.any(first >= stop):
        raise ParameterError(
            "count_between needs a <= b on integer domains and a < b (two different edges) on interval domains"
        )
    lo, hi = first, stop - 1
    if lo.ndim == 0:
        return int(lo), int(hi)
    return lo.astype(np.int64), hi.astype(np.int64)


def _edge_index(values: np.ndarray, edges: np.ndarray, name: str) -> np.ndarray:
    """The index of the bin edge equal to each value (within 1e-9 of a bin's width: edges are
    published floats), or ParameterError naming the nearest edges of the first value that is
    not an edge."""
    nearest = np.clip(np.searchsorted(edges, values), 0, edges.size - 1)
    below = np.maximum(nearest - 1, 0)
    closer_below = np.abs(values - edges[below]) < np.abs(values - edges[nearest])
    index = np.where(closer_below, below, nearest)
    width = edges[np.minimum(index + 1, edges.size - 1)] - edges[np.maximum(index - 1, 0)]
    off = np.abs(values - edges[index]) > 1e-9 * width
    if np.any(off):
        v = float(np.ravel(values)[np.argmax(np.ravel(off))])
        if v < edges[0] or v > edges[-1]:
            raise ParameterError(f"{name}={v!r} lies outside the domain [{float(edges[0])!r}, {float(edges[-1])!r}]")
        right = int(np.searchsorted(edges, v))
        raise ParameterError(
            f"{name}={v!r} is not a bin edge of this interval domain; use the nearest edges "
            f"{float(edges[right - 1])!r} or {float(edges[right])!r} (counts inside a bin are not estimated)"
        )
    return index.astype(np.int64)


def load_release(path) -> Release:
    """A :class:`Release` saved by :meth:`Release.to_json` or :meth:`Release.to_npz` (the
    format is chosen by content).  It answers every query of the original with the same
    standard errors; bootstrap raises ParameterError."""
    return load_path(path, Release)

"""CDF and quantiles of a private histogram: post-processing with exact, honest intervals.

These functions read only a release's estimate, its error model and its provenance (the
public total, the noise): no privacy budget is spent.

Quantiles and the CDF at a value never assume how records spread inside a bin.  With
cumulative counts C_j, total N and level q, the true quantile bin is j* = min{j : C_j >= qN},
and D_j = C_j - qN is a linear query (also when N is estimated), so its estimate has an exact
variance.  The interval runs from the first bin whose upper bound D^_j + k sd_j reaches 0 to
one past the last bin whose lower bound D^_j - k sd_j is below 0; it misses j* only if a
one-sided bound fails at j* or at j* - 1, so it holds with probability >= 1 - alpha on any
data.  Its ends are bin edges (integers on integer domains).  ``simultaneous=True`` applies
Bonferroni over the levels.  The factor k bounds the one-sided tail by alpha/2 for every
linear answer (:func:`dprange.answers.types.one_sided_factor`): normal for Gaussian noise; for
continuous Laplace the larger of the normal and single-Laplace factors (checked numerically
for mixtures); for discrete Laplace a coupling with continuous Laplace that accounts for the
integer lattice (the plain factor misses up to 4.2% on one side where 2.5% is allowed).  The
CDF at a value (:meth:`CumulativeEstimate.cdf_at`) uses Fieller's construction on the linear
query P_j - f N, with the bins wholly below the value and the bins reaching it.

Point estimates of quantiles read the consistent CDF (Rameshwar and Tandon, "Optimal
Tree-Based Mechanisms for Differentially Private Approximate CDFs", 2024, section VI: CDF
consistency by dynamic programming; :func:`dprange.inference.consistency.consistent_cdf`),
which removes the downward bias of the first crossing of a noisy CDF (docs/quantiles.md,
"Figures by module").  A histogram says how many records each bin holds, never where they
sit inside it, so a point inside a bin is a guess; the rule (``placement`` of each level):

* ``"exact"``: integer domains; the bin is one value, the point is that value.
* ``"interpolated"``: the point interpolates linearly inside its bin, as if the records
  spread evenly there; chosen where the release shows no concentration of the bin's mass.
* ``"concentrated"``: the release shows that most of the bin's mass sits apart from an even
  spread (:meth:`CumulativeEstimate.concentrated`): a point mass (the zeros of a
  zero-inflated column, integer data on bins narrower than 1, a round value on a bin edge).
  Its place inside the bin is unknown, so every level in that bin gets the same point, the
  bin's lower edge (the smallest value the counts allow), and answers should report the bin
  (``bin_lower``, ``bin_upper``): interpolation would spread the levels of one atom across
  the bin (docs/quantiles.md, "Point estimates on spikes").

The test is post-processing of the release (no budget): bin j's excess over a locally linear
spread, e_j = x_j - (x_{j-1} + x_{j+1}) / 2 (the one neighbour at the domain's ends), is a
linear query with an exact variance; the bin counts as concentrated when the one-sided lower
bound e_j - k sd(e_j) (k at alpha = :data:`CONCENTRATION_ALPHA`) exceeds
:data:`CONCENTRATION_SHARE` of x_j: more than half of its mass, beyond the noise, is not
explained by its neighbours.  Without exact error bars (NNLS / L1, data-aware) the estimates
are compared alone.  The intervals never depend on the rule.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

import numpy as np

from .._validation import check_alpha
from ..domain import Domain
from ..errors import ParameterError
from ..inference.consistency import consistent_cdf
from .interval_search import bin_sd, crossing_bins
from .provenance import Provenance
from .types import Answer, CDFAnswer, QuantileAnswer, one_sided_factor, quantile_levels

#: Share of a bin's estimated mass that must exceed a locally linear spread (beyond the noise)
#: for the bin to count as concentrated (module doc).
CONCENTRATION_SHARE = 0.5


#: Two-sided level whose one-sided factor bounds the noise in the concentration test: at most
#: a one-sided 0.5% chance per bin of calling an evenly spread bin concentrated.  Small because
#: the bins tested are the ones the quantiles fell in, which favours bins with upward noise
#: (docs/quantiles.md, "Point estimates on spikes": 0.05 misplaced points on Adult fnlwgt).
CONCENTRATION_ALPHA = 0.01


class CumulativeEstimate:
    """The CDF and quantiles of an estimate x-hat with an exact error model (post-processing).

    ``estimate``: the estimated bin counts; ``error_model``: ``range_variance(lo, hi)`` (exact
    variance of the estimated count of bins lo..hi); ``provenance``: the public total (replace
    model), the noise and the inference; ``domain``: the bins' values; ``factor``: alpha -> k
    with P(error > k sd) <= alpha / 2 for every linear answer (default
    :func:`~dprange.answers.types.one_sided_factor` of the provenance's noise).
    """

    def __init__(
        self,
        estimate: np.ndarray,
        error_model,
        provenance: Provenance,
        domain: Domain,
        factor: Callable[[float], float] | None = None,
    ):
        self.estimate = np.asarray(estimate, dtype=float)
        self.n = self.estimate.size
        self.error_model = error_model
        self.provenance = provenance
        self.domain = domain
        self.public_total = provenance.total
        self.inference = provenance.inference
        self.exact_error_bars = provenance.inference == "gls"
        self.tails = "normal" if provenance.noise == "gaussian" else "laplace"
        self.factor = factor if factor is not None else self._default_factor

    def _default_factor(self, alpha: float) -> float:
        return one_sided_factor(alpha, self.provenance.noise, self.provenance.noise_scales)

    @cached_property
    def _prefix_sums(self) -> np.ndarray:
        return np.concatenate([[0.0], np.cumsum(self.estimate)])

    @cached_property
    def _prefix_variance_parts(self):
        """(Var P_j, Var R_j, Var T) for every j: P_j = x_0..x_j, R_j = x_{j+1}..x_{n-1}, T the
        total (0 when public).  Every statistic P_j - f T is a linear query whose exact
        variance follows from these three (see :meth:`_linear_sd`)."""
        if hasattr(self.error_model, "prefix_variances"):  # tree models: one O(nodes) pass
            one_pass = self.error_model.prefix_variances()
            return one_pass.prefix, one_pass.rest, 0.0 if self.public_total is not None else one_pass.total
        idx = np.arange(self.n)
        var_prefix = np.asarray(self.error_model.range_variance(np.zeros(self.n, dtype=np.int64), idx), dtype=float)
        var_rest = np.zeros(self.n)
        inner = idx < self.n - 1
        if inner.any():
            var_rest[inner] = self.error_model.range_variance(idx[inner] + 1, np.full(inner.sum(), self.n - 1))
        var_total = 0.0 if self.public_total is not None else float(self.error_model.range_variance(0, self.n - 1))
        return var_prefix, var_rest, var_total

    def _linear_sd(self, j, f):
        """Exact standard deviation of the estimate of P_j - f T (T the total; public or not).

        P_j - f T = (1 - f) P_j - f R_j, a linear query: its variance is
        (1-f)^2 Var P + f^2 Var R - 2 f (1-f) Cov(P, R), Cov(P, R) = (Var T - Var P - Var R) / 2.
        With a public total T is exact and the variance is Var P_j.
        """
        var_prefix, var_rest, var_total = self._prefix_variance_parts
        return bin_sd(var_prefix[j], var_rest[j], var_total, f, self.public_total is not None)

    def _total_value(self) -> float:
        return self.public_total if self.public_total is not None else float(self._prefix_sums[-1])

    def _require_error_bars(self):
        if not self.exact_error_bars:
            raise ParameterError(
                f"{self.inference} inference has no closed-form intervals; use least-squares "
                "inference (inference='gls', --inference gls) or Release.bootstrap for error bars"
            )

    def consistent_cumulative(self, loss="l2") -> np.ndarray:
        """The closest valid cumulative counts: integers, non-decreasing, ending at the total.

        Post-processing of the estimate (Rameshwar and Tandon 2024, section VI): see
        :func:`dprange.inference.consistency.consistent_cdf`.  The total is the public one
        (replace model) or the estimated total rounded to an integer.
        """
        total = self.public_total if self.public_total is not None else self._total_value()
        if total <= 0:
            raise ParameterError("the estimated total is not positive; no consistent CDF exists at this budget")
        return consistent_cdf(self._prefix_sums[1:], int(round(total)), loss)

    def cdf(self, consistent: bool = False, loss="l2") -> Answer:
        """F_j = (estimated count of bins 0..j) / total, for every bin j.

        ``consistent=True`` returns the valid CDF closest to the estimate in ``loss``
        (:meth:`consistent_cumulative`).  It is no longer a linear estimate: its standard
        errors are not available (NaN).

        With a public total N, Var F_j = Var(P_j) / N^2 exactly.  With an estimated total the
        ratio is non-linear; its variance is the delta-method variance of P_j - F_j N, a
        linear query, computed exactly from range variances.  For intervals that hold
        exactly (Fieller's construction, also at values inside a bin) use :meth:`cdf_at`.
        """
        if consistent:
            counts = self.consistent_cumulative(loss)
            return Answer(counts / counts[-1] if counts[-1] > 0 else counts * 0.0, np.full(self.n, np.nan))
        prefix = self._prefix_sums[1:]
        n_total = self._total_value()
        if n_total <= 0:
            raise ParameterError("the estimated total is not positive; the CDF is undefined at this budget")
        values = prefix / n_total

        def variance():
            return self._linear_sd(np.arange(self.n), values) ** 2 / n_total**2

        return Answer(values, variance, tails=self.tails, factor=self.factor)

    def _fraction_bounds(self, j: np.ndarray, k: float):
        """One-sided bounds (lower, upper) on F_j = P_j / T, each failing with probability at
        most the tail of ``k`` (Fieller's construction: f is excluded when the linear query
        P_j - f T is significantly non-zero).  O(len(j) x 48) bisection steps (to 4e-15)."""
        j = np.asarray(j, dtype=np.int64)
        prefix = self._prefix_sums[1:][j]
        total = self._total_value()

        def excess(f, sign):
            return prefix - f * total + sign * k * self._linear_sd(j, f)

        def bisect(fn, keep_low):
            """Boundary of {f in [0, 1]: fn(f) > 0} (an interval starting at 0 when keep_low,
            ending at 1 otherwise), found by bisection."""
            lo, hi = np.zeros(j.size), np.ones(j.size)
            for _ in range(48):
                mid = (lo + hi) / 2
                pos = fn(mid) > 0
                if keep_low:
                    lo, hi = np.where(pos, mid, lo), np.where(pos, hi, mid)
                else:
                    lo, hi = np.where(pos, lo, mid), np.where(pos, mid, hi)
            return lo, hi

        low_fn = lambda f: excess(f, -1.0)  # noqa: E731 - concave in f: > 0 on [0, L)
        up_fn = lambda f: -excess(f, +1.0)  # noqa: E731 - concave: > 0 on (U, 1]
        _, lower = bisect(low_fn, keep_low=True)
        lower = np.where(low_fn(np.zeros(j.size)) <= 0, 0.0, np.where(low_fn(np.ones(j.size)) > 0, 1.0, lower))
        upper, _ = bisect(up_fn, keep_low=False)
        upper = np.where(up_fn(np.ones(j.size)) <= 0, 1.0, np.where(up_fn(np.zeros(j.size)) > 0, 0.0, upper))
        return lower, np.maximum(upper, lower)

    def cdf_at(self, values) -> CDFAnswer:
        """The CDF at values in domain units: F(v) = fraction of records <= v.

        The point estimate interpolates linearly inside the bin holding v on interval domains
        (``interpolated`` says so: a guess, wrong where the bin's records sit together, e.g. at
        one value); the confidence interval does not: it is
        [lower bound of F at the last bin wholly <= v, upper bound of F at the bin holding v],
        which holds the true F(v) whenever the one-sided bounds hold, however the records
        are spread inside the bin.  Below the domain F = 0, at or above its top F = 1, exactly.
        """
        scalar = np.ndim(values) == 0
        if values is None or isinstance(values, (str, bytes, bool, np.bool_)):
            raise ParameterError(f"cdf_at needs numbers in the domain's units, got {values!r}")
        try:
            v = np.atleast_1d(np.asarray(values, dtype=float))
        except (TypeError, ValueError):
            raise ParameterError("cdf_at needs numbers (or a flat list of numbers) in the domain's units") from None
        if v.ndim != 1 or not np.all(np.isfinite(v)):
            raise ParameterError("cdf_at needs finite values in the domain's units")
        below_all, above_all, full_bin, part_bin, frac = self._locate(v)
        total = self._total_value()
        if total <= 0:
            raise ParameterError("the estimated total is not positive; the CDF is undefined at this budget")
        sums = self._prefix_sums
        point = (sums[full_bin + 1] + frac * (sums[part_bin + 1] - sums[full_bin + 1])) / total
        point = np.where(below_all, 0.0, np.where(above_all, 1.0, point))
        interpolated = bool(np.any((frac > 0) & ~below_all & ~above_all))

        def interval(alpha, simultaneous=False):
            self._require_error_bars()
            k = self.factor(check_alpha(alpha) / (v.size if simultaneous else 1))
            lower_full, _ = self._fraction_bounds(np.maximum(full_bin, 0), k)
            _, upper_part = self._fraction_bounds(np.maximum(part_bin, 0), k)
            lower = np.where(full_bin < 0, 0.0, lower_full)
            upper = np.where(part_bin < 0, 0.0, upper_part)
            lower = np.where(below_all, 0.0, np.where(above_all, 1.0, lower))
            upper = np.where(below_all, 0.0, np.where(above_all, 1.0, upper))
            return np.minimum(lower, point), np.maximum(upper, point)

        return CDFAnswer(point[0] if scalar else point, interval, scalar=scalar, interpolated=interpolated)

    def cdf_band(self, alpha: float = 0.05):
        """(lower, upper) bounds on F_j at the right edge of every bin j, each one-sided at
        alpha/2 (pointwise), by Fieller's construction (see :meth:`cdf_at`); no delta method."""
        self._require_error_bars()
        if self._total_value() <= 0:
            raise ParameterError("the estimated total is not positive; the CDF is undefined at this budget")
        return self._fraction_bounds(np.arange(self.n), self.factor(alpha))

    def _locate(self, v: np.ndarray):
        """For values v: (below the domain, at/above its top, last bin wholly <= v (-1: none),
        bin holding v, fraction of that bin's width below v for interpolation)."""
        dom = self.domain
        if dom.kind == "integers":
            whole = np.floor(v) - dom.lo  # bins 0..whole hold only values <= v
            below_all = whole < 0
            above_all = whole >= self.n - 1
            full = np.clip(whole, -1, self.n - 1).astype(np.int64)
            return below_all, above_all, full, full, np.zeros(v.size)
        edges = dom.edges
        below_all = v < edges[0]
        above_all = v >= edges[-1]
        part = np.clip(np.searchsorted(edges, v, side="right") - 1, 0, self.n - 1)
        frac = np.clip((v - edges[part]) / (edges[part + 1] - edges[part]), 0.0, 1.0)
        return below_all, above_all, part - 1, part, frac

    def _quantile_point_bins(self, q: np.ndarray, consistent: bool, loss) -> tuple[np.ndarray, np.ndarray]:
        """(bin, cumulative fractions used) of the point estimates: the first bin whose
        cumulative fraction reaches q, read from the consistent CDF (default) or from the
        running maximum of the unconstrained CDF."""
        if consistent:
            counts = self.consistent_cumulative(loss).astype(float)
            if counts[-1] <= 0:  # the estimated total rounds to 0 records
                raise ParameterError("the estimated total rounds to 0; quantiles are undefined at this budget")
            fractions = counts / counts[-1]
        else:
            fractions = self.cdf().value
        running_max = np.maximum.accumulate(fractions)
        j = np.minimum(np.searchsorted(running_max, q - 1e-12, side="left"), self.n - 1)
        return j, fractions

    def _read_quantiles(self, cdf_values: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Domain values of the first crossing of q by ``cdf_values`` (interpolated linearly
        inside the bin on interval domains; the bin's integer on integer domains)."""
        running_max = np.maximum.accumulate(cdf_values)
        j = np.minimum(np.searchsorted(running_max, q - 1e-12, side="left"), self.n - 1)
        return self._bin_point(j, cdf_values, q)

    def _bin_point(self, j: np.ndarray, fractions: np.ndarray, q: np.ndarray) -> np.ndarray:
        if self.domain.kind == "integers":
            return self.domain.lo + j.astype(float)
        edges = self.domain.edges
        prev = np.where(j > 0, fractions[np.maximum(j - 1, 0)], 0.0)
        step = fractions[j] - prev
        frac = np.where(step > 0, np.clip((q - prev) / np.where(step > 0, step, 1.0), 0.0, 1.0), 1.0)
        return edges[j] + frac * (edges[j + 1] - edges[j])

    def concentrated(self, j) -> np.ndarray:
        """Whether the release shows the mass of bins ``j`` concentrated (module doc): the
        excess e_j = x_j - (x_{j-1} + x_{j+1}) / 2 over a locally linear spread (x_j - x_{j+1}
        at the first bin, x_j - x_{j-1} at the last), less k times its exact standard
        deviation, is above :data:`CONCENTRATION_SHARE` of x_j.  Integer domains: False (a
        bin is one value); a one-bin domain: True (nothing shows an even spread)."""
        j = np.atleast_1d(np.asarray(j, dtype=np.int64))
        if self.domain.kind == "integers":
            return np.zeros(j.size, dtype=bool)
        if self.n == 1:
            return np.ones(j.size, dtype=bool)
        x = self.estimate
        left = np.where(j > 0, x[np.maximum(j - 1, 0)], np.nan)
        right = np.where(j < self.n - 1, x[np.minimum(j + 1, self.n - 1)], np.nan)
        excess = x[j] - np.nanmean(np.stack([left, right]), axis=0)
        margin = self.factor(CONCENTRATION_ALPHA) * self._excess_sd(j) if self.exact_error_bars else 0.0
        return (x[j] > 0) & (excess - margin > CONCENTRATION_SHARE * x[j])

    def _excess_sd(self, j: np.ndarray) -> np.ndarray:
        """Exact standard deviation of the excess e_j of :meth:`concentrated`: w^T Sigma w over
        the window of (at most) three bins around j, the window's covariances from the
        variances of its contiguous ranges (0 where a loaded model answers single bins only)."""
        width = min(3, self.n)
        start = np.clip(j - 1, 0, self.n - width)
        neighbours = np.where((j == 0) | (j == self.n - 1), 1.0, 2.0)
        offsets = start[:, None] + np.arange(width)[None, :] - j[:, None]  # -1, 0, +1 around j (or +-2)
        weights = np.where(offsets == 0, 1.0, np.where(np.abs(offsets) == 1, -1.0 / neighbours[:, None], 0.0))
        try:
            ranges = {
                (a, b): np.asarray(self.error_model.range_variance(start + a, start + b), dtype=float)
                for a in range(width)
                for b in range(a, width)
            }
        except ParameterError:
            return np.zeros(j.size)

        def part(a: int, b: int):  # variance of the window's bins a..b (0 when empty)
            return ranges[(a, b)] if a <= b else 0.0

        variance = np.zeros(j.size)
        for a in range(width):
            for b in range(a, width):
                # Var x_a (a == b), else 2 Cov(x_a, x_b): inclusion-exclusion over contiguous ranges
                twice_cov = part(a, b) - part(a + 1, b) - part(a, b - 1) + part(a + 1, b - 1)
                variance += weights[:, a] * weights[:, b] * twice_cov
        return np.sqrt(np.nan_to_num(np.maximum(variance, 0.0)))

    def _placements(self, j: np.ndarray) -> np.ndarray:
        """The placement rule of each point bin (module doc): "exact", "interpolated" or
        "concentrated"."""
        if self.domain.kind == "integers":
            return np.full(j.size, "exact")
        return np.where(self.concentrated(j), "concentrated", "interpolated")

    def quantile_bins(self, q, alpha: float = 0.05, *, simultaneous: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Bin indices (first, last) of the confidence interval of quantile(s) q.

        The true quantile bin is j* = min{j : C_j >= q N}.  D_j = C_j - q N is a linear query
        even when N is estimated, with an exact variance.  first = the first j whose upper
        bound D^_j + k sd_j is >= 0; last = 1 + the last j whose lower bound D^_j - k sd_j is
        < 0.  The interval misses j* only if the upper bound fails at j* or the lower bound
        at j* - 1, so with one-sided levels alpha / 2 it covers with probability >= 1 - alpha
        whatever the data look like inside the bins (``simultaneous``: Bonferroni over the
        levels, all at once with probability >= 1 - alpha).
        """
        self._require_error_bars()
        q_arr = self._check_levels(q)
        k = self.factor(check_alpha(alpha) / (q_arr.size if simultaneous else 1))
        total = self._total_value()
        targets = []
        for level in q_arr:
            target = level * total
            if self.public_total is not None and abs(target - round(target)) < 1e-9 * max(total, 1.0):
                target = float(round(target))  # q N is an exact count: no rounding residue
            targets.append(target)
        var_prefix, var_rest, var_total = self._prefix_variance_parts
        # Blocks that cannot cross are skipped; the bins are decided exactly (dprange.answers.interval_search).
        return crossing_bins(
            self._prefix_sums[1:], var_prefix, var_rest, var_total, self.public_total is not None, targets, q_arr, k
        )

    def _check_levels(self, q) -> np.ndarray:
        q_arr = quantile_levels(q)
        if q_arr.ndim != 1 or np.any(~np.isfinite(q_arr)) or np.any((q_arr < 0) | (q_arr > 1)):
            raise ParameterError("quantile levels must lie in [0, 1]")
        return q_arr

    def quantile(self, q, consistent: bool = True, loss="l2") -> QuantileAnswer:
        """Quantile(s) q in [0, 1] in domain units: the first bin whose cumulative fraction
        reaches q.

        The point estimate is read from the consistent CDF (``consistent=True``, default;
        :meth:`consistent_cumulative`), which removes the downward bias of reading the first
        crossing of a noisy CDF (``consistent=False``).  Inside its bin it follows the rule of
        the module doc, recorded per level in ``placement``: the bin's integer on integer
        domains ("exact"); on interval domains a linear interpolation, as if the records
        spread evenly in the bin ("interpolated"), or, where the release shows the bin's mass
        concentrated, the bin's lower edge ("concentrated": report the bin, ``bin_lower`` ..
        ``bin_upper``).  ``confidence_interval(alpha, simultaneous=False)`` gives bin edges
        (integers on integer domains) from :meth:`quantile_bins`, valid for any data inside
        the bins, and always contains the point estimate.
        """
        q_arr = self._check_levels(q)
        scalar = np.ndim(q) == 0
        if self._total_value() <= 0:
            raise ParameterError("the estimated total is not positive; quantiles are undefined at this budget")
        point_bins, fractions = self._quantile_point_bins(q_arr, consistent, loss)
        placement = self._placements(point_bins)
        values = self._bin_point(point_bins, fractions, q_arr)
        if self.domain.kind != "integers":
            edges = self.domain.edges
            values = np.where(placement == "concentrated", edges[point_bins], values)
            bin_lower, bin_upper = edges[point_bins], edges[point_bins + 1]
        else:
            bin_lower = bin_upper = values

        def interval(alpha, simultaneous=False):
            first, last = self.quantile_bins(q_arr, alpha, simultaneous=simultaneous)
            first, last = np.minimum(first, point_bins), np.maximum(last, point_bins)
            if self.domain.kind == "integers":
                return self.domain.lo + first.astype(float), self.domain.lo + last.astype(float)
            edges = self.domain.edges
            return edges[first], edges[last + 1]

        return QuantileAnswer(
            values[0] if scalar else values,
            interval,
            scalar=scalar,
            interpolated=bool(np.any(placement == "interpolated")),
            bins=point_bins,
            placement=placement,
            bin_edges=(bin_lower, bin_upper),
        )

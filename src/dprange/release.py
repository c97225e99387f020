"""Release: a private estimate of a histogram and its answers, each with an exact error bar.

Every answer is a linear function of the estimate, so its variance is exact: mechanisms give
the release an *error model* with ``range_variance(lo, hi)``, the exact variance of the
estimated count of bins lo..hi, computed implicitly in O(depth) per query (never an n x n
covariance).  Answers are :class:`Answer` objects: the value, ``stderr``, and
``confidence_interval(alpha)``.

Confidence intervals are value +- k * stderr with exact standard errors, where k bounds each
one-sided tail by alpha / 2 (:func:`one_sided_factor`).  For Gaussian noise the error is
exactly normal and k = z_{1-alpha/2}.  For continuous Laplace noise the error is a weighted
sum of independent Laplace draws, close to normal when many draws contribute and exactly
Laplace when one dominates; k is the larger of the two factors.  For discrete Laplace noise
(the default) the error lives on a lattice and the continuous factor is not enough (one
draw at epsilon = 1: 2.118 sd misses 7.3% of the time, not 5%); k comes from a coupling
with continuous Laplace that accounts for the lattice (:func:`_discrete_laplace_factor`),
the same factor for ranges, the CDF and quantiles.

Quantiles and the CDF at a value never assume how records spread inside a bin.  With
cumulative counts C_j, total N and level q, the true quantile bin is j* = min{j : C_j >= qN},
and D_j = C_j - qN is a linear query (also when N is estimated), so its estimate has an exact
variance.  The interval runs from the first bin whose upper bound D^_j + k sd_j reaches 0 to
one past the last bin whose lower bound D^_j - k sd_j is below 0; it misses j* only if a
one-sided bound fails at j* or at j* - 1, so it holds with probability >= 1 - alpha on any
data.  Its ends are bin edges (integers on integer domains).  ``simultaneous=True`` applies
Bonferroni over the levels.  The factor k bounds the one-sided tail by alpha/2 for every
linear answer: normal for Gaussian noise; for continuous Laplace the larger of the normal and
single-Laplace factors (checked numerically for mixtures); for discrete Laplace a coupling
with continuous Laplace that accounts for the integer lattice
(:func:`_discrete_laplace_factor`; the plain factor misses up to 4.2% on one side where 2.5%
is allowed).  The CDF at a value (:meth:`Release.cdf_at`) uses Fieller's construction on the
linear query P_j - f N, with the bins wholly below the value and the bins reaching it.
Point estimates of quantiles read the consistent CDF (seed 001 section VI), which removes
the downward bias of the first crossing of a noisy CDF (mean rank error 0.39% vs 0.46% over
DPBench, Adult and synthetic data with H4, epsilon 0.1); on interval domains they
interpolate inside their bin, and say so (``interpolated``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property, lru_cache

import numpy as np
from scipy import special

from ._validation import check_alpha
from .domain import Domain
from .errors import DataError, ParameterError
from .inference.consistency import consistent_cdf
from .noise import resolve_rng


def _z(alpha: float, tails: str = "normal") -> float:
    """Half-width factor of a (1 - alpha) interval, in standard errors (see module doc)."""
    alpha = check_alpha(alpha)
    normal = float(special.ndtri(1.0 - alpha / 2.0))
    if tails == "laplace":
        return max(normal, float(np.log(1.0 / alpha) / np.sqrt(2.0)))
    return normal


@lru_cache(maxsize=256)
def _discrete_laplace_factor(alpha: float, scales: tuple) -> float:
    """One-sided factor for any linear combination of independent discrete Laplace draws.

    A discrete Laplace draw X with decay t = exp(-1/b) is floor(E1) - floor(E2) for
    exponentials E of rate 1/b, and the fractional parts are independent of the floors, so
    Y = X + W is continuous Laplace with W independent of X (|W| < 1, Var W = Var Y - Var X).
    For S_X = sum a_i X_i (standard deviation s), {S_X > c} and {S_W > -d} imply
    {S_Y > c - d}; by independence P(S_X > c) <= P(S_Y > c - d) / P(S_W > -d).  With
    rho_Y^2 and rho_W^2 the largest ratios Var Y / Var X and Var W / Var X over the levels,
    d = m rho_W s gives P(S_W > -d) >= p = max(1/2, m^2 / (1 + m^2)) (S_W is symmetric and
    continuous; Cantelli), and c = d + k_laplace(alpha p) rho_Y s gives P(S_X > c) <= alpha / 2.
    The factor c / s is minimised over m.  It tends to the continuous factor for large
    scales and stays honest for small ones, where the lattice makes the plain factor fail
    (one draw with sd < 1: P(X <= -1) = t / (1 + t), e.g. 0.048 > 0.025 at t = 0.05).
    """
    positive = np.asarray(scales, dtype=float)
    positive = positive[np.isfinite(positive) & (positive > 0)]
    if positive.size == 0:
        return _z(alpha, "laplace")
    t = np.exp(-1.0 / positive)
    var_x = 2.0 * t / (1.0 - t) ** 2
    var_y = 2.0 * positive**2
    ratio = np.where(var_x > 0, var_y / np.where(var_x > 0, var_x, 1.0), np.inf)
    if not np.all(np.isfinite(ratio)):  # noise so small it never moves a count (t underflows)
        return 0.0
    rho_y = float(np.sqrt(ratio.max()))
    rho_w = float(np.sqrt(max(ratio.max() - 1.0, 0.0)))
    m = np.concatenate([[0.0], np.geomspace(0.05, 50.0, 400)])
    shrunk = alpha * np.maximum(0.5, m**2 / (1.0 + m**2))
    k_cont = np.maximum(special.ndtri(1.0 - shrunk / 2.0), np.log(1.0 / shrunk) / np.sqrt(2.0))
    return float(np.min(k_cont * rho_y + m * rho_w))


def one_sided_factor(alpha: float, noise: str | None, scales=None) -> float:
    """k such that every linear answer's error exceeds k standard errors (in either given
    direction) with probability at most alpha / 2.

    Gaussian noise: the normal quantile (exact).  Continuous Laplace: the larger of the
    normal and the Laplace factor (a weighted sum of independent Laplace draws has, at
    this point, a tail between the normal and the single-draw one: checked numerically).
    Discrete Laplace with known level scales: :func:`_discrete_laplace_factor`.
    """
    if noise == "gaussian":
        return _z(alpha, "normal")
    if noise == "discrete_laplace" and scales is not None:
        _z(alpha)  # validates alpha
        return _discrete_laplace_factor(float(alpha), tuple(float(v) for v in scales))
    return _z(alpha, "laplace")


#: What a release with non-linear inference says about its error bars.
NONLINEAR_ERROR_BARS = (
    "not available in closed form for non-linear inference (NNLS/L1); "
    "use Release.bootstrap for parametric-bootstrap standard errors"
)
#: What its deciles say about their intervals.
NONLINEAR_INTERVALS = "non-linear inference (NNLS/L1) has no closed-form quantile intervals"


class Answer:
    """Values (scalar or array) with exact standard errors, computed on first use."""

    def __init__(
        self,
        value,
        variance: Callable[[], np.ndarray] | np.ndarray | float,
        *,
        scalar: bool = False,
        tails: str = "normal",
        factor: Callable[[float], float] | None = None,
    ):
        self._value = np.asarray(value, dtype=float)
        self._variance = variance
        self._scalar = scalar
        self.tails = tails
        #: alpha -> k with P(error > k stderr) <= alpha / 2 on each side (the release's noise).
        self._factor = factor

    @property
    def value(self):
        return float(self._value) if self._scalar else self._value

    @cached_property
    def variance(self):
        v = self._variance() if callable(self._variance) else self._variance
        v = np.maximum(np.asarray(v, dtype=float), 0.0)
        return float(v) if self._scalar else v

    @property
    def stderr(self):
        return np.sqrt(self.variance)

    def confidence_interval(self, alpha: float = 0.05):
        """(lower, upper) at level 1 - alpha (see the module doc for the factor used)."""
        k = self._factor(alpha) if self._factor is not None else _z(alpha, self.tails)
        half = k * np.asarray(self.stderr)
        lower, upper = self._value - half, self._value + half
        if self._scalar:
            return float(lower), float(upper)
        return lower, upper

    def __array__(self, dtype=None, copy=None):
        return self._value if dtype is None else self._value.astype(dtype)

    def __float__(self) -> float:
        return float(self._value)

    def __len__(self) -> int:
        return int(self._value.size)

    def __repr__(self) -> str:
        if self._scalar:
            return f"Answer({self.value:.6g} ± {self.stderr:.3g})"
        return f"Answer(values={np.array2string(self._value, threshold=6)}, stderr=...)"


class QuantileAnswer(Answer):
    """Quantile values with confidence intervals whose ends are bin edges.

    ``interpolated``: True when the values interpolate inside their bins (interval domains),
    i.e. assume records spread evenly inside a bin; the intervals never assume it.
    ``bins``: the bin index of each value.  ``confidence_interval(alpha, simultaneous=False)``:
    pointwise intervals, or with ``simultaneous=True`` intervals that hold for all the
    levels at once with probability >= 1 - alpha (Bonferroni).
    """

    def __init__(self, value, interval_fn, *, scalar: bool, interpolated: bool = False, bins=None):
        super().__init__(value, lambda: np.full(np.shape(value), np.nan), scalar=scalar)
        self._interval_fn = interval_fn
        self.interpolated = bool(interpolated)
        self.bins = None if bins is None else (int(bins[0]) if scalar else np.asarray(bins))

    @property
    def stderr(self):
        raise ParameterError("quantiles have confidence intervals, not standard errors")

    def confidence_interval(self, alpha: float = 0.05, simultaneous: bool = False):
        lower, upper = self._interval_fn(alpha, simultaneous)
        if self._scalar:
            return float(lower[0]), float(upper[0])
        return lower, upper

    def __repr__(self) -> str:
        return f"{type(self).__name__}({np.array2string(np.asarray(self._value), threshold=6)})"


class CDFAnswer(QuantileAnswer):
    """CDF values at points of the domain, with confidence intervals (see Release.cdf_at)."""

    @property
    def stderr(self):
        raise ParameterError(
            "CDF values at points have confidence intervals, not standard errors; "
            "Release.cdf() gives standard errors per bin"
        )


def check_bin_ranges(lo, hi, n: int):
    """(lo, hi) as broadcast int64 arrays of inclusive bin indices 0 <= lo <= hi < n, or
    ParameterError: indices must be integers (ints or integral floats), never booleans."""
    arrays = []
    for name, value in (("lo", lo), ("hi", hi)):
        if value is None or isinstance(value, (str, bytes, bool, np.bool_)):
            raise ParameterError(f"range bound {name} must be an integer bin index, got {value!r}")
        try:
            arr = np.asarray(value)
            if arr.dtype.kind == "O" and arr.ndim > 0 and any(np.ndim(v) for v in arr.ravel()):
                raise ValueError("nested")
        except (ValueError, TypeError):
            raise ParameterError(f"range bound {name} must be an integer bin index or an array of them") from None
        if arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)) or np.any(np.mod(arr, 1) != 0):
                raise ParameterError("range bounds are bin indices and must be integers")
            if arr.size and np.max(np.abs(arr)) > 2.0**62:
                raise ParameterError(f"ranges need 0 <= lo <= hi <= {n - 1} (inclusive bin indices)")
        elif arr.dtype.kind == "O" and all(isinstance(v, int) and not isinstance(v, bool) for v in arr.ravel()):
            if arr.size and max(abs(v) for v in arr.ravel()) > 2**62:
                raise ParameterError(f"ranges need 0 <= lo <= hi <= {n - 1} (inclusive bin indices)")
        elif arr.dtype.kind not in "iu":
            raise ParameterError(f"range bound {name} must be integer bin indices, got dtype {arr.dtype}")
        if arr.dtype.kind == "u" and arr.size and arr.max() > 2**62:
            raise ParameterError(f"ranges need 0 <= lo <= hi <= {n - 1} (inclusive bin indices)")
        arrays.append(arr.astype(np.int64))
    try:
        lo, hi = np.broadcast_arrays(*arrays)
    except ValueError:
        raise ParameterError(
            f"lo and hi have shapes {arrays[0].shape} and {arrays[1].shape} that do not broadcast"
        ) from None
    if lo.size and (lo.min() < 0 or hi.max() >= n or np.any(lo > hi)):
        raise ParameterError(f"ranges need 0 <= lo <= hi <= {n - 1} (inclusive bin indices)")
    return lo, hi


def quantile_levels(q) -> np.ndarray:
    """Quantile levels as a 1-D float array, or ParameterError (booleans, strings, nested
    sequences are not levels; the range [0, 1] is checked by the caller)."""
    if q is None or isinstance(q, (str, bytes, bool, np.bool_, dict)):
        raise ParameterError(f"quantile levels must be numbers in [0, 1], got {q!r}")
    try:
        arr = np.asarray(q)
        if arr.dtype.kind not in "iuf":
            raise TypeError
    except (ValueError, TypeError):
        raise ParameterError("quantile levels must be numbers in [0, 1] (a number or a flat list of numbers)") from None
    return np.atleast_1d(arr.astype(float))


class Release:
    """A private histogram estimate with exact error bars (see module doc)."""

    def __init__(
        self,
        estimate,
        error_model,
        *,
        domain: Domain | None = None,
        mechanism: str,
        parameters: dict | None = None,
        epsilon: float,
        delta: float = 0.0,
        neighbours: str = "add_remove",
        total: float | None = None,
        inference: str = "gls",
        noise: str | None = None,
        resample=None,
        seeded: bool = False,
        noise_scales=None,
    ):
        self.estimate = np.asarray(estimate, dtype=float)
        self.n = self.estimate.size
        self.error_model = error_model
        self.domain = domain if domain is not None else Domain.integers(0, self.n - 1)
        if self.domain.size != self.n:
            raise ParameterError(f"domain has {self.domain.size} bins but the estimate has {self.n}")
        self.mechanism = mechanism
        self.parameters = dict(parameters or {})
        self.epsilon = epsilon
        self.delta = delta
        self.neighbours = neighbours
        self.public_total = None if total is None else float(total)
        self.inference = inference
        self.noise = noise
        self._resample = resample
        #: True when the noise came from a seeded generator (predictable: not for publication).
        self.seeded = bool(seeded)
        #: Noise scales of the measured levels (Laplace-type noise), for honest tail factors.
        self.noise_scales = None if noise_scales is None else [float(v) for v in noise_scales]

    @property
    def _tails(self) -> str:
        """Laplace-aware intervals unless the noise is Gaussian (see module doc)."""
        return "normal" if self.noise == "gaussian" else "laplace"

    @property
    def exact_error_bars(self) -> bool:
        """True for least-squares releases (exact standard errors); False for NNLS / L1."""
        return self.inference == "gls"

    def bootstrap(self, lo, hi, *, reps: int = 200, rng=None) -> np.ndarray:
        """Parametric-bootstrap standard errors of the ranges lo..hi (inclusive bin indices).

        Each replicate measures the released estimate again with the mechanism's own noise and
        reruns its inference (post-processing: public parameters and the release only).  This
        is how NNLS / L1 releases get error bars; for GLS releases it reproduces the exact
        standard errors up to Monte-Carlo error.  O(reps x inference cost).
        """
        if self._resample is None:
            raise ParameterError("this release has no mechanism attached to resample from")
        if isinstance(reps, bool) or not isinstance(reps, (int, np.integer)) or not 2 <= reps <= 10**6:
            raise ParameterError(f"reps must be an integer from 2 to 10^6, got {reps!r}")
        lo, hi = self._check_ranges(lo, hi)
        source = resolve_rng(rng)
        answers = np.empty((reps,) + lo.shape)
        for r in range(reps):
            sums = np.concatenate([[0.0], np.cumsum(self._resample(source))])
            answers[r] = sums[hi + 1] - sums[lo]
        return answers.std(axis=0, ddof=1)

    # ----------------------------------------------------------------- basic answers
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
        idx = np.arange(self.n)
        return Answer(
            self.estimate,
            lambda: self.error_model.range_variance(idx, idx),
            tails=self._tails,
            factor=self._one_sided_factor,
        )

    def total(self) -> Answer:
        """The total count: public (variance 0) in the replace model, else estimated."""
        if self.public_total is not None:
            return Answer(self.public_total, 0.0, scalar=True, tails=self._tails, factor=self._one_sided_factor)
        return self.range(0, self.n - 1)

    # ----------------------------------------------------------------- CDF and quantiles
    @cached_property
    def _prefix_variance_parts(self):
        """(Var P_j, Var R_j, Var T) for every j: P_j = x_0..x_j, R_j = x_{j+1}..x_{n-1}, T the
        total (0 when public).  Every statistic P_j - f T is a linear query whose exact
        variance follows from these three (see :meth:`_linear_sd`)."""
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
        vp, vr = var_prefix[j], var_rest[j]
        if self.public_total is not None:
            return np.sqrt(np.maximum(vp, 0.0)) + 0.0 * np.asarray(f)
        cov = (var_total - vp - vr) / 2.0
        var = (1 - f) ** 2 * vp + f**2 * vr - 2 * f * (1 - f) * cov
        return np.sqrt(np.maximum(var, 0.0))

    def _total_value(self) -> float:
        return self.public_total if self.public_total is not None else float(self._prefix_sums[-1])

    def _require_error_bars(self):
        if not self.exact_error_bars:
            raise ParameterError(
                f"{self.inference} inference has no closed-form intervals; use least-squares "
                "inference (inference='gls', --inference gls) or Release.bootstrap for error bars"
            )

    def _one_sided_factor(self, alpha: float) -> float:
        """k with P(error > k sd) <= alpha / 2 for every linear answer (see module doc)."""
        return one_sided_factor(alpha, self.noise, self.noise_scales)

    def consistent_cumulative(self, loss="l2") -> np.ndarray:
        """The closest valid cumulative counts: integers, non-decreasing, ending at the total.

        Post-processing of the estimate (seed 001 section VI): see
        :func:`dprange.inference.consistency.consistent_cdf`.  The total is the public one
        (replace model) or the estimated total rounded to an integer.
        """
        total = self.public_total if self.public_total is not None else float(self.total().value)
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
        n_total = float(self.total().value)
        if n_total <= 0:
            raise ParameterError("the estimated total is not positive; the CDF is undefined at this budget")
        values = prefix / n_total

        def variance():
            return self._linear_sd(np.arange(self.n), values) ** 2 / n_total**2

        return Answer(values, variance, tails=self._tails, factor=self._one_sided_factor)

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
        (``interpolated`` says so); the confidence interval does not: it is
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
            k = self._one_sided_factor(check_alpha(alpha) / (v.size if simultaneous else 1))
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
        return self._fraction_bounds(np.arange(self.n), self._one_sided_factor(alpha))

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
        k = self._one_sided_factor(check_alpha(alpha) / (q_arr.size if simultaneous else 1))
        total = self._total_value()
        prefix = self._prefix_sums[1:]
        idx = np.arange(self.n)
        first = np.empty(q_arr.size, dtype=np.int64)
        last = np.empty(q_arr.size, dtype=np.int64)
        for i, level in enumerate(q_arr):
            target = level * total
            if self.public_total is not None and abs(target - round(target)) < 1e-9 * max(total, 1.0):
                target = float(round(target))  # q N is an exact count: no rounding residue
            d_hat = prefix - target
            half = k * self._linear_sd(idx, level)
            reach = np.nonzero(d_hat + half >= 0)[0]
            short = np.nonzero(d_hat - half < 0)[0]
            first[i] = reach[0] if reach.size else self.n - 1
            last[i] = min(short[-1] + 1, self.n - 1) if short.size else 0
        return first, last

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
        crossing of a noisy CDF (``consistent=False``).  On interval domains it interpolates
        linearly inside its bin, assuming records spread evenly there (``interpolated`` is
        True); on integer domains it is the bin's integer.  ``confidence_interval(alpha,
        simultaneous=False)`` gives bin edges (integers on integer domains) from
        :meth:`quantile_bins`, valid for any data inside the bins, and always contains the
        point estimate.
        """
        q_arr = self._check_levels(q)
        scalar = np.ndim(q) == 0
        if self._total_value() <= 0:
            raise ParameterError("the estimated total is not positive; quantiles are undefined at this budget")
        point_bins, fractions = self._quantile_point_bins(q_arr, consistent, loss)
        values = self._bin_point(point_bins, fractions, q_arr)

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
            interpolated=self.domain.kind != "integers",
            bins=point_bins,
        )

    # ----------------------------------------------------------------- serialisation
    def to_dict(self, *, alpha: float = 0.05) -> dict:
        """Everything needed to use and audit the release, as JSON-friendly types (NaN and
        inf as None), including the error model's parameters (``error_model``), so that
        :meth:`from_dict` gives back a release with the same answers and standard errors.
        Builds Python lists: for large releases use :meth:`to_json` with a path or
        :meth:`to_npz`, which stream (:mod:`dprange.serialisation`)."""
        from .serialisation import histogram_stderr, metadata  # noqa: PLC0415

        out = metadata(self, alpha)
        out["histogram"] = {
            "value": self.estimate.tolist(),
            "stderr": histogram_stderr(self).tolist() if self.exact_error_bars else None,
        }
        return out

    def _metadata(self, alpha: float) -> dict:
        """The dictionary of :meth:`to_dict` without the histogram arrays."""
        from .serialisation import FORMAT_VERSION, UNSAVED_ERROR_BARS, error_model_dict  # noqa: PLC0415

        total = self.total()
        out = {
            "dprange_release": FORMAT_VERSION,
            "mechanism": self.mechanism,
            "parameters": self.parameters,
            "privacy": {
                "epsilon": self.epsilon,
                "delta": self.delta,
                "neighbours": self.neighbours,
                "noise": self.noise,
                "seeded": self.seeded,
            },
            "noise_scales": self.noise_scales,
            "inference": self.inference,
            "domain": self.domain.to_dict(),
            "total": {
                "value": float(total.value),
                "stderr": float(total.stderr) if self.exact_error_bars else None,
                "public": self.public_total is not None,
            },
        }
        out["error_model"] = error_model_dict(self)
        if not self.exact_error_bars:
            out["error_bars"] = NONLINEAR_ERROR_BARS
        elif out["error_model"] is None:
            out["error_bars"] = UNSAVED_ERROR_BARS
        out["deciles"] = self._deciles(alpha)
        return out

    def _deciles(self, alpha: float) -> dict | None:
        """The nine deciles with their intervals (None where the CDF is undefined, e.g. a
        non-positive estimated total; null intervals for non-linear inference)."""
        deciles = np.linspace(0.1, 0.9, 9)
        try:
            q = self.quantile(deciles)
        except ParameterError:
            return None
        out = {"q": deciles.round(2).tolist(), "value": np.asarray(q.value).tolist(), "interpolated": q.interpolated}
        if not self.exact_error_bars:
            out.update({"lower": None, "upper": None, "alpha": alpha, "intervals": NONLINEAR_INTERVALS})
            return out
        try:
            lower, upper = q.confidence_interval(alpha, simultaneous=True)
        except ParameterError:
            return None
        out.update(
            {
                "lower": lower.tolist(),
                "upper": upper.tolist(),
                "alpha": alpha,
                "simultaneous": True,
                "interval": (
                    "bin edges; all nine hold at once with probability >= 1 - alpha, whatever the data inside a bin"
                ),
            }
        )
        return out

    def to_json(self, path=None, *, alpha: float = 0.05):
        """The release as JSON (the dictionary of :meth:`to_dict`).

        Without ``path``, returns the text.  With ``path``, streams it to the file
        atomically (a temporary file in the same folder, then ``os.replace``: a failure
        never leaves a partial file) and returns the path.  Arrays are written compactly,
        one line each, standard errors computed in chunks."""
        from .serialisation import json_text, write_atomically, write_json  # noqa: PLC0415

        if path is None:
            return json_text(self, alpha)
        check_alpha(alpha)
        return write_atomically(path, lambda fh: write_json(self, fh, alpha))

    @classmethod
    def from_dict(cls, data: dict) -> Release:
        """The release described by :meth:`to_dict`: the same answers and standard errors
        (the error model is rebuilt from its saved parameters; :mod:`dprange.serialisation`).
        It has no mechanism, so :meth:`bootstrap` raises ParameterError.  DataError for a
        corrupt dictionary or one of an unknown format version."""
        from .serialisation import release_from_dict  # noqa: PLC0415

        return release_from_dict(data)

    @classmethod
    def from_json(cls, text_or_path) -> Release:
        """The release saved by :meth:`to_json`, from its text (a string starting with '{')
        or from a file path (see :meth:`from_dict`)."""
        from .serialisation import load_release, release_from_json_text  # noqa: PLC0415

        if isinstance(text_or_path, (bytes, bytearray)):
            try:
                text_or_path = bytes(text_or_path).decode("utf-8")
            except UnicodeDecodeError:
                raise DataError("the release bytes are not UTF-8 JSON text") from None
        if isinstance(text_or_path, str) and text_or_path.lstrip().startswith("{"):
            return release_from_json_text(text_or_path)
        return load_release(text_or_path)

    def to_npz(self, path, *, alpha: float = 0.05) -> str:
        """Save the release as a NumPy .npz archive (estimate, standard errors, JSON metadata),
        atomically; read it back with :func:`dprange.load_release`.  Returns the path."""
        from .serialisation import write_atomically, write_npz  # noqa: PLC0415

        check_alpha(alpha)
        return write_atomically(path, lambda fh: write_npz(self, fh, alpha), binary=True)

    def __repr__(self) -> str:
        return (
            f"Release(mechanism={self.mechanism!r}, bins={self.n}, epsilon={self.epsilon}, "
            f"delta={self.delta}, neighbours={self.neighbours!r})"
        )

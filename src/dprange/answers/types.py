"""Answers with exact error bars: values, standard errors and honest confidence intervals.

Every answer of a :class:`~dprange.Release` is a linear function of its estimate, so its
variance is exact; an :class:`Answer` holds the value, ``stderr`` and
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
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property, lru_cache

import numpy as np

from dprange._lazy import lazy_module

from .._validation import check_alpha
from ..errors import ParameterError

special = lazy_module("scipy.special")


def _z(alpha: float, tails: str = "normal") -> float:
    """Half-width factor of a (1 - alpha) interval, in standard errors (see module doc)."""
    alpha = check_alpha(alpha)
    normal = float(special.ndtri(1.0 - alpha / 2.0))
    if tails == "laplace":
        return max(normal, float(np.log(1.0 / alpha) / np.sqrt(2.0)))
    return normal


#: More noise draws than any answer combines (a release holds far fewer measured values).
MAX_DRAWS = 2.0**64


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
    Where even :data:`MAX_DRAWS` draws are all 0 but with probability at most alpha / 2
    (P(X != 0) = 2 t / (1 + t) each: the finest noise, :data:`dprange.privacy.noise.MIN_SCALE`), the
    factor is 0: no answer moves.
    """
    positive = np.asarray(scales, dtype=float)
    positive = positive[np.isfinite(positive) & (positive > 0)]
    if positive.size == 0:
        return _z(alpha, "laplace")
    t = np.exp(-1.0 / positive)
    if MAX_DRAWS * float(np.max(2.0 * t / (1.0 + t))) <= alpha / 2.0:
        return 0.0  # so fine that no draw moves a count, but with probability <= alpha / 2 (union bound)
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

    ``interpolated``: True when some value interpolates inside its bin (interval domains),
    i.e. assumes records spread evenly inside a bin; the intervals never assume it.
    ``bins``: the bin index of each value.  ``placement``: per value, how it was placed in
    its bin ("exact", "interpolated" or "concentrated": :mod:`dprange.answers.cdf`; None
    where not recorded); ``bin_lower`` / ``bin_upper``: the edges of each value's bin, what
    the release knows at its resolution (a "concentrated" value is reported as that bin).
    ``confidence_interval(alpha, simultaneous=False)``: pointwise intervals, or with
    ``simultaneous=True`` intervals that hold for all the levels at once with probability
    >= 1 - alpha (Bonferroni).
    """

    def __init__(
        self,
        value,
        interval_fn,
        *,
        scalar: bool,
        interpolated: bool = False,
        bins=None,
        placement=None,
        bin_edges=None,
    ):
        super().__init__(value, lambda: np.full(np.shape(value), np.nan), scalar=scalar)
        self._interval_fn = interval_fn
        self.interpolated = bool(interpolated)
        self.bins = None if bins is None else (int(bins[0]) if scalar else np.asarray(bins))
        self.placement = None if placement is None else (str(placement[0]) if scalar else np.asarray(placement))
        lower, upper = (None, None) if bin_edges is None else bin_edges
        self.bin_lower = None if lower is None else (float(lower[0]) if scalar else np.asarray(lower, dtype=float))
        self.bin_upper = None if upper is None else (float(upper[0]) if scalar else np.asarray(upper, dtype=float))

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


#: Why a release without measurements (one loaded from a file) cannot be bootstrapped.
NO_MEASUREMENTS = (
    "bootstrap needs the mechanism's measurements, which a release loaded from a file (or built "
    "without them) does not have; bootstrap the original Release before saving it"
)

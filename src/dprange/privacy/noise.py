"""Noise kinds: each kind's exact variance and pmf as sampled, the discrete Gaussian's sigma by
zero-concentrated DP, and :class:`NoiseSpec`, the noise of one group of measurements (the
samplers themselves and the secure source are in :mod:`dprange.privacy.samplers`).

Every function that draws noise takes ``rng``:

* ``None`` (the default): a :class:`SecureRandom`, a ChaCha20 keystream keyed from the
  operating system's cryptographic source (``os.urandom``; see :mod:`dprange.privacy._keystream`).
  Use it for real releases.
* an ``int`` or :class:`numpy.random.SeedSequence`: a seeded ``numpy.random.Generator``, for
  tests and reproducible experiments only (a fixed seed makes the noise predictable).
* a ``numpy.random.Generator`` or a :class:`SecureRandom`: used as given.

The samplers draw only through ``rng.integers(low, high, size)`` (uniform integers with a
scalar bound), so the secure source and a seeded numpy generator run exactly the same code,
and the seeded path tests the secure one, with one exception: with the secure source, the
discrete Laplace (and the discrete Gaussian's Laplace proposals) of scale up to 2^14 is drawn
by an exact inverse CDF from one 64-bit word per draw (:mod:`dprange.privacy._laplace_table`), the
same distribution at a fraction of the cost; seeded generators keep the algorithm below, so
seeded results stay reproducible.

Noise kinds (``scale`` is the requested noise scale, usually sensitivity / epsilon):

* ``discrete_laplace`` (the default): P(k) proportional to exp(-|k| / b) on the integers,
  sampled exactly on integer arithmetic (Canonne, Kamath and Steinke, "The Discrete Gaussian
  for Differential Privacy", NeurIPS 2020, Algorithms 1 and 2) with b = t / s, the smallest
  convenient rational >= ``scale``.  Pure epsilon-DP for integer queries of L1 sensitivity
  Delta when scale = Delta / epsilon.
* ``gaussian``: the discrete Gaussian, P(k) proportional to exp(-k^2 / (2 sigma^2)), sampled
  exactly (same paper, Algorithm 3) with sigma^2 a rational >= ``scale``^2;
  :func:`gaussian_sigma` calibrates sigma by zero-concentrated DP.
* ``laplace_float``: continuous Laplace by floating-point inversion, for reproducing papers
  only.  It is open to Mironov's floating-point attack ("On Significance of the Least
  Significant Bits for Differential Privacy", CCS 2012) and is NOT differentially private as
  implemented; never a default.

Limits: every scale must be finite, > 0 and <= ``MAX_SCALE`` = 2^40 (a level needing more
noise than that has an epsilon too small to support); see docs/privacy.md, "## Samplers".
At the other end a :class:`NoiseSpec` never adds noise finer than ``MIN_SCALE`` of its kind:
a smaller requested scale (a huge epsilon) is raised to it (:func:`finest_scale`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .._validation import MAX_SCALE
from ..errors import ParameterError
from .samplers import (
    _gaussian_rational,
    check_kind,
    check_scale,
    effective_scale,
    sample_discrete_laplace,
    sample_gaussian,
    sample_laplace_float,
)

#: The finest noise of each kind a :class:`NoiseSpec` adds; a smaller requested scale (an
#: epsilon above about 1 / MIN_SCALE times the sensitivity) is raised to it.  Noise this fine
#: is 0 on all but a vanishing share of draws (discrete Laplace at 2^-7 and the discrete
#: Gaussian at 2^-4: P(k != 0) < 2 e^-128 < 2^-183; continuous Laplace at 2^-20: |noise| about
#: 10^-6), so a larger epsilon could change no answer, only break the arithmetic: finer noise
#: has a variance that underflows to 0 (discrete Laplace from a per-level epsilon of about 745
#: times the sensitivity), and least squares divided by it.  More noise than requested only
#: lowers the privacy loss; the release records the raised scale and its exact variance, so
#: the error bars stay those of the noise drawn.
MIN_SCALE = {"discrete_laplace": 2.0**-7, "gaussian": 2.0**-4, "laplace_float": 2.0**-20}


def finest_scale(kind: str, scale: float) -> float:
    """``scale``, or :data:`MIN_SCALE` of ``kind`` where it is smaller (see there)."""
    return max(float(scale), MIN_SCALE[kind])


_DIRECT_SUM_SIGMA = 64.0  # up to here the theta sums run over the integers; beyond, Poisson


def _discrete_gaussian_moments(sigma2: float) -> tuple[float, float]:
    """(Z, variance) of the discrete Gaussian: Z = sum_k exp(-k^2 / (2 sigma^2)).

    Direct summation over |k| <= 40 sigma + 2 (later terms are below 1e-300) for sigma <= 64;
    beyond, Poisson summation gives Z = sqrt(2 pi) sigma and variance sigma^2 up to a relative
    exp(-2 pi^2 sigma^2) < 1e-30000, far below double precision.
    """
    sigma = math.sqrt(sigma2)
    if sigma > _DIRECT_SUM_SIGMA:
        return math.sqrt(2.0 * math.pi) * sigma, sigma2
    k = np.arange(1, int(40 * sigma) + 3, dtype=float)
    weights = np.exp(-(k * k) / (2.0 * sigma2))
    z = 1.0 + 2.0 * math.fsum(weights)
    return z, 2.0 * math.fsum(k * k * weights) / z


def discrete_gaussian_variance(sigma2: float) -> float:
    """Variance of the discrete Gaussian with parameter sigma^2 (below sigma^2; equal to it up
    to a relative exp(-2 pi^2 sigma^2) from sigma of about 2 on)."""
    return _discrete_gaussian_moments(float(sigma2))[1]


def _gaussian_sigma2(scale: float) -> float:
    p, q, _ = _gaussian_rational(scale)
    return p / q


def pmf(kind: str, scale, k) -> np.ndarray:
    """Exact probabilities P(noise = k) of the sampler as implemented, for integer arrays ``k``.

    discrete_laplace: tanh(1 / 2b) exp(-|k| / b) = (1 - e^-1/b) / (1 + e^-1/b) e^-|k|/b with b
    the scale actually used; gaussian: exp(-k^2 / (2 sigma^2)) / Z with sigma^2 = p/q and Z
    the theta sum.  laplace_float is continuous and has no pmf.
    """
    kind = check_kind(kind)
    value = check_scale(kind, scale)
    k = np.asarray(k)
    if k.dtype.kind not in "iu" and not (k.dtype.kind == "f" and np.all(k == np.round(k))):
        raise ParameterError("pmf needs integer k")
    k = np.abs(k.astype(float))
    if kind == "discrete_laplace":
        b = effective_scale(kind, value)
        return math.tanh(0.5 / b) * np.exp(-k / b)
    if kind == "gaussian":
        sigma2 = _gaussian_sigma2(value)
        z, _ = _discrete_gaussian_moments(sigma2)
        return np.exp(-(k * k) / (2.0 * sigma2)) / z
    raise ParameterError("laplace_float is a continuous distribution; it has no pmf")


def _scalar_variance(kind: str, scale: float) -> float:
    kind = check_kind(kind)
    value = check_scale(kind, scale)
    if kind == "laplace_float":
        return 2.0 * value**2
    if kind == "discrete_laplace":
        inverse = 1.0 / effective_scale(kind, value)
        return 2.0 * math.exp(-inverse) / math.expm1(-inverse) ** 2  # 2 t / (1 - t)^2
    return _discrete_gaussian_moments(_gaussian_sigma2(value))[1]


def noise_variance(kind: str, scale) -> np.ndarray:
    """Exact variance of one draw of noise ``kind`` with requested scale ``scale`` (array-friendly)."""
    scale = np.asarray(scale, dtype=float)
    if scale.ndim == 0:
        return np.asarray(_scalar_variance(kind, float(scale)))
    return np.vectorize(lambda value: _scalar_variance(kind, value), otypes=[float])(scale)


def discrete_laplace_decay(scale) -> np.ndarray:
    """exp(-1 / b) for the scale b actually used by the discrete Laplace sampler (array-friendly)."""
    used = np.vectorize(lambda value: effective_scale("discrete_laplace", value), otypes=[float])
    return np.exp(-1.0 / used(np.asarray(scale, dtype=float)))


def sample_noise(kind: str, scale, size, rng) -> np.ndarray:
    """Draw ``size`` values of noise ``kind`` with per-value ``scale``."""
    kind = check_kind(kind)
    if kind == "discrete_laplace":
        return sample_discrete_laplace(scale, size, rng)
    if kind == "gaussian":
        return sample_gaussian(scale, size, rng)
    np.vectorize(lambda value: check_scale(kind, value))(np.asarray(scale, dtype=float))
    return sample_laplace_float(scale, size, rng)


def _log_zcdp_delta(rho: float, epsilon: float, x: float) -> float:
    """log of exp((a-1)(a rho - eps)) / (a-1) * (1 - 1/a)^a at order a = 1 + x (CKS conversion).

    (a-1)(a rho - eps) is evaluated as x (rho - eps) + x^2 rho, exact in the limit x -> 0
    where 1 + x rounds to 1.
    """
    return x * (rho - epsilon) + x * x * rho - math.log(x) - (1.0 + x) * math.log1p(1.0 / x)


def _rho_at_order(epsilon: float, log_delta: float, log_x: float) -> float:
    """The largest rho whose conversion at order alpha = 1 + e^log_x gives delta."""
    x = math.exp(log_x)
    return (epsilon + (log_delta + math.log(x) + (1.0 + x) * math.log1p(1.0 / x)) / x) / (1.0 + x)


_ORDER_GRID = np.linspace(-700.0, 700.0, 2801)  # log(alpha - 1)


@lru_cache(maxsize=1024)
def _best_order(epsilon: float, log_delta: float) -> float:
    """log(alpha - 1) maximising the admissible rho: a grid, then Brent's method around its best."""
    grid = _ORDER_GRID
    x = np.exp(grid)
    with np.errstate(over="ignore", invalid="ignore"):
        values = (epsilon + (log_delta + grid + (1.0 + x) * np.log1p(1.0 / x)) / x) / (1.0 + x)
    values = np.where(np.isfinite(values), values, -np.inf)
    best = int(np.argmax(values))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
    from scipy import optimize  # noqa: PLC0415 - ~0.3 s of imports, for Gaussian calibration only

    result = optimize.minimize_scalar(
        lambda u: -_rho_at_order(epsilon, log_delta, u), bounds=(lo, hi), method="bounded", options={"xatol": 1e-12}
    )
    return float(result.x) if -result.fun >= values[best] else float(grid[best])


def _sigma_too_large(epsilon: float, delta: float, sigma: float) -> ParameterError:
    return ParameterError(
        f"epsilon is too small for this mechanism: Gaussian noise for epsilon={epsilon:.3g}, delta={delta:.3g} "
        f"would need sigma {sigma:.3g}, above the largest supported 2^40; raise epsilon or delta"
    )


def gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float = 1.0) -> float:
    """sigma making the discrete Gaussian mechanism (epsilon, delta)-DP, in any dimension.

    Canonne, Kamath and Steinke (NeurIPS 2020): adding independent discrete Gaussians of
    variance parameter sigma^2 to an integer query of L2 sensitivity Delta is rho-zCDP with
    rho = Delta^2 / (2 sigma^2) (in any dimension), and rho-zCDP implies (epsilon, delta)-DP for
    delta = inf_{alpha > 1} exp((alpha-1)(alpha rho - epsilon)) / (alpha-1) * (1 - 1/alpha)^alpha.
    For each alpha the condition is linear in rho; the best alpha is found numerically, and
    the sigma returned is checked against the formula at that alpha (rounded up), so optimiser
    error can only cost noise, never privacy.  Raises ParameterError when no sigma up to 2^40
    works.
    """
    for name, value in (("epsilon", epsilon), ("l2_sensitivity", l2_sensitivity)):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float, np.integer, np.floating))
            or not math.isfinite(value)
            or value <= 0
        ):
            raise ParameterError(f"gaussian_sigma: {name} must be a finite number > 0, got {value!r}")
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.integer, np.floating)) or not 0.0 < delta < 1.0:
        raise ParameterError("Gaussian noise needs delta in (0, 1); use discrete Laplace noise for delta = 0")
    epsilon, delta, sensitivity = float(epsilon), float(delta), float(l2_sensitivity)
    log_delta = math.log(delta)
    log_x = _best_order(epsilon, log_delta)
    rho = _rho_at_order(epsilon, log_delta, log_x)
    if not rho > 0:
        raise _sigma_too_large(epsilon, delta, math.inf)
    x = math.exp(log_x)
    sigma = sensitivity / math.sqrt(2.0 * rho) * (1.0 + 1e-9)
    for _ in range(1000):  # check at the order used; a failure (float error) costs a little noise
        if _log_zcdp_delta(sensitivity**2 / (2.0 * sigma**2), epsilon, x) <= log_delta:
            break
        sigma *= 1.0 + 1e-6
    else:
        raise AssertionError("gaussian_sigma: calibration check failed")
    if not sigma <= MAX_SCALE:
        raise _sigma_too_large(epsilon, delta, sigma)
    if sigma == 0.0:
        sigma = math.ulp(0.0)  # epsilon so large that any positive sigma will do
    return sigma


@dataclass(frozen=True)
class NoiseSpec:
    """The noise added to one group of measurements: its kind and its requested scale.

    Construction validates both (ParameterError for an unknown kind, the retired name
    "laplace", or a scale that is not finite, > 0 and <= 2^40) and raises a scale below
    :data:`MIN_SCALE` to it (``scale`` is then that floor).  ``effective_scale`` is the
    scale actually sampled (>= ``scale``); ``variance`` is the exact variance of what is
    sampled.
    """

    kind: str
    scale: float

    def __post_init__(self):
        check_kind(self.kind)
        check_scale(self.kind, self.scale)
        object.__setattr__(self, "scale", finest_scale(self.kind, self.scale))

    @property
    def effective_scale(self) -> float:
        return effective_scale(self.kind, self.scale)

    @property
    def variance(self) -> float:
        return float(noise_variance(self.kind, self.scale))

    def pmf(self, k) -> np.ndarray:
        return pmf(self.kind, self.scale, k)

    def sample(self, size, rng) -> np.ndarray:
        return sample_noise(self.kind, self.scale, size, rng)

"""Noise samplers and the default secure random source.

Every function that draws noise takes ``rng``:

* ``None`` (the default): a :class:`SecureRandom`, which reads the operating system's
  cryptographic random source (``os.urandom``) for every draw.  Use it for real releases.
* an ``int`` or :class:`numpy.random.SeedSequence`: a seeded ``numpy.random.Generator``, for
  tests and reproducible experiments only (a fixed seed makes the noise predictable).
* a ``numpy.random.Generator`` or a :class:`SecureRandom`: used as given.

The samplers are written against two primitives only, ``rng.random(size)`` (uniform on
[0, 1)) and ``rng.integers``, so the secure source and a seeded numpy generator go through
exactly the same code, and the seeded path tests the secure one.

Distributions (``scale`` is the noise scale b, usually sensitivity / epsilon):

* ``laplace``: density exp(-|z|/b) / 2b, variance 2 b^2.
* ``discrete_laplace`` (two-sided geometric): P(k) proportional to t^|k| on the integers,
  t = exp(-1/b), variance 2 t / (1 - t)^2.  It gives epsilon-DP to integer queries of L1
  sensitivity Delta with b = Delta / epsilon, returns integers, and avoids the floating-point
  attacks on continuous Laplace; it is the default for counts.
* ``gaussian``: N(0, sigma^2), calibrated by :func:`gaussian_sigma` (the analytic Gaussian
  mechanism of Balle and Wang, ICML 2018) for (epsilon, delta)-DP.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from .errors import ParameterError

NOISE_KINDS = ("discrete_laplace", "laplace", "gaussian")

_TWO53 = float(2**53)


class SecureRandom:
    """Random source backed by ``os.urandom`` (the OS cryptographic generator).

    It implements the subset of the ``numpy.random.Generator`` interface that dprange's
    samplers use: :meth:`random`, :meth:`integers` and :meth:`standard_normal`.
    """

    def _uint64(self, count: int) -> np.ndarray:
        return np.frombuffer(os.urandom(8 * count), dtype=np.uint64).copy()

    def random(self, size=None):
        """Uniform floats on [0, 1) with 53 random bits each."""
        count = 1 if size is None else int(np.prod(size))
        bits = self._uint64(count) >> np.uint64(11)
        out = bits.astype(np.float64) / _TWO53
        return float(out[0]) if size is None else out.reshape(size)

    def integers(self, low, high=None, size=None):
        """Uniform integers on [low, high) without modulo bias (rejection sampling)."""
        if high is None:
            low, high = 0, low
        low = int(low)
        span = int(high) - low
        if span <= 0:
            raise ParameterError("integers: high must be greater than low")
        count = 1 if size is None else int(np.prod(size))
        mask = np.uint64((1 << max(span - 1, 1).bit_length()) - 1)
        out = np.empty(count, dtype=np.int64)
        todo = np.arange(count)
        while todo.size:
            draw = self._uint64(todo.size) & mask
            ok = draw < np.uint64(span)
            out[todo[ok]] = draw[ok].astype(np.int64) + low
            todo = todo[~ok]
        return int(out[0]) if size is None else out.reshape(size)

    def standard_normal(self, size=None):
        """Standard normal draws by the Box-Muller transform of secure uniforms."""
        count = 1 if size is None else int(np.prod(size))
        out = _box_muller(self, count)
        return float(out[0]) if size is None else out.reshape(size)

    def __repr__(self) -> str:
        return "SecureRandom()"


def resolve_rng(rng=None):
    """Turn the ``rng`` argument of a public function into a random source (see module doc)."""
    if rng is None:
        return SecureRandom()
    if isinstance(rng, (np.random.Generator, SecureRandom)):
        return rng
    if isinstance(rng, (np.random.SeedSequence, np.random.BitGenerator)):
        return np.random.default_rng(rng)
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        if rng < 0:
            raise ParameterError(f"rng seed must be a non-negative integer, got {rng}")
        return np.random.default_rng(int(rng))
    raise ParameterError(
        f"rng must be None, an integer seed or a numpy.random.Generator, got {type(rng).__name__}"
    )


def _open_uniform(rng, size) -> np.ndarray:
    """Uniform draws on the open interval (0, 1): the midpoints of the 2^53 grid."""
    return np.asarray(rng.random(size), dtype=np.float64) + 2.0**-54


def _box_muller(rng, count: int) -> np.ndarray:
    half = (count + 1) // 2
    radius = np.sqrt(-2.0 * np.log(_open_uniform(rng, half)))
    angle = 2.0 * np.pi * _open_uniform(rng, half)
    return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:count]


def sample_laplace(scale, size, rng) -> np.ndarray:
    """Continuous Laplace noise with scale ``scale`` (scalar or array broadcast to ``size``)."""
    u = _open_uniform(rng, size) - 0.5
    return -np.asarray(scale, dtype=float) * np.sign(u) * np.log1p(-2.0 * np.abs(u))


def sample_geometric(decay, size, rng) -> np.ndarray:
    """Geometric draws on {0, 1, ...} with P(k) = (1 - t) t^k for ``decay`` t in (0, 1)."""
    with np.errstate(divide="ignore"):  # t = 0 (no noise at all) gives log t = -inf and draws 0
        log_t = np.log(np.asarray(decay, dtype=float))
    return np.floor(np.log(_open_uniform(rng, size)) / log_t).astype(np.int64)


def discrete_laplace_decay(scale) -> np.ndarray:
    """t = exp(-1 / scale), the decay of the discrete Laplace distribution of scale ``scale``."""
    return np.exp(-1.0 / np.asarray(scale, dtype=float))


def sample_discrete_laplace(scale, size, rng) -> np.ndarray:
    """Two-sided geometric noise: the difference of two independent geometric draws."""
    t = discrete_laplace_decay(scale)
    return sample_geometric(t, size, rng) - sample_geometric(t, size, rng)


def sample_gaussian(sigma, size, rng) -> np.ndarray:
    """Gaussian noise N(0, sigma^2)."""
    count = int(np.prod(size))
    return np.asarray(sigma, dtype=float) * _box_muller(rng, count).reshape(size)


def noise_variance(kind: str, scale) -> np.ndarray:
    """Exact variance of one draw of noise ``kind`` with scale ``scale`` (array-friendly)."""
    scale = np.asarray(scale, dtype=float)
    if kind == "laplace":
        return 2.0 * scale**2
    if kind == "discrete_laplace":
        t = discrete_laplace_decay(scale)
        return 2.0 * t / (1.0 - t) ** 2
    if kind == "gaussian":
        return scale**2
    raise ParameterError(f"unknown noise {kind!r}; choose one of {', '.join(NOISE_KINDS)}")


def sample_noise(kind: str, scale, size, rng) -> np.ndarray:
    """Draw ``size`` values of noise ``kind`` with per-value ``scale``."""
    if kind == "laplace":
        return sample_laplace(scale, size, rng)
    if kind == "discrete_laplace":
        return sample_discrete_laplace(scale, size, rng)
    if kind == "gaussian":
        return sample_gaussian(scale, size, rng)
    raise ParameterError(f"unknown noise {kind!r}; choose one of {', '.join(NOISE_KINDS)}")


def _gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """The smallest delta for which N(0, sigma^2) is (epsilon, delta)-DP (Balle-Wang Thm 8)."""
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    first = special.ndtr(a - b)
    # e^eps * Phi(-a - b), computed in logs to avoid overflow for large epsilon.
    second = math.exp(epsilon + special.log_ndtr(-a - b))
    return first - second


def gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float = 1.0) -> float:
    """Smallest sigma making the Gaussian mechanism (epsilon, delta)-DP (analytic calibration).

    Balle and Wang, "Improving the Gaussian Mechanism for Differential Privacy", ICML 2018:
    N(0, sigma^2) on a query of L2 sensitivity Delta is (epsilon, delta)-DP iff
    Phi(Delta/2sigma - eps sigma/Delta) - e^eps Phi(-Delta/2sigma - eps sigma/Delta) <= delta.
    Valid for every epsilon > 0, unlike the classical sqrt(2 ln(1.25/delta)) bound.
    """
    if not (0.0 < delta < 1.0):
        raise ParameterError("Gaussian noise needs delta in (0, 1); use Laplace noise for delta = 0")
    if l2_sensitivity <= 0:
        return 0.0
    lo, hi = 1e-12 * l2_sensitivity, l2_sensitivity
    while _gaussian_delta(hi, epsilon, l2_sensitivity) > delta:
        hi *= 2.0
    root = optimize.brentq(
        lambda s: _gaussian_delta(s, epsilon, l2_sensitivity) - delta, lo, hi, xtol=1e-14, rtol=1e-12
    )
    # Round up by a hair so that floating-point error never weakens the guarantee.
    return float(root) * (1.0 + 1e-9)


@dataclass(frozen=True)
class NoiseSpec:
    """The noise added to one group of measurements: its kind and its scale."""

    kind: str
    scale: float

    @property
    def variance(self) -> float:
        return float(noise_variance(self.kind, self.scale))

    def sample(self, size, rng) -> np.ndarray:
        return sample_noise(self.kind, self.scale, size, rng)

"""The secure random source and exact samplers: discrete Laplace and discrete Gaussian noise
(Canonne, Kamath and Steinke, NeurIPS 2020) drawn from a ChaCha20 keystream, and the continuous
Laplace kept for reproducing papers.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

from .._validation import MAX_SCALE
from ..errors import ParameterError
from . import _laplace_table
from ._keystream import Keystream

NOISE_KINDS = ("discrete_laplace", "laplace_float", "gaussian")


_INT64_SAFE = 2**62  # bounds, numerators and denominators kept below this stay in int64


_WORD_BITS = 62  # bits per uniform word when a bound needs Python integers


_FAST_DENOMINATOR = 2**56  # Gaussian: keep the Bernoulli denominator below this when possible


class SecureRandom:
    """Random source backed by a ChaCha20 keystream keyed from ``os.urandom`` (see
    :mod:`dprange.privacy._keystream`; plain ``os.urandom`` when ``cryptography`` is missing).

    It implements the subset of the ``numpy.random.Generator`` interface that dprange uses:
    :meth:`integers` (the only primitive of the noise samplers), and :meth:`random` and
    :meth:`standard_normal` for the local-DP simulations; :meth:`words` gives raw 64-bit words.
    """

    def __init__(self):
        self._stream = Keystream()

    @classmethod
    def _with_key(cls, key: bytes) -> SecureRandom:
        """A reproducible (hence predictable) stream under a fixed 32-byte key: tests only."""
        source = cls()
        source._stream = Keystream(key)
        return source

    def _bytes(self, count: int) -> np.ndarray:
        stream = self.__dict__.get("_stream")
        if stream is None:  # a subclass that skipped __init__
            stream = self._stream = Keystream()
        return stream.read(count)

    def words(self, count: int) -> np.ndarray:
        """``count`` uniform 64-bit words (uint64)."""
        return self._bytes(8 * count).view(np.uint64)

    def _uint64(self, count: int) -> np.ndarray:
        return self.words(count)

    def _bits(self, count: int, bits: int) -> np.ndarray:
        """``count`` independent uniform integers of ``bits`` <= 63 bits (int64), reading as
        few bytes as possible: one bit per draw for bits = 1, else whole bytes per draw."""
        if bits == 0:
            return np.zeros(count, dtype=np.int64)
        if bits == 1:
            raw = self._bytes((count + 7) // 8)
            return np.unpackbits(raw)[:count].astype(np.int64)
        nbytes = (bits + 7) // 8
        if nbytes in (1, 2, 4, 8):
            value = self._bytes(nbytes * count).view(f"<u{nbytes}")
            value = value.view(np.int64) if nbytes == 8 else value.astype(np.int64)
        else:  # 3, 5, 6 or 7 bytes: place them in the low bytes of little-endian int64 words
            padded = np.zeros((count, 8), dtype=np.uint8)
            padded[:, :nbytes] = self._bytes(nbytes * count).reshape(count, nbytes)
            value = padded.view("<i8").reshape(count)
        return value & ((1 << bits) - 1)

    def random(self, size=None):
        """Uniform floats on [0, 1) with 53 random bits each."""
        count = 1 if size is None else int(np.prod(size))
        bits = self._uint64(count) >> np.uint64(11)
        out = bits.astype(np.float64) / float(2**53)
        return float(out[0]) if size is None else out.reshape(size)

    def integers(self, low, high=None, size=None):
        """Uniform integers on [low, high) without modulo bias (rejection sampling).

        ``low`` and ``high`` are scalars with 0 < high - low <= 2^63 - 1.
        """
        if high is None:
            low, high = 0, low
        low = int(low)
        span = int(high) - low
        if not 0 < span < 2**63:
            raise ParameterError("integers: high must be greater than low, by less than 2^63")
        count = 1 if size is None else int(np.prod(size))
        bits = (span - 1).bit_length()
        out = self._bits(count, bits)
        if span != 1 << bits:  # redraw the values past the span (no modulo bias)
            redo = np.flatnonzero(out >= span)
            while redo.size:
                out[redo] = self._bits(redo.size, bits)
                redo = redo[out[redo] >= span]
        if low:
            out += low
        return int(out[0]) if size is None else out.reshape(size)

    def standard_normal(self, size=None):
        """Standard normal floats (Box-Muller on open uniforms); not used by the noise samplers."""
        count = 1 if size is None else int(np.prod(size))
        half = (count + 1) // 2
        radius = np.sqrt(-2.0 * np.log(_open_uniform(self, half)))
        angle = 2.0 * np.pi * _open_uniform(self, half)
        out = np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:count]
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
    raise ParameterError(f"rng must be None, an integer seed or a numpy.random.Generator, got {type(rng).__name__}")


def _uniform_below(bound: int, count: int, rng) -> np.ndarray:
    """``count`` uniform integers on [0, bound) for a Python integer ``bound`` >= 1.

    Bounds below 2^62 use ``rng.integers`` directly (int64); larger bounds combine 62-bit
    words into Python integers and reject above the largest multiple of ``bound`` (exact).
    """
    if bound <= _INT64_SAFE:
        return np.asarray(rng.integers(0, bound, size=count), dtype=np.int64)
    words = (bound.bit_length() + 64) // _WORD_BITS + 1
    limit = 1 << (_WORD_BITS * words)
    accept_below = limit - limit % bound
    out = np.empty(count, dtype=object)
    todo = np.arange(count)
    while todo.size:
        value = np.zeros(todo.size, dtype=object)
        for _ in range(words):
            word = np.asarray(rng.integers(0, 2**_WORD_BITS, size=todo.size), dtype=np.int64)
            value = value * (2**_WORD_BITS) + word.astype(object)
        ok = value < accept_below
        out[todo[ok]] = value[ok] % bound
        todo = todo[~ok]
    return out


def _bernoulli_exp_below_one(num: np.ndarray, den: int, rng) -> np.ndarray:
    """Bernoulli(exp(-num/den)) per entry, for integers 0 <= num <= den (CKS Algorithm 1).

    K = 1, 2, ...: draw A ~ Bernoulli(gamma / K) (one uniform on [0, K den), or when that
    bound is too large, Bernoulli(gamma) and Bernoulli(1 / K)); stop at the first A = 0 and
    return 1 iff K is odd.  All pending entries share K.
    """
    go_on = _uniform_below(den, num.size, rng) < num  # K = 1 on every entry
    out = ~go_on
    pending = np.flatnonzero(go_on)
    k = 2
    while pending.size:
        if den * k <= _INT64_SAFE:  # Bernoulli(num / (den k)) in one draw
            go_on = _uniform_below(den * k, pending.size, rng) < num[pending]
        else:  # Bernoulli(num / den) and Bernoulli(1 / k)
            go_on = _uniform_below(den, pending.size, rng) < num[pending]
            go_on &= np.asarray(rng.integers(0, k, size=pending.size)) == 0
        if k % 2 == 1:  # the output starts False: only odd stopping times need writing
            out[pending[~go_on]] = True
        pending = pending[go_on]
        k += 1
    return out


def _bernoulli_exp_minus_one(count: int, rng) -> np.ndarray:
    """``count`` draws of Bernoulli(exp(-1)) (CKS Algorithm 1 with gamma = 1)."""
    out = np.zeros(count, dtype=bool)
    pending = np.flatnonzero(np.asarray(rng.integers(0, 2, size=count)) == 0)  # K = 1 always continues
    k = 3
    while pending.size:
        go_on = np.asarray(rng.integers(0, k, size=pending.size)) == 0
        if k % 2 == 1:
            out[pending[~go_on]] = True
        pending = pending[go_on]
        k += 1
    return out


def _fits_int64(values: np.ndarray) -> bool:
    return values.size == 0 or (int(values.max()) < _INT64_SAFE and int(values.min()) > -_INT64_SAFE)


def _bernoulli_exp(num: np.ndarray, den: int, rng) -> np.ndarray:
    """Bernoulli(exp(-num/den)) per entry for integers num >= 0 (int64 or Python ints).

    CKS Algorithm 1: floor(gamma) draws of Bernoulli(exp(-1)) must all succeed, then one
    Bernoulli(exp(-(gamma - floor(gamma)))).
    """
    if den > _INT64_SAFE and num.dtype != object:
        num = num.astype(object)
    whole, frac = num // den, num % den
    if whole.dtype == object and _fits_int64(whole):
        whole = whole.astype(np.int64)
    if frac.dtype == object and den <= _INT64_SAFE:
        frac = frac.astype(np.int64)
    alive = np.ones(num.size, dtype=bool)
    rounds = 0
    while True:
        pending = np.flatnonzero(alive & (whole > rounds))
        if pending.size == 0:
            break
        alive[pending] = _bernoulli_exp_minus_one(pending.size, rng)
        rounds += 1
    survivors = np.flatnonzero(alive)
    alive[survivors] = _bernoulli_exp_below_one(frac[survivors], den, rng)
    return alive


def check_scale(kind: str, scale) -> float:
    """Return ``scale`` as a float, or raise ParameterError if the sampler cannot use it."""
    try:
        value = float(scale)
    except (TypeError, ValueError):
        raise ParameterError(f"noise scale must be a number, got {scale!r}") from None
    if math.isnan(value) or value <= 0:
        raise ParameterError(f"noise scale must be a number > 0, got {scale!r}; check epsilon and the sensitivity")
    if value > MAX_SCALE:  # includes inf
        name = "sigma" if kind == "gaussian" else "scale"
        raise ParameterError(
            f"epsilon is too small for this mechanism: a level would need noise of {name} {value:.3g}; "
            f"the smallest supported per-level epsilon is {1 / MAX_SCALE:.3g} times the level's "
            f"sensitivity (noise {name} at most 2^40); raise epsilon (or delta)"
        )
    return value


_SCALE_BITS = 32  # a rounded scale is at most a relative 2^-32 above the requested one


_MAX_T = 2**60


@lru_cache(maxsize=256)
def _laplace_rational(scale: float) -> tuple[int, int]:
    """(t, s), the discrete Laplace scale t/s >= ``scale`` that is sampled.

    The float itself (t/s exactly) when its numerator is small; otherwise t = 2^k with
    2^32 scale <= t < 2^33 scale (t <= 2^60) and s = floor(t / scale) (at most 2^62): a
    relative rounding up below 2^-32 for scales up to 2^28 and below 2^-20 up to 2^40.
    A small t means few random bytes per draw; all bounds stay inside int64, and U + t V
    switches to Python integers in the unlikely case it would not.
    """
    exact = Fraction(scale)
    magnitude = math.ceil(math.log2(scale))
    t, s = exact.numerator, exact.denominator
    if t <= min(2 ** max(1, _SCALE_BITS + 1 + magnitude), _MAX_T) and s <= _INT64_SAFE:
        return t, s
    t = min(2 ** max(0, _SCALE_BITS + magnitude), _MAX_T)
    return t, min(math.floor(t / exact), _INT64_SAFE)


@lru_cache(maxsize=256)
def _gaussian_rational(sigma: float) -> tuple[int, int, int]:
    """(p, q, t): sigma^2 is sampled as p/q >= sigma^2 (q a power of two), t = floor(sqrt(p/q)) + 1.

    sigma^2 is raised by a relative 2^-48 so that the float sqrt(p/q) is never below sigma;
    q is the largest power of two (at most 2^64) keeping the Bernoulli denominator 2 p q t^2
    below 2^56 (fast int64 path); past sigma ~ 2^12 q = 1 and the denominator needs Python ints.
    """
    target = Fraction(sigma) ** 2 * (1 + Fraction(1, 2**48))
    for j in range(64, -1, -1):
        q = 2**j
        p = -(-target.numerator * q // target.denominator)
        t = math.isqrt(p // q) + 1
        if 2 * p * q * t * t < _FAST_DENOMINATOR or j == 0:
            return p, q, t
    raise AssertionError("unreachable")


def effective_scale(kind: str, scale) -> float:
    """The scale actually sampled for a requested ``scale``: never below it.

    discrete_laplace: t/s (equal to ``scale`` for floats with a short binary expansion such
    as 10 or 2.5, else above it by less than a relative 2^-32 up to scale 2^28); gaussian:
    sqrt(p/q) with sigma^2 = p/q rounded up onto a grid of step 1/q (e.g. a relative 1.3e-8
    above for sigma = 3, see _gaussian_rational); laplace_float: ``scale``.
    """
    kind = check_kind(kind)
    value = check_scale(kind, scale)
    if kind == "discrete_laplace":
        t, s = _laplace_rational(value)
        return t / s
    if kind == "gaussian":
        p, q, _ = _gaussian_rational(value)
        return math.sqrt(p / q)
    return value


_BATCH = 64  # from this many missing draws on, rejection rounds over-draw candidates


def _geometric_exp_minus_one(count: int, rng) -> np.ndarray:
    """V >= 0 with P(V = v) = (1 - 1/e) e^-v: the number of Bernoulli(exp(-1)) successes."""
    v = np.zeros(count, dtype=np.int64)
    pending = np.arange(count)
    while pending.size:
        pending = pending[_bernoulli_exp_minus_one(pending.size, rng)]
        v[pending] += 1
    return v


def _discrete_laplace_round(t: int, s: int, count: int, rng) -> np.ndarray:
    """One round of CKS Algorithm 2 on ``count`` candidates: the accepted draws, in order."""
    u = np.asarray(rng.integers(0, t, size=count), dtype=np.int64)
    u = u[_bernoulli_exp_below_one(u, t, rng)]
    v = _geometric_exp_minus_one(u.size, rng)
    if v.size and int(v.max()) > (_INT64_SAFE - t) // t:
        x = u.astype(object) + v.astype(object) * t  # Python integers: never overflow
    else:
        x = u + v * t
    y = x // s
    negative = np.asarray(rng.integers(0, 2, size=u.size)) == 1
    keep = ~(negative & (y == 0))
    return np.where(negative, -y, y)[keep]


def _fill(round_sampler, count: int, acceptance: float = 0.5) -> np.ndarray:
    """``count`` accepted draws from repeated rounds of a rejection sampler.

    Accepted draws are independent and identically distributed, so taking the first ones in
    candidate order is exact.  Small requests draw exactly the number still missing; large
    ones over-draw by the observed acceptance rate so that few rounds are needed.
    """
    parts, filled = [], 0
    while filled < count:
        missing = count - filled
        candidates = missing if missing < _BATCH else int(missing * 1.05 / acceptance) + 16
        accepted = round_sampler(candidates)
        acceptance = max(accepted.size / candidates, 0.05)
        parts.append(accepted[:missing])
        filled += parts[-1].size
    if any(part.dtype == object for part in parts):
        out = np.concatenate([part.astype(object) for part in parts])
        return out.astype(np.int64) if _fits_int64(out) else out
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _discrete_laplace_exact(t: int, s: int, count: int, rng) -> np.ndarray:
    """``count`` draws of the discrete Laplace of scale t/s (CKS Algorithm 2), vectorised.

    Returns int64, or Python integers (object array) in the astronomically unlikely case that
    a draw does not fit in int64.
    """
    if isinstance(rng, SecureRandom) and t <= _laplace_table.TABLE_MAX_SCALE * s:
        return _laplace_table.sample(s, t, count, rng.words)  # same law, one word per draw
    accept_u = -math.expm1(-1.0) / (t * -math.expm1(-1.0 / t))  # P(Bernoulli(exp(-U/t)) = 1)
    accept_sign = 1.0 + 0.5 * math.expm1(-s / t)  # 1 - P(negative sign and Y = 0)
    return _fill(lambda candidates: _discrete_laplace_round(t, s, candidates, rng), count, accept_u * accept_sign)


def _discrete_gaussian_round(p: int, q: int, t: int, count: int, rng) -> np.ndarray:
    """One round of CKS Algorithm 3 on ``count`` candidates: the accepted draws, in order."""
    y = _discrete_laplace_exact(t, 1, count, rng)
    magnitude = np.abs(y)
    if y.dtype != object and int(magnitude.max(initial=0)) * t * q + p < 2**31:
        offset = magnitude * (t * q) - p
    else:
        offset = magnitude.astype(object) * (t * q) - p
    return y[_bernoulli_exp(offset * offset, 2 * p * q * t * t, rng)]


def _discrete_gaussian_exact(p: int, q: int, t: int, count: int, rng) -> np.ndarray:
    """``count`` draws of the discrete Gaussian with sigma^2 = p/q (CKS Algorithm 3).

    Propose Y ~ discrete Laplace of scale t; accept with probability
    exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)) = exp(-(|Y| t q - p)^2 / (2 p q t^2)).
    """
    return _fill(lambda candidates: _discrete_gaussian_round(p, q, t, candidates, rng), count)


def _by_scale(sampler, scale, size) -> np.ndarray:
    """Apply ``sampler(scalar_scale, count)`` to every distinct value of an array of scales."""
    shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    if np.ndim(scale) == 0:
        return np.asarray(sampler(float(scale), int(np.prod(shape)))).reshape(shape)
    scales = np.broadcast_to(np.asarray(scale, dtype=float), shape)
    if scales.size == 0:
        return np.zeros(shape, dtype=np.int64)
    distinct = np.unique(scales)
    if distinct.size == 1:
        return np.asarray(sampler(float(distinct[0]), scales.size)).reshape(shape)
    out = None
    for value in distinct:
        where = scales == value
        draws = sampler(float(value), int(where.sum()))
        if out is None or draws.dtype == object:
            out = np.zeros(shape, dtype=draws.dtype) if out is None else out.astype(object)
        out[where] = draws
    assert out is not None  # distinct holds at least two values
    return out


def sample_discrete_laplace(scale, size, rng) -> np.ndarray:
    """Exact discrete Laplace noise (integers) of scale ``effective_scale(scale)`` >= ``scale``.

    Cost: about 11 uniform integer draws (about 33 random bytes) per value.
    """

    def draw(value, count):
        t, s = _laplace_rational(check_scale("discrete_laplace", value))
        return _discrete_laplace_exact(t, s, count, rng)

    return _by_scale(draw, scale, size)


def sample_gaussian(sigma, size, rng) -> np.ndarray:
    """Exact discrete Gaussian noise (integers) with sigma = ``effective_scale(sigma)`` >= ``sigma``.

    Cost: about 30 uniform integer draws per value; Python integers (slower) past sigma ~ 2^12.
    """

    def draw(value, count):
        p, q, t = _gaussian_rational(check_scale("gaussian", value))
        return _discrete_gaussian_exact(p, q, t, count, rng)

    return _by_scale(draw, sigma, size)


def _open_uniform(rng, size) -> np.ndarray:
    """Floats (2k + 1) / 2^53, k uniform on [0, 2^52): in (0, 1), never 0 or 1, symmetric."""
    k = np.asarray(rng.integers(0, 2**52, size=size), dtype=np.int64)
    return (2 * k + 1).astype(np.float64) * 2.0**-53


def sample_laplace_float(scale, size, rng) -> np.ndarray:
    """Continuous Laplace noise by floating-point inversion.  NOT differentially private.

    For reproducing papers only: the output grid of floating-point inversion leaks the input
    (Mironov, "On Significance of the Least Significant Bits for Differential Privacy", CCS
    2012).  Draws are finite: |noise| <= 36.05 * scale, because the uniform has 52 bits.
    """
    k = np.asarray(rng.integers(0, 2**52, size=size), dtype=np.int64)
    centred = 2 * k + 1 - 2**52  # odd, |centred| < 2^52: u - 1/2 = centred / 2^53 exactly
    magnitude = np.abs(centred).astype(np.float64) * 2.0**-52  # 2 |u - 1/2| in (0, 1)
    return -np.asarray(scale, dtype=float) * np.sign(centred) * np.log1p(-magnitude)


def check_kind(kind) -> str:
    """Return ``kind`` if it is a noise kind, else raise ParameterError (with a hint for "laplace")."""
    if kind == "laplace":
        raise ParameterError(
            "noise 'laplace' was renamed: use 'discrete_laplace' (exact, the default) or "
            "'laplace_float' (continuous Laplace for reproducing papers; not private as implemented)"
        )
    if kind not in NOISE_KINDS:
        raise ParameterError(f"unknown noise {kind!r}; choose one of {', '.join(NOISE_KINDS)}")
    return kind

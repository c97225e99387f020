"""Integer coins for the local-DP clients: exact keep/lie thresholds from epsilon and randomised
response drawn without floating point (so no report leaks through float rounding).
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ..errors import DomainError, private
from ..privacy.samplers import SecureRandom

MERSENNE = (1 << 31) - 1  # prime modulus of the universal hash family


MIN_LIE_PROBABILITY = 2.0**-32  # smallest probability of reporting a value other than the truth


OLH_MAX_G = 1 << 16  # largest hash range: the mod-P hash is uniform on [g] to a relative g / P


PROBABILITY_BITS = 62  # the clients' coins are uniform integers on [0, 2^62) ...


ONE = 1 << PROBABILITY_BITS  # ... compared with integer thresholds: probabilities P / 2^62


_EXP_DIGITS = 45  # decimal digits of e^epsilon; the lower bound sits 10^-40 (relative) below


@lru_cache(maxsize=1024)
def exp_lower_bound(epsilon: float) -> Fraction:
    """A rational L <= e^epsilon, below it by a relative 10^-40 at most (rigorous).

    ``Decimal.exp`` is correctly rounded (Python's decimal module, after the General Decimal
    Arithmetic specification), so at 45 significant digits its result is within a relative
    10^-44 of e^epsilon; lowering it by a relative 10^-40 gives a strict lower bound.  The
    float epsilon is converted exactly (``Decimal(float)``)."""
    with decimal.localcontext() as context:
        context.prec = _EXP_DIGITS
        value = decimal.Decimal(float(epsilon)).exp()
    return Fraction(value) * (1 - Fraction(1, 10**40))


@lru_cache(maxsize=1024)
def keep_threshold(epsilon: float, k: int) -> int:
    """T for k-ary randomised response in mixture form (keep the truth if U < T, U uniform on
    [0, 2^62), else report a uniform value of [k]): the largest integer with
    p'/q' = (1 + (k - 1) t)/(1 - t) <= L, t = T / 2^62, i.e. T = floor(2^62 (L - 1)/(L + k - 1))."""
    bound = exp_lower_bound(epsilon)
    return math.floor(ONE * (bound - 1) / (bound + k - 1))


@lru_cache(maxsize=1024)
def lie_threshold(epsilon: float) -> int:
    """Q for binary randomised response (lie if U < Q): the smallest integer with
    (1 - q')/q' <= L, q' = Q / 2^62, i.e. Q = ceil(2^62 / (1 + L))."""
    return math.ceil(ONE / (1 + exp_lower_bound(epsilon)))


def coins(source, shape) -> np.ndarray:
    """Uniform integers on [0, 2^62) (int64), drawn whole (used where every bit counts)."""
    return np.asarray(source.integers(0, ONE, size=shape), dtype=np.int64)


_LOW_BITS = 30  # a coin U on [0, 2^62) is drawn as 32 high bits, then 30 low bits if needed


def coins_below(source, shape, threshold: int) -> np.ndarray:
    """Booleans "U < threshold" for independent U uniform on [0, 2^62): True w.p. exactly
    threshold / 2^62 (0 < threshold < 2^62).

    U = H 2^30 + L with H uniform on [0, 2^32) and L on [0, 2^30) independent; H decides
    unless it equals threshold's high part (probability 2^-32), and only there is L drawn.
    Half the random bits of whole 62-bit draws, and faster."""
    high_threshold, low_threshold = divmod(int(threshold), 1 << _LOW_BITS)
    high = np.asarray(source.integers(0, 1 << (PROBABILITY_BITS - _LOW_BITS), size=shape), dtype=np.int64)
    below = high < high_threshold
    ties = np.flatnonzero(high == high_threshold)
    if ties.size:
        low = np.asarray(source.integers(0, 1 << _LOW_BITS, size=ties.size), dtype=np.int64)
        np.put(below, ties, low < low_threshold)
    return below


COIN_BITS = (16, 32, PROBABILITY_BITS)  # OUE's coin widths


@lru_cache(maxsize=1024)
def oue_coin_bits(epsilon: float) -> int:
    """OUE's default coin width: the narrowest of 16 and 32 bits whose rounding of q costs at
    most a relative 2^-10 of epsilon (16 bits from epsilon ~0.06 to ~10), else 62.  Recorded
    in the reports' parameters, so clients and servers never disagree on it."""
    bound = exp_lower_bound(epsilon)
    for bits in (16, 32):
        lie = math.ceil((1 << bits) / (1 + bound))
        if 0 < lie < 1 << (bits - 1) and math.log(((1 << bits) - lie) / lie) >= epsilon * (1 - 2.0**-10):
            return bits
    return PROBABILITY_BITS


def small_coins(source, shape, bits: int) -> np.ndarray:
    """Uniform integers on [0, 2^bits) for bits = 16 or 32, as uint16 / uint32: raw keystream
    bytes from the secure source, ``integers(..., dtype=)`` from a numpy Generator, plain
    ``integers`` from anything else (scripted test sources)."""
    dtype = np.uint16 if bits == 16 else np.uint32
    count = int(np.prod(shape))
    if type(source) is SecureRandom:
        return source._bytes(count * (bits // 8)).view(dtype).reshape(shape)
    if isinstance(source, np.random.Generator):
        return source.integers(0, 1 << bits, size=shape, dtype=dtype)
    return np.asarray(source.integers(0, 1 << bits, size=shape), dtype=np.int64)


def randomised_response(truth: np.ndarray, k: int, threshold: int, source) -> np.ndarray:
    """k-ary randomised response in mixture form: the truth where a coin is below
    ``threshold``, else a uniform value of [k] (module doc, "Exact randomisation")."""
    keep = coins_below(source, truth.size, threshold)
    uniform = np.asarray(source.integers(0, k, size=truth.size), dtype=np.int64)
    return np.where(keep, truth, uniform).astype(np.int64)


def check_values(values, domain_size: int) -> np.ndarray:
    """Integer values in 0..D-1, as int64; anything else is an error (never clipped)."""
    arr = np.asarray(values)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.floor(arr)):
            raise DomainError("local-DP values must be integers in 0..D-1 (bucketize them with a Domain first)")
    elif arr.dtype.kind not in "iub":
        raise DomainError("local-DP values must be integers in 0..D-1")
    arr = arr.astype(np.int64).ravel()
    if arr.size and (arr.min() < 0 or arr.max() >= domain_size):
        raise DomainError(
            f"values must lie in 0..{domain_size - 1}; {private(int(((arr < 0) | (arr >= domain_size)).sum()))} do not"
        )
    return arr

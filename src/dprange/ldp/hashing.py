"""Hashing for OLH and HRR: the universal hash family over a prime field, its support counts, and
the fast Walsh-Hadamard transform.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ..errors import ReportError
from .coins import OLH_MAX_G


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, math.isqrt(n) + 1))


@lru_cache(maxsize=256)
def best_prime_g(epsilon: float) -> int:
    """The prime g (<= 2^16) nearest e^eps + 1 from below or above with the smaller OLH
    variance factor (e^eps - 1 + g)^2 / ((e^eps - 1)^2 (g - 1)) (Wang et al. 2017, whose
    optimum is g = e^eps + 1; e.g. eps = 1: g = 3, 2% more variance than the real optimum)."""
    x = math.exp(epsilon) + 1.0
    below = next((n for n in range(min(int(x), OLH_MAX_G), 1, -1) if _is_prime(n)), 2)
    above = next((n for n in range(max(math.ceil(x), 2), OLH_MAX_G + 1) if _is_prime(n)), below)
    e1 = math.expm1(epsilon)
    return min((below, above), key=lambda g: (e1 + g) ** 2 / (g - 1))


LINEAR_TABLE_LIMIT = 1 << 23  # largest (pool x g) report-count table of the linear family (64 MB)


@lru_cache(maxsize=256)
def linear_pool_size(domain_size: int, g: int) -> int | None:
    """g^d for the fewest base-g digits d >= 1 covering the domain, when g is prime and the
    aggregator's table g^(d+1) stays <= 2^23; else None (the linear family is not offered)."""
    if not _is_prime(g):
        return None
    pool = g
    while pool < domain_size:
        pool *= g
    return pool if pool * g <= LINEAR_TABLE_LIMIT else None


def linear_hash(seeds: np.ndarray, x: np.ndarray, g: int, digits: int) -> np.ndarray:
    """sum_i a_i x_i mod g over the base-g digits a_i of the seed and x_i of x (broadcast)."""
    seeds, x = np.broadcast_arrays(seeds, x)
    out = np.zeros(seeds.shape, dtype=np.int64)
    a, v = seeds.copy(), x.copy()
    for _ in range(digits):  # cost: O(digits) vectorised passes
        out += (a % g) * (v % g)
        a //= g
        v //= g
    return out % g


def linear_support_counts(table: np.ndarray, g: int, digits: int) -> np.ndarray:
    """C_z = sum_a table[a, h_a(z)] for every z of [g^d], table[a, y] the number of reports
    (hash a, value y): one base-g digit at a time, O(d g^(d+2)) instead of O(g^d D).

    After the digits i..d-1 are done, Y[a_0..a_(i-1), z_i..z_(d-1), s] = sum over
    a_i..a_(d-1) of table[a, s + sum_(l >= i) a_l z_l]; at the end C_z = Y[z, 0]."""
    shape = [g] * digits  # C order: axis 0 is the most significant digit
    y = table.reshape(shape + [g]).astype(np.int64)
    idx = (np.arange(g)[None, None, :] + np.arange(g)[:, None, None] * np.arange(g)[None, :, None]) % g  # [a, z, s]
    for axis in range(digits):  # replace the digit axis a by z
        moved = np.moveaxis(y, axis, -2)  # (..., a, s)
        out = np.zeros_like(moved)
        for a in range(g):  # out[..., z, s] += moved[..., a, (s + a z) mod g]
            out += moved[..., a, :][..., idx[a]]
        y = np.moveaxis(out, -2, axis)
    return y[..., 0].reshape(-1).astype(float)


def _splitmix64(seeds) -> np.ndarray:
    """The SplitMix64 finaliser (Steele, Lea, Flood 2014), vectorised: a bijection of 64-bit
    integers whose outputs for consecutive inputs (hash-pool indices 0..k-1) look independent.
    A bare multiplicative (Weyl) mix gave a structured pool: its collision rates sat well off
    1/g, e.g. pool k = 256 at D = 1024, eps = 1 had estimates summing to 0.10 in expectation."""
    with np.errstate(over="ignore"):
        z = np.asarray(seeds).astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def parity(x) -> np.ndarray:
    """popcount(x) mod 2, vectorised."""
    x = np.asarray(x, dtype=np.uint64).copy()
    for shift in (32, 16, 8, 4, 2, 1):
        x ^= x >> np.uint64(shift)
    return (x & np.uint64(1)).astype(np.int64)


def fwht(a) -> np.ndarray:
    """Fast Walsh-Hadamard transform (unnormalised, Sylvester order): O(D log D)."""
    out = np.asarray(a, dtype=float).copy()
    size = out.size
    h = 1
    while h < size:
        view = out.reshape(-1, 2, h)
        left = view[:, 0, :].copy()
        view[:, 0, :] += view[:, 1, :]
        view[:, 1, :] = left - view[:, 1, :]
        h *= 2
    return out


def _checked(values, size) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        raise ReportError("report values must be integers")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= size):
        raise ReportError(f"report values must lie in 0..{size - 1}")
    return arr

"""Exact discrete Laplace draws from one 64-bit uniform each: inverse CDF on integer thresholds.

The discrete Laplace of scale b = t/s (decay r = e^(-s/t)) has P(K = k) = (1 - r)/(1 + r) r^|k|,
so its magnitude has the tail T_m = P(|K| >= m) = 2 r^m / (1 + r) for m >= 1 (T_0 = 1) and its
sign is fair and independent.  One word w of 64 uniform bits gives the sign (its low bit) and
U = (j + V) / 2^63 with j = w >> 1: a uniform on [0, 1) whose further bits V are drawn only when
needed.  |K| = #{m >= 1 : U < T_m}, the inverse CDF of the magnitude, so |K| has exactly the
law above once every comparison U < T_m is decided exactly:

* Integer brackets: for m = 1..M the table holds A_m <= 2^63 T_m <= B_m (B_m - A_m <= 2),
  from a rigorous 128-bit fixed-point power of rigorous bounds on r (``Decimal.exp`` is
  correctly rounded).  Then j < A_m proves U < T_m whatever V is, and j >= B_m proves
  U >= T_m; only A_m <= j < B_m (probability <= 2^-62 per threshold) is open.
* Refinement: an open comparison draws V 64 bits at a time and compares U with T_m bounded
  in ``Decimal`` at a precision growing with the bits drawn, until it is decided (an expected
  1 + 2^-62 rounds).  Every draw is therefore exactly the inverse CDF of a uniform: the
  sampler's law is the discrete Laplace exactly, not an approximation on a grid.
* Tail: the table stops at M (where 2^63 T_m falls below 2^24, at most 2^17 entries).  If
  U < T_M, |K| = M + G with G geometric, P(G >= g) = r^g (the magnitude is memoryless beyond
  m >= 1); G is drawn the same way from a second table of r^g, repeating at its own end.

A float logarithm only guesses each count (|K| ~ b ln(2^63 c / j)); the integer comparisons
with the table confirm it, and the few wrong guesses are recounted by binary search.

Cost: 8 bytes of keystream and ~15 vectorised operations per draw (timings: docs/privacy.md),
against ~11 uniform draws and many rejection rounds for Canonne, Kamath and Steinke's
Algorithm 2 ("The Discrete Gaussian for Differential Privacy", NeurIPS 2020), which
:mod:`dprange.privacy.samplers` keeps for seeded generators (so that seeded results stay
reproducible) and for scales above ``TABLE_MAX_SCALE``.  The same
inverse-CDF construction is the textbook one (Devroye, "Non-Uniform Random Variate
Generation", Springer 1986, section III.2); exactness comes from the brackets and refinement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import lru_cache

import numpy as np

TABLE_MAX_SCALE = 2**14  # above this scale the table would need more than 2^17 entries


WORD_BITS = 63  # bits of U in the first word (the 64th is the sign)


_FIX = 128  # fixed-point bits of the table's powers of r


_FLOOR = 1 << 24  # the table stops where 2^63 T_m falls below this (T_m < 2^-39)


_MAX_ENTRIES = 1 << 17


def threshold_bounds(magnitude: bool, s: int, t: int, m: int, bits: int) -> tuple[int, int]:
    """Integers lo <= 2^bits T_m <= hi, T_m = c e^(-m s / t) with c = 2/(1 + e^(-s/t)) for the
    magnitude (else c = 1), hi - lo small: ``Decimal`` at bits log10(2) + 30 digits.

    Error analysis: the quotients m s / t and s / t are correctly rounded (relative error
    eps = 10^(1 - prec) / 2), exp is correctly rounded (Python's decimal module), so exp(-x) is
    within a relative (|x| + 1) eps (1 + 1e-9); 2/(1 + r) adds (s/t + 2) eps and the product one
    more eps.  The margin delta = (x + s/t + 10) 10^(2 - prec) is 20 times that sum."""
    digits = int(bits * 0.30103) + 30
    with localcontext() as context:
        context.prec = digits
        x = Decimal(m * s) / Decimal(t)
        value = (-x).exp()
        if magnitude:
            value = 2 * value / (1 + (-(Decimal(s) / Decimal(t))).exp())
    delta = (Fraction(m * s, t) + Fraction(s, t) + 10) * Fraction(1, 10 ** (digits - 2))
    scaled = Fraction(value) * (1 << bits)
    return math.floor(scaled * (1 - delta)), math.ceil(scaled * (1 + delta))


@dataclass(frozen=True)
class Table:
    """Brackets A_m <= 2^63 T_m <= B_m, m = 1..M, as uint64 arrays padded with A_0 = B_0 = 2^63
    and A_(M+1) = B_(M+1) = 0, so that index k holds threshold k."""

    magnitude: bool
    s: int
    t: int
    lower: np.ndarray
    upper: np.ndarray
    window: int  # max_m (B_m - A_m): j - A_m >= window proves j >= B_m
    log_top: float  # ln(2^63 c), for the float guess

    @property
    def size(self) -> int:
        return self.lower.size - 2


@lru_cache(maxsize=16)
def table(magnitude: bool, s: int, t: int) -> Table:
    """The brackets of T_m for scale t/s (module doc); cost O(M) Python big-integer steps."""
    r_lo, r_hi = threshold_bounds(False, s, t, 1, _FIX)  # r in 2^-128 units
    if magnitude:  # c = 2 / (1 + r), in 2^-128 units, rounded outwards
        c_lo = (1 << (2 * _FIX + 1)) // ((1 << _FIX) + r_hi)
        c_hi = -(-(1 << (2 * _FIX + 1)) // ((1 << _FIX) + r_lo))
    else:
        c_lo = c_hi = 1 << _FIX
    shift = 2 * _FIX - WORD_BITS
    lower, upper = [1 << WORD_BITS], [1 << WORD_BITS]
    p_lo, p_hi = 1 << _FIX, 1 << _FIX  # bounds on 2^128 r^m, by induction on m
    while len(lower) <= _MAX_ENTRIES:
        p_lo = (p_lo * r_lo) >> _FIX
        p_hi = -(-(p_hi * r_hi) >> _FIX)
        a = (c_lo * p_lo) >> shift
        if len(lower) > 1 and a < _FLOOR:
            break
        lower.append(a)
        upper.append(-(-(c_hi * p_hi) >> shift))
    lower.append(0)
    upper.append(0)
    lo = np.array(lower, dtype=np.uint64)
    hi = np.array(upper, dtype=np.uint64)
    if not np.all(lo[1:-1] >= hi[2:]):  # each bracket lies above the next: one open threshold per j
        raise AssertionError(f"discrete Laplace table brackets overlap at scale {t}/{s}")
    window = int((hi[1:-1] - lo[1:-1]).max()) + 1
    log_top = WORD_BITS * math.log(2.0) + (math.log(2.0 / (1.0 + math.exp(-s / t))) if magnitude else 0.0)
    return Table(magnitude, s, t, lo, hi, window, log_top)


def exact_below(tab: Table, m: int, j: int, words) -> bool:
    """Whether U < T_m for U = (j + V) / 2^63, drawing V 64 bits at a time until decided."""
    value, bits = int(j), WORD_BITS
    while True:
        lo, hi = threshold_bounds(tab.magnitude, tab.s, tab.t, m, bits)
        if value + 1 <= lo:
            return True
        if value >= hi:
            return False
        value = (value << 64) | int(words(1)[0])
        bits += 64


def counts(tab: Table, j: np.ndarray, words) -> np.ndarray:
    """#{m in 1..M : U < T_m} for each j (uint64 below 2^63, overwritten), decided exactly
    (module doc)."""
    size = tab.size
    guess = j.astype(np.float64)
    guess += 0.5
    np.log(guess, out=guess)  # cost: the float guess, ~5 passes over the block
    np.subtract(tab.log_top, guess, out=guess)
    guess *= tab.t / tab.s
    np.clip(guess, 0.0, float(size), out=guess)
    k = guess.astype(np.int64)
    above = tab.lower[1:][k]  # A_(k+1): j must not be below it
    wrong = np.flatnonzero((j >= tab.lower[k]) | (j < above))
    if wrong.size:  # recount by binary search: A_m > j for m = 1..k exactly
        ascending = tab.lower[size:0:-1]
        k[wrong] = size - np.searchsorted(ascending, j[wrong], side="right")
        above[wrong] = tab.lower[k[wrong] + 1]
    j -= above  # j - A_(k+1) >= 0; below the window, j may lie inside the bracket of T_(k+1)
    near = np.flatnonzero(j < np.uint64(tab.window))
    if near.size:  # A_(k+1) <= j < B_(k+1): is U below T_(k+1)?  (probability <= 2^-61 each)
        j += above
        near = near[(k[near] < size) & (j[near] < tab.upper[k[near] + 1])]
        for i in near:
            k[i] += exact_below(tab, int(k[i]) + 1, int(j[i]), words)
    return k


_BLOCK = 1 << 16  # draws per block: the block's temporaries stay in cache


def sample(s: int, t: int, count: int, words) -> np.ndarray:
    """``count`` exact discrete Laplace draws of scale t/s (int64) from ``words(n)``, a source
    of n uniform uint64 words."""
    magnitudes = table(True, s, t)
    out = np.empty(count, dtype=np.int64)
    for start in range(0, count, _BLOCK):  # cost: ~30 ns per draw (loaded 2-core box)
        w = words(min(_BLOCK, count - start))
        magnitude = counts(magnitudes, w >> np.uint64(1), words)
        tail = np.flatnonzero(magnitude == magnitudes.size)
        while tail.size:  # |K| >= M: add a geometric, repeated at the end of its own table
            geometric = table(False, s, t)
            extra = counts(geometric, words(tail.size) >> np.uint64(1), words)
            magnitude[tail] += extra
            tail = tail[extra == geometric.size]
        negative = (w & np.uint64(1)).astype(bool)
        np.negative(magnitude, out=magnitude, where=negative)
        out[start : start + w.size] = magnitude
    return out

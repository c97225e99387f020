"""The exact exponential-mechanism sampler: a choice among outcomes with probability proportional
to exp(score), drawn in exact arithmetic from the secure source (no floating-point leakage).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from ..errors import ParameterError
from .noise import MIN_SCALE

#: The largest factor gamma of an exponential mechanism (P(r) proportional to exp(-gamma
#: score_r), gamma = epsilon / (2 Delta)): 1 / MIN_SCALE of discrete Laplace noise (128), the
#: same floor as the additive noise (:data:`dprange.privacy.noise.MIN_SCALE`).  An outcome a score unit
#: worse is then already e^128 times less likely, so a larger gamma could change no answer;
#: the exact samplers work with gamma x score in floats, whose slack grows as gamma n 2^-45,
#: so a huge gamma would break them.  Lowering gamma only lowers the privacy loss.
MAX_SELECTION_GAMMA = Fraction(1) / Fraction(MIN_SCALE["discrete_laplace"])


def selection_gamma_at_most(gamma: Fraction) -> Fraction:
    """An exponential mechanism's factor ``gamma``, lowered to :data:`MAX_SELECTION_GAMMA`."""
    return min(Fraction(gamma), MAX_SELECTION_GAMMA)


MAX_GRID = 2**30  # grid points (cells x sub-cells) the exact sampler accepts


_WORD = 62  # bits of one uniform word


_TOTAL_BITS = 61  # the proposal's integer weights sum to less than 2^61


def _decimal_probability(exponent: Fraction, scale_bits: int, divisor: int, digits: int) -> Decimal:
    """2^scale_bits exp(-exponent) / divisor in Decimal, relative error below 10^-(digits-3)."""
    with localcontext() as ctx:
        ctx.prec = digits
        ctx.Emin, ctx.Emax = -(10**15), 10**15
        power = Decimal(-exponent.numerator) / Decimal(exponent.denominator)
        return Decimal(2) ** scale_bits * power.exp() / Decimal(divisor)


def _accept(log_p: float, margin: float, exact_p: Callable[[int], Decimal], rng) -> bool:
    """True with probability exactly p (<= 1), given a float log p within ``margin`` of the truth.

    A uniform U in [0, 1) is read lazily, 62 bits at a time: U < p is decided in floating
    point when U's interval [M 2^-k, (M + 1) 2^-k) lies clear of p's error interval, else by
    Decimal arithmetic at growing precision with more bits of U (rare: about 2^-40 of draws).
    """
    return accept_word(int(rng.integers(0, 2**_WORD)), log_p, margin, exact_p, rng)


def uniform_words(count: int, rng) -> np.ndarray:
    """``count`` uniform words on [0, 2^62) (the first word of each :func:`accept_word`)."""
    return np.asarray(rng.integers(0, 2**_WORD, size=count), dtype=np.int64)


def accept_word(word: int, log_p: float, margin: float, exact_p: Callable[[int], Decimal], rng) -> bool:
    """:func:`_accept` given the first uniform word (from :func:`uniform_words`); further words,
    when the float test cannot decide, come from ``rng``."""
    if word + 1 < 2**_WORD and math.log((word + 1) / 2**_WORD) <= log_p - margin:
        return True
    if word > 0 and math.log(word / 2**_WORD) >= log_p + margin:
        return False
    bits, digits = _WORD, 60
    while True:
        p = exact_p(digits)
        with localcontext() as ctx:
            ctx.prec = digits + 10
            ctx.Emin, ctx.Emax = -(10**15), 10**15
            slack = Decimal(10) ** (6 - digits)
            scale = Decimal(2) ** bits
            if Decimal(word + 1) <= p * (1 - slack) * scale:
                return True
            if Decimal(word) >= p * (1 + slack) * scale:
                return False
        word = word * 2**_WORD + int(rng.integers(0, 2**_WORD))
        bits += _WORD
        digits += 40


def exact_choice(
    sizes: np.ndarray,
    exponents: np.ndarray,
    slack: np.ndarray,
    exact_exponent: Callable[[int], Fraction],
    rng,
) -> tuple[int, int]:
    """(r, offset) with P(r) = size_r exp(-g_r) / sum_s size_s exp(-g_s), offset uniform on
    [0, size_r): exactly, for exact exponents g_r >= 0 given as ``exact_exponent(r)``.

    ``exponents`` are floats within ``slack`` of the g_r.  Proposal: r with probability
    proportional to size_r R_r for integers R_r >= 2^B exp(-g_r) (from the floats, rounded up
    past their error); accept with probability 2^B exp(-g_r) / R_r (:func:`_accept`), which is
    at least 1 - 2^-30 for every run within 30 bits of the best.  With min g_r = 0 the
    expected number of proposals is below 2.  The sizes must sum to at most 2^30.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    total_size = int(sizes.sum())
    if total_size < 1 or total_size > MAX_GRID:
        raise ParameterError(f"the exact sampler needs between 1 and {MAX_GRID} candidates, got {total_size}")
    scale_bits = _TOTAL_BITS - 1 - total_size.bit_length()
    upper = np.ldexp(np.exp(-exponents + slack) * (1.0 + 2.0**-40), scale_bits)
    ratios = np.floor(upper).astype(np.int64) + 1  # R_r >= 2^B exp(-g_r) > R_r - 1 - tiny
    weights = sizes * ratios
    ends = np.cumsum(weights)
    margins = slack + (scale_bits + exponents + np.log(ratios) + 8.0) * 2.0**-48
    log_p = scale_bits * math.log(2.0) - exponents - np.log(ratios)
    while True:
        draw = int(rng.integers(0, int(ends[-1])))
        r = int(np.searchsorted(ends, draw, side="right"))
        ratio = int(ratios[r])
        offset = (draw - (int(ends[r]) - int(weights[r]))) // ratio

        def exact_p(digits, r=r, ratio=ratio):
            return _decimal_probability(exact_exponent(r), scale_bits, ratio, digits)

        if _accept(float(log_p[r]), float(margins[r]), exact_p, rng):
            return r, offset

"""The one-word inverse-CDF discrete Laplace sampler (dprange.privacy._laplace_table): the sampler is
a deterministic function of its uniform bits, checked against an independent 120-digit inverse
CDF at the words that matter: both sides of every threshold bracket, and open brackets that
need more bits."""

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from dprange.privacy import _laplace_table as lt


def _ln(value) -> Decimal:
    return Decimal(value.numerator).ln() - Decimal(value.denominator).ln()


def reference_count(u: Fraction, magnitude: bool, s: int, t: int) -> int:
    """#{m >= 1 : u < c r^m}, r = e^(-s/t), c = 2/(1 + r) (magnitude) or 1: by logarithms at
    120 digits, independently of the library's tables."""
    if u == 0:
        return 2**62  # below every threshold
    with localcontext() as context:
        context.prec = 120
        log_r = -Decimal(s) / Decimal(t)
        log_c = (Decimal(2) / (1 + log_r.exp())).ln() if magnitude else Decimal(0)
        ratio = (_ln(u) - log_c) / log_r  # u < c r^m  <=>  m < ratio
        if ratio <= 0:
            return 0
        whole = int(ratio.to_integral_value(rounding="ROUND_FLOOR"))
        return whole - 1 if whole == ratio else whole


def reference_draw(words: list, s: int, t: int) -> int:
    """The draw the module doc defines for the word sequence ``words`` (with 2 words of U)."""
    tab = lt.table(True, s, t)
    u = Fraction((words[0] >> 1) * 2**64 + words[1], 2**127)
    magnitude = reference_count(u, True, s, t)
    if magnitude >= tab.size:  # the tail: M plus geometrics from the next words (U at mid-grid)
        j = words[0] >> 1  # the next words: after V if j lay inside a bracket (V was drawn)
        opened = bool(np.any((tab.lower[1:-1] <= j) & (j < tab.upper[1:-1])))
        magnitude, geometric, i = tab.size, lt.table(False, s, t), 2 if opened else 1
        while True:
            extra = reference_count(Fraction(2 * (words[i] >> 1) + 1, 2**64), False, s, t)
            magnitude += min(extra, geometric.size)
            if extra < geometric.size:
                break
            i += 1
    return -magnitude if words[0] & 1 else magnitude


class Words:
    """A scripted source of uint64 words."""

    def __init__(self, values):
        self.values = [int(v) for v in values]

    def __call__(self, count):
        out, self.values = self.values[:count], self.values[count:]
        assert len(out) == count, "the sampler drew more words than scripted"
        return np.array(out, dtype=np.uint64)


SCALES = [(2, 5), (3, 10), (1, 1), (5, 2), (1, 37), (1, 3000)]  # (s, t): b = t / s


@pytest.mark.parametrize("s, t", SCALES)
def test_table_brackets_hold_the_exact_thresholds(s, t):
    """A_m <= 2^63 T_m <= B_m for every entry (an independent 120-digit exp), B - A <= 2, and
    the table stops where its thresholds fall below 2^-39."""
    for magnitude in (True, False):
        tab = lt.table(magnitude, s, t)
        m = np.arange(1, tab.size + 1)
        if m.size > 400:
            m = np.unique(np.concatenate([m[:100], m[-100:], np.random.default_rng(0).choice(m, 200)]))
        with localcontext() as context:
            context.prec = 120
            r = (-Decimal(s) / Decimal(t)).exp()
            c = 2 / (1 + r) if magnitude else Decimal(1)
            for k in m.tolist():
                exact = c * (-(Decimal(k * s) / Decimal(t))).exp() * 2**63
                assert int(tab.lower[k]) <= exact <= int(tab.upper[k]), (magnitude, k)
                assert int(tab.upper[k]) - int(tab.lower[k]) <= 2
        # the table ends where the next bracket would fall below 2^24 (or at 2^17 entries)
        assert tab.size == 1 << 17 or int(tab.lower[tab.size]) * math.exp(-s / t) < 2**24 + 2
        assert int(tab.lower[tab.size]) >= 2**24 or tab.size == 1


@pytest.mark.parametrize("s, t", SCALES)
def test_draws_are_the_exact_inverse_cdf_at_and_around_every_bracket(s, t):
    """Words whose U sits just below, inside and just above brackets (open ones need the next
    word), and U tiny (the tail): the sampler returns exactly the reference inverse CDF."""
    tab = lt.table(True, s, t)
    rng = np.random.default_rng(s * 1000 + t)
    ms = sorted({1, 2, tab.size // 2 or 1, tab.size} | set(rng.integers(1, tab.size + 1, 5).tolist()))
    js = []
    for m in ms:
        a, b = int(tab.lower[m]), int(tab.upper[m])
        js += [a - 1, a, b - 1, b, b + 1]
    js += [0, 1, 7, 2**63 - 1] + rng.integers(0, 2**63, 20).tolist()
    tails = 0
    for j in js:
        for low in (0, 1):  # the sign bit
            for v in (0, 2**63, 2**64 - 1, int(rng.integers(0, 2**63))):
                words = [(j << 1) | low, v, int(rng.integers(0, 2**63)) << 1, 0]
                got = int(lt.sample(s, t, 1, Words(words + [0] * 4))[0])
                assert got == reference_draw(words, s, t), (j, low, v)
                tails += abs(got) >= tab.size
    assert tails > 0  # j = 0, 1, 7 reach the tail


def test_open_brackets_draw_more_bits_until_decided():
    """At j = A_m (inside the bracket) the first word cannot decide; the sampler takes more
    words, and U = (j + V) / 2^63 is compared with T_m exactly."""
    s, t = 3, 10
    tab = lt.table(True, s, t)
    m = 2
    j = int(tab.lower[m])
    assert j < int(tab.upper[m])  # open
    lo, hi = lt.threshold_bounds(True, s, t, m, 127)
    v_edge = lo - j * 2**64  # U just below / at the threshold in 2^-127 units
    assert 0 <= v_edge < 2**64 - 1
    below = Words([j << 1, v_edge - 1])
    assert int(lt.sample(s, t, 1, below)[0]) == m  # consumed the second word
    above = Words([j << 1, hi - j * 2**64])
    assert int(lt.sample(s, t, 1, above)[0]) == m - 1

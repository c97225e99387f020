"""dprange.privacy.exact_choice: the exact sampler of the exponential mechanism draws with its
weights, through the Decimal fallback and far in the tail."""

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
from _helpers import chi_square_p
from scipy import stats

from dprange.privacy import exact_choice as exact_choice_module

P_FLOOR = 1e-4


# ----------------------------------------------------------------------------- exact sampler


def test_exact_choice_matches_weights():
    sizes = np.array([3, 1, 4, 2])
    exponents = [Fraction(0), Fraction(1, 3), Fraction(5, 2), Fraction(7, 5)]
    floats = np.array([float(g) for g in exponents])
    rng = np.random.default_rng(1)
    draws = [
        exact_choice_module.exact_choice(sizes, floats, np.full(4, 1e-12), exponents.__getitem__, rng)
        for _ in range(6000)
    ]
    runs = np.array([r for r, _ in draws])
    expected = sizes * np.exp(-floats)
    assert chi_square_p(np.bincount(runs, minlength=4), expected / expected.sum()) > P_FLOOR
    # the offset is uniform inside the run
    offsets = np.array([o for r, o in draws if r == 2])
    assert chi_square_p(np.bincount(offsets, minlength=4), np.full(4, 0.25)) > P_FLOOR


def test_accept_decimal_fallback_has_probability_p():
    """A huge float margin forces every decision through the Decimal path: still Bernoulli(p)."""
    exponent = Fraction(3, 7)
    p = math.exp(-3 / 7)

    def exact_p(digits):
        return exact_choice_module._decimal_probability(exponent, 0, 1, digits)

    rng = np.random.default_rng(2)
    hits = sum(exact_choice_module._accept(math.log(p), 1e9, exact_p, rng) for _ in range(4000))
    assert stats.binomtest(hits, 4000, p).pvalue > P_FLOOR
    assert abs(float(exact_p(60)) - p) < 1e-15
    assert isinstance(exact_p(60), Decimal)


def test_exact_choice_far_tail_is_reachable_only_by_its_weight():
    """Exponents beyond float range (exp underflows) keep a positive weight, never above it."""
    sizes = np.array([1, 1])
    exponents = [Fraction(0), Fraction(2000)]
    rng = np.random.default_rng(3)
    runs = [
        exact_choice_module.exact_choice(sizes, np.array([0.0, 2000.0]), np.full(2, 1e-9), exponents.__getitem__, rng)[
            0
        ]
        for _ in range(500)
    ]
    assert runs == [0] * 500

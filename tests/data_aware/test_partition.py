"""DAWA's private partition (dprange.data_aware.partition): the scaled deviations, the partition
against a brute-force minimiser of the same noisy cost, the neighbour ratio on tiny domains
(exact output probabilities), and why it keeps aligned dyadic candidates: overlapping candidates
with Laplace noise at their own sensitivity make a minimiser that is not eps1-DP."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from _helpers import grid_neighbours, output_probabilities
from scipy import integrate

from dprange.data_aware.partition import (
    dyadic_levels,
    dyadic_partition,
    noisy_level_costs,
    partition_noise,
    scaled_deviations,
)


def test_scaled_deviations_are_size_times_l1_deviation():
    x = np.array([3, 0, 7, 7, 1, 2, 9, 4, 5, 0, 0], dtype=np.int64)
    for size in (2, 4, 8, 16):
        sizes, costs = scaled_deviations(x, size)
        starts = np.arange(0, x.size, size)
        expected = [s * dev(x[a : a + s]) for a, s in zip(starts, sizes)]
        np.testing.assert_allclose(costs, expected, atol=1e-9)


def interval_costs(level_costs, n):
    """Cost of every candidate bucket [a, b) of two or more bins (its lowest level)."""
    cost_of = {}
    for level, size in zip(level_costs, dyadic_levels(n)):
        for j, c in enumerate(level):
            a, b = j * size, min(j * size + size, n)
            if b - a > 1:
                cost_of.setdefault((a, b), c)
    return cost_of


def partition_cost(cost_of, n, penalty, starts):
    total = 0.0
    for a, b in zip(starts, list(starts[1:]) + [n]):
        if b - a > 1 and (a, b) not in cost_of:
            return math.inf
        total += penalty + (cost_of[(a, b)] if b - a > 1 else 0.0)
    return total


def brute_force(level_costs, n, penalty):
    """Minimum over every partition of 0..n-1 into intervals (2^(n-1) of them)."""
    cost_of = interval_costs(level_costs, n)
    best = (math.inf, None)
    for cuts in itertools.product((0, 1), repeat=n - 1):
        starts = [0] + [i + 1 for i, c in enumerate(cuts) if c]
        total = partition_cost(cost_of, n, penalty, starts)
        if total < best[0] - 1e-12:
            best = (total, starts)
    return best


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9])
def test_partition_equals_brute_force_minimiser_of_the_noisy_cost(n):
    rng = np.random.default_rng(n)
    for _ in range(30):
        x = rng.integers(0, 6, size=n)
        penalty = float(rng.choice([0.5, 2.0, 5.0]))
        costs = [
            c / s + rng.normal(scale=3.0, size=c.size)
            for size in dyadic_levels(n)
            for s, c in [scaled_deviations(x, size)]
        ]
        starts = dyadic_partition(costs, n, penalty)
        best, brute = brute_force(costs, n, penalty)
        assert partition_cost(interval_costs(costs, n), n, penalty, starts.tolist()) == pytest.approx(best, abs=1e-9)
        assert starts.tolist() == brute


@pytest.mark.parametrize(("neighbours", "changed"), [("add_remove", 1), ("replace", 2)])
def test_partition_neighbour_ratio_is_at_most_e_to_its_share(neighbours, changed):
    epsilon, penalty = 2.0, 1.5
    worst = 0.0
    rng = np.random.default_rng(3)
    bases = [np.array(v) for v in ([0, 0, 0, 0], [3, 0, 0, 3], [1, 2, 0, 4])] + [
        rng.integers(0, 5, 4) for _ in range(3)
    ]
    for x in bases:
        p = output_probabilities(x, epsilon, penalty, changed)
        for y in grid_neighbours(x, neighbours):
            q = output_probabilities(y, epsilon, penalty, changed)
            for key in p:
                if min(p[key], q[key]) > 1e-12:
                    worst = max(worst, abs(math.log(p[key] / q[key])))
    assert worst <= epsilon + 1e-9
    assert worst > 0.2 * epsilon  # the test is sensitive: the noise does depend on the data


def test_partition_noise_spends_exactly_its_share():
    for n, changed in [(2, 1), (4, 2), (13, 1), (4096, 1)]:
        specs = partition_noise(n, 0.3, changed)
        sizes = [min(s, n) for s in dyadic_levels(n)]
        loss = sum(Fraction(2 * changed * (s - 1)) / Fraction(sp.effective_scale) for s, sp in zip(sizes, specs))
        assert loss <= Fraction(0.3)
        assert float(loss) == pytest.approx(0.3, rel=1e-9)


def dev(v) -> float:
    v = np.asarray(v, dtype=float)
    return float(np.abs(v - v.mean()).sum())


def laplace_sf(t, b):
    return 0.5 * math.exp(-t / b) if t >= 0 else 1 - 0.5 * math.exp(t / b)


def p_left_pair(x, penalty, b2, b3) -> float:
    """P(the minimiser over all partitions of 3 bins is {[0, 1], [2]}) with costs dev(B) + Z_B
    + penalty for the candidates [0,1], [1,2] (scale b2) and [0,2] (scale b3), singletons
    penalty: Z_01 < penalty - c01, Z_12 > Z_01 + c01 - c12, Z_012 > Z_01 + c01 + penalty - c012."""
    c01, c12, c012 = dev(x[:2]), dev(x[1:]), dev(x)

    def density(z):
        return (
            math.exp(-abs(z) / b2) / (2 * b2) * laplace_sf(c01 + z - c12, b2) * laplace_sf(c01 + z + penalty - c012, b3)
        )

    kinks = [0.0, c12 - c01, c012 - c01 - penalty]
    top = penalty - c01
    value, _ = integrate.quad(
        density, -400 * max(b2, b3), top, points=[k for k in kinks if k < top], limit=800, epsabs=0, epsrel=1e-11
    )
    return value


def test_per_interval_calibration_of_overlapping_candidates_is_not_private():
    eps1, n, penalty = 1.0, 3, 24.0
    b2, b3 = (2 - 1 / 2 - 1 / n) / eps1, (2 - 1 / 3 - 1 / n) / eps1  # scale (2 - 1/|B| - 1/n) / eps1
    x, y = (40, 1, 0), (40, 2, 0)  # neighbours: one record added to bin 1
    loss = math.log(p_left_pair(y, penalty, b2, b3) / p_left_pair(x, penalty, b2, b3))
    assert loss > 1.5 * eps1  # 1.67 eps1: the three costs move together in the event's favour


def test_noisy_costs_are_clamped_at_zero_and_keep_their_calibration():
    x = np.zeros(64, dtype=np.int64)
    x[10] = 3
    specs = partition_noise(64, 0.05, 1)
    costs = noisy_level_costs(x, specs, np.random.default_rng(0))
    assert len(costs) == len(dyadic_levels(64))
    assert all(np.all(c >= 0) for c in costs)
    assert sum(np.sum(c == 0) for c in costs) > 10  # the noise swamps the deviation: many clamped

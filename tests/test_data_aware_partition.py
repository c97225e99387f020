"""Why DAWA's partition keeps aligned dyadic candidates (dprange.data_aware): noisy costs of
*overlapping* candidate intervals, each with Laplace noise at its own sensitivity (the
calibration of Li et al.'s code), make a minimiser that is not eps1-DP.  Exact output
probabilities on 3 bins (one-dimensional integrals, closed-form Laplace tails); and the
clamping of the noisy costs at 0 that the shipped partition applies (post-processing)."""

from __future__ import annotations

import math

import numpy as np
from scipy import integrate

from dprange.data_aware.partition import dyadic_levels, noisy_level_costs, partition_noise


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

"""DAWA's PrivTree partition (dprange.data_aware.privtree): the median deviation against brute
force and the two properties its privacy rests on, the loss bound against the sum it bounds,
the sampler against the law written out from the definition (tests/_helpers.privtree_law), and
that law against the definition of epsilon-DP on tiny domains, both neighbour relations (it
fails at a third of the noise scale)."""

from __future__ import annotations

import itertools
import math
from decimal import Decimal

import numpy as np
import pytest
from _helpers import assert_draws_follow_law, grid_neighbours, median_deviation, privtree_law, worst_partition_loss

from dprange.data_aware.privtree import DEPTH_BIAS, median_deviations, privtree_loss, privtree_noise, privtree_partition
from dprange.errors import ParameterError


@pytest.mark.parametrize("n,size", [(16, 4), (13, 4), (7, 8), (9, 1), (33, 16)])
def test_median_deviations_equal_brute_force(n, size):
    x = np.random.default_rng(n * size).integers(0, 9, n)
    want = [median_deviation(x[s : s + size]) for s in range(0, n, size)]
    assert median_deviations(x, size).tolist() == want
    nodes = np.arange(len(want))[::2]
    assert median_deviations(x, size, nodes).tolist() == [want[k] for k in nodes]


def test_median_deviation_moves_by_one_record_at_most_and_shrinks_inside():
    """The proof's two properties: |d_x(B) - d_x'(B)| <= 1 for one record added or removed (the
    bound is reached), and d(B') <= d(B) for every interval B' inside B."""
    rng = np.random.default_rng(1)
    moved = 0
    for _ in range(400):
        x = rng.integers(0, 6, rng.integers(1, 9))
        d = median_deviation(x)
        for y in grid_neighbours(x, "add_remove"):
            moved = max(moved, abs(median_deviation(y) - d))
        for a, b in itertools.combinations(range(x.size + 1), 2):
            assert median_deviation(x[a:b]) <= d
    assert moved == 1


def exact_tail(t: float, bias: int, terms: int = 400) -> float:
    """2 / t + sum_j R(j delta), R(z) = ln((1 + p - p^z) / (1 + p - p^(z - 1))), by summation."""
    p = math.exp(-1 / t)
    z = [j * bias for j in range(1, terms)]
    return 2 / t + math.fsum(math.log1p((p ** (k - 1) - p**k) / (1 + p - p ** (k - 1))) for k in z)


@pytest.mark.parametrize("t,bias", [(1.0, 1), (3.0, 2), (37.0, 26), (150.0, 104), (4.0, 7)])
def test_loss_bound_is_above_the_sum_it_bounds_and_close_to_it(t, bias):
    exact, bound = exact_tail(t, bias), float(privtree_loss(t, bias))
    assert exact * (1 - 1e-13) <= bound <= exact * (1 + 1e-12)


def path_losses(d, d_other, t: float, bias: int, theta: int) -> list[float]:
    """The log-ratio P_x(O) / P_x'(O) of every output O on one root-to-leaf path of decision
    nodes with median deviations ``d`` (x) and ``d_other`` (x'), from the definition: O splits
    the first K nodes and keeps node K whole (K < L), or splits all L."""
    p = math.exp(-1 / t)

    def split_whole(b: int) -> tuple[float, float]:
        """P(b + Z > theta) and P(b + Z <= theta), Z discrete Laplace, each from its own tail."""
        m = theta - b + 1  # split iff Z >= m
        tail = p ** abs(m - 1 if m < 1 else m) / (1 + p)
        return (tail, 1 - tail) if m >= 1 else (1 - tail, tail)

    def log_probs(dev) -> list[float]:
        out, above = [], 0.0
        for k, v in enumerate(dev):
            split, whole = split_whole(max(v - k * bias, theta - bias))
            out.append(above + math.log(whole))
            above += math.log(split)
        return out + [above]

    return [a - b for a, b in zip(log_probs(d), log_probs(d_other))]


@pytest.mark.parametrize("t,bias,gap", [(3.0, 1, 1.01), (6.0, 3, 0.25), (20.0, 7, 0.11), (50.0, 17, 0.05)])
def test_loss_bound_holds_on_deep_paths_and_is_reached_by_a_spike(t, bias, gap):
    """The bound's case analysis on paths of 24 decision levels, far deeper than the tiny
    domains below: for non-increasing deviations and neighbours moving each by at most 1, no
    output's log-ratio exceeds the bound; a spike (the same deviation all the way down, one
    record removed) comes within ``gap`` / t of it (at delta / t near DEPTH_BIAS within 0.05 /
    t; at delta = 1, where R(1) = R(0), within 1.01 / t), so a bound smaller by 1/t, the cost
    of one node at the threshold, would not hold."""
    bound = float(privtree_loss(t, bias))
    theta, levels = 5, 24
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(3000):
        d = np.maximum(rng.integers(0, 12 * bias) - np.cumsum(rng.choice([0, 0, 0, 1, 2, bias], levels)), 0)
        other = np.minimum.accumulate(np.maximum(d + rng.integers(-1, 2, levels), 0))
        if np.all(np.abs(other - d) <= 1):
            worst = max(worst, *map(abs, path_losses(d.tolist(), other.tolist(), t, bias, theta)))
    spike = max(
        max(map(abs, path_losses([m] * levels, [m + step] * levels, t, bias, theta)))
        for m in range(theta, theta + (levels + 2) * bias)
        for step in (-1, 1)
    )
    assert max(worst, spike) <= bound * (1 + 1e-12)
    assert spike > bound - gap / t


@pytest.mark.parametrize("epsilon", [0.01, 0.025, 0.3, 1.0, 2.0, 7.5])
@pytest.mark.parametrize("changed", [1, 2])
def test_noise_is_calibrated_to_the_bound(epsilon, changed):
    spec, bias = privtree_noise(epsilon, changed)
    assert spec.effective_scale == spec.scale and (spec.scale * 64).is_integer()
    assert privtree_loss(spec.scale, bias) <= Decimal(epsilon) / changed
    # one grid step less does not pass (at the bias that step would take)
    smaller = spec.scale - 1 / 64
    assert privtree_loss(smaller, max(1, round(smaller * DEPTH_BIAS))) > Decimal(epsilon) / changed
    assert bias == max(1, round(spec.scale * DEPTH_BIAS))


@pytest.mark.parametrize("epsilon,changed", [(0.0, 1), (-1.0, 1), (float("nan"), 1), (float("inf"), 2), (1.0, 3)])
def test_noise_refuses_a_bad_epsilon_or_relation(epsilon, changed):
    with pytest.raises(ParameterError):
        privtree_noise(epsilon, changed)


@pytest.mark.parametrize(
    "x,epsilon,threshold,changed", [([3, 0, 1, 5], 2.0, 1.0, 1), ([0, 9, 4, 0, 9, 1], 3.0, 2.0, 2)]
)
def test_sampler_draws_the_law(x, epsilon, threshold, changed):
    """At half the noise scale the law is visibly different (the check can fail)."""
    law = privtree_law(np.asarray(x), epsilon, threshold, changed)
    assert math.fsum(law.values()) == pytest.approx(1.0, abs=1e-12)
    assert_draws_follow_law(
        lambda rng: privtree_partition(np.asarray(x), epsilon, threshold, changed, rng),
        law,
        draws=20000,
        seed=11,
        sharper=privtree_law(np.asarray(x), epsilon, threshold, changed, scale_factor=0.5),
    )


RELATIONS = ("add_remove", "replace")


def worst_loss(n, top, epsilon, threshold, relation, scale_factor=1.0):
    changed = 2 if relation == "replace" else 1
    return worst_partition_loss(lambda x: privtree_law(x, epsilon, threshold, changed, scale_factor), n, top, relation)


@pytest.mark.parametrize(
    "n,top,epsilon,threshold,relation",
    [
        *[
            (*case, relation)
            for case in [(4, 6, 2.0, 1.0), (5, 4, 1.0, 0.0), (6, 3, 2.0, 0.0)]
            for relation in RELATIONS
        ],
        # three decision levels; under replace the loss here is 0.28 epsilon, too loose to fail at 1/3
        (8, 1, 3.0, 0.0, "add_remove"),
    ],
)
def test_law_is_epsilon_dp_on_tiny_domains(n, top, epsilon, threshold, relation):
    """Every vector of counts 0..top and each neighbour: the log-ratio of every partition's
    probability is at most epsilon (and at least a quarter of it: the bound, a sum over paths
    of any depth, is loose on so few levels, 0.37-0.55 epsilon here); at a third of the noise
    scale it is above epsilon on the same vectors (the check can fail)."""
    worst = worst_loss(n, top, epsilon, threshold, relation)
    assert 0.25 * epsilon <= worst <= epsilon + 1e-9
    assert worst_loss(n, top, epsilon, threshold, relation, scale_factor=1 / 3) > epsilon


def test_partition_follows_the_signal():
    """Strong signal splits down to it, flat and empty runs stay whole."""
    rng = np.random.default_rng(2)
    x = np.zeros(256, dtype=np.int64)
    x[37] = 10**6
    starts = privtree_partition(x, 1.0, 1.0, 1, rng)
    assert 37 in starts and 38 in starts
    assert privtree_partition(np.zeros(1024, dtype=np.int64), 0.1, 10.0, 1, rng).size <= 4
    assert privtree_partition(np.full(1024, 50), 0.1, 10.0, 1, rng).size <= 4
    assert privtree_partition(np.array([4]), 1.0, 1.0, 1, rng).tolist() == [0]

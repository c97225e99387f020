"""DAWA's Gibbs partition (dprange.data_aware.partition.gibbs_partition): its law written out by
enumerating every aligned dyadic partition, the sampler against that law (float path and the
exact Decimal path), and the law against the definition of epsilon-DP on tiny domains, both
neighbour relations (it fails at four times the factor 1 / T)."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import assert_draws_follow_law, dyadic_partitions, gibbs_law, worst_partition_loss

from dprange.data_aware import partition as partition_module
from dprange.data_aware.partition import gibbs_partition


def test_dyadic_partitions_are_the_aligned_ones():
    assert dyadic_partitions(4) == [(0,), (0, 1, 2), (0, 1, 2, 3), (0, 2), (0, 2, 3)]
    assert dyadic_partitions(3) == [(0,), (0, 1, 2), (0, 2)]
    assert len(dyadic_partitions(8)) == 26  # Z(8) = 1 + Z(4)^2, Z(4) = 1 + Z(2)^2 = 5


@pytest.mark.parametrize("x,epsilon,penalty,changed", [([3, 0, 1, 5], 1.0, 0.5, 1), ([0, 4, 4, 0, 9, 1], 2.0, 0.25, 2)])
@pytest.mark.slow
def test_sampler_draws_the_gibbs_law(x, epsilon, penalty, changed):
    """At 2x the factor 1/T the law is visibly different (the check can fail)."""
    assert_draws_follow_law(
        lambda rng: gibbs_partition(np.asarray(x), epsilon, penalty, changed, rng),
        gibbs_law(np.asarray(x), epsilon, penalty, changed),
        draws=20000,
        seed=7,
        sharper=gibbs_law(np.asarray(x), epsilon, penalty, changed, gamma_factor=2.0),
    )


@pytest.mark.slow
def test_exact_decimal_path_draws_the_same_law(monkeypatch):
    """With the float error bound set huge, every draw is decided in Decimal arithmetic."""
    monkeypatch.setattr(partition_module, "_FLOAT_SLACK", 1.0)
    x = np.array([3, 0, 1, 5])
    draw = lambda rng: gibbs_partition(x, 1.0, 0.5, 1, rng)  # noqa: E731
    assert_draws_follow_law(draw, gibbs_law(x, 1.0, 0.5, 1), draws=3000, seed=3)


def test_sure_choices_follow_the_deviations():
    """At the largest factor 1/T a spike is cut out and the flat runs around it merged."""
    x = np.zeros(8, dtype=np.int64)
    x[4] = 50
    assert gibbs_partition(x, 1e6, 0.01, 1, np.random.default_rng(0)).tolist() == [0, 4, 5, 6]
    assert gibbs_partition(np.full(5, 7), 1e6, 0.01, 1, np.random.default_rng(0)).tolist() == [0]
    assert gibbs_partition(np.array([4]), 1.0, 1.0, 1, np.random.default_rng(0)).tolist() == [0]


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("n", [3, 4])
def test_gibbs_law_is_epsilon_dp(relation, n):
    """Every vector with counts 0..3 on n bins and each neighbour: |log P_x(P) - log P_y(P)| <=
    epsilon for every partition P.  The exponential mechanism's bound 2 Delta / T is loose on so
    small a domain (a deviation moves by at most 2 (1 - 1/4) there, and the score and the
    normaliser rarely move by their bounds together): the loss is about 0.3 epsilon, and at four
    times the factor 1 / T it exceeds epsilon on 4 bins, so the check can fail."""
    epsilon, penalty = 0.7, 0.3
    changed = 2 if relation == "replace" else 1

    def worst(factor):
        return worst_partition_loss(lambda x: gibbs_law(x, epsilon, penalty, changed, factor), n, 3, relation)

    assert 0.2 * epsilon <= worst(1.0) <= epsilon + 1e-12
    if n == 4:
        assert worst(4.0) > 1.2 * epsilon

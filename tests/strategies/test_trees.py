"""dprange.strategies.trees: closed-form sensitivities of trees and Haar against the dense
definition, the tree operator against its dense matrix, and the branching checks."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from _helpers import CASES

from dprange import ParameterError
from dprange.strategies.trees import HaarStrategy, Strategy, TreeStrategy, dense_sensitivity_power


def test_strategy_sensitivity_is_that_of_its_weighted_operator():
    tree = TreeStrategy(8, 2, measure_root=False)
    strategy = Strategy(tree.blocks(), [0.25, 0.25, 0.5], shape=tree)
    weighted = np.vstack([w * b.dense() for b, w in zip(strategy.blocks, strategy.budget)])
    for relation in ("add_remove", "replace"):
        for norm in (1, 2):
            assert float(strategy.sensitivity_power(norm, relation)) == pytest.approx(
                dense_sensitivity_power(weighted, relation, norm), rel=1e-12
            )
    np.testing.assert_allclose(strategy.operator([0.25, 0.25, 0.5]).dense(), weighted)


@pytest.mark.parametrize("n,branching,measure_root,known_total", CASES)
def test_tree_operator_matches_dense(n, branching, measure_root, known_total, rng):
    tree = TreeStrategy(n, branching, measure_root=measure_root, known_total=known_total)
    A = tree.dense()
    op = tree.operator()
    x = rng.normal(size=n)
    y = rng.normal(size=A.shape[0])
    np.testing.assert_allclose(op.matvec(x), A @ x)
    np.testing.assert_allclose(op.rmatvec(y), A.T @ y)
    # each level has L1 sensitivity 1: every leaf lies in exactly one node per measured level
    assert np.all(np.abs(A).sum(axis=0) == len(tree.measured_depths))


def test_branching_validation():
    with pytest.raises(ParameterError):
        TreeStrategy(10, 1)
    with pytest.raises(ParameterError, match="fewer than"):
        TreeStrategy(10, (2, 3))
    assert TreeStrategy(1000, 10).branching == (10, 10, 10)
    assert TreeStrategy(1001, 10).branching == (10, 10, 10, 10)
    assert list(itertools.accumulate(TreeStrategy(30, (2, 3, 5)).level_sizes)) == [1, 3, 9, 39]


def weighted_dense(strategy, weights):
    """The explicit strategy with the rows of measured level l multiplied by weights[l]."""
    if isinstance(strategy, HaarStrategy):
        sizes = [1 if level == 0 else 2 ** (level - 1) for level in strategy.measured_depths]
    else:
        sizes = [strategy.level_sizes[d] for d in strategy.measured_depths]
    A = strategy.dense().reshape(sum(sizes), strategy.n)
    return A * np.repeat(np.asarray(weights, dtype=float), sizes)[:, None]


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_closed_form_sensitivities_equal_the_dense_definition(relation):
    """Trees (many n, branchings, root choices) and Haar (n = 1..33): the closed forms of
    max_i ||W a_i||_p (add/remove) and max_{i != j} ||W (a_i - a_j)||_p (replace) equal the
    definition on the explicit weighted matrix, p = 1 and 2, for random per-level weights;
    with Fraction weights the closed form is exact (compared as rationals on integer weights)."""
    rng = np.random.default_rng(5)
    known = relation == "replace"
    strategies = [HaarStrategy(n, known_total=known) for n in range(1, 34)]
    for n in (1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 27, 30):
        for branching in (2, 3, 4, 16, [3, 2], [4, 4], [2, 5, 2], [8, 2, 2]):
            for root in (True, False):
                try:
                    strategies.append(TreeStrategy(n, branching, measure_root=root, known_total=known))
                except ParameterError:  # the factors cover fewer than n bins
                    continue
    checked = 0
    for strategy in strategies:
        levels = len(strategy.measured_depths)
        if levels == 0:
            continue
        for weights in (np.ones(levels), rng.uniform(0.05, 3.0, levels)):
            A = weighted_dense(strategy, weights)
            for p in (1, 2):
                closed = strategy.sensitivity_power(relation, p, weights)
                assert closed == pytest.approx(dense_sensitivity_power(A, relation, p), rel=1e-12, abs=1e-12)
                checked += 1
        integer_weights = rng.integers(1, 6, levels)
        exact = strategy.sensitivity_power(relation, 2, [Fraction(int(w)) for w in integer_weights])
        assert isinstance(exact, (int, Fraction))
        assert exact == dense_sensitivity_power(weighted_dense(strategy, integer_weights), relation, 2)
    assert checked > 500


def test_haar_replace_sensitivity_closed_form():
    """Uniform weights: the replace L2 sensitivity of Haar is sqrt(2 h + 2) (a record crossing
    the root's halves moves d_root by 2 and two differences by 1 on each lower level), not the
    sqrt(2 h) of per-level sqrt 2; L1 is 2 h."""
    for n, h in ((2, 1), (3, 2), (8, 3), (9, 4), (1000, 10)):
        strategy = HaarStrategy(n, known_total=True)
        assert strategy.sensitivity("replace", 2) == pytest.approx(math.sqrt(2 * h + 2))
        assert strategy.sensitivity("replace", 1) == pytest.approx(2 * h)

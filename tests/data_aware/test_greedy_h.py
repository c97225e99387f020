"""GreedyH, DAWA's second stage (dprange.data_aware.greedy_h): its error formula against the dense
matrix formula 2 (sens / eps)^2 trace(W (A^T A)^-1 W^T) / q, the Hierarchical that measures it
against the same formula, and the chosen weights never worse than the uniform hierarchies."""

from __future__ import annotations

import numpy as np
import pytest

from dprange.analysis import expected_error
from dprange.data_aware.dawa import DAWA
from dprange.data_aware.greedy_h import GRID, binary_tree, greedy_weights, hierarchy_of, skips, weighted_error
from dprange.mechanisms.basic import Hierarchical
from dprange.workloads import make_workload


def weighted_strategy(m: int, weights) -> np.ndarray:
    """Dense A = [c_d T_d]: the rows of the aligned binary nodes of depth d scaled by c_d."""
    tree = binary_tree(m, False)
    rows = []
    for d, c in enumerate(weights):
        if c == 0:
            continue
        size = tree.block_sizes[d]
        for start in range(0, m, size):
            row = np.zeros(m)
            row[start : min(start + size, m)] = c
            rows.append(row)
    return np.array(rows)


def dense_error(m, weights, workload, epsilon, changed=1, known_total=False):
    """2 (changed ||A||_1 / eps)^2 trace(W C W^T) / q, C = (A^T A)^-1, or with a public total
    C - C 1 (1^T C 1)^-1 1^T C (least squares under the constraint 1^T x = N)."""
    c = np.array(weights, dtype=float)
    if known_total:
        c[0] = 0.0
    A = weighted_strategy(m, c)
    W = make_workload(workload, m).dense()
    C = np.linalg.inv(A.T @ A)
    if known_total:
        one = np.ones(m)
        C = C - np.outer(C @ one, C @ one) / (one @ C @ one)
    sens = changed * np.abs(A).sum(axis=0).max()
    return 2 * (sens / epsilon) ** 2 * np.trace(W @ C @ W.T) / W.shape[0]


def random_weights(m, rng):
    h = binary_tree(m, False).depth
    c = rng.choice(GRID, size=h + 1)
    c[h] = rng.choice(GRID[1:])  # the leaves are always measured
    return c


@pytest.mark.parametrize("m", [2, 3, 5, 8, 11, 16])
@pytest.mark.parametrize("workload", ["all-range", "prefix", "identity"])
def test_weighted_error_equals_the_dense_matrix_formula(m, workload):
    rng = np.random.default_rng(m)
    for _ in range(4):
        c = random_weights(m, rng)
        for changed, known in [(1, False), (2, False), (2, True)]:
            got = weighted_error(m, c, workload, 0.7, changed=changed, known_total=known)
            want = dense_error(m, c, workload, 0.7, changed, known)
            assert got == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("m", [3, 6, 13])
def test_the_hierarchical_of_the_weights_has_the_dense_error(m):
    """The Hierarchical that DAWA measures (branching 2^gap, per-level budgets eps c_d / sum c)
    has exactly the weighted strategy's error (continuous Laplace: variance 2 b^2)."""
    rng = np.random.default_rng(100 + m)
    for _ in range(4):
        c = random_weights(m, rng)
        for neighbours, changed, known in [("add_remove", 1, False), ("replace", 2, True)]:
            tree, root, budget = hierarchy_of(c, 0.9, known_total=known)
            mech = Hierarchical(tree, budget, measure_root=root, neighbours=neighbours, noise="laplace_float")
            got = expected_error(mech, "all-range", 0.9, n=m)
            assert got == pytest.approx(dense_error(m, c, "all-range", 0.9, changed, known), rel=1e-9)


def test_hierarchy_of_skips_zero_depths_and_spends_at_most_epsilon():
    tree, root, budget = hierarchy_of([0.0, 0.0, 2.0, 0.0, 1.0], 0.3)
    assert tree == [4, 4] and root is False and budget == pytest.approx([0.2, 0.1])
    assert sum(budget) <= 0.3
    tree, root, budget = hierarchy_of([1.0, 1.0], 1.0)
    assert tree == [2] and root is True and budget == pytest.approx([0.5, 0.5])
    with pytest.raises(ValueError):
        hierarchy_of([1.0, 0.0], 1.0)


@pytest.mark.parametrize("m", [5, 16, 37, 100, 300])
@pytest.mark.parametrize("workload", ["all-range", "prefix"])
@pytest.mark.parametrize("known_total", [False, True])
def test_greedy_h_is_never_worse_than_the_uniform_hierarchies(m, workload, known_total):
    c = greedy_weights(m, workload, known_total=known_total)
    h = c.size - 1
    chosen = weighted_error(m, c, workload, 1.0, known_total=known_total)
    with_root = np.ones(h + 1)
    uniform = [with_root] + [skips(h, 1 if known_total else 0, k) for k in range(1, 7)]
    for u in uniform:
        assert chosen <= weighted_error(m, u, workload, 1.0, known_total=known_total) * (1 + 1e-12)


def test_greedy_h_beats_the_binary_and_the_best_hierarchy_on_small_reduced_domains():
    """Values: on 16 buckets, all ranges, GreedyH's error is 0.35 of the binary hierarchy's
    (it weights the leaves and skips the depths above: a 16-ary tree) and below the
    "best-hierarchy" choice among b = 4..64 (same noise, same epsilon)."""
    c = greedy_weights(16, "all-range")
    binary = np.ones(5)
    binary[0] = 0.0
    ratio = weighted_error(16, c, "all-range", 1.0) / weighted_error(16, binary, "all-range", 1.0)
    assert ratio == pytest.approx(0.34827, abs=1e-4)
    old = DAWA(second_stage="best-hierarchy").inner(16, 1.0)
    new = DAWA().inner(16, 1.0)
    old_err = expected_error(old, "all-range", 1.0, n=16)
    new_err = expected_error(new, "all-range", 1.0, n=16)
    assert new_err < 0.75 * old_err

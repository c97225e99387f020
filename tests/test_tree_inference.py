"""Tree GLS and exact range variances against the dense matrix formulas."""

import numpy as np
import pytest
from _helpers import CASES

from conftest import dense_gls, range_matrix
from dprange import ParameterError
from dprange.inference.least_squares import gls
from dprange.inference.tree import tree_gls
from dprange.inference.wavelet import haar_estimate
from dprange.strategies.trees import HaarStrategy, TreeStrategy


def _noisy_levels(tree, x, rng, per_node=False):
    sums = tree.level_sums(x)
    values = [None] * (tree.depth + 1)
    variances = [None] * (tree.depth + 1)
    for d in tree.measured_depths:
        size = tree.level_sizes[d]
        v = rng.uniform(0.3, 4.0, size) if per_node else rng.uniform(0.3, 4.0)  # unequal budgets
        values[d] = sums[d] + rng.normal(size=size) * np.sqrt(v)
        variances[d] = v
    return values, variances


def _stack(tree, values, variances):
    ys, vs = [], []
    for d in tree.measured_depths:
        ys.append(values[d])
        vs.append(np.broadcast_to(variances[d], values[d].shape))
    return np.concatenate(ys), np.concatenate(vs)


@pytest.mark.parametrize("n,branching,measure_root,known_total", CASES)
def test_tree_gls_equals_dense_formula(n, branching, measure_root, known_total, rng):
    tree = TreeStrategy(n, branching, measure_root=measure_root, known_total=known_total)
    x = rng.integers(0, 30, n).astype(float)
    values, variances = _noisy_levels(tree, x, rng, per_node=(n % 2 == 1))
    total = x.sum() if known_total else None
    est = tree_gls(tree, values, variances, total=total)
    y, v = _stack(tree, values, variances)
    reference, cov = dense_gls(tree.dense(), y, v, total)
    np.testing.assert_allclose(est.leaves, reference, atol=1e-9 * max(1, np.abs(reference).max()))
    lo, hi = np.triu_indices(n)
    Q = range_matrix(n, lo, hi)
    exact = np.einsum("ij,jk,ik->i", Q, cov, Q)
    np.testing.assert_allclose(est.range_variance(lo, hi), exact, rtol=1e-9, atol=1e-12)
    # internal nodes are consistent: every node equals the sum of its leaves
    for d in range(tree.depth + 1):
        np.testing.assert_allclose(est.node_estimate(d), tree.level_sums(est.leaves)[d], atol=1e-8)


@pytest.mark.parametrize("n,branching,measure_root,known_total", CASES[:5])
def test_iterative_gls_matches_tree_gls(n, branching, measure_root, known_total, rng):
    tree = TreeStrategy(n, branching, measure_root=measure_root, known_total=known_total)
    x = rng.integers(0, 30, n).astype(float)
    values, variances = _noisy_levels(tree, x, rng)
    total = x.sum() if known_total else None
    fast = tree_gls(tree, values, variances, total=total)
    y, v = _stack(tree, values, variances)
    slow = gls(tree.operator(), y, v, total=total)
    np.testing.assert_allclose(slow.leaves, fast.leaves, atol=1e-7)
    lo, hi = np.array([0, 2, n - 3]), np.array([n - 1, n // 2, n - 1])
    np.testing.assert_allclose(slow.range_variance(lo, hi), fast.range_variance(lo, hi), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("n,known_total", [(1, False), (6, False), (8, True), (13, False), (32, True)])
def test_haar_estimate_and_variance_match_dense(n, known_total, rng):
    haar = HaarStrategy(n, known_total=known_total)
    A = haar.dense()
    op = haar.operator()
    z = rng.normal(size=n)
    np.testing.assert_allclose(op.matvec(z), A @ z, atol=1e-12)
    np.testing.assert_allclose(op.rmatvec(np.arange(A.shape[0], dtype=float)), A.T @ np.arange(A.shape[0]), atol=1e-12)
    x = rng.integers(0, 20, n).astype(float)
    coeffs = haar.coefficients(x)
    values = [None] * (haar.height + 1)
    variances = [None] * (haar.height + 1)
    for k in haar.measured_depths:
        variances[k] = rng.uniform(0.5, 3.0)
        values[k] = coeffs[k] + rng.normal(size=coeffs[k].size) * np.sqrt(variances[k])
    total = x.sum() if known_total else None
    est = haar_estimate(haar, values, variances, total=total)
    # noise-free measurements reconstruct x exactly
    exact = haar_estimate(haar, coeffs, [1.0] * (haar.height + 1), total=total)
    np.testing.assert_allclose(exact.leaves, x, atol=1e-9)
    # Variance: the estimate is linear in the noise; build its matrix column by column.
    cols, var = [], []
    for k in haar.measured_depths:
        for j in range(values[k].size):
            unit = [None if vv is None else np.zeros_like(vv) for vv in values]
            unit[k][j] = 1.0
            cols.append(haar_estimate(haar, unit, variances, total=0.0 if known_total else None).leaves)
            var.append(variances[k])
    M = np.array(cols).T
    lo, hi = np.triu_indices(n)
    Q = range_matrix(n, lo, hi)
    reference = ((Q @ M) ** 2 * np.array(var)).sum(axis=1)
    np.testing.assert_allclose(est.range_variance(lo, hi), reference, rtol=1e-9, atol=1e-12)
    if not known_total and 2**haar.height == n:
        # square system: the inverse transform is the GLS estimate
        y = np.concatenate([values[k] for k in haar.measured_depths])
        v = np.concatenate([np.full(values[k].size, variances[k]) for k in haar.measured_depths])
        reference_x, _ = dense_gls(A, y, v)
        np.testing.assert_allclose(est.leaves, reference_x, atol=1e-9)


def test_range_variance_rejects_bad_ranges():
    tree = TreeStrategy(10, 2)
    values = [s.astype(float) for s in tree.level_sums(np.ones(10))]
    est = tree_gls(tree, values, [1.0] * (tree.depth + 1))
    with pytest.raises(ParameterError):
        est.range_variance(5, 4)
    with pytest.raises(ParameterError):
        est.range_variance(0, 10)


@pytest.mark.parametrize("n,branching,measure_root,known_total", CASES)
def test_tree_query_variance_equals_dense(n, branching, measure_root, known_total, rng):
    from dprange.inference.tree import tree_error_model

    tree = TreeStrategy(n, branching, measure_root=measure_root, known_total=known_total)
    variances = [None] * (tree.depth + 1)
    for d in tree.measured_depths:
        variances[d] = rng.uniform(0.3, 4.0, tree.level_sizes[d])
    model = tree_error_model(tree, variances, known_total=known_total)
    y, v = _stack(
        tree,
        [np.zeros(tree.level_sizes[d]) if variances[d] is not None else None for d in range(tree.depth + 1)],
        variances,
    )
    _, cov = dense_gls(tree.dense(), y, v, 0.0 if known_total else None)
    Q = rng.normal(size=(5, n))
    np.testing.assert_allclose(model.query_variance(Q), np.einsum("ij,jk,ik->i", Q, cov, Q), rtol=1e-9, atol=1e-9)
    lo, hi = np.triu_indices(n)
    np.testing.assert_allclose(
        model.query_variance(range_matrix(n, lo, hi)), model.range_variance(lo, hi), rtol=1e-9, atol=1e-9
    )


@pytest.mark.parametrize("n,known_total", [(6, False), (8, True), (13, False)])
def test_haar_query_variance_matches_ranges(n, known_total, rng):
    from dprange.inference.wavelet import haar_error_model

    haar = HaarStrategy(n, known_total=known_total)
    variances = [None] * (haar.height + 1)
    for k in haar.measured_depths:
        variances[k] = rng.uniform(0.5, 3.0)
    model = haar_error_model(haar, variances, known_total=known_total)
    lo, hi = np.triu_indices(n)
    np.testing.assert_allclose(
        model.query_variance(range_matrix(n, lo, hi)), model.range_variance(lo, hi), rtol=1e-9, atol=1e-12
    )

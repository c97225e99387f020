"""dprange.inference.tree: tree GLS and exact range and query variances against the dense matrix
formulas, all error bars in one top-down pass (equal to the per-query path and the dense
covariance on every tree shape), the family sums, and the variance-only error model."""

import numpy as np
import pytest
from _helpers import CASES

from conftest import dense_gls, range_matrix
from dprange import Hierarchical, ParameterError
from dprange.inference import tree as tree_module
from dprange.inference.least_squares import gls
from dprange.inference.tree import family_sums, tree_error_model, tree_gls
from dprange.strategies.trees import TreeStrategy


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
@pytest.mark.slow
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


def test_range_variance_rejects_bad_ranges():
    tree = TreeStrategy(10, 2)
    values = [s.astype(float) for s in tree.level_sums(np.ones(10))]
    est = tree_gls(tree, values, [1.0] * (tree.depth + 1))
    with pytest.raises(ParameterError):
        est.range_variance(5, 4)
    with pytest.raises(ParameterError):
        est.range_variance(0, 10)


def _model_and_dense_covariance(n, branching, measure_root, known_total, rng):
    """A tree's error model at unequal per-node budgets and the dense covariance of its GLS."""
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
    return model, cov


@pytest.mark.parametrize("n,branching,measure_root,known_total", CASES)
def test_tree_query_variance_equals_dense(n, branching, measure_root, known_total, rng):
    model, cov = _model_and_dense_covariance(n, branching, measure_root, known_total, rng)
    Q = rng.normal(size=(5, n))
    np.testing.assert_allclose(model.query_variance(Q), np.einsum("ij,jk,ik->i", Q, cov, Q), rtol=1e-9, atol=1e-9)
    lo, hi = np.triu_indices(n)
    np.testing.assert_allclose(
        model.query_variance(range_matrix(n, lo, hi)), model.range_variance(lo, hi), rtol=1e-9, atol=1e-9
    )


@pytest.mark.parametrize("n,branching,measure_root,known_total", CASES)
def test_nested_variances_are_the_dense_variances_of_growing_sets(n, branching, measure_root, known_total, rng):
    """The variance of the summed estimate over the first k leaves of a random order, for every k,
    is w' C w for the nested indicators w and the dense covariance C (unequal budgets per node);
    repeated or out-of-range leaves are refused."""
    model, cov = _model_and_dense_covariance(n, branching, measure_root, known_total, rng)
    order = rng.permutation(n)
    nested = np.zeros((n, n))
    for k in range(n):
        nested[k, order[: k + 1]] = 1.0
    expected = np.einsum("ij,jk,ik->i", nested, cov, nested)
    np.testing.assert_allclose(model.nested_variances(order), expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(model.nested_variances(order[: n // 2]), expected[: n // 2], rtol=1e-9, atol=1e-9)
    for bad in ([0, 0], [n]):
        with pytest.raises(ParameterError, match="distinct leaf"):
            model.nested_variances(bad)


SHAPES = [
    # (n, branching, measure_root, known_total, per_node)
    (1, 2, True, False, False),
    (2, 2, True, False, False),
    (16, 2, True, False, False),
    (11, 2, False, False, True),
    (27, 3, True, False, False),
    (17, 3, False, False, True),
    (256, 16, True, False, False),
    (300, 16, False, False, True),
    (40, 16, True, True, False),
    (30, (2, 3, 5), True, False, True),
    (29, (4, 2, 4), False, True, True),
    (37, (2, 3, 7), True, True, False),
]


def _model(rng, n, branching, measure_root, known_total, per_node):
    tree = TreeStrategy(n, branching, measure_root=measure_root, known_total=known_total)
    variances: list = [None] * (tree.depth + 1)
    for d in tree.measured_depths:
        size = tree.level_sizes[d]
        variances[d] = rng.uniform(0.3, 4.0, size) if per_node else rng.uniform(0.3, 4.0)
    return tree, variances, tree_error_model(tree, variances, known_total=known_total)


def _dense_covariance(tree, variances, known_total):
    rows, v = [], []
    dense = tree.dense()
    start = 0
    for d in range(tree.depth + 1):
        size = tree.level_sizes[d]
        if d in tree.measured_depths:
            rows.append(dense[start : start + size])
            v.append(np.broadcast_to(variances[d], (size,)))
            start += size
    A, v = np.vstack(rows), np.concatenate(v)
    return dense_gls(A, np.zeros(A.shape[0]), v, 0.0 if known_total else None)[1]


def _per_query(model, n):
    idx = np.arange(n)
    prefix = model.range_variance(np.zeros(n, dtype=np.int64), idx)
    rest = np.zeros(n)
    rest[:-1] = model.range_variance(idx[:-1] + 1, np.full(n - 1, n - 1))
    return prefix, rest, model.range_variance(idx, idx), float(model.range_variance(0, n - 1))


@pytest.mark.parametrize("block", [tree_module.ONE_PASS_BLOCK, 1, 5])
@pytest.mark.parametrize("n,branching,measure_root,known_total,per_node", SHAPES)
def test_one_pass_equals_per_query_and_dense(n, branching, measure_root, known_total, per_node, block, monkeypatch):
    monkeypatch.setattr(tree_module, "ONE_PASS_BLOCK", block)  # small blocks: every block boundary
    rng = np.random.default_rng(n)
    tree, variances, model = _model(rng, n, branching, measure_root, known_total, per_node)
    got = model.prefix_variances()
    prefix, rest, bins, total = _per_query(model, n)
    scale = max(1.0, float(prefix.max()))
    np.testing.assert_allclose(got.prefix, prefix, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(got.rest, rest, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(got.bins, bins, rtol=1e-12, atol=1e-12 * scale)
    assert got.total == pytest.approx(total, rel=1e-12, abs=1e-12)
    cov = _dense_covariance(tree, variances, known_total)
    lower = np.tril(np.ones((n, n)))
    np.testing.assert_allclose(got.prefix, np.einsum("ij,jk,ik->i", lower, cov, lower), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got.bins, np.diag(cov), rtol=1e-9, atol=1e-9)
    upper = 1.0 - lower
    np.testing.assert_allclose(got.rest, np.einsum("ij,jk,ik->i", upper, cov, upper), rtol=1e-9, atol=1e-9)


def test_one_pass_is_computed_once_per_model():
    model = Hierarchical(4).error_model(100, 1.0)
    assert model.prefix_variances() is model.prefix_variances()


def test_one_pass_with_exact_nodes_equals_per_query():
    # Some nodes measured without noise (variance 0), one parent with only exact children.
    tree = TreeStrategy(20, 3, measure_root=True)
    variances: list = [np.random.default_rng(d).uniform(0.5, 2.0, tree.level_sizes[d]) for d in range(tree.depth + 1)]
    variances[-1][[0, 1, 2, 7, 19]] = 0.0
    variances[-2][4] = 0.0
    model = tree_error_model(tree, variances)
    got = model.prefix_variances()
    prefix, rest, bins, _ = _per_query(model, 20)
    np.testing.assert_allclose(got.prefix, prefix, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.rest, rest, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.bins, bins, rtol=1e-12, atol=1e-12)
    assert got.bins[[0, 1, 2, 7, 19]].max() == 0.0


@pytest.mark.parametrize(
    "n,branching,measure_root,known_total",
    [
        (1, [], True, True),
        (16, 2, True, False),
        (11, 2, False, False),
        (300, 16, False, True),
        (29, (4, 2, 4), True, True),
    ],
)
def test_tree_error_model_needs_no_estimate_and_equals_gls_on_zeros(
    n, branching, measure_root, known_total, monkeypatch
):
    """The variance-only tree model (what select ranks) equals the model of GLS on zeros."""
    from dprange.inference import dispatch
    from dprange.inference import tree as tree_module

    tree = tree_module.TreeStrategy(n, branching, measure_root=measure_root, known_total=known_total)
    rng = np.random.default_rng(n)
    variances = [
        rng.uniform(0.3, 4.0, tree.level_sizes[d]) if d in tree.measured_depths else None for d in range(tree.depth + 1)
    ]
    zeros = [None if v is None else np.zeros(tree.level_sizes[d]) for d, v in enumerate(variances)]
    reference = tree_module.tree_gls(tree, zeros, variances, total=0.0 if known_total else None)

    def no_estimate(*args, **kwargs):
        raise AssertionError("the error model must not run the GLS estimate")

    monkeypatch.setattr(tree_module, "tree_gls", no_estimate)
    monkeypatch.setattr(dispatch, "tree_gls", no_estimate)
    model = tree_module.tree_error_model(tree, variances, known_total=known_total)
    assert model.root_variance == pytest.approx(reference.root_variance, rel=1e-15, abs=1e-300)
    for got, want in zip(model.from_below_variance, reference.from_below_variance):
        np.testing.assert_allclose(got, want, rtol=1e-15)
    for got, want in zip(model._child_variance_sums, reference._child_variance_sums):
        np.testing.assert_allclose(got, want, rtol=1e-15)
    idx = np.arange(n)
    np.testing.assert_allclose(model.range_variance(0, idx), reference.range_variance(0, idx), rtol=1e-14)


@pytest.mark.parametrize("b", [2, 3, 8, 9, 16])
def test_family_sums_equal_the_reduction(b):
    values = np.random.default_rng(b).normal(size=7 * b)
    np.testing.assert_allclose(family_sums(values, 7, b), values.reshape(7, b).sum(axis=1), rtol=1e-14, atol=1e-14)

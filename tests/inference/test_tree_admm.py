"""ADMM on trees in O(nodes) per iteration (dprange.inference.tree_admm; issue 12, item 6): the
precomputed tree x-step and the stacked tree operator give the former path's numbers
(tree_gls per iteration, per-level operators) within the tolerance."""

import numpy as np
import pytest
from _helpers import _problem
from reference_inference import former_admm, former_tree_x_step

from dprange import Hierarchical
from dprange.inference import l1_admm
from dprange.inference.l1_admm import tree_x_update
from dprange.inference.tree_admm import TreeLeastSquares, TreeStack
from dprange.strategies.trees import TreeStrategy

SHAPES = [
    # (n, branching, measure_root, known_total)
    (2, 2, True, False),
    (11, 2, False, False),
    (30, (2, 3, 5), True, False),
    (29, (4, 2, 4), False, True),
    (300, 16, True, False),
    (40, (64,), False, False),  # Flat: the leaves under one root
    (37, (40,), False, True),
    (1000, 4, False, False),
]


@pytest.mark.parametrize("n,branching,measure_root,known_total", SHAPES)
def test_precomputed_x_step_equals_tree_gls(n, branching, measure_root, known_total):
    rng = np.random.default_rng(n)
    tree, weights, total = _problem(rng, n, branching, measure_root, known_total)
    fast = tree_x_update(tree, weights, total=total)
    assert isinstance(fast, TreeLeastSquares) and fast.relax == 1.6
    slow = former_tree_x_step(tree, weights, total)
    dense = tree.dense()
    for split in (0.3, 1.0, 7.0, 0.3, 2.5):  # more split values than the cache holds
        rows = rng.normal(0, 5, dense.shape[0])
        target = rng.normal(0, 3, n)
        x = fast(rows, target, None, split)
        np.testing.assert_allclose(x, slow(rows, target, None, split), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(fast.rows_of_last(), dense @ x, rtol=1e-12, atol=1e-10)  # A x, consistent
    with pytest.raises(RuntimeError, match="solve first"):
        fast.rows_of_last()  # handed out once: ADMM keeps the array it gets


@pytest.mark.parametrize("n,branching,measure_root,known_total", SHAPES)
def test_tree_stack_equals_the_dense_levels(n, branching, measure_root, known_total):
    rng = np.random.default_rng(n + 1)
    tree = TreeStrategy(n, branching, measure_root=measure_root, known_total=known_total)
    dense = tree.dense()
    op = TreeStack(tree, tree.measured_depths)
    x, r = rng.normal(size=n), rng.normal(size=dense.shape[0])
    np.testing.assert_allclose(op.matvec(x), dense @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(op.rmatvec(r), dense.T @ r, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(op.matmat(np.eye(n)), dense, atol=1e-12)


@pytest.mark.parametrize("method", ["l1", "nnls"])
@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_release_equals_the_former_admm_within_tolerance(method, neighbours):
    n = 2**14  # the stopping rule is tested every CHECK_EVERY iterations from here
    assert n >= l1_admm.CHECK_EVERY_MIN_N
    counts = np.random.default_rng(5).poisson(0.5, n)
    mechanism = Hierarchical(8, noise="laplace_float", inference=method, neighbours=neighbours)
    measurements = mechanism.measure(counts, 1.0, rng=6)
    new = mechanism.infer(measurements)
    old = former_admm(measurements, alpha=0.0 if method == "nnls" else 0.9)
    assert new.converged and old.converged
    assert len(new.result.primal_residuals) == -(-new.result.iterations // l1_admm.CHECK_EVERY)
    assert new.result.objective == pytest.approx(old.objective, rel=1e-5)
    scale = np.abs(old.x).max()
    np.testing.assert_allclose(new.leaves, old.x, atol=1e-3 * scale)
    if neighbours == "replace":
        assert new.leaves.sum() == pytest.approx(measurements.total, rel=1e-12)

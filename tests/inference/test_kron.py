"""dprange.inference.kron: least squares and rectangle variances of Kronecker, quadtree and k-D
hierarchy designs against dense GLS, with unequal budgets, shared partial products and chunked
rectangles."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _helpers import assert_variances, box_matrix, every_rectangle, stacked

from conftest import dense_gls
from dprange.inference import kron as kron_inference
from dprange.inference.kron import morton_order
from dprange.mechanisms.grid import KDHierarchy, Kronecker, Quadtree
from dprange.operators import Kron
from dprange.workloads import random_rectangles


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("shape,axes", [((3, 5), [2, "identity"]), ((5, 6), [3, "haar"]), ((2, 3, 2), [2, 3, 2])])
def test_kronecker_least_squares_equals_dense_gls(shape, axes, relation, rng):
    counts = rng.integers(0, 20, size=shape)
    mech = Kronecker(axes, neighbours=relation, noise="laplace_float")
    meas = mech.measure(counts, 1.0, rng=1)
    est = mech.estimate(shape, meas)
    A, y, v = stacked(meas)
    x, cov = dense_gls(A, y, v, total=meas.total)
    np.testing.assert_allclose(est.leaves, x, atol=1e-8)
    lows, highs = every_rectangle(shape)
    Q = box_matrix(shape, lows, highs)
    assert_variances(est.rectangle_variance(lows, highs), np.einsum("ri,ij,rj->r", Q, cov, Q))
    assert_variances(est.query_variance(Q[:7]), np.einsum("ri,ij,rj->r", Q[:7], cov, Q[:7]))


def test_kronecker_unequal_budgets_give_the_exact_variance_of_their_estimate(rng):
    """Geometric budgets with discrete Laplace: variances are not of product form, the
    estimate is the product-weighted least squares and its variances are still exact."""
    shape = (4, 5)
    mech = Kronecker([2, 2], budget="geometric", neighbours="replace")
    meas = mech.measure(rng.integers(0, 9, size=shape), 1.0, rng=2)
    est = mech.estimate(shape, meas)
    A, y, v = stacked(meas)
    u = np.concatenate(
        [np.full(m.block.shape[0], 1.0 / e**2) for m, e in zip(meas.measurements, mech.plan(shape, 1.0).budget)]
    )
    H = np.linalg.solve(A.T @ (A / u[:, None]), A.T / u)  # product-weighted least squares
    C = H @ np.diag(v) @ H.T
    ones = np.ones(A.shape[1])
    correction = np.eye(A.shape[1]) - np.outer(C @ ones, ones) / (ones @ C @ ones)  # the public total
    np.testing.assert_allclose(est.leaves, correction @ (H @ y) + C @ ones * meas.total / (ones @ C @ ones), atol=1e-8)
    cov = correction @ C @ correction.T
    lows, highs = every_rectangle(shape)
    Q = box_matrix(shape, lows, highs)
    assert_variances(est.rectangle_variance(lows, highs), np.einsum("ri,ij,rj->r", Q, cov, Q))


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_quadtree_least_squares_equals_dense_gls(relation, rng):
    shape = (3, 5)
    counts = rng.integers(0, 20, size=shape)
    mech = Quadtree(budget="geometric", neighbours=relation)
    meas = mech.measure(counts, 1.0, rng=4)
    est = mech.estimate(shape, meas)
    A, y, v = stacked(meas)
    side = 8
    keep = np.zeros((side, side), dtype=bool)
    keep[:3, :5] = True
    real = np.zeros(side * side, dtype=bool)
    real[morton_order(side, 2, 2)[keep.ravel()]] = True
    x, cov = dense_gls(A, y, v, total=meas.total)
    # the real cells, in C order of the 3 x 5 grid
    order = morton_order(side, 2, 2)[keep.ravel()]
    np.testing.assert_allclose(est.leaves, x[order], atol=1e-8)
    lows, highs = every_rectangle(shape)
    Q = box_matrix(shape, lows, highs)
    sub = cov[np.ix_(order, order)]
    assert_variances(est.rectangle_variance(lows, highs), np.einsum("ri,ij,rj->r", Q, sub, Q))


def test_k_dimensional_hierarchy_rectangle_variances_equal_dense_gls(rng):
    shape = (2, 4, 3)
    mech = KDHierarchy(3, budget="geometric")
    meas = mech.measure(rng.integers(0, 5, size=shape), 1.0, rng=6)
    est = mech.estimate(shape, meas)
    A, y, v = stacked(meas)
    x, cov = dense_gls(A, y, v)
    keep = np.zeros((9, 9, 9), dtype=bool)
    keep[:2, :4, :3] = True
    order = morton_order(9, 3, 3)[keep.ravel()]
    np.testing.assert_allclose(est.leaves, x[order], atol=1e-8)
    rects = random_rectangles(shape, 60, rng=7)
    Q = box_matrix(shape, rects.lows, rects.highs)
    expected = np.einsum("ri,ij,rj->r", Q, cov[np.ix_(order, order)], Q)
    assert_variances(est.rectangle_variance(rects.lows, rects.highs), expected)
    assert_variances(est.query_variance(Q), expected)


@pytest.mark.parametrize("mech", [Kronecker([3, "haar", "identity"]), Kronecker(2, budget="geometric")])
def test_shared_partial_products_equal_one_kron_per_block(mech):
    """The measure and least-squares fast paths (partial products shared across blocks)
    against one dense Kronecker block at a time, on sides that are not powers of 2 or 3."""
    shape = (5, 7, 3)
    levels, fractions, combos = mech._axes(shape)
    weights = [[1.0 / float(f) ** 2 for f in fr] for fr in fractions]
    grid = np.random.default_rng(2).integers(0, 9, shape)
    dense = [Kron([levels[a][lv] for a, lv in enumerate(c)]).dense() for c in combos]
    for block, answer in zip(dense, kron_inference.kron_block_answers(levels, combos, grid)):
        np.testing.assert_array_equal(answer, block @ grid.ravel())
    values = [np.random.default_rng(i).normal(size=block.shape[0]) for i, block in enumerate(dense)]
    unit = [math.prod(weights[a][lv] for a, lv in enumerate(c)) for c in combos]
    expected = sum(block.T @ y / u for block, y, u in zip(dense, values, unit))
    got = kron_inference.kron_adjoint_sum(levels, weights, combos, values, shape)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_k_d_tree_rectangle_variances_do_not_depend_on_the_chunking():
    """Over 2^15 rectangles the tree path works in chunks: the same values as small batches."""
    rng = np.random.default_rng(4)
    ends = np.stack([rng.integers(0, n, size=(40_000, 2)) for n in (20, 13)], axis=1)
    lows, highs = ends.min(axis=2), ends.max(axis=2)
    model = KDHierarchy(3, budget="geometric").error_model((20, 13), 1.0)
    whole = model.rectangle_variance(lows, highs)
    pieces = np.concatenate(
        [model.rectangle_variance(lows[s : s + 999], highs[s : s + 999]) for s in range(0, 40_000, 999)]
    )
    np.testing.assert_allclose(whole, pieces, rtol=1e-13)

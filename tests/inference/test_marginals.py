"""dprange.inference.marginals: GLS and query variances of marginal strategies against the dense
formulas (pseudo-inverse), infinite where a query reaches an unmeasured direction."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from _helpers import indicator, product_family

from dprange.analysis.grid import axis_ranges
from dprange.inference.marginals import MarginalEstimate
from dprange.operators import Identity, Kron, Total

pytestmark = pytest.mark.usefixtures("private_cache")  # every test: an empty strategy cache


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_marginal_gls_and_variances_equal_the_dense_formulas(neighbours):
    shape = (3, 4, 2)
    subsets = [(0, 1), (1, 2), (0, 2), (0, 1, 2)]
    variances = [2.0, 3.0, 5.0, 40.0]
    blocks = [Kron([Identity(n) if a in s else Total(n) for a, n in enumerate(shape)]).dense() for s in subsets]
    rng = np.random.default_rng(1)
    values = [rng.normal(size=b.shape[0]) * 3 for b in blocks]
    total = 50.0 if neighbours == "replace" else None
    est = MarginalEstimate(shape, subsets, variances, values, total)
    Aw = np.vstack([b / np.sqrt(v) for b, v in zip(blocks, variances)])
    y = np.concatenate([val / np.sqrt(v) for val, v in zip(values, variances)])
    cov = np.linalg.inv(Aw.T @ Aw)
    x = cov @ Aw.T @ y
    if total is not None:
        w = cov.sum(axis=1)
        x = x + w * (total - x.sum()) / w.sum()
        cov = cov - np.outer(w, w) / w.sum()
    np.testing.assert_allclose(est.leaves, x, rtol=1e-9, atol=1e-9)
    lows, highs = all_rectangles_3d(shape)
    Q = indicator(shape, lows, highs)
    np.testing.assert_allclose(
        est.rectangle_variance(lows, highs), np.einsum("ij,jk,ik->i", Q, cov, Q), rtol=1e-9, atol=1e-9
    )


def all_rectangles_3d(shape):
    per_axis = [list(itertools.combinations_with_replacement(range(n), 2)) for n in shape]
    combos = list(itertools.product(*per_axis))
    return np.array([[r[0] for r in c] for c in combos]), np.array([[r[1] for r in c] for c in combos])


def test_unmeasured_directions_have_infinite_variance():
    shape = (3, 4, 2)
    est = MarginalEstimate(shape, [(0, 1), (1, 2)], [1.0, 1.0])
    assert np.isfinite(est.rectangle_variance([[0, 0, 0]], [[0, 0, 1]])).all()  # a cell of the (0, 1) marginal
    assert np.isinf(est.rectangle_variance([[0, 0, 0]], [[0, 0, 0]])).all()  # one cell: needs all three axes


def test_marginal_mean_variance_is_infinite_where_a_query_reaches_an_unmeasured_direction():
    shape = (3, 4, 2)
    est = MarginalEstimate(shape, [(0, 1), (1, 2)], [1.0, 2.0])
    measured = [axis_ranges(3, "cells"), axis_ranges(4, "cells"), axis_ranges(2, "total")]
    lows, highs = product_family(measured)
    assert est.mean_variance(measured) == pytest.approx(est.rectangle_variance(lows, highs).mean(), rel=1e-12)
    assert math.isinf(est.mean_variance([axis_ranges(n, "all") for n in shape]))  # cells need all three axes


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_marginal_query_variance_is_the_dense_covariance(neighbours):
    """q^T Cov q for arbitrary weights against the dense GLS covariance (pseudo-inverse on the
    measured span), and infinite for a query outside it."""
    shape = (3, 4, 2)
    subsets, variances = [(0, 1), (1, 2), (0, 2), ()], [2.0, 3.0, 5.0, 7.0]
    blocks = [Kron([Identity(n) if a in s else Total(n) for a, n in enumerate(shape)]).dense() for s in subsets]
    est = MarginalEstimate(shape, subsets, variances, total=0.0 if neighbours == "replace" else None)
    Aw = np.vstack([b / np.sqrt(v) for b, v in zip(blocks, variances)])
    cov = np.linalg.pinv(Aw.T @ Aw)
    if neighbours == "replace":
        w = cov.sum(axis=1)
        cov = cov - np.outer(w, w) / w.sum()
    rng = np.random.default_rng(5)
    A = np.vstack(blocks)
    Q = np.vstack([A[:5], rng.normal(size=(4, A.shape[0])) @ A])  # rows and combinations of the measured span
    np.testing.assert_allclose(est.query_variance(Q), np.einsum("ij,jk,ik->i", Q, cov, Q), rtol=1e-9, atol=1e-9)
    assert np.isinf(est.query_variance(np.eye(24)[0]))  # one cell: needs all three axes

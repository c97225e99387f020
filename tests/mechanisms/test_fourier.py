"""The Fourier strategy for low-order marginals (dprange.mechanisms.fourier; Barak et al., PODS
2007): sensitivity and calibration against dense matrices, least squares and marginal variances
against the dense pseudo-inverse, the optimal budget split, exact privacy loss on a 2 x 2
domain, and a Monte-Carlo check."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from _helpers import (
    assert_linear_privacy,
    assert_unbiased_with_variance,
    box_matrix,
    every_rectangle,
    gls_estimate,
    stacked,
)

from dprange import ParameterError
from dprange.analysis.grid import expected_error, select_grid
from dprange.mechanisms.fourier import FourierMarginals
from dprange.mechanisms.grid import Kronecker, load_grid_release
from dprange.operators import definition_sensitivity_power
from dprange.strategies.fourier import fourier_subsets

SHAPES = [(2, 3), (3, 4, 2), (2, 2, 2), (1, 3, 2), (5, 2)]


def dense_fourier_gls(meas, cells):
    """Reference GLS by dense matrices: pseudo-inverse of the (singular) normal matrix, and on
    the affine space 1^T x = total when the total is public.  Returns (x, covariance)."""
    A, y, v = stacked(meas)
    assert A.shape[1] == cells
    return gls_estimate(A, y, v, meas.total, singular=True)


def estimable(A, Q):
    """Rows of Q in the row space of A."""
    proj = Q @ np.linalg.pinv(A) @ A
    return np.all(np.abs(proj - Q) < 1e-8, axis=1)


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("shape", SHAPES)
def test_sensitivity_and_calibration_equal_the_dense_definition(shape, order, relation):
    mech = FourierMarginals(order, neighbours=relation)
    plan = mech.plan(shape, 0.9)
    for block in plan.blocks:
        B = block.dense()
        x = np.arange(B.shape[1], dtype=float) % 5
        np.testing.assert_allclose(block.matvec(x), B @ x)
        np.testing.assert_allclose(block.gram().dense(), B.T @ B)
    weights = plan.budget
    dense = np.vstack([w * b.dense() for w, b in zip(weights, plan.blocks)])
    for p in (1, 2):
        exact = plan.sensitivity_power(p, relation)
        assert float(exact) == pytest.approx(definition_sensitivity_power(dense, p, relation), rel=1e-12)
    design = mech.design if hasattr(mech, "design") else None
    assert design is not None
    specs = mech._noise(plan, 0.9, 0.0)
    scaled = np.vstack([b.dense() / s.scale for b, s in zip(plan.blocks, specs)])
    assert definition_sensitivity_power(scaled, 1, relation) <= 0.9 * (1 + 1e-12)


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("shape", SHAPES)
def test_least_squares_and_variances_equal_the_dense_pseudo_inverse(shape, order, relation, rng):
    counts = rng.integers(0, 9, size=shape)
    mech = FourierMarginals(order, neighbours=relation, noise="laplace_float")
    meas = mech.measure(counts, 1.0, rng=2)
    est = mech.estimate(shape, meas)
    cells = math.prod(shape)
    x, cov = dense_fourier_gls(meas, cells)
    A, _, _ = stacked(meas)
    lows, highs = every_rectangle(shape)
    Q = box_matrix(shape, lows, highs)
    ok = estimable(np.vstack([A, np.ones((1, cells))]) if meas.total is not None else A, Q)
    restricted = ((lows > 0) | (highs < np.array(shape) - 1)) & (np.array(shape) >= 2)
    np.testing.assert_array_equal(ok, restricted.sum(axis=1) <= order)  # the estimability rule
    np.testing.assert_allclose(Q[ok] @ est.leaves, Q[ok] @ x, atol=1e-8)
    np.testing.assert_allclose(
        est.rectangle_variance(lows[ok], highs[ok]), np.einsum("ri,ij,rj->r", Q[ok], cov, Q[ok]), rtol=1e-8, atol=1e-9
    )
    np.testing.assert_allclose(
        est.query_variance(Q[ok][:5]), np.einsum("ri,ij,rj->r", Q[ok][:5], cov, Q[ok][:5]), rtol=1e-8, atol=1e-9
    )
    if not ok.all():
        with pytest.raises(ParameterError, match="not estimable"):
            est.rectangle_variance(lows[~ok][:1], highs[~ok][:1])
        with pytest.raises(ParameterError, match="not estimable"):
            est.query_variance(Q[~ok][:1])


def test_marginals_are_consistent_and_their_errors_equal_the_dense_formula(rng):
    shape = (3, 2, 4)
    counts = rng.integers(0, 9, size=shape)
    mech = FourierMarginals(2, noise="laplace_float")
    rel = mech.release(counts, 1.0, rng=3)
    meas = rel.measurements
    x, cov = dense_fourier_gls(meas, 24)
    for axes in itertools.combinations(range(3), 2):
        m = rel.marginal(axes)
        others = tuple(a for a in range(3) if a not in axes)
        np.testing.assert_allclose(m.value, x.reshape(shape).sum(axis=others), atol=1e-8)
        np.testing.assert_allclose(m.value.sum(), rel.marginal(axes[:1]).value.sum())  # consistent totals
    cells = np.indices((3, 4)).reshape(2, -1).T
    lows = np.column_stack([cells[:, 0], np.zeros(12, int), cells[:, 1]])
    highs = np.column_stack([cells[:, 0], np.ones(12, int), cells[:, 1]])
    Q = box_matrix(shape, lows, highs)
    np.testing.assert_allclose(rel.marginal((0, 2)).variance.ravel(), np.einsum("ri,ij,rj->r", Q, cov, Q), rtol=1e-9)
    with pytest.raises(ParameterError, match="marginals of up to 2 axes"):
        rel.marginal((0, 1, 2))
    with pytest.raises(ParameterError, match="not estimable"):
        rel.rectangle([0, 0, 0], [1, 0, 2])


def test_the_optimal_split_attains_the_hoelder_bound_and_beats_uniform():
    """Laplace noise of scale b has variance 2 b^2; with eps_T ~ (c_T / s_T)^(1/3) the total
    error is 2 (sum_T (c_T s_T^2)^(1/3))^3 / eps^2, the minimum of sum_T c_T v_T."""
    shape, eps = (2, 3, 5, 2), 0.7
    mech = FourierMarginals(2, noise="laplace_float")
    subsets = fourier_subsets(shape, 2)
    total = 0.0
    for T in subsets:
        c = sum(
            math.prod((shape[a] - 1) / (2 if shape[a] == 2 else shape[a] ** 2) for a in T)
            * math.prod(1 / shape[a] for a in S if a not in T)
            for S in itertools.combinations(range(4), 2)
            if set(T) <= set(S)
        )
        s = math.prod(1 if shape[a] == 2 else 2 * (shape[a] - 1) for a in T)
        total += (c * s * s) ** (1 / 3)
    queries = sum(math.prod(shape[a] for a in S) for S in itertools.combinations(range(4), 2))
    best = expected_error(mech, shape, "marginals", eps, order=2)
    assert best == pytest.approx(2 * total**3 / eps**2 / queries, rel=1e-9)
    uniform = expected_error(FourierMarginals(2, budget="uniform", noise="laplace_float"), shape, "marginals", eps)
    assert best < 0.8 * uniform


def test_fourier_wins_on_two_way_marginals_of_many_binary_attributes_under_replace():
    shape = (2,) * 10
    choice = select_grid(shape, 1.0, workload="marginals", order=2, neighbours="replace")
    assert isinstance(choice.mechanism, FourierMarginals)
    flat = expected_error(Kronecker("identity", neighbours="replace"), shape, "marginals", 1.0)
    assert choice.error < 0.7 * flat
    # all rectangles are not estimable from order-2 Fourier measurements of a 3-D grid
    excluded = select_grid((2, 3, 4), 1.0, candidates=[FourierMarginals(2), Kronecker("identity")]).excluded
    assert len(excluded) == 1 and "up to 2 axes" in excluded[0][1]


@pytest.mark.parametrize("noise", ["discrete_laplace", "gaussian"])
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("order", [1, 2])
def test_privacy_ratio_on_a_two_by_two_domain(order, relation, noise):
    mech = FourierMarginals(order, neighbours=relation, noise=noise)
    assert_linear_privacy(mech, np.array([[1, 2], [3, 1]]), relation, noise)


@pytest.mark.slow
def test_monte_carlo_marginals_unbiased_with_the_exact_variance():
    shape = (2, 3, 2)
    counts = np.arange(12).reshape(shape) % 5
    source = np.random.default_rng(11)
    for relation in ("add_remove", "replace"):
        mech = FourierMarginals(2, neighbours=relation)
        runs = np.array([mech.release(counts, 1.0, rng=source).marginal((0, 1)).value.ravel() for _ in range(600)])
        exact = mech.error_model(shape, 1.0).rectangle_variance(
            np.column_stack([np.repeat([0, 1], 3), np.tile([0, 1, 2], 2), np.zeros(6, int)]),
            np.column_stack([np.repeat([0, 1], 3), np.tile([0, 1, 2], 2), np.ones(6, int)]),
        )
        assert_unbiased_with_variance(runs, counts.sum(axis=2).ravel(), exact)


def test_json_round_trip_and_bad_parameters(rng):
    counts = rng.integers(0, 5, size=(2, 3, 2))
    rel = FourierMarginals(1, neighbours="replace").release(counts, 1.0, rng=1)
    back = load_grid_release(rel.to_json())
    assert back.mechanism == "fourier" and back.parameters["order"] == 1
    np.testing.assert_allclose(back.marginal(1).value, rel.marginal(1).value)
    np.testing.assert_allclose(back.marginal(1).stderr, rel.marginal(1).stderr)
    assert back.marginal(1).value.sum() == pytest.approx(counts.sum())  # the public total
    with pytest.raises(ParameterError, match="order 3 needs at least 3 axes"):
        FourierMarginals(3).plan((4, 5), 1.0)
    with pytest.raises(ParameterError):
        FourierMarginals(0)
    with pytest.raises(ParameterError, match="nothing to measure"):
        FourierMarginals(1, neighbours="replace").plan((1, 1), 1.0)

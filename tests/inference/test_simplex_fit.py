"""Least squares over the non-negative vectors of a given sum (dprange.inference.simplex_fit):
the projection by its definition, the fit by its optimality conditions, against the exact
solution by enumerated supports and against the ADMM NNLS with a total."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from conftest import exact_nnls_with_equality
from dprange import ConvergenceWarning, ParameterError
from dprange.inference.nnls import nnls
from dprange.inference.p_identity import DiagonalPlusRows
from dprange.inference.simplex_fit import _NormalOperator, project_onto_simplex, simplex_fit, simplex_threshold
from dprange.measurements import LinearMeasurement, Measurements
from dprange.operators.dense import Explicit
from dprange.operators.structured import Kron


def measured(blocks, values, variances) -> Measurements:
    n = blocks[0].shape[1]
    return Measurements(
        [LinearMeasurement(b, np.asarray(y, float), v) for b, y, v in zip(blocks, values, variances)], n, 1.0
    )


@pytest.mark.parametrize("seed", range(6))
def test_projection_is_a_shift_clipped_at_zero_and_the_nearest_point(seed):
    """The Euclidean projection onto {x >= 0, sum x = t} is max(v - theta, 0) for the one theta
    that gives the sum t (Duchi et al., ICML 2008): the entries kept are shifted by the same
    theta, those zeroed are at or below it, and no random point of the set is closer."""
    rng = np.random.default_rng(seed)
    values = rng.normal(0, 3, (5, 4))
    total = float(rng.uniform(0.5, 20))
    x = project_onto_simplex(values, total)
    assert x.shape == values.shape and x.min() >= 0 and x.sum() == pytest.approx(total, rel=1e-12)
    kept = x > 0
    theta = (values - x)[kept]
    assert np.ptp(theta) < 1e-12
    assert np.all(values[~kept] <= theta[0] + 1e-12)
    others = rng.dirichlet(np.ones(values.size), 2000) * total
    assert np.all(((others - values.ravel()) ** 2).sum(1) >= ((x - values) ** 2).sum() - 1e-9)
    assert np.array_equal(project_onto_simplex(values, 0.0), np.zeros_like(values))


def sorted_threshold(values, total):
    """The threshold by sorting (Duchi et al., ICML 2008): the reference simplex_threshold must meet."""
    ordered = np.sort(values)[::-1]
    excess = np.cumsum(ordered) - total
    ranks = np.arange(1, ordered.size + 1)
    last = np.flatnonzero(ordered - excess / ranks > 0)[-1]
    return excess[last] / ranks[last]


@pytest.mark.parametrize("seed", range(40))
def test_threshold_by_newton_is_the_sorted_threshold_from_any_start(seed):
    """Newton's threshold equals the sorting formula's (to rounding) from no start, from below,
    from above, from above every value and from a non-finite start, on values with ties and
    spikes, and gives the total."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    values = np.round(rng.standard_t(2, n) * 10 ** rng.uniform(-2, 3), int(rng.integers(0, 3)))
    if seed % 4 == 0:
        values[rng.integers(0, n, n // 3 + 1)] = values[0]  # ties
    total = float(10 ** rng.uniform(-3, 4))
    expected = sorted_threshold(values, total)
    scale = 1e-12 * (np.abs(values).max() + total)
    starts = [None, expected - 10 ** rng.uniform(-3, 3), expected + 10 ** rng.uniform(-3, 3), values.max() + 1, np.nan]
    for start in starts:
        tau = simplex_threshold(values, total, start)
        assert tau == pytest.approx(expected, abs=scale)
        assert np.maximum(values - tau, 0).sum() == pytest.approx(total, rel=1e-9, abs=scale)


def test_threshold_falls_back_to_sorting_after_its_newton_steps(monkeypatch):
    """Where Newton's method has not settled within NEWTON_STEPS steps the threshold comes from
    the sort (the same value): forced here with one step allowed, from a start far below."""
    import dprange.inference.simplex_fit as module

    rng = np.random.default_rng(5)
    values = rng.exponential(1.0, 500) ** 3
    expected = sorted_threshold(values, 2.0)
    monkeypatch.setattr(module, "NEWTON_STEPS", 1)
    calls = []
    monkeypatch.setattr(module, "sorted_threshold", lambda v, t: calls.append(1) or sorted_threshold(v, t))
    assert simplex_threshold(values, 2.0, values.min() - 100.0) == pytest.approx(expected, rel=1e-12)
    assert calls == [1]


def test_gram_of_a_p_identity_block_and_of_its_kronecker_product_against_dense():
    """DiagonalPlusRows.gram() is A^T A (dense), and the normal operator of a Kronecker product of
    such blocks (applied as its Gram operator) equals A^T A x / v and A^T y / v."""
    rng = np.random.default_rng(3)
    a = DiagonalPlusRows(rng.integers(1, 9, 6), rng.integers(0, 4, (2, 6)))
    b = DiagonalPlusRows(rng.integers(1, 9, 5), rng.integers(0, 4, (3, 5)))
    for block in (a, b):
        np.testing.assert_allclose(block.gram().dense(), block.dense().T @ block.dense(), rtol=1e-14)
    kron = Kron([a, b])
    dense = np.kron(a.dense(), b.dense())
    y = rng.normal(size=dense.shape[0])
    normal = _NormalOperator(measured([kron], [y], [2.5]))
    assert normal.grams[0] is not None
    x = rng.normal(size=dense.shape[1])
    np.testing.assert_allclose(normal(x), dense.T @ dense @ x / 2.5, rtol=1e-12)
    np.testing.assert_allclose(normal.rhs, dense.T @ y / 2.5, rtol=1e-12)
    varied = _NormalOperator(
        Measurements([LinearMeasurement(kron, y, rng.uniform(1, 2, dense.shape[0]))], dense.shape[1], 1.0)
    )
    assert varied.grams[0] is None  # rows of different variances: products, not the Gram


def test_projection_of_a_point_of_the_set_is_itself_and_a_bad_total_is_refused():
    point = np.array([0.0, 2.0, 1.5, 0.5])
    np.testing.assert_allclose(project_onto_simplex(point, 4.0), point, atol=1e-15)
    with pytest.raises(ParameterError, match="finite"):
        project_onto_simplex(point, float("nan"))


def test_noiseless_kronecker_measurements_give_back_the_grid():
    rng = np.random.default_rng(1)
    f1, f2 = rng.normal(size=(7, 5)), rng.normal(size=(6, 4))
    truth = rng.uniform(0.5, 3.0, (5, 4))
    block = Kron([Explicit(f1), Explicit(f2)])
    fit = simplex_fit(measured([block], [block.matvec(truth.ravel())], [1.0]), truth.sum(), tol=1e-10, maxiter=20000)
    assert fit.converged
    np.testing.assert_allclose(fit.x.reshape(5, 4), truth, atol=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_kronecker_fit_meets_the_optimality_conditions(seed):
    """KKT of min ||(F1 kron F2) x - y||^2 over x >= 0, sum x = t: the gradient equals one
    multiplier on the entries kept positive and is at least it on the zeroed ones."""
    rng = np.random.default_rng(10 + seed)
    f1, f2 = rng.normal(size=(7, 5)), rng.normal(size=(6, 4))
    truth = np.where(rng.uniform(size=20) < 0.5, 0.0, rng.uniform(1, 5, 20))
    matrix = np.kron(f1, f2)
    y = matrix @ truth + rng.normal(0, 2.0, 42)
    fit = simplex_fit(measured([Kron([Explicit(f1), Explicit(f2)])], [y], [1.0]), truth.sum(), tol=1e-10, maxiter=20000)
    x = fit.x
    assert fit.converged and x.min() >= 0 and x.sum() == pytest.approx(truth.sum())
    gradient = matrix.T @ (matrix @ x - y)
    kept = x > 1e-9
    assert kept.any() and (~kept).any()  # the constraints bind: the conditions are not trivial
    multiplier = gradient[kept].mean()
    scale = np.abs(gradient).max()
    assert np.abs(gradient[kept] - multiplier).max() < 1e-6 * scale
    assert gradient[~kept].min() >= multiplier - 1e-6 * scale


@pytest.mark.parametrize("seed", range(4))
def test_blocks_of_different_variances_match_the_exact_solution_and_admm(seed):
    """Two blocks weighted by their inverse variances: the same optimum as the exact solver
    (every support enumerated, n = 7) and as the ADMM NNLS with the total."""
    rng = np.random.default_rng(20 + seed)
    n = 7
    a1, a2 = rng.normal(size=(9, n)), np.tril(np.ones((n, n)))
    truth = np.where(rng.uniform(size=n) < 0.4, 0.0, rng.uniform(1, 6, n))
    v1, v2 = 0.5, 4.0
    y1 = a1 @ truth + rng.normal(0, np.sqrt(v1), 9)
    y2 = a2 @ truth + rng.normal(0, np.sqrt(v2), n)
    total = float(truth.sum())
    fit = simplex_fit(measured([Explicit(a1), Explicit(a2)], [y1, y2], [v1, v2]), total, tol=1e-10, maxiter=50000)
    M = np.vstack([a1 / np.sqrt(v1), a2 / np.sqrt(v2)])
    b = np.concatenate([y1 / np.sqrt(v1), y2 / np.sqrt(v2)])
    exact = exact_nnls_with_equality(M, b, np.ones((1, n)), np.array([total]))
    np.testing.assert_allclose(fit.x, exact, atol=1e-6)
    admm = nnls(
        np.vstack([a1, a2]), np.concatenate([y1, y2]), np.r_[np.full(9, v1**-0.5), np.full(n, v2**-0.5)], total=total
    )
    np.testing.assert_allclose(fit.x, admm.x, atol=1e-4)


def test_not_reaching_the_tolerance_warns_and_says_so():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(30, 20))
    data = measured([Explicit(a)], [a @ rng.uniform(0, 2, 20) + rng.normal(size=30)], [1.0])
    with pytest.warns(ConvergenceWarning, match="maxiter"):
        fit = simplex_fit(data, 10.0, tol=1e-12, maxiter=3)
    assert not fit.converged and fit.iterations == 3 and fit.x.sum() == pytest.approx(10.0)


def test_a_zero_total_gives_the_empty_grid_without_iterating():
    a = np.eye(4)
    fit = simplex_fit(measured([Explicit(a)], [np.ones(4)], [1.0]), 0.0)
    assert fit.converged and fit.iterations == 0 and np.array_equal(fit.x, np.zeros(4))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"total": -1.0}, "non-negative"),
        ({"total": float("inf")}, "finite"),
        ({"total": "many"}, "number"),
        ({"total": 1.0, "tol": 0.0}, "tol"),
        ({"total": 1.0, "maxiter": 0}, "maxiter"),
        ({"total": 1.0, "start": np.ones(3)}, "start"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    data = measured([Explicit(np.eye(4))], [np.ones(4)], [1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ParameterError, match=match):
            simplex_fit(data, **kwargs)
    with pytest.raises(ParameterError, match="Measurements"):
        simplex_fit([], 1.0)

"""dprange.inference.dispatch, the one inference entry point: every path (tree, Haar, generic, Kron,
one explicit block by its inverse or LSMR) against dense GLS, NNLS and L1 keeping the GLS error
model, ADMM's convergence reporting, and error models that need no estimate."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _helpers import gls_estimate, integer_strategy, measure

import dprange
from dprange import Hierarchical
from dprange.errors import ConvergenceWarning, ParameterError
from dprange.inference import infer
from dprange.inference.dispatch import KronEstimate, NonlinearEstimate, least_squares
from dprange.inference.least_squares import DenseGLSEstimate, OperatorEstimate, dense_covariance, gls
from dprange.inference.tree import TreeEstimate
from dprange.inference.wavelet import HaarEstimate
from dprange.measurements import LinearMeasurement, Measurements
from dprange.operators import Explicit, Identity, Kron, Prefix, Total
from dprange.registry import INFERENCE
from dprange.strategies.trees import HaarStrategy, TreeStrategy


def dense_gls(meas, known_total=False):
    """x-hat and covariance from the explicit stacked matrix (pseudo-inverse on the sum-zero
    subspace with a public total)."""
    y, v = meas.stacked()
    return gls_estimate(meas.operator().dense(), y, v, meas.total if known_total else None)


def check_linear(est, meas, known_total=False):
    x_hat, cov = dense_gls(meas, known_total)
    np.testing.assert_allclose(est.leaves, x_hat, rtol=1e-8, atol=1e-8)
    n = meas.n
    lo, hi = np.triu_indices(n)
    idx = np.arange(n)
    Q = ((idx >= lo[:, None]) & (idx <= hi[:, None])).astype(float)
    np.testing.assert_allclose(est.range_variance(lo, hi), np.einsum("ij,jk,ik->i", Q, cov, Q), rtol=1e-7, atol=1e-9)
    q = np.random.default_rng(0).normal(size=(3, n))
    np.testing.assert_allclose(est.query_variance(q), np.einsum("ij,jk,ik->i", q, cov, q), rtol=1e-6, atol=1e-9)


def test_tree_path_is_dense_gls():
    tree = TreeStrategy(11, [3, 4], measure_root=True)
    rng = np.random.default_rng(1)
    meas = measure(tree.blocks(), rng.poisson(5, 11).astype(float), [4.0, 2.0, 1.0], rng)
    est = infer(meas)
    assert isinstance(est, TreeEstimate)
    check_linear(est, meas)


def test_haar_path_is_the_inverse_transform():
    haar = HaarStrategy(8)
    rng = np.random.default_rng(2)
    meas = measure(haar.blocks(), rng.poisson(5, 8).astype(float), [3.0, 1.0, 2.0, 0.5], rng)
    est = infer(meas)
    assert isinstance(est, HaarEstimate)
    check_linear(est, meas)


def test_generic_path_with_public_total_is_dense_gls():
    rng = np.random.default_rng(3)
    x = rng.poisson(5, 6).astype(float)
    meas = measure([Prefix(6), Identity(6)], x, [2.0, np.linspace(1, 3, 6)], rng, total=float(x.sum()))
    est = infer(meas)
    assert isinstance(est, DenseGLSEstimate)
    assert est.leaves.sum() == pytest.approx(x.sum())
    check_linear(est, meas, known_total=True)


@pytest.mark.parametrize("with_total", [False, True])
def test_dense_estimate_query_variances_come_from_its_covariance(monkeypatch, with_total):
    """Many arbitrary queries (an explicit workload's rows) from the dense covariance: equal
    to the CG solves of the operator path and to the dense formula, without one CG solve (the
    former path ran CG per query: 22 s for the 4656 rows of all ranges on 96 bins)."""
    rng = np.random.default_rng(4)
    x = rng.poisson(5, 9).astype(float)
    total = float(x.sum()) if with_total else None
    meas = measure([Explicit(rng.integers(0, 3, size=(12, 9))), Identity(9)], x, [2.0, 0.5], rng, total=total)
    est = infer(meas)
    assert isinstance(est, DenseGLSEstimate)
    queries = rng.normal(size=(300, 9))
    by_cg = OperatorEstimate.query_variance(est, queries)
    _, cov = dense_gls(meas, with_total)
    import dprange.inference.least_squares as least_squares

    def no_cg(*args, **kwargs):
        raise AssertionError("CG called for a dense estimate")

    monkeypatch.setattr(least_squares, "cg", no_cg)
    got = est.query_variance(queries)
    np.testing.assert_allclose(got, by_cg, rtol=1e-8)
    np.testing.assert_allclose(got, np.einsum("ij,jk,ik->i", queries, cov, queries), rtol=1e-8)


def test_mixed_tree_and_other_blocks_take_the_generic_path():
    tree = TreeStrategy(6, 2, measure_root=False)
    rng = np.random.default_rng(4)
    meas = measure(tree.blocks() + [Total(6)], rng.poisson(5, 6).astype(float), [1.0, 2.0, 1.5, 0.5], rng)
    est = infer(meas)
    assert isinstance(est, OperatorEstimate)
    check_linear(est, meas)


def test_kron_path_applies_each_factor_pseudo_inverse():
    """Tree levels x identity (a 2-D hierarchical strategy): one Kron block of full-column-rank
    factors, one variance -> the separable estimate, equal to dense least squares."""
    tree = TreeStrategy(4, 2, measure_root=True)
    factor = Explicit(np.vstack([b.dense() for b in tree.blocks()]))
    block = Kron([factor, Identity(3)])
    rng = np.random.default_rng(5)
    meas = measure([block], rng.poisson(5, 12).astype(float), [2.5], rng)
    est = infer(meas)
    assert isinstance(est, KronEstimate)
    check_linear(est, meas)
    # with a public total the Kronecker path does not apply: LSMR
    meas_total = Measurements(meas.measurements, 12, 1.0, total=30.0)
    assert isinstance(infer(meas_total), DenseGLSEstimate)


def test_nnls_and_l1_are_nonnegative_and_keep_the_gls_error_model():
    tree = TreeStrategy(16, 4, measure_root=False)
    rng = np.random.default_rng(6)
    x = np.zeros(16)
    x[3] = 20
    meas = measure(tree.blocks(), x, [4.0, 4.0], rng)
    for method in ("nnls", "l1"):
        est = infer(meas, method, {"tol": 1e-8})
        assert isinstance(est, NonlinearEstimate) and est.converged
        assert np.all(est.leaves >= 0)
        assert np.isnan(est.range_variance(0, 3))
        np.testing.assert_allclose(est.least_squares.leaves, infer(meas).leaves)


def test_admm_that_stops_early_warns_and_says_so():
    tree = TreeStrategy(32, 2, measure_root=False)
    rng = np.random.default_rng(7)
    meas = measure(tree.blocks(), rng.poisson(3, 32).astype(float), [9.0] * 5, rng)
    with pytest.warns(ConvergenceWarning, match="maxiter"):
        est = infer(meas, "l1", {"maxiter": 2})
    assert est.converged is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert infer(meas, "nnls", {"tol": 1e-6}).converged
    assert issubclass(dprange.ConvergenceWarning, UserWarning)


def test_bad_method_or_option_is_a_parameter_error():
    meas = measure([Identity(3)], np.ones(3), [1.0], np.random.default_rng(0))
    with pytest.raises(ParameterError, match="inference must be"):
        infer(meas, "median")
    with pytest.raises(ParameterError, match="unknown inference options"):
        infer(meas, "nnls", {"speed": 2})


def measurements_of(A, values, variance, total=None):
    measurement = LinearMeasurement(Explicit(A), np.asarray(values, dtype=float), variance)
    return Measurements([measurement], A.shape[1], 1.0, total=total)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("total", [None, 40.0])
def test_least_squares_on_one_explicit_block_goes_by_the_inverse_and_equals_lsmr(total):
    """The dispatch takes the inverse (no LSMR iterations) for a well-conditioned explicit
    block; the estimate and every range variance equal LSMR's and the dense covariance's."""
    rng = np.random.default_rng(4)
    A = integer_strategy(30, 10, 4)
    y = A @ rng.integers(0, 9, 10) + rng.normal(0.0, 3.0, 30)
    estimate = least_squares(measurements_of(A, y, 9.0, total))
    assert isinstance(estimate, DenseGLSEstimate) and estimate.iterations == 0
    reference = gls(Explicit(A), y, np.full(30, 9.0), total=total)
    np.testing.assert_allclose(estimate.leaves, reference.leaves, rtol=1e-9, atol=1e-9)
    covariance = dense_covariance(A, 9.0, total is not None)
    np.testing.assert_allclose(estimate.covariance, covariance, rtol=1e-9, atol=1e-12)
    lo, hi = np.triu_indices(10)
    direct = np.array([covariance[a : b + 1, a : b + 1].sum() for a, b in zip(lo, hi)])
    np.testing.assert_allclose(estimate.range_variance(lo, hi), np.maximum(direct, 0.0), rtol=1e-9, atol=1e-10)


@pytest.mark.usefixtures("private_cache")
def test_an_ill_conditioned_block_goes_by_lsmr(monkeypatch):
    """Above the limit on the condition bound the inverse is not used (LSMR iterates); the
    estimate is still the least-squares solution."""
    from dprange.inference import dispatch

    monkeypatch.setattr(dispatch, "INVERSE_CONDITION_LIMIT", 1.0)
    rng = np.random.default_rng(5)
    A = integer_strategy(30, 10, 5)
    y = A @ rng.integers(0, 9, 10) + rng.normal(0.0, 3.0, 30)
    estimate = least_squares(measurements_of(A, y, 4.0))
    assert estimate.iterations > 0
    np.testing.assert_allclose(estimate.leaves, np.linalg.lstsq(A, y, rcond=None)[0], rtol=1e-8, atol=1e-8)


def test_hierarchical_error_model_skips_the_estimate(monkeypatch):
    from dprange import Hierarchical
    from dprange.inference import dispatch

    def no_estimate(*args, **kwargs):
        raise AssertionError("the error model must not run the GLS estimate")

    expected = Hierarchical(4).error_model(200, 1.0).range_variance(3, 150)
    monkeypatch.setattr(dispatch, "tree_gls", no_estimate)
    assert Hierarchical(4).error_model(200, 1.0).range_variance(3, 150) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("inference", INFERENCE.names())
def test_every_inference_method_runs(inference):
    rel = Hierarchical(2, inference=inference).release(np.array([3, 0, 5, 1, 0, 0, 2, 9]), 2.0, rng=1)
    assert rel.inference == inference and rel.n == 8
    if inference != "gls":  # non-negative estimates
        assert np.all(rel.histogram().value >= -1e-6)

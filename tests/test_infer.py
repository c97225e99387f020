"""The one inference entry point: every path against dense GLS, ADMM convergence reporting,
and the parametric bootstrap against the exact standard errors."""

import warnings

import numpy as np
import pytest
from _helpers import gls_covariance, gls_estimate, quadratic_forms

import dprange
from conftest import range_matrix
from dprange.answers.bootstrap import bootstrap
from dprange.errors import ConvergenceWarning, ParameterError
from dprange.inference import infer
from dprange.inference.dispatch import KronEstimate, NonlinearEstimate
from dprange.inference.least_squares import DenseGLSEstimate, OperatorEstimate
from dprange.inference.tree import TreeEstimate
from dprange.inference.wavelet import HaarEstimate
from dprange.measurements import LinearMeasurement, Measurements
from dprange.operators import Explicit, Identity, Kron, Prefix, Total, TreeLevel
from dprange.privacy.noise import NoiseSpec
from dprange.strategies.trees import HaarStrategy, TreeStrategy


def measure(blocks, x, variances, rng, *, total=None, noise=None):
    """Measurements of x through ``blocks`` with Gaussian noise of the given variances."""
    out = []
    assert len(blocks) == len(variances)
    for block, v in zip(blocks, variances):
        values = block.matvec(x) + np.sqrt(v) * rng.standard_normal(block.shape[0])
        out.append(LinearMeasurement(block, values, v, noise))
    return Measurements(out, blocks[0].shape[1], 1.0, total=total)


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


def test_bootstrap_of_gls_matches_the_exact_standard_errors():
    """The std of R replicates has relative standard error about 1/sqrt(2(R - 1)) (5% at
    R = 200): every range is within 4 of those of the exact value."""
    mech = dprange.Hierarchical(2, noise="gaussian")
    x = np.random.default_rng(8).poisson(50, 12)
    meas = mech.measure(x, 1.0, delta=1e-6, rng=8)
    est = mech.infer(meas)
    lo, hi = np.array([0, 2, 5, 0]), np.array([11, 7, 5, 3])
    reps = 200
    se = bootstrap(meas, est.leaves, "gls", lo, hi, reps=reps, rng=9)
    exact = np.sqrt(est.range_variance(lo, hi))
    np.testing.assert_allclose(se, exact, rtol=4 / np.sqrt(2 * (reps - 1)))


def test_bootstrap_with_local_variances_and_replace_total():
    """Blocks without a sampler (local-DP estimates) are re-drawn as normal with their row
    variances; with a public total every replicate keeps the estimate's total."""
    tree = TreeStrategy(8, 2, known_total=True)
    rng = np.random.default_rng(10)
    x = rng.poisson(20, 8).astype(float)
    meas = measure(tree.blocks(), x, [4.0, 2.0, 1.0], rng, total=float(x.sum()))
    est = infer(meas)
    se = bootstrap(meas, est.leaves, "gls", [0, 0], [7, 3], reps=300, rng=11)
    assert se[0] < 1e-9  # the public total is known exactly
    exact = np.sqrt(est.range_variance(0, 3))
    assert se[1] == pytest.approx(exact, rel=4 / np.sqrt(2 * 299))


def test_bootstrap_redraws_central_noise_from_its_sampler():
    spec = NoiseSpec("discrete_laplace", 2.0)
    block = TreeLevel(TreeStrategy(5, (5,)), 1)
    meas = Measurements([LinearMeasurement(block, np.zeros(5), spec.variance, spec)], 5, 1.0)
    se = bootstrap(meas, np.full(5, 10.0), "gls", 2, 2, reps=400, rng=12)
    assert float(se) == pytest.approx(np.sqrt(spec.variance), rel=4 / np.sqrt(2 * 399))
    with pytest.raises(ParameterError, match="reps"):
        bootstrap(meas, np.zeros(5), "gls", 0, 1, reps=1)


@pytest.mark.parametrize(
    "mech", [dprange.Hierarchical(2, neighbours="replace"), dprange.Wavelet(neighbours="replace")], ids=repr
)
def test_one_bin_with_a_public_total_measures_nothing_and_answers_it_exactly(mech):
    """Nothing is measured on one bin whose count is public: the estimate is the total, with
    standard error 0, and the release saves and loads."""
    rel = mech.release(np.array([5]), 1.0, rng=0)
    assert rel.estimate.tolist() == [5.0] and rel.range(0, 0).stderr == 0.0
    assert mech.error_model(1, 1.0).range_variance(0, 0) == 0.0
    loaded = dprange.Release.from_json(rel.to_json())
    assert loaded.estimate.tolist() == [5.0] and loaded.range(0, 0).stderr == 0.0
    # Without a public total the one node (root = leaf) is measured, as Flat measures it.
    one = dprange.Hierarchical(2).release(np.array([5]), 1.0, rng=0)
    assert one.range(0, 0).stderr == pytest.approx(dprange.Flat().release(np.array([5]), 1.0, rng=0).range(0, 0).stderr)


def test_measure_returns_one_block_per_level_with_provenance():
    x = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5])
    meas = dprange.Hierarchical(3, neighbours="replace").measure(x, 0.5, rng=1)
    assert [m.block.depth for m in meas.measurements] == [1, 2]
    assert all(isinstance(m.block, TreeLevel) and m.noise.variance == m.variance for m in meas.measurements)
    np.testing.assert_array_equal(meas.measurements[0].block.dense() @ x, [8, 15, 13])
    assert (meas.n, meas.epsilon, meas.neighbours, meas.total, meas.seeded, meas.source) == (
        9,
        0.5,
        "replace",
        36.0,
        True,
        "central",
    )
    assert dprange.Flat().measure(x, 0.5).seeded is False
    matrix = dprange.Matrix(np.tril(np.ones((9, 9)))).measure(x, 0.5, rng=1)
    (only,) = matrix.measurements
    assert isinstance(only.block, Explicit) and only.values.shape == (9,)


@pytest.mark.parametrize(
    "mech",
    [dprange.Hierarchical(4, measure_root=True), dprange.Wavelet(neighbours="replace"), dprange.Flat()],
    ids=repr,
)
def test_error_model_is_the_dense_gls_covariance_of_the_design(mech):
    """Mechanism.error_model comes from the same blocks and noise as measure(): its range
    variances are those of dense GLS on the design's stacked matrix and variances."""
    n = 10
    design = mech.design(n, 0.8)
    model = mech.error_model(n, 0.8)
    A = design.operator().dense()
    _, v = design.stacked()
    if isinstance(mech, dprange.Wavelet):
        # Privelet's estimator is GLS on the padded domain (16 bins), restricted to the real bins
        haar = mech.strategy(n)
        padded = HaarStrategy(haar.size, known_total=True)
        A = np.vstack([b.dense() for b in padded.blocks()])
        n_cov = haar.size
    else:
        n_cov = n
    cov = gls_covariance(A.T @ (A / v[:, None]), design.total is not None)
    lo, hi = np.triu_indices(n)
    Q = range_matrix(n_cov, lo, hi)
    np.testing.assert_allclose(model.range_variance(lo, hi), quadratic_forms(Q, cov), rtol=1e-8, atol=1e-9)


def test_a_release_says_when_admm_stopped_early_and_keeps_saying_it_after_loading():
    counts = np.random.default_rng(3).poisson(3, 40)
    with pytest.warns(ConvergenceWarning, match="maxiter"):
        rel = dprange.Hierarchical(2, inference="l1", inference_options={"maxiter": 2}).release(counts, 1.0, rng=1)
    assert rel.converged is False and rel.to_dict()["provenance"]["converged"] is False
    assert dprange.Release.from_json(rel.to_json()).converged is False
    assert dprange.Hierarchical(2, inference="nnls").release(counts, 1.0, rng=1).converged is True
    assert dprange.Flat().release(counts, 1.0, rng=1).converged is True

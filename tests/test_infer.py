"""The one inference entry point: every path against dense GLS, ADMM convergence reporting,
and the parametric bootstrap against the exact standard errors."""

import numpy as np
import pytest
from _helpers import gls_covariance, measure, quadratic_forms

import dprange
from conftest import range_matrix
from dprange.answers.bootstrap import bootstrap
from dprange.errors import ConvergenceWarning, ParameterError
from dprange.inference import infer
from dprange.measurements import LinearMeasurement, Measurements
from dprange.operators import Explicit, TreeLevel
from dprange.privacy.noise import NoiseSpec
from dprange.strategies.trees import HaarStrategy, TreeStrategy


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

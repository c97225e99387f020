"""dprange.answers.bootstrap: the parametric bootstrap reruns a release's own noise and inference;
its standard errors against the exact ones (GLS) and Monte-Carlo, with local variances, a public
total, seeds, and the checks on its arguments."""

import numpy as np
import pytest
from _helpers import measure

import dprange
from dprange import Hierarchical, Release
from dprange.answers.bootstrap import bootstrap
from dprange.errors import ParameterError
from dprange.inference import infer
from dprange.measurements import LinearMeasurement, Measurements
from dprange.operators import TreeLevel
from dprange.privacy.noise import NoiseSpec
from dprange.strategies.trees import TreeStrategy


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


def test_bootstrap_reproduces_exact_gls_stderr():
    """400 replicates: the bootstrap s.d. has relative s.e. about sqrt((2 + kappa) / (4 R))
    <= 0.06; we allow 4 of those (25%)."""
    rel = Hierarchical(4, noise="laplace_float").release(np.arange(64) % 7, 1.0, rng=1)
    lo, hi = np.array([0, 5, 30]), np.array([63, 20, 30])
    boot = rel.bootstrap(lo, hi, reps=400, rng=2)
    np.testing.assert_allclose(boot, rel.range(lo, hi).stderr, rtol=0.25)
    with pytest.raises(ParameterError):
        rel.bootstrap(0, 3, reps=1)


# ----------------------------------------------------------------------------- bootstrap
def test_bootstrap_without_measurements_says_what_it_needs(integer_release):
    rel = Release(integer_release.estimate, integer_release.error_model, integer_release.provenance)
    with pytest.raises(ParameterError, match="bootstrap needs the mechanism's measurements"):
        rel.bootstrap(0, 3, reps=2, rng=0)


def test_bootstrap_is_reproducible_with_a_seed(integer_release):
    a = integer_release.bootstrap([0, 5], [49, 20], reps=20, rng=9)
    b = integer_release.bootstrap([0, 5], [49, 20], reps=20, rng=9)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (2,) and np.all(a > 0)


@pytest.mark.parametrize("reps", [1, 10**7, "200", None, True, 2.5])
def test_bootstrap_reps_are_checked(gls_release, reps):
    with pytest.raises(ParameterError, match="reps"):
        gls_release.bootstrap(0, 5, reps=reps, rng=0)

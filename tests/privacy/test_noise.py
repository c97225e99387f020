"""dprange.privacy.noise: the noise kinds' pmf, variance and effective scale, per-value scales, the
Gaussian sigma that meets delta (against independent computations), and the refusals of scales
beyond 2^40 and of bad kinds."""

import math

import numpy as np
import pytest
from scipy import optimize, stats

import dprange
from dprange import ParameterError
from dprange._validation import MAX_SCALE
from dprange.privacy.noise import NoiseSpec, discrete_gaussian_variance, gaussian_sigma, noise_variance, pmf
from dprange.privacy.samplers import NOISE_KINDS, effective_scale


def test_discrete_gaussian_variance_ratio_increases_with_sigma():
    """The gaussian floor rests on Var_DG(s) / s^2 increasing in s: a grid from 0.05 to 80."""
    sigmas = np.geomspace(0.05, 80.0, 400)
    ratio = np.array([discrete_gaussian_variance(s * s) / (s * s) for s in sigmas])
    assert np.all(np.diff(ratio) >= -1e-15)
    assert ratio[0] < 1e-80 and ratio[-1] == pytest.approx(1.0, abs=1e-12)


# ------------------------------------------------------------------------------------------
# Large seeded samples against the pmf
# ------------------------------------------------------------------------------------------

N = 200_000


def test_per_value_scales_sample_each_group_with_its_own_scale():
    scales = np.repeat([0.5, 4.0, 30.0], 40_000)
    draws = dprange.privacy.noise.sample_noise("discrete_laplace", scales, scales.size, np.random.default_rng(11))
    variances = noise_variance("discrete_laplace", np.array([0.5, 4.0, 30.0]))
    assert variances.shape == (3,) and variances[1] == NoiseSpec("discrete_laplace", 4.0).variance
    for group, variance in zip(np.split(draws, 3), variances):
        assert group.var() == pytest.approx(variance, rel=0.05)


@pytest.mark.parametrize("epsilon", [5e-17, 1e-16, 2e-16, 3e-16, 1e-300])
def test_scales_beyond_2_to_40_are_refused_with_an_epsilon_message(epsilon):
    with pytest.raises(ParameterError, match="epsilon is too small"):
        NoiseSpec("discrete_laplace", 1.0 / epsilon)
    with pytest.raises(ParameterError, match="epsilon is too small"):
        dprange.Flat().measure(np.array([3, 0, 5]), epsilon, rng=0)


def test_largest_supported_scale_samples_exactly():
    spec = NoiseSpec("discrete_laplace", MAX_SCALE)
    assert spec.effective_scale == MAX_SCALE
    draws = spec.sample(2000, np.random.default_rng(9))
    assert np.any(draws != 0) and np.std(draws.astype(float)) == pytest.approx(math.sqrt(2) * MAX_SCALE, rel=0.15)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf")])
def test_invalid_scales_are_errors(scale):
    for kind in NOISE_KINDS:
        with pytest.raises(ParameterError):
            NoiseSpec(kind, scale)


def test_laplace_is_renamed_and_refused():
    assert NOISE_KINDS == ("discrete_laplace", "laplace_float", "gaussian")
    with pytest.raises(ParameterError, match="discrete_laplace.*laplace_float"):
        NoiseSpec("laplace", 1.0)
    with pytest.raises(ParameterError, match="laplace_float"):
        dprange.Hierarchical(2, noise="laplace")
    draws = NoiseSpec("laplace_float", 1.7).sample(N, np.random.default_rng(1))
    assert stats.kstest(draws, stats.laplace(scale=1.7).cdf).pvalue > 1e-3
    assert NoiseSpec("laplace_float", 1.7).variance == pytest.approx(2 * 1.7**2)
    with pytest.raises(ParameterError):
        pmf("laplace_float", 1.0, np.array([0]))


def test_pmf_sums_to_one_and_effective_scale_is_not_below_the_request():
    for kind, scale in [
        ("discrete_laplace", 0.3),
        ("discrete_laplace", 7.1),
        ("gaussian", 0.3),
        ("gaussian", 7.1),
        ("gaussian", 1000.0),
    ]:
        k = np.arange(-int(80 * scale) - 10, int(80 * scale) + 11)
        assert math.fsum(pmf(kind, scale, k)) == pytest.approx(1.0, abs=1e-12)
        assert effective_scale(kind, scale) >= scale
    with pytest.raises(ParameterError):
        pmf("gaussian", 1.0, np.array([0.5]))


# ------------------------------------------------------------------------------------------
# Gaussian calibration (zCDP, CKS) checked independently
# ------------------------------------------------------------------------------------------


def _zcdp_delta_minimised(rho, epsilon):
    """inf over alpha > 1 of the zCDP -> (epsilon, delta) conversion, minimised by scipy in log space."""

    def log_delta(log_x):
        x = math.exp(log_x)
        alpha = 1 + x
        return x * (alpha * rho - epsilon) - math.log(x) + alpha * math.log(1 - 1 / alpha) if alpha > 1 else math.inf

    grid = np.linspace(-40, 40, 801)
    values = [log_delta(u) for u in grid]
    best = int(np.argmin(values))
    bounds = (grid[max(best - 1, 0)], grid[min(best + 1, 800)])
    result = optimize.minimize_scalar(log_delta, bounds=bounds, method="bounded")
    return min(result.fun, values[best])


def _hockey_stick_1d(sigma2, epsilon):
    """delta(epsilon) of the 1-D discrete Gaussian mechanism with sensitivity 1, summed exactly."""
    sigma = math.sqrt(sigma2)
    k = np.arange(-int(60 * sigma) - 10, int(60 * sigma) + 11, dtype=float)
    log_p = -k * k / (2 * sigma2)
    log_q = -((k - 1) ** 2) / (2 * sigma2)
    log_z = np.logaddexp.reduce(log_p)
    terms = np.exp(log_p - log_z) - np.exp(epsilon + log_q - log_z)
    return math.fsum(terms[terms > 0])


@pytest.mark.parametrize("epsilon, delta", [(1.0, 1e-5), (0.1, 1e-6), (5.0, 1e-3), (0.5, 1e-10), (2.0, 0.3)])
def test_gaussian_sigma_meets_delta_by_independent_computations(epsilon, delta):
    sigma = gaussian_sigma(epsilon, delta)
    sigma2 = NoiseSpec("gaussian", sigma).effective_scale ** 2
    assert _hockey_stick_1d(sigma2, epsilon) <= delta
    for sensitivity in (1.0, 3.5):
        s = gaussian_sigma(epsilon, delta, sensitivity)
        assert s == pytest.approx(sensitivity * sigma, rel=1e-6)
        assert _zcdp_delta_minimised(sensitivity**2 / (2 * s * s), epsilon) <= math.log(delta)
    # and not wastefully large: 1% less noise breaks the zCDP bound
    assert _zcdp_delta_minimised(1 / (2 * (0.99 * sigma) ** 2), epsilon) > math.log(delta)


def test_gaussian_sigma_is_monotone():
    epsilons = [0.01, 0.1, 0.5, 1.0, 3.0, 10.0]
    deltas = [1e-12, 1e-8, 1e-5, 1e-3, 0.1]
    table = np.array([[gaussian_sigma(e, d) for d in deltas] for e in epsilons])
    assert np.all(np.diff(table, axis=0) < 0) and np.all(np.diff(table, axis=1) < 0)


def test_gaussian_sigma_extremes_calibrate_or_raise():
    for epsilon in (1e-300, 1e-12, 1e-3, 1.0, 1e3, 1e24, 1e100, 1e300):
        for delta in (1e-300, 1e-100, 1e-10, 0.5, 0.999):
            try:
                sigma = gaussian_sigma(epsilon, delta)
            except ParameterError as error:
                assert "epsilon is too small" in str(error)
                assert epsilon <= 1e-3
                continue
            assert 0 < sigma <= MAX_SCALE
            spec = NoiseSpec("gaussian", sigma)
            assert spec.effective_scale >= sigma
            assert np.all(np.abs(spec.sample(3, np.random.default_rng(0))) < 2**62)
    # C4: large epsilon used to crash; the bound is checked independently there too
    sigma = gaussian_sigma(1e24, 1e-5)
    assert _zcdp_delta_minimised(1 / (2 * sigma**2), 1e24) <= math.log(1e-5)
    sigma = gaussian_sigma(1.0, 1e-300)
    assert _zcdp_delta_minimised(1 / (2 * sigma**2), 1.0) <= math.log(1e-300)


@pytest.mark.parametrize(
    "epsilon, delta, sensitivity",
    [
        (float("inf"), 1e-5, 1.0),
        (float("nan"), 1e-5, 1.0),
        (0.0, 1e-5, 1.0),
        (-1.0, 1e-5, 1.0),
        (1.0, 0.0, 1.0),
        (1.0, 1.0, 1.0),
        (1.0, float("nan"), 1.0),
        (1.0, 1e-5, 0.0),
        (1.0, 1e-5, float("inf")),
    ],
)
def test_gaussian_sigma_refuses_bad_parameters(epsilon, delta, sensitivity):
    with pytest.raises(ParameterError):
        gaussian_sigma(epsilon, delta, sensitivity)

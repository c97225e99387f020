import math

import numpy as np
import pytest
from scipy import special, stats

from dprange import ParameterError
from dprange.noise import (
    SecureRandom,
    gaussian_sigma,
    noise_variance,
    resolve_rng,
    sample_discrete_laplace,
    sample_gaussian,
    sample_laplace,
)

N = 200_000


def test_laplace_distribution_and_variance():
    x = sample_laplace(1.7, N, np.random.default_rng(1))
    # Kolmogorov-Smirnov against the exact Laplace CDF; p > 0.001 fails with prob 0.001.
    assert stats.kstest(x, stats.laplace(scale=1.7).cdf).pvalue > 1e-3
    assert noise_variance("laplace", 1.7) == pytest.approx(2 * 1.7**2)


def test_discrete_laplace_pmf_matches_exact():
    scale = 2.5
    x = sample_discrete_laplace(scale, N, np.random.default_rng(2))
    assert x.dtype.kind == "i"
    t = math.exp(-1 / scale)
    ks = np.arange(-12, 13)
    pmf = (1 - t) / (1 + t) * t ** np.abs(ks)
    observed = np.array([(x == k).sum() for k in ks])
    tail = N - observed.sum()
    expected = np.append(pmf * N, N * (1 - pmf.sum()))
    chi2 = stats.chisquare(np.append(observed, tail), expected)
    assert chi2.pvalue > 1e-3
    # exact variance 2t/(1-t)^2 against the sample (relative s.e. ~ 0.5% here).
    assert x.var() == pytest.approx(noise_variance("discrete_laplace", scale), rel=0.03)


def test_gaussian_distribution():
    x = sample_gaussian(3.0, N, np.random.default_rng(3))
    assert stats.kstest(x, stats.norm(scale=3.0).cdf).pvalue > 1e-3


def test_secure_random_is_uniform_and_feeds_samplers():
    source = SecureRandom()
    u = source.random(N)
    assert 0 <= u.min() and u.max() < 1
    assert stats.kstest(u, "uniform").pvalue > 1e-4
    k = source.integers(0, 7, N)
    counts = np.bincount(k, minlength=7)
    assert counts.size == 7 and stats.chisquare(counts).pvalue > 1e-4
    z = sample_discrete_laplace(1.0, 1000, source)
    assert z.dtype.kind == "i"
    assert isinstance(resolve_rng(None), SecureRandom)


def test_resolve_rng_seeds_reproduce():
    a = sample_laplace(1.0, 5, resolve_rng(7))
    b = sample_laplace(1.0, 5, resolve_rng(7))
    assert np.array_equal(a, b)
    with pytest.raises(ParameterError):
        resolve_rng("seed")
    with pytest.raises(ParameterError):
        resolve_rng(-1)


def test_analytic_gaussian_meets_delta_exactly():
    for eps, delta, sens in [(1.0, 1e-5, 1.0), (0.1, 1e-6, 2.0), (5.0, 1e-3, 1.0)]:
        sigma = gaussian_sigma(eps, delta, sens)
        a, b = sens / (2 * sigma), eps * sigma / sens
        achieved = special.ndtr(a - b) - math.exp(eps) * special.ndtr(-a - b)
        assert achieved <= delta
        assert achieved == pytest.approx(delta, rel=1e-6)
        if eps < 1:  # never worse than the classical calibration
            assert sigma <= sens * math.sqrt(2 * math.log(1.25 / delta)) / eps

"""dprange.ldp.hashing: OLH's exactly balanced linear hash pool (every pair collides one g-th of the
time, the aggregation equals the dense count, the best prime g), and the HRR helpers."""

import itertools
import math

import numpy as np
import pytest
from _helpers import monte_carlo_estimates

from dprange.ldp import HRR, OLH
from dprange.ldp.oracles import best_prime_g, fwht, linear_pool_size, linear_support_counts, parity


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 3.0, 6.0])
def test_best_prime_g_minimises_the_variance_factor_among_nearby_primes(eps):
    e1 = math.expm1(eps)
    primes = [n for n in range(2, 3 * int(math.exp(eps)) + 8) if all(n % d for d in range(2, n))]
    factor = {g: (e1 + g) ** 2 / (g - 1) for g in primes}
    assert best_prime_g(eps) == min(factor, key=factor.get)


@pytest.mark.parametrize("D, eps", [(5, 1.0), (30, 1.0), (50, 2.0), (20, 3.0)])
def test_linear_pool_collides_every_pair_exactly_one_gth_of_the_time(D, eps):
    """Over the whole pool, h_a(x) = h_a(y) for exactly pool / g hashes, for every pair x != y:
    the estimator's q = 1/g is exact, not an expectation over a random pool."""
    olh = OLH(D, eps)
    assert olh.hash_family == "linear"
    table = olh.hash_table(np.arange(olh.hash_pool), np.arange(D)).astype(np.int64)  # pool x D
    for x, y in itertools.combinations(range(D), 2):
        assert np.count_nonzero(table[:, x] == table[:, y]) * olh.g == olh.hash_pool


@pytest.mark.parametrize("D, eps", [(1024, 1.0), (100, 3.0), (2000, 2.0), (9, 1.0)])
def test_linear_pool_aggregation_equals_the_dense_count(D, eps):
    """C_z = #{u : h_u(z) = y_u} on the dense users x items matrix equals the fast aggregate
    (digit-wise transform where g^2 <= D, direct table lookup otherwise)."""
    olh = OLH(D, eps)
    rng = np.random.default_rng(7)
    reports = olh.randomize(rng.integers(0, D, 3000), rng)
    dense = olh.hash_table(reports.data["seed"], np.arange(D)) == reports.data["value"][:, None]
    np.testing.assert_array_equal(olh.summarize(reports), dense.sum(axis=0))
    table = np.bincount(reports.data["seed"] * olh.g + reports.data["value"], minlength=olh.hash_pool * olh.g)
    np.testing.assert_array_equal(
        linear_support_counts(table.reshape(olh.hash_pool, olh.g), olh.g, olh.digits)[:D], dense.sum(axis=0)
    )


def test_linear_pool_size_limits():
    assert linear_pool_size(1024, 3) == 2187 and linear_pool_size(1024, 4) is None
    assert linear_pool_size(3, 5) == 5 and linear_pool_size(2**20, 3) == 3**13
    assert linear_pool_size(2**22, 3) is None  # 3^14 * 3 > 2^23


def test_hrr_helpers_and_padding():
    """parity = popcount mod 2; fwht = multiplication by the Sylvester-Hadamard matrix; HRR
    over a non-power-of-two domain is unbiased with the stated variance (Monte-Carlo)."""
    x = np.arange(4096)
    assert np.array_equal(parity(x), np.array([bin(v).count("1") % 2 for v in x]))
    H = np.array([[1.0]])
    for _ in range(4):
        H = np.block([[H, H], [H, -H]])
    a = np.random.default_rng(0).normal(size=16)
    np.testing.assert_allclose(fwht(a), H @ a)
    oracle = HRR(6, 1.2)  # padded to 8
    reps = 600
    est, f, var = monte_carlo_estimates(oracle, [0.5, 0.2, 0.1, 0.1, 0.1, 0.0], 2000, reps, seed=4)
    # mean within 4.5 s.e.; variance ratio s.d. sqrt(2/599) = 0.058, allowed 0.3 (5 s.d.)
    assert est.shape == (reps, 6)
    assert np.all(np.abs(est.mean(axis=0) - f) <= 4.5 * np.sqrt(var / reps))
    assert np.all(np.abs(est.var(axis=0, ddof=1) / var - 1) < 0.3)

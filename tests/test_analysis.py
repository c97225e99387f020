"""Exact expected error: fast paths against dense formulas and Monte-Carlo; selection."""

import math

import numpy as np
import pytest
from _helpers import gls_covariance

import dprange
from dprange import Flat, Hierarchical, ParameterError, Wavelet
from dprange.analysis import (
    expected_error,
    max_error,
    noise_variance_floor,
    optimal_hierarchy,
    optimized_budget,
    select,
    svd_bound,
)
from dprange.privacy.noise import discrete_gaussian_variance, gaussian_sigma
from dprange.strategies.trees import HaarStrategy
from dprange.workloads import AllRange, Explicit, Identity, Prefix, RandomRanges, Ranges

MECHS = [
    Flat(noise="laplace_float"),
    Flat(neighbours="replace"),
    Hierarchical(2, noise="laplace_float"),
    Hierarchical([3, 3, 3], [0.1, 0.2, 0.25, 0.35], measure_root=True, noise="laplace_float"),  # sums to eps = 0.9
    Hierarchical(4, "geometric", neighbours="replace"),
    Hierarchical(16, measure_root=False),
    Hierarchical([2, 4, 4]),
    Wavelet(),
    Wavelet(neighbours="replace", noise="laplace_float"),
]


def dense_covariance(mech, n, eps, delta=0.0):
    """Covariance of the GLS estimate from the explicit strategy matrix and noise variances."""
    strategy = mech.strategy(n)
    if isinstance(strategy, HaarStrategy) and strategy.size != n:
        # Privelet's estimator does not assume the padding bins are empty: it is GLS on the
        # padded domain, restricted to the real bins.
        return dense_covariance(mech, strategy.size, eps, delta)[:n, :n]
    A = strategy.dense()
    variances = mech.level_variances(strategy, eps, delta)
    if isinstance(strategy, HaarStrategy):
        sizes = {d: 1 if d == 0 else 2 ** (d - 1) for d in strategy.measured_depths}
    else:
        sizes = {d: strategy.level_sizes[d] for d in strategy.measured_depths}
    v = np.concatenate([np.full(sizes[d], variances[d]) for d in strategy.measured_depths])
    return gls_covariance(A.T @ np.diag(1 / v) @ A, strategy.known_total)


@pytest.mark.parametrize("mech", MECHS, ids=repr)
@pytest.mark.parametrize("n", [7, 16, 27])
def test_fast_paths_equal_dense_formula(mech, n):
    eps = 0.9
    cov = dense_covariance(mech, n, eps)
    for workload in (AllRange(n), Prefix(n), Identity(n), RandomRanges(n, 50, seed=1)):
        W = workload.dense()
        exact = np.trace(W @ cov @ W.T) / W.shape[0]
        assert expected_error(mech, workload, eps) == pytest.approx(exact, rel=1e-9)
        assert max_error(mech, workload, eps) == pytest.approx(np.max(np.einsum("ij,jk,ik->i", W, cov, W)), rel=1e-9)
    # the closed-form Gram matrices equal W^T W
    for workload in (AllRange(n), Prefix(n), Identity(n)):
        W = workload.dense()
        np.testing.assert_allclose(workload.gram(), W.T @ W)
    # an explicit workload goes through the generic path
    W = np.random.default_rng(n).normal(size=(4, n))
    assert expected_error(mech, Explicit(W), eps) == pytest.approx(np.trace(W @ cov @ W.T) / 4, rel=1e-9)


def test_expected_error_matches_monte_carlo():
    """Average squared error over all ranges from 2000 releases vs the exact value.

    Over 20 seeds the ratio (Monte-Carlo / exact) had mean 1.0002 and s.d. 0.0166, so a
    tolerance of 0.066 is 4 s.d.; a factor-2 error in any level's variance fails."""
    n, eps = 12, 0.8
    x = np.array([3, 0, 5, 8, 1, 1, 0, 4, 9, 2, 2, 6])
    mech = Hierarchical(3, "geometric", noise="laplace_float")
    W = AllRange(n).dense()
    truth = W @ x
    rng = np.random.default_rng(11)
    sq = np.zeros(W.shape[0])
    reps = 2000
    for _ in range(reps):
        est = mech.release(x, eps, rng=rng).histogram().value
        sq += (W @ est - truth) ** 2
    assert sq.mean() / reps == pytest.approx(expected_error(mech, AllRange(n), eps), rel=0.066)


def test_svd_bound_is_a_lower_bound():
    n, eps = 64, 1.0
    bound = svd_bound(AllRange(n), eps, noise="laplace_float")
    for mech in (
        Flat(noise="laplace_float"),
        Wavelet(noise="laplace_float"),
        Hierarchical(2, noise="laplace_float"),
        Hierarchical(4, noise="laplace_float"),
        Hierarchical(8, noise="laplace_float"),
    ):
        assert expected_error(mech, AllRange(n), eps) >= bound
    # identity workload: bound = 2 n^2 / (eps^2 n) / n = 2/eps^2 = Flat's Laplace error, tight
    flat = expected_error(Flat(noise="laplace_float"), Identity(n), eps)
    assert svd_bound(Identity(n), eps, noise="laplace_float") == pytest.approx(flat)


@pytest.mark.parametrize(
    ("epsilon", "delta", "noise", "floor"),
    [
        (1.0, 0.0, "laplace_float", 2.0),
        (1.0, 0.0, "discrete_laplace", 0.5 / math.sinh(0.5) ** 2),
        (3.0, 0.0, "auto", 0.5 / math.sinh(1.5) ** 2),
        (1.0, 1e-6, "auto", None),
        (5.0, 1e-3, "gaussian", None),
        (20.0, 1e-2, "gaussian", None),
    ],
)
def test_svd_bound_holds_for_the_noise_dprange_draws(epsilon, delta, noise, floor):
    """The bound's factor is the least noise variance per unit of sensitivity of that kind
    (discrete Laplace 1 / (2 sinh^2(eps / 2)), the discrete Gaussian's variance at
    gaussian_sigma(eps, delta)); the former 2 / eps^2 and 2 log(2 / delta) / eps^2 lay above
    Flat's own error (1.84 < 2 at eps = 1; 20.5 < 29.0 at eps = 1, delta = 1e-6).  Flat on the
    identity workload reaches it; every candidate of select (the optimised strategy included)
    stays above it on all ranges, prefixes and a 0/1 matrix."""
    if floor is None:
        floor = discrete_gaussian_variance(gaussian_sigma(epsilon, delta) ** 2)
    assert noise_variance_floor(epsilon, delta, noise) == pytest.approx(floor, rel=1e-12)
    n = 24
    flat = expected_error(Flat(noise=noise), Identity(n), epsilon, delta=delta)
    assert svd_bound(Identity(n), epsilon, delta, noise=noise) == pytest.approx(flat, rel=1e-6)
    matrix = Explicit(np.random.default_rng(5).integers(0, 2, size=(10, n)))
    for workload in (AllRange(n), Prefix(n), matrix):
        bound = svd_bound(workload, epsilon, delta, noise=noise)
        table = select(workload, None, epsilon, delta=delta, noise=noise).table
        assert len(table) >= 5
        for candidate in table:
            assert candidate.error >= bound * (1 - 1e-9), candidate.mechanism


def test_selection_is_never_worse_and_beats_fixed_choices():
    n, eps = 300, 1.0
    fixed = [Flat(), Hierarchical(2), Hierarchical(16), Wavelet()]
    for workload in (AllRange(n), Prefix(n), Identity(n)):
        sel = select(workload, None, eps)
        errors = [c.error for c in sel.table]
        assert sel.error == min(errors) and errors == sorted(errors)
        best_fixed = min(expected_error(m, workload, eps) for m in fixed)
        assert sel.error <= best_fixed
        assert expected_error(sel.mechanism, workload, eps) == pytest.approx(sel.error)
    # on all ranges some tuned hierarchy strictly beats the four fixed choices
    sel = select(AllRange(n), None, eps)
    assert sel.error < min(expected_error(m, AllRange(n), eps) for m in fixed)
    # identity: Flat is optimal
    assert isinstance(select(Identity(n), None, eps).mechanism, Flat)


def test_optimized_budget_beats_rules():
    n, eps = 256, 1.0
    budget, err = optimized_budget(Prefix(n), None, eps, 4, neighbours="replace", noise="laplace_float")
    assert sum(budget) == pytest.approx(eps)
    for rule in ("uniform", "geometric"):
        assert (
            err
            <= expected_error(Hierarchical(4, rule, neighbours="replace", noise="laplace_float"), Prefix(n), eps) + 1e-9
        )
    sel = optimal_hierarchy(AllRange(64), None, eps, noise="laplace_float")
    assert sel.error == min(c.error for c in sel.table)


def test_release_auto_uses_selection():
    values = np.random.default_rng(0).integers(0, 100, 1000)
    rel = dprange.release(values, dprange.Domain.integers(0, 99), 1.0, mechanism="auto", workload="identity", rng=0)
    assert rel.mechanism == "flat"


def test_bad_workloads():
    with pytest.raises(ParameterError):
        Ranges([3], [2])
    with pytest.raises(ParameterError):
        Ranges([0], [5], n=4)
    with pytest.raises(ParameterError):
        expected_error(Flat(), "all-range", 1.0)
    with pytest.raises(ParameterError):
        expected_error(Flat(), AllRange(5), 1.0, n=6)


def test_a_ranges_gram_is_the_dense_one_and_needs_no_dense_matrix(monkeypatch):
    """Ranges.gram by the (lo, hi) table equals W^T W; with more ranges x bins than a dense
    matrix may hold (the dense form is refused) it is still exact: its diagonal counts the
    ranges covering each bin, an entry (i, j) those covering both."""
    from dprange.workloads import ranges as workloads

    small = RandomRanges(40, 300, seed=2)
    np.testing.assert_array_equal(small.gram(), small.dense().T @ small.dense())
    monkeypatch.setattr(workloads, "DENSE_LIMIT", 10_000)
    big = RandomRanges(256, 5000, seed=3)
    with pytest.raises(ParameterError, match="too large to materialise"):
        big.dense()
    gram = big.gram()
    covering = np.array([np.sum((big.lo <= i) & (big.hi >= i)) for i in range(256)])
    np.testing.assert_array_equal(np.diag(gram), covering)
    for i, j in ((3, 200), (100, 101), (0, 255)):
        assert gram[i, j] == gram[j, i] == np.sum((big.lo <= i) & (big.hi >= j))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_an_explicit_workload_with_a_non_finite_entry_is_refused_when_built(bad):
    """It failed deep inside the optimiser with scipy's 'array must not contain infs or NaNs'."""
    matrix = np.ones((3, 8))
    matrix[1, 2] = bad
    with pytest.raises(ParameterError, match="explicit workload's matrix has a non-finite entry"):
        Explicit(matrix)


def test_a_query_matrix_or_a_list_of_ranges_as_workload_names_the_wrappers():
    """A bare matrix or list of (lo, hi) pairs is not a workload: the message says how to wrap it
    and does not print the whole matrix."""
    matrix = np.ones((300, 64))
    values = np.zeros(10, dtype=int)
    for workload in (matrix, [(0, 9), (10, 29)]):
        with pytest.raises(ParameterError, match=r"Explicit\(matrix\).*Ranges\(lo, hi, n\)") as info:
            dprange.release(values, dprange.Domain.integers(0, 63), 1.0, workload=workload)
        assert len(str(info.value)) < 400
    from dprange.mechanisms.optimized import Optimized

    with pytest.raises(ParameterError, match=r"Explicit\(matrix\)") as info:
        Optimized(matrix)
    assert len(str(info.value)) < 400

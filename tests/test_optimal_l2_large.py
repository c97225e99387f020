"""The L2 optimum on many bins (dprange.optimize.l2_optimum): the light dual step and its equilibrated
primal against the dense formulas, the coarsened Gram matrix against P^T G P, the multilevel
start against the constant one, template auto's optimum alone above 1024 bins; and the dense
release's certified Cholesky paths (rank check, covariance) against the SVD forms they replace."""

import numpy as np
import pytest

from dprange.cholesky import cholesky_inverse, well_conditioned_cholesky
from dprange.inference.least_squares import dense_covariance
from dprange.mechanisms.optimized import Optimized
from dprange.operators import Explicit
from dprange.optimize import l2_optimum as optimal_l2
from dprange.workloads import AllRange, Prefix


def random_gram(n: int, m: int, seed: int) -> np.ndarray:
    W = np.random.default_rng(seed).integers(0, 2, (m, n)).astype(float)
    return W.T @ W


@pytest.mark.parametrize("gram", [Prefix(9).gram(), AllRange(7).gram(), random_gram(8, 20, 3)])
def test_light_dual_matches_the_dense_formulas(gram):
    """g(mu), its gradient, max_j X_jj trace((M^1/2 G M^1/2)^1/2) and trace(G X'^-1) for the
    equilibrated X' = D X D (unit diagonal) against X(mu) formed densely."""
    n = gram.shape[0]
    mu = np.random.default_rng(n).uniform(0.5, 2.0, n)
    value, gradient, scaled, equilibrated, (vectors, s, diagonal) = optimal_l2._light_dual(gram, mu)
    reference_value, reference_gradient, x, reference_primal = optimal_l2.l2_dual(gram, mu)
    assert value == pytest.approx(reference_value, rel=1e-12)
    np.testing.assert_allclose(gradient, reference_gradient, atol=1e-12)
    np.testing.assert_allclose(diagonal, np.diag(x), rtol=1e-12)
    assert scaled == pytest.approx(reference_primal, rel=1e-12)
    d = 1.0 / np.sqrt(np.diag(x))
    x_unit = d[:, None] * x * d[None, :]
    assert equilibrated == pytest.approx(np.trace(gram @ np.linalg.inv(x_unit)), rel=1e-10)
    assert value <= min(scaled, equilibrated)  # weak duality


def test_coarsened_gram_is_p_transpose_g_p_with_a_short_last_group():
    gram = random_gram(10, 15, 1)
    coarse, sizes = optimal_l2._coarsened(gram, 4)
    P = np.zeros((10, 3))
    for j in range(10):
        P[j, j // 4] = 1.0
    np.testing.assert_array_equal(coarse, P.T @ gram @ P)
    assert sizes.tolist() == [4, 4, 2]


@pytest.mark.parametrize("workload", [AllRange(80), Prefix(80), None])
def test_multilevel_start_reaches_the_same_optimum(monkeypatch, workload):
    """From the coarse start (MULTILEVEL_MIN_N lowered to 16: 80 -> 20 -> 5 bins) the solver
    ends at the optimum of the constant start: the traces agree within the gap, each bound
    lies under both traces, and the strategy's columns have norm at most 1 (the largest 1)."""
    gram = workload.gram() if workload is not None else random_gram(80, 120, 2)
    cold = optimal_l2.l2_optimum(gram)
    monkeypatch.setattr(optimal_l2, "MULTILEVEL_MIN_N", 16)
    warm = optimal_l2.l2_optimum(gram)
    assert warm.trace == pytest.approx(cold.trace, rel=3 * optimal_l2.GAP_TOLERANCE)
    assert max(warm.bound, cold.bound) <= min(warm.trace, cold.trace) * (1 + 1e-12)
    norms = np.linalg.norm(warm.strategy, axis=0)
    assert norms.max() == pytest.approx(1.0, rel=1e-12)
    assert optimal_l2.strategy_trace(warm.strategy, gram) == pytest.approx(warm.trace, rel=1e-12)


def test_the_large_gap_tolerance_applies_above_1024_bins():
    assert optimal_l2.gap_tolerance(1024) == optimal_l2.GAP_TOLERANCE == 1e-6
    assert optimal_l2.gap_tolerance(1025) == optimal_l2.LARGE_GAP_TOLERANCE == 1e-4


def test_template_auto_builds_the_optimum_alone_under_add_remove(monkeypatch, tmp_path):
    """Template auto at (1, 1e-6) on 32 bins builds the L2 optimum alone under add/remove
    (nothing else in also_built), the strategy of template l2-optimal; under replace it still
    builds and compares both."""
    monkeypatch.setenv("DPRANGE_CACHE_DIR", str(tmp_path))
    auto = Optimized("prefix", template="auto")
    auto.design(32, 1.0, delta=1e-6)
    strategy = auto.optimised_strategy(32)
    assert strategy.template == "l2-optimal" and "also_built" not in strategy.describe()
    alone = Optimized("prefix", template="l2-optimal").optimised_strategy(32)
    assert strategy.trace == pytest.approx(alone.trace, rel=1e-12)
    on_replace = Optimized("prefix", template="auto", neighbours="replace")
    on_replace.design(32, 1.0, delta=1e-6)
    replace = on_replace.optimised_strategy(32)
    built = [strategy["template"] for strategy in replace.describe().get("also_built", [])]
    assert sorted(built + [replace.template]) == ["l2-optimal", "p-identity-l2"]


# ----------------------------------------------------------------------------- dense release


def test_well_conditioned_cholesky_certifies_only_what_it_should():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(30, 12))
    assert well_conditioned_cholesky(A.T @ A) is not None
    singular = A[:, :11] @ rng.normal(size=(11, 12))  # rank 11
    assert well_conditioned_cholesky(singular.T @ singular) is None
    q = np.linalg.qr(rng.normal(size=(12, 12)))[0]
    ill = q @ np.diag([1.0] * 11 + [1e-12]) @ q.T  # least eigenvalue below 1e-10 of the trace
    assert well_conditioned_cholesky(ill) is None
    assert well_conditioned_cholesky(np.zeros((3, 3))) is None
    gram = A.T @ A
    np.testing.assert_allclose(cholesky_inverse(well_conditioned_cholesky(gram)), np.linalg.inv(gram), rtol=1e-10)


@pytest.mark.parametrize("known_total", [False, True])
def test_dense_covariance_equals_the_pseudo_inverse(known_total):
    """The Cholesky path (S, and S - w w^T / 1^T w with a public total) against the
    pseudo-inverse of A^T V^-1 A, projected onto the sum-zero subspace with a public total; a
    strategy of rank n - 1 that the total completes takes the pseudo-inverse path."""
    rng = np.random.default_rng(1)
    n = 15
    P = np.eye(n) - 1.0 / n
    for A in (rng.integers(0, 4, (40, n)).astype(float), np.eye(n)[:-1] - np.eye(n)[1:]):
        v = rng.uniform(1.0, 3.0, A.shape[0])
        gram = A.T @ (A / v[:, None])
        reference = np.linalg.pinv(P @ gram @ P if known_total else gram, rtol=1e-10, hermitian=True)
        if A.shape[0] < n and not known_total:
            continue  # rank n - 1 without a total: not a release
        np.testing.assert_allclose(dense_covariance(A, v, known_total), reference, atol=1e-10 * np.abs(reference).max())


def test_dense_covariance_from_a_given_gram_matrix_and_the_cached_explicit_gram():
    """The covariance from A^T V^-1 A given (one block, one variance: the block's cached A^T A
    over it) equals the one computed from A; Explicit.dense_gram is A^T A (dense or sparse),
    computed once and read-only."""
    import scipy.sparse as sp

    rng = np.random.default_rng(3)
    A = rng.integers(0, 4, (30, 12)).astype(float)
    for matrix in (A, sp.csr_matrix(A)):
        block = Explicit(matrix)
        gram = block.dense_gram()
        np.testing.assert_array_equal(gram, A.T @ A)
        assert block.dense_gram() is gram and not gram.flags.writeable
    for known_total in (False, True):
        np.testing.assert_allclose(
            dense_covariance(None, 2.5, known_total, gram=(A.T @ A) / 2.5),
            dense_covariance(A, 2.5, known_total),
            rtol=1e-12,
        )

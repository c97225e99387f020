"""The exact optimum of the L2 matrix mechanism (dprange.optimize.l2_optimum): the dual's gradient
against finite differences, weak and strong duality, closed forms, optimality against a generic
optimiser on tiny domains, the replace program, many bins (the light dual step, the coarsened
Gram matrix, the multilevel start) and the template as released (Monte-Carlo, cache)."""

import numpy as np
import pytest
from scipy import optimize

from dprange.analysis import expected_error, l2_optimum_bound
from dprange.analysis import grid as grid_analysis
from dprange.errors import ParameterError
from dprange.mechanisms.matrix import Matrix
from dprange.mechanisms.optimized import Optimized
from dprange.optimize import l2_optimum as optimal_l2
from dprange.optimize.l2_optimum import (
    GAP_TOLERANCE,
    L2_OPTIMUM_MAX_N,
    as_p_identity_l2,
    check_l2_optimum_bins,
    l2_dual,
    l2_optimum,
    l2_replace_dual,
    l2_replace_optimum,
    strategy_trace,
)
from dprange.optimize.p_identity import column_norm, eigen_design, optimize_p_identity, p_identity_matrix
from dprange.workloads import AllRange, Explicit, Prefix


def random_gram(n: int, m: int, seed: int) -> np.ndarray:
    W = np.random.default_rng(seed).integers(0, 2, (m, n)).astype(float)
    return W.T @ W


GRAMS = {
    "all-range": AllRange(12).gram(),
    "prefix": Prefix(12).gram(),
    "random-30": random_gram(12, 30, 1),
    "random-rank-5": random_gram(12, 5, 0),
}


def unit_l2_trace(strategy: np.ndarray, gram: np.ndarray) -> float:
    """trace(G (A^T A)^-1) of A scaled to largest column L2 norm 1."""
    return strategy_trace(strategy, gram) * column_norm(strategy, 2) ** 2


@pytest.mark.parametrize("name", ["all-range", "prefix", "random-30"])
def test_dual_gradient_matches_central_differences(name):
    """dg/dmu_j = X_jj - 1 against central differences (h = 1e-6 of mu_j) at random mu."""
    gram = GRAMS[name]
    rng = np.random.default_rng(3)
    for _ in range(3):
        mu = rng.uniform(0.2, 3.0, gram.shape[0])
        _, grad, _, _ = l2_dual(gram, mu)
        numeric = []
        for j in range(mu.size):
            step = np.zeros_like(mu)
            step[j] = 1e-6 * mu[j]
            numeric.append((l2_dual(gram, mu + step)[0] - l2_dual(gram, mu - step)[0]) / (2 * step[j]))
        np.testing.assert_allclose(numeric, grad, atol=1e-6 * np.max(np.abs(grad)), rtol=0)


@pytest.mark.parametrize("name", list(GRAMS))
def test_weak_and_strong_duality(name):
    """Every dual value lies below the error of every strategy with unit L2 columns (random
    ones, the identity, the eigen-design, the L2 p-Identity optimum); the solver's bound and
    the trace of its strategy meet within the stated gap (plus the rank floor's cost on a
    singular Gram), and the bound is at least the SVD bound (the dual at constant mu)."""
    gram = GRAMS[name]
    n = gram.shape[0]
    result = l2_optimum(gram)
    assert column_norm(result.strategy, 2) == pytest.approx(1.0, rel=1e-12)
    assert result.trace == pytest.approx(strategy_trace(result.strategy, gram), rel=1e-9)
    singular = np.linalg.matrix_rank(gram) < n
    assert result.bound <= result.trace <= result.bound * (1 + (1e-3 if singular else 2 * GAP_TOLERANCE))
    svd = float(np.sum(np.sqrt(np.clip(np.linalg.eigvalsh(gram), 0, None)))) ** 2 / n
    assert result.bound >= svd * (1 - 1e-12)
    rng = np.random.default_rng(5)
    theta, _ = optimize_p_identity(gram, 3, norm=2)
    others = [np.eye(n), eigen_design(gram), p_identity_matrix(theta, norm=2)]
    others += [rng.normal(size=(n + 4, n)) for _ in range(20)]
    for strategy in others:
        assert unit_l2_trace(strategy, gram) >= result.bound * (1 - 1e-12)
    assert result.trace <= min(unit_l2_trace(s, gram) for s in others) * (1 + 2 * GAP_TOLERANCE)


def test_diagonal_gram_closed_form():
    """G = diag(g): the optimum is X = I, trace sum g, where the SVD bound (sum sqrt g)^2 / n
    lies below it for unequal g."""
    g = np.array([1.0, 4.0, 9.0, 0.25, 2.0])
    result = l2_optimum(np.diag(g))
    assert result.bound == pytest.approx(g.sum(), rel=2 * GAP_TOLERANCE)
    assert result.trace == pytest.approx(g.sum(), rel=2 * GAP_TOLERANCE)
    assert np.sum(np.sqrt(g)) ** 2 / g.size < 0.8 * g.sum()
    identity = l2_optimum(np.eye(7))
    assert identity.bound == pytest.approx(7.0, rel=1e-12) and identity.steps <= 2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_generic_optimiser_start_beats_the_optimum(seed):
    """On 5 bins a generic L-BFGS over full strategies A (8 x 5, every column scaled to unit
    L2 norm: smooth, and the optimum's columns all have norm 1 where every mu_j > 0) from 10
    random starts never goes below the bound and its best reaches the trace."""
    gram = random_gram(5, 7, seed) + np.diag(np.arange(1.0, 6.0))
    result = l2_optimum(gram)

    def loss(flat):
        a = flat.reshape(8, 5)
        return strategy_trace(a / np.linalg.norm(a, axis=0), gram)

    rng = np.random.default_rng(seed)
    found = [optimize.minimize(loss, rng.normal(size=40), method="L-BFGS-B").fun for _ in range(10)]
    assert min(found) >= result.bound * (1 - 1e-9)
    assert min(found) == pytest.approx(result.trace, rel=1e-4)


def test_singular_gram_gives_a_full_rank_strategy():
    """An explicit 0/1 workload of rank 20 on 48 bins: the strategy has full rank (the least
    squares need it), and its trace is within 0.1% of the bound (measured 1.00013: the ridge's
    cost and the degenerate dual, module doc)."""
    gram = random_gram(48, 20, 4)
    result = l2_optimum(gram)
    assert np.linalg.matrix_rank(result.strategy) == 48
    assert result.trace <= 1.001 * result.bound


@pytest.mark.parametrize(
    ("gram", "message"),
    [
        (np.ones((3, 4)), "square"),
        (np.full((3, 3), np.nan), "not finite"),
        (np.zeros((3, 3)), "no query"),
        (np.eye(L2_OPTIMUM_MAX_N + 1), "n <= 4096"),
    ],
)
def test_bad_gram_matrices_are_refused(gram, message):
    with pytest.raises(ParameterError, match=message):
        l2_optimum(gram)


# ----------------------------------------------------------------------------- the template


def test_template_is_the_matrix_mechanism_on_its_quantised_strategy_and_beats_the_others():
    workload = Prefix(32)
    mech = Optimized(workload, template="l2-optimal")
    error = expected_error(mech, workload, 1.0, delta=1e-6)
    strategy = mech.strategy(32)
    assert strategy.template == "l2-optimal" and strategy.describe()["measured"] == "optimised"
    assert error == pytest.approx(expected_error(Matrix(strategy.explicit()), workload, 1.0, delta=1e-6), rel=1e-9)
    for other in ("p-identity-l2", "eigen"):
        assert error < expected_error(Optimized(workload, template=other), workload, 1.0, delta=1e-6)


def test_monte_carlo_variance_agrees_with_the_exact_error():
    """400 seeded Gaussian releases: every prefix's empirical variance within 25% of the exact
    one (sd of a variance estimate sqrt(2 / 400) = 7%), the mean within 4 standard errors."""
    n, reps = 16, 400
    mech = Optimized("prefix", template="l2-optimal")
    counts = np.random.default_rng(1).integers(0, 40, n)
    truth = np.cumsum(counts)
    answers = np.array(
        [mech.release(counts, 1.0, delta=1e-6, rng=seed).prefix(np.arange(n)).value for seed in range(reps)]
    )
    exact = mech.error_model(n, 1.0, delta=1e-6).range_variance(np.zeros(n, dtype=int), np.arange(n))
    assert np.var(answers, axis=0) == pytest.approx(exact, rel=0.25)
    assert np.all(np.abs(answers.mean(axis=0) - truth) <= 4 * np.sqrt(exact / reps))


def test_low_rank_explicit_workload_is_released():
    """An explicit random 0/1 matrix of 30 queries on 64 bins (rank 30): released with exact
    error bars, below the eigen-design's error."""
    workload = Explicit(np.random.default_rng(0).integers(0, 2, size=(30, 64)))
    optimum = expected_error(Optimized(workload, template="l2-optimal"), workload, 1.0, delta=1e-6)
    eigen = expected_error(Optimized(workload, template="eigen"), workload, 1.0, delta=1e-6)
    assert optimum <= eigen
    assert optimum <= 1.002 * l2_optimum_bound(workload, 1.0, 1e-6)
    release = Optimized(workload, template="l2-optimal").release(np.arange(64), 1.0, delta=1e-6, rng=0)
    assert np.all(np.isfinite(release.range(np.arange(8), np.arange(8) + 3).stderr))


def test_too_many_bins_are_refused_before_any_n_x_n_work(monkeypatch):
    """Above 4096 bins the template, the 1-D and the k-D bounds refuse at once (the Gram matrix
    of 8192 bins alone is 512 MB)."""

    def no_gram(self):
        raise AssertionError("the Gram matrix was built")

    monkeypatch.setattr(Prefix, "gram", no_gram)
    with pytest.raises(ParameterError, match="n <= 4096 bins"):
        Optimized("prefix", template="l2-optimal").strategy(8192)
    with pytest.raises(ParameterError, match="n <= 4096 bins"):
        l2_optimum_bound(Prefix(8192), 1.0, 1e-6)
    with pytest.raises(ParameterError, match="n <= 4096 bins"):
        grid_analysis.l2_optimum_bound((4, 8192), "prefix-rectangles", 1.0, 1e-6)


# ----------------------------------------------------------------------------- replace neighbours


def replace_error(strategy: np.ndarray, gram: np.ndarray) -> float:
    """trace(G (S - w w^T / tau)) with S = (A^T A)^-1, w = S 1, tau = 1^T w (least squares with
    a public total), times the largest squared pairwise column distance (the replace L2
    sensitivity): the replace program's objective for any full-rank A."""
    s = np.linalg.inv(strategy.T @ strategy)
    w = s.sum(axis=1)
    covariance = s - np.outer(w, w) / w.sum()
    product = strategy.T @ strategy
    upper = np.triu_indices(gram.shape[0], 1)
    distances = product[upper[0], upper[0]] + product[upper[1], upper[1]] - 2 * product[upper]
    return float(np.trace(gram @ covariance)) * float(distances.max())


@pytest.mark.parametrize("name", ["prefix", "random-30"])
def test_replace_dual_gradient_matches_central_differences(name):
    gram = GRAMS[name][:8, :8]
    n = gram.shape[0]
    rng = np.random.default_rng(4)
    weights = rng.uniform(0.2, 2.0, n * (n - 1) // 2)
    _, grad, _, _ = l2_replace_dual(gram, weights)
    numeric = []
    for k in range(weights.size):
        step = np.zeros_like(weights)
        step[k] = 1e-6 * weights[k]
        up, down = l2_replace_dual(gram, weights + step)[0], l2_replace_dual(gram, weights - step)[0]
        numeric.append((up - down) / (2 * step[k]))
    np.testing.assert_allclose(numeric, grad, atol=1e-6 * np.max(np.abs(grad)), rtol=0)


@pytest.mark.parametrize("name", ["all-range", "prefix", "random-30"])
def test_replace_weak_and_strong_duality(name):
    """The replace objective of random strategies, the identity and the add/remove L2 optimum
    is never below the bound; the solver's strategy has largest pairwise distance 1, full
    rank, and its objective meets the bound within the stated gap."""
    gram = GRAMS[name]
    n = gram.shape[0]
    result = l2_replace_optimum(gram)
    assert replace_error(result.strategy, gram) == pytest.approx(result.trace, rel=1e-9)
    assert result.bound <= result.trace <= result.bound * (1 + 2 * GAP_TOLERANCE)
    assert np.linalg.matrix_rank(result.strategy) == n
    rng = np.random.default_rng(6)
    others = [np.eye(n), l2_optimum(gram).strategy] + [rng.normal(size=(n + 3, n)) for _ in range(20)]
    for strategy in others:
        assert replace_error(strategy, gram) >= result.bound * (1 - 1e-12)


def test_the_total_direction_changes_neither_error_nor_sensitivity():
    """Adding c 1 1^T to X (the solver's choice of c) leaves the replace objective unchanged."""
    gram = GRAMS["prefix"]
    strategy = l2_replace_optimum(gram).strategy
    x = strategy.T @ strategy
    for c in (0.1, 10.0):
        shifted = np.linalg.cholesky(x + c * np.ones_like(x)).T
        assert replace_error(shifted, gram) == pytest.approx(replace_error(strategy, gram), rel=1e-8)


def test_replace_program_has_its_own_cache_entry_and_the_kd_axes_keep_add_remove():
    """The replace strategy is cached apart from the add/remove one (the strategy depends on
    the relation); the k-D product's axes keep the add/remove optimum under replace."""
    from dprange.mechanisms.optimized_grid import OptimizedKronecker

    replace = Optimized("prefix", template="l2-optimal", neighbours="replace").strategy(20)
    add_remove = Optimized("prefix", template="l2-optimal").strategy(20)
    assert not np.allclose(replace.unquantised, add_remove.unquantised)
    again = Optimized("prefix", template="l2-optimal", neighbours="replace").strategy(20)
    assert again.cached and np.array_equal(again.unquantised, replace.unquantised)
    kd = OptimizedKronecker("prefix-rectangles", template="l2-optimal", neighbours="replace")
    kd.follow_delta(1e-6)
    plain = OptimizedKronecker("prefix-rectangles", template="l2-optimal")
    plain.follow_delta(1e-6)
    np.testing.assert_array_equal(kd.axis_strategies((20, 4))[0].theta, plain.axis_strategies((20, 4))[0].theta)


def test_replace_monte_carlo_variance_agrees_with_the_exact_error():
    """400 seeded Gaussian releases under replace (public total): every prefix's empirical
    variance within 25% of the exact one, the mean within 4 standard errors."""
    n, reps = 16, 400
    mech = Optimized("prefix", template="l2-optimal", neighbours="replace")
    counts = np.random.default_rng(1).integers(0, 40, n)
    truth = np.cumsum(counts)
    answers = np.array(
        [mech.release(counts, 1.0, delta=1e-6, rng=seed).prefix(np.arange(n - 1)).value for seed in range(reps)]
    )
    exact = mech.error_model(n, 1.0, delta=1e-6).range_variance(np.zeros(n - 1, dtype=int), np.arange(n - 1))
    assert np.var(answers, axis=0) == pytest.approx(exact, rel=0.25)
    assert np.all(np.abs(answers.mean(axis=0) - truth[:-1]) <= 4 * np.sqrt(exact / reps))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: l2_dual(np.eye(3), np.array([1.0, -1.0, 1.0])), "mu must be finite and positive"),
        (lambda: l2_dual(np.eye(3), np.ones(2)), "mu must be a vector of 3 weights"),
        (lambda: l2_dual(np.ones((2, 3)), np.ones(2)), "square"),
        (lambda: l2_replace_dual(np.eye(4), np.ones(5)), "the pair weights must be a vector of 6 weights"),
        (lambda: l2_replace_dual(np.eye(4), -np.ones(6)), "finite and non-negative"),
        (lambda: l2_replace_dual(np.eye(300), np.ones(300 * 299 // 2)), "n <= 256 bins"),
        (lambda: as_p_identity_l2(np.ones(3)), "non-empty 2-D matrix of finite entries"),
        (lambda: as_p_identity_l2(np.full((2, 2), np.nan)), "non-empty 2-D matrix of finite entries"),
        (lambda: as_p_identity_l2(2.0 * np.eye(3)), "L2 norm at most 1"),
        (lambda: check_l2_optimum_bins("x"), "n must be"),
    ],
)
def test_the_exported_functions_refuse_bad_input(call, message):
    with pytest.raises(ParameterError, match=message):
        call()


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


@pytest.mark.parametrize(
    ("first", "gap", "percent"),
    [(1e-1, 1e-1, 0.0), (1e-1, 1e-6, 100.0), (1e-1, 10**-3.5, 50.0), (1e-1, 1e-9, 100.0), (1e-1, 1.0, 0.0)],
)
def test_gap_progress_is_the_share_of_the_log_gap_closed(first, gap, percent):
    from dprange.optimize.l2_optimum import gap_progress

    assert gap_progress(first, gap, 1e-6) == pytest.approx(percent)
    assert gap_progress(float("nan"), gap, 1e-6) == (100.0 if gap <= 1e-6 else 0.0)

"""ADMM (L1 / elastic net; dprange.inference.l1_admm) against exact solvers: linear programmes,
smooth reformulations, equality constraints, every x-step (tree, dense, KKT, sparse, CG), the
stopping rule tested every k iterations, and L1's gain on sparse data.  NNLS:
tests/inference/test_nnls.py; contingency tables: tests/mechanisms/test_tables.py."""

import warnings

import numpy as np
import pytest
from _helpers import _problem
from scipy import optimize

from conftest import weighted_tree_problem
from dprange import ConvergenceWarning, Hierarchical, ParameterError
from dprange.inference.l1_admm import admm, generic_x_update, tree_x_update
from dprange.strategies.trees import TreeStrategy


def lp_l1(A, y, w, total=None):
    """min sum w_i |A_i x - y_i| s.t. x >= 0 (and sum x = total) as a linear program."""
    p, n = A.shape
    c = np.concatenate([np.zeros(n), w])
    A_ub = np.block([[A, -np.eye(p)], [-A, -np.eye(p)]])
    b_ub = np.concatenate([y, -y])
    eq = None if total is None else (np.concatenate([np.ones(n), np.zeros(p)])[None, :], [total])
    res = optimize.linprog(
        c,
        A_ub=A_ub,
        b_ub=b_ub,
        A_eq=None if eq is None else eq[0],
        b_eq=None if eq is None else eq[1],
        bounds=[(0, None)] * n + [(None, None)] * p,
        method="highs",
    )
    return res.fun


@pytest.mark.parametrize("seed", range(6))
def test_admm_alpha1_reaches_the_linear_programme_optimum(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 12))
    A = rng.integers(0, 2, (2 * n, n)).astype(float)
    A[np.arange(n), np.arange(n)] = 1.0
    x = rng.integers(0, 6, n)
    w = rng.uniform(0.5, 2.0, 2 * n)
    y = A @ x + rng.laplace(0, 1.5, 2 * n)
    total = float(x.sum()) if seed % 2 else None
    result = admm(A, y, w, alpha=1.0, total=total, tol=1e-8, maxiter=20000)
    assert result.converged
    assert result.objective == pytest.approx(lp_l1(A, y, w, total), rel=1e-6, abs=1e-6)
    assert result.x.min() >= 0
    if total is not None:
        assert result.x.sum() == pytest.approx(total, abs=1e-8)


def test_elastic_net_matches_a_smooth_reformulation():
    """alpha = 0.9: the elastic net with x >= 0, solved as a smooth problem in (x, t+, t-)
    by SLSQP to 1e-10, versus ADMM: equal objective to 1e-5 relative."""
    rng = np.random.default_rng(7)
    n, p, alpha = 6, 12, 0.9
    A = rng.integers(0, 2, (p, n)).astype(float) + np.eye(p, n)
    y = A @ rng.integers(0, 5, n) + rng.laplace(0, 1, p)

    def f(z):
        tp, tm = z[n : n + p], z[n + p :]
        return alpha * (tp + tm).sum() + (1 - alpha) * ((tp - tm) ** 2).sum()

    cons = {"type": "eq", "fun": lambda z: A @ z[:n] - y - (z[n : n + p] - z[n + p :])}
    z0 = np.concatenate([np.ones(n), np.maximum(A @ np.ones(n) - y, 0), np.maximum(y - A @ np.ones(n), 0)])
    ref = optimize.minimize(
        f,
        z0,
        constraints=[cons],
        bounds=[(0, None)] * (n + 2 * p),
        method="SLSQP",
        options={"ftol": 1e-12, "maxiter": 1000},
    )
    result = admm(A, y, alpha=alpha, tol=1e-10, maxiter=50000)
    assert result.objective == pytest.approx(ref.fun, rel=1e-5)


def test_tree_x_update_equals_generic_least_squares():
    rng = np.random.default_rng(4)
    for total in (None, 50.0):
        tree = TreeStrategy(23, 3, measure_root=total is None, known_total=total is not None)
        op = tree.operator()
        level_weights = [None] * (tree.depth + 1)
        for d in tree.measured_depths:
            level_weights[d] = rng.uniform(0.5, 2.0)
        weights = np.concatenate([np.full(tree.level_sizes[d], level_weights[d]) for d in tree.measured_depths])
        target_rows = rng.normal(size=op.shape[0])
        target_x = rng.normal(size=23)
        for split in (1.0, 0.05):
            fast = tree_x_update(tree, level_weights, total=total)(target_rows, target_x, np.zeros(23), split)
            slow = generic_x_update(op, weights, total=total)(target_rows, target_x, np.zeros(23), split)
            np.testing.assert_allclose(fast, slow, atol=1e-7)
            # and both are the minimiser: the normal equations of the dense problem
            M = weights[:, None] * tree.dense()
            if total is None:
                exact = np.linalg.solve(M.T @ M + split * np.eye(23), M.T @ target_rows + split * target_x)
                np.testing.assert_allclose(fast, exact, atol=1e-8)
            else:
                assert fast.sum() == pytest.approx(total, abs=1e-9)


def lp_l1_equality(A, y, w, C, d):
    """min sum w_i |A_i x - y_i| s.t. x >= 0, C x = d as a linear programme."""
    p, n = A.shape
    res = optimize.linprog(
        np.concatenate([np.zeros(n), w]),
        A_ub=np.block([[A, -np.eye(p)], [-A, -np.eye(p)]]),
        b_ub=np.concatenate([y, -y]),
        A_eq=np.hstack([C, np.zeros((C.shape[0], p))]),
        b_eq=d,
        bounds=[(0, None)] * n + [(None, None)] * p,
        method="highs",
    )
    return res.fun


def test_general_equality_constraints_reach_the_lp_optimum_and_hold():
    rng = np.random.default_rng(12)
    n = 8
    A = (rng.random((16, n)) < 0.3).astype(float) + np.eye(16, n)
    x = rng.poisson(2.0, n)
    y = A @ x + rng.laplace(0, 1.0, 16)
    w = rng.uniform(0.5, 2.0, 16)
    C = np.vstack([np.ones(n), (np.arange(n) % 2 == 0).astype(float)])
    d = C @ x
    result = admm(A, y, w, alpha=1.0, equality=(C, d), tol=1e-9, maxiter=50000)
    assert result.converged
    assert result.objective == pytest.approx(lp_l1_equality(A, y, w, C, d), rel=1e-6)
    np.testing.assert_allclose(C @ result.x, d, atol=1e-6)
    assert result.x.min() >= 0


@pytest.mark.parametrize("known_total", [False, True])
def test_tree_and_operator_paths_reach_the_lp_optimum(known_total):
    """L1 (alpha = 1) on a tree with unequal per-level weights: the O(nodes) tree x-step and
    the conjugate-gradient x-step on the LinearOperator reach the LP optimum."""
    rng = np.random.default_rng(6)
    tree, level_weights, w, y, total = weighted_tree_problem(rng, 23, [1, 2, 15], [6, 2, 9], known_total)
    ref = lp_l1(tree.dense(), y, w, total)
    fast = admm(
        tree.operator(),
        y,
        w,
        alpha=1.0,
        total=total,
        x_update=tree_x_update(tree, level_weights, total=total),
        tol=1e-9,
        maxiter=50000,
    )
    slow = admm(tree.operator(), y, w, alpha=1.0, total=total, tol=1e-9, maxiter=50000)
    for result in (fast, slow):
        assert result.converged
        assert result.objective == pytest.approx(ref, rel=1e-6)
        assert len(result.primal_residuals) == len(result.dual_residuals) == result.iterations


def test_silent_and_validates(capsys):
    A = np.eye(3)
    admm(A, np.ones(3))
    assert capsys.readouterr().out == ""
    for kwargs in ({"alpha": 1.5}, {"rho": 0.0}, {"relax": 2.0}, {"split": -1.0}):
        with pytest.raises(ParameterError):
            admm(A, np.ones(3), **kwargs)


def test_l1_beats_gls_on_sparse_unit_queries():
    """Seed 004's finding on sparse data, checked on a sparse histogram (5 releases)."""
    x = np.zeros(1024, dtype=int)
    x[np.random.default_rng(5).choice(1024, 20, replace=False)] = 50
    gls = Hierarchical(16, noise="laplace_float")
    l1 = Hierarchical(16, noise="laplace_float", inference="l1")
    err = {
        m.inference: np.mean([np.mean((m.release(x, 0.5, rng=s).histogram().value - x) ** 2) for s in range(5)])
        for m in (gls, l1)
    }
    assert err["l1"] < err["gls"] / 3


def test_every_x_update_path_solves_the_normal_equations():
    """Dense Cholesky, KKT (total), sparse LU and CG (LinearOperator) against the explicit
    normal equations / KKT system."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import aslinearoperator

    rng = np.random.default_rng(9)
    A = sp.random(30, 12, density=0.3, random_state=2).tocsr() + sp.eye(30, 12)
    D = rng.uniform(0.5, 2.0, 30)
    rows, tx, split = rng.normal(size=30), rng.normal(size=12), 0.3
    M = D[:, None] * A.toarray()
    exact = np.linalg.solve(M.T @ M + split * np.eye(12), M.T @ rows + split * tx)
    K = np.block([[M.T @ M + split * np.eye(12), np.ones((12, 1))], [np.ones((1, 12)), np.zeros((1, 1))]])
    exact_total = np.linalg.solve(K, np.concatenate([M.T @ rows + split * tx, [7.0]]))[:12]
    for matrix, kwargs in ((A.toarray(), {}), (A, {"dense_limit": 0}), (aslinearoperator(A), {})):
        got = generic_x_update(matrix, D, **kwargs)(rows, tx, np.zeros(12), split)
        np.testing.assert_allclose(got, exact, atol=1e-8)
        got = generic_x_update(matrix, D, total=7.0, **kwargs)(rows, tx, np.zeros(12), split)
        np.testing.assert_allclose(got, exact_total, atol=1e-8)


def test_stopping_rule_every_k_iterations_and_at_maxiter():
    rng = np.random.default_rng(7)
    tree, weights, _ = _problem(rng, 300, 4, True, False)
    y = rng.normal(10, 3, tree.dense().shape[0])
    w = np.concatenate([weights[d] for d in tree.measured_depths])
    every = admm(tree.operator(), y, w, x_update=tree_x_update(tree, weights), tol=1e-7, check_every=1)
    assert every.converged and len(every.primal_residuals) == every.iterations
    sparse = admm(tree.operator(), y, w, x_update=tree_x_update(tree, weights), tol=1e-7, check_every=10)
    assert sparse.converged and sparse.iterations % 10 == 0
    assert sparse.iterations >= every.iterations and len(sparse.primal_residuals) == sparse.iterations // 10
    # the same iterates: the tests every 10 iterations see the residuals of every-iteration testing
    tested = every.iterations // 10
    assert sparse.primal_residuals[:tested] == every.primal_residuals[9 : 10 * tested : 10]
    assert sparse.dual_residuals[:tested] == every.dual_residuals[9 : 10 * tested : 10]
    np.testing.assert_allclose(sparse.x, every.x, atol=1e-4 * np.abs(every.x).max())
    # the rule is always tested at maxiter: a run stopped there sees that it converged
    capped = admm(
        tree.operator(),
        y,
        w,
        x_update=tree_x_update(tree, weights),
        tol=1e-7,
        check_every=1000,
        maxiter=every.iterations,
    )
    assert capped.converged and capped.iterations == every.iterations and len(capped.primal_residuals) == 1


def test_unconverged_large_release_still_warns():
    counts = np.random.default_rng(8).poisson(2, 2**14)
    mechanism = Hierarchical(16, inference="l1", inference_options={"maxiter": 7})
    with pytest.warns(ConvergenceWarning, match="maxiter"):
        release = mechanism.release(counts, 1.0, rng=1)
    assert not release.converged and release.estimate.min() >= 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert Hierarchical(16, inference="l1").release(counts, 1.0, rng=1).converged

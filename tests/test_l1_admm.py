"""ADMM (L1 / elastic net / NNLS) against exact solvers; inference= on mechanisms; tables."""

import numpy as np
import pytest
from scipy import optimize

import dprange
from dprange import Flat, Hierarchical, ParameterError, Wavelet
from dprange.contingency import release_table
from dprange.inference.l1_admm import admm, generic_x_update, tree_x_update
from dprange.inference.nnls import nnls
from dprange.strategies import TreeStrategy


def lp_l1(A, y, w, total=None):
    """min sum w_i |A_i x - y_i| s.t. x >= 0 (and sum x = total) as a linear program."""
    p, n = A.shape
    c = np.concatenate([np.zeros(n), w])
    A_ub = np.block([[A, -np.eye(p)], [-A, -np.eye(p)]])
    b_ub = np.concatenate([y, -y])
    eq = None if total is None else (np.concatenate([np.ones(n), np.zeros(p)])[None, :], [total])
    res = optimize.linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=None if eq is None else eq[0], b_eq=None if eq is None else eq[1],
                           bounds=[(0, None)] * n + [(None, None)] * p, method="highs")
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
    ref = optimize.minimize(f, z0, constraints=[cons], bounds=[(0, None)] * (n + 2 * p), method="SLSQP",
                            options={"ftol": 1e-12, "maxiter": 1000})
    result = admm(A, y, alpha=alpha, tol=1e-10, maxiter=50000)
    assert result.objective == pytest.approx(ref.fun, rel=1e-5)


def test_nnls_matches_scipy():
    rng = np.random.default_rng(3)
    for _ in range(5):
        A = rng.normal(size=(20, 8))
        y = rng.normal(size=20)
        w = rng.uniform(0.5, 2, 20)
        ours = nnls(A, y, w).x
        ref = optimize.nnls(w[:, None] * A, w * y)[0]
        np.testing.assert_allclose(ours, ref, atol=1e-6)


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
        fast = tree_x_update(tree, level_weights, total=total)(target_rows, target_x, np.zeros(23))
        slow = generic_x_update(op, weights, total=total)(target_rows, target_x, np.zeros(23))
        np.testing.assert_allclose(fast, slow, atol=1e-7)


def test_mechanisms_accept_inference_and_record_it():
    x = np.zeros(64, dtype=int)
    x[[3, 4, 40]] = [30, 5, 12]
    for mech in (Flat(inference="l1"), Hierarchical(4, inference="nnls"), Wavelet(inference="l1"),
                 Hierarchical(4, neighbours="replace", inference="l1", inference_options={"alpha": 1.0, "tol": 1e-6})):
        rel = mech.release(x, 1.0, rng=0)
        assert rel.inference == mech.inference and not rel.exact_error_bars
        assert rel.histogram().value.min() >= -1e-9
        assert np.isnan(rel.range(0, 3).stderr)
        data = rel.to_dict()
        assert data["inference"] == mech.inference and data["histogram"]["stderr"] is None and "bootstrap" in data["error_bars"]
        if mech.neighbours == "replace":
            assert rel.histogram().value.sum() == pytest.approx(x.sum(), abs=1e-6)
    with pytest.raises(ParameterError):
        Flat(inference="median")
    with pytest.raises(ParameterError):
        Flat(inference="l1", inference_options={"speed": 3})


def test_l1_beats_gls_on_sparse_unit_queries():
    """Seed 004's finding on sparse data, checked on a sparse histogram (5 releases)."""
    x = np.zeros(1024, dtype=int)
    x[np.random.default_rng(5).choice(1024, 20, replace=False)] = 50
    gls = Hierarchical(16, noise="laplace")
    l1 = Hierarchical(16, noise="laplace", inference="l1")
    err = {m.inference: np.mean([np.mean((m.release(x, 0.5, rng=s).histogram().value - x) ** 2) for s in range(5)])
           for m in (gls, l1)}
    assert err["l1"] < err["gls"] / 3


def test_bootstrap_reproduces_exact_gls_stderr():
    """400 replicates: the bootstrap s.d. has relative s.e. about sqrt((2 + kappa) / (4 R))
    <= 0.06; we allow 4 of those (25%)."""
    rel = Hierarchical(4, noise="laplace").release(np.arange(64) % 7, 1.0, rng=1)
    lo, hi = np.array([0, 5, 30]), np.array([63, 20, 30])
    boot = rel.bootstrap(lo, hi, reps=400, rng=2)
    np.testing.assert_allclose(boot, rel.range(lo, hi).stderr, rtol=0.25)
    with pytest.raises(ParameterError):
        rel.bootstrap(0, 3, reps=1)


def test_contingency_table_respects_public_marginals():
    table = np.random.default_rng(0).poisson(3, (4, 5, 3))
    for inference in ("gls", "nnls", "l1"):
        rel = release_table(table, 0.5, public_marginals=[(0,), (1, 2)], inference=inference, rng=1)
        np.testing.assert_allclose(rel.marginal((0,)), table.sum(axis=(1, 2)), atol=1e-5)
        np.testing.assert_allclose(rel.marginal((1, 2)), table.sum(axis=0), atol=1e-5)
        if inference != "gls":
            assert rel.table.min() >= 0
    # consistency lowers the error on average (projection onto a set containing the truth)
    errs = [np.abs(release_table(table, 0.5, public_marginals=[(0, 1)], rng=s).table - table).mean() for s in range(20)]
    raw = [np.abs(release_table(table, 0.5, rng=s).table - table).mean() for s in range(20)]
    assert np.mean(errs) < np.mean(raw)
    with pytest.raises(ParameterError):
        release_table(table, 1.0, public_marginals=[(3,)])

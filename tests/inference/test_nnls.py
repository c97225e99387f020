"""Non-negative least squares (ADMM, alpha = 0) against exact solvers."""

import numpy as np
import pytest
from scipy import optimize

from conftest import exact_nnls_with_equality, weighted_tree_problem
from dprange import ParameterError
from dprange.inference.l1_admm import tree_x_update
from dprange.inference.nnls import nnls


def test_matches_scipy_nnls_weighted():
    rng = np.random.default_rng(3)
    for _ in range(5):
        A = rng.normal(size=(20, 8))
        y = rng.normal(size=20)
        w = rng.uniform(0.5, 2, 20)
        result = nnls(A, y, w)
        ref = optimize.nnls(w[:, None] * A, w * y)[0]
        assert result.converged
        # tol 1e-8 on residuals of size O(1): solutions agree to ~1e-6 (conditioning ~10)
        np.testing.assert_allclose(result.x, ref, atol=1e-6)
        assert result.x.min() >= 0


def test_matches_lsq_linear_on_a_sparse_matrix():
    """A sparse 0/1 strategy (as in the mechanisms), solution with several zeros."""
    import scipy.sparse as sp

    rng = np.random.default_rng(8)
    A = sp.random(40, 15, density=0.3, random_state=1, data_rvs=lambda k: np.ones(k)).tocsr() + sp.eye(40, 15)
    y = A @ np.maximum(rng.normal(size=15), 0) + rng.laplace(0, 1, 40)
    ref = optimize.lsq_linear(A.toarray(), y, bounds=(0, np.inf), tol=1e-12, method="bvls").x
    result = nnls(A, y)
    assert (ref == 0).sum() >= 2  # the constraint is active: clipping GLS would not do
    np.testing.assert_allclose(result.x, ref, atol=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_equality_constraints_match_support_enumeration(seed):
    rng = np.random.default_rng(seed)
    n = 6
    A = rng.normal(size=(12, n))
    y = A @ np.maximum(rng.normal(size=n), 0) + rng.normal(size=12)
    w = rng.uniform(0.5, 2.0, 12)
    C = np.vstack([np.ones(n), (np.arange(n) < 3).astype(float)])
    d = np.array([4.0, 1.5])
    ref = exact_nnls_with_equality(w[:, None] * A, w * y, C, d)
    result = nnls(A, y, w, equality=(C, d), tol=1e-10, maxiter=50000)
    assert result.converged
    np.testing.assert_allclose(result.x, ref, atol=1e-6)
    np.testing.assert_allclose(C @ result.x, d, atol=1e-7)


def test_known_total_matches_support_enumeration_and_holds_exactly():
    rng = np.random.default_rng(11)
    n = 7
    A = (rng.random((14, n)) < 0.4).astype(float) + np.eye(14, n)
    y = A @ rng.poisson(1.0, n) + rng.laplace(0, 2, 14)
    ref = exact_nnls_with_equality(A, y, np.ones((1, n)), np.array([5.0]))
    result = nnls(A, y, total=5.0, tol=1e-10, maxiter=50000)
    np.testing.assert_allclose(result.x, ref, atol=1e-6)
    assert result.x.sum() == pytest.approx(5.0, abs=1e-12)  # the final capped-simplex projection
    assert result.x.min() >= 0


@pytest.mark.parametrize("known_total", [False, True])
def test_tree_path_matches_scipy_on_the_dense_tree(known_total):
    """The O(nodes) tree x-step gives the same NNLS as scipy on the explicit tree matrix,
    with unequal per-level weights (per-level budgets)."""
    rng = np.random.default_rng(5)
    tree, level_weights, w, y, total = weighted_tree_problem(rng, 23, [2, 3, 17], [8, 3, 5], known_total)
    result = nnls(tree.operator(), y, w, total=total, x_update=tree_x_update(tree, level_weights, total=total))
    M, b = w[:, None] * tree.dense(), w * y
    if known_total:
        # the total as a heavy extra row (weight 1e4): bvls is exact for that problem, whose
        # solution differs from the constrained one by O(1e-8)
        M, b = np.vstack([M, 1e4 * np.ones(tree.n)]), np.append(b, 1e4 * total)
    ref = optimize.lsq_linear(M, b, bounds=(0, np.inf), method="bvls", tol=1e-12).x
    assert result.converged
    np.testing.assert_allclose(result.x, ref, atol=1e-5)


def test_bad_inputs():
    A = np.eye(3)
    with pytest.raises(ParameterError):
        nnls(A, np.ones(4))
    with pytest.raises(ParameterError):
        nnls(A, np.ones(3), weights=[1, 0, 1])
    with pytest.raises(ParameterError):
        nnls(A, np.ones(3), total=1.0, equality=(np.ones((1, 3)), [1.0]))

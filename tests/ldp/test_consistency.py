"""dprange.ldp.consistency: the paper's two-stage consistency (Cormode, Kulkarni, Srivastava, VLDB
2019) equals GLS only with equal users per level, and is never better than the exact weighted
least squares."""

import numpy as np
from _helpers import _all_ranges

from conftest import range_matrix
from dprange.ldp.consistency import two_stage_consistency
from dprange.strategies.trees import TreeStrategy


def _two_stage_matrix(b, h, n_leaves):
    """The two-stage estimator is linear in (level values, total): its leaf matrix."""
    sizes = [b**d for d in range(1, h + 1)]
    cols = []
    for k in range(sum(sizes) + 1):
        e = np.zeros(sum(sizes) + 1)
        e[k] = 1.0
        parts = np.split(e[:-1], np.cumsum(sizes)[:-1])
        cols.append(two_stage_consistency(b, [None] + parts, e[-1])[-1])
    return np.array(cols).T  # (leaves, measurements + total)


def test_two_stage_is_gls_for_equal_users_and_never_beats_exact_wls():
    b, h = 3, 3
    tree = TreeStrategy(27, b, measure_root=False, known_total=True)
    A = tree.dense()
    M = _two_stage_matrix(b, h, 27)
    lo, hi = _all_ranges(27)
    Q = range_matrix(27, lo, hi)
    for level_var in ([1.0, 1.0, 1.0], [0.5, 2.0, 1.0]):
        v = np.concatenate([np.full(b**d, level_var[d - 1]) for d in range(1, h + 1)])
        gls = np.linalg.solve(
            np.block([[A.T @ np.diag(1 / v) @ A, np.ones((27, 1))], [np.ones((1, 27)), np.zeros((1, 1))]]),
            np.block([[A.T @ np.diag(1 / v), np.zeros((27, 1))], [np.zeros((1, A.shape[0])), np.ones((1, 1))]]),
        )[:27]
        # both estimators are unbiased: M [A x; 1'x] = x
        x = np.random.default_rng(0).normal(size=27)
        np.testing.assert_allclose(M @ np.concatenate([A @ x, [x.sum()]]), x, atol=1e-9)
        cov_two = M[:, :-1] @ np.diag(v) @ M[:, :-1].T
        cov_gls = gls[:, :-1] @ np.diag(v) @ gls[:, :-1].T
        var_two = np.einsum("ij,jk,ik->i", Q, cov_two, Q)
        var_gls = np.einsum("ij,jk,ik->i", Q, cov_gls, Q)
        assert np.all(var_gls <= var_two * (1 + 1e-10) + 1e-12)
        if level_var[0] == level_var[1]:  # equal users per level: the paper's procedure is GLS
            np.testing.assert_allclose(M, gls, atol=1e-10)
        else:
            assert var_gls.mean() < 0.97 * var_two.mean()

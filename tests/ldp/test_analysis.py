"""dprange.ldp.analysis: expected_error of a range protocol equals the dense average variance."""

import numpy as np
import pytest
from _helpers import _all_ranges

from conftest import dense_gls, range_matrix
from dprange.ldp import HierarchicalHistogram, expected_error, optimal_branching


def test_expected_error_equals_dense_average_variance():
    """expected_error (fractions, all ranges) = mean of Q Cov Q' / N^2 from dense GLS with
    N p_l users per level (consistency) or from the canonical range decomposition (without)."""
    D, N, eps = 16, 10**6, 1.0
    proto = HierarchicalHistogram(  # 62-bit coins realise q = 1/(e^eps + 1) to 2^-62
        D, 4, "oue", epsilon=eps, level_probabilities=[0.3, 0.7], oracle_options={"coin_bits": 62}
    )
    tree = proto.tree
    q = 1 / (np.exp(eps) + 1)
    per_user = q * (1 - q) / (0.5 - q) ** 2  # OUE V_F times users
    var = {1: per_user / (0.3 * N) * N**2, 2: per_user / (0.7 * N) * N**2}
    A = tree.dense()
    v = np.concatenate([np.full(tree.level_sizes[d], var[d]) for d in (1, 2)])
    _, cov = dense_gls(A, np.zeros(A.shape[0]), v, total=0.0)
    lo, hi = _all_ranges(D)
    Q = range_matrix(D, lo, hi)
    exact = np.einsum("ij,jk,ik->i", Q, cov, Q).mean() / N**2
    assert expected_error(proto, "all-range", N) == pytest.approx(exact, rel=1e-9)
    # without consistency: ranges of whole level-1 blocks use one node, others leaves
    lengths = hi - lo + 1
    nodes1 = np.array([sum(1 for k in range(4) if a <= 4 * k and 4 * k + 3 <= c) for a, c in zip(lo, hi)])
    direct = ((nodes1 * var[1] + (lengths - 4 * nodes1) * var[2]) / N**2).mean()
    assert expected_error(proto, "all-range", N, consistency=False) == pytest.approx(direct, rel=1e-9)
    # optimal branching: the argmin of the exact curve
    best = optimal_branching(64, N, eps, branchings=[2, 4, 8, 64])
    assert best["best"] == min(best["curve"], key=best["curve"].get)
    assert best["curve"][64] > best["curve"][best["best"]]

"""Finite-difference checks of the optimised templates' gradients not covered elsewhere: the
eigen-design's dual (Li and Miklau, PVLDB 2012), as the optimiser is handed it, with weak and
strong duality against the primal trace.  (The L1 and L2 p-Identity losses: tests/test_optimized.py
and tests/test_optimized_templates.py, on the dense and the structured Gram matrix.)"""

from types import SimpleNamespace

import numpy as np
import pytest

import dprange.optimize.p_identity as optimized_module
from dprange.optimize.l2_optimum import strategy_trace
from dprange.optimize.p_identity import column_norm, eigen_design
from dprange.workloads import AllRange, Prefix


def random_gram(n: int, m: int, seed: int) -> np.ndarray:
    """W^T W of a random 0/1 workload of m queries (rank min(m, n))."""
    W = np.random.default_rng(seed).integers(0, 2, (m, n)).astype(float)
    return W.T @ W


def dual_of(monkeypatch, gram):
    """(the negative dual and its gradient as L-BFGS-B receives it, the optimiser's result,
    the eigen-design) for ``gram``: optimize.minimize wrapped to record its arguments."""
    calls = []
    real = optimized_module.optimize.minimize

    def recording(fun, x0, **kwargs):
        result = real(fun, x0, **kwargs)
        calls.append((fun, result))
        return result

    monkeypatch.setattr(optimized_module, "optimize", SimpleNamespace(minimize=recording))
    strategy = eigen_design(gram)
    ((fun, result),) = calls
    return fun, result, strategy


GRAMS = [AllRange(10).gram(), Prefix(10).gram(), random_gram(10, 6, 0), random_gram(10, 30, 1)]


@pytest.mark.parametrize("gram", GRAMS, ids=["all-range", "prefix", "random-rank-6", "random-30"])
def test_eigen_dual_gradient_matches_central_differences_and_bounds_the_trace(monkeypatch, gram):
    """At random mu > 0 (uniform on [0.5, 2] times the start's level): the gradient equals
    central differences (h = 1e-6 relative to mu) to 1e-6 of its largest entry; the dual
    value is at most the eigen-design's trace (weak duality: every column of the design has L2
    norm <= 1) and equals it at the optimiser's mu to 1e-5 (strong duality; the design is
    built from that mu, and the gap, 3.9e-6 on all ranges where L-BFGS-B stops at its default
    tolerance, certifies the design within 1e-5 of the optimal trace)."""
    fun, result, strategy = dual_of(monkeypatch, gram)
    assert column_norm(strategy, 2) == pytest.approx(1.0, rel=1e-12)
    trace = strategy_trace(strategy, gram)
    level = float(np.sum(np.sqrt(np.clip(np.linalg.eigvalsh(gram), 0.0, None)))) ** 2 / gram.shape[0] ** 2
    rng = np.random.default_rng(7)
    for _ in range(3):
        mu = level * rng.uniform(0.5, 2.0, gram.shape[0])
        value, grad = fun(mu)
        h = 1e-6 * mu
        numeric = np.array(
            [(fun(mu + h[j] * e)[0] - fun(mu - h[j] * e)[0]) / (2 * h[j]) for j, e in enumerate(np.eye(mu.size))]
        )
        assert np.max(np.abs(numeric - grad)) <= 1e-6 * np.max(np.abs(grad))
        assert -value <= trace * (1 + 1e-12)
    assert -fun(result.x)[0] == pytest.approx(trace, rel=1e-5)

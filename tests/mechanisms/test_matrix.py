"""The matrix mechanism (dprange.mechanisms.matrix; Li et al., PODS 2010): its exact error formula,
sensitivity under each neighbouring relation against the definition, quantisation of a real
strategy, and the refusal of a rank-deficient one."""

import math

import numpy as np
import pytest

import dprange
from dprange import Hierarchical, ParameterError
from dprange.analysis import expected_error
from dprange.mechanisms.matrix import Matrix
from dprange.strategies.trees import dense_sensitivity_power
from dprange.workloads import AllRange


def test_matrix_mechanism_formula_and_equivalence_with_tree():
    n, eps = 16, 1.0
    tree = Hierarchical(2, measure_root=True, noise="laplace_float")
    A = tree.strategy(n).dense()
    mm = Matrix(A, noise="laplace_float")
    assert mm.sensitivity()[0] == pytest.approx(5.0)  # 5 levels, one node each per record
    W = AllRange(n).dense()
    formula = 2 / eps**2 * 5.0**2 * np.trace(W @ np.linalg.pinv(A.T @ A) @ W.T) / W.shape[0]
    assert expected_error(mm, AllRange(n), eps) == pytest.approx(formula, rel=1e-9)
    assert expected_error(mm, AllRange(n), eps) == pytest.approx(expected_error(tree, AllRange(n), eps), rel=1e-9)
    # release: unbiased least squares, integer strategy -> discrete Laplace by default
    rel = Matrix(A).release(np.arange(n), 50.0, rng=0)
    np.testing.assert_allclose(rel.histogram().value, np.arange(n), atol=0.5)
    assert rel.noise == "discrete_laplace"
    # a real strategy is quantised (here exactly, K = 2) and still gets discrete Laplace
    half = Matrix(A * 0.5)
    assert half.noise_specs(half.strategy(n), 1.0, 0.0)[0].kind == "discrete_laplace"
    assert half.parameters()["quantisation_factor"] == 2.0
    with pytest.raises(ParameterError):
        Matrix(np.zeros((3, 3)))
    with pytest.raises(ParameterError):
        Matrix(A).release(np.arange(n + 1), 1.0)


def test_matrix_sensitivity_follows_the_record_level_relation():
    """Columns a_0 = (1, 0, 1), a_1 = (1, 2, 0), a_2 = (0, 1, 0).  add/remove: max ||a_i||,
    L1 3 and L2 sqrt 5 (a_1).  replace: a_0 - a_1 = (0, -2, 1) (L1 3, L2 sqrt 5),
    a_0 - a_2 = (1, -1, 1) (3, sqrt 3), a_1 - a_2 = (1, 1, 0) (2, sqrt 2): L1 3, L2 sqrt 5,
    not the bound 2 max ||a_i|| (6, 2 sqrt 5) the old code used.  Gaussian noise (delta > 0)
    is calibrated to the L2 value."""
    A = np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 1.0], [1.0, 0.0, 0.0]])
    mm = Matrix(A)
    assert mm.sensitivity() == pytest.approx((3.0, math.sqrt(5.0)))
    assert Matrix(A, neighbours="replace").sensitivity() == pytest.approx((3.0, math.sqrt(5.0)))
    spec = mm.noise_specs(mm.strategy(3), 1.0, 1e-5)[0]
    assert spec.kind == "gaussian"
    assert spec.scale == pytest.approx(dprange.privacy.noise.gaussian_sigma(1.0, 1e-5, math.sqrt(5.0)), rel=1e-12)
    laplace = Matrix(A, neighbours="replace").noise_specs(mm.strategy(3), 0.5, 0.0)[0]
    assert laplace.kind == "discrete_laplace" and laplace.scale == pytest.approx(3.0 / 0.5, rel=1e-15)


def test_matrix_quantises_a_real_strategy_and_infers_with_what_it_measured():
    """A real strategy becomes round(A K), K = 2^k with every entry moved by at most 2^-16 of
    the largest; measurements are integers; GLS with the quantised matrix is unbiased (a
    noiseless-limit release at epsilon = 1e4 recovers the counts) and the error model is the
    quantised one's."""
    rng = np.random.default_rng(3)
    A = rng.uniform(0.1, 1.0, (7, 5))
    mm = Matrix(A)
    strategy = mm.strategy(5)
    K = strategy.factor
    assert math.log2(K).is_integer()
    assert np.all(strategy.matrix == np.round(strategy.matrix))
    assert np.max(np.abs(strategy.matrix / K - A)) <= 2.0**-16 * np.abs(A).max()
    meas = mm.measure(np.array([3, 0, 5, 1, 2]), 1.0, rng=1)
    assert np.all(meas.values[0] == np.round(meas.values[0]))
    rel = mm.release(np.array([3, 0, 5, 1, 2]), 1e4, rng=1)
    np.testing.assert_allclose(rel.histogram().value, [3, 0, 5, 1, 2], atol=0.05)
    Aq = strategy.matrix
    variance = mm.noise_specs(strategy, 1.0, 0.0)[0].variance
    np.testing.assert_allclose(mm.error_model(5, 1.0).covariance, variance * np.linalg.inv(Aq.T @ Aq), rtol=1e-9)


def test_rank_deficient_matrix_strategy_is_refused():
    """W2: a strategy that never separates bins 0 and 1 gives biased least squares whose error
    bars never cover; it is refused.  With a public total (replace) a strategy of all
    differences is enough, without it it is not."""
    with pytest.raises(ParameterError, match="rank 2"):
        Matrix(np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    differences = np.array([[1.0, -1.0, 0.0], [0.0, 1.0, -1.0]])
    with pytest.raises(ParameterError, match="rank"):
        Matrix(differences)
    rel = Matrix(differences, neighbours="replace").release(np.array([4, 1, 2]), 1e3, rng=0)
    np.testing.assert_allclose(rel.histogram().value, [4, 1, 2], atol=0.1)


def test_matrix_sensitivity_equals_the_dense_definition():
    rng = np.random.default_rng(8)
    for n in (2, 3, 6, 9):
        for A in (rng.integers(-3, 4, (n + 3, n)).astype(float), rng.uniform(-1, 1, (n + 1, n))):
            if np.linalg.matrix_rank(A) < n:
                continue
            strategy = Matrix(A).strategy(n)
            for relation in ("add_remove", "replace"):
                for p in (1, 2):
                    expected = dense_sensitivity_power(strategy.matrix, relation, p)
                    assert strategy.sensitivity_power(relation, p) == pytest.approx(expected, rel=1e-12)

"""The p-Identity GLS path (dprange.inference.p_identity): estimate, range and query variances by
the Woodbury identity against the dense formulas, sensitivity against the definition, the saved
error model, and a public total's exact zero variance."""

import numpy as np
import pytest

import dprange.inference.p_identity as pid
from dprange.answers.codec import error_model_from_dict
from dprange.errors import DataError, ParameterError
from dprange.inference.dispatch import least_squares
from dprange.inference.least_squares import dense_covariance
from dprange.inference.p_identity import DiagonalPlusRows, PIdentityEstimate
from dprange.measurements import LinearMeasurement, Measurements
from dprange.operators import definition_sensitivity_power

pytestmark = pytest.mark.usefixtures("private_cache")  # every test: an empty strategy cache


def integer_block(n=14, p=3, seed=0):
    rng = np.random.default_rng(seed)
    return DiagonalPlusRows(rng.integers(1, 9, n), rng.integers(0, 6, (p, n)))


def measured(block, variance, total=None, seed=1):
    y = np.random.default_rng(seed).normal(size=block.shape[0]) * 3
    return Measurements([LinearMeasurement(block, y, variance)], block.shape[1], 1.0, total=total), y


@pytest.mark.parametrize("total", [None, 17.0])
def test_estimate_and_variances_equal_the_dense_gls(total):
    """x = (A^T A)^-1 A^T y (constrained to the total when public) and every range's and
    query's variance equal the dense covariance formula (Li et al., PODS 2010)."""
    block = integer_block()
    design, y = measured(block, 2.5, total)
    estimate = least_squares(design)
    assert isinstance(estimate, PIdentityEstimate)
    A = block.dense()
    n = A.shape[1]
    cov = 2.5 * dense_covariance(A, np.ones(A.shape[0]), total is not None)
    if total is None:
        dense_x = np.linalg.solve(A.T @ A, A.T @ y)
    else:  # equality-constrained least squares by the KKT system
        kkt = np.block([[A.T @ A, np.ones((n, 1))], [np.ones((1, n)), np.zeros((1, 1))]])
        dense_x = np.linalg.solve(kkt, np.concatenate([A.T @ y, [total]]))[:n]
        assert estimate.leaves.sum() == pytest.approx(total, rel=1e-12)
    np.testing.assert_allclose(estimate.leaves, dense_x, rtol=1e-10, atol=1e-10)
    lo, hi = np.triu_indices(n)
    Q = ((np.arange(n) >= lo[:, None]) & (np.arange(n) <= hi[:, None])).astype(float)
    dense_var = np.einsum("ij,jk,ik->i", Q, cov, Q)
    np.testing.assert_allclose(estimate.range_variance(lo, hi), dense_var, rtol=1e-9, atol=1e-12)
    W = np.random.default_rng(2).normal(size=(5, n))
    np.testing.assert_allclose(estimate.query_variance(W), np.einsum("ij,jk,ik->i", W, cov, W), rtol=1e-9)
    assert np.ndim(estimate.query_variance(W[0])) == 0


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
@pytest.mark.parametrize("norm", [1, 2])
def test_sensitivity_is_the_definitions_exactly(norm, neighbours, monkeypatch):
    block = integer_block(n=20, p=4, seed=3)
    expected = definition_sensitivity_power(block.dense(), norm, neighbours)
    assert block.sensitivity_power(norm, neighbours) == expected
    assert isinstance(block.sensitivity_power(norm, neighbours), int)
    # Beyond the pairs limit: L2 is still exact (blocked C^T C), L1 the triangle bound.
    monkeypatch.setattr(pid, "PAIRS_LIMIT", 10)
    fresh = integer_block(n=20, p=4, seed=3)
    if neighbours == "replace" and norm == 1:
        bound = fresh.sensitivity_power(1, "replace")
        assert bound == 2 * definition_sensitivity_power(block.dense(), 1, "add_remove") >= expected
    else:
        assert fresh.sensitivity_power(norm, neighbours) == expected


def test_the_blocked_l2_replace_maximum_spans_blocks(monkeypatch):
    """More than one 512-column block: the pairwise maximum is found across blocks."""
    rng = np.random.default_rng(4)
    block = DiagonalPlusRows(rng.integers(1, 5, 700), rng.integers(0, 3, (2, 700)))
    monkeypatch.setattr(pid, "PAIRS_LIMIT", 10)
    assert block.sensitivity_power(2, "replace") == definition_sensitivity_power(block.dense(), 2, "replace")


def test_operator_products_and_integer_answers():
    block = integer_block()
    x = np.random.default_rng(5).integers(0, 100, block.shape[1])
    np.testing.assert_array_equal(block.answers(x), block.dense() @ x)
    assert block.answers(x).dtype == np.int64
    y = np.random.default_rng(6).normal(size=block.shape[0])
    np.testing.assert_allclose(block.rmatvec(y), block.dense().T @ y, rtol=1e-12)


@pytest.mark.parametrize("known_total", [False, True])
def test_the_saved_error_model_answers_the_same_variances(known_total):
    block = integer_block()
    estimate = PIdentityEstimate(block.diagonal, block.rows, 3.0, total=5.0 if known_total else None)
    loaded = error_model_from_dict(estimate.to_dict(), n=block.shape[1])
    lo, hi = np.triu_indices(block.shape[1])
    np.testing.assert_array_equal(loaded.range_variance(lo, hi), estimate.range_variance(lo, hi))
    bad = {**estimate.to_dict(), "diagonal": [0.0] * block.shape[1]}
    with pytest.raises(DataError, match="positive diagonal"):
        error_model_from_dict(bad)
    with pytest.raises(DataError, match="integer entries"):
        error_model_from_dict({**estimate.to_dict(), "rows": (block.rows + 0.5).tolist()})


def test_a_public_total_has_variance_exactly_zero():
    """Under replace the total is public: the full range and multiples of the all-ones query
    have variance 0 exactly, not a rounding residue of tau - tau (6e-21 v at 4096 bins, a
    visible +- 1e-5 after the quantised strategy's large noise variance); other ranges keep theirs."""
    rng = np.random.default_rng(0)
    n, p = 4096, 128
    diagonal = rng.integers(30000, 65536, n).astype(float)
    rows = rng.integers(0, 3000, (p, n)).astype(float)
    estimate = PIdentityEstimate(diagonal, rows, 2.0, values=np.zeros(n + p), total=0.0)
    assert estimate.range_variance(0, n - 1) == 0.0
    assert np.all(estimate.range_variance([0, 0, 1], [n - 1, n - 2, n - 1])[0] == 0.0)
    assert np.all(estimate.range_variance([0, 1], [n - 2, n - 1]) > 0)
    assert np.all(estimate.query_variance(np.array([np.ones(n), 3 * np.ones(n)])) == 0.0)
    free = PIdentityEstimate(diagonal, rows, 2.0, values=np.zeros(n + p))
    assert free.range_variance(0, n - 1) > 0


def test_bad_ranges_are_refused():
    block = integer_block()
    estimate = PIdentityEstimate(block.diagonal, block.rows, 1.0)
    with pytest.raises(ParameterError, match="ranges must satisfy"):
        estimate.range_variance(3, 2)

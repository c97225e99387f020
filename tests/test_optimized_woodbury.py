"""The p-Identity GLS path (dprange.inference.p_identity): estimate, range and query variances
by the Woodbury identity against the dense formulas, sensitivity against the definition, the
saved error model, and the Optimized mechanism using it (no n x n matrix)."""

import numpy as np
import pytest

import dprange
import dprange.inference.p_identity as pid
from dprange.answers.codec import error_model_from_dict
from dprange.answers.release import load_release
from dprange.errors import DataError, ParameterError
from dprange.inference.dispatch import least_squares
from dprange.inference.least_squares import dense_covariance
from dprange.inference.p_identity import DiagonalPlusRows, PIdentityEstimate
from dprange.measurements import LinearMeasurement, Measurements
from dprange.mechanisms.optimized import Optimized
from dprange.operators import definition_sensitivity_power
from dprange.optimize.p_identity import PIdentityStrategy

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


def test_the_quantised_strategy_is_the_matrix_mechanisms():
    """The same K and entries as MatrixStrategy gives the dense [I; B] D."""
    from dprange.optimize.p_identity import p_identity_matrix
    from dprange.strategies.matrix import MatrixStrategy

    theta = np.random.default_rng(7).uniform(0, 1, (3, 16))
    strategy = PIdentityStrategy(theta, "p-identity", 0.0, False)
    dense = MatrixStrategy(p_identity_matrix(theta))
    assert strategy.factor == dense.factor
    np.testing.assert_array_equal(strategy.explicit(), dense.explicit())


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_optimized_release_uses_the_woodbury_path_and_round_trips(tmp_path, neighbours):
    counts = np.random.default_rng(8).poisson(30, 40)
    mech = Optimized("prefix", neighbours=neighbours)
    release = mech.release(counts, 1.0, rng=3)
    assert isinstance(release.error_model, PIdentityEstimate)
    assert isinstance(mech.strategy(40).block, DiagonalPlusRows)
    if neighbours == "replace":
        assert release.total().value == pytest.approx(counts.sum())
    path = tmp_path / "r.json"
    release.to_json(path)
    loaded = load_release(path)
    lo, hi = np.triu_indices(40)
    np.testing.assert_allclose(loaded.range(lo, hi).stderr, release.range(lo, hi).stderr, rtol=1e-12)
    assert isinstance(loaded.error_model, PIdentityEstimate)


def test_release_matches_the_dense_matrix_mechanism():
    """Same strategy, same noise draws: Optimized (Woodbury) and Matrix (dense covariance)
    give the same estimate and standard errors.  (32 bins: on 24 the identity has the lower
    error as released and is measured instead.)"""
    counts = np.random.default_rng(9).poisson(10, 32)
    mech = Optimized("all-range")
    same = dprange.Matrix(mech.strategy(32).explicit())
    a, b = mech.release(counts, 1.0, rng=11), same.release(counts, 1.0, rng=11)
    np.testing.assert_allclose(a.estimate, b.estimate, rtol=1e-9, atol=1e-9)
    lo, hi = np.triu_indices(32)
    np.testing.assert_allclose(a.range(lo, hi).stderr, b.range(lo, hi).stderr, rtol=1e-9)


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_release_never_forms_the_dense_strategy(monkeypatch, neighbours):
    """Calibration (the one-block stack takes the block's own sensitivity), measurement, GLS
    and error bars run without A's dense form: with the pairs limit at 0 the replace scale is
    the triangle bound 2 max_j ||a_j||_1, add/remove the exact max_j ||a_j||_1.  (128 bins:
    under replace on 48 the identity has the lower error as released and is measured instead.)"""
    mech = Optimized("all-range", neighbours=neighbours)
    strategy = mech.strategy(128)
    column_l1 = definition_sensitivity_power(strategy.explicit(), 1, "add_remove")

    def refuse(self):
        raise AssertionError("dense form used")

    monkeypatch.setattr(DiagonalPlusRows, "dense", refuse)
    monkeypatch.setattr(pid, "PAIRS_LIMIT", 0)
    strategy.block._sensitivity_cache.clear()
    counts = np.random.default_rng(10).poisson(5, 128)
    release = mech.release(counts, 0.5, rng=1)
    spec = release.measurements.measurements[0].noise
    assert spec.scale == pytest.approx((1 if neighbours == "add_remove" else 2) * column_l1 / 0.5, rel=1e-12)
    assert np.all(np.isfinite(release.range(0, np.arange(128)).stderr))

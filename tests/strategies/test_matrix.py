"""dprange.strategies.matrix: quantisation (the early exit equals the full search, the largest entry
known exactly), packed large strategies, and the rank check."""

import json
import math

import numpy as np
import pytest
import scipy.sparse as sp

import dprange
from dprange.errors import ParameterError
from dprange.operators import Explicit
from dprange.strategies import matrix as matrix_module
from dprange.strategies.matrix import MatrixStrategy, quantisation_factor


def full_search_factor(values: np.ndarray, tolerance: float) -> float:
    """quantisation_factor as it was: every K tried on every entry."""
    largest = float(np.max(np.abs(values)))
    limit = max(0, math.ceil(math.log2(0.5 / (tolerance * largest))))
    for k in range(limit + 1):
        scaled = values * 2.0**k
        if np.all(scaled == np.round(scaled)):
            return 2.0**k
    return 2.0**limit


@pytest.mark.usefixtures("private_cache")
def test_quantisation_factor_with_the_early_exit_equals_the_full_search(monkeypatch):
    monkeypatch.setattr(matrix_module, "QUANTISATION_PROBE", 4)
    rng = np.random.default_rng(8)
    integers_then_halves = np.concatenate([np.arange(1.0, 9.0), [0.5, 3.5]]).reshape(2, 5)  # the head is integer
    quarters_late = np.ones((4, 4))
    quarters_late[3, 3] = 0.25
    cases = [integers_then_halves, integers_then_halves.T, quarters_late, rng.random((5, 7)), np.eye(3), rng.random(3)]
    for values in cases:
        for tolerance in (2.0**-16, 2.0**-4):
            assert quantisation_factor(values, tolerance) == full_search_factor(values, tolerance)
    assert quantisation_factor(integers_then_halves) == 2.0 and quantisation_factor(quarters_late) == 4.0
    with pytest.raises(dprange.errors.ParameterError, match="non-finite"):
        quantisation_factor(np.array([1.0, np.nan]))


# ----------------------------------------------------------------------------- saving a large dense release


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("known_total", [False, True])
def test_a_large_dense_strategy_is_saved_packed_and_rebuilds_the_same_error_model(monkeypatch, known_total):
    """Above PACKED_MIN_ENTRIES a dense strategy is saved as packed int32 (not triplets): the
    model read back from JSON has the same strategy, range variances and dictionary."""
    from dprange.inference import least_squares as ls
    from dprange.inference.dense import DenseErrorModel, matrix_estimate_model

    monkeypatch.setattr(ls, "PACKED_MIN_ENTRIES", 100)
    A = np.random.default_rng(13).integers(-70000, 70000, (14, 12)).astype(float)  # beyond int16
    model = matrix_estimate_model(MatrixStrategy(A), 3.5, known_total)
    data = json.loads(json.dumps(model.to_dict()))
    assert "packed" in data and "value" not in data
    np.testing.assert_array_equal(ls.unpack_integers(data["packed"], (14, 12)), A)
    rebuilt = DenseErrorModel.from_dict(data)
    lo, hi = np.triu_indices(12)
    np.testing.assert_allclose(rebuilt.range_variance(lo, hi), model.range_variance(lo, hi), rtol=1e-12)
    assert rebuilt.to_dict() == model.to_dict()
    monkeypatch.setattr(ls, "PACKED_MIN_ENTRIES", 1000)  # small ones keep their triplets
    assert "value" in model.to_dict() and "packed" not in model.to_dict()


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("seed", range(4))
def test_a_quantised_strategy_knows_its_largest_entry_exactly(seed):
    """The facts MatrixStrategy hands its block (every entry an integer, the largest |entry|
    as round(K max |a|)) are those of the quantised matrix: the sensitivity's exactness test
    (float sums below 2^53) rests on them."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(9, 7)) * 10.0 ** rng.integers(-3, 4)
    A[rng.integers(0, 9), rng.integers(0, 7)] = -np.abs(A).max() * 1.5  # the largest negative
    for matrix in (A, sp.csc_matrix(A)):
        strategy = MatrixStrategy(matrix)
        quantised = strategy.matrix.toarray() if sp.issparse(strategy.matrix) else strategy.matrix
        assert strategy.block._entries() == (True, int(np.abs(quantised).max()))
        assert Explicit(quantised)._entries() == strategy.block._entries()


def test_rank_check_refuses_a_rank_deficient_strategy_and_accepts_with_the_total():
    differences = np.eye(6)[:-1] - np.eye(6)[1:]  # rank 5: determines x only with the total
    strategy = MatrixStrategy(differences)
    with pytest.raises(ParameterError, match="rank 5"):
        strategy.check_rank(known_total=False)
    strategy.check_rank(known_total=True)

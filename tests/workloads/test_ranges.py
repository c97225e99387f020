"""dprange.workloads.ranges: workloads and their Gram matrices against the dense ones (no dense
matrix needed), the closed-form singular values of all ranges, prefixes and the identity
against the dense eigendecomposition, and the refusals of bad workloads."""

import math

import numpy as np
import pytest
from _helpers import _dense_singular_values, indicator

import dprange
from dprange import ParameterError
from dprange.workloads import Explicit, RandomRanges
from dprange.workloads.ranges import (
    AllRange,
    Identity,
    Prefix,
    all_range_singular_values,
    prefix_singular_values,
    singular_value_sum,
)

SIZES = (1, 2, 3, 17, 64, 255, 1000)


def _second_difference(n: int) -> np.ndarray:
    """tridiag(-1, 2, -1), n x n."""
    return 2.0 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)


@pytest.mark.parametrize("n", SIZES)
def test_all_range_gram_is_n_plus_one_times_the_inverse_second_difference(n):
    """(min(i, j) + 1)(n - max(i, j)) = (n + 1) L^-1, L = tridiag(-1, 2, -1), and W^T W of the
    listed ranges is that Gram."""
    gram = AllRange(n).gram()
    np.testing.assert_allclose(_second_difference(n) @ gram, (n + 1) * np.eye(n), atol=1e-9 * (n + 1))
    if n <= 255:
        dense = AllRange(n).dense()
        np.testing.assert_array_equal(dense.T @ dense, gram)


@pytest.mark.parametrize("n", SIZES)
def test_prefix_gram_inverse_is_the_second_difference_with_a_free_first_end(n):
    """(W^T W)^-1 = D D^T with D = W^-1 the difference matrix: tridiag(-1, 2, -1) with a 1 in
    the first corner."""
    ones = np.tril(np.ones((n, n)))
    np.testing.assert_array_equal(ones.T @ ones, Prefix(n).gram())
    expected = _second_difference(n)
    expected[0, 0] = 1.0
    np.testing.assert_allclose(np.linalg.inv(Prefix(n).gram()), expected, atol=1e-9 * n)


@pytest.mark.parametrize("n", SIZES)
def test_closed_forms_equal_the_dense_eigendecomposition(n):
    cases = (
        (AllRange(n), all_range_singular_values(n)),
        (Prefix(n), prefix_singular_values(n)),
        (Identity(n), np.ones(n)),
    )
    for workload, closed in cases:
        dense = _dense_singular_values(workload.gram())
        np.testing.assert_allclose(np.sort(workload.singular_values()), dense, rtol=1e-10, atol=0)
        np.testing.assert_allclose(np.sort(closed), dense, rtol=1e-10, atol=0)
        assert singular_value_sum(closed) == pytest.approx(float(dense.sum()), rel=1e-12)


def test_closed_forms_by_hand():
    """n = 1: one range / prefix, singular value 1; n = 2: all ranges [[1, 0], [0, 1], [1, 1]]
    has Gram [[2, 1], [1, 2]] (singular values sqrt(3), 1); the prefixes [[1, 0], [1, 1]] have
    singular values (sqrt(5) +- 1) / 2, the golden ratio and its inverse."""
    np.testing.assert_allclose(all_range_singular_values(1), [1.0], rtol=1e-15)
    np.testing.assert_allclose(prefix_singular_values(1), [1.0], rtol=1e-15)
    np.testing.assert_allclose(all_range_singular_values(2), [math.sqrt(3.0), 1.0], rtol=1e-15)
    golden = (1 + math.sqrt(5.0)) / 2
    np.testing.assert_allclose(prefix_singular_values(2), [golden, 1 / golden], rtol=1e-15)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8"])
def test_closed_forms_refuse_a_bad_number_of_bins(bad):
    for closed_form in (all_range_singular_values, prefix_singular_values):
        with pytest.raises(ParameterError, match="n"):
            closed_form(bad)


def test_a_ranges_gram_is_the_dense_one_and_needs_no_dense_matrix(monkeypatch):
    """Ranges.gram by the (lo, hi) table equals W^T W; with more ranges x bins than a dense
    matrix may hold (the dense form is refused) it is still exact: its diagonal counts the
    ranges covering each bin, an entry (i, j) those covering both."""
    from dprange.workloads import ranges as workloads

    small = RandomRanges(40, 300, seed=2)
    np.testing.assert_array_equal(small.gram(), small.dense().T @ small.dense())
    monkeypatch.setattr(workloads, "DENSE_LIMIT", 10_000)
    big = RandomRanges(256, 5000, seed=3)
    with pytest.raises(ParameterError, match="too large to materialise"):
        big.dense()
    gram = big.gram()
    covering = np.array([np.sum((big.lo <= i) & (big.hi >= i)) for i in range(256)])
    np.testing.assert_array_equal(np.diag(gram), covering)
    for i, j in ((3, 200), (100, 101), (0, 255)):
        assert gram[i, j] == gram[j, i] == np.sum((big.lo <= i) & (big.hi >= j))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_an_explicit_workload_with_a_non_finite_entry_is_refused_when_built(bad):
    """It failed deep inside the optimiser with scipy's 'array must not contain infs or NaNs'."""
    matrix = np.ones((3, 8))
    matrix[1, 2] = bad
    with pytest.raises(ParameterError, match="explicit workload's matrix has a non-finite entry"):
        Explicit(matrix)


def test_a_query_matrix_or_a_list_of_ranges_as_workload_names_the_wrappers():
    """A bare matrix or list of (lo, hi) pairs is not a workload: the message says how to wrap it
    and does not print the whole matrix."""
    matrix = np.ones((300, 64))
    values = np.zeros(10, dtype=int)
    for workload in (matrix, [(0, 9), (10, 29)]):
        with pytest.raises(ParameterError, match=r"Explicit\(matrix\).*Ranges\(lo, hi, n\)") as info:
            dprange.release(values, dprange.Domain.integers(0, 63), 1.0, workload=workload)
        assert len(str(info.value)) < 400
    from dprange.mechanisms.optimized import Optimized

    with pytest.raises(ParameterError, match=r"Explicit\(matrix\)") as info:
        Optimized(matrix)
    assert len(str(info.value)) < 400


@pytest.mark.usefixtures("private_cache")
def test_weighted_ranges_gram_is_the_dense_one_and_bad_weights_are_refused():
    from dprange.workloads import WeightedRanges

    rng = np.random.default_rng(30)
    ends = rng.integers(0, 13, (40, 2))
    weights = rng.random(40) + 0.1
    workload = WeightedRanges(ends.min(1), ends.max(1), weights, 13)
    dense = indicator((13,), ends.min(1)[:, None], ends.max(1)[:, None]) * np.sqrt(weights)[:, None]
    np.testing.assert_allclose(workload.dense(), dense, rtol=1e-15)
    np.testing.assert_allclose(workload.gram(), dense.T @ dense, rtol=1e-12, atol=1e-12)
    assert workload.ranges() is None and workload.m == 40  # no unweighted range shortcut
    for bad in (np.zeros(40), -weights, weights[:-1], np.full(40, np.nan)):
        with pytest.raises(ParameterError, match="weight"):
            WeightedRanges(ends.min(1), ends.max(1), bad, 13)

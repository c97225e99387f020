"""Exact expected error: fast paths against dense formulas and Monte-Carlo; selection."""

import numpy as np
import pytest

import dprange
from dprange import ParameterError
from dprange.workloads import Explicit, RandomRanges


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

"""Closed-form singular values of all ranges, prefixes and the identity against the dense
eigendecomposition of their Gram matrices, and the SVD bound built on them."""

import math

import numpy as np
import pytest
from _helpers import _dense_singular_values

from dprange import ParameterError
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

"""Closed-form singular values of all ranges, prefixes and the identity against the dense
eigendecomposition of their Gram matrices, and the SVD bound built on them."""

import math

import numpy as np
import pytest

from dprange import ParameterError
from dprange.analysis import grid as grid_analysis
from dprange.analysis import noise_variance_floor, svd_bound
from dprange.workloads.ranges import (
    AllRange,
    Explicit,
    Identity,
    Prefix,
    RandomRanges,
    Ranges,
    all_range_singular_values,
    prefix_singular_values,
    singular_value_sum,
)

SIZES = (1, 2, 3, 17, 64, 255, 1000)


def _dense_singular_values(gram: np.ndarray) -> np.ndarray:
    return np.sqrt(np.clip(np.linalg.eigvalsh(gram), 0.0, None))


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


@pytest.mark.parametrize("n", (1, 3, 64, 255, 1000))
@pytest.mark.parametrize(("delta", "noise"), [(0.0, "laplace_float"), (0.0, "auto"), (1e-6, "auto")])
def test_svd_bound_equals_the_dense_computation(n, delta, noise):
    """The bound from the closed forms is the former one: v (sum of sqrt(eigvalsh(W^T W)))^2 / (n m)."""
    factor = noise_variance_floor(1.0, delta, noise)
    for workload in (AllRange(n), Prefix(n), Identity(n)):
        dense = factor * float(_dense_singular_values(workload.gram()).sum()) ** 2 / workload.n / workload.m
        assert svd_bound(workload, 1.0, delta, noise=noise) == pytest.approx(dense, rel=1e-12)


def test_the_same_ranges_listed_explicitly_take_the_dense_path_to_the_same_bound():
    n = 40
    lo, hi = AllRange(n).ranges()
    listed = Ranges(lo, hi, n)
    assert not listed.closed_form_spectrum and AllRange(n).closed_form_spectrum
    assert svd_bound(listed, 1.0) == pytest.approx(svd_bound(AllRange(n), 1.0), rel=1e-12)
    prefixes = Explicit(np.tril(np.ones((n, n))))
    assert svd_bound(prefixes, 1.0, 1e-6) == pytest.approx(svd_bound(Prefix(n), 1.0, 1e-6), rel=1e-12)


@pytest.mark.parametrize("workload", [AllRange(10**7), Prefix(10**7), Identity(10**7)])
def test_closed_form_bounds_have_no_size_limit(workload):
    """Ten million bins: finite, and above the bound at a thousand times fewer (it grows with n
    for ranges and prefixes, and is the noise floor itself for the identity)."""
    bound = svd_bound(workload, 1.0)
    smaller = svd_bound(type(workload)(10**4), 1.0)
    assert math.isfinite(bound)
    if isinstance(workload, Identity):
        assert bound == pytest.approx(noise_variance_floor(1.0), rel=1e-12)
    else:
        assert bound > smaller > 0


def test_dense_singular_values_keep_their_size_limit():
    with pytest.raises(ParameterError, match=r"random-ranges workload need an eigendecomposition.*n <= 8192"):
        svd_bound(RandomRanges(8193, 10), 1.0)
    with pytest.raises(ParameterError, match="n <= 8192"):
        Ranges([0], [0], 10_000).singular_values()


def test_k_d_bound_has_no_side_limit():
    """Sides above the former 8192: the per-axis closed forms, a product of 1-D sums."""
    n = 20_000
    assert grid_analysis.svd_bound((n,), "all-rectangles", 0.5) == pytest.approx(svd_bound(AllRange(n), 0.5), rel=1e-12)
    assert grid_analysis.svd_bound((n,), "prefix-rectangles", 0.5) == pytest.approx(
        svd_bound(Prefix(n), 0.5), rel=1e-12
    )
    expected = (
        noise_variance_floor(1.0)
        * (singular_value_sum(all_range_singular_values(n)) * singular_value_sum(all_range_singular_values(3))) ** 2
        / (3 * n)
        / (n * (n + 1) // 2 * 6)
    )
    assert grid_analysis.svd_bound((n, 3), "all-rectangles", 1.0) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8"])
def test_closed_forms_refuse_a_bad_number_of_bins(bad):
    for closed_form in (all_range_singular_values, prefix_singular_values):
        with pytest.raises(ParameterError, match="n"):
            closed_form(bad)

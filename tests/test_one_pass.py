"""All error bars of a tree in one top-down pass; integer bucketizing without float64.

The one-pass prefix / suffix / bin variances must equal the per-query O(depth) path
(``range_variance``) and the dense GLS covariance on every tree shape; every caller that
asks for n error bars at once (expected error, CDF standard errors, saved releases) must
give the numbers of the per-query path.  Integer bucketizing must give the counts and the
errors of the straightforward formula."""

import numpy as np
import pytest

from dprange import DataError, Domain, DomainError

# ----------------------------------------------------------------------------- integers


def _reference_counts(values, lo, hi, clip=False):
    values = np.asarray(values)
    if clip:
        values = np.clip(values, lo, hi)
    return np.bincount((values - lo).astype(np.int64), minlength=hi - lo + 1)


@pytest.mark.parametrize("chunk", [2**18, 7])
@pytest.mark.parametrize("lo,hi", [(0, 99), (-50, 49), (5, 5), (2**62 - 100, 2**62)])
def test_integer_counts_and_bins_equal_the_formula(lo, hi, chunk, monkeypatch):
    from dprange import domain as domain_module

    monkeypatch.setattr(domain_module, "_INTEGER_CHUNK", chunk)
    dom = Domain.integers(lo, hi)
    values = np.random.default_rng(1).integers(lo, hi + 1, 1000)
    np.testing.assert_array_equal(dom.histogram(values), _reference_counts(values, lo, hi))
    np.testing.assert_array_equal(dom.bucketize(values), values - lo)
    wide = np.concatenate([values, [lo - 3, hi + 4, np.iinfo(np.int64).min, np.iinfo(np.int64).max]])
    np.testing.assert_array_equal(dom.histogram(wide, clip=True), _reference_counts(wide, lo, hi, clip=True))
    np.testing.assert_array_equal(dom.bucketize(wide, clip=True), np.clip(wide, lo, hi) - lo)
    if abs(lo) + abs(hi) < 2**53:
        floats = values.astype(float)
        np.testing.assert_array_equal(dom.histogram(floats), _reference_counts(values, lo, hi))


SMALLEST, LARGEST = np.iinfo(np.int64).min, np.iinfo(np.int64).max


@pytest.mark.parametrize("lo", [0, -(2**62), 2**62 - 10])
@pytest.mark.parametrize(
    "offsets,extremes,outside",
    [
        ([0, 5, -1, 200], [], 2),
        ([3], [SMALLEST], 1),  # value - lo may wrap around in int64: still out of bounds
        ([7], [LARGEST, SMALLEST + 1], 2),
    ],
)
def test_integer_counts_refuse_values_out_of_bounds(lo, offsets, extremes, outside):
    dom = Domain.integers(lo, lo + 10)
    values = np.array([lo + k for k in offsets] + extremes, dtype=np.int64)
    for call in (dom.histogram, dom.bucketize):
        with pytest.raises(DomainError, match=f"^{outside} values lie outside"):
            call(values)


def test_integer_counts_keep_the_input_errors():
    dom = Domain.integers(0, 9)
    with pytest.raises(DomainError, match="non-integer"):
        dom.histogram(np.array([1.0, 2.5, 99.0]))  # non-integers reported before bounds
    with pytest.raises(DomainError, match="missing"):
        dom.histogram(np.array([1.0, np.nan]))
    np.testing.assert_array_equal(dom.histogram(np.array([1.0, np.nan]), drop_missing=True), np.eye(10, dtype=int)[1])
    with pytest.raises(DataError, match="boolean"):
        dom.histogram(np.array([True, False]))
    with pytest.raises(DomainError, match="beyond 2\\^53"):
        Domain.integers(2**60, 2**60 + 5).histogram(np.array([1.0]))
    np.testing.assert_array_equal(dom.histogram(np.array([], dtype=np.int64)), np.zeros(10, dtype=np.int64))
    np.testing.assert_array_equal(
        dom.histogram(np.array([3, 2**64 - 1], dtype=np.uint64), clip=True),
        np.eye(10, dtype=int)[3] + np.eye(10, dtype=int)[9],
    )
    assert dom.histogram(np.arange(10)).dtype == np.int64

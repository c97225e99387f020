"""dprange.columns: pandas and pyarrow columns (nullable integers, strings, booleans) keep their
precision or are refused."""

import numpy as np
import pytest

from dprange import DataError, Domain, DomainError


def test_pandas_and_pyarrow_columns():
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    d = Domain.integers(0, 4)
    s = pd.Series([1, 2, None], dtype="Int64")
    assert d.bucketize(s, drop_missing=True).tolist() == [1, 2]
    arr = pa.chunked_array([[0, 4], [None, 3]])
    assert d.bucketize(arr, drop_missing=True).tolist() == [0, 4, 3]
    with pytest.raises(DataError):
        d.bucketize(pa.array(["a", "b"]))
    with pytest.raises(DataError):
        d.bucketize(pd.Series(["a", "b"]))


def test_integer_columns_keep_their_precision_from_pandas_and_pyarrow():
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    big = 2**53
    d = Domain.integers(big, big + 3)
    assert d.bucketize(pd.Series([big + 1, None, big + 3], dtype="Int64"), drop_missing=True).tolist() == [1, 3]
    assert d.bucketize(pa.chunked_array([[big + 1], [None, big + 3]]), drop_missing=True).tolist() == [1, 3]
    masked = np.ma.MaskedArray(np.array([big + 2, 0], dtype=np.int64), mask=[False, True])
    assert d.bucketize(masked, drop_missing=True).tolist() == [2]
    with pytest.raises(DomainError, match="missing"):
        d.bucketize(masked)


def test_boolean_columns_are_refused():
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    d = Domain.integers(0, 1)
    for values in (
        [True, False],
        np.array([True, False]),
        pd.Series([True, False]),
        pa.array([True, False]),
        pd.Series([True, None], dtype="boolean"),
    ):
        with pytest.raises(DataError, match="boolean"):
            d.bucketize(values)

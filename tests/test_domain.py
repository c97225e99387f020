import numpy as np
import pytest

from dprange import DataError, Domain, DomainError, ParameterError


def test_integer_domain_bucketize():
    d = Domain.integers(-2, 3)
    assert d.size == 6
    assert d.bucketize([-2, 0, 3, 3.0]).tolist() == [0, 2, 5, 5]
    assert d.histogram([-2, 3, 3]).tolist() == [1, 0, 0, 0, 0, 2]
    with pytest.raises(DomainError, match="non-integer"):
        d.bucketize([1.5])


def test_interval_domain_edges_and_last_bin_closed():
    d = Domain.interval(0.0, 10.0, 4)
    assert d.edges.tolist() == [0, 2.5, 5, 7.5, 10]
    assert d.bucketize([0, 2.4999, 2.5, 9.99, 10.0]).tolist() == [0, 0, 1, 3, 3]


def test_out_of_bounds_missing_and_clip():
    d = Domain.interval(0, 1, 2)
    with pytest.raises(DomainError, match="outside the public bounds"):
        d.bucketize([0.5, 1.5])
    assert d.bucketize([-3, 0.5, 1.5], clip=True).tolist() == [0, 1, 1]
    with pytest.raises(DomainError, match="missing"):
        d.bucketize([0.2, np.nan])
    assert d.bucketize([0.2, np.nan, None], drop_missing=True).tolist() == [0]


def test_bad_domains():
    with pytest.raises(ParameterError):
        Domain.interval(1, 1, 3)
    with pytest.raises(ParameterError):
        Domain.interval(0, 1, 0)
    with pytest.raises(ParameterError):
        Domain.interval(0, float("inf"), 3)
    with pytest.raises(ParameterError):
        Domain.integers(5, 4)


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


def test_domain_round_trip():
    for d in (Domain.integers(3, 9), Domain.interval(-1.5, 2.5, 7)):
        assert Domain.from_dict(d.to_dict()) == d

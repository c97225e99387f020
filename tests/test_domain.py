"""dprange.domain: integer and interval domains and product domains (bucketizing on and beside the
published edges, integer counts without float64, bounds, missing values, sizes checked up
front) and one-line errors that keep private counts out when redacted."""

import numpy as np
import pytest

from dprange import DataError, Domain, DomainError, DPRangeError, ParameterError


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


# ----------------------------------------------------------------------------- published edges
def brute_force_bins(edges, values):
    """Bin i iff edges[i] <= v < edges[i + 1], the last bin closed at hi: the documented rule."""
    out = []
    for v in values:
        if v == edges[-1]:
            out.append(len(edges) - 2)
            continue
        out.append(next(i for i in range(len(edges) - 1) if edges[i] <= v < edges[i + 1]))
    return out


@pytest.mark.parametrize(
    "lo, hi, bins", [(0, 29, 3), (0.1, 0.7, 6), (0.0, 1e-320, 3), (-1e308, 7e307, 5), (1e15, 1e15 + 7, 7)]
)
def test_values_on_a_published_edge_land_in_the_upper_bin(lo, hi, bins):
    d = Domain.interval(lo, hi, bins)
    edges = d.edges
    assert d.bucketize(edges).tolist() == list(range(bins)) + [bins - 1]


def test_bucketize_matches_the_published_edges_on_random_domains():
    rng = np.random.default_rng(7)
    for _ in range(200):
        lo = float(rng.uniform(-100, 100))
        hi = lo + float(rng.choice([1e-6, 0.3, 7.0, 1e5])) * rng.uniform(0.5, 2)
        bins = int(rng.integers(1, 40))
        d = Domain.interval(lo, hi, bins)
        edges = d.edges
        assert edges[0] == lo and edges[-1] == hi and np.all(np.diff(edges) > 0)
        inner = edges[1:-1]
        values = np.concatenate(
            [edges, np.nextafter(inner, -np.inf), np.nextafter(inner, np.inf), rng.uniform(lo, hi, 20)]
        )
        values = values[(values >= lo) & (values <= hi)]
        assert d.bucketize(values).tolist() == brute_force_bins(edges, values)
        assert Domain.from_dict(d.to_dict()).edges.tolist() == edges.tolist()


@pytest.mark.parametrize(
    "lo, hi, bins", [(-1e308, 1e308, 4), (-1.7e308, 1.7e308, 1), (1.0, 1.0 + 1e-15, 100), (0.0, 5e-324, 2)]
)
def test_overflowing_or_underflowing_intervals_are_refused(lo, hi, bins):
    with pytest.raises(ParameterError, match="overflows|too narrow"):
        Domain.interval(lo, hi, bins)


def test_integer_domain_beyond_2_53_bins_in_integer_arithmetic():
    big = 2**60
    d = Domain.integers(big, big + 10)
    values = np.array([big, big + 1, big + 9, big + 10], dtype=np.int64)
    assert d.bucketize(values).tolist() == [0, 1, 9, 10]
    assert d.histogram(values).tolist() == [1, 1] + [0] * 7 + [1, 1]
    with pytest.raises(DomainError, match="2\\^53"):
        d.bucketize(values.astype(float))
    with pytest.raises(DomainError, match="outside"):
        d.bucketize(np.array([big - 1], dtype=np.int64))
    assert d.bucketize(np.array([0, 2**63 - 1], dtype=np.int64), clip=True).tolist() == [0, 10]
    assert d.bucketize([big + 3, 2**70], clip=True).tolist() == [3, 10]  # Python ints stay exact
    # 2^53 + 1 is not a float: float64 binning put it in the bin of 2^53
    d = Domain.integers(2**53, 2**53 + 1)
    assert d.bucketize(np.array([2**53 + 1], dtype=np.int64)).tolist() == [1]


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


def test_size_limits_are_checked_up_front():
    from dprange.domain import MAX_BINS

    for make in (
        lambda: Domain.integers(0, 2**40),
        lambda: Domain.interval(0, 1, 2**31),
        lambda: Domain.interval(0, 1, 2**40),
        lambda: Domain.integers(-(2**61), 2**61),
    ):
        with pytest.raises(ParameterError, match="limit of 67108864"):
            make()
    assert Domain.integers(0, MAX_BINS - 1).size == MAX_BINS
    with pytest.raises(ParameterError, match="2\\^62"):
        Domain.integers(0, 2**63)


BAD_DOMAIN_CALLS = [
    ("integers", ("0", 5)),
    ("integers", (None, 5)),
    ("integers", (True, 5)),
    ("integers", (0, [5])),
    ("integers", (0, float("nan"))),
    ("integers", (0, float("inf"))),
    ("integers", (0, 2.5)),
    ("integers", (0, 10**400)),
    ("integers", (1e300, 1e300)),
    ("interval", ("0", 1, 3)),
    ("interval", (None, 1, 3)),
    ("interval", (False, 1, 3)),
    ("interval", (0, [1], 3)),
    ("interval", (0, float("nan"), 3)),
    ("interval", (0, 10**400, 3)),
    ("interval", (-(10**400), 0, 3)),
    ("interval", (0, 1, "3")),
    ("interval", (0, 1, None)),
    ("interval", (0, 1, True)),
    ("interval", (0, 1, 2.5)),
    ("interval", (0, 1, float("inf"))),
    ("interval", (0, 1, 10**30)),
    ("interval", (0, 1, [3])),
]


@pytest.mark.parametrize("kind, args", BAD_DOMAIN_CALLS)
def test_bad_domain_arguments_raise_dprange_errors(kind, args):
    with pytest.raises(ParameterError):
        getattr(Domain, kind)(*args)


BAD_VALUES = [
    "abc",
    None,
    [True, False],
    np.array([True]),
    [[1, 2], [3]],
    np.zeros((2, 2)),
    [1 + 2j],
    ["1", "2"],
    [1, "a"],
    {"a": 1},
    [object()],
    [1, True],
]


@pytest.mark.parametrize("values", BAD_VALUES, ids=range(len(BAD_VALUES)))
@pytest.mark.parametrize("domain", [Domain.integers(0, 9), Domain.interval(0, 10, 5)], ids=["integers", "interval"])
def test_bad_values_raise_dprange_errors(domain, values):
    with pytest.raises(DPRangeError):
        domain.bucketize(values)
    with pytest.raises(DPRangeError):
        domain.histogram(values)


@pytest.mark.parametrize("flag", ["yes", None, 1])
def test_bucketize_flags_must_be_booleans(flag):
    with pytest.raises(ParameterError):
        Domain.interval(0, 1, 2).bucketize([0.5], clip=flag)


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


def test_messages_quoting_private_counts_are_redacted(monkeypatch):
    from dprange import redacted, set_redaction

    d = Domain.interval(0, 1, 2)
    with pytest.raises(DomainError, match="^3 values lie outside"):
        d.bucketize([5, 6, 7, 0.5])
    with redacted():
        with pytest.raises(DomainError) as info:
            d.bucketize([5, 6, 7, 0.5])
        assert "3" not in str(info.value) and "<redacted> values lie outside" in str(info.value)
        with pytest.raises(DomainError, match="^<redacted> values are missing"):
            d.bucketize([np.nan, 0.5])
    with pytest.raises(DomainError, match="^2 values are missing"):
        d.bucketize([np.nan, np.nan, 0.5])
    monkeypatch.setenv("DPRANGE_REDACT", "1")
    with pytest.raises(DomainError, match="^<redacted> values are missing"):
        d.bucketize([np.nan, 0.5])
    set_redaction(False)  # an explicit setting wins over the environment
    try:
        with pytest.raises(DomainError, match="^1 values are missing"):
            d.bucketize([np.nan, 0.5])
    finally:
        set_redaction(None)

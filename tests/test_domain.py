"""dprange.domain: integer and interval domains and product domains (bucketizing on and beside the
published edges, integer counts without float64, bounds, missing values, sizes checked up
front) and one-line errors that keep private counts out when redacted."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import dprange
from dprange import DataError, Domain, DomainError, DPRangeError, ParameterError
from dprange.domain import ProductDomain


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


# ----------------------------------------------------------------------------- domain
def test_product_domain_histogram_counts_every_record_in_its_cell():
    dom = ProductDomain([Domain.integers(17, 19), Domain.interval(0.0, 10.0, 4)])
    ages = np.array([17, 18, 19, 19, 17])
    hours = np.array([0.0, 2.5, 9.9, 10.0, 5.0])
    hist = dom.histogram([ages, hours])
    expected = np.zeros((3, 4), dtype=np.int64)
    for a, h in zip(ages - 17, np.minimum((hours / 2.5).astype(int), 3)):
        expected[a, h] += 1
    assert hist.dtype == np.int64 and dom.shape == (3, 4)
    np.testing.assert_array_equal(hist, expected)
    np.testing.assert_array_equal(dom.histogram(np.column_stack([ages, hours])), expected)


def test_product_domain_bad_inputs_follow_the_1d_rules():
    dom = ProductDomain([Domain.integers(0, 2), Domain.integers(0, 3)])
    with pytest.raises(DomainError, match="outside the public bounds"):
        dom.histogram([[0, 5], [1, 1]])
    np.testing.assert_array_equal(dom.histogram([[0, 5], [1, 1]], clip=True)[2], [0, 1, 0, 0])
    frame = pd.DataFrame({"a": [0.0, np.nan, 2.0], "b": [1, 2, None]})
    with pytest.raises(DomainError, match="2 records have a missing value"):
        dom.histogram(frame)
    hist = dom.histogram(frame, drop_missing=True)  # the whole record goes, from both columns
    assert hist.sum() == 1 and hist[0, 1] == 1
    with pytest.raises(ParameterError, match="2 axes, got 3"):
        dom.histogram([[0], [1], [2]])
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"a": pa.array([0, None, 2]), "b": pa.array([1, 2, 3])})
    with pytest.raises(DomainError, match="1 records have a missing value"):
        dom.histogram(table)
    np.testing.assert_array_equal(np.argwhere(dom.histogram(table, drop_missing=True)), [[0, 1], [2, 3]])


DOMAIN = ProductDomain([Domain.integers(0, 11), Domain.integers(0, 8)])


def test_product_domain_errors_name_the_axis():
    """Was: the 1-D message alone, with no axis."""
    with pytest.raises(dprange.errors.DomainError, match=r"^axis 1: .*outside the public bounds"):
        DOMAIN.histogram([np.array([0, 11]), np.array([0, 9])])


# ----------------------------------------------------------------------------- categories
def category_reference(values, categories, other=None):
    """Bins by the documented rule, one value at a time: text stripped, integers (and integral
    floats) as decimal text, missing markers / None / NaN -> -1, outside the list -> the other
    bin (the last) or -2."""
    out = []
    for v in values:
        if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
            out.append(-1)
            continue
        key = v.strip() if isinstance(v, str) else str(int(v))
        if key in ("", "NA", "NaN", "null", "None", "n/a", "N/A", "<NA>", "nan", "NULL"):
            out.append(-1)
        elif key in categories:
            out.append(categories.index(key))
        else:
            out.append(len(categories) if other else -2)
    return np.asarray(out, dtype=np.int64)


CATEGORY_VALUES = ["Male", " Female", "Male ", "x", None, "", "NA", "Female", "3", "Male"]


def category_inputs():
    """The same column as every in-memory type the domain reads."""
    import pyarrow as pa

    yield "list", list(CATEGORY_VALUES)
    yield "object array", np.asarray(CATEGORY_VALUES, dtype=object)
    yield "pandas", pd.Series(CATEGORY_VALUES)
    yield "pandas categorical", pd.Series(CATEGORY_VALUES, dtype="category")
    yield "pyarrow", pa.array(CATEGORY_VALUES)
    yield "pyarrow dictionary", pa.array(CATEGORY_VALUES).dictionary_encode()
    yield "pyarrow chunked", pa.chunked_array([CATEGORY_VALUES[:4], CATEGORY_VALUES[4:]])
    try:
        import polars as pl
    except ImportError:
        return
    yield "polars", pl.Series(CATEGORY_VALUES)
    yield "polars categorical", pl.Series(CATEGORY_VALUES, dtype=pl.Categorical)


@pytest.mark.parametrize("other", [False, True])
def test_categories_bucketize_every_input_type_like_the_reference(other):
    categories = ["Male", "Female", "3"]
    d = Domain.categories(categories, other=other)
    expected = category_reference(CATEGORY_VALUES, categories, other)
    kept = expected[expected != -1]
    assert d.bins == 3 + other and d.bin_labels() == categories + (["other"] if other else [])
    for name, values in category_inputs():
        assert d.codes(values).tolist() == expected.tolist(), name
        if other:
            assert d.bucketize(values, drop_missing=True).tolist() == kept.tolist(), name
            assert d.histogram(values, drop_missing=True).tolist() == np.bincount(kept, minlength=4).tolist(), name
        else:
            with pytest.raises(DomainError, match="not among the 3 public categories.*other=True"):
                d.bucketize(values, drop_missing=True)
        with pytest.raises(DomainError, match="missing.*drop_missing=True" if other else "'x'.*other=True"):
            d.histogram(values)  # the first bad value: a missing one, or 'x' outside the list


def test_categories_match_integers_as_their_text_and_refuse_booleans_and_fractions():
    d = Domain.categories([1, 2, "10"])
    assert d.bin_labels() == ["1", "2", "10"]
    assert d.bucketize(np.array([10, 1, 2, 2])).tolist() == [2, 0, 1, 1]
    assert d.bucketize(np.array([10.0, np.nan, 1.0]), drop_missing=True).tolist() == [2, 0]
    assert d.bucketize(pd.Series([1, None, 10], dtype="Int64"), drop_missing=True).tolist() == [0, 2]
    with pytest.raises(DataError, match="booleans"):
        d.bucketize(np.array([True, False]))
    with pytest.raises(DataError, match="text or integers"):
        d.bucketize([1.5])


@pytest.mark.parametrize(
    "labels,other,message",
    [
        (["a", "a"], False, "listed twice"),
        ([], False, "at least one category"),
        ("abc", False, "list of labels"),
        (["a", ""], False, "reads as a missing value"),
        (["a", "NA"], False, "reads as a missing value"),
        (["a", 1.5], False, "text or an integer"),
        (["a", True], False, "text or an integer"),
        (["a", "other"], True, "also a category"),
        (["a"], 3, "other must be True, False or"),
    ],
)
def test_bad_category_lists_are_parameter_errors(labels, other, message):
    with pytest.raises(ParameterError, match=message):
        Domain.categories(labels, other=other)


def test_categories_are_unordered_and_refuse_clip():
    d = Domain.categories(["a", "b"])
    for ask in (lambda: d.edges, d.bin_values):
        with pytest.raises(ParameterError, match="unordered"):
            ask()
    with pytest.raises(ParameterError, match="clip does not apply to categories"):
        d.bucketize(["a"], clip=True)
    assert d.index_of(["b", "a"]).tolist() == [1, 0]
    with pytest.raises(ParameterError, match="'c' is not a category of this domain; its bins are 'a', 'b'"):
        d.bins_of_labels("c")


@pytest.mark.parametrize("other", [False, True, "rest"])
def test_categories_to_dict_round_trip_keeps_labels(other):
    d = Domain.categories(["Male", "Female", 7], other=other)
    data = d.to_dict()
    expected_other = {False: None, True: "other", "rest": "rest"}[other]
    assert data == {
        "kind": "categories",
        "categories": ["Male", "Female", "7"],
        "other": expected_other,
        "bins": d.bins,
    }
    back = Domain.from_dict(data)
    assert back == d and back.bin_labels() == d.bin_labels() and repr(back) == repr(d)
    with pytest.raises(DataError, match="list of categories"):
        Domain.from_dict({**data, "categories": "Male"})


def test_product_domain_mixes_categorical_and_numeric_axes():
    import pyarrow as pa

    pdm = ProductDomain([Domain.categories(["M", "F"], other=True), Domain.integers(0, 2)])
    sex, age = ["M", "F", "x", None, "F"], [0, 2, 1, 1, 5]
    counts = pdm.histogram([sex, age], clip=True, drop_missing=True)
    expected = np.zeros((3, 3), dtype=np.int64)
    for i, j in [(0, 0), (1, 2), (2, 1), (1, 2)]:
        expected[i, j] += 1
    assert counts.tolist() == expected.tolist()
    frame = pd.DataFrame({"s": sex, "a": age})
    assert pdm.histogram(frame, clip=True, drop_missing=True).tolist() == expected.tolist()
    table = pa.table({"s": pa.array(sex).dictionary_encode(), "a": age})
    assert pdm.histogram(table, clip=True, drop_missing=True).tolist() == expected.tolist()
    strict = ProductDomain([Domain.categories(["M", "F"]), Domain.integers(0, 2)])
    with pytest.raises(DomainError, match="axis 0: 1 values are not among the 2 public categories"):
        strict.histogram([["M", "x"], [0, 1]])
    back = ProductDomain.from_dict(pdm.to_dict())
    assert back == pdm and back.domains[0].bin_labels() == ["M", "F", "other"]


def test_non_integer_values_are_counted_and_the_first_named():
    """How many values are fractional, and the first with its position, so a planted 39.5 in
    the first row of a file is found (the file engines name the row the same way)."""
    message = "the integer domain got 2 non-integer values (the first: 39.5 at position 1, counting from 0)"
    with pytest.raises(DomainError, match=re.escape(message)):
        Domain.integers(0, 120).histogram(np.array([40.0, 39.5, 20.0, 7.25]))

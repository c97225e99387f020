"""Reading columns from CSV (pandas and standard-library paths), Parquet and NumPy files, and
their column names (dprange.io)."""

from __future__ import annotations

import sys
from decimal import Decimal

import numpy as np
import pytest

from dprange import DataError, Domain, redacted
from dprange.io import load_npy, load_npz, read_column


@pytest.fixture(params=["pandas", "stdlib"])
def reader(request, monkeypatch):
    """read_column on the pandas path, and on the standard-library path (pandas 'not installed')."""
    if request.param == "pandas":
        pytest.importorskip("pandas")
    else:
        monkeypatch.setitem(sys.modules, "pandas", None)
    return read_column


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return str(path)


def test_trailing_comma_on_each_row_keeps_the_columns(reader, tmp_path):
    path = write(tmp_path, "t.csv", "a,b\n1,20,\n3,40,\n")
    assert reader(path, "a").tolist() == [1, 3]
    assert reader(path, "b").tolist() == [20, 40]


def test_utf8_bom_is_handled(reader, tmp_path):
    path = write(tmp_path, "bom.csv", b"\xef\xbb\xbfage,x\n31,1\n42,2\n")
    assert reader(path, "age").tolist() == [31, 42]


@pytest.mark.parametrize(
    "name, data, message",
    [
        ("latin1.csv", "age\n31\ncaf\u00e9\n".encode("latin-1"), "not UTF-8"),
        ("utf16.csv", "age\n31\n".encode("utf-16"), "UTF-16"),
        ("utf16be.csv", "age\n31\n".encode("utf-16-be"), "NUL bytes"),
        ("parquet.csv", b"PAR1\x15\x04\x15\x00\x00binary", "Parquet file, not CSV"),
        ("zip.csv", b"PK\x03\x04\x14\x00", "zip archive"),
        ("gzip.csv", b"\x1f\x8b\x08\x00", "gzip"),
        ("empty.csv", b"", "empty"),
    ],
)
def test_files_that_are_not_utf8_csv_give_one_line_data_errors(reader, tmp_path, name, data, message):
    path = write(tmp_path, name, data)
    with pytest.raises(DataError, match=message) as info:
        reader(path, "age")
    assert "\n" not in str(info.value) and len(str(info.value)) < 200


def test_boolean_columns_are_errors(reader, tmp_path):
    path = write(tmp_path, "b.csv", "flag,x\nTrue,1\nFalse,2\n\n")
    with pytest.raises(DataError, match="boolean"):
        reader(path, "flag")


def test_integers_beyond_2_53_stay_exact(reader, tmp_path):
    big = 2**53 + 1
    path = write(tmp_path, "big.csv", f"v,w\n{big},1\n{big + 2},\n")
    values = reader(path, "v")
    assert values.dtype == np.int64 and values.tolist() == [big, big + 2]
    assert Domain.integers(2**53, 2**53 + 3).bucketize(values).tolist() == [1, 3]
    with_missing = reader(write(tmp_path, "m.csv", f"v\n{big}\n\n"), "v")
    assert Domain.integers(2**53, 2**53 + 3).bucketize(with_missing, drop_missing=True).tolist() == [1]


def test_missing_markers_and_non_numeric_cells(reader, tmp_path):
    path = write(tmp_path, "m.csv", "v\n1.5\n\nNA\nnan\n2\n")
    np.testing.assert_array_equal(reader(path, "v"), [1.5, np.nan, np.nan, np.nan, 2.0])
    bad = write(tmp_path, "bad.csv", "v\n1\n2\n1_000\n")
    with pytest.raises(DataError, match="not numeric \\(e.g. '1_000' on row 4\\)"):
        reader(bad, "v")
    with redacted():
        with pytest.raises(DataError, match="not numeric \\(e.g. <redacted> on row <redacted>\\)"):
            reader(bad, "v")


def test_missing_column_lists_the_columns(reader, tmp_path):
    path = write(tmp_path, "c.csv", "a,b\n1,2\n")
    with pytest.raises(DataError, match="columns are: a, b"):
        reader(path, "z")


def test_bad_paths_and_column_names(tmp_path):
    from dprange import ParameterError

    with pytest.raises(DataError, match="does not exist"):
        read_column(str(tmp_path / "none.csv"), "a")
    with pytest.raises(DataError, match="folder"):
        read_column(str(tmp_path), "a")
    for bad_path in (None, 3, ["a.csv"]):
        with pytest.raises(ParameterError):
            read_column(bad_path, "a")
    path = write(tmp_path, "c.csv", "a\n1\n")
    with pytest.raises(ParameterError):
        read_column(path, 0)
    assert read_column(tmp_path / "c.csv", "a").tolist() == [1]  # pathlib paths work


# ----------------------------------------------------------------------------- Parquet
def test_csv_named_parquet_gives_a_short_printable_message(tmp_path):
    pytest.importorskip("pyarrow")
    path = write(tmp_path, "x.parquet", b"a,b\n\x00\x01\x02\xff" * 50)
    with pytest.raises(DataError, match="not a Parquet file") as info:
        read_column(path, "a")
    assert str(info.value).isprintable() and len(str(info.value)) < 200


def test_corrupt_parquet_message_is_short_and_printable(tmp_path):
    pytest.importorskip("pyarrow")
    path = write(tmp_path, "x.parquet", b"PAR1" + bytes(range(256)) * 4 + b"PAR1")
    with pytest.raises(DataError) as info:
        read_column(path, "a")
    assert str(info.value).isprintable() and len(str(info.value)) < 250


def test_decimal_parquet_columns_are_accepted(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "price": pa.array([Decimal("1.25"), None, Decimal("7.50")], type=pa.decimal128(10, 2)),
            "id": pa.array([Decimal(2**53 + 1), Decimal(3), None], type=pa.decimal128(20, 0)),
            "huge": pa.array([Decimal("9007199254740993.5"), None, None], type=pa.decimal128(30, 1)),
        }
    )
    path = str(tmp_path / "d.parquet")
    pq.write_table(table, path)
    np.testing.assert_array_equal(read_column(path, "price"), [1.25, np.nan, 7.5])
    ids = read_column(path, "id")
    assert Domain.integers(2**53, 2**53 + 1).bucketize(ids, drop_missing=True, clip=True).tolist() == [1, 0]
    assert Domain.integers(0, 5).bucketize(ids, drop_missing=True, clip=True).tolist() == [5, 3]
    with pytest.raises(DataError, match="2\\^53"):
        read_column(path, "huge")


def test_boolean_parquet_column_is_an_error(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = str(tmp_path / "b.parquet")
    pq.write_table(pa.table({"flag": [True, False]}), path)
    with pytest.raises(DataError, match="boolean"):
        read_column(path, "flag")


# ----------------------------------------------------------------------------- NumPy files
def test_load_npy_and_npz_give_clear_errors(tmp_path):
    good = tmp_path / "h.npy"
    np.save(good, np.arange(4))
    assert load_npy(str(good)).tolist() == [0, 1, 2, 3]
    archive = tmp_path / "a.npz"
    np.savez(archive, x=np.arange(3))
    with load_npz(str(archive)) as z:
        assert z.files == ["x"] and z["x"].tolist() == [0, 1, 2]
    csv = write(tmp_path, "h.csv", "a\n1\n")
    for load, source in (
        (load_npy, csv),
        (load_npz, csv),
        (load_npy, str(archive)),
        (load_npz, str(good)),
        (load_npz, b"garbage"),
        (load_npy, b"\x93NUMPY\x01\x00garbage"),
    ):
        with pytest.raises(DataError) as info:
            load(source)
        message = str(info.value)
        assert "allow_pickle" not in message and "\n" not in message and message.isprintable()
    objects = tmp_path / "o.npy"
    np.save(objects, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match="pickled data"):
        load_npy(str(objects))
    with pytest.raises(DataError, match="does not exist"):
        load_npy(str(tmp_path / "none.npy"))


def test_parser_errors_are_redacted(tmp_path):
    pytest.importorskip("pandas")
    path = write(tmp_path, "q.csv", 'a,b\n1,2\n"unterminated,3\n')
    with pytest.raises(DataError) as info:
        read_column(path, "a")
    with redacted():
        with pytest.raises(DataError) as quiet:
            read_column(path, "a")
    assert "row 2" in str(info.value)
    assert "row" not in str(quiet.value) and "details redacted" in str(quiet.value)


def test_column_names_reads_a_csv_header_and_a_parquet_schema(tmp_path):
    from dprange.errors import DataError
    from dprange.io import column_names

    path = tmp_path / "q.csv"
    path.write_text("\ufeffa_lo, a_hi,b\n1,2,3\n")
    assert column_names(path) == ["a_lo", "a_hi", "b"]
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(DataError, match="is empty"):
        column_names(tmp_path / "empty.csv")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"lo": [0, 1], "hi": [2, 3]}), tmp_path / "q.parquet")
    assert column_names(tmp_path / "q.parquet") == ["lo", "hi"]

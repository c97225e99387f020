"""The local streaming engine (dprange.engines.local): batch-by-batch counts equal the in-memory
histogram (CSV, Parquet row groups, several files, globs, clip, drop), bad values stop the count
with a message naming the file, the row and the value, release_files equals the release of the
values, and Arrow's memory stays at about one row group."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from _helpers import write_csv

import dprange
from dprange import DataError, Domain, DomainError, ParameterError, redacted
from dprange.engines import expand_inputs, merge_counts, stream_histogram
from dprange.engines.local import prefetched

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def write_parquet(path, values, row_group_size=700) -> str:
    pq.write_table(pa.table({"x": values, "y": np.arange(len(values))}), str(path), row_group_size=row_group_size)
    return str(path)


@pytest.fixture
def reals():
    return np.random.default_rng(6).uniform(0.0, 10.0, 4000).round(4)


# ----------------------------------------------------------------------------- equality
@pytest.mark.parametrize("batch_rows", [1, 333, 10_000])
def test_csv_streamed_in_batches_equals_the_in_memory_histogram(tmp_path, ints, batch_rows):
    path = write_csv(tmp_path / "a.csv", ints[:1500] if batch_rows == 1 else ints)
    domain = Domain.integers(-3, 49)
    expected = domain.histogram(ints[:1500] if batch_rows == 1 else ints)
    counts = stream_histogram(path, "x", domain, batch_rows=batch_rows)
    assert counts.dtype == np.int64
    np.testing.assert_array_equal(counts, expected)


def test_real_csv_with_missing_markers_clip_and_drop_equals_in_memory(tmp_path, reals):
    cells: list = [f"{v:.4f}" for v in reals]
    cells[7], cells[2000], cells[-1] = "NA", None, " nan"
    cells[10], cells[3999 - 5] = "12.5", "-1"  # outside [0, 10]: clipped
    path = write_csv(tmp_path / "r.csv", cells)
    domain = Domain.interval(0.0, 10.0, 37)
    in_memory = dprange.io.read_column(path, "x")
    expected = domain.histogram(in_memory, clip=True, drop_missing=True)
    counts = stream_histogram(path, "x", domain, clip=True, drop_missing=True, batch_rows=500)
    np.testing.assert_array_equal(counts, expected)
    assert counts.sum() == 4000 - 3


def test_parquet_with_several_row_groups_and_batches_equals_in_memory(tmp_path, ints, reals):
    domain = Domain.integers(-3, 49)
    path = write_parquet(tmp_path / "i.parquet", ints)
    np.testing.assert_array_equal(stream_histogram(path, "x", domain, batch_rows=256), domain.histogram(ints))
    with_nulls = pa.array([None if i % 97 == 0 else float(v) for i, v in enumerate(reals)])
    real_path = str(tmp_path / "r.parquet")
    pq.write_table(pa.table({"x": with_nulls}), real_path, row_group_size=900)
    interval = Domain.interval(0.0, 10.0, 64)
    expected = interval.histogram(reals[np.arange(reals.size) % 97 != 0])
    got = stream_histogram(real_path, "x", interval, drop_missing=True, batch_rows=300)
    np.testing.assert_array_equal(got, expected)


def test_several_files_a_folder_a_glob_and_a_list_are_one_column(tmp_path, ints):
    folder = tmp_path / "parts"
    folder.mkdir()
    parts = np.array_split(ints, 4)
    write_csv(folder / "part-0.csv", parts[0])
    write_parquet(folder / "part-1.parquet", parts[1])
    write_csv(folder / "part-2.csv", parts[2])
    write_parquet(folder / "part-3.pq", parts[3])
    (folder / "notes.txt").write_text("not data")
    domain = Domain.integers(-3, 49)
    expected = domain.histogram(ints)
    assert [os.path.basename(p) for p in expand_inputs(folder)] == [
        "part-0.csv",
        "part-1.parquet",
        "part-2.csv",
        "part-3.pq",
    ]
    np.testing.assert_array_equal(stream_histogram(folder, "x", domain, batch_rows=400), expected)
    np.testing.assert_array_equal(stream_histogram(str(folder / "part-*"), "x", domain), expected)
    files = [folder / "part-0.csv", str(folder / "part-[123]*")]
    np.testing.assert_array_equal(stream_histogram(files, "x", domain, batch_rows=999), expected)


def test_a_cell_the_typed_reader_refuses_late_restarts_the_file_without_double_counting(tmp_path, ints):
    # int64 conversion fails at the last cell ("7.0", " 8"): the file is read again as text
    cells = [*ints.tolist(), "7.0", " 8", "+9"]
    path = write_csv(tmp_path / "late.csv", cells)
    domain = Domain.integers(-3, 49)
    expected = domain.histogram(np.array([*ints.tolist(), 7, 8, 9]))
    np.testing.assert_array_equal(stream_histogram(path, "x", domain, batch_rows=300), expected)
    np.testing.assert_array_equal(
        stream_histogram(path, "x", domain, batch_rows=300), domain.histogram(dprange.io.read_column(path, "x"))
    )


def test_partial_counts_merge_to_the_whole(tmp_path, ints):
    domain = Domain.integers(-3, 49)
    halves = [write_csv(tmp_path / "h0.csv", ints[:2500]), write_parquet(tmp_path / "h1.parquet", ints[2500:])]
    merged = merge_counts(stream_histogram(p, "x", domain) for p in halves)
    np.testing.assert_array_equal(merged, domain.histogram(ints))
    with pytest.raises(ParameterError, match="different domains"):
        merge_counts([np.zeros(3), np.zeros(4)])


def test_integers_beyond_2_53_stay_exact_and_a_trailing_comma_is_harmless(tmp_path):
    big = 2**53
    path = tmp_path / "big.csv"
    path.write_text(f"x,y\n{big + 1},1,\n{big + 3},2,\n+{big},3,\n")
    counts = stream_histogram(str(path), "x", Domain.integers(big, big + 3), batch_rows=1)
    assert counts.tolist() == [1, 1, 0, 1]


def test_the_pandas_path_without_pyarrow_equals_in_memory(tmp_path, monkeypatch, reals):
    pytest.importorskip("pandas")
    cells: list = [f"{v:.4f}" for v in reals]
    cells[100] = None
    path = write_csv(tmp_path / "r.csv", cells)
    domain = Domain.interval(0.0, 10.0, 16)
    expected = domain.histogram(dprange.io.read_column(path, "x"), drop_missing=True)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    np.testing.assert_array_equal(stream_histogram(path, "x", domain, drop_missing=True, batch_rows=700), expected)
    bad = write_csv(tmp_path / "bad.csv", [*cells[:1500], "abc"])
    with pytest.raises(DataError, match=r"'abc' on row 1502 of .*bad\.csv"):
        stream_histogram(bad, "x", domain, drop_missing=True, batch_rows=700)


# ----------------------------------------------------------------------------- bad values
@pytest.mark.parametrize(
    "last, error, message",
    [
        (None, DomainError, r"missing value \(empty/NaN/null\) on row 5002 of '.*a\.csv'"),
        ("50", DomainError, r"value 50 on row 5002 of '.*a\.csv' lies outside the public bounds \[-3, 49\]"),
        ("2.5", DomainError, r"value 2\.5 on row 5002 of '.*a\.csv' is not an integer"),
        ("1,5", DataError, r"not numeric \(e\.g\. '1' on row 5002|cannot read"),
        ("x7", DataError, r"not numeric \(e\.g\. 'x7' on row 5002 of '.*a\.csv'\)"),
    ],
)
def test_a_bad_value_in_the_last_batch_names_file_row_and_value(tmp_path, ints, last, error, message):
    path = write_csv(tmp_path / "a.csv", [*ints[:5000].tolist(), last])
    with pytest.raises(error, match=message) as info:
        stream_histogram(path, "x", Domain.integers(-3, 49), batch_rows=1000)
    assert "\n" not in str(info.value)


def test_parquet_bad_values_in_the_last_batch_name_the_row(tmp_path, ints):
    values = pa.array([*ints.tolist(), None], type=pa.int64())
    path = str(tmp_path / "n.parquet")
    pq.write_table(pa.table({"x": values}), path, row_group_size=1000)
    with pytest.raises(DomainError, match=r"missing value .* on row 5001 of '.*n\.parquet'"):
        stream_histogram(path, "x", Domain.integers(-3, 49), batch_rows=600)
    out = write_parquet(tmp_path / "o.parquet", np.append(ints, 99))
    with pytest.raises(DomainError, match=r"value 99 on row 5001 of '.*o\.parquet' lies outside"):
        stream_histogram(out, "x", Domain.integers(-3, 49), batch_rows=600)
    assert stream_histogram(out, "x", Domain.integers(-3, 49), clip=True)[-1] == np.sum(ints == 49) + 1


def test_redaction_hides_the_row_and_the_value(tmp_path, ints):
    path = write_csv(tmp_path / "a.csv", [*ints.tolist(), "77"])
    with redacted(), pytest.raises(DomainError) as info:
        stream_histogram(path, "x", Domain.integers(-3, 49))
    text = str(info.value)
    assert str(path) in text and "<redacted>" in text
    rest = text.replace(str(path), "")  # the temporary path's own digits (pytest-877) are not a leak
    assert "77" not in rest and "5002" not in rest


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda d: str(d / "none-*.csv"), DataError, "matches no files"),
        (lambda d: str(d / "absent.csv"), DataError, "does not exist"),
        (lambda d: str(d), DataError, "holds no .csv"),
        (lambda d: [], ParameterError, "empty"),
        (lambda d: 3, ParameterError, "path"),
    ],
)
def test_inputs_that_name_no_files(tmp_path, make, error, message):
    with pytest.raises(error, match=message):
        stream_histogram(make(tmp_path), "x", Domain.integers(0, 3))


def test_missing_and_repeated_columns_are_one_line_errors(tmp_path):
    path = write_csv(tmp_path / "c.csv", [1, 2])
    with pytest.raises(DataError, match="columns are: x, y"):
        stream_histogram(path, "z", Domain.integers(0, 3))
    twice = tmp_path / "t.csv"
    twice.write_text("x,x\n1,2\n")
    with pytest.raises(DataError, match="appears 2 times"):
        stream_histogram(str(twice), "x", Domain.integers(0, 3))
    parquet = write_parquet(tmp_path / "p.parquet", np.array([1, 2]))
    with pytest.raises(DataError, match="columns are: x, y"):
        stream_histogram(parquet, "z", Domain.integers(0, 3))


# ----------------------------------------------------------------------------- releases
def test_release_files_equals_release_of_the_values_with_the_same_seed(tmp_path, ints):
    path = write_parquet(tmp_path / "i.parquet", ints)
    domain = Domain.integers(-3, 49)
    streamed = dprange.release_files(path, "x", domain, 1.0, mechanism="hierarchical", rng=4, batch_rows=512)
    whole = dprange.release(ints, domain, 1.0, mechanism="hierarchical", rng=4)
    np.testing.assert_array_equal(streamed.histogram().value, whole.histogram().value)


def test_prefetch_keeps_order_raises_reader_errors_in_turn_and_stops_with_the_consumer():
    def reader():
        yield from range(5)
        raise DataError("bad file")

    seen = []
    with pytest.raises(DataError, match="bad file"):
        for item in prefetched(reader()):
            seen.append(item)
    assert seen == [0, 1, 2, 3, 4]
    endless = prefetched(itertools.count())
    assert [next(endless) for _ in range(3)] == [0, 1, 2]
    endless.close()  # returns only once the reader thread has stopped (it joins the thread)


@pytest.mark.parametrize("reader", ["blocks", "streaming", "io"])
@pytest.mark.parametrize("flaw", ["ragged row", "NUL line"])
def test_a_nul_or_a_ragged_row_refuses_the_file_whatever_comes_before(tmp_path, reader, flaw):
    """A row of another width or a NUL byte refuses the file, wherever it is: the local engine
    met a ragged row only in its own block (after an out-of-bounds value of an earlier block,
    it reported the value) and saw NULs only in the first 64 KiB (past them, a NUL line was a
    cell), while io's readers counted the ragged row; all three give the same error now."""
    lines = ["x,y"] + [f"{i % 5},{i}" for i in range(20_000)]
    lines[3] = "99,3"  # out of bounds, on row 4 of the first block
    lines[15_000] = "3" if flaw == "ragged row" else "\x00\x00"  # row 15001, past 64 KiB
    path = tmp_path / ("q.csv" if reader == "streaming" else "f.csv")
    text = "\n".join(lines) + "\n"
    path.write_text(text if reader != "streaming" else text.replace("99,3", '"99",3'))  # a quote: no blocks
    message = "row 15001 has 1 field" if flaw == "ragged row" else "contains NUL bytes"
    with pytest.raises(DataError, match=message) as info:
        if reader == "io":
            dprange.io.read_column(str(path), "x")
        else:
            stream_histogram(str(path), "x", Domain.integers(0, 4), batch_rows=1000, csv_block_bytes=1 << 14)
    assert "\n" not in str(info.value)


MEASURE = r"""
import json, sys
import pyarrow as pa
import dprange
from dprange.engines import stream_histogram
counts = stream_histogram(sys.argv[1], "x", dprange.Domain.interval(0.0, 1.0, 64), batch_rows=1 << 16)
print(json.dumps({"rows": int(counts.sum()), "arrow_peak": pa.default_memory_pool().max_memory()}))
"""


def test_arrow_memory_is_one_row_group_not_the_file(tmp_path):
    groups, group_rows = 24, 1 << 17
    values = np.random.default_rng(4).random(groups * group_rows)  # 24 MiB of float64, incompressible
    path = str(tmp_path / "many-groups.parquet")
    pq.write_table(pa.table({"x": values}), path, row_group_size=group_rows, compression="none")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    # -X faulthandler: should the process die by a signal, its Python stacks land in stderr
    out = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", MEASURE, path], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, f"exit {out.returncode}; stdout {out.stdout[-500:]!r}; stderr {out.stderr[-3000:]}"
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["rows"] == values.size
    group_bytes = group_rows * 8  # 1 MiB
    assert result["arrow_peak"] < 6 * group_bytes, result  # reading ahead through the file held ~24 MiB


# ----------------------------------------------------------------------------- categories
WORKCLASS = ["Private", "Self-emp", "State-gov", "Never-worked"]


def category_column(size=3000, seed=8):
    """Text cells with spaces, a quoted comma, integer-like text and missing markers."""
    rng = np.random.default_rng(seed)
    pool = np.array([*WORKCLASS, " Private", "Private ", '"Gov, local"', "7", "", "NA", "?"], dtype=object)
    return rng.choice(pool, size).tolist()


def in_memory(cells):
    """The cells as a CSV reader gives them (quotes removed), for the in-memory reference."""
    return [c.strip('"') for c in cells]


@pytest.mark.parametrize("batch_rows", [1, 97, 100_000])
@pytest.mark.parametrize("csv_block_bytes", [None, 4096])
def test_categorical_csv_streamed_equals_the_in_memory_histogram(tmp_path, batch_rows, csv_block_bytes):
    cells = category_column(400 if batch_rows == 1 else 3000)
    path = write_csv(tmp_path / "c.csv", cells)
    domain = Domain.categories([*WORKCLASS, "Gov, local", 7], other=True)
    expected = domain.histogram(in_memory(cells), drop_missing=True)
    assert expected[-1] > 0 and expected[5] > 0  # '?' goes to the other bin; 7 matches the cell "7"
    counts = stream_histogram(
        path, "x", domain, drop_missing=True, batch_rows=batch_rows, csv_block_bytes=csv_block_bytes
    )
    assert counts.tolist() == expected.tolist()


def test_categorical_csv_without_pyarrow_equals_with_it(tmp_path, monkeypatch):
    cells = category_column(500)
    path = write_csv(tmp_path / "c.csv", cells)
    domain = Domain.categories([*WORKCLASS, "Gov, local", "7"], other=True)
    expected = stream_histogram(path, "x", domain, drop_missing=True)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow fails: pandas' reader
    assert stream_histogram(path, "x", domain, drop_missing=True, batch_rows=77).tolist() == expected.tolist()


@pytest.mark.parametrize("dictionary", [False, True])
def test_categorical_parquet_streamed_equals_the_in_memory_histogram(tmp_path, dictionary):
    cells = [None if c in ("", "NA") else c for c in in_memory(category_column())]
    column = pa.array(cells).dictionary_encode() if dictionary else pa.array(cells)
    path = str(tmp_path / "c.parquet")
    pq.write_table(pa.table({"x": column}), path, row_group_size=700)
    domain = Domain.categories([*WORKCLASS, "Gov, local", "7"], other="rest")
    counts = stream_histogram(path, "x", domain, drop_missing=True, batch_rows=250)
    assert counts.tolist() == domain.histogram(cells, drop_missing=True).tolist()
    ints = str(tmp_path / "i.parquet")
    pq.write_table(pa.table({"x": [3, 7, None, 7]}), ints)
    assert stream_histogram(ints, "x", Domain.categories([7, 3]), drop_missing=True).tolist() == [2, 1]


def test_categorical_file_errors_name_the_row_and_value(tmp_path):
    path = write_csv(tmp_path / "c.csv", ["Private", "Private", "Dentist", "Private"])
    domain = Domain.categories(WORKCLASS)
    with pytest.raises(DomainError, match=r"value 'Dentist' on row 4 .* not among the 4 public categories.*other=True"):
        stream_histogram(path, "x", domain, batch_rows=2)
    path = write_csv(tmp_path / "m.csv", ["Private", "", "Private"])
    with pytest.raises(DomainError, match=r"missing value .* row 3.*drop_missing=True"):
        stream_histogram(path, "x", domain)
    with pytest.raises(ParameterError, match="clip does not apply to categories"):
        stream_histogram(path, "x", domain, clip=True)
    with redacted():
        with pytest.raises(DomainError) as exc:
            stream_histogram(write_csv(tmp_path / "d.csv", ["Dentist"]), "x", domain)
    assert "Dentist" not in str(exc.value)


def test_release_files_of_categories_equals_the_release_of_the_values(tmp_path):
    cells = category_column(800)
    path = write_csv(tmp_path / "c.csv", cells)
    domain = Domain.categories([*WORKCLASS, "Gov, local", "7"], other=True)
    options = {"mechanism": "flat", "rng": 3, "drop_missing": True}
    streamed = dprange.release_files(path, "x", domain, 1.0, **options)
    memory = dprange.release(in_memory(cells), domain, 1.0, **options)
    assert streamed.estimate.tolist() == memory.estimate.tolist()
    assert streamed.labels == [*WORKCLASS, "Gov, local", "7", "other"]

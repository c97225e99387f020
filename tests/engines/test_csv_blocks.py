"""The CSV block reader (dprange.engines.csv_blocks): files cut into byte blocks at newlines
and parsed on every core give the counts of Domain.histogram and the streaming reader's
messages, row numbers counted from the file's start, at every block size; files whose rows
may hold a newline (quotes, CR line ends) fall back to the streaming reader."""

from __future__ import annotations

import numpy as np
import pytest

import dprange
from dprange import DataError, Domain, DomainError, ParameterError
from dprange.engines import local
from dprange.engines.csv_blocks import (
    DEFAULT_BLOCK_BYTES,
    BlockFallback,
    arrow_owned_copy,
    default_block_bytes,
    parse_block,
    raw_blocks,
)
from dprange.engines.local import stream_histogram

pytest.importorskip("pyarrow")

BLOCKS = [1, 2, 3, 5, 8, 13, 64, 1000, 1 << 20]


def write(path, lines, *, end="\n", header="x,y", final=True) -> str:
    text = end.join([header, *lines]) + (end if final else "")
    path.write_bytes(text.encode())
    return str(path)


@pytest.fixture
def reals():
    return np.random.default_rng(11).uniform(0.0, 10.0, 600).round(3)


@pytest.fixture
def blocks_only(monkeypatch):
    """The streaming reader refused: a test passes only if the block reader did the work."""

    def refuse(*args, **kwargs):
        raise AssertionError("the streaming reader was used")

    monkeypatch.setattr(local, "_arrow_csv_batches", refuse)


@pytest.fixture
def streaming_calls(monkeypatch):
    """How many times the streaming reader was used."""
    calls = []
    real = local._arrow_csv_batches

    def spy(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(local, "_arrow_csv_batches", spy)
    return calls


# ----------------------------------------------------------------------------- raw blocks
@pytest.mark.parametrize("size", [1, 2, 4, 7, 16, 100])
def test_blocks_are_whole_lines_and_rejoin_to_the_data(tmp_path, size):
    lines = [f"{i * 7},{i}" for i in range(40)]
    path = write(tmp_path / "a.csv", lines, final=False)
    blocks = [bytes(b) for b in raw_blocks(path, size)]
    assert b"".join(blocks) == "\n".join(lines).encode()
    assert all(b.endswith(b"\n") for b in blocks[:-1]) and not blocks[-1].endswith(b"\n")
    longest = max(len(line) for line in lines) + 1
    assert all(len(b) <= max(size, 2 * longest) for b in blocks)  # the buffer grows only to fit a line


def test_quotes_and_lone_carriage_returns_ask_for_the_fallback(tmp_path):
    quoted = write(tmp_path / "q.csv", ["1,2", '3,"a\nb"'])
    with pytest.raises(BlockFallback):
        list(raw_blocks(quoted, 4))
    cr = write(tmp_path / "cr.csv", ["1,2", "3,4"], end="\r")
    with pytest.raises(BlockFallback):
        list(raw_blocks(cr, 1 << 20))
    crlf = write(tmp_path / "crlf.csv", ["1,2", "3,4"], end="\r\n")
    assert b"".join(bytes(b) for b in raw_blocks(crlf, 3)) == b"1,2\r\n3,4\r\n"


def test_default_block_bytes_follow_the_batch_rows_within_bounds():
    assert default_block_bytes(1) == 1 << 20
    assert default_block_bytes(1 << 20) == DEFAULT_BLOCK_BYTES == 1 << 24
    assert default_block_bytes(1 << 30) == 1 << 26
    with pytest.raises(ParameterError, match="csv_block_bytes must be an integer >= 1"):
        stream_histogram("x.csv", "x", Domain.integers(0, 1), csv_block_bytes=0)


# ----------------------------------------------------------------------------- equality
@pytest.mark.parametrize("size", BLOCKS)
def test_counts_equal_the_in_memory_histogram_at_every_block_size(tmp_path, reals, blocks_only, size):
    cells = [f"{v:.3f}" for v in reals]
    cells[17] = ""
    cells[300] = "NA"
    cells[599] = "11.5"  # outside: clipped
    path = write(tmp_path / "r.csv", [f"{c},{i}" for i, c in enumerate(cells)])
    domain = Domain.interval(0.0, 10.0, 32)
    expected = domain.histogram(dprange.io.read_column(path, "x"), clip=True, drop_missing=True)
    got = stream_histogram(path, "x", domain, clip=True, drop_missing=True, csv_block_bytes=size)
    np.testing.assert_array_equal(got, expected)
    assert got.sum() == 598


@pytest.mark.parametrize("size", [1, 6, 50, 1 << 20])
@pytest.mark.parametrize("end, final", [("\n", True), ("\n", False), ("\r\n", True), ("\r\n", False)])
def test_crlf_and_a_missing_final_newline_are_read_by_blocks(tmp_path, blocks_only, size, end, final):
    ints = np.random.default_rng(3).integers(0, 20, 300)
    path = write(tmp_path / "i.csv", [f"{v},{i}" for i, v in enumerate(ints)], end=end, final=final)
    domain = Domain.integers(0, 19)
    np.testing.assert_array_equal(stream_histogram(path, "x", domain, csv_block_bytes=size), domain.histogram(ints))


@pytest.mark.parametrize("text", ["x,y", "x,y\n", "x,y\r\n", "\ufeffx,y\n"])
def test_a_header_only_file_counts_nothing(tmp_path, blocks_only, text):
    path = tmp_path / "h.csv"
    path.write_bytes(text.encode())
    for size in (1, 4, 1 << 20):
        counts = stream_histogram(str(path), "x", Domain.integers(0, 3), csv_block_bytes=size)
        assert counts.tolist() == [0, 0, 0, 0]


# ----------------------------------------------------------------------------- messages
@pytest.mark.parametrize("size", [1, 7, 64, 1000])
@pytest.mark.parametrize(
    "bad, error, message",
    [
        ("", DomainError, r"missing value \(empty/NaN/null\) on row 402 of '.*b\.csv'"),
        ("99", DomainError, r"value 99 on row 402 of '.*b\.csv' lies outside the public bounds \[0, 19\]"),
        ("2.5", DomainError, r"value 2\.5 on row 402 of '.*b\.csv' is not an integer"),
        ("x7", DataError, r"not numeric \(e\.g\. 'x7' on row 402 of '.*b\.csv'\)"),
    ],
)
def test_a_bad_value_in_a_later_block_names_its_row(tmp_path, size, bad, error, message):
    cells = [str(v) for v in np.random.default_rng(8).integers(0, 20, 500)]
    cells[400] = bad  # row 402: header = row 1
    cells[450] = "-1"  # a later bad value is not the one named
    path = write(tmp_path / "b.csv", [f"{c},{i}" for i, c in enumerate(cells)])
    with pytest.raises(error, match=message) as info:
        stream_histogram(path, "x", Domain.integers(0, 19), csv_block_bytes=size)
    assert "\n" not in str(info.value)


def test_blank_lines_read_as_by_the_streaming_reader(tmp_path, monkeypatch):
    path = write(tmp_path / "e.csv", ["1,0", "2,1", "", "3,2", ""])
    domain = Domain.integers(0, 3)
    by_blocks = [stream_histogram(path, "x", domain, drop_missing=True, csv_block_bytes=s).tolist() for s in BLOCKS]
    with pytest.raises(DomainError, match=r"missing value .* on row 4 of") as first:
        stream_histogram(path, "x", domain, csv_block_bytes=3)

    def fallback(*args):
        raise BlockFallback

    monkeypatch.setattr(local, "raw_blocks", fallback)
    streamed = stream_histogram(path, "x", domain, drop_missing=True)
    assert by_blocks == [streamed.tolist()] * len(BLOCKS) == [[0, 1, 1, 1]] * len(BLOCKS)
    with pytest.raises(DomainError) as second:
        stream_histogram(path, "x", domain)
    assert str(first.value) == str(second.value)


# ----------------------------------------------------------------------------- fallback
@pytest.mark.parametrize("size", [1, 9, 1 << 20])
def test_quoted_fields_fall_back_to_the_streaming_reader_without_double_counting(tmp_path, streaming_calls, size):
    lines = [f"{i % 10},{i}" for i in range(200)]
    lines[150] = '"4","two\nlines"'  # the quote in a later block: counts of earlier blocks are dropped
    lines[170] = "12,x"
    path = write(tmp_path / "q.csv", lines)
    domain = Domain.integers(0, 9)
    expected = domain.histogram([*(i % 10 for i in range(200) if i not in (150, 170)), 4])
    with pytest.raises(DomainError, match=r"value 12 on row 172 of"):  # rows are records, as streamed
        stream_histogram(path, "x", domain, csv_block_bytes=size)
    got = stream_histogram(path, "x", domain, clip=True, csv_block_bytes=size)
    expected[9] += 1  # 12 clipped to 9
    np.testing.assert_array_equal(got, expected)
    assert streaming_calls


def test_lone_carriage_returns_fall_back(tmp_path, streaming_calls):
    path = write(tmp_path / "cr.csv", ["1,0", "2,1", "3,2"], end="\r")
    counts = stream_histogram(path, "x", Domain.integers(0, 3), csv_block_bytes=4)
    assert counts.tolist() == [0, 1, 1, 1] and streaming_calls


# ----------------------------------------------------------------------------- ownership
def test_blocks_reach_pyarrow_as_copies_it_owns_not_as_borrowed_python_memory(monkeypatch):
    """A buffer pyarrow borrows from Python is released under the GIL by whichever of its
    worker threads drops it last, and one doing so while the interpreter exits aborts the
    process after its work is done (arrow_owned_copy): no block may be lent to pyarrow."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    def lend(*args, **kwargs):
        raise AssertionError("a block was lent to pyarrow (pa.py_buffer)")

    monkeypatch.setattr(pa, "py_buffer", lend)
    buf = bytearray(b"x,y\n1.5,2\n-3,4\n")
    block = memoryview(buf)[4:]
    owned = arrow_owned_copy(block)
    start = np.frombuffer(buf, dtype=np.uint8).ctypes.data
    assert owned.to_pybytes() == b"1.5,2\n-3,4\n" and not start <= owned.address < start + len(buf)
    buf[4:7] = b"9.0"  # the reader reuses its buffer for the next block: the copy keeps its bytes
    assert owned.to_pybytes() == b"1.5,2\n-3,4\n"
    table = parse_block(
        block,
        pacsv.ReadOptions(column_names=["x", "y"]),
        pacsv.ParseOptions(),
        pacsv.ConvertOptions(include_columns=["x"], column_types={"x": pa.float64()}),
    )
    assert table.column(0).to_pylist() == [9.0, -3.0]


# ----------------------------------------------------------------------------- memory
MEASURE = r"""
import json, sys
import pyarrow as pa
import dprange
from dprange.engines.local import stream_histogram
counts = stream_histogram(sys.argv[1], "x", dprange.Domain.interval(0.0, 1.0, 64), csv_block_bytes=1 << 20)
print(json.dumps({"rows": int(counts.sum()), "arrow_peak": pa.default_memory_pool().max_memory()}))
"""


def test_arrow_memory_is_a_few_blocks_not_the_file(tmp_path):
    import json
    import os
    import subprocess
    import sys

    values = np.random.default_rng(4).random(1 << 20)
    path = tmp_path / "wide.csv"
    with open(path, "w") as fh:  # about 24 MiB of text: 24 blocks of 1 MiB
        fh.write("x,y\n")
        np.savetxt(fh, np.column_stack([values, values]), fmt="%.9f", delimiter=",")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    # -X faulthandler: should the process die by a signal, its Python stacks land in stderr
    out = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", MEASURE, str(path)], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, f"exit {out.returncode}; stdout {out.stdout[-500:]!r}; stderr {out.stderr[-3000:]}"
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["rows"] == values.size
    assert result["arrow_peak"] < 8 * (1 << 20), result  # the whole column alone is 8 MiB, the file 24 MiB

"""The local streaming engine: one column of CSV / Parquet files counted batch by batch.

Values become the int64 counts of a public :class:`~dprange.Domain` without ever holding the
whole column: each batch (``batch_rows`` rows) is read, bucketized with the domain's own rule
(:meth:`Domain.bucketize`) and added to the counts, so memory is bounded by the batch size
and the number of bins, whatever the size of the input.  Partial counts are sums, so they
merge (:func:`merge_counts`) like the local-DP aggregators do.

Inputs: a path, a list of paths, a folder (its ``.csv`` / ``.parquet`` / ``.pq`` files, in
name order) or a glob pattern (``"data/part-*.parquet"``), read as one column in order.
Parquet is read with ``pyarrow.parquet.ParquetFile.iter_batches``; CSV in byte blocks parsed
by pyarrow on every core (:mod:`.csv_blocks`), with pyarrow's streaming reader
(``pyarrow.csv.open_csv``) where a block could split a row (quotes, CR line ends) and for
the exact text path, or pandas chunks where pyarrow is missing.

The rules are those of :mod:`dprange.io` and :mod:`dprange.domain`: a CSV file with a NUL
byte anywhere is refused before its rows are read, a row with fewer or more fields than the
header is an error naming it, and a missing value (empty
cell, the usual markers, null, NaN), a value outside the public bounds, a non-integer on an
integer domain or a non-numeric cell stops the count at the first one, with a one-line
:class:`~dprange.errors.DomainError` / :class:`~dprange.errors.DataError` naming the file,
the row (CSV: the line number, header = line 1; Parquet: the 1-based row) and the value
(both hidden when redaction is on: :func:`dprange.errors.set_redaction`), unless ``clip`` /
``drop_missing`` say otherwise.  Nothing is released from a failed count.
"""

from __future__ import annotations

import csv
import glob
import os
import queue
import threading
from collections.abc import Iterable, Iterator

import numpy as np

from ..columns import EXACT_FLOAT_INTEGER, MISSING_CODE, column_array, value_at
from ..domain import CATEGORY_CLIP_MESSAGE, Domain
from ..errors import DataError, DomainError, DPRangeError, ParameterError, excerpt, private
from ..io import (
    _FLOAT,
    _INTEGER,
    CATEGORIES_HINT,
    MISSING_MARKERS,
    PARQUET_SUFFIXES,
    _check_csv_head,
    _column_missing,
    _detail,
    _parse_cells,
    _read_head,
    check_no_nul,
    check_row_widths,
    file_column_values,
    first_ragged_row,
    nul_bytes_error,
    open_parquet,
    read_column,
    read_text_column,
    row_width,
    row_width_error,
    trailing_comma,
)
from ..progress import progress_bar
from .counting import batch_histogram, edge_table
from .csv_blocks import BlockFallback, BlockHasNul, default_block_bytes, parse_block, raw_blocks

#: Rows per batch by default: 2^20 rows are 8 MiB of float64.
DEFAULT_BATCH_ROWS = 1 << 20


#: Batches read ahead (in a background thread) while the current one is bucketized.
PREFETCH_BATCHES = 2


#: File suffixes a folder input contributes.
CSV_SUFFIXES = (".csv",)


_GLOB_CHARS = frozenset("*?[")


# ----------------------------------------------------------------------------- inputs
def expand_inputs(source) -> list[str]:
    """The files of an input: a path, a folder (its CSV / Parquet files in name order), a
    glob pattern, or a list of any of these; DataError when nothing is found."""
    if isinstance(source, (str, os.PathLike)):
        items = [source]
    elif isinstance(source, Iterable) and not isinstance(source, (bytes, bytearray)):
        items = list(source)
    else:
        raise ParameterError(f"the input must be a path, a folder, a glob pattern or a list of paths, got {source!r}")
    if not items:
        raise ParameterError("the list of input files is empty; give at least one path")
    files: list[str] = []
    for item in items:
        files.extend(_expand_one(item))
    return files


def _expand_one(item) -> list[str]:
    if not isinstance(item, (str, os.PathLike)):
        raise ParameterError(f"an input must be a path, a folder or a glob pattern, got {item!r}")
    path = os.fsdecode(os.fspath(item))
    if os.path.isdir(path):
        found = sorted(
            os.path.join(path, name)
            for name in os.listdir(path)
            if name.lower().endswith(CSV_SUFFIXES + PARQUET_SUFFIXES) and os.path.isfile(os.path.join(path, name))
        )
        if not found:
            raise DataError(f"the folder {path!r} holds no .csv, .parquet or .pq files")
        return found
    if os.path.exists(path):
        return [path]
    if _GLOB_CHARS & set(path):
        found = sorted(p for p in glob.glob(path) if os.path.isfile(p))
        if not found:
            raise DataError(f"the pattern {path!r} matches no files")
        return found
    raise DataError(f"input file {path!r} does not exist")


# ----------------------------------------------------------------------------- counting
def stream_histogram(
    source,
    column: str,
    domain: Domain,
    *,
    clip: bool = False,
    drop_missing: bool = False,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    csv_block_bytes: int | None = None,
) -> np.ndarray:
    """Exact (private!) int64 counts of ``column`` over every file of ``source`` on
    ``domain``, read in batches of ``batch_rows`` rows; equal to
    ``domain.histogram(values, clip=clip, drop_missing=drop_missing)`` of the whole column.
    ``csv_block_bytes``: bytes per CSV block (:mod:`dprange.engines.csv_blocks`; default
    from ``batch_rows``)."""
    if not isinstance(domain, Domain):
        raise ParameterError("domain must be a dprange.Domain (Domain.integers or Domain.interval)")
    if not isinstance(column, str):
        raise ParameterError(f"the column name must be a string, got {column!r}")
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise ParameterError(f"batch_rows must be an integer >= 1, got {batch_rows!r}")
    if csv_block_bytes is not None and (
        isinstance(csv_block_bytes, bool) or not isinstance(csv_block_bytes, int) or csv_block_bytes < 1
    ):
        raise ParameterError(f"csv_block_bytes must be an integer >= 1, got {csv_block_bytes!r}")
    files = expand_inputs(source)
    counts = np.zeros(domain.size, dtype=np.int64)
    for path in files:
        counts += file_counts(
            domain, path, column, batch_rows, clip=clip, drop_missing=drop_missing, block_bytes=csv_block_bytes
        )
    return counts


class _TypedReadFailed(Exception):
    """A CSV cell that the typed reader could not convert: read the file again as text."""


def typed_column(domain: Domain):
    """The type pyarrow's CSV reader may convert the column to directly, exactly as dprange.io
    parses it: int64 on integer domains, float64 on intervals within +-2^53 (a value beyond
    lies outside the bounds either way)."""
    import pyarrow as pa  # noqa: PLC0415

    if domain.categorical:  # the cells' text, matched to the categories by one rule
        return pa.string()
    if domain.kind == "integers":
        return pa.int64()
    if max(abs(domain.lo), abs(domain.hi)) < EXACT_FLOAT_INTEGER:
        return pa.float64()
    return None


def file_counts(
    domain: Domain,
    path: str,
    column: str,
    batch_rows: int,
    *,
    clip: bool,
    drop_missing: bool,
    block_bytes: int | None = None,
):
    """The counts of one file.  CSV with pyarrow is first read with the column converted by
    the reader itself (fast): in byte blocks parsed on every core (:mod:`.csv_blocks`), or
    by the streaming reader where a block may split a row (quotes, CR line ends); a cell it
    cannot convert (a float on an integer domain, spaces, text) sends the whole file to the
    exact text path, which decides (and names bad cells).  A CSV file with a NUL byte anywhere
    (:func:`dprange.io.check_no_nul`; the block reader sees every byte, other paths read the
    file once more) or a row of another width than its header is refused whatever else is
    wrong in it (the parser meets that row only in its own block: :func:`_ragged_row_first`)."""
    if path.lower().endswith(PARQUET_SUFFIXES):
        return _count(domain, file_batches(path, column, batch_rows, text=domain.categorical), clip, drop_missing)
    try:
        counts, scanned = _csv_counts(
            domain, path, column, batch_rows, clip=clip, drop_missing=drop_missing, blocks=block_bytes
        )
    except DPRangeError:
        check_no_nul(path)
        _ragged_row_first(path, column)
        raise
    if not scanned:
        check_no_nul(path)
    return counts


def _csv_counts(domain: Domain, path: str, column: str, batch_rows: int, *, clip, drop_missing, blocks):
    """(counts, whether every byte was checked for NUL) of one CSV file (see :func:`file_counts`)."""
    try:
        typed = typed_column(domain)
    except ImportError:
        typed = None
    text = domain.categorical
    if typed is not None:
        blocks = default_block_bytes(batch_rows) if blocks is None else blocks
        try:
            try:
                batches = file_batches(path, column, batch_rows, typed=typed, blocks=blocks, text=text)
                return _count(domain, batches, clip, drop_missing), True
            except BlockHasNul:
                raise nul_bytes_error(path) from None
            except BlockFallback:
                batches = file_batches(path, column, batch_rows, typed=typed, text=text)
                return _count(domain, batches, clip, drop_missing), False
        except _TypedReadFailed:
            pass
    return _count(domain, file_batches(path, column, batch_rows, text=text), clip, drop_missing), False


def _ragged_row_first(path: str, column: str) -> None:
    """Raise the error for the first row of ``path`` of another width than its header, if
    there is one (a count that failed checks the whole file: a bad value in an earlier block
    must not hide it; io's readers check the widths first)."""
    try:
        names = _csv_header(path)
    except DPRangeError:
        return
    if column in names:
        check_row_widths(path, len(names), stream=True)


def _count(
    domain: Domain, batches: Iterator[Batch] | Iterator[list[Batch]], clip: bool, drop_missing: bool
) -> np.ndarray:
    counts = np.zeros(domain.size, dtype=np.int64)
    table = edge_table(domain)
    with progress_bar("reading", unit="rows", unit_scale=True) as bar:
        for item in prefetched(batches):
            for batch in item if isinstance(item, list) else (item,):  # a CSV block: its parsed chunks
                counts += batch_counts(domain, batch, clip=clip, drop_missing=drop_missing, table=table)
                bar.update(len(batch.values))
    return counts


_DONE = object()


def prefetched(items: Iterator, depth: int = PREFETCH_BATCHES) -> Iterator:
    """``items`` read by a background thread at most ``depth`` ahead, so that reading the
    next batch (pyarrow decodes without the GIL) overlaps bucketizing this one; an error of
    the reader is raised here, in order, and stopping early stops the reader."""
    slots: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(entry) -> bool:
        """Put ``entry`` in a slot unless the consumer has stopped; whether it went in."""
        while not stop.is_set():
            try:
                slots.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for item in items:
                if not offer((item, None)):
                    return
            offer((_DONE, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            offer((_DONE, exc))

    reader = threading.Thread(target=read, name="dprange-prefetch", daemon=True)
    reader.start()
    try:
        while True:
            item, error = slots.get()
            if error is not None:
                raise error
            if item is _DONE:
                return
            yield item
    finally:
        stop.set()
        reader.join()


def merge_counts(parts: Iterable[np.ndarray]) -> np.ndarray:
    """The counts of several partial histograms of one domain (their sum, int64)."""
    arrays = [np.asarray(p, dtype=np.int64) for p in parts]
    if not arrays:
        raise ParameterError("no partial counts to merge")
    if any(a.shape != arrays[0].shape for a in arrays):
        raise ParameterError("partial counts of different domains cannot be merged (their lengths differ)")
    return np.asarray(np.sum(arrays, axis=0, dtype=np.int64))


class Batch:
    """One batch of a column: ``values`` (as :func:`dprange.domain.column_array` returns
    them), the file, and how to name a row in a message (``row_of(i)``)."""

    def __init__(self, values, path: str, first_row: int, row_word: str):
        self.values = values
        self.path = path
        self.first_row = first_row
        self.row_word = row_word

    def where(self, index: int) -> str:
        return f"{self.row_word} {private(self.first_row + int(index))} of {self.path!r}"


def batch_counts(domain: Domain, batch: Batch, *, clip: bool, drop_missing: bool, table=None) -> np.ndarray:
    """The counts of one batch (:func:`~dprange.engines.counting.batch_histogram`, ``table``
    its :func:`~dprange.engines.counting.edge_table`); the first bad value raises a message
    naming its row.  On a categorical domain the batch holds the raw cells."""
    if domain.categorical:
        return _category_counts(domain, batch, clip, drop_missing)
    try:
        return batch_histogram(domain, batch.values, clip=clip, drop_missing=drop_missing, table=table)
    except DomainError as exc:
        raise _first_bad(domain, batch, clip, drop_missing, exc) from None


def _category_counts(domain: Domain, batch: Batch, clip: bool, drop_missing: bool) -> np.ndarray:
    """The counts of one batch of raw cells on a categorical domain; the first value outside
    the list (or missing, unless dropped) raises a message naming its row and value."""
    if clip:
        raise ParameterError(CATEGORY_CLIP_MESSAGE)
    codes = domain.codes(batch.values)
    bad = domain.first_bad_code(codes, drop_missing)
    if bad is not None:
        raise _category_error(domain, batch, codes, bad)
    kept = codes[codes >= 0] if drop_missing else codes
    return np.bincount(kept, minlength=domain.bins).astype(np.int64)


def _category_error(domain: Domain, batch: Batch, codes: np.ndarray, i: int) -> DomainError:
    if codes[i] == MISSING_CODE:
        return DomainError(
            f"missing value (empty/NA/null) on {batch.where(i)}; clean it or pass drop_missing=True to drop such rows"
        )
    return DomainError(
        f"value {private(value_at(batch.values, i))} on {batch.where(i)} is not among the {len(domain._lookup)} "
        "public categories; add it to the list or declare other=True (--other) to count such values in an 'other' bin"
    )


def _first_bad(domain: Domain, batch: Batch, clip: bool, drop_missing: bool, exc: DomainError) -> DomainError:
    """The error naming the first value of ``batch`` that the domain refuses."""
    arr = batch.values
    mask = np.ma.getmaskarray(arr) if isinstance(arr, np.ma.MaskedArray) else None
    data = np.ma.getdata(arr) if mask is not None else arr
    missing = mask if mask is not None else (np.isnan(data) if data.dtype.kind == "f" else np.zeros(data.size, bool))
    present = ~missing
    bad = np.zeros(data.size, dtype=bool)
    if not drop_missing:
        bad |= missing
    if not clip:
        with np.errstate(invalid="ignore"):
            bad |= present & ((data < domain.lo) | (data > domain.hi))
    if domain.kind == "integers" and data.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            bad |= present & np.isfinite(data) & (data != np.floor(data))
    if not bad.any():
        return DomainError(f"{batch.path!r}: {exc}")
    i = int(np.argmax(bad))
    if missing[i]:
        return DomainError(
            f"missing value (empty/NaN/null) on {batch.where(i)}; clean it or pass drop_missing=True to drop such rows"
        )
    value = data[i].item()
    if domain.kind == "integers" and isinstance(value, float) and value != np.floor(value) and np.isfinite(value):
        return DomainError(
            f"value {private(value)} on {batch.where(i)} is not an integer; use Domain.interval for real values"
        )
    return DomainError(
        f"value {private(value)} on {batch.where(i)} lies outside the public bounds [{domain.lo}, {domain.hi}]; "
        "widen the bounds or pass clip=True to clip such values"
    )


# ----------------------------------------------------------------------------- reading
def file_batches(
    path: str,
    column: str,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    *,
    typed=None,
    blocks: int | None = None,
    text: bool = False,
) -> Iterator[Batch] | Iterator[list[Batch]]:
    """The batches of ``column`` in one CSV or Parquet file (chosen by suffix, as io does).
    ``typed``: a pyarrow type the CSV reader converts the column to (see :func:`file_counts`);
    ``blocks`` (with ``typed``): read the CSV in blocks of that many bytes, parsed on every
    core, one list of Batches per block (:class:`~.csv_blocks.BlockFallback` where that is
    not exact); ``text``: the raw cells (pyarrow arrays, or an object array without pyarrow),
    not numbers (for categorical domains)."""
    head = _read_head(path)
    if path.lower().endswith(PARQUET_SUFFIXES):
        if not head.startswith(b"PAR1"):
            raise DataError(f"{path!r} is not a Parquet file (it does not start with PAR1); if it is CSV, name it .csv")
        return _parquet_batches(path, column, batch_rows, text)
    _check_csv_head(path, head)
    if not head.strip():
        raise DataError(f"{path!r} is empty; a CSV file needs a header line naming its columns")
    try:
        import pyarrow  # noqa: F401, PLC0415 - the fast reader when installed
    except ImportError:
        return _pandas_csv_batches(path, column, batch_rows, text)
    if typed is not None and blocks is not None:
        return _block_csv_batches(path, column, blocks, typed, text)
    return _arrow_csv_batches(path, column, batch_rows, typed, text)


def _parquet_batches(path: str, column: str, batch_rows: int, text: bool = False) -> Iterator[Batch]:
    handle = open_parquet(path, column)
    row = 1
    try:
        # one row group at a time: iter_batches over the whole file reads ahead through every
        # row group, so its peak memory grows with the file (docs/engines.md)
        for group in range(handle.num_row_groups):
            for record_batch in handle.iter_batches(batch_size=batch_rows, columns=[column], row_groups=[group]):
                values = record_batch.column(0) if text else plain_values(record_batch.column(0))
                if values is None:
                    values = file_column_values(record_batch.column(0), path, column)
                yield Batch(values, path, row, "row")
                row += record_batch.num_rows
    except (DataError, DomainError):
        raise
    except Exception as exc:  # noqa: BLE001
        raise DataError(f"cannot read column {excerpt(repr(column))} of {path!r}{_detail(exc)}") from None


def plain_values(array):
    """The numpy view of a pyarrow float64 / int64 array without nulls (no copy), or None:
    then :func:`dprange.io.file_column_values` converts it."""
    import pyarrow as pa  # noqa: PLC0415

    if array.null_count == 0 and (pa.types.is_float64(array.type) or pa.types.is_int64(array.type)):
        return array.to_numpy(zero_copy_only=True)
    return None


def _csv_header(path: str) -> list[str]:
    """The header's names (stripped), read with the standard library (one line)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            names = next(csv.reader(fh, skipinitialspace=True), None)
    except UnicodeDecodeError:
        raise DataError(f"{path!r} is not UTF-8 text (Latin-1 or another encoding?); save it as UTF-8 CSV") from None
    except csv.Error as exc:
        raise DataError(f"cannot read {path!r} as CSV{_detail(exc)}") from None
    if not names:
        raise DataError(f"{path!r} is empty; a CSV file needs a header line naming its columns")
    return [n.strip() for n in names]


def _checked_header(path: str, column: str) -> list[str]:
    names = _csv_header(path)
    if column not in names:
        raise _column_missing(path, column, names)
    if names.count(column) > 1:
        raise DataError(
            f"column {excerpt(repr(column))} appears {names.count(column)} times in the header of "
            f"{path!r}; rename the columns so that each name is unique"
        )
    return names


def _csv_names(path: str, column: str) -> list[str]:
    """The header's names, plus a placeholder where the rows end with a trailing comma."""
    names = _checked_header(path, column)
    if trailing_comma(path, len(names)):
        names = [*names, "\x00trailing"]
    return names


def _csv_options(column: str, typed):
    """The parse and convert options shared by the streaming and the block readers."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.csv as pacsv  # noqa: PLC0415

    parse = pacsv.ParseOptions(ignore_empty_lines=False)
    convert = pacsv.ConvertOptions(
        include_columns=[column],
        column_types={column: pa.string() if typed is None else typed},
        strings_can_be_null=True,
        null_values=sorted(MISSING_MARKERS),
        quoted_strings_can_be_null=True,
    )
    return parse, convert


def _block_csv_batches(path: str, column: str, block_bytes: int, typed, text: bool = False) -> Iterator[list[Batch]]:
    """The typed column read in byte blocks parsed on every core: one list of Batches (the
    parsed chunks, no copy) per block, so that the next block is parsed while this one is
    counted; rows counted per block from the file's start (header = row 1)."""
    import pyarrow.csv as pacsv  # noqa: PLC0415

    names = _csv_names(path, column)
    read = pacsv.ReadOptions(column_names=names, use_threads=True)
    parse, convert = _csv_options(column, typed)
    row = 2
    for block in raw_blocks(path, block_bytes):
        try:
            cells = parse_block(block, read, parse, convert).column(0)
        except Exception:  # noqa: BLE001 - pyarrow's parse errors: the exact text path decides
            raise _TypedReadFailed() from None
        del block  # the reader's buffer is reused for the next block
        batches = []
        for chunk in cells.chunks:
            values = chunk if text else plain_values(chunk)
            if values is None:
                values = file_column_values(chunk, path, column)
            batches.append(Batch(values, path, row, "row"))
            row += len(chunk)
        yield batches


def _arrow_csv_batches(path: str, column: str, batch_rows: int, typed=None, text: bool = False) -> Iterator[Batch]:
    import pyarrow.csv as pacsv  # noqa: PLC0415

    names = _csv_names(path, column)
    # about 16 bytes a row: blocks of the batch's size in rows
    read = pacsv.ReadOptions(column_names=names, skip_rows=1, block_size=max(1 << 16, 16 * batch_rows))
    parse, convert = _csv_options(column, None if text else typed)
    try:
        reader = pacsv.open_csv(path, read_options=read, parse_options=parse, convert_options=convert)
    except Exception as exc:  # noqa: BLE001 - pyarrow's parse errors
        raise (_TypedReadFailed() if typed is not None else _csv_error(path, exc)) from None
    row = 2
    while True:
        try:
            record_batch = reader.read_next_batch()
        except StopIteration:
            return
        except Exception as exc:  # noqa: BLE001
            raise (_TypedReadFailed() if typed is not None else _csv_error(path, exc)) from None
        cells = record_batch.column(0)
        values = cells if text else (plain_values(cells) if typed is not None else None)
        if values is None:
            values = (
                file_column_values(cells, path, column) if typed is not None else _arrow_cells(cells, path, column, row)
            )
        yield Batch(values, path, row, "row")
        row += record_batch.num_rows


def _csv_error(path: str, exc: Exception) -> DataError:
    if isinstance(exc, UnicodeDecodeError) or "UTF8" in str(exc) or "UTF-8" in str(exc):
        return DataError(f"{path!r} is not UTF-8 text (Latin-1 or another encoding?); save it as UTF-8 CSV")
    if "Expected" in str(exc) and "columns, got" in str(exc):  # pyarrow met a row of another width
        width = len(_csv_header(path))
        found = first_ragged_row(path, width)  # its row, by the rule of dprange.io's readers
        if found is not None:
            return row_width_error(path, found[0], found[1], width, row_width(path, width))
    return DataError(f"cannot read {path!r} as CSV{_detail(exc)}")


_MISSING_LIST = sorted(MISSING_MARKERS)


def _arrow_cells(cells, path: str, column: str, first_row: int):
    """CSV cells (a pyarrow string array, nulls = missing markers) as io parses them: int64
    when every present cell is an integer, else float64; the first non-numeric cell is an
    error naming its row."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    quick = _quick_cast(cells)
    if quick is not None:
        return quick
    text = pc.utf8_trim_whitespace(cells)
    missing = pc.or_kleene(pc.is_null(text), pc.is_in(text, value_set=pa.array(_MISSING_LIST)))
    missing_np = np.asarray(missing.to_numpy(zero_copy_only=False), dtype=bool)
    is_int = pc.fill_null(pc.match_substring_regex(text, f"^(?:{_INTEGER.pattern})$"), False)
    is_int_np = np.asarray(is_int.to_numpy(zero_copy_only=False), dtype=bool)
    present = ~missing_np
    if np.all(is_int_np | missing_np):
        unsigned = pc.replace_substring_regex(pc.if_else(missing, pa.scalar("0"), text), "^\\+", "")
        try:
            ints = np.asarray(pc.cast(unsigned, pa.int64()).to_numpy(zero_copy_only=False))
        except pa.ArrowInvalid:  # beyond int64: saturate, as io does (outside every domain)
            ints = np.array(
                [
                    0 if m else max(-(2**63 - 1), min(2**63 - 1, int(v)))
                    for v, m in zip(unsigned.to_pylist(), missing_np)
                ],
                dtype=np.int64,
            )
        return column_array(np.ma.MaskedArray(ints, mask=missing_np))
    is_float = pc.fill_null(pc.match_substring_regex(text, f"^(?:{_FLOAT.pattern})$", ignore_case=True), False)
    numeric = np.asarray(is_float.to_numpy(zero_copy_only=False), dtype=bool) | is_int_np
    bad = present & ~numeric
    if bad.any():
        i = int(np.argmax(bad))
        raise DataError(
            f"column {excerpt(repr(column))} is not numeric (e.g. {private(text[i].as_py())} on row "
            f"{private(first_row + i)} of {path!r}){CATEGORIES_HINT}"
        )
    floats = pc.cast(pc.if_else(missing, pa.scalar("nan"), text), pa.float64())
    return np.asarray(floats.to_numpy(zero_copy_only=False), dtype=float)


def _quick_cast(cells):
    """The cells cast straight to int64 (then float64) when every present cell is a plain
    number (the common case); None when any is not (the exact path decides)."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    missing = np.asarray(cells.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    for kind in (pa.int64(), pa.float64()):
        try:
            cast = pc.cast(cells, kind)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        if kind == pa.int64():
            ints = np.asarray(cast.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
            return column_array(np.ma.MaskedArray(ints, mask=missing)) if missing.any() else ints
        floats = np.asarray(cast.fill_null(np.nan).to_numpy(zero_copy_only=False), dtype=float)
        if np.any(np.abs(floats) >= EXACT_FLOAT_INTEGER):  # "+2^53 + 1" must stay an exact integer
            return None
        return floats
    return None


def _pandas_csv_batches(path: str, column: str, batch_rows: int, text: bool = False) -> Iterator[Batch]:
    """The fallback without pyarrow: pandas chunks (or the standard library without pandas);
    ``text``: the raw cells (an object array)."""
    names = _checked_header(path, column)
    check_row_widths(path, len(names))  # pandas pads short rows and drops extra fields
    try:
        import pandas as pd  # noqa: PLC0415
    except ImportError:  # neither pyarrow nor pandas: io's reader, whole
        yield Batch(read_text_column(path, column) if text else read_column(path, column), path, 2, "row")
        return
    options = {"skipinitialspace": True, "encoding": "utf-8-sig", "index_col": False, "skip_blank_lines": False}
    row = 2
    try:
        chunks = pd.read_csv(path, usecols=[column], dtype=str, keep_default_na=False, chunksize=batch_rows, **options)
        for frame in chunks:
            cells = ["" if v is None else str(v) for v in frame[column].tolist()]
            if text:
                yield Batch(np.asarray(cells, dtype=object), path, row, "row")
                row += len(cells)
                continue
            try:
                values = _parse_cells(column, cells)
            except DataError:
                values = None
            if values is None:
                stripped = [c.strip() for c in cells]
                i = next(
                    k
                    for k, c in enumerate(stripped)
                    if c not in MISSING_MARKERS and not (_INTEGER.fullmatch(c) or _FLOAT.fullmatch(c))
                )
                raise DataError(
                    f"column {excerpt(repr(column))} is not numeric (e.g. {private(stripped[i])} on row "
                    f"{private(row + i)} of {path!r}){CATEGORIES_HINT}"
                )
            yield Batch(values, path, row, "row")
            row += len(cells)
    except UnicodeDecodeError:
        raise DataError(f"{path!r} is not UTF-8 text (Latin-1 or another encoding?); save it as UTF-8 CSV") from None
    except DPRangeError:
        raise
    except (pd.errors.ParserError, ValueError) as exc:
        raise DataError(f"cannot read {path!r} as CSV{_detail(exc)}") from None

"""Reading one numeric column of a CSV or Parquet file, and NumPy files, with clear errors.

CSV files must be UTF-8 text (a UTF-8 byte-order mark is accepted).  Files that are not, a
Parquet file named .csv, a compressed or binary file, UTF-16 text, a NUL byte anywhere in the
file, a boolean column, all give a one-line :class:`~dprange.errors.DataError` saying what the
file is and what to do.  CSV uses pandas when installed and the standard library otherwise,
with the same rules: the header names the columns, every row has one field per column (a
trailing comma on every row is harmless; an empty line is a row of missing values; a row with
fewer or more fields is an error naming it), the usual missing-value markers (empty, NA, NaN,
null, None...) are missing, and integer columns stay int64 (exact beyond 2^53).  The local
engine (:mod:`dprange.engines.local`) reads CSV by the same rules.  Parquet needs pyarrow;
Decimal columns are accepted (integers exactly, others as float64).

Messages quote file contents only as short printable excerpts, and private quantities (raw
values, row numbers) only when redaction is off (:func:`dprange.errors.set_redaction`).
"""

from __future__ import annotations

import csv
import io
import os
import re
import zipfile

import numpy as np

from .columns import MISSING_MARKERS, column_array
from .errors import DataError, ParameterError, excerpt, private, redaction_enabled

PARQUET_SUFFIXES = (".parquet", ".pq")


_SNIFF_BYTES = 1 << 16


_INTEGER = re.compile(r"[+-]?\d+")


_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|inf|infinity)", re.IGNORECASE)


_BOOLEANS = frozenset({"true", "false"})


_NPY_MAGIC = b"\x93NUMPY"


_ZIP_MAGIC = b"PK\x03\x04"


def read_column(path, column: str):
    """The values of ``column`` in the CSV or Parquet file ``path``.

    Returns int64 for integer columns without missing values, float64 (NaN = missing)
    otherwise (integer columns with missing values beyond 2^53 come as a masked int64
    array); every form is accepted by :meth:`dprange.Domain.bucketize`.  Parquet needs
    pyarrow (``pip install dprange[io]``); CSV uses pandas when installed and the standard
    library otherwise.
    """
    path = _check_path(path)
    if not isinstance(column, str):
        raise ParameterError(f"the column name must be a string, got {column!r}")
    if _is_parquet(path):
        return _read_parquet(path, column)
    check_no_nul(path)
    return _read_csv(path, column)


def column_names(path) -> list[str]:
    """The column names of the CSV or Parquet file ``path`` (its header or schema), checked as
    :func:`read_column` checks the file."""
    path = _check_path(path)
    if _is_parquet(path):
        try:
            return list(_parquet_module().read_schema(path).names)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for corrupt files
            raise DataError(f"cannot read {path!r} as Parquet{_detail(exc)}") from None
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            return _csv_header(path, csv.reader(fh, skipinitialspace=True))
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    except csv.Error as exc:
        raise DataError(f"cannot read {path!r} as CSV{_detail(exc)}") from None


def _is_parquet(path: str) -> bool:
    """Whether ``path`` is read as Parquet (by its suffix, checked to start as Parquet does),
    else as CSV (its first bytes checked to be UTF-8 text)."""
    head = _read_head(path)
    if path.lower().endswith(PARQUET_SUFFIXES):
        if not head.startswith(b"PAR1"):
            raise DataError(f"{path!r} is not a Parquet file (it does not start with PAR1); if it is CSV, name it .csv")
        return True
    _check_csv_head(path, head)
    return False


def _check_path(path) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise ParameterError(f"the input path must be a string or path, got {path!r}")
    path = os.fspath(path)
    if not isinstance(path, str):
        path = os.fsdecode(path)
    if not os.path.exists(path):
        raise DataError(f"input file {path!r} does not exist")
    if os.path.isdir(path):
        raise DataError(f"input {path!r} is a folder, not a file")
    return path


def _read_head(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(_SNIFF_BYTES)
    except OSError as exc:
        raise DataError(f"cannot open {path!r}: {excerpt(exc.strerror or exc, 80)}") from None


def _check_csv_head(path: str, head: bytes) -> None:
    """Refuse what is recognisably not UTF-8 CSV text, from the first bytes."""
    if head.startswith(b"PAR1"):
        raise DataError(f"{path!r} is a Parquet file, not CSV; name it .parquet (reading it needs pyarrow)")
    if head.startswith(_ZIP_MAGIC):
        raise DataError(f"{path!r} is a zip archive (an Excel or compressed file?), not CSV; export it as UTF-8 CSV")
    if head.startswith(b"\x1f\x8b"):
        raise DataError(f"{path!r} is gzip-compressed, not CSV text; decompress it first")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DataError(f"{path!r} is UTF-16 (or UTF-32) text; save it as UTF-8 CSV")
    if head.startswith(_NPY_MAGIC):
        raise DataError(f"{path!r} is a NumPy .npy file, not CSV")
    if b"\x00" in head:
        raise nul_bytes_error(path)


def nul_bytes_error(path: str) -> DataError:
    """The error for a CSV file holding a NUL byte (every engine gives this one)."""
    return DataError(
        f"{path!r} contains NUL bytes: it is binary or UTF-16 without a byte-order mark, not "
        "UTF-8 CSV; save it as UTF-8 CSV"
    )


def check_no_nul(path: str, block_bytes: int = 1 << 24) -> None:
    """Refuse a CSV file with a NUL byte anywhere, before any of its rows is read (the first
    bytes are sniffed by :func:`_check_csv_head`; this reads the whole file once, a small
    fraction of a count: docs/engines.md).  A NUL is not text, and readers differ on it
    (Spark's CSV reader skips a line of NULs as blank, where a row reader would refuse the file
    or read the NULs as a cell); one rule for the whole file gives every engine the same answer."""
    buffer = bytearray(block_bytes)
    view = memoryview(buffer)
    try:
        with open(path, "rb") as fh:
            while got := fh.readinto(view):
                if buffer.find(b"\x00", 0, got) != -1:
                    raise nul_bytes_error(path)
    except OSError as exc:
        raise DataError(f"cannot open {path!r}: {excerpt(exc.strerror or exc, 80)}") from None


def _detail(exc: Exception) -> str:
    """A library's error text as ": short printable excerpt", or nothing under redaction (it
    may quote line numbers or cells)."""
    return " (details redacted); check that it is well-formed" if redaction_enabled() else f": {excerpt(exc, 120)}"


def _not_utf8(path: str) -> DataError:
    return DataError(f"{path!r} is not UTF-8 text (Latin-1 or another encoding?); save it as UTF-8 CSV")


def _column_missing(path: str, column: str, names) -> DataError:
    shown = ", ".join(excerpt(n, 40) for n in list(names)[:30])
    more = f" (and {len(names) - 30} more)" if len(names) > 30 else ""
    return DataError(f"column {excerpt(repr(column))} not found in {path!r}; columns are: {shown}{more}")


def _boolean_column(column: str) -> DataError:
    return DataError(f"column {excerpt(repr(column))} is boolean (True/False), not numeric; encode it as numbers")


#: What a message about a non-numeric column adds: how to release a column of categories.
CATEGORIES_HINT = "; a column of categories needs a categorical domain: their public list"


def _non_numeric(column: str, value, row: int) -> DataError:
    return DataError(
        f"column {excerpt(repr(column))} is not numeric (e.g. {private(value)} on row {private(row)}){CATEGORIES_HINT}"
    )


# ----------------------------------------------------------------------------- Parquet
def open_parquet(path: str, column: str):
    """The ``pyarrow.parquet.ParquetFile`` of ``path``, checked to hold ``column`` (one-line
    DataErrors for a missing pyarrow, an unreadable file or a missing column)."""
    pq = _parquet_module()
    try:
        handle = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for corrupt files
        raise DataError(f"cannot read {path!r} as Parquet{_detail(exc)}") from None
    if column not in handle.schema_arrow.names:
        raise _column_missing(path, column, handle.schema_arrow.names)
    return handle


def _parquet_module():
    """pyarrow.parquet, or a one-line DataError saying how to install it."""
    try:
        import pyarrow.parquet as pq  # noqa: PLC0415
    except ImportError:
        raise DataError("reading Parquet needs pyarrow: pip install 'dprange[io]'") from None
    return pq


def file_column_values(array, path: str, column: str):
    """The numeric values of an ``array`` (pyarrow or numpy) read from ``column`` of ``path``."""
    try:
        return column_array(array)
    except DataError as exc:
        raise DataError(f"column {excerpt(repr(column))} of {path!r}: {exc}") from None


def _read_parquet(path: str, column: str):
    handle = open_parquet(path, column)
    try:
        table = handle.read(columns=[column])
    except Exception as exc:  # noqa: BLE001
        raise DataError(f"cannot read column {excerpt(repr(column))} of {path!r}{_detail(exc)}") from None
    return file_column_values(table.column(column), path, column)


# ----------------------------------------------------------------------------- CSV
def _check_unique(path: str, column: str, names) -> None:
    """Refuse a header that names ``column`` more than once (which one would be meant?)."""
    if list(names).count(column) > 1:
        raise DataError(
            f"column {excerpt(repr(column))} appears {list(names).count(column)} times in the header of "
            f"{path!r}; rename the columns so that each name is unique"
        )


def _read_csv(path: str, column: str):
    try:
        import pandas as pd  # noqa: PLC0415
    except ImportError:
        pd = None
    if pd is None:
        return _read_csv_stdlib(path, column)
    names = column_names(path)
    if column in names:  # (else the reader says what is wrong with the header)
        check_row_widths(path, len(names))  # pandas pads short rows and drops extra fields
    return _read_csv_pandas(pd, path, column)


# ----------------------------------------------------------------------------- row widths
def trailing_comma(path: str, width: int) -> bool:
    """Whether the first data row has one empty field more than the header (a trailing comma:
    then every row must have it)."""
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        next(reader, None)
        first = next(reader, None)
    return first is not None and len(first) == width + 1 and not first[-1].strip()


def row_width_error(path: str, row: int, fields: int, width: int, expected: int) -> DataError:
    """The error for a row whose number of fields is not ``expected``: the header's ``width``,
    or one more where the rows end with a trailing comma (every reader gives this one)."""
    wanted = f"the header names {width} column(s)"
    if expected != width:
        wanted = f"the rows end with a trailing comma ({expected} fields for the header's {width} columns)"
    return DataError(
        f"cannot read {path!r} as CSV: row {private(row)} has {private(fields)} field(s) but {wanted}; "
        "give every row one field per column (an empty field for a missing value)"
    )


def row_width(path: str, width: int) -> int:
    """The number of fields every row of ``path`` must have: the header's ``width``, or one
    more where the first data row ends with a trailing comma."""
    return width + 1 if trailing_comma(path, width) else width


def first_ragged_row(path: str, width: int) -> tuple[int, int] | None:
    """(row, fields) of the first row of the CSV file ``path`` whose number of fields differs
    from the header's ``width`` (one more, empty, on every row where the first data row ends
    with a trailing comma), or None.  Rows are the file's records numbered from the header
    (row 1); an empty line is a row of missing values, not a ragged one.  None also for a
    file the CSV rules cannot split (an unterminated quote): its reader's own parse error says
    so.  Standard library, O(file): for the error path and for installs without pyarrow."""
    expected = row_width(path, width)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh, skipinitialspace=True, strict=True)
            next(reader, None)
            for row, fields in enumerate(reader, start=2):
                if fields and len(fields) != expected:
                    return row, len(fields)
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    except csv.Error:
        return None
    return None


def check_row_widths(path: str, width: int, *, stream: bool = False) -> None:
    """Refuse a CSV file with a row of fewer or more fields than its header names (pandas and a
    padded read would count it silently): :func:`row_width_error` for the first one.  With
    pyarrow the file is screened by its parser (on every core; ``stream``: batch by batch, in
    bounded memory, on one); the standard library names the row (:func:`first_ragged_row`)."""
    if _screened_as_even(path, width, stream):
        return
    found = first_ragged_row(path, width)
    if found is not None:
        raise row_width_error(path, found[0], found[1], width, row_width(path, width))


def _screened_as_even(path: str, width: int, stream: bool) -> bool:
    """Whether pyarrow's parser reads every row of ``path`` with the header's width (or the
    trailing-comma width); False when it finds one that is not, or is not installed."""
    try:
        import pyarrow as pa  # noqa: PLC0415
        import pyarrow.csv as pacsv  # noqa: PLC0415
    except ImportError:
        return False
    names = [f"c{i}" for i in range(row_width(path, width))]
    uneven: list = []

    def note(row) -> str:
        uneven.append(row)
        return "skip"

    read = pacsv.ReadOptions(column_names=names, skip_rows=1)
    parse = pacsv.ParseOptions(ignore_empty_lines=False, invalid_row_handler=note)
    convert = pacsv.ConvertOptions(include_columns=names[:1], column_types={names[0]: pa.string()})
    try:
        if not stream:
            pacsv.read_csv(path, read_options=read, parse_options=parse, convert_options=convert)
            return not uneven
        with pacsv.open_csv(path, read_options=read, parse_options=parse, convert_options=convert) as reader:
            for _batch in reader:  # memory of one batch
                if uneven:
                    return False
    except Exception:  # noqa: BLE001 - pyarrow's parse errors: the standard library decides
        return False
    return not uneven


def _read_csv_pandas(pd, path: str, column: str):
    options = {"skipinitialspace": True, "encoding": "utf-8-sig", "index_col": False}
    try:
        header = pd.read_csv(path, nrows=0, **options)
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    except pd.errors.EmptyDataError:
        raise DataError(f"{path!r} is empty; a CSV file needs a header line naming its columns") from None
    except (pd.errors.ParserError, ValueError) as exc:
        raise DataError(f"cannot read {path!r} as CSV{_detail(exc)}") from None
    names = [str(c) for c in header.columns]
    if column not in names:
        raise _column_missing(path, column, names)
    try:  # pandas renames repeated names (x, x.1): read the header row itself to see them
        raw = pd.read_csv(path, nrows=1, header=None, dtype=str, **options)
    except (pd.errors.ParserError, ValueError):
        raw = None
    if raw is not None and len(raw):
        _check_unique(path, column, [str(v).strip() for v in raw.iloc[0].tolist()])
    try:
        frame = pd.read_csv(path, usecols=[column], skip_blank_lines=False, dtype_backend="numpy_nullable", **options)
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    except (pd.errors.ParserError, ValueError) as exc:
        raise DataError(f"cannot read column {excerpt(repr(column))} of {path!r}{_detail(exc)}") from None
    series = frame[column]
    if pd.api.types.is_bool_dtype(series.dtype):
        raise _boolean_column(column)
    if not pd.api.types.is_numeric_dtype(series.dtype):
        series = _pandas_to_numeric(pd, series, column)
    return column_array(series)


def _pandas_to_numeric(pd, series, column: str):
    text = series.astype("string").str.strip()
    if text.dropna().str.lower().isin(_BOOLEANS).all() and text.notna().any():
        raise _boolean_column(column)
    converted = pd.to_numeric(text, errors="coerce", dtype_backend="numpy_nullable")
    bad = converted.isna() & text.notna() & ~text.isin(MISSING_MARKERS)
    if bad.any():
        position = int(np.argmax(bad.to_numpy(dtype=bool)))
        raise _non_numeric(column, str(text.iloc[position]), position + 2)
    return converted


def read_text_column(path, column: str):
    """The cells of ``column`` of the CSV or Parquet file ``path`` as they are, for a
    categorical domain (:meth:`dprange.Domain.categories` matches them): CSV cells as an object
    array of text (the file checked as :func:`read_column` checks it), a Parquet column as
    pyarrow stores it."""
    path = _check_path(path)
    if not isinstance(column, str):
        raise ParameterError(f"the column name must be a string, got {column!r}")
    if _is_parquet(path):
        handle = open_parquet(path, column)
        try:
            return handle.read(columns=[column]).column(column)
        except Exception as exc:  # noqa: BLE001
            raise DataError(f"cannot read column {excerpt(repr(column))} of {path!r}{_detail(exc)}") from None
    check_no_nul(path)
    return np.asarray(_csv_cells(path, column), dtype=object)


def _read_csv_stdlib(path: str, column: str):
    return _parse_cells(column, _csv_cells(path, column))


def _csv_cells(path: str, column: str) -> list[str]:
    """The cells of ``column`` of a CSV file, by the standard library (rows checked for width)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh, skipinitialspace=True)
            names = _csv_header(path, reader)
            if column not in names:
                raise _column_missing(path, column, names)
            _check_unique(path, column, names)
            k = names.index(column)
            expected = row_width(path, len(names))
            cells = []
            for row, fields in enumerate(reader, start=2):
                if fields and len(fields) != expected:
                    raise row_width_error(path, row, len(fields), len(names), expected)
                cells.append(fields[k] if fields else "")
        return cells
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    except csv.Error as exc:
        raise DataError(f"cannot read {path!r} as CSV{_detail(exc)}") from None


def _csv_header(path: str, reader) -> list[str]:
    """The column names of the header line ``reader`` reads first (stripped)."""
    try:
        names = next(reader)
    except StopIteration:
        raise DataError(f"{path!r} is empty; a CSV file needs a header line naming its columns") from None
    return [n.strip() for n in names]


def _parse_cells(column: str, cells: list[str]):
    """Cells of one CSV column as int64 (all integers), float64 with NaN, or masked int64."""
    cells = [cell.strip() for cell in cells]
    missing = np.fromiter((cell in MISSING_MARKERS for cell in cells), dtype=bool, count=len(cells))
    present = [cell for cell, m in zip(cells, missing) if not m]
    if present and all(cell.lower() in _BOOLEANS for cell in present):
        raise _boolean_column(column)
    integers = np.zeros(len(cells), dtype=np.int64)
    floats = np.full(len(cells), np.nan)
    all_integers = True
    for i, cell in enumerate(cells):
        if missing[i]:
            continue
        if _INTEGER.fullmatch(cell):
            value = int(cell)
            integers[i] = max(-(2**63 - 1), min(2**63 - 1, value))
            floats[i] = float(value) if abs(value) < 1e308 else float(np.sign(value)) * np.inf
        elif _FLOAT.fullmatch(cell):
            all_integers = False
            floats[i] = float(cell)
        else:
            raise _non_numeric(column, cell, i + 2)
    if all_integers:
        return column_array(np.ma.MaskedArray(integers, mask=missing))
    return floats


# ----------------------------------------------------------------------------- NumPy files
class NpzContents(dict):
    """The arrays of an .npz file, read eagerly: a dict with ``files`` that also works in a
    ``with`` statement (like numpy's NpzFile)."""

    @property
    def files(self) -> list[str]:
        return list(self.keys())

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


def _source(source):
    """(file object or path, name for messages) of a path, bytes or binary file object."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(source)), "the data"
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.exists(path):
            raise DataError(f"input file {path!r} does not exist")
        if os.path.isdir(path):
            raise DataError(f"input {path!r} is a folder, not a file")
        return path, repr(path)
    if hasattr(source, "read") and hasattr(source, "seek"):
        return source, "the data"
    raise ParameterError(f"expected a path, bytes or a binary file object, got {type(source).__name__}")


def _magic(handle, size: int = 6) -> bytes:
    if isinstance(handle, str):
        with open(handle, "rb") as fh:
            return fh.read(size)
    position = handle.tell()
    head = handle.read(size)
    handle.seek(position)
    return bytes(head)


def _load_error(name: str, exc: Exception) -> DataError:
    text = str(exc)
    if "allow_pickle" in text or "Object arrays" in text or "pickled" in text:
        return DataError(f"{name} holds Python objects (pickled data), which dprange never loads; save numeric arrays")
    return DataError(f"cannot read {name}: {excerpt(text, 120)}")


def _open_with_head(source, *length):
    """(handle, name, first bytes) of a path, bytes or file object; DataError if unreadable."""
    handle, name = _source(source)
    try:
        return handle, name, _magic(handle, *length)
    except OSError as exc:
        raise DataError(f"cannot open {name}: {excerpt(exc.strerror or exc, 80)}") from None


def load_npy(source) -> np.ndarray:
    """One array from a NumPy .npy file (path, bytes or file object), never unpickling:
    anything else gives a one-line DataError."""
    handle, name, head = _open_with_head(source)
    if head.startswith(_ZIP_MAGIC[:4]):
        raise DataError(f"{name} is an .npz archive, not a single .npy array")
    if not head.startswith(_NPY_MAGIC):
        raise DataError(f"{name} is not a NumPy .npy file (no .npy header); save the array with numpy.save")
    try:
        return np.load(handle, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise _load_error(name, exc) from None


def load_npz(source) -> NpzContents:
    """All arrays of a NumPy .npz archive (path, bytes or file object), read eagerly and never
    unpickled: anything else gives a one-line DataError."""
    handle, name, head = _open_with_head(source, 4)
    if head.startswith(_NPY_MAGIC[:4]):
        raise DataError(f"{name} is a single .npy array, not an .npz archive")
    if not head.startswith(_ZIP_MAGIC):
        raise DataError(f"{name} is not a NumPy .npz archive (not a zip file); save the arrays with numpy.savez")
    try:
        with np.load(handle, allow_pickle=False) as archive:
            return NpzContents({key: archive[key] for key in archive.files})
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise _load_error(name, exc) from None

"""The local streaming engine with a privacy unit or a group-by: the value, id and key columns
of CSV / Parquet files, bounded batch by batch (:class:`~dprange.engines.bounding.BoundedCounter`).

Memory: one batch (``batch_rows`` rows of the three columns) plus the bounding state, at most
:data:`~dprange.engines.bounding.MAX_KEPT_ROWS` kept rows of 20 bytes (id hash, group and key,
bin); a source needing more is refused with a DataError.  Without a privacy unit no state is
kept: the counts per (group, bin) are summed batch by batch.

The rules are :mod:`dprange.engines.local`'s with two differences: the CSV reader is pyarrow's
streaming reader only (the value column converted by pyarrow to int64 on integer domains,
float64 otherwise; a cell it cannot convert is a DataError naming the file, not the row), and
a value outside the bounds or missing is reported by count, not by row.  Missing ids are an
error; missing or undeclared group keys drop their rows (public-list filtering).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from ..columns import EXACT_FLOAT_INTEGER, column_array
from ..domain import Domain, _drop_missing
from ..errors import DataError, DPRangeError, ParameterError, excerpt
from ..io import MISSING_MARKERS, PARQUET_SUFFIXES, _detail, check_no_nul, open_parquet
from .bounding import BoundedCounter, Bounder, id_codes
from .local import DEFAULT_BATCH_ROWS, expand_inputs, prefetched


def stream_bounded_counts(
    source,
    column: str,
    domain: Domain,
    *,
    id_column: str | None,
    by: str | None,
    group_index: Callable | None,
    groups: int,
    bounder: Bounder | None,
    clip: bool = False,
    drop_missing: bool = False,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> np.ndarray:
    """Exact (private!) bounded counts, shape (groups, bins), of ``column`` over the files of
    ``source``: rows grouped by ``by`` (``group_index`` maps a key column to declared indices,
    -1 dropped) and bounded per ``id_column`` by ``bounder`` (module doc)."""
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise ParameterError(f"batch_rows must be an integer >= 1, got {batch_rows!r}")
    names = [column] + [c for c in (id_column, by) if c is not None]
    if len(set(names)) != len(names):
        raise ParameterError("the value, id and group columns must be different columns")
    counter = None if bounder is None else BoundedCounter(bounder)
    totals = np.zeros(groups * domain.size, dtype=np.int64)
    for path in expand_inputs(source):
        for table in prefetched(_file_tables(path, names, domain, batch_rows)):
            values = _values(table.column(0), path, column)
            group = np.zeros(len(values), dtype=np.int64)
            if by is not None and group_index is not None:
                group = group_index(table.column(names.index(by)))
            keep = _present(values, drop_missing) & (group >= 0)
            rows = np.flatnonzero(keep)
            bins = domain.bucketize(values[rows], clip=clip)
            if counter is None:
                totals += np.bincount(group[rows] * domain.size + bins, minlength=totals.size)
            else:
                ids = id_codes(table.column(names.index(str(id_column))))[rows]
                counter.add(ids, group[rows], bins)
    if counter is not None:
        return counter.counts(groups, domain.size)
    return totals.reshape(groups, domain.size)


def _values(array, path: str, column: str) -> np.ndarray:
    try:
        arr = column_array(array)
    except DataError as exc:
        raise DataError(f"column {excerpt(repr(column))} of {path!r}: {exc}") from None
    return arr


def _present(values, drop_missing: bool) -> np.ndarray:
    if isinstance(values, np.ma.MaskedArray):
        missing = np.ma.getmaskarray(values)
    elif values.dtype.kind == "f":
        missing = np.isnan(values)
    else:
        return np.ones(values.shape[0], dtype=bool)
    if missing.any():
        _drop_missing(values, drop_missing)  # DomainError with the count unless dropping
    return ~missing


def _file_tables(path: str, names: list[str], domain: Domain, batch_rows: int) -> Iterator:
    """pyarrow record batches of the ``names`` columns of one file, in order."""
    if path.lower().endswith(PARQUET_SUFFIXES):
        handle = open_parquet(path, names[0])
        for name in names[1:]:
            open_parquet(path, name)
        try:
            for group in range(handle.num_row_groups):
                yield from handle.iter_batches(batch_size=batch_rows, columns=names, row_groups=[group])
        except DPRangeError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise DataError(f"cannot read {path!r}{_detail(exc)}") from None
        return
    yield from _csv_tables(path, names, domain, batch_rows)


def _csv_tables(path: str, names: list[str], domain: Domain, batch_rows: int) -> Iterator:
    try:
        import pyarrow as pa  # noqa: PLC0415
        import pyarrow.csv as pv  # noqa: PLC0415
    except ImportError:
        raise DataError("privacy_id and by= on CSV files need pyarrow: pip install 'dprange[io]'") from None
    check_no_nul(path)
    if max(abs(domain.lo), abs(domain.hi)) >= EXACT_FLOAT_INTEGER:
        raise ParameterError("privacy_id and by= on CSV files need bounds within +-2^53 (values are read as float64)")
    typed = pa.float64()  # "40.0" is 40 on an integer domain, as dprange.io reads it
    types = {names[0]: typed, **{name: pa.string() for name in names[1:]}}
    convert = pv.ConvertOptions(
        include_columns=names, column_types=types, null_values=list(MISSING_MARKERS), strings_can_be_null=True
    )
    read = pv.ReadOptions(block_size=max(1 << 16, min(batch_rows * 64, 1 << 26)))
    try:
        reader = pv.open_csv(path, read_options=read, convert_options=convert)
        yield from reader
    except DPRangeError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise DataError(f"cannot read the columns {', '.join(map(repr, names))} of {path!r}{_detail(exc)}") from None

"""Reading one numeric column of a CSV or Parquet file, with clear errors."""

from __future__ import annotations

import os

import numpy as np

from .domain import to_numpy_column
from .errors import DataError

PARQUET_SUFFIXES = (".parquet", ".pq")


def read_column(path: str, column: str) -> np.ndarray:
    """The values of ``column`` in the CSV or Parquet file ``path`` as floats (NaN for missing).

    Parquet needs pyarrow (``pip install dprange[io]``); CSV uses pandas when installed and
    the standard library otherwise.
    """
    if not os.path.exists(path):
        raise DataError(f"input file {path!r} does not exist")
    if os.path.isdir(path):
        raise DataError(f"input {path!r} is a folder, not a file")
    if path.lower().endswith(PARQUET_SUFFIXES):
        return _read_parquet(path, column)
    return _read_csv(path, column)


def _read_parquet(path: str, column: str) -> np.ndarray:
    try:
        import pyarrow.parquet as pq  # noqa: PLC0415
    except ImportError:
        raise DataError("reading Parquet needs pyarrow: pip install 'dprange[io]'") from None
    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise DataError(f"cannot read {path!r} as Parquet: {exc}") from None
    if column not in schema.names:
        raise DataError(f"column {column!r} not found in {path!r}; columns are: {', '.join(schema.names)}")
    table = pq.read_table(path, columns=[column])
    return to_numpy_column(table.column(column))


def _read_csv(path: str, column: str) -> np.ndarray:
    try:
        import pandas as pd  # noqa: PLC0415
    except ImportError:
        pd = None
    if pd is not None:
        try:
            header = pd.read_csv(path, nrows=0, skipinitialspace=True)
        except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise DataError(f"cannot read {path!r} as CSV: {exc}") from None
        names = [str(c) for c in header.columns]
        if column not in names:
            raise DataError(f"column {column!r} not found in {path!r}; columns are: {', '.join(names)}")
        try:
            frame = pd.read_csv(path, usecols=[column], skipinitialspace=True, skip_blank_lines=False)
        except (pd.errors.ParserError, ValueError) as exc:
            raise DataError(f"cannot read column {column!r} of {path!r}: {exc}") from None
        series = frame[column]
        if series.dtype == object:
            converted = pd.to_numeric(series, errors="coerce")
            bad = converted.isna() & series.notna()
            if bad.any():
                example = series[bad].iloc[0]
                raise DataError(f"column {column!r} is not numeric (e.g. {example!r} on row {int(bad.idxmax()) + 2})")
            series = converted
        return to_numpy_column(series)
    import csv  # noqa: PLC0415

    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh, skipinitialspace=True)
        try:
            names = next(reader)
        except StopIteration:
            raise DataError(f"{path!r} is empty") from None
        if column not in names:
            raise DataError(f"column {column!r} not found in {path!r}; columns are: {', '.join(names)}")
        k = names.index(column)
        out = []
        for row_number, row in enumerate(reader, start=2):
            cell = row[k].strip() if k < len(row) else ""
            if cell == "":
                out.append(np.nan)
                continue
            try:
                out.append(float(cell))
            except ValueError:
                raise DataError(f"column {column!r} is not numeric (e.g. {cell!r} on row {row_number})") from None
    return np.asarray(out, dtype=float)

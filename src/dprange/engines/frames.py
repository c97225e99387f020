"""DataFrame inputs: one column of a pandas, polars or pyarrow table as the values of a release.

``dprange.release(frame, domain, epsilon, column="age")`` reads only ``column``: a polars
LazyFrame selects it before collecting, a pyarrow Table / RecordBatch and a pandas DataFrame
hand over that column alone.  Columns (pandas Series, pyarrow arrays, polars Series), numpy
arrays and lists are values already (:func:`dprange.domain.column_array` reads them).
"""

from __future__ import annotations

from ..errors import DataError, ParameterError, excerpt

#: (module prefix, class name) of the table types whose columns are selected by name.
FRAME_TYPES = {
    ("pandas", "DataFrame"),
    ("pyarrow", "Table"),
    ("pyarrow", "RecordBatch"),
    ("polars", "DataFrame"),
    ("polars", "LazyFrame"),
}


def is_frame(data) -> bool:
    """Whether ``data`` is a table (pandas / polars DataFrame, polars LazyFrame, pyarrow Table)."""
    kind = type(data)
    return (kind.__module__.split(".")[0], kind.__name__) in FRAME_TYPES


def select_column(data, column):
    """The values of ``column`` of a table ``data``, or ``data`` itself when it is a column
    and ``column`` is None; ParameterError / DataError (one line) otherwise."""
    if not is_frame(data):
        if column is not None:
            raise ParameterError(
                f"column={column!r} selects a column of a DataFrame or table, but the values are a "
                f"{type(data).__name__}; pass the column itself without column="
            )
        return data
    if not isinstance(column, str):
        raise ParameterError(f"the values are a {type(data).__name__}: name the column to release with column='...'")
    library = type(data).__module__.split(".")[0]
    names = _names(data, library)
    if column not in names:
        shown = ", ".join(excerpt(n, 40) for n in names[:30])
        raise DataError(f"column {excerpt(repr(column))} not found in the {type(data).__name__}; columns are: {shown}")
    if library == "pandas":
        if names.count(column) > 1:
            raise DataError(f"column {excerpt(repr(column))} appears {names.count(column)} times; rename the columns")
        return data[column]
    if library == "pyarrow":
        return data.column(column)
    if type(data).__name__ == "LazyFrame":  # polars: only this column is computed
        return data.select(column).collect().get_column(column).to_arrow()
    return data.get_column(column).to_arrow()


def _names(data, library: str) -> list[str]:
    if library == "pandas":
        return [str(c) for c in data.columns]
    if library == "pyarrow":
        return list(data.schema.names)
    if type(data).__name__ == "LazyFrame":
        return list(data.collect_schema().names())
    return list(data.columns)

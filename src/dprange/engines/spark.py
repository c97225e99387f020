"""The Spark engine: the int64 counts of a public domain computed by a Spark cluster.

Each partition of a Spark DataFrame is bucketized where it lies, with numpy and the domain's
own rules (:meth:`Domain.histogram` / :meth:`ProductDomain.histogram`, reached through
``DataFrame.mapInArrow``, so values travel as Arrow batches, never as Python rows); the
partial counts are sums and merge by ``RDD.treeReduce`` (the same merge as
:func:`dprange.engines.local.merge_counts`).  Only the counts reach the driver, where the
ordinary measure / infer / answer steps run.  The counts equal those of the local engine
exactly (``tests/engines/test_spark.py``).

Inputs: a Spark DataFrame (``column`` names the column, or the columns of a
:class:`~dprange.ProductDomain`), or CSV / Parquet files (a path, a folder, a glob pattern or a
list, as for the local engine; ``hdfs://`` / ``s3a://`` URLs are passed to ``spark.read``).
CSV columns are read as text and parsed by the local engine's rules (missing markers,
integers exact in int64), so a cell means the same on both engines.

Bad values stop the count (unless ``clip`` / ``drop_missing``) with the local engine's one-line
message naming the file, row and value: docs/engines.md, "Bad values on Spark".

Local-DP reports (:func:`spark_ldp_aggregate`): a text column holding one user's report per
row in the JSON-lines form of :meth:`dprange.ldp.ProtocolReports.to_jsonl` (``spark.read.text``
of report files gives it; header lines are checked against the protocol and skipped), summed
per partition by the oracles' mergeable aggregators and merged on the driver.

pyspark is imported lazily (``pip install 'dprange[spark]'``; Spark 4 needs Java 17).
Executors need dprange installed (or shipped with ``--py-files``).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
from collections.abc import Iterator
from urllib.parse import unquote, urlparse

import numpy as np

from ..columns import MISSING_CODE
from ..domain import CATEGORY_CLIP_MESSAGE, Domain, ProductDomain
from ..errors import DataError, DomainError, DPRangeError, ParameterError, ReportError, excerpt, private
from ..io import PARQUET_SUFFIXES, _column_missing, file_column_values, nul_bytes_error, row_width_error
from ..ldp.protocols import Protocol
from .counting import batch_histogram, edge_table
from .local import CSV_SUFFIXES, Batch, _arrow_cells, _quick_cast, batch_counts, expand_inputs, plain_values
from .spark_blank_lines import classify, first_problem_line, is_line_problem, is_ragged, row_of_record, scan_lines
from .spark_ldp import aggregate_partition, check_header

#: The master a session created by dprange uses unless told otherwise.
DEFAULT_MASTER = "local[*]"


#: Rows per Arrow batch handed to a partition's bucketizer (Spark's default is 10 000).
ARROW_BATCH_ROWS = 1 << 17


_ARROW_BATCH_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"


_SPARK_EXTRA = "the Spark engine needs pyspark: pip install 'dprange[spark]' (and Java 17 for Spark 4)"


# ----------------------------------------------------------------------------- sessions
def _pyspark():
    try:
        import pyspark  # noqa: PLC0415 - optional, imported only when the engine is used
        from pyspark.sql import SparkSession  # noqa: PLC0415
    except ImportError:
        raise ParameterError(_SPARK_EXTRA) from None
    return pyspark, SparkSession


def is_spark_frame(data) -> bool:
    """Whether ``data`` is a Spark DataFrame (classic or Connect), without importing pyspark."""
    kind = type(data)
    return kind.__module__.startswith("pyspark.sql") and kind.__name__ == "DataFrame"


def get_session(spark=None):
    """The SparkSession to use: ``spark`` itself, or one built (or reused: ``getOrCreate``)
    for the master URL ``spark`` (default ``local[*]``).  Local masters run their Python
    workers with this interpreter unless ``PYSPARK_PYTHON`` says otherwise."""
    _, session_class = _pyspark()
    if spark is not None and not isinstance(spark, str):
        if not isinstance(spark, session_class) and type(spark).__name__ != "SparkSession":
            raise ParameterError(f"spark must be a SparkSession or a master URL, got {type(spark).__name__}")
        return spark
    master = DEFAULT_MASTER if spark is None else spark
    local = master.startswith("local")
    if local and shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise ParameterError("the Spark engine needs Java (17 for Spark 4): install it or set JAVA_HOME")
    builder = session_class.builder.master(master).appName("dprange").config("spark.ui.showConsoleProgress", "false")
    fresh = session_class.getActiveSession() is None
    if fresh and local and "PYSPARK_PYTHON" not in os.environ:  # read when the context starts
        os.environ["PYSPARK_PYTHON"] = sys.executable
    try:
        session = builder.getOrCreate()
        if fresh:  # a session of our own: Spark's warnings would drown the one-line messages
            session.sparkContext.setLogLevel("ERROR")
        return session
    except Exception as exc:  # noqa: BLE001 - pyspark raises several types when the JVM cannot start
        raise ParameterError(f"cannot start Spark with master {master!r}: {excerpt(exc, 160)}") from None


# ----------------------------------------------------------------------------- inputs
def _is_url(item) -> bool:
    return isinstance(item, str) and "://" in item and not item.startswith("file://")


def _format_of(path: str) -> str:
    name = path.lower().rstrip("/")
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if name.endswith(CSV_SUFFIXES):
        return "csv"
    raise DataError(f"cannot tell the format of {path!r}: name CSV files .csv and Parquet files .parquet or .pq")


def read_files(spark, source) -> list:
    """(format, DataFrame) for each format among the files of ``source``: local paths,
    folders and globs expanded as the local engine does, URLs passed to ``spark.read``.
    CSV is read with a header and every column as text."""
    items = list(source) if isinstance(source, (list, tuple)) else [source]
    files: list[str] = []
    for item in items:
        files.extend([item] if _is_url(item) else expand_inputs(item))
    by_format: dict[str, list[str]] = {}
    for path in files:
        by_format.setdefault(_format_of(path), []).append(path)
    frames = []
    for kind, paths in by_format.items():
        reader = spark.read
        try:
            if kind == "csv":
                # enforceSchema=False: every file's header is checked against the first one's
                # (Spark would otherwise take columns by position, not by name)
                frame = reader.options(header=True, inferSchema=False, enforceSchema=False, encoding="UTF-8").csv(paths)
            else:
                frame = reader.parquet(*paths)
        except Exception as exc:  # noqa: BLE001 - Spark's analysis and IO errors
            raise DataError(
                f"Spark cannot read {paths[0]!r}{' and others' if len(paths) > 1 else ''}: {excerpt(exc, 160)}"
            ) from None
        frames.append((kind, frame))
    return frames


def files_frame(source, columns: list[str], spark=None, *, domain=None, drop_missing: bool = True):
    """One Spark DataFrame of ``columns`` of the files of ``source`` (all CSV or all
    Parquet), for :func:`dprange.release_grid`; ParameterError for mixed formats.  Given the
    ``domain``, a CSV line the local engine stops at (a blank line unless ``drop_missing``, a
    row of another width) is its error, and a file with a NUL byte is refused (found here,
    before counting: the DataFrame no longer knows its lines)."""
    frames = read_files(get_session(spark), source)
    if len(frames) > 1:
        raise ParameterError("the input mixes CSV and Parquet files; give files of one format for several columns")
    kind, frame = frames[0]
    _check_columns(frame, columns, _describe(source))
    selected = frame.select(*[frame[name] for name in columns])
    if kind == "csv":
        any_problem = _refuse_bad_files(frame, _order(source), columns, domain, False, drop_missing)
        problem = _first_problem(frame, _order(source), drop_missing) if any_problem and domain is not None else None
        if problem is not None:
            _raise_line(problem, len(frame.columns), columns, domain)
    return selected


def _check_columns(frame, columns: list[str], where: str) -> None:
    names = list(frame.columns)
    for name in columns:
        if name not in names:
            raise _column_missing(where, name, names)


# ----------------------------------------------------------------------------- workers
def _cells_values(cells, path: str, column: str, first_row: int, domain=None):
    """A column of an Arrow batch as the local engine reads it: text as CSV cells, other
    types by :func:`dprange.domain.column_array`; for a categorical ``domain`` the cells
    themselves (matched by :meth:`dprange.Domain.codes`)."""
    import pyarrow as pa  # noqa: PLC0415 - present wherever Spark's Arrow path runs

    if domain is not None and domain.categorical:
        return cells
    if pa.types.is_large_string(cells.type):
        cells = cells.cast(pa.string())
    if pa.types.is_string(cells.type):
        quick = _quick_cast(cells)  # plain numbers: one cast (then the exact CSV rules)
        return quick if quick is not None else _arrow_cells(cells, path, column, first_row)
    plain = plain_values(cells)
    return plain if plain is not None else file_column_values(cells, path, column)


def _table_counts(batch, domain, columns: list[str], clip: bool, drop_missing: bool) -> np.ndarray:
    """The (flat) counts of the first ``len(columns)`` columns of an Arrow batch."""
    axes = domain.domains if isinstance(domain, ProductDomain) else [domain]
    arrays = [_cells_values(batch.column(a), "the Spark DataFrame", name, 0, axes[a]) for a, name in enumerate(columns)]
    if isinstance(domain, ProductDomain):
        return domain.histogram(arrays, clip=clip, drop_missing=drop_missing).ravel()
    return batch_histogram(domain, arrays[0], clip=clip, drop_missing=drop_missing, table=edge_table(domain))


def _count_partition(batches, domain, columns, clip, drop_missing) -> Iterator:
    """mapInArrow body of the first pass: one row per partition, its counts (int64 bytes)
    or the first error's class and text (the second pass then names its row)."""
    import pyarrow as pa  # noqa: PLC0415

    counts = np.zeros(domain.size, dtype=np.int64)
    error = None
    for batch in batches:
        try:
            counts += _table_counts(batch, domain, columns, clip, drop_missing)  # O(rows) numpy per batch
        except DPRangeError as exc:
            error = f"{type(exc).__name__}:{exc}"
            break
    blob = None if error is not None else counts.tobytes()
    yield pa.RecordBatch.from_pydict({"counts": [blob], "error": [error]}, schema=_count_schema())


def _count_schema():
    import pyarrow as pa  # noqa: PLC0415

    return pa.schema([("counts", pa.binary()), ("error", pa.string())])


def _fails(batch, domain, columns, clip, drop_missing) -> bool:
    try:
        _table_counts(batch, domain, columns, clip, drop_missing)
    except DPRangeError:
        return True
    return False


def _first_failing(batch, domain, columns, clip, drop_missing) -> int:
    """The index of the first record of a failing batch that fails: bisection on prefixes
    (a prefix fails once it holds a bad record), O(rows log rows)."""
    low, high = 1, batch.num_rows  # batch[:high] fails; find the least such length
    while low < high:
        middle = (low + high) // 2
        if _fails(batch.slice(0, middle), domain, columns, clip, drop_missing):
            high = middle
        else:
            low = middle + 1
    return low - 1


def _ipc(batch) -> bytes:
    import pyarrow as pa  # noqa: PLC0415

    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


def _locate_partition(batches, domain, columns, clip, drop_missing, with_files: bool) -> Iterator:
    """mapInArrow body of the second pass: per input split (file, start byte) in this
    partition, its records and the offset and cells (Arrow IPC) of its first bad record."""
    import pyarrow as pa  # noqa: PLC0415
    from pyspark import TaskContext  # noqa: PLC0415

    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    k = len(columns)
    segments: dict[tuple, list] = {}
    for batch in batches:
        if with_files:
            files = np.asarray(batch.column(k).to_numpy(zero_copy_only=False), dtype=object)
            starts = np.asarray(batch.column(k + 1).to_numpy(zero_copy_only=False), dtype=np.int64)
            change = np.flatnonzero((files[1:] != files[:-1]) | (starts[1:] != starts[:-1])) + 1
            bounds = [0, *change.tolist(), batch.num_rows]
        else:
            bounds = [0, batch.num_rows]
        values = batch.select(list(range(k)))
        for a, b in zip(bounds[:-1], bounds[1:]):
            if a == b:
                continue
            key = (str(files[a]), int(starts[a])) if with_files else ("", partition)
            entry = segments.setdefault(key, [0, -1, None])
            part = values.slice(a, b - a)
            if entry[1] < 0 and _fails(part, domain, columns, clip, drop_missing):
                i = _first_failing(part, domain, columns, clip, drop_missing)
                entry[1], entry[2] = entry[0] + i, _ipc(part.slice(i, 1))
            entry[0] += b - a
    rows = [(f, s, n, bad, cell) for (f, s), (n, bad, cell) in segments.items()]
    yield pa.RecordBatch.from_pydict(
        {name: [r[i] for r in rows] for i, name in enumerate(("file", "start", "rows", "bad", "cell"))},
        schema=pa.schema(
            [
                ("file", pa.string()),
                ("start", pa.int64()),
                ("rows", pa.int64()),
                ("bad", pa.int64()),
                ("cell", pa.binary()),
            ]
        ),
    )


# ----------------------------------------------------------------------------- counting
def spark_histogram(
    data,
    columns,
    domain,
    *,
    clip: bool = False,
    drop_missing: bool = False,
    spark=None,
) -> np.ndarray:
    """Exact (private!) int64 counts of ``columns`` of ``data`` on ``domain``, counted by Spark.

    ``data``: a Spark DataFrame, or files (a path, folder, glob pattern, URL or a list).
    ``columns``: one name for a :class:`~dprange.Domain`; one name per axis for a
    :class:`~dprange.ProductDomain` (the result then has the grid's shape).  ``spark``: a
    SparkSession or a master URL (default: the active session, else ``local[*]``), used to
    read files.  Equal to the local engine's counts (and to ``domain.histogram`` of the
    whole column); the first bad value raises its one-line error naming the file and row."""
    names = _check_request(columns, domain, clip, drop_missing)
    if is_spark_frame(data):
        _check_columns(data, names, "the Spark DataFrame")
        inputs: list = [(None, data)]
    else:
        inputs = read_files(get_session(spark), data)
    counts = np.zeros(domain.size, dtype=np.int64)
    for kind, frame in inputs:
        if kind is not None:
            _check_columns(frame, names, _describe(data))
        counts += _frame_counts(frame, kind, names, domain, clip, drop_missing, _order(data))
    return counts.reshape(domain.shape) if isinstance(domain, ProductDomain) else counts


def _check_request(columns, domain, clip, drop_missing) -> list[str]:
    for name, flag in (("clip", clip), ("drop_missing", drop_missing)):
        if not isinstance(flag, (bool, np.bool_)):
            raise ParameterError(f"{name} must be True or False, got {flag!r}")
    if isinstance(domain, ProductDomain):
        names = [columns] if isinstance(columns, str) else list(columns)
        if len(names) != domain.ndim or not all(isinstance(c, str) for c in names):
            raise ParameterError(
                f"this product domain has {domain.ndim} axes: name {domain.ndim} columns, one per axis"
            )
        return names
    if not isinstance(domain, Domain):
        raise ParameterError("domain must be a dprange.Domain or a dprange.ProductDomain")
    if not isinstance(columns, str):
        raise ParameterError(f"the column name must be a string, got {columns!r}")
    if domain.categorical and clip:
        raise ParameterError(CATEGORY_CLIP_MESSAGE)
    return [columns]


def _describe(source) -> str:
    if isinstance(source, (list, tuple)):
        return ", ".join(str(s) for s in source)
    return os.fspath(source) if isinstance(source, (str, os.PathLike)) else "the input"


def _order(source) -> list[str]:
    """The input's local files in order (for 'the first bad value'); [] for URLs and frames."""
    if is_spark_frame(source):
        return []
    items = list(source) if isinstance(source, (list, tuple)) else [source]
    return [os.path.abspath(p) for item in items if not _is_url(item) for p in expand_inputs(item)]


def _frame_counts(frame, kind, names, domain, clip, drop_missing, order) -> np.ndarray:
    """Counts of one DataFrame: the first pass, and the second where it failed."""
    any_problem = _refuse_bad_files(frame, order, names, domain, clip, drop_missing) if kind == "csv" else False
    selected = frame.select(*[frame[name] for name in names])
    spark = frame.sparkSession
    previous = spark.conf.get(_ARROW_BATCH_CONF, None)
    spark.conf.set(_ARROW_BATCH_CONF, str(ARROW_BATCH_ROWS))
    try:
        parts = selected.mapInArrow(
            lambda batches: _count_partition(batches, domain, names, clip, drop_missing), "counts binary, error string"
        ).rdd.map(lambda row: (None if row[0] is None else np.frombuffer(row[0], dtype=np.int64), row[1]))
        if parts.getNumPartitions() == 0:
            return np.zeros(domain.size, dtype=np.int64)
        with SparkFailures(_describe_frame(frame, kind)):
            counts, error = parts.treeReduce(_merge_parts, depth=2)  # O(bins) per merge, log-depth tree
        problem = _first_problem(frame, order, drop_missing) if any_problem else None  # one more text pass
        if error is None:
            if problem is not None:
                _raise_line(problem, len(frame.columns), names, domain)
            return np.array(counts, dtype=np.int64)
        _raise_located(frame, kind, names, domain, clip, drop_missing, order, problem)
        raise _error_of(error)
    finally:
        if previous is None:
            spark.conf.unset(_ARROW_BATCH_CONF)
        else:
            spark.conf.set(_ARROW_BATCH_CONF, previous)


class SparkFailures:
    """Turn a failed Spark job (a file Spark cannot read, a CSV header that differs from the
    first file's) into a one-line DataError; errors of dprange itself pass through."""

    def __init__(self, what: str):
        self.what = what

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if exc is None or isinstance(exc, DPRangeError):
            return
        if type(exc).__module__.startswith(("pyspark", "py4j")):
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DataError(
                f"Spark could not read {self.what}: {excerpt(text, 200)}; check that every file is readable "
                "and that all CSV files have the same header"
            ) from None


def _describe_frame(frame, kind) -> str:
    return "the Spark DataFrame" if kind is None else f"the {kind.upper()} input"


def _merge_parts(a, b):
    """Merge two partial results (counts, error): sums, or the first error."""
    if a[1] is not None:
        return a
    if b[1] is not None:
        return b
    return a[0] + b[0], None


def _error_of(text: str) -> DPRangeError:
    kind, _, message = text.partition(":")
    return {"DataError": DataError, "DomainError": DomainError}.get(kind, DataError)(message)


def _raise_located(frame, kind, names, domain, clip, drop_missing, order, problem=None) -> None:
    """Find the first bad record (second pass) and raise the local engine's message for it,
    or for the ``problem`` line (file, row, text) when that comes first."""
    try:
        located = frame.select(*[frame[name] for name in names], "_metadata.file_path", "_metadata.file_block_start")
        with_files = True
    except Exception:  # noqa: BLE001 - not from files: Spark has no file names to give
        located, with_files = frame.select(*[frame[name] for name in names]), False
    segments = located.mapInArrow(
        lambda batches: _locate_partition(batches, domain, names, clip, drop_missing, with_files),
        "file string, start long, rows long, bad long, cell binary",
    ).collect()
    rank = _ranking(order)
    by_place = sorted(segments, key=lambda s: (rank(s[0]), s[0], s[1]))
    before: dict[str, int] = {}
    for file, start, rows, bad, cell in by_place:
        if bad >= 0:
            offset = before.get(file, 0) + bad
            if kind == "csv" and drop_missing:  # blank lines, dropped, are rows of the file all the same
                offset = row_of_record(frame.sparkSession, file, offset) - 2
            # The record's row (exact: without drop_missing the records before a file's first
            # problem line are its lines) against that line's: the earlier one is reported.
            if problem is not None and (rank(problem[0]), problem[0]) <= (rank(file), file):
                if problem[0] != file or problem[1] <= offset + 2:
                    _raise_line(problem, len(frame.columns), names, domain)
            _raise_for_record(cell, file, kind, offset, start, names, domain, clip, drop_missing, with_files)
        before[file] = before.get(file, 0) + rows
    if problem is not None:
        _raise_line(problem, len(frame.columns), names, domain)


def _ranking(order: list[str]):
    """A file's (URI's) place in the input order; files not listed come after."""
    rank = {path: i for i, path in enumerate(order)}
    return lambda uri: rank.get(_local_path(uri), len(rank))


def _first_problem(frame, order: list[str], drop_missing: bool) -> tuple[str, int, str] | None:
    """(file URI, row, text) of the first blank line of a DataFrame's CSV files that the local
    engine stops at, in input order."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    problem = is_line_problem(F.col("value"), len(frame.columns), drop_missing)
    return first_problem_line(frame.sparkSession, frame.inputFiles(), _ranking(order), problem)


def _refuse_bad_files(frame, order: list[str], names: list[str], domain, clip: bool, drop_missing: bool) -> bool:
    """Refuse the CSV files of ``frame`` as the local engine does when one holds a NUL byte
    (:func:`dprange.io.nul_bytes_error`) or a row of another width than its header
    (:func:`dprange.io.row_width_error`, at the first such row): the files before the first
    such one (in input order) are counted first, so that a problem of theirs is reported as
    the local engine reports it, then the file is refused.  One pass over the text
    (:func:`scan_lines`), which also tells whether a blank line stops the count: returned."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    files, width = frame.inputFiles(), len(frame.columns)
    nul, ragged, any_problem = scan_lines(frame.sparkSession, files, width, drop_missing)
    if not nul and not ragged:
        return any_problem
    rank = _ranking(order)
    place = lambda uri: (rank(uri), _local_path(uri))  # noqa: E731 - a file's place in the input order
    first = min(nul + ragged, key=place)
    earlier = [_local_path(f) for f in sorted(files, key=place) if place(f) < place(first)]
    if earlier and domain is not None:
        columns = names if isinstance(domain, ProductDomain) else names[0]
        spark_histogram(earlier, columns, domain, clip=clip, drop_missing=drop_missing, spark=frame.sparkSession)
    if first in nul:
        raise nul_bytes_error(_local_path(first))
    found = first_problem_line(frame.sparkSession, [first], rank, is_ragged(F.col("value"), width))
    if found is None:  # the file changed since the scan: the count reads it as it is now
        return any_problem
    raise row_width_error(_local_path(first), found[1], classify(found[2], width)[1], width, width)


def _raise_line(problem: tuple[str, int, str], width: int, names: list[str], domain) -> None:
    """The local engine's error for a line of a CSV file whose header names ``width`` columns
    (:func:`~dprange.engines.spark_blank_lines.classify`): a blank line is a record whose every
    cell is missing, a one-column file's blank line of control characters a cell, any other
    line a row of the wrong width."""
    import pyarrow as pa  # noqa: PLC0415

    file, row, text = problem
    what, fields = classify(text, width)
    if what == "ragged":
        raise row_width_error(_local_path(file), row, fields, width, width)
    cells = [None] if what == "missing" else [text]
    record = pa.record_batch({name: pa.array(cells, pa.string()) for name in names})
    _raise_for_record(_ipc(record), file, "csv", row - 2, 0, names, domain, False, False, True)


def _local_path(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme in ("file", "") else uri


class _FileBatch(Batch):
    """A one-record batch of a DataFrame read from files by the caller (perhaps filtered)."""

    def where(self, index: int) -> str:
        return f"a row of {self.path!r}"


class _PartitionBatch(Batch):
    """A one-record batch of a DataFrame that does not come from files."""

    def where(self, index: int) -> str:
        return f"record {private(self.first_row + int(index))} of Spark partition {self.path}"


def _raise_for_record(cell, file, kind, offset, start, names, domain, clip, drop_missing, with_files) -> None:
    """Raise the local engine's error for the bad record ``cell`` (Arrow IPC, one row) at
    ``offset`` records into ``file``."""
    import pyarrow as pa  # noqa: PLC0415

    record = pa.ipc.open_stream(cell).read_next_batch()
    if with_files and kind is None:  # a DataFrame of the caller's: it may be filtered, so no row number
        path, row = _local_path(file), offset + 1

        def batch_of(values):
            return _FileBatch(values, path, row, "row")
    elif with_files:
        path = _local_path(file)
        row = offset + (2 if kind == "csv" else 1)

        def batch_of(values):
            return Batch(values, path, row, "row")
    else:
        path, row = "the Spark DataFrame", offset + 1

        def batch_of(values):
            return _PartitionBatch(values, str(start), row, "record")

    domains = domain.domains if isinstance(domain, ProductDomain) else [domain]
    arrays = [_cells_values(record.column(a), path, name, row, domains[a]) for a, name in enumerate(names)]
    prefix = (lambda a: f"column {excerpt(repr(names[a]))}: ") if isinstance(domain, ProductDomain) else (lambda a: "")
    order = list(range(len(names)))
    if isinstance(domain, ProductDomain) and not drop_missing:  # a missing value anywhere is the record's error
        order.sort(key=lambda a: not _missing(arrays[a], domains[a]))
    for a in order:
        try:
            batch_counts(
                domains[a], batch_of(arrays[a]), clip=clip and not domains[a].categorical, drop_missing=drop_missing
            )
        except DomainError as exc:
            raise DomainError(prefix(a) + str(exc)) from None


def _missing(values, domain) -> bool:
    if domain.categorical:
        return bool(np.any(domain.codes(values) == MISSING_CODE))
    if isinstance(values, np.ma.MaskedArray):
        return bool(np.ma.getmaskarray(values).any())
    return values.dtype.kind == "f" and bool(np.isnan(values).any())


# ----------------------------------------------------------------------------- local DP
def spark_ldp_aggregate(data, protocol, column: str = "value", *, spark=None):
    """The :class:`~dprange.ldp.protocols.ProtocolAggregator` of every report in ``column`` of
    ``data`` (a Spark DataFrame, or report files read with ``spark.read.text``), one JSON
    line ``[level, fields...]`` per user as :meth:`ProtocolReports.to_jsonl` writes them;
    header lines must describe ``protocol`` and are skipped.  Each partition adds its reports
    to an aggregator; the aggregators merge on the driver (:meth:`ProtocolAggregator.merge`).
    Release with ``.release(domain)``."""
    if not isinstance(protocol, Protocol):
        raise ParameterError("protocol must be a dprange.ldp protocol (HierarchicalHistogram, HaarHRR, Flat)")
    if not is_spark_frame(data):
        session = get_session(spark)
        items = list(data) if isinstance(data, (list, tuple)) else [data]
        paths = [p for item in items for p in ([item] if _is_url(item) else expand_inputs_any(item))]
        data = session.read.text(paths)
        column = "value"
    _check_columns(data, [column], "the Spark DataFrame")
    fields = {level: tuple(agg.oracle.fields) for level, agg in protocol.aggregator().levels.items()}
    parts = (
        data.select(data[column])
        .mapInArrow(
            lambda rows: aggregate_partition(rows, protocol, fields), "state binary, headers string, error string"
        )
        .collect()
    )
    total = protocol.aggregator()
    expected = protocol.describe()
    for state, headers, error in parts:
        if error is not None:
            raise ReportError(f"reports in column {column!r}: {error}")
        for text in json.loads(headers):
            check_header(text, expected, fields)
        part = protocol.aggregator()
        with np.load(io.BytesIO(state), allow_pickle=False) as saved:
            for level, level_agg in part.levels.items():
                if f"s{level}" in saved.files:
                    level_agg.add_summary(saved[f"s{level}"], int(saved[f"n{level}"][0]))
        total.merge(part)
    return total


def expand_inputs_any(item) -> list[str]:
    """Report files: a path, a folder (every file in it, in name order) or a glob pattern."""
    path = os.fsdecode(os.fspath(item))
    if os.path.isdir(path):
        found = sorted(os.path.join(path, n) for n in os.listdir(path) if os.path.isfile(os.path.join(path, n)))
        if not found:
            raise DataError(f"the folder {path!r} holds no files")
        return found
    return expand_inputs(path)

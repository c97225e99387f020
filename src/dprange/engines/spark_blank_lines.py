"""Blank lines and NUL bytes of CSV inputs, for the Spark engine (so that it counts what the local
engine counts).

Spark's CSV reader skips blank lines (empty, or only spaces and control characters) without a
word, while the local engine reads such a line as a record whose cells are all missing: it
stops there ("missing value ... on row r of 'f.csv'") unless ``drop_missing`` drops it.  A
silent skip would change the counts the user thinks were checked, so the Spark engine does as
the local one: when ``drop_missing`` is off it reads its CSV inputs once more as plain text
(:func:`has_blank_line`: one pass over the lines in the JVM, no parsing, no row sent to
Python) and a blank line is the local engine's missing-value error at its row (found by
:func:`first_blank_line`, one more pass, only then); with ``drop_missing`` both engines
drop it.
Rows are the file's physical lines (the header is row 1), as the local engine numbers them.

A NUL byte anywhere in a CSV file makes the local engine refuse the whole file before reading
its rows (:func:`dprange.io.check_no_nul`), while Spark's reader skipped a line of NULs as
blank (Java's ``trim``) and read other NULs as text: :func:`scan_lines` finds the files that
hold one, in the same pass over the text that looks for blank lines.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

#: The characters a blank line consists of: those Spark's CSV reader trims away before it
#: skips a line (Java's ``String.trim``: code points up to the space).
BLANK_CHARACTERS = "".join(chr(c) for c in range(33))


def _split_lines(batches) -> Iterator[tuple[tuple[str, int], np.ndarray]]:
    """((file, start byte), whether each line is blank) for every run of lines of one input
    split in the Arrow batches of (line, file, start)."""
    import pyarrow.compute as pc  # noqa: PLC0415 - present wherever Spark's Arrow path runs

    for batch in batches:
        trimmed = pc.utf8_length(pc.ascii_trim(batch.column(0), characters=BLANK_CHARACTERS))  # O(bytes)
        blank = np.asarray(pc.equal(trimmed, 0).to_numpy(zero_copy_only=False), dtype=bool)
        files = np.asarray(batch.column(1).to_numpy(zero_copy_only=False), dtype=object)
        starts = np.asarray(batch.column(2).to_numpy(zero_copy_only=False), dtype=np.int64)
        change = np.flatnonzero((files[1:] != files[:-1]) | (starts[1:] != starts[:-1])) + 1
        bounds = [0, *change.tolist(), batch.num_rows]
        for a, b in zip(bounds[:-1], bounds[1:]):
            if a < b:
                yield (str(files[a]), int(starts[a])), blank[a:b]


#: A blank line as a Java regular expression (whole line): code points up to the space only.
_BLANK_REGEX = "^[\\x00-\\x20]*$"


def _is_blank(value):
    """The Spark column expression "this line is blank"; the regular expression runs only on
    lines that are empty or start with a space or control character (a data line nearly
    always starts with a visible character: one byte compared)."""
    from pyspark.sql import functions as F  # noqa: PLC0415 - imported only when Spark is used

    return (F.length(value) == 0) | ((F.substring(value, 1, 1) <= " ") & value.rlike(_BLANK_REGEX))


def has_blank_line(spark, files: list[str]) -> bool:
    """Whether some line of ``files`` is blank: one pass over the text that stops at the first
    (the common case, none, costs about one plain read of the lines)."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    return bool(files) and not spark.read.text(files).filter(_is_blank(F.col("value"))).isEmpty()


def scan_lines(spark, files: list[str]) -> tuple[list[str], bool]:
    """(the files holding a NUL byte, whether some line is blank) of ``files`` read as text:
    one pass in the JVM (a byte search per line; the rare flagged lines are grouped by file),
    about one plain read of the lines."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    if not files:
        return [], False
    value = F.col("value")
    flags = (
        spark.read.text(files)
        .select(
            F.col("_metadata.file_path").alias("file"),
            value.contains("\x00").alias("nul"),
            _is_blank(value).alias("blank"),
        )
        .filter(F.col("nul") | F.col("blank"))
        .groupBy("file")
        .agg(F.max("nul").alias("nul"), F.max("blank").alias("blank"))
        .collect()
    )
    return [r["file"] for r in flags if r["nul"]], any(r["blank"] for r in flags)


def _splits(spark, files: list[str]) -> list:
    """Per input split of ``files`` read as text: (file, start byte, lines, non-blank lines,
    offset of the first blank line or -1).  Computed inside Spark (no row reaches Python):
    a line's offset in its split is its ``monotonically_increasing_id`` (the record number
    within the partition in the low 33 bits) less the split's least id."""
    from pyspark.sql import functions as F  # noqa: PLC0415 - imported only when Spark is used

    text = spark.read.text(files)  # splits lines as the CSV reader does (\n, \r\n, \r)
    lines = text.select(
        F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.file_block_start").alias("start"),
        F.monotonically_increasing_id().alias("id"),
        _is_blank(F.col("value")).alias("blank"),
    )
    per_split = lines.groupBy("file", "start").agg(  # O(lines) in the JVM, one row per split
        F.count(F.lit(1)).alias("lines"),
        F.sum(F.when(F.col("blank"), 0).otherwise(1)).alias("filled"),
        F.min("id").alias("first"),
        F.min(F.when(F.col("blank"), F.col("id"))).alias("first_blank"),
    )
    return [
        (
            r["file"],
            r["start"],
            r["lines"],
            r["filled"],
            -1 if r["first_blank"] is None else r["first_blank"] - r["first"],
        )
        for r in per_split.collect()
    ]


def first_blank_line(spark, files: list[str], rank, any_blank: bool | None = None) -> tuple[str, int] | None:
    """(file, row) of the first blank line of ``files`` (CSV, read as text), in input order:
    files by ``rank(file)``, then rows; None when there is none.  ``row`` counts the file's
    lines from 1 (the header).  ``any_blank``: whether some line is blank, when a pass over the
    text (:func:`scan_lines`) already told."""
    if any_blank is None:
        any_blank = has_blank_line(spark, files)
    if not any_blank:  # the common case: no row numbers needed
        return None
    before: dict[str, int] = {}
    for file, _start, lines, _filled, blank in sorted(_splits(spark, files), key=lambda s: (rank(s[0]), s[0], s[1])):
        if blank >= 0:
            return file, before.get(file, 0) + blank + 1
        before[file] = before.get(file, 0) + lines
    return None


def row_of_record(spark, file: str, record: int) -> int:
    """The row (line from 1, the header) of data record ``record`` (from 0; blank lines are
    not records: Spark skipped them) of the CSV ``file``.  For an error's message only: one
    pass over the file's text, and a second over one split when a blank line comes before."""
    target = record + 1  # among the non-blank lines, counted from 0 with the header
    lines_before = filled_before = 0
    for _file, start, lines, filled, _blank in sorted(_splits(spark, [file]), key=lambda s: s[1]):
        if filled_before + filled > target:
            if lines == filled:  # no blank line in this split
                return lines_before + (target - filled_before) + 1
            return lines_before + _nth_filled(spark, file, start, target - filled_before) + 1
        lines_before += lines
        filled_before += filled
    return record + 2  # not found (the file changed since): the records' numbering


def _nth_filled(spark, file: str, start: int, n: int) -> int:
    """The offset among the lines of the split of ``file`` at ``start`` of its n-th (from 0)
    non-blank line."""
    import pyarrow as pa  # noqa: PLC0415

    def body(batches) -> Iterator:
        seen = filled = 0
        found = -1
        for key, blank in _split_lines(batches):
            if key[1] != start or found >= 0:
                continue
            offsets = np.flatnonzero(~blank)
            if filled + offsets.size > n:
                found = seen + int(offsets[n - filled])
            seen += blank.size
            filled += offsets.size
        yield pa.RecordBatch.from_pydict({"offset": [found]}, schema=pa.schema([("offset", pa.int64())]))

    text = spark.read.text(file).select("value", "_metadata.file_path", "_metadata.file_block_start")
    found = [row[0] for row in text.mapInArrow(body, "offset long").collect() if row[0] >= 0]
    return found[0] if found else n

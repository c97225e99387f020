"""Lines of CSV inputs that Spark's reader passes over, for the Spark engine (so that it counts
what the local engine counts).

Spark's CSV reader skips blank lines (empty, or only spaces and control characters) without a
word, reads a row of fewer fields than the header with nulls and drops the fields past the
header's.  The local engine reads a blank line as a record whose cells are all missing (it
stops there, "missing value ... on row r of 'f.csv'", unless ``drop_missing`` drops it; in a
one-column file a blank line of other control characters is a cell it refuses), and refuses a
file holding a row of another width (:func:`dprange.io.row_width_error`, at the first such
row, whatever else the file holds) or a NUL byte (:func:`dprange.io.check_no_nul`).  The Spark
engine does as the local one: it reads its CSV inputs once more as plain text
(:func:`scan_lines`: one pass over the lines in the JVM, no parsing, no row sent to Python)
and finds the files holding a NUL or a ragged row (:func:`is_ragged`) and whether a blank line
stops the count (:func:`is_line_problem`); the row of the first one is found by
:func:`first_problem_line` (one more pass, only then) and read as the local engine reads it
(:func:`classify`).  A line's fields are its commas outside double quotes, plus one.
Rows are the file's physical lines (the header is row 1), as the local engine numbers them.

Left as they are: a file whose rows end with a trailing comma (one empty field more than the
header) is read by Spark like the others, so a mix of rows with and without it, which the
local engine refuses, is counted; lines split inside a quoted field are counted as Spark's
reader splits them.
"""

from __future__ import annotations

import csv
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


#: The characters the local engine trims from a cell (pyarrow's ``utf8_trim_whitespace`` and
#: Python's ``str.strip`` agree on them below the space): a line of only these in a one-column
#: file is a missing value there.
_TRIMMED_REGEX = "^[\\t\\n\\x0b\\f\\r\\x1c-\\x1f ]+$"


TRIMMED_CHARACTERS = "\t\n\x0b\f\r\x1c\x1d\x1e\x1f "


#: A comma outside double quotes (an even number of quotes follows it on the line).
_SEPARATOR_REGEX = ',(?=(?:[^"]*"[^"]*")*[^"]*$)'


def _has_width(value, width: int):
    """The Spark column expression "this line has ``width`` fields (or one more, empty: a
    trailing comma)": a regular expression over the commas (linear: no backtracking), or, on
    the rare lines holding a double quote, the commas outside quotes counted."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    plain = value.rlike(f"^[^,]*(?:,[^,]*){{{width - 1}}}(?:,\\s*)?$")
    fields = F.size(F.split(value, _SEPARATOR_REGEX, -1))
    quoted = (fields == width) | ((fields == width + 1) & value.rlike(",\\s*$"))
    return F.when(F.instr(value, '"') > 0, quoted).otherwise(plain)


def is_ragged(value, width: int):
    """The Spark column expression "this line is a row of another width" in a CSV file whose
    header names ``width`` columns (a trailing empty field past the header's is allowed): the
    local engine refuses such a file, whatever else is in it.  A blank line that is not empty
    is one field (a ragged row where the header names several)."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    blank = _is_blank(value)
    if width == 1:
        return ~blank & ~_has_width(value, width)
    return (~blank & ~_has_width(value, width)) | (blank & (F.length(value) > 0))


def is_line_problem(value, width: int, drop_missing: bool):
    """The Spark column expression "the local engine stops at this blank line" of a CSV file
    whose header names ``width`` columns: an empty line (or, in a one-column file, one of
    trimmed characters only) is a record of missing values, an error unless ``drop_missing``;
    in a one-column file any other blank line is a cell the engine refuses (not numeric)."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    blank = _is_blank(value)
    missing = F.length(value) == 0
    if width == 1:
        missing = missing | value.rlike(_TRIMMED_REGEX)
        return blank & (~missing | F.lit(not drop_missing))
    return blank & missing & F.lit(not drop_missing)


def classify(text: str, width: int) -> tuple[str, int]:
    """(what, fields) of a line :func:`first_problem_line` found, as the local engine reads it:
    "missing" (a record of missing values), "cell" (a one-column file's cell, which the
    engine's cell rules refuse) or "ragged" (``fields`` fields where the header names
    ``width``)."""
    if text == "" or (width == 1 and text.strip(TRIMMED_CHARACTERS) == ""):
        return "missing", width
    if text.strip(BLANK_CHARACTERS) == "":
        return ("cell", 1) if width == 1 else ("ragged", 1)
    fields = next(csv.reader([text], skipinitialspace=True), [])
    return "ragged", len(fields)


def scan_lines(spark, files: list[str], width: int, drop_missing: bool) -> tuple[list[str], list[str], bool]:
    """(the files holding a NUL byte, the files holding a row of another width
    (:func:`is_ragged`), whether some blank line stops the local engine
    (:func:`is_line_problem`)) of ``files`` read as text: one pass in the JVM (a regular
    expression over the commas of each line; the rare flagged lines are grouped by file)."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    if not files:
        return [], [], False
    value = F.col("value")
    flags = (
        spark.read.text(files)
        .select(
            F.col("_metadata.file_path").alias("file"),
            value.contains("\x00").alias("nul"),
            is_ragged(value, width).alias("ragged"),
            is_line_problem(value, width, drop_missing).alias("line"),
        )
        .filter(F.col("nul") | F.col("ragged") | F.col("line"))
        .groupBy("file")
        .agg(F.max("nul").alias("nul"), F.max("ragged").alias("ragged"), F.max("line").alias("line"))
        .collect()
    )
    nul = [r["file"] for r in flags if r["nul"]]
    return nul, [r["file"] for r in flags if r["ragged"]], any(r["line"] for r in flags)


def _splits(spark, files: list[str], problem=None) -> list:
    """Per input split of ``files`` read as text: (file, start byte, lines, non-blank lines,
    offset of the first ``problem`` line or -1, its text).  ``problem``: a column expression
    of the line ``value`` (default: blank).  Computed inside Spark (no row reaches Python):
    a line's offset in its split is its ``monotonically_increasing_id`` (the record number
    within the partition in the low 33 bits) less the split's least id."""
    from pyspark.sql import functions as F  # noqa: PLC0415 - imported only when Spark is used

    text = spark.read.text(files)  # splits lines as the CSV reader does (\n, \r\n, \r)
    value = F.col("value")
    lines = text.select(
        F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.file_block_start").alias("start"),
        F.monotonically_increasing_id().alias("id"),
        _is_blank(value).alias("blank"),
        (_is_blank(value) if problem is None else problem).alias("problem"),
        value,
    )
    flagged = F.when(F.col("problem"), F.col("id"))
    per_split = lines.groupBy("file", "start").agg(  # O(lines) in the JVM, one row per split
        F.count(F.lit(1)).alias("lines"),
        F.sum(F.when(F.col("blank"), 0).otherwise(1)).alias("filled"),
        F.min("id").alias("first"),
        F.min(flagged).alias("first_problem"),
        F.min_by(F.when(F.col("problem"), value), flagged).alias("text"),
    )
    return [
        (
            r["file"],
            r["start"],
            r["lines"],
            r["filled"],
            -1 if r["first_problem"] is None else r["first_problem"] - r["first"],
            r["text"],
        )
        for r in per_split.collect()
    ]


def first_problem_line(spark, files: list[str], rank, problem) -> tuple[str, int, str] | None:
    """(file, row, text) of the first line of ``files`` (CSV, read as text) for which the column
    expression ``problem`` of the line ``value`` holds (:func:`is_ragged`,
    :func:`is_line_problem`), in input order: files by ``rank(file)``, then rows; None when
    there is none.  ``row`` counts the file's lines from 1 (the header)."""
    before: dict[str, int] = {}
    for file, _start, lines, _filled, offset, text in sorted(
        _splits(spark, files, problem), key=lambda s: (rank(s[0]), s[0], s[1])
    ):
        if offset >= 0:
            return file, before.get(file, 0) + offset + 1, text
        before[file] = before.get(file, 0) + lines
    return None


def row_of_record(spark, file: str, record: int) -> int:
    """The row (line from 1, the header) of data record ``record`` (from 0; blank lines are
    not records: Spark skipped them) of the CSV ``file``.  For an error's message only: one
    pass over the file's text, and a second over one split when a blank line comes before."""
    target = record + 1  # among the non-blank lines, counted from 0 with the header
    lines_before = filled_before = 0
    for _file, start, lines, filled, _blank, _text in sorted(_splits(spark, [file]), key=lambda s: s[1]):
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

"""Group keys on the Spark engine: the one rule matching a row's ``by`` cell to a key, and the
candidate keys of a private group-by with their distinct ids, counted by Spark (private: only
:class:`~dprange.privacy.partition_selection.PartitionSelection` may see them).

A row's key is labelled as :mod:`dprange.engines.key_counts` labels it in memory: text without
surrounding white space (Python's ``str.strip``; empty cells and missing markers dropped),
integers and booleans as integers, floats as numbers (integral ones as integers, NaN dropped),
decimals and other types by their text.
CSV columns are text on both engines, so the same files give the same candidate keys.

Counting (:func:`spark_key_counts`): with a privacy unit, the distinct (id, key) pairs; each id
keeps the m = ``max_keys_per_id`` of its keys ranked lowest by ``xxhash64`` of (secret, id,
key) under a 62-bit secret drawn from the secure source per release (a ``Window`` per id): a
uniformly random choice of m of its keys that depends on its own keys and the secret only, the
law of :class:`~dprange.engines.key_counts.KeyBounder` (not the same draws: with fewer than an
id's keys kept, the keys chosen differ between engines; with m at least every id's number of
keys the counts are identical).  Then distinct ids per key (``groupBy`` key ``count``); without
a unit each row is one id (m = 1: rows per key).  Only (key, count) pairs reach the driver, at
most :data:`MAX_SPARK_KEYS` of them.
"""

from __future__ import annotations

import math

import numpy as np

from ..columns import MISSING_MARKERS
from ..errors import DataError, ParameterError
from .key_counts import _sort_key
from .spark import SparkFailures, _check_columns, _describe, _describe_frame, get_session, is_spark_frame, read_files

#: The most distinct keys a private group-by on Spark collects to the driver (beyond it the
#: release is refused, after it is charged: declare the keys with ``groups=``).
MAX_SPARK_KEYS = 100_000

#: White space at either end of a text key, as Python's ``str.strip`` removes it (Java's
#: Unicode ``\s`` and the separators U+001C-U+001F, which ``str.isspace`` also counts).
_ENDS = r"(?U)^[\s\x1c-\x1f]+|[\s\x1c-\x1f]+$"


def input_frame(data, names: list[str], spark=None) -> tuple:
    """(format or None, DataFrame) of a Spark DataFrame or of files in one format, holding
    the columns ``names`` (DataError naming a missing one)."""
    if is_spark_frame(data):
        kind, frame = None, data
    else:
        frames = read_files(get_session(spark), data)
        if len(frames) > 1:
            raise ParameterError("privacy_id and by= on Spark need the input in one format (CSV or Parquet)")
        kind, frame = frames[0]
    _check_columns(frame, names, _describe(data) if kind is not None else "the Spark DataFrame")
    return kind, frame


def id_text(frame, id_column: str, what: str):
    """The id of every row as trimmed text; DataError if a row has none (it cannot be bounded).
    ``what``: the input as failures name it."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    ident = F.trim(F.col(id_column).cast("string"))
    with SparkFailures(what):
        missing = frame.filter(ident.isNull() | (ident == "")).limit(1).count()
    if missing:
        raise DataError("some rows have a missing id; drop them or fill the id column")
    return ident


def _kind(frame, by: str) -> str:
    """'integer', 'real' or 'text': how the ``by`` column's keys are labelled."""
    from pyspark.sql import types as T  # noqa: PLC0415

    data_type = frame.schema[by].dataType
    if isinstance(data_type, (T.IntegralType, T.BooleanType)):
        return "integer"
    if isinstance(data_type, T.NumericType) and not isinstance(data_type, T.DecimalType):
        return "real"
    return "text"  # decimals are Decimal objects in memory, labelled by their text there too


def key_column(frame, by: str, *, markers: bool = True):
    """(every row's key as labelled (module doc), null where missing; its kind).  With
    ``markers=False`` text that is a missing marker ("NA") is kept: a declared key matches it."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    kind = _kind(frame, by)
    if kind == "integer":
        return F.col(by).cast("long"), kind
    if kind == "real":
        value = F.col(by).cast("double")
        return F.when(~F.isnan(value), value), kind
    text = F.regexp_replace(F.col(by).cast("string"), _ENDS, "")
    return (F.when(~text.isin(*sorted(MISSING_MARKERS)), text) if markers else text), kind


def group_index(frame, by: str, keys: list):
    """Every row's index among the declared ``keys`` (null for another key or a missing one),
    by the rule of :meth:`dprange.api.units.Grouping.indices`: text compared stripped, numbers
    as numbers (a key that is no number never matches a numeric column)."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    key, kind = key_column(frame, by, markers=False)
    lookup: dict = {}
    for index, declared in enumerate(keys):  # a later duplicate wins, as in memory
        match = _as_key(declared, kind)
        if match is not None:
            lookup[match] = index
    if not lookup:
        return F.lit(None).cast("int")
    stored = {"integer": "long", "real": "double", "text": "string"}[kind]
    return F.create_map(*[x for k, i in lookup.items() for x in (F.lit(k).cast(stored), F.lit(i))])[key]


def _as_key(declared, kind: str):
    """The declared key as the ``key_column`` of a column of this kind holds it (None: never matches)."""
    if kind == "text":
        return str(declared).strip()
    if isinstance(declared, (int, np.integer)) and not isinstance(declared, bool):
        number: float | int = int(declared)
    else:
        try:
            number = float(declared)
        except (TypeError, ValueError):
            return None
        if not math.isfinite(number):
            return None
    if kind == "real":
        return float(number)
    return int(number) if float(number).is_integer() else None


def spark_key_counts(
    data, by: str, *, id_column: str | None, max_keys_per_id: int, rng, spark=None, limit: int = MAX_SPARK_KEYS
) -> tuple[list, np.ndarray]:
    """(the keys present, sorted; the distinct ids of each after bounding every id to
    ``max_keys_per_id`` keys), counted by Spark (module doc); ``rng`` (the secure source)
    draws the secret of the keyed hash.  More than ``limit`` keys is a DataError."""
    from pyspark.sql import Window  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: PLC0415

    names = [by] if id_column is None else [by, id_column]
    kind, frame = input_frame(data, names, spark)
    key, label = key_column(frame, by)
    columns = [key.alias("_dprange_k")]
    if id_column is not None:
        columns.append(id_text(frame, id_column, _describe_frame(frame, kind)).alias("_dprange_id"))
    rows = frame.select(*columns).filter(F.col("_dprange_k").isNotNull())
    if id_column is not None:
        secret = int(rng.integers(0, 1 << 62))
        rank = F.xxhash64(F.lit(secret), F.col("_dprange_id"), F.col("_dprange_k"))
        per_id = Window.partitionBy("_dprange_id").orderBy(rank, F.col("_dprange_k"))
        rows = rows.distinct().withColumn("_dprange_rank", F.row_number().over(per_id))
        rows = rows.filter(F.col("_dprange_rank") <= int(max_keys_per_id))
    with SparkFailures(_describe_frame(frame, kind)):
        counted = rows.groupBy("_dprange_k").count().limit(limit + 1).collect()
    if len(counted) > limit:
        raise DataError(
            f"private key selection on Spark takes at most {limit} distinct keys, and the column {by!r} holds more; "
            "declare the keys with groups=[...]"
        )
    labels = [_label(row[0], label) for row in counted]
    order = sorted(range(len(labels)), key=lambda i: _sort_key(labels[i]))
    return [labels[i] for i in order], np.array([counted[i][1] for i in order], dtype=np.int64)


def _label(value, kind: str):
    """A collected key as the in-memory label: integral reals as integers."""
    if kind == "real" and float(value).is_integer():
        return int(value)
    return value

"""Privacy units and group-by on the Spark engine: the bounded (group, bin) counts of
:func:`dprange.api.units.unit_release`, counted by Spark (docs/privacy.md, "Privacy units")."""

from __future__ import annotations

import numpy as np

from ..domain import Domain, ProductDomain
from ..errors import DataError, ParameterError
from .spark import (
    SparkFailures,
    _check_columns,
    _describe,
    _describe_frame,
    get_session,
    is_spark_frame,
    read_files,
    spark_histogram,
)


def spark_bounded_counts(
    data,
    column: str,
    domain: Domain,
    *,
    id_column: str | None,
    by: str | None,
    keys: list,
    bounder,
    clip: bool = False,
    drop_missing: bool = False,
    spark=None,
) -> np.ndarray:
    """Exact (private!) bounded counts, shape (groups, bins), counted by Spark: rows whose
    ``by`` key (compared as text, without surrounding spaces) is one of ``keys``; with an
    ``id_column``, every id keeps the rows of its ``bounder.m`` groups ranked lowest by a
    keyed hash of (id, group) (``xxhash64`` under a 62-bit secret from the secure source) and,
    in each, its ``bounder.k`` rows with the lowest ``rand`` (seeded from the secure source):
    ``groupBy`` id and group by windows, as :mod:`dprange.engines.bounding` does in memory
    (the same law; not the same draws).  Then the (group, value) pairs are counted as a
    2-D histogram by :func:`spark_histogram`."""
    from pyspark.sql import Window  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: PLC0415

    if is_spark_frame(data):
        frames = [(None, data)]
    else:
        frames = read_files(get_session(spark), data)
        if len(frames) > 1:
            raise ParameterError("privacy_id and by= on Spark need the input in one format (CSV or Parquet)")
    kind, frame = frames[0]
    names = [column] + [c for c in (id_column, by) if c is not None]
    _check_columns(frame, names, _describe(data) if kind is not None else "the Spark DataFrame")
    if by is None:
        frame = frame.withColumn("_dprange_g", F.lit(0))
    else:
        mapping = F.create_map(*[F.lit(x) for i, key in enumerate(keys) for x in (str(key).strip(), i)])
        frame = frame.withColumn("_dprange_g", mapping[F.trim(F.col(by).cast("string"))])
        frame = frame.filter(F.col("_dprange_g").isNotNull())
    if id_column is not None:
        ident = F.trim(F.col(id_column).cast("string"))
        missing = frame.filter(ident.isNull() | (ident == "")).limit(1).count()
        if missing:
            raise DataError("some rows have a missing id; drop them or fill the id column")
        seed, secret = (int(v) for v in bounder.rng.integers(0, 2**62, size=2))
        frame = frame.withColumn("_dprange_id", ident).withColumn("_dprange_key", F.rand(seed))
        rows = Window.partitionBy("_dprange_id", "_dprange_g").orderBy("_dprange_key")
        frame = frame.withColumn("_dprange_row", F.row_number().over(rows)).filter(F.col("_dprange_row") <= bounder.k)
        if len(keys) > bounder.m:
            rank = F.xxhash64(F.lit(secret), F.col("_dprange_id"), F.col("_dprange_g"))
            groups = Window.partitionBy("_dprange_id").orderBy(rank)
            frame = frame.withColumn("_dprange_rank", F.dense_rank().over(groups))
            frame = frame.filter(F.col("_dprange_rank") <= bounder.m)
    pairs = frame.select(F.col("_dprange_g").cast("long").alias("_dprange_g"), F.col(column))
    grid = ProductDomain([Domain.integers(0, max(len(keys), 1) - 1), domain])
    with SparkFailures(_describe_frame(frame, kind)):
        return spark_histogram(pairs, ["_dprange_g", column], grid, clip=clip, drop_missing=drop_missing)

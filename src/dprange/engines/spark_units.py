"""Privacy units and group-by on the Spark engine: the bounded (group, bin) counts of
:func:`dprange.api.units.unit_release`, counted by Spark (docs/privacy.md, "Privacy units")."""

from __future__ import annotations

import numpy as np

from ..domain import Domain, ProductDomain
from .spark import SparkFailures, _describe_frame, spark_histogram
from .spark_keys import group_index, id_text, input_frame


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
    ``by`` key is one of ``keys`` (:func:`~dprange.engines.spark_keys.group_index`: text
    compared without surrounding white space, numbers as numbers); with an
    ``id_column``, every id keeps the rows of its ``bounder.m`` groups ranked lowest by a
    keyed hash of (id, group) (``xxhash64`` under a 62-bit secret from the secure source) and,
    in each, its ``bounder.k`` rows with the lowest ``rand`` (seeded from the secure source):
    ``groupBy`` id and group by windows, as :mod:`dprange.engines.bounding` does in memory
    (the same law; not the same draws).  Then the (group, value) pairs are counted as a
    2-D histogram by :func:`spark_histogram`."""
    from pyspark.sql import Window  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: PLC0415

    names = [column] + [c for c in (id_column, by) if c is not None]
    kind, frame = input_frame(data, names, spark)
    if by is None:
        frame = frame.withColumn("_dprange_g", F.lit(0))
    else:
        frame = frame.withColumn("_dprange_g", group_index(frame, by, keys))
        frame = frame.filter(F.col("_dprange_g").isNotNull())
    if id_column is not None:
        ident = id_text(frame, id_column, _describe_frame(frame, kind))
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

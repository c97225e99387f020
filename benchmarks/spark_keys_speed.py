"""Private group keys on the Spark engine: time of a grouped release whose keys are selected
privately (``by=`` without ``groups=``, delta > 0) against the same release with the keys
declared, side by side in one Spark session, as JSON.

The Parquet file of ``units_speed.py`` (``--rows`` rows, ``--ids`` ids, 50 integer keys,
values over 1024 bins) is generated in a temporary folder; both cases bound each id to
k = ``--k`` rows and m = ``--m`` keys, at epsilon 1 (delta 1e-6 for the private keys), on
``--master`` (default ``local[2]``).  One warm-up release first (Spark compiles its plans),
then ``--repeat`` rounds, the cases in turn; medians and their ratio are reported.  The
private case adds one pass over the key and id columns (the distinct (id, key) pairs, ranked
per id by a keyed hash, counted per key; docs/privacy.md, "Private keys").  Timings depend on
the machine's load: say how loaded it was when quoting them.

    python benchmarks/spark_keys_speed.py                  # 10^6 rows, 10^5 ids
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from units_speed import (
    add_data_arguments,
    machine,
    write_data,
)  # the sibling script: benchmarks/ is on sys.path when run

import dprange


def session(master: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # noqa: PLC0415 (optional: the spark extra)

    spark = (
        SparkSession.builder.master(master)
        .appName("dprange-spark-keys")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(parser, rows=10**6, ids=10**5)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    load_before = os.getloadavg()
    spark = session(args.master)
    domain = dprange.Domain.integers(0, 1023)
    common = {
        "engine": "spark",
        "spark": spark,
        "by": "g",
        "privacy_id": "id",
        "max_rows_per_id": args.k,
        "max_groups_per_id": args.m,
        "mechanism": "hierarchical",
    }
    cases = {"declared_keys": {"groups": list(range(50))}, "private_keys": {"delta": 1e-6}}
    seconds: dict[str, list[float]] = {case: [] for case in cases}
    kept = {}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "units.parquet")
        write_data(path, args.rows, args.ids)
        dprange.release_files(path, "x", domain, 1.0, **common, **cases["declared_keys"])  # warm-up
        for _ in range(args.repeat):
            for case, extra in cases.items():
                start = time.perf_counter()
                grouped = dprange.release_files(path, "x", domain, 1.0, **common, **extra)
                seconds[case].append(time.perf_counter() - start)
                kept[case] = len(grouped.keys)
    spark.stop()
    medians = {case: statistics.median(values) for case, values in seconds.items()}
    report = {
        "benchmark": "spark_keys_speed",
        "rows": args.rows,
        "ids": args.ids,
        "keys": 50,
        "bins": 1024,
        "max_rows_per_id": args.k,
        "max_groups_per_id": args.m,
        "epsilon": 1.0,
        "delta_private_keys": 1e-6,
        "master": args.master,
        "repeat": args.repeat,
        "machine": machine(load_before),
        "seconds": seconds,
        "median_seconds": medians,
        "keys_kept": kept,
        "private_over_declared": medians["private_keys"] / medians["declared_keys"],
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

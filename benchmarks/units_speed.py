"""Privacy units on the local streaming engine: time and peak memory of a grouped release with
contribution bounding against the same grouped release without ids, as JSON.

A Parquet file (``--rows`` rows, ``--ids`` ids, 50 groups, values over 1024 bins, 2^20 rows
per row group) is generated in a temporary folder.  Each case runs in a fresh Python process
(its own peak resident memory, ``VmHWM``, and CPU seconds), side by side, ``--repeat`` rounds in
turn; medians are reported:

* ``grouped``: ``release_files(..., by="g", groups=50 keys)`` (one row one person);
* ``grouped_with_ids``: the same with ``privacy_id="id", max_rows_per_id=k`` (``--k``) and
  ``max_groups_per_id=m`` (``--m``): the streaming state of kept rows (docs/privacy.md);
* ``imports_only``: the baseline.

Target (issue 33): 10^7 rows, 10^6 ids, within 3x of ``grouped`` and under 1 GB.  Timings
depend on the machine's load: say how loaded it was when quoting them.

    python benchmarks/units_speed.py                 # 10^7 rows, 10^6 ids
    python benchmarks/units_speed.py --rows 1000000 --ids 100000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

import numpy as np

CASE = r"""
import json, resource, sys, time
import pyarrow.parquet, dprange  # imports are not timed
path, case, k, m = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
domain = dprange.Domain.integers(0, 1023)
keys = list(range(50))


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


start, cpu_start = time.perf_counter(), cpu()
if case == "grouped":
    dprange.release_files(path, "x", domain, 1.0, by="g", groups=keys, mechanism="hierarchical")
elif case == "grouped_with_ids":
    dprange.release_files(
        path, "x", domain, 1.0, by="g", groups=keys, mechanism="hierarchical",
        privacy_id="id", max_rows_per_id=k, max_groups_per_id=m,
    )
seconds, cpu_seconds = time.perf_counter() - start, cpu() - cpu_start
with open("/proc/self/status") as fh:
    peak = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM"))
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds, "peak_rss_bytes": peak}))
"""

CASES = ("imports_only", "grouped", "grouped_with_ids")


def write_data(path: str, rows: int, ids: int, seed: int = 0) -> None:
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    chunk = 1 << 20
    schema = pa.schema([("id", pa.int64()), ("g", pa.int64()), ("x", pa.int64())])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, chunk):
            size = min(chunk, rows - start)
            person = rng.integers(0, ids, size=size)
            table = pa.table(
                {
                    "id": person,
                    "g": (person * 7 + rng.integers(0, 2, size=size)) % 50,  # mostly one group per id
                    "x": np.minimum(rng.geometric(1 / 200, size=size), 1023),
                },
                schema=schema,
            )
            writer.write_table(table)


def run_case(path: str, case: str, k: int, m: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CASE, path, case, str(k), str(m)], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def add_data_arguments(parser: argparse.ArgumentParser, *, rows: int, ids: int) -> None:
    """The data and bounding options (also of ``spark_keys_speed.py``, on the same data)."""
    parser.add_argument("--rows", type=int, default=rows)
    parser.add_argument("--ids", type=int, default=ids)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--m", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)


def machine(load_before: tuple) -> dict:
    """What the report says of the machine: cores, Python, load before and after."""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(parser, rows=10**7, ids=10**6)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "units.parquet")
        write_data(path, args.rows, args.ids)
        runs: dict[str, list[dict]] = {case: [] for case in CASES}
        for _ in range(args.repeat):
            for case in CASES:
                runs[case].append(run_case(path, case, args.k, args.m))
    medians = {
        case: {key: statistics.median(r[key] for r in results) for key in results[0]} for case, results in runs.items()
    }
    report = {
        "benchmark": "units_speed",
        "rows": args.rows,
        "ids": args.ids,
        "groups": 50,
        "bins": 1024,
        "max_rows_per_id": args.k,
        "max_groups_per_id": args.m,
        "epsilon": 1.0,
        "repeat": args.repeat,
        "machine": machine(load_before),
        "medians": medians,
        "time_with_ids_over_without": medians["grouped_with_ids"]["seconds"] / medians["grouped"]["seconds"],
        "cpu_with_ids_over_without": medians["grouped_with_ids"]["cpu_seconds"] / medians["grouped"]["cpu_seconds"],
        "peak_with_ids_gib": medians["grouped_with_ids"]["peak_rss_bytes"] / 2**30,
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

"""The engines against plain readers: throughput, CPU seconds and peak memory, as JSON.

A Parquet and a CSV file of one float64 column (lognormal incomes, plus an id column) are
generated in a temporary folder.  Each case runs in a fresh Python process, so that its peak
resident memory (``VmHWM``) and its CPU seconds (``getrusage``: every thread, user + system)
are its own; the cases run side by side, ``--repeat`` rounds in turn, and the medians are
reported:

* ``pyarrow_read``: pyarrow reads the column whole (``pq.read_table`` / ``pacsv.read_csv``
  with ``include_columns``); ``pyarrow_typed_read`` (CSV): the same with the column's type
  given (``column_types``), the fastest plain CSV reader here; ``pandas_read`` (CSV):
  ``pandas.read_csv(usecols=...)``;
* ``in_memory_release``: ``dprange.io.read_column`` + ``dprange.release``;
* ``streaming_release``: ``dprange.release_files`` (the local streaming engine);
* ``spark_release`` (``--spark``): ``release_files(..., engine="spark")`` on ``local[*]``;
  the session's start is timed apart (``spark_start_seconds``), and the CPU seconds are the
  Python driver's only (the JVM and its Python workers are other processes);
* ``imports_only``: the baseline (Python, numpy, pandas, pyarrow and dprange imported).

Targets (issue 12): peak RSS under 1 GB whatever the rows; Parquet at no less than half the
throughput of pyarrow's read (``time_over_plain_read`` <= 2); CSV within 1.5x of the fastest
plain reader.  ``--big`` adds the 10^8-row Parquet file (about 0.8 GB; pyarrow's whole read
holds it in memory, the streaming engine does not).  Timings depend on the machine's load:
say how loaded it was when quoting them.

    python benchmarks/engines.py            # 10^7 rows
    python benchmarks/engines.py --quick    # 10^6 rows
    python benchmarks/engines.py --big --spark
    python benchmarks/engines.py --format csv   # the CSV cases only
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
import json, os, resource, sys, time
import pandas, pyarrow.csv, pyarrow.parquet, dprange, dprange.io  # imports are not timed
kind, path, case = sys.argv[1:4]
domain = dprange.Domain.interval(0.0, 1e6, 1024)
extra = {}
if case == "spark_release":
    from dprange.engines.spark import get_session
    start = time.perf_counter()
    get_session("local[*]")
    extra["spark_start_seconds"] = time.perf_counter() - start


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


start, cpu_start = time.perf_counter(), cpu()
rows = None
if case == "imports_only":
    pass
elif case == "pyarrow_read" and kind == "parquet":
    rows = pyarrow.parquet.read_table(path, columns=["income"]).num_rows
elif case in ("pyarrow_read", "pyarrow_typed_read"):
    import pyarrow as pa
    import pyarrow.csv as pacsv
    types = {"income": pa.float64()} if case == "pyarrow_typed_read" else {}
    options = pacsv.ConvertOptions(include_columns=["income"], column_types=types)
    rows = pacsv.read_csv(path, convert_options=options).num_rows
elif case == "pandas_read":
    rows = len(pandas.read_csv(path, usecols=["income"]))
elif case == "in_memory_release":
    values = dprange.io.read_column(path, "income")
    dprange.release(values, domain, 1.0, mechanism="hierarchical", clip=True)
elif case == "streaming_release":
    dprange.release_files(path, "income", domain, 1.0, mechanism="hierarchical", clip=True)
elif case == "spark_release":
    dprange.release_files(path, "income", domain, 1.0, mechanism="hierarchical", clip=True, engine="spark")
seconds, cpu_seconds = time.perf_counter() - start, cpu() - cpu_start
with open("/proc/self/status") as fh:  # this process's own high-water mark (ru_maxrss survives exec)
    peak = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM"))
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds, "peak_rss_bytes": peak, "rows": rows, **extra}))
"""

PLAIN_READS = ("pyarrow_read", "pyarrow_typed_read", "pandas_read")


def make_files(folder: str, rows: int, seed: int = 1, *, csv: bool = True, suffix: str = "") -> dict[str, str]:
    """The Parquet (and CSV) inputs, written in chunks (the generator's memory stays small)."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    parquet = os.path.join(folder, f"incomes{suffix}.parquet")
    csv_path = os.path.join(folder, f"incomes{suffix}.csv")
    chunk = 1_000_000
    schema = pa.schema([("id", pa.int64()), ("income", pa.float64())])
    with pq.ParquetWriter(parquet, schema) as writer:
        fh = open(csv_path, "w", encoding="utf-8") if csv else None
        try:
            if fh:
                fh.write("id,income\n")
            for start in range(0, rows, chunk):
                size = min(chunk, rows - start)
                ids = np.arange(start, start + size)
                income = np.round(rng.lognormal(10.5, 0.8, size), 2)
                writer.write_table(pa.table({"id": ids, "income": income}, schema=schema))
                if fh:
                    np.savetxt(fh, np.column_stack([ids, income]), fmt=["%d", "%.2f"], delimiter=",")
        finally:
            if fh:
                fh.close()
    return {"parquet": parquet, "csv": csv_path} if csv else {"parquet": parquet}


def run_case(kind: str, path: str, case: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CASE, kind, path, case], capture_output=True, text=True, check=True, env=dict(os.environ)
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def cases_for(kind: str, spark: bool) -> list[str]:
    cases = ["imports_only", "pyarrow_read", "streaming_release", "in_memory_release"]
    if kind == "csv":
        cases[2:2] = ["pyarrow_typed_read", "pandas_read"]
    if spark:
        cases.append("spark_release")
    return cases


def measure(kind: str, path: str, rows: int, cases: list[str], repeat: int, label: str) -> list[dict]:
    """Every case ``repeat`` times, in turn (side by side), summarised by medians."""
    runs: dict[str, list[dict]] = {case: [] for case in cases}
    for _ in range(repeat):
        for case in cases:
            runs[case].append(run_case(kind, path, case))
    med = {
        case: {key: statistics.median(r[key] for r in rs) for key in rs[0] if key != "rows"}
        for case, rs in runs.items()
    }
    plain = [c for c in cases if c in PLAIN_READS]
    fastest = min(plain, key=lambda c: med[c]["seconds"])
    fastest_cpu = min(plain, key=lambda c: med[c]["cpu_seconds"])
    results = []
    for case, m in med.items():
        entry = {
            "format": kind,
            "file": label,
            "case": case,
            "rows": rows,
            "file_bytes": os.path.getsize(path),
            "runs": repeat,
            "seconds": round(m["seconds"], 3),
            "cpu_seconds": round(m["cpu_seconds"], 3),
            "rows_per_s": round(rows / m["seconds"]),
            "peak_rss_mib": round(m["peak_rss_bytes"] / 2**20, 1),
            "fastest_plain_read": fastest,
            "time_over_fastest_plain_read": round(m["seconds"] / med[fastest]["seconds"], 2),
            "cpu_over_fastest_plain_read": round(m["cpu_seconds"] / med[fastest_cpu]["cpu_seconds"], 2),
        }
        if "spark_start_seconds" in m:
            entry["spark_start_seconds"] = round(m["spark_start_seconds"], 2)
            entry["time_over_streaming_release"] = round(m["seconds"] / med["streaming_release"]["seconds"], 2)
        results.append(entry)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10^6 rows instead of 10^7")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every case (medians reported)")
    parser.add_argument("--big", action="store_true", help="also a 10^8-row Parquet file (slow to generate)")
    parser.add_argument("--spark", action="store_true", help="also the Spark engine in local mode")
    parser.add_argument("--format", choices=["csv", "parquet"], default=None, help="only this format's cases")
    args = parser.parse_args()
    rows = args.rows or (10**6 if args.quick else 10**7)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        files = make_files(folder, rows)
        for kind, path in files.items():
            if args.format not in (None, kind):
                continue
            results.extend(measure(kind, path, rows, cases_for(kind, args.spark), args.repeat, "small"))
        if args.big:
            big_rows = 10**8
            big = make_files(folder, big_rows, seed=2, csv=False, suffix="-big")["parquet"]
            cases = ["pyarrow_read", "streaming_release"] + (["spark_release"] if args.spark else [])
            results.extend(measure("parquet", big, big_rows, cases, max(1, args.repeat // 2), "big"))
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    report = {
        "benchmark": "engines",
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_at_end": load,
        "results": results,
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

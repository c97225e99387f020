"""The local streaming engine against plain readers: throughput and peak memory, as JSON.

A Parquet and a CSV file of one float64 column (lognormal incomes, plus an id column) are
generated in a temporary folder.  Each case runs in a fresh Python process, so that its peak
resident memory (``ru_maxrss``) is its own:

* ``pyarrow_read``: pyarrow reads the column whole (``pq.read_table`` / ``pacsv.read_csv``);
* ``pandas_read`` (CSV only): ``pandas.read_csv(usecols=...)``;
* ``in_memory_release``: ``dprange.io.read_column`` + ``dprange.release`` (today's path);
* ``streaming_release``: ``dprange.release_files`` (the streaming engine, bounded memory);
* ``imports_only``: the baseline (Python, numpy, pandas, pyarrow and dprange imported).

Targets (issue 12): peak RSS under 1 GB whatever the rows; Parquet at no less than half the
throughput of pyarrow's read; CSV within 1.5x of the fastest plain reader.

    python benchmarks/engines.py            # 10^7 rows
    python benchmarks/engines.py --quick    # 10^6 rows
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

import numpy as np

CASE = r"""
import json, sys, time
import pandas, pyarrow.csv, pyarrow.parquet, dprange  # imports are not timed
kind, path, case = sys.argv[1:4]
start = time.perf_counter()
if case == "imports_only":
    rows = None
elif case == "pyarrow_read" and kind == "parquet":
    import pyarrow.parquet as pq
    rows = pq.read_table(path, columns=["income"]).num_rows
elif case == "pyarrow_read":
    import pyarrow.csv as pacsv
    rows = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(include_columns=["income"])).num_rows
elif case == "pandas_read":
    import pandas as pd
    rows = len(pd.read_csv(path, usecols=["income"]))
else:
    import dprange
    domain = dprange.Domain.interval(0.0, 1e6, 1024)
    if case == "in_memory_release":
        values = dprange.io.read_column(path, "income")
        rel = dprange.release(values, domain, 1.0, mechanism="hierarchical", clip=True)
    else:
        rel = dprange.release_files(path, "income", domain, 1.0, mechanism="hierarchical", clip=True)
    rows = None
seconds = time.perf_counter() - start
with open("/proc/self/status") as fh:  # this process's own high-water mark (ru_maxrss survives exec)
    peak = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM"))
print(json.dumps({"seconds": seconds, "peak_rss_bytes": peak, "rows": rows}))
"""


def make_files(folder: str, rows: int, seed: int = 1) -> dict[str, str]:
    """The Parquet and CSV inputs, written in chunks (the generator's memory stays small)."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    parquet = os.path.join(folder, "incomes.parquet")
    csv_path = os.path.join(folder, "incomes.csv")
    chunk = 1_000_000
    schema = pa.schema([("id", pa.int64()), ("income", pa.float64())])
    with pq.ParquetWriter(parquet, schema) as writer, open(csv_path, "w", encoding="utf-8") as fh:
        fh.write("id,income\n")
        for start in range(0, rows, chunk):
            size = min(chunk, rows - start)
            ids = np.arange(start, start + size)
            income = np.round(rng.lognormal(10.5, 0.8, size), 2)
            writer.write_table(pa.table({"id": ids, "income": income}, schema=schema))
            np.savetxt(fh, np.column_stack([ids, income]), fmt=["%d", "%.2f"], delimiter=",")
    return {"parquet": parquet, "csv": csv_path}


def run_case(kind: str, path: str, case: str) -> dict:
    env = {**os.environ}
    out = subprocess.run(
        [sys.executable, "-c", CASE, kind, path, case], capture_output=True, text=True, check=True, env=env
    )
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10^6 rows instead of 10^7")
    parser.add_argument("--rows", type=int, default=None)
    args = parser.parse_args()
    rows = args.rows or (10**6 if args.quick else 10**7)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        files = make_files(folder, rows)
        for kind, path in files.items():
            cases = ["imports_only", "pyarrow_read", "streaming_release", "in_memory_release"]
            if kind == "csv":
                cases.insert(1, "pandas_read")
            timings = {case: run_case(kind, path, case) for case in cases}
            fastest_plain = min(timings[c]["seconds"] for c in cases if c.endswith("_read"))
            for case, t in timings.items():
                results.append(
                    {
                        "format": kind,
                        "case": case,
                        "rows": rows,
                        "file_bytes": os.path.getsize(path),
                        "seconds": round(t["seconds"], 3),
                        "rows_per_s": round(rows / t["seconds"]),
                        "peak_rss_mib": round(t["peak_rss_bytes"] / 2**20, 1),
                        "time_over_fastest_plain_read": round(t["seconds"] / fastest_plain, 2),
                    }
                )
    print(
        json.dumps(
            {"benchmark": "engines", "machine": platform.machine(), "cpus": os.cpu_count(), "results": results},
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

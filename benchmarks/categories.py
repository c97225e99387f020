"""Categorical columns against numeric ones: counting time, side by side, as JSON.

A CSV and a Parquet file hold two columns of the same rows: ``cat``, text drawn from Adult's
nine workclass values plus one value outside the list (the ``other`` bin), and ``code``, the
same draws as integers 0..9.  Each round counts both columns with the local streaming engine
(:func:`dprange.engines.stream_histogram`) on ``Domain.categories(9 labels, other=True)`` and
``Domain.integers(0, 9)`` (ten bins each), and bucketizes in memory a list, a pandas Series
(object and categorical), a pyarrow array (text and dictionary) and a numpy object array of
the text against the int64 codes.  Medians over ``--repeat`` rounds, cases in turn; the ratio
is categorical over numeric.  Timings depend on the machine's load: say how loaded it was.

    python benchmarks/categories.py             # 10^6 rows
    python benchmarks/categories.py --rows 10000000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dprange import Domain
from dprange.engines import stream_histogram

LABELS = [
    "Private",
    "Self-emp-not-inc",
    "Local-gov",
    "State-gov",
    "Self-emp-inc",
    "Federal-gov",
    "Without-pay",
    "Never-worked",
    "?",
]


def timed(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 10, args.rows)
    text = np.asarray([*LABELS, "Dentist"], dtype=object)[codes]
    categories = Domain.categories(LABELS, other=True)
    integers = Domain.integers(0, 9)
    folder = tempfile.mkdtemp(prefix="dprange-categories-")
    csv_path, parquet_path = os.path.join(folder, "c.csv"), os.path.join(folder, "c.parquet")
    pd.DataFrame({"cat": text, "code": codes}).to_csv(csv_path, index=False)
    pq.write_table(pa.table({"cat": pa.array(text.tolist()), "code": codes}), parquet_path, row_group_size=1 << 17)
    expected = np.bincount(codes, minlength=10)
    cases = {
        "csv_stream": (
            lambda: stream_histogram(csv_path, "cat", categories),
            lambda: stream_histogram(csv_path, "code", integers),
        ),
        "parquet_stream": (
            lambda: stream_histogram(parquet_path, "cat", categories),
            lambda: stream_histogram(parquet_path, "code", integers),
        ),
    }
    series, arrow = pd.Series(text), pa.array(text.tolist())
    inputs = {
        "list": text.tolist(),
        "numpy_object": text,
        "pandas_object": series,
        "pandas_categorical": series.astype("category"),
        "pyarrow_text": arrow,
        "pyarrow_dictionary": arrow.dictionary_encode(),
    }
    for name, values in inputs.items():
        cases[f"memory_{name}"] = (lambda v=values: categories.histogram(v), lambda: integers.histogram(codes))
    for name, (cat, num) in cases.items():  # every case counts right before it is timed
        assert cat().tolist() == num().tolist() == expected.tolist(), name
    times: dict[str, dict[str, list[float]]] = {name: {"categorical": [], "numeric": []} for name in cases}
    for _ in range(args.repeat):
        for name, (cat, num) in cases.items():
            times[name]["categorical"].append(timed(cat))
            times[name]["numeric"].append(timed(num))
    out = {
        "rows": args.rows,
        "bins": 10,
        "repeat": args.repeat,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
        "cases": {},
    }
    for name, pair in times.items():
        cat, num = statistics.median(pair["categorical"]), statistics.median(pair["numeric"])
        out["cases"][name] = {"categorical_s": round(cat, 4), "numeric_s": round(num, 4), "ratio": round(cat / num, 2)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

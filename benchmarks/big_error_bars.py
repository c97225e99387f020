"""Many error bars at once and integer bucketizing, old path beside new, as JSON (issue 16).

* ``select`` on all ranges (what ``dprange error`` and ``mechanism="auto"`` run) at n bins,
  with the tree and Haar (Wavelet) candidates' n prefix variances from one pass (new) or
  from n O(depth) range queries (old: the same code with the one passes switched off);
* ``Release.cdf().stderr`` and ``Release.to_dict()`` (the decile intervals and bin standard
  errors the CLI writes) beside the release itself, old and new;
* ``Domain.integers(...).histogram`` of int64 records beside ``np.bincount`` and the former
  bounds-mask path.

Medians of ``--repeats`` runs (wall and CPU seconds) and the peak of numpy allocations
(tracemalloc, one extra run).  Old paths at 2^24 take minutes: ``--old-max-n`` caps them.

    python benchmarks/big_error_bars.py --quick       # 2^14 / 2^16 bins, 10^6 records
    python benchmarks/big_error_bars.py               # 2^20 / 2^24 bins, 10^8 records
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import time
import tracemalloc

import numpy as np

import dprange
from dprange import Domain, Hierarchical, analysis
from dprange.inference.tree import TreeErrorModel
from dprange.inference.wavelet import HaarEstimate

ONE_PASS_MODELS = (TreeErrorModel, HaarEstimate)


@contextlib.contextmanager
def per_query_path():
    """The code as it was: without ``prefix_variances`` every caller asks n range queries."""
    methods = [model.__dict__["prefix_variances"] for model in ONE_PASS_MODELS]
    for model in ONE_PASS_MODELS:
        delattr(model, "prefix_variances")
    try:
        yield
    finally:
        for model, method in zip(ONE_PASS_MODELS, methods):
            model.prefix_variances = method  # type: ignore[method-assign]


def measure(fn, repeats: int, setup=None) -> dict:
    """Median wall and CPU seconds of fn(setup()), and the peak numpy allocation of one run."""
    walls, cpus = [], []
    for _ in range(repeats):
        arg = setup() if setup else None
        wall, cpu = time.perf_counter(), time.process_time()
        fn(arg)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    arg = setup() if setup else None
    tracemalloc.start()
    fn(arg)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus), "peak_mb": peak / 2**20}


def both_paths(fn, repeats: int, run_old: bool, setup=None) -> dict:
    row = {"new": measure(fn, repeats, setup)}
    if run_old:
        with per_query_path():
            row["old"] = measure(fn, max(1, repeats // 2), setup)
        row["speedup_cpu"] = row["old"]["cpu_s"] / max(row["new"]["cpu_s"], 1e-9)
    return row


def select_rows(sizes, repeats, old_max_n) -> list:
    rows = []
    for n in sizes:
        chosen = {}

        def run(_):
            chosen["sel"] = analysis.select("all-range", n, 1.0, optimize_budget=False)

        row = {"task": "select all-range (dprange error)", "bins": n}
        row.update(both_paths(run, repeats, n <= old_max_n))
        row["recommended"] = repr(chosen["sel"].mechanism)
        rows.append(row)
    return rows


def release_rows(n, repeats, old_max_n) -> list:
    counts = np.random.default_rng(1).poisson(5, n)
    mechanism = Hierarchical(16)
    domain = Domain.interval(0.0, 1.0, n)

    def fresh(_=None):
        return mechanism.release(counts, 1.0, domain=domain, rng=2)

    rows = [{"task": "release (measure + infer)", "bins": n, "new": measure(fresh, repeats)}]
    for task, fn in (
        ("cdf().stderr", lambda rel: rel.cdf().stderr),
        ("to_dict (deciles + bin stderrs)", lambda rel: rel.to_dict()),
    ):
        row = {"task": task, "bins": n}
        row.update(both_paths(fn, repeats, n <= old_max_n, setup=fresh))
        rows.append(row)
    return rows


def former_integer_histogram(values, lo, hi):
    """The former int64 path: two bound masks, value - lo, bincount."""
    outside = (values < lo) | (values > hi)
    if outside.any():
        raise ValueError("out of bounds")
    return np.bincount(values - np.int64(lo), minlength=hi - lo + 1).astype(np.int64)


def bucketize_rows(records, repeats) -> list:
    rows = []
    for lo in (0, 1):
        values = np.random.default_rng(3).integers(lo, lo + 1000, records)
        domain = Domain.integers(lo, lo + 999)
        row = {
            "task": f"histogram of int64 records, Domain.integers({lo}, {lo + 999})",
            "records": records,
            "np.bincount": measure(lambda _: np.bincount(values, minlength=1000), repeats),
            "new": measure(lambda _: domain.histogram(values), repeats),
            "old": measure(lambda _: former_integer_histogram(values, lo, lo + 999), repeats),
        }
        row["new_over_bincount_cpu"] = row["new"]["cpu_s"] / max(row["np.bincount"]["cpu_s"], 1e-9)
        rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--old-max-n", type=int, default=2**20, help="largest n at which the old paths run")
    args = parser.parse_args()
    if args.quick:
        sizes, release_n, records = [2**14, 2**16], 2**16, 10**6
    else:
        sizes, release_n, records = [2**20, 2**24], 2**24, 10**8
    results = select_rows(sizes, args.repeats, args.old_max_n)
    results += release_rows(release_n, args.repeats, args.old_max_n)
    results += bucketize_rows(records, args.repeats)
    print(
        json.dumps(
            {
                "benchmark": "big_error_bars",
                "dprange": dprange.__version__,
                "machine": {
                    "cpu_count": os.cpu_count(),
                    "python": platform.python_version(),
                    "numpy": np.__version__,
                    "note": "shared machine: compare CPU seconds",
                },
                "statistic": "median over repeats; peak_mb = numpy allocations (tracemalloc)",
                "results": results,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

"""Many error bars at once and integer bucketizing, new path beside the former ones, as JSON (issue 16).

* ``select`` on all ranges (what ``dprange error`` and ``mechanism="auto"`` run) at n bins:
  new (sums of variances streamed in blocks, candidates ranked on two threads), one_pass
  (the n prefix variances listed from one top-down pass, one thread: the former path) and
  per_query (n O(depth) range queries, up to ``--old-max-n``); beside the floors: one
  ``np.cumsum`` over n float64 and building the candidates' error models alone.  The peak
  resident memory of a fresh process running ``select`` (``rss_mb``) and the whole
  ``dprange error`` command (CPU seconds of the child process, imports included);
* ``Release.cdf().stderr`` and ``Release.to_dict()`` (the decile intervals and bin standard
  errors the CLI writes) beside the release itself (ratios ``*_over_release_cpu``), new and
  old (the quantile intervals scanning every bin for each decile, as before);
* ``Domain.integers(...).histogram`` of int64 records beside ``np.bincount`` and the former
  bounds-mask path.

Medians of ``--repeats`` runs (wall and CPU seconds) and the peak of numpy allocations
(tracemalloc, one extra run).  The machine is shared: compare CPU seconds.

    python benchmarks/big_error_bars.py --quick       # 2^14 / 2^16 bins, 10^6 records
    python benchmarks/big_error_bars.py               # 2^20 / 2^24 bins, 10^8 records
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc

import numpy as np

import dprange
from dprange import Domain, Hierarchical
from dprange.analysis import error as analysis_error
from dprange.analysis import selection as analysis_selection
from dprange.answers import interval_search
from dprange.answers.interval_search import bin_sd
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


@contextlib.contextmanager
def one_pass_path():
    """The former select path: listed one-pass variances, candidates ranked on one thread."""
    sums, workers = analysis_error.variance_sums, analysis_selection.RANK_WORKERS
    analysis_error.variance_sums = lambda model: None  # type: ignore[assignment]
    analysis_selection.RANK_WORKERS = 1
    try:
        yield
    finally:
        analysis_error.variance_sums, analysis_selection.RANK_WORKERS = sums, workers


def former_crossing_bins(prefix, var_prefix, var_rest, var_total, public_total, targets, levels, k):
    """The former quantile-interval search: every bin, for every level."""
    n = prefix.size
    first, last = [], []
    for target, f in zip(targets, levels):
        d_hat = prefix - target
        half = k * bin_sd(var_prefix, var_rest, var_total, f, public_total)
        reach = np.nonzero(d_hat + half >= 0)[0]
        short = np.nonzero(d_hat - half < 0)[0]
        first.append(reach[0] if reach.size else n - 1)
        last.append(min(short[-1] + 1, n - 1) if short.size else 0)
    return np.array(first), np.array(last)


@contextlib.contextmanager
def full_scan_intervals():
    """Quantile intervals as before: every bin scanned for every level."""
    import dprange.answers.cdf as cdf_module  # noqa: PLC0415

    saved = cdf_module.crossing_bins
    cdf_module.crossing_bins = former_crossing_bins  # type: ignore[assignment]
    try:
        yield
    finally:
        cdf_module.crossing_bins = saved


def both_paths(fn, repeats: int, run_old: bool, setup=None, old=per_query_path) -> dict:
    row = {"new": measure(fn, repeats, setup)}
    if run_old:
        with old():
            row["old"] = measure(fn, max(1, repeats // 2), setup)
        row["speedup_cpu"] = row["old"]["cpu_s"] / max(row["new"]["cpu_s"], 1e-9)
    return row


SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def child(code: str) -> dict:
    """CPU seconds and peak resident memory of a fresh Python process running ``code``.

    The peak is the child's own VmHWM, read by the child: ``ru_maxrss`` would count the
    forked copy of this process before ``exec``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    peak = "print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0], file=sys.stderr)"
    setup = f"import atexit, sys; sys.path.insert(0, {SRC!r}); atexit.register(lambda: {peak})"
    command = [sys.executable, "-c", f"{setup}; {code}"]
    done = subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "wall_s": time.perf_counter() - wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "rss_mb": int(done.stderr.split()[-1]) / 1024,
    }


def select_rows(sizes, repeats, old_max_n) -> list:
    rows = []
    for n in sizes:
        chosen = {}

        def run(_):
            chosen["sel"] = analysis_selection.select("all-range", n, 1.0, optimize_budget=False)

        def models(_):
            for mech in analysis_selection.default_candidates(n, fast=n > 2**16):
                mech.error_model(n, 1.0)

        row = {"task": "select all-range (dprange error)", "bins": n, "new": measure(run, repeats)}
        with one_pass_path():
            row["one_pass"] = measure(run, max(1, repeats // 2))
        if n <= old_max_n:
            with one_pass_path(), per_query_path():
                row["per_query"] = measure(run, max(1, repeats // 2))
        row["floor_np_cumsum"] = measure(lambda _: np.cumsum(np.ones(n)), repeats)
        row["floor_error_models"] = measure(models, repeats)
        row["speedup_cpu_over_one_pass"] = row["one_pass"]["cpu_s"] / max(row["new"]["cpu_s"], 1e-9)
        row["new_fresh_process"] = child(
            f"from dprange import analysis; analysis.select('all-range', {n}, 1.0, optimize_budget=False)"
        )
        row["dprange_error_command"] = child(
            "from dprange.cli import main; "
            f"sys.argv = ['dprange', 'error', '--n', '{n}', '--workload', 'all-range', '-e', '1']; main()"
        )
        row["recommended"] = repr(chosen["sel"].mechanism)
        rows.append(row)
    return rows


def release_rows(n, repeats) -> list:
    counts = np.random.default_rng(1).poisson(5, n)
    mechanism = Hierarchical(16)
    domain = Domain.interval(0.0, 1.0, n)

    def fresh(_=None):
        return mechanism.release(counts, 1.0, domain=domain, rng=2)

    release = measure(fresh, repeats)
    rows: list = [{"task": "release (measure + infer)", "bins": n, "new": release}]
    for task, fn in (
        ("cdf().stderr", lambda rel: rel.cdf().stderr),
        ("to_dict (deciles + bin stderrs)", lambda rel: rel.to_dict()),
    ):
        row = {"task": task, "bins": n}
        row.update(both_paths(fn, repeats, True, setup=fresh, old=full_scan_intervals))
        row["new_over_release_cpu"] = row["new"]["cpu_s"] / max(release["cpu_s"], 1e-9)
        row["old_over_release_cpu"] = row["old"]["cpu_s"] / max(release["cpu_s"], 1e-9)
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
    parser.add_argument("--tasks", default="select,release,bucketize", help="comma-separated subset to run")
    args = parser.parse_args()
    if args.quick:
        sizes, release_n, records = [2**14, 2**16], 2**16, 10**6
    else:
        sizes, release_n, records = [2**20, 2**24], 2**24, 10**8
    tasks = set(args.tasks.split(","))
    results = select_rows(sizes, args.repeats, args.old_max_n) if "select" in tasks else []
    results += release_rows(release_n, args.repeats) if "release" in tasks else []
    results += bucketize_rows(records, args.repeats) if "bucketize" in tasks else []
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
                "statistic": "median over repeats; peak_mb = numpy allocations (tracemalloc); rss_mb = peak "
                "resident memory of a fresh process",
                "search_block": interval_search.SEARCH_BLOCK,
                "results": results,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

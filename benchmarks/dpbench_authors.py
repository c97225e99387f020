"""dprange beside DPBench's own implementations (``dpcomp-org/dpcomp_core``), same arrays, one process.

Protocol (Hay, Machanavajjhala, Miklau, Chen and Zhang, "Principled Evaluation of
Differentially Private Algorithms using DPBench", SIGMOD 2016), 1-D: the eight DPBench shapes
summed to ``--bins`` bins (1024 by default), scales 10^3 / 10^5 / 10^7, epsilon 0.1 and 1, all
prefixes and DPBench's 2000 random ranges (``workload.RandomRange``, seed 9001).  Each trial
draws the data once with DPBench's own sampler (``dataset.subSample`` on the file's domain,
then summed in blocks) and runs every method on that same array:

* the authors' DAWA, MWEM, HB, AHP and StructureFirst (Xu et al.'s C++), as dpcomp_core ships
  them (their privacy shortcuts: docs/data-aware.md, "Side by side with the authors' code");
* dprange's ``auto``, ``dawa``, ``mwem``, ``structure-first`` and ``auto-data``, and
  ``auto-data-loso``: auto-data with the selector trained without the cell's shape (the
  ``models`` of benchmarks/train_auto_data.py's validation file, ``--loso``), so that its
  figures describe data the selector never saw.

Error: per trial the mean over the workload's queries of (answer - truth)^2 / scale^2, averaged
over the trials.  Output: one JSON line per cell on stdout (and in ``--out``), then a JSON
summary: per pair (dprange method / authors' method, or / ``best-dpbench``: the least error of
the authors' methods in the cell) the geometric mean of the per-cell ratios, their range, the
geometric mean by scale and the worst cell (below 1: dprange better).

``--reseed`` also runs each selected authors' method a second time with other noise seeds on the
same arrays (``dpbench.DAWA~reseeded``, ...) and reports it against the first run: the ratios a
method has against itself, the noise floor of a per-cell comparison at ``--trials`` trials (one
trial's error varies tenfold and more on spiky shapes).

dpcomp_core is not a dependency of dprange: fetch and build it as benchmarks/dpbench_authors.md
says, then point ``DPCOMP_CORE`` at the clone and run this script with that environment's
Python; without it the script says what is missing and exits with status 2.

    DPCOMP_CORE=/path/to/dpcomp_core /path/to/venv/bin/python benchmarks/dpbench_authors.py \\
        [--shapes HEPTH,NETTRACE] [--trials 10] [--methods 'dprange.*'] [--also old.jsonl] \\
        [--loso auto_data_validation.json] [--out results.jsonl]
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import json
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DATA = os.path.join(REPO, "..", "shared", "data", "dpbench", "1D")
sys.path.insert(0, os.path.join(REPO, "src"))  # this checkout's dprange, also from another venv

from dpbench import FILES, log  # noqa: E402  (the sibling script: benchmarks/ is on sys.path when run)

import dprange  # noqa: E402
from dprange.data_aware.selector import Selector  # noqa: E402
from dprange.workloads import Ranges  # noqa: E402

SHAPES = FILES
SCALES = (10**3, 10**5, 10**7)
EPSILONS = (0.1, 1.0)
QUERIES = 2000
WORKLOAD_SEED = 9001  # dpcomp_core.workload.RandomRange's default seed
AUTHORS = ("dpbench.DAWA", "dpbench.MWEM", "dpbench.HB", "dpbench.AHP", "dpbench.SF")
RESEEDED = "~reseeded"
#: The noise seeds of a re-run (``--reseed``) are this far from the first run's (100 + trial).
RESEED_OFFSET = 50_000
PAIRS = (
    *((m + RESEEDED, m) for m in AUTHORS),
    ("dprange.auto-data-loso", "best-dpbench"),
    ("dprange.auto-data", "best-dpbench"),
    ("dprange.auto", "best-dpbench"),
    ("dprange.auto-data-loso", "dprange.auto"),
    ("dprange.dawa", "dpbench.DAWA"),
    ("dprange.mwem", "dpbench.MWEM"),
    ("dprange.structure-first", "dpbench.SF"),
    ("dprange.auto", "dpbench.HB"),
)
MISSING = (
    "DPBench's code (dpcomp_core) is not importable: {reason}; fetch and build it as "
    "benchmarks/dpbench_authors.md says and set DPCOMP_CORE to the clone"
)


def import_dpcomp(algorithms: tuple[str, ...]):
    """(dpcomp_core's dataset and workload modules, {name: its ``dpcomp_core.algorithm`` module}
    for ``algorithms``), with the one shim it needs under NumPy >= 1.23 (a tuple of slices for
    ``ndRangeUnion.slice``; its files are not edited), or a clear exit."""
    root = os.environ.get("DPCOMP_CORE")
    if not root or not os.path.isdir(root):
        raise SystemExit(print_missing("DPCOMP_CORE is not set to a directory"))
    sys.path.insert(0, root)
    try:  # lazy: dpcomp_core is optional and found only through DPCOMP_CORE
        from dpcomp_core import dataset, query_nd_union, workload  # noqa: PLC0415

        modules = {name: importlib.import_module(f"dpcomp_core.algorithm.{name}") for name in algorithms}
    except ImportError as error:  # an unbuilt extension or a missing clone
        raise SystemExit(print_missing(str(error))) from error
    query_nd_union.ndRangeUnion.slice = staticmethod(lambda r: tuple(slice(i, j + 1) for i, j in zip(r.lb, r.ub)))
    return dataset, workload, modules


def import_authors():
    """(dpcomp_core's dataset and workload modules, {method name: the authors' engine})."""
    dataset, workload, m = import_dpcomp(("HB", "ahp", "dawa", "mwemND", "thirdparty"))
    engines = {
        "dpbench.DAWA": m["dawa"].dawa_engine,
        "dpbench.MWEM": m["mwemND"].mwemND_engine,
        "dpbench.HB": m["HB"].HB_engine,
        "dpbench.AHP": m["ahp"].ahpND_engine,
        "dpbench.SF": m["thirdparty"].StructureFirst_engine,
    }
    return dataset, workload, engines


class Reseeded:
    """An authors' engine run with the noise seeds moved by :data:`RESEED_OFFSET`."""

    def __init__(self, engine):
        self.engine = engine

    def __call__(self):
        return self

    def Run(self, query, counts, epsilon, seed):  # dpcomp_core's engine interface
        return self.engine().Run(query, counts, epsilon, seed + RESEED_OFFSET)


def print_missing(reason: str) -> int:
    print(MISSING.format(reason=reason), file=sys.stderr)
    return 2


def cell_id(shape: str, bins: int, scale: int, epsilon: float, workload: str) -> str:
    return f"1d/{shape}/{bins}/1e{round(math.log10(scale))}/eps{epsilon:g}/{workload}"


def sample(dataset, shape: str, bins: int, scale: int, seed: int) -> np.ndarray:
    """DPBench's sample of the shape at ``scale`` on the file's domain, summed to ``bins``."""
    hist = np.load(os.path.join(DATA, SHAPES[shape])).astype(float)
    drawn = dataset.subSample(hist / hist.sum(), scale, np.random.RandomState(seed)).astype(np.int64)
    return drawn.reshape(bins, -1).sum(axis=1)


def workloads(workload, bins: int) -> dict:
    """{name: (authors' workload, lo, hi)}: all prefixes, and DPBench's random ranges."""
    prefix = workload.Prefix1D(bins)
    ranges = workload.RandomRange.oneD(None, bins, QUERIES, seed=WORKLOAD_SEED)
    lo = np.array([q.ranges[0].lb[0] for q in ranges.query_list], dtype=np.int64)
    hi = np.array([q.ranges[0].ub[0] for q in ranges.query_list], dtype=np.int64)
    return {
        "prefix": (prefix, np.zeros(bins, dtype=np.int64), np.arange(bins, dtype=np.int64)),
        "random": (ranges, lo, hi),
    }


def range_sums(estimate, lo, hi) -> np.ndarray:
    sums = np.concatenate([[0.0], np.cumsum(np.asarray(estimate, dtype=float))])
    return sums[hi + 1] - sums[lo]


def dprange_methods(loso: dict | None) -> dict:
    """{name: run(counts, epsilon, workload name, (lo, hi), shape, seed) -> estimate}."""

    def tuned(name: str) -> str:
        return "prefix" if name == "prefix" else "all-range"

    def auto(counts, epsilon, name, ranges, shape, seed):
        values = np.repeat(np.arange(counts.size), counts)
        domain = dprange.Domain.integers(0, counts.size - 1)
        workload = "prefix" if name == "prefix" else Ranges(*ranges, counts.size)
        return dprange.release(values, domain, epsilon, mechanism="auto", workload=workload, rng=seed).estimate

    def auto_data(selector_for):
        def run(counts, epsilon, name, ranges, shape, seed):
            mech = dprange.AutoData(tuned_for=tuned(name))
            mech.selector = selector_for(shape)
            return mech.release(counts, epsilon, rng=seed).estimate

        return run

    def dawa(counts, epsilon, name, ranges, shape, seed):
        return dprange.DAWA(bucket_workload=tuned(name)).release(counts, epsilon, rng=seed).estimate

    def mwem(counts, epsilon, name, ranges, shape, seed):
        return dprange.MWEM().release(counts, epsilon, rng=seed, workload=Ranges(*ranges, counts.size)).estimate

    def structure_first(counts, epsilon, name, ranges, shape, seed):
        return dprange.StructureFirst().release(counts, epsilon, rng=seed).estimate

    methods = {
        "dprange.auto": auto,
        "dprange.dawa": dawa,
        "dprange.mwem": mwem,
        "dprange.structure-first": structure_first,
        "dprange.auto-data": auto_data(lambda shape: None),
    }
    if loso is not None:
        methods["dprange.auto-data-loso"] = auto_data(lambda shape: Selector.from_dict(loso[shape]))
    return methods


def run_cell(shape, bins, scale, epsilon, trials, authors, methods, log) -> list[dict]:
    """One record per workload: every selected method's mean MSE / scale^2 over the trials."""
    dataset, workload, engines = authors
    loads = workloads(workload, bins)
    mse: dict = {name: {} for name in loads}
    seconds: dict = {}
    for t in range(trials):
        counts = sample(dataset, shape, bins, scale, seed=1 + 7919 * t)
        for method in methods:
            for name, (query, lo, hi) in loads.items():
                start = time.process_time()
                if method in engines:
                    estimate = engines[method]().Run(query, counts.astype(int), epsilon, 100 + t)
                else:
                    estimate = methods[method](counts, epsilon, name, (lo, hi), shape, 200 + t)
                seconds.setdefault(method, []).append(time.process_time() - start)
                error = range_sums(estimate, lo, hi) - range_sums(counts, lo, hi)
                mse[name].setdefault(method, []).append(float(np.mean(error**2)) / scale**2)
    log(f"{shape} {bins} {scale:g} {epsilon}: " + ", ".join(f"{m}={np.median(s):.2f}s" for m, s in seconds.items()))
    return [
        {
            "cell": cell_id(shape, bins, scale, epsilon, name),
            "shape": shape,
            "bins": bins,
            "scale": scale,
            "epsilon": epsilon,
            "workload": name,
            "trials": trials,
            "mse": {m: float(np.mean(v)) for m, v in mse[name].items()},
            "cpu_seconds_median": {m: float(np.median(s)) for m, s in seconds.items()},
        }
        for name in loads
    ]


def geo_mean(values) -> float:
    return float(np.exp(np.mean(np.log(values))))


def ratio(record: dict, ours: str, theirs: str) -> float | None:
    mse = record["mse"]
    if theirs == "best-dpbench":
        authors = [mse[m] for m in AUTHORS if m in mse]
        reference = min(authors) if len(authors) == len(AUTHORS) else None
    else:
        reference = mse.get(theirs)
    return mse[ours] / reference if ours in mse and reference else None


def ratio_stats(cells: list[tuple[str, float]]) -> dict:
    """The summary of one pair's (cell id, ratio) list: count, geometric mean, range, cells within
    1.2x and the worst cell."""
    values = [v for _, v in cells]
    return {
        "cells": len(values),
        "geo_mean": geo_mean(values),
        "min": min(values),
        "max": max(values),
        "within_1.2": sum(v <= 1.2 for v in values),
        "worst_cell": max(cells, key=lambda c: c[1])[0],
    }


def summarise(records: list[dict]) -> dict:
    pairs = {}
    for ours, theirs in PAIRS:
        cells = [(r, v) for r in records if (v := ratio(r, ours, theirs)) is not None]
        if not cells:
            continue
        pairs[f"{ours} / {theirs}"] = {
            **ratio_stats([(r["cell"], v) for r, v in cells]),
            "by_scale": {
                f"1e{round(math.log10(s))}": geo_mean([v for r, v in cells if r["scale"] == s])
                for s in sorted({r["scale"] for r, _ in cells})
            },
        }
    wins: dict = {}
    for r in records:
        authors = {m: r["mse"][m] for m in AUTHORS if m in r["mse"]}
        if authors:
            best = min(authors, key=authors.__getitem__)
            wins[best] = wins.get(best, 0) + 1
    return {"cells": len(records), "pairs": pairs, "best_dpbench_wins": wins}


def merge(records: list[dict], paths: list[str]) -> None:
    """Add the methods of earlier runs of the same cells (same seeds and trials) to ``records``."""
    for path in paths:
        with open(path) as handle:
            earlier = {r["cell"]: r for r in map(json.loads, handle) if r.get("trials")}
        for r in records:
            other = earlier.get(r["cell"])
            if other is not None and other["trials"] == r["trials"]:
                r["mse"] = {**{m: v for m, v in other["mse"].items() if m in AUTHORS}, **r["mse"]}


def method_arguments(parser) -> None:
    """``--methods`` and ``--out``, shared with benchmarks/dpbench_authors_2d.py."""
    parser.add_argument("--methods", default="*", help="comma-separated shell patterns over method names")
    parser.add_argument("--out", default=None, help="also write the cells here (JSON lines)")


def matching(names, patterns: str) -> list[str]:
    """The ``names`` matching any of the comma-separated shell ``patterns``, in order."""
    return [m for m in names if any(fnmatch.fnmatch(m, p) for p in patterns.split(","))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--bins", type=int, default=1024)
    parser.add_argument("--trials", type=int, default=10)
    method_arguments(parser)
    parser.add_argument("--loso", default=None, help="validation JSON of benchmarks/train_auto_data.py")
    parser.add_argument("--also", default="", help="comma-separated earlier results: their authors' methods")
    parser.add_argument("--reseed", action="store_true", help="re-run the selected authors' methods, other seeds")
    args = parser.parse_args(argv)
    authors = import_authors()
    loso = None
    if args.loso:
        with open(args.loso) as handle:
            validation = json.load(handle)
        loso = validation[validation["shipped"]]["models"]
    methods = {**{m: None for m in authors[2]}, **dprange_methods(loso)}
    selected = {m: methods[m] for m in matching(methods, args.methods)}
    if args.reseed:
        for m in [m for m in selected if m in authors[2]]:
            authors[2][m + RESEEDED] = Reseeded(authors[2][m])
            selected[m + RESEEDED] = None
    records = []
    for shape in args.shapes.split(","):
        for scale in SCALES:
            for epsilon in EPSILONS:
                for record in run_cell(shape, args.bins, scale, epsilon, args.trials, authors, selected, log):
                    records.append(record)
                    print(json.dumps(record), flush=True)
    merge(records, [p for p in args.also.split(",") if p])
    return finish(records, args.out, summarise(records))


def finish(records: list[dict], out: str | None, summary: dict) -> int:
    """Write the cells to ``out`` (JSON lines) when given, print the summary; exit status 0."""
    if out:
        with open(out, "w") as handle:
            handle.writelines(json.dumps(r) + "\n" for r in records)
    print(json.dumps({"summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

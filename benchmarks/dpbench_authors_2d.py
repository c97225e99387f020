"""dprange's 2-D mechanisms beside DPBench's AGrid (``dpcomp-org/dpcomp_core``), same arrays, one process.

Protocol (Hay, Machanavajjhala, Miklau, Chen and Zhang, SIGMOD 2016), 2-D: the four DPBench 2-D
shapes (256 x 256 files) summed to ``--sides`` cells per axis (64 and 256), scales 10^4 and
10^6, epsilon 0.1 and 1, DPBench's 2000 random rectangles (``workload.RandomRange``, seed 9001).
Each trial draws the data once with DPBench's own sampler (``dataset.subSample`` on the file's
domain, then summed in blocks) and runs every method on that same array: the authors' AGrid
(Qardaji, Yang and Li, ICDE 2013, as ``AG.py`` ships it: it sizes its grids from the true
total), and dprange's ``auto`` (for the rectangles), ``kd_tree``, ``hybrid_tree``,
``dawa_hilbert``, ``ugrid`` and ``agrid`` in both layouts, and ``auto-data``.

Error: per trial the mean over the rectangles of (answer - truth)^2 / scale^2, averaged over the
trials.  Output: one JSON line per cell, then a JSON summary: per dprange method the geometric
mean of its ratio to AG over the cells, their range, the cells within 1.2x and the worst cell,
and the same for ``best-dprange`` (the least error of dprange's mechanisms in the cell, every
layout counted: the best a user choosing the mechanism could get; below 1: dprange better).

Set-up as benchmarks/dpbench_authors.md says (AG needs no compiled extension):

    DPCOMP_CORE=/path/to/dpcomp_core /path/to/venv/bin/python benchmarks/dpbench_authors_2d.py \\
        [--shapes GOWALLA] [--sides 256] [--trials 20] [--methods 'dprange.agrid*'] [--out results.jsonl]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DATA = os.path.join(REPO, "..", "shared", "data", "dpbench", "2D")
sys.path.insert(0, os.path.join(REPO, "src"))  # this checkout's dprange, also from another venv

from dpbench_authors import finish, import_dpcomp, log, matching, method_arguments, ratio_stats  # noqa: E402  (benchmarks/ is on sys.path when run)

import dprange  # noqa: E402
from dprange.workloads import Rectangles  # noqa: E402

SHAPES = {
    "ADULT-2D": "Adult_2D_256_256.npy",
    "MDSALARY-OVERT": "MDSalary2D_256_256.npy",
    "STROKE": "Stroke_2D_256_256.npy",
    "GOWALLA": "checkin_256_256.npy",
}
SIDES = (64, 256)
SCALES = (10**4, 10**6)
EPSILONS = (0.1, 1.0)
QUERIES = 2000
WORKLOAD_SEED = 9001  # dpcomp_core.workload.RandomRange's default seed
AUTHORS = "dpbench.AG"
#: name -> (mechanism, its parameters, whether it takes the release's rectangles)
DPRANGE = {
    "dprange.auto": ("auto", {}, True),
    "dprange.kd_tree": ("kd_tree", {}, False),
    "dprange.hybrid_tree": ("hybrid_tree", {}, False),
    "dprange.dawa_hilbert": ("dawa_hilbert", {}, False),
    "dprange.ugrid": ("ugrid", {}, False),
    "dprange.agrid": ("agrid", {}, False),
    "dprange.ugrid-anchored": ("ugrid", {"layout": "anchored"}, False),
    "dprange.agrid-anchored": ("agrid", {"layout": "anchored"}, False),
    "dprange.auto-data": ("auto-data", {}, True),
}
#: auto-data is a choice among the others, not a mechanism of its own: not in best-dprange.
BEST_OF = tuple(m for m in DPRANGE if m != "dprange.auto-data")


def import_authors():
    """(dpcomp_core's dataset and workload modules, its AG engine), or a clear exit."""
    dataset, workload, modules = import_dpcomp(("AG",))
    return dataset, workload, modules["AG"].AG_engine


def cell_id(shape: str, side: int, scale: int, epsilon: float) -> str:
    return f"2d/{shape}/{side}x{side}/1e{round(math.log10(scale))}/eps{epsilon:g}/rect"


def sample(dataset, shape: str, side: int, scale: int, seed: int) -> np.ndarray:
    """DPBench's sample of the shape at ``scale`` on the file's 256 x 256 domain, summed in blocks."""
    hist = np.load(os.path.join(DATA, SHAPES[shape])).astype(float)
    drawn = dataset.subSample(hist / hist.sum(), scale, np.random.RandomState(seed)).astype(np.int64)
    f0, f1 = drawn.shape[0] // side, drawn.shape[1] // side
    return drawn.reshape(side, f0, side, f1).sum(axis=(1, 3))


def rectangles(workload, side: int):
    """(DPBench's random rectangles, their low corners, their high corners (inclusive))."""
    rect = workload.RandomRange(None, (side, side), QUERIES, seed=WORKLOAD_SEED)
    lo = np.array([q.ranges[0].lb for q in rect.query_list], dtype=np.int64)
    hi = np.array([q.ranges[0].ub for q in rect.query_list], dtype=np.int64)
    return rect, lo, hi


def rectangle_sums(estimate, lo, hi) -> np.ndarray:
    table = np.zeros((estimate.shape[0] + 1, estimate.shape[1] + 1))
    table[1:, 1:] = np.cumsum(np.cumsum(np.asarray(estimate, dtype=float), axis=0), axis=1)
    r0, c0, r1, c1 = lo[:, 0], lo[:, 1], hi[:, 0] + 1, hi[:, 1] + 1
    return table[r1, c1] - table[r0, c1] - table[r1, c0] + table[r0, c0]


def run_dprange(method: str, counts, epsilon, lo, hi, seed):
    name, params, takes_workload = DPRANGE[method]
    side = counts.shape[0]
    cells = np.repeat(np.arange(side * side, dtype=np.int64), counts.ravel())
    columns = list(np.divmod(cells, side))
    domain = dprange.ProductDomain([dprange.Domain.integers(0, side - 1)] * 2)
    extra = {"workload": Rectangles((side, side), lo, hi)} if takes_workload else {}
    return dprange.release_grid(columns, domain, epsilon, mechanism=name, rng=seed, **params, **extra).counts


def run_cell(shape, side, scale, epsilon, trials, authors, methods, log) -> dict:
    dataset, workload, ag_engine = authors
    query, lo, hi = rectangles(workload, side)
    mse: dict = {m: [] for m in methods}
    seconds: dict = {m: [] for m in methods}
    for t in range(trials):
        counts = sample(dataset, shape, side, scale, seed=1 + 7919 * t)
        truth = rectangle_sums(counts, lo, hi)
        for method in methods:
            start = time.process_time()
            if method == AUTHORS:
                estimate = np.asarray(ag_engine().Run(query, counts.astype(int), epsilon, 100 + t), dtype=float)
            else:
                estimate = run_dprange(method, counts, epsilon, lo, hi, 200 + t)
            seconds[method].append(time.process_time() - start)
            mse[method].append(float(np.mean((rectangle_sums(estimate, lo, hi) - truth) ** 2)) / scale**2)
    cell = cell_id(shape, side, scale, epsilon)
    log(f"{cell}: " + ", ".join(f"{m}={np.median(s):.2f}s" for m, s in seconds.items()))
    return {
        "cell": cell,
        "shape": shape,
        "side": side,
        "scale": scale,
        "epsilon": epsilon,
        "trials": trials,
        "mse": {m: float(np.mean(v)) for m, v in mse.items()},
        "cpu_seconds_median": {m: float(np.median(s)) for m, s in seconds.items()},
    }


def summarise(records: list[dict]) -> dict:
    """Per dprange method and for best-dprange: its ratios to AG over the cells."""
    pairs = {}
    for ours in (*DPRANGE, "best-dprange"):
        cells = []
        for r in records:
            mse = r["mse"]
            if AUTHORS not in mse:
                continue
            if ours == "best-dprange":
                mine = [mse[m] for m in BEST_OF if m in mse]
                if mine:
                    cells.append((r["cell"], min(mine) / mse[AUTHORS]))
            elif ours in mse:
                cells.append((r["cell"], mse[ours] / mse[AUTHORS]))
        if cells:
            pairs[f"{ours} / {AUTHORS}"] = ratio_stats(cells)
    return {"cells": len(records), "pairs": pairs}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--sides", default=",".join(map(str, SIDES)))
    parser.add_argument("--trials", type=int, default=20)
    method_arguments(parser)
    args = parser.parse_args(argv)

    authors = import_authors()
    methods = [AUTHORS, *matching(DPRANGE, args.methods)]
    records = []
    for shape in args.shapes.split(","):
        for side in map(int, args.sides.split(",")):
            for scale in SCALES:
                for epsilon in EPSILONS:
                    record = run_cell(shape, side, scale, epsilon, args.trials, authors, methods, log)
                    records.append(record)
                    print(json.dumps(record), flush=True)
    return finish(records, args.out, summarise(records))


if __name__ == "__main__":
    raise SystemExit(main())

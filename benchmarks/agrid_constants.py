"""AGrid's error by its constants on the DPBench 2-D shapes (docs/data-aware.md, "AGrid's
second-level constant").

Qardaji, Yang and Li (ICDE 2013) size AG's second level as m2 = sqrt(N' eps_2 / c2) with
c2 = 5 and its first as m1 = max(10, sqrt(N eps / c) / 4) with c = 10, constants fitted on their
geospatial data.  This script measures ``agrid`` with other values of c2 and of the least first
level (``min_parts``) beside the paper's, on the samples and workloads the 2-D selector is
trained and scored on (train_auto_grid.py: the four DPBench shapes at sides 32-256, 10^3-10^7
records, epsilon 0.1 and 1, random, sized and prefix rectangles, the epsilon auto-data leaves
after its features), on fresh trials (sample seeds from 3000, release seeds 1000 + the
sample's).  It prints one JSON line per cell (each variant's mean MSE over the paper's), then a
summary per variant: the geometric mean of those ratios, their range, and the cells where the
variant is worse than the paper's by more than 10%.

    python benchmarks/agrid_constants.py [--trials 5] [--sides 32,64,128,256] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import math
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import train_auto_grid as training

from dprange.data_aware.auto_grid import AutoDataGrid
from dprange.data_aware.grids import AdaptiveGrid

SHAPES = ("ADULT-2D", "MDSALARY-OVERT", "STROKE", "GOWALLA")
SCALES = (10**3, 10**4, 10**5, 10**6, 10**7)
EPSILONS = (0.1, 1.0)
#: The variants beside the paper's constants (c2 = 5, min_parts = 10).
VARIANTS = {
    "paper": {},
    "c2=2.5": {"c2": 2.5},
    "c2=1.25": {"c2": 1.25},
    "min_parts=16": {"min_parts": 16},
}


def measure(job) -> list[dict]:
    """Every variant's mean MSE on each workload, for one shape, side, scale and epsilon."""
    name, side, scale, epsilon, trials = job
    p = training.distribution(name, side)
    rest = AutoDataGrid().shares(epsilon)[-1]
    mechanisms = {k: AdaptiveGrid(**v) for k, v in VARIANTS.items()}
    rectangles = {w: training.evaluation_rectangles(side, w) for w in training.WORKLOADS}
    errors = {(k, w): [] for k in VARIANTS for w in training.WORKLOADS}
    for trial in range(3000, 3000 + trials):
        counts = training.sample(p, scale, trial)
        for k, mechanism in mechanisms.items():
            estimate = mechanism.release(counts, rest, rng=1000 + trial).counts
            for w, (lows, highs) in rectangles.items():
                errors[(k, w)].append(training.rectangles_mse(estimate, counts, lows, highs))
    rows = []
    for w in training.WORKLOADS:
        paper = float(np.mean(errors[("paper", w)]))
        ratios = {k: float(np.mean(errors[(k, w)])) / paper for k in VARIANTS if k != "paper"}
        cell = dict(shape=name, side=side, scale=scale, epsilon=epsilon, workload=w, trials=trials)
        rows.append({**cell, "paper_mse": paper, "over_paper": ratios})
    return rows


def summary(rows) -> dict:
    out = {}
    for k in VARIANTS:
        if k == "paper":
            continue
        ratios = np.array([r["over_paper"][k] for r in rows])
        worse = [r for r in rows if r["over_paper"][k] > 1.1]
        out[k] = {
            "cells": len(rows),
            "geo_mean": float(np.exp(np.mean(np.log(ratios)))),
            "min": float(ratios.min()),
            "max": float(ratios.max()),
            "worse_than_1.1": len(worse),
            "by_side": {
                str(s): float(np.exp(np.mean(np.log([r["over_paper"][k] for r in rows if r["side"] == s]))))
                for s in sorted({r["side"] for r in rows})
            },
        }
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--sides", default="32,64,128,256")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    sides = [int(s) for s in args.sides.split(",")]
    jobs = [
        (name, side, scale, eps, args.trials)
        for name in args.shapes.split(",")
        for side in sides
        for scale in SCALES
        for eps in EPSILONS
    ]
    rows = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for cell_rows in pool.map(measure, jobs):
            for row in cell_rows:
                print(json.dumps(row), flush=True)
            rows += cell_rows
    print(json.dumps({"summary": summary(rows)}, indent=1))
    return 0 if all(math.isfinite(r["paper_mse"]) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""``dawa_pruned``'s joint test measured: DAWA on the Hilbert order, pruned by the threshold alone
(a joint threshold of 10^9) or with the joint test (the default, 2), at partition shares 0.25 and
0.4, beside DAWA itself at those shares.

For each shape (the four DPBench 2-D shapes and eight training shapes of ``train_auto_grid.py``:
mixtures, a uniform grid, scattered points, heaped amounts, a bounded heap, a lattice and venues),
side (32 to 256), records (10^3, 10^4) and epsilon (0.1, 1: the epsilon ``auto-data`` leaves its
candidates), every variant releases the same samples with the same seeds (the two pruning rules of
one share post-process the same DAWA release), and each variant's mean squared error per rectangle
(random, prefix and sized rectangles, 2000 each, as the selector's tables) is divided by the least
of the variants' in the cell.  Prints, as JSON, the geometric mean, mean and largest of those
ratios per group (DPBench or training shapes, records x epsilon).

    python benchmarks/dawa_pruned_joint.py --trials 3 --jobs 2    # about 8 minutes on two cores
"""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import json
import os
import sys
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_auto_grid import WORKLOADS, distribution, evaluation_rectangles, rectangles_mse, sample

from dprange import DAWAHilbert, PrunedDAWAHilbert
from dprange.data_aware.auto_grid import AutoDataGrid

DPBENCH = ("ADULT-2D", "MDSALARY-OVERT", "GOWALLA", "STROKE")
TRAINING = ("mix-0", "mix-5", "uniform", "points-200", "amounts-0", "bound-0", "lattice-4", "venues")
SETTINGS = ((1000, 0.1), (10000, 0.1), (1000, 1.0))
SIDES = (32, 64, 128, 256)
#: name: (partition share, joint threshold; None for DAWA itself)
VARIANTS = {
    f"{name} {ratio}": (ratio, joint)
    for ratio in (0.25, 0.4)
    for name, joint in (("dawa", None), ("threshold alone", 1e9), ("joint test", 2.0))
}


def make(ratio: float, joint: float | None):
    return DAWAHilbert(ratio=ratio) if joint is None else PrunedDAWAHilbert(ratio=ratio, joint=joint)


def cell(shape: str, side: int, scale: int, epsilon: float, trials: int) -> list[dict]:
    """One row per workload: each variant's mean error over the trials, over the least's."""
    rest = AutoDataGrid().shares(epsilon)[-1]
    p = distribution(shape, side)
    rectangles = {workload: evaluation_rectangles(side, workload) for workload in WORKLOADS}
    errors: dict = defaultdict(list)
    for trial in range(trials):
        counts = sample(p, scale, trial)
        for name, (ratio, joint) in VARIANTS.items():
            cells = make(ratio, joint).release(counts, rest, rng=1000 + trial).counts
            for workload, bounds in rectangles.items():
                errors[(workload, name)].append(rectangles_mse(cells, counts, *bounds))
    rows = []
    for workload in WORKLOADS:
        mean = {name: float(np.mean(errors[(workload, name)])) for name in VARIANTS}
        best = min(mean.values())
        group = "DPBench" if shape in DPBENCH else "training"
        ratios = {k: v / best for k, v in mean.items()}
        rows.append({"group": group, "scale": scale, "epsilon": epsilon, "ratios": ratios})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--shapes", default=",".join(DPBENCH + TRAINING))
    args = parser.parse_args()
    jobs = list(itertools.product(args.shapes.split(","), SIDES, SETTINGS))
    rows: list[dict] = []
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(cell, shape, side, scale, eps, args.trials) for shape, side, (scale, eps) in jobs]
        for future in futures:
            rows += future.result()
    summary: dict = {}
    for (group, scale, epsilon), members in itertools.groupby(
        sorted(rows, key=lambda r: (r["group"], r["scale"], r["epsilon"])),
        key=lambda r: (r["group"], r["scale"], r["epsilon"]),
    ):
        members = list(members)
        summary[f"{group}, {scale:g} records, epsilon {epsilon:g}"] = {
            "cells": len(members),
            **{
                name: {
                    "geometric_mean": round(float(np.exp(np.mean(np.log([m["ratios"][name] for m in members])))), 3),
                    "mean": round(float(np.mean([m["ratios"][name] for m in members])), 3),
                    "largest": round(float(np.max([m["ratios"][name] for m in members])), 2),
                }
                for name in VARIANTS
            },
        }
    json.dump({"trials": args.trials, "summary": summary}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()

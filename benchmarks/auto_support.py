"""auto_support, auto_pruned and dawa_pruned beside the other refits of auto's measurements and the data-aware grids.

On the DPBench 2-D shapes (the selector's samples: train_auto_grid.distribution and sample, trial
seeds from 2000, release seeds 1000 + trial), every mechanism at the whole epsilon on the same
counts, mean squared error per rectangle on the selector's evaluation rectangles.  Prints one JSON
line per cell (the mean over trials of each mechanism's error) and a last line of summaries: for
each mechanism the geometric mean and the largest of its error over the best's and over
auto_toward_nonnegative's (auto-data's auto branch), and the cells where it is below that branch.

    python benchmarks/auto_support.py --sides 32,64 --trials 3 --jobs 2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from concurrent.futures import ProcessPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_auto_grid as grid

from dprange import AutoDataGrid, AutoTowardNonnegative, NonnegativeAuto, PrunedAuto, SupportAuto
from dprange.workloads import Rectangles

BRANCH = "auto_toward_nonnegative"
OTHERS = ("dawa_hilbert", "dawa_pruned", "agrid", "agrid_fine")


def cell(job) -> dict:
    name, side, scale, epsilon, workload, trials, thresholds = job
    shape = (side, side)
    p = grid.distribution(name, side)
    lows, highs = grid.evaluation_rectangles(side, workload)
    rectangles = Rectangles(shape, lows, highs)
    mechanisms = {f"auto_support@{k:g}": SupportAuto(workload=rectangles, threshold=k) for k in thresholds}
    mechanisms[BRANCH] = AutoTowardNonnegative(workload=rectangles)
    mechanisms["auto_nonnegative"] = NonnegativeAuto(workload=rectangles)
    mechanisms["auto_pruned"] = PrunedAuto(workload=rectangles)
    chooser = AutoDataGrid(workload=rectangles)
    mechanisms["auto"] = chooser.candidate("auto", shape, epsilon)
    mechanisms.update({c: chooser.candidate(c, shape, epsilon) for c in OTHERS})
    errors: dict[str, list[float]] = {m: [] for m in mechanisms}
    for trial in range(2000, 2000 + trials):
        counts = grid.sample(p, scale, seed=trial)
        for m, mech in mechanisms.items():
            released = mech.release(counts, epsilon, rng=1000 + trial)  # cost: a refit or more for the refits
            errors[m].append(grid.rectangles_mse(released.counts, counts, lows, highs))
    return dict(
        shape=name,
        side=side,
        scale=scale,
        epsilon=epsilon,
        workload=workload,
        trials=trials,
        mse={m: float(np.mean(v)) for m, v in errors.items()},
    )


def summaries(cells) -> dict:
    out = {}
    for m in cells[0]["mse"]:
        to_best = [c["mse"][m] / min(c["mse"].values()) for c in cells]
        to_branch = [c["mse"][m] / c["mse"][BRANCH] for c in cells]
        out[m] = dict(
            geo_to_best=round(math.exp(np.mean(np.log(to_best))), 3),
            worst_to_best=round(max(to_best), 2),
            geo_to_branch=round(math.exp(np.mean(np.log(to_branch))), 3),
            worst_to_branch=round(max(to_branch), 2),
            below_branch=int(sum(r < 1 for r in to_branch)),
        )
    return dict(cells=len(cells), summaries=out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default=",".join(grid.DPBENCH))
    parser.add_argument("--sides", default="32,64,128")
    parser.add_argument("--scales", default="1e3,1e4,1e5,1e6,1e7")
    parser.add_argument("--epsilons", default="0.1,1")
    parser.add_argument("--workloads", default="random-rectangles,prefix-rectangles")
    parser.add_argument("--thresholds", default="0.5,1,2")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    thresholds = tuple(float(k) for k in args.thresholds.split(","))
    jobs = [
        (name, int(side), int(float(scale)), float(eps), workload, args.trials, thresholds)
        for side in args.sides.split(",")
        for name in args.shapes.split(",")
        for scale in args.scales.split(",")
        for eps in args.epsilons.split(",")
        for workload in args.workloads.split(",")
    ]
    cells = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for result in pool.map(cell, jobs):
            cells.append(result)
            print(json.dumps(result), flush=True)
    print(json.dumps(summaries(cells)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How far the bootstrap of ``auto_nonnegative`` (or ``auto_toward_nonnegative``,
``auto_support``, ``auto_pruned``, ``dawa_pruned``) describes its actual error on real 2-D data.

``auto_nonnegative`` (dprange.data_aware.nonnegative_grid) refits ``auto``'s measurements over
non-negative grids.  The fit is biased where it moves noise up to zero, by an amount that depends
on the data, so its releases claim no error bars (NaN standard errors); ``bootstrap`` re-draws the
measurement noise around the released estimate and re-runs the fit, which describes the spread of
the fit around a truth like the estimate, not its bias.  This script measures that gap on the four
DPBench 2-D shapes (public: ../shared/data/dpbench/2D, 256 x 256 summed to ``--side``): each
shape is sampled at each scale (a multinomial draw, seed = trial), released at each epsilon
(release seed 1000 + trial, the design chosen for the rectangles), and its 200 rectangles of each
workload (benchmarks/train_auto_grid.py's random and sized rectangles, the first 200) answered.
Per cell it prints, over rectangles and trials:

* ``rmse``: the root mean squared error of the answers against the true counts;
* ``bootstrap_rms``: the root mean square of the bootstrap standard errors (``--reps`` each);
* ``coverage_95``: the share of answers within 1.96 bootstrap standard errors of the truth;
* ``bias_share``: the share of the mean squared error that is each rectangle's mean error over
  the trials squared (the data-dependent bias, plus the variance over ``--trials``);
* ``auto_coverage_95``: the same for ``auto``'s exact standard errors on the same rectangles and
  trials (``auto`` run with the same epsilon and seed), the control;
* ``weight``: the mean weight toward the refit (1 for ``auto_nonnegative``;
  ``auto_toward_nonnegative`` moves least squares toward the refit by a weight of its own, which
  its bootstrap holds).

    nice python benchmarks/grid_bootstrap_coverage.py [--mechanism auto_nonnegative]
        [--shapes ADULT-2D,...] [--side 64] [--trials 20] [--reps 50] [--scales 1e4,1e6]
        [--epsilons 0.1,1] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from train_auto_grid import DPBENCH, distribution, evaluation_rectangles, sample

from dprange.data_aware.auto_grid import AutoDataGrid
from dprange.data_aware.nonnegative_grid import AutoTowardNonnegative, NonnegativeAuto
from dprange.data_aware.spatial_trees import box_sums, summed_area
from dprange.workloads import Rectangles

WORKLOADS = ("random-rectangles", "sized-rectangles")


MECHANISMS = {"auto_nonnegative": NonnegativeAuto, "auto_toward_nonnegative": AutoTowardNonnegative}
#: Candidates of the 2-D selector built as auto-data builds them (its parameters, the workload).
CANDIDATES = ("auto_support", "auto_pruned", "dawa_pruned")


def cell(name: str, side: int, scale: int, epsilon: float, trials: int, reps: int, mechanism: str) -> dict:
    """The figures of one (shape, scale, epsilon) for each workload (module doc)."""
    shape = (side, side)
    p = distribution(name, side)
    out = {}
    for workload in WORKLOADS:
        lows, highs = (a[:200] for a in evaluation_rectangles(side, workload))
        rectangles = Rectangles(shape, lows, highs)
        chooser = AutoDataGrid(workload=rectangles)
        if mechanism in CANDIDATES:
            refit = chooser.candidate(mechanism, shape, epsilon)
        else:
            refit = MECHANISMS[mechanism](workload=rectangles)
        auto = chooser.candidate("auto", shape, epsilon)
        errors, stderrs, auto_covered, weights = [], [], [], []
        for t in range(trials):
            counts = sample(p, scale, seed=t)
            truth = box_sums(summed_area(counts.astype(float)), lows, highs)
            release = refit.release(counts, epsilon, rng=1000 + t)
            weights.append(release.parameters.get("weight", 1.0))
            errors.append(release.rectangle(lows, highs).value - truth)
            stderrs.append(release.bootstrap(lows, highs, reps=reps, rng=2000 + t))
            exact = auto.release(counts, epsilon, rng=1000 + t).rectangle(lows, highs)
            auto_covered.append(np.abs(exact.value - truth) <= 1.96 * exact.stderr)
        error, stderr = np.array(errors), np.array(stderrs)
        mse = float(np.mean(error**2))
        out[workload] = {
            "rmse": float(np.sqrt(mse)),
            "bootstrap_rms": float(np.sqrt(np.mean(stderr**2))),
            "coverage_95": float(np.mean(np.abs(error) <= 1.96 * stderr)),
            "bias_share": float(np.mean(error.mean(axis=0) ** 2) / mse) if mse > 0 else 0.0,
            "auto_coverage_95": float(np.mean(auto_covered)),
            "weight": float(np.mean(weights)),
        }
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mechanism", choices=(*MECHANISMS, *CANDIDATES), default="auto_nonnegative")
    parser.add_argument("--side", type=int, default=64)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--scales", default="1e4,1e6")
    parser.add_argument("--epsilons", default="0.1,1")
    parser.add_argument("--shapes", default=",".join(DPBENCH), help="DPBench 2-D shapes, comma-separated")
    parser.add_argument("--quick", action="store_true", help="side 32, 3 trials, 10 replicates, ADULT-2D only")
    args = parser.parse_args(argv)
    shapes = tuple(args.shapes.split(","))
    if args.quick:
        args.side, args.trials, args.reps, shapes = 32, 3, 10, ("ADULT-2D",)
    scales = [int(float(s)) for s in args.scales.split(",")]
    epsilons = [float(e) for e in args.epsilons.split(",")]
    cells = []
    start = time.time()
    for name in shapes:
        for scale in scales:
            for epsilon in epsilons:
                figures = cell(name, args.side, scale, epsilon, args.trials, args.reps, args.mechanism)
                cells.append({"shape": name, "scale": scale, "epsilon": epsilon, **figures})
                print(f"{name} {scale:g} {epsilon}: {time.time() - start:.0f} s", file=sys.stderr)
    settings = {"mechanism": args.mechanism, "side": args.side, "trials": args.trials, "reps": args.reps}
    settings["rectangles"] = 200
    print(json.dumps({"settings": settings, "cells": cells}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The 2-D auto-data choice against the data-independent ``auto``, re-measured with many trials
where ten left the ratio uncertain (docs/data-aware.md, "auto-data on 2-D grids").

``train_auto_grid.py``'s held-out validation scores each DPBench cell on ten fresh trials (three
at 256 x 256).  Where a fold chose auto-data's ``auto`` branch in every trial of a cell
(``auto_toward_nonnegative`` at the epsilon left after the features, built for the cell's
rectangles), the cell's ratio to ``auto`` is that branch's mean squared error over ``auto``'s
exact one at the whole epsilon, and ten trials leave it a standard error of 5-10%.  This script
measures the branch again on such cells with fresh samples (seeds k from 200, apart from the
tables' 0-2 and 100-109; noise seeds 5000 + k) and prints a JSON line per cell (mean MSE, its
standard error, ``auto``'s exact MSE, the ratio and the ratio's standard error), then a
summary line.

    python auto_grid_to_auto.py --validation VALIDATION.json [--at-least 1.05]
                                [--trials 32:300,64:200,128:60,256:20]
    python auto_grid_to_auto.py --cells '[["STROKE", 32, 10000000, 1.0, "sized-rectangles"]]'

``--validation``: a file ``train_auto_grid.py --validation`` wrote with ``--weighted`` (the
cells' ``weighted_auto`` scores); the cells taken are those whose ratio there is at least
``--at-least`` and whose choices were all the branch (``--unseen``: of the shapes no fit
trained on, whose cells the script stores as ``unseen_cells``).  Minutes: 0.1 CPU s a release
at 32 x 32, 2 s at 128 x 128, 5-10 s at 256 x 256.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from train_auto_grid import WEIGHTED, distribution, evaluation_rectangles, rectangles_mse, sample, whole_auto

from dprange.data_aware.auto_grid import AutoDataGrid
from dprange.data_aware.nonnegative_grid import AutoTowardNonnegative
from dprange.workloads.rectangles import Rectangles

#: The first sample seed (the training tables use 0-2, the test tables 100-109), and what a
#: trial's noise seed adds to its sample seed.
FIRST_TRIAL = 200
NOISE_SEED = 5000


def parse_trials(text: str) -> dict[int, int]:
    """``"32:300,64:200"`` -> {32: 300, 64: 200}: trials per side."""
    out = {}
    for part in filter(None, text.split(",")):
        side, trials = part.split(":")
        out[int(side)] = int(trials)
    return out


def shipped_fit(validation: dict) -> dict:
    """The shipped fit's entry in a train_auto_grid.py validation file."""
    return validation[validation.get("shipped", "rules")]


def held_out_cells(validation: dict, which: str = "cells") -> list[dict]:
    """The shipped fit's held-out cells in a train_auto_grid.py validation file (``which``:
    "cells", the DPBench shapes left out in turn, or "unseen_cells", the shapes no fit trained on)."""
    fit = shipped_fit(validation)
    if which not in fit:
        raise SystemExit(f"the validation file has no {which!r} (unseen cells are stored by later runs of the script)")
    return fit[which]


def ranked_cells(validation: dict, which: str, figure) -> list[tuple]:
    """(shape, side, scale, epsilon, workload) of the shipped fit's held-out cells (held_out_cells)
    for which ``figure`` of their ``weighted_auto`` figures is not None, in decreasing figure."""
    picked = []
    for cell in held_out_cells(validation, which):
        scored = cell.get("weighted_auto")
        value = None if scored is None else figure(scored)
        if value is None:
            continue
        side = int(round(cell["n"] ** 0.5))
        picked.append((value, (cell["shape"], side, int(cell["scale"]), float(cell["epsilon"]), cell["workload"])))
    return [key for _, key in sorted(picked, key=lambda p: -p[0])]


def uncertain_cells(validation: dict, at_least: float, which: str = "cells") -> list[tuple]:
    """(shape, side, scale, epsilon, workload) of the shipped fit's held-out cells (``which``:
    "cells", the DPBench shapes left out in turn, or "unseen_cells", the shapes no fit trained on)
    whose choices were all the weighted ``auto`` branch and whose ratio to ``auto`` is at least
    ``at_least``, in decreasing ratio."""

    def ratio(scored: dict) -> float | None:
        weighted_only = set(scored["choices"]) == {WEIGHTED}
        return scored["to_auto"] if weighted_only and scored["to_auto"] >= at_least else None

    return ranked_cells(validation, which, ratio)


def branch_to_auto(name: str, side: int, scale: int, epsilon: float, workload: str, trials: int) -> dict:
    """The weighted ``auto`` branch's mean squared error on the cell's rectangles over ``trials``
    fresh trials (sample seeds k = FIRST_TRIAL, FIRST_TRIAL + 1, ..., noise seeds NOISE_SEED + k),
    against ``auto``'s exact error at the whole epsilon."""
    lows, highs = evaluation_rectangles(side, workload)
    rest = AutoDataGrid().shares(epsilon)[-1]
    branch = AutoTowardNonnegative(workload=Rectangles((side, side), lows, highs))
    p = distribution(name, side)
    start = time.process_time()
    errors = []
    for k in range(FIRST_TRIAL, FIRST_TRIAL + trials):
        counts = sample(p, scale, seed=k)
        released = branch.release(counts, rest, rng=NOISE_SEED + k)  # cost: five refits at most
        errors.append(rectangles_mse(released.counts, counts, lows, highs))
    errors = np.array(errors)
    whole = whole_auto(side * side, epsilon, workload)
    se = float(errors.std(ddof=1) / np.sqrt(trials)) if trials > 1 else float("nan")
    return {
        "shape": name,
        "side": side,
        "scale": scale,
        "epsilon": epsilon,
        "workload": workload,
        "trials": trials,
        "mse": float(errors.mean()),
        "mse_se": se,
        "auto_whole": whole,
        "to_auto": float(errors.mean()) / whole,
        "to_auto_se": se / whole,
        "cpu_seconds": time.process_time() - start,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--validation", help="a train_auto_grid.py --validation file scored with --weighted")
    parser.add_argument("--at-least", type=float, default=1.05, help="the least held-out ratio to re-measure")
    parser.add_argument("--unseen", action="store_true", help="the validation's unseen shapes' cells, not DPBench's")
    parser.add_argument("--cells", help="JSON list of [shape, side, scale, epsilon, workload] instead")
    parser.add_argument("--trials", default="32:300,64:200,128:60,256:20", help="trials per side")
    args = parser.parse_args(argv)
    if (args.validation is None) == (args.cells is None):
        parser.error("give exactly one of --validation and --cells")
    trials = parse_trials(args.trials)
    if args.cells is not None:
        cells = [(s, int(n), int(float(sc)), float(e), w) for s, n, sc, e, w in json.loads(args.cells)]
    else:
        with open(args.validation) as handle:
            cells = uncertain_cells(json.load(handle), args.at_least, "unseen_cells" if args.unseen else "cells")
    missing = sorted({c[1] for c in cells} - set(trials))
    if missing:
        parser.error(f"--trials names no count for sides {missing}")
    results = []
    for cell in cells:
        results.append(branch_to_auto(*cell, trials[cell[1]]))
        print(json.dumps(results[-1]), flush=True)
    if results:
        worst = max(results, key=lambda r: r["to_auto"])
        upper = max(r["to_auto"] + 2 * r["to_auto_se"] for r in results)
        print(
            json.dumps(
                {
                    "cells": len(results),
                    "worst_to_auto": worst["to_auto"],
                    "worst_cell": worst,
                    "worst_to_auto_plus_2se": upper,
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

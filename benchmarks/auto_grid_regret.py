"""The 2-D auto-data choice's held-out regret, re-measured with many trials where ten leave it
uncertain (docs/data-aware.md, "auto-data on 2-D grids").

``train_auto_grid.py``'s held-out validation scores each DPBench cell on ten fresh trials: the
mean squared error of the choices of the list fitted without the cell's shape (its fold) over
the best candidate's mean.  Where a candidate's error has a heavy tail (the non-negative refit's
on nearly empty 256 x 256 grids: one trial in five puts thousands of spurious records in the
empty part), ten trials leave that ratio a factor of two apart from one set of trials to the
next.  This script measures the cells again on fresh trials (sample seeds k from 2000, apart
from the tables' 0-2, 100-109 and auto_grid_to_auto.py's 200-499; release seeds 1000 + k as
the tables'): every candidate at the epsilon left after the features, auto-data's ``auto``
branch (``auto_toward_nonnegative``, as ``--weighted`` scores it), ``auto`` with the whole
epsilon, and the fold's choice from each trial's own noisy features.  It prints a JSON line per
cell (train_auto_grid.py's held-out figures, the trials, and a bootstrap interval over the
trials for the regret), then a summary line.

    python auto_grid_regret.py --validation VALIDATION.json [--at-least 1.5]
                               [--trials 32:100,64:100,128:40,256:20] [--jobs 2]
    python auto_grid_regret.py --validation VALIDATION.json \\
        --cells '[["MDSALARY-OVERT", 256, 10000, 0.1, "random-rectangles"]]'

``--validation``: a file ``train_auto_grid.py --validation`` wrote with ``--weighted`` (its
shipped fit's ``folds``, the list fitted without each DPBench shape, and its cells'
``weighted_auto`` figures); the cells taken are those whose regret there is at least
``--at-least`` (``--unseen``: the cells of the shapes no fit trained on, scored with the list
fitted on every DPBench shape).  The cells of one shape, side, scale and epsilon share their trials' samples,
features and data-independent releases.  Minutes: a trial takes 0.2 CPU s at 32 x 32 and
about 20 s at 256 x 256 (the weighted branch's five refits per workload).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import sys
import time

import numpy as np
from auto_grid_to_auto import parse_trials, ranked_cells
from train_auto_grid import (
    WEIGHTED,
    fold_columns,
    fold_selectors,
    measure_cell,
    table,
    weighted_cell,
    weighted_index,
    weighted_rows,
    with_weighted_column,
)

#: The first sample seed of the fresh trials.
FIRST_TRIAL = 2000

#: Bootstrap resamples of the trials for the regret's interval, and its seed.
RESAMPLES = 2000
BOOTSTRAP_SEED = 7


def uncertain_cells(validation: dict, at_least: float, which: str = "cells") -> list[tuple]:
    """(shape, side, scale, epsilon, workload) of the shipped fit's held-out cells (``which``:
    "cells", the DPBench shapes left out in turn, or "unseen_cells", the shapes no fit trained
    on) whose weighted regret is at least ``at_least``, in decreasing regret."""
    return ranked_cells(validation, which, lambda scored: scored["regret"] if scored["regret"] >= at_least else None)


def regret_interval(chosen: np.ndarray, errors: np.ndarray, rng) -> tuple[float, float]:
    """The 2.5% and 97.5% points of the regret mean(chosen) / min over columns of mean(errors)
    over bootstrap resamples of the trials (rows)."""
    picks = rng.integers(0, chosen.size, (RESAMPLES, chosen.size))
    ratios = chosen[picks].mean(axis=1) / errors[picks].mean(axis=1).min(axis=1)
    low, high = np.quantile(ratios, [0.025, 0.975])
    return float(low), float(high)


def measure_group(job) -> list[dict]:
    """One shape, side, scale and epsilon: the cells' figures for their workloads on ``trials``
    fresh trials, scored with the fold's choices as the validation scores them (weighted_cell)."""
    (name, side, scale, epsilon), workloads, trials, model, candidates = job
    start = time.process_time()
    rows = measure_cell(name, side, scale, epsilon, trials, {}, FIRST_TRIAL, workloads)
    fresh = range(FIRST_TRIAL, FIRST_TRIAL + trials)
    weighted = {
        (r["workload"], r["trial"]): r["mse"] for r in weighted_rows(name, side, scale, epsilon, fresh, workloads)
    }
    x, _, keys, per_row = table(rows, candidates)
    column = np.array([weighted[r["workload"], r["trial"]] for r in rows])
    chosen = fold_columns(model, x, candidates)
    names_all = (*candidates, WEIGHTED, "auto-whole")
    out = []
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    for workload in workloads:
        mine = [(i, int(c)) for i, (k, c) in enumerate(zip(keys, chosen)) if k[4] == workload]
        scored = weighted_cell(keys[mine[0][0]], mine, per_row, column, candidates)
        assert scored is not None
        # the columns weighted_cell reads (the candidates, the weighted branch, auto-whole), and
        # its choices: auto scored as the weighted branch
        errors = with_weighted_column(per_row, column)[[i for i, _ in mine]]
        picked = errors[np.arange(len(mine)), [weighted_index(c, candidates) for _, c in mine]]
        low, high = regret_interval(picked, errors, rng)
        means = errors.mean(axis=0)
        out.append(
            {
                **scored,
                "side": side,
                "trials": trials,
                "first_trial": FIRST_TRIAL,
                "regret_low": low,
                "regret_high": high,
                "means": {c: float(m) for c, m in zip(names_all, means)},
                "cpu_seconds": (time.process_time() - start) / len(workloads),
            }
        )
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--validation", required=True, help="a train_auto_grid.py --validation file with folds")
    parser.add_argument("--at-least", type=float, default=1.5, help="the least held-out regret to re-measure")
    parser.add_argument("--unseen", action="store_true", help="the validation's unseen shapes' cells, not DPBench's")
    parser.add_argument("--cells", help="JSON list of [shape, side, scale, epsilon, workload] instead")
    parser.add_argument("--trials", default="32:100,64:100,128:40,256:20", help="trials per side")
    parser.add_argument("--jobs", type=int, default=1, help="processes (one shape, side, scale and epsilon each)")
    args = parser.parse_args(argv)
    with open(args.validation) as handle:
        validation = json.load(handle)
    folds = fold_selectors(validation)
    candidates = tuple(validation["candidates"])
    if args.cells is not None:
        cells = [(s, int(n), int(float(sc)), float(e), w) for s, n, sc, e, w in json.loads(args.cells)]
    else:
        cells = uncertain_cells(validation, args.at_least, "unseen_cells" if args.unseen else "cells")
    trials = parse_trials(args.trials)
    missing = sorted({c[1] for c in cells} - set(trials))
    if missing:
        parser.error(f"--trials names no count for sides {missing}")
    unknown = sorted({c[0] for c in cells} - set(folds))
    if unknown:
        parser.error(f"the validation has no list held out from {unknown} (it has {sorted(folds)})")
    groups: dict = {}
    for shape, side, scale, epsilon, workload in cells:
        groups.setdefault((shape, side, scale, epsilon), []).append(workload)
    jobs = [(g, tuple(w), trials[g[1]], folds[g[0]], candidates) for g, w in groups.items()]
    jobs.sort(key=lambda j: -j[0][1])  # the large grids first
    results = []
    workers = max(1, min(args.jobs, len(jobs)))
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        for group in pool.map(measure_group, jobs):
            for cell in group:
                results.append(cell)
                print(json.dumps(cell), flush=True)
    if results:
        worst = max(results, key=lambda r: r["regret"])
        print(
            json.dumps(
                {
                    "cells": len(results),
                    "above_2": sum(r["regret"] > 2.0 for r in results),
                    "above_2_at_low": sum(r["regret_low"] > 2.0 for r in results),
                    "worst_regret": worst["regret"],
                    "worst_cell": {k: worst[k] for k in ("shape", "side", "scale", "epsilon", "workload", "best")},
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

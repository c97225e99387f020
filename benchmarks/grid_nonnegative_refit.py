"""``auto_nonnegative`` measured on the 2-D selector's existing tables, without re-measuring the
other candidates.

For every sample of the measurement tables that ``benchmarks/train_auto_grid.py --measurements``
writes (shape, cells, scale, epsilon, trial), the registered ``auto_nonnegative``
(dprange.data_aware.nonnegative_grid: ``auto``'s measurements refitted over the non-negative grids
of its estimated total) is released exactly as that script now releases it: AutoDataGrid's
candidate at the epsilon left after the features, built for each workload's rectangles, release
seed 1000 + trial, so its measurements are those of ``auto`` in the tables.  Tables measured
before the candidate was registered lack it; this adds it.

Output: one JSON line per sample, ``{"shape", "n", "scale", "epsilon", "trial", "rest",
"mse": {workload: MSE per rectangle}, "seconds"}``, appended to ``--out``; samples already there
are skipped, so a stopped run resumes.  DPBench shapes first, small grids first;
``--part K/N`` takes every N-th of them from the K-th (one process per core, each with its own
``--out`` and one BLAS thread, ``OPENBLAS_NUM_THREADS=1``: processes that share the cores'
BLAS threads run much slower).  ``--summary`` (``--out`` may be repeated) prints, per shape
group and workload, the refit's error over ``auto``'s with the whole epsilon and over the best
registered candidate's (cell means, as the selector's script scores them) as JSON.

    nice python benchmarks/grid_nonnegative_refit.py TRAIN.jsonl TEST.jsonl --out REFIT.jsonl
        [--shapes dpbench] [--max-side 64] [--part 1/2]
    python benchmarks/grid_nonnegative_refit.py TRAIN.jsonl TEST.jsonl --out A.jsonl --out B.jsonl --summary
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import train_auto_grid as grid
from train_auto_data import load

from dprange.data_aware.auto_grid import AutoDataGrid
from dprange.workloads import Rectangles


def sample_key(row: dict) -> tuple:
    return (row["shape"], row["n"], row["scale"], row["epsilon"], row["trial"])


def refit_sample(key: tuple, rest: float, cache: dict) -> dict:
    """``auto_nonnegative``'s MSE per rectangle for every workload of one sample."""
    shape, n, scale, epsilon, trial = key
    side = int(round(n**0.5))
    if (shape, side) not in cache:
        cache[shape, side] = grid.distribution(shape, side)
    counts = grid.sample(cache[shape, side], scale, seed=trial)
    mse = {}
    for workload in grid.WORKLOADS:
        if (side, workload) not in cache:
            cache[side, workload] = grid.evaluation_rectangles(side, workload)
        lows, highs = cache[side, workload]
        if (side, workload, rest) not in cache:  # cost: auto's design chosen once per setting, not per sample
            rectangles = Rectangles((side, side), lows, highs)
            cache[side, workload, rest] = AutoDataGrid(workload=rectangles).candidate(
                "auto_nonnegative", (side, side), rest
            )
        release = cache[side, workload, rest].release(counts, rest, rng=1000 + trial)
        mse[workload] = grid.rectangles_mse(release.counts, counts, lows, highs)
    return mse


def read_refits(paths: list[str]) -> dict:
    """The refit's MSEs by sample, from every file of ``paths`` that exists."""
    refits = {}
    for path in paths:
        if os.path.exists(path):
            with open(path) as fh:
                for line in fh:
                    if line.strip():
                        row = json.loads(line)
                        refits[sample_key(row)] = row["mse"]
    return refits


def measure(tables: list[str], out: str, shapes: str, max_side: int, part=(1, 1)) -> None:
    done = set(read_refits([out]))
    rest = {sample_key(row): row["features"][4] for row in load(",".join(tables))}  # one per sample
    todo = [k for k in rest if int(round(k[1] ** 0.5)) <= max_side]
    if shapes == "dpbench":
        todo = [k for k in todo if k[0] in grid.DPBENCH]
    todo.sort(key=lambda k: (k[0] not in grid.DPBENCH, k[1], k))
    # the part is taken before the samples done are dropped, so that a resumed part keeps its own
    todo = [k for k in todo[part[0] - 1 :: part[1]] if k not in done]
    cache: dict = {}
    with open(out, "a") as fh:
        for i, key in enumerate(todo):
            start = time.perf_counter()
            mse = refit_sample(key, rest[key], cache)
            row = dict(zip(("shape", "n", "scale", "epsilon", "trial"), key))
            row.update(rest=rest[key], mse=mse, seconds=round(time.perf_counter() - start, 2))
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(f"{i + 1}/{len(todo)} {key} {row['seconds']} s", file=sys.stderr, flush=True)


def summary(tables: list[str], outs: list[str]) -> dict:
    refits = read_refits(outs)
    rows = load(",".join(tables))
    candidates = grid.winners(rows)  # the candidates the selector's script keeps, from every row
    rows = [r for r in rows if refits.get(sample_key(r), {}).get(r["workload"]) is not None]
    if not rows:
        return {"cells": 0}
    _, _, keys, per_row = grid.table(rows, candidates)
    cells: dict = {}
    for key, r, errors in zip(keys, rows, per_row):
        cells.setdefault(key, []).append((refits[sample_key(r)][r["workload"]], errors))
    groups: dict = {}
    for key, entries in cells.items():
        refit = np.mean([e[0] for e in entries])
        errors = np.mean([e[1] for e in entries], axis=0)  # the candidates', then auto's whole
        group = key[0] if key[0] in grid.DPBENCH else ("mixtures" if key[0].startswith("mix-") else "synthetic")
        groups.setdefault((group, key[4]), []).append((refit / errors[-1], refit / errors.min()))
    report = []
    for (group, workload), ratios in sorted(groups.items()):
        to_auto, to_best = np.log(np.array(ratios)).T
        report.append(
            {
                "shapes": group,
                "workload": workload,
                "cells": len(ratios),
                "refit_over_auto_geomean": round(float(np.exp(to_auto.mean())), 3),
                "refit_over_auto_worst": round(float(np.exp(to_auto.max())), 3),
                "cells_above_1.2x_auto": int((to_auto > np.log(1.2)).sum()),
                "refit_over_best_geomean": round(float(np.exp(to_best.mean())), 3),
            }
        )
    return {"cells": sum(r["cells"] for r in report), "candidates": list(candidates), "groups": report}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", nargs="+", help="measurement tables of train_auto_grid.py (JSON lines)")
    parser.add_argument("--out", required=True, action="append", help="the refit's JSON lines (appended; resumed)")
    parser.add_argument("--part", default="1/1", help="K/N: every N-th sample from the K-th")
    parser.add_argument("--shapes", choices=["all", "dpbench"], default="all")
    parser.add_argument("--max-side", type=int, default=256, help="skip grids of a larger side")
    parser.add_argument("--summary", action="store_true", help="summarise --out against the tables")
    args = parser.parse_args(argv)
    if args.max_side < 1:
        parser.error("--max-side must be positive")
    try:
        part = tuple(int(v) for v in args.part.split("/"))
    except ValueError:
        part = ()
    if len(part) != 2 or not 1 <= part[0] <= part[1]:
        parser.error(f"--part must be K/N with 1 <= K <= N, got {args.part!r}")
    if args.summary:
        print(json.dumps(summary(args.tables, args.out), indent=1))
    elif len(args.out) != 1:
        parser.error("measuring writes one --out file")
    else:
        measure(args.tables, args.out[0], args.shapes, args.max_side, part)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Each 2-D candidate's error over the best's, read from a kept table of the selector.

A table of ``train_auto_grid.py`` (``tables/auto_grid/test.jsonl.xz``: ten trials of every DPBench
2-D cell; every candidate run at the epsilon auto-data leaves it) holds each candidate's mean
squared error per rectangle in every trial.  This prints, as JSON, for groups of the DPBench cells
(the heaped shapes ADULT-2D and MDSALARY-OVERT or the smooth ones STROKE and GOWALLA; the records
times epsilon per cell, or at most 100 records times epsilon in all; prefix rectangles or the
others), the geometric mean and the largest over the group's cells of each candidate's mean error
over the least mean error in the cell, and the same for the best of the candidates other than
``--candidate``.

    python benchmarks/table_regrets.py --candidate dawa_pruned
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_auto_data import read_rows

HERE = os.path.dirname(os.path.abspath(__file__))
HEAPED = ("ADULT-2D", "MDSALARY-OVERT")
SMOOTH = ("STROKE", "GOWALLA")


def signal_band(records_eps_per_cell: float) -> str:
    for edge, name in ((1, "< 1"), (10, "1-10"), (100, "10-100")):
        if records_eps_per_cell < edge:
            return name
    return ">= 100"


def groups_of(rows) -> dict:
    """{(shapes, band, workloads): {candidate: [ratio to the best, per cell]}}."""
    cells: dict = defaultdict(list)
    for r in rows:
        if r["shape"] in HEAPED + SMOOTH:
            cells[(r["shape"], r["n"], r["scale"], r["epsilon"], r["workload"])].append(r["mse"])
    groups: dict = defaultdict(lambda: defaultdict(list))
    for (shape, n, scale, epsilon, workload), trials in cells.items():
        mean = {c: float(np.mean([t[c] for t in trials])) for c in trials[0]}
        best = min(mean.values())
        shapes = "heaped" if shape in HEAPED else "smooth"
        kind = "prefix" if workload == "prefix-rectangles" else "random and sized"
        bands = [f"records x epsilon per cell {signal_band(scale * epsilon / n)}"]
        if scale * epsilon <= 100:
            bands.append("records x epsilon <= 100")
        for band in bands:
            for c, v in mean.items():
                groups[(shapes, band, kind)][c].append(v / best)
    return groups


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", default=os.path.join(HERE, "tables", "auto_grid", "test.jsonl.xz"))
    parser.add_argument("--candidate", default="dawa_pruned", help="the candidate whose 'best of the others' is given")
    args = parser.parse_args(argv)
    out = []
    for (shapes, band, kind), ratios in sorted(groups_of(read_rows(args.table)).items()):
        if args.candidate not in ratios:
            raise SystemExit(f"{args.candidate} is not a column of {args.table}")
        others = np.min([v for c, v in ratios.items() if c != args.candidate], axis=0)
        ratios = {**ratios, f"best other than {args.candidate}": list(others)}
        summary = {
            c: {"geo": round(math.exp(float(np.mean(np.log(v)))), 2), "largest": round(float(np.max(v)), 2)}
            for c, v in ratios.items()
        }
        out.append({"shapes": shapes, "band": band, "workloads": kind, "cells": len(others), "to_best": summary})
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Data-aware against data-independent 2-D mechanisms on the DPBench 2-D shapes (issue 11).

Protocol (Hay, Machanavajjhala, Miklau, Chen and Zhang, "Principled Evaluation of
Differentially Private Algorithms using DPBench", SIGMOD 2016): for each 256 x 256 histogram
of ../shared/data/dpbench/2D its shape (counts / total) is sampled at a scale of records (a
multinomial draw, seed = trial); every mechanism releases it at each epsilon (0.1 and 1,
release seed 1000 + trial); the error is the *scaled average per-query error*
mean_q |answer_q - true_q| / scale over 2000 random rectangles (on each axis two uniform
bins, sorted; fixed seed), averaged over ``--trials`` trials (10 by default).  The regret of
a method on a setting (shape, scale, epsilon) is its error over the best method's error there.
Timings are CPU seconds (time.process_time), medians of repeats, on whatever else the box
is running.

    python benchmarks/dpbench_2d.py [--quick] [--trials 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from dprange import AdaptiveGrid, DAWAHilbert, HybridTree, KDHierarchy, KDTree, Kronecker, Quadtree, UniformGrid
from dprange.data_aware.spatial_trees import box_sums, summed_area
from dprange.workloads import random_rectangles

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "dpbench", "2D")
SCALES = (10**3, 10**5, 10**7)
EPSILONS = (0.1, 1.0)


def mechanisms() -> dict:
    return {
        "flat": Kronecker("identity"),
        "privelet": Kronecker("haar"),
        "kronecker-16": Kronecker(16),
        "quadtree-geometric": Quadtree(budget="geometric"),
        "kd_hierarchy-4": KDHierarchy(4),
        "kd_tree": KDTree(),
        "hybrid_tree": HybridTree(),
        "dawa_hilbert": DAWAHilbert(),
        "ugrid": UniformGrid(),
        "agrid": AdaptiveGrid(),
    }


def shapes() -> dict:
    out = {}
    for name in sorted(os.listdir(DATA)):
        if name.endswith(".npy"):
            counts = np.load(os.path.join(DATA, name)).astype(float)
            out[name.removesuffix(".npy")] = counts / counts.sum()
    return out


def sample(p: np.ndarray, scale: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).multinomial(scale, p.ravel()).reshape(p.shape).astype(np.int64)


def scaled_error(estimate: np.ndarray, counts: np.ndarray, lows, highs, scale: int) -> float:
    got = box_sums(summed_area(np.asarray(estimate, dtype=float)), lows, highs)
    true = box_sums(summed_area(counts), lows, highs)
    return float(np.mean(np.abs(got - true)) / scale)


def accuracy(quick: bool, trials: int) -> tuple[list[dict], dict]:
    rows, seconds = [], {}
    data = shapes()
    names = sorted(data)[:2] if quick else sorted(data)
    scales = SCALES[:2] if quick else SCALES
    mechs = mechanisms()
    for name in names:
        p = data[name]
        rects = random_rectangles(p.shape, 2000, rng=3)
        for scale in scales:
            for epsilon in EPSILONS:
                for mname, mech in mechs.items():
                    errors = []
                    for t in range(trials):
                        counts = sample(p, scale, seed=t)
                        start = time.process_time()
                        rel = mech.release(counts, epsilon, rng=1000 + t)
                        seconds.setdefault(mname, []).append(time.process_time() - start)
                        errors.append(scaled_error(rel.counts, counts, rects.lows, rects.highs, scale))
                    rows.append(
                        {
                            "shape": name,
                            "scale": scale,
                            "epsilon": epsilon,
                            "method": mname,
                            "error": float(np.mean(errors)),
                            "error_sd": float(np.std(errors, ddof=1)) if trials > 1 else None,
                        }
                    )
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)  # progress, one JSON line per row
    best: dict = {}
    for r in rows:
        key = (r["shape"], r["scale"], r["epsilon"])
        best[key] = min(best.get(key, np.inf), r["error"])
    for r in rows:
        r["regret"] = r["error"] / best[(r["shape"], r["scale"], r["epsilon"])]
    cpu = {m: {"median_cpu_s": float(np.median(v)), "releases": len(v)} for m, v in seconds.items()}
    return rows, cpu


def summary(rows: list[dict]) -> dict:
    out: dict = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        out[method] = {
            "mean_regret": float(np.mean([r["regret"] for r in mine])),
            "max_regret": float(np.max([r["regret"] for r in mine])),
            "wins": sum(r["regret"] == 1.0 for r in mine),
            "settings": len(mine),
            **{
                f"mean_regret_scale_{s:.0e}": float(np.mean([r["regret"] for r in mine if r["scale"] == s]))
                for s in sorted({r["scale"] for r in mine})
            },
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two shapes, scales 10^3 and 10^5, 2 trials")
    parser.add_argument("--trials", type=int, default=None, help="trials per setting (default 10, quick 2)")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    trials = args.trials if args.trials is not None else (2 if args.quick else 10)
    rows, cpu = accuracy(args.quick, trials)
    result = {
        "protocol": {
            "shapes": sorted({r["shape"] for r in rows}),
            "scales": sorted({r["scale"] for r in rows}),
            "epsilons": list(EPSILONS),
            "workload": "2000 random rectangles (seed 3)",
            "trials": trials,
            "error": "scaled average per-query error, mean over trials",
        },
        "summary": summary(rows),
        "cpu_per_release": cpu,
        "rows": rows,
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()

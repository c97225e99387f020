"""Every 2-D mechanism on real 2-D histograms: exact and observed rectangle errors, timings.

Data: the DPBench 2-D histograms (256 x 256) in ../shared/data/dpbench/2D and
age x hours-per-week of ../shared/data/adult/adult.csv (public bounds [17, 90] x [1, 99],
74 x 99 bins, values outside clipped).  Workload: 2000 random rectangles (each axis a range
between two uniform bins, fixed seed).  For each mechanism and epsilon in (0.1, 1):

* exact: the root of the exact mean squared error over the workload (data-independent,
  :func:`dprange.analysis.grid.expected_error`);
* observed: the root mean squared error of one seeded release against the true counts;
* seconds: the release (measure + least squares) and the workload's answers with standard
  errors.

    python benchmarks/multidim.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import pandas as pd

from dprange import DAWAHilbert, Domain, HybridTree, KDHierarchy, KDTree, Kronecker, Privelet, ProductDomain, Quadtree
from dprange.analysis.grid import expected_error
from dprange.mechanisms.optimized_grid import OptimizedKronecker
from dprange.workloads import random_rectangles

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
DPBENCH = ("Adult_2D_256_256", "MDSalary2D_256_256", "Stroke_2D_256_256", "checkin_256_256")


def mechanisms():
    return {
        "flat": Kronecker("identity"),
        "kron-tree-4": Kronecker(4),
        "kron-tree-16": Kronecker(16),
        "haar-2d": Kronecker("haar"),
        "privelet": Privelet(),
        "quadtree": Quadtree(),
        "quadtree-geo": Quadtree(budget="geometric"),
        "kd-hier-4": KDHierarchy(4),
        "optimized-kron": OptimizedKronecker(),
        # data-aware: no exact expected error (data-dependent bias); observed error only
        "kd-tree": KDTree(),
        "hybrid-tree": HybridTree(),
        "dawa-hilbert": DAWAHilbert(),
    }


def adult_histogram() -> np.ndarray:
    frame = pd.read_csv(os.path.join(DATA, "adult", "adult.csv"), usecols=["age", "hours-per-week"])
    domain = ProductDomain([Domain.interval(17.0, 90.0, 74), Domain.integers(1, 99)])
    return domain.histogram(frame[["age", "hours-per-week"]], clip=True)


def datasets(quick: bool):
    out = {"adult age x hours": adult_histogram()}
    for name in DPBENCH[:1] if quick else DPBENCH:
        out[name] = np.rint(np.load(os.path.join(DATA, "dpbench", "2D", name + ".npy"))).astype(np.int64)
    return out


def run(name: str, counts: np.ndarray, epsilons) -> list[dict]:
    rects = random_rectangles(counts.shape, 2000, rng=7)
    truth = rects.matvec(counts.ravel().astype(float))
    print(f"\n{name}: shape {counts.shape}, {int(counts.sum())} records", file=sys.stderr)
    print(
        f"{'mechanism':<14} {'eps':>4} {'exact rmse':>11} {'observed':>10} {'release s':>9} {'answers s':>9}",
        file=sys.stderr,
    )
    rows = []
    for label, mech in mechanisms().items():
        for eps in epsilons:
            data_aware = getattr(mech, "data_aware", False)
            exact = float("nan") if data_aware else expected_error(mech, counts.shape, rects, eps) ** 0.5
            start = time.process_time()
            rel = mech.release(counts, eps, rng=11)
            middle = time.process_time()
            answer = rel.rectangle(rects.lows, rects.highs)
            _ = answer.stderr
            end = time.process_time()
            observed = float(np.sqrt(np.mean((np.asarray(answer.value) - truth) ** 2)))
            print(
                f"{label:<14} {eps:>4} {exact:>11.1f} {observed:>10.1f} {middle - start:>9.2f} {end - middle:>9.2f}",
                file=sys.stderr,
            )
            rows.append(
                {
                    "dataset": name,
                    "records": int(counts.sum()),
                    "mechanism": label,
                    "epsilon": eps,
                    "data_aware": bool(data_aware),
                    "exact_rmse": None if data_aware else exact,
                    "observed_rmse": observed,
                    "release_cpu_s": middle - start,
                    "answers_cpu_s": end - middle,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="adult and one DPBench histogram")
    args = parser.parse_args()
    rows = []
    for name, counts in datasets(args.quick).items():
        rows += run(name, counts, (0.1, 1.0))
    json.dump({"benchmark": "multidim", "rectangles": 2000, "seed": 11, "rows": rows}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()

"""The speed targets of the multi-dimensional issue (10), as JSON.

1. "grid": a 1024 x 1024 release from 10^7 two-column records, then one million random
   rectangles with their exact standard errors; target under 3 s for histogram + release +
   rectangles.  Kronecker trees of branching 4 and 16, k-D Privelet and the quadtree.
2. "marginals": all 2-way marginals of a 5-attribute domain of 280,000 cells
   (50 x 100 x 7 x 4 x 2) released with their exact errors; target under 5 s and 1 GB.
   Flat Kronecker, the mechanism ``auto`` picks for 2-way marginals there, and the Fourier
   strategy; also the flat release constrained to published 1-way marginals
   (:func:`dprange.mechanisms.tables.constrain`).

Every case runs in a fresh process (spawned), so its peak resident memory (ru_maxrss) is its
own; times are CPU seconds of that process (``time.process_time``, all threads) and wall
seconds, the median of ``--repeats`` runs.  The machine is shared: CPU time is the figure to
compare; wall time depends on the load, which is reported (1-minute load average).

    python benchmarks/multidim_speed.py [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import resource
import statistics
import time

import numpy as np

GRID_TARGET_S = 3.0
MARGINALS_TARGET_S = 5.0
MARGINALS_TARGET_GB = 1.0


def measure(run, repeats: int) -> dict:
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        run()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return {"cpu_s": statistics.median(cpu), "wall_s": statistics.median(wall)}


def build(label: str):
    from dprange import Kronecker, Privelet, Quadtree  # noqa: PLC0415
    from dprange.analysis.grid import select_grid  # noqa: PLC0415
    from dprange.mechanisms.fourier import FourierMarginals  # noqa: PLC0415

    if label == "auto":
        return select_grid((50, 100, 7, 4, 2), 1.0, workload="marginals", order=2).mechanism
    return {
        "kronecker tree b=4": lambda: Kronecker(4),
        "kronecker tree b=16": lambda: Kronecker(16),
        "privelet": lambda: Privelet(),
        "quadtree": lambda: Quadtree(),
        "flat": lambda: Kronecker("identity"),
        "fourier": lambda: FourierMarginals(2),
        "flat + public 1-way marginals": lambda: Kronecker("identity"),
    }[label]()


def grid_case(label: str, repeats: int) -> dict:
    from dprange import Domain, ProductDomain  # noqa: PLC0415

    rng = np.random.default_rng(0)
    columns = [rng.integers(0, 1024, 10**7), rng.integers(0, 1024, 10**7)]
    domain = ProductDomain([Domain.integers(0, 1023)] * 2)
    ends = rng.integers(0, 1024, size=(10**6, 2, 2))
    lows, highs = ends.min(axis=2), ends.max(axis=2)
    mech = build(label)
    state: dict = {}

    def histogram():
        state["counts"] = domain.histogram(columns)

    def release():
        state["release"] = mech.release(state["counts"], 1.0)

    def rectangles():
        ans = state["release"].rectangle(lows, highs)
        return ans.value, ans.stderr

    stages = {"histogram": measure(histogram, repeats), "release": measure(release, repeats)}
    stages["rectangles_with_stderr"] = measure(rectangles, repeats)
    total_cpu = sum(s["cpu_s"] for s in stages.values())
    return {
        "case": "grid 1024x1024, 10^7 records, 10^6 rectangles",
        "mechanism": label,
        "stages": stages,
        "total_cpu_s": total_cpu,
        "total_wall_s": sum(s["wall_s"] for s in stages.values()),
        "target_s": GRID_TARGET_S,
        "meets_target_cpu": total_cpu < GRID_TARGET_S,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }


def marginals_case(label: str, repeats: int) -> dict:
    from dprange.answers.constrained import constrain  # noqa: PLC0415

    shape = (50, 100, 7, 4, 2)
    counts = np.random.default_rng(1).poisson(1.0, shape)
    pairs = list(itertools.combinations(range(5), 2))
    mech = build(label)
    public = {(a,): counts.sum(axis=tuple(b for b in range(5) if b != a)) for a in range(5)}

    def run():
        rel = mech.release(counts, 1.0)
        if label.endswith("marginals"):
            rel = constrain(rel, public)
        return [(rel.marginal(p).value, rel.marginal(p).stderr) for p in pairs]

    timing = measure(run, repeats)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return {
        "case": "all 10 2-way marginals of 50x100x7x4x2 with exact stderr",
        "mechanism": label,
        "configured": repr(mech),
        **timing,
        "target_s": MARGINALS_TARGET_S,
        "peak_rss_gb": peak,
        "meets_target_cpu": timing["cpu_s"] < MARGINALS_TARGET_S and peak < MARGINALS_TARGET_GB,
    }


def _child(args):
    kind, label, repeats = args
    return grid_case(label, repeats) if kind == "grid" else marginals_case(label, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one run of each case (a smoke test)")
    args = parser.parse_args()
    if args.quick:
        args.repeats = 1
    cases = [("grid", label) for label in ("kronecker tree b=4", "kronecker tree b=16", "privelet", "quadtree")]
    cases += [("marginals", label) for label in ("flat", "auto", "fourier", "flat + public 1-way marginals")]
    context = multiprocessing.get_context("spawn")
    results = []
    for kind, label in cases:
        with context.Pool(1) as pool:  # a fresh process per case: its own peak memory
            results.append(pool.apply(_child, ((kind, label, args.repeats),)))
    print(
        json.dumps(
            {
                "benchmark": "multidim_speed",
                "repeats": args.repeats,
                "statistic": "median",
                "cpu_count": os.cpu_count(),
                "load_average_1min": os.getloadavg()[0],
                "results": results,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

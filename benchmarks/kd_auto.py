"""k-D auto with and without the optimised candidates (issue 15): exact error and CPU time.

For each shape and workload (all rectangles, prefix rectangles), epsilon = 1, add/remove:

* before: :func:`dprange.analysis.grid.select_grid` on the shape-only pool
  (``grid_candidates(shape)``: the fixed Kronecker products, k-D hierarchies, Fourier), which
  is what auto ranked before the optimised mechanisms became candidates;
* after: ``select_grid`` as auto runs it (the pool with the workload's optimised candidates);
* the exact expected error (mean squared error per query) of each choice, their ratio;
* CPU seconds (time.process_time) of one ``select_grid``, median of ``--reps`` runs: before;
  after with an empty strategy cache (cold: the axes' 1-D strategies are optimised); after with
  the strategies in the disk cache (a fresh call, so only the disk cache is shared).

    python benchmarks/kd_auto.py [--reps 5] [--shapes 32x32,64x64]
    python benchmarks/kd_auto.py --rectangles [--reps 3] [--shapes 64x64,256x256]

``--rectangles``: explicit rectangle workloads (2000 rectangles, public seed 0) instead, each at
epsilon 1 and at (1, 1e-6): prefixes on axis 0 by ranges of width at most 4 on axis 1
("prefix-by-narrow"), ranges of width at most 8 on both ("narrow"), and ranges between two
uniform bins on both ("random"); before: the shape-only pool (no optimised product was ranked
for explicit rectangles), after: auto with the product optimised axis by axis for them
(:class:`dprange.mechanisms.optimized_grid.OptimizedKronecker` with the Rectangles).

Prints one JSON object.  The caches live in a temporary folder (DPRANGE_CACHE_DIR), one per cold
run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import numpy as np

from dprange.analysis.grid import grid_candidates, select_grid
from dprange.workloads import Rectangles

WORKLOADS = ("all-rectangles", "prefix-rectangles")


def cpu(call):
    """(result, CPU seconds of the call)."""
    start = time.process_time()
    out = call()
    return out, time.process_time() - start


def explicit_rectangles(shape, kind: str, count: int = 2000) -> Rectangles:
    """The ``--rectangles`` workloads (module doc) on a 2-D ``shape``, public seed 0."""
    rng = np.random.default_rng(0)
    n0, n1 = shape
    if kind == "prefix-by-narrow":
        start = rng.integers(0, n1, count)
        lows = np.stack([np.zeros(count, dtype=np.int64), start], 1)
        highs = np.stack([rng.integers(0, n0, count), np.minimum(start + rng.integers(0, 4, count), n1 - 1)], 1)
    elif kind == "narrow":
        lows = np.stack([rng.integers(0, n, count) for n in shape], 1)
        highs = np.minimum(lows + rng.integers(0, 8, (count, 2)), np.array(shape) - 1)
    else:
        ends = np.stack([rng.integers(0, n, (count, 2)) for n in shape], 1)
        lows, highs = ends.min(2), ends.max(2)
    return Rectangles(shape, lows, highs)


def measure(shape, workload, reps, root, delta=0.0):
    before_times, cold_times, cached_times = [], [], []
    before = after = None
    for rep in range(reps):
        before, seconds = cpu(
            lambda: select_grid(shape, 1.0, workload=workload, delta=delta, candidates=grid_candidates(shape))
        )
        before_times.append(seconds)
        name = workload if isinstance(workload, str) else "rectangles"
        os.environ["DPRANGE_CACHE_DIR"] = os.path.join(root, f"{name}-{'x'.join(map(str, shape))}-{delta}-{rep}")
        after, seconds = cpu(lambda: select_grid(shape, 1.0, workload=workload, delta=delta))
        cold_times.append(seconds)
        cached, seconds = cpu(lambda: select_grid(shape, 1.0, workload=workload, delta=delta))
        cached_times.append(seconds)
        assert cached.error == after.error
    assert before is not None and after is not None
    return {
        "shape": list(shape),
        "workload": workload if isinstance(workload, str) else repr(workload),
        "delta": delta,
        "before": {"mechanism": repr(before.mechanism), "error": before.error},
        "after": {"mechanism": repr(after.mechanism), "error": after.error},
        "before_over_after": before.error / after.error,
        "cpu_seconds_median": {
            "before": statistics.median(before_times),
            "after_cold": statistics.median(cold_times),
            "after_cached": statistics.median(cached_times),
        },
        "reps": reps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--shapes", default=None, help="default 32x32,64x64 (--rectangles: 64x64,256x256)")
    parser.add_argument("--rectangles", action="store_true", help="explicit rectangle workloads (module doc)")
    args = parser.parse_args()
    default = "64x64,256x256" if args.rectangles else "32x32,64x64"
    shapes = [tuple(int(s) for s in text.split("x")) for text in (args.shapes or default).split(",")]
    with tempfile.TemporaryDirectory() as root:
        if args.rectangles:
            rows = []
            for shape in shapes:
                for kind in ("prefix-by-narrow", "narrow", "random"):
                    for delta in (0.0, 1e-6):
                        row = measure(shape, explicit_rectangles(shape, kind), args.reps, root, delta)
                        rows.append({"rectangles": kind, **row})
                        print(json.dumps(rows[-1]), flush=True)
        else:
            rows = [measure(shape, workload, args.reps, root) for shape in shapes for workload in WORKLOADS]
    print(json.dumps({"epsilon": 1.0, "neighbours": "add_remove", "cases": rows}, indent=1))


if __name__ == "__main__":
    main()

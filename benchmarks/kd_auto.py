"""k-D auto with and without the optimised candidates (issue 15): exact error and CPU time.

For each shape and workload (all rectangles, prefix rectangles), epsilon = 1, add/remove:

* before: :func:`dprange.multidim.select_grid` on the shape-only pool
  (``grid_candidates(shape)``: the fixed Kronecker products, k-D hierarchies, Fourier), which
  is what auto ranked before the optimised mechanisms became candidates;
* after: ``select_grid`` as auto runs it (the pool with the workload's optimised candidates);
* the exact expected error (mean squared error per query) of each choice, their ratio;
* CPU seconds (time.process_time) of one ``select_grid``, median of ``--reps`` runs: before;
  after with an empty strategy cache (cold: the axes' 1-D strategies are optimised); after with
  the strategies in the disk cache (a fresh call, so only the disk cache is shared).

    python benchmarks/kd_auto.py [--reps 5] [--shapes 32x32,64x64]

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

from dprange.multidim import grid_candidates, select_grid

WORKLOADS = ("all-rectangles", "prefix-rectangles")


def cpu(call):
    """(result, CPU seconds of the call)."""
    start = time.process_time()
    out = call()
    return out, time.process_time() - start


def measure(shape, workload, reps, root):
    before_times, cold_times, cached_times = [], [], []
    before = after = None
    for rep in range(reps):
        before, seconds = cpu(lambda: select_grid(shape, 1.0, workload=workload, candidates=grid_candidates(shape)))
        before_times.append(seconds)
        os.environ["DPRANGE_CACHE_DIR"] = os.path.join(root, f"{workload}-{'x'.join(map(str, shape))}-{rep}")
        after, seconds = cpu(lambda: select_grid(shape, 1.0, workload=workload))
        cold_times.append(seconds)
        cached, seconds = cpu(lambda: select_grid(shape, 1.0, workload=workload))
        cached_times.append(seconds)
        assert cached.error == after.error
    assert before is not None and after is not None
    return {
        "shape": list(shape),
        "workload": workload,
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
    parser.add_argument("--shapes", default="32x32,64x64")
    args = parser.parse_args()
    shapes = [tuple(int(s) for s in text.split("x")) for text in args.shapes.split(",")]
    with tempfile.TemporaryDirectory() as root:
        rows = [measure(shape, workload, args.reps, root) for shape in shapes for workload in WORKLOADS]
    print(json.dumps({"epsilon": 1.0, "neighbours": "add_remove", "cases": rows}, indent=1))


if __name__ == "__main__":
    main()

"""CPU time of the non-negative refit of 2-D ``auto`` (``auto_nonnegative``) and of least squares
moved toward it (``auto_toward_nonnegative``, auto-data's ``auto`` branch: the refit and four
probe refits), new beside the former solver steps, as JSON.

The former steps are rebuilt by patching dprange.inference.simplex_fit back: the gradient from a
product and an adjoint product of the design (no Gram operator), the projection's threshold by a
full sort at every iteration, and the Lipschitz constant by 60 power iterations.  Both run the
same releases (DPBench shapes summed to each side and sampled as train_auto_grid.py does, epsilon 1, 2000 random
rectangles, the same seeds); ``max_cell_difference`` is the largest difference between their
released cells (the iterates differ only by rounding).  CPU seconds (``time.process_time``),
medians of ``--repeats``; the machine may be shared.

    OPENBLAS_NUM_THREADS=1 python benchmarks/refit_speed.py [--sides 64,128,256] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
from train_auto_grid import distribution, sample

import dprange.inference.simplex_fit as simplex
from dprange.data_aware.nonnegative_grid import AutoTowardNonnegative, NonnegativeAuto
from dprange.workloads import random_rectangles

SHAPES = ("ADULT-2D", "MDSALARY-OVERT")


@contextlib.contextmanager
def former_steps():
    """simplex_fit as it was: products, not the Gram operator; a sort a projection; the power
    method for the Lipschitz constant."""
    saved = simplex._structured_gram, simplex._known_largest, simplex.simplex_threshold
    simplex._structured_gram = lambda block: None
    simplex._known_largest = lambda block: None
    simplex.simplex_threshold = lambda values, total, start=None: simplex.sorted_threshold(values, total)
    try:
        yield
    finally:
        simplex._structured_gram, simplex._known_largest, simplex.simplex_threshold = saved


def timed(mechanism, counts, epsilon: float, repeats: int):
    seconds, released = [], None
    for _ in range(repeats):
        start = time.process_time()
        released = mechanism.release(counts, epsilon, rng=1000)
        seconds.append(time.process_time() - start)
    return statistics.median(seconds), np.asarray(released.counts, dtype=float)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sides", default="64,128,256")
    parser.add_argument("--records", type=int, default=10**4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    cells = []
    for side in map(int, args.sides.split(",")):
        shape = (side, side)
        workload = random_rectangles(shape, 2000, rng=3)
        for name in SHAPES:
            counts = sample(distribution(name, side), args.records, seed=0)
            for kind in (NonnegativeAuto, AutoTowardNonnegative):
                mechanism = kind(workload=workload)
                mechanism.release(counts, 1.0, rng=999)  # the design chosen once, kept for the next release
                new, ours = timed(mechanism, counts, 1.0, args.repeats)
                with former_steps():
                    old, theirs = timed(mechanism, counts, 1.0, args.repeats)
                cells.append(
                    {
                        "shape": name,
                        "side": side,
                        "mechanism": kind.name,
                        "cpu_s": round(new, 3),
                        "former_cpu_s": round(old, 3),
                        "speedup_cpu": round(old / new, 2),
                        "max_cell_difference": float(np.abs(ours - theirs).max()),
                    }
                )
                print(json.dumps(cells[-1]), file=sys.stderr)
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "records": args.records,
        "epsilon": 1.0,
        "repeats": args.repeats,
        "cells": cells,
        "speedup_geometric_mean": round(float(np.exp(np.mean([np.log(c["speedup_cpu"]) for c in cells]))), 2),
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

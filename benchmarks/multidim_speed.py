"""The speed targets of the multi-dimensional issue, on this machine.

1. A 1024 x 1024 release from 10^7 two-column records (Kronecker trees of branching 4 and 16,
   and the quadtree), then one million random rectangles with their exact standard errors:
   target under 3 s in all (histogram + release + rectangles).
2. All 2-way marginals of a 5-attribute domain of 280,000 cells (50 x 100 x 7 x 4 x 2)
   released with their exact errors (flat Kronecker, the mechanism auto picks for 2-way
   marginals on such a domain is printed too): target under 5 s and 1 GB.

Each line is the minimum over --repeats runs (the machine is shared).

    python benchmarks/multidim_speed.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import itertools
import resource
import time

import numpy as np

from dprange import Domain, Kronecker, ProductDomain, Quadtree
from dprange.multidim import select_grid


def timed(run, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = run()
        best = min(best, time.perf_counter() - start)
    return best, out


def grid_target(repeats: int) -> None:
    rng = np.random.default_rng(0)
    columns = [rng.integers(0, 1024, 10**7), rng.integers(0, 1024, 10**7)]
    domain = ProductDomain([Domain.integers(0, 1023)] * 2)
    ends = rng.integers(0, 1024, size=(10**6, 2, 2))
    lows, highs = ends.min(axis=2), ends.max(axis=2)
    for label, mech in (
        ("kronecker tree b=4", Kronecker(4)),
        ("kronecker tree b=16", Kronecker(16)),
        ("quadtree", Quadtree()),
    ):
        hist, counts = timed(lambda: domain.histogram(columns), repeats)
        rel_time, rel = timed(lambda: mech.release(counts, 1.0), repeats)

        def answer(rel=rel):
            ans = rel.rectangle(lows, highs)
            return ans.value, ans.stderr

        rect_time, _ = timed(answer, repeats)
        total = hist + rel_time + rect_time
        print(
            f"{label:>20}: histogram {hist:.2f} s, release {rel_time:.2f} s, 10^6 rectangles with stderr "
            f"{rect_time:.2f} s, total {total:.2f} s"
        )


def marginals_target(repeats: int) -> None:
    shape = (50, 100, 7, 4, 2)
    rng = np.random.default_rng(1)
    counts = rng.poisson(1.0, shape)
    pairs = list(itertools.combinations(range(5), 2))
    chosen = select_grid(shape, 1.0, workload="marginals", order=2).mechanism
    for label, mech in (("flat", Kronecker("identity")), ("auto for 2-way marginals", chosen)):

        def run(mech=mech):
            rel = mech.release(counts, 1.0)
            return [(rel.marginal(p).value, rel.marginal(p).stderr) for p in pairs]

        seconds, _ = timed(run, repeats)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(
            f"{label:>26} {mech!r}: all 10 2-way marginals with stderr {seconds:.2f} s (peak RSS so far {peak:.2f} GB)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    grid_target(args.repeats)
    marginals_target(args.repeats)


if __name__ == "__main__":
    main()

"""Section 5 of Qardaji, Yang and Li (PVLDB 2013) with exact errors, and the quadtree budgets
of Cormode, Procopiuc, Srivastava, Shen and Yu (ICDE 2012).

Noise as in the papers: continuous Laplace, add/remove neighbours, the root not measured,
epsilon = 1.  Errors are exact average variances over all rectangles of [n]^d
(:func:`dprange.analysis.grid.expected_error`: per-axis means, no rectangle enumerated).

1. Flat (one noisy count per cell) versus the best k-D hierarchy (fan-out b^d over the grid
   padded to a cube of side b^h, uniform budget, exact least squares) for d = 1..4 and several
   sides n; prints the ratio and where flat starts winning.  The paper: the benefit of
   hierarchies shrinks quickly with d, and for d >= 3 flat is almost always better.
2. Quadtrees on 2^k x 2^k grids: uniform versus geometric budgets (Cormode et al.: geometric
   is better for rectangle queries).

    python benchmarks/qardaji2013_multidim.py [--quick]
"""

from __future__ import annotations

import argparse
import time

from dprange.analysis.grid import expected_error
from dprange.mechanisms.grid import KDHierarchy, Kronecker, Quadtree
from dprange.strategies.trees import tree_height

SIDES = {1: (64, 1024, 4096), 2: (16, 64, 256), 3: (8, 16, 32), 4: (4, 8, 16)}
QUICK_SIDES = {1: (64, 1024), 2: (16, 64), 3: (8, 16), 4: (4, 8)}
BRANCHINGS = (2, 3, 4, 5, 6, 8, 16)
#: Largest padded cube a hierarchy is evaluated on (its exact error model is O(cells)).
MAX_PADDED_CELLS = 4_000_000


def flat_error(d: int, n: int) -> float:
    return expected_error(Kronecker("identity", noise="laplace_float"), (n,) * d, "all_rectangles", 1.0)


def best_hierarchy(d: int, n: int) -> tuple[int, float]:
    """(b, error) of the k-D hierarchy with the lowest exact all-rectangle error."""
    best = (0, float("inf"))
    for b in BRANCHINGS:
        if b >= max(n, 3) or (b ** tree_height(n, b)) ** d > MAX_PADDED_CELLS:
            continue
        error = expected_error(KDHierarchy(b, noise="laplace_float"), (n,) * d, "all_rectangles", 1.0)
        best = min(best, (b, error), key=lambda item: item[1])
    return best


def flat_versus_hierarchy(sides) -> None:
    print("1. all-rectangle error, epsilon = 1: flat vs the best k-D hierarchy (fan-out b^d)")
    print(f"{'d':>2} {'n':>6} {'cells':>9} {'flat':>12} {'best b':>6} {'hierarchy':>12} {'flat/hier':>9}")
    for d, ns in sides.items():
        flat_wins = []
        for n in ns:
            flat = flat_error(d, n)
            b, hier = best_hierarchy(d, n)
            ratio = flat / hier
            if ratio < 1:
                flat_wins.append(n)
            print(f"{d:>2} {n:>6} {n**d:>9} {flat:>12.1f} {b:>6} {hier:>12.1f} {ratio:>9.3f}")
        print(
            f"   d = {d}: flat wins at n = {flat_wins}" if flat_wins else f"   d = {d}: the hierarchy wins everywhere"
        )


def quadtree_budgets(exponents) -> None:
    print("\n2. quadtree on 2^k x 2^k, all-rectangle error, epsilon = 1: uniform vs geometric budget")
    print(f"{'k':>2} {'uniform':>12} {'geometric':>12} {'geo/uni':>8}")
    for k in exponents:
        shape = (2**k, 2**k)
        uniform = expected_error(Quadtree(noise="laplace_float"), shape, "all_rectangles", 1.0)
        geometric = expected_error(Quadtree(budget="geometric", noise="laplace_float"), shape, "all_rectangles", 1.0)
        print(f"{k:>2} {uniform:>12.1f} {geometric:>12.1f} {geometric / uniform:>8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    args = parser.parse_args()
    start = time.perf_counter()
    flat_versus_hierarchy(QUICK_SIDES if args.quick else SIDES)
    quadtree_budgets(range(3, 7) if args.quick else range(3, 11))
    print(f"\n({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()

"""Optimal tree mechanisms for CDFs and consistency (Rameshwar and Tandon 2024, seed 001).

1. Exact normalised squared l-infinity errors, (n eps)^2 max_j Var(C_j / n) = eps^2 max_j
   Var(C_j), replace model (public n), continuous Laplace: histogram, direct range, binary
   tree, equal branching (best b, equal budgets), best integer structure (Theorem IV.2
   budgets, covering estimator) and the same structure with full GLS.
2. Monte-Carlo: l-infinity and l2 errors of the CDF before and after consistency (L1 and
   L2 loss) on uniform data and on two DPBench histograms, epsilon in {0.1, 1}.
3. Speed: the structure search at L = 2^20; the trellis at L = 4096, n = 10^5; the
   isotonic path at L = 2^20, n = 10^9.

    python benchmarks/rameshwar2024.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

from dprange import Hierarchical
from dprange.analysis.cdf_trees import best_structure, direct_linf, histogram_linf, linf_error
from dprange.inference.consistency import consistent_cdf
from dprange.strategies.budgets import optimal_budgets

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "dpbench", "1D")


def equal_b(L, branchings):
    best = None
    for b in branchings:
        h = 1
        while b**h < L:
            h += 1
        err = linf_error(L, (b,) * h, [1.0 / h] * h)
        if best is None or err < best[1]:
            best = (b, err)
    return best


def error_table(sizes, branchings):
    rows = []
    for L in sizes:
        h2 = 1
        while 2**h2 < L:
            h2 += 1
        search = best_structure(L, 1.0)
        b, eq = equal_b(L, branchings)
        rows.append(
            {
                "L": L,
                "histogram": histogram_linf(L, 1.0),
                "direct_range": direct_linf(L, 1.0),
                "binary_tree": linf_error(L, (2,) * h2, [1.0 / h2] * h2),
                "equal_b": {"b": b, "error": eq},
                "best_structure": {"branching": list(search.best.branching), "error": search.best.error},
                "best_structure_gls": linf_error(L, search.best.branching, search.best.budgets, estimator="gls"),
                "equal_b_16": linf_error(L, (16,) * _height(L, 16), [1.0 / _height(L, 16)] * _height(L, 16)),
                "equal_b_17": linf_error(L, (17,) * _height(L, 17), [1.0 / _height(L, 17)] * _height(L, 17)),
            }
        )
    return rows


def _height(L, b):
    h = 1
    while b**h < L:
        h += 1
    return h


def datasets(quick):
    rng = np.random.default_rng(0)
    out = {"uniform": rng.multinomial(100_000, np.full(4096, 1 / 4096))}
    for name in ("HEPTH.n4096.npy", "SEARCHLOGS.n4096.npy"):
        path = os.path.join(DATA, name)
        if os.path.exists(path):
            out[name.split(".")[0]] = np.load(path, allow_pickle=False)
    return out


def consistency_table(reps, quick):
    rows = []
    for name, x in datasets(quick).items():
        L, n = x.size, int(x.sum())
        truth = np.cumsum(x) / n
        search = best_structure(L, 1.0)
        for eps in (0.1, 1.0):
            mech = Hierarchical(
                list(search.best.branching),
                optimal_budgets(search.best.branching, eps),
                measure_root=False,
                neighbours="replace",
                noise="laplace_float",
            )
            rng = np.random.default_rng(1)
            errs = {k: {"linf": [], "l2": []} for k in ("raw", "consistent_l2", "consistent_l1")}
            for _ in range(reps):
                rel = mech.release(x, eps, rng=rng)
                cdfs = {
                    "raw": rel.cdf().value,
                    "consistent_l2": rel.consistent_cumulative("l2") / n,
                    "consistent_l1": rel.consistent_cumulative("l1") / n,
                }
                for k, f in cdfs.items():
                    errs[k]["linf"].append(np.abs(f - truth).max())
                    errs[k]["l2"].append(np.sqrt(np.mean((f - truth) ** 2)))
            rows.append(
                {
                    "data": name,
                    "L": L,
                    "n": n,
                    "epsilon": eps,
                    "branching": list(search.best.branching),
                    **{k: {m: float(np.mean(v)) for m, v in d.items()} for k, d in errs.items()},
                }
            )
    return rows


def speed(quick, repeats=3):
    def timed(fn):
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    rng = np.random.default_rng(2)
    out = {}
    big = 2**16 if quick else 2**20
    out[f"structure_search_L{big}_s"] = timed(lambda: best_structure(big, 1.0))
    y = np.cumsum(rng.poisson(100_000 / 4096, 4096)).astype(float)
    n = int(y[-1])
    y += rng.laplace(0, 20, y.size)
    out[f"trellis_L4096_n{n}_s"] = timed(lambda: consistent_cdf(y, n, "l1", method="trellis"))
    y = np.cumsum(rng.poisson(1e9 / big, big)).astype(float)
    n = int(y[-1])
    y += rng.laplace(0, 1000, y.size)
    out[f"isotonic_l2_L{big}_n{n}_s"] = timed(lambda: consistent_cdf(y, n, "l2"))
    out[f"isotonic_l1_L{big}_n{n}_s"] = timed(lambda: consistent_cdf(y, n, "l1"))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    sizes = [64, 1000, 1024, 4096] if args.quick else [64, 1000, 1024, 4096, 10**5, 2**20]
    branchings = [2, 4, 8, 16, 17, 32] if args.quick else list(range(2, 65))
    result = {
        "benchmark": "rameshwar2024",
        "noise": "laplace_float",
        "neighbours": "replace",
        "normalisation": "eps^2 * max_j Var(C_j) (= (n eps)^2 * squared l-inf CDF error)",
        "linf_table": error_table(sizes, branchings),
        "consistency": consistency_table(3 if args.quick else args.reps, args.quick),
        "speed_median_s": speed(args.quick),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

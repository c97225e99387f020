"""Data-aware against data-independent mechanisms on the DPBench 1-D shapes, and their speed.

Protocol (after Hay, Machanavajjhala, Miklau, Chen and Zhang, "Principled Evaluation of
Differentially Private Algorithms using DPBench", SIGMOD 2016), reduced to fit a 2-core
machine: for each 1-D histogram of ../shared/data/dpbench/1D (domain 4096, or coarsened to
1024 with ``--coarsen``) its shape (counts / total) is sampled at a scale of records
(a multinomial draw, fixed seed); each mechanism releases it at each epsilon; the error is the
*scaled average per-query error* mean_q |answer_q - true_q| / scale over a workload
(prefix: the 4096 prefixes; random ranges: 2000 uniform ranges, fixed seed), averaged over
``--trials`` seeded trials.  The regret of a method on a setting is its error over the best
method's error there.  Timings: DAWA at n = 4096 and 2^20, MWEM with 100 rounds on 4096 bins
and 10^4 random ranges.

    python benchmarks/dpbench.py [--quick] [--trials 3] [--coarsen] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from dprange import DAWA, MWEM, Flat, Hierarchical, Wavelet
from dprange.workloads import RandomRanges

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "dpbench", "1D")
SHAPES = ("ADULTFRANK", "HEPTH", "MEDCOST", "NETTRACE", "PATENT", "SEARCHLOGS")


def mechanisms():
    return {
        "flat": Flat(),
        "hierarchical-16": Hierarchical(16),
        "wavelet": Wavelet(),
        "dawa": DAWA(),
        "mwem": MWEM(rounds=20),
    }


def shape(name: str, coarsen: bool) -> np.ndarray:
    counts = np.load(os.path.join(DATA, f"{name}.n4096.npy")).astype(float)
    if coarsen:
        counts = counts.reshape(1024, 4).sum(axis=1)
    return counts / counts.sum()


def sample(p: np.ndarray, scale: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).multinomial(scale, p).astype(np.int64)


def scaled_error(estimate: np.ndarray, counts: np.ndarray, lo: np.ndarray, hi: np.ndarray, scale: int) -> float:
    est = np.concatenate([[0.0], np.cumsum(estimate)])
    true = np.concatenate([[0], np.cumsum(counts)])
    return float(np.mean(np.abs((est[hi + 1] - est[lo]) - (true[hi + 1] - true[lo]))) / scale)


def release(mech, counts, epsilon, seed, workload):
    if isinstance(mech, MWEM):
        return mech.release(counts, epsilon, rng=seed, workload=workload)
    return mech.release(counts, epsilon, rng=seed)


def accuracy(quick: bool, trials: int, coarsen: bool) -> list[dict]:
    rows = []
    n = 1024 if coarsen else 4096
    workloads = {"prefix": None, "random-range": RandomRanges(n, k=2000, seed=3)}
    scales = (10**3, 10**5) if quick else (10**3, 10**5, 10**7)
    for name in SHAPES[:2] if quick else SHAPES:
        p = shape(name, coarsen)
        for scale in scales:
            for epsilon in (0.1, 1.0):
                for wname, workload in workloads.items():
                    lo, hi = (np.zeros(n, dtype=np.int64), np.arange(n)) if workload is None else workload.ranges()
                    for mname, mech in mechanisms().items():
                        errors = []
                        for t in range(trials):
                            counts = sample(p, scale, seed=t)
                            rel = release(mech, counts, epsilon, 1000 + t, workload)
                            errors.append(scaled_error(rel.estimate, counts, lo, hi, scale))
                        rows.append(
                            {
                                "shape": name,
                                "scale": scale,
                                "epsilon": epsilon,
                                "workload": wname,
                                "method": mname,
                                "error": float(np.mean(errors)),
                            }
                        )
    best: dict = {}
    for r in rows:
        key = (r["shape"], r["scale"], r["epsilon"], r["workload"])
        best[key] = min(best.get(key, np.inf), r["error"])
    for r in rows:
        r["regret"] = r["error"] / best[(r["shape"], r["scale"], r["epsilon"], r["workload"])]
    return rows


def timed(fn, repeats: int = 3) -> float:
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return float(best)


def speed() -> dict:
    hepth = np.rint(np.load(os.path.join(DATA, "HEPTH.n4096.npy"))).astype(np.int64)
    big = np.random.default_rng(0).poisson(3, 2**20)
    ranges = RandomRanges(4096, k=10**4, seed=1)
    return {
        "dawa_4096_s": timed(lambda: DAWA().release(hepth, 0.1, rng=1)),
        "dawa_2^20_s": timed(lambda: DAWA().release(big, 0.1, rng=1), repeats=1),
        "mwem_100_rounds_4096_bins_10^4_ranges_s": timed(
            lambda: MWEM(rounds=100).release(hepth, 1.0, rng=1, workload=ranges), repeats=1
        ),
    }


def summary(rows: list[dict]) -> dict:
    out: dict = {}
    for method in sorted({r["method"] for r in rows}):
        mine = [r for r in rows if r["method"] == method]
        out[method] = {
            "mean_regret": float(np.mean([r["regret"] for r in mine])),
            "wins": sum(r["regret"] == 1.0 for r in mine),
            "mean_regret_scale_1e3": float(np.mean([r["regret"] for r in mine if r["scale"] == 10**3])),
            "mean_regret_largest_scale": float(
                np.mean([r["regret"] for r in mine if r["scale"] == max(r2["scale"] for r2 in rows)])
            ),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two shapes, scales 10^3 and 10^5")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--coarsen", action="store_true", help="domain 1024 instead of 4096")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    timings = speed()
    print(json.dumps(timings, indent=1))
    rows = accuracy(args.quick, args.trials, args.coarsen)
    for r in rows:
        print(
            f"{r['shape']:<11} {r['scale']:>9} eps={r['epsilon']:<4} {r['workload']:<13} "
            f"{r['method']:<16} {r['error']:.3e} regret {r['regret']:.2f}"
        )
    table = summary(rows)
    print(json.dumps(table, indent=1))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"timings": timings, "rows": rows, "summary": table}, fh, indent=1)


if __name__ == "__main__":
    main()

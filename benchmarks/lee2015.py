"""Maximum-likelihood (L1) post-processing vs least squares (Lee, Wang, Kifer, KDD 2015).

DPBench 1-D histograms (4096 bins; NETTRACE, SEARCHLOGS, HEPTH, ADULT), epsilon 0.1 and 1,
continuous Laplace noise as in the paper.  For Flat and Hierarchical (b = 2 and 16) with GLS,
NNLS and L1 (alpha = 0.9) inference: the MSE of unit queries and of random ranges of length
4, 16, 64, 256, 1024 (500 ranges each), averaged over ``--reps`` releases.  Also the time of
L1 on a hierarchy over 2^16 bins (the paper's ADMM took 21 s; its LP solvers failed above
2^12 bins).

    python benchmarks/lee2015.py [--quick] [--reps R]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

from dprange import Flat, Hierarchical

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "dpbench", "1D")
FILES = {"NETTRACE": "NETTRACE.n4096.npy", "SEARCHLOGS": "SEARCHLOGS.n4096.npy", "HEPTH": "HEPTH.n4096.npy",
         "ADULT": "ADULTFRANK.n4096.npy"}
LENGTHS = (4, 16, 64, 256, 1024)


def mechanisms():
    out = {}
    for inference in ("gls", "nnls", "l1"):
        out[f"flat/{inference}"] = Flat(noise="laplace", inference=inference)
        out[f"H2/{inference}"] = Hierarchical(2, measure_root=False, noise="laplace", inference=inference)
        out[f"H16/{inference}"] = Hierarchical(16, measure_root=False, noise="laplace", inference=inference)
    return out


def evaluate(x, eps, reps, rng):
    n = x.size
    queries = {}
    for length in LENGTHS:
        lo = rng.integers(0, n - length + 1, 500)
        queries[length] = (lo, lo + length - 1)
    out = {}
    for name, mech in mechanisms().items():
        unit, ranges = [], {k: [] for k in LENGTHS}
        for r in range(reps):
            est = mech.release(x, eps, rng=1000 + r).histogram().value
            unit.append(np.mean((est - x) ** 2))
            sums, truth = np.concatenate([[0], np.cumsum(est)]), np.concatenate([[0], np.cumsum(x)])
            for length, (lo, hi) in queries.items():
                ranges[length].append(np.mean(((sums[hi + 1] - sums[lo]) - (truth[hi + 1] - truth[lo])) ** 2))
        out[name] = {"unit": float(np.mean(unit)), **{f"len{k}": float(np.mean(v)) for k, v in ranges.items()}}
    return out


def l1_speed(repeats=3):
    x = np.random.default_rng(0).poisson(0.5, 2**16)
    mech = Hierarchical(16, noise="laplace", inference="l1")
    times, iterations = [], []
    for r in range(repeats):
        meas = mech.measure(x, 1.0, rng=r)
        t = time.perf_counter()
        est = mech.infer(meas)
        times.append(time.perf_counter() - t)
        iterations.append(est.result.iterations)
    return {"bins": 2**16, "median_s": statistics.median(times), "iterations": iterations,
            "converged": bool(est.result.converged)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two datasets, one epsilon, 2 releases")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    names = ["NETTRACE", "HEPTH"] if args.quick else list(FILES)
    epsilons = [1.0] if args.quick else [0.1, 1.0]
    reps = 2 if args.quick else args.reps
    rng = np.random.default_rng(0)
    results = []
    for name in names:
        path = os.path.join(DATA, FILES[name])
        if not os.path.exists(path):
            continue
        x = np.load(path, allow_pickle=False)
        for eps in epsilons:
            results.append({"data": name, "epsilon": eps, "zero_fraction": float((x == 0).mean()),
                            "mse": evaluate(x, eps, reps, rng)})
    print(json.dumps({"benchmark": "lee2015", "noise": "laplace", "reps": reps, "results": results,
                      "l1_speed": l1_speed()}, indent=1))


if __name__ == "__main__":
    main()

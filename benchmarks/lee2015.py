"""Maximum-likelihood (L1) post-processing vs least squares (Lee, Wang, Kifer, KDD 2015).

DPBench 1-D histograms (4096 bins; NETTRACE, SEARCHLOGS, HEPTH, ADULT), epsilon 0.1 and 1,
continuous Laplace noise as in the paper.  For Flat and Hierarchical (b = 2, the paper's
binary tree, and b = 16, our default) with GLS, NNLS and L1 (alpha = 0.9, rho = 2: the
paper's settings) inference: the MSE of unit queries and of random ranges of length 4, 16,
64, 256, 1024 (500 ranges each), averaged over ``--reps`` releases; ``ratio_l1_gls`` gives
MSE(L1) / MSE(GLS) per query length (< 1: L1 better).  Also the time of L1 on hierarchies
over 2^16 bins (the paper's ADMM took 21 s; its LP solvers failed above 2^12 bins).

    python benchmarks/lee2015.py [--quick] [--reps R]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

from dprange import Flat, Hierarchical

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "dpbench", "1D")
FILES = {
    "NETTRACE": "NETTRACE.n4096.npy",
    "SEARCHLOGS": "SEARCHLOGS.n4096.npy",
    "HEPTH": "HEPTH.n4096.npy",
    "ADULT": "ADULTFRANK.n4096.npy",
}
LENGTHS = (4, 16, 64, 256, 1024)
PAPER = {"rho": 2.0}  # alpha = 0.9 is the library default


def mechanisms():
    out = {}
    for inference in ("gls", "nnls", "l1"):
        options = None if inference == "gls" else PAPER
        out[f"flat/{inference}"] = Flat(noise="laplace_float", inference=inference, inference_options=options)
        for b in (2, 16):
            out[f"H{b}/{inference}"] = Hierarchical(
                b, noise="laplace_float", inference=inference, inference_options=options
            )
    return out


def evaluate(x, eps, reps, rng):
    """MSE per query length for every mechanism; the same noise seeds for GLS, NNLS and L1 of
    one mechanism, so the comparison is paired."""
    n = x.size
    queries = {}
    for length in LENGTHS:
        lo = rng.integers(0, n - length + 1, 500)
        queries[length] = (lo, lo + length - 1)
    truth = np.concatenate([[0], np.cumsum(x)])
    out = {}
    for name, mech in mechanisms().items():
        unit, ranges, iterations = [], {k: [] for k in LENGTHS}, []
        for r in range(reps):
            estimate = mech.infer(mech.measure(x, eps, rng=1000 + r))
            est = estimate.leaves
            if hasattr(estimate, "result"):
                iterations.append(estimate.result.iterations if estimate.result.converged else -1)
            unit.append(np.mean((est - x) ** 2))
            sums = np.concatenate([[0], np.cumsum(est)])
            for length, (lo, hi) in queries.items():
                ranges[length].append(np.mean(((sums[hi + 1] - sums[lo]) - (truth[hi + 1] - truth[lo])) ** 2))
        out[name] = {"unit": float(np.mean(unit)), **{f"len{k}": float(np.mean(v)) for k, v in ranges.items()}}
        if iterations:
            out[name]["admm_iterations"] = iterations  # -1: not converged
    return out


def ratios(mse):
    """MSE(L1) / MSE(GLS) and MSE(NNLS) / MSE(GLS) per mechanism and query length."""
    out = {}
    for base in ("flat", "H2", "H16"):
        for other in ("l1", "nnls"):
            out[f"{base}/{other}"] = {
                k: round(mse[f"{base}/{other}"][k] / mse[f"{base}/gls"][k], 3) for k in mse[f"{base}/gls"]
            }
    return out


def l1_speed(repeats=3, bins=2**16):
    x = np.random.default_rng(0).poisson(0.5, bins)
    out = []
    for b in (16, 2):
        mech = Hierarchical(b, noise="laplace_float", inference="l1", inference_options=PAPER)
        for eps in (0.1, 1.0):
            times, iterations, converged = [], [], []
            for r in range(repeats):
                meas = mech.measure(x, eps, rng=r)
                t = time.perf_counter()
                est = mech.infer(meas)
                times.append(time.perf_counter() - t)
                iterations.append(est.result.iterations)
                converged.append(bool(est.result.converged))
            out.append(
                {
                    "branching": b,
                    "epsilon": eps,
                    "bins": bins,
                    "median_s": round(statistics.median(times), 3),
                    "iterations": iterations,
                    "converged": all(converged),
                }
            )
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two datasets, one epsilon, 2 releases, 2^14-bin timing")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    names = ["NETTRACE", "HEPTH"] if args.quick else list(FILES)
    epsilons = [1.0] if args.quick else [0.1, 1.0]
    reps = 2 if args.quick else args.reps
    rng = np.random.default_rng(0)
    results, missing = [], []
    for name in names:
        path = os.path.join(DATA, FILES[name])
        if not os.path.exists(path):
            missing.append(name)
            continue
        x = np.load(path, allow_pickle=False)
        for eps in epsilons:
            mse = evaluate(x, eps, reps, rng)
            results.append(
                {
                    "data": name,
                    "epsilon": eps,
                    "zero_fraction": round(float((x == 0).mean()), 3),
                    "ratio_to_gls": ratios(mse),
                    "mse": mse,
                }
            )
    print(
        json.dumps(
            {
                "benchmark": "lee2015",
                "noise": "laplace_float",
                "reps": reps,
                "alpha": 0.9,
                "rho": PAPER["rho"],
                "machine": f"{platform.machine()} {os.cpu_count()} cpus",
                "missing_data": missing,
                "results": results,
                "l1_speed": l1_speed(repeats=1 if args.quick else 3, bins=2**14 if args.quick else 2**16),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

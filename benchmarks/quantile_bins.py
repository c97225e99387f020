"""Calibration of the histogram route's bin count on real (or wide integer) bounds.

For the binned datasets of benchmarks/quantiles.py (uniform and Gaussian on [-5, 5],
n = 1000 and 10^4; Adult fnlwgt on [0, 1500000]), m = 19 and 99 levels, epsilon 0.1 and 1,
the histogram route (dprange.quantiles(method="histogram", bins=B)) is run at every B in
BINS on the same trials; the error is benchmarks/quantiles.py's (records between the
estimate and the true quantile, averaged over levels and trials).  Each cell records the
signal n x epsilon, the mean error and its standard error at each B, and the best B.
The seed defaults to 7, not the benchmark's 2021, so that the rule fitted on these cells
(dprange.quantile_mechanisms.bins.histogram_bins) is then checked on held-out trials by benchmarks/quantiles.py.
Times are CPU seconds (time.process_time).

    python benchmarks/quantile_bins.py [--trials T] [--seed S] [--datasets a,b] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
import zlib

import numpy as np
from quantiles import datasets, rank_error

from dprange import quantiles

BINNED = ("uniform-1000", "gaussian-1000", "uniform-10000", "gaussian-10000", "adult-fnlwgt")
BINS = tuple(2**k for k in range(3, 14))  # 8 .. 8192
MS = (19, 99)
EPSILONS = (0.1, 1.0)


def run(trials: int, seed: int, only: tuple[str, ...] = ()) -> dict:
    cells = []
    for name, (draw, bounds, integer) in datasets(False).items():
        if name not in BINNED or (only and name not in only):
            continue
        for m in MS:
            levels = np.arange(1, m + 1) / (m + 1)
            for epsilon in EPSILONS:
                rng = np.random.default_rng([seed, m, int(epsilon * 1000), zlib.crc32(name.encode())])
                errors: dict[int, list[float]] = {b: [] for b in BINS}
                start = time.process_time()
                n = 0
                for _ in range(trials):
                    values = np.asarray(draw(rng), dtype=float)
                    n = values.size
                    ordered = np.sort(np.clip(values, *bounds))
                    for bins in BINS:
                        result = quantiles(
                            values,
                            levels,
                            epsilon,
                            bounds=bounds,
                            method="histogram",
                            integer=integer,
                            rng=rng,
                            bins=bins,
                        )
                        errors[bins].append(float(np.mean(rank_error(ordered, result.values, levels))))
                mean = {str(b): float(np.mean(v)) for b, v in errors.items()}
                cell = {
                    "dataset": name,
                    "m": m,
                    "epsilon": epsilon,
                    "n": n,
                    "signal": n * epsilon,
                    "error": mean,
                    "stderr": {str(b): float(np.std(v) / np.sqrt(len(v))) for b, v in errors.items()},
                    "best_bins": int(min(BINS, key=lambda b: mean[str(b)])),
                    "cpu_seconds": time.process_time() - start,
                }
                cells.append(cell)
                print(
                    f"{name:>15} m={m:>3} eps={epsilon:<4} n*eps={n * epsilon:<8g} best={cell['best_bins']:>5} "
                    + " ".join(f"{b}:{mean[str(b)]:.1f}" for b in BINS),
                    flush=True,
                )
    return {"trials": trials, "seed": seed, "bins": list(BINS), "cells": cells}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--datasets", default="", help="comma-separated dataset names (default: all binned)")
    parser.add_argument("--json", default=None, help="write the JSON here instead of printing it")
    args = parser.parse_args()
    result = run(args.trials, args.seed, tuple(filter(None, args.datasets.split(","))))
    text = json.dumps(result, indent=1)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()

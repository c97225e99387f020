"""Non-linear post-processing at scale, new beside former and floors, as JSON (issues 16 and 12).

* Integer L1 isotonic regression (``consistent_cdf(..., "l1")``, the consistent CDF) at L
  bins on three inputs: the Rameshwar-Tandon benchmark's (cumulative Poisson counts with
  independent Laplace noise, N = 10^9), and the noisy CDFs of Hierarchical(16) releases of
  Poisson(5) counts and of a heavy-tailed sample (most bins empty); new (partitioning)
  beside the L2 fit (scipy's pool-adjacent-violators, the floor) and the former
  pool-adjacent-violators with re-sorted medians (``--old``; minutes on the heavy tail).
  The former paths are those of tests/reference_inference.py, which the tests check the
  new ones against.
* L1 inference by ADMM (Lee, Wang and Kifer, KDD 2015) of Hierarchical(b) releases over n
  bins, b = 16 and 2, epsilon 1, continuous Laplace noise, Poisson(0.5) counts (as
  benchmarks/lee2015.py): new beside the GLS inference of the same measurements (the floor)
  and the former path as far as it can be rebuilt (per-level operators, tree_gls x-step at
  every iteration, the stopping rule tested every iteration; at ``--old-n`` bins): the
  in-place updates of the ADMM loop stay, so ``speedup_cpu`` understates the change.

CPU seconds (``time.process_time``), medians of ``--repeats``; the machine is shared.

    python benchmarks/inference_speed.py --quick    # L = n = 2^16
    python benchmarks/inference_speed.py            # L = n = 2^20
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
import warnings

import numpy as np
from scipy.optimize import isotonic_regression

import dprange
from dprange import Hierarchical
from dprange.inference import consistency


def _load_reference():
    """tests/reference_inference.py, the one copy of the former paths (imported by path: the
    tests directory is not a package)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference_inference.py")
    spec = importlib.util.spec_from_file_location("reference_inference", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


reference = _load_reference()


def cpu(fn, repeats: int) -> dict:
    times, walls, out = [], [], None
    for _ in range(repeats):
        wall, start = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.process_time() - start)
        walls.append(time.perf_counter() - wall)
    return {"cpu_s": statistics.median(times), "wall_s": statistics.median(walls), "result": out}


# ----------------------------------------------------------------------------- isotonic L1
def isotonic_inputs(size: int) -> dict:
    rng = np.random.default_rng(2)
    y = np.cumsum(rng.poisson(1e9 / size, size)).astype(float)
    total = int(y[-1])
    y += rng.laplace(0, 1000, size)
    inputs = {"rameshwar2024 (iid Laplace 1000, N ~ 1e9)": (y, total)}
    for name, counts in (
        ("Hierarchical(16) CDF, Poisson(5) counts", rng.poisson(5, size)),
        (
            "Hierarchical(16) CDF, heavy tail (most bins empty)",
            np.bincount(np.minimum((rng.pareto(1.5, 10**6) * 1000).astype(int), size - 1), minlength=size),
        ),
    ):
        cumulative = np.cumsum(Hierarchical(16).release(counts, 1.0, rng=1).estimate)
        inputs[name] = (cumulative, int(round(cumulative[-1])))
    return inputs


def isotonic_rows(size: int, repeats: int, old: bool) -> list:
    rows = []
    for name, (y, total) in isotonic_inputs(size).items():
        free = np.clip(y[:-1], 0, total)
        new = cpu(lambda: consistency.consistent_cdf(y, total, "l1"), repeats)
        row = {
            "task": "consistent CDF, integer L1 isotonic",
            "input": name,
            "bins": size,
            "new": {k: v for k, v in new.items() if k != "result"},
            "floor_l2_isotonic_scipy": {
                k: v for k, v in cpu(lambda: isotonic_regression(free), repeats).items() if k != "result"
            },
        }
        if old:
            former = cpu(lambda: reference.former_isotonic_l1(free, total), 1)
            row["old"] = {k: v for k, v in former.items() if k != "result"}
            row["equal_to_old"] = bool(np.array_equal(new["result"][:-1], former["result"]))
            row["speedup_cpu"] = row["old"]["cpu_s"] / max(row["new"]["cpu_s"], 1e-9)
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- ADMM
def admm_rows(n: int, repeats: int, old_n: int) -> list:
    rows = []
    for b in (16, 2):
        for bins in sorted({n, old_n}):
            counts = np.random.default_rng(0).poisson(0.5, bins)
            l1 = Hierarchical(b, noise="laplace_float", inference="l1", inference_options={"rho": 2.0})
            measurements = l1.measure(counts, 1.0, rng=0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                new = cpu(lambda: l1.infer(measurements), repeats)
            estimate = new["result"]
            row = {
                "task": "L1 inference (ADMM), epsilon 1",
                "mechanism": f"Hierarchical({b})",
                "bins": bins,
                "new": {"cpu_s": new["cpu_s"], "wall_s": new["wall_s"]},
                "iterations": estimate.result.iterations,
                "converged": estimate.converged,
                "floor_gls_inference": {
                    k: v for k, v in cpu(lambda: l1.least_squares(measurements), repeats).items() if k != "result"
                },
            }
            if bins == old_n:
                former = cpu(lambda: reference.former_admm(measurements, alpha=0.9, rho=2.0), 1)
                result = former["result"]
                row["old"] = {"cpu_s": former["cpu_s"], "wall_s": former["wall_s"], "iterations": result.iterations}
                row["speedup_cpu"] = former["cpu_s"] / max(new["cpu_s"], 1e-9)
                row["objective_relative_difference"] = abs(estimate.result.objective - result.objective) / max(
                    abs(result.objective), 1e-300
                )
            rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2^16 bins")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--old", action="store_true", help="also run the former isotonic L1 (minutes)")
    parser.add_argument("--old-n", type=int, default=None, help="bins of the former ADMM run (default 2^16)")
    args = parser.parse_args()
    size = 2**16 if args.quick else 2**20
    old_n = args.old_n or 2**16
    results = isotonic_rows(size, args.repeats, args.old) + admm_rows(size, args.repeats, old_n)
    print(
        json.dumps(
            {
                "benchmark": "inference_speed",
                "dprange": dprange.__version__,
                "machine": {
                    "cpu_count": os.cpu_count(),
                    "python": platform.python_version(),
                    "numpy": np.__version__,
                    "note": "shared machine: compare CPU seconds",
                },
                "command": " ".join(sys.argv),
                "statistic": "median CPU seconds over repeats (former paths: one run)",
                "results": results,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

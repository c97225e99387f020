"""Optimised strategies (issue 15) against the best fixed strategy and the SVD bound; JSON.

Exact expected error, average variance per query, epsilon = 1:

* all ranges and all prefixes at n = 256 and 1024 (and 4096 with ``--full``): Optimized
  (p-Identity, discrete Laplace, quantised: the mechanism as released), the best candidate
  ``select`` ranks without it, the SVD bound (an L2 bound), and the eigen-design's L1 score
  (its strategy under Laplace noise) as a reference point;
* (epsilon, delta) = (1, 1e-6): the eigen-design's trace against the SVD bound with the same
  noise factor (strategy_ratio), and its exact error with dprange's Gaussian calibration
  against ``svd_bound`` (which uses 2 log(2/delta) / epsilon^2) and the best fixed strategy;
* workloads no fixed strategy is designed for, at n = 256: random ranges of width at most
  32, prefixes plus unit queries, an explicit random 0/1 matrix (both privacy models);
* timings: optimisation (cold cache), a release of 10^6 records with the cached strategy.

    python benchmarks/optimized.py [--full] [--cache-dir DIR]

Uses its own cache directory (default: a fresh temporary one) so that the optimisation time
is measured cold.  OpenBLAS threads contend on a shared 2-core machine; the numbers in
docs/optimized.md were taken with OPENBLAS_NUM_THREADS=1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time

import numpy as np

EPSILON = 1.0
DELTA = 1e-6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also n = 4096")
    parser.add_argument("--cache-dir", default=None, help="strategy cache (default: a fresh temporary directory)")
    args = parser.parse_args()
    os.environ["DPRANGE_CACHE_DIR"] = args.cache_dir or tempfile.mkdtemp(prefix="dprange-bench-")

    import dprange  # noqa: PLC0415 - after the cache directory is set
    from dprange.analysis import expected_error, select, svd_bound  # noqa: PLC0415
    from dprange.optimized import Optimized, column_norm, eigen_design, strategy_trace  # noqa: PLC0415
    from dprange.workloads import AllRange, Explicit, Prefix, Ranges  # noqa: PLC0415

    def best_fixed(workload, delta):
        table = select(workload, None, EPSILON, delta=delta).table
        best = min((c for c in table if not isinstance(c.mechanism, Optimized)), key=lambda c: c.error)
        return best.error, repr(best.mechanism)

    def optimised(workload, delta):
        mech = Optimized(workload)
        start = time.perf_counter()
        error = expected_error(mech, workload, EPSILON, delta=delta)
        strategy = mech.strategy(workload.n)
        return error, strategy.seconds, time.perf_counter() - start

    def singular_bound_trace(gram, n):
        return float(np.sqrt(np.clip(np.linalg.eigvalsh(gram), 0, None)).sum()) ** 2 / n

    sizes = (256, 1024, 4096) if args.full else (256, 1024)
    standard = []
    for n in sizes:
        for workload in (AllRange(n), Prefix(n)):
            bound = svd_bound(workload, EPSILON)
            err, opt_seconds, total_seconds = optimised(workload, 0.0)
            fixed, fixed_name = best_fixed(workload, 0.0)
            gram = workload.gram()
            eigen = eigen_design(gram)
            eigen_l1 = 2 / EPSILON**2 * column_norm(eigen, 1) ** 2 * strategy_trace(eigen, gram) / workload.m
            d_bound = svd_bound(workload, EPSILON, DELTA)
            d_err, eig_seconds, _ = optimised(workload, DELTA)
            d_fixed, d_fixed_name = best_fixed(workload, DELTA)
            row = {
                "workload": workload.name,
                "n": n,
                "optimized": err,
                "best_fixed": fixed,
                "best_fixed_mechanism": fixed_name,
                "svd_bound": bound,
                "optimized_over_bound": err / bound,
                "optimized_over_bound_rmse": (err / bound) ** 0.5,
                "fixed_over_optimized": fixed / err,
                "eigen_l1_score": eigen_l1,
                "eigen_l1_over_bound": eigen_l1 / bound,
                "optimisation_seconds": opt_seconds,
                "optimisation_and_exact_error_seconds": total_seconds,
                "eps_delta": {
                    "eigen": d_err,
                    "svd_bound": d_bound,
                    "eigen_over_bound": d_err / d_bound,
                    "strategy_ratio": strategy_trace(eigen, gram)
                    * column_norm(eigen, 2) ** 2
                    / singular_bound_trace(gram, n),
                    "best_fixed": d_fixed,
                    "best_fixed_mechanism": d_fixed_name,
                    "eigen_seconds": eig_seconds,
                },
            }
            print(json.dumps(row), flush=True)
            standard.append(row)

    n = 256
    rng = np.random.default_rng(0)
    lo = rng.integers(0, n - 32 + 1, 2000)
    unusual_workloads = {
        "bounded-ranges-width-32": Ranges(lo, lo + rng.integers(0, 32, 2000), n),
        "prefix+identity": Explicit(np.vstack([np.tril(np.ones((n, n))), np.eye(n)])),
        "explicit-0/1": Explicit(np.random.default_rng(1).integers(0, 2, size=(100, n))),
    }
    unusual = []
    for name, workload in unusual_workloads.items():
        for delta in (0.0, DELTA):
            err, seconds, _ = optimised(workload, delta)
            fixed, fixed_name = best_fixed(workload, delta)
            row = {
                "workload": name,
                "n": n,
                "delta": delta,
                "optimized": err,
                "best_fixed": fixed,
                "best_fixed_mechanism": fixed_name,
                "fixed_over_optimized": fixed / err,
                "svd_bound": svd_bound(workload, EPSILON, delta),
                "optimisation_seconds": seconds,
            }
            print(json.dumps(row), flush=True)
            unusual.append(row)

    releases = []
    for n in sizes:
        values = np.random.default_rng(2).integers(0, n, 10**6)
        domain = dprange.Domain.integers(0, n - 1)
        mech = Optimized("all-range")
        mech.strategy(n)  # cached above
        start = time.perf_counter()
        dprange.release(values, domain, EPSILON, mechanism=mech)
        releases.append({"n": n, "records": 10**6, "release_seconds": time.perf_counter() - start})
        print(json.dumps(releases[-1]), flush=True)

    print(
        json.dumps(
            {
                "machine": platform.platform(),
                "cpus": os.cpu_count(),
                "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
                "epsilon": EPSILON,
                "delta": DELTA,
                "standard": standard,
                "unusual": unusual,
                "releases": releases,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

"""Time the central release pipeline per stage and print JSON.

Stages: bucketize (10^6 records into n bins), measure (strategy + noise), infer (exact GLS),
answer (one million random ranges: values, then exact standard errors).  Median of
``--repeats`` runs.  Target (issue 2): the whole release (bucketize + measure + infer) at
n = 2^20 under 0.5 s on a 2-core machine.

    python benchmarks/central_speed.py            # n = 2^16 and 2^20
    python benchmarks/central_speed.py --quick    # n = 2^12, 10^5 records
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np

import dprange
from dprange import Domain, Flat, Hierarchical, Wavelet


def _time(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def run(n, records, queries, repeats, rng):
    values = rng.lognormal(10.5, 0.8, records)
    values = np.minimum(values, 1e6 - 1)
    domain = Domain.interval(0.0, 1e6, n)
    lo = rng.integers(0, n, queries)
    hi = np.minimum(lo + rng.integers(0, n, queries), n - 1)
    rows = []
    for mech in (Hierarchical(16), Hierarchical(2), Flat(), Wavelet()):
        t_bucket, counts = _time(lambda: domain.histogram(values), repeats)
        t_measure, meas = _time(lambda: mech.measure(counts, 1.0), repeats)  # secure noise
        t_infer, est = _time(lambda: mech.infer(meas), repeats)
        release = mech.release(counts, 1.0, domain=domain, rng=1)
        t_values, _ = _time(lambda: release.range(lo, hi).value, repeats)
        t_stderr, _ = _time(lambda: release.range(lo, hi).stderr, max(1, repeats // 2))
        rows.append(
            {
                "mechanism": repr(mech),
                "bins": n,
                "records": records,
                "bucketize_s": t_bucket,
                "measure_s": t_measure,
                "infer_s": t_infer,
                "release_total_s": t_bucket + t_measure + t_infer,
                "ranges": queries,
                "range_values_s": t_values,
                "range_stderr_s": t_stderr,
            }
        )
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    if args.quick:
        sizes, records, queries = [2**12], 10**5, 10**5
    else:
        sizes, records, queries = [2**16, 2**20], 10**6, 10**6
    results = []
    for n in sizes:
        results.extend(run(n, records, queries, args.repeats, rng))
    print(
        json.dumps(
            {
                "benchmark": "central_speed",
                "dprange": dprange.__version__,
                "machine": {
                    "cpu_count": __import__("os").cpu_count(),
                    "python": platform.python_version(),
                    "numpy": np.__version__,
                },
                "statistic": "median seconds",
                "results": results,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

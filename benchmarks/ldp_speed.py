"""Local-DP speed: client encode and server aggregate per oracle, and exact simulation.

    python benchmarks/ldp_speed.py [--quick]

Encode/aggregate: N = 10^6 users (10^5 with --quick) at D = 256 and 1024, seeded numpy
generator (the secure default reads os.urandom and is slower for OUE's N x D draws).
Simulation: N = 2^26 users at D = 2^22 for HH_4 (OUE, exact binomial shortcut) and HaarHRR
(per-user HRR).  Median of --repeats runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from dprange.ldp import GRR, HRR, OLH, OUE, HaarHRR, HierarchicalHistogram, simulate


def timed(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n = 10**5 if args.quick else 10**6
    rows = []
    for D in (256, 1024):
        values = np.random.default_rng(0).integers(0, D, n)
        for oracle in (GRR(D, 1.0), OUE(D, 1.0), OLH(D, 1.0), OLH(D, 1.0, hash_pool=4096), HRR(D, 1.0)):
            rng = np.random.default_rng(1)
            t_enc, reports = timed(lambda: oracle.randomize(values, rng), args.repeats)
            t_agg, _ = timed(lambda: oracle.aggregator().add(reports).estimate(), args.repeats)
            rows.append(
                {
                    "oracle": oracle.name + ("-pool" if getattr(oracle, "hash_pool", None) else ""),
                    "D": D,
                    "users": n,
                    "encode_s": t_enc,
                    "aggregate_s": t_agg,
                    "report_bytes": len(reports.to_bytes()),
                }
            )
    sim = []
    D, N = (2**16, 2**22) if args.quick else (2**22, 2**26)
    counts = np.random.default_rng(2).multinomial(N, np.full(D, 1.0 / D))
    for proto in (HierarchicalHistogram(D, 4, "oue"), HaarHRR(D)):
        t, _ = timed(lambda: simulate(proto, counts, 1.0, 3).release(), 1)
        sim.append({"protocol": proto.name, "D": D, "users": N, "simulate_and_release_s": t})
    print(
        json.dumps(
            {"benchmark": "ldp_speed", "statistic": "median seconds", "oracles": rows, "simulation": sim}, indent=1
        )
    )


if __name__ == "__main__":
    main()

"""Local-DP speed: client encode and server aggregate per oracle, and exact simulation.

    python benchmarks/ldp_speed.py [--quick] [--oue-users N]

Encode/aggregate: N = 10^6 users (10^5 with --quick) at D = 256 and 1024, seeded numpy
generator (``encode_s``) and the secure default source, a ChaCha20 keystream
(``encode_secure_s``, CPU seconds).  OLH rows: the default (linear pool, exactly unbiased),
``olh-modp`` (per-user seeds, O(N D) aggregation) and ``olh-modp-pool`` (4096 hashes).
Issue 16 targets: ``olh_10m``: OLH aggregation of 10^7 users at D = 1024, default settings,
under 5 s; ``oue_big``: OUE at 10^6 users x D = 2^16 (``--oue-users``; 10^4 with --quick)
encoded and aggregated in batches (``OUE.collect``), peak resident memory reported;
``level_split``: the old split (total multinomial, then hypergeometric draws) against one
multinomial per bin.  Simulation: N = 2^26 users at D = 2^22 for HH_4 (OUE, exact binomial
shortcut) and HaarHRR (per-user HRR).  Median of --repeats runs.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time

import numpy as np

from dprange.ldp import GRR, HRR, OLH, OUE, HaarHRR, HierarchicalHistogram
from dprange.ldp.simulate import simulate, split_by_level
from dprange.privacy.samplers import SecureRandom


def cpu(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        t = time.process_time()
        out = fn()
        times.append(time.process_time() - t)
    return statistics.median(times), out


def old_split_by_level(counts, probabilities, gen):
    """The former split: level sizes by one multinomial, then hypergeometric draws (same law)."""
    remaining = counts.astype(np.int64).copy()
    sizes = gen.multinomial(int(remaining.sum()), probabilities)
    groups = []
    for size in sizes[:-1]:
        part = gen.multivariate_hypergeometric(remaining, int(size), method="marginals")
        groups.append(part)
        remaining -= part
    return groups + [remaining]


def big_collections(args):
    """OLH at 10^7 users (default settings) and OUE at users x 2^16 in batches."""
    out = {}
    users = 10**6 if args.quick else 10**7
    values = np.random.default_rng(5).integers(0, 1024, users)
    olh = OLH(1024, 1.0)
    t_enc, reports = cpu(lambda: olh.randomize(values, np.random.default_rng(6)), 1)
    t_agg, _ = cpu(lambda: olh.aggregator().add(reports).estimate(), args.repeats)
    out["olh_10m"] = {
        "users": users,
        "D": 1024,
        "epsilon": 1.0,
        "params": olh.params(),
        "pool": olh.hash_pool,
        "encode_seeded_s": t_enc,
        "aggregate_s": t_agg,
    }
    reports = None  # free the 10^7 reports before the OUE run
    oue_users = args.oue_users or (10**4 if args.quick else 10**6)
    oue = OUE(1 << 16, 1.0)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    values = np.random.default_rng(7).integers(0, 1 << 16, oue_users)
    t_collect, agg = cpu(lambda: oue.collect(values, SecureRandom()), 1)
    out["oue_big"] = {
        "users": oue_users,
        "D": 1 << 16,
        "epsilon": 1.0,
        "coin_bits": oue.coin_bits,
        "realised_epsilon": oue.realised_epsilon,
        "report_bytes_total": oue_users * (1 << 13),
        "collect_secure_s": t_collect,
        "peak_rss_mb_before": rss_before / 1024,
        "peak_rss_mb_after": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "max_abs_error": float(np.abs(agg.estimate() - np.bincount(values, minlength=1 << 16) / oue_users).max()),
        "stderr": float(np.sqrt(agg.variance()[0])),
    }
    D, N = (2**16, 2**22) if args.quick else (2**22, 2**26)
    counts = np.random.default_rng(2).multinomial(N, np.full(D, 1.0 / D))
    probs = np.full(11, 1 / 11)
    t_old, _ = cpu(lambda: old_split_by_level(counts, probs, np.random.default_rng(3)), args.repeats)
    t_new, _ = cpu(lambda: split_by_level(counts, probs, np.random.default_rng(3)), args.repeats)
    out["level_split"] = {"D": D, "users": N, "levels": 11, "old_s": t_old, "one_multinomial_s": t_new}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--oue-users", type=int, default=None, help="users of the OUE x 2^16 run")
    parser.add_argument("--only-big", action="store_true", help="only the issue-16 targets")
    args = parser.parse_args()
    big = big_collections(args)
    if args.only_big:
        print(json.dumps({"benchmark": "ldp_speed", "statistic": "median CPU seconds", **big}, indent=1))
        return
    n = 10**5 if args.quick else 10**6
    rows = []
    for D in (256, 1024):
        values = np.random.default_rng(0).integers(0, D, n)
        oracles = {
            "grr": GRR(D, 1.0),
            "oue": OUE(D, 1.0),
            "olh": OLH(D, 1.0),
            "olh-modp": OLH(D, 1.0, hash="mod-p"),
            "olh-modp-pool": OLH(D, 1.0, hash_pool=4096),
            "hrr": HRR(D, 1.0),
        }
        for name, oracle in oracles.items():
            rng = np.random.default_rng(1)
            t_enc, reports = cpu(lambda: oracle.randomize(values, rng), args.repeats)
            t_secure, _ = cpu(lambda: oracle.randomize(values, SecureRandom()), args.repeats)
            t_agg, _ = cpu(lambda: oracle.aggregator().add(reports).estimate(), args.repeats)
            rows.append(
                {
                    "oracle": name,
                    "D": D,
                    "users": n,
                    "encode_s": t_enc,
                    "encode_secure_s": t_secure,
                    "aggregate_s": t_agg,
                    "report_bytes": len(reports.to_bytes()),
                }
            )
    sim = []
    D, N = (2**16, 2**22) if args.quick else (2**22, 2**26)
    counts = np.random.default_rng(2).multinomial(N, np.full(D, 1.0 / D))
    for proto in (HierarchicalHistogram(D, 4, "oue"), HaarHRR(D)):
        t, _ = cpu(lambda: simulate(proto, counts, 1.0, 3).release(), 1)
        sim.append({"protocol": proto.name, "D": D, "users": N, "simulate_and_release_s": t})
    print(
        json.dumps(
            {
                "benchmark": "ldp_speed",
                "statistic": "median CPU seconds (time.process_time)",
                **big,
                "oracles": rows,
                "simulation": sim,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

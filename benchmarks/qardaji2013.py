"""Reproduce the analysis of Qardaji, Yang, Li (PVLDB 2013) with exact error formulas.

Noise as in the paper: continuous Laplace, add/remove neighbours, the root not measured,
uniform budget over levels, epsilon = 1.  Errors are exact average variances over all
n(n+1)/2 ranges (no Monte-Carlo).

1. Table 3 (also Figure 7 of Cormode et al. 2019): Wavelet, H_2 and H_16 with constrained
   inference for n = 2^8 .. 2^11, beside the paper's numbers.
2. Average error versus branching factor b at n = 2^10, with and without constrained
   inference (without: each range is the sum of the noisy nodes that tile it).
3. The optimal b (with constrained inference) for growing n.

    python benchmarks/qardaji2013.py [--quick] [--full]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from dprange import Hierarchical, Wavelet
from dprange.analysis import expected_error
from dprange.inference.covering import direct_range_variance
from dprange.workloads import AllRange

PAPER_TABLE3 = {  # n: (Wavelet, H16 with CI, H2 with CI), from the paper's Table 3
    256: (221.62, 79.23, 220.06),
    512: (306.31, 164.48, 305.54),
    1024: (410.29, 185.94, 409.48),
    2048: (536.32, 213.87, 535.63),
}


def hb(b):
    return Hierarchical(b, measure_root=False, noise="laplace_float")


def without_inference(b, n, eps=1.0):
    mech = hb(b)
    strategy = mech.strategy(n)
    lo, hi = np.triu_indices(n)
    return float(direct_range_variance(strategy, mech.level_variances(strategy, eps, 0.0), lo, hi).mean())


def table3():
    rows = []
    for n, paper in PAPER_TABLE3.items():
        ours = [expected_error(m, AllRange(n), 1.0) for m in (Wavelet(noise="laplace_float"), hb(16), hb(2))]
        rows.append(
            {
                "n": n,
                "wavelet": {"ours": ours[0], "paper": paper[0]},
                "H16_ci": {"ours": ours[1], "paper": paper[1]},
                "H2_ci": {"ours": ours[2], "paper": paper[2]},
                "wavelet_over_H16": {"ours": ours[0] / ours[1], "paper": paper[0] / paper[1]},
            }
        )
    return rows


def curves(n, branchings):
    out = []
    for b in branchings:
        out.append({"b": b, "with_ci": expected_error(hb(b), AllRange(n), 1.0), "without_ci": without_inference(b, n)})
    return out


def optimal_b(sizes, branchings):
    out = []
    for n in sizes:
        errors = {b: expected_error(hb(b), AllRange(n), 1.0) for b in branchings if b <= n}
        best = min(errors, key=errors.get)
        out.append({"n": n, "best_b": best, "error": errors[best], "H2_over_best": errors[2] / errors[best]})
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Table 3 and a short curve only")
    parser.add_argument("--full", action="store_true", help="optimal b up to n = 2^20 (minutes)")
    args = parser.parse_args()
    start = time.perf_counter()
    result = {
        "benchmark": "qardaji2013",
        "epsilon": 1.0,
        "noise": "laplace_float",
        "neighbours": "add_remove",
        "root_measured": False,
        "table3": table3(),
    }
    if args.quick:
        result["error_vs_b_n1024"] = curves(1024, [2, 4, 8, 16, 32])
    else:
        result["error_vs_b_n1024"] = curves(1024, list(range(2, 33)) + [48, 64, 128])
        top = 20 if args.full else 16
        result["optimal_b"] = optimal_b([2**k for k in range(8, top + 1, 2)], list(range(2, 65)))
    result["seconds"] = time.perf_counter() - start
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

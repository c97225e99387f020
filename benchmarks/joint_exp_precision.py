"""JointExp in double and extended (long double) precision: the float-error charge and the time.

Data: UCI Adult ``fnlwgt`` (n = 32561, integers on public bounds [0, 1500000]); m = 19 and 99
equally spaced levels i / (m + 1); epsilon 0.1 and 1; add/remove with n_max = n.  For each
cell both precisions run (forced with the private ``_precision`` keyword), interleaved, each
``--repeats`` times; times are CPU seconds (time.process_time), medians.  The charge is
epsilon minus the epsilon the mechanism runs at, as a share of epsilon, at this width and at
width 1e5 (the numbers of docs/privacy.md); ``rule`` is the precision joint_precision picks.
Error: records between each estimate and the true quantile, averaged over levels (one seeded
run per repeat; the two paths draw from the same seeds).

    python benchmarks/joint_exp_precision.py [--repeats R] [--seed S] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
import pandas as pd

from dprange.quantile_mechanisms import joint_exp

HERE = os.path.dirname(os.path.abspath(__file__))
ADULT = os.path.join(HERE, "..", "..", "shared", "data", "adult", "adult.csv")
BOUNDS = (0, 1_500_000)


def load_fnlwgt() -> np.ndarray:
    return pd.read_csv(ADULT, usecols=["fnlwgt"])["fnlwgt"].to_numpy(dtype=float)


def rank_error(sorted_values: np.ndarray, estimates: np.ndarray, levels: np.ndarray) -> float:
    below = np.searchsorted(sorted_values, estimates, side="left")
    at_or_below = np.searchsorted(sorted_values, estimates, side="right")
    target = levels * sorted_values.size
    return float(np.mean(np.maximum(np.maximum(below - target, target - at_or_below), 0.0)))


def cell(values, sorted_values, m, epsilon, repeats, seed) -> dict:
    levels = np.arange(1, m + 1) / (m + 1)
    n = values.size
    out: dict = {
        "m": m,
        "epsilon": epsilon,
        "n": n,
        "rule": joint_exp.joint_precision(epsilon, levels, "add_remove", n, 1e5),
    }
    width = BOUNDS[1] + 1 - BOUNDS[0]
    times: dict = {"double": [], "extended": []}
    errors: dict = {"double": [], "extended": []}
    for r in range(repeats):
        for precision in ("double", "extended"):
            start = time.process_time()
            estimates, charge = joint_exp.joint_exponential_run(
                values, levels, epsilon, BOUNDS, integer=True, rng=seed + r, n_max=n, _precision=precision
            )
            times[precision].append(time.process_time() - start)
            errors[precision].append(rank_error(sorted_values, estimates, levels))
    for precision in ("double", "extended"):
        share = (
            epsilon - joint_exp.joint_charged_epsilon(epsilon, levels, "add_remove", n, width, precision)
        ) / epsilon
        share_1e5 = (
            epsilon - joint_exp.joint_charged_epsilon(epsilon, levels, "add_remove", n, 1e5, precision)
        ) / epsilon
        out[precision] = {
            "cpu_s_median": statistics.median(times[precision]),
            "cpu_s": times[precision],
            "charge_share": share,
            "charge_share_width_1e5": share_1e5,
            "error_records": statistics.mean(errors[precision]),
        }
    out["slowdown"] = out["extended"]["cpu_s_median"] / out["double"]["cpu_s_median"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if not joint_exp.extended_precision_available():
        raise SystemExit("this platform's long double is not wider than double: nothing to compare")
    values = load_fnlwgt()
    sorted_values = np.sort(values)
    cells = [cell(values, sorted_values, m, eps, args.repeats, args.seed) for m in (19, 99) for eps in (0.1, 1.0)]
    result = {
        "benchmark": "joint_exp_precision",
        "dataset": "adult fnlwgt",
        "repeats": args.repeats,
        "unit_roundoff": {"double": joint_exp.unit_roundoff("double"), "extended": joint_exp.unit_roundoff("extended")},
        "load_average": os.getloadavg(),
        "cells": cells,
    }
    for c in cells:
        d, e = c["double"], c["extended"]
        print(
            f"m={c['m']:3d} eps={c['epsilon']:<4} rule={c['rule']:8s} double {d['cpu_s_median']:.2f}s "
            f"charge {d['charge_share']:.3g} err {d['error_records']:.1f} | extended {e['cpu_s_median']:.2f}s "
            f"charge {e['charge_share']:.3g} err {e['error_records']:.1f} | x{c['slowdown']:.2f}"
        )
    text = json.dumps(result, indent=1)
    if args.json:
        with open(args.json, "w") as handle:
            handle.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()

"""Quantile point estimates: the placement rule of dprange.answers.cdf against plain linear
interpolation inside the bin, on the datasets and error of benchmarks/quantiles.py.

Each trial releases once through the histogram route (dprange.quantiles, method "histogram",
n_max = n) and reads both points from that one release: ``rule`` (the library's: a bin the
release shows concentrated gets its lower edge) and ``interpolated`` (every point interpolated
linearly in its bin, the rule before issue 34).  So the two columns differ only by the rule,
paired trial by trial.  Error: records between the estimate and the true quantile, averaged
over the m levels and the trials; ``concentrated_share``: the share of (trial, level) points
the rule placed at a bin's lower edge.

    python benchmarks/quantile_points.py [--trials T] [--seed S] [--datasets a,b] [--ms 1,4,19,99]
"""

from __future__ import annotations

import argparse
import json
import time
import zlib

import numpy as np
from quantiles import EPSILONS, MS, datasets, rank_error

from dprange import quantiles
from dprange.answers.cdf import CumulativeEstimate


def interpolated_points(result) -> np.ndarray:
    """The points of ``result`` with every level interpolated in its bin (the former rule)."""
    cumulative: CumulativeEstimate = result.release._cumulative
    levels = np.asarray(result.q, dtype=float)
    bins, fractions = cumulative._quantile_point_bins(levels, True, "l2")
    return np.asarray(cumulative._bin_point(bins, fractions, levels), dtype=float)


def run(trials: int, seed: int, only: tuple[str, ...], ms: tuple[int, ...]) -> dict:
    cells = []
    for name, (draw, bounds, integer) in datasets(False).items():
        if only and name not in only:
            continue
        for m in ms:
            levels = np.arange(1, m + 1) / (m + 1)
            for epsilon in EPSILONS:
                rng = np.random.default_rng([seed, m, int(epsilon * 1000), zlib.crc32(name.encode())])
                errors: dict[str, list[float]] = {"rule": [], "interpolated": []}
                concentrated = 0
                for _ in range(trials):
                    values = np.asarray(draw(rng), dtype=float)
                    ordered = np.sort(np.clip(values, *bounds))
                    result = quantiles(
                        values, levels, epsilon, bounds=bounds, method="histogram", integer=integer, rng=rng,
                        n_max=values.size,
                    )  # fmt: skip
                    errors["rule"].append(float(np.mean(rank_error(ordered, np.asarray(result.values), levels))))
                    errors["interpolated"].append(
                        float(np.mean(rank_error(ordered, interpolated_points(result), levels)))
                    )
                    placement = result.release.quantile(result.q).placement
                    concentrated += int(np.sum(np.atleast_1d(placement) == "concentrated"))
                cell = {
                    "dataset": name,
                    "integer": integer,
                    "m": m,
                    "epsilon": epsilon,
                    "n": int(values.size),
                    "trials": trials,
                    "error": {k: float(np.mean(v)) for k, v in errors.items()},
                    "stderr": {k: float(np.std(v) / np.sqrt(len(v))) for k, v in errors.items()},
                    "concentrated_share": concentrated / (trials * m),
                }
                cell["rule_over_interpolated"] = (cell["error"]["rule"] + 1) / (cell["error"]["interpolated"] + 1)
                cells.append(cell)
                print(
                    f"{name:>20} m={m:>3} eps={epsilon:<4} rule={cell['error']['rule']:9.2f} "
                    f"interpolated={cell['error']['interpolated']:9.2f} concentrated={cell['concentrated_share']:.2f}",
                    flush=True,
                )
    return {"cells": cells, "summary": summary(cells)}


def summary(cells: list) -> dict:
    """Mean error of each rule over the continuous cells and over the integer (Adult) cells."""
    out = {}
    for kind, integer in (("continuous", False), ("integer", True)):
        chosen = [c for c in cells if c["integer"] is integer]
        if chosen:
            out[kind] = {
                "mean_error": {k: float(np.mean([c["error"][k] for c in chosen])) for k in ("rule", "interpolated")},
                "worst_ratio": max(c["rule_over_interpolated"] for c in chosen),
                "cells": len(chosen),
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=2021)
    parser.add_argument("--datasets", default="", help="comma-separated dataset names (default: all)")
    parser.add_argument("--ms", default="", help="comma-separated numbers of levels (default: 1,4,19,99)")
    args = parser.parse_args()
    ms = tuple(int(m) for m in args.ms.split(",") if m.strip()) or MS
    wall, cpu = time.perf_counter(), time.process_time()
    result = run(args.trials, args.seed, tuple(filter(None, args.datasets.split(","))), ms)
    result.update({"trials": args.trials, "seed": args.seed, "wall_seconds": time.perf_counter() - wall})
    result["cpu_seconds"] = time.process_time() - cpu
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

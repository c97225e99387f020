"""Many quantiles from raw values: the protocol of Gillenwater, Joseph and Kulesza (ICML 2021).

Data: uniform on [-5, 5] and standard Gaussian (bounds [-5, 5]), n = 1000 and 10^4, drawn
afresh for every trial; UCI Adult (../shared/data/adult/adult.csv) `age`, `hours-per-week`,
`capital-gain`, `fnlwgt` as integers on public bounds [0, 100], [0, 100], [0, 100000],
[0, 1500000].  m = 1, 4, 19, 99 equally spaced levels q = i / (m + 1); epsilon 0.1 and 1;
add/remove neighbours; >= 20 trials, and at m = 1 at least ``--m1-trials`` (default 200):
those runs cost milliseconds, and the two one-level methods (the exponential mechanism and
JointExp with one level) have nearly the same law, so 40 trials leave a 10% gap between them
to chance (1.30x at 2.2 standard errors on uniform n = 10^4, epsilon 1, that 200 trials put at
1.02x).

Error: the number of records between the estimate e and the true quantile, i.e. the distance
from the target rank q n to [#{x < e}, #{x <= e}] (0 exactly when e is a true q-quantile,
whatever the ties), averaged over the m levels and the trials.  Methods: the histogram/CDF
route (dprange.release with the prefix workload, read by Release.quantile), JointExp, the
recursive split (ApproxQuantiles), and auto (the method auto_method picks from public facts;
its error is that method's in the same trials, as auto runs exactly that mechanism).  Every
method is given n_max = n (JointExp needs a record bound under add/remove; the histogram
route's bins and auto then use n x epsilon).  On binned bounds (real, or fnlwgt's wide
integers) the histogram route also runs without n_max (``histogram_noisy_count``: its bins
from a noisy count spending 5% of epsilon), to show what the count costs.
Coverage: how often the histogram route's 95% intervals hold the true quantile (the
ceil(q n)-th smallest value), pointwise over (trial, level) pairs and simultaneously over all
m levels of a trial, per dataset.  Each cell also reports the standard error of each mean
over trials and how many of them separate auto from the best (``auto_gap_in_stderrs``): with
20 trials, a 10% gap between two methods of the same law is often noise; ``auto_clear_misses``
lists the cells where auto is more than 10% and more than 2 standard errors behind the best.
Times are CPU seconds (time.process_time).

    python benchmarks/quantiles.py [--quick] [--trials T] [--seed S] [--datasets a,b] [--json PATH]
    python benchmarks/quantiles.py --summarize PART1.json PART2.json ...   (merge shards)

A cell in a later part replaces the same (dataset, m, epsilon) cell of an earlier one; the
coverage of a dataset is the first part's that has it.

Prints a table, then the JSON (``--json PATH`` writes it to a file instead).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
import zlib

import numpy as np

from dprange import quantiles
from dprange.api import histogram_binned
from dprange.quantile_mechanisms.methods import auto_method

HERE = os.path.dirname(os.path.abspath(__file__))
ADULT = os.path.join(HERE, "..", "..", "shared", "data", "adult", "adult.csv")
ADULT_FALLBACK = os.path.join(HERE, "..", "..", "..", "shared", "data", "adult", "adult.csv")
ADULT_COLUMNS = {"age": 100, "hours-per-week": 100, "capital-gain": 100_000, "fnlwgt": 1_500_000}
METHODS = ("histogram", "joint_exp", "approximate")
COUNTED = "histogram_noisy_count"  # the histogram route without n_max: bins from a noisy count (5% of epsilon)
MS = (1, 4, 19, 99)
EPSILONS = (0.1, 1.0)


def adult_column(name: str) -> np.ndarray:
    """One numeric column of the Adult CSV, rounded to integers (one age is recorded as 39.5)."""
    path = ADULT if os.path.exists(ADULT) else ADULT_FALLBACK
    with open(path, encoding="utf-8") as fh:
        header = fh.readline().strip().split(",")
        col = header.index(name)
        values = [float(line.split(",")[col]) for line in fh if line.strip()]
    return np.round(np.asarray(values))


def datasets(quick: bool):
    """name -> (draw(rng) -> values, bounds, integer)."""
    out = {}
    sizes = (1000,) if quick else (1000, 10_000)
    for n in sizes:
        out[f"uniform-{n}"] = (lambda rng, n=n: rng.uniform(-5, 5, n), (-5.0, 5.0), False)
        out[f"gaussian-{n}"] = (lambda rng, n=n: rng.normal(0, 1, n), (-5.0, 5.0), False)
    for name, top in ADULT_COLUMNS.items():
        if quick and name in ("fnlwgt", "hours-per-week"):
            continue
        column = adult_column(name)
        out[f"adult-{name}"] = (lambda rng, column=column: column, (0.0, float(top)), True)
    return out


def rank_error(sorted_values: np.ndarray, estimates: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Distance from q n to [#{x < e}, #{x <= e}] per level."""
    below = np.searchsorted(sorted_values, estimates, side="left")
    at_or_below = np.searchsorted(sorted_values, estimates, side="right")
    target = levels * sorted_values.size
    return np.maximum(np.maximum(below - target, target - at_or_below), 0.0)


def true_quantiles(sorted_values: np.ndarray, levels: np.ndarray) -> np.ndarray:
    rank = np.maximum(np.ceil(levels * sorted_values.size - 1e-9).astype(int), 1)
    return sorted_values[rank - 1]


def run(
    quick: bool, trials: int, seed: int, only: tuple[str, ...] = (), ms: tuple[int, ...] = (), m1_trials: int = 0
) -> dict:
    cells, coverage = [], {}
    ms = ms or ((1, 4, 19) if quick else MS)
    for name, (draw, bounds, integer) in datasets(quick).items():
        if only and name not in only:
            continue
        coverage_hits = {key: {"pointwise": [0, 0], "simultaneous": [0, 0]} for key in ("histogram", COUNTED)}
        for m in ms:
            levels = np.arange(1, m + 1) / (m + 1)
            for epsilon in EPSILONS:
                binned = histogram_binned(bounds, integer)
                measured = (*METHODS, COUNTED) if binned else METHODS
                errors: dict[str, list[float]] = {method: [] for method in measured}
                seconds = dict.fromkeys(measured, 0.0)
                rng = np.random.default_rng([seed, m, int(epsilon * 1000), zlib.crc32(name.encode())])
                cell_trials = max(trials, m1_trials) if m == 1 else trials
                for _ in range(cell_trials):
                    values = np.asarray(draw(rng), dtype=float)
                    ordered = np.sort(np.clip(values, *bounds))
                    for method in measured:
                        start = time.process_time()
                        result = quantiles(
                            values,
                            levels,
                            epsilon,
                            bounds=bounds,
                            method="histogram" if method == COUNTED else method,
                            integer=integer,
                            rng=rng,
                            n_max=None if method == COUNTED else values.size,  # COUNTED: a noisy count
                        )
                        seconds[method] += time.process_time() - start  # CPU seconds
                        errors[method].append(float(np.mean(rank_error(ordered, result.values, levels))))
                        if method in ("histogram", COUNTED):
                            hits = coverage_hits[method]
                            truth = true_quantiles(ordered, levels)
                            lower, upper = result.confidence_interval(0.05)
                            inside = (lower <= truth) & (truth <= upper)
                            hits["pointwise"][0] += int(inside.sum())
                            hits["pointwise"][1] += m
                            lower, upper = result.confidence_interval(0.05, simultaneous=True)
                            hits["simultaneous"][0] += int(np.all((lower <= truth) & (truth <= upper)))
                            hits["simultaneous"][1] += 1
                cell = {
                    "dataset": name,
                    "m": m,
                    "epsilon": epsilon,
                    "integer": integer,
                    "width": bounds[1] - bounds[0],
                    "n": int(values.size),
                    "error": {method: float(np.mean(errors[method])) for method in measured},
                    "stderr": {k: float(np.std(v) / np.sqrt(len(v))) for k, v in errors.items()},
                    "cpu_seconds_per_run": {k: v / cell_trials for k, v in seconds.items()},
                    "trials": cell_trials,
                }
                cells.append(_with_auto(cell))
                print(_row(cells[-1]), flush=True)
        hits = coverage_hits["histogram"]
        coverage[name] = {key: hit / total for key, (hit, total) in hits.items()}
        coverage[name]["pairs"] = hits["pointwise"][1]
        counted = coverage_hits[COUNTED]
        if counted["pointwise"][1]:
            coverage[name][COUNTED] = {key: hit / total for key, (hit, total) in counted.items()}
    return {
        "protocol": "Gillenwater, Joseph, Kulesza (ICML 2021); error = records between estimate and truth",
        "trials": trials,
        "seed": seed,
        "cells": cells,
        "coverage_95": coverage,
        "summary": _summary(cells),
    }


def ratio_to_best(error: float, best: float) -> float:
    """(error + 1) / (best + 1): errors within one record of the best count as ties."""
    return (error + 1.0) / (best + 1.0)


def _with_auto(cell: dict) -> dict:
    """Add auto's choice (from public facts only) and its error, the chosen method's."""
    bounds = (0.0, cell["width"])
    chosen, _ = auto_method(
        cell["m"],
        cell["epsilon"],
        integer=cell["integer"],
        width=cell["width"],
        n=cell["n"],  # n_max = n is declared in every run
        binned=histogram_binned(bounds, cell["integer"]),
    )
    cell["error"]["auto"] = cell["error"][chosen]
    cell["stderr"]["auto"] = cell["stderr"][chosen]
    cell["auto_choice"] = chosen
    best = min(METHODS, key=lambda k: cell["error"][k])
    cell["auto_over_best"] = ratio_to_best(cell["error"]["auto"], cell["error"][best])
    gap = cell["error"]["auto"] - cell["error"][best]
    cell["auto_gap_in_stderrs"] = gap / max(math.hypot(cell["stderr"][chosen], cell["stderr"][best]), 1e-12)
    return cell


def _summary(cells: list) -> dict:
    average = {method: float(np.mean([c["error"][method] for c in cells])) for method in (*METHODS, "auto")}
    relative = {
        method: float(np.mean([ratio_to_best(c["error"][method], min(c["error"][k] for k in METHODS)) for c in cells]))
        for method in (*METHODS, "auto")
    }
    counted = [c for c in cells if COUNTED in c["error"]]
    return {
        "mean_error": average,
        # binned cells: the histogram route with a noisy count (no n_max) against n_max = n
        "noisy_count_over_n_max": float(
            np.mean([ratio_to_best(c["error"][COUNTED], c["error"]["histogram"]) for c in counted])
        )
        if counted
        else None,
        "mean_ratio_to_best": relative,
        "auto_worst_ratio_to_best": max(c["auto_over_best"] for c in cells),
        "auto_within_10pct_everywhere": all(c["auto_over_best"] <= 1.10 for c in cells),
        "auto_within_10pct_cells": sum(c["auto_over_best"] <= 1.10 for c in cells),
        "cells": len(cells),
        # a miss by more than 10% whose gap is also over 2 standard errors of the difference
        "auto_clear_misses": [
            f"{c['dataset']} m={c['m']} eps={c['epsilon']}: {c['auto_over_best']:.2f}x, "
            f"{c['auto_gap_in_stderrs']:.1f} se"
            for c in cells
            if c["auto_over_best"] > 1.10 and c["auto_gap_in_stderrs"] > 2
        ],
    }


def _row(cell: dict) -> str:
    e = cell["error"]
    return (
        f"{cell['dataset']:>20} m={cell['m']:>3} eps={cell['epsilon']:<4} "
        + " ".join(f"{k}={e[k]:9.2f}" for k in (*METHODS, "auto"))
        + f"  auto={cell['auto_choice']} ({cell['auto_over_best']:.2f}x best, "
        + f"{cell['auto_gap_in_stderrs']:.1f} se)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 1000, two Adult columns, m up to 19, 3 trials")
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument("--seed", type=int, default=2021)
    parser.add_argument("--json", default=None, help="write the JSON here instead of printing it")
    parser.add_argument("--datasets", default="", help="comma-separated dataset names (default: all)")
    parser.add_argument("--ms", default="", help="comma-separated numbers of levels (default: 1,4,19,99)")
    parser.add_argument("--m1-trials", type=int, default=None, help="trials at m = 1 (default 200; --quick: 3)")
    parser.add_argument(
        "--summarize", nargs="+", default=None, help="re-derive auto and the summary from saved JSONs (merged)"
    )
    args = parser.parse_args()
    trials = args.trials if args.trials is not None else (3 if args.quick else 20)
    if args.summarize:
        parts = []
        for path in args.summarize:
            with open(path, encoding="utf-8") as fh:
                parts.append(json.load(fh))
        merged = {(c["dataset"], c["m"], c["epsilon"]): c for p in parts for c in p["cells"]}
        result = {**parts[0], "cells": list(merged.values())}
        result["coverage_95"] = {}
        for part in parts:
            for key, value in part["coverage_95"].items():
                result["coverage_95"].setdefault(key, value)
        result["wall_seconds"] = sum(p.get("wall_seconds", 0.0) for p in parts)
        result["cpu_seconds"] = sum(p.get("cpu_seconds", 0.0) for p in parts)
        result["cells"] = [_with_auto(cell) for cell in result["cells"]]
        result["summary"] = _summary(result["cells"])
        for cell in result["cells"]:
            print(_row(cell))
    else:
        wall, cpu = time.perf_counter(), time.process_time()
        ms = tuple(int(m) for m in args.ms.split(",") if m.strip())
        m1_trials = args.m1_trials if args.m1_trials is not None else (3 if args.quick else 200)
        only = tuple(filter(None, args.datasets.split(",")))
        result = run(args.quick, trials, args.seed, only, ms, m1_trials)
        result["wall_seconds"] = time.perf_counter() - wall
        result["cpu_seconds"] = time.process_time() - cpu
    print("coverage of the histogram route's 95% intervals:")
    for name, value in result["coverage_95"].items():
        counted = value.get(COUNTED)
        print(
            f"{name:>20} pointwise {value['pointwise']:.3f} simultaneous {value['simultaneous']:.3f}"
            + (f"  (noisy count: {counted['pointwise']:.3f} / {counted['simultaneous']:.3f})" if counted else "")
        )
    print("summary:", json.dumps(result["summary"]))
    text = json.dumps(result, indent=1)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()

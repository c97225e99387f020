"""DPBench's protocol on the 1-D (and 2-D) histograms: data-aware against data-independent
mechanisms, each method's regret, and the speed targets.

Protocol (Hay, Machanavajjhala, Miklau, Chen and Zhang, "Principled Evaluation of
Differentially Private Algorithms using DPBench", SIGMOD 2016): for each 1-D histogram of
../shared/data/dpbench/1D, at domain 4096 and coarsened to 1024, its *shape* (counts / total)
is sampled at each scale (10^3, 10^5, 10^7 records; a multinomial draw per trial, fixed
seeds); every method releases it at epsilon 0.1 and 1; the error is DPBench's *scaled average
per-query error* mean_q |answer_q - true_q| / scale on a workload (prefix: all n prefixes;
random ranges: 2000 uniform ranges, fixed seed), averaged over ``--trials`` trials (10 by
default).  A method's regret on a setting is its error over the best method's error there.
The 2-D part (:func:`accuracy_2d`) follows the same protocol on ../shared/data/dpbench/2D with
the 2-D mechanisms of :func:`mechanisms_2d` (rows added there slot into the same table).

The summary also reports on HOLDOUT, four shapes (the old two-feature rule of ``auto-data`` was
fitted on the other four).  auto-data's selector is now trained and validated leave-one-shape-out
by benchmarks/train_auto_data.py.

    python benchmarks/dpbench.py [--quick] [--trials 10] [--shapes A,B] [--json out.json]

Last full run (10 trials, 192 1-D settings, 24 2-D; ``findings`` prints the counts): as in
DPBench, data-aware methods win at the smallest scale on sparse shapes (35 of 40 settings)
and hierarchies at the largest scale (48 of 64), MWEM and StructureFirst degrade with scale
(they are not scale-epsilon exchangeable).  Differences: at small scale the leader is
StructureFirst (22 wins) more often than DAWA (13): with its partition calibrated exactly
(see dprange.data_aware.dawa.DAWA) DAWA's costs carry far more noise than the paper's, while
StructureFirst's 32 buckets act as a coarse histogram when the noise swamps the shape; and
DAWA still wins 16 of the largest-scale settings, 11 of them on the very sparse NETTRACE and
MDSALARY.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys

import numpy as np
from dpbench_2d import mechanisms as grid_mechanisms  # the sibling script: benchmarks/ is on sys.path when run

from dprange import DAWA, MWEM, AutoData, Flat, Hierarchical, StructureFirst, Wavelet
from dprange.analysis import auto_mechanism
from dprange.mechanisms.grid import Quadtree
from dprange.workloads import Prefix, RandomRanges, random_rectangles

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "dpbench")
DATA = os.path.join(ROOT, "1D")
DATA_2D = os.path.join(ROOT, "2D")
FILES = {
    "ADULTFRANK": "ADULTFRANK.n4096.npy",
    "HEPTH": "HEPTH.n4096.npy",
    "MEDCOST": "MEDCOST.n4096.npy",
    "NETTRACE": "NETTRACE.n4096.npy",
    "PATENT": "PATENT.n4096.npy",
    "SEARCHLOGS": "SEARCHLOGS.n4096.npy",
    "MDSALARY": "GrossCompenMDSalary1.npy",
    "MDSALARY-FA": "GrossCompenMDSalary2_filtered.npy",
}
#: The four shapes the old two-feature rule was fitted on (zero-bin fractions 0.98, 0.75, 0.21, 0.06).
TRAINING = ("ADULTFRANK", "MEDCOST", "HEPTH", "PATENT")
#: The other four (zero-bin fractions 0.97, 0.51, 0.83, 0.83).
HOLDOUT = ("NETTRACE", "SEARCHLOGS", "MDSALARY", "MDSALARY-FA")
SCALES = (10**3, 10**5, 10**7)
EPSILONS = (0.1, 1.0)
DOMAINS = (4096, 1024)


def log(text: str) -> None:
    """Progress on stderr, flushed at once (the benchmark scripts print their JSON on stdout)."""
    print(text, file=sys.stderr, flush=True)


def mechanisms(n: int, epsilon: float, workload: str) -> dict:
    """Every 1-D method: the data-independent ones (Flat, H_16, Privelet, and ``auto``: the
    least exact expected error on the workload) and the data-aware ones, DAWA tuned for the
    workload as in the paper, and ``auto-data``."""
    tuned = "prefix" if workload == "prefix" else "all-range"
    return {
        "flat": Flat(),
        "hierarchical-16": Hierarchical(16),
        "wavelet": Wavelet(),
        "auto": auto_mechanism(tuned, n, epsilon),
        "dawa": DAWA(bucket_workload=tuned),
        "structure-first": StructureFirst(),
        "mwem": MWEM(rounds=20),
        "auto-data": AutoData(tuned_for=tuned),
    }


def shape(name: str, n: int) -> np.ndarray:
    counts = np.load(os.path.join(DATA, FILES[name])).astype(float)
    if n != counts.size:
        counts = counts.reshape(n, -1).sum(axis=1)
    return counts / counts.sum()


def sample(p: np.ndarray, scale: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).multinomial(scale, p.ravel()).reshape(p.shape).astype(np.int64)


def scaled_error(estimate: np.ndarray, counts: np.ndarray, lo: np.ndarray, hi: np.ndarray, scale: int) -> float:
    est = np.concatenate([[0.0], np.cumsum(estimate)])
    true = np.concatenate([[0], np.cumsum(counts)])
    return float(np.mean(np.abs((est[hi + 1] - est[lo]) - (true[hi + 1] - true[lo]))) / scale)


def workloads_1d(n: int) -> dict:
    return {"prefix": (np.zeros(n, dtype=np.int64), np.arange(n)), "random-range": RandomRanges(n, k=2000, seed=3)}


def accuracy_1d(shapes, trials: int, scales=SCALES, domains=DOMAINS, methods=None) -> list[dict]:
    """One row per (shape, domain, scale, epsilon, workload, method): the mean scaled error,
    the per-trial errors, and auto-data's features per trial."""
    rows = []
    for name in shapes:
        for n in domains:
            p = shape(name, n)
            for scale in scales:
                for epsilon in EPSILONS:
                    for wname, workload in workloads_1d(n).items():
                        lo, hi = workload if isinstance(workload, tuple) else workload.ranges()
                        for mname, mech in mechanisms(n, epsilon, wname).items():
                            if methods and mname not in methods:
                                continue
                            errors, features = [], []
                            for t in range(trials):
                                counts = sample(p, scale, seed=t)
                                if isinstance(mech, MWEM):
                                    rel = mech.release(counts, epsilon, rng=1000 + t, workload=_ranges(workload))
                                else:
                                    rel = mech.release(counts, epsilon, rng=1000 + t)
                                errors.append(scaled_error(rel.estimate, counts, lo, hi, scale))
                                f = rel.parameters.get("features") if mname == "auto-data" else None
                                if f:  # none bought while the selector is constant
                                    features.append([f["total"], f["merge"], f["top"], f["epsilon_left"]])
                            row = {
                                "dims": 1,
                                "shape": name,
                                "domain": n,
                                "scale": scale,
                                "epsilon": epsilon,
                                "workload": wname,
                                "method": mname,
                                "error": float(np.mean(errors)),
                                "errors": errors,
                            }
                            if features:
                                row["features"] = features
                            rows.append(row)
    return rows


def _ranges(workload):
    if isinstance(workload, tuple):
        return Prefix(workload[1].size)
    return workload


def mechanisms_2d(shape_2d: tuple[int, int], epsilon: float) -> dict:
    """The 2-D methods: the data-independent ones and the data-aware ones (kd-tree, hybrid
    tree, DAWA over a Hilbert order, UG, AG), as in benchmarks/dpbench_2d.py."""
    return {"quadtree": Quadtree(), **grid_mechanisms()}


def accuracy_2d(trials: int, scales=SCALES) -> list[dict]:
    """The same protocol on the 2-D histograms (256 x 256; 2000 random rectangles)."""
    rows = []
    for fname in sorted(os.listdir(DATA_2D)):
        counts0 = np.load(os.path.join(DATA_2D, fname)).astype(float)
        p = counts0 / counts0.sum()
        rect = random_rectangles(p.shape, 2000, rng=np.random.default_rng(3))
        lows, highs = rect.lows, rect.highs
        for scale in scales:
            for epsilon in EPSILONS:
                for mname, mech in mechanisms_2d(p.shape, epsilon).items():
                    errors = []
                    for t in range(trials):
                        counts = sample(p, scale, seed=t)
                        est = mech.release(counts, epsilon, rng=1000 + t).counts
                        errors.append(_box_error(est, counts, lows, highs) / scale)
                    rows.append(
                        {
                            "dims": 2,
                            "shape": fname.split("_")[0],
                            "domain": int(p.size),
                            "scale": scale,
                            "epsilon": epsilon,
                            "workload": "random-rectangle",
                            "method": mname,
                            "error": float(np.mean(errors)),
                            "errors": errors,
                        }
                    )
    return rows


def _box_error(est, counts, lows, highs) -> float:
    def box_sums(a):
        s = np.zeros((a.shape[0] + 1, a.shape[1] + 1))
        s[1:, 1:] = np.cumsum(np.cumsum(a, axis=0), axis=1)
        (r0, c0), (r1, c1) = lows.T, highs.T + 1
        return s[r1, c1] - s[r0, c1] - s[r1, c0] + s[r0, c0]

    return float(np.mean(np.abs(box_sums(est) - box_sums(counts.astype(float)))))


def setting(r: dict) -> tuple:
    return (r["dims"], r["shape"], r["domain"], r["scale"], r["epsilon"], r["workload"])


def add_regret(rows: list[dict]) -> None:
    best: dict = {}
    for r in rows:
        best[setting(r)] = min(best.get(setting(r), np.inf), r["error"])
    for r in rows:
        r["regret"] = r["error"] / best[setting(r)]


def summary(rows: list[dict], shapes=None) -> dict:
    """Mean regret per method over the settings (of ``shapes`` when given), and split by scale."""
    out: dict = {}
    rows = [r for r in rows if shapes is None or r["shape"] in shapes]
    for method in sorted({r["method"] for r in rows}):
        mine = [r for r in rows if r["method"] == method]
        out[method] = {
            "mean_regret": float(np.mean([r["regret"] for r in mine])),
            "wins": int(sum(r["regret"] == 1.0 for r in mine)),
            "settings": len(mine),
        }
        for scale in sorted({r["scale"] for r in mine}):
            out[method][f"mean_regret_scale_{scale:.0e}"] = float(
                np.mean([r["regret"] for r in mine if r["scale"] == scale])
            )
    return out


def findings(rows: list[dict]) -> dict:
    """DPBench's qualitative findings, checked: the winner's family at the smallest scale on
    sparse shapes (zero-bin fraction > 0.7) and at the largest scale."""
    sparse = {name for name in FILES if (np.load(os.path.join(DATA, FILES[name])) == 0).mean() > 0.7}
    data_aware = {"dawa", "structure-first", "mwem", "auto-data"}
    out = {}
    scales = [r["scale"] for r in rows if r["dims"] == 1]
    if not scales:
        return out
    for label, pick in (
        ("smallest_scale_sparse", lambda r: r["scale"] == min(scales) and r["shape"] in sparse),
        ("largest_scale", lambda r: r["scale"] == max(scales)),
    ):
        settings = {setting(r) for r in rows if r["dims"] == 1 and pick(r)}
        winners = []
        for s in settings:
            mine = [r for r in rows if setting(r) == s and r["method"] != "auto-data"]
            if not mine:
                continue
            winners.append(min(mine, key=lambda r: r["error"])["method"])
        out[label] = {
            "settings": len(settings),
            "won_by_data_aware": sum(w in data_aware for w in winners),
            "winners": {w: winners.count(w) for w in sorted(set(winners))},
        }
    return out


def cpu(fn, repeats: int = 3) -> float:
    """Median CPU seconds (this process, all threads) of ``fn``."""
    times = []
    for _ in range(repeats):
        start = resource.getrusage(resource.RUSAGE_SELF)
        fn()
        end = resource.getrusage(resource.RUSAGE_SELF)
        times.append((end.ru_utime - start.ru_utime) + (end.ru_stime - start.ru_stime))
    return float(np.median(times))


def speed() -> dict:
    hepth = np.rint(np.load(os.path.join(DATA, FILES["HEPTH"]))).astype(np.int64)
    big = np.random.default_rng(0).poisson(3, 2**20)
    ranges = RandomRanges(4096, k=10**4, seed=1)
    return {
        "dawa_4096_cpu_s": cpu(lambda: DAWA().release(hepth, 0.1, rng=1), repeats=5),
        "dawa_2^20_cpu_s": cpu(lambda: DAWA().release(big, 0.1, rng=1), repeats=3),
        "structure_first_4096_cpu_s": cpu(lambda: StructureFirst().release(hepth, 0.1, rng=1), repeats=5),
        "mwem_100_rounds_4096_bins_10^4_ranges_cpu_s": cpu(
            lambda: MWEM(rounds=100).release(hepth, 1.0, rng=1, workload=ranges), repeats=3
        ),
        "auto_data_4096_cpu_s": cpu(lambda: AutoData().release(hepth, 0.1, rng=1), repeats=5),
    }


def print_table(rows: list[dict]) -> None:
    for r in rows:
        print(
            f"{r['dims']}D {r['shape']:<12} n={r['domain']:<6} {r['scale']:>9.0e} eps={r['epsilon']:<4} "
            f"{r['workload']:<16} {r['method']:<18} {r['error']:.3e} regret {r['regret']:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="domain 1024, scales 10^3 and 10^5, 2 trials")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--shapes", help="comma-separated 1-D shapes (default: all)")
    parser.add_argument("--no-2d", action="store_true", help="skip the 2-D part")
    parser.add_argument("--no-speed", action="store_true", help="skip the timings")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument(
        "--merge", help="comma-separated JSON files of earlier runs: report on their rows together (later files win)"
    )
    parser.add_argument("--methods", help="comma-separated 1-D methods to run (default: all)")
    args = parser.parse_args()
    out: dict = {}
    if args.merge:
        merged: dict = {}
        for path in args.merge.split(","):
            with open(path) as fh:
                saved = json.load(fh)
            merged.update({(*setting(r), r["method"]): r for r in saved["rows"]})
            out["timings_cpu_s"] = out.get("timings_cpu_s") or saved.get("timings_cpu_s")
        rows = list(merged.values())
        report(rows, out, args)
        return
    if not args.no_speed:
        out["timings_cpu_s"] = speed()
        print(json.dumps(out["timings_cpu_s"], indent=1), flush=True)
    shapes = args.shapes.split(",") if args.shapes else list(FILES)
    trials = 2 if args.quick and args.trials == 10 else args.trials
    scales = SCALES[:2] if args.quick else SCALES
    domains = (1024,) if args.quick else DOMAINS
    rows = accuracy_1d(shapes, trials, scales, domains, args.methods.split(",") if args.methods else None)
    if not args.no_2d:
        rows += accuracy_2d(trials, scales)
    report(rows, out, args)


def report(rows: list[dict], out: dict, args) -> None:
    add_regret(rows)
    print_table(rows)
    out["summary_all"] = summary(rows)
    out["summary_holdout"] = summary(rows, HOLDOUT)
    out["findings"] = findings(rows)
    print(json.dumps({k: v for k, v in out.items() if k != "timings_cpu_s"}, indent=1))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({**out, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()

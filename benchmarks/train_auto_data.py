"""Train and validate auto-data's selector (dprange.data_aware.selector) on public data only.

Training data: the DPBench 1-D shapes (public: ../shared/data/dpbench/1D, summed to the domain)
and synthetic shapes (SYNTHETIC below), each sampled at every scale (a multinomial draw per
trial, fixed seeds), released by every candidate ("auto", "dawa", "mwem", "structure-first",
as auto-data runs them: the epsilon left after the features, tuned for the workload) at every
epsilon, on both workloads (prefix: all n prefixes; all-range: 2000 random ranges, seed 3).
The error is the mean squared error per query over scale^2, averaged over the trials of a cell
(DAWA's: its exact expected value given the partition drawn, ``bucket_expected_mse``);
the features are auto-data's own noisy features of each trial (AutoData.features).

Fits (each with every ``--margins`` value and over every ``--subsets`` set of candidates: all of
them, or ``auto`` and one data-aware mechanism; the one of least leave-one-shape-out
geometric-mean regret among those never worse than ``auto`` by more than ``--to-auto`` in a
held-out cell ships if it has ``--min-gain`` times less regret than ``always-auto``, the single
``auto`` leaf, which ships otherwise):

* ridge: per data-aware candidate, ridge regression of log(MSE / MSE of auto) (clipped to
  +-``--clip``) on the quadratic expansion of the standardised features; the least prediction
  plus the margin wins (auto is 0);
* tree: a cost-sensitive decision tree (depth <= ``--depth``, leaves of >= ``--leaf`` rows)
  splitting on feature quantiles to minimise the summed log-ratio of each leaf's best candidate;
* rules, rules-wide: per workload, "DAWA iff merge_share <= a, or merge_share <= b and
  concentration <= c, or log_signal <= s and merge_share <= d; else auto", the thresholds from a
  grid (``RULE_GRID``; rules-wide loosens b and d) chosen to be never worse than ``auto`` by more
  than ``--to-auto`` in a training cell at the least summed cost: regret minus 1 plus
  ``--hinge`` times the log-ratio to ``auto`` above 0 (fit_rules; written as a tree).

Validation: leave-one-shape-out over the DPBench shapes (each is predicted by a model trained
without it; synthetic shapes are always in training), per cell the regret of the choice
(its MSE over the best candidate's, per trial choice, averaged as the mean MSE of the chosen
releases) and the ratio to ``auto`` run with the whole epsilon (what a user who skips auto-data
gets; the best candidate includes it).  A constant fit (``always-auto``) buys no features, so
its error is ``auto``'s with the whole epsilon; every other fit pays the feature share.
The safety check (never worse than ``auto`` by more than
``--to-auto``) also holds out each synthetic shape in turn (``synthetic`` in the results): a
fit that is safe on the eight DPBench shapes but loses to ``auto`` by more than
``--synthetic-to-auto`` on an unseen synthetic shape is not shipped (a looser bound: some
synthetic shapes are built to defeat DAWA's partition, e.g. scattered occupied bins).
``--test`` scores the held-out shapes on another table of fresh trials (``--first-trial``,
auto and DAWA measured suffice for the rules fits), so that figures chosen among many fits on
the training table are not the ones reported.  After one mechanism changes,
``--candidates NAME --merge EARLIER.jsonl,...`` re-measures only that candidate (same
samples, features and seeds) and fits on the earlier rows with its new errors in place.
Outputs: the selector JSON (shipped in the package) and a validation JSON with the per-cell
figures and the leave-one-shape-out models (for benchmarks/dpbench_authors.py).

    nice python benchmarks/train_auto_data.py [--trials 6] [--domains 64,256,1024]
        [--scales 1e3,1e4,1e5,1e6,1e7] [--measurements FILE.jsonl] [--reuse]
        [--candidates dawa --merge EARLIER.jsonl,...]  # re-measure one candidate, keep the rest
        [--selector src/dprange/data_aware/auto_data_selector.json] [--validation FILE.json]
        [--test FRESH.jsonl,...]  # from --trials 30 --first-trial 100 --candidates dawa
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import gzip
import itertools
import json
import lzma
import multiprocessing
import os
import time
import zlib

import numpy as np
from dpbench import FILES, log, sample, shape

from dprange.data_aware.auto_data import AutoData
from dprange.data_aware.selector import FEATURES, SELECTOR_FILE, Selector, feature_matrix, quadratic
from dprange.workloads import RandomRanges

CANDIDATES = ("auto", "dawa", "mwem", "structure-first")
WORKLOADS = ("all-range", "prefix")
EPSILONS = (0.1, 1.0)
DPBENCH = tuple(FILES)

#: Synthetic shapes never trained on nor used to design a fit: an out-of-sample check of the
#: shipped selector (``--test`` rows of these shapes are scored as ``unseen``).
UNSEEN = ("scattered-8pct", "block-2pct", "sparse-random-25pct", "gauss-mix-5", "lognormal", "heaped")
HERE = os.path.dirname(os.path.abspath(__file__))
SELECTOR = os.path.join(HERE, "..", "src", "dprange", "data_aware", SELECTOR_FILE)


def synthetic(name: str, n: int) -> np.ndarray:
    """Public synthetic shapes (fixed seeds): smooth, spiky, stepped, heavy-tailed, empty halves."""
    rng = np.random.default_rng(sum(map(ord, name)))
    x = np.arange(n)
    if name == "uniform":
        p = np.ones(n)
    elif name == "spike":
        p = np.full(n, 1e-9)
        p[n // 3] = 1.0
    elif name == "spikes-8":
        p = np.zeros(n)
        p[rng.choice(n, 8, replace=False)] = rng.uniform(0.2, 1.0, 8)
    elif name == "gauss-narrow":
        p = np.exp(-0.5 * ((x - 0.6 * n) / (n / 100)) ** 2)
    elif name == "gauss-two":
        p = np.exp(-0.5 * ((x - 0.25 * n) / (n / 20)) ** 2) + 0.5 * np.exp(-0.5 * ((x - 0.7 * n) / (n / 8)) ** 2)
    elif name == "steps":
        edges = np.sort(rng.choice(np.arange(1, n), 6, replace=False))
        p = np.repeat(rng.uniform(0, 1, 7), np.diff(np.concatenate([[0], edges, [n]])))
    elif name == "zipf-sorted":
        p = 1.0 / (x + 1.0) ** 1.2
    elif name == "zipf-scattered":
        p = rng.permutation(1.0 / (x + 1.0) ** 1.5)
    elif name == "half-empty":
        p = np.where(x < n // 2, 0.0, 1.0 + 0.5 * np.sin(x / 7))
    elif name == "sparse-random":
        p = np.where(rng.uniform(size=n) < 0.1, rng.exponential(size=n), 0.0)
    elif name == "sparse-random-25pct":
        p = np.where(rng.uniform(size=n) < 0.25, rng.exponential(size=n), 0.0)
    elif name == "gauss-mix-5":  # five bumps of random places, widths and weights
        p = sum(w * np.exp(-0.5 * ((x - c * n) / (s * n)) ** 2) for c, s, w in rng.uniform([0, 0.005, 0.1], 1, (5, 3)))
    elif name == "lognormal":  # an income-like density: a bump near the left, a long right tail
        p = np.exp(-0.5 * ((np.log(x + 1.0) - np.log(0.08 * n)) / 0.6) ** 2) / (x + 1.0)
    elif name == "heaped":  # a smooth density with reports heaped on every 5th and 10th bin (ages, hours)
        p = np.exp(-x / (0.4 * n)) * (1.0 + 3.0 * (x % 5 == 0) + 4.0 * (x % 10 == 0))
    elif name.startswith("block-"):  # one run of occupied bins, heavy-tailed counts (like NETTRACE)
        width = max(2, round(n * float(name[6:-3]) / 100))
        start = int(rng.integers(0, n - width + 1))
        p = np.zeros(n)
        p[start : start + width] = rng.exponential(size=width) ** 3
    elif name.startswith("scattered-"):  # one dominant bin, the rest on scattered bins (like ADULTFRANK)
        bins = rng.choice(n, max(2, round(n * float(name[10:-3]) / 100)), replace=False)
        p = np.zeros(n)
        p[bins] = 0.05 * rng.exponential(size=bins.size) / bins.size
        p[bins[0]] = 0.95
    else:
        raise ValueError(name)
    p = np.maximum(p, 0.0)
    return p / p.sum()


SYNTHETIC = (
    "uniform",
    "spike",
    "spikes-8",
    "gauss-narrow",
    "gauss-two",
    "steps",
    "zipf-sorted",
    "zipf-scattered",
    "half-empty",
    "sparse-random",
    "block-1pct",
    "block-4pct",
    "block-12pct",
    "scattered-4pct",
    "scattered-12pct",
)


def distribution(name: str, n: int) -> np.ndarray:
    return shape(name, n) if name in FILES else synthetic(name, n)


def evaluation_ranges(n: int, workload: str) -> tuple[np.ndarray, np.ndarray]:
    if workload == "prefix":
        return np.zeros(n, dtype=np.int64), np.arange(n)
    lo, hi = RandomRanges(n, k=2000, seed=3).ranges()
    return np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)


def mse(estimate, counts, lo, hi) -> float:
    est = np.concatenate([[0.0], np.cumsum(estimate)])
    true = np.concatenate([[0.0], np.cumsum(counts, dtype=float)])
    return float(np.mean(((est[hi + 1] - est[lo]) - (true[hi + 1] - true[lo])) ** 2))


def feature_seed(name: str, n: int, scale: int, epsilon: float, trial: int) -> int:
    """The seed of a trial's feature noise: its own per cell and trial, as every user's release
    draws fresh noise (one seed per trial shared by every cell made a few large draws, 4 noise
    scales out in 2 of 10 trials, recur in every cell)."""
    return zlib.crc32(f"features {name} {n} {scale:g} {epsilon:g} {trial}".encode())


def bucket_expected_mse(release, counts, lo, hi) -> float:
    """A bucket release's exact expected MSE per query given its private partition: the bias of
    spreading every bucket's true total evenly over its bins, plus the measurement noise's exact
    variance (least squares on the bucket totals is unbiased given the partition).  It has the
    realised MSE's expectation with far less variance: on prefixes the noise of the first few
    buckets enters every query, so one release's MSE swings 50x between trials (NETTRACE, 1024
    bins, 10^5, epsilon 1, 100 releases on 10 samples: realised 0.83 +- 0.12 of ``auto``'s, this
    0.85 +- 0.007)."""
    starts = np.asarray(release.parameters["buckets"], dtype=np.int64)
    sizes = np.diff(np.append(starts, counts.size))
    spread = np.repeat(np.add.reduceat(counts, starts) / sizes, sizes)
    return mse(spread, counts, lo, hi) + float(np.mean(release.noise_only_stderr(lo, hi) ** 2))


def auto_mse(mech: AutoData, n: int, epsilon: float, lo, hi) -> float:
    """auto's exact expected MSE per query (data-independent: no sampling needed)."""
    independent = mech.independent(n, epsilon)
    return float(np.mean(independent.error_model(n, epsilon).range_variance(lo, hi)))


def measure_cell(name, n, scale, epsilon, trials, candidates=CANDIDATES, first_trial=0) -> list[dict]:
    """One row per (trial, workload): auto-data's noisy features and the MSE of ``auto`` (exact)
    and of every data-aware candidate in ``candidates``; trials ``first_trial`` onwards (each
    trial number fixes its sample, feature and release seeds)."""
    p = distribution(name, n)
    rows = []
    for workload in WORKLOADS:
        mech = AutoData(tuned_for=workload)
        rest = mech.shares(epsilon)[3]
        lo, hi = evaluation_ranges(n, workload)
        exact_auto = auto_mse(mech, n, rest, lo, hi)
        for t in range(first_trial, first_trial + trials):
            counts = sample(p, scale, seed=t)
            total, merge_cost, top, _ = mech.features(counts, epsilon, rng=feature_seed(name, n, scale, epsilon, t))
            errors = {"auto": exact_auto}
            for cand in [c for c in CANDIDATES[1:] if c in candidates]:
                inner, options = mech.candidate(cand, n, rest)
                rel = inner.release(counts, rest, rng=1000 + t, **options)
                errors[cand] = mse(rel.estimate, counts, lo, hi)
                if cand == "dawa":  # its expected MSE given the partition drawn; the realised one kept beside
                    errors["dawa-realised"] = errors[cand]
                    errors[cand] = bucket_expected_mse(rel, counts, lo, hi)
            rows.append(
                {
                    "shape": name,
                    "n": n,
                    "scale": scale,
                    "epsilon": epsilon,
                    "workload": workload,
                    "trial": t,
                    "features": [total, merge_cost, top, rest],
                    "mse": errors,
                }
            )
    return rows


def refeature(rows: list[dict], log) -> list[dict]:
    """The rows with their features recomputed by today's ``AutoData.features`` on the same
    samples and seeds (the candidates' MSEs kept: valid while the epsilon left is unchanged,
    which is checked)."""
    cache: dict = {}
    out = []
    for r in rows:
        key = (r["shape"], r["n"], r["scale"], r["epsilon"], r["trial"])
        if key not in cache:
            mech = AutoData(tuned_for=r["workload"])
            if mech.shares(r["epsilon"])[3] != r["features"][3]:
                raise SystemExit(f"{key}: measured with another epsilon left; re-measure instead of --refeature")
            counts = sample(distribution(r["shape"], r["n"]), r["scale"], seed=r["trial"])
            seed = feature_seed(*key)
            cache[key] = list(mech.features(counts, r["epsilon"], rng=seed)[:3]) + [r["features"][3]]
        out.append({**r, "features": cache[key]})
    log(f"features recomputed for {len(rows)} rows ({len(cache)} samples)")
    return out


def measure(shapes, domains, scales, trials, path, log, candidates=CANDIDATES, first_trial=0) -> list[dict]:
    return measure_grid(
        lambda name, n, scale, epsilon: measure_cell(name, n, scale, epsilon, trials, candidates, first_trial),
        lambda name, n, scale, epsilon: f"{name} n={n} scale={scale:g} eps={epsilon}",
        (domains, shapes, scales, EPSILONS),
        path,
        log,
    )


def measure_grid(run, label, axes, path, log, jobs: int = 1, mode: str = "w") -> list[dict]:
    """``run(shape, size, scale, epsilon)`` for every cell of ``axes`` (sizes, shapes, scales,
    epsilons; the shapes vary within a size), writing its rows to ``path`` (opened with ``mode``:
    "a" appends; JSON lines, flushed per cell so a long run can be followed) in that order and
    logging ``label`` of the cell and the time so far.  With ``jobs`` > 1 the cells run in that
    many forked processes (``run`` must then be picklable, e.g. a functools.partial of a module
    function) and are written in the same order: every cell seeds its own samples and noise, so
    the file is the serial run's."""
    rows: list[dict] = []
    cells = list(itertools.product(*axes))
    start = time.time()
    with open(path, mode) as out, contextlib.ExitStack() as stack:
        if jobs > 1:
            context = multiprocessing.get_context("fork")
            pool = stack.enter_context(concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context))
            sizes, names, scales, epsilons = (list(column) for column in zip(*cells))
            done = pool.map(run, names, sizes, scales, epsilons)  # results in the cells' order
        else:
            done = (run(name, size, scale, epsilon) for size, name, scale, epsilon in cells)
        for (size, name, scale, epsilon), cell in zip(cells, done):
            out.writelines(json.dumps(row) + "\n" for row in cell)
            out.flush()
            rows.extend(cell)
            log(f"{label(name, size, scale, epsilon)}: done at {time.time() - start:.1f} s")
    return rows


def row_key(row: dict) -> tuple:
    return (row["shape"], row["n"], row["scale"], row["epsilon"], row["workload"], row["trial"])


def merge(earlier: list[dict], fresh: list[dict], log) -> list[dict]:
    """The rows of ``earlier`` with the MSEs of ``fresh`` (a re-measurement of some candidates,
    e.g. after one mechanism changed) in place of theirs.  Both draw the same samples and
    features (fixed seeds), which is checked; earlier rows with no fresh row are dropped, since
    their figures for the re-measured candidates are stale."""
    by_key = {row_key(r): r for r in fresh}
    merged = []
    for row in earlier:
        new = by_key.get(row_key(row))
        if new is None:
            continue
        if not np.allclose(new["features"], row["features"]):
            raise ValueError(f"features differ between the measurements of {row_key(row)}: not the same samples")
        merged.append({**row, "mse": {**row["mse"], **new["mse"]}})
    log(f"merged {len(fresh)} fresh rows into {len(earlier)} earlier ones: {len(merged)} rows kept")
    if len(merged) < len(fresh):
        raise ValueError(f"{len(fresh) - len(merged)} fresh rows have no earlier row to merge into")
    return merged


def read_rows(path: str) -> list[dict]:
    """A table's rows (JSON lines), from a plain file or one compressed by xz (``.xz``) or gzip
    (``.gz``), as the tables kept under benchmarks/tables/ are."""
    opener = {".xz": lzma.open, ".gz": gzip.open}.get(os.path.splitext(path)[1], open)
    with opener(path, "rt") as handle:
        return [json.loads(line) for line in handle]


def write_rows(path: str, rows) -> None:
    """A table's rows as JSON lines (plain), as read_rows reads them."""
    with open(path, "w") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)


def load(paths: str) -> list[dict]:
    return [row for path in paths.split(",") for row in read_rows(path)]


# ----------------------------------------------------------------------------- the table
WHOLE = len(CANDIDATES)  # per_row's last column: auto with the whole epsilon (no features bought)
COLUMNS = (*CANDIDATES, "auto-whole")  # per_row's columns, by name


def whole_auto(n: int, epsilon: float, workload: str) -> float:
    """auto's exact MSE with the whole epsilon: what a constant selector naming it releases, and
    what a user who skips auto-data gets (the ratio to auto is against this)."""
    lo, hi = evaluation_ranges(n, workload)
    return auto_mse(AutoData(tuned_for=workload), n, epsilon, lo, hi)


def table(rows):
    """(features X, log-ratio targets R (rows x candidates, auto = 0), cell keys, per-row MSEs:
    the candidates' with the epsilon left after the features, then ``auto``'s with the whole
    epsilon, column WHOLE; NaN for a candidate a table did not measure)."""
    cells: dict = {}
    for r in rows:
        cells.setdefault((r["shape"], r["n"], r["scale"], r["epsilon"], r["workload"]), []).append(r)
    mean = {key: {c: np.mean([r["mse"].get(c, np.nan) for r in rs]) for c in CANDIDATES} for key, rs in cells.items()}
    f = np.array([r["features"] for r in rows])
    x = feature_matrix(
        f[:, 0], f[:, 1], f[:, 2], [r["n"] for r in rows], f[:, 3], [r["workload"] == "prefix" for r in rows]
    )
    keys = [(r["shape"], r["n"], r["scale"], r["epsilon"], r["workload"]) for r in rows]
    ratio = np.array([[np.log(mean[k][c] / mean[k]["auto"]) for c in CANDIDATES] for k in keys])
    whole = {s: whole_auto(*s) for s in {(r["n"], r["epsilon"], r["workload"]) for r in rows}}
    per_row = np.array(
        [[r["mse"].get(c, np.nan) for c in CANDIDATES] + [whole[r["n"], r["epsilon"], r["workload"]]] for r in rows]
    )
    return x, ratio, keys, per_row


def fit_ridge(x, ratio, alpha: float, margin: float, candidates=CANDIDATES) -> Selector:
    centre, spread = x.mean(axis=0), x.std(axis=0)
    spread[spread == 0] = 1.0
    basis = quadratic((x - centre) / spread)
    penalty = alpha * np.eye(basis.shape[1])
    penalty[0, 0] = 0.0
    coef = np.linalg.solve(basis.T @ basis + penalty, basis.T @ ratio[:, 1:])
    model = {"mean": centre, "scale": spread, "coef": coef.tolist(), "alpha": alpha, "margin": margin}
    return Selector("ridge", tuple(candidates), model)


def fit_tree(x, ratio, depth: int, leaf: int, margin: float, candidates=CANDIDATES) -> Selector:
    nodes: list[dict] = []
    penalty = np.array([0.0] + [margin] * (ratio.shape[1] - 1))

    def grow(index: np.ndarray, level: int) -> int:
        position = len(nodes)
        cost = ratio[index].sum(axis=0) + penalty * index.size
        nodes.append({"leaf": int(np.argmin(cost))})
        if level == depth or index.size < 2 * leaf:
            return position
        best = (cost.min(), None, None)
        for feature in range(x.shape[1]):
            values = x[index, feature]
            for threshold in np.unique(np.quantile(values, np.linspace(0.05, 0.95, 19))):
                left = values <= threshold
                if left.sum() < leaf or (~left).sum() < leaf:
                    continue
                split = (ratio[index[left]].sum(axis=0) + penalty * left.sum()).min() + (
                    ratio[index[~left]].sum(axis=0) + penalty * (~left).sum()
                ).min()
                if split < best[0] - 1e-9:
                    best = (split, feature, float(threshold))
        if best[1] is None:
            return position
        _, feature, threshold = best
        left = x[index, feature] <= threshold
        nodes[position] = {"feature": int(feature), "threshold": threshold}
        nodes[position]["left"] = grow(index[left], level + 1)
        nodes[position]["right"] = grow(index[~left], level + 1)
        return position

    grow(np.arange(x.shape[0]), 0)
    return Selector("tree", tuple(candidates), {"nodes": nodes, "depth": depth, "min_leaf": leaf, "margin": margin})


#: The rules fit's grid (thresholds on merge_share, concentration and log_signal; see fit_rules).
RULE_GRID = {
    "a": (0.05, 0.08, 0.1, 0.12, 0.135, 0.15, 0.17, 0.2),  # merge share below which DAWA runs whatever else
    "b": (0.2, 0.22, 0.25),  # ... below which it runs if the mass is spread (concentration <= c)
    "c": (0.5, 0.7, 0.9, 0.95, 0.97, 1.01),
    "s": (0.0, 2.5, 3.0, 3.5),  # log10(N eps) below which DAWA runs if the merge share is <= d (0: never)
    "d": (0.2, 0.22, 0.25),
}

#: rules-wide: the same rule with looser upper shares (b, d), for comparison.
RULE_GRID_WIDE = {**RULE_GRID, "b": (0.2, 0.22, 0.25, 0.3, 0.35, 0.4), "d": (0.2, 0.25, 0.3, 0.4, 0.6, 1.5)}


def rule_nodes(a: float, b: float, c: float, s: float, d: float, dawa: int, start: int) -> list[dict]:
    """The rule "DAWA iff merge_share <= a, or merge_share <= b and concentration <= c, or
    log_signal <= s and merge_share <= d; else auto" as tree nodes numbered from ``start``."""
    share, concentration, signal = (FEATURES.index(f) for f in ("merge_share", "concentration", "log_signal"))
    k = start
    return [
        {"feature": share, "threshold": a, "left": k + 1, "right": k + 2},
        {"leaf": dawa},
        {"feature": share, "threshold": b, "left": k + 3, "right": k + 5},
        {"feature": concentration, "threshold": c, "left": k + 4, "right": k + 5},
        {"leaf": dawa},
        {"feature": signal, "threshold": s, "left": k + 6, "right": k + 8},
        {"feature": share, "threshold": d, "left": k + 7, "right": k + 8},
        {"leaf": dawa},
        {"leaf": 0},
    ]


def cell_means(keys, per_row) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each row's cell number, the rows per cell, the cells' mean of every column of
    ``per_row``), cells numbered by first appearance of their key."""
    ids: dict = {}
    cell = np.array([ids.setdefault(k, len(ids)) for k in keys])
    size = np.bincount(cell)
    return cell, size, np.stack([np.bincount(cell, per_row[:, j]) / size for j in range(per_row.shape[1])], axis=1)


def rule_rank(worst: float, total: float, to_auto: float) -> tuple:
    """A rule fit's ranking key, least first: any rule within ``to_auto`` of ``auto`` in every
    training cell (its ``worst`` ratio) before any other, then those by ``total`` cost, the
    others by their worst ratio."""
    return (worst > to_auto, worst if worst > to_auto else 0.0, total)


def fit_rules(x, keys, per_row, args, grid=RULE_GRID) -> Selector:
    """A rule per workload choosing between ``auto`` and DAWA (rule_nodes), its thresholds from
    ``grid``: among the rules never worse than ``auto`` with the whole epsilon by more than
    ``args.to_auto`` in any training cell (the mean MSE of the chosen releases), the one of
    least summed cost over the training rows; the least worst such ratio if none is.  A row's
    cost is the regret of its choice minus 1 (the cell's mean MSE over the best candidate's)
    plus ``args.hinge`` times its log-ratio to ``auto`` with the whole epsilon above 0: the loss
    to ``auto`` is priced far above the regret, unlike a margin, which prices every data-aware
    choice alike whatever it gains.  Returned as a tree (root split on the workload)."""
    cell, size, mean = cell_means(keys, per_row)
    pair = [CANDIDATES.index("auto"), CANDIDATES.index("dawa")]
    regret = mean[:, pair] / np.nanmin(mean, axis=1, keepdims=True)
    loss = np.maximum(0.0, np.log(mean[:, pair] / mean[:, [WHOLE]]))
    cost = regret - 1 + args.hinge * loss  # per cell: choosing auto, choosing DAWA
    share, concentration, signal = (x[:, FEATURES.index(f)] for f in ("merge_share", "concentration", "log_signal"))
    prefix = x[:, FEATURES.index("prefix")] > 0
    nodes: list[dict] = [{"feature": FEATURES.index("prefix"), "threshold": 0.0, "left": 1, "right": 10}]
    rules = {}
    for workload in (False, True):
        rows = np.flatnonzero(prefix == workload)
        at, present = cell[rows], np.unique(cell[rows])
        w_share, w_concentration, w_signal = share[rows], concentration[rows], signal[rows]
        chosen, best = None, None
        for a, b, c, s, d in itertools.product(*grid.values()):
            dawa = w_share <= a
            dawa |= (w_share <= b) & (w_concentration <= c)
            dawa |= (w_signal <= s) & (w_share <= d)
            total = np.where(dawa, cost[at, 1], cost[at, 0]).sum()
            error = np.where(dawa, per_row[rows, pair[1]], per_row[rows, pair[0]])
            to_auto = np.bincount(at, error, minlength=size.size)[present] / size[present] / mean[present, WHOLE]
            key = rule_rank(float(to_auto.max()), total, args.to_auto)
            if best is None or key < best:
                chosen, best = (a, b, c, s, d), key
        nodes += rule_nodes(*chosen, dawa=1, start=len(nodes))
        rules["prefix" if workload else "all-range"] = dict(zip("abcsd", chosen))
    model = {"nodes": nodes, "depth": 5, "min_leaf": 0, "margin": 0.0, "hinge": args.hinge, "rules": rules}
    return Selector("tree", ("auto", "dawa"), model)


def fit(kind: str, x, ratio, args, keys=None, per_row=None) -> Selector:
    """The model of this kind over the candidates ``args.subset`` (auto first; all by default),
    with the training range of every feature (inputs are clipped to it); ``"auto"`` is the single
    ``auto`` leaf."""
    names = tuple(getattr(args, "subset", CANDIDATES))
    ratio = ratio[:, [CANDIDATES.index(c) for c in names]]
    if kind == "auto":
        selector = Selector("tree", ("auto",), {"nodes": [{"leaf": 0}], "depth": 0, "min_leaf": 0, "margin": 0.0})
    elif kind == "ridge":
        selector = fit_ridge(x, np.clip(ratio, -args.clip, args.clip), args.alpha, args.margin, names)
    elif kind in ("rules", "rules-wide"):
        selector = fit_rules(x, keys, per_row, args, RULE_GRID if kind == "rules" else RULE_GRID_WIDE)
    else:
        selector = fit_tree(x, ratio, args.depth, args.leaf, args.margin, names)
    selector.model.update(lower=x.min(axis=0), upper=x.max(axis=0))
    return selector


# ----------------------------------------------------------------------------- validation
class Unscored(Exception):
    """A fit chose a candidate that the test table did not measure: it cannot be scored there."""


def validate(kind: str, x, ratio, keys, per_row, args, held_out=DPBENCH, test=None) -> tuple[list[dict], dict]:
    """Leave-one-shape-out over the shapes ``held_out`` (the DPBench shapes by default): per cell,
    the mean MSE of the chosen releases over the best candidate's mean MSE (regret; the
    candidates with the epsilon left after the features, and ``auto`` with the whole epsilon) and
    over ``auto``'s with the whole epsilon (ratio to auto).  A constant model buys no features:
    its ``auto`` runs with the whole epsilon.  ``test`` (x, keys, per_row of another table: fresh
    samples and seeds) scores each held-out shape on that table's rows instead of the training
    rows."""
    shapes = np.array([k[0] for k in keys])
    test_x, test_keys, test_per_row = test if test is not None else (x, keys, per_row)
    test_shapes = np.array([k[0] for k in test_keys])
    cells: list[dict] = []
    models = {}
    fitted: dict = {}  # by training rows: a shape absent from the training table (UNSEEN) leaves them all
    for held in held_out:
        train = shapes != held
        scored = test_shapes == held
        if not scored.any():
            continue
        if train.tobytes() not in fitted:
            train_keys = [k for k, t in zip(keys, train) if t]
            fitted[train.tobytes()] = fit(kind, x[train], ratio[train], args, train_keys, per_row[train])
        model = fitted[train.tobytes()]
        models[held] = model.to_dict()
        columns = np.array([CANDIDATES.index(c) for c in model.candidates])
        chosen = columns[model.choose_index(test_x[scored])]
        if model.constant() == "auto":
            chosen = np.full(chosen.shape, WHOLE)
        rows = np.flatnonzero(scored)
        for key in sorted({test_keys[i] for i in rows}):
            mine = [i for i, c in zip(rows, chosen) if test_keys[i] == key]
            picks = [int(c) for i, c in zip(rows, chosen) if test_keys[i] == key]
            got = np.mean([test_per_row[i, c] for i, c in zip(mine, picks)])
            if np.isnan(got):
                raise Unscored(f"{key}: the fit chose a candidate the test table did not measure")
            means = test_per_row[mine].mean(axis=0)
            cells.append(
                {
                    "shape": key[0],
                    "n": key[1],
                    "scale": key[2],
                    "epsilon": key[3],
                    "workload": key[4],
                    "regret": float(got / np.nanmin(means)),
                    "to_auto": float(got / means[WHOLE]),
                    "best": COLUMNS[int(np.nanargmin(means))],
                    "choices": {c: picks.count(j) for j, c in enumerate(COLUMNS) if picks.count(j)},
                }
            )
    return cells, models


def summary(cells: list[dict]) -> dict:
    regret = np.array([c["regret"] for c in cells])
    to_auto = np.array([c["to_auto"] for c in cells])
    worst = cells[int(np.argmax(regret))]
    return {
        "cells": len(cells),
        "regret_geo_mean": float(np.exp(np.log(regret).mean())),
        "regret_mean": float(regret.mean()),
        "regret_worst": float(regret.max()),
        "worst_cell": {k: worst[k] for k in ("shape", "n", "scale", "epsilon", "workload", "best", "choices")},
        "to_auto_worst": float(to_auto.max()),
        "to_auto_geo_mean": float(np.exp(np.log(to_auto).mean())),
    }


def pick(results: dict, to_auto: float, min_gain: float = 1.0, synthetic_to_auto: float | None = None) -> str:
    """The fit of least leave-one-shape-out geometric-mean regret among those never worse than
    ``auto`` by more than ``to_auto`` in any held-out DPBench cell and by more than
    ``synthetic_to_auto`` (``to_auto`` if None) in any held-out synthetic cell (all fits if none
    is); ``always-auto``, where validated, unless that fit's regret is below its own by a factor
    ``min_gain`` (a fit that chooses a data-aware mechanism in a handful of trials is noise, not
    a selector)."""
    bound = to_auto if synthetic_to_auto is None else synthetic_to_auto

    def safe_fit(result: dict) -> bool:
        synthetic = result.get("synthetic")
        return result["summary"]["to_auto_worst"] <= to_auto and (not synthetic or synthetic["to_auto_worst"] <= bound)

    safe = [k for k, v in results.items() if safe_fit(v)] or list(results)
    best = min(safe, key=lambda k: results[k]["summary"]["regret_geo_mean"])
    baseline = results.get("always-auto")
    if baseline and results[best]["summary"]["regret_geo_mean"] * min_gain > baseline["summary"]["regret_geo_mean"]:
        return "always-auto"
    return best


def always_auto(per_row, keys) -> dict:
    """The regret of never choosing a data-aware mechanism, on the DPBench cells (the baseline)."""
    cells: dict = {}
    for i, key in enumerate(keys):
        if key[0] in DPBENCH:
            cells.setdefault(key, []).append(i)
    regret = np.array(
        [per_row[rows].mean(axis=0)[WHOLE] / np.nanmin(per_row[rows].mean(axis=0)) for rows in cells.values()]
    )
    return {"regret_geo_mean": float(np.exp(np.log(regret).mean())), "regret_worst": float(regret.max())}


def fits(args) -> list[tuple[str, tuple[str, ...], float]]:
    """(kind, candidates, margin) of every fit validated: the single ``auto`` leaf first (so that
    it ships on a tie), then ridge and tree over each ``--subsets`` set at each margin."""
    subsets = [CANDIDATES if s == "all" else ("auto", s) for s in args.subsets.split(",")]
    margins = [float(m) for m in args.margins.split(",")]
    grid = [(kind, subset, margin) for kind in ("ridge", "tree") for subset in subsets for margin in margins]
    rules = [(kind, ("auto", "dawa"), 0.0) for kind in ("rules", "rules-wide")]
    return [("auto", ("auto",), 0.0), *grid, *rules]


def spans(numbers) -> str:
    """Sorted integers as runs: {100, ..., 129, 200, ..., 229} -> "100-129, 200-229"."""
    runs: list[list[int]] = []
    for v in sorted(numbers):
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return ", ".join(f"{a}-{b}" if a < b else f"{a}" for a, b in runs)


def fit_name(kind: str, subset, margin: float) -> str:
    if kind == "auto":
        return "always-auto"
    if kind.startswith("rules"):
        return kind
    among = "" if tuple(subset) == CANDIDATES else "-" + "-".join(subset[1:])
    return f"{kind}{among}-margin{margin:g}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument(
        "--first-trial", type=int, default=0, help="the first trial's number (fresh samples and seeds: a test table)"
    )
    parser.add_argument("--domains", default="64,256,1024")
    parser.add_argument("--scales", default="1e3,1e4,1e5,1e6,1e7")
    parser.add_argument("--shapes", default=",".join(DPBENCH + SYNTHETIC))
    parser.add_argument("--measurements", default="auto_data_training.jsonl", help="comma-separated with --reuse")
    parser.add_argument("--reuse", action="store_true", help="fit on the measurements file without measuring")
    parser.add_argument(
        "--refeature",
        default=None,
        help="with --reuse: recompute every row's features (same samples and seeds, MSEs kept) and save the rows here",
    )
    parser.add_argument(
        "--candidates",
        default=",".join(CANDIDATES[1:]),
        help="data-aware candidates measured (auto's exact error always is); with --merge, the others' come from there",
    )
    parser.add_argument(
        "--merge",
        default=None,
        help="comma-separated earlier measurements: fit on their rows with the new MSEs of --candidates in place",
    )
    parser.add_argument("--selector", default=SELECTOR)
    parser.add_argument("--validation", default="auto_data_validation.json")
    parser.add_argument("--alpha", type=float, default=10.0, help="ridge penalty")
    parser.add_argument("--depth", type=int, default=3, help="tree depth")
    parser.add_argument("--leaf", type=int, default=300, help="tree: least rows per leaf")
    parser.add_argument("--margins", default="0,0.25,0.5,0.75", help="log-ratios a data-aware choice must beat auto by")
    parser.add_argument(
        "--subsets",
        default="all," + ",".join(CANDIDATES[1:]),
        help="candidate sets fitted: all, or one data-aware mechanism (chosen against auto only)",
    )
    parser.add_argument("--to-auto", type=float, default=1.2, help="the shipped fit's worst cell against auto")
    parser.add_argument(
        "--synthetic-to-auto",
        type=float,
        default=1.5,
        help="the shipped fit's worst held-out synthetic cell against auto (some are built to defeat DAWA)",
    )
    parser.add_argument(
        "--hinge", type=float, default=10.0, help="rules: the price of a log-ratio to auto above 0, against a regret"
    )
    parser.add_argument(
        "--test",
        default=None,
        help="score the held-out shapes on this table (fresh trials: --first-trial; auto and dawa suffice for rules)",
    )
    parser.add_argument(
        "--min-gain", type=float, default=1.05, help="a fit ships over always-auto only if it cuts its regret this much"
    )
    parser.add_argument("--clip", type=float, default=3.0, help="ridge: targets clipped to +-clip (log-ratio)")
    args = parser.parse_args(argv)

    if args.reuse:
        rows = load(args.measurements)
    else:
        domains = [int(v) for v in args.domains.split(",")]
        scales = [int(float(v)) for v in args.scales.split(",")]
        candidates = tuple(args.candidates.split(","))
        rows = measure(
            args.shapes.split(","), domains, scales, args.trials, args.measurements, log, candidates, args.first_trial
        )
    if args.merge:
        rows = merge(load(args.merge), rows, log)
    if args.refeature:
        rows = refeature(rows, log)
        write_rows(args.refeature, rows)
    x, ratio, keys, per_row = table(rows)
    test, scored_on = None, "the training rows"
    if args.test:
        test_rows = load(args.test)
        test_x, _, test_keys, test_per_row = table(test_rows)
        test = (test_x, test_keys, test_per_row)
        scored_on = f"a test table of {len(test_rows)} rows, fresh trials {spans({r['trial'] for r in test_rows})}"
    synthetic_held = sorted({k[0] for k in keys} - set(DPBENCH))
    # shapes of the test table that no fit trained on (e.g. UNSEEN): scored, never used to pick
    unseen = sorted({k[0] for k in test[1]} - {k[0] for k in keys}) if test else []
    results = {}
    for kind, subset, margin in fits(args):
        fit_args = argparse.Namespace(**{**vars(args), "margin": margin, "subset": subset})
        name = fit_name(kind, subset, margin)
        try:
            cells, models = validate(kind, x, ratio, keys, per_row, fit_args, test=test)
            synthetic_cells, _ = validate(kind, x, ratio, keys, per_row, fit_args, held_out=synthetic_held, test=test)
            unseen_cells, _ = validate(kind, x, ratio, keys, per_row, fit_args, held_out=unseen, test=test)
        except Unscored as reason:
            log(f"{name}: not scored ({reason})")
            continue
        results[name] = {
            "kind": kind,
            "margin": margin,
            "subset": list(subset),
            "summary": summary(cells),
            "synthetic": summary(synthetic_cells) if synthetic_cells else None,
            "unseen": summary(unseen_cells) if unseen_cells else None,
            "cells": cells,
            "models": models,
        }
        log(f"{name}: {json.dumps(results[name]['summary'])}; synthetic: {json.dumps(results[name]['synthetic'])}")
        if unseen_cells:
            log(f"{name}: unseen shapes: {json.dumps(results[name]['unseen'])}")
    chosen = pick(results, args.to_auto, args.min_gain, args.synthetic_to_auto)
    best = results[chosen]
    selector = fit(
        best["kind"],
        x,
        ratio,
        argparse.Namespace(**{**vars(args), "margin": best["margin"], "subset": best["subset"]}),
        keys,
        per_row,
    )
    selector.training = {
        "fit": chosen,
        "rows": int(x.shape[0]),
        "shapes": sorted({k[0] for k in keys}),
        "domains": sorted({k[1] for k in keys}),
        "scales": sorted({k[2] for k in keys}),
        "epsilons": sorted({k[3] for k in keys}),
        "trials": int(max(r["trial"] for r in rows) + 1),
        "loso": best["summary"],
        "loso_scored_on": scored_on,
        "loso_synthetic": best["synthetic"],
        "unseen": best["unseen"],
        "always_auto_loso": always_auto(*((test[2], test[1]) if test else (per_row, keys))),
        "script": "benchmarks/train_auto_data.py",
    }
    with open(args.selector, "w") as handle:
        json.dump(selector.to_dict(), handle, indent=1)
        handle.write("\n")
    with open(args.validation, "w") as handle:
        json.dump({"shipped": chosen, "features": list(FEATURES), **results}, handle)
    print(json.dumps({"shipped": chosen, **{k: [v["summary"], v["synthetic"]] for k, v in results.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

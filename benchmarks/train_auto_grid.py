"""Train and validate the 2-D auto-data selector (dprange.data_aware.auto_grid) on public data only.

Training data: the four DPBench 2-D shapes (public: ../shared/data/dpbench/2D, 256 x 256 summed
to each side) and synthetic shapes (SYNTHETIC below, fixed seeds: eleven drawn by hand, 24
random mixtures, ``mixture``, 8 mixtures heaped on the bounds of their attributes,
``heaped_on_bounds``, and 8 cross-tabulations of two skewed, zero-inflated amounts,
``skewed_amounts``; all measured at sides 32-256), each sampled at every scale
(a multinomial draw per trial, seed = trial) on square grids of every side, released by every
candidate (the data-independent ``auto`` at the epsilon left after the features, and the
registered 2-D data-aware grids, as AutoDataGrid runs them, ``auto_nonnegative`` built for each
workload's rectangles as ``auto`` is; release seed 1000 + trial) at every epsilon.  Workloads
(WORKLOADS, the same releases): 2000 random rectangles (seed 3; two uniform ends per axis,
dprange's ``random_rectangles``), 2000 prefix rectangles and 2000 sized rectangles (a uniform
size per axis placed uniformly, as DPBench's: larger).  The error is the mean squared error per
rectangle (``auto``: its exact expected value), averaged over the trials of a cell; the features
are AutoDataGrid's own noisy features of each trial, their noise seeded per cell and trial
(train_auto_data.feature_seed: one seed per trial shared by every cell makes its few large
draws recur in every cell).

Candidates that are never the best in a training cell are dropped.  Fits (GridSelector on
GRID_FEATURES, dprange.data_aware.auto_grid; each with every ``--margins`` value): decision
trees of depth 1 and 2 minimising the summed log error ratio to ``auto``
(train_auto_data.fit_tree), ridge regressions of that ratio per candidate
(train_auto_data.fit_ridge) and decision lists of thresholds (GRID_RULE, fit_rules), each
fitted on all workloads' rows and on the random rectangles' alone.  Validation:
leave-one-shape-out over the DPBench shapes (synthetic shapes always train): per cell, every
workload, the regret (the chosen releases' mean MSE over the best candidate's)
and the ratio to ``auto`` run with the whole epsilon (what a user who skips auto-data gets; the
best candidate includes it; a constant fit naming ``auto`` buys no features and is scored as
it).  The fit of least geometric-mean regret among those never worse than
``auto`` by more than ``--to-auto`` in a held-out cell, and by more than ``--unseen-to-auto``
(default ``--to-auto``) in a cell of the UNSEEN shapes (four drawn by hand, 12 random mixtures),
ships.  A rules fit's folds are also scored with their non-negative branch (NONNEGATIVE_RULE,
the seventh stage) turned off (``without_refit`` in the validation and the report): what the branch
adds, from the same fits.  ``--test`` scores the held-out shapes on another table of fresh trials
(``--first-trial``: new samples, feature noise and releases), so that the figures reported are
not those the fit was picked on.  ``--weighted`` scores the folds' ``auto`` choices with
auto-data's default ``auto`` branch, ``auto_toward_nonnegative`` (least squares moved toward the
non-negative refit), measured on the test rows by ``--measure-weighted`` (trials 100-102: five
refits a release), on the rows where it was measured.  ``--auto-branch weighted`` trains and
scores with that branch as the candidate ``auto`` itself: each row's ``auto`` MSE is replaced by
its measurement from the ``--weighted`` files (training and test rows; rows without one dropped).
With ``--test``, the baselines include the setting oracle (``setting_oracle``: per DPBench cell
the candidate of least mean error over that very cell's training trials), the floor that the
trials' own spread puts under every selector's held-out figures, and with ``--weighted`` too the
split-half oracle (``split_half_oracle``: picked on half a cell's test trials, scored on the
other half).  The rules fit's later stages bound a training cell's ratio to ``auto`` by
``--stage-to-auto`` (1.3), its first stage and the held-out pick by ``--to-auto`` (1.2).  The
validation file keeps each fit's list per held-out shape (``folds``): auto_grid_regret.py
re-measures the cells that ten trials leave uncertain with them.

    nice python benchmarks/train_auto_grid.py [--trials 3] [--sides 32,64,128,256]
        [--scales 1e3,1e4,1e5,1e6,1e7] [--measurements FILE.jsonl] [--reuse]
        [--test FRESH.jsonl]  # from --trials 10 --first-trial 100, the DPBench and UNSEEN shapes
        [--kinds tree,ridge,rules] [--skip rules-random] [--unseen-to-auto 1.4] [--jobs 2]
    # the shipped selector: --reuse --kinds rules --skip rules-random --unseen-to-auto 1.4
    # (docs/data-aware.md, "Random mixtures")
    nice python benchmarks/train_auto_grid.py --measure-weighted W.jsonl --shapes ... --sides 32,64,128
        --trials 3 --first-trial 100          # auto_toward_nonnegative on the test trials
    # then the shipped fit's line with --weighted W.jsonl,...: the "weighted_auto" figures;
    # with --auto-branch weighted too (W measured on the training trials 0-2 as well): a list
    # trained with the weighted branch as auto
    nice python benchmarks/train_auto_grid.py --speed    # CPU time of the features and the choice
    python benchmarks/train_auto_grid.py --measure-only --measurements T.jsonl ... --jobs 16
    # a table only (cells in 16 processes, the serial run's file); the whole retraining, table by
    # table and resumable: sh benchmarks/retrain_auto_grid.sh (its header)
    nice python benchmarks/train_auto_grid.py --feature-draws 100 --test TEST.jsonl --weighted FILES
    # the shipped selector on a test table, each trial's choice averaged over its features' noise
    nice python benchmarks/train_auto_grid.py --score-folds V.json --test TEST.jsonl --weighted W.jsonl
        [--score-candidates auto,agrid,...]  # a fit's held-out lists on a test table, no fit: two
    # validations (e.g. fitted with and without a candidate) scored on one best
    nice python benchmarks/train_auto_grid.py --measurements OLD.jsonl --refeature NEW.jsonl
    # a table's features drawn again after a feature is added within the same share (MSEs kept)
    python benchmarks/train_auto_grid.py --measurements OLD.jsonl --add-candidates agrid_fine --added NEW.jsonl
    # a candidate added to GRID_CANDIDATES measured alone on a table's cells and trials (the rest kept)
    python benchmarks/train_auto_grid.py --reuse ... --drop-candidates agrid_fine
    # fit as if a candidate had not been measured (e.g. the list shipped before agrid_fine, fitted again)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import itertools
import json
import math
import multiprocessing
import os
import time

import numpy as np
import scipy.sparse
from train_auto_data import (
    cell_means,
    feature_seed,
    fit_ridge,
    fit_tree,
    log,
    measure_grid,
    merge,
    pick,
    read_rows,
    rule_rank,
    spans,
    summary,
    write_rows,
)

from dprange.data_aware.auto_grid import (
    GRID_CANDIDATES,
    GRID_FEATURES,
    GRID_SELECTOR_FILE,
    WORKLOAD_CANDIDATES,
    AutoDataGrid,
    GridFeatures,
    GridSelector,
    choose_grid,
    grid_feature_matrix,
    workload_boundary,
)
from dprange.data_aware.nonnegative_grid import AutoTowardNonnegative
from dprange.data_aware.spatial_trees import box_sums, summed_area
from dprange.data_aware.steps import laplace_spec
from dprange.workloads import Rectangles, random_rectangles

EPSILONS = (0.1, 1.0)
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data", "dpbench", "2D")
SELECTOR = os.path.join(HERE, "..", "src", "dprange", "data_aware", GRID_SELECTOR_FILE)
DPBENCH = {
    "ADULT-2D": "Adult_2D_256_256.npy",
    "MDSALARY-OVERT": "MDSalary2D_256_256.npy",
    "STROKE": "Stroke_2D_256_256.npy",
    "GOWALLA": "checkin_256_256.npy",
}
SYNTHETIC = (
    "uniform",
    "blobs-3",
    "blobs-30",
    "points-50",
    "diagonal",
    "corner",
    "quadrant",
    "lattice-4",
    "points-200",
    "points-1000",
    "venues",
    *(f"mix-{k}" for k in range(24)),
    *(f"bound-{k}" for k in range(8)),
    *(f"amounts-{k}" for k in range(8)),
)

#: Synthetic shapes never trained on nor used to design a fit (four drawn by hand, 12 random
#: mixtures), scored on the ``--test`` rows as ``unseen``: they gate the pick (a fit more than
#: ``--unseen-to-auto``, by default ``--to-auto``, from ``auto`` on one of their
#: cells does not ship), so their figures are out-of-sample for every fit but not for the pick.
UNSEEN = ("lattice-8", "ring", "points-500", "gradient", *(f"mix-{k}" for k in range(100, 112)))

#: The side of the grid a random mixture (``mixture``) is drawn on; ``distribution`` sums it to
#: each side, as it does the DPBench shapes (256 x 256).
MIXTURE_SIDE = 256


def mixture(seed: int) -> np.ndarray:
    """A random mixture (``mix-<seed>``): the structures real 2-D data show, with their settings
    drawn at random rather than chosen to resemble any one data set (Kotsogiannis et al.'s Pythia,
    SIGMOD 2017, trains its selector on many shapes for this reason).  One or two kinds of
    components, each 1-500 strong (log-uniform) with heavy-tailed weights (Pareto or log-normal):
    point masses, runs along one axis (2-32 cells, geometrically decaying: a value heaped at the
    start of a range of the other), Gaussian clusters (0.5-20 cells wide); placed uniformly or
    around 1-20 towns; in three shapes of ten heaped onto every 2nd, 4th or 8th cell of one or both
    axes (rounded reports); in three of ten over a floor of 0.1-5% of the records spread evenly.
    Unnormalised weights on the 256 x 256 grid."""
    rng = np.random.default_rng(10_000 + seed)
    p = np.zeros((MIXTURE_SIDE, MIXTURE_SIDE))
    kinds = rng.choice(["points", "runs", "clusters"], size=int(rng.integers(1, 3)), replace=False)
    towns = None
    if rng.uniform() < 0.5:
        centres = rng.uniform(0.05, 0.95, (int(rng.integers(1, 21)), 2))
        towns = (centres, float(np.exp(rng.uniform(np.log(0.005), np.log(0.1)))))
    axis = int(rng.integers(0, 2))
    u = np.arange(MIXTURE_SIDE) + 0.5
    for kind in kinds:
        k = int(round(np.exp(rng.uniform(0.0, np.log(500)))))
        if rng.uniform() < 0.5:
            weights = rng.pareto(rng.uniform(0.8, 2.5), k) + 0.05
        else:
            weights = rng.lognormal(0.0, rng.uniform(0.3, 2.0), k)
        if towns is None:
            places = rng.uniform(0.0, 1.0, (k, 2))
        else:
            centres, spread = towns
            town = rng.integers(0, len(centres), k)
            places = np.clip(centres[town] + rng.normal(0.0, spread, (k, 2)), 0.0, np.nextafter(1.0, 0.0))
        cells = (places * MIXTURE_SIDE).astype(int)
        if kind == "points":
            np.add.at(p, (cells[:, 0], cells[:, 1]), weights)
        elif kind == "runs":
            lengths, decay = rng.integers(2, 33, k), rng.uniform(0.5, 1.0)
            for (i, j), weight, length in zip(cells, weights, lengths):
                profile = decay ** np.arange(length)
                along = np.minimum((i if axis == 0 else j) + np.arange(length), MIXTURE_SIDE - 1)
                across = np.full(length, j if axis == 0 else i)
                np.add.at(p, (along, across) if axis == 0 else (across, along), weight * profile / profile.sum())
        else:
            widths = np.exp(rng.uniform(np.log(0.5), np.log(20.0), k))
            for (i, j), weight, width in zip(cells, weights, widths):
                a = np.exp(-0.5 * ((u - i - 0.5) / width) ** 2)
                b = np.exp(-0.5 * ((u - j - 0.5) / width) ** 2)
                p += weight * np.outer(a / a.sum(), b / b.sum())
    if rng.uniform() < 0.3:  # heaped onto every step-th cell of one or both axes
        step, both = int(rng.choice([2, 4, 8])), rng.uniform() < 0.5
        for along in (0, 1) if both else (axis,):
            heaped = np.moveaxis(p, along, 0).reshape(MIXTURE_SIDE // step, step, MIXTURE_SIDE).sum(axis=1)
            spread_out = np.zeros((MIXTURE_SIDE, MIXTURE_SIDE))
            spread_out[::step] = heaped
            p = np.moveaxis(spread_out, 0, along)
    if rng.uniform() < 0.3:  # a floor of a few records everywhere
        p = p / p.sum() + rng.uniform(0.001, 0.05) / p.size
    return p


def heaped_on_bounds(seed: int) -> np.ndarray:
    """A random mixture heaped on the bounds of its attributes (``bound-<seed>``): each
    attribute independently set to its lower or upper bound (a zero, a value clamped to the
    domain) in a share of the records, 30-97% (log-uniform in the share left), for one
    attribute or both, as real cross-tabulations of zero-inflated or clamped values show.  A
    record keeps its other attribute, so a bound's row or column holds that attribute's marginal,
    and a record at both bounds sits in a corner.  The mixture underneath is ``mixture(200 +
    seed)``; unnormalised weights on the 256 x 256 grid."""
    rng = np.random.default_rng(20_000 + seed)
    p = mixture(200 + seed)
    p = p / p.sum()
    both = rng.uniform() < 0.5
    heaped = (0, 1) if both else (int(rng.integers(0, 2)),)
    for axis in heaped:
        share = 1.0 - np.exp(rng.uniform(np.log(0.03), np.log(0.7)))
        edge = 0 if rng.uniform() < 0.75 else MIXTURE_SIDE - 1
        moved = np.zeros_like(p)
        index = [slice(None), slice(None)]
        index[axis] = edge
        moved[tuple(index)] = p.sum(axis=axis)
        p = (1.0 - share) * p + share * moved
    return p


#: Records drawn for each ``amounts-<seed>`` shape (its cells' weights are their counts).
AMOUNTS_RECORDS = 1_000_000


def skewed_amounts(seed: int) -> np.ndarray:
    """Two skewed amounts cross-tabulated (``amounts-<seed>``): the pairs real tables of money,
    hours or counts show (a salary and its overtime, two kinds of income), drawn generically.
    Each amount is log-normal (log standard deviation 0.3-1.5), the two correlated by a Gaussian
    copula (correlation -0.3 to 0.8); each, with chance 1/2, is zero in a share of 30-97% of the
    records (zero-inflated); each axis runs from zero to a public upper bound set loosely, the
    99.9% point of its non-zero values times 1-30 (log-uniform), values above it top-coded into
    the last cell; with chance 0.3 an axis is rounded to every 2nd, 4th or 8th cell.  Weights on
    the 256 x 256 grid: the counts of AMOUNTS_RECORDS records."""
    rng = np.random.default_rng(30_000 + seed)
    rho = rng.uniform(-0.3, 0.8)
    z = rng.multivariate_normal([0.0, 0.0], [[1.0, rho], [rho, 1.0]], size=AMOUNTS_RECORDS)
    cells = []
    for axis in range(2):
        values = np.exp(rng.uniform(0.3, 1.5) * z[:, axis])
        if rng.uniform() < 0.5:
            values[rng.uniform(size=values.size) < rng.uniform(0.3, 0.97)] = 0.0
        bound = np.quantile(values[values > 0], 0.999) * np.exp(rng.uniform(0.0, np.log(30.0)))
        cell = np.minimum((values / bound * MIXTURE_SIDE).astype(int), MIXTURE_SIDE - 1)
        if rng.uniform() < 0.3:
            step = int(rng.choice([2, 4, 8]))
            cell = cell // step * step
        cells.append(cell)
    p = np.zeros((MIXTURE_SIDE, MIXTURE_SIDE))
    np.add.at(p, (cells[0], cells[1]), 1.0)
    return p


def synthetic(name: str, side: int) -> np.ndarray:
    """Public synthetic 2-D shapes (fixed seeds): flat, clustered, point masses, a band, heavy-tailed, a quarter,
    places of Zipf-distributed weight clustered in towns."""
    rng = np.random.default_rng(sum(map(ord, name)))
    u = (np.arange(side) + 0.5) / side
    x, y = np.meshgrid(u, u, indexing="ij")
    if name == "uniform":
        p = np.ones((side, side))
    elif name in ("blobs-3", "blobs-30"):
        k = 3 if name == "blobs-3" else 30
        centres, widths = rng.uniform(0.1, 0.9, (k, 2)), rng.uniform(0.01, 0.08, k)
        weights = rng.exponential(size=k)
        p = sum(
            w * np.exp(-((x - c[0]) ** 2 + (y - c[1]) ** 2) / (2 * s**2)) for c, s, w in zip(centres, widths, weights)
        )
    elif name == "points-50":
        p = np.zeros((side, side))
        cells = rng.choice(side * side, 50, replace=False)
        p.ravel()[cells] = rng.pareto(1.5, 50) + 0.1
    elif name == "diagonal":
        p = np.exp(-0.5 * ((x - y) / 0.03) ** 2) * (1 + x)
    elif name == "corner":
        p = 1.0 / (1.0 + side * x) ** 1.5 / (1.0 + side * y) ** 1.5
    elif name == "quadrant":
        p = np.where((x < 0.5) & (y > 0.5), 1.0 + 0.5 * np.sin(20 * x) * np.cos(13 * y), 0.0)
    elif name == "lattice-4":  # heaped on every 4th cell of each axis, heavier along one axis
        i = np.arange(side)
        p = np.outer(i % 4 == 0, i % 4 == 0) * (1.0 + 2.0 * x)
    elif name == "points-200":  # scattered point masses of log-normal weight
        p = np.zeros((side, side))
        cells = rng.choice(side * side, min(200, side * side // 4), replace=False)
        p.ravel()[cells] = rng.lognormal(0.0, 1.0, cells.size)
    elif name == "points-1000":  # many scattered point masses of like weight
        p = np.zeros((side, side))
        cells = rng.choice(side * side, min(1000, side * side // 4), replace=False)
        p.ravel()[cells] = rng.uniform(0.5, 1.5, cells.size)
    elif name == "venues":  # 3,000 places in 100 towns, both of Zipf's law (weight 1 / rank), like check-ins
        k, towns = 3000, 100
        centres = rng.uniform(0.05, 0.95, (towns, 2))
        town_share = 1.0 / np.arange(1, towns + 1)
        town = rng.choice(towns, k, p=town_share / town_share.sum())
        places = np.clip(centres[town] + rng.normal(0.0, 0.02, (k, 2)), 0.0, np.nextafter(1.0, 0.0))
        p = np.zeros((side, side))
        np.add.at(p, ((places[:, 0] * side).astype(int), (places[:, 1] * side).astype(int)), 1.0 / np.arange(1, k + 1))
    elif name == "lattice-8":  # reports heaped on every 8th cell of each axis (rounded coordinates)
        i = np.arange(side)
        p = np.outer(i % 8 == 0, i % 8 == 0) * (1.0 + x + y)
    elif name == "ring":
        p = np.exp(-0.5 * ((np.hypot(x - 0.5, y - 0.45) - 0.3) / 0.02) ** 2)
    elif name == "points-500":
        p = np.zeros((side, side))
        cells = rng.choice(side * side, min(500, side * side // 2), replace=False)
        p.ravel()[cells] = rng.exponential(size=cells.size)
    elif name == "gradient":
        p = 0.2 + x + 2.0 * y
    else:
        raise ValueError(name)
    p = np.maximum(np.asarray(p, dtype=float), 0.0)
    return p / p.sum()


def distribution(name: str, side: int) -> np.ndarray:
    """The shape ``name`` on a side x side grid, summing 256 x 256 ones (DPBench's, the random
    mixtures) to ``side``; the hand-drawn synthetic shapes are drawn at ``side`` itself."""
    if name in DPBENCH:
        counts = np.load(os.path.join(DATA, DPBENCH[name])).astype(float)
    elif name.startswith("mix-"):
        counts = mixture(int(name[4:]))
    elif name.startswith("bound-"):
        counts = heaped_on_bounds(int(name[6:]))
    elif name.startswith("amounts-"):
        counts = skewed_amounts(int(name[8:]))
    else:
        return synthetic(name, side)
    k = counts.shape[0] // side
    p = counts.reshape(side, k, side, k).sum(axis=(1, 3))
    return p / p.sum()


def sample(p: np.ndarray, scale: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).multinomial(scale, p.ravel()).reshape(p.shape).astype(np.int64)


def rectangles_mse(estimate, counts, lows, highs) -> float:
    got = box_sums(summed_area(np.asarray(estimate, dtype=float)), lows, highs)
    true = box_sums(summed_area(counts.astype(float)), lows, highs)
    return float(np.mean((got - true) ** 2))


def auto_mse(shape, epsilon: float, lows, highs) -> float:
    """auto's exact expected MSE on the rectangles, chosen for them (as AutoDataGrid chooses it
    for the release's workload, which release_grid passes); data-independent: any counts give it."""
    mech = AutoDataGrid(workload=Rectangles(shape, lows, highs))
    rel = mech.candidate("auto", shape, epsilon).release(np.zeros(shape, dtype=np.int64), epsilon, rng=0)
    return float(np.mean(rel.rectangle(lows, highs).stderr ** 2))


#: The evaluation workloads, 2000 rectangles each (seed 3): random rectangles (two uniform ends
#: per axis: every rectangle alike, mean side n/3), prefix rectangles (from the origin to a
#: uniform random cell) and sized rectangles (a uniform size per axis placed uniformly: DPBench's
#: kind, mean side n/2, on which a data-aware partition's error grows faster than ``auto``'s).
#: The ``auto`` branch is chosen for each workload's rectangles (auto_mse), as a release that
#: passes its workload runs it: on prefix rectangles that halves its error (0.45-0.58x the
#: all-rectangles choice's), on the sized ones 0.89-0.91x.
WORKLOADS = ("random-rectangles", "prefix-rectangles", "sized-rectangles")


@functools.cache
def evaluation_boundary(side: int, workload: str) -> float:
    """The boundary (workload_boundary) of the evaluation rectangles of a side x side grid:
    public, the selector's input for every row of that side and workload."""
    return workload_boundary(Rectangles((side, side), *evaluation_rectangles(side, workload)), (side, side))


def evaluation_rectangles(side: int, workload: str) -> tuple[np.ndarray, np.ndarray]:
    rects = random_rectangles((side, side), 2000, rng=3)
    if workload == "random-rectangles":
        return rects.lows, rects.highs
    if workload == "sized-rectangles":
        rng = np.random.default_rng(3)
        sizes = rng.integers(1, side + 1, (2000, 2))
        lows = rng.integers(0, side - sizes + 1)
        return lows, lows + sizes - 1
    corners = np.random.default_rng(3).integers(0, side, (2000, 2))
    return np.zeros_like(corners), corners


def measure_cell(
    name, side, scale, epsilon, trials, cache, first_trial=0, workloads=WORKLOADS, candidates=GRID_CANDIDATES
) -> list[dict]:
    """One row per (trial, workload of ``workloads``): AutoDataGrid's noisy features and the MSE of
    every candidate of ``candidates`` (the same releases answer every workload); trials
    ``first_trial`` onwards.  Each candidate's release draws from its own seed (1000 + trial), so
    measuring some candidates alone gives their figures in the whole table's (--add-candidates)."""
    shape = (side, side)
    p = distribution(name, side)
    mech = AutoDataGrid()
    rest = mech.shares(epsilon)[-1]
    for workload in workloads:
        if (side, workload) not in cache:
            cache[(side, workload)] = evaluation_rectangles(side, workload)
        if "auto" in candidates and (side, epsilon, workload) not in cache:
            cache[(side, epsilon, workload)] = auto_mse(shape, rest, *cache[(side, workload)])
    shared = [c for c in candidates if c != "auto" and c not in WORKLOAD_CANDIDATES]
    # built for each workload's rectangles, as auto-data builds them for the release's
    per_workload = [c for c in WORKLOAD_CANDIDATES if c in candidates]
    rows = []
    for t in range(first_trial, first_trial + trials):
        counts, features = trial_features(mech, name, p, scale, epsilon, t)
        released = {c: mech.candidate(c, shape, rest).release(counts, rest, rng=1000 + t) for c in shared}
        for workload in workloads:
            errors = {"auto": cache[(side, epsilon, workload)]} if "auto" in candidates else {}
            for c in per_workload:
                if (side, rest, workload, c) not in cache:  # cost: auto's design chosen once per setting
                    rectangles = Rectangles(shape, *cache[(side, workload)])
                    cache[(side, rest, workload, c)] = AutoDataGrid(workload=rectangles).candidate(c, shape, rest)
                released[c] = cache[(side, rest, workload, c)].release(counts, rest, rng=1000 + t)
            errors.update({c: rectangles_mse(r.counts, counts, *cache[(side, workload)]) for c, r in released.items()})
            key = dict(shape=name, n=side * side, scale=scale, epsilon=epsilon, workload=workload)
            rows.append({**key, "trial": t, "features": features, "mse": errors})
    return rows


def added_cell(name, side, scale, epsilon, trials, first_trial, candidates) -> list[dict]:
    """measure_cell of ``candidates`` alone, with this process's CELL_CACHE (picklable)."""
    return measure_cell(name, side, scale, epsilon, trials, CELL_CACHE, first_trial, candidates=candidates)


def add_candidates(rows, candidates, path, log, jobs=1) -> list[dict]:
    """The table ``rows`` with the MSEs of ``candidates`` on its every cell and trial added (the
    same samples, feature noise and release seeds as a measuring run; train_auto_data.merge checks
    the features), written to ``path`` in the table's order: a candidate added to GRID_CANDIDATES
    joins the tables without measuring the others again.  The cells are grouped by their trials
    (a test table holds the DPBench shapes' trials 100-109 and the unseen shapes' 100-102), each
    group a product of sides, shapes, scales and epsilons, as measure writes a table; the fresh
    rows go to ``path``.fresh first (measure_grid's file, in ``jobs`` processes)."""
    trials_of: dict = {}
    for r in rows:
        trials_of.setdefault((r["shape"], r["n"], r["scale"], r["epsilon"]), set()).add(r["trial"])
    groups: dict = {}
    for cell, trials in trials_of.items():
        first, count = min(trials), len(trials)
        if sorted(trials) != list(range(first, first + count)):
            raise SystemExit(f"{cell}: trials {sorted(trials)} are not consecutive; measure the table again")
        groups.setdefault((first, count), []).append(cell)
    fresh_path = path + ".fresh"
    open(fresh_path, "w").close()
    fresh: list[dict] = []
    for (first, count), cells in groups.items():
        shapes = list(dict.fromkeys(c[0] for c in cells))
        sides, scales, epsilons = (sorted({c[k] for c in cells}) for k in (1, 2, 3))
        if len(cells) != len(shapes) * len(sides) * len(scales) * len(epsilons):
            raise SystemExit(f"the cells of trials {first}-{first + count - 1} are not a product of their settings")
        fresh += measure_grid(
            functools.partial(added_cell, trials=count, first_trial=first, candidates=tuple(candidates)),
            lambda name, side, scale, epsilon: f"added {name} {side}x{side} scale={scale:g} eps={epsilon}",
            ([int(round(n**0.5)) for n in sides], shapes, scales, epsilons),
            fresh_path,
            log,
            jobs,
            mode="a",
        )
    merged = merge(rows, fresh, log)
    write_rows(path, merged)
    os.remove(fresh_path)
    return merged


def trial_features(mech, name, p, scale, epsilon, trial) -> tuple[np.ndarray, list[float]]:
    """(a trial's sample of the distribution ``p``, the features a table row stores for it:
    ``[total, nonempty, top, offpeak, epsilon left, bound, corner]``, drawn with the trial's
    feature seed (train_auto_data.feature_seed: its own per cell and trial))."""
    counts = sample(p, scale, seed=trial)
    seed = feature_seed(name, p.size, scale, epsilon, trial)
    total, nonempty, top, offpeak, bound, corner, _ = mech.features(counts, epsilon, rng=seed)
    return counts, [total, nonempty, top, offpeak, mech.shares(epsilon)[-1], bound, corner]


def refeature(rows, log) -> list[dict]:
    """The rows with their features drawn again by the current feature steps (trial_features, as
    measure_cell draws them), their MSEs kept: valid while the epsilon left after the features,
    which the candidates ran with, is unchanged (checked), e.g. after a feature is added within
    the same feature share."""
    mech = AutoDataGrid()
    drawn: dict = {}
    shape, p = None, None
    out = []
    for r in rows:
        key = (r["shape"], r["n"], r["scale"], r["epsilon"], r["trial"])
        if key not in drawn:
            if shape != (r["shape"], r["n"]):  # rows come grouped by shape and side
                shape, side = (r["shape"], r["n"]), int(round(r["n"] ** 0.5))
                p = distribution(r["shape"], side)
                log(f"refeature {r['shape']} {side} x {side}")
            drawn[key] = trial_features(mech, r["shape"], p, r["scale"], r["epsilon"], r["trial"])[1]
            if not math.isclose(drawn[key][4], r["features"][4], rel_tol=1e-12):
                raise SystemExit(
                    f"{key}: the epsilon left moved ({r['features'][4]} -> {drawn[key][4]}); measure again"
                )
        out.append({**r, "features": drawn[key]})
    return out


def measure_weighted(shapes, sides, scales, trials, path, log, first_trial=0, jobs=1) -> None:
    """Rows of ``auto_toward_nonnegative``'s MSE (auto-data's ``auto`` branch with
    ``refit='weighted'``) at the epsilon left after the features, built for each workload's
    rectangles, release seed 1000 + trial (the measurements of ``auto``'s and
    ``auto_nonnegative``'s rows of the same trial), appended to ``path`` cell by cell as
    measure_grid writes a table (in ``jobs`` processes, in the serial order): what ``--weighted``
    scores the folds' ``auto`` choices with.  Five refits a release: seconds a grid at 256 x 256."""
    measure_grid(
        functools.partial(weighted_rows, trials=range(first_trial, first_trial + trials)),
        lambda name, side, scale, epsilon: f"weighted {name} {side} x {side} scale={scale:g} eps={epsilon}",
        (sides, shapes, scales, EPSILONS),
        path,
        log,
        jobs,
        mode="a",
    )


def weighted_rows(name, side, scale, epsilon, trials, workloads=WORKLOADS) -> list[dict]:
    """measure_weighted's rows of one cell for the trials given (sample seed k, release seed
    1000 + k), on the workloads given."""
    shape = (side, side)
    rest = AutoDataGrid().shares(epsilon)[-1]
    rects = {w: evaluation_rectangles(side, w) for w in workloads}
    mechs = {w: AutoTowardNonnegative(workload=Rectangles(shape, *rects[w])) for w in workloads}
    p = distribution(name, side)
    rows = []
    for t in trials:
        counts = sample(p, scale, seed=t)
        for w in workloads:
            released = mechs[w].release(counts, rest, rng=1000 + t)  # cost: five refits at most
            key = dict(shape=name, n=side * side, scale=scale, epsilon=epsilon, workload=w)
            mse = rectangles_mse(released.counts, counts, *rects[w])
            rows.append({**key, "trial": t, "mse": mse, "weight": released.parameters["weight"]})
    return rows


def trial_key(row: dict) -> tuple:
    """A row's cell and trial: what a measure_weighted row is matched to a table's row by."""
    return (row["shape"], row["n"], row["scale"], row["epsilon"], row["workload"], row["trial"])


def load_weighted(paths: str, keys_with_trials) -> np.ndarray:
    """Per row of a test table (keys with trials), ``auto_toward_nonnegative``'s MSE from the files
    of measure_weighted (comma-separated), NaN where none was measured."""
    found: dict = {}
    for path in filter(None, paths.split(",")):
        found.update((trial_key(r), r["mse"]) for r in read_rows(path))
    return np.array([found.get(k, np.nan) for k in keys_with_trials])


#: The column ``--weighted`` scores the folds' ``auto`` choices with.
WEIGHTED = "auto_toward_nonnegative"


def with_weighted_auto(rows, paths: str, log) -> list[dict]:
    """``--auto-branch weighted``: the rows where auto_toward_nonnegative was measured (the files
    of measure_weighted, comma-separated), ``auto``'s MSE replaced by its, as auto-data's ``auto``
    branch releases it with ``refit='weighted'``; the others dropped (logged)."""
    found = load_weighted(paths, [trial_key(r) for r in rows])
    kept = [{**r, "mse": {**r["mse"], "auto": float(m)}} for r, m in zip(rows, found) if not np.isnan(m)]
    if len(kept) < len(rows):
        log(f"--auto-branch weighted: {len(rows) - len(kept)} of {len(rows)} rows without its measurement dropped")
    return kept


def with_weighted_column(per_row, weighted) -> np.ndarray:
    """``per_row`` (the candidates' MSEs, then ``auto``'s with the whole epsilon) with
    auto_toward_nonnegative's MSE (``weighted``) inserted before the last column: the columns of
    ``(*candidates, WEIGHTED, "auto-whole")``, as held_out_cell reads them."""
    return np.column_stack([per_row[:, :-1], weighted, per_row[:, -1]])


def weighted_cell(key, mine, per_row, weighted, candidates) -> dict | None:
    """held_out_cell on the cell's rows where auto_toward_nonnegative was measured (``weighted``
    per row, NaN elsewhere), ``auto``'s releases (column 0) replaced by its, which also joins the
    best candidate; None where no row of the cell has it."""
    mine = [(i, c) for i, c in mine if not np.isnan(weighted[i])]
    if not mine:
        return None
    moved = [(i, weighted_index(c, candidates)) for i, c in mine]
    return held_out_cell(key, moved, with_weighted_column(per_row, weighted), (*candidates, WEIGHTED))


def weighted_index(chosen: int, candidates) -> int:
    """A choice's column among with_weighted_column's: ``auto`` (0) is the weighted branch,
    ``auto`` with the whole epsilon (``len(candidates)``) moves one on, the others stay."""
    return len(candidates) if chosen == 0 else chosen + (chosen == len(candidates))


#: measure_cell's cache of rectangles, ``auto``'s exact errors and the workload candidates' designs,
#: one per process (public values only: shared by every cell of a side and epsilon).
CELL_CACHE: dict = {}


def measured_cell(name, side, scale, epsilon, trials, first_trial) -> list[dict]:
    """measure_cell with this process's CELL_CACHE (picklable, for measure_grid's processes)."""
    return measure_cell(name, side, scale, epsilon, trials, CELL_CACHE, first_trial)


def measure(shapes, sides, scales, trials, path, log, first_trial=0, jobs=1) -> list[dict]:
    return measure_grid(
        functools.partial(measured_cell, trials=trials, first_trial=first_trial),
        lambda name, side, scale, epsilon: f"{name} {side}x{side} scale={scale:g} eps={epsilon}",
        (sides, shapes, scales, EPSILONS),
        path,
        log,
        jobs,
    )


def setting_oracle(train, test, candidates) -> dict | None:
    """The floor the held-out figures sit on: per DPBench cell of the test table that the training
    table also has, the candidate of least mean MSE over the training trials of that very cell
    (the same shape and setting: no selector knows as much), scored on the test trials as
    held_out_cell scores a fold's choices.  ``train`` and ``test``: (keys, per-row MSEs) of table.
    Data-aware releases at a low signal vary from trial to trial by 10x and more, so even this
    choice has a worst regret far above 1 on a few trials; None where no cell is shared."""
    rows: dict = {}
    for i, key in enumerate(train[0]):
        rows.setdefault(key, []).append(i)
    picked: dict = {}
    for i, key in enumerate(test[0]):
        if key[0] in DPBENCH and key in rows:
            picked.setdefault(key, []).append(i)
    if not picked:
        return None
    cells = []
    for key, mine in sorted(picked.items()):
        choice = int(np.argmin(train[1][rows[key]].mean(axis=0)))
        cells.append(held_out_cell(key, [(i, choice) for i in mine], test[1], candidates))
    return summary(cells)


def split_half_oracle(keys, per_row, weighted, candidates) -> dict | None:
    """A floor that knows the very trials' distribution: per DPBench cell of the test table, the
    candidate (``auto_toward_nonnegative`` among them, as ``weighted_cell`` adds it, and ``auto``
    with the whole epsilon) of least mean MSE over the first half of its trials where the branch
    was measured, scored on the second half as held_out_cell scores a fold's choices, and the other
    way round: two half-cells a cell.  Where even this choice has a regret above 2, the trials'
    spread, not the selector, sets the figure; where it is near 1 and a selector's is above 2, the
    selector chose wrong.  ``weighted``: per test row, NaN where not measured; None where no
    cell has four such rows."""
    rows: dict = {}
    for i, key in enumerate(keys):
        if key[0] in DPBENCH and not np.isnan(weighted[i]):
            rows.setdefault(key, []).append(i)
    extended = with_weighted_column(per_row, weighted)
    names = (*candidates, WEIGHTED)
    cells = []
    for key, mine in sorted(rows.items()):
        if len(mine) < 4:
            continue
        halves = (mine[: len(mine) // 2], mine[len(mine) // 2 :])
        for picking, scored in (halves, halves[::-1]):
            choice = int(np.argmin(extended[picking].mean(axis=0)))
            cells.append(held_out_cell(key, [(i, choice) for i in scored], extended, names))
    if not cells:
        return None
    return {**summary(cells), "cells_above_2": sum(c["regret"] > 2 for c in cells)}


# ----------------------------------------------------------------------------- fits
def exact_features(counts) -> np.ndarray:
    """The six features of a sampled grid of counts before their noise, in the order of
    AutoDataGrid's steps: the total, then GridFeatures.exact_steps."""
    return np.array([counts.sum(), *(value for _, value, _ in GridFeatures().exact_steps(counts))], dtype=float)


def feature_noise_cells(selector, rows, weighted, draws: int, seed: int = 0) -> list[dict]:
    """Per cell of a test table (its rows where auto_toward_nonnegative was measured:
    ``weighted``, NaN elsewhere), weighted_cell's figures (``auto``'s releases scored as
    auto_toward_nonnegative's) with the choice averaged over the features' noise: each trial's exact features (its
    sample, as trial_features draws it) with ``draws`` fresh noise draws at the current shares
    (add/remove), the selector choosing on each, the chosen candidates' MSEs averaged per trial.
    A cell of three trials scored on one draw of the features each is partly the luck of those
    draws; this leaves the trials' own spread alone and removes that luck."""
    mech = AutoDataGrid()
    names = (*selector.candidates, WEIGHTED, "auto-whole")
    constant = selector.constant() == "auto"  # buys no features: auto with the whole epsilon
    source = np.random.default_rng(seed)
    cells: dict = {}
    for r, w in zip(rows, weighted):
        if not np.isnan(w):
            cells.setdefault((r["shape"], r["n"], r["scale"], r["epsilon"], r["workload"]), []).append((r, w))
    out, shapes = [], {}
    for key, members in sorted(cells.items()):
        shape, n, scale, epsilon, workload = key
        side = int(round(n**0.5))
        if (shape, side) not in shapes:
            shapes = {(shape, side): distribution(shape, side)}  # cells come sorted by shape
        boundary = evaluation_boundary(side, workload)
        *parts, rest = mech.shares(epsilon)
        per, got = [], []
        counts_chosen = np.zeros(len(names), dtype=np.int64)
        for r, w in members:
            exact = exact_features(sample(shapes[shape, side], scale, seed=r["trial"]))
            noisy = [v + laplace_spec(e, 1).sample((draws,), source) for v, e in zip(exact, parts)]
            if constant:
                chosen = np.full(draws, len(names) - 1)
            else:
                chosen = selector.choose_index(grid_feature_matrix(*noisy, n, rest, boundary))
                chosen = np.where(chosen == 0, len(names) - 2, chosen)  # auto: the weighted branch
            mse = np.array([*(r["mse"][c] for c in selector.candidates), w, whole_auto(n, epsilon, workload)])
            per.append(mse)
            got.append(mse[chosen].mean())
            counts_chosen += np.bincount(chosen, minlength=len(names))
        means = np.mean(per, axis=0)
        figures = {"regret": float(np.mean(got) / means.min()), "to_auto": float(np.mean(got) / means[-1])}
        chosen_names = {c: int(k) for c, k in zip(names, counts_chosen) if k}
        out.append(
            {
                **dict(zip(("shape", "n", "scale", "epsilon", "workload"), key)),
                **figures,
                "best": names[int(np.argmin(means))],
                "choices": chosen_names,
            }
        )
    return out


def winners(rows) -> tuple[str, ...]:
    """auto and the candidates that are the best (least mean MSE) in at least one training cell,
    among those the table measured in every row (a table from before a candidate was added lacks
    its column until --add-candidates measures it)."""
    measured = [c for c in GRID_CANDIDATES if all(c in r["mse"] for r in rows)]
    cells: dict = {}
    for r in rows:
        cells.setdefault((r["shape"], r["n"], r["scale"], r["epsilon"]), []).append(r)
    won = {min(measured, key=lambda c: np.mean([r["mse"][c] for r in rs])) for rs in cells.values()}
    return tuple(c for c in measured if c == "auto" or c in won)


def whole_auto(n: int, epsilon: float, workload: str) -> float:
    """auto's exact MSE with the whole epsilon on a square grid of n cells: what a constant
    selector naming it releases (no features bought), and what a user who skips auto-data gets."""
    side = int(round(n**0.5))
    return auto_mse((side, side), epsilon, *evaluation_rectangles(side, workload))


def table(rows, candidates):
    """(features X, log-ratio targets R (rows x candidates, auto = 0), cell keys, per-row MSEs:
    the candidates' with the epsilon left after the features, then, last, ``auto``'s with the
    whole epsilon)."""
    keys = [(r["shape"], r["n"], r["scale"], r["epsilon"], r["workload"]) for r in rows]
    cells: dict = {}
    for k, r in zip(keys, rows):
        cells.setdefault(k, []).append(r)
    mean = {k: {c: np.mean([r["mse"][c] for r in rs]) for c in candidates} for k, rs in cells.items()}
    f = np.array([r["features"] for r in rows])
    sides = [int(round(r["n"] ** 0.5)) for r in rows]
    b = np.array([evaluation_boundary(side, r["workload"]) for side, r in zip(sides, rows)])
    if f.shape[1] < 7:
        raise SystemExit(
            "a table row lacks the corner mass (features of GRID_FORMAT 5 or before): run --refeature on it"
        )
    cells = np.array([r["n"] for r in rows])
    x = grid_feature_matrix(f[:, 0], f[:, 1], f[:, 2], f[:, 3], f[:, 5], f[:, 6], cells, f[:, 4], b)
    ratio = np.array([[np.log(mean[k][c] / mean[k]["auto"]) for c in candidates] for k in keys])
    settings = {(r["n"], r["epsilon"], r["workload"]) for r in rows}
    whole = {s: whole_auto(*s) for s in settings}
    per_row = np.array([[r["mse"][c] for c in candidates] + [whole[r["n"], r["epsilon"], r["workload"]]] for r in rows])
    return x, ratio, keys, per_row


#: The rules fit's grid, a decision list: log_signal_per_cell at or below ``s`` runs
#: ``alternative``; else log_signal_per_cell at or below ``s1`` on a grid of at most 2^``c1``
#: cells runs ``band``; else log_signal_per_cell at or below ``s3`` on at most 2^``c3`` cells
#: with concentration at least ``q1`` runs ``band2``; else log_signal_per_cell at or below ``s4``
#: with offpeak_share at least ``o`` runs ``band3``; else log_sparsity at or below ``z`` with
#: log_signal_per_cell at least ``s2``, concentration at least ``q`` and at least 2^``c2``
#: cells runs ``alternative``; else auto (-9: never).  The concentration (the share of the
#: records in the 16 heaviest cells) tells a few heavy point masses, which a data-aware
#: partition isolates, from hundreds of scattered ones or a lattice, which it cannot; the
#: sparse branch's grid size keeps it off small grids, where the non-empty count's noise makes a
#: dense grid look sparse.  The off-peak share (the records outside the heaviest cell of their
#: 2 x 2 block) tells mass spread over neighbouring cells, which a grid that spreads its counts
#: uniformly within a cell places well, from isolated point masses and lattices, which it
#: misplaces by the width of a cell.
GRID_RULE = {
    "s": (-9.0, -2.0, -1.5, -1.25, -1.0, -0.75, -0.5),
    "s1": (-9.0, -0.5, 0.0, 0.5, 1.0),
    "c1": (10.0, 12.0, 14.0),
    "band": ("agrid", "dawa_hilbert"),
    "z": (-9.0, -3.0, -2.5, -2.0, -1.5),
    "s2": (-9.0, -1.0, 0.0, 1.0, 2.0, 3.0),
    "alternative": ("dawa_hilbert", "agrid"),
    "q": (0.0, 0.5, 0.7),
    "c2": (0.0, 13.0, 14.0),
    "s3": (-9.0, 0.0, 0.5, 1.0),
    "c3": (10.0, 12.0),
    "q1": (0.7, 0.9),
    "band2": ("agrid",),
    "s4": (-9.0, 0.0, 0.5),
    "o": (0.4, 0.5),
    "band3": ("agrid",),
}

#: The peak branch, between the fourth branch and the sparse one: log_signal_per_cell at least
#: ``s5`` with concentration at least ``q5`` runs ``band4`` (9: never).  At a high signal on a
#: grid whose 16 heaviest cells hold nearly every record (ADULT-2D, MDSALARY-OVERT, lattices of
#: few points), a data-aware partition leaves the empty cells out of the measurement, while the
#: sparse branch's grid size keeps it off the small grids where this happens.  Fitted after the
#: list above, with that list fixed (fit_rules: a second stage over these few settings).
PEAK_RULE = {
    "s5": (9.0, 1.5, 2.0, 2.5, 3.0),
    "q5": (0.9, 0.95),
    "band4": ("dawa_hilbert",),
}

#: The towns branch, after the peak branch and before the sparse one: log_signal_per_cell at
#: most ``s6`` on at least 2^``c6`` cells with concentration at least ``q6``, offpeak_share
#: at least ``o6`` and bound_share at most ``h6`` runs ``band5`` (-9: never).  Places of
#: Zipf-distributed weight clustered in towns (check-ins: GOWALLA, ``venues``) leave most of a
#: large grid empty at a low signal, and a data-aware partition measures the empty stretches as
#: a few buckets; the off-peak share keeps it off lattices and isolated masses, whose cells have
#: no occupied neighbours, and the bound share off records heaped on the grid's bounds
#: (ADULT-2D, MDSALARY-OVERT), which a Hilbert-ordered partition cuts into distant pieces.
#: Fitted after the peak branch, with everything before it fixed (a third stage).
TOWNS_RULE = {
    "s6": (-9.0, -0.5, 0.0, 0.5),
    "c6": (14.0,),
    "q6": (0.2, 0.3),
    "o6": (0.05, 0.1),
    "h6": (9.0, 0.3, 0.6),
    "band5": ("dawa_hilbert",),
}

#: The small-grid branch, after the towns branch and before the sparse one:
#: log_signal_per_cell at most ``s7`` on at most 2^``c7`` cells with offpeak_share at least
#: ``o7`` runs ``band6`` (-9: never).  On 64 x 64 grids at a low signal a data-aware grid or
#: partition beats ``auto`` by 2-7x on prefix rectangles where the records have occupied
#: neighbours (STROKE, GOWALLA), and loses on lattices and isolated masses, whose off-peak share
#: is 0: at that signal its noise has a scale of 0.06-0.08, so the bound stays several scales above
#: 0.  Fitted after the towns branch, with everything before it fixed (a fourth stage).
SMALL_RULE = {
    "s7": (-9.0, -0.5, 0.0),
    "c7": (12.0,),
    "o7": (0.2, 0.3),
    "band6": ("agrid", "dawa_hilbert", "agrid_fine"),
}

#: The concentrated branch, where the list above runs ``auto``: the workload's boundary at most
#: ``b8`` (workload_boundary: prefix rectangles about 1, all rectangles 4/3, DPBench's sized ones
#: 1.9), log_signal_per_cell at most ``s8`` on at least 2^``c8`` cells with concentration at least
#: ``q8`` and offpeak_share at most ``o8`` runs ``band7`` (-9: never).  A few heavy point masses on
#: a large grid (ADULT-2D) make a data-aware partition win on rectangles of short boundary and lose
#: on large ones, whose every side cuts its buckets: the workload tells the two apart where the
#: data cannot.  Fitted after the small-grid branch, with everything before it fixed (a fifth stage).
CONCENTRATED_RULE = {
    "s8": (-9.0, 0.5, 1.0, 1.5),
    "c8": (12.0, 14.0),
    "q8": (0.4, 0.5),
    "o8": (0.3, 0.5),
    "b8": (1.1, 1.5),
    "band7": ("dawa_hilbert",),
}

#: The clustered branch, where the lists above run ``auto``: the workload's boundary at most
#: ``b9``, log_signal_per_cell at most ``s9`` on at least 2^``c9`` cells with concentration at
#: least ``q9`` and offpeak_share between ``o9`` and ``u9`` runs ``band8`` (-9: never).  Check-ins
#: (GOWALLA) at a low signal: a data-aware partition beats ``auto`` by 2-4x on prefix rectangles
#: and not on larger ones; the off-peak bounds keep it off isolated masses (near 0) and smooth
#: clusters (above 0.5), where ``agrid`` or ``auto`` win.  Fitted last (a sixth stage).
CLUSTERED_RULE = {
    "s9": (-9.0, -0.5, 0.0, 0.5, 1.0),
    "c9": (12.0, 14.0),
    "q9": (0.2, 0.3),
    "o9": (0.15, 0.2),
    "u9": (0.4, 0.45),
    "b9": (1.1, 1.5),
    "band8": ("dawa_hilbert",),
}

#: The non-negative branch, where the lists above run ``auto``: concentration at least ``q10``,
#: the workload's boundary at least ``b10`` (1.2: any workload but prefix rectangles; 1.5: sized
#: ones; prefix rectangles are left out, where held out on 32 x 32 and 64 x 64 DPBench grids it
#: lost to ``auto`` by up to 1.8x),
#: log_signal_per_cell from ``s10`` to ``t10`` and log_signal_per_occupied at most ``p10`` runs
#: ``band9`` (9: never).  ``auto``'s measurements refitted over non-negative grids
#: (``auto_nonnegative``) drop the noise of the empty cells: where a few cells hold most records
#: at a modest signal, large rectangles, which sum the noise of many empty cells, have a tenth of
#: ``auto``'s error or less (ADULT-2D); at a high signal per occupied cell the noise moved up to
#: zero biases them instead (docs/data-aware.md).  Fitted last (a seventh stage).
NONNEGATIVE_RULE = {
    "q10": (9.0, 0.7, 0.8, 0.85, 0.9, 0.95),
    "b10": (1.2, 1.5),
    "s10": (-1.5, -1.0, -0.5),
    "t10": (0.0, 0.5, 1.0, 2.0),
    "p10": (9.0, 2.0, 3.0),
    "band9": ("auto_nonnegative",),
}

#: The bound branch, over every other choice: bound_share at least ``e11`` (9: never), the
#: workload's boundary at least ``b11``, log_signal (log10 N epsilon) at least ``s11`` and
#: log_signal_per_cell at most ``t11`` runs ``band10``.  The bound mass's noise has a standard
#: deviation of about 170 / (N epsilon) in the share at the default feature share (a sixth of
#: it), so ``s11`` keeps the branch to where the share can be read (0.17 at N epsilon 10^3).  Records heaped on
#: a bound of one attribute or both (zero-inflated or clamped values: ADULT-2D,
#: MDSALARY-OVERT, the ``bound-<k>`` shapes) lie where few rectangles of a random or sized
#: workload reach, so the non-negative refit's error, which gathers on the heavy cells, reaches
#: few answers, while a Hilbert-ordered partition cuts the grid's edges into
#: distant pieces; the other features cannot tell these grids from mixtures of a few heavy cells
#: inside the grid, where DAWA wins instead.  Fitted after the list (an eighth stage).
BOUND_RULE = {
    "e11": (9.0, 0.6, 0.75, 0.9),
    "b11": (1.2, 1.5),
    "s11": (2.5, 3.0, 3.5),
    "t11": (-0.5, 0.0),
    "band10": ("auto_nonnegative",),
}

#: The corner branch, over every other choice: corner_share at least ``e12`` (9: never), the
#: workload's boundary at most ``b12`` (prefix rectangles: about 1), log_signal at least
#: ``s12``, log_signal_per_cell from ``l12`` to ``t12`` on at most 2^``c12`` cells runs
#: ``band11``.  Records heaped near the lower bounds of both attributes (ADULT-2D's zeros,
#: MDSALARY-OVERT's) fill one coarse cell of an adaptive grid, which cuts it finely and leaves
#: the empty rest coarse; every prefix rectangle holds that cell whole, so its answers carry
#: little noise and no error from spreading counts within a cell, where ``auto``'s carry the
#: noise of every cell they cover.  A heap along a whole row or column (the ``bound-<k>``
#: shapes) has little mass in the corner block, and there the adaptive grid's coarse cells cut
#: across it.  Fitted after the bound branch, on every row (a ninth stage).
CORNER_RULE = {
    "e12": (9.0, 0.3, 0.5, 0.7),
    "b12": (1.1,),
    "s12": (2.5, 3.0, 3.5),
    "l12": (-1.5, -1.0, -0.7, -0.5),
    "t12": (0.0, 0.5, 1.0, 2.0),
    "c12": (12.0, 14.0, 16.0),
    "band11": ("agrid", "agrid_fine"),
}

#: The corner spread branch, over every other choice but the corner branch: corner_share at
#: least ``e13`` (9: never), offpeak_share at least ``o13``, log_signal at least ``s13`` and
#: log_signal_per_cell at most ``t13`` runs ``band12``.  Records heaped in the corner block but
#: spread over neighbouring cells there (two small amounts beside their zeros: MDSALARY-OVERT,
#: ``amounts-0``, ``amounts-4``), on a grid with few records per cell: the non-negative refit of the
#: bound branch keeps the noise of every occupied cell and spreads the coarse measurements' noise
#: over the empty ones, where a partition that adapts to the data measures the block in a few
#: pieces.  Records on a few cells (ADULT-2D) have little off-peak mass.  Fitted last, on every
#: row (a tenth stage).
SPREAD_RULE = {
    "e13": (9.0, 0.5, 0.7, 0.9, 0.95),
    "o13": (0.1, 0.2, 0.3, 0.4),
    "s13": (2.5, 3.0, 3.5, 4.0),
    "t13": (0.0, -0.3, -0.5, -0.7, -1.0),
    "band12": ("agrid", "kd_tree", "agrid_fine"),
}

#: The corner branch on large grids, fitted after the corner spread branch, on every row (an
#: eleventh stage): where the corner branch runs on a grid of at least 2^``c14`` cells (99:
#: never), ``band13`` instead of ``band11``.  An adaptive grid cuts each first-level cell into
#: about sqrt(N' eps2 / c2) pieces per axis (N' its noisy count); where the corner branch runs,
#: the second level twice as fine (``agrid_fine``) has less error than AGrid's on 128 x 128
#: grids and more on 32 x 32 and 64 x 64 ones (docs/data-aware.md, "The corner branch on large
#: grids").
LARGE_CORNER_RULE = {
    "c14": (99.0, 14.0, 12.0),
    "band13": ("agrid_fine",),
}

#: The support branch, fitted after the large-corner stage, on every row (a twelfth stage):
#: where the list runs ``auto``, ``auto_nonnegative`` (the refits of ``auto``'s measurements) or
#: DAWA (support_family), log_signal_per_occupied at least ``p15`` (99: never),
#: log_signal_per_cell at least ``s15``, the workload's boundary at least ``b15``, on at most
#: 2^``c15`` cells, log_sparsity at most ``z15``, concentration at least ``q15`` and offpeak_share
#: at most ``o15``, runs ``band14``.  ``auto_support`` holds at zero the dyadic blocks its least
#: squares finds empty: where the occupied cells are few, hold many records per unit of noise and
#: hold most of them in a few heavy cells, that removes the noise of the empty cells without the
#: bias the non-negative refit moves into them; where the records fill the grid (STROKE at 10^7)
#: or spread over many middling cells (GOWALLA) it marks occupied blocks empty and loses to
#: ``auto`` (docs/data-aware.md, "The support branch").  On prefix rectangles (boundary about 1),
#: which sum every marked block they cover, it loses: ``b15`` is fixed at 1.2.  Its fit takes up
#: to a second on 256 x 256 grids and more beyond, where the training table has no rows: ``c15``
#: is fixed at the largest measured (2^16 cells, as auto-data's weighted ``auto`` branch,
#: WEIGHTED_REFIT_CELLS).
SUPPORT_RULE = {
    "p15": (99.0, 1.0, 1.5, 2.0, 2.5, 3.0),
    "s15": (-9.0, -0.5, 0.0),
    "b15": (1.2,),
    "c15": (16.0,),
    "z15": (9.0, -1.0, -1.3, -1.6),
    "q15": (0.0, 0.5, 0.6, 0.7, 0.8, 0.9),
    "o15": (1.0, 0.45, 0.35, 0.25),
    "band14": ("auto_support",),
}

#: The candidates whose choice the support branch may replace (support_family).
SUPPORT_FAMILY = ("auto", "auto_nonnegative", "dawa_hilbert")

#: The low-signal branch, fitted after the support branch and before the pruned one, on every row
#: (a thirteenth stage): where log_signal is at most ``v17`` (-99: never), log_signal_per_cell at
#: most ``w17`` and the workload's boundary at least ``b17``, runs ``band16`` over every other
#: choice (the pruned branch, fitted after it, may take its rows).  ``dawa_pruned`` sets to zero
#: the DAWA buckets whose estimate is below three standard errors and scales the rest back to the
#: total: where the records times epsilon are few (10^3 at epsilon 0.1), the features cannot
#: tell heaped data (ADULT-2D, where the pruned refit of auto wins many times over) from smooth
#: data (STROKE, where DAWA does), and this release is within a small factor of the best on both
#: (docs/data-aware.md, "The low-signal branch").
LOW_RULE = {
    "v17": (-99.0, 2.0, 2.5, 3.0, 3.5),
    "w17": (9.0, -1.0, -2.0, -3.0),
    "b17": (0.0, 1.2),
    "band16": ("dawa_pruned",),
}

#: The smooth low-signal branch, fitted after the low-signal branch and before the pruned one, on
#: every row (a fourteenth stage): where the list runs the low-signal branch's band (``band16``),
#: concentration is at most ``q19`` (-9: never) and log_signal at least ``x19``, runs ``band19``.
#: From about 1,000 records times epsilon the features' noise is a few percent of the records, so
#: the mass of the 16 heaviest cells tells smooth data (STROKE, GOWALLA: an adaptive grid has the
#: least error) from data heaped on a few cells (ADULT-2D, MDSALARY-OVERT: the pruned refit), which
#: the low-signal branch's ``dawa_pruned`` serves both within a small factor (docs/data-aware.md,
#: "The smooth low-signal branch").
SMOOTH_RULE = {
    "q19": (-9.0, 0.2, 0.3, 0.5, 0.7),
    "x19": (2.0, 2.5, 2.75, 3.0, 3.25),
    "band19": ("agrid", "agrid_fine"),
}

#: The pruned branch, fitted last, after the smooth low-signal branch, on every row (a fifteenth stage):
#: where log_signal_per_cell is at most ``u16`` (-99: never), log_signal_per_occupied at least
#: ``p16``, the workload's boundary at least ``b16``, on at most 2^``c16`` cells, log_sparsity at
#: most ``z16``, concentration at least ``q16``, bound_share at least ``k16``, corner_share at least
#: ``r16`` and log_signal at least ``l16``, runs ``band15`` over every other choice.
#: ``auto_pruned`` sets to zero the dyadic blocks least squares finds empty in the non-negative
#: refit and scales the rest back to its total: where few records sit in a few heavy cells, heaped
#: in a corner or on the bounds, each with little signal per unit of noise, it has a fraction of
#: every other candidate's error on rectangles spread over the grid; on smooth shapes and on prefix
#: rectangles (which sum the records of every block it empties) it loses many times over
#: (docs/data-aware.md, "The pruned branch").  ``b16`` and ``c16`` are fixed as the support
#: branch's, ``p16`` off; the other grids are the values a fit over finer ones took in every DPBench
#: fold and their off values; ``l16`` may leave the lowest signals, where the features cannot tell
#: heaped data from smooth, to the low-signal branch.
PRUNED_RULE = {
    "u16": (-99.0, 0.0, 1.0),
    "p16": (-9.0,),
    "b16": (1.2,),
    "c16": (16.0,),
    "z16": (9.0, -1.0),
    "q16": (0.0, 0.5),
    "k16": (0.0, 0.5),
    "r16": (0.0, 0.5),
    "l16": (-9.0, 2.5),
    "band15": ("auto_pruned",),
}

#: Each of the last three branches as the tests that must all hold for it to run: (feature,
#: the rule's key of its threshold, at least: True, at most: False).  Both the branch's rows
#: (branch_rows) and its nodes in the tree (rule_tree) are read from them.
BOUND_TESTS = (
    ("bound_share", "e11", True),
    ("workload_boundary", "b11", True),
    ("log_signal", "s11", True),
    ("log_signal_per_cell", "t11", False),
)
CORNER_TESTS = (
    ("corner_share", "e12", True),
    ("workload_boundary", "b12", False),
    ("log_signal", "s12", True),
    ("log_signal_per_cell", "l12", True),
    ("log_signal_per_cell", "t12", False),
    ("log_cells", "c12", False),
)
SPREAD_TESTS = (
    ("corner_share", "e13", True),
    ("offpeak_share", "o13", True),
    ("log_signal", "s13", True),
    ("log_signal_per_cell", "t13", False),
)
SUPPORT_TESTS = (
    ("log_signal_per_occupied", "p15", True),
    ("log_signal_per_cell", "s15", True),
    ("workload_boundary", "b15", True),
    ("log_cells", "c15", False),
    ("log_sparsity", "z15", False),
    ("concentration", "q15", True),
    ("offpeak_share", "o15", False),
)
LOW_TESTS = (
    ("log_signal", "v17", False),
    ("log_signal_per_cell", "w17", False),
    ("workload_boundary", "b17", True),
)
SMOOTH_TESTS = (
    ("concentration", "q19", False),
    ("log_signal", "x19", True),
)
PRUNED_TESTS = (
    ("log_signal_per_cell", "u16", False),
    ("log_signal_per_occupied", "p16", True),
    ("workload_boundary", "b16", True),
    ("log_cells", "c16", False),
    ("log_sparsity", "z16", False),
    ("concentration", "q16", True),
    ("bound_share", "k16", True),
    ("corner_share", "r16", True),
    ("log_signal", "l16", True),
)

#: The training families heaped on the grid's bounds, fitted only in the last four stages
#: (fit_rules).
HEAPED_FAMILIES = ("bound-", "amounts-")

#: The keys of GRID_RULE that decide the first four branches, and those of the sparse branch.
UPPER_RULE = ("s", "s1", "c1", "band", "alternative", "s3", "c3", "q1", "band2", "s4", "o", "band3")
SPARSE_RULE = ("z", "s2", "q", "c2")


def _columns(x) -> tuple:
    names = ("log_signal_per_cell", "log_sparsity", "log_cells", "concentration", "offpeak_share")
    return tuple(x[:, GRID_FEATURES.index(f)] for f in names)


def _boundary(x) -> np.ndarray:
    return x[:, GRID_FEATURES.index("workload_boundary")]


def sparse_branch(x, rule: dict) -> np.ndarray:
    """The rows where a GRID_RULE decision list's sparse branch would run (reached or not)."""
    signal, sparsity, cells, concentration, _ = _columns(x)
    return (sparsity <= rule["z"]) & (signal >= rule["s2"]) & (concentration >= rule["q"]) & (cells >= rule["c2"])


def upper_branches(x, rule: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The rows each of the first four branches of a GRID_RULE decision list takes."""
    signal, _, cells, concentration, offpeak = _columns(x)
    first = signal <= rule["s"]
    second = ~first & (signal <= rule["s1"]) & (cells <= rule["c1"])
    third = ~first & ~second & (signal <= rule["s3"]) & (cells <= rule["c3"]) & (concentration >= rule["q1"])
    fourth = ~first & ~second & ~third & (signal <= rule["s4"]) & (offpeak >= rule["o"])
    return first, second, third, fourth


def upper_choice(x, rule: dict, candidates) -> tuple[np.ndarray, np.ndarray]:
    """(the candidate index the first four branches of a GRID_RULE decision list pick, 0 where
    none runs; the rows one of them takes): the branches' rows are disjoint."""
    branches = zip(upper_branches(x, rule), ("alternative", "band", "band2", "band3"))
    column = np.zeros(x.shape[0], dtype=np.int64)
    taken = np.zeros(x.shape[0], dtype=bool)
    for rows, key in branches:
        column[rows] = candidates.index(rule[key])
        taken |= rows
    return column, taken


def peak_branch(x, rule: dict) -> np.ndarray:
    """The rows where a decision list's peak branch (PEAK_RULE) would run (reached or not)."""
    signal, _, _, concentration, _ = _columns(x)
    return (signal >= rule["s5"]) & (concentration >= rule["q5"])


def towns_branch(x, rule: dict) -> np.ndarray:
    """The rows where a decision list's towns branch (TOWNS_RULE) would run (reached or not)."""
    signal, _, cells, concentration, offpeak = _columns(x)
    bound = x[:, GRID_FEATURES.index("bound_share")]
    return (
        (signal <= rule["s6"])
        & (cells >= rule["c6"])
        & (concentration >= rule["q6"])
        & (offpeak >= rule["o6"])
        & (bound <= rule["h6"])
    )


def small_branch(x, rule: dict) -> np.ndarray:
    """The rows where a decision list's small-grid branch (SMALL_RULE) would run (reached or not)."""
    signal, _, cells, _, offpeak = _columns(x)
    return (signal <= rule["s7"]) & (cells <= rule["c7"]) & (offpeak >= rule["o7"])


def concentrated_branch(x, rule: dict) -> np.ndarray:
    """The rows where a decision list's concentrated branch (CONCENTRATED_RULE) would run (reached or not)."""
    signal, _, cells, concentration, offpeak = _columns(x)
    return (
        (_boundary(x) <= rule["b8"])
        & (signal <= rule["s8"])
        & (cells >= rule["c8"])
        & (concentration >= rule["q8"])
        & (offpeak <= rule["o8"])
    )


def clustered_branch(x, rule: dict) -> np.ndarray:
    """The rows where a decision list's clustered branch (CLUSTERED_RULE) would run (reached or not)."""
    signal, _, cells, concentration, offpeak = _columns(x)
    return (
        (_boundary(x) <= rule["b9"])
        & (signal <= rule["s9"])
        & (cells >= rule["c9"])
        & (concentration >= rule["q9"])
        & (offpeak >= rule["o9"])
        & (offpeak <= rule["u9"])
    )


def nonnegative_branch(x, rule: dict) -> np.ndarray:
    """The rows where a decision list's non-negative branch (NONNEGATIVE_RULE) would run (reached or not)."""
    signal, _, _, concentration, _ = _columns(x)
    occupied = x[:, GRID_FEATURES.index("log_signal_per_occupied")]
    return (
        (concentration >= rule["q10"])
        & (_boundary(x) >= rule["b10"])
        & (signal >= rule["s10"])
        & (signal <= rule["t10"])
        & (occupied <= rule["p10"])
    )


def branch_rows(x, rule: dict, tests) -> np.ndarray:
    """The rows of GRID_FEATURES where every one of a branch's ``tests`` holds at ``rule``'s
    thresholds."""
    rows = np.ones(x.shape[0], dtype=bool)
    for name, key, at_least in tests:
        column = x[:, GRID_FEATURES.index(name)]
        rows &= column >= rule[key] if at_least else column <= rule[key]
    return rows


def bound_branch(x, rule: dict) -> np.ndarray:
    """The rows where a decision list's bound branch (BOUND_RULE) would run (reached or not)."""
    return branch_rows(x, rule, BOUND_TESTS)


def corner_branch(x, rule: dict) -> np.ndarray:
    """The rows where a decision list's corner branch (CORNER_RULE) would run (reached or not)."""
    return branch_rows(x, rule, CORNER_TESTS)


def spread_branch(x, rule: dict) -> np.ndarray:
    """The rows where a decision list's corner spread branch (SPREAD_RULE) would run (reached or
    not; nowhere for a list fitted without it)."""
    if "e13" not in rule:
        return np.zeros(x.shape[0], dtype=bool)
    return branch_rows(x, rule, SPREAD_TESTS)


def support_branch(x, rule: dict) -> np.ndarray:
    """The rows where a decision list's support branch (SUPPORT_RULE) would run over a choice of
    support_family (reached or not; nowhere for a list fitted without it)."""
    return gated_rows(x, rule, runs_support, SUPPORT_TESTS)


def runs_support(rule: dict) -> bool:
    """Whether a decision list's support branch (SUPPORT_RULE) runs anywhere (``p15`` not 99;
    lists fitted before that stage lack it)."""
    return rule.get("p15", 99.0) != 99.0


def gated_rows(x, rule: dict, runs, tests) -> np.ndarray:
    """The rows of branch_rows for a branch's ``tests`` where ``runs(rule)``, else none."""
    if not runs(rule):
        return np.zeros(x.shape[0], dtype=bool)
    return branch_rows(x, rule, tests)


def low_branch(x, rule: dict) -> np.ndarray:
    """The rows where a decision list's low-signal branch (LOW_RULE) would run ``band16`` (nowhere
    for a list fitted without it)."""
    return gated_rows(x, rule, runs_low, LOW_TESTS)


def runs_low(rule: dict) -> bool:
    """Whether a decision list's low-signal branch (LOW_RULE) runs anywhere (``v17`` not -99;
    lists fitted before that stage lack it)."""
    return rule.get("v17", -99.0) != -99.0


def smooth_branch(x, rule: dict) -> np.ndarray:
    """The rows where a decision list's smooth low-signal branch (SMOOTH_RULE) would run
    ``band19`` over the low-signal branch's band (reached or not; nowhere for a list fitted
    without it)."""
    return gated_rows(x, rule, runs_smooth, SMOOTH_TESTS)


def runs_smooth(rule: dict) -> bool:
    """Whether a decision list's smooth low-signal branch (SMOOTH_RULE) runs anywhere (``q19`` not
    -9; lists fitted before that stage lack it)."""
    return rule.get("q19", -9.0) != -9.0


def pruned_branch(x, rule: dict) -> np.ndarray:
    """The rows where a decision list's pruned branch (PRUNED_RULE) would run ``band15`` (nowhere
    for a list fitted without it)."""
    return gated_rows(x, rule, runs_pruned, PRUNED_TESTS)


def runs_pruned(rule: dict) -> bool:
    """Whether a decision list's pruned branch (PRUNED_RULE) runs anywhere (``u16`` not -99;
    lists fitted before that stage lack it)."""
    return rule.get("u16", -99.0) != -99.0


def support_family(candidates) -> tuple[int, ...]:
    """The candidate indices the support branch may replace (SUPPORT_FAMILY, ``auto`` first)."""
    return tuple(i for i, c in enumerate(candidates) if c in SUPPORT_FAMILY)


def rule_choice(x, rule: dict, candidates) -> np.ndarray:
    """The candidate index a decision list of GRID_RULE, PEAK_RULE, TOWNS_RULE, SMALL_RULE,
    CONCENTRATED_RULE, CLUSTERED_RULE, NONNEGATIVE_RULE, BOUND_RULE, SPREAD_RULE, CORNER_RULE and
    LARGE_CORNER_RULE picks for each row of GRID_FEATURES (the concentrated, clustered and
    non-negative branches only where the others leave ``auto``, index 0; the bound branch over
    every other but the corner spread and corner ones, the corner spread branch over every other
    but the corner one, and that over every other, running ``band13`` on its large grids; last,
    the support branch's ``band14`` where the list would run a candidate of support_family, over
    every choice the low-signal branch's ``band16``, the smooth low-signal branch's ``band19``
    where the list then runs ``band16``, and over every choice the pruned branch's ``band15``)."""
    column, taken = upper_choice(x, rule, candidates)
    rest = np.where(sparse_branch(x, rule), candidates.index(rule["alternative"]), 0)
    rest = np.where(small_branch(x, rule), candidates.index(rule["band6"]), rest)
    rest = np.where(towns_branch(x, rule), candidates.index(rule["band5"]), rest)
    rest = np.where(peak_branch(x, rule), candidates.index(rule["band4"]), rest)
    column = np.where(taken, column, rest)
    column = np.where((column == 0) & concentrated_branch(x, rule), candidates.index(rule["band7"]), column)
    column = np.where((column == 0) & clustered_branch(x, rule), candidates.index(rule["band8"]), column)
    refitted = (column == 0) & nonnegative_branch(x, rule)
    if refitted.any():  # its band need not be a candidate where it never runs
        column = np.where(refitted, candidates.index(rule["band9"]), column)
    bounded = bound_branch(x, rule)
    if bounded.any():
        column = np.where(bounded, candidates.index(rule["band10"]), column)
    spread = spread_branch(x, rule)
    if spread.any():
        column = np.where(spread, candidates.index(rule["band12"]), column)
    cornered = corner_branch(x, rule)
    if cornered.any():
        column = np.where(cornered, candidates.index(rule["band11"]), column)
    large = cornered & large_corner(x, rule)
    if large.any():
        column = np.where(large, candidates.index(rule["band13"]), column)
    supported = support_branch(x, rule) & np.isin(column, support_family(candidates))
    if supported.any():
        column = np.where(supported, candidates.index(rule["band14"]), column)
    low = low_branch(x, rule)
    if low.any():
        column = np.where(low, candidates.index(rule["band16"]), column)
    smooth = smooth_branch(x, rule)
    if smooth.any() and rule["band16"] in candidates:
        smooth &= column == candidates.index(rule["band16"])
        column = np.where(smooth, candidates.index(rule["band19"]), column)
    pruned = pruned_branch(x, rule)
    if pruned.any():
        column = np.where(pruned, candidates.index(rule["band15"]), column)
    return column


def large_corner(x, rule: dict) -> np.ndarray:
    """The rows on grids large enough for a decision list's corner branch to run ``band13``
    (LARGE_CORNER_RULE) where it runs (reached or not); nowhere for a list without that stage."""
    if not splits_large_corner(rule):
        return np.zeros(x.shape[0], dtype=bool)
    return x[:, GRID_FEATURES.index("log_cells")] >= rule["c14"]


def splits_large_corner(rule: dict) -> bool:
    """Whether a decision list's corner branch runs ``band13`` on large grids (LARGE_CORNER_RULE
    on; lists fitted before that stage lack ``c14``)."""
    return rule.get("c14", 99.0) != 99.0


def whole_row_stages() -> tuple[dict, ...]:
    """The stages fit_rules fits last, on every row, in order (read when called, so that a
    monkeypatched grid is the one fitted)."""
    return (
        BOUND_RULE,
        CORNER_RULE,
        SPREAD_RULE,
        LARGE_CORNER_RULE,
        SUPPORT_RULE,
        LOW_RULE,
        SMOOTH_RULE,
        PRUNED_RULE,
    )


def below(v: float) -> float:
    """The threshold just below ``v``: a tree goes left at or below its threshold, so a bound
    "at least v" splits there."""
    return float(np.nextafter(v, -np.inf))


def rule_tree(rule: dict, candidates) -> list[dict]:
    """A GRID_RULE decision list as the nodes of a tree (a node may be reached from two parents;
    a tree goes left at or below its threshold, so a bound "at least v" splits just below v): the
    corner branch first (nodes 0-6), the bound branch next (7-11), then the list (12 onwards,
    _list_tree), then (where recorded) the corner spread branch, which the corner branch falls
    through to and which falls through to the bound branch; where the large-corner stage runs,
    the corner branch's leaf is a split on the grid's size into two leaves at the end; where the
    support stage runs, every leaf naming a candidate of support_family becomes its tests (_supported_leaves),
    and where the low-signal and pruned stages run, every leaf then becomes each stage's tests in
    turn (_low_leaves, _pruned_leaves), and between the two every leaf of the low-signal band
    becomes the smooth low-signal stage's tests (_smooth_leaves)."""
    band10, band11 = _band(rule, "band10", candidates), _band(rule, "band11", candidates)
    bound, rest = 7, 12
    listed = _list_tree(rule, candidates)
    spread = rest + len(listed) if "e13" in rule else bound
    corner = _conjunction(0, rule, CORNER_TESTS, spread, band11)
    head = _conjunction(bound, rule, BOUND_TESTS, rest, band10)
    shifted = [
        node if "leaf" in node else {**node, "left": node["left"] + rest, "right": node["right"] + rest}
        for node in listed
    ]
    tail = []
    if "e13" in rule:
        tail = _conjunction(spread, rule, SPREAD_TESTS, bound, _band(rule, "band12", candidates))
    nodes = corner + head + shifted + tail
    if splits_large_corner(rule):  # the corner branch's leaf splits by grid size (two leaves at the end)
        end = len(nodes)
        split = {"feature": GRID_FEATURES.index("log_cells"), "threshold": below(rule["c14"])}
        nodes[len(CORNER_TESTS)] = {**split, "left": end, "right": end + 1}
        nodes += [{"leaf": band11}, {"leaf": _band(rule, "band13", candidates)}]
    nodes = _supported_leaves(nodes, rule, candidates)
    nodes = _smooth_leaves(_low_leaves(nodes, rule, candidates), rule, candidates)
    return _pruned_leaves(nodes, rule, candidates)


def _supported_leaves(nodes: list[dict], rule: dict, candidates) -> list[dict]:
    """``nodes`` with every leaf that names a candidate of support_family turned into the
    support branch's tests: the first in the leaf's place, the rest appended, reaching a leaf of
    ``band14`` where all hold and one of the old leaf's candidate where one fails (the rows
    support_branch gives, over that leaf's)."""
    if not runs_support(rule):
        return nodes
    family = support_family(candidates)
    return _every_leaf(nodes, rule, SUPPORT_TESTS, _band(rule, "band14", candidates), wraps=family.__contains__)


def _low_leaves(nodes: list[dict], rule: dict, candidates) -> list[dict]:
    """``nodes`` with every leaf turned into the low-signal branch's tests: the first in the leaf's
    place, the rest appended, reaching a leaf of ``band16`` where all hold and the old leaf where
    one fails (the rows low_branch gives, over every leaf's)."""
    if not runs_low(rule):
        return nodes
    return _every_leaf(nodes, rule, LOW_TESTS, _band(rule, "band16", candidates))


def _every_leaf(nodes: list[dict], rule: dict, tests, band: int, wraps=None) -> list[dict]:
    """``nodes`` with every leaf (every one whose candidate ``wraps`` accepts, where given) turned
    into a branch's ``tests``: the first in the leaf's place, the rest appended, reaching a leaf
    of ``band`` where all hold and the old leaf where one fails."""
    nodes = list(nodes)
    for at, node in enumerate(list(nodes)):
        if "leaf" not in node or (wraps is not None and not wraps(node["leaf"])):
            continue
        start = len(nodes) - 1  # the block's first test takes the leaf's place, the rest from len(nodes)
        block = _conjunction(start, rule, tests, start + len(tests) + 1, band)
        nodes[at] = block[0]
        nodes += [*block[1:], {"leaf": node["leaf"]}]
    return nodes


def _smooth_leaves(nodes: list[dict], rule: dict, candidates) -> list[dict]:
    """``nodes`` with every leaf that names the low-signal branch's ``band16`` turned into the
    smooth low-signal branch's tests: the first in the leaf's place, the rest appended, reaching a
    leaf of ``band19`` where all hold and the old leaf where one fails (the rows smooth_branch
    gives, over those leaves')."""
    if not runs_smooth(rule) or rule["band16"] not in candidates:
        return nodes
    low = candidates.index(rule["band16"])
    return _every_leaf(nodes, rule, SMOOTH_TESTS, _band(rule, "band19", candidates), wraps=low.__eq__)


def _pruned_leaves(nodes: list[dict], rule: dict, candidates) -> list[dict]:
    """``nodes`` with every leaf turned into the pruned branch's tests: the first in the leaf's
    place, the rest appended, reaching a leaf of ``band15`` where all hold and the old leaf where
    one fails (the rows pruned_branch gives, over every leaf's)."""
    if not runs_pruned(rule):
        return nodes
    return _every_leaf(nodes, rule, PRUNED_TESTS, _band(rule, "band15", candidates))


def _band(rule: dict, key: str, candidates) -> int:
    """The candidate index a branch's ``key`` names, 0 where that candidate was dropped (never
    best in training): such a branch never runs, and 0 is ``auto``."""
    return candidates.index(rule[key]) if rule[key] in candidates else 0


def _conjunction(start: int, rule: dict, tests, otherwise: int, leaf: int) -> list[dict]:
    """Tree nodes, the first numbered ``start``, that reach a leaf naming candidate ``leaf`` where
    every one of a branch's ``tests`` (BOUND_TESTS, ...) holds at ``rule``'s thresholds and node
    ``otherwise`` where one fails: the rows branch_rows gives."""
    nodes = []
    for k, (name, key, at_least) in enumerate(tests):
        on = start + k + 1
        split = below(rule[key]) if at_least else rule[key]
        left, right = (otherwise, on) if at_least else (on, otherwise)
        nodes.append({"feature": GRID_FEATURES.index(name), "threshold": split, "left": left, "right": right})
    return [*nodes, {"leaf": leaf}]


def _list_tree(rule: dict, candidates) -> list[dict]:
    """rule_tree's nodes of every branch but the bound one, from node 0."""
    feature = GRID_FEATURES.index
    alternative, band, band2, band3, band4, band5, band6, band7, band8 = (
        candidates.index(rule[k])
        for k in ("alternative", "band", "band2", "band3", "band4", "band5", "band6", "band7", "band8")
    )
    band9 = candidates.index(rule["band9"]) if rule["band9"] in candidates else 0  # 0: a branch that never runs

    return [
        {"feature": feature("log_signal_per_cell"), "threshold": rule["s"], "left": 1, "right": 2},
        {"leaf": alternative},
        {"feature": feature("log_signal_per_cell"), "threshold": rule["s1"], "left": 3, "right": 5},
        {"feature": feature("log_cells"), "threshold": rule["c1"], "left": 4, "right": 5},
        {"leaf": band},
        {"feature": feature("log_signal_per_cell"), "threshold": rule["s3"], "left": 6, "right": 15},
        {"feature": feature("log_cells"), "threshold": rule["c3"], "left": 7, "right": 15},
        {"feature": feature("concentration"), "threshold": below(rule["q1"]), "left": 15, "right": 8},
        {"leaf": band2},
        {"feature": feature("log_sparsity"), "threshold": rule["z"], "left": 10, "right": 13},
        {"feature": feature("log_signal_per_cell"), "threshold": below(rule["s2"]), "left": 13, "right": 11},
        {"feature": feature("concentration"), "threshold": below(rule["q"]), "left": 13, "right": 12},
        {"feature": feature("log_cells"), "threshold": below(rule["c2"]), "left": 13, "right": 14},
        # where the list runs auto: the concentrated branch (30-34), then the clustered one (35-41)
        {"feature": feature("workload_boundary"), "threshold": rule["b8"], "left": 30, "right": 35},
        {"leaf": alternative},
        {"feature": feature("log_signal_per_cell"), "threshold": rule["s4"], "left": 16, "right": 18},
        {"feature": feature("offpeak_share"), "threshold": below(rule["o"]), "left": 18, "right": 17},
        {"leaf": band3},
        {"feature": feature("log_signal_per_cell"), "threshold": below(rule["s5"]), "left": 21, "right": 19},
        {"feature": feature("concentration"), "threshold": below(rule["q5"]), "left": 21, "right": 20},
        {"leaf": band4},
        {"feature": feature("log_signal_per_cell"), "threshold": rule["s6"], "left": 22, "right": 26},
        {"feature": feature("log_cells"), "threshold": below(rule["c6"]), "left": 26, "right": 23},
        {"feature": feature("concentration"), "threshold": below(rule["q6"]), "left": 26, "right": 24},
        {"feature": feature("offpeak_share"), "threshold": below(rule["o6"]), "left": 26, "right": 49},
        {"leaf": band5},
        {"feature": feature("log_signal_per_cell"), "threshold": rule["s7"], "left": 27, "right": 9},
        {"feature": feature("log_cells"), "threshold": rule["c7"], "left": 28, "right": 9},
        {"feature": feature("offpeak_share"), "threshold": below(rule["o7"]), "left": 9, "right": 29},
        {"leaf": band6},
        {"feature": feature("log_signal_per_cell"), "threshold": rule["s8"], "left": 31, "right": 35},
        {"feature": feature("log_cells"), "threshold": below(rule["c8"]), "left": 35, "right": 32},
        {"feature": feature("concentration"), "threshold": below(rule["q8"]), "left": 35, "right": 33},
        {"feature": feature("offpeak_share"), "threshold": rule["o8"], "left": 34, "right": 35},
        {"leaf": band7},
        {"feature": feature("workload_boundary"), "threshold": rule["b9"], "left": 36, "right": 42},
        {"feature": feature("log_signal_per_cell"), "threshold": rule["s9"], "left": 37, "right": 42},
        {"feature": feature("log_cells"), "threshold": below(rule["c9"]), "left": 42, "right": 38},
        {"feature": feature("concentration"), "threshold": below(rule["q9"]), "left": 42, "right": 39},
        {"feature": feature("offpeak_share"), "threshold": below(rule["o9"]), "left": 42, "right": 40},
        {"feature": feature("offpeak_share"), "threshold": rule["u9"], "left": 41, "right": 42},
        {"leaf": band8},
        # where all the above run auto: the non-negative branch (42-47)
        {"feature": feature("concentration"), "threshold": below(rule["q10"]), "left": 48, "right": 43},
        {"feature": feature("workload_boundary"), "threshold": below(rule["b10"]), "left": 48, "right": 44},
        {"feature": feature("log_signal_per_cell"), "threshold": below(rule["s10"]), "left": 48, "right": 45},
        {"feature": feature("log_signal_per_cell"), "threshold": rule["t10"], "left": 46, "right": 48},
        {"feature": feature("log_signal_per_occupied"), "threshold": rule["p10"], "left": 47, "right": 48},
        {"leaf": band9},
        {"leaf": 0},
        # the towns branch's bound share (49), after its off-peak share (24)
        {"feature": feature("bound_share"), "threshold": rule["h6"], "left": 25, "right": 26},
    ]


def _stand_ins(rule: dict) -> bool:
    """Whether a list is the one that stands for the lists that differ from it only in the
    settings of a branch that never runs (its band, second band or sparse branch)."""
    first = {k: v[0] for k, v in GRID_RULE.items()}
    never = (("s1", ("c1", "band")), ("s3", ("c3", "q1", "band2")), ("s4", ("o", "band3")), ("z", ("s2", "q", "c2")))
    return all(rule[gate] != -9.0 or all(rule[k] == first[k] for k in keys) for gate, keys in never)


def fit_rules(x, keys, per_row, candidates, args) -> GridSelector:
    """The 1-D script's kind of rule fit (train_auto_data.fit_rules) over the decision lists of
    GRID_RULE: among those never worse than ``auto`` with the whole epsilon by more than
    ``args.to_auto`` in a training cell, the one of least summed cost (regret minus 1 plus
    ``args.hinge`` times the log-ratio to ``auto`` above 0); the least worst such ratio if none
    is; ties to the first in GRID_RULE's order.  Then, that list fixed, the setting of the peak
    branch (PEAK_RULE; never first) ranked the same way but with the bound ``args.stage_to_auto``
    in place of ``args.to_auto`` (a branch's training cells are few, three trials each, and the
    held-out bound is checked apart: see _fit_stages), with both fixed that of the towns
    branch (TOWNS_RULE), with all three fixed that of the small-grid branch (SMALL_RULE), then
    those of the concentrated, clustered and non-negative branches (CONCENTRATED_RULE,
    CLUSTERED_RULE, NONNEGATIVE_RULE), all on the rows of the shapes other than those of the
    families heaped on the bounds (HEAPED_FAMILIES: ``bound-<k>``, ``amounts-<k>``); last, on
    every row, the bound branch (BOUND_RULE), the corner branch (CORNER_RULE), the corner
    spread branch (SPREAD_RULE), the corner branch's band on large grids (LARGE_CORNER_RULE),
    then the support branch over the choices of support_family (SUPPORT_RULE), the low-signal
    branch over every choice (LOW_RULE), the smooth low-signal branch over its band (SMOOTH_RULE)
    and the pruned branch over every choice (PRUNED_RULE).  The shapes
    heaped on their bounds are there to fit those branches: their rows outside them, at the
    lowest signals and on prefix rectangles, would otherwise pull the list's first stage away
    from the other shapes (held out, a list fitted on them too was far worse: docs/data-aware.md,
    "The mass on the grid's bounds").  Written as a tree over all ``candidates``.

    Every list of the first stage is scored, but the sparse branch's settings at once for each setting of the
    branches above it: the rows left to it gain (alternative - auto) where it runs, a product of
    its row masks with the cells' indicator (O(settings x rows) per setting above, not a pass
    each); only the cells holding a row some setting of it takes are scored per setting."""
    listed = np.array([not k[0].startswith(HEAPED_FAMILIES) for k in keys])
    chosen = _fit_list(x[listed], [k for k, m in zip(keys, listed) if m], per_row[listed], candidates, args)
    costs = _cell_cost(keys, per_row, args)
    chosen = _fit_stages(whole_row_stages(), chosen, x, per_row, candidates, args, costs)
    nodes = rule_tree(chosen, candidates)
    model = {"nodes": nodes, "depth": tree_depth(nodes), "min_leaf": 0, "margin": 0.0, "rules": chosen}
    return GridSelector("tree", candidates, model)


def _cell_cost(keys, per_row, args):
    """(each row's cell, the rows per cell, cell_cost): cell_cost(error, cells) gives the cells'
    costs (regret minus 1 plus ``args.hinge`` times the log-ratio to ``auto`` above 0, times their
    rows) and their ratios to ``auto`` with the whole epsilon, for their mean errors ``error``."""
    cell, size, mean = cell_means(keys, per_row)
    whole = mean[:, -1]
    best_error = mean.min(axis=1)

    def cell_cost(error, cells):
        ratio = error / whole[cells]
        return (error / best_error[cells] - 1 + args.hinge * np.maximum(0.0, np.log(ratio))) * size[cells], ratio

    return cell, size, cell_cost


def _fit_list(x, keys, per_row, candidates, args) -> dict:
    """fit_rules' first seven stages (GRID_RULE, then PEAK_RULE to NONNEGATIVE_RULE in turn),
    the bound, corner and corner spread branches off."""
    costs = _cell_cost(keys, per_row, args)
    cell, size, cell_cost = costs
    rows = np.arange(x.shape[0])
    sparse_settings = list(itertools.product(*(GRID_RULE[k] for k in SPARSE_RULE)))
    masks = np.array([sparse_branch(x, dict(zip(SPARSE_RULE, v))) for v in sparse_settings])
    reach = masks.any(axis=0)  # the rows some setting takes
    touched = np.unique(cell[reach])  # the cells whose error a sparse setting can change
    untouched = np.setdiff1d(np.arange(size.size), touched)  # the cells every setting leaves alone
    local = np.full(size.size, -1)
    local[touched] = np.arange(touched.size)
    masks = masks[:, reach].astype(float)  # settings x the rows any setting takes
    indicator = scipy.sparse.csr_matrix(
        (np.ones(int(reach.sum())), (np.arange(int(reach.sum())), local[cell[reach]])),
        shape=(int(reach.sum()), touched.size),
    )
    scores = {}
    for upper in itertools.product(*(GRID_RULE[k] for k in UPPER_RULE)):
        rule = dict(zip(UPPER_RULE, upper))
        if not _stand_ins({**rule, **{k: GRID_RULE[k][0] for k in SPARSE_RULE}}):
            continue
        column, taken = upper_choice(x, rule, candidates)
        base = per_row[rows, column]  # auto (column 0) where no branch above the sparse one runs
        alternative = candidates.index(rule["alternative"])
        gain = np.where(taken, 0.0, per_row[rows, alternative] - per_row[rows, 0])
        sums = np.bincount(cell, base, minlength=size.size)
        cost, ratio = cell_cost(sums[untouched] / size[untouched], untouched)
        fixed_cost, fixed_worst = cost.sum(), ratio.max(initial=0.0)
        varied = sums[touched] + (indicator.T @ (masks * gain[reach]).T).T  # settings x touched cells
        cost, ratio = cell_cost(varied / size[touched], touched)
        worst, total = np.maximum(ratio.max(axis=1), fixed_worst), cost.sum(axis=1) + fixed_cost
        for setting, w, t in zip(sparse_settings, worst, total):
            scores[(upper, setting)] = (float(w), float(t))
    # the later stages' branches (and the bound branch), off (first settings) in the first
    later = (PEAK_RULE, TOWNS_RULE, SMALL_RULE, CONCENTRATED_RULE, CLUSTERED_RULE, NONNEGATIVE_RULE)
    off = {k: v[0] for grid in (*later, *whole_row_stages()) for k, v in grid.items()}
    chosen, best = None, None
    for values in itertools.product(*GRID_RULE.values()):
        rule = dict(zip(GRID_RULE, values))
        if not _stand_ins(rule):
            continue
        worst, total = scores[(tuple(rule[k] for k in UPPER_RULE), tuple(rule[k] for k in SPARSE_RULE))]
        key = rule_rank(worst, total, args.to_auto)
        if best is None or key < best:
            chosen, best = {**rule, **off}, key
    assert chosen is not None
    return _fit_stages(later, chosen, x, per_row, candidates, args, costs)


def _fit_stages(grids, chosen: dict, x, per_row, candidates, args, costs) -> dict:
    """The later stages in turn: a branch's settings (each of ``grids``) with everything before
    it fixed, each scored by its choices on the rows given (the first, off, scored the same way,
    so that ties keep the list as it was); ``costs``: _cell_cost of those rows.  A setting is
    ranked by rule_rank with ``args.stage_to_auto`` as the bound on a training cell's ratio to
    ``auto``: a branch changes few training cells, each the mean of three trials, so one cell's
    noise near the held-out bound would refuse a branch that gains in every other; the held-out
    bound itself is checked on the validation (docs/data-aware.md, "The later stages' bound on
    the ratio to auto")."""
    cell, size, cell_cost = costs
    rows = np.arange(x.shape[0])
    for grid in grids:
        gate = next(iter(grid))
        off = {k: v[0] for k, v in grid.items()}
        fixed, chosen, best = chosen, None, None
        for values in itertools.product(*grid.values()):
            setting = dict(zip(grid, values))
            if setting[gate] == grid[gate][0] and setting != off:
                continue
            if setting[gate] != grid[gate][0] and any(isinstance(v, str) and v not in candidates for v in values):
                continue  # a band that is never the best in a training cell
            rule = {**fixed, **setting}
            column = rule_choice(x, rule, candidates)
            cost, ratio = cell_cost(np.bincount(cell, per_row[rows, column], minlength=size.size) / size, slice(None))
            key = rule_rank(float(ratio.max()), float(cost.sum()), args.stage_to_auto)
            if best is None or key < best:
                chosen, best = rule, key
        assert chosen is not None
    return chosen


def without_refit(selector: GridSelector) -> GridSelector | None:
    """A rules fit with its non-negative branch (the seventh stage) turned off: the list the earlier
    stages chose, which the later ones never change, as a tree over the same candidates and
    training range (None for other fits).  It scores what the branch adds, from the same fits."""
    rules = selector.model.get("rules")
    if rules is None:
        return None
    rules = {**rules, **{k: v[0] for k, v in NONNEGATIVE_RULE.items()}}
    nodes = rule_tree(rules, selector.candidates)
    model = {**selector.model, "nodes": nodes, "depth": tree_depth(nodes), "rules": rules}
    return GridSelector("tree", selector.candidates, model)


def tree_depth(nodes: list[dict], at: int = 0, known: dict | None = None) -> int:
    """The most decisions on a path from node ``at`` to a leaf (each node's once: a node may be
    reached from many parents, so walking every path would take exponential time)."""
    known = {} if known is None else known
    if at not in known:
        node = nodes[at]
        deeper = 0 if "leaf" in node else 1 + max(tree_depth(nodes, node[side], known) for side in ("left", "right"))
        known[at] = deeper
    return known[at]


def fit(kind: str, depth: int, margin: float, x, ratio, candidates, args, keys=None, per_row=None) -> GridSelector:
    """A tree (train_auto_data.fit_tree), ridge or rules fit as a GridSelector, with the training
    range of every feature (inputs are clipped to it)."""
    if kind == "rules":
        selector = fit_rules(x, keys, per_row, candidates, args)
        selector.model.update(lower=x.min(axis=0), upper=x.max(axis=0))
        return selector
    if kind == "ridge":
        fitted = fit_ridge(x, np.clip(ratio, -args.clip, args.clip), args.alpha, margin)
    else:
        fitted = fit_tree(x, ratio, depth, args.leaf, margin)
    selector = GridSelector(fitted.kind, candidates, fitted.model)
    selector.model.update(lower=x.min(axis=0), upper=x.max(axis=0))
    return selector


def held_out_cell(key, mine, per_row, candidates) -> dict:
    """One held-out cell's figures from its (row, chosen candidate) pairs: the chosen releases'
    mean MSE over the best candidate's (regret; ``auto`` with the whole epsilon among them) and
    over ``auto``'s with the whole epsilon (the last column of ``per_row``), the best, the choices."""
    names_all = (*candidates, "auto-whole")
    means = per_row[[i for i, _ in mine]].mean(axis=0)
    got = np.mean([per_row[i, c] for i, c in mine])
    counts = np.bincount([c for _, c in mine], minlength=len(names_all))
    figures = {"regret": float(got / means.min()), "to_auto": float(got / means[-1])}
    names = dict(zip(("shape", "n", "scale", "epsilon", "workload"), key))
    chosen = {c: int(k) for c, k in zip(names_all, counts) if k}
    return {**names, **figures, "best": names_all[int(np.argmin(means))], "choices": chosen}


def _fit_job(job) -> GridSelector:
    spec, x, ratio, candidates, args, keys, per_row = job
    return fit(*spec, x, ratio, candidates, args, keys, per_row)


def validate(
    spec,
    x,
    ratio,
    keys,
    per_row,
    candidates,
    args,
    fitted_on,
    test=None,
    held_out=DPBENCH,
    fitted_models=None,
    weighted=None,
    folds=None,
) -> list[dict]:
    """Leave-one-shape-out over the DPBench shapes: the model fitted on the other shapes' rows of
    the workloads ``fitted_on``, per held-out cell (every workload) the regret and the ratio to
    auto; on the rows of ``test`` (x, keys, per_row of a table of fresh trials) where given.  The
    models go into ``fitted_models`` (where given) by (spec, fitted_on, training rows' mask bytes),
    so that the shipped fit, trained on every row, is not fitted twice.  ``weighted`` (per test
    row, NaN where not measured) adds each cell's figures with ``auto``'s releases replaced by
    auto_toward_nonnegative's (``weighted_auto``; weighted_cell).  ``folds`` (where given) gets
    each held-out shape's model, which auto_grid_regret.py re-measures on fresh trials."""
    shapes = np.array([k[0] for k in keys])
    used = np.isin([k[4] for k in keys], fitted_on)
    test_x, test_keys, test_per_row = test if test is not None else (x, keys, per_row)
    test_shapes = np.array([k[0] for k in test_keys])
    cells: list[dict] = []
    trains = {held: (shapes != held) & used for held in held_out if (test_shapes == held).any()}
    # one fit per distinct training set (a shape absent from the training table, UNSEEN, leaves
    # them all); the rules fits, minutes each, in parallel processes
    masks = {train.tobytes(): train for train in trains.values()}
    jobs = [
        (spec, x[m], ratio[m], candidates, args, [k for k, t in zip(keys, m) if t], per_row[m]) for m in masks.values()
    ]
    workers = min(len(jobs), getattr(args, "jobs", 1) or 1) if spec[0] == "rules" else 1
    if workers > 1:
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            models = list(pool.map(_fit_job, jobs))
    else:
        models = [_fit_job(job) for job in jobs]
    fitted = dict(zip(masks, models))
    if fitted_models is not None:
        fitted_models.update({(spec, tuple(fitted_on), mask): model for mask, model in fitted.items()})
    for held, train in trains.items():
        fold = fitted[train.tobytes()]
        if folds is not None:
            folds[held] = fold
        cells.extend(fold_cells(fold, np.flatnonzero(test_shapes == held), test, candidates, weighted))
    return cells


def fold_cells(fold: GridSelector, rows, test, candidates, weighted=None) -> list[dict]:
    """A held-out shape's cells scored with the list fitted without it: ``rows`` of ``test`` (x,
    keys, per-row MSEs of the ``candidates``, then ``auto``'s with the whole epsilon), each row
    released by the fold's choice from its own features; with the figures of the same list
    without its non-negative branch (``without_refit``) and, where ``weighted`` is given, of its
    ``auto`` choices released by the weighted branch (``weighted_auto``).  The fold may have been
    fitted on fewer candidates than ``candidates`` (a candidate added since): its choices are
    read by name, and the best candidate is the best of ``candidates``."""
    test_x, test_keys, test_per_row = test
    variants = {"": fold}
    if (base := without_refit(fold)) is not None:
        variants["without_refit"] = base
    per_variant: dict = {}
    for variant, model in variants.items():
        chosen = fold_columns(model, test_x[rows], candidates)
        picked: dict = {}
        for i, c in zip(rows, chosen):
            picked.setdefault(test_keys[i], []).append((i, int(c)))
        per_variant[variant] = []
        for key, mine in sorted(picked.items()):
            cell = held_out_cell(key, mine, test_per_row, candidates)
            if weighted is not None and (moved := weighted_cell(key, mine, test_per_row, weighted, candidates)):
                cell["weighted_auto"] = moved
            per_variant[variant].append(cell)
    for cell, base_cell in zip(per_variant[""], per_variant.get("without_refit", ())):
        cell["without_refit"] = base_cell
    return per_variant[""]


def fold_columns(model: GridSelector, x, candidates) -> np.ndarray:
    """The columns of ``candidates`` (then ``auto`` with the whole epsilon, ``len(candidates)``)
    that ``model`` chooses on the rows of ``x``: a constant ``auto`` buys no features and runs
    with the whole epsilon."""
    if model.constant() == "auto":
        return np.full(len(x), len(candidates))
    missing = sorted(set(model.candidates) - set(candidates))
    if missing:
        raise SystemExit(f"the list chooses {missing}, which the scored table does not measure in every row")
    column = np.array([candidates.index(c) for c in model.candidates])
    return column[model.choose_index(x)]


def fold_selectors(validation: dict, fit_name: str | None = None) -> dict[str, GridSelector]:
    """A fit's list per held-out shape (the ``folds`` of a validation file; the shipped fit's
    unless ``fit_name`` is given)."""
    fit_name = fit_name or validation.get("shipped", "rules")
    if fit_name not in validation:
        raise SystemExit(f"the validation file has no fit {fit_name!r}")
    if "folds" not in validation[fit_name]:
        raise SystemExit("the validation file has no folds: write it again with the current train_auto_grid.py")
    return {shape: GridSelector.from_dict(model) for shape, model in validation[fit_name]["folds"].items()}


def score_folds(path: str, test_path: str, weighted_paths: str = "", fit_name=None, names=None) -> dict:
    """``--score-folds``: the held-out lists (``folds``) of one fit of a validation file scored on a
    test table without fitting again, each shape's cells by the list fitted without it (an UNSEEN
    shape's by the list fitted on every shape), the best taken over ``names`` (comma-separated;
    default: the validation's candidates): two fits on different candidates compared on one best."""
    with open(path) as handle:
        validation = json.load(handle)
    folds = fold_selectors(validation, fit_name)
    fit_name = fit_name or validation.get("shipped", "rules")
    candidates = tuple(names.split(",")) if names else tuple(validation["candidates"])
    if candidates[0] != "auto":
        raise SystemExit(f"the scored candidates must start with auto, not {candidates[0]!r}")
    rows = read_rows(test_path)
    test_x, _, test_keys, test_per_row = table(rows, candidates)
    weighted = load_weighted(weighted_paths, [trial_key(r) for r in rows]) if weighted_paths else None
    shapes = np.array([k[0] for k in test_keys])
    test = (test_x, test_keys, test_per_row)
    report: dict = {"validation": path, "fit": fit_name, "candidates": list(candidates)}
    for part, held in (("dpbench", DPBENCH), ("unseen", sorted(set(shapes) - set(DPBENCH)))):
        cells = []
        for shape in held:
            if shape in folds and (shapes == shape).any():
                cells.extend(fold_cells(folds[shape], np.flatnonzero(shapes == shape), test, candidates, weighted))
        if not cells:
            continue
        figures = {**summary(cells), "cells_above_2": sum(c["regret"] > 2 for c in cells)}
        moved = [c["weighted_auto"] for c in cells if "weighted_auto" in c]
        if moved:
            figures["weighted_auto"] = {**summary(moved), "cells_above_2": sum(c["regret"] > 2 for c in moved)}
        # the cells above 2 as a release runs them: auto's choices by the weighted branch where measured
        shown = [c.get("weighted_auto", c) for c in cells]
        figures["above_2"] = sorted((c for c in shown if c["regret"] > 2), key=lambda c: -c["regret"])
        report[part] = figures
    return report


def weighted_summaries(cells, prefix: str) -> dict:
    """The summaries of the cells' ``weighted_auto`` figures (those with and without the refit
    branch), named with ``prefix``; none where no cell has them."""
    out = {}
    for variant, pick_cell in (("", lambda c: c), ("without_refit_", lambda c: c.get("without_refit") or {})):
        moved = [pick_cell(c)["weighted_auto"] for c in cells if "weighted_auto" in pick_cell(c)]
        if moved:
            out[f"{prefix}{variant}weighted_auto"] = summary(moved)
    return out


def always(index: int, per_row, keys) -> dict:
    """The regret of one fixed candidate on the DPBench cells (baselines)."""
    cells: dict = {}
    for i, key in enumerate(keys):
        if key[0] in DPBENCH:
            cells.setdefault(key, []).append(i)
    means = [per_row[rows].mean(axis=0) for rows in cells.values()]
    regret = np.array([m[index] / m.min() for m in means])
    to_auto = np.array([m[index] / m[-1] for m in means])
    return {
        "regret_geo_mean": float(np.exp(np.log(regret).mean())),
        "regret_mean": float(regret.mean()),
        "regret_worst": float(regret.max()),
        "to_auto_worst": float(to_auto.max()),
    }


def speed(sides=(256, 1024), repeats: int = 20) -> dict:
    """CPU seconds of the features and the choice (what auto-data adds before the chosen
    mechanism runs), medians of ``repeats``, on GOWALLA sampled at 10^7 records."""
    out = {}
    for side in sides:
        p = distribution("GOWALLA", 256)
        if side > 256:
            p = np.kron(p, np.ones((side // 256, side // 256))) / (side // 256) ** 2
        counts = sample(p, 10**7, seed=0)
        mech = AutoDataGrid()
        seconds = []
        for r in range(repeats):
            start = time.process_time()
            *noisy, _ = mech.features(counts, 1.0, rng=r)
            boundary = workload_boundary(mech.workload, counts.shape, mech.order)
            choose_grid(*noisy, counts.size, mech.shares(1.0)[-1], boundary)
            seconds.append(time.process_time() - start)
        out[f"{side}x{side}"] = {"median_cpu_s": float(np.median(seconds)), "repeats": repeats}
    return out


#: The fits validated, as (kind, depth): trees of depth 1 and 2, ridge, the rules list (``--kinds``).
FITS = (("tree", 1), ("tree", 2), ("ridge", 0), ("rules", 0))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument(
        "--first-trial", type=int, default=0, help="the first trial's number (fresh samples and seeds: a test table)"
    )
    parser.add_argument("--test", default=None, help="score the held-out shapes on this table of fresh trials")
    parser.add_argument(
        "--feature-draws",
        type=int,
        default=0,
        help="only score --selector on --test's cells (with --weighted), each trial's choice averaged over this "
        "many draws of the features' noise (JSON; DPBench cells scored by a selector fitted on them are labelled so)",
    )
    parser.add_argument("--sides", default="32,64,128,256")
    parser.add_argument("--scales", default="1e3,1e4,1e5,1e6,1e7")
    parser.add_argument("--shapes", default=",".join((*DPBENCH, *SYNTHETIC)))
    parser.add_argument("--measurements", default="auto_grid_training.jsonl")
    parser.add_argument("--reuse", action="store_true", help="fit on the measurements file without measuring")
    parser.add_argument(
        "--measure-only",
        action="store_true",
        help="only measure the table (--measurements; e.g. a --test table), fitting and writing no selector",
    )
    parser.add_argument("--selector", default=SELECTOR)
    parser.add_argument("--validation", default="auto_grid_validation.json")
    parser.add_argument("--alpha", type=float, default=10.0, help="ridge penalty")
    parser.add_argument("--leaf", type=int, default=100, help="tree: least rows per leaf")
    parser.add_argument(
        "--margins", default="0,0.5,1,1.5,2,2.5", help="log-ratios a data-aware choice must beat auto by"
    )
    parser.add_argument("--to-auto", type=float, default=1.2, help="the shipped fit's worst cell against auto")
    parser.add_argument(
        "--stage-to-auto",
        type=float,
        default=1.3,
        help="rules: the bound on a training cell's ratio to auto when a later stage's branch is fitted",
    )
    parser.add_argument(
        "--hinge", type=float, default=10.0, help="rules: the price of a log-ratio to auto above 0, against a regret"
    )
    parser.add_argument("--clip", type=float, default=3.0, help="ridge: targets clipped to +-clip (log-ratio)")
    parser.add_argument("--speed", action="store_true", help="only time the features and the choice (JSON)")
    parser.add_argument(
        "--measure-weighted",
        default=None,
        help="only measure auto_toward_nonnegative (auto-data's weighted auto branch) on --shapes, --sides, "
        "--scales, --trials from --first-trial, appending rows to this file",
    )
    parser.add_argument(
        "--add-candidates",
        default=None,
        help="only measure these candidates (comma-separated, of GRID_CANDIDATES) on every cell and trial of the "
        "--measurements table, writing it with their MSEs added to --added",
    )
    parser.add_argument("--added", default=None, help="where --add-candidates writes the table")
    parser.add_argument(
        "--drop-candidates",
        default="",
        help="fit as if these candidates (comma-separated) had not been measured: a list fitted before they "
        "were added (the one shipped before agrid_fine) is fitted again as it was",
    )
    parser.add_argument(
        "--refeature",
        default=None,
        help="only draw the features of the --measurements rows again with the current feature steps (same "
        "samples and seeds, MSEs kept), writing the rows to this file",
    )
    parser.add_argument(
        "--weighted",
        default="",
        help="files of --measure-weighted rows (comma-separated): score the folds' auto choices with them too",
    )
    parser.add_argument(
        "--auto-branch",
        choices=("least-squares", "weighted"),
        default="least-squares",
        help="what the candidate auto releases: least squares (its exact MSE), or weighted: "
        "auto_toward_nonnegative's measured MSE from the --weighted files (rows without one dropped)",
    )
    parser.add_argument(
        "--score-folds",
        default=None,
        help="only score the held-out lists of this --validation file (its shipped fit's, or --fit's) on --test's "
        "cells (with --weighted where given), no fit (JSON)",
    )
    parser.add_argument("--fit", default=None, help="--score-folds: the fit whose folds are scored (default: shipped)")
    parser.add_argument(
        "--score-candidates",
        default=None,
        help="--score-folds: the candidates the best is taken over (comma-separated; default: the validation's), "
        "so that lists fitted on different candidates are scored on one best",
    )
    parser.add_argument("--kinds", default="tree,ridge,rules", help="the kinds of fit to validate")
    parser.add_argument(
        "--unseen-to-auto",
        type=float,
        default=None,
        help="the shipped fit's worst cell against auto on the UNSEEN shapes (default: --to-auto)",
    )
    parser.add_argument(
        "--skip", default="", help="fits not to validate, by name (e.g. rules-random: minutes a fold on two cores)"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="processes for the measurements and the held-out fits (default: one per core)",
    )
    args = parser.parse_args(argv)
    kinds = args.kinds.split(",")
    if not set(kinds) <= {kind for kind, _ in FITS}:
        parser.error(f"--kinds: unknown kind(s) {sorted(set(kinds) - {kind for kind, _ in FITS})}")
    if args.speed:
        print(json.dumps({"features_and_choice": speed()}, indent=1))
        return 0
    if args.feature_draws:
        if not (args.test and args.weighted):
            parser.error("--feature-draws scores a selector on --test's table: it needs --test and --weighted")
        with open(args.selector) as handle:
            selector = GridSelector.from_dict(json.load(handle))
        test_rows = read_rows(args.test)
        found = load_weighted(args.weighted, [trial_key(r) for r in test_rows])
        cells = feature_noise_cells(selector, test_rows, found, args.feature_draws)
        report = {"feature_draws": args.feature_draws, "selector": os.path.relpath(args.selector)}
        for name, kept in (
            ("unseen", [c for c in cells if c["shape"] not in DPBENCH]),
            ("dpbench_fitted_on", [c for c in cells if c["shape"] in DPBENCH]),
        ):
            if kept:
                report[name] = {**summary(kept), "cells_above_2": sum(c["regret"] > 2 for c in kept)}
        print(json.dumps(report, indent=1))
        return 0

    if args.score_folds:
        if not args.test:
            parser.error("--score-folds scores a validation's lists on --test's table: it needs --test")
        print(
            json.dumps(
                score_folds(args.score_folds, args.test, args.weighted, args.fit, args.score_candidates), indent=1
            )
        )
        return 0
    sides = [int(v) for v in args.sides.split(",")]
    scales = [int(float(v)) for v in args.scales.split(",")]
    if args.add_candidates:
        names = args.add_candidates.split(",")
        if unknown := [c for c in names if c not in GRID_CANDIDATES]:
            parser.error(f"--add-candidates: unknown candidates {unknown}; GRID_CANDIDATES are {GRID_CANDIDATES}")
        if not args.added:
            parser.error("--add-candidates needs --added FILE")
        add_candidates(read_rows(args.measurements), names, args.added, log, args.jobs)
        return 0
    if args.refeature:
        write_rows(args.refeature, refeature(read_rows(args.measurements), log))
        return 0
    if args.measure_weighted:
        measure_weighted(
            args.shapes.split(","), sides, scales, args.trials, args.measure_weighted, log, args.first_trial, args.jobs
        )
        return 0

    if args.reuse:
        rows = read_rows(args.measurements)
    else:
        rows = measure(
            args.shapes.split(","), sides, scales, args.trials, args.measurements, log, args.first_trial, args.jobs
        )
        if args.measure_only:
            return 0
    if args.drop_candidates:  # a column the training rows lack is no candidate (winners)
        dropped = set(args.drop_candidates.split(","))
        rows = [{**r, "mse": {c: v for c, v in r["mse"].items() if c not in dropped}} for r in rows]
    weighted_branch = args.auto_branch == "weighted"
    if weighted_branch:
        if not args.weighted:
            parser.error("--auto-branch weighted needs --weighted FILES")
        rows = with_weighted_auto(rows, args.weighted, log)
    candidates = winners(rows)
    x, ratio, keys, per_row = table(rows, candidates)
    test, scored_on, weighted = None, "the training rows", None
    if args.test:
        test_rows = read_rows(args.test)
        if weighted_branch:
            test_rows = with_weighted_auto(test_rows, args.weighted, log)
        test_x, _, test_keys, test_per_row = table(test_rows, candidates)
        test = (test_x, test_keys, test_per_row)
        trial_keys = [trial_key(r) for r in test_rows]
        weighted = load_weighted(args.weighted, trial_keys) if args.weighted and not weighted_branch else None
        scored_on = f"a test table of {len(test_rows)} rows, fresh trials {spans({r['trial'] for r in test_rows})}"
    # shapes of the test table that no fit trained on (UNSEEN): scored, never used to pick
    unseen = sorted({k[0] for k in test[1]} - {k[0] for k in keys}) if test else []
    results: dict = {}
    fitted_models: dict = {}
    skip = set(filter(None, args.skip.split(",")))
    # every fit is also tried fitted on random rectangles alone: which training set generalises
    # better to both workloads is decided by the validated figures, as the rest
    for fitted_on in (WORKLOADS, WORKLOADS[:1]):
        for kind, depth in [(k, d) for k, d in FITS if k in kinds]:
            for margin in [0.0] if kind == "rules" else (float(m) for m in args.margins.split(",")):
                name = (kind if kind == "rules" else f"{kind}{depth if kind == 'tree' else ''}-margin{margin:g}") + (
                    "" if len(fitted_on) > 1 else "-random"
                )
                if name in skip:
                    continue
                spec = (kind, depth, margin)
                common = (x, ratio, keys, per_row, candidates, args, fitted_on, test)
                folds: dict = {}
                cells = validate(spec, *common, DPBENCH, fitted_models, weighted, folds)
                by_workload = {w: summary([c for c in cells if c["workload"] == w]) for w in WORKLOADS}
                results[name] = {"kind": kind, "depth": depth, "margin": margin, "fitted_on": list(fitted_on)}
                results[name].update(summary=summary(cells), by_workload=by_workload, cells=cells)
                if cells and "without_refit" in cells[0]:  # the same folds' lists without their last stage
                    results[name]["without_refit"] = summary([c["without_refit"] for c in cells])
                results[name].update(weighted_summaries(cells, ""))
                if unseen:
                    others = validate(spec, *common, unseen, fitted_models, weighted, folds)
                    results[name].update(weighted_summaries(others, "unseen_"))
                    results[name]["unseen"] = summary(others)
                    results[name]["unseen_cells"] = others  # per cell, as "cells" (auto_grid_to_auto.py reads them)
                    if others and "without_refit" in others[0]:
                        results[name]["unseen_without_refit"] = summary([c["without_refit"] for c in others])
                # each held-out shape's list (the unseen ones': the list fitted on every shape), which
                # auto_grid_regret.py re-measures on fresh trials
                results[name]["folds"] = {held: model.to_dict() for held, model in folds.items()}
                log(f"{name}: {json.dumps(results[name]['summary'])}")
    # the unseen shapes are never trained on, but they gate the pick: a fit more than
    # --unseen-to-auto from auto on one of their cells does not ship (pick's held-out synthetic bound)
    chosen = pick(
        {k: {**v, "synthetic": v.get("unseen")} for k, v in results.items()}, args.to_auto, 1.0, args.unseen_to_auto
    )
    best = results[chosen]
    used = np.isin([k[4] for k in keys], best["fitted_on"])
    train_keys = [k for k, u in zip(keys, used) if u]
    spec = (best["kind"], best["depth"], best["margin"])
    selector = fitted_models.get((spec, tuple(best["fitted_on"]), used.tobytes()))
    if selector is None:
        selector = fit(*spec, x[used], ratio[used], candidates, args, train_keys, per_row[used])
    # always auto buys no features (a constant selector): auto with the whole epsilon, the last column
    scored = (test[2], test[1]) if test else (per_row, keys)
    baselines = {f"always {c}": always(-1 if c == "auto" else j, *scored) for j, c in enumerate(candidates)}
    if test and (oracle := setting_oracle((keys, per_row), (test[1], test[2]), candidates)):
        baselines["setting oracle"] = oracle
    if test and weighted is not None and (halves := split_half_oracle(test[1], test[2], weighted, candidates)):
        baselines["split-half oracle"] = halves
    selector.training = {
        "fit": chosen,
        "rows": int(used.sum()),
        "fitted_on": best["fitted_on"],
        "auto_branch": "weighted (auto_toward_nonnegative)" if weighted_branch else "least squares",
        "shapes": sorted({k[0] for k in keys}),
        "cells": sorted({k[1] for k in keys}),
        "scales": sorted({k[2] for k in keys}),
        "epsilons": sorted({k[3] for k in keys}),
        "workloads": [w + " (2000, seed 3)" for w in WORKLOADS],
        "trials": int(max(r["trial"] for r in rows) + 1),
        "loso": best["summary"],
        "loso_scored_on": scored_on,
        "unseen": best.get("unseen"),
        "baselines_loso": baselines,
        "script": "benchmarks/train_auto_grid.py",
    }
    with open(args.selector, "w") as handle:
        json.dump(selector.to_dict(), handle, indent=1)
        handle.write("\n")
    with open(args.validation, "w") as handle:
        json.dump(
            {"shipped": chosen, "features": list(GRID_FEATURES), "candidates": list(candidates), **results}, handle
        )
    report = {"shipped": chosen, "candidates": list(candidates), "baselines_loso": baselines}
    for k, v in results.items():  # the --weighted figures, where measured
        report.update({f"{k} {w}": v[w] for w in v if "weighted_auto" in w})
    shipped_by_workload = {"shipped_by_workload": best["by_workload"]}
    print(json.dumps({**report, **shipped_by_workload, **{k: v["summary"] for k, v in results.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

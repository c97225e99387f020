"""The former non-linear inference paths, kept once as references (issues 12 and 16).

* :func:`former_isotonic_l1`: integer L1 isotonic regression by pool adjacent violators,
  re-sorting every merged block for its smallest integer median (the code before
  ``consistency._isotonic_l1`` partitioned).  tests/inference/test_consistency.py checks that the
  partitioning path returns exactly its solution.
* :func:`former_admm`: ADMM on a tree's measurements as it ran before (Lee, Wang and Kifer,
  KDD 2015): per-level operators, ``tree_gls`` as the x-step at every iteration, the stopping
  rule tested every iteration.  tests/inference/test_tree_admm.py checks the O(nodes) path against it.

benchmarks/inference_speed.py imports this module by path to time the former paths beside
the new ones; nothing in ``src`` uses it.
"""

from __future__ import annotations

import math

import numpy as np

from dprange.inference.dispatch import _level, tree_of
from dprange.inference.dispatch import least_squares as gls
from dprange.inference.l1_admm import admm
from dprange.inference.tree import tree_gls
from dprange.operators import VStack


# ----------------------------------------------------------------------------- isotonic L1
def _smallest_integer_median(values: np.ndarray) -> int:
    s = np.sort(values)  # O(k log k) per merge: why the former path took minutes
    k = s.size
    low, high = s[(k - 1) // 2], s[k // 2]
    candidate = np.ceil(low)
    if candidate <= high:
        return int(candidate)
    below, above = np.floor(low), np.ceil(high)
    return int(below) if np.abs(below - s).sum() <= np.abs(above - s).sum() else int(above)


def former_isotonic_l1(y: np.ndarray, total: int) -> np.ndarray:
    """Pool adjacent violators with integer block medians (the code before partitioning),
    clipped to [0, total]."""
    starts: list[int] = []
    values: list[int] = []
    for j, yj in enumerate(y.tolist()):
        start = j
        value = math.ceil(yj - 0.5)
        while values and values[-1] > value:
            start = starts.pop()
            values.pop()
            value = _smallest_integer_median(y[start : j + 1])
        starts.append(start)
        values.append(value)
    out = np.empty(y.size, dtype=np.int64)
    bounds = starts + [y.size]
    for i, value in enumerate(values):
        out[bounds[i] : bounds[i + 1]] = value
    return np.clip(out, 0, total)


# ----------------------------------------------------------------------------- ADMM on trees
def former_tree_x_step(strategy, level_weights, total):
    """The x-step before: tree_gls on the level values, every call (O(nodes) each, with its
    allocations; the new path precomputes the variances per split)."""
    depths = [d for d in range(strategy.depth + 1) if level_weights[d] is not None]
    splits = np.cumsum([strategy.level_sizes[d] for d in depths])[:-1]
    leaf = strategy.depth

    def solve(target_rows, target_x, x_prev, split=1.0):
        values: list = [None] * (strategy.depth + 1)
        variances: list = [None] * (strategy.depth + 1)
        for d, part in zip(depths, np.split(target_rows, splits)):
            values[d] = part / level_weights[d]
            variances[d] = 1.0 / level_weights[d] ** 2
        if values[leaf] is None:
            values[leaf], variances[leaf] = target_x, 1.0 / split
        else:
            precision = 1.0 / variances[leaf] + split
            values[leaf] = (values[leaf] / variances[leaf] + split * target_x) / precision
            variances[leaf] = 1.0 / precision
        return tree_gls(strategy, values, variances, total=total).leaves

    solve.relax = 1.6  # type: ignore[attr-defined]
    return solve


def former_admm(measurements, *, alpha: float, rho: float = 2.0, tol: float = 1e-5, maxiter: int = 5000):
    """ADMM as it ran before on a tree's measurements: per-level operators, the tree_gls
    x-step, a test every iteration, from the clipped GLS start (alpha = 0: NNLS; 0.9: L1)."""
    tree = tree_of(measurements)
    ordered = sorted(measurements.measurements, key=_level)
    level_weights: list = [None] * (tree.depth + 1)
    for m in ordered:
        level_weights[_level(m)] = 1.0 / m.row_scales()
    return admm(
        VStack([m.block for m in ordered]),
        np.concatenate([np.asarray(m.values, dtype=float) for m in ordered]),
        np.concatenate([1.0 / m.row_scales() for m in ordered]),
        alpha=alpha,
        total=measurements.total,
        x_update=former_tree_x_step(tree, level_weights, measurements.total),
        tol=tol,
        maxiter=maxiter,
        x0=np.maximum(gls(measurements).leaves, 0.0),
        rho=rho,
        check_every=1,
    )

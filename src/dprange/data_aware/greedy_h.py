"""GreedyH: a workload-adapted weighting of a binary hierarchy, DAWA's second stage (Li, Hay,
Miklau and Wang, "A Data- and Workload-Aware Algorithm for Range Queries Under Differential
Privacy", PVLDB 2014, section 4).

The strategy is the binary hierarchy over m cells (here DAWA's buckets) with its rows at
depth d scaled by a weight c_d >= 0: A = [c_d T_d]_d, T_d the 0/1 node-indicator rows of depth
d.  Every cell lies in exactly one node per depth, so every column of A has L1 norm
sum_d c_d; measuring A x with Laplace noise of scale (changed * sum_d c_d) / epsilon is
epsilon-DP (changed: 1 add/remove, 2 replace).  Least squares then has the expected error,
averaged over the q queries of a workload W,

    err(c) = 2 (changed sum_d c_d / epsilon)^2 trace(W (A^T A)^-1 W^T) / q,

which is scale-free in c.  The weighted rows with unit-scale noise are the unweighted levels
with noise variance 1 / c_d^2, so (A^T A)^-1 is the covariance of tree GLS with those level
variances: :func:`weighted_error` evaluates err(c) in O(m) with the tree error model, no
dense matrix.  The same strategy is the binary :class:`~dprange.mechanisms.basic.Hierarchical`
with per-level budgets epsilon c_d / sum c (:func:`level_budgets`), which is how it is
measured, calibrated exactly and inferred.

The paper chooses one weight per node, greedily bottom-up, each minimising the error of the queries
inside the node's subtree.  Here the weights are per depth, which keeps the measurement a
level-uniform tree with its O(m) exact GLS: bottom-up, depth by depth, the weight of the next depth
up is the grid value minimising err(c) with the depths above it not yet measured (weight 0).  This
myopic choice alone can be poor (docs/data-aware.md, "Figures by module"), so the start of a sweep
of coordinate descent over the same grid is the best of it and the uniform hierarchies of branching
2^k (k = 1..6, every k-th depth weighted 1): the chosen strategy is never worse than any of them,
the plain binary hierarchy included.  A depth of weight 0 is skipped: the strategy is a
level-uniform tree with branching factors 2^gap.  All of it depends only on m, the workload and the
relation: it reads no data.
"""

from __future__ import annotations

import functools

import numpy as np

from .._validation import fit_budget
from ..analysis.error import workload_error
from ..inference.tree import tree_error_model
from ..strategies.trees import TreeStrategy
from ..workloads.ranges import make_workload

#: Candidate weights of a depth relative to the leaves (weight 1): 0 (not measured) and
#: 2^k for k = -3..3 (a finer grid gains little for twice the time: docs/data-aware.md).
GRID = (0.0, *(2.0**k for k in range(-3, 4)))


def binary_tree(m: int, known_total: bool) -> TreeStrategy:
    """The binary hierarchy over m cells (root measured unless the total is public)."""
    return TreeStrategy(m, 2, measure_root=True, known_total=known_total)


def weighted_error(m: int, weights, workload, epsilon: float, *, changed: int = 1, known_total: bool = False) -> float:
    """err(c) of the module doc: the average variance of least squares on the workload's
    queries over m cells, for the weights c (one per depth, root first; 0 = not measured,
    the leaves must be measured).  ``workload``: a name or a Workload over m cells.  With a
    public total the root is known exactly and its weight is ignored."""
    tree = binary_tree(m, known_total)
    c = np.asarray(weights, dtype=float)
    if c.size != tree.depth + 1:
        raise ValueError(f"need {tree.depth + 1} weights, got {c.size}")
    if known_total:
        c = c.copy()
        c[0] = 0.0
    variances = [None if w == 0 else 1.0 / w**2 for w in c]
    model = tree_error_model(tree, variances, known_total=known_total)  # cost: O(m)
    w = make_workload(workload, m) if isinstance(workload, str) else workload
    sensitivity = changed * float(c.sum())
    return 2.0 * (sensitivity / epsilon) ** 2 * workload_error(model, w)


def greedy_weights(m: int, workload, *, known_total: bool = False, sweeps: int = 1) -> np.ndarray:
    """Per-depth weights (root first): the greedy bottom-up ones (module doc) or, where one
    has a smaller error, the uniform weights of a hierarchy of branching 2^k (k = 1..6, root
    unmeasured), refined by ``sweeps`` passes of coordinate descent over the grid.  The
    result's error is at most that of every start, the plain binary hierarchy included.
    Cost: (1 + sweeps) x len(GRID) x depth evaluations of O(m) each."""
    tree = binary_tree(m, known_total)
    h = tree.depth
    w = make_workload(workload, m) if isinstance(workload, str) else workload
    top = 1 if known_total else 0

    def error(c):
        return weighted_error(m, c, w, 1.0, known_total=known_total)

    def best_at(weights, d):
        errors = []
        for g in GRID:
            trial = weights.copy()
            trial[d] = g
            errors.append(error(trial))
        return GRID[int(np.argmin(errors))], min(errors)

    weights = np.zeros(h + 1)
    weights[h] = 1.0
    for d in range(h - 1, top - 1, -1):  # greedy, bottom-up: the depths above d unmeasured
        weights[d] = best_at(weights, d)[0]
    starts = [weights] + [skips(h, top, k) for k in range(1, 7)]
    start_errors = [error(c) for c in starts]
    weights = starts[int(np.argmin(start_errors))]
    for _ in range(sweeps):  # refinement: every depth against all the others
        for d in range(h - 1, top - 1, -1):
            weights[d] = best_at(weights, d)[0]
    return weights


@functools.lru_cache(maxsize=256)
def cached_greedy_weights(m: int, workload: str, known_total: bool) -> tuple[float, ...]:
    """:func:`greedy_weights` for a named workload, cached (public arguments only)."""
    return tuple(greedy_weights(m, workload, known_total=known_total))


def skips(h: int, top: int, k: int) -> np.ndarray:
    """Uniform weights on every k-th depth up from the leaves (the hierarchy of branching
    2^k, root not measured): the starts the refinement compares with the greedy one."""
    c = np.zeros(h + 1)
    c[h::-k] = 1.0
    c[: max(top, 1)] = 0.0
    if not c[1:].any():
        c[h] = 1.0
    return c


def hierarchy_of(weights, epsilon: float, *, known_total: bool = False) -> tuple[list[int], bool, list[float]]:
    """(branching factors root first, measure_root, per-level budgets top down) of the
    :class:`~dprange.mechanisms.basic.Hierarchical` that measures the weighted strategy with total
    budget epsilon: the binary tree's depths of weight 0 are skipped (the tree keeps the same
    aligned nodes at the other depths, with branching 2^gap), budget_d = epsilon c_d / sum c
    with exact sum at most epsilon; a zero root weight leaves the root unmeasured."""
    c = np.asarray(weights, dtype=float)
    if c.size < 2 or c[-1] <= 0 or np.any(c < 0):
        raise ValueError("need a tree of depth >= 1 with its leaves weighted")
    kept = [0] + [d for d in range(1, c.size) if c[d] > 0]
    branching = [2 ** (b - a) for a, b in zip(kept, kept[1:])]
    measure_root = bool(c[0] > 0) and not known_total
    measured = kept if measure_root else kept[1:]
    levels = c[measured]
    return branching, measure_root, fit_budget(list(epsilon * levels / levels.sum()), epsilon)

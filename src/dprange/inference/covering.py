"""Range variances without constrained inference: the canonical decomposition on a tree.

A range is answered by summing the noisy counts of the fewest tree nodes that tile it (the
"covering" or canonical decomposition of Hay et al., "Boosting the accuracy of
differentially private histograms through consistency", PVLDB 2010; Qardaji, Yang, Li,
"Understanding hierarchical methods for differentially private histograms", PVLDB 2013,
section 3.2).  Its variance is the sum of those nodes' variances.  It serves the
covering estimator of CDF trees (:mod:`dprange.analysis.cdf_trees`, after Rameshwar and Tandon,
"Optimal Tree-Based Mechanisms for Differentially Private Approximate CDFs", 2024), local-DP
hierarchies without consistency (:mod:`dprange.ldp.analysis`) and the benchmarks."""

from __future__ import annotations

import numpy as np


def direct_range_variance(strategy, level_variances, lo, hi) -> np.ndarray:
    """Variance of ranges answered *without* constrained inference: sum the noisy counts of
    the fewest tree nodes that tile the range (the canonical decomposition; Qardaji, Yang
    and Li, PVLDB 2013, section 3.2).  Padding is empty, so a range ending at the last bin may use the last,
    partly padded node of a level.  ``level_variances[d]`` is a scalar or an array over the
    real nodes of depth d (e.g. from-below variances).  O(depth) vectorised operations per
    batch of queries.
    """
    lo = np.asarray(lo, dtype=np.int64).ravel()
    hi = np.asarray(hi, dtype=np.int64).ravel()
    start = lo.copy()
    stop = np.where(hi == strategy.n - 1, strategy.block_sizes[0], hi + 1)
    full = strategy.level_counts_full()
    variance = np.zeros(lo.size)
    active = start < stop
    top = 0 if strategy.measure_root else 1

    def node_sum(d, a, b):
        """Sum of the variances of nodes a..b-1 at depth d (padding-only nodes: 0)."""
        v = np.zeros(full[d])
        v[: strategy.level_sizes[d]] = level_variances[d]
        cum = np.concatenate([[0.0], np.cumsum(v)])
        return cum[b] - cum[a]

    for d in range(strategy.depth, top - 1, -1):
        if d == top or level_variances[d] is None:
            variance += np.where(active, node_sum(d, np.where(active, start, 0), np.where(active, stop, 0)), 0.0)
            break
        b = strategy.branching[d - 1]
        up = -(-start // b) * b
        down = (stop // b) * b
        finish = active & (up >= down)
        climb = active & ~finish
        a0, b0 = np.where(active, start, 0), np.where(active, stop, 0)
        whole = node_sum(d, a0, b0)
        edges = node_sum(d, a0, np.where(climb, up, a0)) + node_sum(d, np.where(climb, down, b0), b0)
        variance += np.where(finish, whole, 0.0) + np.where(climb, edges, 0.0)
        start, stop = np.where(climb, up // b, start), np.where(climb, down // b, stop)
        active = climb
    return variance

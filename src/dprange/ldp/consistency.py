"""The paper's two-stage consistency for HH_B, kept as a baseline for the exact one.

Cormode, Kulkarni, Srivastava (PVLDB 2019, section 4.5), after Hay et al. (VLDB
2010), on a complete B-ary tree over D = B^h values whose levels 1..h hold estimated node
frequencies f (the root is 1, or the public total):

* stage 1 (bottom up, weighted averaging), level i counted from the leaves (i = 1):
  fbar(v) = (B^i - B^(i-1)) / (B^i - 1) f(v) + (B^(i-1) - 1) / (B^i - 1) sum_children fbar(u);
* stage 2 (top down, mean consistency), with the already-adjusted parent (as in Hay et al. 2010):
  fhat(v) = fbar(v) + (fhat(parent) - sum_siblings_and_v fbar(u)) / B.

It is the least-squares solution only when every node has the same variance (as many users
at every level) and the root is measured like the others; with level sampling the realised
numbers of users differ, and dprange's releases use exact weighted least squares instead
(:func:`dprange.inference.tree.tree_gls`), which can only do better.  O(D) time.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError


def two_stage_consistency(branching: int, level_values: list, total: float = 1.0) -> list:
    """Hay et al.'s two-stage estimate; ``level_values[d]`` for depths d = 1..h (index 0
    ignored), a complete tree (level d has B^d nodes).  Returns fhat for depths 0..h."""
    b = int(branching)
    h = len(level_values) - 1
    for d in range(1, h + 1):
        if np.size(level_values[d]) != b**d:
            raise ParameterError(f"two-stage consistency needs a complete tree: level {d} must have {b**d} nodes")
    bar: list = [None] * (h + 1)
    bar[h] = np.asarray(level_values[h], dtype=float)
    for d in range(h - 1, 0, -1):
        i = h - d + 1
        children = bar[d + 1].reshape(-1, b).sum(axis=1)
        bar[d] = ((b**i - b ** (i - 1)) * np.asarray(level_values[d], dtype=float) + (b ** (i - 1) - 1) * children) / (
            b**i - 1
        )
    hat: list = [np.array([float(total)])] + [None] * h
    for d in range(1, h + 1):
        siblings = bar[d].reshape(-1, b).sum(axis=1)
        hat[d] = bar[d] + np.repeat((hat[d - 1] - siblings) / b, b)
    return hat

"""Reconstruction and exact error for Haar wavelet measurements (Privelet).

Xiao, Wang, Gehrke, "Differential Privacy via Wavelet Transforms", ICDE 2010, as analysed in
Qardaji, Yang and Li (PVLDB 2013, section 4).  The measurements of :class:`~dprange.strategies.trees.HaarStrategy`
(the total and, at every internal node, left count minus right count) form a square
invertible system on the padded domain, so the least-squares estimate is the inverse
transform, top-down: left = (s + d)/2, right = (s - d)/2.

Exact error of a range.  The estimate of the part Q_u of a range inside node u is
g_u * s_u + (independent noise of variance V_u), where s_u is the node's reconstructed count.
With children l, r of u and Var(d_u) the noise variance of u's difference:

    g_u = (g_l + g_r) / 2,      V_u = V_l + V_r + ((g_l - g_r) / 2)^2 Var(d_u),

covered nodes having g = 1, V = 0 and disjoint ones g = 0.  Var(range) = V_root +
g_root^2 Var(total): O(log n) vectorised operations per batch of queries.

All prefixes at once.  For the prefix 0..j every node is covered, disjoint or on the path
from leaf j to the root, and a path node at height h covers the fraction
g = ((j mod 2^h) + 1) / 2^h of its leaves.  The prefix's error is therefore one noise term
per level: E_j = sum_h c_h(j) e_h[j >> h] + g_root(j) e_total, with c_h = (g_l - g_r) / 2
(g_l = 1 when leaf j lies in the right child), which :func:`one_pass_haar_variances` sums
level by level for every j together.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ..strategies.trees import HaarStrategy
from .tree import PrefixVariances, compact_variances, flat_ranges


class HaarEstimate:
    """Least-squares estimate from Haar measurements and its exact range variances."""

    def __init__(self, strategy: HaarStrategy, padded_estimate: np.ndarray, level_variances: list):
        self.strategy = strategy
        self.padded = padded_estimate
        self.level_variances = level_variances

    @property
    def leaves(self) -> np.ndarray:
        return self.padded[: self.strategy.n]

    def to_dict(self) -> dict:
        """The padded Haar tree and its per-level noise variances: all :meth:`from_dict` needs
        to rebuild the error model exactly (level 0, the total, has variance 0 when public)."""
        return {
            "kind": "haar",
            "n": self.strategy.n,
            "known_total": self.strategy.known_total,
            "level_variances": [compact_variances(v) for v in self.level_variances],
        }

    @classmethod
    def from_dict(cls, data: dict) -> HaarEstimate:
        """The error model described by :meth:`to_dict` (its estimate is all zeros)."""
        haar = HaarStrategy(data["n"], known_total=bool(data["known_total"]))
        variances = [
            None if v is None else np.asarray(v, dtype=float) if isinstance(v, list) else float(v)
            for v in data["level_variances"]
        ]
        if len(variances) != haar.height + 1:
            raise ParameterError(f"a Haar tree over {haar.n} bins has {haar.height + 1} levels, not {len(variances)}")
        return haar_error_model(haar, variances, known_total=haar.known_total)

    def range_variance(self, lo, hi) -> np.ndarray:
        """Exact variance of the estimated count of bins lo..hi (inclusive), vectorised."""
        haar = self.strategy
        shape, left, right = flat_ranges(lo, hi, haar.n)
        g_left = np.ones(left.size)
        g_right = np.ones(left.size)
        v_left = np.zeros(left.size)
        v_right = np.zeros(left.size)
        for level in range(haar.height, 0, -1):
            var_d = np.broadcast_to(np.asarray(self.level_variances[level], dtype=float), (2 ** (level - 1),))
            p_left, p_right = left // 2, right // 2
            split = left < right
            merge = split & (p_left == p_right)
            apart = split & ~merge
            # Left parent: children (left child g, right child g).
            left_is_first = (left % 2) == 0
            sib_left = np.where(apart & left_is_first, 1.0, 0.0)
            first = np.where(left_is_first, g_left, sib_left)
            second = np.where(merge, g_right, np.where(left_is_first, sib_left, g_left))
            new_v_left = v_left + np.where(merge, v_right, 0.0) + ((first - second) / 2.0) ** 2 * var_d[p_left]
            new_g_left = (first + second) / 2.0
            # Right parent (only distinct when apart): sibling before it is covered.
            right_is_second = (right % 2) == 1
            r_first = np.where(right_is_second, 1.0, g_right)
            r_second = np.where(right_is_second, g_right, 0.0)
            new_v_right = np.where(apart, v_right + ((r_first - r_second) / 2.0) ** 2 * var_d[p_right], new_v_left)
            new_g_right = np.where(apart, (r_first + r_second) / 2.0, new_g_left)
            g_left, v_left, g_right, v_right = new_g_left, new_v_left, new_g_right, new_v_right
            left, right = p_left, p_right
        return (v_left + g_left**2 * self._total_variance()).reshape(shape)

    def prefix_variances(self) -> PrefixVariances:
        """Var of every prefix, every suffix and every bin in one pass over the levels.

        Equal to ``range_variance(0, j)``, ``range_variance(j + 1, n - 1)`` and
        ``range_variance(j, j)`` for all j (see :func:`one_pass_haar_variances`), without
        asking n ranges.  Computed once per estimate and kept.
        """
        cached = getattr(self, "_prefix_variances", None)
        if cached is None:
            cached = one_pass_haar_variances(self)
            self._prefix_variances = cached
        return cached

    def _total_variance(self) -> float:
        total_var = self.level_variances[0]
        return 0.0 if total_var is None else float(np.asarray(total_var).ravel()[0])

    def query_variance(self, weights) -> np.ndarray:
        """Exact variance of the estimate of sum_i q_i x_i for each row q of ``weights``.

        The recursion of :meth:`range_variance` over every node: O(padded size) per query.
        """
        haar = self.strategy
        q = np.atleast_2d(np.asarray(weights, dtype=float))
        if q.shape[-1] != haar.n:
            raise ParameterError(f"query weights must have {haar.n} entries per query")
        g = np.zeros((q.shape[0], haar.size))
        g[:, : haar.n] = q
        v = np.zeros(q.shape[0])
        for level in range(haar.height, 0, -1):
            pairs = g.reshape(q.shape[0], -1, 2)
            var_d = np.broadcast_to(np.asarray(self.level_variances[level], dtype=float), (pairs.shape[1],))
            v = v + (((pairs[:, :, 0] - pairs[:, :, 1]) / 2.0) ** 2 * var_d).sum(axis=1)
            g = pairs.mean(axis=2)
        out = v + g[:, 0] ** 2 * self._total_variance()
        return out if np.ndim(weights) > 1 else out[0]


def _path_coefficients(h: int) -> np.ndarray:
    """c_h for the 2^h offsets of leaf j inside its height-h ancestor: (g_l - g_r) / 2."""
    half = 2 ** (h - 1)
    offset = np.arange(2 * half)
    covered = ((offset % half) + 1) / half
    return np.where(offset >= half, (1.0 - covered) / 2.0, covered / 2.0)


def one_pass_haar_variances(estimate: HaarEstimate) -> PrefixVariances:
    """All prefix, suffix and bin variances of the Haar estimate (Xiao et al., ICDE 2010).

    With E_j = sum_h c_h(j) e_h[j >> h] + g_root(j) e_total the error of prefix j (module
    docstring), Var(prefix_j) = sum_h c_h(j)^2 Var(e_h[j >> h]) + g_root(j)^2 Var(total),
    Var(bin_j) = sum_h 4^-h Var(e_h[j >> h]) + 4^-height Var(total), and the suffix j+1..n-1
    is prefix_{n-1} - prefix_j, whose covariance term runs over the common ancestors of j
    and n - 1 only.  One vectorised operation over the padded domain per level; with one
    variance per level the prefixes of height h repeat every 2^h bins and the pass is O(n).
    """
    haar = estimate.strategy
    n, size, height = haar.n, haar.size, haar.height
    per_level = all(np.ndim(estimate.level_variances[level]) == 0 for level in range(1, height + 1))
    prefix = np.zeros(1 if per_level else size)  # per level: grown to 2^h bins at height h
    bins = np.zeros(size)
    cross = np.zeros(size)  # Cov(E_j, E_{n-1})
    last = n - 1
    for h in range(1, height + 1):
        level = height - h + 1
        var_d = np.broadcast_to(np.asarray(estimate.level_variances[level], dtype=float), (size >> h,))
        coeff = _path_coefficients(h)
        width = 2**h
        if per_level:  # one variance per level: prefix_j depends on j mod 2^h only, O(n) in all
            prefix = np.tile(prefix, 2) + coeff**2 * var_d[0]
            bins += var_d[0] / 4.0**h
        else:
            prefix.reshape(-1, width)[...] += coeff**2 * var_d[:, None]
            bins.reshape(-1, width)[...] += (var_d / 4.0**h)[:, None]
        node = last >> h
        cross[node * width : (node + 1) * width] += coeff * coeff[last % width] * var_d[node]
    var_total = estimate._total_variance()
    g_root = np.arange(1, size + 1) / size
    prefix += g_root**2 * var_total
    bins += var_total / 4.0**height
    cross += g_root * g_root[last] * var_total
    prefix = np.maximum(prefix[:n], 0.0)
    rest = np.maximum(prefix[last] + prefix - 2.0 * cross[:n], 0.0)
    rest[last] = 0.0
    return PrefixVariances(prefix, rest, bins[:n], float(prefix[last]))


def haar_estimate(strategy: HaarStrategy, level_values: list, level_variances: list, *, total=None) -> HaarEstimate:
    """Inverse-transform estimate from noisy Haar levels (level 0: total; None if public)."""
    levels = list(level_values)
    variances = list(level_variances)
    if total is not None:
        levels[0] = np.array([float(total)])
        variances[0] = 0.0
    elif levels[0] is None:
        raise ParameterError("the Haar total must be measured or given as the public total")
    padded = strategy.reconstruct([np.asarray(v, dtype=float) for v in levels])
    return HaarEstimate(strategy, padded, variances)


def haar_error_model(strategy: HaarStrategy, level_variances: list, *, known_total: bool = False) -> HaarEstimate:
    """The exact (data-independent) error model of Haar reconstruction, without data: the
    estimate of zero measurements is zero, so no transform runs (O(levels))."""
    variances = list(level_variances)
    if known_total:
        variances[0] = 0.0
    elif variances[0] is None:
        raise ParameterError("the Haar total must be measured or given as the public total")
    return HaarEstimate(strategy, np.zeros(strategy.size), variances)

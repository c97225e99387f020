"""The bins where a noisy cumulative count can cross a target: the quantile intervals'
search over n bins in blocks, with exact per-bin decisions.

For a level f with target t = f N, the quantile interval of
:meth:`dprange.answers.cdf.CumulativeEstimate.quantile_bins` needs the first bin j with
D_j + k sd_j >= 0 and the last with D_j - k sd_j < 0, where D_j = C_j - t (C the estimated
cumulative counts) and sd_j the exact standard deviation of P_j - f T.  Since

    Var(P_j - f T) = (1 - f) Var P_j + f Var R_j - f (1 - f) Var T

(R_j the rest after j, T = P_j + R_j), a block's largest Var P and Var R bound the variance
of every bin in it, and its largest and smallest C bound D.  Blocks that cannot hold a
crossing are skipped; inside the others every bin is decided by the same expression as in a
full scan, so the bins found are exactly those of the full scan.  Cost: O(n) for the block
summaries, shared by all levels, then O(n / block) per level plus the blocks evaluated
(usually one or two near the quantile).
"""

from __future__ import annotations

import numpy as np

#: Bins per block of the search.
SEARCH_BLOCK = 1 << 14


#: Relative slack added to a block's variance bound: covers the rounding of the per-bin
#: expression, so that a skipped block never holds a bin the full scan would have found.
_SLACK = 1e-9


def bin_sd(var_prefix, var_rest, var_total: float, f: float, public_total: bool) -> np.ndarray:
    """Exact standard deviation of the estimate of P_j - f T for the bins given.

    P_j - f T = (1 - f) P_j - f R_j: (1-f)^2 Var P + f^2 Var R - 2 f (1-f) Cov(P, R), with
    Cov(P, R) = (Var T - Var P - Var R) / 2; with a public total, sqrt(Var P)."""
    if public_total:
        return np.sqrt(np.maximum(var_prefix, 0.0)) + 0.0 * np.asarray(f)
    cov = (var_total - var_prefix - var_rest) / 2.0
    var = (1 - f) ** 2 * var_prefix + f**2 * var_rest - 2 * f * (1 - f) * cov
    return np.sqrt(np.maximum(var, 0.0))


def crossing_bins(prefix, var_prefix, var_rest, var_total, public_total: bool, targets, levels, k: float):
    """For every (target t_i, level f_i): the first bin j with (C_j - t_i) + k sd_j >= 0
    (n - 1 if none) and min(1 + the last bin with (C_j - t_i) - k sd_j < 0, n - 1) (0 if
    none); ``prefix`` is C, the variances those of :meth:`_linear_sd`'s three parts."""
    prefix = np.asarray(prefix, dtype=float)
    var_prefix = np.asarray(var_prefix, dtype=float)
    var_rest = np.asarray(var_rest, dtype=float)
    n = prefix.size
    starts = np.arange(0, n, SEARCH_BLOCK)
    top = np.fmax.reduceat(prefix, starts)  # cost: one pass over C (NaN bins never cross)
    bottom = np.fmin.reduceat(prefix, starts)
    top_p = np.fmax.reduceat(np.abs(var_prefix), starts)
    top_r = np.fmax.reduceat(np.abs(var_rest), starts)
    var_total = float(var_total)
    first = np.empty(len(levels), dtype=np.int64)
    last = np.empty(len(levels), dtype=np.int64)
    for i, (target, f) in enumerate(zip(targets, levels)):
        if public_total:
            bound = top_p
        else:
            bound = (1 - f) * top_p + f * top_r - f * (1 - f) * var_total
        bound = bound + _SLACK * (top_p + top_r + abs(var_total)) + 1e-300
        half = k * np.sqrt(np.maximum(bound, 0.0)) * (1 + _SLACK)
        # A block may hold a crossing unless its bound says otherwise (or the bound is not finite).
        may_reach = ~((top - target) + half < 0)
        may_short = ~((bottom - target) - half >= 0)

        parts = (prefix, var_prefix, var_rest, var_total, public_total, target, f, k)
        found = None
        for block in np.nonzero(may_reach)[0]:
            found = _decide(parts, int(block), True)
            if found is not None:
                break
        first[i] = n - 1 if found is None else found
        found = None
        for block in np.nonzero(may_short)[0][::-1]:
            found = _decide(parts, int(block), False)
            if found is not None:
                break
        last[i] = 0 if found is None else min(found + 1, n - 1)
    return first, last


def _decide(parts, block: int, upward: bool) -> int | None:
    """The first bin of ``block`` with D + k sd >= 0 (``upward``), else its last with
    D - k sd < 0; None when there is none (every bin decided as the full scan does)."""
    prefix, var_prefix, var_rest, var_total, public_total, target, f, k = parts
    lo = block * SEARCH_BLOCK
    hi = min(prefix.size, lo + SEARCH_BLOCK)
    d_hat = prefix[lo:hi] - target
    half = k * bin_sd(var_prefix[lo:hi], var_rest[lo:hi], var_total, f, public_total)
    hits = np.nonzero(d_hat + half >= 0)[0] if upward else np.nonzero(d_hat - half < 0)[0]
    if not hits.size:
        return None
    return lo + int(hits[0] if upward else hits[-1])

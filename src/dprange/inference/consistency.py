"""Consistent CDFs: the closest valid CDF to noisy cumulative counts.

Rameshwar and Tandon, "Optimal Tree-Based Mechanisms for Differentially Private Approximate
CDFs" (2024), section VI.  Given noisy cumulative counts
y_1..y_L of L bins and the total N, find integers

    0 <= c_1 <= c_2 <= ... <= c_{L-1} <= c_L = N

minimising sum_{j<L} f(c_j, y_j) for an additive loss f.  The result is a valid CDF
(c_j / N) and it is post-processing: no privacy cost.

* ``method="trellis"``: dynamic programming over stages j and states v in 0..N,
  D_j(v) = f(v, y_j) + min_{u <= v} D_{j-1}(u), with a running prefix minimum: O(L N) time,
  any loss (also non-convex).  The traceback keeps one bit per (stage, state), "v is a new
  prefix minimum", so L = 4096, N = 10^5 needs 51 MB, not the 3.3 GB of integer pointers.
* ``method="isotonic"`` (convex L1 and L2 losses): exact integer isotonic regression that
  scales to N = 10^9.  L2: the real isotonic regression (pool-adjacent-violators, scipy),
  clipped to [0, N] (clipping is optimal for bounded isotonic problems), then rounded,
  floor(x + 1/2): by the threshold theorem for separable convex isotonic problems
  (Hochbaum and Queyranne 2003) c_j >= t iff the real solution's level set at t - 1/2
  contains j, since f(t) - f(t-1) = 2 (t - 1/2 - y).  L1: the solution of
  pool-adjacent-violators whose blocks take the smallest integer minimiser of
  sum |v - y_j| (an integer next to the block median), computed by partitioning on
  thresholds in O(L log L) vectorised passes (:func:`_isotonic_l1`), clipped to [0, N].
  Its input is first clipped to [0, N]: for y > N and feasible
  v <= N, |v - y| = |v - N| + (y - N), so the minimisers do not change and every block value
  stays an int64.  Both are checked against the trellis on thousands of cases.

Limits: the total is at most 2^53 (:data:`MAX_TOTAL`, exact float64 arithmetic); the input
is a finite 1-D numeric array; the trellis has at most 2^25 states.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

import numpy as np

from dprange._lazy import lazy_module

from ..errors import ParameterError, excerpt

_optimize = lazy_module("scipy.optimize")


def isotonic_regression(*args, **kwargs):
    """scipy.optimize.isotonic_regression, imported on first call."""
    return _optimize.isotonic_regression(*args, **kwargs)


LOSSES = ("l1", "l2")


def _loss_function(loss) -> Callable:
    if callable(loss):
        return loss
    if loss == "l1":
        return lambda v, y: np.abs(v - y)
    if loss == "l2":
        return lambda v, y: (v - y) ** 2
    raise ParameterError(f"loss must be 'l1', 'l2' or a callable f(states, y), got {loss!r}")


#: The largest total accepted: every integer up to 2^53 is exact in float64, so the losses
#: and the isotonic solutions are computed without rounding.
MAX_TOTAL = 2**53


#: The trellis keeps float64 costs for every state 0..total: at most this many states.
MAX_TRELLIS_STATES = 2**25


def _check(noisy_cumulative, total):
    """(y as a 1-D float64 array, total as an int), or ParameterError saying what is wrong."""
    if isinstance(noisy_cumulative, (str, bytes)) or noisy_cumulative is None:
        raise ParameterError("noisy_cumulative must be a 1-D array of numbers")
    try:
        raw = np.asarray(noisy_cumulative)
    except (ValueError, TypeError):
        raise ParameterError("noisy_cumulative must be a 1-D array of numbers (got a ragged sequence)") from None
    if raw.ndim != 1:
        raise ParameterError(f"noisy_cumulative must be 1-D (one cumulative count per bin), got shape {raw.shape}")
    if raw.dtype.kind not in "iuf":
        raise ParameterError(f"noisy_cumulative must hold numbers, got dtype {raw.dtype}")
    y = raw.astype(float)
    if y.size == 0:
        raise ParameterError("noisy_cumulative is empty")
    if not np.all(np.isfinite(y)):
        raise ParameterError("noisy_cumulative must be finite")
    if isinstance(total, (bool, np.bool_)) or not isinstance(total, (numbers.Real, np.integer, np.floating)):
        raise ParameterError(f"total must be a non-negative integer, got {total!r}")
    try:
        whole = float(total).is_integer() if not isinstance(total, (numbers.Integral, np.integer)) else True
    except OverflowError:
        whole = False
    if not whole or total < 0 or total > MAX_TOTAL:  # type: ignore[operator]  # typeshed: numbers.Real has no <
        raise ParameterError(
            f"total must be a non-negative integer at most 2^53 (exact in float64), got {excerpt(repr(total))}"
        )
    return y, int(total)  # type: ignore[arg-type]  # typeshed: numbers.Real has no __int__


def consistent_cdf(noisy_cumulative, total, loss="l2", *, method: str = "auto") -> np.ndarray:
    """The integer, non-decreasing cumulative counts from 0 to ``total`` closest to the input.

    Parameters
    ----------
    noisy_cumulative : noisy cumulative counts y_1..y_L of bins 1..L (e.g. ``Release.prefix``
        values).  The last entry is ignored: c_L is ``total``.
    total : the number of records N (public, or a rounded estimate).
    loss : "l2", "l1" or a vectorised callable ``f(states, y_j)`` (any, even non-convex).
    method : "trellis" (any loss, O(L N)), "isotonic" (L1/L2, scales to N = 10^9) or
        "auto" (isotonic for L1/L2, trellis for callables).

    Returns an int64 array c of length L with 0 <= c_1 <= ... <= c_L = total.
    """
    y, total = _check(noisy_cumulative, total)
    if method == "auto":
        method = "isotonic" if loss in LOSSES else "trellis"
    if method == "trellis":
        free = _trellis(y[:-1], total, _loss_function(loss))
    elif method == "isotonic":
        if loss not in LOSSES:
            raise ParameterError("the isotonic method needs loss 'l1' or 'l2'; use method='trellis' for others")
        free = _isotonic_l2(y[:-1], total) if loss == "l2" else _isotonic_l1(np.clip(y[:-1], 0, total), total)
    else:
        raise ParameterError(f"method must be 'auto', 'trellis' or 'isotonic', got {method!r}")
    return np.append(free, total).astype(np.int64)


def _trellis(y: np.ndarray, total: int, f: Callable) -> np.ndarray:
    """Stages j = 1..L-1 over states 0..total; one bit per (stage, state) for the traceback."""
    stages = y.size
    if stages == 0:
        return np.zeros(0, dtype=np.int64)
    if stages * (total + 1) > 4 * 10**9 or total + 1 > MAX_TRELLIS_STATES:
        raise ParameterError(
            f"the trellis would need {stages} x {total + 1} cells (limits 4e9 cells, 2^25 states); "
            "use method='isotonic' (L1/L2)"
        )
    states = np.arange(total + 1, dtype=float)
    records = np.empty((stages, (total + 8) // 8), dtype=np.uint8)
    cost = np.asarray(f(states, y[0]), dtype=float)
    for j in range(1, stages):
        best = np.minimum.accumulate(cost)
        new_min = np.empty(total + 1, dtype=bool)
        new_min[0] = True
        new_min[1:] = cost[1:] < best[:-1]
        records[j - 1] = np.packbits(new_min)
        cost = best + np.asarray(f(states, y[j]), dtype=float)
    out = np.empty(stages, dtype=np.int64)
    v = int(np.argmin(cost))  # c_L = total >= every state: the last free stage is unconstrained
    out[-1] = v
    for j in range(stages - 1, 0, -1):
        row = np.unpackbits(records[j - 1], count=total + 1)[: v + 1]
        v = int(np.flatnonzero(row)[-1])  # argmin_{u <= v} of the previous stage's cost
        out[j - 1] = v
    return out


def _isotonic_l2(y: np.ndarray, total: int) -> np.ndarray:
    if y.size == 0:
        return np.zeros(0, dtype=np.int64)
    real = isotonic_regression(y, increasing=True).x
    return np.floor(np.clip(real, 0, total) + 0.5).astype(np.int64)


def _isotonic_l1(y: np.ndarray, total: int) -> np.ndarray:
    """The smallest optimal integer L1 isotonic fit of y (already clipped to [0, total]).

    Pool-adjacent-violators with the smallest integer minimiser of every pooled block gives
    the pointwise smallest optimal solution; this computes that solution without pooling:

    * Regions.  If ceil(max y_<k) <= floor(min y_>=k), no block crosses k (a block's value
      lies between the floor of its least and the ceiling of its largest value), so the
      regions between such k are solved apart; a one-bin region is ceil(y - 1/2).
    * Partitioning (Stout, "Isotonic regression via partitioning", Algorithmica 2013; the
      threshold theorem of Hochbaum and Queyranne, SIAM J. Computing 2003).  The values are
      among the floors and ceilings of y.  A segment of bins whose values lie in the
      candidates lo..hi is split at the middle pair a < b: the bins taking b or more are a
      suffix {j >= k} minimising sum_{j >= k} (|b - y_j| - |a - y_j|) / (b - a), each term
      +1 (y <= a), -1 (y >= b) or a + b - 2 y (a < y < b, then b = a + 1), the smallest such
      suffix for the smallest solution.  Bins before k keep lo..a, the others b..hi.

    Every level is a few vectorised passes over the unfinished bins and a segment's range
    halves per level: O(L log L) with no per-bin Python work.  The suffix choices compare
    integers unless a bin lies strictly between a and b, where sums of a + b - 2 y are
    compared in float64, like the float sums of pool-adjacent-violators' pooled medians.
    """
    size = y.size
    out = np.empty(size, dtype=np.int64)
    if size == 0:
        return out
    running_max = np.maximum.accumulate(y)
    running_min = np.minimum.accumulate(y[::-1])[::-1]
    apart = np.ceil(running_max[:-1]) <= np.floor(running_min[1:])
    region_start = np.concatenate([[0], np.flatnonzero(apart) + 1])
    region_size = np.diff(np.append(region_start, size))
    single = region_start[region_size == 1]
    out[single] = np.ceil(y[single] - 0.5)  # the smallest integer nearest to one value
    pooled = region_size > 1
    if pooled.any():
        _partition(y, np.flatnonzero(np.repeat(pooled, region_size)), region_size[pooled], out)
    return np.clip(out, 0, total)


def _partition(y: np.ndarray, index: np.ndarray, length: np.ndarray, out: np.ndarray) -> None:
    """Solve the regions of bins ``index`` (consecutive runs of ``length``) by partitioning,
    writing the values into ``out`` (see :func:`_isotonic_l1`)."""
    ya = y[index]
    start = np.concatenate([[0], np.cumsum(length)[:-1]])
    values = np.unique(np.concatenate([np.floor(ya), np.ceil(ya)]))  # cost: one sort of 2 x bins
    lo = np.searchsorted(values, np.floor(np.minimum.reduceat(ya, start)))
    hi = np.searchsorted(values, np.ceil(np.maximum.reduceat(ya, start)))
    while True:
        done = lo == hi
        if done.any():  # whole segments finish: write them and drop their bins
            finished = np.repeat(done, length)
            out[index[finished]] = np.repeat(values[lo[done]], length[done])
            index, ya = index[~finished], ya[~finished]
            lo, hi, length = lo[~done], hi[~done], length[~done]
            if not index.size:
                return
            start = np.concatenate([[0], np.cumsum(length)[:-1]])
        mid = (lo + hi + 1) >> 1
        a = np.repeat(values[mid - 1], length)  # cost: the passes of one level over the bins
        b = np.repeat(values[mid], length)
        k = _smallest_best_suffix(ya, a, b, start, length)
        stop = start + length
        new_length = np.stack([k - start, stop - k], axis=1).ravel()  # below k, then from k
        keep = new_length > 0
        start = np.stack([start, k], axis=1).ravel()[keep]
        lo, hi = np.stack([lo, mid], axis=1).ravel()[keep], np.stack([mid - 1, hi], axis=1).ravel()[keep]
        length = new_length[keep]


def _smallest_best_suffix(ya, a, b, start, length) -> np.ndarray:
    """Per segment, the largest k (start <= k <= start + length) minimising the sum over
    j >= k of the cost of b over a (+1, -1 or a + b - 2 y): the smallest best suffix."""
    m = ya.size
    below = ya <= a
    above = ya >= b
    step = below.view(np.int8) - above.view(np.int8)
    prefix = np.cumsum(step, dtype=np.int64)
    # The suffix from k costs prefix[end] - prefix[k - 1]: least where prefix[k - 1] is largest.
    base = prefix[start] - step[start]  # the prefix before each segment (k = start)
    position = np.arange(m, dtype=np.int64)
    if np.count_nonzero(below) + np.count_nonzero(above) == m and m < 2**30:
        key = prefix * (m + 1)  # exact integers: the largest prefix, then the last position
        key += position
        top, last = np.divmod(np.maximum.reduceat(key, start), m + 1)
    else:  # some y strictly between a and b = a + 1: fractional costs a + b - 2 y
        segment = np.repeat(np.arange(start.size), length)
        fraction = np.where(below | above, 0.0, (a + b) - 2.0 * ya)
        fraction_sum = np.cumsum(fraction)
        gain = (prefix - base[segment]) + (fraction_sum - (fraction_sum[start] - fraction[start])[segment])
        top = np.maximum.reduceat(gain, start)
        last = np.maximum.reduceat(np.where(gain == top[segment], position, -1), start)
        base = np.zeros(start.size)
    return np.where(top >= base, last + 1, start)

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
  contains j, since f(t) - f(t-1) = 2 (t - 1/2 - y).  L1: pool-adjacent-violators whose
  blocks take the smallest integer minimiser of sum |v - y_j| (an integer next to the block
  median), clipped to [0, N].  Its input is first clipped to [0, N]: for y > N and feasible
  v <= N, |v - y| = |v - N| + (y - N), so the minimisers do not change and every block value
  stays an int64.  Both are checked against the trellis on thousands of cases.

Limits: the total is at most 2^53 (:data:`MAX_TOTAL`, exact float64 arithmetic); the input
is a finite 1-D numeric array; the trellis has at most 2^25 states.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import numpy as np

from .._lazy import lazy_module
from ..errors import ParameterError, excerpt

_optimize = lazy_module("scipy.optimize")  # imported on first use: ~0.3 s that `import dprange` skips


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


def _smallest_integer_median(values: np.ndarray) -> int:
    """Smallest integer minimising sum |v - y| over v."""
    s = np.sort(values)
    k = s.size
    low, high = s[(k - 1) // 2], s[k // 2]
    candidate = np.ceil(low)
    if candidate <= high:
        return int(candidate)
    below, above = np.floor(low), np.ceil(high)  # the real minimisers lie strictly between
    return int(below) if np.abs(below - s).sum() <= np.abs(above - s).sum() else int(above)


def _isotonic_l1(y: np.ndarray, total: int) -> np.ndarray:
    """Pool adjacent violators with integer block medians (O(L) blocks, O(block) per merge)."""
    starts: list[int] = []
    values: list[int] = []
    for j, yj in enumerate(y.tolist()):
        start = j
        value = math.ceil(yj - 0.5)  # smallest integer nearest to a single value
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

"""JointExp (Gillenwater, Joseph and Kulesza, ICML 2021): all quantiles at once by one exponential
mechanism over sorted intervals, with its floating-point error charged and its outputs on a
public grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from .._validation import check_epsilon
from ..errors import DataError, ParameterError
from ..privacy.exact_choice import exact_choice
from ..privacy.samplers import resolve_rng
from .grid import QuantileGrid, check_bounds, check_levels, check_neighbours

#: JointExp's output cells on real bounds unless ``cells`` is given: fine enough that the law is
#: the continuous one's for every pair of records more than 2^-40 of the range apart
JOINT_CELLS = 2**40


#: JointExp's grid positions (cells x sub-cells) at most: every interval length is then a whole
#: number below 2^52, exact in double
JOINT_MAX_POSITIONS = 2**52


@dataclass(frozen=True)
class JointGrid:
    """JointExp's public grid: ``cells`` (the integers a..b, or equal cells of [a, b]) each cut
    into ``subcells`` positions; records are placed at positions and outputs are the values of
    the cells of positions, so that no published float is computed from a data value (Mironov,
    "On Significance of the Least Significant Bits for Differential Privacy", CCS 2012).

    A record's position is its cell times ``subcells`` plus a secure-uniform sub-cell (integer
    data: the grid version of the authors' jitter, which breaks ties), a public function of
    the record and of randomness independent of the data.  Real bounds use :data:`JOINT_CELLS`
    (or ``cells``) and one position per cell; integer ranges wider than
    :data:`JOINT_MAX_POSITIONS` use real cells of [a, b + 1) and floor the values (``floored``).
    """

    cells: QuantileGrid
    subcells: int
    floored: bool = False

    @classmethod
    def from_bounds(cls, bounds, *, integer: bool, cells: int | None = None) -> JointGrid:
        lo, hi = check_bounds(bounds, integer=integer)
        if integer:
            size = int(hi) - int(lo) + 1
            if size > JOINT_MAX_POSITIONS:
                return cls(QuantileGrid(lo, hi + 1.0, JOINT_CELLS, False), 1, floored=True)
            return cls(QuantileGrid(lo, hi, size, True), 1 << ((JOINT_MAX_POSITIONS // size).bit_length() - 1))
        count = JOINT_CELLS if cells is None else cells
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or not 1 <= count <= JOINT_MAX_POSITIONS:
            raise ParameterError(f"JointExp's cells must be a whole number from 1 to 2^52, got {cells!r}")
        return cls(QuantileGrid(lo, hi, int(count), False), 1)

    @property
    def positions(self) -> int:
        return self.cells.cells * self.subcells

    def place(self, values, rng) -> np.ndarray:
        """The sorted positions of the records (values clipped into the bounds), as int64."""
        index = self.cells.index(values)
        if self.subcells > 1:
            index = index * self.subcells + np.asarray(rng.integers(0, self.subcells, size=index.size), dtype=np.int64)
        return np.sort(index)

    def value(self, positions) -> np.ndarray:
        """The published value of positions: their cell's integer or midpoint (floored)."""
        out = self.cells.value(np.asarray(positions, dtype=np.int64) // self.subcells)
        return np.minimum(np.floor(out), self.cells.hi - 1.0) if self.floored else out

    def to_dict(self) -> dict:
        values = "floored cell midpoints" if self.floored else "integers" if self.cells.integer else "cell midpoints"
        return {
            "lower": self.cells.lo,
            "upper": self.cells.hi - 1.0 if self.floored else self.cells.hi,
            "cells": self.cells.cells,
            "subcells": self.subcells,
            "values": values,
        }


def _uniform_points(starts: np.ndarray, ends: np.ndarray, rng) -> np.ndarray:
    """One uniform integer on [start, end) per pair (exact: ``rng.integers``, the secure source
    by default): the positions of outputs drawn uniformly in the chosen intervals."""
    return np.array([int(rng.integers(int(s), int(e))) for s, e in zip(starts, ends, strict=True)], dtype=np.int64)


def joint_sensitivity(levels: np.ndarray, neighbours: str) -> float:
    """Sensitivity of the JointExp score -sum_i |n_i - g_i n| over the m + 1 gaps g_i (the
    float differences q_i - q_{i-1} the sampler uses): 2 under replace (two gap counts move by
    1), 1 + G - 2 min g under add/remove (one count moves by 1 and every target by its gap),
    G = sum g; as 2 (1 - min g) if G were 1, but the float gaps can sum to 1 + a few ulps and
    1 - min g can round down, so it is computed exactly and rounded up (O(m) fractions)."""
    if neighbours == "replace":
        return 2.0
    gaps = [Fraction(g) for g in np.diff(np.concatenate([[0.0], levels, [1.0]])).tolist()]
    exact = 1 + sum(gaps) - 2 * min(gaps)
    out = float(exact)
    return out if Fraction(out) >= exact else math.nextafter(out, math.inf)


def joint_scale(epsilon: float, sensitivity: float) -> float:
    """The exponential mechanism's scale epsilon / (2 sensitivity), rounded down if division
    rounded it up, so that 2 x scale x sensitivity <= epsilon exactly."""
    scale = epsilon / (2.0 * sensitivity)
    while 2 * Fraction(scale) * Fraction(sensitivity) > Fraction(epsilon):
        scale = math.nextafter(scale, 0.0)
    return scale


def _prefix_logsumexp(rows: np.ndarray) -> np.ndarray:
    """Running log-sum-exp along each row of a 2-D array (the inclusive prefixes), in two levels
    so that every output is a chain of at most min(L - 1, 2 ceil(sqrt L) - 2) log-add-exps, L
    the row length, instead of numpy's accumulate's L - 1: running sums inside blocks of w =
    ceil(sqrt L) entries (chains of w - 1), running sums of the block totals (one more per
    block: at most w + ceil(L / w) - 3 before the last block), and one log-add-exp joining the
    two.  Rounding errors add along chains (:func:`joint_log_error_bound`), so this cuts the
    error of a log-sum over n records from n to about 2 sqrt(n) roundings, for about twice
    the log-add-exps.  Rows of at most 4 entries use the plain accumulate."""
    count, length = rows.shape
    if length <= 4:
        return np.logaddexp.accumulate(rows, axis=1)
    width = math.isqrt(length - 1) + 1  # ceil(sqrt(length))
    blocks = -(-length // width)
    padded = np.full((count, blocks * width), -np.inf, dtype=rows.dtype)
    padded[:, :length] = rows
    inner = np.logaddexp.accumulate(padded.reshape(count, blocks, width), axis=2)  # O(L) log-add-exps
    before = np.logaddexp.accumulate(inner[:, :-1, -1], axis=1)  # totals of blocks 0..b, b < blocks - 1
    inner[:, 1:, :] = np.logaddexp(inner[:, 1:, :], before[:, :, None])  # O(L) log-add-exps
    return inner.reshape(count, blocks * width)[:, :length]


def _window_logsumexp(z: np.ndarray, width: int) -> np.ndarray:
    """log sum_{i - width <= i' < i} exp(z[i']) for every i (the ``width`` entries before i),
    with additions of positive terms only: each window is a suffix of one block of ``width``
    entries plus a prefix of the next (:func:`_prefix_logsumexp` inside the blocks: chains of
    at most min(width - 1, 2 ceil(sqrt(width)) - 2) + 1 log-add-exps)."""
    n = z.size
    out = np.full(n, -np.inf, dtype=z.dtype)
    if width <= 0 or n <= 1:
        return out
    blocks = -(-n // width)
    padded = np.full(blocks * width, -np.inf, dtype=z.dtype)
    padded[:n] = z
    grid = padded.reshape(blocks, width)
    prefix = _prefix_logsumexp(grid).ravel()
    suffix = _prefix_logsumexp(grid[:, ::-1])[:, ::-1].ravel()
    i = np.arange(1, n)
    lo, hi = i - width, i - 1
    inside = lo >= 0
    aligned = inside & (lo % width == 0)
    out[1:] = np.where(inside, np.logaddexp(suffix[np.maximum(lo, 0)], prefix[hi]), prefix[hi])
    out[1:][aligned] = prefix[hi[aligned]]
    return out


def _log_toeplitz_strict(scale: float, target, log_x: np.ndarray) -> np.ndarray:
    """log sum_{i' < i} exp(log_x[i'] - scale |i - i' - target|) for every i, in O(n).

    The kernel is exponential on each side of the target, so the sum splits into the
    distances d = i - i' >= ceil(target) (a running log-sum of log_x[i'] + scale i') and
    1 <= d < ceil(target) (a sliding window of log_x[i'] - scale i'): positive terms added in
    log space by :func:`_prefix_logsumexp`, chains of O(sqrt(n)) roundings of u (the unit
    roundoff of log_x's dtype) per entry (an FFT's error would be absolute).  ``target`` is kept
    in that dtype (its ceiling taken exactly).
    """
    n = log_x.size
    steps = scale * np.arange(n, dtype=log_x.dtype)
    split = max(1, int(np.ceil(target)))
    with np.errstate(invalid="ignore"):
        near = -scale * target + steps + _window_logsumexp(log_x - steps, split - 1)
        far = np.full(n, -np.inf, dtype=log_x.dtype)
        if split < n:
            running = _prefix_logsumexp((log_x + steps)[None, :])[0]
            far[split:] = scale * target - steps[split:] + running[: n - split]
        out = np.logaddexp(near, far)
    out[np.isnan(out)] = -np.inf
    return out


_NEGLIGIBLE = 50.0  # nats: a run this far below a shorter run of the same interval is dropped


def _truncate(rows: list, n: int) -> list:
    """Drop negligible long runs in the forward pass; ``rows[k]`` = (first column, log
    weights) of the runs of k + 1 quantiles, finite only on a span of columns.

    Entry (k, i) is set to -inf when it is more than 50 nats below a shorter run in the same
    interval i: later quantiles extend both alike but for the factor 1 / (k + 2), which
    favours the shorter, so the dropped placements stay below e^-50 of kept ones (relative
    error of every total below m e^-50).  Each row keeps the span of its finite entries.
    """
    best = np.full(n, -np.inf, dtype=rows[0][1].dtype)
    out = []
    for start, values in rows:
        if values.size:
            shorter = best[start : start + values.size]
            values = np.where(values < shorter - _NEGLIGIBLE, -np.inf, values)
            np.maximum(shorter, values, out=shorter)
            finite = np.flatnonzero(np.isfinite(values))
            start, values = (start + finite[0], values[finite[0] : finite[-1] + 1]) if finite.size else (0, values[:0])
        out.append((start, values))
    while len(out) > 1 and out[-1][1].size == 0:
        out.pop()
    return out


def _sum_rows(rows: list, n: int) -> np.ndarray:
    """log of the sum over rows of exp(row), as a dense array of n columns."""
    total = np.full(n, -np.inf, dtype=rows[0][1].dtype)
    for start, values in rows:
        np.logaddexp(total[start : start + values.size], values, out=total[start : start + values.size])
    return total


def _rounded_logs(count: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(log k for k = 0..count - 1 (log 0 = -inf), log k! for k = 0..count - 1) in ``dtype``,
    each within one rounding (u relative) of the truth: 40-digit Decimal values converted once
    (a correctly rounded string conversion), so no library log or chain of additions."""
    with localcontext() as ctx:
        ctx.prec = 40
        logs = [Decimal("-Infinity")] + [Decimal(k).ln() for k in range(1, count)]
        factorials = [Decimal(0)]
        for k in range(1, count):
            factorials.append(factorials[-1] + logs[k])
    as_dtype = np.dtype(dtype).type
    return np.array([as_dtype(str(v)) for v in logs], dtype=dtype), np.array(
        [as_dtype(str(v)) for v in factorials], dtype=dtype
    )


class _JointTables:
    """The dynamic program of JointExp in log space, O(m n) memory, in the dtype of
    ``log_lengths`` (float64, or long double for the extended path).

    first[j, i]: total weight of placements of quantiles 0..j with quantile j the first of
    its run in interval i (the previous quantile in an earlier interval).  A run of k + 1
    quantiles j-k..j in interval i has weight first[j-k, i] + sum_{t=j-k+1..j} (phi_t(0) +
    log L_i) - log((k+1)!): k + 1 sorted uniforms in an interval of length L have volume
    L^(k+1) / (k+1)!.  The forward pass keeps the rows of the current j only.
    """

    def __init__(self, log_lengths: np.ndarray, log_phi: np.ndarray, m: int, scale: float, targets: np.ndarray):
        dtype = log_lengths.dtype
        self.log_lengths = log_lengths
        self.log_phi = log_phi  # (n + 1) x (m + 1): log phi_t(d), d points in gap t
        self.stay = np.cumsum(np.concatenate([np.zeros(1, dtype=dtype), log_phi[0, 1:m]]))  # sum of phi_t(0)
        log_k, self.log_factorial = _rounded_logs(m + 2, dtype)  # log k, log k! in the working dtype
        self.first = np.empty((m, log_lengths.size), dtype=dtype)
        self.first[0] = log_phi[:, 0] + log_lengths
        self.totals = np.empty((m, log_lengths.size), dtype=dtype)  # log sum over run lengths, per j and interval
        n = log_lengths.size
        rows = _truncate([(0, self.first[0].copy())], n)
        for j in range(1, m):
            self.totals[j - 1] = _sum_rows(rows, n)
            self.first[j] = log_lengths + _log_toeplitz_strict(scale, targets[j], self.totals[j - 1])
            step = log_phi[0, j] + log_lengths
            extended = [
                (start, values + step[start : start + values.size] - log_k[k + 2])
                for k, (start, values) in enumerate(rows)
            ]
            rows = _truncate([(0, self.first[j].copy()), *extended], n)
        self.totals[m - 1] = _sum_rows(rows, n)

    def run_lengths(self, j: int, i: int) -> np.ndarray:
        """log weight of a run of k + 1 quantiles ending at j in interval i, for k = 0..j."""
        k = np.arange(j + 1)
        with np.errstate(invalid="ignore"):
            stay = self.stay[j] - self.stay[j - k] + k * self.log_lengths[i]
            out = self.first[j - k, i] + stay - self.log_factorial[k + 1]
        out[np.isnan(out)] = -np.inf
        return out


def _exact_fraction(x) -> Fraction:
    """A float64 or long double as the exact rational it is."""
    return Fraction(*x.as_integer_ratio())


def _exact_log_choice(log_weights: np.ndarray, rng) -> int:
    """An index i with probability exactly exp(w_i) / sum_t exp(w_t), for the log weights w
    given (float64 or long double; -inf: never): :func:`exact_choice` on exponents max(w) -
    w_i, whose exact values are the differences of the two numbers as fractions (a long double
    is taken exactly, not rounded to double).  The only deviation of JointExp's sampler from its
    definition is then the weights w themselves (:func:`joint_log_error_bound`).
    """
    flat = np.asarray(log_weights).ravel()
    if flat.dtype != np.longdouble:
        flat = flat.astype(float)
    live = np.flatnonzero(np.isfinite(flat))
    weights = flat[live]
    top = weights.max()
    # the float exponents only guide the proposal: the difference (exact in float64 up to one
    # rounding; long double: one long double rounding then one to double) is within 2^-52 of it
    exponents = (top - weights).astype(float)
    slack = np.abs(exponents) * 2.0**-52 + 2.0**-1000
    exact_top = _exact_fraction(top)

    def exact_exponent(r: int) -> Fraction:
        return exact_top - _exact_fraction(weights[r])

    r, _ = exact_choice(np.ones(live.size, dtype=np.int64), exponents, slack, exact_exponent, rng)
    return int(live[r])


#: JointExp's working precisions: "double" (float64) and "extended" (numpy's long double where it
#: is wider than double: x87 80-bit on x86-64 Linux, IEEE binary128 elsewhere).
JOINT_PRECISIONS = ("double", "extended")


#: the double-precision charge, as a share of epsilon, above which JointExp runs in extended precision
JOINT_EXTENDED_FROM = 0.01


def extended_precision_available() -> bool:
    """Whether numpy's long double is an IEEE-style binary format wider than double whose
    arithmetic really rounds at its own precision: x87 extended (63 stored fraction bits, 15
    exponent bits) or binary128 (112, 15).  Not where it is double (Windows, ARM macOS) or
    double-double (PowerPC, not correctly rounded); a runtime check catches an x87 unit whose
    precision control was set to 53 bits."""
    info = np.finfo(np.longdouble)
    if info.nexp != 15 or info.nmant not in (63, 112):
        return False
    one, ulp = np.longdouble(1), np.longdouble(info.eps)
    return bool((one + ulp) - one == ulp and one + ulp / 2 == one)


def check_precision(precision) -> str:
    if precision not in JOINT_PRECISIONS:
        raise ParameterError(f"precision must be 'double' or 'extended', got {precision!r}")
    if precision == "extended" and not extended_precision_available():
        raise ParameterError("this platform's long double is not wider than double; use precision 'double'")
    return precision


def working_dtype(precision: str):
    """The numpy dtype of a JointExp precision."""
    return np.dtype(np.longdouble if check_precision(precision) == "extended" else np.float64)


def unit_roundoff(precision: str) -> float:
    """u of the working dtype: half its spacing at 1 (np.finfo(dtype).eps / 2; binary formats
    rounding to nearest err by at most u relative, and u equals finfo's epsneg for them):
    2^-53 for double, 2^-64 for x87 extended, 2^-113 for binary128."""
    return float(np.finfo(working_dtype(precision)).eps) / 2


def joint_log_error_bound(lengths: np.ndarray, m: int, scale: float, precision: str = "double") -> float:
    """A bound, in nats, on |log P_sampler(o) - log P_definition(o)| for JointExp's interval
    choices (:func:`joint_exponential_intervals`) on n + 1 intervals of ``lengths``, with the
    tables computed in ``precision`` (unit roundoff u: :func:`unit_roundoff`).

    Every table entry is a log weight computed by a chain of at most C = m (S + m + 12)
    floating-point operations (additions and log-add-exps, each 1-Lipschitz in its inputs in
    the sup norm), each rounding by at most 2u (V + 2) with V a bound on every intermediate
    magnitude: V = 3 scale (n + 1) + m (max |log L| + 1) + log((m + 1)!) + m log(n + 2) + 1.
    Per stage (one quantile): the Toeplitz step's running log-sum over the n + 1 intervals and
    its sliding windows (at most n wide) are chains of at most S = min(n, 2 ceil(sqrt(n + 1)))
    log-add-exps (:func:`_prefix_logsumexp`; a sequential running sum would be a chain of n),
    plus about ten roundings of its inputs (log L and its length, scale x target, the steps);
    the sum over run lengths adds at most m log-add-exps; the constants that enter without a
    chain (log L, phi, log k and log k!, the sum of phi_t(0) in a run) err by a few roundings
    of magnitudes that V dominates (scale n <= V / 3, |log L| <= V / m).
    Per operation, given exact inputs: +, - and x are correctly rounded (IEEE 754; x87 in its
    default 64-bit precision control), u |result| <= u V.  numpy's log-add-exp is max(x, y) +
    log1p(exp(-|x - y|)) on the C library's exp / log1p (expl / log1pl for long double):
    u V for the final addition, plus 2 K u log 2 for log1p within K ulps (its value is at
    most log 2), K' u for exp within K' ulps (log1p's slope times exp's value is at most 1/2)
    and u / e for the rounded difference (sup z e^-z); within 2u (V + 2) when
    K' + 1.39 K <= V + 3.6, and V >= 3.4 always (>= 745 m at a public n_max).  log L errs by
    K_log ulps of |log L| <= V / m plus one rounding of the length: K_log <= 1 suffices.  glibc's
    listed maximum errors on x86-64 are exp 1, log 1, log1p 1 ulp for double and 1, 1, 2 for
    long double (sysdeps/x86_64/fpu/libm-test-ulps); numpy calls them directly for long double.
    log k and log k! are 40-digit Decimals rounded once to the dtype.
    Dropped runs (:func:`_truncate`) add m e^-50.  So each weight is within
    E = C 2u (V + 2) + m e^-50 of its exact value; the sampler chooses exactly by the weights
    (:func:`_exact_log_choice`: long doubles taken as exact fractions, never rounded to
    double), and each of its at most 2 m choices is a ratio of weights (error 2 E), so 4 m E
    bounds the deviation.  Stage by stage it is smaller, and that is what is returned: the
    tables of quantiles 0..j hold placements of j + 1 quantiles, so every intermediate of
    stage s is at most V_s (V with m replaced by s + 1) and the weights of the two choices made
    at quantile j (the interval of the run ending at j and its length, from totals[j] and
    first[j - k]) are within E_j = (S + m + 12) 2u sum_{s <= j} (V_s + 2) + (j + 1) e^-50:
    the bound is 4 sum_{j < m} E_j, about a third of 4 m E when m |log L| dominates V and a
    half when scale n does.  The privacy loss is at most epsilon + 2 x this bound.  A worst
    case: the errors observed on small inputs are far below it.  Double: 2u = 2^-52; x87
    extended: 2u = 2^-63, 2048 times smaller.
    It reads n and the lengths (private): :func:`joint_public_error_bound` is what is charged.
    """
    lengths = np.asarray(lengths, dtype=float)
    positive = lengths[lengths > 0]
    log_l = float(np.max(np.abs(np.log(positive)))) if positive.size else 0.0
    return _joint_error_bound(lengths.size - 1, m, scale, log_l, unit_roundoff(precision))


def joint_scan_depth(n: int) -> int:
    """S = min(n, 2 ceil(sqrt(n + 1))): the longest chain of log-add-exps in one running log-sum
    or sliding window over n + 1 intervals (:func:`_prefix_logsumexp`); nondecreasing in n."""
    return min(n, 2 * (math.isqrt(n) + 1))


def _joint_error_bound(n: int, m: int, scale: float, log_l: float, unit: float) -> float:
    """4 sum_{j < m} E_j of :func:`joint_log_error_bound` for n records, max |log L| <= log_l and
    unit roundoff ``unit`` (at most 4 m E); increasing in n, m, scale, log_l and unit."""
    per_stage = joint_scan_depth(n) + m + 12  # operations on a chain per stage
    total, magnitudes = 0.0, 0.0
    for j in range(m):  # O(m)
        stage = 3 * scale * (n + 1) + (j + 1) * (log_l + 1) + math.lgamma(j + 3) + (j + 1) * math.log(n + 2) + 1
        magnitudes += stage + 2  # sum over stages s <= j of V_s + 2
        total += 4 * (per_stage * 2 * unit * magnitudes + (j + 1) * math.exp(-_NEGLIGIBLE))
    return total


_LOG_TINY = 744.5  # > -log(2^-1074): the smallest positive difference of two doubles


def joint_public_error_bound(n_max: int, m: int, scale: float, width: float, precision: str = "double") -> float:
    """:func:`joint_log_error_bound` for any data of at most ``n_max`` records on a range of
    ``width``, from public facts only: |log L| <= max(744.5, |log width|), the bound for
    lengths that are differences of two doubles in the range (2^-1074 <= L <= width).  It
    holds on the grid too: every positive length is a whole number of positions,
    1 <= L <= 2^52 (:class:`JointGrid`), so |log L| <= 36.1."""
    log_l = max(_LOG_TINY, abs(math.log(width)))
    return _joint_error_bound(int(n_max), m, scale, log_l, unit_roundoff(precision))


def check_n_max(n_max) -> int | None:
    if n_max is None:
        return None
    if isinstance(n_max, bool) or not isinstance(n_max, int | np.integer) or n_max < 1:
        raise ParameterError(f"n_max must be a positive whole number of records, got {n_max!r}")
    return int(n_max)


def _joint_charge(epsilon: float, levels: np.ndarray, neighbours: str, n_max: int, width: float, precision: str):
    """Twice :func:`joint_public_error_bound` at n_max records in ``precision``, at epsilon's scale."""
    scale = epsilon / (2.0 * joint_sensitivity(levels, neighbours))
    return 2.0 * joint_public_error_bound(n_max, levels.size, scale, width, precision)


def joint_charged_epsilon(
    epsilon: float, levels: np.ndarray, neighbours: str, n_max: int, width: float, precision: str = "double"
) -> float:
    """The epsilon' < epsilon JointExp runs at so that its float error is paid for: epsilon' =
    epsilon - 2 x :func:`joint_public_error_bound` at n_max records in ``precision``, taken at
    epsilon's scale (the bound increases with the scale, and epsilon' has the smaller one), so
    the privacy loss epsilon' + 2 x bound is at most epsilon for every dataset of at most n_max
    records."""
    charge = _joint_charge(epsilon, levels, neighbours, n_max, width, precision)
    if charge >= epsilon / 2:
        raise ParameterError(
            f"JointExp's float error at n_max = {n_max} records and {levels.size} levels would cost {charge:.3g} "
            f"of epsilon = {epsilon:g}; use a smaller n_max (CLI: --n-max) if it holds, fewer levels, a larger "
            "epsilon, or method 'approximate' (exact)"
        )
    return epsilon - charge


def joint_precision(epsilon: float, levels: np.ndarray, neighbours: str, n_max: int, width: float) -> str:
    """The working precision JointExp uses, from public facts only: "extended" where the
    platform has it (:func:`extended_precision_available`) and the double-precision charge
    exceeds :data:`JOINT_EXTENDED_FROM` (1%) of epsilon, else "double".  Extended precision
    cuts the charge 2048-fold on x86-64 (2^-63 against 2^-52 per operation) but runs several
    times slower (long double has no vector units), so it is used only where the charge is
    worth the time (charges and timings: docs/quantiles.md, "Figures by module")."""
    if not extended_precision_available():
        return "double"
    charge = _joint_charge(epsilon, levels, neighbours, n_max, width, "double")
    return "extended" if charge > JOINT_EXTENDED_FROM * epsilon else "double"


@dataclass(frozen=True)
class JointCharge:
    """What JointExp's float error cost: the working ``precision`` and its ``unit_roundoff``,
    the ``epsilon`` asked for, the ``run_epsilon`` the mechanism ran at (epsilon minus twice
    the public float-error bound at ``n_max`` records) and their difference ``charge``."""

    precision: str
    unit_roundoff: float
    epsilon: float
    run_epsilon: float
    n_max: int

    @property
    def charge(self) -> float:
        return self.epsilon - self.run_epsilon

    def to_dict(self) -> dict:
        return {
            "precision": self.precision,
            "unit_roundoff": self.unit_roundoff,
            "epsilon": self.epsilon,
            "run_epsilon": self.run_epsilon,
            "charge": self.charge,
            "n_max": self.n_max,
        }


def joint_affordable(epsilon: float, levels: np.ndarray, neighbours: str, n_max: int, width: float) -> bool:
    """Whether JointExp runs at ``n_max`` records (public or declared) on a range of ``width``
    (b - a; b + 1 - a for integers) rather than refusing: :func:`joint_charged_epsilon` refuses a
    float-error charge of half of epsilon or more, so ``auto`` must not choose it there.  The
    charge is the one of the precision the run would use (:func:`joint_precision`)."""
    precision = joint_precision(epsilon, levels, neighbours, n_max, width)
    try:
        joint_charged_epsilon(epsilon, levels, neighbours, n_max, width, precision)
    except ParameterError:
        return False
    return True


def joint_exponential_quantiles(
    values,
    q,
    epsilon: float,
    bounds,
    *,
    integer: bool = False,
    neighbours="add_remove",
    rng=None,
    n_max: int | None = None,
    cells: int | None = None,
    _precision: str | None = None,
) -> np.ndarray:
    """JointExp (Gillenwater, Joseph and Kulesza, ICML 2021): m quantiles in one mechanism.

    Outputs o_1 <= ... <= o_m in [a, b] have density proportional to exp(-epsilon / (2
    Delta) sum_{i=1}^{m+1} |n_i(o) - (q_i - q_{i-1}) n|), n_i the records in [o_{i-1}, o_i),
    Delta = :func:`joint_sensitivity` (replace: 2; add/remove: 2 (1 - min gap), exactly for
    the float gaps, rounded up).  The dynamic program runs over the n + 1 intervals between
    sorted records in O(m n) memory and O(m n k) time, k the number of run lengths kept (at
    most m); outputs are uniform inside the chosen intervals.

    On a public grid (:class:`JointGrid`), so that the published values are a public function
    of the chosen positions and never computed from a data value (Mironov, CCS 2012): the
    records are placed at whole positions, and each output is the floor of a uniform point of
    its interval, drawn exactly as a uniform integer there, reported as its cell's value.  That
    is JointExp on the placed records followed by a public map, so the same epsilon holds
    (docs/privacy.md, "Floats computed from data values").  Real bounds: ``cells`` cells of
    [a, b] (default :data:`JOINT_CELLS` = 2^40), one position each, records at their cell,
    outputs at cell midpoints.  Integer data: record k is placed at a secure-uniform sub-cell of
    [k, k + 1) (a per-record randomisation that keeps neighbours neighbours, as the authors'
    jitter), and an output in [k, k + 1) is k.

    Not exact: weights are floats in log space.  Each convolution with the kernel
    exp(-scale |d - target|) is a running log-sum plus a sliding-window log-sum of positive
    terms, in two levels (:func:`_log_toeplitz_strict`, :func:`_prefix_logsumexp`; an FFT's
    error would be absolute and would lose the small weights that later choices condition
    on); runs more than 50 nats below a shorter run
    in the same interval are dropped (relative m e^-50).  Every choice is then drawn exactly
    by the float weights (:func:`_exact_log_choice`, the exact sampler on the secure source),
    so the only deviation is the weights' rounding: the log-probability of every output is
    within :func:`joint_log_error_bound` of the definition (a worst case that grows as
    m^2 sqrt(n) (scale n + 745 m) at a public n_max; at the data's lengths, e.g. 1.7e-6 nats
    at m = 19, n = 32561, epsilon = 1 in double, 8e-10 in long double), and the privacy loss
    is at most epsilon plus twice that (docs/privacy.md).

    That excess is charged: the mechanism runs at :func:`joint_charged_epsilon`, epsilon minus
    twice :func:`joint_public_error_bound` at ``n_max`` records, a public upper bound on the
    record count (under "replace" n is public and is the default).  Under "add_remove" n_max
    is required; data with more than n_max records are refused (DataError), which reveals that
    the declared bound was wrong.

    The tables are computed in double, or in long double where the double charge exceeds 1% of
    epsilon and the platform's long double is wider (:func:`joint_precision`; ``_precision``
    forces one, for tests); :func:`joint_exponential_run` also returns the :class:`JointCharge`.
    """
    return joint_exponential_run(
        values,
        q,
        epsilon,
        bounds,
        integer=integer,
        neighbours=neighbours,
        rng=rng,
        n_max=n_max,
        cells=cells,
        _precision=_precision,
    )[0]


def joint_exponential_run(
    values,
    q,
    epsilon: float,
    bounds,
    *,
    integer: bool = False,
    neighbours="add_remove",
    rng=None,
    n_max: int | None = None,
    cells: int | None = None,
    _precision: str | None = None,
) -> tuple[np.ndarray, JointCharge]:
    """:func:`joint_exponential_quantiles` and what its float error cost (:class:`JointCharge`)."""
    neighbours = check_neighbours(neighbours)
    levels = check_levels(q)
    epsilon = check_epsilon(epsilon)
    n_max = check_n_max(n_max)
    rng = resolve_rng(rng)
    grid = JointGrid.from_bounds(bounds, integer=integer, cells=cells)
    a, b = float(bounds[0]), float(bounds[1])
    top = b + 1.0 if integer else b
    raw = np.asarray(values, dtype=float).ravel()
    if n_max is None and neighbours == "add_remove":
        raise ParameterError(
            "JointExp under add/remove neighbours needs n_max (CLI: --n-max), a public upper bound on the "
            "number of records, to charge its float error to epsilon; or use method 'approximate' (exact)"
        )
    if n_max is None:
        n_max = raw.size  # replace: n is public
    if raw.size > n_max:
        raise DataError(
            f"the data have more records than the declared n_max = {n_max}; declare a larger n_max (CLI: --n-max)"
        )
    precision = joint_precision(epsilon, levels, neighbours, n_max, top - a) if _precision is None else _precision
    run_epsilon = joint_charged_epsilon(epsilon, levels, neighbours, n_max, top - a, check_precision(precision))
    charge = JointCharge(precision, unit_roundoff(precision), epsilon, run_epsilon, n_max)
    edges = np.concatenate([[0], grid.place(raw, rng), [grid.positions]])  # whole positions, below 2^52
    scale = joint_scale(run_epsilon, joint_sensitivity(levels, neighbours))  # 2 scale Delta <= run_epsilon, exactly
    lengths = np.diff(edges).astype(working_dtype(precision))  # whole numbers below 2^52: exact
    chosen = joint_exponential_intervals(lengths, levels, scale, rng)
    points = _uniform_points(edges[chosen], edges[chosen + 1], rng)  # floor of uniform points, exactly
    return grid.value(np.sort(points)), charge


def joint_exponential_intervals(lengths: np.ndarray, levels: np.ndarray, scale: float, rng) -> np.ndarray:
    """Interval indices i_1 <= ... <= i_m (interval i lies between the i-th and (i+1)-th
    smallest records) with probability proportional to prod_runs L_i^k / k! times
    exp(-scale sum_t |n_t - (q_t - q_{t-1}) n|): the discrete part of JointExp.  The tables
    are computed in the dtype of ``lengths`` (long double: the extended path; else float64)."""
    lengths = np.asarray(lengths)
    dtype: type[np.floating] = np.longdouble if lengths.dtype == np.longdouble else np.float64
    lengths = lengths.astype(dtype)
    n, m = lengths.size - 1, levels.size
    with np.errstate(divide="ignore"):
        log_lengths = np.log(lengths)
    targets = np.diff(np.concatenate([[0.0], levels, [1.0]])).astype(dtype) * n  # the float gaps times n
    points = np.arange(n + 1).astype(dtype)
    log_phi = -scale * np.abs(points[:, None] - targets[None, :])
    tables = _JointTables(log_lengths, log_phi, m, scale, targets)
    chosen = np.empty(m, dtype=np.int64)
    j, limit = m - 1, n  # intervals 0..limit allowed; the gap after quantile j holds limit - i points
    closing = log_phi[:, m]
    while j >= 0:  # the interval of quantile j, then how many quantiles before it share it
        i = _exact_log_choice(tables.totals[j, : limit + 1] + closing[limit - np.arange(limit + 1)], rng)
        k = _exact_log_choice(tables.run_lengths(j, i), rng)
        chosen[j - k : j + 1] = i
        j -= int(k) + 1
        if j >= 0:  # the gap before the run holds i - i' points, i' <= i - 1
            limit, closing = int(i) - 1, np.concatenate([log_phi[1:, j + 1], [-np.inf]])
    return chosen

"""The exponential mechanism for one quantile (Smith, STOC 2011) and its recursive use for many,
ApproxQuantiles (Kaplan, Schnapp and Stemmer, ICML 2022), on a public grid of cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dprange._lazy import lazy_module

from .._validation import check_epsilon
from ..errors import ParameterError
from ..privacy.exact_choice import MAX_GRID, exact_choice, selection_gamma_at_most
from ..privacy.samplers import resolve_rng
from .grid import QuantileGrid, check_levels, check_neighbours

special = lazy_module("scipy.special")


@dataclass(frozen=True)
class _Runs:
    """Maximal runs of consecutive grid points with the same counts below (lo) and at-or-below (hi)."""

    start: np.ndarray
    size: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


def _runs(sorted_cells: np.ndarray, grid_size: int) -> _Runs:
    """Runs of the grid 0..grid_size-1 for sorted data cells: the gaps between distinct data
    values and the data values themselves (O(distinct values))."""
    values, counts = np.unique(sorted_cells, return_counts=True)
    below = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    gap_start = np.concatenate([[0], values + 1])
    gap_end = np.concatenate([values, [grid_size]])  # exclusive
    k = values.size
    start = np.empty(2 * k + 1, dtype=np.int64)
    size = np.empty(2 * k + 1, dtype=np.int64)
    lo = np.empty(2 * k + 1, dtype=np.int64)
    hi = np.empty(2 * k + 1, dtype=np.int64)
    start[0::2], size[0::2] = gap_start, gap_end - gap_start
    lo[0::2] = hi[0::2] = below
    start[1::2], size[1::2] = values, 1
    lo[1::2], hi[1::2] = below[:-1], below[1:]
    keep = size > 0
    return _Runs(start[keep], size[keep], lo[keep], hi[keep])


def score_sensitivity(q: float, neighbours: str) -> Fraction:
    """Sensitivity of the score -dist(q n, [#{z < c}, #{z <= c}]): 1 under replace (n fixed;
    each count moves by at most 1), max(q, 1 - q) under add/remove (the counts move by 0 or
    1 and q n by q, in the same direction)."""
    if neighbours == "replace":
        return Fraction(1)
    exact_q = Fraction(q)
    return max(exact_q, 1 - exact_q)


def _distances(runs: _Runs, target: float) -> np.ndarray:
    return np.maximum(np.maximum(runs.lo - target, target - runs.hi), 0.0)


def _exact_distance(runs: _Runs, r: int, target: Fraction) -> Fraction:
    return max(runs.lo[r] - target, target - runs.hi[r], Fraction(0))


def exponential_quantile_cell(sorted_cells: np.ndarray, grid_size: int, q: float, gamma: Fraction, rng) -> int:
    """A grid point c in 0..grid_size-1 with P(c) proportional to exp(-gamma dist(q n, [lo_c, hi_c])),
    lo_c = #{z < c}, hi_c = #{z <= c}, n = len(sorted_cells); sampled exactly."""
    runs = _runs(sorted_cells, grid_size)
    n = int(sorted_cells.size)
    exact_target = Fraction(q) * n
    dist = _distances(runs, q * n)
    best = int(np.argmin(dist))
    near = np.flatnonzero(dist <= dist[best] + (n + 1) * 2.0**-40)
    exact_best = min(_exact_distance(runs, int(r), exact_target) for r in near)
    gamma_float = float(gamma)
    exponents = np.maximum(gamma_float * (dist - float(exact_best)), 0.0)
    slack = (gamma_float * (n + 1) + exponents + 1.0) * 2.0**-45

    def exact_exponent(r: int) -> Fraction:
        return gamma * (_exact_distance(runs, r, exact_target) - exact_best)

    r, offset = exact_choice(runs.size, exponents, slack, exact_exponent, rng)
    return int(runs.start[r]) + offset


def exponential_quantile_probabilities(sorted_cells: np.ndarray, grid_size: int, q: float, gamma: float) -> np.ndarray:
    """The output distribution of :func:`exponential_quantile_cell` over the grid (floats)."""
    runs = _runs(np.asarray(sorted_cells, dtype=np.int64), grid_size)
    logw = -float(gamma) * _distances(runs, q * sorted_cells.size)
    probs = np.exp(logw - special.logsumexp(logw, b=runs.size))
    return np.repeat(probs, runs.size)


def exponential_quantile(values, q: float, epsilon: float, grid: QuantileGrid, *, neighbours="add_remove", rng=None):
    """One epsilon-DP quantile by the exponential mechanism on ``grid`` (Smith, STOC 2011).

    Output c with probability proportional to exp(-epsilon dist(q n, [#{z < c}, #{z <= c}]) /
    (2 Delta)), Delta = :func:`score_sensitivity` (add/remove: max(q, 1 - q); replace: 1).
    The score is 0 exactly at the true quantiles, whatever the ties.  Exact sampler.
    """
    neighbours = check_neighbours(neighbours)
    rng = resolve_rng(rng)
    cells = np.sort(grid.index(values))
    gamma = selection_gamma_at_most(Fraction(check_epsilon(epsilon)) / (2 * score_sensitivity(q, neighbours)))
    return float(grid.value(exponential_quantile_cell(cells, grid.cells, float(q), gamma, rng)))


def recursion_levels(m: int) -> int:
    """Levels of the recursive split for m quantiles: floor(log2 m) + 1."""
    return int(m).bit_length()


def _split_recursively(cells, lo, hi, levels, gamma_of, rng, out, index):
    """Estimate levels[i] for the data ``cells`` (sorted, all in lo..hi) into out[index[i]]."""
    if levels.size == 0:
        return
    mid = levels.size // 2
    level = float(levels[mid])
    chosen = lo + exponential_quantile_cell(cells - lo, hi - lo + 1, level, gamma_of(level), rng)
    out[index[mid]] = chosen
    cut = int(np.searchsorted(cells, chosen, side="right"))
    _split_recursively(cells[:cut], lo, chosen, levels[:mid] / level, gamma_of, rng, out, index[:mid])
    right = (levels[mid + 1 :] - level) / (1.0 - level)
    _split_recursively(cells[cut:], chosen, hi, right, gamma_of, rng, out, index[mid + 1 :])


def approximate_quantiles_cells(sorted_cells, grid_size, levels, epsilon, neighbours, rng) -> np.ndarray:
    """The recursive split on grid cells 0..grid_size-1 (see :func:`approximate_quantiles`)."""
    m = levels.size
    per_call = Fraction(epsilon) / (recursion_levels(m) * (2 if neighbours == "replace" else 1))

    def gamma_of(level: float) -> Fraction:
        return selection_gamma_at_most(per_call / (2 * score_sensitivity(level, "add_remove")))

    out = np.empty(m, dtype=np.int64)
    cells = np.asarray(sorted_cells, dtype=np.int64)
    _split_recursively(cells, 0, grid_size - 1, levels, gamma_of, rng, out, np.arange(m))
    return out


def default_subcells(grid: QuantileGrid) -> int:
    """Sub-cells per cell for breaking ties: the largest power of two <= 2^24 / cells (>= 1)."""
    return max(1, 2 ** max(0, (2**24 // grid.cells).bit_length() - 1))


def approximate_quantiles(
    values, q, epsilon: float, grid: QuantileGrid, *, neighbours="add_remove", rng=None, subcells: int | None = None
) -> np.ndarray:
    """m quantiles by the recursive split of Kaplan, Schnapp and Stemmer (ICML 2022).

    The middle level q_mid is estimated by the exponential mechanism; the records at or below
    it estimate the lower levels (rescaled q / q_mid) on [a, v], the others the upper levels
    ((q - q_mid) / (1 - q_mid)) on [v, b], recursively: floor(log2 m) + 1 levels.  Every
    record is in one branch per level, so under add/remove each level costs the budget of
    one call (epsilon / levels, each call with add/remove sensitivity max(q, 1 - q)); under
    replace the changed record can leave one branch and enter another, so each call gets
    epsilon / (2 levels) (as the authors' code does for swap neighbours).

    Ties (atoms such as capital-gain's zeros) would put a whole atom in one branch, away
    from the rescaled levels; as the authors jitter values, every record's cell is refined
    into ``subcells`` sub-cells at a secure-uniform position (a per-record public-randomness
    step that preserves neighbours), and outputs are reported at cell resolution.  With
    ``subcells=1`` the mechanism is deterministic given the samplers' draws (used by the
    exact tests).  Exact samplers throughout.
    """
    neighbours = check_neighbours(neighbours)
    levels = check_levels(q)
    epsilon = check_epsilon(epsilon)
    rng = resolve_rng(rng)
    cells = grid.index(values)
    factor = default_subcells(grid) if subcells is None else int(subcells)
    if factor < 1 or grid.cells * factor > MAX_GRID:
        raise ParameterError(f"subcells must be >= 1 with cells x subcells <= {MAX_GRID}")
    if factor > 1:
        cells = cells * factor + np.asarray(rng.integers(0, factor, size=cells.size), dtype=np.int64)
    chosen = approximate_quantiles_cells(np.sort(cells), grid.cells * factor, levels, epsilon, neighbours, rng)
    return grid.value(chosen // factor)

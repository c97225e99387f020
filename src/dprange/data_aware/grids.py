"""Uniform and adaptive grids for 2-D data: UG and AG of Qardaji, Yang and Li ("Differentially
Private Grids for Geospatial Data", ICDE 2013), with the grid sizes from a noisy total.

* :class:`UniformGrid` (``ugrid``, the paper's UG): an m x m grid of equal cells, one noisy count
  per cell, spread uniformly over its bins.  The paper balances the noise of the cells a
  rectangle covers (about r m^2 of them, variance 2 Delta^2 / eps^2 each) against the error of
  the cells it cuts (about sqrt(r) m of them, each off by a share of N / (c0 m^2)); the optimum is
  m = sqrt(N eps / c) with c = 10 (the paper's constant, fitted on its data).  The noise term
  scales with the sensitivity Delta (1 under add/remove, 2 under replace), so here
  m = sqrt(N eps / (Delta c)).
* :class:`AdaptiveGrid` (``agrid``, the paper's AG): a coarse m1 x m1 grid,
  m1 = max(10, ceil(sqrt(N eps / (Delta c)) / 4)), measured with a share ``alpha`` of the count
  budget; each of its cells, whose noisy count is N', is cut into m2 x m2 sub-cells with
  m2 = ceil(sqrt(max(N', 0) (1 - alpha) eps / (Delta c2))), c2 = 5, measured with the rest.
  Dense cells get fine sub-grids, empty ones stay whole.  The two levels are combined by exact
  least squares (:class:`~dprange.data_aware.spatial_trees.TreeFit`: a cell's count and the sum
  of its L sub-cells averaged by inverse variance, the gap shared equally among them; with
  L = m2^2 the paper's weights), then each sub-cell is spread uniformly.  When the noisy
  total makes the first level single bins (large N epsilon on a small grid: 64 x 64 at
  N epsilon = 10^6), a second level could only measure the same bins again, and two
  measurements at alpha eps and (1 - alpha) eps average to twice the variance of one at eps;
  so the bins are measured once with the whole count budget (UG at single bins), a choice made
  from the noisy total only.  The authors' code (dpcomp_core ``AG.py``) measures them twice.

Grid cells on a grid of bins (``layout``).  ``"even"`` (default, the paper's): a target of
M = m^2 cells of a ``rows x cols`` rectangle is cut into round(rows sqrt(M / (rows cols))) x
round(cols sqrt(M / (rows cols))) parts (square cells in bin units; m x m on a square), at least
one and at most one per bin along each axis, the bins split as evenly as possible (sizes differ
by at most one bin).  ``"anchored"``: square cells of side floor(sqrt(rows cols / M)) bins (at
least M cells) laid from the rectangle's low corner, the last row and column of cells cut at its
edge (slivers), as in the authors' code (dpcomp_core ``UG.py`` and ``AG.py``, which rounds the
side up instead, at most M cells).  Neither layout is better on every data set: on data whose
records sit on a lattice or in point masses, where the cell boundaries fall decides, and a one-bin
change of side moves the error several-fold (docs/data-aware.md).

Privacy (add/remove: Delta = 1; replace: Delta = 2 and the total is public).
1. The total: discrete-Laplace noise of scale 1 / eps_total (a declared share ``total_share``
   of epsilon; none under replace, where N is public).  It only sizes the grids: it is not
   used in the least squares, so that given the grids the cells' noise is exactly their
   calibrated noise.
2. The grid of UG, and AG's first level, are functions of the noisy total (post-processing);
   every record lies in exactly one cell of a level, so a level's counts have L1 sensitivity
   Delta, and discrete-Laplace noise of scale Delta / eps_level is eps_level-DP (exactly
   calibrated: :func:`~dprange.data_aware.steps.laplace_spec`).
3. AG's second level is a function of the first level's noisy counts only (post-processing
   of an eps_1-DP output); for every such layout the sub-cells again partition the grid, so
   their counts are eps_2-DP given it.  By adaptive sequential composition the release is
   (eps_total + eps_1 + eps_2)-DP, and the three steps' exact sum is at most epsilon
   (``parameters["private_steps"]``).  tests/data_aware/test_grids.py checks the whole
   output law from the definition on tiny grids, under both relations.

Error bars.  The uniform spread inside a cell is biased in a data-dependent way, so the
answers carry no standard errors (:class:`~dprange.data_aware.grid.DataAwareGridRelease`).
Its noise-only standard errors are exact for UG given the grid (the grid depends only on the
total's independent noise).  For AG they are approximate: the second level's layout depends
on the first level's noise, so given the layout that noise is no longer exactly the
calibrated discrete Laplace.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .._params import Custom, Integer, OneOf, Param
from .._validation import check_epsilon, fit_budget
from ..mechanisms.base import Mechanism
from ..privacy.samplers import resolve_rng
from ..registry import GRID_MECHANISMS, Citation
from ..strategies.calibration import noisy_answers
from .grid import DataAwareGridMechanism, DataAwareGridRelease
from .spatial_trees import Level, TreeFit, box_sums, root_level, summed_area
from .steps import SHARE, check_steps_within, data_aware_provenance, laplace_spec, noisy_total, step

POSITIVE = Custom(check_epsilon, "positive finite number")


def grid_parts(extent, cells) -> np.ndarray:
    """Parts per axis of grids over rectangles of ``extent`` ((2,) or (K, 2) bins per axis) with
    a target number of ``cells`` each (module doc): extent_a sqrt(cells / area) rounded (half
    up) along axis a (square cells in bin units; m per axis on a square for cells = m^2, one
    part for one cell whatever the rectangle's aspect), between 1 and the axis's bins; a
    target <= 0 (or NaN) gives one part."""
    extent = np.asarray(extent, dtype=np.int64)
    target = np.nan_to_num(np.asarray(cells, dtype=float), nan=0.0)
    area = extent.prod(axis=-1).astype(float)
    per_bin = np.sqrt(np.maximum(target, 0.0) / area)
    parts = np.floor(extent * np.expand_dims(per_bin, -1) + 0.5)
    return np.clip(parts, 1, extent).astype(np.int64)


def cell_positions(parts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(parent, (row, column) index) of every cell of grids of parts[k, 0] x parts[k, 1] cells
    over K rectangles, rectangle by rectangle, C order inside each.  Vectorised: O(cells)."""
    per = parts[:, 0] * parts[:, 1]
    parent = np.repeat(np.arange(parts.shape[0], dtype=np.int64), per)
    offsets = np.cumsum(per) - per
    index = np.stack(np.divmod(np.arange(parent.size, dtype=np.int64) - offsets[parent], parts[parent, 1]), axis=1)
    return parent, index


def split_cells(lo: np.ndarray, hi: np.ndarray, parts: np.ndarray) -> Level:
    """The cells of grids laid over the rectangles ``lo``..``hi`` ((K, 2) inclusive): rectangle
    k cut into parts[k, 0] x parts[k, 1] cells, the bins of each axis split as evenly as
    possible (part i of an axis of L bins starts at floor(i L / p)); C order inside each
    rectangle, the parent of a cell its rectangle.  Vectorised: O(cells)."""
    parts = np.asarray(parts, dtype=np.int64).reshape(-1, 2)
    extent = hi - lo + 1
    parent, index = cell_positions(parts)
    size, count = extent[parent], parts[parent]
    cell_lo = lo[parent] + index * size // count
    cell_hi = lo[parent] + (index + 1) * size // count - 1
    return Level(cell_lo, cell_hi, parent)


def anchored_sides(extent, cells) -> np.ndarray:
    """The side, in bins, of the square cells of anchored grids over rectangles of ``extent``
    ((2,) or (K, 2) bins per axis) with a target number of ``cells`` each: floor(sqrt(area /
    cells)), between 1 and the longer axis; a target <= 0 (or NaN) gives one cell."""
    extent = np.asarray(extent, dtype=np.int64)
    target = np.nan_to_num(np.asarray(cells, dtype=float), nan=0.0)
    area = extent.prod(axis=-1).astype(float)
    whole = extent.max(axis=-1)
    with np.errstate(divide="ignore"):
        side = np.floor(np.sqrt(area / np.maximum(target, 0.0)) + 1e-9)
    return np.where(target > 0, np.clip(side, 1, whole), whole).astype(np.int64)


def anchored_cells(lo: np.ndarray, hi: np.ndarray, side: np.ndarray) -> tuple[Level, np.ndarray]:
    """(the cells of grids laid over the rectangles ``lo``..``hi`` ((K, 2) inclusive), their
    parts per axis): rectangle k cut into squares of side[k] bins from its low corner, the last
    row and column cut at its edge; C order inside each rectangle, the parent of a cell its
    rectangle.  Vectorised: O(cells)."""
    side = np.asarray(side, dtype=np.int64).reshape(-1)
    parts = -((lo - hi - 1) // side[:, None])  # ceil(extent / side) per axis
    parent, index = cell_positions(parts)
    cell_lo = lo[parent] + index * side[parent, None]
    cell_hi = np.minimum(cell_lo + side[parent, None] - 1, hi[parent])
    return Level(cell_lo, cell_hi, parent), parts


def cut_cells(lo: np.ndarray, hi: np.ndarray, cells, layout: str) -> tuple[Level, np.ndarray]:
    """(grids over the rectangles ``lo``..``hi`` with a target number of ``cells`` each, laid out
    as ``layout`` says (module doc), their parts per axis (K, 2))."""
    if layout == "anchored":
        return anchored_cells(lo, hi, anchored_sides(hi - lo + 1, cells))
    parts = grid_parts(hi - lo + 1, cells).reshape(-1, 2)
    return split_cells(lo, hi, parts), parts


def merged_epsilon(epsilons: list[float]) -> float:
    """The float sum of ``epsilons`` lowered by the fewest ulps that make it at most their exact sum."""
    exact = sum((Fraction(e) for e in epsilons), Fraction(0))
    merged = math.fsum(epsilons)
    while Fraction(merged) > exact:
        merged = math.nextafter(merged, 0.0)
    return merged


def uniform_grid(shape, cells: float, layout: str = "even") -> tuple[Level, list[int]]:
    """(the cells of a grid over the whole of ``shape`` for a target number of cells, its parts per axis)."""
    root = root_level(shape)
    level, parts = cut_cells(root.lo, root.hi, cells, layout)
    return level, parts[0].tolist()


#: How a rectangle is cut into cells (module doc).
LAYOUTS = ("even", "anchored")
LAYOUT_PARAM = Param(
    "layout",
    OneOf(LAYOUTS),
    "cells split the bins evenly (even, the paper's) or are squares from the low corner (anchored, like the authors')",
    default="even",
)


class _Grids(DataAwareGridMechanism):
    """Shared steps of UG and AG: the noisy total, the count budget, measuring a level."""

    total_share: float
    c: float
    layout: str

    def count_sensitivity(self) -> int:
        """L1 sensitivity of one level's counts: 1 (add/remove), 2 (replace)."""
        return 2 if self.neighbours == "replace" else 1

    def total_epsilon(self, epsilon: float) -> float:
        """The noisy total's share (none under replace: the total is public)."""
        return 0.0 if self.neighbours == "replace" else epsilon * self.total_share

    def first_cells(self, total: float, count_epsilon: float) -> float:
        """N eps / (Delta c): the paper's number of cells of a uniform grid."""
        return max(total, 0.0) * count_epsilon / (self.count_sensitivity() * self.c)

    def uniform_parts(self, total: float, count_epsilon: float) -> int:
        """m = ceil(sqrt(N eps / (Delta c))), at least 1: UG's cells per axis."""
        return max(1, math.ceil(math.sqrt(self.first_cells(total, count_epsilon)) - 1e-9))

    def measure_level(self, table, level: Level, epsilon: float, source):
        """(noisy counts of the level's cells, their noise spec)."""
        spec = laplace_spec(epsilon, self.count_sensitivity())
        return noisy_answers(box_sums(table, level.lo, level.hi), spec, source), spec

    def measure_levels(self, table, total: float, epsilons: list[float], source):
        """(levels below the root, their noisy counts, their specs, parameters to publish,
        the levels' private steps)."""
        raise NotImplementedError

    def count_fractions(self) -> list[float]:
        """Shares of the count budget per measured level."""
        raise NotImplementedError

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None) -> DataAwareGridRelease:  # type: ignore[override]
        counts, epsilon = self._check(counts, epsilon, delta)
        source = resolve_rng(rng)
        eps_total = self.total_epsilon(epsilon)
        fractions = self.count_fractions()
        budget = fit_budget([eps_total] + [(epsilon - eps_total) * f for f in fractions], epsilon)
        total, steps = noisy_total(counts, budget[0], source)  # the total that sizes the grids
        table = summed_area(counts)
        levels, measured, specs, published, level_steps = self.measure_levels(table, total, budget[1:], source)
        steps = steps + level_steps
        check_steps_within(steps, epsilon)
        public = float(counts.sum()) if self.neighbours == "replace" else None
        fit = TreeFit(counts.shape, [root_level(counts.shape), *levels], [None, *measured], [None, *specs], public)
        params = {**self.parameters(), "noisy_total": total, **published}
        provenance = data_aware_provenance(self, "discrete_laplace", params, steps, epsilon, 0.0, public, rng)
        return DataAwareGridRelease(counts.shape, fit.cells, provenance, fit, domain=domain)


class UniformGrid(_Grids):
    """UG (module doc): about N eps / (Delta c) equal cells from a noisy total, one noisy count
    each, spread uniformly."""

    name = "ugrid"

    PARAMS = (
        Param("c", POSITIVE, "the grid has about N epsilon / c cells (the paper's c = 10)", default=10.0),
        Param(
            "total_share",
            SHARE,
            "share of epsilon spent on the noisy total that sizes the grid (add/remove only)",
            default=0.02,
        ),
        LAYOUT_PARAM,
        *Mechanism.PARAMS,
    )

    def count_fractions(self) -> list[float]:
        return [1.0]

    def measure_levels(self, table, total, epsilons, source):
        shape = (table.shape[0] - 1, table.shape[1] - 1)
        level, parts = uniform_grid(shape, float(self.uniform_parts(total, epsilons[0])) ** 2, self.layout)
        noisy, spec = self.measure_level(table, level, epsilons[0], source)
        return [level], [noisy], [spec], {"grid": parts}, [step("counts", epsilons[0])]


class AdaptiveGrid(_Grids):
    """AG (module doc): a coarse grid sized from a noisy total, each cell cut into a sub-grid
    sized from its own noisy count, both levels combined by exact least squares."""

    name = "agrid"

    PARAMS = (
        Param(
            "c",
            POSITIVE,
            "first level: m1 = max(min_parts, sqrt(N epsilon / c) / 4) (the paper's c = 10)",
            default=10.0,
        ),
        Param(
            "c2",
            POSITIVE,
            "second level: m2 = sqrt(N' (1 - alpha) epsilon / c2) per cell (the paper's c2 = 5)",
            default=5.0,
        ),
        Param("alpha", SHARE, "share of the count budget on the first level (the paper's 0.5)", default=0.5),
        Param("min_parts", Integer(1), "least number of first-level cells per axis (the paper's 10)", default=10),
        Param(
            "total_share",
            SHARE,
            "share of epsilon spent on the noisy total that sizes the first level (add/remove only)",
            default=0.01,
        ),
        LAYOUT_PARAM,
        *Mechanism.PARAMS,
    )
    c2: float
    alpha: float
    min_parts: int

    def count_fractions(self) -> list[float]:
        return [self.alpha, 1.0 - self.alpha]

    def first_parts(self, total: float, count_epsilon: float) -> int:
        """m1 = max(min_parts, ceil(sqrt(N eps / (Delta c)) / 4)), eps the whole count budget."""
        return max(self.min_parts, math.ceil(math.sqrt(self.first_cells(total, count_epsilon)) / 4))

    def second_parts(self, noisy: np.ndarray, epsilon: float) -> np.ndarray:
        """m2 = ceil(sqrt(max(N', 0) eps_2 / (Delta c2))) per first-level cell, at least 1."""
        m2 = np.ceil(
            np.sqrt(np.maximum(noisy.astype(float), 0.0) * epsilon / (self.count_sensitivity() * self.c2)) - 1e-9
        )
        return np.maximum(m2, 1.0)

    def measure_levels(self, table, total, epsilons, source):
        shape = (table.shape[0] - 1, table.shape[1] - 1)
        first, parts = uniform_grid(shape, float(self.first_parts(total, sum(epsilons))) ** 2, self.layout)
        if parts == list(shape):  # single bins: a second level would measure them again
            whole = merged_epsilon(epsilons)
            noisy, spec = self.measure_level(table, first, whole, source)
            published = {"grid": parts, "sub_grids": "none (the first level is single bins)"}
            return [first], [noisy], [spec], published, [step("counts", whole)]
        noisy_first, spec_first = self.measure_level(table, first, epsilons[0], source)
        m2 = self.second_parts(noisy_first, epsilons[1])
        second, sub_parts = cut_cells(first.lo, first.hi, m2**2, self.layout)
        noisy_second, spec_second = self.measure_level(table, second, epsilons[1], source)
        published = {"grid": parts, "sub_grids": sub_parts.tolist()}
        steps = [step("first_level", epsilons[0]), step("second_level", epsilons[1])]
        return [first, second], [noisy_first, noisy_second], [spec_first, spec_second], published, steps


QARDAJI_2013 = Citation("Qardaji, Yang and Li", "Differentially Private Grids for Geospatial Data", "ICDE 2013")


GRID_MECHANISMS.add(
    UniformGrid,
    summary="data-aware 2-D: a uniform grid of about N epsilon / 10 cells sized from a noisy total, noisy cell "
    "counts spread uniformly (error bars noise-only, not exact)",
    citation=QARDAJI_2013,
)


GRID_MECHANISMS.add(
    AdaptiveGrid,
    summary="data-aware 2-D: a coarse grid sized from a noisy total, each cell cut by its own noisy count, "
    "least squares over both levels (error bars noise-only, not exact)",
    citation=QARDAJI_2013,
)

"""``auto_support``: the data-independent 2-D ``auto`` release refitted over the non-negative grids
that hold nothing where its own least squares finds no records.

``auto_nonnegative`` (:mod:`dprange.data_aware.nonnegative_grid`) removes the negative noise of the
empty cells but moves the rest of their noise up to zero, a positive bias that a rectangle sums
over every empty cell it covers.  Where the records sit in a few heavy cells among many empty
ones (amounts heaped at zero, a few towns on a map), least squares already tells the empty regions
apart at a coarse level, where a block's sum has a small noise beside its records: this release
finds them and holds them at zero.

The steps, every one after the measurements post-processing of them:

1. measure the counts as ``auto`` chooses for the workload (:func:`dprange.analysis.grid.select_grid`,
   public values only) and take the least-squares estimate x_LS and its total T (the public total
   under replace, else x_LS's sum, 0 if negative), as ``auto_nonnegative`` does;
2. over the aligned dyadic squares of the grid (sides 1, 2, 4, ... up to the grid's, clipped at
   its edges: :func:`dyadic_blocks`), mark *empty* every block whose least-squares sum is below
   ``threshold`` times that sum's exact standard error (the design's error model, public), and
   every cell inside a marked block (:func:`empty_cells`);
3. publish the weighted least-squares fit of the measurements over {x >= 0, sum(x) = T, x = 0 on
   the marked cells} (:func:`dprange.inference.simplex_fit` with a support); if every cell is
   marked (no block stands out of the noise), the fit over every cell, ``auto_nonnegative``'s.

It has the privacy of the measurements (one recorded step, the whole epsilon): the marks read the
noisy estimate and public error model, never the data.  A block marked empty that holds records
loses them to the rest of the grid (the total is kept), a bias that depends on the data; so the
answers have no exact error bars (a :class:`~dprange.data_aware.grid.DataAwareGridRelease`): the
bootstrap re-draws the measurement noise around the released estimate and re-runs steps 1-3.
A lower threshold marks less (less bias, more noise kept in empty cells); where every occupied
cell holds many records a higher one gains (docs/data-aware.md, "auto_support").  A candidate of
``auto-data``'s training (``GRID_CANDIDATES``, measured in its tables); the shipped selector runs
it where few occupied cells hold most records, each many per unit of noise (docs/data-aware.md,
"The support branch").

The empty-region pruning is the step of PrivTree (Zhang, Xiao and Xie, SIGMOD 2016) and of DAWA's
partition (Li, Hay, Miklau and Wang, PVLDB 2014) taken as post-processing of one fixed design,
with the maximum-likelihood fit under constraints of Lee, Wang and Kifer (KDD 2015).
"""

from __future__ import annotations

import numpy as np

from .._params import Custom, Param
from ..answers.bootstrap import redraw
from ..errors import ParameterError
from ..inference.simplex_fit import simplex_fit
from ..mechanisms.base import Mechanism
from ..registry import GRID_MECHANISMS, Citation
from .grid import DataAwareGridRelease
from .nonnegative_grid import MAXITER_PARAM, ORDER_PARAM, TOL_PARAM, WORKLOAD_PARAM, NonnegativeAuto, SimplexFitNoise
from .spatial_trees import box_sums, summed_area


def check_threshold(value, name: str = "threshold") -> float:
    """A finite number >= 0 (0 marks the blocks whose sum is negative)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
        raise ParameterError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


THRESHOLD_PARAM = Param(
    "threshold",
    Custom(check_threshold, "finite number >= 0"),
    "a dyadic block is taken as empty where least squares sums it to less than this many of its standard errors",
    default=1.0,
)


def dyadic_blocks(shape) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lows, highs, sides): the aligned squares of side 2^l (l = 0, 1, ... up to the first side
    at least the grid's longer side) over a 2-D grid, clipped at its edges, level by level and row
    by row within a level; inclusive bounds, (B, 2) each, and each block's level side."""
    rows, cols = (int(n) for n in shape)
    lows, highs, sides = [], [], []
    side = 1
    while True:
        i, j = np.meshgrid(np.arange(0, rows, side), np.arange(0, cols, side), indexing="ij")
        low = np.stack([i.ravel(), j.ravel()], axis=1)
        lows.append(low)
        highs.append(np.minimum(low + side - 1, [rows - 1, cols - 1]))
        sides.append(np.full(low.shape[0], side))
        if side >= max(rows, cols):
            break
        side *= 2
    return np.concatenate(lows), np.concatenate(highs), np.concatenate(sides)


def empty_cells(estimate, lows, highs, sides, limits) -> np.ndarray:
    """The cells (a boolean grid) inside some block of :func:`dyadic_blocks` whose sum of
    ``estimate`` is below its entry of ``limits`` (threshold x standard error)."""
    estimate = np.asarray(estimate, dtype=float)
    rows, cols = estimate.shape
    below = box_sums(summed_area(estimate), lows, highs) < limits
    marked = np.zeros((rows, cols), dtype=bool)
    for side in np.unique(sides):
        level = sides == side  # the level's blocks, row by row: a (ceil(rows / side), ceil(cols / side)) grid
        blocks = below[level].reshape(-(-rows // side), -(-cols // side))
        marked |= np.repeat(np.repeat(blocks, side, axis=0), side, axis=1)[:rows, :cols]
    return marked


class SupportFitNoise(SimplexFitNoise):
    """Post-processing state of an ``auto_support`` release: ``resample`` re-draws the noise
    around the released estimate and re-runs least squares, the marks (``support_of``) and the fit
    on the support."""

    def __init__(self, inner, measurements, cells, tol, maxiter, support_of):
        super().__init__(inner, measurements, cells, tol, maxiter)
        self.support_of = support_of

    def resample(self, rng) -> np.ndarray:
        replicate = redraw(self.measurements, self.cells.ravel(), rng)
        least_squares = np.asarray(self.inner.estimate(self.cells.shape, replicate).leaves, dtype=float)
        fit, _, _ = supported_fit(
            self.inner, self.cells.shape, replicate, least_squares, self.support_of, self.tol, self.maxiter
        )
        return fit.x.reshape(self.cells.shape)


def supported_fit(inner, shape, measurements, least_squares, support_of, tol, maxiter):
    """(the fit, its total, the support): the total as ``auto_nonnegative`` takes it (the public
    one under replace, else least squares', 0 if negative), the support ``support_of(least
    squares)`` (None where it would hold no cell: every cell), the fit of the measurements over
    the non-negative grids of that total held at zero off the support, from least squares."""
    total = measurements.total if measurements.total is not None else float(np.sum(least_squares))
    total = max(total, 0.0)
    support = support_of(np.asarray(least_squares, dtype=float).reshape(shape)).ravel()
    if not support.any():
        support = None
    fit = simplex_fit(measurements, total, start=least_squares, tol=tol, maxiter=maxiter, support=support)
    return fit, total, support


class SupportAuto(NonnegativeAuto):
    """``auto``'s measurements refitted over the non-negative grids that hold nothing in the
    dyadic blocks its least squares finds empty (module doc).  Pure epsilon-DP (the
    measurements'); answers without exact error bars."""

    name = "auto_support"

    PARAMS = (WORKLOAD_PARAM, ORDER_PARAM, THRESHOLD_PARAM, TOL_PARAM, MAXITER_PARAM, *Mechanism.PARAMS)
    threshold: float

    def parameters(self) -> dict:
        params = super().parameters()
        shared = {k: params.pop(k) for k in Mechanism.parameters(self)}
        params.pop("tol"), params.pop("maxiter")
        return {**params, "threshold": self.threshold, "tol": self.tol, "maxiter": self.maxiter, **shared}

    def limits(
        self, inner, shape, epsilon: float, delta: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(lows, highs, sides, threshold x standard error) of the dyadic blocks under ``inner``'s
        design at ``epsilon`` (its exact error model: public), kept for the next release of the
        same design, epsilon and threshold."""
        key = (inner, tuple(shape), float(epsilon), float(delta), self.threshold)
        kept = getattr(self, "_limits", None)
        if kept is None or kept[0] != key:
            lows, highs, sides = dyadic_blocks(shape)
            model = inner.error_model(shape, epsilon, delta=delta)
            deviations = np.sqrt(np.asarray(model.rectangle_variance(lows, highs), dtype=float))
            kept = (key, (lows, highs, sides, self.threshold * deviations))
            self._limits = kept
        return kept[1]

    def measured(self, counts, epsilon, rng):
        """(the shape, ``auto``'s design, its measurements of ``counts`` (the only step that reads
        the data), their least-squares estimate (flat), and ``support_of``: the cells outside the
        dyadic blocks an estimate sums below the limits of :meth:`limits`)."""
        shape = counts.shape
        inner = self.least_squares_mechanism(shape, epsilon)
        measurements = inner.measure(counts, epsilon, rng=rng)  # the only step that reads the data
        least_squares = np.asarray(inner.estimate(shape, measurements).leaves, dtype=float)
        blocks = self.limits(inner, shape, measurements.epsilon, measurements.delta)

        def support_of(estimate):
            return ~empty_cells(estimate, *blocks)

        return shape, inner, measurements, least_squares, support_of

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None) -> DataAwareGridRelease:  # type: ignore[override]
        counts, epsilon = self._check(counts, epsilon, delta)
        shape, inner, measurements, least_squares, support_of = self.measured(counts, epsilon, rng)
        fit, total, support = supported_fit(
            inner, shape, measurements, least_squares, support_of, self.tol, self.maxiter
        )
        recorded = {"support_cells": int(support.sum()) if support is not None else int(np.prod(shape))}
        return self.released(
            shape,
            inner,
            measurements,
            fit,
            total,
            recorded,
            epsilon,
            rng,
            domain,
            noise_of=lambda cells: SupportFitNoise(inner, measurements, cells, self.tol, self.maxiter, support_of),
        )


#: The pruning of empty regions that auto_support and auto_pruned take as post-processing.
PRIVTREE = Citation(
    "Zhang, Xiao and Xie", "PrivTree: A Differentially Private Algorithm for Hierarchical Decompositions", "SIGMOD 2016"
)

GRID_MECHANISMS.add(
    SupportAuto,
    summary="2-D: auto's measurements refitted over non-negative grids held at zero in the dyadic blocks its least "
    "squares finds empty (post-processing; error bars by bootstrap, not exact)",
    citation=PRIVTREE,
)

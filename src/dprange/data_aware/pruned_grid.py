"""``auto_pruned``: the data-independent 2-D ``auto`` release refitted over non-negative grids
(``auto_nonnegative``'s fit), set to zero where its own least squares finds no records and
scaled back to its total.

``auto_nonnegative`` (:mod:`dprange.data_aware.nonnegative_grid`) leaves the noise of the empty
cells as small positive counts, which a rectangle sums over every empty cell it covers;
``auto_support`` (:mod:`dprange.data_aware.support_grid`) holds the empty regions at zero and
fits the measurements again on the rest, which pushes the noise of the measurements over the
empty regions into the occupied cells.  Where few records lie in a few heavy cells among many empty
ones, each with little signal per unit of noise (amounts heaped at zero, at 10^3-10^4 records),
this release does neither: it keeps the non-negative fit's shape on the occupied region and moves
the mass it spread over the empty regions back onto it in proportion.

The steps, every one after the measurements post-processing of them:

1. measure the counts as ``auto`` chooses for the workload (:func:`dprange.analysis.grid.select_grid`,
   public values only), take the least-squares estimate x_LS and its total T (the public total
   under replace, else x_LS's sum, 0 if negative) and the non-negative fit g of that total, as
   ``auto_nonnegative`` does;
2. mark *empty* every cell of an aligned dyadic square whose least-squares sum is below
   ``threshold`` times its exact standard error, as ``auto_support`` does
   (:func:`dprange.data_aware.support_grid.empty_cells`);
3. publish g set to zero on the marked cells and multiplied on the others by T over their sum of
   g (:func:`pruned`); where no unmarked cell holds mass of g, g itself.

It has the privacy of the measurements (one recorded step, the whole epsilon): the marks and the
scale read the noisy estimate and the public error model, never the data.  A marked block that
holds records loses them to the rest of the grid in proportion to the fit there (the total is
kept), a bias that depends on the data; so the answers have no exact error bars (a
:class:`~dprange.data_aware.grid.DataAwareGridRelease`): the bootstrap re-draws the measurement
noise around the released estimate and re-runs steps 1-3.  Where the occupied cells hold many
records each, ``auto_support``'s refit is the better of the two (docs/data-aware.md,
"auto_pruned").

The pruning of empty regions is PrivTree's (Zhang, Xiao and Xie, SIGMOD 2016) taken as
post-processing of one fixed design; the fit is the maximum-likelihood post-processing under
consistency constraints of Lee, Wang and Kifer (KDD 2015).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..answers.bootstrap import redraw
from ..registry import GRID_MECHANISMS
from .grid import DataAwareGridRelease
from .nonnegative_grid import SimplexFitNoise, refit
from .support_grid import PRIVTREE, SupportAuto


def pruned(fitted, support) -> np.ndarray:
    """``fitted`` (non-negative) set to zero off the boolean ``support`` and scaled on it to keep
    its sum; ``fitted`` itself where the support holds none of its mass (or is None)."""
    fitted = np.asarray(fitted, dtype=float)
    if support is None:
        return fitted
    kept = np.where(support, fitted, 0.0)
    mass = float(kept.sum())
    if mass <= 0.0:
        return fitted
    return kept * (float(fitted.sum()) / mass)


class PrunedFitNoise(SimplexFitNoise):
    """Post-processing state of an ``auto_pruned`` release: ``resample`` re-draws the noise around
    the released estimate and re-runs least squares, the non-negative fit, the marks
    (``support_of``) and the pruning."""

    def __init__(self, inner, measurements, cells, tol, maxiter, support_of):
        super().__init__(inner, measurements, cells, tol, maxiter)
        self.support_of = support_of

    def resample(self, rng) -> np.ndarray:
        replicate = redraw(self.measurements, self.cells.ravel(), rng)
        shape = self.cells.shape
        least_squares = np.asarray(self.inner.estimate(shape, replicate).leaves, dtype=float)
        fit, _ = refit(self.inner, shape, replicate, self.tol, self.maxiter, least_squares=least_squares)
        return pruned(fit.x.reshape(shape), self.support_of(least_squares.reshape(shape)))


class PrunedAuto(SupportAuto):
    """``auto``'s non-negative refit set to zero in the dyadic blocks its least squares finds
    empty and scaled back to its total (module doc).  Pure epsilon-DP (the measurements');
    answers without exact error bars."""

    name = "auto_pruned"

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None) -> DataAwareGridRelease:  # type: ignore[override]
        counts, epsilon = self._check(counts, epsilon, delta)
        shape, inner, measurements, least_squares, support_of = self.measured(counts, epsilon, rng)
        # cost: auto_nonnegative's fit (projected gradient over the whole grid)
        fit, total = refit(inner, shape, measurements, self.tol, self.maxiter, least_squares=least_squares)
        support = support_of(least_squares.reshape(shape))
        cells = pruned(fit.x.reshape(shape), support)
        held = float(fit.x[support.ravel()].sum()) > 0.0  # else the fit itself, on every cell
        recorded = {"support_cells": int(support.sum()) if held else int(np.prod(shape))}
        return self.released(
            shape,
            inner,
            measurements,
            dataclasses.replace(fit, x=cells.ravel()),
            total,
            recorded,
            epsilon,
            rng,
            domain,
            noise_of=lambda cells: PrunedFitNoise(inner, measurements, cells, self.tol, self.maxiter, support_of),
        )


GRID_MECHANISMS.add(
    PrunedAuto,
    summary="2-D: auto's non-negative refit set to zero in the dyadic blocks its least squares finds empty and "
    "scaled back to its total (post-processing; error bars by bootstrap, not exact)",
    citation=PRIVTREE,
)

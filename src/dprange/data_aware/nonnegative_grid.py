"""``auto_nonnegative``: the data-independent 2-D ``auto`` release refitted over the non-negative
grids of its own estimated total.

The counts are measured exactly as :func:`dprange.analysis.grid.select_grid` chooses for the
workload (the least exact expected error, from public values only), then the cell estimates are
the weighted least-squares fit of those measurements over {x >= 0, sum(x) = T}
(:func:`dprange.inference.simplex_fit`), with T the least-squares estimate of the total (the public
total under replace).  This is the maximum-likelihood post-processing under consistency
constraints of Lee, Wang and Kifer (KDD 2015) for Gaussian-shaped likelihoods, applied to the
optimised Kronecker designs: its privacy is that of the measurements (one recorded step, the
whole epsilon), and the fit reads no data.

Where most cells are empty or small the fit removes the negative noise of the empty cells and
often has a fraction of the least-squares error on large rectangles; where a large rectangle
covers many empty cells the noise moved up to zero sums into a positive bias (docs/data-aware.md,
"auto-data on 2-D grids").  That bias depends on the data, so the answers have no exact error
bars (a :class:`~dprange.data_aware.grid.DataAwareGridRelease`): the bootstrap re-draws the
measurement noise around the released estimate and re-runs the fit; there is no closed-form
noise-only variance.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._params import Custom, Integer, Param
from .._validation import check_epsilon
from ..analysis.grid import check_grid_workload, select_grid
from ..errors import ParameterError
from ..inference.simplex_fit import simplex_fit
from ..measurements import Measurements
from ..mechanisms.base import GridMechanism, Mechanism
from ..registry import GRID_MECHANISMS, Citation
from ..workloads.rectangles import Rectangles
from .grid import DataAwareGridMechanism, DataAwareGridRelease
from .steps import data_aware_provenance, step


def check_workload(value, name: str = "workload"):
    """A k-D workload name or rectangles (:func:`dprange.analysis.grid.check_grid_workload`), or
    the saved form of explicit rectangles (a dict with shape, lows and highs)."""
    if isinstance(value, dict):
        return Rectangles.from_dict(value, name)
    return check_grid_workload(value)


WORKLOAD_PARAM = Param(
    "workload",
    Custom(check_workload, "'all-rectangles', 'prefix-rectangles', 'marginals' or a dprange.workloads.Rectangles"),
    "the rectangles the data-independent design is chosen for (release_grid passes its workload)",
    default="all-rectangles",
)
ORDER_PARAM = Param("order", Integer(1), "the marginals' order when the workload is 'marginals'", default=2)


def refit(inner: GridMechanism, shape, measurements: Measurements, tol: float, maxiter: int):
    """(the fit, the total it holds): the least-squares estimate of ``inner``'s design, its total
    (the public one under replace; 0 if negative, whose only non-negative grid is empty) and the
    non-negative fit of that total from it."""
    least_squares = np.asarray(inner.estimate(shape, measurements).leaves, dtype=float)
    total = measurements.total if measurements.total is not None else float(least_squares.sum())
    total = max(total, 0.0)
    return simplex_fit(measurements, total, start=least_squares, tol=tol, maxiter=maxiter), total


class SimplexFitNoise:
    """Post-processing state of a refitted release: the design, its measurements and the fit's
    settings.  ``resample`` re-draws the noise around the released estimate and re-runs the whole
    post-processing (least squares, its total, the fit)."""

    def __init__(self, inner: GridMechanism, measurements: Measurements, cells: np.ndarray, tol: float, maxiter: int):
        self.inner = inner
        self.measurements = measurements
        self.cells = cells
        self.tol = tol
        self.maxiter = maxiter

    def query_variance(self, cell_weights):
        raise ParameterError(
            "the non-negative fit has no closed-form noise-only variance; use the release's bootstrap(...)"
        )

    def resample(self, rng) -> np.ndarray:
        """One replicate of the cell estimates: each block's answers on the released estimate,
        fresh noise from its sampler, the same post-processing."""
        x = self.cells.ravel()
        redrawn = []
        for m in self.measurements.measurements:
            if m.noise is None:
                raise ParameterError("this release's measurements have no noise sampler to re-draw")
            answers = m.block.matvec(x)
            redrawn.append(dataclasses.replace(m, values=answers + m.noise.sample(answers.shape, rng)))
        replicate = dataclasses.replace(self.measurements, measurements=redrawn)
        fit, _ = refit(self.inner, self.cells.shape, replicate, self.tol, self.maxiter)
        return fit.x.reshape(self.cells.shape)


class NonnegativeAuto(DataAwareGridMechanism):
    """``auto``'s measurements refitted over the non-negative grids of its estimated total
    (module doc).  Pure epsilon-DP (the measurements'); answers without exact error bars."""

    name = "auto_nonnegative"

    PARAMS = (
        WORKLOAD_PARAM,
        ORDER_PARAM,
        Param(
            "tol",
            Custom(check_epsilon, "positive finite number"),
            "stop when a step moves the cells by this many noise units (root mean square)",
            default=1e-5,
        ),
        Param("maxiter", Integer(1), "most iterations of the fit", default=2000),
        *Mechanism.PARAMS,
    )
    workload: object
    order: int
    tol: float
    maxiter: int

    def parameters(self) -> dict:
        """As declared, explicit rectangles written as their saved form (shape, lows, highs)."""
        return {
            "workload": self.workload.to_dict() if isinstance(self.workload, Rectangles) else self.workload,
            "order": self.order,
            "tol": self.tol,
            "maxiter": self.maxiter,
            **super().parameters(),  # the shared parameters (an override lists its own first)
        }

    def least_squares_mechanism(self, shape, epsilon: float) -> GridMechanism:
        """The design ``auto`` chooses for the workload at ``epsilon`` (public values only)."""
        chosen = select_grid(
            shape, epsilon, workload=self.workload, neighbours=self.neighbours, noise=self.noise, order=self.order
        ).mechanism
        assert isinstance(chosen, GridMechanism)
        return chosen

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None) -> DataAwareGridRelease:  # type: ignore[override]
        counts, epsilon = self._check(counts, epsilon, delta)
        inner = self.least_squares_mechanism(counts.shape, epsilon)
        measurements = inner.measure(counts, epsilon, rng=rng)  # the only step that reads the data
        fit, total = refit(inner, counts.shape, measurements, self.tol, self.maxiter)
        design = {"mechanism": inner.name, **inner.parameters()}
        described = inner.describe_strategy(counts.shape, measurements.epsilon)
        if described is not None:
            design["strategy"] = described
        parameters = {
            **self.parameters(),
            "design": design,
            "fitted_total": total,
            "iterations": fit.iterations,
            "converged": fit.converged,
        }
        steps = [step("measure", measurements.epsilon)]
        provenance = data_aware_provenance(
            self, measurements.noise_kind, parameters, steps, epsilon, 0.0, measurements.total, rng
        )
        cells = fit.x.reshape(counts.shape)
        noise = SimplexFitNoise(inner, measurements, cells, self.tol, self.maxiter)
        return DataAwareGridRelease(counts.shape, cells, provenance, noise, domain=domain)


GRID_MECHANISMS.add(
    NonnegativeAuto,
    summary="2-D: auto's measurements refitted by least squares over the non-negative grids of its estimated "
    "total (post-processing; error bars by bootstrap, not exact)",
    citation=Citation(
        "Lee, Wang and Kifer",
        "Maximum Likelihood Postprocessing for Differential Privacy under Consistency Constraints",
        "KDD 2015",
    ),
)

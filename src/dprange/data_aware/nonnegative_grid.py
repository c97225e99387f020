"""``auto_nonnegative``: the data-independent 2-D ``auto`` release refitted over the non-negative
grids of its own estimated total; ``auto_toward_nonnegative``: least squares moved toward that
refit by the weight of least estimated error.

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

Which of least squares and the refit is better depends on the data, and the measurements tell:
``auto_toward_nonnegative`` (auto-data's ``auto`` branch) publishes x_LS + a (g - x_LS), the
weight a in [0, 1] minimising Stein's estimate of the workload's mean squared error
(:func:`refit_risk`), near 1 where the refit gains and near 0 where it biases a dense grid; still
post-processing of the same measurements.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._params import Custom, Integer, Param
from .._validation import check_epsilon, check_positive_int
from ..analysis.grid import check_grid_workload, check_order, select_grid, workload_error, workload_inner
from ..answers.bootstrap import redraw
from ..errors import ParameterError
from ..inference.simplex_fit import simplex_fit
from ..measurements import Measurements
from ..mechanisms.base import GridMechanism, Mechanism
from ..privacy.samplers import resolve_rng
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
TOL_PARAM = Param(
    "tol",
    Custom(check_epsilon, "positive finite number"),
    "stop when a step moves the cells by this many noise units (root mean square)",
    default=1e-5,
)
MAXITER_PARAM = Param("maxiter", Integer(1), "most iterations of the fit", default=2000)
#: The finite-difference step of refit_risk's probes, in units of the measurement noise.
PROBE_STEP = 0.1


def saved_workload(workload):
    """A workload parameter as written in a release: explicit rectangles as their saved form
    (shape, lows, highs), which :func:`check_workload` reads back; a name as it is."""
    return workload.to_dict() if isinstance(workload, Rectangles) else workload


def auto_design(shape, epsilon: float, workload, *, neighbours: str, noise: str, order: int) -> GridMechanism:
    """The data-independent design 2-D ``auto`` runs for ``workload`` at ``epsilon``: the least
    exact expected error (:func:`dprange.analysis.grid.select_grid`, public values only)."""
    chosen = select_grid(shape, epsilon, workload=workload, neighbours=neighbours, noise=noise, order=order).mechanism
    assert isinstance(chosen, GridMechanism)
    return chosen


def refit(
    inner: GridMechanism, shape, measurements: Measurements, tol: float, maxiter: int, least_squares=None, start=None
):
    """(the fit, the total it holds): the least-squares estimate of ``inner``'s design (computed
    unless given), its total (the public one under replace; 0 if negative, whose only non-negative
    grid is empty) and the non-negative fit of that total, started from ``start`` (default: the
    least-squares estimate)."""
    if least_squares is None:
        least_squares = np.asarray(inner.estimate(shape, measurements).leaves, dtype=float)
    total = measurements.total if measurements.total is not None else float(least_squares.sum())
    total = max(total, 0.0)
    first = least_squares if start is None else start
    return simplex_fit(measurements, total, start=first, tol=tol, maxiter=maxiter), total


def moved_toward(least_squares, fitted, weight: float) -> np.ndarray:
    """Least squares moved by ``weight`` in [0, 1] toward the refit: the refit itself at 1."""
    if weight == 1.0:
        return np.asarray(fitted, dtype=float)
    return least_squares + weight * (fitted - least_squares)


@dataclasses.dataclass(frozen=True)
class RefitRisk:
    """Mean squared errors on a workload, from the measurements alone (:func:`refit_risk`):
    ``exact`` least squares' (exact), ``moved`` |W(g - x_LS)|^2 (the refit's move, as released)
    and ``trace`` tr(W^T W J C) (estimated by probes)."""

    exact: float
    moved: float
    trace: float

    def toward(self, weight: float) -> float:
        """Stein's estimate of the error of x_LS + weight (g - x_LS):
        exact + weight^2 moved + 2 weight (trace - exact)."""
        return self.exact + weight**2 * self.moved + 2.0 * weight * (self.trace - self.exact)

    @property
    def refit(self) -> float:
        """Stein's estimate of the refit's error (weight 1)."""
        return self.toward(1.0)

    @property
    def weight(self) -> float:
        """The weight in [0, 1] of least estimated error: (exact - trace) / moved, clipped (0 where
        the refit did not move)."""
        if self.moved <= 0:
            return 0.0
        return float(np.clip((self.exact - self.trace) / self.moved, 0.0, 1.0))


def refit_risk(
    inner: GridMechanism,
    shape,
    measurements: Measurements,
    least_squares,
    fitted,
    workload,
    *,
    order: int,
    probes: int,
    source,
    **fit,
) -> RefitRisk:
    """Least squares' exact mean squared error on ``workload`` and the parts of Stein's estimate
    of the non-negative refit's (``fitted``, of the least-squares estimate ``least_squares``), from
    the measurements alone.

    With x_LS the least-squares estimate of ``inner``'s measurements (covariance C, unbiased) and
    the refit g(x_LS), Stein's identity (Stein, "Estimation of the Mean of a Multivariate Normal
    Distribution", Annals of Statistics 1981) gives, for any fixed weight a,
    E|W(x_LS + a(g - x_LS) - x)|^2 = tr(W C W^T) + a^2 E|W(g - x_LS)|^2 + 2a (tr(W^T W J C) - tr(W C W^T)),
    J the refit's Jacobian: exact for Gaussian noise, an approximation for Laplace noise (whose
    identity weights each row by b(b + |noise|), not by its variance).  The trace is estimated from
    ``probes`` draws w ~ N(0, C) (the least squares of Gaussian noise of the measured variances),
    J w by a finite difference of the refit along them (a step of a tenth of the noise).  O(probes
    refits).  Post-processing: it reads the measurements, never the data.  Raises ParameterError
    unless ``probes`` is a whole number >= 1 (no probe would leave the trace undefined)."""
    probes = check_positive_int(probes, "probes")
    least_squares = np.asarray(least_squares, dtype=float).reshape(shape)
    variance = inner.error_model(shape, measurements.epsilon, delta=measurements.delta)
    exact = workload_error(variance, shape, workload, order)
    moved = fitted.reshape(shape) - least_squares
    traces = []
    for _ in range(probes):
        noise = [
            np.sqrt(m.row_variances()) * np.asarray(source.standard_normal(np.shape(m.values)), dtype=float)
            for m in measurements.measurements
        ]
        zero_total = None if measurements.total is None else 0.0
        probe = np.asarray(inner.estimate(shape, measurements.with_values(noise, total=zero_total)).leaves, dtype=float)
        nudged = measurements.with_values([m.values + PROBE_STEP * e for m, e in zip(measurements.measurements, noise)])
        nudged_least_squares = least_squares.ravel() + PROBE_STEP * probe
        # cost: a refit per probe, started from the refit it perturbs (a tenth of the noise away)
        shifted, _ = refit(inner, shape, nudged, least_squares=nudged_least_squares, start=fitted, **fit)
        jacobian_probe = (shifted.x - fitted.ravel()) / PROBE_STEP
        traces.append(workload_inner(probe.reshape(shape), jacobian_probe.reshape(shape), workload, order))
    return RefitRisk(exact, workload_inner(moved, moved, workload, order), float(np.mean(traces)))


class SimplexFitNoise:
    """Post-processing state of a refitted release: the design, its measurements and the fit's
    settings.  ``resample`` re-draws the noise around the released estimate and re-runs the whole
    post-processing (least squares, its total, the fit, and for an ``auto_toward_nonnegative``
    release least squares moved toward the fit by the released ``weight``, held)."""

    def __init__(
        self,
        inner: GridMechanism,
        measurements: Measurements,
        cells: np.ndarray,
        tol: float,
        maxiter: int,
        weight: float = 1.0,
    ):
        self.inner = inner
        self.measurements = measurements
        self.cells = cells
        self.tol = tol
        self.maxiter = maxiter
        self.weight = weight

    def query_variance(self, cell_weights):
        raise ParameterError(
            "the non-negative fit has no closed-form noise-only variance; use the release's bootstrap(...)"
        )

    def resample(self, rng) -> np.ndarray:
        """One replicate of the cell estimates: the design measured again on the released
        estimate with fresh noise (:func:`dprange.answers.bootstrap.redraw`, each block's own
        sampler), the same post-processing."""
        replicate = redraw(self.measurements, self.cells.ravel(), rng)
        least_squares = np.asarray(self.inner.estimate(self.cells.shape, replicate).leaves, dtype=float)
        if self.weight == 0.0:  # the refit would not move it
            return least_squares.reshape(self.cells.shape)
        fit, _ = refit(self.inner, self.cells.shape, replicate, self.tol, self.maxiter, least_squares=least_squares)
        return moved_toward(least_squares, fit.x, self.weight).reshape(self.cells.shape)


class NonnegativeAuto(DataAwareGridMechanism):
    """``auto``'s measurements refitted over the non-negative grids of its estimated total
    (module doc).  Pure epsilon-DP (the measurements'); answers without exact error bars."""

    name = "auto_nonnegative"

    PARAMS = (WORKLOAD_PARAM, ORDER_PARAM, TOL_PARAM, MAXITER_PARAM, *Mechanism.PARAMS)
    workload: object
    order: int
    tol: float
    maxiter: int

    def parameters(self) -> dict:
        """As declared, explicit rectangles written as their saved form (shape, lows, highs)."""
        return {
            "workload": saved_workload(self.workload),
            "order": self.order,
            "tol": self.tol,
            "maxiter": self.maxiter,
            **super().parameters(),  # the shared parameters (an override lists its own first)
        }

    def least_squares_mechanism(self, shape, epsilon: float) -> GridMechanism:
        """The design ``auto`` chooses for the workload at ``epsilon`` (public values only), kept
        for the next release of the same shape, epsilon and settings (choosing it ranks every
        candidate design by its exact error: a third of a second at 256 x 256)."""
        key = (tuple(shape), float(epsilon), self.neighbours, self.noise, self.order)
        kept = getattr(self, "_chosen_design", None)
        if kept is None or kept[0] != key or kept[1] is not self.workload:
            design = auto_design(
                shape, epsilon, self.workload, neighbours=self.neighbours, noise=self.noise, order=self.order
            )
            kept = (key, self.workload, design)
            self._chosen_design = kept
        return kept[2]

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None) -> DataAwareGridRelease:  # type: ignore[override]
        counts, epsilon = self._check(counts, epsilon, delta)
        inner = self.least_squares_mechanism(counts.shape, epsilon)
        measurements = inner.measure(counts, epsilon, rng=rng)  # the only step that reads the data
        fit, total = refit(inner, counts.shape, measurements, self.tol, self.maxiter)
        return self.released(counts.shape, inner, measurements, fit, total, {}, epsilon, rng, domain)

    def released(
        self,
        shape,
        inner,
        measurements,
        fit,
        total,
        recorded: dict,
        epsilon,
        rng,
        domain,
        weight=1.0,
        least_squares=None,
        noise_of=None,
    ) -> DataAwareGridRelease:
        """The release of least squares (``least_squares``, computed unless given) moved by
        ``weight`` toward the ``fit`` (1: the fit itself), its provenance (one step, the
        measurements) recording the design, ``recorded`` and the fit's total and convergence;
        ``noise_of(cells)`` its bootstrap state (default: :class:`SimplexFitNoise` of these settings)."""
        design = {"mechanism": inner.name, **inner.parameters()}
        described = inner.describe_strategy(shape, measurements.epsilon)
        if described is not None:
            design["strategy"] = described
        parameters = {
            **self.parameters(),
            "design": design,
            **recorded,
            "fitted_total": total,
            "iterations": fit.iterations,
            "converged": fit.converged,
        }
        steps = [step("measure", measurements.epsilon)]
        provenance = data_aware_provenance(
            self, measurements.noise_kind, parameters, steps, epsilon, 0.0, measurements.total, rng
        )
        if least_squares is None and weight != 1.0:
            least_squares = np.asarray(inner.estimate(shape, measurements).leaves, dtype=float)
        cells = moved_toward(least_squares, fit.x, weight).reshape(shape)
        if noise_of is None:
            noise = SimplexFitNoise(inner, measurements, cells, self.tol, self.maxiter, weight=weight)
        else:
            noise = noise_of(cells)
        return DataAwareGridRelease(shape, cells, provenance, noise, domain=domain)


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


class AutoTowardNonnegative(NonnegativeAuto):
    """``auto``'s least squares moved toward its refit over non-negative grids by the weight in
    [0, 1] of least estimated mean squared error on the workload (:func:`refit_risk`: least
    squares' exact error and Stein's estimate of the move's).  The refit gains where most cells are
    empty and loses where it biases a dense grid; the weight, post-processing of the measurements,
    is near 1 on the first and near 0 on the second, and in between it can beat both (a shrinkage
    of least squares toward the constrained fit).  Pure epsilon-DP (the measurements'); the answers
    have no exact error bars (the weight depends on the data)."""

    name = "auto_toward_nonnegative"

    PARAMS = (
        WORKLOAD_PARAM,
        ORDER_PARAM,
        TOL_PARAM,
        MAXITER_PARAM,
        Param("probes", Integer(1), "random probes of the error estimate's trace (a refit each)", default=4),
        *Mechanism.PARAMS,
    )
    probes: int

    def parameters(self) -> dict:
        params = super().parameters()
        shared = {k: params.pop(k) for k in Mechanism.parameters(self)}
        return {**params, "probes": self.probes, **shared}

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None) -> DataAwareGridRelease:  # type: ignore[override]
        counts, epsilon = self._check(counts, epsilon, delta)
        source = resolve_rng(rng)
        shape = counts.shape
        workload = check_grid_workload(self.workload)
        order = check_order(self.order, shape) if workload == "marginals" else self.order
        inner = self.least_squares_mechanism(shape, epsilon)
        measurements = inner.measure(counts, epsilon, rng=source)  # the only step that reads the data
        least_squares = np.asarray(inner.estimate(shape, measurements).leaves, dtype=float)
        fit, total = refit(inner, shape, measurements, self.tol, self.maxiter, least_squares=least_squares)
        risk = refit_risk(
            inner,
            shape,
            measurements,
            least_squares,
            fit.x,
            workload,
            order=order,
            probes=self.probes,
            source=source,
            tol=self.tol,
            maxiter=self.maxiter,
        )
        weight = risk.weight
        estimated = {"least_squares": risk.exact, "nonnegative_fit": risk.refit, "released": risk.toward(weight)}
        recorded = {"weight": weight, "estimated_mse": estimated}
        return self.released(
            shape, inner, measurements, fit, total, recorded, epsilon, rng, domain, weight, least_squares
        )


GRID_MECHANISMS.add(
    AutoTowardNonnegative,
    summary="2-D: auto's least squares moved toward its refit over non-negative grids by the weight of least "
    "estimated error on the workload (Stein's estimate; post-processing; error bars by bootstrap)",
    citation=Citation(
        "Stein", "Estimation of the Mean of a Multivariate Normal Distribution", "Annals of Statistics 1981"
    ),
)

"""Contingency tables with public marginals (Lee, Wang, Kifer, "Maximum Likelihood
Postprocessing for Differential Privacy under Consistency Constraints", KDD 2015, Algorithm 2).

A k-way table of counts is released cell by cell with (discrete) Laplace noise; some of its
marginals are public (for instance the sample size M0 or the one-way marginals M1, section
5.1).  Post-processing makes the noisy table consistent with them: least squares (the
orthogonal projection onto {x : C x = d}), non-negative least squares, or maximum likelihood
(L1, alpha = 0.9 elastic net by default, the paper's setting) by ADMM, where each row of C
sums the cells of one marginal cell.

Pipeline.  The noisy table is a measurement like any other: one block, the identity on the
flattened (C-order) table, with noise calibrated for its sensitivity by the mechanisms' own
:func:`~dprange.strategies.calibration.calibrate` (:func:`measure_table`).  :func:`infer_table` is the one
inference entry point for tables: it adds the published marginals as equality constraints
(:class:`MarginalConstraints`) and runs GLS (a projection) or the shared ADMM of
:mod:`dprange.inference.l1_admm` with the marginal x-step.

Departure from Algorithm 2: the paper puts C x = d in the augmented Lagrangian (a dual
variable eta and a Cholesky factor of C^T C + 2 I); we impose it exactly in the x-step,
which for the identity strategy is a closed form, :func:`marginal_x_update`.  Every iterate
is then consistent and the returned table satisfies the marginals to rounding error.

Error bars.  With noise of variance s^2 on every cell, the GLS table is P y + C^T (C C^T)^+ d
with P = I - C^T (C C^T)^+ C, so its covariance is s^2 P, exactly.  A linear query w of the
cells has variance s^2 ||P w||^2; published marginals (and marginals of their axes) have
variance 0.  For marginals the variance has a closed form (:func:`marginal_variance_factor`),
from the orthogonal (ANOVA) decomposition of functions on the table.  Intervals use the
lattice-aware factor of the 1-D releases (:func:`dprange.answers.types.one_sided_factor`).  NNLS
and L1 tables have no closed-form error: :meth:`TableRelease.bootstrap` reruns the same
inference on parametric replicates.

Product-domain releases.  Any k-D release whose estimate can apply its covariance (the
Kronecker and Fourier designs of :mod:`dprange.mechanisms.grid` and :mod:`dprange.mechanisms.fourier`) takes
published marginals as equality constraints too (:func:`dprange.answers.constrained.constrain`,
``release_grid(..., public_marginals=...)``): the constrained GLS estimate is x - S C^T (C S C^T)^+ (C x - d) with
S = Cov(x), and its covariance S - S C^T (C S C^T)^+ C S gives every rectangle and marginal
cell its exact variance (:class:`dprange.answers.constrained.ConstrainedEstimate`).  :func:`release_table` is this
release on the identity design (``TableRelease.grid``: rectangles, marginals and dominance
counts with exact errors, saved and loaded as JSON); for the identity, S = s^2 I and the
estimate is the projection above.

Privacy: add/remove neighbours (one record added or removed), one record changes one cell by 1
(L1 and L2 sensitivity 1), so the noise scale is 1/epsilon (rounded up so that the loss never
exceeds epsilon), and the noisy table is epsilon-DP.  The public marginals are *inputs*: the
caller passes the published values, which dprange never computes from the table (computing
them would publish them exactly).  Making the noisy table consistent with them is
post-processing of the noisy table and of public values, so the release is epsilon-DP; the
privacy of the marginals themselves is whatever their publisher guaranteed.
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._validation import check_epsilon
from ..answers.bootstrap import check_reps, redraw
from ..answers.constrained import constrain
from ..answers.grid import GridRelease
from ..answers.types import Answer, one_sided_factor
from ..errors import ConvergenceWarning, ParameterError
from ..inference.l1_admm import ADMMResult, admm
from ..inference.marginal_constraints import (
    MarginalConstraints,
    _gram_pinv,
    project_onto_marginals,
    published_marginals,
)
from ..measurements import LinearMeasurement, Measurements
from ..operators.structured import Identity
from ..privacy.noise import NoiseSpec
from ..privacy.samplers import resolve_rng
from ..registry import INFERENCE, NOISE
from ..strategies.calibration import calibrate, is_seeded
from ..strategies.trees import Strategy
from .grid import Kronecker

#: The noise kinds a table release samples: a declared subset of the registered ones (the
#: pure epsilon-DP Laplace samplers; the module doc's accounting is for Laplace noise).
TABLE_NOISE = NOISE.subset(("discrete_laplace", "laplace_float"))


def marginal_x_update(C, d, weight: float, gram_pinv: np.ndarray | None = None):
    """ADMM x-step for the identity strategy under C x = d, O(nnz(C) + k^2) per call.

    argmin_{Cx=d} w^2 ||x - t_r / w||^2 + c ||x - t_x||^2 is the projection of
    (w t_r + c t_x) / (w^2 + c) onto the affine set (equal weights make it orthogonal).
    """
    gram_pinv = _gram_pinv(C) if gram_pinv is None else gram_pinv

    def solve(target_rows, target_x, x_prev, split=1.0):
        v = (weight * target_rows + split * target_x) / (weight**2 + split)
        return project_onto_marginals(v, C, d, gram_pinv)

    return solve


def check_axes(axes, ndim: int) -> tuple[int, ...]:
    """Kept axes of a marginal of an ``ndim``-way table, sorted (ParameterError otherwise)."""
    try:
        kept = tuple(int(a) for a in np.atleast_1d(np.asarray(axes, dtype=int)))
    except (TypeError, ValueError):
        raise ParameterError(f"marginal axes must be integers 0..{ndim - 1}, got {axes!r}") from None
    if any(a < 0 or a >= ndim for a in kept) or len(set(kept)) != len(kept):
        raise ParameterError(f"marginal axes {kept} do not fit a {ndim}-way table; use axes 0..{ndim - 1}")
    return tuple(sorted(kept))


def marginal_variance_factor(shape: tuple, axes, published_axes) -> float:
    """||P m||^2 for the indicator m of any one cell of the marginal over ``axes``:
    the GLS variance of that marginal cell is s^2 times this (s^2 = cell noise variance).

    Functions on the table split orthogonally into components W_S, S a set of axes (the
    ANOVA decomposition: depend on exactly the axes of S, sum to 0 along each of them).  The
    rows of C span the sum of the W_S with S inside some published marginal's axes, so P
    keeps the other components.  The indicator of one cell of the marginal over A has, in
    W_S (S within A), squared norm prod_{j not in A} n_j prod_{i in S} (n_i - 1)/n_i
    prod_{i in A - S} 1/n_i.  Summed exactly (rationals) over the kept S: O(2^|A|).
    No published marginal: the number of cells per marginal cell; a published marginal: 0.
    """
    shape = tuple(int(s) for s in shape)
    kept = tuple(sorted(int(a) for a in axes))
    published = [set(p) for p in published_axes]
    outside = math.prod(shape[j] for j in range(len(shape)) if j not in kept)
    total = Fraction(0)
    for size in range(len(kept) + 1):
        for subset in itertools.combinations(kept, size):
            if any(set(subset) <= p for p in published):
                continue
            term = Fraction(outside)
            for i in kept:
                term *= Fraction(shape[i] - 1, shape[i]) if i in subset else Fraction(1, shape[i])
            total += term
    return float(total)


def measure_table(counts: np.ndarray, epsilon: float, noise: str, rng) -> Measurements:
    """Measure every cell once: one identity block on the flattened (C-order) table, noise
    calibrated by :func:`~dprange.strategies.calibration.calibrate` for its add/remove sensitivity 1
    (scale 1/epsilon, rounded up until 1/scale <= epsilon in exact rational arithmetic)."""
    flat = counts.astype(float).ravel()
    block = Identity(flat.size)
    (spec,) = calibrate(Strategy([block], [epsilon]), "add_remove", noise, [epsilon], epsilon, 0.0)
    values = flat + spec.sample(flat.shape, resolve_rng(rng))
    return Measurements(
        [LinearMeasurement(block, values, spec.variance, spec)], flat.size, epsilon, seeded=is_seeded(rng)
    )


def table_measurement(measurements: Measurements) -> LinearMeasurement:
    """The one identity block of a table's measurements (ParameterError for any other design)."""
    blocks = measurements.measurements
    if len(blocks) != 1 or not isinstance(blocks[0].block, Identity) or blocks[0].noise is None:
        raise ParameterError("table inference needs one identity block with central noise (see measure_table)")
    return blocks[0]


def infer_table(
    measurements: Measurements, constraints: MarginalConstraints, method: str, options: dict
) -> tuple[np.ndarray, ADMMResult | None]:
    """The flattened estimate under C x = d, and the ADMM record for NNLS / L1.

    ``"gls"``: the orthogonal projection of the noisy cells (equal variances make least
    squares the plain projection).  ``"nnls"`` / ``"l1"``: the shared ADMM of
    :func:`dprange.inference.l1_admm.admm` on the identity block, rows weighted by
    1 / (noise scale) (the Laplace likelihood), with the exact marginal x-step, started at
    the clipped GLS estimate; warns :class:`~dprange.errors.ConvergenceWarning` when it stops
    unconverged.  ``options``: ``alpha`` (L1 only), ``tol``, ``maxiter``.
    """
    measured = table_measurement(measurements)
    noisy = np.asarray(measured.values, dtype=float)
    projected = constraints.project(noisy)
    if method == "gls":
        return projected, None
    size = noisy.size
    weights = 1.0 / measured.row_scales()
    x_update = marginal_x_update(constraints.matrix, constraints.values, float(weights[0]), constraints.gram_pinv)
    tol = float(options.get("tol", 1e-7))
    result = admm(
        sp.identity(size, format="csr"),
        noisy,
        weights,
        alpha=0.0 if method == "nnls" else float(options.get("alpha", 0.9)),
        x_update=x_update,
        tol=tol,
        maxiter=int(options.get("maxiter", 20000)),
        x0=np.maximum(projected, 0.0),
    )
    if not result.converged:
        warnings.warn(
            f"{method} table inference (ADMM) stopped after {result.iterations} iterations without meeting "
            f"tol={tol}; raise maxiter or tol",
            ConvergenceWarning,
            stacklevel=3,
        )
    # ADMM returns its non-negative split w; the x iterate meets C x = d exactly and
    # w - x -> 0, so w meets the marginals to the stopping tolerance.
    return result.x, result


#: What an NNLS / L1 table release says about its error bars.
NONLINEAR_TABLE_ERROR_BARS = (
    "{inference} inference has no closed-form standard errors; use least-squares inference "
    "(inference='gls') or TableRelease.bootstrap(axes) for parametric-bootstrap standard errors"
)


@dataclass
class TableRelease:
    """A released contingency table: the post-processed ``table``, the raw ``noisy`` cells,
    the noise, the inference used, the public marginals (kept axes) and, for NNLS / L1, the
    ADMM record ``result``; ``measurements`` (the identity block, its values and noise) and
    ``constraints`` (the published marginals) are the public design the bootstrap reruns.

    GLS releases answer with exact standard errors: :meth:`stderr` (every cell),
    :meth:`marginal_answer` (any marginal, as an :class:`~dprange.answers.types.Answer`),
    :meth:`query` (any linear query of the cells).  NNLS / L1 releases raise ParameterError
    there and offer :meth:`bootstrap`.
    """

    table: np.ndarray
    noisy: np.ndarray
    noise: NoiseSpec
    inference: str
    public_marginals: list
    epsilon: float
    result: ADMMResult | None = None
    seeded: bool = False
    measurements: Measurements | None = None
    constraints: MarginalConstraints | None = None
    options: dict = field(default_factory=dict)
    #: Replicates of the last :meth:`bootstrap` whose ADMM stopped at maxiter (0 for GLS).
    bootstrap_unconverged: int = 0
    #: GLS: the same release as a k-D :class:`~dprange.answers.grid.GridRelease` under the
    #: published marginals (rectangles, marginals, dominance counts with exact errors; JSON).
    grid: Any = None

    @property
    def converged(self) -> bool:
        """Whether the inference met its tolerance (always True for GLS)."""
        return self.result is None or bool(self.result.converged)

    @property
    def _measurements(self) -> Measurements:
        if self.measurements is None:  # a TableRelease built by hand: its noisy cells
            flat = np.asarray(self.noisy, dtype=float).ravel()
            block = LinearMeasurement(Identity(flat.size), flat, self.noise.variance, self.noise)
            return Measurements([block], flat.size, self.epsilon, seeded=self.seeded)
        return self.measurements

    @property
    def exact_error_bars(self) -> bool:
        """True for GLS (exact standard errors); False for NNLS / L1 (use :meth:`bootstrap`)."""
        return self.inference == "gls"

    @property
    def _constraints(self) -> MarginalConstraints:
        if self.constraints is None:  # a TableRelease built by hand, without its constraints
            return MarginalConstraints.build(self.table.shape, [], [])
        return self.constraints

    def marginal(self, axes) -> np.ndarray:
        """The estimate's marginal over the kept ``axes`` (array axes in increasing order)."""
        kept = check_axes(axes, self.table.ndim)
        drop = tuple(a for a in range(self.table.ndim) if a not in kept)
        return self.table.sum(axis=drop)

    def cell_variance(self) -> float | None:
        """Exact per-cell variance of the raw noisy table (the GLS table's variance is this times
        the diagonal of I - C^T (C C^T)^+ C, :meth:`variance`; NNLS / L1 have no closed form)."""
        return self.noise.variance

    def _require_error_bars(self) -> None:
        if not self.exact_error_bars:
            raise ParameterError(NONLINEAR_TABLE_ERROR_BARS.format(inference=self.inference))

    def variance(self, axes=None) -> np.ndarray:
        """Exact variance of every cell (``axes=None``) or of every cell of the marginal over
        ``axes``, shaped like the answer: s^2 ||P m||^2 (:func:`marginal_variance_factor`)."""
        self._require_error_bars()
        kept = tuple(range(self.table.ndim)) if axes is None else check_axes(axes, self.table.ndim)
        factor = marginal_variance_factor(self.table.shape, kept, self._constraints.axes)
        return np.full(tuple(self.table.shape[a] for a in kept), self.noise.variance * factor)

    def stderr(self, axes=None) -> np.ndarray:
        """Exact standard error of every cell (or of every cell of the marginal over ``axes``)."""
        return np.sqrt(self.variance(axes))

    def _factor(self, alpha: float) -> float:
        return one_sided_factor(alpha, self.noise.kind, [self.noise.scale])

    def marginal_answer(self, axes) -> Answer:
        """The marginal over ``axes`` with exact standard errors and confidence intervals
        (published marginals and their sub-marginals: standard error 0)."""
        variance = self.variance(axes)
        return Answer(self.marginal(axes), variance, scalar=variance.ndim == 0, factor=self._factor)

    def cells(self) -> Answer:
        """Every cell of the table with its exact standard error (an Answer shaped like it)."""
        return Answer(self.table, self.variance(), factor=self._factor)

    def query(self, weights) -> Answer:
        """Linear queries of the cells: ``weights`` shaped like the table (one query) or
        (q,) + table shape; variance s^2 ||P w||^2 with P the projection onto C x = 0."""
        self._require_error_bars()
        w = np.asarray(weights, dtype=float)
        single = w.shape == self.table.shape
        if not single and w.shape[1:] != self.table.shape:
            raise ParameterError(
                f"query weights must have the table's shape {self.table.shape} or (q,) + that shape, got {w.shape}"
            )
        rows = w.reshape(-1, self.table.size)
        if not np.all(np.isfinite(rows)):
            raise ParameterError("query weights must be finite")
        values = rows @ self.table.ravel()
        variance = self.noise.variance * self._constraints.residual_norms(rows)
        if single:
            return Answer(values[0], variance[0], scalar=True, factor=self._factor)
        return Answer(values, variance, factor=self._factor)

    def bootstrap(self, axes=None, *, reps: int = 200, rng=None) -> np.ndarray:
        """Parametric-bootstrap standard errors of every cell (``axes=None``) or of the marginal
        over ``axes``: each replicate adds fresh noise of the release's kind and scale to the
        released table and reruns the same inference under the same published marginals
        (post-processing: public parameters and the release only).  For GLS it reproduces
        :meth:`stderr` up to Monte-Carlo error.  O(reps x inference cost)."""
        reps = check_reps(reps)
        kept = tuple(range(self.table.ndim)) if axes is None else check_axes(axes, self.table.ndim)
        drop = tuple(a for a in range(self.table.ndim) if a not in kept)
        source = resolve_rng(rng)
        centre = self.table.ravel()
        answers = []
        self.bootstrap_unconverged = 0
        for _ in range(reps):
            replicate = redraw(self._measurements, centre, source)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)  # counted, warned once below
                estimate, result = infer_table(replicate, self._constraints, self.inference, self.options)
            if result is not None and not result.converged:
                self.bootstrap_unconverged += 1
            answers.append(estimate.reshape(self.table.shape).sum(axis=drop))
        if self.bootstrap_unconverged:
            warnings.warn(
                f"{self.bootstrap_unconverged} of {reps} bootstrap replicates stopped at maxiter without "
                "converging; their spread may be off: release again with a larger maxiter",
                ConvergenceWarning,
                stacklevel=2,
            )
        return np.std(answers, axis=0, ddof=1)


def release_table(
    table,
    epsilon,
    *,
    public_marginals=None,
    inference: str = "gls",
    noise: str = "discrete_laplace",
    alpha: float = 0.9,
    rng=None,
    tol: float = 1e-7,
    maxiter: int = 20000,
) -> TableRelease:
    """Release a k-way table of counts, consistent with published marginals.

    ``public_marginals`` maps tuples of kept axes to their *published* values, e.g.
    ``{(): n}`` for a public sample size M0, ``{(0,): rows, (1,): cols}`` for the one-way
    marginals M1; the values must have the marginal's shape (axes in the order given) and
    agree with one another.  ``inference``: ``"gls"`` (projection, exact error bars),
    ``"nnls"`` or ``"l1"`` (ADMM, non-negative, ``alpha`` as in Lee, Wang and Kifer, KDD
    2015; bootstrap error bars).  epsilon-DP for add/remove neighbours (see the module doc).
    Cost: GLS O(cells k + k^3); ADMM O(iterations x (cells k + k^2)), k = number of public
    marginal cells.
    """
    counts = np.asarray(table)
    if counts.ndim < 1 or counts.size == 0 or counts.dtype.kind not in "iuf" or np.any(counts < 0):
        raise ParameterError("the table must be a non-empty array of non-negative counts")
    epsilon = check_epsilon(epsilon)
    if inference not in INFERENCE.names():
        raise ParameterError(f"inference must be one of {', '.join(INFERENCE.names())}, got {inference!r}")
    if noise not in TABLE_NOISE:
        raise ParameterError(f"noise must be one of {', '.join(TABLE_NOISE)} for a table, got {noise!r}")
    if noise == "discrete_laplace" and counts.dtype.kind == "f" and np.any(counts != np.round(counts)):
        raise ParameterError(
            "discrete Laplace noise needs integer counts; round the table or use noise='laplace_float'"
        )
    if not 0.0 <= alpha <= 1.0:
        raise ParameterError(f"alpha must be in [0, 1], got {alpha}")
    marginals, published = published_marginals({} if public_marginals is None else public_marginals, counts.shape)
    constraints = MarginalConstraints.build(counts.shape, marginals, published)
    measurements = measure_table(counts, epsilon, noise, rng)
    options: dict[str, Any] = {"alpha": alpha, "tol": tol, "maxiter": maxiter}
    (measured,) = measurements.measurements
    assert measured.noise is not None  # measure_table always draws central noise
    grid = None
    if inference == "gls":  # the product-domain release under the published marginals
        grid = constrain(table_grid_release(counts.shape, measurements, noise), dict(zip(marginals, published)))
        estimate, result = np.asarray(grid.estimate.leaves, dtype=float), None
    else:
        estimate, result = infer_table(measurements, constraints, inference, options)
    return TableRelease(
        estimate.reshape(counts.shape),
        np.asarray(measured.values).reshape(counts.shape),
        measured.noise,
        inference,
        marginals,
        epsilon,
        result,
        measurements.seeded,
        measurements,
        constraints,
        options,
        grid=grid,
    )


def table_grid_release(shape, measurements: Measurements, noise: str):
    """The table's measurements as the k-D release of the identity design
    (``Kronecker("identity")``: per-axis least squares, exact errors)."""
    mech = Kronecker("identity", noise=noise)
    estimate = mech.estimate(shape, measurements)
    return GridRelease(shape, estimate, measurements, mechanism=mech.name, parameters=mech.parameters())

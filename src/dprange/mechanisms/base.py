"""Central-DP mechanisms: select a strategy, measure it with noise, infer the histogram.

Each mechanism reads like its paper: ``measure`` (strategy + calibrated noise) then ``infer``
(least squares), and ``release`` returns a :class:`~dprange.answers.release.Release` whose answers
carry exact standard errors.

Privacy.  ``neighbours="add_remove"`` (default): neighbouring datasets differ by one record
added or removed; the total is private (estimated).  ``neighbours="replace"``: one record
changes its value and the number of records is public; dprange takes the total as
``counts.sum()``: use it only when that number is truly public.  Every sensitivity is derived
from the record-level relation, per norm, from the strategy (weighted by the budget split):
see :mod:`dprange.strategies` and docs/privacy.md.  Every measured query is an integer
combination of counts, so integer noise reveals nothing beyond the noisy value.

Noise.  ``noise="auto"`` uses discrete Laplace (integer, pure epsilon-DP) when delta = 0 and
Gaussian noise when delta > 0 (the discrete Gaussian of Canonne, Kamath and Steinke,
NeurIPS 2020).  ``"laplace_float"`` is continuous floating-point Laplace, for reproducing
papers only (see :mod:`dprange.privacy.noise`).  A budget split gives level l the budget eps_l (exact sum at
most epsilon).  Laplace: with S = max over neighbouring pairs of sum_l eps_l ||change of
level l||_1, level l gets scale b_l = (S / epsilon) / eps_l, so the privacy loss
sum_l ||change_l||_1 / b_l is at most epsilon (sequential composition; for add/remove trees
b_l = 1 / eps_l).  Gaussian: level l's rows are weighted by f_l = eps_l / epsilon, one sigma is
calibrated for the weighted strategy's L2 sensitivity, and level l's noise has standard
deviation sigma / f_l.  Scales are rounded up and checked in exact rational arithmetic, so
floating-point rounding never raises the privacy loss above epsilon; scales above
:data:`~dprange._validation.MAX_NOISE_SCALE` (too small an epsilon) are refused up front.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._params import OneOf, Options, Param, bind, signature
from .._validation import NEIGHBOURS, check_delta, check_epsilon, check_positive_int
from ..answers.grid import GridRelease
from ..answers.provenance import Provenance
from ..answers.release import Release
from ..domain import Domain
from ..errors import ParameterError
from ..inference.dispatch import ADMM_OPTIONS, design_error_model, infer
from ..inference.dispatch import least_squares as dispatch_least_squares
from ..inference.kron import kron_block_answers
from ..measurements import LinearMeasurement, Measurements
from ..operators.structured import block_answers
from ..privacy.noise import NoiseSpec
from ..privacy.samplers import resolve_rng
from ..registry import INFERENCE, NOISE
from ..strategies.budgets import split_budget
from ..strategies.calibration import calibrate, is_seeded, noisy_answers, resolve_noise
from ..strategies.kron import KronStrategy
from ..strategies.trees import Strategy
from ..workloads.rectangles import check_shape


def check_counts(counts) -> np.ndarray:
    """Validate a histogram of exact counts: a 1-D array of finite non-negative integers."""
    arr = np.asarray(counts)
    if arr.ndim != 1 or arr.size == 0:
        raise ParameterError("counts must be a non-empty 1-D array of bin counts")
    if arr.dtype.kind not in "biuf":
        raise ParameterError("counts must be numeric")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ParameterError("counts must be finite whole numbers (bucketize raw values with a Domain)")
    if np.any(arr < 0):
        raise ParameterError("counts must be non-negative")
    if float(np.sum(arr, dtype=float)) > 2.0**53:
        raise ParameterError("counts must total at most 2^53 (exact in int64 level sums and float64 inference)")
    return arr.astype(np.int64)


class Mechanism:
    """Base class: ``release = infer(measure(counts))`` with privacy bookkeeping.

    Every parameter is declared once in the class's ``PARAMS`` (:mod:`dprange._params`):
    the base ``__init__`` checks the arguments against them with one call and keeps them as
    attributes; subclasses add their own declarations instead of writing an ``__init__``.
    """

    name = "mechanism"

    PARAMS: tuple[Param, ...] = (
        Param(
            "neighbours",
            OneOf(NEIGHBOURS),
            "neighbouring relation: add or remove one record, or replace one record's value (the total is public)",
            default="add_remove",
        ),
        Param(
            "noise",
            OneOf(lambda: ("auto", *NOISE.names())),
            "noise kind; auto = discrete Laplace if delta = 0, Gaussian if delta > 0",
            default="auto",
        ),
        Param(
            "inference",
            OneOf(INFERENCE.names),
            "post-processing: exact least squares (gls), non-negative least squares (nnls) or maximum likelihood (l1)",
            default="gls",
        ),
        Param(
            "inference_options",
            Options(ADMM_OPTIONS, "inference options"),
            "ADMM options of nnls and l1 (alpha: elastic-net weight of the L1 term, default 0.9)",
            default=None,
        ),
    )
    neighbours: str
    noise: str
    inference: str
    inference_options: dict

    def __init__(self, *args, **kwargs):
        values = bind(type(self).PARAMS, args, kwargs, type(self).__name__)
        for param in type(self).PARAMS:
            setattr(self, param.key, values[param.name])

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.__signature__ = signature(cls.PARAMS)  # type: ignore[attr-defined]

    # Subclasses implement these two.
    def strategy(self, n: int):
        """The shape of the measured queries on n bins (a :class:`TreeStrategy`,
        :class:`HaarStrategy` or matrix strategy): its ``blocks()`` are the operators."""
        raise NotImplementedError

    def budget_fractions(self, strategy, epsilon: float) -> np.ndarray:
        raise NotImplementedError

    def strategy_at(self, n: int, epsilon, delta=0.0):
        """The strategy a release at (epsilon, delta) measures on n bins: :meth:`strategy`,
        except where it depends on the privacy parameters (:class:`~dprange.mechanisms.optimized.Optimized`,
        whose template auto follows delta), checked before any value is read."""
        return self.strategy(n)

    def level_budgets(self, strategy, epsilon: float) -> list[float]:
        """Budget of every measured block, in order; exact sum at most :meth:`spent_epsilon`."""
        return split_budget(self.budget_fractions(strategy, epsilon), epsilon)

    def spent_epsilon(self, epsilon: float) -> float:
        """The epsilon a release with budget ``epsilon`` spends (and records)."""
        return epsilon

    def parameters(self) -> dict:
        """{name: value} of the declared parameters (``PARAMS``, in order), as provenance and
        JSON record them and as the class takes them back (``type(m)(**m.parameters())``).

        ``inference`` is written only when it is not the default GLS, and
        ``inference_options`` only then and when not empty (the keys releases have always
        recorded).  A subclass that overrides this method (its declared values are not JSON:
        :class:`~dprange.mechanisms.matrix.Matrix`'s strategy matrix, ``Optimized``'s workload object)
        lists its own keys and calls ``super().parameters()`` for the shared ones: for such a
        class this gives the parameters of :attr:`Mechanism.PARAMS` only."""
        overridden = type(self).parameters is not Mechanism.parameters
        declared = Mechanism.PARAMS if overridden else type(self).PARAMS
        params: dict[str, Any] = {}
        for param in declared:
            value = getattr(self, param.key)
            if param.name == "inference" and value == "gls":
                continue
            if param.name == "inference_options" and (self.inference == "gls" or not value):
                continue
            params[param.name] = value
        return params

    def sensitivity(self, n: int) -> tuple[float, float]:
        """(L1, L2) sensitivity of the (unweighted) strategy on n bins under the relation."""
        strategy = self.strategy(check_positive_int(n, "n"))
        return strategy.sensitivity(self.neighbours, 1), strategy.sensitivity(self.neighbours, 2)

    def plan(self, shape, epsilon: float) -> Strategy:
        """The :class:`Strategy` measured with budget ``epsilon``: the shape's blocks and the
        budget split (:meth:`level_budgets`)."""
        blocks = shape.blocks()
        budget = self.level_budgets(shape, epsilon) if blocks else []
        return Strategy(blocks, budget, shape=shape)

    def noise_specs(self, strategy, epsilon: float, delta: float) -> list[NoiseSpec]:
        """The calibrated noise of every measured block, in order (data-independent)."""
        epsilon = check_epsilon(epsilon)
        kind = resolve_noise(self.noise, delta)
        plan = self.plan(strategy, epsilon)
        if not plan.blocks:
            return []
        return calibrate(plan, self.neighbours, kind, plan.budget, self.spent_epsilon(epsilon), delta)

    def design(self, n: int, epsilon, *, delta=0.0) -> Measurements:
        """The measurements' design on n bins (blocks, noise, provenance) with zero values:
        what the error model depends on, before any data are read."""
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        shape = self.strategy(check_positive_int(n, "n"))
        blocks = shape.blocks()
        specs = self.noise_specs(shape, epsilon, delta)
        measured = [
            LinearMeasurement(block, np.zeros(block.shape[0]), spec.variance, spec)
            for block, spec in zip(blocks, specs)
        ]
        total = 0.0 if self.neighbours == "replace" else None
        return Measurements(measured, shape.n, self.spent_epsilon(epsilon), delta, self.neighbours, total)

    def measure(self, counts, epsilon, *, delta=0.0, rng=None) -> Measurements:
        """Answer the strategy's blocks on ``counts`` with calibrated noise.

        The noise is calibrated (and the budget checked) before the counts are read."""
        counts = check_counts(counts)
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        source = resolve_rng(rng)
        shape = self.strategy(counts.size)
        blocks = shape.blocks()
        specs = self.noise_specs(shape, epsilon, delta)
        measured = [
            LinearMeasurement(block, noisy_answers(exact, spec, source), spec.variance, spec)
            for block, spec, exact in zip(blocks, specs, block_answers(blocks, counts))
        ]
        total = float(counts.sum()) if self.neighbours == "replace" else None
        return Measurements(
            measured,
            counts.size,
            self.spent_epsilon(epsilon),
            delta,
            self.neighbours,
            total,
            seeded=is_seeded(rng),
        )

    def level_variances(self, strategy, epsilon: float, delta: float) -> list:
        """Noise variance by tree depth / Haar level (None where unmeasured); one entry per
        block for other strategies."""
        return self.design(strategy.n, epsilon, delta=delta).variances

    def error_model(self, n: int, epsilon, *, delta=0.0):
        """The exact error model of this mechanism on n bins, before any data is touched.

        Linear mechanisms with least-squares inference have data-independent error: the
        returned object gives ``range_variance(lo, hi)`` and ``query_variance(weights)``
        (the GLS estimate of :func:`dprange.inference.infer` on the zero design).
        """
        return design_error_model(self.design(n, epsilon, delta=delta))

    def _exact_levels(self, strategy, counts):
        """Exact answers of the measured blocks, by tree depth / Haar level (None where not
        measured), one entry per block for other strategies."""
        blocks = strategy.blocks()
        answers = block_answers(blocks, np.asarray(counts))
        design = Measurements([LinearMeasurement(b, a, 1.0) for b, a in zip(blocks, answers)], strategy.n, 0.0)
        return design.values

    def least_squares(self, measurements: Measurements):
        """Exact least-squares estimate (post-processing only)."""
        return dispatch_least_squares(measurements)

    def infer(self, measurements: Measurements):
        """The estimate of x: GLS, or NNLS / L1 by ADMM (Lee et al. 2015) from the GLS start."""
        return infer(measurements, self.inference, self.inference_options)

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain: Domain | None = None) -> Release:
        """Measure ``counts`` (exact bin counts) and return the private release."""
        measurements = self.measure(counts, epsilon, delta=delta, rng=rng)
        estimate = self.infer(measurements)
        params = self.parameters()
        params["strategy"] = self.strategy(measurements.n).describe()
        provenance = Provenance(
            mechanism=self.name,
            parameters=params,
            epsilon=measurements.epsilon,
            delta=measurements.delta,
            neighbours=self.neighbours,
            total=measurements.total,
            inference=self.inference,
            inference_options=self.inference_options,
            noise=measurements.noise_kind,
            seeded=measurements.seeded,
            converged=bool(getattr(estimate, "converged", True)),
            noise_scales=[m.noise.scale for m in measurements.measurements if m.noise is not None],
        )
        return Release(estimate.leaves, estimate, provenance, domain=domain, measurements=measurements)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.parameters().items())
        return f"{type(self).__name__}({args})"


def check_grid_counts(counts) -> np.ndarray:
    """A k-D histogram of exact counts: finite non-negative whole numbers, as int64."""
    arr = np.asarray(counts)
    if arr.ndim < 1 or arr.size == 0:
        raise ParameterError("counts must be a non-empty k-D array of cell counts (ProductDomain.histogram)")
    if arr.dtype.kind not in "biuf":
        raise ParameterError("counts must be numeric")
    if arr.dtype.kind == "f" and (not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr))):
        raise ParameterError("counts must be finite whole numbers (bucketize raw values with a ProductDomain)")
    if np.any(arr < 0):
        raise ParameterError("counts must be non-negative")
    if float(np.sum(arr, dtype=float)) > 2.0**53:
        raise ParameterError("counts must total at most 2^53")
    return arr.astype(np.int64)


# ----------------------------------------------------------------------------- mechanisms
class GridMechanism(Mechanism):
    """Base of the k-D mechanisms: ``plan(shape, epsilon)``, ``measure`` a k-D histogram,
    ``estimate`` (exact least squares), ``release`` a :class:`~dprange.answers.grid.GridRelease`."""

    #: Whether its estimate applies its covariance (``covariance_apply``), which published
    #: marginals need (:func:`dprange.answers.constrained.constrain`).
    constrainable = False
    #: Whether it is made for marginals only (:func:`check_answers_workload` refuses it, named,
    #: for a rectangle workload it does not answer).
    made_for_marginals = False
    #: The k-D command line's shared options it takes (``--branching``, ``--budget``, ``--root``,
    #: by their keys "branching", "budget", "measure_root"), each mapped to the declared parameter
    #: it sets; the CLI parses the text by that parameter's constraint.
    CLI_OPTIONS: dict[str, str] = {}

    def plan(self, shape, epsilon: float) -> Strategy:
        raise NotImplementedError

    def saved_plans(self, shape, epsilon: float) -> list[Strategy]:
        """The designs a saved release of this mechanism may have been measured with, the
        current one (:meth:`plan`) first; :func:`load_grid_release` takes the first whose
        blocks and noise match the saved ones."""
        return [self.plan(shape, epsilon)]

    def describe_strategy(self, shape, epsilon: float) -> dict | None:
        """How an optimised design was obtained, recorded in the release's
        ``parameters["strategy"]`` (not used to rebuild it); None for fixed designs."""
        return None

    def follow_delta(self, delta: float) -> None:
        """Record the delta the release runs at, before :meth:`plan`, for designs chosen by it
        (:class:`~dprange.mechanisms.optimized_grid.OptimizedKronecker` with template auto); others ignore it."""

    def _vector(self, counts: np.ndarray) -> np.ndarray:
        """The x the strategy's blocks act on (C order; k-D trees permute it)."""
        return counts.ravel()

    def _noise(self, plan: Strategy, epsilon: float, delta: float):
        kind = resolve_noise(self.noise, delta)
        return calibrate(plan, self.neighbours, kind, plan.budget, epsilon, delta)

    def measure(self, counts, epsilon, *, delta=0.0, rng=None) -> Measurements:
        """Noisy answers of every block; noise calibrated before the counts are read."""
        counts = check_grid_counts(counts)
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        source = resolve_rng(rng)
        plan = self.plan(counts.shape, epsilon)
        specs = self._noise(plan, epsilon, delta)
        x = self._vector(counts)
        if isinstance(plan, KronStrategy):  # shared partial products instead of one pass per block
            answers = kron_block_answers(plan.axis_levels, plan.combos, counts)
        else:
            answers = [block.answers(x) for block in plan.blocks]  # exact for integer blocks
        measured = []
        for block, spec, answer in zip(plan.blocks, specs, answers):
            # Integer answers stay exact (np.rint would pass them through float64).
            exact = answer if answer.dtype.kind in "iuO" else np.rint(answer).astype(np.int64)
            measured.append(LinearMeasurement(block, noisy_answers(exact, spec, source), spec.variance, spec))
        total = float(counts.sum()) if self.neighbours == "replace" else None
        return Measurements(
            measured, x.size, epsilon, delta, self.neighbours, total, seeded=is_seeded(rng), source="central"
        )

    def estimate(self, shape, measurements: Measurements):
        raise NotImplementedError

    def error_model(self, shape, epsilon, *, delta=0.0):
        """The exact error model before any data: the estimate of the zero design."""
        shape = check_shape(shape)
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        plan = self.plan(shape, epsilon)
        specs = self._noise(plan, epsilon, delta)
        zeros = [LinearMeasurement(b, np.zeros(b.shape[0]), s.variance, s) for b, s in zip(plan.blocks, specs)]
        total = 0.0 if self.neighbours == "replace" else None
        n = plan.blocks[0].shape[1]
        return self.estimate(shape, Measurements(zeros, n, epsilon, delta, self.neighbours, total))

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None):
        """Measure the k-D ``counts`` and return a :class:`~dprange.answers.grid.GridRelease`."""
        if self.inference != "gls":
            raise ParameterError("k-D mechanisms use exact least squares only; pass inference='gls'")
        counts = check_grid_counts(counts)
        measurements = self.measure(counts, epsilon, delta=delta, rng=rng)
        estimate = self.estimate(counts.shape, measurements)
        parameters = self.parameters()
        described = self.describe_strategy(counts.shape, measurements.epsilon)
        if described is not None:
            parameters["strategy"] = described
        return GridRelease(
            counts.shape, estimate, measurements, mechanism=self.name, parameters=parameters, domain=domain
        )

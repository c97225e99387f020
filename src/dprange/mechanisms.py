"""Central-DP mechanisms: select a strategy, measure it with noise, infer the histogram.

Each mechanism reads like its paper: ``measure`` (strategy + calibrated noise) then ``infer``
(least squares), and ``release`` returns a :class:`~dprange.release.Release` whose answers
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
papers only (see :mod:`dprange.noise`).  A budget split gives level l the budget eps_l (exact sum at
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

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ._params import Flag, IntegerOrList, OneOf, Options, Param, RuleOrNumbers, bind, signature
from ._validation import (
    NEIGHBOURS,
    check_budget_list,
    check_delta,
    check_epsilon,
    check_neighbours,
    check_noise_scale,
    check_positive_int,
    exact_sum,
    fit_budget,
    float_at_least,
)
from .domain import Domain
from .errors import ParameterError
from .inference.dispatch import ADMM_OPTIONS, NonlinearEstimate, design_error_model, infer
from .inference.dispatch import least_squares as dispatch_least_squares
from .measurements import LinearMeasurement, Measurements
from .noise import NOISE_KINDS, NoiseSpec, SecureRandom, gaussian_sigma, resolve_rng
from .operators import block_answers
from .registry import INFERENCE, MECHANISMS, NOISE, Citation
from .release import Provenance, Release
from .strategies import HaarStrategy, Strategy, TreeStrategy

__all__ = ["Flat", "Hierarchical", "Mechanism", "NonlinearEstimate", "Wavelet"]

BUDGET_RULES = ("uniform", "geometric")


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


def resolve_noise(noise: str, delta: float) -> str:
    """The noise kind to use for ``noise`` ("auto" or a kind) at this delta."""
    if noise == "auto":
        return "gaussian" if delta > 0 else "discrete_laplace"
    if noise not in NOISE_KINDS:
        raise ParameterError(f"noise must be 'auto' or one of {', '.join(NOISE_KINDS)}, got {noise!r}")
    if noise == "gaussian" and delta <= 0:
        raise ParameterError("Gaussian noise needs delta > 0; pass delta or use Laplace noise")
    return noise


def split_budget(weights, epsilon: float) -> list[float]:
    """Per-level budgets proportional to ``weights`` whose exact sum is at most epsilon."""
    weights = np.asarray(weights, dtype=float)
    return fit_budget([epsilon * w / weights.sum() for w in weights], epsilon)


def optimal_budgets(branching, epsilon: float) -> list[float]:
    """Per-level budgets minimising the worst prefix (CDF) error of a level-uniform tree with
    per-level branching ``branching`` (Rameshwar and Tandon, "Optimal Tree-Based Mechanisms
    for Differentially Private Approximate CDFs", 2024, Theorem IV.2):
    eps_l = eps (b_l - 1)^(1/3) / sum_k (b_k - 1)^(1/3); see :mod:`dprange.cdf_trees`."""
    epsilon = check_epsilon(epsilon)
    weights = np.array([(b - 1) ** (1.0 / 3.0) for b in branching], dtype=float)
    budgets = list(epsilon * weights / weights.sum())
    budgets[-1] = epsilon - sum(budgets[:-1])
    return fit_budget(budgets, epsilon)  # exact sum <= epsilon (Hierarchical refuses more)


def _bump(values: list[float]) -> list[float]:
    return [math.nextafter(v, math.inf) for v in values]


def laplace_scales(strategy: Strategy, neighbours: str, level_epsilons: list[float], epsilon: float) -> list[float]:
    """Scales b_l = (S / epsilon) / eps_l (module doc), rounded up until the exact worst-case
    loss max_pairs sum_l ||change_l||_1 / b_l is at most epsilon.  Sensitivities are those
    of the strategy's weighted operator (:meth:`Strategy.sensitivity_power`)."""
    weighted = strategy.sensitivity_power(1, neighbours, [Fraction(e) for e in level_epsilons])
    ratio = float(weighted / Fraction(epsilon)) if weighted > 0 else 1.0
    scales = [ratio / e for e in level_epsilons]
    for b, e in zip(scales, level_epsilons):
        check_noise_scale(b, e)
    while strategy.sensitivity_power(1, neighbours, [1 / Fraction(b) for b in scales]) > Fraction(epsilon):
        scales = _bump(scales)
    return scales


def gaussian_scales(
    strategy: Strategy, neighbours: str, level_epsilons: list[float], epsilon: float, delta: float
) -> list[float]:
    """sigma_l = sigma / f_l with sigma calibrated for the L2 sensitivity of the strategy whose
    level l is weighted by f_l = eps_l / epsilon; rounded up until the exact weighted
    sensitivity max_pairs sum_l ||change_l||_2^2 / sigma_l^2 is at most (Delta / sigma)^2."""
    fractions = [e / epsilon for e in level_epsilons]
    squared = strategy.sensitivity_power(2, neighbours, [Fraction(f) for f in fractions])
    l2 = math.sqrt(float(squared)) if squared > 0 else 1.0
    while Fraction(l2) ** 2 < squared:
        l2 = math.nextafter(l2, math.inf)
    sigma = gaussian_sigma(epsilon, delta, l2)
    sigmas = [sigma / f for f in fractions]
    for s, e in zip(sigmas, level_epsilons):
        check_noise_scale(s, e)
    allowed = (Fraction(l2) / Fraction(sigma)) ** 2
    while strategy.sensitivity_power(2, neighbours, [1 / Fraction(s) for s in sigmas]) > allowed:
        sigmas = _bump(sigmas)
    return sigmas


def calibrate(
    strategy: Strategy, neighbours: str, kind: str, level_epsilons: list[float], epsilon: float, delta: float
) -> list[NoiseSpec]:
    """The noise of every block of ``strategy`` for budgets ``level_epsilons`` (exact sum <= epsilon)."""
    if kind == "gaussian":
        scales = gaussian_scales(strategy, neighbours, level_epsilons, epsilon, delta)
    else:
        scales = laplace_scales(strategy, neighbours, level_epsilons, epsilon)
    return [NoiseSpec(kind, scale) for scale in scales]


def noisy_answers(exact: np.ndarray, spec: NoiseSpec, source) -> np.ndarray:
    """The exact answers plus the calibrated noise.  Exact integers beyond int64 (Python
    integers, object dtype) take the noise exactly; only the noisy values are then rounded to
    floats, which is post-processing."""
    noisy = exact + spec.sample(exact.shape, source)
    return noisy.astype(float) if noisy.dtype == object else noisy


def is_seeded(rng) -> bool:
    """Whether noise comes from a seeded (predictable) generator rather than os.urandom."""
    return rng is not None and not isinstance(rng, SecureRandom)


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
        except where it depends on the privacy parameters (:class:`~dprange.optimized.Optimized`,
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
        :class:`~dprange.matrix.Matrix`'s strategy matrix, ``Optimized``'s workload object)
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


class Flat(Mechanism):
    """One noisy count per bin (the Laplace/identity baseline; Qardaji, Yang and Li, "Understanding
    Hierarchical Methods for Differentially Private Histograms", PVLDB 2013, section 3.1).

    In the replace model the public total is used by least squares: the noisy bins are
    shifted equally so that they sum to it.
    """

    name = "flat"

    def strategy(self, n: int) -> TreeStrategy:
        return TreeStrategy(n, (max(n, 2),), measure_root=False, known_total=self.neighbours == "replace")

    def budget_fractions(self, strategy, epsilon) -> np.ndarray:
        return np.ones(1)


class Hierarchical(Mechanism):
    """Hierarchical histogram H_b with constrained inference (Qardaji, Yang and Li,
    PVLDB 2013; Rameshwar and Tandon, "Optimal Tree-Based Mechanisms for Differentially Private
    Approximate CDFs", 2024, for trees with per-level branching).

    Parameters
    ----------
    branching : int b >= 2 (a b-ary tree of height ceil(log_b n)) or a list of per-level
        branching factors from the root down whose product is >= n (a level-uniform tree).
    budget : "uniform" (epsilon split equally over measured levels), "geometric" (level
        budget proportional to (nodes in the level)^(1/3), growing toward the leaves; Cormode
        et al., ICDE 2012), or an explicit list with one entry per measured level, top down,
        summing to epsilon.
    measure_root : in the add/remove model, whether the root (the total) is measured
        (default False, as in Qardaji et al.: spending budget on the root costs more than it
        brings; exact all-range and prefix errors are 1.05-2.2x higher with it, measured with
        :func:`dprange.expected_error` for b = 2..64 and n = 64..65536).  In the replace
        model the root is the public total and never measured.
    neighbours, noise : see the module doc.

    Inference is exact GLS in O(number of nodes) (:func:`dprange.inference.tree.tree_gls`).
    """

    name = "hierarchical"

    PARAMS = (
        Param(
            "branching",
            IntegerOrList(2, "every branching factor", "the branching list is empty; give at least one factor >= 2"),
            "branching factor b >= 2, or per-level factors from the root down, e.g. 4,16,16",
            default=16,
            positional=True,
            option="--branching",
        ),
        Param(
            "budget",
            RuleOrNumbers(BUDGET_RULES, "per-level budgets"),
            "uniform, geometric, or per-level budgets (root first) summing to at most epsilon",
            default="uniform",
            positional=True,
            option="--budget",
        ),
        Param(
            "measure_root",
            Flag(),
            "add/remove only: measure the root (the total) too; off by default (Qardaji et al.), "
            "which has the lower exact error",
            default=False,
            option="--root/--no-root",
        ),
        *Mechanism.PARAMS,
    )
    branching: int | list[int]
    budget: str | list[float]
    measure_root: bool

    def strategy(self, n: int) -> TreeStrategy:
        return TreeStrategy(n, self.branching, measure_root=self.measure_root, known_total=self.neighbours == "replace")

    def level_budgets(self, strategy: TreeStrategy, epsilon: float) -> list[float]:
        if isinstance(self.budget, list):
            return check_budget_list(self.budget, len(strategy.measured_depths), epsilon).tolist()
        return super().level_budgets(strategy, epsilon)

    def spent_epsilon(self, epsilon: float) -> float:
        """An explicit budget list spends its exact sum (rounded up to a float), at most epsilon."""
        if isinstance(self.budget, list):
            return min(float_at_least(exact_sum(self.budget)), epsilon)
        return epsilon

    def budget_fractions(self, strategy: TreeStrategy, epsilon: float) -> np.ndarray:
        depths = strategy.measured_depths
        if isinstance(self.budget, list):
            return check_budget_list(self.budget, len(depths), epsilon) / epsilon
        if self.budget == "uniform":
            weights = np.ones(len(depths))
        else:
            full = strategy.level_counts_full()
            weights = np.array([full[d] ** (1.0 / 3.0) for d in depths])
        return weights / weights.sum()


class Wavelet(Mechanism):
    """Privelet: noisy Haar wavelet coefficients (Xiao, Wang and Gehrke, "Differential Privacy via
    Wavelet Transforms", ICDE 2010).

    Any number of bins: the domain is padded with empty bins to a power of two.  Every level
    of coefficients gets an equal share of epsilon (Privelet's weights; see
    :class:`~dprange.strategies.HaarStrategy`).  Inference is the inverse transform, which
    is the least-squares estimate for this square system.
    """

    name = "wavelet"

    def strategy(self, n: int) -> HaarStrategy:
        return HaarStrategy(n, known_total=self.neighbours == "replace")

    def budget_fractions(self, strategy: HaarStrategy, epsilon) -> np.ndarray:
        return np.full(len(strategy.measured_depths), 1.0 / len(strategy.measured_depths))


#: The hierarchies ``auto`` ranks: (branching factors, budget rules, root choices); branching
#: factors are kept below max(n, 3).  The coarse grid is for n > 2^16: b = 2 is left out
#: (at n = 2^20 it is 2.5x worse than b = 16 on all ranges and the slowest to evaluate, 3.6 s
#: of the selection) and the root, which never paid off in the full grid, is not measured.
FULL_GRID = ((2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64), ("uniform", "geometric"), (True, False))
COARSE_GRID = ((4, 8, 16, 32, 64), ("uniform",), (False,))


def hierarchy_candidates(
    n,
    *,
    neighbours="add_remove",
    noise="auto",
    branchings=None,
    budgets=("uniform", "geometric"),
    measure_root=(True, False),
) -> list[Hierarchical]:
    """Hierarchies over b = 2..64 (powers of 2 and a few others), each budget rule and root choice."""
    if branchings is None:
        branchings = [b for b in FULL_GRID[0] if b < max(n, 3)]
    roots = measure_root if neighbours == "add_remove" else (True,)
    return [
        Hierarchical(b, rule, measure_root=root, neighbours=neighbours, noise=noise)
        for b in branchings
        for rule in budgets
        for root in roots
    ]


def auto_hierarchies(n, *, neighbours="add_remove", noise="auto", fast=False) -> list[Hierarchical]:
    """The hierarchies ``auto`` ranks on n bins: the full grid, or the coarse one when ``fast``."""
    branchings, budgets, roots = COARSE_GRID if fast else FULL_GRID
    return hierarchy_candidates(
        n,
        neighbours=neighbours,
        noise=noise,
        branchings=[b for b in branchings if b < max(n, 3)],
        budgets=budgets,
        measure_root=roots,
    )


# The registrations: the order is the order ``auto`` ranks them in (ties go to the first).
MECHANISMS.add(
    Flat,
    summary="one noisy count per bin (the identity strategy)",
    citation=Citation(
        "Dwork, McSherry, Nissim and Smith", "Calibrating Noise to Sensitivity in Private Data Analysis", "TCC 2006"
    ),
    auto=True,
)
MECHANISMS.add(
    Wavelet,
    summary="Privelet: noisy Haar wavelet coefficients, any number of bins (padded to a power of two)",
    citation=Citation("Xiao, Wang and Gehrke", "Differential Privacy via Wavelet Transforms", "ICDE 2010"),
    auto=True,
)
MECHANISMS.add(
    Hierarchical,
    summary="a tree of noisy range counts (any branching, per-level budgets) with exact O(nodes) least squares",
    citation=Citation(
        "Qardaji, Yang and Li", "Understanding Hierarchical Methods for Differentially Private Histograms", "PVLDB 2013"
    ),
    auto=True,
    candidates=auto_hierarchies,
)


REPLACE_DROP_MISSING_MESSAGE = (
    "neighbours='replace' publishes the number of records exactly, and with drop_missing=True that number "
    "is counted after dropping, so it would reveal how many values were missing; clean the missing values "
    "first or use neighbours='add_remove'"
)


def resolve_neighbours(mechanism, neighbours) -> str:
    """The one neighbouring relation of a release: ``neighbours`` if given, else the
    mechanism object's, else "add_remove"; a conflict with a mechanism object is an error."""
    if neighbours is not None:
        check_neighbours(neighbours)
    if isinstance(mechanism, Mechanism):
        if neighbours is not None and neighbours != mechanism.neighbours:
            raise ParameterError(
                f"neighbours={neighbours!r} conflicts with the mechanism's neighbours={mechanism.neighbours!r}; "
                "pass one of them only (neighbours=None uses the mechanism's)"
            )
        return mechanism.neighbours
    return neighbours or "add_remove"


def make_mechanism(mechanism, *, neighbours: str = "add_remove", **params) -> Mechanism:
    """A mechanism object from None (Hierarchical()), a registered name, or an object.

    A name (or None) is built with ``neighbours`` and ``params``, checked by the class's
    declared parameters; an object is returned as it is and keeps its own parameters."""
    if isinstance(mechanism, Mechanism):
        if params:
            raise ParameterError(
                f"{', '.join(sorted(params))} apply to mechanisms given by name; "
                f"{type(mechanism).__name__} keeps the parameters it was built with"
            )
        return mechanism
    entry = MECHANISMS.lookup("hierarchical" if mechanism is None else mechanism)
    if not entry.nameable:
        needs = ", ".join(p.name for p in entry.params if p.required)
        builder = getattr(entry.factory, "__name__", entry.name)
        raise ParameterError(f"mechanism {entry.name!r} needs {needs}: build {builder}(...) and pass the object")
    return entry.build(neighbours=neighbours, **params)


def __getattr__(name: str):
    """``dprange.mechanisms.release``, the facade's former home, still names it (PEP 562):
    the facade lives in :mod:`dprange.api`, which imports this module."""
    if name == "release":
        from .api import release  # noqa: PLC0415 - api imports this module

        return release
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

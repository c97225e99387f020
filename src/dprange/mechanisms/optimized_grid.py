"""k-D strategies optimised for rectangle workloads: Kronecker products of optimised 1-D
p-Identity strategies (McKenna, Miklau, Hay and Machanavajjhala, "Optimizing error of
high-dimensional statistical queries under differential privacy", VLDB 2018, section 6).

A workload that is a Kronecker product W = W_1 (x) ... (x) W_k (all rectangles: all ranges on
every axis; dominance counts: prefixes on every axis) has the Gram matrix G_1 (x) ... (x) G_k,
and a strategy A = A_1 (x) ... (x) A_k has

    trace(G (A^T A)^-1) = prod_a trace(G_a (A_a^T A_a)^-1),   Delta_p(A) = prod_a Delta_p(A_a)

(add/remove: the columns of A are products of columns, their norms multiply).  The error is
a product of per-axis errors, each minimised by the 1-D optimiser on its own axis:
:class:`OptimizedKronecker` measures the product of the axes' optimised (quantised) 1-D
strategies :class:`~dprange.optimize.p_identity.PIdentityStrategy` as one block with the whole budget.
Template ``l2-optimal`` puts the exact 1-D L2 optimum on every axis (:mod:`dprange.optimize.l2_optimum`,
written in the L2 template's shape with p = n rows by
:func:`~dprange.optimize.l2_optimum.as_p_identity_l2`); for a Kronecker workload the product of the axes'
optima is the exact k-D optimum (:func:`dprange.analysis.grid.l2_optimum_bound`).

Explicit rectangles (a :class:`~dprange.workloads.rectangles.Rectangles` as the workload) are a union
of Kronecker products, one per rectangle: rectangle q = r_q1 (x) ... (x) r_qk has variance
v prod_a r_qa^T S_a r_qa, so the loss sum_q prod_a r_qa^T S_a r_qa is, on axis a with the other
axes fixed, trace(G_a S_a) with G_a = sum_q c_qa r_qa r_qa^T, c_qa = prod_(b != a) r_qb^T S_b r_qb:
a 1-D workload of weighted ranges (:class:`~dprange.workloads.WeightedRanges`).  Block
coordinate descent (HDMM's optimisation for unions of products, McKenna et al., section 6)
starts from the identity on every axis (c = the rectangles' lengths), optimises each axis in
turn for its weighted ranges, :data:`RECTANGLE_ROUNDS` passes over the axes, and keeps the
pass with the least loss.  Each axis' strategy is cached by its Gram matrix like any 1-D
workload's.

Least squares.  With one noise variance v, x = (A_1^+ (x) ... (x) A_k^+) y, A_a^+ = S_a A_a^T,
S_a = (A_a^T A_a)^-1 applied by Woodbury (:mod:`dprange.inference.p_identity`), one axis at a
time (O(cells sum_a p_a)); Cov = v S_1 (x) ... (x) S_k, so a rectangle's variance is
v prod_a q_a^T S_a q_a, each factor an O(p_a) range variance.  With a public total t
(replace), w = S 1 = w_1 (x) ... (x) w_k and tau = prod_a 1^T w_a: x_c = x + w (t - 1^T x) / tau
and Var = v (prod_a q_a^T S_a q_a - prod_a (q_a^T w_a)^2 / tau).

Quantisation.  Every axis' strategy is measured as integers, [diag(round(K_a D)); round(K_a B D)]
with K_a = 2^k the 1-D quantisation (rounding moves no entry by more than 2^-16 of the largest,
:mod:`dprange.strategies.matrix`), so the product's sensitivity, and its noise scale, carry prod_a
K_a: about 2^16 per optimised axis, 2^48 on three, above the samplers' 2^40.  Where the product's
noise at the 1-D quantisation would exceed 2^40, every axis is quantised coarser, at the finest
tolerance 2^-b (b < 16, the same on every axis) whose noise fits, down to 2^-8 for the Laplace
template and 2^-9 for the L2 one (:data:`COARSEST_AXIS_BITS`); below that the mechanism refuses and
says why.  The coarser blocks are rounded so that no column's norm exceeds K_a
(:func:`dprange.optimize.p_identity.round_keeping_norms`): rounding to nearest lets the largest
column pass K_a by a unit, which costs far more variance than the rounding itself.  The choice
reads public facts only (shape, template, noise, relation, epsilon, delta); the noise is calibrated
on the integer product as measured and the least squares use it, so privacy and the error model
stay exact.  Cost in exact mean error against the unquantised product: see docs/optimized.md,
"Quantisation on three or more axes".  Two axes keep the 1-D quantisation wherever it fits.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .._params import Custom, Integer, OneOf, Param
from .._validation import MAX_NOISE_SCALE, check_noise_scale, fit_budget
from ..errors import ParameterError
from ..inference.kron import KronPIdentityEstimate
from ..inference.marginals import MarginalEstimate, _subsets
from ..inference.p_identity import DiagonalPlusRows, PIdentityEstimate
from ..measurements import Measurements
from ..operators.structured import Identity, Kron, Total
from ..optimize.l2_optimum import L2_OPTIMUM_MAX_N, as_p_identity_l2
from ..optimize.marginals import MarginalStrategy, optimize_marginals
from ..optimize.p_identity import (
    Gram,
    OptimizedStrategy,
    PIdentityStrategy,
    block_variance_terms,
    identity_strategy,
    mean_error_as_released,
)
from ..privacy.noise import gaussian_sigma
from ..registry import GRID_MECHANISMS, Citation
from ..strategies.calibration import resolve_noise
from ..strategies.kron import IntegerKron, OneKronStrategy
from ..strategies.matrix import DENSE_COVARIANCE_LIMIT, QUANTISATION_TOLERANCE
from ..strategies.trees import Strategy
from ..workloads.ranges import WeightedRanges, make_workload
from ..workloads.rectangles import Rectangles, check_shape
from .base import GridMechanism, Mechanism
from .optimized import Optimized, _no_candidates, auto_optimise_limit

#: The 1-D workload of every axis for each k-D workload this mechanism optimises for.
AXIS_WORKLOADS = {"all-rectangles": "all-range", "prefix-rectangles": "prefix"}


#: Passes of block coordinate descent over the axes for explicit rectangles (module doc).
#: The first pass optimises every axis once (the first axis against the identity on the
#: others); the second moves the loss little (docs/optimized.md, "Figures by module").
RECTANGLE_ROUNDS = 2


#: Largest axis ``auto`` optimises for explicit rectangles (each axis' Gram is dense, and a
#: pass optimises every axis: :meth:`OptimizedKronecker.axis_ready`; timings: docs/optimized.md,
#: "optimized_kronecker for explicit rectangles").
RECTANGLE_AUTO_MAX_N = 512


#: The 1-D quantisation of every axis (tolerance 2^-16 of its largest entry,
#: :data:`dprange.strategies.matrix.QUANTISATION_TOLERANCE`), kept wherever the product's noise fits.
FINEST_AXIS_BITS = -int(math.log2(QUANTISATION_TOLERANCE))


#: The coarsest per-axis quantisation (tolerance 2^-bits) used, per template, to bring the
#: product's noise below 2^40 on three or more optimised axes, with norm-keeping rounding: the
#: coarsest whose cost in exact error stays small on every number of axes that reaches it
#: (docs/optimized.md, "Quantisation on three or more axes").
COARSEST_AXIS_BITS = {"p-identity": 8, "p-identity-l2": 9, "l2-optimal": 9}


#: The templates with L2 columns (Gaussian noise).
L2_TEMPLATES = ("p-identity-l2", "l2-optimal")


#: A product fits where its noise scale is at most this (2^40 less a margin for the
#: calibration's own rounding up: gaussian_sigma's factors 1 + 1e-9 and 1 + 1e-6, ulps).
FITTING_SCALE = MAX_NOISE_SCALE * (1.0 - 1e-6)


def check_kronecker_workload(value, name: str = "workload"):
    """An :class:`OptimizedKronecker` workload: "all-rectangles" or "prefix-rectangles" (``_``
    read as ``-``), a :class:`~dprange.workloads.rectangles.Rectangles`, or the saved form of one (a
    dict with shape, lows and highs: :meth:`OptimizedKronecker.parameters`)."""
    if isinstance(value, Rectangles):
        return value
    if isinstance(value, dict):
        return Rectangles.from_dict(value, name)
    if isinstance(value, str) and value.replace("_", "-") in AXIS_WORKLOADS:
        return value.replace("_", "-")
    raise ParameterError(
        f"{name} must be one of {', '.join(AXIS_WORKLOADS)} or a dprange.workloads.Rectangles, not {value!r:.60}"
    )


class OptimizedKronecker(GridMechanism):
    """The Kronecker product of 1-D strategies optimised for the axes' workloads (module doc).

    ``workload``: "all-rectangles" (all ranges on every axis), "prefix-rectangles" (prefixes:
    dominance counts), or a :class:`~dprange.workloads.rectangles.Rectangles` (explicit rectangles: each
    axis optimised for its ranges weighted by their variance on the other axes, block coordinate
    descent; module doc).  ``template``: "p-identity" (L1 columns: epsilon-DP), "p-identity-l2"
    (L2 columns: Gaussian), "l2-optimal" (the exact L2 optimum on every axis of at most 4096
    bins: Gaussian, for a Kronecker workload the least error of any matrix mechanism), or "auto"
    (by delta: p-identity or p-identity-l2).  Each axis' 1-D strategy is optimised once and kept
    in the disk cache of :mod:`dprange.optimize.cache`.
    """

    name = "optimized_kronecker"

    PARAMS = (
        Param(
            "workload",
            Custom(
                lambda value, name: check_kronecker_workload(value, name),
                "'all-rectangles', 'prefix-rectangles' or a dprange.workloads.Rectangles",
            ),
            "the k-D workload: all rectangles, dominance (prefix) rectangles, or explicit rectangles "
            "(a Rectangles: each axis optimised for its ranges weighted by the others')",
            default="all-rectangles",
            positional=True,
        ),
        Param(
            "template",
            OneOf(("auto", "p-identity", *L2_TEMPLATES)),
            "the 1-D template of every axis: p-identity (L1, Laplace), p-identity-l2 (L2, Gaussian), "
            "l2-optimal (the exact L2 optimum, Gaussian; axes of at most 4096 bins), or auto (by delta: "
            "p-identity or p-identity-l2)",
            default="auto",
        ),
        Param(
            "rows",
            Integer(0),
            "p of every axis, at most its bins (0: the 1-D default; l2-optimal: always the axis' bins)",
            default=0,
        ),
        *Mechanism.PARAMS,
    )
    workload: str | Rectangles
    template: str
    rows: int

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._delta = 0.0
        self._axis_cache: dict = {}
        self._axis_mechanisms: dict = {}
        self._bits: dict = {}
        self._coarse: dict = {}
        self._plans: dict = {}  # (shape, template, epsilon, delta): see _compared_plans
        self._pass_losses: dict = {}  # explicit rectangles: each pass's loss (_rectangle_axis_strategies)
        self._identity_blocks: dict = {}

    def parameters(self) -> dict:
        """As declared, explicit rectangles written as their saved form (shape, lows, highs:
        :func:`check_kronecker_workload` reads it back)."""
        params = self._declared()
        if isinstance(self.workload, Rectangles):
            params["workload"] = self.workload.to_dict()
        return params

    def _declared(self) -> dict:
        return {"workload": self.workload, "template": self.template, "rows": self.rows, **super().parameters()}

    def __repr__(self) -> str:  # explicit rectangles by their short repr, not their lists
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._declared().items())})"

    def follow_delta(self, delta: float) -> None:
        self._delta = float(delta)

    def measure(self, counts, epsilon, *, delta=0.0, rng=None) -> Measurements:
        self.follow_delta(delta)
        return super().measure(counts, epsilon, delta=delta, rng=rng)

    def error_model(self, shape, epsilon, *, delta=0.0):
        self.follow_delta(delta)
        return super().error_model(shape, epsilon, delta=delta)

    def _template(self) -> str:
        if self.template != "auto":
            return self.template
        return "p-identity-l2" if self._delta > 0 else "p-identity"

    def axis_strategies(self, shape) -> list[PIdentityStrategy]:
        """The optimised, quantised 1-D strategy of every axis (cached on disk)."""
        shape = check_shape(shape)
        template = self._template()
        if isinstance(self.workload, Rectangles):
            key = ("rectangles", tuple(shape), template)
            if key not in self._axis_cache:
                self._axis_cache[key], self._pass_losses[key] = self._rectangle_axis_strategies(tuple(shape), template)
            return self._axis_cache[key]
        out = []
        for axis, n in enumerate(shape):
            if (n, template) not in self._axis_cache:
                self._axis_cache[n, template] = self._axis_strategy(self._axis_mechanism(n, template), n, axis)
            out.append(self._axis_cache[n, template])
        return out

    def _rectangle_axis_strategies(self, shape: tuple, template: str) -> tuple[list[PIdentityStrategy], list[float]]:
        """Explicit rectangles: block coordinate descent over the axes (module doc), each axis
        optimised for its ranges weighted by their variance factors on the other axes
        (normalised to mean 1: the optimum does not depend on the scale), from the identity
        on every axis; the pass with the least loss sum_q prod_a r_qa^T S_a r_qa (unquantised
        scale: each axis' factor times K_a^2) is kept, the first on a tie.  Returns the kept
        strategies and every pass's loss."""
        rectangles = self.workload
        assert isinstance(rectangles, Rectangles)
        if tuple(rectangles.grid) != shape:
            raise ParameterError(
                f"optimized_kronecker: the rectangles are on a {list(rectangles.grid)} grid "
                f"but the data's is {list(shape)}"
            )
        lows, highs = rectangles.lows, rectangles.highs
        factors = [(highs[:, a] - lows[:, a] + 1).astype(float) for a in range(len(shape))]  # the identity's
        current: list = [None] * len(shape)
        best: list[PIdentityStrategy] = []
        losses: list[float] = []
        for _ in range(RECTANGLE_ROUNDS):
            for a, n in enumerate(shape):
                others = [f for b, f in enumerate(factors) if b != a]
                product = np.prod(others, axis=0) if others else np.ones(len(lows))
                weights = np.maximum(product / product.mean(), 1e-12)  # a factor rounded to 0 (public weights)
                workload = WeightedRanges(lows[:, a], highs[:, a], weights, n)
                mech = Optimized(workload, template=template, rows=self.rows, neighbours="add_remove")
                current[a] = self._axis_strategy(mech, n, a)
                block = current[a].block  # its variance factors at unit noise, unquantised scale: O(m p_a)
                unit = PIdentityEstimate(block.diagonal, block.rows, 1.0).range_variance(lows[:, a], highs[:, a])
                factors[a] = unit * current[a].factor ** 2
            losses.append(float(np.mean(np.prod(factors, axis=0))))
            if losses[-1] < min(losses[:-1], default=math.inf):
                best = list(current)
        return best, losses

    def _axis_strategy(self, mech: Optimized, n: int, axis: int) -> PIdentityStrategy:
        """The 1-D strategy ``mech`` measures on an axis of n bins (optimised, or read from the
        disk cache), refused naming the axis (rows above its bins)."""
        template = self._template()
        try:
            mech.extra_rows(n, template)
        except ParameterError as exc:
            raise ParameterError(f"optimized_kronecker, axis {axis} ({n} bins): {exc}") from None
        strategy = self._l2_optimum_axis(mech, n, axis) if template == "l2-optimal" else mech.strategy(n)
        if not isinstance(strategy, PIdentityStrategy):
            raise ParameterError("every axis needs a p-identity strategy")
        return strategy

    @staticmethod
    def _l2_optimum_axis(mech: Optimized, n: int, axis: int) -> PIdentityStrategy:
        """The 1-D L2 optimum of an axis (optimised or read from the disk cache as a dense
        strategy) in the L2 template's shape with p = n (:func:`as_p_identity_l2`: the same
        Gram matrix, diagonal raised to 1), whose integer block the Kronecker least squares
        use."""
        if n > L2_OPTIMUM_MAX_N:
            raise ParameterError(
                f"optimized_kronecker, axis {axis} ({n} bins): template l2-optimal solves axes of at most "
                f"{L2_OPTIMUM_MAX_N} bins; use template='p-identity-l2'"
            )
        dense = mech.optimised_strategy(n)
        assert isinstance(dense, OptimizedStrategy)
        strategy = PIdentityStrategy(as_p_identity_l2(dense.unquantised), "l2-optimal", dense.seconds, dense.cached)
        strategy.trace, strategy.stored = dense.trace, dense.stored
        return strategy

    def _axis_mechanism(self, n: int, template: str) -> Optimized:
        """The 1-D mechanism that optimises (or reads from the disk cache) the axes of n bins,
        kept: a cache file :meth:`axis_ready` has read is not read again."""
        if (n, template) not in self._axis_mechanisms:
            # The axes are optimised for the add/remove loss under either relation: the product's
            # replace sensitivity and public-total term are not products of the axes' (the 1-D
            # replace program and replace loss are not used).
            self._axis_mechanisms[n, template] = Optimized(
                AXIS_WORKLOADS[self.workload], template=template, rows=self.rows, neighbours="add_remove"
            )
        return self._axis_mechanisms[n, template]

    def axis_ready(self, n: int) -> bool:
        """Whether ``auto`` may use the optimised 1-D strategy of an axis of n bins: optimised
        cold up to :func:`dprange.mechanisms.optimized.auto_optimise_limit` bins for the axes' add/remove
        loss (1024 for p-identity and l2-optimal, a few seconds; 128 for p-identity-l2), above
        that only when the disk cache holds it and it loads and fits (a damaged file would be
        optimised again), never above the p-Identity release's limit
        (:data:`dprange.strategies.matrix.DENSE_COVARIANCE_LIMIT`): the 1-D rule of
        :func:`dprange.mechanisms.optimized.auto_pool` (gains and timings: docs/optimized.md,
        "k-D auto")."""
        template = self._template()
        if n > (L2_OPTIMUM_MAX_N if template == "l2-optimal" else DENSE_COVARIANCE_LIMIT):
            return False
        if isinstance(self.workload, Rectangles):  # the axes' workloads depend on each other
            return n <= min(RECTANGLE_AUTO_MAX_N, auto_optimise_limit(template, "add_remove"))
        if n <= auto_optimise_limit(template, "add_remove"):
            return True
        mech = self._axis_mechanism(n, template)
        return mech.cache_state(mech.workload_on(n), template) == "cached"

    def axis_blocks(self, shape, bits: int = FINEST_AXIS_BITS) -> list[DiagonalPlusRows]:
        """Every axis' integer block quantised at tolerance 2^-``bits``: the strategies' own
        blocks at the default 16, below it rounded so that no column's norm exceeds K
        (:func:`dprange.optimize.p_identity.round_keeping_norms`); refused where a bin's weight rounds
        to zero (rank)."""
        if bits == FINEST_AXIS_BITS:
            return [s.block for s in self.axis_strategies(shape)]
        out = []
        for a, (n, strategy) in enumerate(zip(shape, self.axis_strategies(shape))):
            # explicit rectangles give axes of the same n different strategies: keyed by axis too
            key = (n, strategy.template, bits) if isinstance(self.workload, str) else (tuple(shape), a, bits)
            if key not in self._coarse:
                block = strategy.quantised(2.0**-bits, keep_norms=True)[1]
                if not np.all(block.diagonal > 0):
                    raise ParameterError(
                        f"optimized_kronecker on {len(shape)} axes quantises each axis at 2^-{bits} of its largest "
                        "entry (so that the product's noise stays below 2^40), where some bins' weight rounds to "
                        "zero; use fewer rows per axis (rows=...), fewer axes or a fixed k-D mechanism "
                        "(kronecker, kd_hierarchy)"
                    )
                self._coarse[key] = block
            out.append(self._coarse[key])
        return out

    def quantisation_bits(self, shape, epsilon: float) -> int:
        """The per-axis quantisation (tolerance 2^-bits of each axis' largest entry) of the
        product measured at this epsilon and the delta followed: the default 16 bits where the
        noise of the product fits below 2^40, else the finest that fits, down to
        :data:`COARSEST_AXIS_BITS` (module doc, "Quantisation"); from public facts only (the
        shape, template, noise, relation, epsilon and delta)."""
        shape = tuple(check_shape(shape))
        key = (shape, self._template(), float(epsilon), self._delta)
        if key not in self._bits:
            self._bits[key] = self._fitting_bits(shape, float(epsilon))
        return self._bits[key]

    def _fitting_bits(self, shape, epsilon: float) -> int:
        unit = self._unit_noise_scale(epsilon)
        scale = self._noise_scale(shape, FINEST_AXIS_BITS, unit)
        optimised = sum(1 for s in self.axis_strategies(shape) if np.any(s.theta))
        if scale <= FITTING_SCALE or optimised == 0:
            return FINEST_AXIS_BITS
        # Each optimised axis' factor is about 2^bits: drop the excess evenly, then check.
        bits = FINEST_AXIS_BITS - math.ceil(math.log2(scale / FITTING_SCALE) / optimised)
        coarsest_bits = COARSEST_AXIS_BITS[self._template()]
        while bits >= coarsest_bits:
            if self._noise_scale(shape, bits, unit) <= FITTING_SCALE:
                return bits
            bits -= 1
        coarsest = self._noise_scale(shape, coarsest_bits, unit)
        raise ParameterError(self._too_many_axes(shape, optimised, epsilon, unit, coarsest))

    def _noise_scale(self, shape, bits: int, unit: float) -> float:
        """``unit`` times the sensitivity of the integer product at ``bits``; under replace
        the bound 2 x add/remove's (triangle inequality) where that already fits, since the
        exact value is the definition on small grids (seconds)."""
        scale = unit * self._sensitivity(shape, bits, "add_remove")
        if self.neighbours == "add_remove":
            return scale
        if 2 * scale <= FITTING_SCALE:
            return 2 * scale
        return unit * self._sensitivity(shape, bits, "replace")

    def _noise_kind(self) -> str:
        return resolve_noise(self.noise, self._delta)

    def _unit_noise_scale(self, epsilon: float) -> float:
        """The noise scale per unit of sensitivity (1 / epsilon, or the Gaussian sigma of
        sensitivity 1); refused as usual where epsilon alone is too small."""
        if self._noise_kind() == "gaussian":
            return gaussian_sigma(epsilon, self._delta, 1.0)
        return check_noise_scale(1.0 / epsilon, epsilon)

    def _sensitivity(self, shape, bits: int, neighbours: str) -> float:
        """The L1 (L2 for Gaussian noise) sensitivity of the integer product at ``bits``."""
        norm = 2 if self._noise_kind() == "gaussian" else 1
        strategy = OneKronStrategy([Kron(self.axis_blocks(shape, bits))], [1.0], shape=shape)
        return float(strategy.sensitivity_power(norm, neighbours, [Fraction(1)])) ** (1.0 / norm)

    def _too_many_axes(self, shape, optimised: int, epsilon: float, unit: float, scale: float) -> str:
        """The refusal where even the coarsest quantisation needs noise above 2^40: its cause
        and the remedies that apply (a larger epsilon only where the product's sensitivity is
        below 2^40, so that noise of at least 1 per unit of it would fit; the Laplace template
        only where 1 / epsilon would fit)."""
        coarsest = COARSEST_AXIS_BITS[self._template()]
        factors = " x ".join(f"2^{math.log2(s.quantised(2.0**-coarsest)[0]):g}" for s in self.axis_strategies(shape))
        gaussian = self._noise_kind() == "gaussian"
        privacy = f"epsilon={epsilon:g}" + (f", delta={self._delta:g}" if gaussian else "")
        sensitivity = scale / unit
        remedies = ["fewer axes"]
        if sensitivity < MAX_NOISE_SCALE:
            target = MAX_NOISE_SCALE / sensitivity
            remedies.append(
                f"a larger epsilon{' or delta' if gaussian else ''} (the noise per unit of sensitivity "
                f"must fall from {unit:.3g} to {target:.3g})"
            )
            if self._template() in L2_TEMPLATES and 1.0 / epsilon <= target:
                remedies.append(
                    f"the Laplace template (pure epsilon-DP, {1.0 / epsilon:.3g} per unit of sensitivity: "
                    "template='p-identity', or delta 0 with template auto, as from the command line)"
                )
        remedies.append("a fixed k-D mechanism (kronecker, kd_hierarchy; mechanism auto ranks them)")
        return (
            f"optimized_kronecker cannot measure this {len(shape)}-axis grid: each of its {optimised} optimised axes "
            f"is quantised to integers and the factors multiply ({factors} at the coarsest quantisation allowed, "
            f"2^-{coarsest} of each axis' largest entry), so the noise would need scale {scale:.3g} "
            f"({unit:.3g} for {privacy} times the product's sensitivity {sensitivity:.3g}), above the supported "
            f"2^40; use {', '.join(remedies[:-1])} or {remedies[-1]}"
        )

    def describe_strategy(self, shape, epsilon: float) -> dict:
        """Every axis' 1-D strategy as a 1-D release describes it (template, rows, bins,
        optimisation seconds, read from or stored in the cache), the per-axis quantisation
        (tolerance 2^-bits) and what was measured: "optimised", or "identity" where the
        identity product has the lower error as released (:meth:`identity_is_lower`); for explicit
        rectangles also the loss of each pass over the axes (``pass_losses``, unit noise)."""
        strategies = self.axis_strategies(shape)
        passes = {}
        if isinstance(self.workload, Rectangles):  # the loss of each pass over the axes (unit noise)
            passes = {"pass_losses": self._pass_losses["rectangles", tuple(check_shape(shape)), self._template()]}
        return {
            "axes": [s.describe() for s in strategies],
            **passes,
            "quantisation_bits": self.quantisation_bits(shape, epsilon),
            "measured": "identity" if self.measures_identity(shape, epsilon) else "optimised",
        }

    def plan(self, shape, epsilon: float) -> Strategy:
        """The product of the axes' optimised blocks (at :meth:`quantisation_bits`), or the
        identity on every axis where that has the lower exact error as released
        (:meth:`identity_is_lower`)."""
        optimised, identity, identity_lower = self._compared_plans(shape, epsilon)
        return identity if identity_lower else optimised

    def saved_plans(self, shape, epsilon: float) -> list[Strategy]:
        """:meth:`plan`, then the other of the optimised and the identity products: releases
        saved before the identity comparison measured the optimised product whatever its error
        (all rectangles of 20 x 20 at epsilon 1), and a release that measured the identity
        product was compared with the optimised axes of its time (another cache, another
        optimisation, another version); both still load.  Each is a design from public
        parameters, and the saved blocks must fit it (rows, noise, design digest)."""
        optimised, identity, identity_lower = self._compared_plans(shape, epsilon)
        return [identity, optimised] if identity_lower else [optimised, identity]

    def _compared_plans(self, shape, epsilon: float) -> tuple[OneKronStrategy, OneKronStrategy, bool]:
        """(the optimised product, the identity product, whether the identity's error as released
        is lower), kept per shape, template, epsilon and delta: the same plan objects serve the
        comparison, the measurement and a load, so that their sensitivities (the exact pairwise
        maximum under replace, O(cells^2)) are computed once."""
        shape = tuple(check_shape(shape))
        key = (shape, self._template(), float(epsilon), self._delta)
        if key not in self._plans:
            optimised, identity = self.optimised_plan(shape, epsilon), self.identity_plan(shape, epsilon)
            self._plans[key] = (optimised, identity, self.identity_is_lower(shape, optimised, identity, epsilon))
        return self._plans[key]

    def identity_plan(self, shape, epsilon: float) -> OneKronStrategy:
        """The identity on every axis (one count per cell, K = 1) in the optimised product's form."""
        shape = tuple(check_shape(shape))
        return OneKronStrategy([IntegerKron([self._identity_block(n) for n in shape])], [epsilon], shape=shape)

    def measures_identity(self, shape, epsilon: float) -> bool:
        """Whether :meth:`plan` at this epsilon (and the delta followed) measures the identity
        product in place of the optimised one."""
        return self._compared_plans(shape, epsilon)[2]

    def optimised_plan(self, shape, epsilon: float) -> OneKronStrategy:
        """The product of the axes' optimised blocks at :meth:`quantisation_bits`."""
        shape = tuple(check_shape(shape))
        block = IntegerKron(self.axis_blocks(shape, self.quantisation_bits(shape, epsilon)))
        return OneKronStrategy([block], [epsilon], shape=shape)

    def identity_is_lower(self, shape, optimised: OneKronStrategy, identity: OneKronStrategy, epsilon: float) -> bool:
        """Whether the identity product (one count per cell, K = 1) has a strictly lower mean
        error on the workload than the optimised product, both as released at this epsilon and
        the delta followed.  The optimised axes are quantised (K_a about 2^16), so the
        product's noise per unit of sensitivity is about the continuous one, where the identity
        is measured with the discrete noise of sensitivity 1, as in 1-D
        (:meth:`dprange.mechanisms.optimized.Optimized.released_strategy`; docs/optimized.md, "The
        identity as released").  Exact and cheap: each axis'
        :class:`~dprange.optimize.p_identity.VarianceTerms` (O(n_a p_a^2)), whose means multiply
        (:func:`~dprange.optimize.p_identity.mean_error_as_released`).  Only the whole identity product
        is compared: the noise depends on every axis' K_a, so the choice does not split by axis
        (with one axis optimised the others' identity would gain only the quantisation's
        rounding).  A tie (every axis' optimum B = 0) keeps the optimised design, as releases
        saved before were made.  Public facts only."""
        return self._mean_error(shape, identity, epsilon) < self._mean_error(shape, optimised, epsilon)

    def _identity_block(self, n: int) -> DiagonalPlusRows:
        if n not in self._identity_blocks:  # one object per n: its sensitivities are cached on it
            self._identity_blocks[n] = identity_strategy(n, "p-identity").block
        return self._identity_blocks[n]

    def _mean_error(self, shape, plan: OneKronStrategy, epsilon: float) -> float:
        """The exact mean variance of ``plan`` over the workload (:meth:`identity_is_lower`)."""
        (spec,) = self._noise(plan, epsilon, self._delta)
        (product,) = plan.blocks
        if isinstance(self.workload, Rectangles):  # O(rectangles x sum_a p_a)
            total = 0.0 if self.neighbours == "replace" else None
            estimate = KronPIdentityEstimate(shape, list(product.factors), spec.variance, total=total)
            return float(np.mean(estimate.rectangle_variance(self.workload.lows, self.workload.highs)))
        axis_workloads = [make_workload(AXIS_WORKLOADS[self.workload], n) for n in shape]
        terms = [block_variance_terms(factor, Gram(w)) for factor, w in zip(product.factors, axis_workloads)]
        return mean_error_as_released(spec.variance, terms, [w.m for w in axis_workloads], self.neighbours == "replace")

    def estimate(self, shape, measurements: Measurements) -> KronPIdentityEstimate:
        (m,) = measurements.measurements
        self.follow_delta(measurements.delta or 0.0)  # template auto follows the measured delta
        factors = list(m.block.factors) if isinstance(m.block, Kron) else None
        if factors is None or not all(isinstance(f, DiagonalPlusRows) for f in factors):
            raise ParameterError("optimized_kronecker estimates from its own measured Kronecker block")
        return KronPIdentityEstimate(shape, factors, float(m.variance), m.values, measurements.total)


class OptimizedMarginals(GridMechanism):
    """Weighted marginals optimised for all ``order``-way marginals (HDMM's marginals template,
    McKenna et al., VLDB 2018): measure the marginal on each axis set S with budget
    epsilon theta_S; theta (2^d weights) minimises the exact trace through the marginal Gram
    algebra (:class:`MarginalAlgebra`), so the error of every marginal is exact and the
    estimate is GLS.  Marginals with weight below 1e-4 of the largest are not measured."""

    name = "optimized_marginals"
    made_for_marginals = True

    PARAMS = (
        Param("order", Integer(1), "the workload: all order-way marginals", default=2, positional=True),
        *Mechanism.PARAMS,
    )
    order: int

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._weights: dict = {}

    def weights(self, shape) -> list[tuple[tuple[int, ...], float]]:
        """(axes, theta) of every measured marginal (optimised once per shape)."""
        shape = check_shape(shape)
        if self.order > len(shape):
            raise ParameterError(
                f"{self.order}-way marginals need at least {self.order} axes, the grid has {len(shape)}"
            )
        if shape not in self._weights:
            theta, _ = optimize_marginals(shape, int(self.order))  # 2^d variables
            keep = theta >= 1e-4 * theta.max()
            subsets = _subsets(len(shape))
            kept = theta[keep] / theta[keep].sum()
            self._weights[shape] = [(subsets[i], float(t)) for i, t in zip(np.flatnonzero(keep), kept)]
        return self._weights[shape]

    def plan(self, shape, epsilon: float) -> Strategy:
        shape = check_shape(shape)
        chosen = self.weights(shape)
        blocks = [Kron([Identity(n) if a in sub else Total(n) for a, n in enumerate(shape)]) for sub, _ in chosen]
        budget = fit_budget([epsilon * t for _, t in chosen], epsilon)
        return MarginalStrategy(blocks, budget, [sub for sub, _ in chosen], shape=tuple(shape))

    def estimate(self, shape, measurements: Measurements) -> MarginalEstimate:
        chosen = self.weights(shape)
        values = [m.values for m in measurements.measurements]
        variances = [m.variance for m in measurements.measurements]
        return MarginalEstimate(shape, [sub for sub, _ in chosen], variances, values, measurements.total)


#: Most axes for which ``auto`` ranks :class:`OptimizedMarginals`: its optimisation is over 2^d
#: weights through a 2^d x 2^d algebra, run for the plan and again for the estimate (timings:
#: docs/optimized.md, "k-D auto").
AUTO_MARGINALS_MAX_AXES = 8


def kronecker_auto_candidates(
    shape, *, workload, delta=0.0, order=2, neighbours="add_remove", noise="auto"
) -> list[OptimizedKronecker]:
    """:class:`OptimizedKronecker` for all, prefix or explicit rectangles, its templates by the noise the
    release will use (p-identity-l2 and l2-optimal for Gaussian noise, else p-identity), each
    when every axis' strategy is ready (:meth:`OptimizedKronecker.axis_ready`) and is not the
    identity on every axis (then ``Kronecker("identity")`` is the same design, whose error it
    would tie up to rounding).  The axes' strategies are built here (optimised or read from
    the cache) and kept by the returned instances."""
    shape = check_shape(shape)
    if not isinstance(workload, Rectangles) and workload not in AXIS_WORKLOADS:
        return []
    templates = L2_TEMPLATES if resolve_noise(noise, delta) == "gaussian" else ("p-identity",)
    found = []
    for template in templates:
        mech = OptimizedKronecker(workload, template=template, neighbours=neighbours, noise=noise)
        if not all(mech.axis_ready(n) for n in set(shape)):
            continue
        try:
            identity = all(not np.any(s.theta) for s in mech.axis_strategies(shape))
        except ParameterError:
            found.append(mech)  # select_grid lists it as excluded, with the reason
            continue
        if not identity:
            found.append(mech)
    return found


def marginals_auto_candidates(
    shape, *, workload, delta=0.0, order=2, neighbours="add_remove", noise="auto"
) -> list[OptimizedMarginals]:
    """:class:`OptimizedMarginals` of ``order`` for marginals on at most
    :data:`AUTO_MARGINALS_MAX_AXES` axes, unless its optimum is the full table alone (the
    identity, ``Kronecker("identity")``'s design)."""
    shape = check_shape(shape)
    if workload != "marginals" or len(shape) > AUTO_MARGINALS_MAX_AXES or not 1 <= order <= len(shape):
        return []
    mech = OptimizedMarginals(order, neighbours=neighbours, noise=noise)
    full_table_only = [axes for axes, _ in mech.weights(shape)] == [tuple(range(len(shape)))]
    return [] if full_table_only else [mech]


def kd_auto_candidates(shape, *, workload, delta=0.0, order=2, neighbours="add_remove", noise="auto") -> list:
    """The optimised k-D mechanisms ``auto`` ranks for ``workload`` (public parameters only):
    :func:`kronecker_auto_candidates` and :func:`marginals_auto_candidates`, which the registry
    entries declare as their ``workload_candidates`` (added by
    :func:`dprange.analysis.grid.grid_candidates` when it is given the workload)."""
    kwargs = {"workload": workload, "delta": delta, "order": order, "neighbours": neighbours, "noise": noise}
    return [*kronecker_auto_candidates(shape, **kwargs), *marginals_auto_candidates(shape, **kwargs)]


GRID_MECHANISMS.add(
    OptimizedKronecker,
    summary="Kronecker product of 1-D p-Identity strategies optimised for all ranges or prefixes on every axis "
    "(all rectangles, dominance counts), or axis by axis for explicit rectangles, with exact per-axis least squares",
    citation=Citation(
        "McKenna, Miklau, Hay and Machanavajjhala",
        "Optimizing error of high-dimensional statistical queries under differential privacy",
        "VLDB 2018",
    ),
    auto=True,
    candidates=_no_candidates,
    workload_candidates=kronecker_auto_candidates,
)


GRID_MECHANISMS.add(
    OptimizedMarginals,
    summary="weighted marginals optimised for all k-way marginals (HDMM's marginals template), exact GLS "
    "through the marginal Gram algebra",
    citation=Citation(
        "McKenna, Miklau, Hay and Machanavajjhala",
        "Optimizing error of high-dimensional statistical queries under differential privacy",
        "VLDB 2018",
    ),
    auto=True,
    candidates=_no_candidates,
    workload_candidates=marginals_auto_candidates,
)

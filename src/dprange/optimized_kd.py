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
strategies :class:`~dprange.optimized.PIdentityStrategy` as one block with the whole budget.

Least squares.  With one noise variance v, x = (A_1^+ (x) ... (x) A_k^+) y, A_a^+ = S_a A_a^T,
S_a = (A_a^T A_a)^-1 applied by Woodbury (:mod:`dprange.inference.p_identity`), one axis at a
time (O(cells sum_a p_a)); Cov = v S_1 (x) ... (x) S_k, so a rectangle's variance is
v prod_a q_a^T S_a q_a, each factor an O(p_a) range variance.  With a public total t
(replace), w = S 1 = w_1 (x) ... (x) w_k and tau = prod_a 1^T w_a: x_c = x + w (t - 1^T x) / tau
and Var = v (prod_a q_a^T S_a q_a - prod_a (q_a^T w_a)^2 / tau).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ._params import Integer, OneOf, Param
from .errors import ParameterError
from .inference.p_identity import DiagonalPlusRows, PIdentityEstimate
from .measurements import Measurements
from .mechanisms import Mechanism
from .multidim import GridMechanism
from .operators import Kron, Weighted
from .optimized import Optimized, PIdentityStrategy
from .registry import GRID_MECHANISMS, Citation
from .strategies import Strategy
from .workloads_kd import check_rectangles, check_shape

__all__ = ["KronPIdentityEstimate", "OptimizedKronecker"]

#: The 1-D workload of every axis for each k-D workload this mechanism optimises for.
AXIS_WORKLOADS = {"all-rectangles": "all-range", "prefix-rectangles": "prefix"}


class OneKronStrategy(Strategy):
    """One Kron block with the whole budget; its sensitivity is the product's (closed form
    for add/remove, :meth:`dprange.operators.Kron.sensitivity_power`), not the dense definition."""

    def sensitivity_power(self, norm: int, neighbours: str, weights=None):
        (w,) = [Fraction(e) for e in self.budget] if weights is None else list(weights)
        return Weighted(self.blocks[0], w).sensitivity_power(norm, neighbours)


class KronPIdentityEstimate:
    """Least squares for a Kronecker product of p-Identity factors with one noise variance,
    and its exact error model (module doc)."""

    def __init__(self, shape, factors: list[DiagonalPlusRows], variance: float, values=None, total=None):
        self.shape = tuple(shape)
        self.variance = float(variance)
        self.known_total = total is not None
        # Unit-variance per-axis models: S_a by Woodbury, range variances q_a^T S_a q_a.
        self.axes = [PIdentityEstimate(f.diagonal, f.rows, 1.0, total=0.0) for f in factors]
        self.factors = factors
        self.leaves = np.zeros(int(np.prod(self.shape))) if values is None else self._solve(values, total)

    def _solve(self, values, total) -> np.ndarray:
        y = np.asarray(values, dtype=float).reshape([f.shape[0] for f in self.factors])
        for a, (factor, axis) in enumerate(zip(self.factors, self.axes)):
            moved = np.moveaxis(y, a, 0)
            rest = moved.shape[1:]
            flat = moved.reshape(moved.shape[0], -1)
            solved = axis.apply_inverse_gram(factor._apply_adjoint(flat))  # S_a A_a^T   O(n_a p_a) per fibre
            y = np.moveaxis(solved.reshape((solved.shape[0],) + rest), 0, a)
        x = y.ravel()
        if total is not None:
            w = self._outer([axis._w for axis in self.axes])
            x = x + w * (float(total) - x.sum()) / self._tau()
        return x

    @staticmethod
    def _outer(vectors) -> np.ndarray:
        out = np.ones(1)
        for v in vectors:
            out = np.multiply.outer(out, v).ravel()
        return out

    def _tau(self) -> float:
        return float(np.prod([axis._tau for axis in self.axes]))

    def rectangle_variance(self, lows, highs) -> np.ndarray:
        lows, highs = check_rectangles(self.shape, lows, highs)
        product = np.ones(lows.shape[0])
        weight = np.ones(lows.shape[0])
        for a, axis in enumerate(self.axes):
            lo, hi = lows[:, a], highs[:, a]
            # q_a^T S_a q_a: the unconstrained axis variance, O(p_a) per rectangle.
            plain = axis._ecum[hi + 1] - axis._ecum[lo]
            zq = axis._zcum[:, hi + 1] - axis._zcum[:, lo]
            product *= np.maximum(plain - np.einsum("ij,ij->j", zq, zq), 0.0)
            weight *= axis._wcum[hi + 1] - axis._wcum[lo]
        if self.known_total:
            product -= weight**2 / self._tau()
        return self.variance * np.maximum(product, 0.0)

    def query_variance(self, weights) -> np.ndarray:
        """Variance of sum_c q_c x_c for each row q of ``weights`` (cells in C order)."""
        q = np.atleast_2d(np.asarray(weights, dtype=float))
        cells = int(np.prod(self.shape))
        if q.shape[-1] != cells:
            raise ParameterError(f"query weights must have {cells} entries per query")
        cq: np.ndarray = q.reshape((q.shape[0], *self.shape))
        for a, axis in enumerate(self.axes):  # S q, one axis at a time
            moved = np.moveaxis(cq, a + 1, 0)
            flat = moved.reshape(self.shape[a], -1)
            cq = np.moveaxis(axis.apply_inverse_gram(flat).reshape(moved.shape), 0, a + 1)
        out = np.einsum("ij,ij->i", q, cq.reshape(q.shape[0], -1))
        if self.known_total:
            out -= (q @ self._outer([axis._w for axis in self.axes])) ** 2 / self._tau()
        out = self.variance * np.maximum(out, 0.0)
        return out if np.ndim(weights) > 1 else out[0]


class OptimizedKronecker(GridMechanism):
    """The Kronecker product of 1-D strategies optimised for the axes' workloads (module doc).

    ``workload``: "all-rectangles" (all ranges on every axis) or "prefix-rectangles" (prefixes:
    dominance counts).  ``template``: "p-identity" (L1 columns: epsilon-DP), "p-identity-l2"
    (L2 columns: Gaussian), or "auto" (by delta).  Each axis' 1-D strategy is optimised once
    and kept in the disk cache of :mod:`dprange.optimized`.
    """

    name = "optimized_kronecker"

    PARAMS = (
        Param(
            "workload",
            OneOf(tuple(AXIS_WORKLOADS)),
            "the k-D workload: all rectangles or dominance (prefix) rectangles",
            default="all-rectangles",
            positional=True,
        ),
        Param(
            "template",
            OneOf(("auto", "p-identity", "p-identity-l2")),
            "the 1-D template of every axis: p-identity (L1, Laplace), p-identity-l2 (L2, Gaussian), "
            "or auto (by delta)",
            default="auto",
        ),
        Param("rows", Integer(0), "p of every axis (0: the 1-D default)", default=0),
        *Mechanism.PARAMS,
    )
    workload: str
    template: str
    rows: int

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._delta = 0.0
        self._axis_cache: dict = {}

    def measure(self, counts, epsilon, *, delta=0.0, rng=None) -> Measurements:
        self._delta = float(delta)
        return super().measure(counts, epsilon, delta=delta, rng=rng)

    def error_model(self, shape, epsilon, *, delta=0.0):
        self._delta = float(delta)
        return super().error_model(shape, epsilon, delta=delta)

    def _template(self) -> str:
        if self.template != "auto":
            return self.template
        return "p-identity-l2" if self._delta > 0 else "p-identity"

    def axis_strategies(self, shape) -> list[PIdentityStrategy]:
        """The optimised, quantised 1-D strategy of every axis (cached on disk)."""
        shape = check_shape(shape)
        template = self._template()
        out = []
        for n in shape:
            if (n, template) not in self._axis_cache:
                mech = Optimized(
                    AXIS_WORKLOADS[self.workload], template=template, rows=self.rows, neighbours=self.neighbours
                )
                strategy = mech.strategy(n)
                if not isinstance(strategy, PIdentityStrategy):
                    raise ParameterError("every axis needs a p-identity strategy")
                self._axis_cache[n, template] = strategy
            out.append(self._axis_cache[n, template])
        return out

    def plan(self, shape, epsilon: float) -> Strategy:
        block = Kron([s.block for s in self.axis_strategies(shape)])
        return OneKronStrategy([block], [epsilon], shape=tuple(check_shape(shape)))

    def estimate(self, shape, measurements: Measurements) -> KronPIdentityEstimate:
        (m,) = measurements.measurements
        self._delta = float(measurements.delta or 0.0)  # template auto follows the measured delta
        factors = [s.block for s in self.axis_strategies(shape)]
        return KronPIdentityEstimate(shape, factors, float(m.variance), m.values, measurements.total)

    def parameters(self) -> dict:
        return {"workload": self.workload, "template": self.template, "rows": self.rows, **super().parameters()}


GRID_MECHANISMS.add(
    OptimizedKronecker,
    summary="Kronecker product of 1-D p-Identity strategies optimised for all ranges or prefixes on every axis "
    "(all rectangles, dominance counts), with exact per-axis least squares",
    citation=Citation(
        "McKenna, Miklau, Hay and Machanavajjhala",
        "Optimizing error of high-dimensional statistical queries under differential privacy",
        "VLDB 2018",
    ),
)

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

import math
from fractions import Fraction

import numpy as np

from ._lazy import lazy_module
from ._params import Integer, OneOf, Param
from ._validation import fit_budget
from .errors import ParameterError
from .inference.p_identity import DiagonalPlusRows, PIdentityEstimate
from .measurements import Measurements
from .mechanisms import Mechanism
from .multidim import GridMechanism
from .operators import Identity, Kron, Total, Weighted
from .optimized import Optimized, PIdentityStrategy
from .registry import GRID_MECHANISMS, Citation
from .strategies import Strategy
from .workloads_kd import check_rectangles, check_shape

optimize = lazy_module("scipy.optimize")  # imported on first use (import dprange skips it)

__all__ = [
    "KronPIdentityEstimate",
    "MarginalEstimate",
    "OptimizedKronecker",
    "OptimizedMarginals",
    "optimize_marginals",
]

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


# ----------------------------------------------------------------------------- marginals


def _subsets(d: int) -> list[tuple[int, ...]]:
    """Every subset of the d axes, as a sorted tuple, indexed by its bit mask."""
    return [tuple(a for a in range(d) if mask >> a & 1) for mask in range(1 << d)]


class MarginalAlgebra:
    """The Gram matrices of marginal strategies (module doc of :class:`OptimizedMarginals`):
    span of C_S = (x)_{a in S} I (x)_{a not in S} J, diagonalised by E_T = (x)_{a in T} P_a
    (x)_{a not in T} Q_a (P = I - J/n, Q = J/n); C_S has eigenvalue c_S = prod_{a not in S} n_a
    on E_T when T is a subset of S, else 0."""

    def __init__(self, shape):
        self.shape = tuple(shape)
        d = len(self.shape)
        self.subsets = _subsets(d)
        masks = np.arange(1 << d)
        self.c = np.array(
            [float(math.prod(n for a, n in enumerate(self.shape) if not m >> a & 1)) for m in masks], float
        )
        #: R[T, S] = c_S when T is a subset of S: eigenvalues lambda = R u of sum_S u_S C_S.
        self.R = np.array([[self.c[s] if (t & s) == t else 0.0 for s in masks] for t in masks])
        self.dim = np.array([float(math.prod(self.shape[a] - 1 for a in sub)) for sub in self.subsets], float)

    def workload_eigenvalues(self, order: int) -> np.ndarray:
        """g_T for all ``order``-way marginals: G = sum_{|S| = order} C_S."""
        u = np.array([1.0 if len(sub) == order else 0.0 for sub in self.subsets])
        return self.R @ u


def marginal_loss(theta: np.ndarray, algebra: MarginalAlgebra, weights: np.ndarray) -> tuple[float, np.ndarray]:
    """(sum theta)^2 sum_T weights_T / lambda_T(theta^2) and its gradient: the trace of
    G X^-1 with X = sum_S theta_S^2 C_S, L1 sensitivity sum theta (every cell lies in one cell
    of each marginal).  ``weights`` = dim(E_T) g_T."""
    u = theta**2
    lam = algebra.R @ u
    live = weights > 0
    if np.any(lam[live] <= 0):
        return np.inf, np.zeros_like(theta)
    f = float(np.sum(weights[live] / lam[live]))
    df_du = -algebra.R[live].T @ (weights[live] / lam[live] ** 2)
    total = float(theta.sum())
    return total**2 * f, 2.0 * total * f + total**2 * df_du * 2.0 * theta


def optimize_marginals(shape, order: int, *, restarts: int = 3, seed: int = 0) -> tuple[np.ndarray, float]:
    """Weights theta >= 0 (sum 1) on the 2^d marginals minimising the L1 trace for all
    ``order``-way marginals (L-BFGS-B from uniform starts; 2^d variables)."""
    algebra = MarginalAlgebra(shape)
    weights = algebra.dim * algebra.workload_eigenvalues(order)
    rng = np.random.default_rng(seed)
    best, best_loss = None, np.inf
    for _ in range(restarts):
        start = rng.uniform(0.5, 1.0, len(algebra.subsets))
        result = optimize.minimize(
            marginal_loss,
            start,
            args=(algebra, weights),
            jac=True,
            method="L-BFGS-B",
            bounds=[(0.0, None)] * start.size,
        )
        if result.fun < best_loss:
            best, best_loss = result.x / result.x.sum(), float(result.fun)
    if best is None:
        raise ParameterError("the marginal weights could not be optimised (no finite start)")
    return best, best_loss


class MarginalEstimate:
    """GLS on measured marginals with per-marginal variances v_S: X = sum_S C_S / v_S,
    x = X^+ sum_S M_S^T y_S / v_S by the projections E_T (2^d passes over the grid), and
    Var(q) = sum_T ||E_T q||^2 / lambda_T for q = (x)_a q_a (a rectangle), infinite where q
    reaches an unmeasured E_T.  A public total removes the E_empty term (its exact value)."""

    def __init__(self, shape, subsets, variances, values=None, total=None):
        self.shape = tuple(shape)
        self.algebra = MarginalAlgebra(self.shape)
        d = len(self.shape)
        u = np.zeros(1 << d)
        for sub, v in zip(subsets, variances):
            u[sum(1 << a for a in sub)] += 1.0 / float(v)
        self.lam = self.algebra.R @ u
        self.known_total = total is not None
        self.subsets = [tuple(s) for s in subsets]
        cells = int(np.prod(self.shape))
        self.leaves = np.zeros(cells) if values is None else self._solve(values, variances, total)

    def _project(self, z: np.ndarray, mask: int) -> np.ndarray:
        """E_T z for T = mask (z on the grid)."""
        out = z
        for a in range(len(self.shape)):
            mean = out.mean(axis=a, keepdims=True)
            out = out - mean if mask >> a & 1 else np.broadcast_to(mean, out.shape)
        return out

    def _solve(self, values, variances, total) -> np.ndarray:
        z = np.zeros(self.shape)
        for sub, y, v in zip(self.subsets, values, variances):
            kept = [self.shape[a] for a in sub]
            table = np.asarray(y, dtype=float).reshape(kept) / float(v)
            z = z + np.expand_dims(table, [a for a in range(len(self.shape)) if a not in sub])  # M_S^T y / v
        x = np.zeros(self.shape)
        for mask, lam in enumerate(self.lam):
            if lam > 0:
                x = x + self._project(z, mask) / lam  # X^+ z, one eigenspace at a time
        if total is not None:
            x = x - x.mean() + float(total) / x.size  # the E_empty part is the public total
        return x.ravel()

    def rectangle_variance(self, lows, highs) -> np.ndarray:
        lows, highs = check_rectangles(self.shape, lows, highs)
        lengths = (highs - lows + 1).astype(float)
        n = np.asarray(self.shape, dtype=float)
        q_part = lengths**2 / n  # ||Q_a q_a||^2
        p_part = lengths - q_part  # ||P_a q_a||^2
        out = np.zeros(lows.shape[0])
        for mask, lam in enumerate(self.lam):
            if mask == 0 and self.known_total:
                continue
            norm = np.prod(np.where([(mask >> a) & 1 for a in range(len(self.shape))], p_part, q_part), axis=1)
            if lam > 0:
                out += norm / lam
            else:
                out = np.where(norm > 1e-12, np.inf, out)
        return out


class MarginalStrategy(Strategy):
    """Marginal blocks with their budgets; add/remove: every column has one 1 per block, so
    Delta_p^p = sum_S eps_S^p; replace: a record moving between cells that differ on every
    axis changes every block but the total by 2 in L1 (2 entries of 1), so 2 sum_{S != {}} eps_S
    (L1) and 2 sum eps_S^2 (L2)."""

    def __init__(self, blocks, budget, subsets, *, shape=None):
        super().__init__(blocks, budget, shape=shape)
        self.subsets = subsets

    def sensitivity_power(self, norm: int, neighbours: str, weights=None):
        w = [Fraction(e) for e in self.budget] if weights is None else list(weights)
        if neighbours == "add_remove":
            return sum(abs(x) ** norm for x in w)
        if any(n < 2 for n in self.shape):
            return super().sensitivity_power(norm, neighbours, weights)
        return sum(2 * abs(x) ** norm for x, sub in zip(w, self.subsets) if sub)


class OptimizedMarginals(GridMechanism):
    """Weighted marginals optimised for all ``order``-way marginals (HDMM's marginals template,
    McKenna et al., VLDB 2018): measure the marginal on each axis set S with budget
    epsilon theta_S; theta (2^d weights) minimises the exact trace through the marginal Gram
    algebra (:class:`MarginalAlgebra`), so the error of every marginal is exact and the
    estimate is GLS.  Marginals with weight below 1e-4 of the largest are not measured."""

    name = "optimized_marginals"

    PARAMS = (
        Param("order", Integer(1), "the workload: all order-way marginals", default=2, positional=True),
        *Mechanism.PARAMS,
    )
    order: int

    def weights(self, shape) -> list[tuple[tuple[int, ...], float]]:
        """(axes, theta) of every measured marginal."""
        shape = check_shape(shape)
        if self.order > len(shape):
            raise ParameterError(
                f"{self.order}-way marginals need at least {self.order} axes, the grid has {len(shape)}"
            )
        theta, _ = optimize_marginals(shape, int(self.order))
        keep = theta >= 1e-4 * theta.max()
        subsets = _subsets(len(shape))
        kept = theta[keep] / theta[keep].sum()
        return [(subsets[i], float(t)) for i, t in zip(np.flatnonzero(keep), kept)]

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


GRID_MECHANISMS.add(
    OptimizedMarginals,
    summary="weighted marginals optimised for all k-way marginals (HDMM's marginals template), exact GLS "
    "through the marginal Gram algebra",
    citation=Citation(
        "McKenna, Miklau, Hay and Machanavajjhala",
        "Optimizing error of high-dimensional statistical queries under differential privacy",
        "VLDB 2018",
    ),
)

"""Least squares for HDMM's marginals template: the algebra of marginal Gram matrices and the
estimate of every marginal with its exact variance.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError
from ..workloads.rectangles import check_rectangles


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

    def query_variance(self, weights) -> np.ndarray:
        """Variance of sum_c q_c x_c for each row q of ``weights`` (cells in C order):
        sum_T ||E_T q||^2 / lambda_T, infinite where q reaches an unmeasured E_T."""
        q = np.atleast_2d(np.asarray(weights, dtype=float))
        cells = int(np.prod(self.shape))
        if q.shape[-1] != cells:
            raise ParameterError(f"query weights must have {cells} entries per query")
        grid = q.reshape((q.shape[0], *self.shape))
        out = np.zeros(q.shape[0])
        for mask, lam in enumerate(self.lam):
            if mask == 0 and self.known_total:
                continue
            part = grid
            for a in range(len(self.shape)):  # E_T q, one axis at a time: O(cells) per query and mask
                mean = part.mean(axis=a + 1, keepdims=True)
                part = part - mean if mask >> a & 1 else np.broadcast_to(mean, part.shape)
            norm = np.einsum("ij,ij->i", part.reshape(q.shape[0], -1), part.reshape(q.shape[0], -1))
            if lam > 0:
                out += norm / lam
            else:
                out = np.where(norm > 1e-12 * np.einsum("ij,ij->i", q, q), np.inf, out)
        return out if np.ndim(weights) > 1 else out[0]

    def mean_variance(self, families) -> float:
        """The exact mean variance over the product of per-axis range families
        (``families[a] = (lows, highs)``): sum_T mean(||E_T q||^2) / lambda_T, each mean a
        product of per-axis means; infinite where a query of the family reaches an unmeasured
        E_T (the largest norm there is the product of the per-axis largest)."""
        n = np.asarray(self.shape, dtype=float)
        parts = []
        for a, (lows, highs) in enumerate(families):
            lengths = (np.asarray(highs, dtype=np.int64) - np.asarray(lows, dtype=np.int64) + 1).astype(float)
            q_part = lengths**2 / n[a]
            p_part = lengths - q_part
            parts.append(((p_part.mean(), p_part.max()), (q_part.mean(), q_part.max())))
        out = 0.0
        for mask, lam in enumerate(self.lam):
            if mask == 0 and self.known_total:
                continue
            picked = [part[0] if mask >> a & 1 else part[1] for a, part in enumerate(parts)]
            if lam > 0:
                out += math.prod(m for m, _ in picked) / lam
            elif math.prod(top for _, top in picked) > 1e-12:
                return math.inf
        return float(out)

"""Exact GLS for strategies of the p-Identity shape A = [diag(d); C] (n + p rows, n bins).

The p-Identity template (McKenna, Miklau, Hay and Machanavajjhala, "Optimizing error of
high-dimensional statistical queries under differential privacy", VLDB 2018) measures every
bin once (scaled by d_j > 0) plus p << n extra rows C.  Its quantised form keeps that shape
(``round(K [I; B] D) = [diag(round(K D)); round(K B D)]``), so with one noise variance v

    A^T A = Delta^2 + C^T C,   Delta = diag(d),

and by the Woodbury identity, with E = Delta^-2 and M = I_p + C E C^T = L L^T (Cholesky),

    S = (A^T A)^-1 = E - E C^T M^-1 C E = E - Z^T Z,   Z = L^-1 C E   (p x n).

The estimate is x = S A^T y; the covariance is v S.  A range [lo, hi] (indicator q) has
variance v (sum_{lo..hi} e_j - ||Z q||^2), and Z q is a difference of two columns of the
running sums of Z: O(p) per range after O(n p) set-up, with no n x n matrix anywhere.
With a public total t (replace neighbours) the estimate is constrained to 1^T x = t: with
w = S 1 and tau = 1^T w, x_c = x + w (t - 1^T x) / tau and Cov = v (S - w w^T / tau), a rank-one
correction (the equality-constrained GLS).  Set-up O(n p^2 + p^3); memory O(n p).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

from ..errors import ParameterError
from ..operators.base import Operator, _exact_number, check_norm, check_relation, definition_sensitivity_power
from ..operators.dense import exact_integer_dtype

#: Above this many (pairs x rows) the replace-model L1 sensitivity is the triangle bound
#: 2 max_j ||a_j||_1 (as for :class:`~dprange.operators.Explicit`).
PAIRS_LIMIT = 2 * 10**7


class DiagonalPlusRows(Operator):
    """The operator [diag(d); C]: n scaled bins, then p dense rows.  Mat-vec O(n p); the
    sensitivity is exact from the columns (add/remove O(n p); replace by the definition up to
    :data:`PAIRS_LIMIT`, above it the triangle bound for L1 and the exact pairwise maximum
    from C^T C in blocks for L2)."""

    #: A stack of this one block takes its sensitivity from here (not the dense definition).
    structured_sensitivity = True

    def __init__(self, diagonal, rows):
        d = np.asarray(diagonal, dtype=float).ravel()
        c = np.atleast_2d(np.asarray(rows, dtype=float))
        if c.shape[1] != d.size:
            raise ParameterError(f"the extra rows have {c.shape[1]} columns but there are {d.size} bins")
        super().__init__((d.size + c.shape[0], d.size))
        self.diagonal = d
        self.rows = c
        self._sensitivity_cache: dict = {}
        self._largest_gram_eigenvalue: float | None = None

    def _apply(self, X):
        return np.vstack([self.diagonal[:, None] * X, self.rows @ X])

    def _apply_adjoint(self, Y):
        n = self.diagonal.size
        return self.diagonal[:, None] * Y[:n] + self.rows.T @ Y[n:]

    def gram(self) -> Operator:
        """A^T A = diag(d^2) + C^T C, applied in O(n p) a column without forming it."""
        return DiagonalPlusGram(self.diagonal**2, self.rows)

    def largest_gram_eigenvalue(self) -> float:
        """The largest eigenvalue of A^T A (computed once: a symmetric n x n eigenvalue problem)."""
        if self._largest_gram_eigenvalue is None:
            dense = self.gram().dense()
            self._largest_gram_eigenvalue = float(np.linalg.eigvalsh(dense)[-1])  # O(n^3), once
        return self._largest_gram_eigenvalue

    def answers(self, x):
        """Exact integer answers on integer counts (:meth:`integer_product` in the dtype of
        :func:`exact_integer_dtype`: every answer is at most the largest column's L1 norm times
        sum |x|); the float product otherwise."""
        x = np.asarray(x)
        if np.issubdtype(x.dtype, np.integer) and self.integer:
            bound = int(self.sensitivity_power(1, "add_remove")) * int(np.abs(x).sum())
            return self.integer_product(x.astype(exact_integer_dtype(bound)))
        return self.matvec(x)

    def integer_product(self, X: np.ndarray) -> np.ndarray:
        """[diag(d); C] X for an integer block, in X's dtype (int64, or object for Python
        integers): exact where no partial value passes the dtype (the caller's bound)."""
        d = self.diagonal.astype(np.int64).astype(X.dtype)
        c = self.rows.astype(np.int64).astype(X.dtype)
        return np.concatenate([d.reshape((-1,) + (1,) * (X.ndim - 1)) * X, c @ X])

    def design_digest(self) -> str:
        """SHA-256 of the diagonal and the extra rows (float64), with their shapes."""
        digest = hashlib.sha256(f"{self.diagonal.shape}{self.rows.shape}".encode())
        digest.update(np.ascontiguousarray(self.diagonal, dtype=float).tobytes())
        digest.update(np.ascontiguousarray(self.rows, dtype=float).tobytes())
        return digest.hexdigest()

    @property
    def integer(self) -> bool:
        return bool(np.all(self.diagonal == np.round(self.diagonal)) and np.all(self.rows == np.round(self.rows)))

    def dense(self) -> np.ndarray:
        return np.vstack([np.diag(self.diagonal), self.rows])

    def sensitivity_power(self, norm, neighbours):
        p = check_norm(norm)
        key = (p, check_relation(neighbours))
        if key not in self._sensitivity_cache:
            self._sensitivity_cache[key] = self._sensitivity_power(p, neighbours)
        return self._sensitivity_cache[key]

    def _sensitivity_power(self, p: int, neighbours: str):
        d, c = self.diagonal, self.rows
        n, rows = d.size, self.shape[0]
        exact = self.integer
        if neighbours == "add_remove":
            value = float((np.abs(d) ** p + (np.abs(c) ** p).sum(axis=0)).max())  # O(n p)
            return _exact_number(value) if exact else value
        if n < 2:
            return 0
        if n * n * rows <= PAIRS_LIMIT:
            return definition_sensitivity_power(self.dense(), p, neighbours)
        if p == 1:
            return 2 * self.sensitivity_power(1, "add_remove")
        # L2, replace: ||a_j - a_k||^2 = d_j^2 + d_k^2 + ||c_j||^2 + ||c_k||^2 - 2 c_j . c_k (j != k).
        norms = (c**2).sum(axis=0)
        own = d**2 + norms
        best = 0.0
        for start in range(0, n, 512):  # O(n^2 p) in blocks of 512 columns
            block = slice(start, min(n, start + 512))
            dist = own[block, None] + own[None, :] - 2.0 * (c[:, block].T @ c)
            idx = np.arange(block.start, block.stop)
            dist[idx - block.start, idx] = -np.inf  # j == k is not a pair
            best = max(best, float(dist.max()))
        return _exact_number(best) if exact else best


class DiagonalPlusGram(Operator):
    """The symmetric n x n operator diag(s) + C^T C (C: p x n), the Gram matrix of
    :class:`DiagonalPlusRows`: a product costs O(n p) a column (two products by C), where A^T (A X)
    would also stack and copy the n + p rows of A X."""

    def __init__(self, squares, rows):
        self.squares = np.asarray(squares, dtype=float).ravel()
        self.rows = np.atleast_2d(np.asarray(rows, dtype=float))
        super().__init__((self.squares.size, self.squares.size))

    def _apply(self, X):
        return self.squares[:, None] * X + self.rows.T @ (self.rows @ X)  # cost: O(n p) a column

    def _apply_adjoint(self, Y):
        return self._apply(Y)

    def dense(self) -> np.ndarray:
        return np.diag(self.squares) + self.rows.T @ self.rows


class PIdentityEstimate:
    """The GLS estimate for [diag(d); C] with one noise variance, and its exact error model
    (module doc): ``range_variance`` O(p) per range, ``query_variance`` O(n p) per query."""

    def __init__(self, diagonal, rows, variance: float, values=None, total=None):
        self.diagonal = np.asarray(diagonal, dtype=float)
        self.rows = np.atleast_2d(np.asarray(rows, dtype=float))
        self.variance = float(variance)
        self.known_total = total is not None
        n, p = self.diagonal.size, self.rows.shape[0]
        self.n = n
        e = 1.0 / self.diagonal**2
        self._e = e
        ce = self.rows * e  # C E                              O(n p)
        m_matrix = np.eye(p) + ce @ self.rows.T  # I + C E C^T  O(n p^2)
        lower = np.linalg.cholesky(m_matrix)
        self._z = solve_triangular(lower, ce, lower=True)  # Z = L^-1 C E   O(n p^2)
        self._zcum = np.zeros((p, n + 1))
        np.cumsum(self._z, axis=1, out=self._zcum[:, 1:])
        self._ecum = np.concatenate([[0.0], np.cumsum(e)])
        if self.known_total:
            self._w = e - self._z.T @ self._z.sum(axis=1)  # w = S 1
            self._tau = float(self._w.sum())
            self._wcum = np.concatenate([[0.0], np.cumsum(self._w)])
        self._lower = lower
        self.iterations = 0
        self.leaves = np.zeros(n) if values is None else self._solve(np.asarray(values, dtype=float), total)

    def apply_inverse_gram(self, u: np.ndarray) -> np.ndarray:
        """S u = E u - E C^T M^-1 C E u for a vector or the columns of an n x r array (O(n p r))."""
        e = self._e if np.ndim(u) == 1 else self._e[:, None]
        eu = e * u
        return eu - e * (self.rows.T @ cho_solve((self._lower, True), self.rows @ eu))

    def _solve(self, y: np.ndarray, total) -> np.ndarray:
        n = self.n
        if y.shape != (n + self.rows.shape[0],):
            raise ParameterError(f"expected {n + self.rows.shape[0]} measured values, got {y.shape}")
        x = self.apply_inverse_gram(self.diagonal * y[:n] + self.rows.T @ y[n:])
        if total is not None:
            x = x + self._w * (float(total) - x.sum()) / self._tau
        return x

    def workload_sums(self, gram) -> tuple[float, float, float]:
        """(trace(G S), w^T G w, tau) for a workload with Gram matrix G = sum_q q q^T (``gram``
        gives its diagonal ``diag`` and products ``left(X)`` = X G, e.g.
        :class:`dprange.optimize.p_identity.Gram`): the sums over the queries of q^T S q and (q^T w)^2,
        and tau = 1^T w (the public-total model needs them; this one must be built with a total).
        trace(G S) = sum_j G_jj e_j - trace(Z G Z^T): O(n p) plus one product of p + 1 rows by G."""
        trace = float(gram.diag @ self._e - np.vdot(self._z, gram.left(self._z)))
        cross = float(self._w @ gram.left(self._w[None, :])[0])
        return trace, cross, self._tau

    def range_variance(self, lo, hi) -> np.ndarray:
        lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64))
        if lo.size and (lo.min() < 0 or hi.max() >= self.n or np.any(lo > hi)):
            raise ParameterError(f"ranges must satisfy 0 <= lo <= hi < {self.n}")
        shape = lo.shape
        lo, hi = lo.ravel(), hi.ravel()
        out = self._ecum[hi + 1] - self._ecum[lo]
        for start in range(0, lo.size, 1 << 15):  # (p x chunk) temporaries
            sl = slice(start, start + (1 << 15))
            zq = self._zcum[:, hi[sl] + 1] - self._zcum[:, lo[sl]]  # Z q for each range   O(p)
            out[sl] -= np.einsum("ij,ij->j", zq, zq)
        if self.known_total:
            out -= (self._wcum[hi + 1] - self._wcum[lo]) ** 2 / self._tau
            out[(lo == 0) & (hi == self.n - 1)] = 0.0  # the public total: exactly, not by cancellation
        return (self.variance * np.maximum(out, 0.0)).reshape(shape)

    def query_variance(self, weights) -> np.ndarray:
        q = np.atleast_2d(np.asarray(weights, dtype=float))
        if q.shape[-1] != self.n:
            raise ParameterError(f"query weights must have {self.n} entries per query")
        zq = self._z @ q.T
        out = (q**2) @ self._e - np.einsum("ij,ij->j", zq, zq)
        if self.known_total:
            out -= (q @ self._w) ** 2 / self._tau
            out[np.ptp(q, axis=1) == 0] = 0.0  # multiples of the public total: exactly
        out = self.variance * np.maximum(out, 0.0)
        return out if np.ndim(weights) > 1 else out[0]

    def to_dict(self) -> dict:
        """The measured integer strategy (diagonal and extra rows), its noise variance and
        whether the total is public: the error model is rebuilt from them."""
        return {
            "kind": "p_identity",
            "n": self.n,
            "diagonal": self.diagonal.tolist(),
            "rows": self.rows.tolist(),
            "variance": self.variance,
            "known_total": self.known_total,
        }

    @classmethod
    def from_dict(cls, data: dict) -> PIdentityEstimate:
        n = data["n"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ParameterError("the saved number of bins must be a positive integer")
        diagonal = np.asarray(data["diagonal"], dtype=float)
        rows = np.asarray(data["rows"], dtype=float)
        if rows.size == 0:
            rows = np.zeros((0, n))
        if diagonal.shape != (n,) or rows.ndim != 2 or rows.shape[1] != n or rows.shape[0] > n:
            raise ParameterError(f"a saved p-identity strategy must have {n} diagonal entries and at most {n} rows")
        if not (np.all(np.isfinite(diagonal)) and np.all(np.isfinite(rows))) or np.any(diagonal <= 0):
            raise ParameterError("a saved p-identity strategy must have a positive diagonal and finite rows")
        if not (np.all(diagonal == np.round(diagonal)) and np.all(rows == np.round(rows))):
            raise ParameterError("a saved p-identity strategy must have integer entries")
        variance = float(data["variance"])
        if not (variance > 0 and math.isfinite(variance)):
            raise ParameterError("the saved noise variance must be positive and finite")
        return cls(diagonal, rows, variance, total=0.0 if bool(data["known_total"]) else None)


def p_identity_estimate(block: DiagonalPlusRows, values, variance, total=None) -> PIdentityEstimate:
    """GLS for one :class:`DiagonalPlusRows` block with one noise variance (module doc)."""
    v = np.asarray(variance, dtype=float)
    if v.size != 1 and not np.all(v == v.ravel()[0]):
        raise ParameterError("the p-identity path needs one noise variance for every row")
    v0 = float(v.ravel()[0])
    if not (v0 > 0 and math.isfinite(v0)):
        raise ParameterError("variances must be positive and finite")
    return PIdentityEstimate(block.diagonal, block.rows, v0, values, total)

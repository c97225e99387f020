"""The matrix mechanism (Li, Hay, Rastogi, Miklau, McGregor, PODS 2010; seed 003).

Measure an arbitrary strategy A (p x n) with noise calibrated to its sensitivity, then
estimate x by least squares, x_hat = A^+ y.  Laplace noise uses the L1 sensitivity
||A||_1 = max column L1 norm; Gaussian noise (delta > 0) the L2 sensitivity, the largest
column L2 norm.  The expected error of a workload W is

    (2 / eps^2) ||A||_1^2 trace(W (A^T A)^+ W^T) / m          (Laplace, continuous)

and sigma^2 trace(W (A^T A)^+ W^T) / m for Gaussian noise: :meth:`Matrix.error_model` gives
the covariance exactly.  In the replace model the sensitivity used is the upper bound
2 ||A||_1 (resp. 2 ||A||_2): the exact value max_{i != j} ||a_i - a_j|| can be smaller, so
the guarantee holds and the noise may be slightly larger than necessary.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, aslinearoperator

from ._validation import check_delta, check_epsilon, check_positive_int
from .errors import ParameterError
from .inference.least_squares import gls
from .mechanisms import Mechanism, level_noise, resolve_noise
from .noise import NoiseSpec

#: Strategies up to this many bins get a dense covariance (exact, O(1) per range query).
DENSE_COVARIANCE_LIMIT = 4096


class DenseErrorModel:
    """Exact error model from an explicit n x n covariance (small n)."""

    def __init__(self, covariance: np.ndarray):
        self.covariance = covariance
        n = covariance.shape[0]
        self._cum = np.zeros((n + 1, n + 1))
        self._cum[1:, 1:] = covariance.cumsum(axis=0).cumsum(axis=1)

    def range_variance(self, lo, hi) -> np.ndarray:
        lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64))
        c = self._cum
        out = c[hi + 1, hi + 1] - c[lo, hi + 1] - c[hi + 1, lo] + c[lo, lo]
        return np.maximum(out, 0.0)

    def query_variance(self, weights) -> np.ndarray:
        q = np.asarray(weights, dtype=float)
        out = np.einsum("...i,ij,...j->...", q, self.covariance, q)
        return np.maximum(out, 0.0)


class MatrixStrategy:
    """An explicit strategy matrix (dense or sparse) or an implicit LinearOperator."""

    def __init__(self, matrix):
        if isinstance(matrix, LinearOperator):
            self.matrix = None
            self._operator = matrix
        else:
            self.matrix = matrix.tocsc() if sp.issparse(matrix) else np.atleast_2d(np.asarray(matrix, dtype=float))
            if self.matrix.ndim != 2 or 0 in self.matrix.shape:
                raise ParameterError("the strategy must be a non-empty 2-D matrix")
            self._operator = aslinearoperator(self.matrix)
        self.rows, self.n = self._operator.shape
        self.measured_depths = (0,)
        self.level_sizes = (self.rows,)
        self.height = 0

    def operator(self) -> LinearOperator:
        return self._operator

    def explicit(self) -> np.ndarray:
        """Dense matrix (columns by products with the identity when implicit; small n only)."""
        if self.matrix is not None:
            return self.matrix.toarray() if sp.issparse(self.matrix) else self.matrix
        if self.n > DENSE_COVARIANCE_LIMIT:
            raise ParameterError("an implicit strategy over this many bins has no explicit form; pass a matrix")
        return self._operator.matmat(np.eye(self.n))

    def column_norms(self) -> tuple[float, float]:
        """(max column L1 norm, max column L2 norm)."""
        if self.matrix is not None and sp.issparse(self.matrix):
            absolute = abs(self.matrix)
            return float(absolute.sum(axis=0).max()), float(np.sqrt(absolute.multiply(absolute).sum(axis=0).max()))
        dense = self.explicit()
        return float(np.abs(dense).sum(axis=0).max()), float(np.sqrt((dense**2).sum(axis=0).max()))

    def level_sums(self, x):
        return [self._operator.matvec(np.asarray(x, dtype=float))]

    def is_integer(self) -> bool:
        if self.matrix is None:
            return False
        data = self.matrix.data if sp.issparse(self.matrix) else self.matrix
        return bool(np.all(data == np.round(data)))

    def describe(self) -> dict:
        return {"bins": self.n, "rows": self.rows}


class Matrix(Mechanism):
    """Matrix mechanism with strategy A and least-squares inference (see module doc).

    ``noise="auto"`` is discrete Laplace for integer strategies and continuous Laplace
    otherwise when delta = 0, Gaussian when delta > 0.
    """

    name = "matrix"

    def __init__(self, strategy, *, neighbours="add_remove", noise="auto"):
        super().__init__(neighbours=neighbours, noise=noise)
        self._strategy = MatrixStrategy(strategy)
        l1, l2 = self._strategy.column_norms()
        if l1 == 0:
            raise ParameterError("the strategy matrix is zero; it measures nothing")
        factor = 2.0 if self.neighbours == "replace" else 1.0
        self._sensitivity = (factor * l1, factor * l2)

    @property
    def sensitivity(self) -> tuple[float, float]:
        return self._sensitivity

    def parameters(self) -> dict:
        return {"strategy_shape": [self._strategy.rows, self._strategy.n], **super().parameters()}

    def strategy(self, n: int) -> MatrixStrategy:
        if n != self._strategy.n:
            raise ParameterError(f"the strategy has {self._strategy.n} columns but the data have {n} bins")
        return self._strategy

    def noise_specs(self, strategy, epsilon, delta) -> list[NoiseSpec]:
        kind = resolve_noise(self.noise, delta)
        if self.noise == "auto" and kind == "discrete_laplace" and not strategy.is_integer():
            kind = "laplace_float"
        if kind == "discrete_laplace" and not strategy.is_integer():
            raise ParameterError("discrete Laplace noise needs an integer strategy matrix; use noise='laplace_float'")
        return level_noise(kind, np.ones(1), epsilon, delta, *self.sensitivity)

    def level_variances(self, strategy, epsilon, delta) -> list:
        return [self.noise_specs(strategy, epsilon, delta)[0].variance]

    def infer(self, measurements):
        y, v = measurements.stacked()
        estimate = gls(self._strategy.operator(), y, v, total=measurements.total)
        if self._strategy.n <= DENSE_COVARIANCE_LIMIT:
            estimate.range_variance = self._dense_model(v[0], measurements.total is not None).range_variance
        return estimate

    def _dense_model(self, variance: float, known_total: bool) -> DenseErrorModel:
        A = self._strategy.explicit()
        gram = A.T @ A
        if known_total:
            n = gram.shape[0]
            P = np.eye(n) - 1.0 / n
            cov = np.linalg.pinv(P @ gram @ P, rtol=1e-10, hermitian=True)
        else:
            cov = np.linalg.pinv(gram, rtol=1e-10, hermitian=True)
        return DenseErrorModel(variance * cov)

    def error_model(self, n: int, epsilon, *, delta=0.0):
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        strategy = self.strategy(check_positive_int(n, "n"))
        variance = self.level_variances(strategy, epsilon, delta)[0]
        if n > DENSE_COVARIANCE_LIMIT:
            raise ParameterError(f"exact error of a matrix strategy is computed for n <= {DENSE_COVARIANCE_LIMIT}")
        return self._dense_model(variance, self.neighbours == "replace")

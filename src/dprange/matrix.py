"""The matrix mechanism (Li, Hay, Rastogi, Miklau, McGregor, PODS 2010; seed 003).

Measure a strategy A (p x n) with noise calibrated to its sensitivity, then estimate x by
least squares, x_hat = A^+ y.  The expected error of a workload W is

    (noise variance) trace(W (A^T A)^+ W^T) / m,

and :meth:`Matrix.error_model` gives the covariance exactly.

Integer queries only.  Integer noise (discrete Laplace, discrete Gaussian) added to a query
whose exact value is not an integer reveals its fractional part, so a real-valued strategy is
quantised: A_q = round(A K) with K the smallest power of two making A K integer, or, if none
up to the limit does, the power of two for which rounding moves every entry by at most
2^-16 of the largest entry (entries then stay below 2^16, so noise scales stay far below the
samplers' limit).  The mechanism measures A_q x with integer noise and runs least
squares with A_q, the strategy actually measured (so the estimate stays unbiased and its
error bars exact); ``describe()`` records K.

Sensitivity, from the record-level relation on A_q (see :mod:`dprange.strategies`):
add/remove max_i ||a_i||_p; replace max_{i != j} ||a_i - a_j||_p, exact for p = 2 (from the
Gram matrix) and for p = 1 when n^2 p <= 2e7, else the bound 2 max_i ||a_i||_1.

A rank-deficient strategy (with the public total in the replace model: [A; 1^T]) leaves part
of x unmeasured; least squares would then be biased with error bars that never cover, so it
is refused.  Strategies are explicit (dense or sparse) matrices, or operators over at most
4096 bins (made explicit).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, aslinearoperator

from ._params import Custom, Param, find
from ._validation import check_delta, check_epsilon, check_positive_int
from .errors import ParameterError
from .inference.least_squares import OperatorEstimate, gls
from .mechanisms import Mechanism, calibrate, resolve_noise
from .noise import NoiseSpec
from .registry import MECHANISMS, Citation
from .strategies import dense_sensitivity_power

#: Strategies up to this many bins get a dense covariance (exact, O(1) per range query).
DENSE_COVARIANCE_LIMIT = 4096

#: Quantisation of a real strategy: rounding moves no entry by more than this fraction of the
#: largest entry.
QUANTISATION_TOLERANCE = 2.0**-16

#: Above this many (pairs x rows), the replace-model L1 sensitivity uses the triangle bound.
EXACT_PAIRS_LIMIT = 2 * 10**7


def quantisation_factor(values: np.ndarray) -> float:
    """K = 2^k: the smallest making ``values`` * K integer, else the one meeting the tolerance."""
    largest = float(np.max(np.abs(values))) if values.size else 0.0
    if largest == 0.0:
        return 1.0
    if not np.all(np.isfinite(values)):
        raise ParameterError("the strategy matrix has non-finite entries")
    limit = max(0, math.ceil(math.log2(0.5 / (QUANTISATION_TOLERANCE * largest))))
    for k in range(limit + 1):
        scaled = values * 2.0**k
        if np.all(scaled == np.round(scaled)):
            return 2.0**k
    return 2.0**limit


class DenseErrorModel:
    """Exact error model from an explicit n x n covariance (small n)."""

    def __init__(
        self, covariance: np.ndarray, *, strategy=None, variance: float | None = None, known_total: bool = False
    ):
        self.covariance = covariance
        #: What the covariance was computed from (kept for :meth:`to_dict`).
        self.strategy = strategy
        self.variance = variance
        self.known_total = bool(known_total)
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

    def to_dict(self) -> dict:
        """The measured integer strategy (nonzero entries as row, column, value triplets), the
        noise variance of every row and whether the total is public: the covariance is
        recomputed from them, so the saved form is compact."""
        if self.strategy is None or self.variance is None:
            raise ParameterError("this dense error model does not know the strategy it was computed from")
        coo = sp.coo_matrix(self.strategy)
        return {
            "kind": "dense_matrix",
            "shape": [int(coo.shape[0]), int(coo.shape[1])],
            "sparse": bool(sp.issparse(self.strategy)),
            "row": coo.row.tolist(),
            "col": coo.col.tolist(),
            "value": coo.data.tolist(),
            "variance": float(self.variance),
            "known_total": self.known_total,
        }

    @classmethod
    def from_dict(cls, data: dict):
        """The error model described by :meth:`to_dict`, as a released matrix estimate carries
        it: least-squares query variances through the strategy operator, range variances
        from the dense covariance (as :meth:`Matrix.infer` gives them)."""
        rows, n = (int(v) for v in data["shape"])
        if not 0 < n <= DENSE_COVARIANCE_LIMIT:
            raise ParameterError(f"a saved matrix strategy must have 1 to {DENSE_COVARIANCE_LIMIT} columns, not {n}")
        if not 0 < rows <= len(data["value"]) + 4 * n:
            raise ParameterError(f"a saved matrix strategy with {len(data['value'])} nonzeros cannot have {rows} rows")
        matrix = sp.csc_matrix(
            (
                np.asarray(data["value"], dtype=float),
                (np.asarray(data["row"], dtype=np.int64), np.asarray(data["col"], dtype=np.int64)),
            ),
            shape=(rows, n),
        )
        if not np.all(matrix.data == np.round(matrix.data)):
            raise ParameterError("a saved matrix strategy must have integer entries")
        strategy = MatrixStrategy(matrix if data["sparse"] else np.ascontiguousarray(matrix.toarray()))
        variance = float(data["variance"])
        if not (variance > 0 and math.isfinite(variance)):
            raise ParameterError("the saved noise variance must be positive and finite")
        return matrix_estimate_model(strategy, variance, bool(data["known_total"]))


def dense_matrix_model(strategy: MatrixStrategy, variance: float, known_total: bool) -> DenseErrorModel:
    """The exact covariance of least squares on A, variance x (A^T A)^+ (with a public total:
    the pseudo-inverse on the sum-zero subspace), as a :class:`DenseErrorModel`."""
    A = strategy.explicit()
    gram = A.T @ A
    if known_total:
        n = gram.shape[0]
        P = np.eye(n) - 1.0 / n
        cov = np.linalg.pinv(P @ gram @ P, rtol=1e-10, hermitian=True)
    else:
        cov = np.linalg.pinv(gram, rtol=1e-10, hermitian=True)
    return DenseErrorModel(variance * cov, strategy=strategy.matrix, variance=variance, known_total=known_total)


def with_dense_errors(estimate, strategy: MatrixStrategy, variance: float, known_total: bool):
    """``estimate`` (a least-squares estimate on ``strategy``) answering range variances from
    the dense covariance, and saving itself as that model."""
    dense = dense_matrix_model(strategy, variance, known_total)
    estimate.range_variance = dense.range_variance
    estimate.to_dict = dense.to_dict
    return estimate


def matrix_estimate_model(strategy: MatrixStrategy, variance: float, known_total: bool):
    """The error model a matrix release carries, without data (an all-zero estimate)."""
    rows = strategy.rows
    estimate = OperatorEstimate(strategy.operator(), np.full(rows, variance), np.zeros(strategy.n), known_total)
    return with_dense_errors(estimate, strategy, variance, known_total)


class MatrixStrategy:
    """An explicit strategy matrix (dense or sparse), quantised to integers (module doc).

    ``matrix`` is the strategy as given; ``factor`` is K; :attr:`matrix` is the integer
    A_q = round(A K) that is measured.  An implicit LinearOperator over at most
    :data:`DENSE_COVARIANCE_LIMIT` bins is made explicit first.
    """

    def __init__(self, matrix):
        if isinstance(matrix, LinearOperator):
            if matrix.shape[1] > DENSE_COVARIANCE_LIMIT:
                raise ParameterError(
                    f"an implicit strategy over more than {DENSE_COVARIANCE_LIMIT} bins cannot be "
                    "checked and quantised; pass an explicit (sparse) matrix"
                )
            matrix = matrix.matmat(np.eye(matrix.shape[1]))
        if sp.issparse(matrix):
            given = sp.csc_matrix(matrix, dtype=float)
            data = given.data
        else:
            given = np.atleast_2d(np.asarray(matrix, dtype=float))
            data = given
        if given.ndim != 2 or 0 in given.shape:
            raise ParameterError("the strategy must be a non-empty 2-D matrix")
        self.factor = quantisation_factor(np.asarray(data))
        if sp.issparse(given):
            quantised = given.copy()
            quantised.data = np.round(quantised.data * self.factor)
            quantised.eliminate_zeros()
            self.matrix = quantised
        else:
            self.matrix = np.round(given * self.factor)
        self._operator = aslinearoperator(self.matrix)
        self.rows, self.n = self._operator.shape
        self.measured_depths = (0,)
        self.level_sizes = (self.rows,)
        self.height = 0
        self._sensitivity_cache: dict = {}

    def operator(self) -> LinearOperator:
        return self._operator

    def explicit(self) -> np.ndarray:
        """The measured integer matrix A_q, dense (small n only)."""
        if sp.issparse(self.matrix):
            if self.n > DENSE_COVARIANCE_LIMIT:
                raise ParameterError(
                    f"a dense form of a strategy over more than {DENSE_COVARIANCE_LIMIT} bins is too large"
                )
            return self.matrix.toarray()
        return self.matrix

    def check_rank(self, known_total: bool) -> None:
        """Refuse a strategy that does not determine x (with the public total when known)."""
        if self.n > DENSE_COVARIANCE_LIMIT:
            raise ParameterError(
                f"matrix strategies over more than {DENSE_COVARIANCE_LIMIT} bins are not supported "
                "(their rank cannot be checked); use Hierarchical or Wavelet"
            )
        A = self.explicit()
        if known_total:
            A = np.vstack([A, np.ones(self.n)])
        rank = np.linalg.matrix_rank(A)
        if rank < self.n:
            extra = " together with the public total" if known_total else ""
            raise ParameterError(
                f"the strategy matrix has rank {rank}{extra} but there are {self.n} bins: it does not measure "
                "every bin, so least squares would be biased; add rows that cover the missing directions"
            )

    def sensitivity_power(self, neighbours: str, p: int, weights=None):
        """sum |.|^p of the worst change of the measured rows (module doc); ``weights`` (one
        level) multiplies it by w^p."""
        key = (neighbours, p)
        if key not in self._sensitivity_cache:
            self._sensitivity_cache[key] = self._unweighted_sensitivity_power(neighbours, p)
        value = self._sensitivity_cache[key]
        if weights is None:
            return value
        (w,) = list(weights)
        return Fraction(value) * abs(w) ** p if isinstance(w, Fraction) else value * abs(w) ** p

    def _unweighted_sensitivity_power(self, neighbours: str, p: int) -> float:
        A = self.explicit()
        if neighbours == "add_remove":
            value = float((np.abs(A) ** p).sum(axis=0).max())
        elif self.n < 2:
            value = 0.0
        elif p == 2:
            gram = A.T @ A
            diag = np.diag(gram)
            dist = diag[:, None] + diag[None, :] - 2.0 * gram
            np.fill_diagonal(dist, 0.0)
            value = float(dist.max())
        elif self.n * self.n * self.rows <= EXACT_PAIRS_LIMIT:
            value = dense_sensitivity_power(A, neighbours, 1)
        else:
            value = 2.0 * float(np.abs(A).sum(axis=0).max())
        return value

    def sensitivity(self, neighbours: str, p: int, weights=None) -> float:
        return float(self.sensitivity_power(neighbours, p, weights)) ** (1.0 / p)

    def level_sums(self, x):
        return [self._operator.matvec(np.asarray(x, dtype=float))]

    def describe(self) -> dict:
        return {"bins": self.n, "rows": self.rows, "quantisation_factor": self.factor}


def _measured_strategy(value, name: str) -> MatrixStrategy:
    """The strategy parameter as the integer strategy that is measured (a zero one measures nothing)."""
    strategy = value if isinstance(value, MatrixStrategy) else MatrixStrategy(value)
    if not np.any(strategy.explicit()):
        raise ParameterError(f"the {name} matrix is zero; it measures nothing")
    return strategy


class Matrix(Mechanism):
    """Matrix mechanism with strategy A and least-squares inference (see module doc).

    ``noise="auto"`` is discrete Laplace when delta = 0 and Gaussian when delta > 0, on the
    integer (quantised) strategy.
    """

    name = "matrix"

    PARAMS = (
        Param(
            "strategy",
            Custom(_measured_strategy, "matrix (dense, scipy sparse, or a LinearOperator over <= 4096 bins)"),
            "the strategy A (p x n) whose rows are measured; a real one is quantised to integers",
            positional=True,
            attribute="_strategy",
        ),
        find(Mechanism.PARAMS, "neighbours"),
        find(Mechanism.PARAMS, "noise"),
    )
    _strategy: MatrixStrategy

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Depends on two parameters: with the public total (replace) one direction less is needed.
        self._strategy.check_rank(known_total=self.neighbours == "replace")

    def sensitivity(self, n: int | None = None) -> tuple[float, float]:
        """(L1, L2) sensitivity of the measured (quantised) strategy under the relation."""
        if n is not None:
            self.strategy(n)  # checks n
        return (self._strategy.sensitivity(self.neighbours, 1), self._strategy.sensitivity(self.neighbours, 2))

    def parameters(self) -> dict:
        return {
            "strategy_shape": [self._strategy.rows, self._strategy.n],
            "quantisation_factor": self._strategy.factor,
            **super().parameters(),
        }

    def strategy(self, n: int) -> MatrixStrategy:
        if n != self._strategy.n:
            raise ParameterError(f"the strategy has {self._strategy.n} columns but the data have {n} bins")
        return self._strategy

    def noise_specs(self, strategy, epsilon, delta) -> list[NoiseSpec]:
        epsilon = check_epsilon(epsilon)
        kind = resolve_noise(self.noise, delta)
        return calibrate(strategy, self.neighbours, kind, [epsilon], epsilon, delta)

    def level_variances(self, strategy, epsilon, delta) -> list:
        return [self.noise_specs(strategy, epsilon, delta)[0].variance]

    def infer(self, measurements):
        y, v = measurements.stacked()
        estimate = gls(self._strategy.operator(), y, v, total=measurements.total)
        if self._strategy.n <= DENSE_COVARIANCE_LIMIT:
            with_dense_errors(estimate, self._strategy, v[0], measurements.total is not None)
        return estimate

    def _dense_model(self, variance: float, known_total: bool) -> DenseErrorModel:
        return dense_matrix_model(self._strategy, variance, known_total)

    def error_model(self, n: int, epsilon, *, delta=0.0):
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        strategy = self.strategy(check_positive_int(n, "n"))
        variance = self.level_variances(strategy, epsilon, delta)[0]
        if n > DENSE_COVARIANCE_LIMIT:
            raise ParameterError(f"exact error of a matrix strategy is computed for n <= {DENSE_COVARIANCE_LIMIT}")
        return self._dense_model(variance, self.neighbours == "replace")


MECHANISMS.add(
    Matrix,
    summary="the matrix mechanism: any full-rank strategy matrix, quantised to integers, with least squares",
    citation=Citation(
        "Li, Hay, Rastogi, Miklau and McGregor",
        "Optimizing Linear Counting Queries Under Differential Privacy",
        "PODS 2010",
    ),
)

"""The matrix mechanism (Li, Hay, Rastogi, Miklau and McGregor, "Optimizing Linear Counting
Queries Under Differential Privacy", PODS 2010).

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

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from ._params import Custom, Param
from ._validation import check_positive_int
from .cholesky import well_conditioned_cholesky
from .errors import ParameterError
from .inference.dispatch import design_error_model
from .inference.least_squares import DENSE_COVARIANCE_LIMIT, unpack_integers
from .measurements import LinearMeasurement, Measurements
from .mechanisms import Mechanism
from .operators import Explicit, Operator, Weighted
from .registry import MECHANISMS, Citation

__all__ = ["DENSE_COVARIANCE_LIMIT", "DenseErrorModel", "Matrix", "MatrixStrategy"]

#: Quantisation of a real strategy: rounding moves no entry by more than this fraction of the
#: largest entry.
QUANTISATION_TOLERANCE = 2.0**-16

#: Above this many (pairs x rows), the replace-model L1 sensitivity uses the triangle bound.
EXACT_PAIRS_LIMIT = 2 * 10**7

#: :func:`quantisation_factor` tries each K on this many leading entries before all of them.
QUANTISATION_PROBE = 4096


def quantisation_factor(
    values: np.ndarray, tolerance: float = QUANTISATION_TOLERANCE, *, largest: float | None = None
) -> float:
    """K = 2^k: the smallest making ``values`` * K integer, else the one for which rounding
    moves no entry by more than ``tolerance`` times the largest entry (``largest``: max |values|
    where the caller has it)."""
    if largest is None:
        largest = float(np.max(np.abs(values))) if values.size else 0.0  # NaN or inf where any entry is
    if not math.isfinite(largest):
        raise ParameterError("the strategy matrix has non-finite entries")
    if largest == 0.0:
        return 1.0
    limit = max(0, math.ceil(math.log2(0.5 / (tolerance * largest))))
    flat = values.ravel(order="K")  # no copy of a C- or Fortran-ordered matrix
    head = flat[:QUANTISATION_PROBE]
    for k in range(limit):
        # the leading entries first: a real strategy fails there at every k (three passes over
        # n^2 entries at 4096 bins each, when all were tried), and K = 2^limit needs no check
        if _integer_at(head, 2.0**k) and (head.size == flat.size or _integer_at(values, 2.0**k)):
            return 2.0**k
    return 2.0**limit


def _integer_at(values: np.ndarray, factor: float) -> bool:
    scaled = values * factor
    return bool(np.all(scaled == np.round(scaled)))


class DenseErrorModel:
    """The saved form of a matrix release's error model (kind "dense_matrix"): the measured
    integer strategy, its one noise variance and whether the total is public.  :meth:`from_dict`
    rebuilds the estimate's error model (a
    :class:`~dprange.inference.least_squares.DenseGLSEstimate`) exactly."""

    @classmethod
    def from_dict(cls, data: dict, *, adopt_inverse=None):
        """The error model described by ``to_dict`` (least-squares query variances through the
        strategy operator, range variances from the dense covariance).  ``adopt_inverse``, a
        function of the strategy's block, may first give it the (A^T A)^-1 kept elsewhere
        (the strategy cache: :func:`dprange.optimized.adopt_cached_inverse`)."""
        rows, n = (int(v) for v in data["shape"])
        if not 0 < n <= DENSE_COVARIANCE_LIMIT:
            raise ParameterError(f"a saved matrix strategy must have 1 to {DENSE_COVARIANCE_LIMIT} columns, not {n}")
        if "packed" in data:  # a large dense strategy (DenseGLSEstimate.to_dict)
            if not 0 < rows <= 4 * n:
                raise ParameterError(f"a saved dense strategy over {n} bins cannot have {rows} rows")
            strategy = MatrixStrategy(unpack_integers(data["packed"], (rows, n)))
        else:
            strategy = cls._from_triplets(data, rows, n)
        if adopt_inverse is not None:
            adopt_inverse(strategy.block)
        return matrix_estimate_model(strategy, _saved_variance(data), bool(data["known_total"]))

    @staticmethod
    def _from_triplets(data: dict, rows: int, n: int) -> MatrixStrategy:
        """The strategy saved as row, column, value triplets (small or sparse ones)."""
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
        return MatrixStrategy(matrix if data["sparse"] else np.ascontiguousarray(matrix.toarray()))


def _saved_variance(data: dict) -> float:
    variance = float(data["variance"])
    if not (variance > 0 and math.isfinite(variance)):
        raise ParameterError("the saved noise variance must be positive and finite")
    return variance


def matrix_estimate_model(strategy: MatrixStrategy, variance: float, known_total: bool):
    """The error model a matrix release carries, without data (GLS on the zero design)."""
    zeros = np.zeros(strategy.rows)
    design = Measurements(
        [LinearMeasurement(strategy.block, zeros, variance)],
        strategy.n,
        math.nan,
        total=0.0 if known_total else None,
    )
    return design_error_model(design)


class OneBlockStrategy:
    """A strategy measured as one integer block ``self.block`` (set by the subclass): its
    operator, its block list and its sensitivity (computed by the block itself)."""

    block: Operator

    def operator(self) -> LinearOperator:
        return self.block

    def blocks(self) -> list[Operator]:
        """The one measured block."""
        return [self.block]

    def sensitivity_power(self, neighbours: str, p: int, weights=None):
        """sum |.|^p of the worst change of the measured rows (module doc); ``weights`` (one
        block) multiplies it by w^p.  Computed by the block (:class:`~dprange.operators.Explicit`
        for a matrix)."""
        if weights is None:
            return self.block.sensitivity_power(p, neighbours)
        (w,) = list(weights)
        return Weighted(self.block, w).sensitivity_power(p, neighbours)

    def sensitivity(self, neighbours: str, p: int, weights=None) -> float:
        return float(self.sensitivity_power(neighbours, p, weights)) ** (1.0 / p)


class MatrixStrategy(OneBlockStrategy):
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
        largest = float(np.max(np.abs(data))) if data.size else 0.0
        self.factor = quantisation_factor(np.asarray(data), largest=largest)
        if sp.issparse(given):
            quantised = given.copy()
            quantised.data = np.round(quantised.data * self.factor)
            quantised.eliminate_zeros()
            self.matrix = quantised
        else:
            self.matrix = given * self.factor
            np.round(self.matrix, out=self.matrix)
        # every entry an integer, the largest round(K max |entry|) (rounding is monotone)
        entries = (True, int(np.round(self.factor * largest)))
        #: The measured integer matrix as an operator (sensitivities cached on it).
        self.block = Explicit(self.matrix, pairs_limit=EXACT_PAIRS_LIMIT, entries=entries)
        self.rows, self.n = self.block.shape

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
                "(their rank cannot be checked); use the hierarchical or wavelet mechanism"
            )
        if self.block.gram_inverse() is not None:  # O(n^3) once, kept for the release
            return  # full rank, certified (with the total too: [A; 1^T] has Gram A^T A + 1 1^T)
        product = self.block.dense_gram()  # A^T A, O(m n^2) once
        if known_total and well_conditioned_cholesky(product + 1.0) is not None:  # O(n^3)
            return
        A = self.explicit()
        if known_total:
            A = np.vstack([A, np.ones(self.n)])
        rank = np.linalg.matrix_rank(A)  # an SVD: 15 s at 4096 bins
        if rank < self.n:
            extra = " together with the public total" if known_total else ""
            raise ParameterError(
                f"the strategy matrix has rank {rank}{extra} but there are {self.n} bins: it does not measure "
                "every bin, so least squares would be biased; add rows that cover the missing directions"
            )

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
        *Mechanism.PARAMS,
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
        # An override (not the base's PARAMS-derived one): the declared strategy is a matrix,
        # not JSON; provenance records its shape and quantisation factor instead.
        return {
            "strategy_shape": [self._strategy.rows, self._strategy.n],
            "quantisation_factor": self._strategy.factor,
            **super().parameters(),
        }

    def strategy(self, n: int) -> MatrixStrategy:
        if n != self._strategy.n:
            raise ParameterError(f"the strategy has {self._strategy.n} columns but the data have {n} bins")
        return self._strategy

    def budget_fractions(self, strategy, epsilon) -> np.ndarray:
        return np.ones(1)

    def error_model(self, n: int, epsilon, *, delta=0.0):
        if check_positive_int(n, "n") > DENSE_COVARIANCE_LIMIT:
            raise ParameterError(f"exact error of a matrix strategy is computed for n <= {DENSE_COVARIANCE_LIMIT}")
        return super().error_model(n, epsilon, delta=delta)


MECHANISMS.add(
    Matrix,
    summary="the matrix mechanism: any full-rank strategy matrix, quantised to integers, with least squares",
    citation=Citation(
        "Li, Hay, Rastogi, Miklau and McGregor",
        "Optimizing Linear Counting Queries Under Differential Privacy",
        "PODS 2010",
    ),
)

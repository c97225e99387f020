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

from ..cholesky import well_conditioned_cholesky
from ..errors import ParameterError
from ..operators.base import Operator
from ..operators.dense import Explicit
from ..operators.structured import Weighted

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
        # the leading entries first: a real strategy fails there at every k (trying all n^2
        # entries would take a pass over them per k), and K = 2^limit needs no check
        if _integer_at(head, 2.0**k) and (head.size == flat.size or _integer_at(values, 2.0**k)):
            return 2.0**k
    return 2.0**limit


def _integer_at(values: np.ndarray, factor: float) -> bool:
    scaled = values * factor
    return bool(np.all(scaled == np.round(scaled)))


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


#: Estimates over at most this many bins carry a dense covariance (exact, O(1) per range).
DENSE_COVARIANCE_LIMIT = 4096

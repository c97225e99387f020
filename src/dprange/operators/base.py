"""Implicit linear operators: the measured queries of every strategy, and their sensitivity.

Every strategy of dprange is a stack of blocks of linear queries of the histogram x (n bins):
the node counts of one depth of a tree (:class:`TreeLevel`), one level of Haar differences
(:class:`HaarLevel`), the identity, prefix sums, the total, an explicit (integer) matrix, and
their compositions (:class:`VStack`, :class:`Kron`, :class:`Weighted`).  Each is a
``scipy.sparse.linalg.LinearOperator`` (float64) with O(n) (or O(nnz)) products, a Gram
operator A^T A (implicit where possible), ``dense()`` for tests and small sizes, and its exact
sensitivity.

Sensitivity from the record-level relation (the matrix mechanism's definition, Li, Hay,
Rastogi, Miklau and McGregor, "Optimizing linear counting queries under differential
privacy", PODS 2010).  With a_i the column of bin i (the change of every query when one record
with value i is added):

* add/remove neighbours change the answers by +-a_i: Delta_p = max_i ||a_i||_p;
* replace neighbours move one record from bin i to bin j: Delta_p = max_{i != j} ||a_i - a_j||_p.

``sensitivity_power(norm, neighbours)`` returns Delta_p^p (a sum of |.|^p), exact (``int`` or
``fractions.Fraction``) for integer operators with exact weights: the mechanisms check their
noise calibration in rational arithmetic.  The definition on an explicit matrix is
:func:`definition_sensitivity_power`, the one place where the replace rule a_i - a_j is
evaluated; closed forms (trees, Haar, identity, prefix, total, Kronecker products under
add/remove, scalar weights) are derived from it in each class and checked against it by the
tests.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from ..errors import ParameterError

SENSITIVITY_NORMS = (1, 2)


NEIGHBOURS = ("add_remove", "replace")


#: Most pairs of columns of a Kronecker product evaluated again in integers for its exact replace
#: L2 sensitivity (:meth:`Kron._exact_replace_l2_power`); beyond, an integer upper bound.
EXACT_CANDIDATES_LIMIT = 100_000


#: Largest number of columns for which a sensitivity falls back to the definition on the
#: dense matrix (O(n^2 rows) for replace).
DEFINITION_LIMIT = 4096


def check_norm(norm) -> int:
    """1 or 2, else a ParameterError."""
    if isinstance(norm, bool) or norm not in SENSITIVITY_NORMS:
        raise ParameterError(f"sensitivity norm must be 1 or 2, got {norm!r}")
    return int(norm)


def check_relation(neighbours) -> str:
    if neighbours not in NEIGHBOURS:
        raise ParameterError(f"neighbours must be 'add_remove' or 'replace', got {neighbours!r}")
    return str(neighbours)


def _exact_number(value: float):
    """An integer-valued float as an int (exact), else the float."""
    return int(value) if float(value).is_integer() else float(value)


def definition_sensitivity_power(matrix, norm: int, neighbours: str, *, entries: tuple[bool, int] | None = None):
    """Delta_p^p by the definition on an explicit matrix (rows = queries, columns = bins).

    add/remove: max_i sum_r |A_ri|^p; replace: max_{i != j} sum_r |A_ri - A_rj|^p (0 for one
    bin).  Exact (an ``int``) for integer matrices (in Python integers where float sums could
    pass 2^53).  Cost O(n rows)
    for add/remove, O(n^2) from the Gram matrix for replace with p = 2, O(n^2 rows) for p = 1.
    ``entries``: (whether every entry is an integer, the largest |entry|) when the caller knows
    them (:meth:`Explicit._entries`), else found here.
    """
    p = check_norm(norm)
    check_relation(neighbours)
    A = matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix, dtype=float)
    A = A.reshape(A.shape[0], -1) if A.ndim == 2 else np.atleast_2d(A)
    if A.size == 0:
        return 0
    integer, largest = entries if entries is not None else (bool(np.all(A == np.round(A))), None)
    if integer and not _float_sums_exact(A, p, neighbours, largest):
        return _integer_definition_power(A, p, neighbours)
    if neighbours == "add_remove":
        sums = np.einsum("ij,ij->j", A, A) if p == 2 else np.abs(A).sum(axis=0)  # one pass, O(m n)
        value = float(sums.max())
    elif A.shape[1] < 2:
        return 0
    elif p == 2:
        gram = A.T @ A
        diag = np.diag(gram)
        dist = diag[:, None] + diag[None, :] - 2.0 * gram
        np.fill_diagonal(dist, 0.0)
        value = float(dist.max())
    else:
        value = 0.0
        for i in range(A.shape[1] - 1):
            diff = np.abs(A[:, i + 1 :] - A[:, [i]])
            value = max(value, float(diff.sum(axis=0).max()))
    return _exact_number(value) if integer else value


#: Integers up to this are exact in float64: sums and products of integers that stay below it
#: are exact, above it they are rounded (possibly down, understating a sensitivity).
FLOAT_EXACT_LIMIT = 2**53


def _float_sums_exact(A: np.ndarray, p: int, neighbours: str, largest: int | None = None) -> bool:
    """Whether every sum (and Gram entry) of the definition on the integer matrix ``A`` stays
    below 2^53, so that its float evaluation is exact: each is at most rows x (2 max |A|)^p
    (replace) or rows x max |A|^p (add/remove); ``largest``: max |A| where known."""
    largest = (int(np.abs(A).max()) if largest is None else largest) * (2 if neighbours == "replace" else 1)
    return A.shape[0] * largest**p < FLOAT_EXACT_LIMIT


def _integer_definition_power(A: np.ndarray, p: int, neighbours: str) -> int:
    """The definition on an integer matrix in Python integers (exact at any size): used where
    float sums could pass 2^53 (entries above about 2^26 under L2) and would be rounded."""
    exact = np.array([[int(v) for v in row] for row in A], dtype=object)
    if neighbours == "add_remove":
        return int((abs(exact) ** p).sum(axis=0).max())
    if A.shape[1] < 2:
        return 0
    return int(max((abs(exact[:, i + 1 :] - exact[:, [i]]) ** p).sum(axis=0).max() for i in range(A.shape[1] - 1)))


def _as_2d(x) -> tuple[np.ndarray, bool]:
    arr = np.asarray(x, dtype=float)
    return (arr.reshape(-1, 1), True) if arr.ndim == 1 else (arr, False)


class Operator(LinearOperator):
    """Base class: an m x n float64 LinearOperator with ``dense``, ``gram`` and sensitivity.

    Subclasses implement ``_apply(X)`` (A X for an n x k array) and ``_apply_adjoint(Y)``
    (A^T Y for an m x k array); vectors and matrices both go through them.
    """

    def __init__(self, shape: tuple[int, int]):
        # LinearOperator.__init__ only validates and sets these two; strategies build many
        # small operators per calibration, so they are set directly.
        self.dtype = np.dtype(np.float64)
        self.shape = (int(shape[0]), int(shape[1]))

    # -- products ---------------------------------------------------------------------
    def _apply(self, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _apply_adjoint(self, Y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _matvec(self, x):
        return self._apply(np.asarray(x, dtype=float).reshape(-1, 1)).ravel()

    def _rmatvec(self, y):
        return self._apply_adjoint(np.asarray(y, dtype=float).reshape(-1, 1)).ravel()

    def _matmat(self, X):
        return self._apply(np.asarray(X, dtype=float))

    def _rmatmat(self, Y):
        return self._apply_adjoint(np.asarray(Y, dtype=float))

    def _adjoint(self):
        return _Adjoint(self)

    # -- forms ------------------------------------------------------------------------
    def dense(self) -> np.ndarray:
        """The explicit matrix (m x n).  For tests and small sizes."""
        return self._apply(np.eye(self.shape[1]))

    def gram(self) -> Operator:
        """A^T A as an operator (implicit unless a subclass knows better)."""
        return Gram(self)

    def dense_gram(self) -> np.ndarray:
        """A^T A as a dense array, from :meth:`dense` (small sizes; :class:`Explicit` keeps its own)."""
        dense = np.asarray(self.dense(), dtype=float)
        return dense.T @ dense

    def answers(self, x) -> np.ndarray:
        """A x, keeping integer dtypes exact where the operator is integer (measurement)."""
        return self.matvec(x)

    def design_digest(self) -> str | None:
        """A hash of the entries of a block whose entries do not follow from its mechanism's
        parameters alone (an optimised strategy, read from a cache or optimised again), which a
        saved release records so that loading can refuse a different rebuilt design; None for
        the others."""
        return None

    # -- sensitivity ------------------------------------------------------------------
    def column_power(self, norm: int):
        """sum_r |A_ri|^p when it is the same for every column i (exact), else None."""
        return None

    def sensitivity_power(self, norm: int, neighbours: str):
        """Delta_p^p under the relation (module doc); by default the definition on the dense
        matrix (at most :data:`DEFINITION_LIMIT` columns)."""
        p = check_norm(norm)
        check_relation(neighbours)
        if neighbours == "add_remove":
            uniform = self.column_power(p)
            if uniform is not None:
                return uniform
        if self.shape[1] > DEFINITION_LIMIT:
            raise ParameterError(
                f"the sensitivity of this {type(self).__name__} operator over {self.shape[1]} bins has no closed "
                f"form and the definition is limited to {DEFINITION_LIMIT} bins"
            )
        return definition_sensitivity_power(self.dense(), p, neighbours)

    def sensitivity(self, norm: int, neighbours: str) -> float:
        """Delta_p (see :meth:`sensitivity_power`)."""
        p = check_norm(norm)
        return float(self.sensitivity_power(p, neighbours)) ** (1.0 / p)


class _Adjoint(LinearOperator):
    def __init__(self, op: Operator):
        super().__init__(np.dtype(np.float64), (op.shape[1], op.shape[0]))
        self.op = op

    def _matvec(self, x):
        return self.op._rmatvec(x)

    def _rmatvec(self, y):
        return self.op._matvec(y)

    def _matmat(self, X):
        return self.op._rmatmat(X)

    def _rmatmat(self, Y):
        return self.op._matmat(Y)


class Gram(Operator):
    """A^T A of any operator, implicitly (one product and one adjoint product)."""

    def __init__(self, op: Operator):
        super().__init__((op.shape[1], op.shape[1]))
        self.op = op

    def _apply(self, X):
        return self.op._apply_adjoint(self.op._apply(X))

    def _apply_adjoint(self, Y):
        return self._apply(Y)


class Sum(Operator):
    """The sum of operators of one shape (the Gram operator of a :class:`VStack`)."""

    def __init__(self, terms):
        self.terms = list(terms)
        if not self.terms:
            raise ParameterError("a sum needs at least one operator")
        super().__init__(self.terms[0].shape)

    def _apply(self, X):
        return sum(t._apply(X) for t in self.terms)

    def _apply_adjoint(self, Y):
        return sum(t._apply_adjoint(Y) for t in self.terms)


#: ... and adopts it where X A^T A r is within this fraction of max |r_i| of every probe r.
GRAM_INVERSE_TOLERANCE = 1e-8


#: An inverse is offered for caching (:meth:`Explicit.gram_inverse_checks_out`) only where it
#: maps its probes back this many times closer than the adoption asks, so that a later
#: check, on other probes, adopts it (and does not warn of a bad cache file).
GRAM_INVERSE_STORE_MARGIN = 10.0

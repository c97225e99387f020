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

import hashlib
import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from .cholesky import cholesky_inverse, well_conditioned_cholesky
from .errors import ParameterError
from .noise import SecureRandom

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


class Identity(Operator):
    """I_n: one query per bin."""

    def __init__(self, n: int):
        super().__init__((n, n))
        self.n = int(n)

    def _apply(self, X):
        return np.array(X, dtype=float, copy=True)

    def _apply_adjoint(self, Y):
        return np.array(Y, dtype=float, copy=True)

    def answers(self, x):
        return np.array(x, copy=True)

    def gram(self) -> Operator:
        return Identity(self.n)

    def column_power(self, norm):
        return 1

    def sensitivity_power(self, norm, neighbours):
        """add/remove 1; replace 2 (bins i and j change by -1 and +1) for n >= 2, else 0."""
        check_norm(norm)
        if check_relation(neighbours) == "add_remove":
            return 1
        return 2 if self.n >= 2 else 0


class Prefix(Operator):
    """Prefix sums: row r is x_0 + ... + x_r (n x n lower-triangular ones)."""

    def __init__(self, n: int):
        super().__init__((n, n))
        self.n = int(n)

    def _apply(self, X):
        return np.cumsum(X, axis=0)

    def _apply_adjoint(self, Y):
        return np.cumsum(Y[::-1], axis=0)[::-1]

    def sensitivity_power(self, norm, neighbours):
        """Bin i lies in rows i..n-1.  add/remove: column 0 has n ones -> n.  replace: a_i - a_j
        (i < j) is 1 on rows i..j-1 -> j - i, at most n - 1 (for both norms)."""
        check_norm(norm)
        return self.n if check_relation(neighbours) == "add_remove" else self.n - 1


class Total(Operator):
    """The total: one row of ones."""

    def __init__(self, n: int):
        super().__init__((1, n))
        self.n = int(n)

    def _apply(self, X):
        return X.sum(axis=0, keepdims=True)

    def _apply_adjoint(self, Y):
        return np.repeat(Y.reshape(1, -1), self.n, axis=0)

    def column_power(self, norm):
        return 1

    def sensitivity_power(self, norm, neighbours):
        """add/remove 1; replace 0 (moving a record keeps the total)."""
        check_norm(norm)
        return 1 if check_relation(neighbours) == "add_remove" else 0


#: Integer answers stay in int64 while every partial value is below this bound (2^63 less a
#: factor of 2 of margin); above, they are computed in Python integers.
INT64_EXACT_LIMIT = 2**62


def exact_integer_dtype(bound: int):
    """int64 where every partial value of an integer product is at most ``bound`` < 2^62, else
    object (Python integers, exact at any size)."""
    return np.int64 if bound < INT64_EXACT_LIMIT else object


#: :meth:`Explicit.adopt_gram_inverse` checks a cached inverse on this many random vectors,
#: drawn afresh from the secure source at each check (why a few suffice: :meth:`Explicit._maps_back`).
GRAM_INVERSE_PROBES = 4
#: ... and adopts it where X A^T A r is within this fraction of max |r_i| of every probe r.
GRAM_INVERSE_TOLERANCE = 1e-8
#: An inverse is offered for caching (:meth:`Explicit.gram_inverse_checks_out`) only where it
#: maps its probes back this many times closer than the adoption asks, so that a later
#: check, on other probes, adopts it (and does not warn of a bad cache file).
GRAM_INVERSE_STORE_MARGIN = 10.0


class Explicit(Operator):
    """An explicit matrix (dense or scipy sparse).  Sensitivity by the definition, cached;
    for replace with p = 1 above ``pairs_limit`` (pairs x rows) the upper bound
    2 max_i ||a_i||_1 (triangle inequality: never below the true value, so calibration stays
    private)."""

    def __init__(self, matrix, *, pairs_limit: int = 2 * 10**7, entries: tuple[bool, int] | None = None):
        if sp.issparse(matrix):
            self.matrix: Any = sp.csr_matrix(matrix, dtype=float)
        else:
            self.matrix = np.atleast_2d(np.asarray(matrix, dtype=float))
        if self.matrix.ndim != 2:
            raise ParameterError("an explicit operator needs a 2-D matrix")
        super().__init__(self.matrix.shape)
        self.pairs_limit = pairs_limit
        self._sensitivity_cache: dict = {}
        self._dense_gram: np.ndarray | None = None
        self._gram_inverse: np.ndarray | None = None
        self._gram_inverse_known = False
        #: (every entry an integer, the largest |entry|): given (a quantised strategy knows
        #: them) or found once (:meth:`_entries`).
        self._entry_facts: tuple[bool, int] | None = entries

    def _apply(self, X):
        return np.asarray(self.matrix @ X)

    def _apply_adjoint(self, Y):
        return np.asarray(self.matrix.T @ Y)

    def dense(self) -> np.ndarray:
        return self.matrix.toarray() if sp.issparse(self.matrix) else np.array(self.matrix)

    def dense_gram(self) -> np.ndarray:
        """A^T A as a dense array, computed once (O(m n^2); the rank check, the error as
        released and the dense covariance of one release all read it)."""
        if self._dense_gram is None:
            product = self.matrix.T @ self.matrix
            self._dense_gram = product.toarray() if sp.issparse(product) else np.asarray(product)
            self._dense_gram.setflags(write=False)
        return self._dense_gram

    def gram_inverse(self) -> np.ndarray | None:
        """(A^T A)^-1, read-only, where A^T A is certified well conditioned (every eigenvalue
        above 1e-10 of the trace: :func:`~dprange.cholesky.well_conditioned_cholesky`),
        else None; computed once (O(n^3): two Cholesky factorisations and LAPACK's potri, 5 CPU s
        at 4096 bins) or taken from a cache (:meth:`adopt_gram_inverse`).  The rank check, the
        error as released and least squares with its covariance then cost O(n^2) a release."""
        if not self._gram_inverse_known:
            factor = well_conditioned_cholesky(self.dense_gram())  # O(n^3)
            self._set_gram_inverse(None if factor is None else cholesky_inverse(factor))  # O(n^3)
        return self._gram_inverse

    def adopt_gram_inverse(self, inverse) -> bool:
        """Take ``inverse`` as (A^T A)^-1 (one computed before for this matrix, kept in a cache)
        when it is a finite n x n array that maps A^T A r back to r within GRAM_INVERSE_TOLERANCE
        of max |r_i| for GRAM_INVERSE_PROBES Gaussian vectors r drawn from the secure source
        (:meth:`_maps_back`: O(m n + n^2), a different matrix, one quantised otherwise or one
        built to pass known probes fails); whether it was taken."""
        inverse = np.asarray(inverse)
        if not self._maps_back(inverse):
            return False
        self._set_gram_inverse(inverse.astype(float, copy=False))
        return True

    def gram_inverse_checks_out(self) -> bool:
        """Whether :meth:`gram_inverse` (computed if need be) exists and maps its probes back
        GRAM_INVERSE_STORE_MARGIN times closer than :meth:`adopt_gram_inverse` asks, so that a
        cache of it is adopted when read back (an ill-conditioned A^T A, certified but with an
        inverse accurate to less than 1e-9, fails)."""
        inverse = self.gram_inverse()
        return inverse is not None and self._maps_back(
            inverse, tolerance=GRAM_INVERSE_TOLERANCE / GRAM_INVERSE_STORE_MARGIN
        )

    def _maps_back(self, inverse: np.ndarray, tolerance: float = GRAM_INVERSE_TOLERANCE) -> bool:
        """Whether ``inverse`` = X, a real n x n array, has max_i |(X A^T A r - r)_i| <=
        ``tolerance`` max_i |r_i| for each of GRAM_INVERSE_PROBES standard Gaussian probes r
        drawn from the secure source at this call.

        Why a few random probes suffice.  Write E = X A^T A - I: the least squares X A^T y
        is then (I + E) times the true one, so row e_i of E moves estimate i by e_i . x, at most
        ||e_i|| ||x||.  A probe passes when every |e_i . r| <= tolerance max |r|.  For Gaussian
        r, e_i . r is Gaussian with standard deviation ||e_i||: a wrong X (E nonzero) passes a
        probe with probability 0 at tolerance 0, and at tolerance t, where max |r| <= 8 (it is
        larger with probability below 1.3e-15 n), a row of norm s passes one probe with
        probability at most 8 t sqrt(2 / pi) / s < 6.4 t / s, and k independent probes with at
        most (6.4 t / s)^k: at t = 1e-8 and k = 4, an X that moves some estimate by 1e-4 of
        ||x|| is adopted with probability below 2e-13, and one adopted with a fair chance moves
        estimates by no more than the rounding the tolerance admits anyway.  The probes must
        be unknown to whoever wrote the file: fixed ones (seed 0, as before) let a planted
        X = (A^T A)^-1 + M (I - Q Q^+), Q = A^T A R for the known probes R, pass the check
        and move released estimates by thousands on counts below 10 (issue 30).  The check
        costs O(k (m n + n^2)) (products by A, A^T and X), not the O(n^3) of forming E."""
        n = self.shape[1]
        if inverse.shape != (n, n) or not np.issubdtype(inverse.dtype, np.floating):
            return False
        probes = SecureRandom().standard_normal((n, GRAM_INVERSE_PROBES))  # unpredictable, new each call
        back = inverse @ np.asarray(self.matrix.T @ (self.matrix @ probes))  # O(m n + n^2)
        if not np.all(np.isfinite(back)):
            return False
        return bool(np.all(np.abs(back - probes).max(axis=0) <= tolerance * np.abs(probes).max(axis=0)))

    def inverse_condition_bound(self) -> float:
        """trace(A^T A) trace((A^T A)^-1), at least the condition number of A^T A (each trace is
        at least the largest eigenvalue of its positive definite matrix); inf where no inverse
        is certified (:meth:`gram_inverse`).  O(m n), without a temporary the size of A."""
        inverse = self.gram_inverse()
        if inverse is None:
            return math.inf
        if sp.issparse(self.matrix):
            frobenius = float(self.matrix.multiply(self.matrix).sum())
        else:
            frobenius = float(np.einsum("ij,ij->", self.matrix, self.matrix))
        return frobenius * float(np.trace(inverse))

    def _set_gram_inverse(self, inverse: np.ndarray | None) -> None:
        if inverse is not None:
            inverse.setflags(write=False)
        self._gram_inverse, self._gram_inverse_known = inverse, True

    def _entries(self) -> tuple[bool, int]:
        """(whether every entry is an integer, the largest |entry| where they are), computed once."""
        if self._entry_facts is None:
            values = self.matrix.data if sp.issparse(self.matrix) else self.matrix
            integer = bool(np.all(values == np.round(values)))  # O(m n)
            self._entry_facts = (integer, int(np.abs(values).max()) if integer and values.size else 0)
        return self._entry_facts

    def answers(self, x) -> np.ndarray:
        """Exact integer answers of an integer matrix on integer counts.  Every partial sum of
        a row is at most the largest |entry| times sum |x|: below 2^53 the float product is
        exact (integers throughout; BLAS, O(m n)), below 2^62 int64, above in Python integers;
        a matrix or counts not integer: the float product."""
        x = np.asarray(x)
        integer, largest = self._entries()
        if not np.issubdtype(x.dtype, np.integer) or not integer:
            return self.matvec(x)
        bound = largest * int(np.abs(x).sum())
        if bound < FLOAT_EXACT_LIMIT:
            return np.rint(np.asarray(self.matrix @ x.astype(float))).astype(np.int64)
        dtype = exact_integer_dtype(bound)
        if not sp.issparse(self.matrix):
            return self.matrix.astype(np.int64).astype(dtype, copy=False) @ x.astype(dtype)
        if dtype is np.int64:
            return np.asarray(self.matrix.astype(np.int64) @ x.astype(np.int64))
        entries = self.matrix.tocoo()
        out = np.zeros(self.shape[0], dtype=object)
        np.add.at(out, entries.row, entries.data.astype(np.int64).astype(object) * x[entries.col].astype(object))
        return out

    def gram(self) -> Operator:
        return Explicit(self.matrix.T @ self.matrix)

    def sensitivity_power(self, norm, neighbours):
        p = check_norm(norm)
        key = (p, check_relation(neighbours))
        if key not in self._sensitivity_cache:
            m, n = self.shape
            if neighbours == "replace" and p == 1 and n * n * m > self.pairs_limit:
                bound = definition_sensitivity_power(self.matrix, 1, "add_remove")
                self._sensitivity_cache[key] = 2 * bound
            else:
                self._sensitivity_cache[key] = definition_sensitivity_power(
                    self.matrix, p, neighbours, entries=self._entries()
                )
        return self._sensitivity_cache[key]


class TreeLevel(Operator):
    """The node counts of one depth of a level-uniform tree (``tree``: a
    :class:`~dprange.strategies.TreeStrategy`): row j sums the bins of node j.  Hierarchical
    histograms (Hay, Rastogi, Miklau and Suciu, "Boosting the accuracy of differentially
    private histograms through consistency", PVLDB 2010) stack these levels."""

    def __init__(self, tree, depth: int):
        if not 0 <= depth <= tree.depth:
            raise ParameterError(f"depth must be 0..{tree.depth}, got {depth}")
        super().__init__((tree.level_sizes[depth], tree.n))
        self.tree = tree
        self.depth = int(depth)
        self.block = tree.block_sizes[depth]

    def _sum_blocks(self, X):
        rows = self.shape[0]
        pad = rows * self.block - X.shape[0]
        if pad:
            X = np.concatenate([X, np.zeros((pad,) + X.shape[1:], dtype=X.dtype)], axis=0)
        return X.reshape((rows, self.block) + X.shape[1:]).sum(axis=1)

    def _apply(self, X):
        return self._sum_blocks(X).astype(float)

    def _apply_adjoint(self, Y):
        return np.repeat(Y, self.block, axis=0)[: self.tree.n]

    def answers(self, x):
        return self._sum_blocks(np.asarray(x))

    def gram(self) -> Operator:
        return Gram(self)

    def column_power(self, norm):
        return 1

    def sensitivity_power(self, norm, neighbours):
        """One node per column: add/remove 1; replace 2 when the level has two real nodes."""
        check_norm(norm)
        if check_relation(neighbours) == "add_remove":
            return 1
        return 2 if self.shape[0] >= 2 else 0


class HaarLevel(Operator):
    """One level of Haar differences of a :class:`~dprange.strategies.HaarStrategy`
    (Privelet: Xiao, Wang and Gehrke, "Differential privacy via wavelet transforms", ICDE
    2010): level 0 is the total of the padded domain; level k >= 1 holds, for each of the
    2^(k-1) nodes at depth k - 1 of the binary tree over N = 2^h padded bins, the count of its
    left half minus that of its right half."""

    def __init__(self, haar, level: int):
        if not 0 <= level <= haar.height:
            raise ParameterError(f"level must be 0..{haar.height}, got {level}")
        rows = 1 if level == 0 else 2 ** (level - 1)
        super().__init__((rows, haar.n))
        self.haar = haar
        self.level = int(level)
        self.half = haar.size // (2 * rows)  # leaves in each half of a node (level >= 1)

    def _pad(self, X):
        pad = self.haar.size - X.shape[0]
        if pad:
            X = np.concatenate([X, np.zeros((pad,) + X.shape[1:], dtype=X.dtype)], axis=0)
        return X

    def _differences(self, X):
        if self.level == 0:
            return X.sum(axis=0, keepdims=True)
        halves = self._pad(X).reshape((self.shape[0], 2, self.half) + X.shape[1:]).sum(axis=2)
        return halves[:, 0] - halves[:, 1]

    def _apply(self, X):
        return self._differences(X).astype(float)

    def _apply_adjoint(self, Y):
        if self.level == 0:
            return np.repeat(Y.reshape(1, -1), self.haar.n, axis=0)
        signed = np.stack([Y, -Y], axis=1)  # rows x 2 x k
        return np.repeat(signed.reshape((-1,) + Y.shape[1:]), self.half, axis=0)[: self.haar.n]

    def answers(self, x):
        return self._differences(np.asarray(x))

    def column_power(self, norm):
        return 1

    def sensitivity_power(self, norm, neighbours):
        """add/remove: each bin lies in one node, with sign +-1: 1.  replace: the total does
        not change (0); at level k >= 1 a record moving between the halves of one node changes
        its difference by 2 (2^p), and such a pair exists among the real bins since the first
        node's right half starts at 2^(h-k) <= 2^(h-1) < n; pairs in different nodes give
        1 + 1 = 2 <= 2^p."""
        p = check_norm(norm)
        if check_relation(neighbours) == "add_remove":
            return 1
        return 0 if self.level == 0 else 2**p


class Weighted(Operator):
    """diag(row_weights) A: a scalar or one weight per row.  A scalar weight w scales the
    sensitivity power by |w|^p exactly (``Fraction`` weights stay exact)."""

    def __init__(self, op: Operator, row_weights):
        super().__init__(op.shape)
        self.op = op
        self._row_weights: Any = None
        self.weight: Any
        if isinstance(row_weights, (int, float, Fraction, np.number)):
            self.weight = row_weights
        elif np.ndim(row_weights) == 0:
            self.weight = float(row_weights)
        else:
            self.weight = None
            self._row_weights = np.asarray(row_weights, dtype=float)
            if self._row_weights.shape != (op.shape[0],):
                raise ParameterError(f"expected {op.shape[0]} row weights, got {self._row_weights.shape}")

    @property
    def row_weights(self):
        """The weights as floats: a scalar, or one per row."""
        return float(self.weight) if self.weight is not None else self._row_weights

    def _scale(self, Y):
        return Y * (self.row_weights if self.weight is not None else self._row_weights.reshape(-1, 1))

    def _apply(self, X):
        return self._scale(self.op._apply(X))

    def _apply_adjoint(self, Y):
        return self.op._apply_adjoint(self._scale(Y))

    def column_power(self, norm):
        inner = self.op.column_power(norm)
        if inner is None or self.weight is None:
            return None
        power = abs(self.weight) ** norm
        return power if inner == 1 else power * inner

    def sensitivity_power(self, norm, neighbours):
        p = check_norm(norm)
        if self.weight is not None:
            return abs(self.weight) ** p * self.op.sensitivity_power(p, neighbours)
        return super().sensitivity_power(p, neighbours)


def _unweighted(op: Operator) -> tuple[Operator, Any]:
    """(inner operator, scalar weight) of a scalar-weighted operator; (op, 1) otherwise."""
    if isinstance(op, Weighted) and op.weight is not None:
        inner, w = _unweighted(op.op)
        return inner, op.weight * w
    return op, 1


class VStack(Operator):
    """Blocks stacked vertically (same number of columns).  Products concatenate / add the
    blocks' products; the levels of one tree are evaluated in one O(n) pass."""

    def __init__(self, blocks):
        self.blocks = list(blocks)
        if not self.blocks:
            raise ParameterError("a stack needs at least one block")
        n = self.blocks[0].shape[1]
        if any(b.shape[1] != n for b in self.blocks):
            raise ParameterError("every block of a stack must have the same number of columns")
        self.splits = np.cumsum([b.shape[0] for b in self.blocks])[:-1]
        super().__init__((sum(b.shape[0] for b in self.blocks), n))

    def _apply(self, X):
        return np.concatenate([b._apply(X) for b in self.blocks], axis=0)

    def _apply_adjoint(self, Y):
        parts = np.split(Y, self.splits, axis=0)
        return sum(b._apply_adjoint(part) for b, part in zip(self.blocks, parts))

    def _matvec(self, x):
        return np.concatenate([np.asarray(a, dtype=float) for a in block_answers(self.blocks, np.asarray(x))])

    def gram(self) -> Operator:
        return Sum([b.gram() for b in self.blocks])

    def column_power(self, norm):
        powers = [b.column_power(norm) for b in self.blocks]
        return None if any(v is None for v in powers) else sum(powers)

    def sensitivity_power(self, norm, neighbours):
        """Closed forms for scalar-weighted levels of one tree or of one Haar transform, exact
        sums of uniform column powers under add/remove, else the definition.

        Tree levels (replace): bins 0 and n - 1 lie in different nodes at every level with
        two or more real nodes, so the pair attains every level's maximum at once and the
        result is the sum of the levels' values.  Haar levels (replace): a pair whose lowest
        common ancestor is at depth k leaves levels <= k unchanged, changes one difference of
        level k + 1 by 2 and two differences of every lower level by 1, so the result is
        max_k [2^p w_{k+1}^p + 2 sum_{l > k+1} w_l^p]; every k < h has such a pair among the
        real bins.
        """
        p = check_norm(norm)
        check_relation(neighbours)
        if neighbours == "add_remove":
            uniform = self.column_power(p)
            if uniform is not None:
                return uniform
        inner = [_unweighted(b) for b in self.blocks]
        ops = [op for op, _ in inner]
        if len(inner) == 1:  # one block: Delta(w A) = |w| Delta(A) under both relations (its own, cached)
            return abs(inner[0][1]) ** p * ops[0].sensitivity_power(p, neighbours)
        if all(isinstance(op, TreeLevel) for op in ops) and _one_shape(ops, "tree", "depth"):
            return sum(abs(w) ** p * op.sensitivity_power(p, neighbours) for op, w in inner)
        if all(isinstance(op, HaarLevel) for op in ops) and _one_shape(ops, "haar", "level"):
            weights = {op.level: abs(w) ** p for op, w in inner}
            height = ops[0].haar.height
            best: Any = 0
            for k in range(height):
                below = sum(2 * weights.get(level, 0) for level in range(k + 2, height + 1))
                best = max(best, 2**p * weights.get(k + 1, 0) + below)
            return best
        return super().sensitivity_power(p, neighbours)


def _one_shape(ops, owner: str, index: str) -> bool:
    """Whether the operators are distinct levels of one tree (or one Haar transform)."""
    first = getattr(ops[0], owner)
    levels = [getattr(op, index) for op in ops]
    return all(getattr(op, owner) is first for op in ops) and len(set(levels)) == len(levels)


class Kron(Operator):
    """A_1 (x) A_2 (x) ... (x) A_k on x reshaped to (n_1, ..., n_k) in C order: each factor
    is applied along its own axis, so the product is never formed (cost sum_j m_1..m_j
    n_j..n_k, about the size of the data times the factors' costs)."""

    def __init__(self, factors):
        self.factors = list(factors)
        if not self.factors:
            raise ParameterError("a Kronecker product needs at least one factor")
        super().__init__((math.prod(f.shape[0] for f in self.factors), math.prod(f.shape[1] for f in self.factors)))
        #: The replace L2 sensitivity power, computed once (:meth:`_replace_l2_power`, O(N^2)).
        self._replace_l2: Any = None

    def _along_axes(self, X, adjoint: bool):
        k = X.shape[1]
        dims_in = [f.shape[1] if not adjoint else f.shape[0] for f in self.factors]
        current = X.reshape(dims_in + [k])
        for axis, factor in enumerate(self.factors):
            moved = np.moveaxis(current, axis, 0)
            rest = moved.shape[1:]
            flat = moved.reshape(moved.shape[0], -1)
            out = factor._apply_adjoint(flat) if adjoint else factor._apply(flat)
            current = np.moveaxis(out.reshape((out.shape[0],) + rest), 0, axis)
        return current.reshape(-1, k)

    def _apply(self, X):
        return self._along_axes(X, adjoint=False)

    def _apply_adjoint(self, Y):
        return self._along_axes(Y, adjoint=True)

    def gram(self) -> Operator:
        return Kron([f.gram() for f in self.factors])

    def design_digest(self) -> str | None:
        """The factors' digests combined, where every factor has one."""
        parts = [f.design_digest() for f in self.factors]
        if any(part is None for part in parts):
            return None
        return hashlib.sha256(
            " ".join(f"{f.shape}:{part}" for f, part in zip(self.factors, parts)).encode()
        ).hexdigest()

    def column_power(self, norm):
        powers = [f.column_power(norm) for f in self.factors]
        return None if any(v is None for v in powers) else math.prod(powers)

    def sensitivity_power(self, norm, neighbours):
        """add/remove: ||a (x) b||_p^p = ||a||_p^p ||b||_p^p, so the product of the factors'
        max column powers.  replace, p = 2: from the factors' Gram matrices,
        ||a_i (x) b_k - a_j (x) b_l||^2 = |a_i|^2 |b_k|^2 + |a_j|^2 |b_l|^2 - 2 (a_i.a_j)(b_k.b_l),
        maximised over all pairs without forming the product's rows (O(N^2) for N columns;
        equal pairs give 0).  replace, p = 1: no closed form is derived; the definition on
        the dense product.  Both need at most :data:`DEFINITION_LIMIT` columns."""
        p = check_norm(norm)
        if check_relation(neighbours) == "add_remove":
            return math.prod(f.sensitivity_power(p, "add_remove") for f in self.factors)
        if p == 2 and self.shape[1] <= DEFINITION_LIMIT:
            if self._replace_l2 is None:  # a calibration asks for it more than once
                self._replace_l2 = self._replace_l2_power()
            return self._replace_l2
        return super().sensitivity_power(p, neighbours)

    def _replace_l2_power(self):
        grams = [np.asarray(f.gram().dense(), dtype=float) for f in self.factors]
        count, block = _pair_distance_blocks(grams)
        maxima = [float(block(i).max()) for i in range(count)]  # O(N^2) in all
        best = max([0.0, *maxima])
        if not all(np.all(g == np.round(g)) for g in grams):
            return best
        # Integer factors: every value above is at most 4 D (D the largest squared column norm
        # of the product; |a_i . a_j| <= |a_i| |a_j|), exact in floats below 2^53.  Above it
        # (L2 strategies quantised at 2^16 on two axes) the float maximum can be rounded down,
        # so the pairs within the rounding error of it are evaluated again in integers.
        largest = math.prod(int(np.diag(g).max()) for g in grams)
        if 4 * largest < FLOAT_EXACT_LIMIT:
            return _exact_number(best)
        return self._exact_replace_l2_power(grams, block, maxima, best, largest)

    def _exact_replace_l2_power(self, grams, block, maxima: list[float], best: float, largest: int) -> int:
        """The exact maximum of ||a_i (x) b_k - a_j (x) b_l||^2 (Python integers) over the pairs
        whose float value is within twice the rounding error of the float maximum ``best`` (one of them
        attains the exact maximum); an integer upper bound where there are too many such pairs
        to evaluate.  ``block(i)`` and ``maxima`` are the float pass's (:func:`_pair_distance_blocks`):
        only the blocks whose maximum reaches the threshold are computed again."""
        # Each value is a sum of three products of len(grams) integers: relative error at most
        # (len(grams) + 2) 2^-53 of each product, whose absolute values sum to at most 4 D.
        error = (len(grams) + 3) * 4.0 * largest * 2.0**-52
        candidates: list[tuple[int, int, int, int]] = []
        for i, block_max in enumerate(maxima):
            if block_max < best - 2.0 * error:
                continue
            j, k, m = np.nonzero(block(i) >= best - 2.0 * error)
            candidates.extend(zip(itertools.repeat(i), j.tolist(), k.tolist(), m.tolist()))
            if len(candidates) > EXACT_CANDIDATES_LIMIT:
                return math.ceil(Fraction(best) + Fraction(error))
        exact_grams = [[[int(v) for v in row] for row in g] for g in grams]
        shape = [g.shape[0] for g in grams[1:]]

        def entry(k: int, m: int) -> int:  # (G_2 (x) ... (x) G_d)_{km} in integers
            ks, ms = np.unravel_index(k, shape), np.unravel_index(m, shape)
            return math.prod(g[a][b] for g, a, b in zip(exact_grams[1:], ks, ms))

        g1 = exact_grams[0]
        return max(
            g1[i][i] * entry(k, k) + g1[j][j] * entry(m, m) - 2 * g1[i][j] * entry(k, m) for i, j, k, m in candidates
        )


def _pair_distance_blocks(grams):
    """(rows of the first factor, ``block(i)``): the squared distances between column (i, k)
    and every column (j, l) of the Kronecker product whose factors have Gram matrices
    ``grams``, as an array [j, k, l], from the factors' Gram matrices (O(N^2) over all i)."""
    first, rest = grams[0], grams[1:]
    other = np.ones((1, 1))
    for g in rest:
        other = np.kron(other, g)
    d_first, d_other = np.diag(first), np.diag(other)

    def block(i: int) -> np.ndarray:
        # rows j of the first factor, columns (k, l) of the other factors
        return (
            d_first[i] * d_other[None, :, None]
            + d_first[:, None, None] * d_other[None, None, :]
            - 2.0 * first[i][:, None, None] * other[None, :, :]
        )

    return first.shape[0], block


def block_answers(blocks, x) -> list[np.ndarray]:
    """Exact answers of every block to x, one array per block: the levels of one tree in one
    O(n) pass (:meth:`TreeStrategy.level_sums`), the levels of one Haar transform in one pass
    (:meth:`HaarStrategy.coefficients`), other blocks by their own products.  Integer x gives
    integer answers for integer blocks (measurement adds integer noise to them)."""
    x = np.asarray(x)
    trees = {id(b.tree): b.tree for b in blocks if isinstance(b, TreeLevel)}
    haars = {id(b.haar): b.haar for b in blocks if isinstance(b, HaarLevel)}
    tree_levels = {key: tree.level_sums(x) for key, tree in trees.items() if _count(blocks, TreeLevel, key) > 1}
    haar_levels = {key: haar.coefficients(x) for key, haar in haars.items() if _count(blocks, HaarLevel, key) > 1}
    out = []
    for b in blocks:
        if isinstance(b, TreeLevel) and id(b.tree) in tree_levels:
            out.append(tree_levels[id(b.tree)][b.depth])
        elif isinstance(b, HaarLevel) and id(b.haar) in haar_levels:
            out.append(haar_levels[id(b.haar)][b.level])
        else:
            out.append(b.answers(x))
    return out


def _count(blocks, kind, key) -> int:
    owner = "tree" if kind is TreeLevel else "haar"
    return sum(1 for b in blocks if isinstance(b, kind) and id(getattr(b, owner)) == key)


def exact_fraction(value) -> Fraction:
    """A sensitivity power as a Fraction (exact for int, Fraction and float)."""
    return value if isinstance(value, Fraction) else Fraction(value)

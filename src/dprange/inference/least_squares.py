"""Generalised least squares for any strategy, through implicit linear operators.

For measurements y = A x + noise with independent noise of variance v_i per row, the GLS
estimate minimises sum_i (A_i x - y_i)^2 / v_i; it is unbiased with covariance
(A^T V^-1 A)^-1 (the matrix mechanism's estimator: Li, Hay, Rastogi, Miklau and McGregor,
"Optimizing Linear Counting Queries Under Differential Privacy", PODS 2010).  With a public total
(``total``), x is restricted to {x : sum x = total}: x = total/n + P u with P the projection
onto sum-zero vectors, and the problem is solved in u.

The solve uses ``scipy.sparse.linalg.lsmr`` on the whitened operator V^-1/2 A (P), so A is
never formed; each iteration costs one matvec and one rmatvec.  For trees and wavelets the
exact O(n) algorithms in :mod:`.tree` and :mod:`.wavelet` are faster; this path serves any
strategy and cross-checks them.

Errors: :class:`OperatorEstimate` computes the variance q^T (A^T V^-1 A)^-1 q of a query q by
one conjugate-gradient solve per query: fine for hundreds of queries, not for millions.
"""

from __future__ import annotations

import base64
import zlib

import numpy as np
from scipy.sparse.linalg import LinearOperator, aslinearoperator, cg, lsmr

from ..cholesky import cholesky_inverse, well_conditioned_cholesky
from ..errors import ParameterError


def _whitened(operator, variances, n, total):
    A = aslinearoperator(operator)
    inv_sd = 1.0 / np.sqrt(np.asarray(variances, dtype=float))
    if total is None:
        project = lambda u: u  # noqa: E731
    else:
        project = lambda u: u - u.mean()  # noqa: E731

    def matvec(u):
        return inv_sd * A.matvec(project(np.ravel(u)))

    def rmatvec(r):
        return project(A.rmatvec(inv_sd * np.ravel(r)))

    return LinearOperator((A.shape[0], n), matvec=matvec, rmatvec=rmatvec, dtype=float), inv_sd, project


def gls(operator, values, variances, *, total=None, tol: float = 1e-12, maxiter: int | None = None) -> OperatorEstimate:
    """GLS estimate of x (length operator.shape[1]) from ``values`` with per-row ``variances``."""
    A = aslinearoperator(operator)
    m, n = A.shape
    y = np.asarray(values, dtype=float)
    v = np.broadcast_to(np.asarray(variances, dtype=float), (m,))
    if y.shape != (m,):
        raise ParameterError(f"expected {m} measured values, got {y.shape}")
    if np.any(v <= 0) or not np.all(np.isfinite(v)):
        raise ParameterError("variances must be positive and finite")
    W, inv_sd, project = _whitened(A, v, n, total)
    base = np.zeros(n) if total is None else np.full(n, float(total) / n)
    rhs = inv_sd * (y - A.matvec(base))
    result = lsmr(W, rhs, atol=tol, btol=tol, maxiter=maxiter or 10 * n + 100)
    x = base + project(result[0])
    return OperatorEstimate(A, v, x, total is not None, iterations=int(result[2]))


class OperatorEstimate:
    """A GLS estimate on an implicit operator, with exact query variances by CG solves."""

    def __init__(self, operator, variances, estimate, known_total: bool, iterations: int = 0):
        self.operator = operator
        self.variances = variances
        self.leaves = estimate
        self.known_total = known_total
        self.iterations = iterations

    def _gram(self) -> LinearOperator:
        A, inv_v = self.operator, 1.0 / self.variances
        n = A.shape[1]
        if self.known_total:
            proj = lambda u: u - u.mean()  # noqa: E731
        else:
            proj = lambda u: u  # noqa: E731
        return LinearOperator(
            (n, n), matvec=lambda u: proj(A.rmatvec(inv_v * A.matvec(proj(np.ravel(u))))), dtype=float
        )

    def query_variance(self, queries) -> np.ndarray:
        """Exact variance q^T G^+ q of each row q of ``queries`` (k x n array)."""
        Q = np.atleast_2d(np.asarray(queries, dtype=float))
        G = self._gram()
        out = np.empty(Q.shape[0])
        for i, q in enumerate(Q):
            if self.known_total:
                q = q - q.mean()
            u, info = cg(G, q, rtol=1e-12, atol=0.0, maxiter=20 * Q.shape[1] + 100)
            if info != 0:
                raise ParameterError("conjugate gradients did not converge for a query variance")
            out[i] = q @ u
        return out

    def range_variance(self, lo, hi) -> np.ndarray:
        lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64))
        n = self.leaves.size
        idx = np.arange(n)
        Q = ((idx[None, :] >= lo.ravel()[:, None]) & (idx[None, :] <= hi.ravel()[:, None])).astype(float)
        return self.query_variance(Q).reshape(lo.shape)


def dense_covariance(dense_operator: np.ndarray | None, variances, known_total: bool, *, gram=None) -> np.ndarray:
    """(A^T V^-1 A)^+, with a public total the pseudo-inverse on the sum-zero subspace: the
    covariance of the GLS estimate (the matrix mechanism's error formula, Li et al., PODS 2010).

    Where A^T V^-1 A = G is certified well conditioned (:func:`well_conditioned_cholesky`: every
    eigenvalue above 1e-10 of the trace, so the pseudo-inverse, which keeps eigenvalues above
    1e-10 of the largest, is the inverse) by a Cholesky factor: S = G^-1 and, with a public total,
    S - w w^T / 1^T w with w = S 1, the covariance of least squares constrained to the total
    (equal to (P G P)^+ for the projection P onto the sum-zero subspace).  O(n^3) in two
    triangular solves, against a symmetric eigendecomposition for the pseudo-inverse (timing:
    docs/inference.md), which remains the way for the others.  ``gram``: A^T V^-1 A when the
    caller has it (one block of one noise variance: its cached A^T A over the variance)."""
    if gram is None:
        A = np.asarray(dense_operator, dtype=float)
        inv_v = 1.0 / np.broadcast_to(np.asarray(variances, dtype=float), (A.shape[0],))
        gram = A.T @ (inv_v[:, None] * A)  # O(m n^2)
    n = gram.shape[0]
    factor = well_conditioned_cholesky(gram)
    if factor is not None:
        covariance = cholesky_inverse(factor)  # O(n^3)
        return constrained_to_total(covariance) if known_total else covariance
    if known_total:
        P = np.eye(n) - 1.0 / n
        gram = P @ gram @ P
    return np.linalg.pinv(gram, rtol=1e-10, hermitian=True)


def constrained_to_total(covariance: np.ndarray) -> np.ndarray:
    """C - w w^T / 1^T w with w = C 1, in place: from the covariance C of unconstrained least
    squares (an inverse Gram matrix, possibly scaled), that of least squares constrained to a
    public total.  O(n^2)."""
    w = covariance.sum(axis=1)
    covariance -= np.outer(w, w) / float(w.sum())
    return covariance


#: Least squares use a cached (A^T A)^-1 (:func:`inverse_gls`) where a bound on the condition
#: number of A^T A (:meth:`~dprange.operators.Explicit.inverse_condition_bound`) is below this:
#: the first product is then within about 1e-6 (relative) of the least-squares solution and one
#: step of refinement within rounding of it.
INVERSE_CONDITION_LIMIT = 1e10


def inverse_gls(matrix, inverse: np.ndarray, values, variance: float, *, total=None):
    """GLS of y = A x + noise of one ``variance`` (A = ``matrix``, dense or scipy sparse) by a
    known S = (A^T A)^-1 (``inverse``): x = S A^T y, one step of iterative refinement
    (x += S A^T (y - A x)), with a public total the correction x -= w (1^T x - total) / 1^T w,
    w = S 1 (least squares on {1^T x = total}); and a function giving the covariance v S
    (v (S - w w^T / 1^T w) with the total, as :func:`dense_covariance`), formed when an error
    is first asked for (an n x n array).  O(m n + n^2) where LSMR and the
    dense covariance cost O(m n x iterations + n^3).  For A^T A of condition number below
    INVERSE_CONDITION_LIMIT (the caller checks)."""
    m, n = matrix.shape
    y = np.asarray(values, dtype=float)
    v = float(variance)
    if y.shape != (m,) or np.shape(inverse) != (n, n):
        got = f"got {y.shape} and {np.shape(inverse)}"
        raise ParameterError(f"expected {m} measured values and an {n} x {n} inverse, {got}")
    if not (v > 0 and np.isfinite(v)):
        raise ParameterError(f"the noise variance must be positive and finite, not {variance!r}")
    x = inverse @ np.asarray(matrix.T @ y)  # O(m n + n^2)
    x = x + inverse @ np.asarray(matrix.T @ (y - np.asarray(matrix @ x)))
    if total is None:
        return x, ScaledInverse(inverse, v, known_total=False)
    w = inverse.sum(axis=1)
    x = x - w * ((float(x.sum()) - float(total)) / float(w.sum()))
    return x, ScaledInverse(inverse, v, known_total=True)


class ScaledInverse:
    """The covariance of least squares by a known S = (A^T A)^-1 (:func:`inverse_gls`): v S, or
    with a public total v (S - w w^T / 1^T w), w = S 1 (as :func:`constrained_to_total`).  Called,
    it forms it (an n x n array); :meth:`prefix_sums` gives the 2-D prefix sums that range
    variances read without forming it (one n x n array less; docs/inference.md)."""

    def __init__(self, inverse: np.ndarray, variance: float, *, known_total: bool):
        self.inverse = inverse
        self.variance = float(variance)
        self.known_total = known_total

    def __call__(self) -> np.ndarray:
        covariance = self.variance * self.inverse
        return constrained_to_total(covariance) if self.known_total else covariance

    def prefix_sums(self) -> np.ndarray:
        """(n + 1) x (n + 1): entry (i, j) the sum of the covariance over rows < i and columns
        < j (:func:`prefix_sums_2d`), the covariance written straight into them as
        :meth:`__call__` forms it (the public total's term a row at a time; O(n^2))."""
        S, v = self.inverse, self.variance
        n = S.shape[0]
        cum = np.zeros((n + 1, n + 1))
        inner = cum[1:, 1:]
        np.multiply(S, v, out=inner)
        if self.known_total:
            w = inner.sum(axis=1)
            scaled = w / float(w.sum())
            for i in range(n):  # no n x n outer product
                inner[i] -= scaled[i] * w
        return _accumulate(cum)


def prefix_sums_2d(matrix: np.ndarray) -> np.ndarray:
    """(n + 1) x (n + 1) 2-D prefix sums of an n x n ``matrix`` (entry (i, j): the sum over rows
    < i and columns < j, the first row and column zero)."""
    if np.ndim(matrix) != 2 or np.shape(matrix)[0] != np.shape(matrix)[1]:
        raise ParameterError(f"prefix sums of a square matrix, not of shape {np.shape(matrix)}")
    n = matrix.shape[0]
    cum = np.zeros((n + 1, n + 1))
    cum[1:, 1:] = matrix
    return _accumulate(cum)


def _accumulate(cum: np.ndarray) -> np.ndarray:
    """Turn ``cum`` (zero first row and column, the matrix below) into its 2-D prefix sums in
    place: rows accumulated one at a time (contiguous, faster than np.cumsum along axis 0 into the
    strided view: docs/inference.md), then along each row.  O(n^2)."""
    inner = cum[1:, 1:]
    for i in range(1, inner.shape[0]):
        inner[i] += inner[i - 1]
    np.cumsum(inner, axis=1, out=inner)
    return cum


class DenseGLSEstimate(OperatorEstimate):
    """A GLS estimate on a small operator with its dense covariance: range variances in O(1)
    per query from 2-D prefix sums of the covariance; query variances q^T C q in O(n^2).
    ``matrix`` (an integer strategy measured with one noise variance) makes it saveable
    (:meth:`to_dict`, kind "dense_matrix").  ``covariance``: the array, or a function giving it
    when first used (:func:`inverse_gls`'s :class:`ScaledInverse`, whose prefix sums the range
    variances take without forming it)."""

    def __init__(self, operator, variances, estimate, known_total: bool, covariance, *, matrix=None, iterations=0):
        super().__init__(operator, variances, estimate, known_total, iterations)
        self._covariance = covariance
        self.matrix = matrix
        self._cum: np.ndarray | None = None  # 2-D prefix sums of the covariance, at the first range

    @property
    def covariance(self) -> np.ndarray:
        """The covariance of the estimate (n x n)."""
        if callable(self._covariance):
            self._covariance = self._covariance()
        return self._covariance

    def range_variance(self, lo, hi) -> np.ndarray:
        lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64))
        if self._cum is None:  # O(n^2), no n x n temporaries
            source = self._covariance
            self._cum = source.prefix_sums() if isinstance(source, ScaledInverse) else prefix_sums_2d(self.covariance)
        c = self._cum
        out = c[hi + 1, hi + 1] - c[lo, hi + 1] - c[hi + 1, lo] + c[lo, lo]
        return np.maximum(out, 0.0)

    def query_variance(self, queries) -> np.ndarray:
        """Exact variance q^T C q of each row q of ``queries`` from the dense covariance C, in
        blocks of rows: O(k n^2) for k queries, where CG per query (the operator path) cost
        O(k n x iterations x rows of A).  With a public total C = (P G P)^+ has the ones vector
        in its null space, so q^T C q already equals (P q)^T C (P q)."""
        Q = np.atleast_2d(np.asarray(queries, dtype=float))
        out = np.empty(Q.shape[0])
        step = max(1, 4_000_000 // max(Q.shape[1], 1))  # ~32 MB of Q @ C at a time
        for start in range(0, Q.shape[0], step):
            block = Q[start : start + step]
            out[start : start + step] = np.einsum("ij,ij->i", block @ self.covariance, block)  # O(b n^2)
        return np.maximum(out, 0.0)

    def to_dict(self) -> dict:
        """The measured integer strategy, its one noise variance and whether the total is
        public: the covariance is recomputed from them, so the saved form is compact.  The
        strategy's nonzero entries as row, column, value triplets; a dense one with at least
        PACKED_MIN_ENTRIES entries packed instead (:func:`pack_integers`; triplets of a large
        dense strategy are slow and big: docs/optimized.md, "The dense release from the cache")."""
        import scipy.sparse as sp  # noqa: PLC0415 - scipy.sparse is loaded by scipy.sparse.linalg anyway

        variances = np.asarray(self.variances, dtype=float)
        if self.matrix is None or not np.all(variances == variances.ravel()[0]):
            raise ParameterError("only a single explicit strategy with one noise variance can be saved")
        shape = [int(self.matrix.shape[0]), int(self.matrix.shape[1])]
        common = {"variance": float(variances.ravel()[0]), "known_total": self.known_total}
        if not sp.issparse(self.matrix) and self.matrix.size >= PACKED_MIN_ENTRIES:
            packed = pack_integers(self.matrix)
            return {"kind": "dense_matrix", "shape": shape, "sparse": False, "packed": packed, **common}
        coo = sp.coo_matrix(self.matrix)
        return {
            "kind": "dense_matrix",
            "shape": shape,
            "sparse": bool(sp.issparse(self.matrix)),
            "row": coo.row.tolist(),
            "col": coo.col.tolist(),
            "value": coo.data.tolist(),
            **common,
        }


#: A saved dense strategy with at least this many entries is packed (:func:`pack_integers`).
PACKED_MIN_ENTRIES = 2**16


def pack_integers(matrix: np.ndarray) -> str:
    """An integer matrix (entries within int32) as text for JSON: its entries in row-major
    order as little-endian int32, zlib-compressed (level 1), base64-encoded."""
    values = np.asarray(matrix)
    if not np.all(values == np.round(values)) or np.abs(values).max(initial=0) >= 2**31:
        raise ParameterError("only integer matrices with entries below 2^31 in magnitude are packed")
    raw = np.ascontiguousarray(values, dtype="<i4").tobytes()
    return base64.b64encode(zlib.compress(raw, 1)).decode("ascii")


def unpack_integers(text, shape: tuple[int, int]) -> np.ndarray:
    """The float matrix of ``shape`` that :func:`pack_integers` wrote as ``text``, or
    ParameterError where it does not decode to exactly that many int32 entries (decompression
    stops past them, so a damaged or hostile text cannot expand without bound)."""
    rows, cols = shape
    expected = 4 * rows * cols
    try:
        packed = base64.b64decode(str(text).encode("ascii"), validate=True)
        inflater = zlib.decompressobj()
        raw = inflater.decompress(packed, expected + 1)
    except (ValueError, zlib.error) as error:
        raise ParameterError(f"the packed strategy does not decode: {error}") from None
    if len(raw) != expected or not inflater.eof or inflater.unconsumed_tail:
        raise ParameterError(f"the packed strategy does not hold exactly {rows} x {cols} int32 entries")
    return np.frombuffer(raw, dtype="<i4").reshape(rows, cols).astype(float)

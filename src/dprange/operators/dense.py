"""Explicit matrices as operators, with their exact sensitivity and the certified (A^T A)^-1 that
least squares reuses (computed once, or adopted from the cache after a check on secret probes).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..cholesky import cholesky_inverse, well_conditioned_cholesky
from ..errors import ParameterError
from ..privacy.samplers import SecureRandom
from .base import (
    FLOAT_EXACT_LIMIT,
    GRAM_INVERSE_STORE_MARGIN,
    GRAM_INVERSE_TOLERANCE,
    Operator,
    check_norm,
    check_relation,
    definition_sensitivity_power,
)

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
        else None; computed once (O(n^3): two Cholesky factorisations and LAPACK's potri) or
        taken from a cache (:meth:`adopt_gram_inverse`).  The rank check, the
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
        be unknown to whoever wrote the file: fixed ones would let a planted
        X = (A^T A)^-1 + M (I - Q Q^+), Q = A^T A R for the known probes R, pass the check
        (docs/privacy.md, "The strategy cache").  The check
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

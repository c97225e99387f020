"""Workloads: sets of linear counting queries on a histogram x of n bins.

A workload W (m x n) is what the analyst wants answered.  Range workloads are described by
their inclusive bin intervals (``lo``, ``hi``), which lets the analysis use the O(depth)
range variances of trees and wavelets; every workload is also a
``scipy.sparse.linalg.LinearOperator`` and has a Gram matrix W^T W (closed form for
``AllRange``, ``Prefix`` and ``Identity``), which the matrix-mechanism formulas use.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.sparse.linalg import LinearOperator

from .._params import Integer, Param
from .._validation import check_positive_int
from ..errors import ParameterError
from ..registry import WORKLOADS, Citation

#: Above this many queries a workload refuses to materialise dense matrices.
DENSE_LIMIT = 50_000_000


#: Above this many bins the singular values of a workload without a closed form (an
#: eigendecomposition of its n x n Gram, O(n^3)) are refused.
DENSE_SPECTRUM_LIMIT = 8192


def all_range_singular_values(n: int) -> np.ndarray:
    """Singular values of the all-ranges workload on n bins, in O(n):
    sqrt(n + 1) / (2 sin(k pi / (2 (n + 1)))), k = 1..n (descending).

    The Gram G_ij = (min(i, j) + 1)(n - max(i, j)) (0-indexed) is n + 1 times the inverse of
    L = tridiag(-1, 2, -1), the n x n second-difference matrix with zero (Dirichlet) ends: in
    column j, G is linear in i on each side of the diagonal, with slopes n - j and -(j + 1) and
    ghost entries G_{-1, j} = G_{n, j} = 0, so -G_{i-1, j} + 2 G_{ij} - G_{i+1, j} is 0 off the
    diagonal and (n - j) + (j + 1) = n + 1 on it: L G = (n + 1) I.  L's eigenvectors are
    sin((i + 1) theta) with theta = k pi / (n + 1) (the ghost entries vanish) and eigenvalues
    2 - 2 cos(theta) = 4 sin^2(theta / 2); G's eigenvalues are (n + 1) / (4 sin^2(k pi /
    (2 (n + 1)))), their square roots W's singular values.
    """
    n = check_positive_int(n, "n")
    k = np.arange(1, n + 1, dtype=float)
    return math.sqrt(n + 1) / (2.0 * np.sin(k * np.pi / (2.0 * (n + 1))))


def prefix_singular_values(n: int) -> np.ndarray:
    """Singular values of the n prefixes [0, j] (W the lower-triangular ones matrix), in O(n):
    1 / (2 sin((2k - 1) pi / (2 (2n + 1)))), k = 1..n (descending).

    W's inverse is the difference matrix D (1 on the diagonal, -1 below), so (W^T W)^-1 =
    D D^T: tridiag(-1, 2, -1) except a 1 in its first corner (row 0 of D is e_0).  Its
    eigenvectors are cos((i + 1/2) theta): the interior rows hold for any theta with eigenvalue
    2 - 2 cos(theta), the first row because cos(-theta / 2) = cos(theta / 2) (a mirrored ghost
    entry), the last row if the ghost entry i = n vanishes, cos((n + 1/2) theta) = 0, that is
    theta = (2k - 1) pi / (2n + 1), k = 1..n, all distinct in (0, pi).  So W^T W has
    eigenvalues 1 / (4 sin^2((2k - 1) pi / (2 (2n + 1)))), their square roots W's singular
    values.
    """
    n = check_positive_int(n, "n")
    k = np.arange(1, n + 1, dtype=float)
    return 1.0 / (2.0 * np.sin((2.0 * k - 1.0) * np.pi / (2.0 * (2 * n + 1))))


def singular_value_sum(values) -> float:
    """Sum of singular values, exactly rounded (math.fsum; O(n))."""
    return math.fsum(np.asarray(values, dtype=float))


class Workload:
    """Base class.  ``n`` bins, ``m`` queries."""

    name = "workload"

    def __init__(self, n: int):
        self.n = check_positive_int(n, "n")

    @property
    def m(self) -> int:
        raise NotImplementedError

    def ranges(self):
        """(lo, hi) arrays of inclusive bin intervals, or None if not a range workload."""
        return None

    def dense(self) -> np.ndarray:
        """The explicit m x n matrix (small workloads only)."""
        lohi = self.ranges()
        if lohi is None:
            raise NotImplementedError
        if self.m * self.n > DENSE_LIMIT:
            raise ParameterError(f"{self.name}: {self.m} x {self.n} is too large to materialise")
        lo, hi = lohi
        idx = np.arange(self.n)
        return ((idx >= lo[:, None]) & (idx <= hi[:, None])).astype(float)

    def gram(self) -> np.ndarray:
        """W^T W (n x n)."""
        W = self.dense()
        return W.T @ W

    #: Whether :meth:`singular_values` has a closed form, O(n) at any n (all ranges, prefixes,
    #: identity); otherwise it eigendecomposes the Gram, O(n^3) and n <= DENSE_SPECTRUM_LIMIT.
    closed_form_spectrum = False

    def singular_values(self) -> np.ndarray:
        """Singular values of W (n of them, zeros included): square roots of W^T W's eigenvalues."""
        if self.n > DENSE_SPECTRUM_LIMIT:
            raise ParameterError(
                f"the singular values of a {self.name} workload need an eigendecomposition of its "
                f"n x n Gram matrix; use n <= {DENSE_SPECTRUM_LIMIT} (got n = {self.n})"
            )
        return np.sqrt(np.clip(np.linalg.eigvalsh(self.gram()), 0.0, None))

    def operator(self) -> LinearOperator:
        """W as a LinearOperator; range workloads use prefix sums (O(n + m) per product)."""
        lohi = self.ranges()
        if lohi is None:
            W = self.dense()
            return LinearOperator(
                W.shape, matvec=lambda v: W @ np.ravel(v), rmatvec=lambda r: W.T @ np.ravel(r), dtype=float
            )
        lo, hi = lohi

        def matvec(v):
            sums = np.concatenate([[0.0], np.cumsum(np.ravel(v))])
            return sums[hi + 1] - sums[lo]

        def rmatvec(r):
            diff = np.zeros(self.n + 1)
            np.add.at(diff, lo, np.ravel(r))
            np.add.at(diff, hi + 1, -np.ravel(r))
            return np.cumsum(diff)[: self.n]

        return LinearOperator((self.m, self.n), matvec=matvec, rmatvec=rmatvec, dtype=float)

    def describe(self) -> dict:
        return {"workload": self.name, "n": self.n, "queries": self.m}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={self.n})"


class AllRange(Workload):
    """All n(n+1)/2 ranges [i, j], 0 <= i <= j < n.  Gram: (min(i,j)+1)(n - max(i,j))."""

    name = "all-range"

    @property
    def m(self) -> int:
        return self.n * (self.n + 1) // 2

    def ranges(self):
        if self.m > DENSE_LIMIT:
            raise ParameterError(f"all-range on {self.n} bins has {self.m} queries; too many to list")
        lo, hi = np.triu_indices(self.n)
        return lo.astype(np.int64), hi.astype(np.int64)

    def gram(self) -> np.ndarray:
        i = np.arange(self.n)
        return (np.minimum.outer(i, i) + 1.0) * (self.n - np.maximum.outer(i, i))

    closed_form_spectrum = True

    def singular_values(self) -> np.ndarray:
        return all_range_singular_values(self.n)


class Prefix(Workload):
    """The n prefixes [0, j] (the CDF workload).  Gram: n - max(i, j)."""

    name = "prefix"

    @property
    def m(self) -> int:
        return self.n

    def ranges(self):
        return np.zeros(self.n, dtype=np.int64), np.arange(self.n, dtype=np.int64)

    def gram(self) -> np.ndarray:
        i = np.arange(self.n)
        return (self.n - np.maximum.outer(i, i)).astype(float)

    closed_form_spectrum = True

    def singular_values(self) -> np.ndarray:
        return prefix_singular_values(self.n)


class Identity(Workload):
    """The n single bins.  Gram: I."""

    name = "identity"

    @property
    def m(self) -> int:
        return self.n

    def ranges(self):
        idx = np.arange(self.n, dtype=np.int64)
        return idx, idx

    def gram(self) -> np.ndarray:
        return np.eye(self.n)

    closed_form_spectrum = True

    def singular_values(self) -> np.ndarray:
        return np.ones(self.n)


def _ranges_gram(lo: np.ndarray, hi: np.ndarray, weights, n: int) -> np.ndarray:
    """sum_k w_k r_k r_k^T for the inclusive ranges r_k = [lo_k, hi_k] on n bins: for i <= j,
    the weight of the ranges with lo <= i and hi >= j, a 2-D cumulative sum of the weights
    tabled by (lo, hi).  O(m + n^2), no m x n matrix."""
    table = np.zeros((n, n))
    np.add.at(table, (lo, hi), weights)  # table[lo, hi]
    np.cumsum(table, axis=0, out=table)  # lo <= i
    covering = np.flip(np.cumsum(np.flip(table, axis=1), axis=1), axis=1)  # hi >= j
    return np.triu(covering) + np.triu(covering, 1).T


class Ranges(Workload):
    """Given inclusive ranges lo[k]..hi[k] on n bins (n defaults to max(hi) + 1)."""

    name = "ranges"

    def __init__(self, lo, hi, n: int | None = None):
        lo = np.atleast_1d(np.asarray(lo))
        hi = np.atleast_1d(np.asarray(hi))
        if lo.shape != hi.shape or lo.ndim != 1 or lo.size == 0:
            raise ParameterError("lo and hi must be 1-D arrays of the same, non-zero length")
        if lo.dtype.kind not in "iu" or hi.dtype.kind not in "iu":
            raise ParameterError("range bounds must be integer bin indices")
        if lo.min() < 0 or np.any(lo > hi):
            raise ParameterError("ranges need 0 <= lo <= hi")
        super().__init__(int(hi.max()) + 1 if n is None else n)
        if hi.max() >= self.n:
            raise ParameterError(f"ranges reach bin {int(hi.max())} but n = {self.n}")
        self.lo = lo.astype(np.int64)
        self.hi = hi.astype(np.int64)

    @property
    def m(self) -> int:
        return int(self.lo.size)

    def ranges(self):
        return self.lo, self.hi

    def gram(self) -> np.ndarray:
        """W^T W in O(m + n^2) (:func:`_ranges_gram`), at any number of ranges."""
        return _ranges_gram(self.lo, self.hi, 1.0, self.n)


class RandomRanges(Ranges):
    """k ranges with uniformly random endpoints (a reproducible sample: ``seed``)."""

    name = "random-ranges"

    #: The parameters a named random-ranges workload takes (besides n).
    PARAMS = (
        Param("k", Integer(1), "how many ranges", default=1000, option="--queries"),
        Param("seed", Integer(0), "seed of the sample (public: it only picks the queries)", default=0),
    )

    def __init__(self, n: int, k: int, seed: int = 0):
        n = check_positive_int(n, "n")
        k = check_positive_int(k, "k")
        rng = np.random.default_rng(seed)
        a = rng.integers(0, n, k)
        b = rng.integers(0, n, k)
        super().__init__(np.minimum(a, b), np.maximum(a, b), n)


class WeightedRanges(Workload):
    """Inclusive ranges lo[k]..hi[k] on n bins, range k weighted by w[k] > 0: the row of
    range k is scaled by sqrt(w[k]), so that the Gram matrix is sum_k w_k r_k r_k^T and the
    error it measures is sum_k w_k Var(r_k^T x).  The workload of one axis of a set of k-D
    rectangles, each weighted by its variance on the other axes
    (:class:`dprange.mechanisms.optimized_grid.OptimizedKronecker`).  It has no :meth:`ranges` (the
    weights would be lost): the analysis goes through its Gram matrix, built in O(m + n^2)."""

    name = "weighted-ranges"

    def __init__(self, lo, hi, weights, n: int):
        super().__init__(n)
        plain = Ranges(lo, hi, self.n)
        weights = np.asarray(weights, dtype=float)
        if weights.shape != plain.lo.shape or not np.all(np.isfinite(weights)) or not np.all(weights > 0):
            raise ParameterError("weighted ranges need one positive, finite weight per range")
        self._plain = plain
        self.lo, self.hi, self.weights = plain.lo, plain.hi, weights

    @property
    def m(self) -> int:
        return int(self.lo.size)

    def dense(self) -> np.ndarray:
        """The m x n matrix, row k the 0/1 indicator of range k times sqrt(w_k) (small ones only)."""
        return self._plain.dense() * np.sqrt(self.weights)[:, None]

    def gram(self) -> np.ndarray:
        """sum_k w_k r_k r_k^T (:func:`_ranges_gram`), O(m + n^2)."""
        return _ranges_gram(self.lo, self.hi, self.weights, self.n)


class Explicit(Workload):
    """Any explicit query matrix (m x n, dense or scipy sparse)."""

    name = "explicit"

    def __init__(self, matrix):
        import scipy.sparse as sp  # noqa: PLC0415

        self.matrix = matrix.tocsr() if sp.issparse(matrix) else np.atleast_2d(np.asarray(matrix, dtype=float))
        if self.matrix.ndim != 2 or 0 in self.matrix.shape:
            raise ParameterError("an explicit workload needs a non-empty 2-D matrix")
        if not np.all(np.isfinite(self.matrix.data if sp.issparse(self.matrix) else self.matrix)):
            raise ParameterError("the explicit workload's matrix has a non-finite entry (NaN or infinity)")
        super().__init__(self.matrix.shape[1])

    @property
    def m(self) -> int:
        return int(self.matrix.shape[0])

    def dense(self) -> np.ndarray:
        return self.matrix.toarray() if hasattr(self.matrix, "toarray") else self.matrix


def not_a_workload(value, name: str = "workload") -> ParameterError:
    """The error for a ``name`` that is neither a workload name nor a :class:`Workload`: it says
    how to wrap a query matrix or a list of ranges (and does not print the value)."""
    return ParameterError(
        f"{name} must be a workload name or a dprange.workloads.Workload, not a value of type {type(value).__name__}; "
        "wrap a query matrix as dprange.workloads.Explicit(matrix) and inclusive bin ranges as "
        "dprange.workloads.Ranges(lo, hi, n)"
    )


def check_workload_bins(workload, n, *, of_domain: bool = False) -> None:
    """Refuse a :class:`Workload` defined on another number of bins than n (``of_domain``: the
    release's domain, whatever the mechanism: its error would describe queries on another
    domain).  Names and n = None pass: a name is built on the bins."""
    if isinstance(workload, Workload) and n is not None and workload.n != n:
        where, built = (f"the domain has {n}", "the domain's bins") if of_domain else (f"n = {n}", "n bins")
        raise ParameterError(
            f"the workload is defined on {workload.n} bins but {where}; give a workload over {n} bins "
            f"(or a workload name, built on {built})"
        )


QARDAJI_2013 = Citation(
    "Qardaji, Yang and Li", "Understanding Hierarchical Methods for Differentially Private Histograms", "PVLDB 2013"
)


WORKLOADS.add(
    AllRange, summary="all n(n+1)/2 ranges [i, j]: the average error over every range", citation=QARDAJI_2013, auto=True
)


WORKLOADS.add(
    Prefix,
    summary="the n prefixes [0, j]: the CDF workload, suits CDFs and quantiles",
    citation=Citation(
        "Rameshwar and Tandon", "Optimal Tree-Based Mechanisms for Differentially Private Approximate CDFs", "2024"
    ),
    auto=True,
)


WORKLOADS.add(Identity, summary="the n single bins: the histogram itself", auto=True)


WORKLOADS.add(RandomRanges, summary="k ranges with uniformly random endpoints (a fixed, public sample)")


def make_workload(name: str, n: int, *, k: int = 1000, seed: int = 0) -> Workload:
    """A registered workload by name (all-range, prefix, identity, random-ranges) on n bins;
    ``k`` and ``seed`` go to the workloads that declare them (random-ranges)."""
    entry = WORKLOADS.lookup(name)
    declared = {p.name for p in entry.params}
    return entry.build(n, **{key: value for key, value in (("k", k), ("seed", seed)) if key in declared})

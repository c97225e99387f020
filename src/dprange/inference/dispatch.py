"""One inference entry point: ``infer(measurements, method, options) -> Estimate``.

The path is chosen by the measured blocks:

* every block a :class:`~dprange.operators.TreeLevel` of one tree: exact GLS in O(nodes)
  (:func:`~dprange.inference.tree.tree_gls`; Hay, Rastogi, Miklau and Suciu, PVLDB 2010, in
  the general form of Qardaji, Yang and Li, "Understanding hierarchical methods for
  differentially private histograms", PVLDB 2013);
* every block a :class:`~dprange.operators.HaarLevel` of one transform: the inverse Haar
  transform (Privelet; Xiao, Wang and Gehrke, ICDE 2010);
* one :class:`~dprange.operators.Kron` block of explicit full-column-rank factors with one
  noise variance and no public total: the pseudo-inverse of each factor applied along its
  axis (the least-squares solution of a Kronecker system is the Kronecker product of the
  factors' pseudo-inverses applied to y);
* one :class:`~dprange.inference.p_identity.DiagonalPlusRows` block (p-Identity strategies)
  with one noise variance: exact GLS and error model by the Woodbury identity in O(n p^2);
* anything else: GLS by LSMR on the implicit stacked operator (with the public total), with a
  dense covariance when there are at most
  :data:`~dprange.strategies.matrix.DENSE_COVARIANCE_LIMIT` bins.

Every linear estimate is also its exact error model (``range_variance``, ``query_variance``).
"nnls" and "l1" run ADMM (Lee, Wang and Kifer, "Maximum likelihood postprocessing for
differential privacy under consistency constraints", KDD 2015) from the GLS start, with rows
weighted by the inverse noise scale and the exact O(nodes) tree x-step on trees.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import ConvergenceWarning, ParameterError
from ..measurements import Measurements
from ..operators.dense import Explicit
from ..operators.structured import HaarLevel, Kron, TreeLevel, VStack
from ..strategies.matrix import DENSE_COVARIANCE_LIMIT
from ..strategies.trees import TreeStrategy
from .l1_admm import admm, tree_x_update
from .least_squares import (
    INVERSE_CONDITION_LIMIT,
    DenseGLSEstimate,
    OperatorEstimate,
    dense_covariance,
    gls,
    inverse_gls,
)
from .p_identity import DiagonalPlusRows, p_identity_estimate
from .tree import flat_ranges, tree_error_model, tree_gls
from .tree_admm import TreeStack
from .wavelet import haar_error_model, haar_estimate

METHODS = ("gls", "nnls", "l1")


ADMM_OPTIONS = ("alpha", "tol", "maxiter", "rho", "relax", "split", "adapt")


class NonlinearEstimate:
    """An NNLS or L1 (ADMM) estimate.  Its error is not given by the least-squares formula:
    ``range_variance`` returns NaN; use the bootstrap (:func:`dprange.answers.bootstrap.bootstrap`).
    The GLS estimate it started from, with its exact error model, is kept as
    ``least_squares``; ``converged`` says whether ADMM met its tolerance."""

    def __init__(self, leaves, least_squares, result):
        self.leaves = leaves
        self.least_squares = least_squares
        self.result = result
        self.converged = bool(getattr(result, "converged", True))

    def range_variance(self, lo, hi):
        return np.full(np.broadcast(np.asarray(lo), np.asarray(hi)).shape, np.nan)

    def query_variance(self, weights):
        return np.full(np.atleast_2d(weights).shape[0], np.nan)


def check_options(options) -> dict:
    """The ADMM options as a dict; unknown names are a ParameterError."""
    options = dict(options or {})
    unknown = set(options) - set(ADMM_OPTIONS)
    if unknown:
        raise ParameterError(f"unknown inference options {sorted(unknown)}; use {', '.join(sorted(ADMM_OPTIONS))}")
    return options


def infer(measurements: Measurements, method: str = "gls", options=None):
    """The estimate of the histogram from ``measurements``: GLS, or NNLS / L1 by ADMM."""
    if method not in METHODS:
        raise ParameterError(f"inference must be one of {', '.join(METHODS)}, got {method!r}")
    options = check_options(options)
    estimate = least_squares(measurements)
    if method == "gls":
        return estimate
    return nonlinear(measurements, estimate, method, options)


# ----------------------------------------------------------------------------- paths
def _one_owner(blocks, kind, owner: str):
    """The tree (or Haar transform) every block is a distinct level of, else None."""
    if not blocks or not all(isinstance(b, kind) for b in blocks):
        return None
    first = getattr(blocks[0], owner)
    if not all(getattr(b, owner) is first for b in blocks):
        return None
    return first


def tree_of(measurements: Measurements):
    """The tree when every block is a :class:`TreeLevel` of one tree, else None."""
    return _one_owner(measurements.blocks, TreeLevel, "tree")


def haar_of(measurements: Measurements):
    """The Haar transform when every block is a :class:`HaarLevel` of one, else None."""
    return _one_owner(measurements.blocks, HaarLevel, "haar")


def _level(m) -> int:
    """The depth / level of a tree or Haar block (the dispatcher checked the kind)."""
    index = m.level_index()
    if index is None:
        raise ParameterError("expected a tree or Haar level block")
    return index


def _by_level(measurements: Measurements, count: int) -> tuple[list, list]:
    values: list = [None] * count
    variances: list = [None] * count
    for m in measurements.measurements:
        index = _level(m)
        if values[index] is not None:
            raise ParameterError(f"level {index} is measured twice; combine the measurements first")
        values[index] = m.values  # tree_gls / haar_estimate convert (one copy)
        variances[index] = m.variance
    return values, variances


def least_squares(measurements: Measurements):
    """The exact GLS estimate with its error model, by the fastest path that applies."""
    if not measurements.measurements:
        return unmeasured(measurements)
    tree = tree_of(measurements)
    if tree is not None:
        values, variances = _by_level(measurements, tree.depth + 1)
        return tree_gls(tree, values, variances, total=measurements.total)
    haar = haar_of(measurements)
    if haar is not None:
        values, variances = _by_level(measurements, haar.height + 1)
        return haar_estimate(haar, values, variances, total=measurements.total)
    if len(measurements.measurements) == 1 and isinstance(measurements.blocks[0], DiagonalPlusRows):
        (m,) = measurements.measurements  # p-Identity: Woodbury, O(n p^2) (inference/p_identity.py)
        return p_identity_estimate(m.block, m.values, m.variance, measurements.total)
    if kron_applies(measurements):
        return kron_least_squares(measurements)
    return generic_least_squares(measurements)


def unmeasured(measurements: Measurements):
    """Nothing measured: only one bin whose count is the public total is determined (the
    estimate is that total, exactly: a tree of one node with a known root)."""
    if measurements.total is None or measurements.n != 1:
        raise ParameterError(
            "nothing is measured, so the histogram cannot be estimated; measure the bins "
            "(Flat, or Hierarchical with measure_root=True on one bin)"
        )
    return tree_gls(TreeStrategy(1, []), [None], [None], total=measurements.total)


def generic_least_squares(measurements: Measurements) -> OperatorEstimate:
    """GLS by LSMR on the stacked operator; a dense covariance for small domains; one explicit
    block of one noise variance with a certified (A^T A)^-1 directly (:func:`inverse_gls`)."""
    op = measurements.operator()
    y, v = measurements.stacked()
    direct = _inverse_least_squares(measurements)
    if direct is not None:
        leaves, covariance = direct
        (block,) = measurements.blocks
        return DenseGLSEstimate(op, v, leaves, measurements.total is not None, covariance, matrix=block.matrix)
    estimate = gls(op, y, v, total=measurements.total)
    n = measurements.n
    if n > DENSE_COVARIANCE_LIMIT:
        return estimate
    blocks = measurements.blocks
    known_total = measurements.total is not None
    variances = [m.variance for m in measurements.measurements]
    if all(np.ndim(u) == 0 for u in variances):  # one variance a block: sum A_b^T A_b / v_b (Explicit's cached)
        gram = sum(b.dense_gram() / float(u) for b, u in zip(blocks, variances))
        covariance = dense_covariance(None, v, known_total, gram=gram)
    else:
        covariance = dense_covariance(np.vstack([b.dense() for b in blocks]), v, known_total)
    matrix = blocks[0].matrix if len(blocks) == 1 and isinstance(blocks[0], Explicit) else None
    return DenseGLSEstimate(
        op, v, estimate.leaves, known_total, covariance, matrix=matrix, iterations=estimate.iterations
    )


def _inverse_least_squares(measurements: Measurements):
    """(estimate, covariance) of one :class:`Explicit` block over at most DENSE_COVARIANCE_LIMIT
    bins, of one noise variance, whose A^T A is certified well conditioned (its inverse computed
    once and kept: :meth:`Explicit.gram_inverse`) by :func:`inverse_gls`; else None."""
    if len(measurements.measurements) != 1:
        return None
    (m,) = measurements.measurements
    if not isinstance(m.block, Explicit) or np.ndim(m.variance) != 0 or m.block.shape[1] > DENSE_COVARIANCE_LIMIT:
        return None
    if m.block.inverse_condition_bound() > INVERSE_CONDITION_LIMIT:  # the inverse: O(n^3) once a matrix
        return None  # none certified, or too ill-conditioned for its product to be exact: LSMR
    inverse = m.block.gram_inverse()
    assert inverse is not None  # a finite bound
    return inverse_gls(m.block.matrix, inverse, m.values, float(m.variance), total=measurements.total)


def kron_applies(measurements: Measurements) -> bool:
    """One Kron block of explicit (or small) full-column-rank factors, one scalar noise
    variance, no public total: then least squares separates by axis."""
    if measurements.total is not None or len(measurements.measurements) != 1:
        return False
    (m,) = measurements.measurements
    if not isinstance(m.block, Kron) or np.ndim(m.variance) != 0:
        return False
    for factor in m.block.factors:
        rows, cols = factor.shape
        if cols > DENSE_COVARIANCE_LIMIT or rows < cols:
            return False
        if np.linalg.matrix_rank(factor.dense()) < cols:
            return False
    return True


class KronEstimate:
    """The least-squares estimate of a Kronecker system A_1 (x) ... (x) A_k with one noise
    variance v: x = (A_1^+ (x) ... (x) A_k^+) y, covariance v (G_1^-1 (x) ... (x) G_k^-1) with
    G_j = A_j^T A_j (full column rank)."""

    def __init__(self, leaves, inverse_grams, variance: float):
        self.leaves = leaves
        self.variance = float(variance)
        self.covariance_operator = Kron([Explicit(g) for g in inverse_grams])

    def query_variance(self, weights) -> np.ndarray:
        q = np.atleast_2d(np.asarray(weights, dtype=float))
        if q.shape[-1] != self.leaves.size:
            raise ParameterError(f"query weights must have {self.leaves.size} entries per query")
        cq = self.covariance_operator.matmat(q.T)
        out = self.variance * np.maximum(np.einsum("ki,ik->k", q, cq), 0.0)
        return out if np.ndim(weights) > 1 else out[0]

    def range_variance(self, lo, hi) -> np.ndarray:
        shape, left, right = flat_ranges(lo, hi, self.leaves.size)
        idx = np.arange(self.leaves.size)
        out = np.empty(left.size)
        for start in range(0, left.size, 256):
            sl = slice(start, start + 256)
            Q = ((idx[None, :] >= left[sl, None]) & (idx[None, :] <= right[sl, None])).astype(float)
            out[sl] = self.query_variance(Q) if Q.shape[0] else out[sl]
        return out.reshape(shape)


def kron_least_squares(measurements: Measurements) -> KronEstimate:
    (m,) = measurements.measurements
    block = m.block
    denses = [f.dense() for f in block.factors]
    pinvs = [np.linalg.pinv(a) for a in denses]
    leaves = Kron([Explicit(p) for p in pinvs]).matvec(np.asarray(m.values, dtype=float))
    inverse_grams = [np.linalg.inv(a.T @ a) for a in denses]
    return KronEstimate(leaves, inverse_grams, float(m.variance))


# ----------------------------------------------------------------------------- ADMM
def nonlinear(measurements: Measurements, gls_estimate, method: str, options: dict) -> NonlinearEstimate:
    """Non-negative least squares (alpha = 0) or L1 (elastic net, alpha = 0.9 by default) by
    ADMM from the GLS start.  Rows are weighted by 1 / (noise scale), the Laplace
    log-likelihood; trees use the exact O(nodes) tree least-squares x-step (Lee et al. 2015,
    Algorithm 3).  Warns :class:`~dprange.errors.ConvergenceWarning` when ADMM stops at
    ``maxiter`` before meeting ``tol``."""
    tree = tree_of(measurements)
    ordered = list(measurements.measurements)
    x_update = None
    if tree is not None:
        ordered.sort(key=_level)
        level_weights: list = [None] * (tree.depth + 1)
        for m in ordered:
            level_weights[_level(m)] = 1.0 / m.row_scales()
        x_update = tree_x_update(tree, level_weights, total=measurements.total)
    # trees: the stacked levels in O(nodes) per product (no per-level spreading to the bins)
    op = TreeStack(tree, [_level(m) for m in ordered]) if tree is not None else VStack([m.block for m in ordered])
    y = np.concatenate([np.asarray(m.values, dtype=float) for m in ordered])
    weights = np.concatenate([1.0 / m.row_scales() for m in ordered])
    alpha = 0.0 if method == "nnls" else float(options.get("alpha", 0.9))
    solver_options = {k: options[k] for k in ("rho", "relax", "split", "adapt") if k in options}
    result = admm(
        op,
        y,
        weights,
        alpha=alpha,
        total=measurements.total,
        x_update=x_update,
        tol=float(options.get("tol", 1e-5)),
        maxiter=int(options.get("maxiter", 5000)),
        x0=np.maximum(gls_estimate.leaves, 0.0),
        **solver_options,
    )
    if not result.converged:
        warnings.warn(
            f"{method} inference (ADMM) stopped after {result.iterations} iterations without meeting "
            f"tol={options.get('tol', 1e-5)}; raise maxiter or tol in inference_options",
            ConvergenceWarning,
            stacklevel=3,
        )
    return NonlinearEstimate(result.x, gls_estimate, result)


def design_error_model(measurements: Measurements):
    """The exact error model of GLS on this design (values are ignored: zeros are used;
    trees and Haar transforms build it from their variances alone)."""
    tree = tree_of(measurements) if measurements.measurements else None
    if tree is not None:
        _, variances = _by_level(measurements, tree.depth + 1)
        return tree_error_model(tree, variances, known_total=measurements.total is not None)
    haar = haar_of(measurements) if measurements.measurements else None
    if haar is not None:
        _, variances = _by_level(measurements, haar.height + 1)
        return haar_error_model(haar, variances, known_total=measurements.total is not None)
    zeros = [np.zeros(m.block.shape[0]) for m in measurements.measurements]
    total = None if measurements.total is None else 0.0
    return least_squares(measurements.with_values(zeros, total=total))

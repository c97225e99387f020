"""The exact optimum of the matrix mechanism with L2 sensitivity ((epsilon, delta)-DP).

For a workload with Gram matrix G = W^T W (n x n) and a strategy A whose columns have L2
norm at most 1, the matrix mechanism's total error per unit of noise variance is
trace(G (A^T A)^-1); it depends on A only through X = A^T A, and the problem

    minimise trace(G X^-1)  subject to  X positive definite,  X_jj <= 1 for every j

is convex (Yuan, Yang, Zhang and Hao, "Convex optimization for linear query processing under
approximate differential privacy", KDD 2016; Li and Miklau, ICDT 2013, characterise its value).
This module solves it through its dual over one weight mu_j >= 0 per column.  For fixed mu
(M = diag(mu)) the Lagrangian trace(G X^-1) + trace(M X) - sum mu is least at
X = M^-1/2 (M^1/2 G M^1/2)^1/2 M^-1/2 (from X M X = G), so the dual function is

    g(mu) = 2 trace((M^1/2 G M^1/2)^1/2) - sum_j mu_j,   dg / dmu_j = X_jj - 1,

concave, and max g = min trace(G X^-1) (Slater's condition holds: X = I / 2).  Every mu gives a
lower bound g(mu) on the error of every strategy with unit L2 columns; with mu constant, g is
the SVD bound (sum of singular values)^2 / n of Li and Miklau, so the optimum starts there and
only rises.  The primal X(mu), scaled so that its largest diagonal entry is 1, or better
equilibrated to unit diagonal (D X D, D = diag(X_jj)^-1/2), is a feasible strategy Gram
matrix, whose error certifies the gap; the strategy is a square root of it.  Each step is one
eigendecomposition of an n x n matrix and one n x n product (O(n^3)); above 512 bins the
weights start from the solution on 4 times fewer bins.  L-BFGS-B over log mu stops at a
duality gap of 1e-6 of the value (1e-4 above 1024 bins), in a few steps from those starts
(steps and CPU seconds: docs/optimized.md, "The L2 optimum above 1024 bins").

Where G is singular (a workload of rank r < n) the dual is degenerate: its optimum is
reached, but X(mu) there is not feasible, and the least squares need a full-rank strategy
anyway.  The solver therefore works on G + rho (trace G / n) I with rho = ``RIDGE`` (1e-8),
whose X has full rank, and evaluates the dual of G itself at the mu reached, so ``bound``
stays a lower bound for G (how close trace and bound end on singular workloads:
docs/optimized.md, "Figures by module").

Also here: :func:`as_p_identity_l2` writes an L2 strategy in the L2 p-Identity template's shape
(for the Kronecker products of :mod:`dprange.mechanisms.optimized_grid`), and :func:`l2_replace_optimum`
solves the program of replace neighbours (pairwise sensitivity, public total), whose dual has
one weight per pair of bins.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from dprange._lazy import lazy_module

from .._validation import check_positive_int
from ..errors import ParameterError
from ..operators.base import definition_sensitivity_power
from ..progress import progress_bar

optimize = lazy_module("scipy.optimize")


#: Largest n solved (one n x n eigendecomposition a step, O(n^3); the strategy is dense,
#: released through the dense covariance).
L2_OPTIMUM_MAX_N = 4096


#: Largest n solved to GAP_TOLERANCE; above, to LARGE_GAP_TOLERANCE (:func:`gap_tolerance`).
L2_OPTIMUM_FINE_MAX_N = 1024


#: Above this many bins the dual starts from the solution on MULTILEVEL_FACTOR times fewer bins
#: (:func:`_multilevel_start`).
MULTILEVEL_MIN_N = 512


#: Bins per group of the coarse program.
MULTILEVEL_FACTOR = 4


#: Largest n of the replace program (n (n - 1) / 2 pair weights; an n x n eigendecomposition
#: a step, and more steps than the add/remove program).
L2_REPLACE_MAX_N = 256


#: The ridge added to G, relative to its mean diagonal (module doc).
RIDGE = 1e-8


#: Relative duality gap at which the solver stops; L-BFGS-B stops earlier only at its step limit.
GAP_TOLERANCE = 1e-6


#: The gap above L2_OPTIMUM_FINE_MAX_N bins, where each step is a long eigendecomposition
#: (steps it saves: docs/optimized.md, "Figures by module").
LARGE_GAP_TOLERANCE = 1e-4


#: The gap of the coarse programs that only give a start (:func:`_multilevel_start`).
COARSE_GAP_TOLERANCE = 1e-4


class L2Optimum(NamedTuple):
    """The solved program: ``strategy`` (n x n, largest column L2 norm 1), ``trace`` =
    trace(G (A^T A)^-1) of that strategy (an upper bound on the optimum), ``bound`` the dual
    value reached (a lower bound on trace(G (B^T B)^-1) for every B with columns of L2 norm at
    most 1, at least the SVD bound), ``steps`` the dual evaluations."""

    strategy: np.ndarray
    trace: float
    bound: float
    steps: int


def _clip_spectrum(values: np.ndarray) -> np.ndarray:
    """Eigenvalues of a PSD matrix with those below its rounding level (n ulps of the largest)
    set to 0: eigh returns them as +-1e-13 of the largest, whose square roots (3e-7) would
    inflate sums of square roots, and so the bounds, on singular matrices."""
    floor = values.size * np.finfo(float).eps * max(float(values.max()), 0.0)
    return np.where(values > floor, values, 0.0)


def _psd_sqrt(matrix: np.ndarray, *, clip: bool = False) -> np.ndarray:
    """The PSD square root; ``clip``: with the eigenvalues at rounding level set to 0
    (:func:`_clip_spectrum`: for bounds on singular matrices, never for the strategy, whose
    rank it would cut), else only the negative ones."""
    values, vectors = np.linalg.eigh(matrix)  # O(n^3)
    values = _clip_spectrum(values) if clip else np.maximum(values, 0.0)
    return (vectors * np.sqrt(values)) @ vectors.T


def l2_dual(gram, mu, *, clip: bool = False) -> tuple[float, np.ndarray, np.ndarray, float]:
    """(g(mu), its gradient X_jj - 1, X(mu), the primal value) for the Gram matrix ``gram`` and
    column weights ``mu`` (n of them, finite and positive): :func:`_dual` with its input
    checked."""
    gram = _check_gram(gram)
    mu = _check_weights(mu, gram.shape[0], "mu", positive=True)
    return _dual(gram, mu, clip=clip)


def _check_weights(weights, count: int, name: str, *, positive: bool) -> np.ndarray:
    """``weights`` as a float vector of ``count`` finite entries, > 0 (``positive``) or >= 0."""
    weights = np.asarray(weights, dtype=float)
    if weights.shape != (count,):
        raise ParameterError(f"{name} must be a vector of {count} weights, not of shape {weights.shape}")
    if not np.all(np.isfinite(weights)) or np.any(weights <= 0 if positive else weights < 0):
        raise ParameterError(f"{name} must be finite and {'positive' if positive else 'non-negative'}")
    return weights


def _dual(gram: np.ndarray, mu: np.ndarray, *, clip: bool = False) -> tuple[float, np.ndarray, np.ndarray, float]:
    """(g(mu), its gradient X_jj - 1, X(mu), the primal value) for the Gram matrix ``gram``
    (module doc).  trace(G X(mu)^-1) = trace((M^1/2 G M^1/2)^1/2), so X(mu) scaled to largest
    diagonal 1, a feasible point, has error max_j X_jj times that: an upper bound on the
    optimum at no extra cost.  ``clip``: square roots of the eigenvalues at rounding level
    taken as 0 (a bound on a singular G: never above the value in exact arithmetic)."""
    root = np.sqrt(mu)
    z_root = _psd_sqrt(root[:, None] * gram * root[None, :], clip=clip)  # (M^1/2 G M^1/2)^1/2   O(n^3)
    z_trace = float(np.trace(z_root))
    x = z_root / root[:, None] / root[None, :]
    diagonal = np.diag(x)
    return 2.0 * z_trace - float(mu.sum()), diagonal - 1.0, x, float(diagonal.max()) * z_trace


def check_l2_optimum_bins(n: int, *, replace: bool = False) -> None:
    """Refuse n above L2_OPTIMUM_MAX_N, or above L2_REPLACE_MAX_N for the replace program
    (before any n x n work); n must be a positive integer."""
    n = check_positive_int(n, "n")
    if n > L2_OPTIMUM_MAX_N:
        raise ParameterError(
            f"the L2 optimum is solved for n <= {L2_OPTIMUM_MAX_N} bins (an n x n eigendecomposition a step), "
            f"not {n}; for a strategy use template='p-identity-l2', for a bound svd_bound"
        )
    if replace and n > L2_REPLACE_MAX_N:
        raise ParameterError(
            f"the L2 optimum under replace neighbours is solved for n <= {L2_REPLACE_MAX_N} bins "
            f"(n (n - 1) / 2 pair weights), not {n}"
        )


def _check_gram(gram) -> np.ndarray:
    gram = np.asarray(gram, dtype=float)
    if gram.ndim != 2 or gram.shape[0] != gram.shape[1] or gram.shape[0] == 0:
        raise ParameterError(f"a Gram matrix W^T W must be square and non-empty, not of shape {gram.shape}")
    if not np.all(np.isfinite(gram)):
        raise ParameterError("the Gram matrix W^T W has entries that are not finite")
    check_l2_optimum_bins(gram.shape[0])
    if not np.any(np.diag(gram) > 0):
        raise ParameterError("the workload asks no query (W^T W = 0)")
    return (gram + gram.T) / 2.0


class _Best:
    """The solver's progress: the best dual value and the point (the optimiser's variables)
    where it was reached, the least primal error, its point and what the evaluation returned
    with it (``kept``: what the strategy is built from), the evaluations."""

    def __init__(self, point: np.ndarray):
        self.bound, self.primal, self.point, self.steps = -np.inf, np.inf, point, 0
        self.dual_point = point
        self.kept: Any = None


def _maximise_dual(
    evaluate,
    start: np.ndarray,
    *,
    maxiter: int,
    description: str,
    large: bool,
    bounds=None,
    tolerance: float = GAP_TOLERANCE,
) -> _Best:
    """L-BFGS-B on ``evaluate(point) -> (dual value, its gradient, primal value, kept)`` from
    ``start``, stopping at a relative duality gap of ``tolerance`` between the best dual value
    and the least primal value seen, or after ``maxiter`` steps (with a progress bar unless
    ``description`` is empty: the share of the way, in log gap, from the first gap to
    ``tolerance``, :func:`gap_progress`; a solve takes a few long steps, so a count of steps
    out of ``maxiter`` would say little)."""
    best = _Best(start)
    shown = {"first": math.nan, "percent": 0}

    class Converged(Exception):
        pass

    def negative_dual(point):
        value, grad, primal, kept = evaluate(point)
        best.steps += 1
        if value > best.bound:
            best.bound, best.dual_point = value, point.copy()
        if primal < best.primal:
            best.primal, best.point, best.kept = primal, point.copy(), kept
        gap = (best.primal - best.bound) / best.primal
        if gap <= tolerance:
            bar.update(100 - shown["percent"])
            raise Converged
        if math.isnan(shown["first"]) and math.isfinite(gap):
            shown["first"] = gap
        percent = int(gap_progress(shown["first"], gap, tolerance))  # whole percents
        if percent > shown["percent"]:
            bar.update(percent - shown["percent"])
            shown["percent"] = percent
        return -value, -grad

    with progress_bar(description, total=100, unit="%", large=large and bool(description)) as bar:
        try:
            optimize.minimize(
                negative_dual,
                start,
                jac=True,
                method="L-BFGS-B",
                bounds=bounds,
                options={"maxiter": maxiter, "ftol": 1e-15, "gtol": 1e-12},
            )
        except Converged:
            pass
    return best


def gap_progress(first: float, gap: float, tolerance: float) -> float:
    """How far a solve is, in percent: 100 log(first / gap) / log(first / tolerance), from 0 at
    the ``first`` relative duality gap to 100 at ``tolerance`` (clipped; 0 while either is
    undefined)."""
    if not (math.isfinite(first) and math.isfinite(gap)) or gap <= 0 or first <= tolerance:
        return 100.0 if math.isfinite(gap) and gap <= tolerance else 0.0
    return float(np.clip(100.0 * math.log(first / gap) / math.log(first / tolerance), 0.0, 100.0))


def _light_dual(gram: np.ndarray, mu: np.ndarray) -> tuple[float, np.ndarray, float, float, tuple]:
    """(g(mu), its gradient X_jj - 1, the error of X(mu) scaled to largest diagonal 1, the error
    of X(mu) equilibrated to unit diagonal, the factors) without forming any n x n product but one.

    With M^1/2 G M^1/2 = V diag(s^2) V^T, X(mu) = M^-1/2 V diag(s) V^T M^-1/2, so
    X_jj = sum_k V_jk^2 s_k / mu_j (O(n^2)).  The equilibrated X' = D X D, D = diag(X_jj^-1/2),
    is feasible with every column of norm 1, and trace(G X'^-1) = sum_k (V^T H V)_kk / s_k with
    H = (M^1/2 D^-1) G (D^-1 M^1/2): one product H V.  It is far below the scaled error away from
    the optimum (docs/optimized.md, "l2-optimal"), so the duality gap closes in a few steps."""
    root = np.sqrt(mu)
    values, vectors = np.linalg.eigh(root[:, None] * gram * root[None, :])  # O(n^3)
    s = np.sqrt(np.maximum(values, 0.0))
    diagonal = (vectors * vectors) @ s / mu
    total = float(s.sum())
    scale = root * np.sqrt(diagonal)
    with np.errstate(divide="ignore", invalid="ignore"):
        quadratic = np.einsum("ij,ij->j", vectors, (scale[:, None] * gram * scale[None, :]) @ vectors)  # O(n^3)
        equilibrated = float(np.sum(quadratic / s)) if np.all(s > 0) else np.inf
    return (
        2.0 * total - float(mu.sum()),
        diagonal - 1.0,
        float(diagonal.max()) * total,
        equilibrated,
        (
            vectors,
            s,
            diagonal,
        ),
    )


def _dual_value(gram: np.ndarray, mu: np.ndarray) -> float:
    """g(mu) alone, with the eigenvalues at rounding level taken as 0 (a lower bound on a
    singular G, :func:`_clip_spectrum`): eigenvalues only, O(n^3) but no eigenvectors."""
    root = np.sqrt(mu)
    values = _clip_spectrum(np.linalg.eigvalsh(root[:, None] * gram * root[None, :]))
    return 2.0 * float(np.sqrt(values).sum()) - float(mu.sum())


def _coarsened(gram: np.ndarray, factor: int) -> tuple[np.ndarray, np.ndarray]:
    """(P^T G P, the group sizes) for P summing runs of ``factor`` adjacent bins (the last run
    may be shorter): the Gram matrix of the workload on the coarse histogram."""
    starts = np.arange(0, gram.shape[0], factor)
    coarse = np.add.reduceat(np.add.reduceat(gram, starts, axis=0), starts, axis=1)
    return coarse, np.diff(np.append(starts, gram.shape[0]))


def _multilevel_start(gram: np.ndarray, target: float) -> np.ndarray:
    """A start for the dual on n > MULTILEVEL_MIN_N bins: the weights mu of the program on the
    coarsened Gram matrix (:func:`_coarsened`, 4 bins a group, solved the same way to a gap of
    COARSE_GAP_TOLERANCE), each copied onto its group's bins and scaled to sum ``target`` (the
    SVD bound: at the optimum sum mu equals the optimal value).  The dual's value there is
    close to the optimum, so the fine solve needs a few steps (docs/optimized.md, "The L2
    optimum above 1024 bins")."""
    coarse, sizes = _coarsened(gram, MULTILEVEL_FACTOR)
    mu = _solve(coarse, COARSE_GAP_TOLERANCE, maxiter=200, description="").mu
    shape = np.repeat(mu, sizes)
    return shape * (target / float(shape.sum()))


class _Solved(NamedTuple):
    """:func:`_solve`'s result: the weights of the least primal error and of the best dual
    value, the dual evaluations, the SVD bound of the Gram matrix, and at ``mu`` the scaled and
    the equilibrated errors with the factors of :func:`_light_dual`."""

    mu: np.ndarray
    dual_mu: np.ndarray
    steps: int
    svd_bound: float
    at_mu: tuple


def _solve(gram: np.ndarray, tolerance: float, *, maxiter: int, description: str) -> _Solved:
    """The ridged program on ``gram`` (already checked): L-BFGS-B over log mu from the constant
    weights of the SVD bound, or above MULTILEVEL_MIN_N bins from :func:`_multilevel_start`."""
    n = gram.shape[0]
    spectrum = np.sqrt(_clip_spectrum(np.linalg.eigvalsh(gram)))
    svd_bound = float(spectrum.sum()) ** 2 / n
    ridged = gram + RIDGE * float(np.trace(gram)) / n * np.eye(n)
    if n > MULTILEVEL_MIN_N:
        start = _multilevel_start(ridged, svd_bound)
    else:
        start = np.full(n, svd_bound / n)  # g(start) is the SVD bound

    def evaluate(log_mu):
        mu = np.exp(log_mu)
        value, grad, scaled, equilibrated, factors = _light_dual(ridged, mu)
        # d / d log mu_j; the strategy is built from the factors of the least primal error
        return value, grad * mu, min(scaled, equilibrated), (scaled, equilibrated, factors)

    best = _maximise_dual(
        evaluate, np.log(start), maxiter=maxiter, description=description, large=n >= 256, tolerance=tolerance
    )
    return _Solved(np.exp(best.point), np.exp(best.dual_point), best.steps, svd_bound, best.kept)


def gap_tolerance(n: int) -> float:
    """The relative duality gap :func:`l2_optimum` stops at on n bins: GAP_TOLERANCE up to
    L2_OPTIMUM_FINE_MAX_N, LARGE_GAP_TOLERANCE above (where a step is a long eigendecomposition)."""
    return GAP_TOLERANCE if n <= L2_OPTIMUM_FINE_MAX_N else LARGE_GAP_TOLERANCE


#: CPU seconds of :func:`l2_optimum` per n^3 (an n x n eigendecomposition a step): fitted on
#: prefixes of 128 to 512 bins on one core of the 2-core development machine (0.5 s at 512;
#: docs/optimized.md, "Time to optimise").  Only for announcing long work.
L2_OPTIMUM_SECONDS_PER_CUBE = 3.8e-9


def l2_optimum_seconds(n: int) -> float:
    """About how many CPU seconds :func:`l2_optimum` takes on n bins (a rough figure)."""
    return L2_OPTIMUM_SECONDS_PER_CUBE * float(n) ** 3


def l2_optimum(gram, *, maxiter: int = 200) -> L2Optimum:
    """Solve the program of the module doc for the Gram matrix ``gram`` (n <= L2_OPTIMUM_MAX_N).

    L-BFGS-B maximises the dual of the ridged G (module doc) over log mu (mu > 0 throughout)
    from the constant mu of the SVD bound (above MULTILEVEL_MIN_N bins from the solution on 4
    times fewer bins, :func:`_multilevel_start`), stopping when the duality gap between the best
    dual value and the least error of a feasible X(mu) (scaled or equilibrated,
    :func:`_light_dual`) is below :func:`gap_tolerance` of it, or after ``maxiter`` steps; the
    strategy comes from the mu of that least error, the bound is G's own dual there (or the SVD
    bound, if higher)."""
    gram = _check_gram(gram)
    n = gram.shape[0]
    solved = _solve(gram, gap_tolerance(n), maxiter=maxiter, description="optimising strategy (L2 optimum)")
    mu = solved.mu
    bound = max(solved.svd_bound, _dual_value(gram, solved.dual_mu))  # G's own dual: a lower bound for G
    scaled, equilibrated, (vectors, s, diagonal) = solved.at_mu
    # A = diag(s)^1/2 V^T M^-1/2 D has A^T A = D X(mu) D: D = diag(X_jj)^-1/2 (unit columns) or
    # the scalar max_j X_jj^-1/2, whichever error is lower
    columns = 1.0 / np.sqrt(diagonal) if equilibrated <= scaled else np.full(n, 1.0 / np.sqrt(diagonal.max()))
    strategy = (np.sqrt(s)[:, None] * vectors.T) * (columns / np.sqrt(mu))[None, :]
    strategy /= float(np.max(np.linalg.norm(strategy, axis=0)))
    return L2Optimum(strategy, strategy_trace(strategy, gram), bound, solved.steps)


def strategy_trace(strategy: np.ndarray, gram: np.ndarray) -> float:
    """trace(G (A^T A)^-1) (dense, O(n^3); also :mod:`dprange.optimize.p_identity`'s, for checks and
    benchmarks)."""
    return float(np.trace(np.linalg.solve(strategy.T @ strategy, gram)))


def as_p_identity_l2(strategy: np.ndarray) -> np.ndarray:
    """B (n x n) such that the L2 p-Identity template [I; B] D (D scaling every column to L2
    norm 1, :func:`dprange.optimize.p_identity.p_identity_matrix` with norm 2) has the Gram matrix
    X' = A^T A + diag(1 - diag(A^T A)) of ``strategy`` A (columns of L2 norm at most 1), whose
    error on every workload is at most A's (X' >= A^T A) at the same sensitivity 1.

    With lambda the least eigenvalue of X' and s^2 = 1 / lambda, B = (s^2 X' - I)^1/2: then
    B^T B = s^2 X' - I has diagonal s^2 - 1, every column of [I; B] has norm s, and
    [I; B]^T [I; B] / s^2 = X'.  So the exact L2 optimum is a point of the L2 template with
    p = n rows, and the Kronecker machinery built on that shape (:mod:`dprange.mechanisms.optimized_grid`)
    can measure it.  The identity rows keep weight sqrt(lambda), ample for the quantisation on
    the workloads measured (docs/optimized.md, "The exact k-D optimum")."""
    strategy = np.asarray(strategy, dtype=float)
    if strategy.ndim != 2 or 0 in strategy.shape or not np.all(np.isfinite(strategy)):
        raise ParameterError(
            f"the strategy must be a non-empty 2-D matrix of finite entries, not of shape {strategy.shape}"
        )
    gram = strategy.T @ strategy
    diagonal = np.diag(gram)
    if diagonal.max() > 1.0 + 1e-9:
        raise ParameterError("the strategy's columns must have L2 norm at most 1")
    gram = gram + np.diag(np.clip(1.0 - diagonal, 0.0, None))
    least = float(np.linalg.eigvalsh(gram)[0])  # O(n^3)
    if least <= 1e-6:
        raise ParameterError(
            f"the strategy's Gram matrix is nearly singular (least eigenvalue {least:.3g}): its identity rows "
            "would round to zero"
        )
    return _psd_sqrt(gram / least - np.eye(gram.shape[0]))


def _complement_basis(n: int) -> np.ndarray:
    """An orthonormal basis N (n x (n - 1)) of the vectors orthogonal to 1."""
    differences = np.eye(n)[:, :-1] - np.eye(n)[:, 1:]
    return np.linalg.qr(differences)[0]


def l2_replace_dual(gram, weights, *, clip: bool = False) -> tuple[float, np.ndarray, np.ndarray, float]:
    """(g(lambda), its gradient over the pairs i < j, X = N Y(lambda) N^T, the primal value) of
    the replace program for the Gram matrix ``gram`` (n x n) and pair weights ``weights``
    (n (n - 1) / 2 of them, finite and non-negative, in :func:`numpy.triu_indices` order):
    :func:`_replace_dual` with its input checked, N from :func:`_complement_basis`."""
    gram = _check_gram(gram)
    n = gram.shape[0]
    check_l2_optimum_bins(n, replace=True)
    weights = _check_weights(weights, n * (n - 1) // 2, "the pair weights", positive=False)
    basis = _complement_basis(n)
    return _replace_dual(basis.T @ gram @ basis, basis, weights, clip=clip)


def _replace_dual(
    gram_n: np.ndarray, basis: np.ndarray, weights: np.ndarray, *, clip: bool = False
) -> tuple[float, np.ndarray, np.ndarray, float]:
    """(g(lambda), its gradient d_ij^T Y d_ij - 1 over the pairs i < j, X = N Y(lambda) N^T, the
    primal value) of the replace program for G_N = N^T G N (module doc of
    :func:`l2_replace_optimum`); ``weights`` lambda_ij in :func:`numpy.triu_indices` order."""
    n = basis.shape[0]
    upper = np.triu_indices(n, 1)
    adjacency = np.zeros((n, n))
    adjacency[upper] = weights
    adjacency += adjacency.T
    laplacian = basis.T @ (np.diag(adjacency.sum(axis=1)) - adjacency) @ basis  # M on 1-perp     O(n^3)
    values, vectors = np.linalg.eigh(laplacian)
    values = np.maximum(values, 1e-300)
    root, inverse_root = (vectors * np.sqrt(values)) @ vectors.T, (vectors / np.sqrt(values)) @ vectors.T
    z_root = _psd_sqrt(root @ gram_n @ root, clip=clip)  # (M^1/2 G_N M^1/2)^1/2               O(n^3)
    z_trace = float(np.trace(z_root))
    x = basis @ (inverse_root @ z_root @ inverse_root) @ basis.T
    distances = x[upper[0], upper[0]] + x[upper[1], upper[1]] - 2.0 * x[upper]
    return 2.0 * z_trace - float(weights.sum()), distances - 1.0, x, float(distances.max()) * z_trace


def l2_replace_optimum(gram, *, maxiter: int = 2000) -> L2Optimum:
    """The L2 optimum under replace neighbours with a public total (n <= L2_REPLACE_MAX_N).

    With the total known, the constrained least squares have covariance
    v N (N^T X N)^-1 N^T (N a basis of the complement of 1, X = A^T A), and the replace
    sensitivity is the largest ||a_i - a_j||_2, (e_i - e_j)^T X (e_i - e_j), which involves X
    on that complement only.  So with Y = N^T X N and d_ij = N^T (e_i - e_j) the program

        minimise trace(G_N Y^-1)  subject to  d_ij^T Y d_ij <= 1 for every pair i < j

    is convex, G_N = N^T G N.  Its dual has one weight per pair: with M = sum lambda_ij d_ij
    d_ij^T (the weighted graph Laplacian on the complement),
    g(lambda) = 2 trace((M^1/2 G_N M^1/2)^1/2) - sum lambda, gradient d_ij^T Y d_ij - 1 at
    Y = M^-1/2 (M^1/2 G_N M^1/2)^1/2 M^-1/2.  L-BFGS-B on lambda >= 0 (inactive pairs end at 0)
    from equal weights, stopping at a relative duality gap of GAP_TOLERANCE (steps:
    docs/optimized.md, "Replace neighbours under (epsilon, delta)").  The strategy is
    X^1/2 with X = N Y N^T + c 1 1^T / n, scaled to largest pairwise distance 1; c (the mean
    eigenvalue of Y) gives full rank and changes neither the error (the total is known) nor the
    pairwise distances.  ``trace`` is the strategy's trace(G N (N^T X N)^-1 N^T) and ``bound``
    the dual of G itself at the weights reached (a ridge of RIDGE keeps the iterates full rank,
    as in :func:`l2_optimum`).  On a singular G the two stay further apart than the gap the
    solver stops at (which is the ridged program's; docs/optimized.md, "Left for later"); the
    bound is still a bound, the strategy's optimality is then certified only that far."""
    gram = _check_gram(gram)
    n = gram.shape[0]
    check_l2_optimum_bins(n, replace=True)
    if n < 2:
        raise ParameterError("the replace program needs at least 2 bins")
    basis = _complement_basis(n)
    gram_n = basis.T @ gram @ basis
    ridged = gram_n + RIDGE * float(np.trace(gram_n)) / max(n - 1, 1) * np.eye(n - 1)
    pairs = n * (n - 1) // 2
    spectrum_sum = float(np.sqrt(_clip_spectrum(np.linalg.eigvalsh(gram_n))).sum())
    # Equal weights c: M = c n I on the complement, g = 2 sqrt(c n) sum sqrt(sigma) - c pairs.
    start = np.full(pairs, (spectrum_sum * np.sqrt(n) / pairs) ** 2)

    def evaluate(weights):
        value, grad, x, primal = _replace_dual(ridged, basis, weights)
        return value, grad, primal, x

    best = _maximise_dual(
        evaluate,
        start,
        maxiter=maxiter,
        description="optimising strategy (L2 optimum, replace)",
        large=n >= 128,
        bounds=optimize.Bounds(0.0, np.inf),
    )
    bound = _replace_dual(gram_n, basis, best.point, clip=True)[0]
    x = best.kept  # X of the least primal error
    complement = basis.T @ x @ basis
    ones = np.full((n, n), float(np.trace(complement)) / (n - 1) / n)
    strategy = _psd_sqrt(x + ones)
    strategy /= math.sqrt(definition_sensitivity_power(strategy, 2, "replace"))  # largest pairwise distance 1
    product = strategy.T @ strategy
    trace = float(np.trace(np.linalg.solve(basis.T @ product @ basis, gram_n)))  # O(n^3)
    return L2Optimum(strategy, trace, float(bound), best.steps)

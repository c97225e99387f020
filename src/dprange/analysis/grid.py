"""The exact expected error of k-D mechanisms on rectangle and marginal workloads, the SVD and
L2-optimum lower bounds for grids, and ``select_grid``: the k-D mechanism of least exact error,
chosen before any data are read.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from .._validation import check_delta, check_epsilon
from ..errors import ParameterError
from ..mechanisms.base import GridMechanism
from ..optimize.l2_optimum import check_l2_optimum_bins, l2_optimum
from ..registry import GRID_MECHANISMS
from ..workloads.ranges import AllRange, Prefix, all_range_singular_values, prefix_singular_values, singular_value_sum
from ..workloads.rectangles import Rectangles, all_range_gram, check_shape
from .error import noise_variance_floor
from .selection import Candidate, Selection

# ----------------------------------------------------------------------------- analysis
#: The k-D workloads by name (hyphens, as on the command line; underscores are accepted too).
WORKLOADS_KD = ("all-rectangles", "prefix-rectangles", "marginals")


def check_grid_workload(workload):
    """A registered k-D workload name (``_`` read as ``-``) or a :class:`Rectangles`."""
    if isinstance(workload, Rectangles):
        return workload
    name = workload.replace("_", "-") if isinstance(workload, str) else workload
    if name not in WORKLOADS_KD:
        raise ParameterError(
            f"workload must be one of {', '.join(WORKLOADS_KD)} or a dprange.workloads.Rectangles, got {workload!r}"
        )
    return name


def check_order(order, shape) -> int:
    """The marginal order: 1..k on a k-D grid."""
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or not 1 <= order <= len(shape):
        raise ParameterError(f"order must be 1..{len(shape)} for a {len(shape)}-D grid, got {order!r}")
    return int(order)


def axis_ranges(n: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """One axis' ranges: "all" n(n+1)/2 ranges, "prefix" [0, j], "cells" [i, i], "total" [0, n-1]."""
    if kind == "all":
        return np.triu_indices(n)
    if kind == "prefix":
        return np.zeros(n, dtype=np.int64), np.arange(n)
    if kind == "cells":
        return np.arange(n), np.arange(n)
    return np.zeros(1, dtype=np.int64), np.full(1, n - 1)


def expected_error(mechanism: GridMechanism, shape, workload, epsilon, *, delta=0.0, order: int = 2) -> float:
    """The exact mean squared error per query of ``mechanism`` with least squares on a k-D
    ``workload``: "all-rectangles", "prefix-rectangles", "marginals" (all ``order``-way), or a
    :class:`~dprange.workloads.rectangles.Rectangles`.  Data-independent (the zero design's error
    model); the product workloads average per-axis terms (no query is enumerated)."""
    shape = check_shape(shape)
    workload = check_grid_workload(workload)
    if workload == "marginals":
        order = check_order(order, shape)
    return workload_error(mechanism.error_model(shape, epsilon, delta=delta), shape, workload, order)


def product_parts(shape, workload, order: int = 2) -> list[tuple[int, tuple[str, ...]]]:
    """A checked named k-D workload as (weight, one :func:`axis_ranges` kind per axis) parts:
    each part is the product of its axes' ranges, and the workload's mean over its queries is the
    weighted mean of the parts' means ("all-rectangles" and "prefix-rectangles" one part each;
    "marginals" one per ``order``-way marginal, weighted by its number of cells)."""
    if workload in ("all-rectangles", "prefix-rectangles"):
        return [(1, ("all" if workload == "all-rectangles" else "prefix",) * len(shape))]
    return [
        (math.prod(shape[a] for a in axes), tuple("cells" if a in axes else "total" for a in range(len(shape))))
        for axes in itertools.combinations(range(len(shape)), order)
    ]


def workload_error(model, shape, workload, order: int = 2) -> float:
    """The mean variance of ``model`` (an error model on ``shape``) over a checked k-D
    ``workload`` (:func:`expected_error`)."""
    if isinstance(workload, Rectangles):
        return float(np.mean(model.rectangle_variance(workload.lows, workload.highs)))
    parts = product_parts(shape, workload, order)
    total = sum(w * model.mean_variance([axis_ranges(n, k) for n, k in zip(shape, kinds)]) for w, kinds in parts)
    return total / sum(w for w, _ in parts)


def axis_gram(n: int, kind: str) -> np.ndarray:
    """W^T W of one axis' ranges (:func:`axis_ranges`): entry (i, j) counts the ranges holding both
    bins ("all" (min + 1)(n - max), "prefix" n - max, "cells" the identity, "total" all ones)."""
    if kind == "all":
        return all_range_gram(n)
    i = np.arange(n)
    if kind == "prefix":
        return (n - np.maximum.outer(i, i)).astype(float)
    if kind == "cells":
        return np.eye(n)
    return np.ones((n, n))


def workload_inner(a, b, workload, order: int = 2) -> float:
    """The mean over a k-D ``workload``'s queries of the product of their answers on the cell
    arrays ``a`` and ``b`` (weighted as :func:`workload_error` weights the parts), so that
    ``workload_inner(v, v, ...)`` is the mean squared answer of ``v`` and its expectation for a
    random ``v`` of covariance C is the workload error of C.  Named workloads apply each part's
    axis Grams (O(cells x sum of sides)); rectangles sum ``a`` and ``b`` over each (O(cells + R))."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ParameterError(f"workload_inner: the arrays' shapes differ, {a.shape} and {b.shape}")
    workload = check_grid_workload(workload)
    if isinstance(workload, Rectangles):
        if tuple(workload.grid) != a.shape:
            raise ParameterError(f"workload_inner: rectangles on a {list(workload.grid)} grid, arrays {list(a.shape)}")
        return float(np.mean(workload.matvec(a.ravel()) * workload.matvec(b.ravel())))
    total, weights = 0.0, 0
    if workload == "marginals":
        order = check_order(order, a.shape)
    for weight, kinds in product_parts(a.shape, workload, order):
        applied = b
        for axis, (n, kind) in enumerate(zip(a.shape, kinds)):
            applied = np.moveaxis(np.tensordot(axis_gram(n, kind), applied, axes=(1, axis)), 0, axis)
        queries = math.prod(axis_ranges(n, kind)[0].size for n, kind in zip(a.shape, kinds))
        total += weight * float(np.sum(a * applied)) / queries
        weights += weight
    return total / weights


#: The k-D mechanisms a refusal of a marginals mechanism on rectangles suggests.
RECTANGLE_MECHANISMS = ("optimized_kronecker", "kronecker", "kd_hierarchy")


def check_answers_workload(mechanism, shape, workload, epsilon, *, delta=0.0, order: int = 2, option=None) -> None:
    """Refuse a mechanism made for marginals (``made_for_marginals``: ``fourier``,
    ``optimized_marginals``) named for a rectangle workload it does not answer: some of its
    rectangles reach what the design does not measure (infinite error, or not estimable),
    so the release would state infinite errors.  Reads the design only (public).  Where every
    rectangle is answered (e.g. ``fourier`` of order 2 on two axes) it is accepted.
    ``option``: the command-line option that named it (``--mechanism``, ``--mechanisms``),
    for a message in its terms; None: Python's names."""
    if not getattr(mechanism, "made_for_marginals", False):
        return
    shape = check_shape(shape)
    workload = check_grid_workload(workload)
    if workload == "marginals":
        return
    model = mechanism.error_model(shape, epsilon, delta=delta)
    try:
        error = workload_error(model, shape, workload, order)
    except ParameterError:  # the Fourier estimate refuses rectangles restricted on more axes than its order
        error = math.inf
    if math.isfinite(error):
        return
    order = int(mechanism.order)
    if option is None:
        named, made_for = f"mechanism={mechanism.name!r}", f"workload='marginals', order={order}"
        asked = f"workload={workload!r}" if isinstance(workload, str) else "the Rectangles given as workload"
        suited = ", ".join(repr(m) for m in RECTANGLE_MECHANISMS) + " or 'auto'"
        suggestion = f"mechanism={suited}"
    else:
        named, made_for = f"{option} {mechanism.name}", "--workload marginals"
        asked = f"--workload {workload}"
        suited = ", ".join(RECTANGLE_MECHANISMS[:-1]) + f" or {RECTANGLE_MECHANISMS[-1]}"
        suggestion = f"{option} {suited}" + (" (or auto)" if option == "--mechanism" else "")
    raise ParameterError(
        f"{named} answers marginals of up to {order} axes ({made_for}), not every query of {asked} on this "
        f"{len(shape)}-axis grid (some would have no finite error); for rectangles use {suggestion}"
    )


def _axis_singular_sum(n: int, kind: str) -> float:
    """Sum of the singular values of one axis' 1-D workload, all ranges or prefixes (closed
    forms, O(n))."""
    return singular_value_sum(all_range_singular_values(n) if kind == "all" else prefix_singular_values(n))


def _marginal_singular_sum(shape, order: int) -> float:
    """Sum of the singular values of all ``order``-way marginals.  Their Gram is a sum of
    Kronecker products of I and J = 1 1^T, diagonal in one basis: on each axis the constant
    vector (J: n_a, I: 1) or its complement (J: 0, I: 1).  The eigenvector that is a complement
    on the axes S has eigenvalue sum over marginal sets M containing S of prod_{a not in M} n_a,
    with multiplicity prod_{a in S} (n_a - 1)."""
    k = len(shape)
    sets = list(itertools.combinations(range(k), order))
    total = 0.0
    for size in range(order + 1):
        for complement in itertools.combinations(range(k), size):
            eig = sum(math.prod(shape[a] for a in range(k) if a not in m) for m in sets if set(complement) <= set(m))
            total += math.prod(shape[a] - 1 for a in complement) * math.sqrt(eig)
    return total


def _axis_kind(workload: str) -> str:
    """The 1-D workload on every axis of all rectangles ("all" ranges) or dominance ("prefix")."""
    return "all" if workload == "all-rectangles" else "prefix"


def _rectangle_queries(shape, kind: str) -> int:
    """The queries of all rectangles (n (n + 1) / 2 ranges per axis) or of dominance counts (n
    prefixes per axis) on ``shape``."""
    return math.prod(n * (n + 1) // 2 if kind == "all" else n for n in shape)


def svd_bound(shape, workload, epsilon, delta=0.0, *, order: int = 2, noise="auto") -> float:
    """Lower bound on the mean squared error per query of any matrix mechanism on a k-D
    workload (Li and Miklau, "Optimal Error of Query Sets under the Differentially-Private
    Matrix Mechanism", ICDT 2013): v (sum of singular values of W)^2 / (cells x queries), v =
    :func:`dprange.analysis.noise_variance_floor` for ``noise`` (the least variance per unit of
    sensitivity of dprange's noise of that kind), as :func:`dprange.analysis.svd_bound` in 1-D.
    The singular values of a Kronecker workload (all or prefix rectangles) are the products of
    the per-axis ones, so their sum is the product of the per-axis sums (closed forms,
    :func:`dprange.workloads.ranges.all_range_singular_values` and
    :func:`~dprange.workloads.ranges.prefix_singular_values`: O(n) per axis, any side); marginals have
    a closed form too (:func:`_marginal_singular_sum`); explicit rectangles eigendecompose their
    cells x cells Gram matrix (:func:`_rectangles_singular_sum`, grids of at most
    :data:`RECTANGLES_SVD_MAX_CELLS` cells)."""
    shape = check_shape(shape)
    workload = check_grid_workload(workload)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if isinstance(workload, Rectangles):
        if tuple(workload.grid) != tuple(shape):
            raise ParameterError(f"the rectangles are on a {list(workload.grid)} grid, not {list(shape)}")
        singular_sum = _rectangles_singular_sum(workload)
        queries = workload.shape[0]
    elif workload == "marginals":
        order = check_order(order, shape)
        singular_sum = _marginal_singular_sum(shape, order)
        queries = sum(math.prod(shape[a] for a in m) for m in itertools.combinations(range(len(shape)), order))
    else:
        kind = _axis_kind(workload)
        singular_sum = math.prod(_axis_singular_sum(n, kind) for n in shape)
        queries = _rectangle_queries(shape, kind)
    return noise_variance_floor(epsilon, delta, noise) * singular_sum**2 / math.prod(shape) / queries


#: Largest grid whose explicit rectangles get an SVD bound (:func:`_rectangles_singular_sum`:
#: an eigendecomposition of the cells x cells Gram, O(cells^3); 1-D workloads without a closed
#: form stop at 4096 bins likewise in ``dprange error``).
RECTANGLES_SVD_MAX_CELLS = 4096


def _rectangles_singular_sum(workload: Rectangles) -> float:
    """Sum of the singular values of explicit rectangles: the square roots of the eigenvalues of
    W^T W, formed a block of columns at a time through the rectangles' summed-area products
    (no m x cells matrix: O(m + cells) a column)."""
    cells = workload.shape[1]
    if cells > RECTANGLES_SVD_MAX_CELLS:
        raise ParameterError(
            f"the SVD bound of explicit rectangles eigendecomposes a cells x cells matrix; use a grid of at most "
            f"{RECTANGLES_SVD_MAX_CELLS} cells (got {cells})"
        )
    gram = np.empty((cells, cells))
    identity = np.eye(cells)
    step = max(1, 4_000_000 // max(workload.shape[0], cells))  # ~32 MB of W X at a time
    for start in range(0, cells, step):
        block = identity[:, start : start + step]
        gram[:, start : start + step] = workload._apply_adjoint(workload._apply(block))  # O((m + cells) b)
    return float(np.sqrt(np.clip(np.linalg.eigvalsh(gram), 0.0, None)).sum())  # O(cells^3)


@functools.lru_cache(maxsize=64)
def _axis_l2_optimum(n: int, kind: str) -> float:
    """The dual value of :func:`dprange.optimize.l2_optimum.l2_optimum` for one axis' all ranges or
    prefixes (a lower bound within 1e-6 of that axis' optimum)."""
    return l2_optimum((AllRange(n) if kind == "all" else Prefix(n)).gram()).bound


def l2_optimum_bound(shape, workload, epsilon, delta=0.0, *, order: int = 2, noise="auto") -> float:
    """Lower bound on the mean squared error per query of any matrix mechanism on all or prefix
    rectangles, at least :func:`svd_bound`: v prod_a OPT_a / queries, OPT_a the least
    trace(G_a X_a^-1) over strategies with unit L2 columns on axis a
    (:func:`dprange.analysis.l2_optimum_bound` in 1-D), v the noise floor.

    For a Kronecker workload the L2 program's optimum is the Kronecker product of the axes'
    optima: at each axis' optimal dual weights mu_a, trace((M_a^1/2 G_a M_a^1/2)^1/2) =
    sum mu_a = OPT_a (the dual is stationary in the scale of mu_a), so the product weights give
    the product G_a's dual the value 2 prod OPT_a - prod OPT_a = prod OPT_a, which the product
    of the optimal strategies reaches (its columns have unit norm, its trace is the product).
    Under (epsilon, delta) it is the least error of any matrix mechanism with dprange's Gaussian
    (add/remove); under epsilon-DP a valid bound.  Each axis n <= 1024 (its own O(n^3) steps;
    kept per side and kind for the process).

    Marginals (``order``-way): the SVD bound is their exact L2 optimum.  Permuting the values
    of any axis maps the set of marginal queries onto itself, so the program (convex, and
    invariant under those permutations) has an optimum averaged over them, whose diagonal is
    constant (the permutations reach every cell from every other); with a constant diagonal
    the column constraints are their average, the SVD bound's relaxation, so both agree
    (checked against the dense solve in tests/optimize/test_l2_optimum.py)."""
    shape = check_shape(shape)
    workload = check_grid_workload(workload)
    if workload == "marginals":
        return svd_bound(shape, workload, epsilon, delta, order=order, noise=noise)
    if workload not in ("all-rectangles", "prefix-rectangles"):
        raise ParameterError("l2_optimum_bound covers all-rectangles, prefix-rectangles and marginals")
    factor = noise_variance_floor(check_epsilon(epsilon), check_delta(delta), noise)
    kind = _axis_kind(workload)
    for n in shape:
        check_l2_optimum_bins(n)
    optimum = math.prod(_axis_l2_optimum(n, kind) for n in shape)
    return factor * optimum / _rectangle_queries(shape, kind)


def grid_candidates(
    shape, *, neighbours="add_remove", noise="auto", fast=False, workload=None, delta=0.0, order: int = 2
) -> list:
    """Every configuration ``auto`` ranks on ``shape``, from the registry's auto entries.
    With ``workload`` (as :func:`select_grid` passes it, with ``delta`` and ``order``) also the
    optimised mechanisms for that workload, whose strategies depend on it and not on the shape
    alone (the registry entries' ``workload_candidates``:
    :func:`dprange.mechanisms.optimized_grid.kd_auto_candidates`)."""
    out = []
    for entry in GRID_MECHANISMS.values():
        if entry.auto:
            out.extend(entry.auto_candidates(shape, neighbours=neighbours, noise=noise, fast=fast))
    if workload is not None:
        name = check_grid_workload(workload)  # a name, or the Rectangles themselves
        for entry in GRID_MECHANISMS.values():
            if entry.auto and entry.workload_candidates is not None:
                found = entry.workload_candidates(
                    shape, workload=name, delta=delta, order=order, neighbours=neighbours, noise=noise
                )
                out.extend(found)
    return out


def select_grid(
    shape,
    epsilon,
    *,
    workload="all-rectangles",
    delta=0.0,
    neighbours="add_remove",
    noise="auto",
    order: int = 2,
    candidates=None,
):
    """The k-D mechanism with the least exact expected error (:func:`expected_error`) on
    ``workload`` (default all rectangles), chosen from public parameters only: the shape,
    epsilon, delta, the relation and the noise.  Returns a
    :class:`dprange.analysis.Selection` (ranked table, lowest error first; ties go to the
    first candidate); candidates that cannot run on the shape are listed as excluded."""
    shape = check_shape(shape)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    workload = check_grid_workload(workload)
    if workload == "marginals":
        order = check_order(order, shape)
    if candidates is None:
        pool = grid_candidates(shape, neighbours=neighbours, noise=noise, workload=workload, delta=delta, order=order)
    else:
        pool = list(candidates)
    ranked, excluded = [], []
    for mech in pool:
        try:
            error = expected_error(mech, shape, workload, epsilon, delta=delta, order=order)
        except ParameterError as exc:
            excluded.append((mech, str(exc)))
            continue
        if math.isfinite(error):
            ranked.append(Candidate(mech, error))
        else:
            excluded.append((mech, "the expected error is not finite"))
    if not ranked:
        raise ParameterError(f"no k-D mechanism can release a {list(shape)} grid: {excluded[0][1] if excluded else ''}")
    ranked.sort(key=lambda c: c.error)
    name = workload if isinstance(workload, str) else "rectangles"
    described = {"name": name, "shape": list(shape), **({"order": order} if name == "marginals" else {})}
    return Selection(ranked[0].mechanism, ranked[0].error, ranked, described, excluded)

"""Exact expected error of mechanisms on workloads, optimal parameters, automatic choice.

A linear mechanism with least-squares inference has an unbiased estimate whose covariance
does not depend on the data, so the error of every answer is known before any data is
touched, and choosing a mechanism by it costs no privacy (Li, Hay, Rastogi, Miklau,
McGregor, "Optimizing Linear Counting Queries Under Differential Privacy", PODS 2010: the
error of the matrix mechanism; Qardaji, Yang, Li, "Understanding Hierarchical Methods for
Differentially Private Histograms", PVLDB 2013, sections 3-5; Rameshwar and Tandon,
"Optimal Tree-Based Mechanisms for Differentially Private Approximate CDFs", 2024,
section IV).

* ``expected_error``: the average over the workload's queries of the variance of the answer
  (counts squared).  ``max_error``: the largest such variance (for ``Prefix`` under the
  replace model this is the squared l-infinity error of Rameshwar and Tandon, times n^2).
* Fast paths (no n x n matrix): range workloads use the mechanisms' O(depth) range
  variances.  ``AllRange`` uses, with prefixes P_k = x_0 + ... + x_{k-1},

      sum over all ranges of Var = (n + 1) sum_k Var(P_k) - Var(sum_k P_k),

  (pair every two of the n + 1 prefix points; sum_k P_k = sum_i (n - i) x_i is one linear
  query), so it costs O(n depth) for n = 2^20 in about a second.
* ``svd_bound``: the lower bound on the total error of any matrix mechanism (Li and Miklau,
  "Optimal Error of Query Sets under the Differentially-Private Matrix Mechanism", ICDT
  2013): v (1/n)(sum of singular values of W)^2, v the least noise variance per unit of
  sensitivity that dprange's noise of that kind can have (:func:`noise_variance_floor`).
  ``l2_optimum_bound``: the tighter bound v OPT, OPT the exact optimum of the matrix mechanism
  with L2 sensitivity (:mod:`dprange.optimal_l2`; Yuan, Yang, Zhang and Hao, KDD 2016).
"""

from __future__ import annotations

import copy
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from ._lazy import lazy_module
from ._validation import check_delta, check_epsilon, check_neighbours, fit_budget
from .errors import ParameterError
from .inference.covering import direct_range_variance  # noqa: F401 - re-exported (its former home)
from .inference.error_sums import variance_sums
from .mechanisms import Hierarchical, Mechanism, hierarchy_candidates, optimal_budgets, resolve_noise
from .noise import discrete_gaussian_variance, gaussian_sigma
from .optimal_l2 import check_l2_optimum_bins, l2_optimum, l2_replace_optimum
from .optimized import auto_pool
from .progress import tracked
from .registry import MECHANISMS
from .workloads import (
    AllRange,
    Explicit,
    Identity,
    Prefix,
    Workload,
    check_workload_bins,
    make_workload,
    not_a_workload,
    singular_value_sum,
)

optimize = lazy_module("scipy.optimize")  # imported on first use: ~0.3 s that `import dprange` skips

#: Largest number of queries whose variances are listed one by one (max_error on AllRange).
MAX_LISTED_QUERIES = 20_000_000


def _resolve(workload, n):
    if isinstance(workload, str):
        if n is None:
            raise ParameterError("give n when the workload is named")
        return make_workload(workload, n)
    if not isinstance(workload, Workload):
        raise not_a_workload(workload)
    check_workload_bins(workload, n)
    return workload


def query_variances(model, workload: Workload) -> np.ndarray:
    """The exact variance of every query of ``workload`` under an error model."""
    if workload.m > MAX_LISTED_QUERIES:
        raise ParameterError(f"{workload.m} queries are too many to list; use expected_error")
    one_pass = _one_pass_variances(model, workload)
    if one_pass is not None:
        return one_pass.prefix if isinstance(workload, Prefix) else one_pass.bins
    lohi = workload.ranges()
    if lohi is not None:
        return np.asarray(model.range_variance(*lohi), dtype=float)
    W = workload.dense()
    out = np.empty(W.shape[0])
    step = max(1, 2_000_000 // max(workload.n, 1))
    for start in range(0, W.shape[0], step):
        out[start : start + step] = model.query_variance(W[start : start + step])
    return out


def _one_pass_variances(model, workload: Workload):
    """The model's one-pass prefix / bin variances (tree models) when the workload's queries
    are exactly the n prefixes or the n bins, else None."""
    if type(workload) not in (Prefix, Identity) or not hasattr(model, "prefix_variances"):
        return None
    return model.prefix_variances()


def _prefix_variances(model, n: int) -> np.ndarray:
    """Var(x_0 + ... + x_k) for every k: one tree pass when the model has it, else n ranges."""
    if hasattr(model, "prefix_variances"):
        return model.prefix_variances().prefix
    ks = np.arange(n, dtype=np.int64)
    return np.asarray(model.range_variance(np.zeros(n, dtype=np.int64), ks), dtype=float)


def workload_error(model, workload: Workload) -> float:
    """Average variance over the workload's queries, with the all-range identity.

    Prefix, bin and all-range workloads on tree and Haar models take the sums of their
    variances from one blocked pass (:func:`~dprange.inference.error_sums.variance_sums`),
    in O(depth x block) memory.
    """
    n = workload.n
    if type(workload) in (AllRange, Prefix, Identity):
        sums = variance_sums(model)  # trees and Haar: no n-vector of variances (issue 16)
        if sums is not None:
            total = {AllRange: sums.all_ranges(n), Prefix: sums.prefix, Identity: sums.bins}[type(workload)]
            return total / workload.m
    if isinstance(workload, AllRange):
        prefix = _prefix_variances(model, n)
        weights = (n - np.arange(n)).astype(float)
        combined = float(np.asarray(model.query_variance(weights[None, :])).ravel()[0])
        return ((n + 1) * prefix.sum() - combined) / workload.m
    return float(query_variances(model, workload).mean())


def _require_linear(mechanism: Mechanism) -> None:
    """The error formulas hold for least-squares inference only (NNLS / L1 are non-linear)."""
    inference = getattr(mechanism, "inference", "gls")
    if inference != "gls":
        raise ParameterError(
            f"the exact error is known for least-squares (gls) inference only, not {inference}; "
            "use Release.bootstrap for its error, or rank the gls version of the mechanism"
        )


def expected_error(mechanism: Mechanism, workload, epsilon, *, delta=0.0, n=None) -> float:
    """Exact average variance (counts^2) of ``mechanism``'s answers to ``workload``.

    Least-squares (gls) inference only: for NNLS / L1 inference it raises ParameterError
    rather than return the least-squares number, which is not their error."""
    _require_linear(mechanism)
    workload = _resolve(workload, n)
    return workload_error(mechanism.error_model(workload.n, epsilon, delta=delta), workload)


def max_error(mechanism: Mechanism, workload, epsilon, *, delta=0.0, n=None) -> float:
    """Exact largest variance over the workload's queries (worst query; gls inference only)."""
    _require_linear(mechanism)
    workload = _resolve(workload, n)
    return float(query_variances(mechanism.error_model(workload.n, epsilon, delta=delta), workload).max())


def noise_variance_floor(epsilon, delta=0.0, noise="auto") -> float:
    """The least variance a noise draw of dprange's ``noise`` kind at (epsilon, delta) can have
    per unit of sensitivity: the factor v of :func:`svd_bound`.

    Li and Miklau's bound (ICDT 2013) says trace(W (B^T B)^-1 W^T) >= (sum sigma)^2 / (n c^2)
    for any strategy B whose columns have L2 norm at most c.  Scale every row i of a strategy A
    by 1 / sqrt(var_i), its noise's standard deviation (GLS does exactly this): the error is
    then trace(W (B^T B)^-1 W^T), and v is 1 / c^2 for the worst column of B.

    * laplace_float: 2 / eps^2.  Continuous Laplace with L1 sensitivity 1: ||b_j||_2 <=
      ||b_j||_1 = sum_i |a_ij| / (sqrt(2) b_i) <= eps / sqrt(2).
    * discrete_laplace: 1 / (2 sinh^2(eps / 2)) (1.84 at eps = 1, against 2; 0.110 against
      0.222 at eps = 3).  A row with scale b_i has variance 1 / (2 sinh^2(e_i / 2)), e_i = 1 / b_i,
      and the privacy condition is sum_i |a_ij| e_i <= eps for every column.  The strategy is
      an integer matrix, so a row with a_ij != 0 has e_i <= eps; as sinh(x) / x increases,
      sinh(e_i / 2) <= (e_i / eps) sinh(eps / 2), hence ||b_j||_1 = sqrt(2) sum_i |a_ij|
      sinh(e_i / 2) <= sqrt(2) sinh(eps / 2).  Reached by Flat on the identity workload.
    * gaussian (the discrete Gaussian, calibrated by :func:`dprange.noise.gaussian_sigma`):
      Var_DG(sigma), the variance of the discrete Gaussian with parameter sigma =
      gaussian_sigma(eps, delta) (20.53 at eps = 1, delta = 1e-6; Li and Miklau's classical
      factor 2 log(2 / delta) / eps^2 = 29.0 would not bound dprange's mechanisms).  The
      condition is sum_i a_ij^2 / sigma_i^2 <= 1 / sigma^2, so a row with a_ij != 0 has
      sigma_i >= sigma; Var_DG(s) / s^2 increases with s (checked on a grid in the tests), so
      Var_DG(sigma_i) >= sigma_i^2 Var_DG(sigma) / sigma^2 and ||b_j||_2^2 <= 1 / Var_DG(sigma).
      Reached by Flat on the identity workload.

    Sampled scales are never below the requested ones (:func:`dprange.noise.effective_scale`)
    and every variance above increases with the scale, so the floor holds for the noise as drawn.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    kind = resolve_noise(noise, delta)
    if kind == "laplace_float":
        return 2.0 / epsilon / epsilon  # 0 at a huge epsilon (epsilon**2 would overflow)
    if kind == "discrete_laplace":
        if epsilon > 700.0:  # the same value, 2 e^-eps / (1 - e^-eps)^2, where sinh^2 would overflow
            return 2.0 * math.exp(-epsilon) / math.expm1(-epsilon) ** 2
        return 0.5 / math.sinh(epsilon / 2.0) ** 2
    return discrete_gaussian_variance(gaussian_sigma(epsilon, delta) ** 2)


def svd_bound(workload, epsilon, delta=0.0, *, n=None, noise="auto") -> float:
    """Lower bound on the average error per query of any matrix mechanism for ``workload``
    (Li and Miklau, ICDT 2013): v (sum of singular values of W)^2 / (n m), v =
    :func:`noise_variance_floor` for ``noise`` (as the mechanisms take it: "auto" is discrete
    Laplace when delta = 0, else the discrete Gaussian).  No mechanism of dprange with that
    noise has a lower :func:`expected_error` (least-squares inference on a data-independent
    strategy) on the workload under add/remove neighbours; NNLS / L1 inference and the
    data-aware mechanisms are not linear, and their error on given data can fall below it.
    ``noise="laplace_float"`` gives the textbook epsilon-DP bound (2 / eps^2) that HDMM's
    experiments compare strategies against.

    The singular values have closed forms for all ranges, prefixes and the identity
    (:meth:`dprange.workloads.Workload.singular_values`: O(n), any n); other workloads
    eigendecompose W^T W, O(n^3), n <= 8192.
    """
    workload = _resolve(workload, n)
    factor = noise_variance_floor(epsilon, delta, noise)
    singular_sum = singular_value_sum(workload.singular_values())
    return factor * singular_sum**2 / workload.n / workload.m


def l2_optimum_bound(workload, epsilon, delta=0.0, *, n=None, noise="auto", neighbours="add_remove") -> float:
    """Lower bound on the average error per query of any matrix mechanism for ``workload``,
    at least :func:`svd_bound`: v OPT / m, where OPT is the least trace(G (A^T A)^-1) over all
    strategies A with columns of L2 norm at most 1 (a convex program in A^T A: Yuan, Yang,
    Zhang and Hao, KDD 2016; :mod:`dprange.optimal_l2`) and v = :func:`noise_variance_floor`.
    OPT is taken as the dual value the solver reached, a lower bound at every step of it,
    within a relative 1e-6 of the optimum (1e-4 above 1024 bins).  Under (epsilon, delta) it is the least error of any
    matrix mechanism with dprange's Gaussian noise (add/remove neighbours), reached up to
    quantisation by ``Optimized(template="l2-optimal")``; the SVD bound is this program with
    every column weight equal, so it lies below.  Under epsilon-DP it is a valid bound (an L1
    column norm is at least its L2 norm) that need not be reachable.  O(n^3) a step, 5 to 20
    steps: n <= 4096 (3-4 CPU s at 1024, 100-170 at 4096; :func:`dprange.optimal_l2.l2_optimum`).

    ``neighbours="replace"``: the same for replace neighbours, whose least squares use the
    public total and whose sensitivity is the largest pairwise column distance
    (:func:`dprange.optimal_l2.l2_replace_optimum`, n <= 256): the least error of any matrix
    mechanism with dprange's Gaussian under replace, reached up to quantisation by
    ``Optimized(template="l2-optimal", neighbours="replace")``."""
    workload = _resolve(workload, n)
    factor = noise_variance_floor(epsilon, delta, noise)
    replace = check_neighbours(neighbours) == "replace"
    check_l2_optimum_bins(workload.n, replace=replace)
    solve = l2_replace_optimum if replace else l2_optimum
    return factor * solve(workload.gram()).bound / workload.m


# ----------------------------------------------------------------------------- choice


@dataclass
class Candidate:
    mechanism: Mechanism
    error: float

    def row(self) -> dict:
        return {"mechanism": repr(self.mechanism), "expected_error": self.error, "rmse": math.sqrt(self.error)}


@dataclass
class Selection:
    """The best mechanism and the ranked table of candidates (lowest error first)."""

    mechanism: Mechanism
    error: float
    table: list = field(default_factory=list)
    workload: dict = field(default_factory=dict)
    #: (mechanism, reason) for every candidate left out of the ranking.
    excluded: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "recommended": repr(self.mechanism),
            "expected_error": self.error,
            "rmse": math.sqrt(self.error),
            "workload": self.workload,
            "candidates": [c.row() for c in self.table],
            "excluded": [{"mechanism": repr(m), "reason": reason} for m, reason in self.excluded],
        }


#: Threads that rank candidates at once (numpy releases the GIL in its loops over blocks).
RANK_WORKERS = 2

#: Smallest n at which candidates are ranked on several threads (below, threads cost more than they save).
PARALLEL_RANK_MIN_N = 2**18


def _candidate_errors(candidates: list, workload, epsilon, delta):
    """(expected error, None) or (None, reason it is refused) for every candidate, in order.

    From :data:`PARALLEL_RANK_MIN_N` bins the candidates run on :data:`RANK_WORKERS` threads;
    each error is computed by the same code either way, so the results are identical."""

    def one(mech):
        try:
            return expected_error(mech, workload, epsilon, delta=delta), None
        except ParameterError as exc:
            return None, str(exc)

    workers = min(RANK_WORKERS, os.cpu_count() or 1, len(candidates))
    if workers < 2 or workload.n < PARALLEL_RANK_MIN_N:
        yield from map(one, candidates)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dprange-rank") as pool:
        yield from pool.map(one, candidates)  # in candidate order, whatever finishes first


def _rank(candidates, workload, epsilon, delta, excluded: list | None = None) -> list[Candidate]:
    """Candidates with a finite expected error, lowest first.  The others (an error raised, or
    a NaN / infinite error) are never ranked: they go to ``excluded`` with the reason.  Raises
    ParameterError when no candidate is left."""
    ranked = []
    excluded = [] if excluded is None else excluded
    candidates = list(candidates)
    errors = _candidate_errors(candidates, workload, epsilon, delta)
    for mech, (err, reason) in zip(
        candidates, tracked(errors, "ranking candidates", total=len(candidates), large=workload.n >= 2**16)
    ):
        if reason is not None:
            excluded.append((mech, reason))
            continue
        if not math.isfinite(err):
            excluded.append((mech, f"its expected error is {err} (not finite)"))
            continue
        ranked.append(Candidate(mech, err))
    if not ranked:
        if not excluded:
            raise ParameterError("no candidate mechanisms were given; pass at least one")
        mech, reason = excluded[0]
        raise ParameterError(
            f"no candidate mechanism applies to this workload ({len(excluded)} excluded; {mech!r}: {reason})"
        )
    ranked.sort(key=lambda c: c.error)
    return ranked


def optimized_budget(
    workload, n, epsilon, branching, *, delta=0.0, neighbours="add_remove", noise="auto", measure_root=True, maxiter=60
) -> tuple[list, float]:
    """The per-level budget split minimising the exact expected error of a hierarchy.

    Searches the simplex (softmax parameters, L-BFGS-B with numerical gradients) starting
    from the better of uniform and geometric.  Returns (budget list, error).  Each step
    costs a few exact error evaluations: meant for n up to ~2^16.
    """
    workload = _resolve(workload, n)
    starts = [
        Hierarchical(branching, rule, measure_root=measure_root, neighbours=neighbours, noise=noise)
        for rule in ("uniform", "geometric")
    ]
    ranked = _rank(starts, workload, epsilon, delta)
    best = ranked[0]
    strategy = best.mechanism.strategy(workload.n)
    start = best.mechanism.budget_fractions(strategy, epsilon)

    def error_of(theta):
        f = np.exp(theta - theta.max())
        f = f / f.sum()
        mech = Hierarchical(
            branching, fit_budget(f * epsilon, epsilon), measure_root=measure_root, neighbours=neighbours, noise=noise
        )
        try:
            return expected_error(mech, workload, epsilon, delta=delta)
        except ParameterError:  # a level's budget too small to sample: never the optimum
            return math.inf

    # A split whose level budget is too small scores inf; the numerical gradient then meets
    # inf - inf, which numpy reported to users as a RuntimeWarning on every such release.
    with np.errstate(invalid="ignore"):
        result = optimize.minimize(error_of, np.log(start), method="L-BFGS-B", options={"maxiter": maxiter})
    f = np.exp(result.x - result.x.max())
    f = f / f.sum()
    budget = list(f * epsilon)
    budget[-1] = epsilon - sum(budget[:-1])
    budget = fit_budget(budget, epsilon)  # exact sum <= epsilon (Hierarchical refuses more)
    err = error_of(np.log(np.asarray(budget) / epsilon))
    if err > best.error:  # never report worse than the starting rule
        return fit_budget(start * epsilon, epsilon), best.error
    return budget, err


def default_candidates(n, *, neighbours="add_remove", noise="auto", fast=False) -> list[Mechanism]:
    """The mechanisms ``auto`` ranks on n bins: every registered mechanism that ``auto``
    considers, in registration order, as its registration configures it (Flat, Wavelet, and
    hierarchies over branching factors, budget rules and root choices; a coarse grid when ``fast``)."""
    return [
        mech
        for name in MECHANISMS.names(auto=True)
        for mech in MECHANISMS[name].auto_candidates(n, neighbours=neighbours, noise=noise, fast=fast)
    ]


def optimal_hierarchy(
    workload,
    n=None,
    epsilon=1.0,
    *,
    delta=0.0,
    neighbours="add_remove",
    noise="auto",
    optimize_budget: bool | None = None,
) -> Selection:
    """The hierarchy (branching, budget rule or optimised split, root) with least exact error.

    ``optimize_budget`` (default: when n <= 2^14) refines the best few with
    :func:`optimized_budget`.  The table lists every configuration tried.
    """
    workload = _resolve(workload, n)
    epsilon = check_epsilon(epsilon)
    candidates = hierarchy_candidates(workload.n, neighbours=neighbours, noise=noise)
    if isinstance(workload, Prefix):
        # Rameshwar and Tandon (2024), Theorem IV.2: budgets proportional to (b_l - 1)^(1/3) for the CDF workload
        for mech in list(candidates):
            if mech.budget == "uniform" and not mech.measure_root:
                branching = mech.strategy(workload.n).branching
                candidates.append(
                    Hierarchical(
                        list(branching),
                        optimal_budgets(branching, epsilon),
                        measure_root=False,
                        neighbours=neighbours,
                        noise=noise,
                    )
                )
    ranked = _rank(candidates, workload, epsilon, delta)
    if optimize_budget is None:
        optimize_budget = workload.n <= 2**14
    if optimize_budget:
        for cand in ranked[:3]:
            mech = cast(Hierarchical, cand.mechanism)  # ranked holds only hierarchies here
            budget, err = optimized_budget(
                workload,
                None,
                epsilon,
                mech.branching,
                delta=delta,
                neighbours=neighbours,
                noise=noise,
                measure_root=mech.measure_root,
            )
            ranked.append(
                Candidate(
                    Hierarchical(
                        mech.branching, budget, measure_root=mech.measure_root, neighbours=neighbours, noise=noise
                    ),
                    err,
                )
            )
        ranked.sort(key=lambda c: c.error)
    return Selection(ranked[0].mechanism, ranked[0].error, ranked, workload.describe())


#: Largest n for which :func:`select` refines the best hierarchy's budget split (about 2 s
#: at 2^16 for all ranges; each step of the search costs a few exact error evaluations).
OPTIMIZE_BUDGET_MAX_N = 2**16


def select(
    workload,
    n=None,
    epsilon=1.0,
    *,
    delta=0.0,
    neighbours="add_remove",
    noise="auto",
    candidates=None,
    fast: bool | None = None,
    optimize_budget: bool | None = None,
) -> Selection:
    """Rank candidate mechanisms by exact expected error on ``workload``; return the best.

    Candidates default to Flat, Wavelet and hierarchies over a grid of branching factors,
    budget rules and root choices (a coarser grid when n > 2^16, so that n = 2^20 takes
    seconds), plus the best hierarchy with its per-level budget split optimised by
    :func:`optimized_budget` (``optimize_budget``, default when n <= 2^16 and the
    candidates are the default ones).  Data are not touched: choosing costs no privacy.
    """
    workload = _resolve(workload, n)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    check_neighbours(neighbours)
    if optimize_budget is None:
        optimize_budget = candidates is None and workload.n <= OPTIMIZE_BUDGET_MAX_N
    not_cached: list = []
    if candidates is None:
        if fast is None:
            fast = workload.n > 2**16
        candidates = default_candidates(workload.n, neighbours=neighbours, noise=noise, fast=fast)
        # The optimised strategy needs the workload, not only n (see dprange.optimized.auto_candidates).
        optimised, not_cached = auto_pool(workload, delta, neighbours=neighbours, noise=noise)
        candidates = [*candidates, *optimised]
    excluded: list = []
    ranked = _rank(candidates, workload, epsilon, delta, excluded)
    excluded.extend(not_cached)  # the optimised strategies auto could rank once they are cached
    if optimize_budget:
        ranked = _with_optimized_split(ranked, workload, epsilon, delta, neighbours, noise)
    return Selection(ranked[0].mechanism, ranked[0].error, ranked, workload.describe(), excluded)


def _with_optimized_split(ranked, workload, epsilon, delta, neighbours, noise) -> list[Candidate]:
    """``ranked`` plus the best hierarchy with its optimised budget split, re-ranked."""
    trees = [c.mechanism for c in ranked if isinstance(c.mechanism, Hierarchical)]
    if not trees:
        return ranked
    best = trees[0]
    if len(best.strategy(workload.n).measured_depths) < 2:
        return ranked  # one measured level: nothing to split
    budget, err = optimized_budget(
        workload,
        None,
        epsilon,
        best.branching,
        delta=delta,
        neighbours=neighbours,
        noise=noise,
        measure_root=best.measure_root,
    )
    tuned = Hierarchical(best.branching, budget, measure_root=best.measure_root, neighbours=neighbours, noise=noise)
    return sorted(ranked + [Candidate(tuned, err)], key=lambda c: c.error)


_SELECTION_CACHE: dict = {}
_CACHE_LIMIT = 64


def _cache_key(workload, n, epsilon, delta, neighbours, noise):
    """A key from public parameters, or None for workloads not named by (kind, n) alone."""
    if isinstance(workload, str):
        name = workload
    elif type(workload) in (AllRange, Prefix, Identity):
        name = workload.name
        n = workload.n if n is None else n
    else:
        return None
    return (name, n, float(epsilon), float(delta), neighbours, noise)


def auto_mechanism(workload, n, epsilon, *, delta=0.0, neighbours="add_remove", noise="auto") -> Mechanism:
    """The mechanism ``mechanism="auto"`` uses: :func:`select`'s choice, cached on the public
    parameters (workload, n, epsilon, delta, neighbours, noise); a fresh copy each call."""
    key = _cache_key(workload, n, epsilon, delta, neighbours, noise)
    if key is not None and key in _SELECTION_CACHE:
        return copy.deepcopy(_SELECTION_CACHE[key])
    chosen = select(workload, n, epsilon, delta=delta, neighbours=neighbours, noise=noise).mechanism
    if key is not None:
        if len(_SELECTION_CACHE) >= _CACHE_LIMIT:
            _SELECTION_CACHE.pop(next(iter(_SELECTION_CACHE)))
        _SELECTION_CACHE[key] = chosen
    return copy.deepcopy(chosen)


__all__ = [
    "AllRange",
    "Explicit",
    "Identity",
    "Prefix",
    "Selection",
    "auto_mechanism",
    "expected_error",
    "l2_optimum_bound",
    "max_error",
    "noise_variance_floor",
    "optimal_hierarchy",
    "optimized_budget",
    "query_variances",
    "select",
    "svd_bound",
]

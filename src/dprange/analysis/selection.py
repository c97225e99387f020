"""Choosing a 1-D mechanism by its exact expected error on the declared workload: ``select``
ranks the registered candidates (hierarchies of every branching and budget rule, the wavelet,
the optimised strategies), ``auto_mechanism`` caches the choice on public parameters, and
``optimized_budget`` tunes a hierarchy's per-level budgets (Qardaji, Yang and Li, PVLDB 2013).
"""

from __future__ import annotations

import copy
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from dprange._lazy import lazy_module

from .._validation import check_delta, check_epsilon, check_neighbours, fit_budget
from ..errors import ParameterError
from ..mechanisms.base import Mechanism
from ..mechanisms.basic import Hierarchical, hierarchy_candidates
from ..mechanisms.optimized import auto_pool
from ..progress import tracked
from ..registry import MECHANISMS
from ..strategies.budgets import optimal_budgets
from ..workloads.ranges import AllRange, Identity, Prefix
from .error import _resolve, expected_error

optimize = lazy_module("scipy.optimize")


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


#: Largest n for which :func:`select` refines the best hierarchy's budget split (each step of
#: the search costs a few exact error evaluations; timing: docs/analysis.md).
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
    budget rules and root choices (a coarser grid when n > 2^16, so that large n stay cheap),
    plus the best hierarchy with its per-level budget split optimised by
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
        # The optimised strategy needs the workload, not only n (see dprange.mechanisms.optimized.auto_candidates).
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

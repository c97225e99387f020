"""Optimal tree mechanisms for private CDFs (Rameshwar and Tandon, "Optimal Tree-Based
Mechanisms for Differentially Private Approximate CDFs", 2024).

Setting (the paper's formulas, re-derived here and checked against dense matrices): L bins, cumulative
counts C_j = c_1 + ... + c_j.  A level-uniform tree has branching b_l at level l = 1..h
(root first) and budget eps_l at level l; every node of level l gets noise of variance
v_l (Laplace of scale Delta/eps_l: v_l = 2 Delta^2 / eps_l^2; Delta = 2 in the replace
model, where the total n is public and the root is not noised, 1 in add/remove).

Estimators of C_j compared here, all exact:

* ``covering``: the sum of the noisy nodes that tile [1, j] (at most b_l - 1 per level).
  Var(C_j) = sum_l digit_l(j) v_l, so the squared l-infinity error (Theorem IV.1) is
  max_j Var(C_j) = sum_l (b_l - 1) v_l when L = prod b_l (j = L - 1 has every digit b_l - 1).
* ``from_below``: the covering nodes' from-below estimates (each node averaged with its
  refined children, inverse-variance weighted; Appendix B step 1).
* ``two_sided``: the from-below left estimate of C_j combined with n minus the from-below
  estimate of the bins after j, inverse-variance weighted (Appendix B step 2; replace model).
* ``gls``: full generalised least squares on the tree (dominates the others).

Optimal budgets (Theorem IV.2): for the covering l-infinity error sum_l (b_l - 1) / eps_l^2
under sum eps_l = eps, Lagrange gives eps_l proportional to (b_l - 1)^(1/3), and then
max Var = 2 Delta^2 (sum_l (b_l - 1)^(1/3))^3 / eps^2.

Baselines (section III): ``histogram`` (C_j = the sum of j noisy bins, each bin with the
whole budget eps) and ``direct`` (every C_j noised directly; one record changes up to L - 1
cumulative counts by 1 in the replace model, L in add/remove, which is the L1 sensitivity).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_epsilon, check_neighbours, check_positive_int
from ..errors import ParameterError
from ..inference.covering import direct_range_variance
from ..inference.tree import tree_error_model
from ..mechanisms.basic import Hierarchical
from ..privacy.noise import noise_variance
from ..strategies.budgets import optimal_budgets
from ..strategies.trees import TreeStrategy

ESTIMATORS = ("covering", "from_below", "two_sided", "gls")


def _sensitivity(neighbours: str) -> float:
    return 2.0 if neighbours == "replace" else 1.0


def level_variances(branching, budgets, *, neighbours="replace", noise="laplace_float") -> list:
    """Noise variance per depth 0..h (depth 0, the root, unmeasured)."""
    delta_l = _sensitivity(neighbours)
    return [None] + [float(noise_variance(noise, delta_l / e)) for e in budgets]


def prefix_variances(
    L: int, branching, budgets, *, estimator="covering", neighbours="replace", noise="laplace_float"
) -> np.ndarray:
    """Exact Var(C_j) for j = 1..L under a CDF tree (see the module doc for estimators)."""
    L = check_positive_int(L, "L")
    check_neighbours(neighbours)
    branching = tuple(int(b) for b in branching)
    if len(budgets) != len(branching):
        raise ParameterError("give one budget per level below the root")
    if estimator not in ESTIMATORS:
        raise ParameterError(f"estimator must be one of {', '.join(ESTIMATORS)}")
    known = neighbours == "replace"
    tree = TreeStrategy(L, branching, measure_root=False, known_total=known)
    variances = level_variances(branching, budgets, neighbours=neighbours, noise=noise)
    ends = np.arange(L, dtype=np.int64)  # C_j covers bins 0..j-1, i.e. hi = j - 1
    zeros = np.zeros(L, dtype=np.int64)
    if estimator == "covering":
        out = direct_range_variance(tree, variances, zeros, ends)
    else:
        model = tree_error_model(tree, variances, known_total=known)
        if estimator == "gls":
            out = model.range_variance(zeros, ends)
        else:
            below = [None] + list(model.from_below_variance[1:])
            left = direct_range_variance(tree, below, zeros, ends)
            out = left
            if estimator == "two_sided" and known:
                right = np.zeros(L)
                inner = ends < L - 1
                right[inner] = direct_range_variance(tree, below, ends[inner] + 1, np.full(inner.sum(), L - 1))
                out = np.where(inner, left * right / np.where(left + right > 0, left + right, 1.0), 0.0)
    if known:
        out = np.asarray(out, dtype=float).copy()
        out[-1] = 0.0  # C_L = n is public
    return np.asarray(out, dtype=float)


def linf_error(L, branching, budgets, **kwargs) -> float:
    """Squared l-infinity error max_j Var(C_j) (divide by n^2 for the CDF)."""
    return float(prefix_variances(L, branching, budgets, **kwargs).max())


def closed_form_linf(branching, budgets, *, neighbours="replace") -> float:
    """Theorem IV.1 for L = prod(b): sum_l (b_l - 1) 2 Delta^2 / eps_l^2 (Laplace)."""
    delta_l = _sensitivity(neighbours)
    return float(sum((b - 1) * 2.0 * (delta_l / e) ** 2 for b, e in zip(branching, budgets)))


def histogram_linf(L, epsilon, *, neighbours="replace") -> float:
    """Baseline: noisy bins (budget eps each bin), C_j summed; worst j = L - 1 (or L)."""
    delta_l = _sensitivity(neighbours)
    worst = L - 1 if neighbours == "replace" else L
    return worst * 2.0 * (delta_l / epsilon) ** 2


def direct_linf(L, epsilon, *, neighbours="replace") -> float:
    """Baseline: every C_j noised directly; L1 sensitivity L - 1 (replace) or L (add/remove)."""
    sens = (L - 1) if neighbours == "replace" else L
    return 2.0 * (max(sens, 1) / epsilon) ** 2


def _multiplicative_partitions(m: int, largest: int, limit: int):
    """Unordered factorisations of m into factors >= 2 (non-increasing), at most ``limit``."""
    out: list[tuple[int, ...]] = []

    def rec(rest, cap, acc):
        if len(out) >= limit:
            return
        if rest == 1:
            out.append(tuple(acc))
            return
        for f in range(min(cap, rest), 1, -1):
            if rest % f == 0:
                rec(rest // f, f, acc + [f])

    rec(m, largest, [])
    return out


def _balanced(L: int):
    """For every height, the near-equal integer factors (floor/ceil of L^(1/h)) covering L."""
    out = set()
    for h in range(1, max(1, math.ceil(math.log2(max(L, 2)))) + 1):
        base = max(2, int(math.floor(L ** (1.0 / h))))
        for k in range(h + 1):
            factors = (base + 1,) * k + (base,) * (h - k)
            if math.prod(factors) >= L:
                out.add(factors)
                break
        out.add((base + 1,) * h)
    for b in range(2, 65):
        h = max(1, math.ceil(math.log(L) / math.log(b) - 1e-12))
        while b**h < L:
            h += 1
        out.add((b,) * h)
    return out


@dataclass
class Structure:
    branching: tuple
    budgets: list
    error: float
    padded_bins: int

    def row(self) -> dict:
        return {
            "branching": list(self.branching),
            "budgets": self.budgets,
            "linf_error": self.error,
            "padded_bins": self.padded_bins,
        }


@dataclass
class StructureSearch:
    best: Structure
    runners_up: list = field(default_factory=list)

    def mechanism(self, *, neighbours="replace", noise="auto"):
        """The best structure as a configured :class:`~dprange.Hierarchical`."""
        return Hierarchical(
            list(self.best.branching), list(self.best.budgets), measure_root=False, neighbours=neighbours, noise=noise
        )


def best_structure(
    L: int,
    epsilon: float = 1.0,
    *,
    neighbours="replace",
    noise="laplace_float",
    estimator="covering",
    top: int = 10,
    max_partitions: int = 20000,
) -> StructureSearch:
    """Search integer tree structures for L bins with optimal budgets; least l-inf error first.

    Candidates: the ordered factorisations of L (every multiset of factors >= 2, in each
    distinct order for the top ones) and of padded domains L' >= L (near-equal factors for
    every height, equal b = 2..64).  Each multiset is scored by the closed form of Theorem
    IV.2 (exact when L' = L, an upper bound when padded); the promising padded ones and the
    runner-ups are then evaluated exactly (every j) in their best order.  ``estimator``
    other than "covering" re-scores the finalists exactly with that estimator.
    """
    L = check_positive_int(L, "L", minimum=2)
    epsilon = check_epsilon(epsilon)
    delta_l = _sensitivity(neighbours)
    unit = 2.0 * delta_l**2 / epsilon**2 if noise == "laplace_float" else None

    def bound(factors):
        if unit is None:
            return closed_form_linf(factors, optimal_budgets(factors, epsilon), neighbours=neighbours)
        return unit * sum((b - 1) ** (1.0 / 3.0) for b in factors) ** 3

    candidates = {tuple(sorted(p, reverse=True)) for p in _multiplicative_partitions(L, L, max_partitions)}
    candidates |= {tuple(sorted(p, reverse=True)) for p in _balanced(L)}
    scored = sorted(((bound(c), c) for c in candidates), key=lambda t: t[0])
    exact_best = min((s for s, c in scored if math.prod(c) == L), default=math.inf)
    finalists = [c for s, c in scored[: 4 * top]] + [c for s, c in scored if math.prod(c) > L and s < 1.5 * exact_best][
        :12
    ]
    results: dict[tuple[int, ...], Structure] = {}
    for multiset in dict.fromkeys(finalists):
        orders = (
            list(dict.fromkeys(itertools.permutations(multiset)))[:6]
            if math.prod(multiset) > L or estimator != "covering"
            else [multiset]
        )
        for order in orders:
            budgets = optimal_budgets(order, epsilon)
            if math.prod(order) == L and estimator == "covering":
                err = (
                    closed_form_linf(order, budgets, neighbours=neighbours)
                    if noise == "laplace_float"
                    else linf_error(L, order, budgets, neighbours=neighbours, noise=noise)
                )
            else:
                err = linf_error(L, order, budgets, estimator=estimator, neighbours=neighbours, noise=noise)
            if multiset not in results or err < results[multiset].error:
                results[multiset] = Structure(tuple(order), budgets, err, math.prod(order))
    # ties (to 10 significant digits, e.g. 16^3 vs padded 17^3 at L = 4096) go to the smaller domain
    ranked = sorted(results.values(), key=lambda s: (float(f"{s.error:.10g}"), s.padded_bins, len(s.branching)))
    return StructureSearch(ranked[0], ranked[1 : top + 1])

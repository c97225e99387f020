"""How a strategy's budget is split over its levels: uniform, geometric (Cormode et al., ICDE
2012), explicit lists, and the split that minimises a workload's error.
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_epsilon, fit_budget

BUDGET_RULES = ("uniform", "geometric")


def split_budget(weights, epsilon: float) -> list[float]:
    """Per-level budgets proportional to ``weights`` whose exact sum is at most epsilon."""
    weights = np.asarray(weights, dtype=float)
    return fit_budget([epsilon * w / weights.sum() for w in weights], epsilon)


def optimal_budgets(branching, epsilon: float) -> list[float]:
    """Per-level budgets minimising the worst prefix (CDF) error of a level-uniform tree with
    per-level branching ``branching`` (Rameshwar and Tandon, "Optimal Tree-Based Mechanisms
    for Differentially Private Approximate CDFs", 2024, Theorem IV.2):
    eps_l = eps (b_l - 1)^(1/3) / sum_k (b_k - 1)^(1/3); see :mod:`dprange.analysis.cdf_trees`."""
    epsilon = check_epsilon(epsilon)
    weights = np.array([(b - 1) ** (1.0 / 3.0) for b in branching], dtype=float)
    budgets = list(epsilon * weights / weights.sum())
    budgets[-1] = epsilon - sum(budgets[:-1])
    return fit_budget(budgets, epsilon)  # exact sum <= epsilon (Hierarchical refuses more)


def _bump(values: list[float]) -> list[float]:
    return [math.nextafter(v, math.inf) for v in values]

"""The basic 1-D mechanisms: Flat (one noisy count per bin), Hierarchical (a tree of noisy range
counts, Qardaji, Yang and Li, PVLDB 2013) and Wavelet (Privelet, Xiao, Wang and Gehrke, ICDE 2010).
"""

from __future__ import annotations

import numpy as np

from .._params import Flag, IntegerOrList, Param, RuleOrNumbers
from .._validation import check_budget_list, exact_sum, float_at_least
from ..registry import MECHANISMS, Citation
from ..strategies.budgets import BUDGET_RULES
from ..strategies.trees import HaarStrategy, TreeStrategy
from .base import Mechanism


class Flat(Mechanism):
    """One noisy count per bin (the Laplace/identity baseline; Qardaji, Yang and Li, "Understanding
    Hierarchical Methods for Differentially Private Histograms", PVLDB 2013, section 3.1).

    In the replace model the public total is used by least squares: the noisy bins are
    shifted equally so that they sum to it.
    """

    name = "flat"

    def strategy(self, n: int) -> TreeStrategy:
        return TreeStrategy(n, (max(n, 2),), measure_root=False, known_total=self.neighbours == "replace")

    def budget_fractions(self, strategy, epsilon) -> np.ndarray:
        return np.ones(1)


class Hierarchical(Mechanism):
    """Hierarchical histogram H_b with constrained inference (Qardaji, Yang and Li,
    PVLDB 2013; Rameshwar and Tandon, "Optimal Tree-Based Mechanisms for Differentially Private
    Approximate CDFs", 2024, for trees with per-level branching).

    Parameters
    ----------
    branching : int b >= 2 (a b-ary tree of height ceil(log_b n)) or a list of per-level
        branching factors from the root down whose product is >= n (a level-uniform tree).
    budget : "uniform" (epsilon split equally over measured levels), "geometric" (level
        budget proportional to (nodes in the level)^(1/3), growing toward the leaves; Cormode
        et al., ICDE 2012), or an explicit list with one entry per measured level, top down,
        summing to epsilon.
    measure_root : in the add/remove model, whether the root (the total) is measured
        (default False, as in Qardaji et al.: spending budget on the root costs more than it
        brings, by :func:`dprange.expected_error`; docs/analysis.md).  In the replace
        model the root is the public total and never measured.
    neighbours, noise : see the module doc.

    Inference is exact GLS in O(number of nodes) (:func:`dprange.inference.tree.tree_gls`).
    """

    name = "hierarchical"

    PARAMS = (
        Param(
            "branching",
            IntegerOrList(2, "every branching factor", "the branching list is empty; give at least one factor >= 2"),
            "branching factor b >= 2, or per-level factors from the root down, e.g. 4,16,16",
            default=16,
            positional=True,
            option="--branching",
        ),
        Param(
            "budget",
            RuleOrNumbers(BUDGET_RULES, "per-level budgets"),
            "uniform, geometric, or per-level budgets (root first) summing to at most epsilon",
            default="uniform",
            positional=True,
            option="--budget",
        ),
        Param(
            "measure_root",
            Flag(),
            "add/remove only: measure the root (the total) too; off by default (Qardaji et al.), "
            "which has the lower exact error",
            default=False,
            option="--root/--no-root",
        ),
        *Mechanism.PARAMS,
    )
    branching: int | list[int]
    budget: str | list[float]
    measure_root: bool

    def strategy(self, n: int) -> TreeStrategy:
        return TreeStrategy(n, self.branching, measure_root=self.measure_root, known_total=self.neighbours == "replace")

    def level_budgets(self, strategy: TreeStrategy, epsilon: float) -> list[float]:
        if isinstance(self.budget, list):
            return check_budget_list(self.budget, len(strategy.measured_depths), epsilon).tolist()
        return super().level_budgets(strategy, epsilon)

    def spent_epsilon(self, epsilon: float) -> float:
        """An explicit budget list spends its exact sum (rounded up to a float), at most epsilon."""
        if isinstance(self.budget, list):
            return min(float_at_least(exact_sum(self.budget)), epsilon)
        return epsilon

    def budget_fractions(self, strategy: TreeStrategy, epsilon: float) -> np.ndarray:
        depths = strategy.measured_depths
        if isinstance(self.budget, list):
            return check_budget_list(self.budget, len(depths), epsilon) / epsilon
        if self.budget == "uniform":
            weights = np.ones(len(depths))
        else:
            full = strategy.level_counts_full()
            weights = np.array([full[d] ** (1.0 / 3.0) for d in depths])
        return weights / weights.sum()


class Wavelet(Mechanism):
    """Privelet: noisy Haar wavelet coefficients (Xiao, Wang and Gehrke, "Differential Privacy via
    Wavelet Transforms", ICDE 2010).

    Any number of bins: the domain is padded with empty bins to a power of two.  Every level
    of coefficients gets an equal share of epsilon (Privelet's weights; see
    :class:`~dprange.strategies.trees.HaarStrategy`).  Inference is the inverse transform, which
    is the least-squares estimate for this square system.
    """

    name = "wavelet"

    def strategy(self, n: int) -> HaarStrategy:
        return HaarStrategy(n, known_total=self.neighbours == "replace")

    def budget_fractions(self, strategy: HaarStrategy, epsilon) -> np.ndarray:
        return np.full(len(strategy.measured_depths), 1.0 / len(strategy.measured_depths))


#: The hierarchies ``auto`` ranks: (branching factors, budget rules, root choices); branching
#: factors are kept below max(n, 3).  The coarse grid is for n > 2^16: b = 2 is left out (far
#: worse than b = 16 there and the slowest to evaluate: docs/analysis.md) and the root, which
#: never paid off in the full grid, is not measured.
FULL_GRID = ((2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64), ("uniform", "geometric"), (True, False))


COARSE_GRID = ((4, 8, 16, 32, 64), ("uniform",), (False,))


def hierarchy_candidates(
    n,
    *,
    neighbours="add_remove",
    noise="auto",
    branchings=None,
    budgets=("uniform", "geometric"),
    measure_root=(True, False),
) -> list[Hierarchical]:
    """Hierarchies over b = 2..64 (powers of 2 and a few others), each budget rule and root choice."""
    if branchings is None:
        branchings = [b for b in FULL_GRID[0] if b < max(n, 3)]
    roots = measure_root if neighbours == "add_remove" else (True,)
    return [
        Hierarchical(b, rule, measure_root=root, neighbours=neighbours, noise=noise)
        for b in branchings
        for rule in budgets
        for root in roots
    ]


def auto_hierarchies(n, *, neighbours="add_remove", noise="auto", fast=False) -> list[Hierarchical]:
    """The hierarchies ``auto`` ranks on n bins: the full grid, or the coarse one when ``fast``."""
    branchings, budgets, roots = COARSE_GRID if fast else FULL_GRID
    return hierarchy_candidates(
        n,
        neighbours=neighbours,
        noise=noise,
        branchings=[b for b in branchings if b < max(n, 3)],
        budgets=budgets,
        measure_root=roots,
    )


# The registrations: the order is the order ``auto`` ranks them in (ties go to the first).
MECHANISMS.add(
    Flat,
    summary="one noisy count per bin (the identity strategy)",
    citation=Citation(
        "Dwork, McSherry, Nissim and Smith", "Calibrating Noise to Sensitivity in Private Data Analysis", "TCC 2006"
    ),
    auto=True,
)


MECHANISMS.add(
    Wavelet,
    summary="Privelet: noisy Haar wavelet coefficients, any number of bins (padded to a power of two)",
    citation=Citation("Xiao, Wang and Gehrke", "Differential Privacy via Wavelet Transforms", "ICDE 2010"),
    auto=True,
)


MECHANISMS.add(
    Hierarchical,
    summary="a tree of noisy range counts (any branching, per-level budgets) with exact O(nodes) least squares",
    citation=Citation(
        "Qardaji, Yang and Li", "Understanding Hierarchical Methods for Differentially Private Histograms", "PVLDB 2013"
    ),
    auto=True,
    candidates=auto_hierarchies,
)

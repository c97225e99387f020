"""FourierMarginals: low-order marginals from noisy Fourier coefficients (Barak, Chaudhuri, Dwork,
Kale, McSherry and Talwar, PODS 2007).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from .._params import Integer, OneOf, Param
from .._validation import fit_budget
from ..errors import ParameterError
from ..inference.fourier import FourierEstimate
from ..measurements import Measurements
from ..registry import GRID_MECHANISMS, Citation
from ..strategies.fourier import BUDGET_RULES, FourierStrategy, axis_column_power, axis_mu, fourier_subsets
from ..workloads.rectangles import check_shape
from .base import GridMechanism, Mechanism


class FourierMarginals(GridMechanism):
    """The Fourier strategy for all ``order``-way marginals (module doc): the Fourier
    subspaces V_T, |T| <= order, each measured once with the budget split that minimises the
    total squared error over all cells of those marginals; exact least squares, consistent
    marginals, exact standard errors for every marginal cell and estimable rectangle."""

    name = "fourier"
    constrainable = True
    made_for_marginals = True

    PARAMS = (
        Param(
            "order",
            Integer(minimum=1),
            "the order of the marginals to answer (all of them)",
            default=2,
            positional=True,
        ),
        Param(
            "budget",
            OneOf(BUDGET_RULES),
            "optimal (least total error on the order-way marginals) or uniform",
            default="optimal",
        ),
        *Mechanism.PARAMS,
    )
    order: int
    budget: str

    def _subsets(self, shape) -> list[tuple[int, ...]]:
        shape = check_shape(shape)
        subsets = fourier_subsets(shape, self.order, with_total=self.neighbours == "add_remove")
        if not subsets:
            raise ParameterError("every axis has one bin and the total is public: nothing to measure")
        return subsets

    def budget_weights(self, shape, subsets) -> np.ndarray:
        """Relative budgets of the blocks (module doc)."""
        if self.budget == "uniform":
            return np.ones(len(subsets))
        shape = check_shape(shape)
        order = min(self.order, len(shape))
        p = 2 if self.noise == "gaussian" else 1
        weights = []
        for T in subsets:
            c = 0.0
            for S in itertools.combinations(range(len(shape)), order):
                if set(T) <= set(S):
                    c += math.prod((shape[a] - 1) / axis_mu(shape[a]) for a in T) * math.prod(
                        1.0 / shape[a] for a in S if a not in T
                    )
            s = math.prod(axis_column_power(shape[a], p) for a in T)
            weights.append((c / s) ** (1.0 / 3.0 if p == 1 else 0.25))  # c > 0: T lies in some S
        return np.array(weights)

    def plan(self, shape, epsilon: float) -> FourierStrategy:
        shape = check_shape(shape)
        if len(shape) < self.order:
            raise ParameterError(f"order {self.order} needs at least {self.order} axes; the grid has {len(shape)}")
        subsets = self._subsets(shape)
        weights = self.budget_weights(shape, subsets)
        return FourierStrategy(shape, subsets, fit_budget(list(epsilon * weights / weights.sum()), epsilon))

    def estimate(self, shape, measurements: Measurements) -> FourierEstimate:
        subsets = self._subsets(shape)
        values = [m.values for m in measurements.measurements]
        variances = [m.variance for m in measurements.measurements]
        return FourierEstimate(shape, self.order, subsets, values, variances, total=measurements.total)


def fourier_candidates(shape, *, neighbours="add_remove", noise="auto", fast=False) -> list[Any]:
    """The Fourier strategies ``auto`` ranks: orders 1..3 (at most the number of axes); each
    answers the marginals up to its order and is excluded from other workloads."""
    shape = check_shape(shape)
    return [FourierMarginals(order, neighbours=neighbours, noise=noise) for order in range(1, min(3, len(shape)) + 1)]


GRID_MECHANISMS.add(
    FourierMarginals,
    summary="the Fourier strategy for low-order marginals: each needed Fourier subspace measured once, "
    "error-optimal budgets, exact least squares (consistent marginals)",
    citation=Citation(
        "Barak, Chaudhuri, Dwork, Kale, McSherry and Talwar",
        "Privacy, Accuracy, and Consistency Too: A Holistic Solution to Contingency Table Release",
        "PODS 2007",
    ),
    auto=True,
    candidates=fourier_candidates,
)

"""Validation of the parameters every public function shares (privacy budget, randomness)."""

from __future__ import annotations

import math
import numbers
from typing import Sequence

import numpy as np

from .errors import ParameterError

#: The neighbouring relations dprange supports.
#: ``add_remove``: neighbouring datasets differ by adding or removing one record (the total is
#: private and must be estimated).  ``replace``: one record changes its value and the total
#: number of records is public.
NEIGHBOURS = ("add_remove", "replace")


def check_epsilon(epsilon, name: str = "epsilon") -> float:
    """Return ``epsilon`` as a float, or raise if it is not finite and > 0."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise ParameterError(f"{name} must be a positive finite number, got {epsilon!r}")
    value = float(epsilon)
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(f"{name} must be a positive finite number, got {epsilon!r}")
    return value


def check_delta(delta) -> float:
    """Return ``delta`` as a float, or raise if it is not in [0, 1)."""
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real):
        raise ParameterError(f"delta must be a number in [0, 1), got {delta!r}")
    value = float(delta)
    if not (0.0 <= value < 1.0):
        raise ParameterError(f"delta must be in [0, 1), got {delta!r}")
    return value


def check_neighbours(neighbours: str) -> str:
    """Return the neighbouring relation, or raise if it is not one dprange knows."""
    if neighbours not in NEIGHBOURS:
        raise ParameterError(
            f"neighbours must be one of {', '.join(NEIGHBOURS)}, got {neighbours!r}"
        )
    return neighbours


def check_positive_int(value, name: str, minimum: int = 1) -> int:
    """Return ``value`` as an int, or raise if it is not an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ParameterError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def check_budget_list(budget: Sequence[float], levels: int, epsilon: float) -> np.ndarray:
    """Validate an explicit per-level budget: ``levels`` positive numbers summing to epsilon."""
    values = np.asarray(budget, dtype=float)
    if values.ndim != 1 or values.size != levels:
        raise ParameterError(
            f"budget list must have one entry per measured level ({levels}), got {values.size}"
        )
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ParameterError("every entry of the budget list must be a positive finite number")
    if not math.isclose(values.sum(), epsilon, rel_tol=1e-9, abs_tol=1e-12):
        raise ParameterError(
            f"budget list sums to {values.sum():.12g} but epsilon is {epsilon:.12g}; "
            "the per-level budgets must add up to epsilon"
        )
    return values

"""Validation of the parameters every public function shares (privacy budget, randomness)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from .errors import ParameterError

MAX_SCALE = float(2**40)


#: The neighbouring relations dprange supports.
#: ``add_remove``: neighbouring datasets differ by adding or removing one record (the total is
#: private and must be estimated).  ``replace``: one record changes its value and the total
#: number of records is public.
NEIGHBOURS = ("add_remove", "replace")


#: The largest noise scale (Laplace b or Gaussian sigma, in counts) a mechanism will use: the
#: samplers' own limit (:data:`dprange._validation.MAX_SCALE`, 2^40).  A smaller epsilon is refused
#: up front: its noise would swamp any count, and floating point cannot sample it faithfully.
MAX_NOISE_SCALE = MAX_SCALE


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


def check_alpha(alpha) -> float:
    """``alpha`` as a float in (0, 1) (intervals at level 1 - alpha), or ParameterError."""
    if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise ParameterError(f"alpha must be a number in (0, 1), got {alpha!r}")
    if not 0.0 < float(alpha) < 1.0:
        raise ParameterError(f"alpha must be in (0, 1), got {alpha!r}")
    return float(alpha)


def check_neighbours(neighbours: str) -> str:
    """Return the neighbouring relation, or raise if it is not one dprange knows."""
    if neighbours not in NEIGHBOURS:
        raise ParameterError(f"neighbours must be one of {', '.join(NEIGHBOURS)}, got {neighbours!r}")
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


def exact_sum(values) -> Fraction:
    """The exact sum of floats (every float is a rational number)."""
    return sum((Fraction(float(v)) for v in values), Fraction(0))


def float_at_least(value: Fraction) -> float:
    """The smallest float >= the rational ``value``."""
    out = float(value)
    return out if Fraction(out) >= value else math.nextafter(out, math.inf)


def fit_budget(levels, epsilon: float) -> list[float]:
    """``levels`` (positive floats meant to sum to epsilon), each lowered by the fewest ulps
    that make their exact sum at most epsilon (float sums can exceed it by rounding)."""
    levels = [float(e) for e in levels]
    while exact_sum(levels) > Fraction(float(epsilon)):
        levels = [math.nextafter(e, 0.0) for e in levels]
    return levels


def fit_last(parts, last: float, epsilon: float) -> float:
    """``last`` lowered by the fewest ulps that make the exact sum of ``parts`` and ``last`` at
    most ``epsilon`` (the parts of a split of epsilon can exceed it by rounding; the last one,
    the rest, gives way)."""
    parts = [float(v) for v in parts]
    while exact_sum([*parts, last]) > Fraction(float(epsilon)):
        last = math.nextafter(last, 0.0)
    return last


def check_noise_scale(scale: float, level_epsilon: float | None = None, where: str = "a level") -> float:
    """Refuse a noise scale that is not finite or exceeds :data:`MAX_NOISE_SCALE`."""
    if math.isfinite(scale) and 0.0 < scale <= MAX_NOISE_SCALE:
        return scale
    smallest = ""
    if level_epsilon is not None and math.isfinite(scale) and scale > 0:
        smallest = f"; the smallest supported per-level epsilon is {level_epsilon * scale / MAX_NOISE_SCALE:.3g}"
    raise ParameterError(
        f"epsilon is too small for this mechanism: {where} would need noise of scale {scale:.3g} "
        f"(at most 2^40 is supported){smallest}; raise epsilon"
    )


def check_budget_list(budget: Sequence[float], levels: int, epsilon: float) -> np.ndarray:
    """Validate an explicit per-level budget: ``levels`` positive numbers whose exact sum does
    not exceed epsilon (a smaller sum is allowed: the release spends only that sum)."""
    values = np.asarray(budget, dtype=float)
    if values.ndim != 1 or values.size != levels:
        raise ParameterError(f"budget list must have one entry per measured level ({levels}), got {values.size}")
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ParameterError("every entry of the budget list must be a positive finite number")
    excess = exact_sum(values) - Fraction(float(epsilon))
    if 0 < excess <= Fraction(8 * values.size * float(epsilon)) * Fraction(2) ** -53:
        # A list meant to sum to epsilon (e.g. [0.1, 0.2, 0.3, 0.4]) exceeds it only by float
        # rounding: lower its entries by the fewest ulps, so that the spend is at most epsilon.
        return np.asarray(fit_budget(values, epsilon))
    if excess > 0:
        raise ParameterError(
            f"the budget list sums to more than epsilon = {float(epsilon)!r} "
            "(exact sum); "
            "the per-level budgets must add up to at most epsilon (lower an entry, or pass the list's sum as epsilon)"
        )
    return values

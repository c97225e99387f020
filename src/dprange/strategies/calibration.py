"""Noise calibrated to a strategy: Laplace scales from the budget-weighted L1 sensitivity and
Gaussian sigma from the L2 sensitivity, checked in exact rational arithmetic, and the noisy
answers drawn.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .._validation import check_noise_scale
from ..errors import ParameterError
from ..privacy.noise import NoiseSpec, gaussian_sigma
from ..privacy.samplers import NOISE_KINDS, SecureRandom
from .budgets import _bump
from .trees import Strategy


def resolve_noise(noise: str, delta: float) -> str:
    """The noise kind to use for ``noise`` ("auto" or a kind) at this delta."""
    if noise == "auto":
        return "gaussian" if delta > 0 else "discrete_laplace"
    if noise not in NOISE_KINDS:
        raise ParameterError(f"noise must be 'auto' or one of {', '.join(NOISE_KINDS)}, got {noise!r}")
    if noise == "gaussian" and delta <= 0:
        raise ParameterError("Gaussian noise needs delta > 0; pass delta or use Laplace noise")
    return noise


def laplace_scales(strategy: Strategy, neighbours: str, level_epsilons: list[float], epsilon: float) -> list[float]:
    """Scales b_l = (S / epsilon) / eps_l (module doc), rounded up until the exact worst-case
    loss max_pairs sum_l ||change_l||_1 / b_l is at most epsilon.  Sensitivities are those
    of the strategy's weighted operator (:meth:`Strategy.sensitivity_power`)."""
    weighted = strategy.sensitivity_power(1, neighbours, [Fraction(e) for e in level_epsilons])
    ratio = float(weighted / Fraction(epsilon)) if weighted > 0 else 1.0
    scales = [ratio / e for e in level_epsilons]
    for b, e in zip(scales, level_epsilons):
        check_noise_scale(b, e)
    while strategy.sensitivity_power(1, neighbours, [1 / Fraction(b) for b in scales]) > Fraction(epsilon):
        scales = _bump(scales)
    return scales


def gaussian_scales(
    strategy: Strategy, neighbours: str, level_epsilons: list[float], epsilon: float, delta: float
) -> list[float]:
    """sigma_l = sigma / f_l with sigma calibrated for the L2 sensitivity of the strategy whose
    level l is weighted by f_l = eps_l / epsilon; rounded up until the exact weighted
    sensitivity max_pairs sum_l ||change_l||_2^2 / sigma_l^2 is at most (Delta / sigma)^2."""
    fractions = [e / epsilon for e in level_epsilons]
    squared = strategy.sensitivity_power(2, neighbours, [Fraction(f) for f in fractions])
    l2 = math.sqrt(float(squared)) if squared > 0 else 1.0
    while Fraction(l2) ** 2 < squared:
        l2 = math.nextafter(l2, math.inf)
    sigma = gaussian_sigma(epsilon, delta, l2)
    sigmas = [sigma / f for f in fractions]
    for s, e in zip(sigmas, level_epsilons):
        check_noise_scale(s, e)
    allowed = (Fraction(l2) / Fraction(sigma)) ** 2
    while strategy.sensitivity_power(2, neighbours, [1 / Fraction(s) for s in sigmas]) > allowed:
        sigmas = _bump(sigmas)
    return sigmas


def calibrate(
    strategy: Strategy, neighbours: str, kind: str, level_epsilons: list[float], epsilon: float, delta: float
) -> list[NoiseSpec]:
    """The noise of every block of ``strategy`` for budgets ``level_epsilons`` (exact sum <= epsilon)."""
    if kind == "gaussian":
        scales = gaussian_scales(strategy, neighbours, level_epsilons, epsilon, delta)
    else:
        scales = laplace_scales(strategy, neighbours, level_epsilons, epsilon)
    return [NoiseSpec(kind, scale) for scale in scales]


def noisy_answers(exact: np.ndarray, spec: NoiseSpec, source) -> np.ndarray:
    """The exact answers plus the calibrated noise.  Exact integers beyond int64 (Python
    integers, object dtype) take the noise exactly; only the noisy values are then rounded to
    floats, which is post-processing."""
    noisy = exact + spec.sample(exact.shape, source)
    return noisy.astype(float) if noisy.dtype == object else noisy


def is_seeded(rng) -> bool:
    """Whether noise comes from a seeded (predictable) generator rather than os.urandom."""
    return rng is not None and not isinstance(rng, SecureRandom)

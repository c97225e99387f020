"""JointExp's exact accounting outside the float-error charge: the score's sensitivity for the
gaps the sampler really uses (the float differences of the levels) and the scale's rounding.
The charge (tests/test_joint_exp_precision.py) covers the rounding of the weights, not these."""

from fractions import Fraction

import numpy as np
import pytest

from dprange.quantile_mechanisms import joint_exp

LEVELS = [[0.3, 0.6], [0.1, 0.5, 0.9], list(np.arange(1, 100) / 100), list(np.arange(1, 20) / 20)]


def exact_sensitivity(levels) -> Fraction:
    """max over neighbours of |score change| under add/remove for gaps g (float differences of
    0, the levels and 1, taken exactly): one gap count moves by 1 and every target by its gap,
    so (1 - g_s) + (G - g_s), G = sum g, largest at the smallest gap."""
    gaps = [Fraction(g) for g in np.diff(np.concatenate([[0.0], levels, [1.0]])).tolist()]
    return 1 + sum(gaps) - 2 * min(gaps)


@pytest.mark.parametrize("levels", LEVELS, ids=["2", "3", "99", "19"])
def test_sensitivity_is_the_float_gaps_exact_sensitivity_rounded_up(levels):
    """2 (1 - min gap) in double was below the sensitivity of [0.3, 0.6] (1 - 0.3 rounds down:
    8e-17 relative) and of [0.1, 0.5, 0.9] (its float gaps sum to 1 + 2^-55: 1.5e-17): now the
    exact value, rounded up to a double."""
    exact = exact_sensitivity(np.array(levels))
    got = joint_exp.joint_sensitivity(np.array(levels), "add_remove")
    assert Fraction(got) >= exact and Fraction(np.nextafter(got, 0.0)) < exact
    assert joint_exp.joint_sensitivity(np.array(levels), "replace") == 2.0


def test_the_uneven_gaps_are_really_uneven():
    """The cases above can fail: the former double formula is below the exact sensitivity."""
    assert exact_sensitivity(np.array([0.3, 0.6])) > Fraction(2.0 * (1.0 - 0.3))
    gaps = np.diff([0.0, 0.1, 0.5, 0.9, 1.0]).tolist()
    assert sum(Fraction(g) for g in gaps) == 1 + Fraction(2) ** -55


def test_run_scale_never_exceeds_run_epsilon_over_twice_the_sensitivity(monkeypatch):
    """2 x scale x sensitivity <= the epsilon the mechanism runs at, exactly, and scale is the
    largest double that does so; epsilons are chosen where plain division rounds the scale up
    (found among 200 candidates, so the check can fail)."""
    levels, n_max, seen = np.array([0.3, 0.6]), 500, {}
    delta = joint_exp.joint_sensitivity(levels, "add_remove")
    real = joint_exp.joint_exponential_intervals

    def spy(lengths, levels, scale, rng):
        seen["scale"] = scale
        return real(lengths, levels, scale, rng)

    monkeypatch.setattr(joint_exp, "joint_exponential_intervals", spy)
    rounded_up = []
    for epsilon in np.linspace(0.3, 3.0, 200):
        run = joint_exp.joint_charged_epsilon(float(epsilon), levels, "add_remove", n_max, 2.0)
        if 2 * Fraction(run / (2 * delta)) * Fraction(delta) > Fraction(run):
            rounded_up.append(float(epsilon))
    assert len(rounded_up) >= 3
    values = np.random.default_rng(1).uniform(0, 2, 50)
    for epsilon in rounded_up[:3]:
        _, charge = joint_exp.joint_exponential_run(values, levels, epsilon, (0, 2), rng=2, n_max=n_max)
        scale = Fraction(seen["scale"])
        assert 2 * scale * Fraction(delta) <= Fraction(charge.run_epsilon)
        assert 2 * Fraction(np.nextafter(seen["scale"], np.inf)) * Fraction(delta) > Fraction(charge.run_epsilon)

"""benchmarks/grid_nonnegative_refit.py: the projection onto non-negative grids of a given sum
and the FISTA refit of Kronecker measurements, checked by their optimality conditions."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from conftest import REPO


@pytest.fixture
def script(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    return importlib.import_module("grid_nonnegative_refit")


@pytest.mark.parametrize("seed", range(6))
def test_projection_onto_a_total_is_a_shift_clipped_at_zero(script, seed):
    """The Euclidean projection onto {x >= 0, sum x = t} is max(v - theta, 0) for the one theta
    that gives the sum t (Duchi et al., ICML 2008): the cells it keeps are shifted by the same
    theta, the cells it zeroes are at or below it, and nothing is closer among random points
    of the set."""
    rng = np.random.default_rng(seed)
    values = rng.normal(0, 3, (5, 4))
    total = float(rng.uniform(0.5, 20))
    x = script.project_onto_total(values, total)
    assert x.min() >= 0 and x.sum() == pytest.approx(total, rel=1e-12)
    kept = x > 0
    theta = (values - x)[kept]
    assert np.ptp(theta) < 1e-12
    assert np.all(values[~kept] <= theta[0] + 1e-12)
    others = rng.dirichlet(np.ones(values.size), 2000) * total
    assert np.all(((others - values.ravel()) ** 2).sum(1) >= ((x - values) ** 2).sum() - 1e-9)
    assert np.array_equal(script.project_onto_total(values, 0.0), np.zeros_like(values))


def kron_problem(rng, m1=7, n1=5, m2=6, n2=4):
    return rng.normal(size=(m1, n1)), rng.normal(size=(m2, n2))


def test_refit_returns_the_exact_grid_when_the_measurements_are_noiseless(script):
    rng = np.random.default_rng(1)
    f1, f2 = kron_problem(rng)
    truth = rng.uniform(0.5, 3.0, (5, 4))
    y = f1 @ truth @ f2.T
    got = script.nonnegative_refit(f1, f2, y, float(truth.sum()), iterations=3000)
    np.testing.assert_allclose(got, truth, atol=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_refit_meets_the_optimality_conditions_of_the_constrained_least_squares(script, seed):
    """KKT of min ||F1 X F2^T - Y||^2 over X >= 0, sum X = t: the gradient G1 X G2 - F1^T Y F2
    equals one multiplier on the cells kept positive and is at least it on the zeroed ones;
    the objective is no larger than at the unconstrained fit projected onto the set."""
    rng = np.random.default_rng(10 + seed)
    f1, f2 = kron_problem(rng)
    truth = np.where(rng.uniform(size=(5, 4)) < 0.5, 0.0, rng.uniform(1, 5, (5, 4)))
    y = f1 @ truth @ f2.T + rng.normal(0, 2.0, (7, 6))
    total = float(truth.sum())
    x = script.nonnegative_refit(f1, f2, y, total, iterations=5000)
    assert x.min() >= 0 and x.sum() == pytest.approx(total)
    gradient = f1.T @ f1 @ x @ f2.T @ f2 - f1.T @ y @ f2
    kept = x > 1e-9
    assert kept.any() and (~kept).any()  # the constraints bind: the conditions are not trivial
    multiplier = gradient[kept].mean()
    scale = np.abs(gradient).max()
    assert np.abs(gradient[kept] - multiplier).max() < 1e-6 * scale
    assert gradient[~kept].min() >= multiplier - 1e-6 * scale

    def objective(grid):
        return float(((f1 @ grid @ f2.T - y) ** 2).sum())

    least_squares = np.linalg.lstsq(np.kron(f1, f2), y.ravel(), rcond=None)[0].reshape(5, 4)
    assert objective(x) <= objective(script.project_onto_total(least_squares, total)) + 1e-9

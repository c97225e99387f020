"""A huge epsilon works everywhere: noise 0 is its limit (issue 30, item 7).

HybridTree and the optimised strategies divided by a noise variance that underflowed to 0
(from a per-level epsilon of about 745), MWEM, StructureFirst and ApproxQuantiles ended in
"integers: high must be greater than low" or never returned, and ``dprange error -e 1e300``
in an OverflowError.  Now a NoiseSpec never adds noise finer than ``noise.MIN_SCALE`` and an
exponential mechanism's gamma is at most ``_validation.MAX_SELECTION_GAMMA``: every
registered mechanism and quantile method answers at any finite epsilon, the data-independent
ones with the exact counts (noise 0 on every draw but a share below 2^-183)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import dprange
from dprange import Domain, ProductDomain
from dprange.cli import main
from dprange.privacy.exact_choice import MAX_SELECTION_GAMMA, selection_gamma_at_most
from dprange.privacy.noise import MIN_SCALE, NoiseSpec
from dprange.registry import GRID_MECHANISMS, MECHANISMS, QUANTILE_METHODS

HUGE = (1e6, 1e15, 1e20, 1e300)
#: Mechanisms whose estimate is not the measured counts themselves (a synthetic or fitted model).
MODEL_BASED = {"mwem", "dawa", "structure-first", "auto-data", "kd_tree", "hybrid_tree", "dawa_hilbert", "dawa_pruned"}

VALUES = np.random.default_rng(5).integers(0, 16, 200)
DOMAIN = Domain.integers(0, 15)
GRID = ProductDomain([Domain.integers(0, 7), Domain.integers(0, 7)])
COLUMNS = [np.random.default_rng(6).integers(0, 8, 200), np.random.default_rng(7).integers(0, 8, 200)]


def test_noise_and_selection_floors():
    for kind, floor in MIN_SCALE.items():
        spec = NoiseSpec(kind, 1e-300)
        assert spec.scale == floor and spec.effective_scale >= floor and 0 < spec.variance < 1e-10
        assert NoiseSpec(kind, 0.5).scale == 0.5  # coarser noise is left as requested
    assert float(NoiseSpec("discrete_laplace", 1e-300).pmf(1)[()]) < 2.0**-184
    assert selection_gamma_at_most(Fraction(10) ** 300) == MAX_SELECTION_GAMMA == 128
    assert selection_gamma_at_most(Fraction(3, 2)) == Fraction(3, 2)


@pytest.mark.parametrize("name", MECHANISMS.names())
@pytest.mark.slow
def test_every_mechanism_answers_at_a_huge_epsilon(name):
    mechanism = dprange.Matrix(np.eye(16)) if name == "matrix" else name  # matrix needs its strategy
    truth = np.bincount(VALUES, minlength=16)
    for epsilon in HUGE:
        release = dprange.release(VALUES, DOMAIN, epsilon, mechanism=mechanism, rng=1)
        counts = release.histogram().value
        assert np.all(np.isfinite(counts)), (name, epsilon)
        if name not in MODEL_BASED:
            np.testing.assert_allclose(counts, truth, atol=1e-6, err_msg=f"{name} at {epsilon:g}")
            answer = release.range(0, 7)
            lower, upper = answer.confidence_interval()
            assert answer.stderr < 1e-6 and upper - lower < 1e-6  # no draw moves a count


@pytest.mark.parametrize("name", GRID_MECHANISMS.names())
def test_every_grid_mechanism_answers_at_a_huge_epsilon(name):
    truth = GRID.histogram(COLUMNS)
    for epsilon in HUGE:
        release = dprange.release(COLUMNS, GRID, epsilon, mechanism=name, rng=1)
        cells = release.counts
        assert np.all(np.isfinite(cells)), (name, epsilon)
        if name not in MODEL_BASED:
            np.testing.assert_allclose(cells, truth, atol=1e-6, err_msg=f"{name} at {epsilon:g}")
            if getattr(release, "exact_error_bars", True):  # data-aware grids (ugrid, agrid): no error bars to check
                assert np.all(release.rectangle([0, 0], [3, 5]).stderr < 1e-6)


@pytest.mark.parametrize("method", [*QUANTILE_METHODS.names(), "auto"])
def test_every_quantile_method_answers_at_a_huge_epsilon(method):
    extra = {"n_max": 1000} if method == "joint_exp" else {}
    data = VALUES.astype(float) + 0.5
    for epsilon in (1e15, 1e300):  # the histogram route's bins grow with epsilon (65536 here): two of them
        for bounds, integer, values in (((0, 15), True, VALUES), ((0.0, 16.0), False, data), ("private", False, data)):
            result = dprange.quantiles(
                values, [0.25, 0.5, 0.75], epsilon, bounds=bounds, method=method, integer=integer, rng=2, **extra
            )
            low, high = (0.0, 16.0) if bounds == "private" else bounds
            assert np.all(np.isfinite(result.values)), (method, epsilon, bounds)
            assert np.all((result.values >= low - 64) & (result.values <= high + 64)), result.values


@pytest.mark.parametrize(
    "args",
    [
        ["error", "--n", "64", "-e", "1e300"],
        ["error", "--n", "64", "-e", "1e300", "--noise", "laplace_float"],
        ["error", "--shape", "8x8", "-e", "1e300"],
    ],
    ids=["error", "error-laplace-float", "error-2d"],
)
def test_error_command_at_a_huge_epsilon(args, capsys):
    """It ended in "internal error (OverflowError: math range error)", exit 1."""
    with pytest.raises(SystemExit) as exc:
        main(args)
    captured = capsys.readouterr()
    assert exc.value.code == 0 and captured.err == "" and "recommended:" in captured.out

"""The p-Identity GLS path (dprange.inference.p_identity): estimate, range and query variances
by the Woodbury identity against the dense formulas, sensitivity against the definition, the
saved error model, and the Optimized mechanism using it (no n x n matrix)."""

import numpy as np
import pytest

import dprange
import dprange.inference.p_identity as pid
from dprange.answers.release import load_release
from dprange.inference.p_identity import DiagonalPlusRows, PIdentityEstimate
from dprange.mechanisms.optimized import Optimized
from dprange.operators import definition_sensitivity_power

pytestmark = pytest.mark.usefixtures("private_cache")  # every test: an empty strategy cache


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_optimized_release_uses_the_woodbury_path_and_round_trips(tmp_path, neighbours):
    counts = np.random.default_rng(8).poisson(30, 40)
    mech = Optimized("prefix", neighbours=neighbours)
    release = mech.release(counts, 1.0, rng=3)
    assert isinstance(release.error_model, PIdentityEstimate)
    assert isinstance(mech.strategy(40).block, DiagonalPlusRows)
    if neighbours == "replace":
        assert release.total().value == pytest.approx(counts.sum())
    path = tmp_path / "r.json"
    release.to_json(path)
    loaded = load_release(path)
    lo, hi = np.triu_indices(40)
    np.testing.assert_allclose(loaded.range(lo, hi).stderr, release.range(lo, hi).stderr, rtol=1e-12)
    assert isinstance(loaded.error_model, PIdentityEstimate)


def test_release_matches_the_dense_matrix_mechanism():
    """Same strategy, same noise draws: Optimized (Woodbury) and Matrix (dense covariance)
    give the same estimate and standard errors.  (32 bins: on 24 the identity has the lower
    error as released and is measured instead.)"""
    counts = np.random.default_rng(9).poisson(10, 32)
    mech = Optimized("all-range")
    same = dprange.Matrix(mech.strategy(32).explicit())
    a, b = mech.release(counts, 1.0, rng=11), same.release(counts, 1.0, rng=11)
    np.testing.assert_allclose(a.estimate, b.estimate, rtol=1e-9, atol=1e-9)
    lo, hi = np.triu_indices(32)
    np.testing.assert_allclose(a.range(lo, hi).stderr, b.range(lo, hi).stderr, rtol=1e-9)


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_release_never_forms_the_dense_strategy(monkeypatch, neighbours):
    """Calibration (the one-block stack takes the block's own sensitivity), measurement, GLS
    and error bars run without A's dense form: with the pairs limit at 0 the replace scale is
    the triangle bound 2 max_j ||a_j||_1, add/remove the exact max_j ||a_j||_1.  (128 bins:
    under replace on 48 the identity has the lower error as released and is measured instead.)"""
    mech = Optimized("all-range", neighbours=neighbours)
    strategy = mech.strategy(128)
    column_l1 = definition_sensitivity_power(strategy.explicit(), 1, "add_remove")

    def refuse(self):
        raise AssertionError("dense form used")

    monkeypatch.setattr(DiagonalPlusRows, "dense", refuse)
    monkeypatch.setattr(pid, "PAIRS_LIMIT", 0)
    strategy.block._sensitivity_cache.clear()
    counts = np.random.default_rng(10).poisson(5, 128)
    release = mech.release(counts, 0.5, rng=1)
    spec = release.measurements.measurements[0].noise
    assert spec.scale == pytest.approx((1 if neighbours == "add_remove" else 2) * column_l1 / 0.5, rel=1e-12)
    assert np.all(np.isfinite(release.range(0, np.arange(128)).stderr))

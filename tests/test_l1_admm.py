"""ADMM (L1 / elastic net) against exact solvers; the tree x-step; inference= on mechanisms; bootstrap.

NNLS: tests/test_nnls.py; contingency tables: tests/test_contingency.py."""

import numpy as np
import pytest

from dprange import Flat, Hierarchical, ParameterError, Wavelet


def test_mechanisms_accept_inference_and_record_it():
    x = np.zeros(64, dtype=int)
    x[[3, 4, 40]] = [30, 5, 12]
    for mech in (
        Flat(inference="l1"),
        Hierarchical(4, inference="nnls"),
        Wavelet(inference="l1"),
        Hierarchical(4, neighbours="replace", inference="l1", inference_options={"alpha": 1.0, "tol": 1e-6}),
    ):
        rel = mech.release(x, 1.0, rng=0)
        assert rel.inference == mech.inference and not rel.exact_error_bars
        assert rel.histogram().value.min() >= -1e-9
        assert np.isnan(rel.range(0, 3).stderr)
        data = rel.to_dict()
        assert (
            data["inference"] == mech.inference
            and data["histogram"]["stderr"] is None
            and "bootstrap" in data["error_bars"]
        )
        if mech.neighbours == "replace":
            assert rel.histogram().value.sum() == pytest.approx(x.sum(), abs=1e-6)
    with pytest.raises(ParameterError):
        Flat(inference="median")
    with pytest.raises(ParameterError):
        Flat(inference="l1", inference_options={"speed": 3})


def test_bootstrap_reproduces_exact_gls_stderr():
    """400 replicates: the bootstrap s.d. has relative s.e. about sqrt((2 + kappa) / (4 R))
    <= 0.06; we allow 4 of those (25%)."""
    rel = Hierarchical(4, noise="laplace_float").release(np.arange(64) % 7, 1.0, rng=1)
    lo, hi = np.array([0, 5, 30]), np.array([63, 20, 30])
    boot = rel.bootstrap(lo, hi, reps=400, rng=2)
    np.testing.assert_allclose(boot, rel.range(lo, hi).stderr, rtol=0.25)
    with pytest.raises(ParameterError):
        rel.bootstrap(0, 3, reps=1)

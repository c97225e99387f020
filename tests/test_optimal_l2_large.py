"""The L2 optimum on many bins (dprange.optimize.l2_optimum): the light dual step and its equilibrated
primal against the dense formulas, the coarsened Gram matrix against P^T G P, the multilevel
start against the constant one, template auto's optimum alone above 1024 bins; and the dense
release's certified Cholesky paths (rank check, covariance) against the SVD forms they replace."""

import numpy as np
import pytest

from dprange.cholesky import cholesky_inverse, well_conditioned_cholesky
from dprange.mechanisms.optimized import Optimized


def test_template_auto_builds_the_optimum_alone_under_add_remove(monkeypatch, tmp_path):
    """Template auto at (1, 1e-6) on 32 bins builds the L2 optimum alone under add/remove
    (nothing else in also_built), the strategy of template l2-optimal; under replace it still
    builds and compares both."""
    monkeypatch.setenv("DPRANGE_CACHE_DIR", str(tmp_path))
    auto = Optimized("prefix", template="auto")
    auto.design(32, 1.0, delta=1e-6)
    strategy = auto.optimised_strategy(32)
    assert strategy.template == "l2-optimal" and "also_built" not in strategy.describe()
    alone = Optimized("prefix", template="l2-optimal").optimised_strategy(32)
    assert strategy.trace == pytest.approx(alone.trace, rel=1e-12)
    on_replace = Optimized("prefix", template="auto", neighbours="replace")
    on_replace.design(32, 1.0, delta=1e-6)
    replace = on_replace.optimised_strategy(32)
    built = [strategy["template"] for strategy in replace.describe().get("also_built", [])]
    assert sorted(built + [replace.template]) == ["l2-optimal", "p-identity-l2"]


# ----------------------------------------------------------------------------- dense release


def test_well_conditioned_cholesky_certifies_only_what_it_should():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(30, 12))
    assert well_conditioned_cholesky(A.T @ A) is not None
    singular = A[:, :11] @ rng.normal(size=(11, 12))  # rank 11
    assert well_conditioned_cholesky(singular.T @ singular) is None
    q = np.linalg.qr(rng.normal(size=(12, 12)))[0]
    ill = q @ np.diag([1.0] * 11 + [1e-12]) @ q.T  # least eigenvalue below 1e-10 of the trace
    assert well_conditioned_cholesky(ill) is None
    assert well_conditioned_cholesky(np.zeros((3, 3))) is None
    gram = A.T @ A
    np.testing.assert_allclose(cholesky_inverse(well_conditioned_cholesky(gram)), np.linalg.inv(gram), rtol=1e-10)

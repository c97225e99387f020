"""The L2 p-Identity template (Gaussian noise) and auto's choice among the optimised templates
under (epsilon, delta)."""

import numpy as np
import pytest

from dprange.analysis import expected_error, select
from dprange.mechanisms.optimized import Optimized, auto_candidates
from dprange.workloads import AllRange, Prefix

pytestmark = pytest.mark.usefixtures("private_cache")  # every test: an empty strategy cache


@pytest.mark.parametrize("workload", [AllRange(32), Prefix(32)])
def test_auto_under_eps_delta_ranks_the_l2_optimum_and_keeps_the_least_error(workload):
    """Under add/remove auto ranks the exact L2 optimum alone (the L2 template is a point of its
    program: as released its error is higher, checked here), under replace both L2 templates."""
    kw = {"noise": "auto"}
    assert [m.template for m in auto_candidates(workload, 1e-6, neighbours="add_remove", **kw)] == ["l2-optimal"]
    assert [m.template for m in auto_candidates(workload, 0.0, neighbours="add_remove", **kw)] == ["p-identity"]
    replace = auto_candidates(workload, 1e-6, neighbours="replace", **kw)
    assert [m.template for m in replace] == ["p-identity-l2", "l2-optimal"]
    selection = select(workload, None, 1.0, delta=1e-6)
    optimised = {c.mechanism.template: c.error for c in selection.table if isinstance(c.mechanism, Optimized)}
    assert set(optimised) == {"l2-optimal"}
    template = expected_error(Optimized(workload, template="p-identity-l2"), workload, 1.0, delta=1e-6)
    assert optimised["l2-optimal"] < template  # the exact optimum (as released)
    assert selection.error == min(c.error for c in selection.table)
    assert selection.error <= optimised["l2-optimal"]


def test_gaussian_release_with_the_l2_template_uses_the_woodbury_path():
    from dprange.inference.p_identity import PIdentityEstimate

    counts = np.random.default_rng(3).poisson(20, 32)
    release = Optimized("prefix", template="p-identity-l2").release(counts, 1.0, delta=1e-6, rng=2)
    assert isinstance(release.error_model, PIdentityEstimate)
    assert release.measurements.measurements[0].noise.kind == "gaussian"
    strategy = Optimized("prefix", template="p-identity-l2").strategy(32)
    assert np.any(strategy.block.rows < 0)  # the L2 template's rows take both signs

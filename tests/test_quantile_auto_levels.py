"""auto_method between 9 and 18 levels on binned bounds, and auto never choosing a JointExp run
that would refuse its float-error charge (docs/quantiles.md, "The automatic choice")."""

import numpy as np
import pytest

import dprange
from dprange import quantile_mechanisms as qm
from dprange.errors import ParameterError


def test_auto_takes_the_split_where_jointexp_would_refuse_its_charge():
    """A huge declared n_max makes JointExp's float-error charge half of epsilon or more, which
    it refuses; auto used to choose it anyway and raise."""
    levels = np.arange(1, 10) / 10
    values = np.random.default_rng(5).normal(0, 1, 300)
    with pytest.raises(ParameterError, match="float error"):
        dprange.quantiles(values, levels, 0.1, bounds=(-5, 5), method="joint_exp", n_max=3_000_000, rng=6)
    result = dprange.quantiles(values, levels, 0.1, bounds=(-5, 5), n_max=3_000_000, rng=6)
    assert result.method == "approximate" and "float-error charge" in result.reason
    # a smaller n_max is affordable, and auto takes JointExp there
    assert not qm.joint_affordable(0.1, levels, "add_remove", 3_000_000, 10.0)
    assert qm.joint_affordable(0.1, levels, "add_remove", 1_000_000, 10.0)
    assert dprange.quantiles(values, levels, 0.1, bounds=(-5, 5), n_max=1_000_000, rng=6).method == "joint_exp"


def test_joint_affordable_is_the_refusal_boundary():
    """joint_affordable is True exactly where joint_charged_epsilon returns (charge < epsilon / 2)."""
    levels = np.arange(1, 12) / 12
    for n_max in (10**4, 10**6, 2 * 10**6, 3 * 10**6, 10**7):
        for epsilon in (0.1, 1.0):
            try:
                charged = qm.joint_charged_epsilon(epsilon, levels, "add_remove", n_max, 10.0)
            except ParameterError:
                charged = None
            assert qm.joint_affordable(epsilon, levels, "add_remove", n_max, 10.0) is (charged is not None)
            if charged is not None:
                assert epsilon / 2 < charged < epsilon

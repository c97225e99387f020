"""dprange.quantile_mechanisms.methods: auto's choice of method by levels, bins and record bound,
never a JointExp run that would refuse its float-error charge (docs/quantiles.md, "The automatic
choice")."""

import numpy as np
import pytest

import dprange
from dprange.errors import ParameterError
from dprange.quantile_mechanisms import joint_exp
from dprange.quantile_mechanisms import methods as qm


def pick(m, n, epsilon=1.0, binned=True, joint_ok=True):
    return qm.auto_method(m, epsilon, integer=False, width=10.0, n=n, binned=binned, joint_ok=joint_ok)[0]


def test_binned_bounds_take_jointexp_up_to_11_levels_then_the_split():
    """More bins than m^2: JointExp for 2..11 levels (the split's depth is 4 from 8 to 15
    levels while JointExp's error grows with m; measured in docs/quantiles.md), the split from 12."""
    # n epsilon = 10^4: 256 bins; m^2 = 81, 100, 121, 144, 196 < 256 <= 324
    assert [pick(m, 10_000) for m in (9, 10, 11)] == ["joint_exp"] * 3
    assert [pick(m, 10_000) for m in (12, 13, 14, 15)] == ["approximate"] * 4
    assert pick(18, 10_000) == "histogram"
    # n epsilon = 32561 (fnlwgt at epsilon 1): 1024 bins, more than m^2 up to 31 levels
    assert [pick(m, 32_561) for m in (10, 11, 12, 18, 31, 32)] == [
        "joint_exp",
        "joint_exp",
        "approximate",
        "approximate",
        "approximate",
        "histogram",
    ]
    # without a record bound under add/remove: the exact split instead of JointExp
    assert [pick(m, 10_000, joint_ok=False) for m in (10, 11)] == ["approximate"] * 2
    # one bin per integer, or no n: still by m alone (the histogram route from 10 levels)
    assert [pick(m, None, binned=False) for m in (9, 10, 11, 14, 18)] == ["joint_exp"] + ["histogram"] * 4
    assert [pick(m, None) for m in (9, 10, 11)] == ["joint_exp", "histogram", "histogram"]


def test_auto_takes_the_split_where_jointexp_would_refuse_its_charge(monkeypatch):
    """A huge declared n_max makes JointExp's float-error charge half of epsilon or more, which
    it refuses; auto used to choose it anyway and raise.  In double precision (a platform whose
    long double is double) that happens from about 10^9 records at 9 levels and epsilon 0.1;
    extended precision moves it past 10^10."""
    levels = np.arange(1, 10) / 10
    values = np.random.default_rng(5).normal(0, 1, 300)
    monkeypatch.setattr(joint_exp, "extended_precision_available", lambda: False)
    with pytest.raises(ParameterError, match="float error"):
        dprange.quantiles(values, levels, 0.1, bounds=(-5, 5), method="joint_exp", n_max=10**9, rng=6)
    result = dprange.quantiles(values, levels, 0.1, bounds=(-5, 5), n_max=10**9, rng=6)
    assert result.method == "approximate" and "float-error charge" in result.reason
    # a smaller n_max is affordable, and auto takes JointExp there
    assert not joint_exp.joint_affordable(0.1, levels, "add_remove", 10**9, 10.0)
    assert joint_exp.joint_affordable(0.1, levels, "add_remove", 10**8, 10.0)
    assert dprange.quantiles(values, levels, 0.1, bounds=(-5, 5), n_max=10**8, rng=6).method == "joint_exp"


def test_auto_rule_by_levels_only():
    """Without a record count (n=None): m = 1: the exponential mechanism; 2..9: JointExp;
    >= 10: the histogram route, whatever the bounds (integer, small or wide, or real) and
    epsilon (with n: tests/quantile_mechanisms/test_bins.py)."""
    for integer, width in ((True, 100), (True, 1_500_000), (False, 10.0)):
        for epsilon in (0.1, 1.0):
            chosen = [qm.auto_method(m, epsilon, integer=integer, width=width)[0] for m in (1, 2, 9, 10, 99)]
            assert chosen == ["approximate", "joint_exp", "joint_exp", "histogram", "histogram"]


def test_auto_uses_joint_exp_only_with_a_record_bound():
    values = np.random.default_rng(42).normal(0, 1, 200)
    plain = dprange.quantiles(values, [0.25, 0.75], 1.0, bounds=(-4, 4), rng=1)
    assert plain.method == "approximate" and "n_max" in plain.reason
    bounded = dprange.quantiles(values, [0.25, 0.75], 1.0, bounds=(-4, 4), rng=1, n_max=500)
    assert bounded.method == "joint_exp"
    replace = dprange.quantiles(values, [0.25, 0.75], 1.0, bounds=(-4, 4), rng=1, neighbours="replace")
    assert replace.method == "joint_exp"

"""dprange.ldp.coins: the rigorous lower bound on e^epsilon behind every client's thresholds, and
the redacted value check."""

import math
from fractions import Fraction

import pytest
from _helpers import exp_bounds

from dprange import DomainError
from dprange.ldp.oracles import exp_lower_bound


def test_local_dp_value_check_redacts_the_count():
    from dprange import redacted
    from dprange.ldp.oracles import check_values

    with pytest.raises(DomainError, match="; 2 do not$"):
        check_values([5, 9, 1], 3)
    with redacted():
        with pytest.raises(DomainError, match="; <redacted> do not$"):
            check_values([5, 9, 1], 3)


def test_exp_lower_bound_is_rigorous_and_tight():
    """The library's L <= e^eps (checked against an independent Taylor lower bound) and within
    a relative 1e-39 of it, from 1e-300 to 709."""
    for eps in (1e-300, 2.0**-60, 1e-9, 0.3, 1.0, math.log(65535), math.log(2**32 - 1), 36.0, 200.0, 709.0):
        lo, hi = exp_bounds(eps)
        assert hi - lo < lo * Fraction(1, 10**60)
        bound = exp_lower_bound(eps)
        assert bound <= lo and bound >= lo * (1 - Fraction(1, 10**39)), eps

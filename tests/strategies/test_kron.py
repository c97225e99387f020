"""dprange.strategies.kron: Kronecker sensitivities (add/remove and replace, with ties and blocks)
against the definition, column entries from structure, and the triangle bound above the exact
limit."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

import dprange.strategies.kron as kron_strategies
from dprange.analysis.grid import expected_error
from dprange.mechanisms.grid import Kronecker
from dprange.mechanisms.optimized_grid import OptimizedKronecker
from dprange.operators import definition_sensitivity_power
from dprange.strategies.kron import axis_strategy, column_entries

# ----------------------------------------------------------------------------- sensitivity


def reference_kron_replace_power(axis_levels, combos, weights, p):
    """The replace Delta_p^p by enumerating every combination of the axes' patterns in exact
    arithmetic (the implementation before the float pre-pass)."""
    powers = [abs(w) ** p for w in weights]
    from dprange.strategies.kron import axis_patterns

    patterns = [axis_patterns(tuple(levels)) for levels in axis_levels]
    change = {0: 0, 1: 2**p, 2: 2}
    best = 0
    for choice in itertools.product(*patterns):
        total = 0
        for combo, power in zip(combos, powers):
            cases = [int(choice[a][level]) for a, level in enumerate(combo)]
            case = 2 if 2 in cases else cases.count(1) % 2
            total += power * change[case]
        best = max(best, total)
    return best


@pytest.mark.parametrize("block", [1 << 20, 1, 7])
@pytest.mark.parametrize(
    "shape,axes",
    [((2,) * 6, [2] * 6), ((5, 6, 4), [3, "haar", 2]), ((4, 4), ["haar", 2]), ((2, 4, 4), [2, "haar", "haar"])],
)
def test_kronecker_replace_sensitivity_is_exact_with_ties_and_blocks(monkeypatch, shape, axes, block):
    """The float pre-pass and the exact pass over the near-maximal combinations give exactly
    the full enumeration's value (many tied maxima on six binary axes; weights in Fractions and
    in ints), whether the combinations are totalled in one block or looped (REPLACE_BLOCK)."""
    import dprange.strategies.kron as multidim

    monkeypatch.setattr(multidim, "REPLACE_BLOCK", block)
    plan = Kronecker(axes, budget="geometric", neighbours="replace").plan(shape, 1.0)
    axis_levels, combos = plan.axis_levels, plan.combos
    rng = np.random.default_rng(len(shape) + block)
    for weights in ([Fraction(int(k), 7) for k in rng.integers(1, 9, len(combos))], [1] * len(combos)):
        for p in (1, 2):
            got = multidim.kron_sensitivity_power(axis_levels, combos, weights, p, "replace")
            assert got == reference_kron_replace_power(axis_levels, combos, weights, p)
            assert isinstance(got, Fraction if isinstance(weights[0], Fraction) else int)


KRON_CASES = [((3, 5), [2, "identity"]), ((5, 6), [3, "haar"]), ((4, 3), ["haar", "haar"]), ((2, 3, 2), [2, 2, 2])]


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("shape,axes", KRON_CASES)
def test_kronecker_sensitivity_equals_the_definition(shape, axes, relation):
    mech = Kronecker(axes, budget="geometric", neighbours=relation)
    plan = mech.plan(shape, 1.0)
    weights = [Fraction(e) for e in plan.budget]
    dense = np.vstack([float(w) * b.dense() for w, b in zip(weights, plan.blocks)])
    for p in (1, 2):
        exact = plan.sensitivity_power(p, relation, weights)
        assert float(exact) == pytest.approx(definition_sensitivity_power(dense, p, relation), rel=1e-12)
    if relation == "add_remove":
        assert plan.sensitivity_power(1, relation, weights) == sum(weights)


@pytest.mark.parametrize("axis", ["identity", "haar", 3])
def test_column_entries_from_structure_equal_the_dense_matrix(axis):
    for op in axis_strategy(axis, 11)[0]:
        rows, signs = column_entries(op)
        dense = np.zeros(op.shape)
        dense[rows, np.arange(11)] = signs
        np.testing.assert_array_equal(dense, op.dense())


@pytest.mark.usefixtures("private_cache")
def test_replace_l1_sensitivity_above_the_exact_limit_is_the_triangle_bound(monkeypatch):
    """Replace neighbours, L1: the exact pairwise maximum (the dense definition) where
    affordable; above the limit 2 M for the add/remove power M, never below the exact value
    (within 0.1% of it here); 64 x 64 (beyond the definition's 4096 columns) now has a
    finite error.  L2 stays exact."""
    shape = (16, 12)
    mech = OptimizedKronecker("prefix-rectangles", neighbours="replace")
    plan = mech.optimised_plan(shape, 1.0)  # (its identity product is lower as released here)
    dense = np.kron(*(s.explicit() for s in mech.axis_strategies(shape)))
    exact = definition_sensitivity_power(dense, 1, "replace")
    assert plan.sensitivity_power(1, "replace") == exact
    monkeypatch.setattr(kron_strategies, "EXACT_PAIRS_LIMIT", 0)  # where the plan reads it
    bound = plan.sensitivity_power(1, "replace")
    assert bound == 2 * definition_sensitivity_power(dense, 1, "add_remove")
    assert exact <= bound <= 1.001 * exact
    l2 = OptimizedKronecker("prefix-rectangles", template="p-identity-l2", neighbours="replace")
    dense = np.kron(*(s.explicit() for s in l2.axis_strategies(shape)))
    want = definition_sensitivity_power(dense, 2, "replace")
    assert float(l2.optimised_plan(shape, 1.0).sensitivity_power(2, "replace")) == pytest.approx(want, rel=1e-12)
    monkeypatch.undo()
    error = expected_error(OptimizedKronecker("all-rectangles", neighbours="replace"), (64, 64), "all-rectangles", 1.0)
    assert math.isfinite(error)

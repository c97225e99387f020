"""dprange.operators.base: the sensitivity from the definition with known entries (the exact integer
path beyond 2^53)."""

from fractions import Fraction

import numpy as np
import pytest

from dprange.operators import definition_sensitivity_power
from dprange.strategies.matrix import MatrixStrategy

pytestmark = pytest.mark.usefixtures("private_cache")


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
@pytest.mark.parametrize("p", [1, 2])
def test_the_sensitivity_with_known_entries_is_the_definition(neighbours, p):
    A = np.random.default_rng(7).integers(-3, 4, (9, 7)).astype(float)
    expected = definition_sensitivity_power(A, p, neighbours)
    assert definition_sensitivity_power(A, p, neighbours, entries=(True, 3)) == expected
    assert MatrixStrategy(A).block.sensitivity_power(p, neighbours) == expected
    big = A * 2.0**26  # float sums would pass 2^53 under L2: the exact integer path
    assert definition_sensitivity_power(big, p, neighbours, entries=(True, 3 * 2**26)) == Fraction(expected) * 2 ** (
        26 * p
    )

"""dprange.inference.covering: without inference a range's variance is the sum of the variances of
the fewest nodes covering it, against the explicit decomposition."""

import numpy as np
import pytest

from dprange import Hierarchical


@pytest.mark.parametrize("n,branching,root", [(16, 2, False), (27, 3, True), (20, 4, False), (30, [2, 4, 4], True)])
def test_direct_range_variance_matches_explicit_decomposition(n, branching, root):
    """Without inference, a range's variance is the sum of the variances of the fewest nodes
    tiling it; check against a brute-force search over the tree's nodes."""
    from dprange.inference.covering import direct_range_variance

    mech = Hierarchical(branching, measure_root=root, noise="laplace_float")
    strategy = mech.strategy(n)
    variances = mech.level_variances(strategy, 1.0, 0.0)
    # brute force: greedy from the top - the largest node inside the remaining range
    N = strategy.block_sizes[0]

    def brute(a, b):
        end = N if b == n - 1 else b + 1
        total, pos = 0.0, a
        while pos < min(end, n):  # padding-only nodes do not exist
            for d in strategy.measured_depths:
                m = strategy.block_sizes[d]
                if pos % m == 0 and pos + m <= end:
                    total += variances[d]
                    pos += m
                    break
        return total

    lo, hi = np.triu_indices(n)
    expected = np.array([brute(a, b) for a, b in zip(lo, hi)])
    np.testing.assert_allclose(direct_range_variance(strategy, variances, lo, hi), expected)

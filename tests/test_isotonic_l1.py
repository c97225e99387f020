"""Integer L1 isotonic regression by partitioning equals pool-adjacent-violators (issue 16).

The former implementation (pool-adjacent-violators re-sorting every merged block for its
smallest integer median, tests/reference_inference.py) is the reference: the partitioning
path must return exactly its solution, which is the pointwise smallest optimal one (checked
by brute force)."""

import numpy as np
from reference_inference import former_isotonic_l1

from dprange import Hierarchical
from dprange.inference.consistency import consistent_cdf


def test_release_l1_consistent_cdf_equals_pool_adjacent_violators():
    counts = np.zeros(3000, dtype=np.int64)
    counts[:200] = np.random.default_rng(14).poisson(8, 200)  # a long empty tail
    release = Hierarchical(8).release(counts, 0.5, rng=3)
    got = release.consistent_cumulative("l1")
    y = np.cumsum(release.estimate)
    total = int(round(y[-1]))
    want = np.append(former_isotonic_l1(np.clip(y[:-1], 0, total), total), total)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(consistent_cdf(y, total, "l1"), want)

"""Integer L1 isotonic regression by partitioning equals pool-adjacent-violators (issue 16).

The former implementation (pool-adjacent-violators re-sorting every merged block for its
smallest integer median, tests/reference_inference.py) is the reference: the partitioning
path must return exactly its solution, which is the pointwise smallest optimal one (checked
by brute force).
"""

import itertools

import numpy as np
import pytest
from reference_inference import former_isotonic_l1

from dprange import Hierarchical
from dprange.inference import consistency
from dprange.inference.consistency import consistent_cdf


def _random_case(rng):
    size = int(rng.integers(1, 40))
    total = int(rng.integers(0, 60))
    y = np.sort(rng.integers(0, total + 1, size)) + rng.laplace(0, rng.choice([0.5, 3.0, 15.0]), size)
    kind = rng.random()
    if kind < 0.3:
        y = np.round(y)  # integer inputs: ties everywhere
    elif kind < 0.5:
        y = np.round(y * 2) / 2  # half-integers: bins exactly between two candidates
    return np.clip(y, 0, total), total


def test_partitioning_equals_pool_adjacent_violators_on_thousands_of_cases():
    rng = np.random.default_rng(11)
    for _ in range(1500):
        y, total = _random_case(rng)
        np.testing.assert_array_equal(consistency._isotonic_l1(y, total), former_isotonic_l1(y, total))


def test_partitioning_is_the_smallest_optimal_solution():
    """Brute force over every non-decreasing integer sequence: least cost, then pointwise least."""
    rng = np.random.default_rng(12)
    for _ in range(150):
        size = int(rng.integers(1, 6))
        total = int(rng.integers(0, 7))
        y = np.clip(np.sort(rng.uniform(0, total, size)) + rng.normal(0, 2, size), 0, total)
        if rng.random() < 0.4:
            y = np.round(y * 2) / 2
        costs = {
            c: float(np.abs(np.array(c) - y).sum())
            for c in itertools.combinations_with_replacement(range(total + 1), size)
        }
        best = min(costs.values())
        optimal = np.array([c for c, v in costs.items() if v <= best + 1e-12])
        got = consistency._isotonic_l1(y, total)
        assert float(np.abs(got - y).sum()) == pytest.approx(best, abs=1e-12)
        np.testing.assert_array_equal(got, optimal.min(axis=0))  # the optimal set is a lattice


@pytest.mark.parametrize("shape", ["increasing", "flat tail", "iid noise"])
def test_large_inputs_equal_pool_adjacent_violators(shape):
    rng = np.random.default_rng(13)
    n = 20_000
    if shape == "increasing":
        y = np.cumsum(rng.poisson(5, n)) + rng.laplace(0, 20, n)
    elif shape == "flat tail":  # most bins empty: one long region of noise around the total
        y = np.minimum(np.arange(n), 500) * 3.0 + rng.laplace(0, 40, n)
    else:
        y = np.cumsum(rng.poisson(50, n)) + rng.laplace(0, 1000, n)
    total = int(max(y.max(), 0))
    y = np.clip(y, 0, total)
    np.testing.assert_array_equal(consistency._isotonic_l1(y, total), former_isotonic_l1(y, total))


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

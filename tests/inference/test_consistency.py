"""dprange.inference.consistency: consistent CDFs from noisy cumulative counts.  The trellis equals
brute force, isotonic regression equals the trellis, and the integer L1 isotonic regression by
partitioning equals pool-adjacent-violators (issue 16; the former implementation,
tests/reference_inference.py, is the reference); totals and values beyond int64 are refused."""

import itertools

import numpy as np
import pytest
from reference_inference import former_isotonic_l1

from dprange import Hierarchical, ParameterError
from dprange.inference import consistency
from dprange.inference.consistency import consistent_cdf

LOSSES = {
    "l1": lambda v, y: np.abs(v - y),
    "l2": lambda v, y: (v - y) ** 2,
}


def nonconvex(v, y):
    return np.sqrt(np.abs(v - y)) + 0.3 * (np.abs(v - y) > 1.5)


def cost(c, y, f):
    return float(sum(f(np.float64(v), yy) for v, yy in zip(c[:-1], y[:-1])))


def brute_force(y, total, f):
    best = np.inf
    for c in itertools.combinations_with_replacement(range(total + 1), len(y) - 1):
        best = min(best, cost(list(c) + [total], y, f))
    return best


def test_trellis_equals_brute_force_for_l1_l2_and_nonconvex():
    rng = np.random.default_rng(0)
    for _ in range(150):
        L = int(rng.integers(2, 6))
        total = int(rng.integers(0, 7))
        y = np.sort(rng.uniform(0, total, L)) + rng.normal(0, 2, L)
        for name, f in [("l1", LOSSES["l1"]), ("l2", LOSSES["l2"]), (nonconvex, nonconvex)]:
            c = consistent_cdf(y, total, name, method="trellis")
            assert c[-1] == total and np.all(np.diff(c) >= 0) and c[0] >= 0
            assert cost(c, y, f) == pytest.approx(brute_force(y, total, f), abs=1e-9)


@pytest.mark.parametrize("loss", ["l1", "l2"])
def test_isotonic_equals_trellis_on_thousands_of_cases(loss):
    rng = np.random.default_rng(1 if loss == "l1" else 2)
    f = LOSSES[loss]
    for _ in range(2000):
        L = int(rng.integers(2, 30))
        total = int(rng.integers(0, 40))
        truth = np.sort(rng.integers(0, total + 1, L))
        scale = rng.choice([0.5, 3.0, 15.0])
        y = truth + rng.laplace(0, scale, L)
        if rng.random() < 0.2:
            y = np.round(y)  # integer inputs create ties
        fast = consistent_cdf(y, total, loss, method="isotonic")
        exact = consistent_cdf(y, total, loss, method="trellis")
        assert np.all(np.diff(fast) >= 0) and fast[-1] == total and fast.min() >= 0
        assert cost(fast, y, f) == pytest.approx(cost(exact, y, f), abs=1e-7)


def test_scalable_path_handles_large_totals():
    rng = np.random.default_rng(3)
    L = 5000
    truth = np.cumsum(rng.poisson(200_000, L))
    y = truth + rng.laplace(0, 5000, L)
    for loss in ("l1", "l2"):
        c = consistent_cdf(y, int(truth[-1]), loss)
        assert c.dtype == np.int64 and np.all(np.diff(c) >= 0) and c[-1] == truth[-1]
        # projection onto a convex set containing the truth: never farther from it (L2, up to rounding)
        if loss == "l2":
            assert np.linalg.norm(c - truth) <= np.linalg.norm(y - truth) + np.sqrt(L)


def test_bad_input():
    with pytest.raises(ParameterError):
        consistent_cdf([], 3)
    with pytest.raises(ParameterError):
        consistent_cdf([1, np.nan], 3)
    with pytest.raises(ParameterError):
        consistent_cdf([1, 2], -1)
    with pytest.raises(ParameterError):
        consistent_cdf([1, 2], 2.5)
    with pytest.raises(ParameterError):
        consistent_cdf([1, 2], 3, nonconvex, method="isotonic")
    with pytest.raises(ParameterError):
        consistent_cdf([1, 2], 3, "l7")


@pytest.mark.parametrize(
    "total", [2**63, 2**53 + 1, 10**400, float("inf"), float("nan"), "3", None, True, [3], 2.5, -1]
)
def test_totals_beyond_2_53_or_of_wrong_type_are_refused(total):
    with pytest.raises(ParameterError, match="total must be a non-negative integer"):
        consistent_cdf([1.0, 2.0], total)


def test_total_at_the_limit_is_exact():
    from dprange.inference.consistency import MAX_TOTAL

    c = consistent_cdf([1.0, 5.0], MAX_TOTAL)
    assert c.tolist() == [1, MAX_TOTAL]


@pytest.mark.parametrize(
    "values", [[[1, 2], [3, 4]], np.zeros((3, 1)), ["a", "b"], [True, False], "12", None, [[1, 2], [3]], [1 + 1j, 2]]
)
def test_noisy_cumulative_must_be_a_1d_numeric_array(values):
    with pytest.raises(ParameterError, match="noisy_cumulative"):
        consistent_cdf(values, 3)


def test_huge_noisy_values_stay_in_int64_and_keep_the_l1_optimum():
    # clipping to [0, N] changes the L1 loss by a constant on the feasible set
    y = np.array([1e30, -1e30, 4.6e18, 3.0])
    c = consistent_cdf(y, 5, "l1")
    f = LOSSES["l1"]
    assert c.dtype == np.int64 and c[-1] == 5 and np.all(np.diff(c) >= 0)
    assert cost(c, y, f) == pytest.approx(cost(consistent_cdf(y, 5, "l1", method="trellis"), y, f), rel=1e-12)
    c2 = consistent_cdf(y, 5, "l2")
    assert c2.tolist() == [0, 0, 5, 5]  # 2 c^2 + const is least at c = 0


def test_trellis_refuses_more_states_than_it_can_hold():
    with pytest.raises(ParameterError, match="trellis"):
        consistent_cdf([1.0, 2.0], 2**30, lambda v, y: (v - y) ** 2)


def test_level_sums_cannot_overflow_int64():
    counts = np.array([4.6e18] * 4, dtype=np.int64)
    with pytest.raises(ParameterError, match="2\\^53"):
        Hierarchical(2).release(counts, 1.0, rng=0)


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

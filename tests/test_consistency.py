"""CDF consistency: trellis = brute force; isotonic = trellis; Release integration."""

import itertools

import numpy as np
import pytest

import dprange
from dprange import Hierarchical, ParameterError
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


def test_release_consistent_cdf_and_quantiles():
    x = np.random.default_rng(4).poisson(20, 300)
    for mech in (Hierarchical(4, neighbours="replace"), Hierarchical(16)):
        rel = mech.release(x, 0.5, rng=5)
        cdf = rel.cdf(consistent=True).value
        assert np.all(np.diff(cdf) >= 0) and cdf[-1] == 1.0 and cdf[0] >= 0
        q = rel.quantile([0.25, 0.5, 0.75], consistent=True)
        assert np.all(np.diff(q.value) >= 0)
        lower, upper = q.confidence_interval()
        assert np.all(lower <= upper)
    rel = Hierarchical(4, neighbours="replace").release(x, 0.5, rng=5)
    assert rel.consistent_cumulative()[-1] == x.sum()

"""Private bounds: exact output probabilities from the noise pmf, sampler frequencies, and the
neighbour ratio, on a small bucket range (exponents -1..1: seven buckets)."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from dprange import DataError, ParameterError
from dprange.privacy import noise
from dprange.quantile_mechanisms import private_bounds as pb

LO, HI = -1, 1
EPSILON = 1.5


def reach_probability(count, cut, scale):
    """P(count + discrete Laplace noise >= cut), from the sampler's exact pmf."""
    k = np.arange(cut - count, cut - count + 4000)
    return float(np.sum(noise.pmf("discrete_laplace", scale, k)))


def output_table(counts, epsilon, relation):
    """{(first, last) kept bucket or None: probability}, from the definition."""
    scale = pb.noise_scale(epsilon, relation)
    cut = pb.threshold(scale, len(counts))
    reach = [reach_probability(c, cut, scale) for c in counts]
    miss = [1.0 - r for r in reach]
    table = {None: math.prod(miss)}
    for first, last in itertools.combinations_with_replacement(range(len(counts)), 2):
        p = math.prod(miss[:first]) * reach[first] * math.prod(miss[last + 1 :])
        if last > first:
            p *= reach[last]
        table[(first, last)] = p
    return table


def test_buckets_and_bounds():
    edges = pb.bucket_edges(LO, HI)
    assert edges.tolist() == [-4.0, -2.0, -1.0, -0.5, 0.5, 1.0, 2.0, 4.0]
    assert pb.bucket_counts([-9, -1.5, 0.0, 0.49, 0.5, 3.0, 100.0], LO, HI).tolist() == [1, 1, 0, 2, 1, 0, 2]
    assert pb.bounds_from_buckets(4, 5, edges, integer=False) == (0.0, 2.0)
    assert pb.bounds_from_buckets(1, 5, edges, integer=False) == (-2.0, 2.0)
    assert pb.bounds_from_buckets(3, 3, edges, integer=False) == (-0.5, 0.5)
    assert pb.bounds_from_buckets(3, 3, edges, integer=True) == (-1.0, 1.0)
    assert pb.bounds_from_buckets(0, 2, edges, integer=False) == (-4.0, 0.0)


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_output_probabilities_and_neighbour_ratio(relation):
    values = [0.0, 0.7, 0.8, 1.5, 1.6, 1.7, 3.0]
    counts = pb.bucket_counts(values, LO, HI)
    table = output_table(counts, EPSILON, relation)
    assert math.isclose(math.fsum(table.values()), 1.0, rel_tol=1e-9)
    # the sampler: frequencies of its outputs against the table (bounds are a function of (first, last))
    edges = pb.bucket_edges(LO, HI)
    by_bounds: dict = {}
    for key, p in table.items():
        out = None if key is None else pb.bounds_from_buckets(*key, edges, integer=False)
        by_bounds[out] = by_bounds.get(out, 0.0) + p
    rng = np.random.default_rng(11)
    seen: dict = dict.fromkeys(by_bounds, 0)
    for _ in range(2000):
        try:
            found = pb.private_bounds(values, EPSILON, neighbours=relation, rng=rng, min_exponent=LO, max_exponent=HI)
            seen[(found.lower, found.upper)] += 1
        except DataError:
            seen[None] += 1
    keys = [k for k in by_bounds if by_bounds[k] * 2000 >= 5]
    rest = [k for k in by_bounds if k not in keys]
    observed = [seen[k] for k in keys] + [sum(seen[k] for k in rest)]
    expected = [by_bounds[k] for k in keys] + [sum(by_bounds[k] for k in rest)]
    assert stats.chisquare(observed, np.array(expected) * 2000 / sum(expected)).pvalue > 1e-4
    # every neighbour: every output's probability within a factor e^epsilon
    buckets = len(counts)
    if relation == "add_remove":
        changes = [np.eye(buckets, dtype=int)[i] for i in range(buckets)]
        changes += [-c for c in changes]
    else:
        changes = [
            np.eye(buckets, dtype=int)[i] - np.eye(buckets, dtype=int)[j]
            for i in range(buckets)
            for j in range(buckets)
            if i != j
        ]
    worst = 0.0
    for change in changes:
        other = counts + change
        if other.min() < 0:
            continue
        theirs = output_table(other, EPSILON, relation)
        worst = max(worst, max(abs(math.log(table[k]) - math.log(theirs[k])) for k in table))
    assert worst <= EPSILON + 1e-9
    assert worst > 0.5 * EPSILON  # the bound is nearly reached: the test can fail


def test_bounds_cover_typical_data():
    rng = np.random.default_rng(12)
    found = pb.private_bounds(rng.normal(50, 10, 5000), 0.5, rng=rng)
    assert (found.lower, found.upper) == (0.0, 128.0)
    found = pb.private_bounds(rng.integers(0, 100_000, 3000), 0.5, integer=True, rng=rng)
    assert found.lower == 0.0 and found.upper == 131072.0
    found = pb.private_bounds(-rng.lognormal(3, 1, 3000), 0.5, rng=rng)
    assert found.upper == 0.0 and found.lower <= -256


def test_too_few_records_and_bad_epsilon():
    with pytest.raises(DataError, match="too few records"):
        pb.private_bounds([1.0, 2.0], 0.1, rng=0)
    with pytest.raises(ParameterError, match="epsilon"):
        pb.private_bounds([1.0], 0.0, rng=0)
    with pytest.raises(ParameterError, match="neighbours"):
        pb.private_bounds([1.0], 1.0, neighbours="swap", rng=0)

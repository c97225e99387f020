"""The exponential mechanism for one quantile and the recursive split of ApproxQuantiles
(dprange.quantile_mechanisms.exponential; Kaplan, Schnapp, Stemmer, ICML 2022) against their
definitions, with exact probabilities on tiny inputs, sampler frequencies, and atoms."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from _helpers import chi_square_p

from dprange.quantile_mechanisms import exponential
from dprange.quantile_mechanisms import grid as quantile_grid

P_FLOOR = 1e-4


# ----------------------------------------------------------------------------- definitions


def em_definition(cells, grid_size, q, gamma):
    """P(c) proportional to exp(-gamma dist(q n, [#{z < c}, #{z <= c}])), by brute force over c."""
    cells = list(cells)
    target = Fraction(q) * len(cells)
    weights = []
    for c in range(grid_size):
        below = sum(z < c for z in cells)
        at_or_below = sum(z <= c for z in cells)
        dist = max(below - target, target - at_or_below, Fraction(0))
        weights.append(math.exp(-float(Fraction(gamma) * dist)))
    total = math.fsum(weights)
    return np.array(weights) / total


def aq_definition(cells, lo, hi, levels, epsilon, neighbours):
    """Exact distribution of the recursive split on cells lo..hi: {tuple of outputs: prob}."""
    m = len(levels)
    per_call = Fraction(epsilon) / ((m.bit_length()) * (2 if neighbours == "replace" else 1))

    def recurse(data, lo, hi, levels):
        if not levels:
            return {(): 1.0}
        mid = len(levels) // 2
        level = levels[mid]
        gamma = per_call / (2 * max(Fraction(level), 1 - Fraction(level)))
        probs = em_definition([z - lo for z in data], hi - lo + 1, level, gamma)
        out = {}
        for offset, p in enumerate(probs):
            v = lo + offset
            left = recurse([z for z in data if z <= v], lo, v, [x / level for x in levels[:mid]])
            right = recurse([z for z in data if z > v], v, hi, [(x - level) / (1 - level) for x in levels[mid + 1 :]])
            for (a, pa), (b, pb) in itertools.product(left.items(), right.items()):
                key = a + (v,) + b
                out[key] = out.get(key, 0.0) + p * pa * pb
        return out

    return recurse(sorted(cells), lo, hi, list(levels))


def neighbours_of(cells, grid_size, relation):
    """Every neighbouring dataset: one record added (any cell) or removed; or one replaced."""
    cells = list(cells)
    if relation == "add_remove":
        yield from (sorted(cells + [c]) for c in range(grid_size))
        yield from (cells[:i] + cells[i + 1 :] for i in range(len(cells)))
    else:
        for i, c in itertools.product(range(len(cells)), range(grid_size)):
            yield sorted(cells[:i] + [c] + cells[i + 1 :])


# ----------------------------------------------------------------------------- exponential mechanism


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("q", [0.5, 0.3])
def test_exponential_mechanism_table_equals_definition_and_is_private(relation, q):
    cells, grid_size, epsilon = [0, 2, 2, 5], 7, 1.0
    gamma = Fraction(epsilon) / (2 * exponential.score_sensitivity(q, relation))
    table = exponential.exponential_quantile_probabilities(np.array(cells), grid_size, q, float(gamma))
    definition = em_definition(cells, grid_size, q, gamma)
    assert np.allclose(table, definition, rtol=1e-12, atol=0)
    worst = 0.0
    for other in neighbours_of(cells, grid_size, relation):
        other_table = em_definition(other, grid_size, q, gamma)
        worst = max(worst, float(np.max(np.abs(np.log(definition) - np.log(other_table)))))
    assert worst <= epsilon + 1e-12
    # the sensitivity is tight: some neighbour moves a score by exactly Delta
    assert worst > epsilon * 0.5


def test_exponential_mechanism_sampler_frequencies():
    cells, grid_size, q, gamma = np.array([0, 2, 2, 5]), 7, 0.5, Fraction(1, 2)
    rng = np.random.default_rng(4)
    draws = [exponential.exponential_quantile_cell(cells, grid_size, q, gamma, rng) for _ in range(3000)]
    expected = em_definition(cells, grid_size, q, gamma)
    assert chi_square_p(np.bincount(draws, minlength=grid_size), expected) > P_FLOOR


def test_score_sensitivity_is_the_largest_change_over_neighbours():
    """Brute force: the largest change of the score over all neighbours, per relation."""
    cells, grid_size = [0, 1, 1, 3, 4], 6
    for relation, q in itertools.product(["add_remove", "replace"], [0.2, 0.5, 0.75]):

        def scores(data, q=q):
            t = Fraction(q) * len(data)
            return [
                max(sum(z < c for z in data) - t, t - sum(z <= c for z in data), Fraction(0)) for c in range(grid_size)
            ]

        base = scores(cells)
        change = max(
            max(abs(a - b) for a, b in zip(base, scores(other), strict=True))
            for other in neighbours_of(cells, grid_size, relation)
        )
        assert change <= exponential.score_sensitivity(q, relation)


def test_exponential_quantile_on_a_point_mass_returns_it():
    grid = quantile_grid.QuantileGrid.from_bounds((0, 100), integer=True)
    values = np.zeros(500)
    out = [exponential.exponential_quantile(values, 0.5, 1.0, grid, rng=s) for s in range(20)]
    assert out == [0.0] * 20


# ----------------------------------------------------------------------------- recursive split


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_approximate_quantiles_distribution_and_privacy(relation):
    cells, grid_size, levels, epsilon = [0, 1, 3, 4], 5, [0.25, 0.5, 0.75], 2.0
    definition = aq_definition(cells, 0, grid_size - 1, levels, epsilon, relation)
    assert math.isclose(math.fsum(definition.values()), 1.0, rel_tol=1e-12)
    rng = np.random.default_rng(5)
    keys = sorted(definition)
    counts = dict.fromkeys(keys, 0)
    for _ in range(2500):
        out = exponential.approximate_quantiles_cells(
            np.array(cells), grid_size, np.array(levels), epsilon, relation, rng
        )
        counts[tuple(int(v) for v in out)] += 1
    assert chi_square_p([counts[k] for k in keys], [definition[k] for k in keys]) > P_FLOOR
    worst = 0.0
    for other in neighbours_of(cells, grid_size, relation):
        theirs = aq_definition(other, 0, grid_size - 1, levels, epsilon, relation)
        worst = max(worst, max(abs(math.log(definition[k]) - math.log(theirs[k])) for k in keys))
    assert worst <= epsilon + 1e-9


def test_recursion_levels():
    assert [exponential.recursion_levels(m) for m in (1, 2, 3, 4, 7, 8, 19, 99)] == [1, 2, 2, 3, 3, 4, 5, 7]


def test_approximate_quantiles_on_capital_gain_like_atoms():
    """92% zeros: the deciles up to 0.9 are 0; the tie-breaking sub-cells find them."""
    rng = np.random.default_rng(6)
    values = np.where(rng.random(5000) < 0.92, 0.0, rng.integers(1, 99_999, 5000))
    grid = quantile_grid.QuantileGrid.from_bounds((0, 99_999), integer=True)
    out = exponential.approximate_quantiles(values, np.linspace(0.1, 0.9, 9), 1.0, grid, rng=rng)
    assert np.all(out[:8] == 0)

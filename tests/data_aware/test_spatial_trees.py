"""dprange.data_aware.spatial_trees: the private-median cuts against the exponential mechanism's
definition and the neighbour ratio of the whole partition on tiny grids (exact output
probabilities), the levels partitioning the grid, and the tree least squares against the dense
GLS and Monte-Carlo."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dprange.data_aware.spatial_trees import (
    TreeFit,
    kd_level,
    quad_level,
    root_level,
    sample_split,
    split_gamma,
    split_probabilities,
    tree_least_squares,
)


# ------------------------------------------------------------------------- private medians
def em_probabilities(marginal, epsilon, delta_u):
    """The exponential mechanism from its definition: P(c) proportional to
    exp(epsilon u(c) / (2 Delta)), u(c) = -|sum_{i<c} m_i - sum_{i>=c} m_i|, c = 1..L-1."""
    m = np.asarray(marginal, dtype=float)
    u = np.array([-abs(m[:c].sum() - m[c:].sum()) for c in range(1, m.size)])
    w = np.exp(epsilon * u / (2 * delta_u))
    return w / w.sum()


def test_split_probabilities_are_the_exponential_mechanism_and_the_sampler_draws_them():
    marginal = np.array([3, 0, 5, 1, 0, 2])
    for neighbours, delta_u in (("add_remove", 1), ("replace", 2)):
        gamma = split_gamma(0.9, neighbours)
        assert gamma == Fraction(0.9) / (2 * delta_u)
        np.testing.assert_allclose(split_probabilities(marginal, gamma), em_probabilities(marginal, 0.9, delta_u))
    gamma = split_gamma(0.9, "add_remove")
    p = split_probabilities(marginal, gamma)
    source = np.random.default_rng(4)
    draws = 6000
    cuts = [sample_split(marginal, gamma, source) for _ in range(draws)]
    freq = np.bincount(cuts, minlength=marginal.size)[1:] / draws
    assert np.all(np.abs(freq - p) <= 4 * np.sqrt(p * (1 - p) / draws))


def partition_distribution(x, eps_level, delta_u):
    """Exact probabilities of every output of a depth-2 kd partition of a 3 x 3 grid (root cut
    along axis 0, then each part along axis 1), from the definition."""
    out = {}
    p_root = em_probabilities(x.sum(axis=1), eps_level, delta_u)
    for c0 in (1, 2):
        top, bottom = x[:c0], x[c0:]
        p_top = em_probabilities(top.sum(axis=0), eps_level, delta_u)
        p_bottom = em_probabilities(bottom.sum(axis=0), eps_level, delta_u)
        for ct, cb in itertools.product((1, 2), repeat=2):
            out[(c0, ct, cb)] = p_root[c0 - 1] * p_top[ct - 1] * p_bottom[cb - 1]
    return out


def neighbours_of(x, relation):
    cells = list(itertools.product(range(x.shape[0]), range(x.shape[1])))
    for i in cells:
        if relation == "add_remove":
            y = x.copy()
            y[i] += 1
            yield y
            continue
        for j in cells:
            if i != j and x[i] > 0:
                y = x.copy()
                y[i] -= 1
                y[j] += 1
                yield y


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_kd_partition_neighbour_ratio_is_at_most_its_share(neighbours):
    """Two levels of private medians at eps_level each: the whole partition is 2 eps_level-DP
    (exact output probabilities of every neighbour pair on 3 x 3 grids)."""
    eps_level, delta_u = 0.7, (2 if neighbours == "replace" else 1)
    rng = np.random.default_rng(5)
    bases = [np.zeros((3, 3), dtype=int), np.diag([4, 0, 2])] + [rng.integers(0, 4, (3, 3)) for _ in range(4)]
    worst = 0.0
    for x in bases:
        p = partition_distribution(x, eps_level, delta_u)
        for y in neighbours_of(x, neighbours):
            q = partition_distribution(y, eps_level, delta_u)
            worst = max(worst, max(abs(math.log(p[k] / q[k])) for k in p))
    assert worst <= 2 * eps_level + 1e-12
    assert worst > 0.5 * eps_level  # sensitive: the cuts do depend on the data


def test_kd_levels_draw_the_partition_with_its_exact_probabilities():
    x = np.array([[3, 0, 1], [0, 2, 5], [1, 1, 0]])
    p = partition_distribution(x, 0.8, 1)
    gamma = split_gamma(0.8, "add_remove")
    source = np.random.default_rng(6)
    draws = 3000
    seen: dict = {}
    for _ in range(draws):
        first = kd_level(x, root_level(x.shape), 0, gamma, source)
        second = kd_level(x, first, 1, gamma, source)
        c0 = int(first.hi[0, 0]) + 1
        ct, cb = int(second.hi[0, 1]) + 1, int(second.hi[2, 1]) + 1
        seen[(c0, ct, cb)] = seen.get((c0, ct, cb), 0) + 1
    for key, prob in p.items():
        freq = seen.get(key, 0) / draws
        assert abs(freq - prob) <= 4 * math.sqrt(prob * (1 - prob) / draws) + 1e-9, key


def test_levels_partition_the_grid():
    x = np.random.default_rng(7).integers(0, 5, (5, 7))
    source = np.random.default_rng(8)
    levels = [root_level(x.shape)]
    levels.append(kd_level(x, levels[-1], 0, Fraction(1), source))
    for _ in range(4):
        levels.append(quad_level(levels[-1]))
    for level in levels:
        cover = np.zeros(x.shape, dtype=int)
        for a, b in zip(level.lo, level.hi):
            cover[a[0] : b[0] + 1, a[1] : b[1] + 1] += 1
        assert np.all(cover == 1)
    for parent, child in zip(levels, levels[1:]):  # children lie inside their parent
        assert np.all(child.lo >= parent.lo[child.parent]) and np.all(child.hi <= parent.hi[child.parent])
    assert np.all(levels[-1].areas == 1)  # halving reaches single cells, then carries them down


# ------------------------------------------------------------------------- least squares
def small_tree(seed=9):
    x = np.random.default_rng(seed).integers(0, 6, (3, 5))
    source = np.random.default_rng(seed)
    levels = [root_level(x.shape)]
    levels.append(kd_level(x, levels[-1], 0, Fraction(1, 2), source))
    levels.append(quad_level(levels[-1]))
    levels.append(quad_level(levels[-1]))
    return x, levels


def ancestry(levels):
    """The dense 0/1 matrix of every node (rows, level by level) over the leaves (columns)."""
    leaves = levels[-1].size
    rows = []
    owner = np.arange(leaves)
    per_level = [None] * len(levels)
    per_level[-1] = owner
    for d in range(len(levels) - 1, 0, -1):
        owner = levels[d].parent[owner]
        per_level[d - 1] = owner
    for d, level in enumerate(levels):
        rows.append((per_level[d][None, :] == np.arange(level.size)[:, None]).astype(float))
    return rows


@pytest.mark.parametrize("known_total", [False, True])
@pytest.mark.parametrize("measured_levels", [(0, 1, 2, 3), (3,), (1, 3)])
def test_tree_least_squares_equals_the_dense_gls(known_total, measured_levels):
    x, levels = small_tree()
    rows = ancestry(levels)
    rng = np.random.default_rng(10)
    variances = [float(v) for v in rng.uniform(0.5, 4.0, len(levels))]
    values = [rng.normal(size=level.size) * 3 if d in measured_levels else None for d, level in enumerate(levels)]
    total = 7.5 if known_total else None
    got = tree_least_squares(levels, values, variances, total)[-1]
    A = np.vstack([rows[d] for d in measured_levels])
    v = np.concatenate([np.full(levels[d].size, variances[d]) for d in measured_levels])
    y = np.concatenate([values[d] for d in measured_levels])
    C = np.linalg.inv(A.T @ (A / v[:, None]))
    expected = C @ A.T @ (y / v)
    ones = np.ones(C.shape[0])
    if known_total:
        expected = expected - C @ ones * (ones @ expected - total) / (ones @ C @ ones)
        C = C - np.outer(C @ ones, C @ ones) / (ones @ C @ ones)
    np.testing.assert_allclose(got, expected, atol=1e-9)
    # the noise-only covariance of answers on the cells, through TreeFit
    specs = [_Spec(variances[d]) if d in measured_levels else None for d in range(len(levels))]
    fit = TreeFit(x.shape, levels, values, specs, total)
    q_cells = rng.normal(size=(4, x.size))
    q_leaves = fit.leaf_weights(q_cells)
    np.testing.assert_allclose(fit.query_variance(q_cells), np.einsum("ri,ij,rj->r", q_leaves, C, q_leaves))
    # the expansion spreads every leaf uniformly over its cells
    cells = fit.cells
    for i, (a, b) in enumerate(zip(levels[-1].lo, levels[-1].hi)):
        block = cells[a[0] : b[0] + 1, a[1] : b[1] + 1]
        assert np.allclose(block, got[i] / block.size)


class _Spec:
    """A stand-in noise spec with a given variance (the least squares reads only that)."""

    def __init__(self, variance):
        self.variance = variance


def test_noise_only_stderr_is_the_monte_carlo_spread_over_the_noise():
    """A fixed tree measured many times (the tree's own noise, fresh each time): the spread of a
    rectangle's answer is the noise-only standard error."""
    x, levels = small_tree(12)
    from dprange.data_aware.spatial_trees import box_sums, summed_area
    from dprange.data_aware.steps import laplace_spec

    table = summed_area(x)
    specs = [laplace_spec(0.4, 1) if d in (1, 3) else None for d in range(len(levels))]
    source = np.random.default_rng(13)
    answers = []
    fit = None
    for _ in range(3000):
        measured = [
            None if s is None else box_sums(table, lv.lo, lv.hi) + s.sample((lv.size,), source)
            for lv, s in zip(levels, specs)
        ]
        fit = TreeFit(x.shape, levels, measured, specs)
        answers.append(fit.cells[0:2, 1:4].sum())
    w = np.zeros(x.shape)
    w[0:2, 1:4] = 1
    expected = math.sqrt(fit.query_variance(w.ravel()[None, :])[0])
    assert np.std(answers, ddof=1) == pytest.approx(expected, rel=0.06)

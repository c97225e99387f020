"""StructureFirst (dprange.data_aware.structure_first): the interval deviations and partition sums
against brute force, the boundary step against the definition of differential privacy (exact
output probabilities on tiny domains, both relations, and not private at half its noise), the
sampler against those probabilities, the bucket trees' least squares and error model against
dense GLS and Monte-Carlo, boundaries that follow the data, the accounting and seeded
reproducibility."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from _helpers import Script, assert_unbiased_with_variance, gls_estimate, grid_neighbours, quadratic_forms

import dprange.data_aware.steps as data_aware_steps
import dprange.data_aware.structure_first as structure_first
from dprange.data_aware.steps import spent
from dprange.data_aware.structure_first import (
    BucketTrees,
    StructureFirst,
    cell_counts,
    cell_edges,
    deviation_sensitivity,
    log_partition_sums,
    scaled_deviations,
    selection_gamma,
)


def dev(x) -> Fraction:
    """The L1 deviation of x from its mean, exactly."""
    mean = Fraction(int(sum(x)), len(x))
    return sum((abs(v - mean) for v in x), Fraction(0))


def partitions(m: int, k: int):
    """Every partition of m cells into k intervals, as its k + 1 edges."""
    for cuts in itertools.combinations(range(1, m), k - 1):
        yield (0, *cuts, m)


def cost(x, edges) -> Fraction:
    return sum((dev(x[a:b]) for a, b in zip(edges, edges[1:])), Fraction(0))


def test_scaled_deviations_equal_brute_force():
    rng = np.random.default_rng(0)
    for m in (1, 2, 5, 9):
        for top in (1, 3, 40):
            x = rng.integers(0, top + 1, m)
            got = scaled_deviations(x)
            for a in range(m + 1):
                for b in range(m + 1):
                    expected = (b - a) * dev(x[a:b]) if a < b else 0
                    assert got[a, b] == expected


def test_log_partition_sums_equal_brute_force():
    rng = np.random.default_rng(1)
    m, k = 6, 5
    weights = np.full((m + 1, m + 1), -np.inf)
    upper = np.triu_indices(m + 1, 1)
    weights[upper] = rng.normal(size=upper[0].size)
    sums = log_partition_sums(weights, k)
    for j in range(1, k):
        for b in range(m + 1):
            terms = [sum(weights[e0, e1] for e0, e1 in zip(p, p[1:])) for p in partitions(b, j)] if b else []
            if not terms:
                assert sums[j, b] == -np.inf
            else:
                assert sums[j, b] == pytest.approx(math.log(math.fsum(math.exp(t) for t in terms)), abs=1e-12)


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize(("m", "k"), [(4, 2), (5, 3)])
def test_partition_cost_moves_by_at_most_the_declared_sensitivity(relation, m, k):
    """|cost_x(P) - cost_y(P)| <= Delta for every partition into k buckets and every neighbour,
    and the bound is attained (so a smaller one would be wrong)."""
    bound = deviation_sensitivity(m, k, 2 if relation == "replace" else 1)
    worst = Fraction(0)
    for x in itertools.product(range(3), repeat=m):
        x = np.array(x)
        for y in grid_neighbours(x, relation):
            for edges in partitions(m, k):
                worst = max(worst, abs(cost(x, edges) - cost(y, edges)))
    assert worst == bound


def boundary_law(monkeypatch, mech, x, epsilon_step):
    """{starts: log P_x(starts)} of the boundary step as the code samples it (every run of its
    exponential-mechanism choices enumerated with exact probabilities)."""
    with monkeypatch.context() as patch:
        script = Script(patch, [data_aware_steps])
        law = {}
        for log_p, starts in script.enumerate(lambda: tuple(mech.boundaries(x, epsilon_step, rng=0).tolist())):
            assert starts not in law
            law[starts] = log_p
    assert math.fsum(math.exp(lp) for lp in law.values()) == pytest.approx(1.0, abs=1e-12)
    return law


def ideal_law(x, k: int, max_count: int, epsilon_step: float, relation: str) -> dict:
    """{starts: log P} of the exponential mechanism over all partitions into k buckets, with
    exact costs of the clipped counts and the gamma the code uses."""
    m = x.size
    sensitivity = deviation_sensitivity(m, k, 2 if relation == "replace" else 1)
    gamma = selection_gamma(epsilon_step, sensitivity, k, m, m, max_count)
    clipped = np.minimum(x, max_count)
    scores = {p[:-1]: -gamma * float(cost(clipped, p)) for p in partitions(m, k)}
    top = max(scores.values())
    norm = top + math.log(math.fsum(math.exp(s - top) for s in scores.values()))
    return {p: s - norm for p, s in scores.items()}


def boundary_worst(monkeypatch, mech, bases, epsilon_step):
    worst = 0.0
    for x in bases:
        law_x = boundary_law(monkeypatch, mech, x, epsilon_step)
        for y in grid_neighbours(x, mech.neighbours):
            law_y = boundary_law(monkeypatch, mech, y, epsilon_step)
            worst = max(worst, max(abs(law_x[s] - law_y[s]) for s in law_x))
    return worst


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_boundary_step_is_differentially_private_exactly(monkeypatch, relation):
    """3 buckets on 5 bins, F = 2 (counts above it exercise the clipping): the law the code
    samples is the exponential mechanism's over all partitions, every neighbour's log-ratio is
    within epsilon_step and uses most of it; with half the noise (half the sensitivity) it
    exceeds epsilon_step."""
    k, f, eps_step = 3, 2, 0.6
    mech = StructureFirst(buckets=k, max_count=f, grid=1, neighbours=relation)
    # the first two: the worst bases of {0..3}^5 under add/remove and replace (found by search)
    bases = [np.array(x) for x in ([3, 3, 2, 3, 0], [0, 1, 3, 1, 0], [1, 2, 0, 1, 2], [0, 0, 0, 0, 3], [3, 0, 3, 0, 3])]
    for x in bases:
        law = boundary_law(monkeypatch, mech, x, eps_step)
        ideal = ideal_law(x, k, f, eps_step, relation)
        assert law.keys() == ideal.keys()
        assert max(abs(law[s] - ideal[s]) for s in law) < 1e-9
    worst = boundary_worst(monkeypatch, mech, bases, eps_step)
    assert worst <= eps_step
    assert worst >= 0.5 * eps_step
    halved = structure_first.deviation_sensitivity
    monkeypatch.setattr(
        structure_first, "deviation_sensitivity", lambda cells, buckets, changed: halved(cells, buckets, changed) / 2
    )
    assert boundary_worst(monkeypatch, mech, bases, eps_step) > eps_step


def test_sampler_draws_the_exact_boundary_distribution(monkeypatch):
    x = np.array([0, 5, 5, 0, 1])
    mech = StructureFirst(buckets=3, max_count=5, grid=1)
    law = boundary_law(monkeypatch, mech, x, 4.0)
    assert max(math.exp(lp) for lp in law.values()) > 0.3  # far from uniform
    source = np.random.default_rng(3)
    draws = 3000
    seen: dict = {}
    for _ in range(draws):
        key = tuple(int(s) for s in mech.boundaries(x, 4.0, source))
        seen[key] = seen.get(key, 0) + 1
    assert set(seen) <= set(law)
    for key, log_p in law.items():
        p = math.exp(log_p)
        assert abs(seen.get(key, 0) / draws - p) <= 4 * math.sqrt(p * (1 - p) / draws) + 1e-3


def test_boundaries_follow_the_data_not_the_empty_edge():
    """An empty left half and eight steps on the right, default parameters, epsilon 1 on the
    boundaries: the 9 buckets start at the steps, in every seeded release (the v-optimal SSE
    score, drawn boundary by boundary at epsilon / 8 each, misplaced some)."""
    x = np.zeros(256, dtype=np.int64)
    steps = np.arange(128, 256, 16)
    for i, s in enumerate(steps):
        x[s : s + 16] = 100 * (1 + (i * 5) % 8)
    mech = StructureFirst(buckets=9, grid=1, ratio=0.5)
    for seed in range(5):
        assert mech.release(x, 2.0, rng=seed).parameters["starts"] == [0, *steps.tolist()]


def node_rows(trees: BucketTrees, meas):
    """The dense 0/1 rows, values and variances of every measured node."""
    n, starts = trees.n, trees.starts
    ends = np.append(starts[1:], n)
    rows, values, variances = [], [], []

    def add(lo, hi, value, variance):
        row = np.zeros(n)
        row[lo:hi] = 1.0
        rows.append(row)
        values.append(value)
        variances.append(variance)

    for d, level in meas.top.items():
        block = trees.top.block_sizes[d]
        for r, value in enumerate(level.values):
            add(starts[r * block], ends[min((r + 1) * block, trees.k) - 1], value, level.noise.variance)
    for j, node in enumerate(meas.buckets):
        if node is not None:
            add(starts[j], ends[j], node.values[0], node.noise.variance)
    for j, levels in enumerate(meas.inner):
        tree = trees.inner[j]
        for d, level in levels.items():
            block = tree.block_sizes[d]
            for r, value in enumerate(level.values):
                lo = starts[j] + r * block
                add(lo, min(lo + block, ends[j]), value, level.noise.variance)
    return np.array(rows), np.array(values, dtype=float), np.array(variances)


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_bucket_trees_estimate_and_error_model_equal_dense_least_squares(relation):
    rng = np.random.default_rng(3)
    changed = 2 if relation == "replace" else 1
    for n, starts, branching in (
        (40, [0, 3, 4, 20], 2),
        (37, [0, 1, 2, 30], 3),
        (50, [0], 4),
        (9, [0, 2, 4, 6, 8], 2),
        (60, [0, 5, 17, 18, 33, 41, 50], 3),
    ):
        trees = BucketTrees(np.array(starts), n, branching, True, relation == "replace")
        x = rng.integers(0, 20, n)
        meas = trees.measure(x, trees.specs(1.0, "laplace_float", changed), 1.0, rng, "laplace_float")
        estimate = trees.estimate(meas)
        A, y, v = node_rows(trees, meas)
        expected, cov = gls_estimate(A, y, v, meas.total)
        np.testing.assert_allclose(estimate.leaves, expected, atol=1e-8)
        lo = rng.integers(0, n, 40)
        hi = np.maximum(lo, rng.integers(0, n, 40))
        W = np.array([(np.arange(n) >= a) & (np.arange(n) <= b) for a, b in zip(lo, hi)], dtype=float)
        np.testing.assert_allclose(
            estimate.error_model.range_variance(lo, hi), quadratic_forms(W, cov), rtol=1e-8, atol=1e-8
        )
        Q = rng.normal(size=(5, n))
        np.testing.assert_allclose(
            estimate.error_model.query_variance(Q), quadratic_forms(Q, cov), rtol=1e-8, atol=1e-8
        )


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_every_bins_path_spends_the_counts_budget_exactly(relation):
    """Parallel composition over disjoint buckets: along every bin's path the nodes' epsilons
    (sensitivity over scale) sum to at most the counts' epsilon, and the longest path to it."""
    changed = 2 if relation == "replace" else 1
    n, starts = 70, np.array([0, 1, 9, 40, 41, 64])
    trees = BucketTrees(starts, n, 3, True, relation == "replace")
    top, buckets, inner = trees.specs(0.7, "discrete_laplace", changed)
    per_bin = []
    for j in range(trees.k):
        path = sum(Fraction(changed) / Fraction(spec.effective_scale) for spec in top.values())
        path += Fraction(changed) / Fraction(buckets[j].effective_scale) if buckets[j] is not None else 0
        depth = trees.depth_of(j)
        path += depth * (Fraction(changed) / Fraction(inner[j].effective_scale) if depth else 0)
        per_bin.append(path)
    assert max(per_bin) <= Fraction(0.7) and float(max(per_bin)) == pytest.approx(0.7)


@pytest.mark.slow
def test_noise_only_error_bars_match_monte_carlo():
    """Given the boundaries the estimate is unbiased with the error model's variances
    (600 releases of discrete-Laplace noise)."""
    rng = np.random.default_rng(5)
    n, starts = 48, np.array([0, 6, 7, 30])
    x = rng.integers(0, 50, n)
    trees = BucketTrees(starts, n, 4, True, False)
    specs = trees.specs(0.5, "discrete_laplace", 1)
    lo, hi = np.array([0, 0, 5, 6, 10, 31, 0]), np.array([47, 5, 7, 6, 40, 47, 29])
    runs, model = [], None
    for _ in range(600):
        estimate = trees.estimate(trees.measure(x, specs, 0.5, rng, "discrete_laplace"))
        sums = np.concatenate([[0.0], np.cumsum(estimate.leaves)])
        runs.append(sums[hi + 1] - sums[lo])
        model = estimate.error_model
    truth = np.array([x[a : b + 1].sum() for a, b in zip(lo, hi)])
    assert model is not None
    assert_unbiased_with_variance(runs, truth, model.range_variance(lo, hi))


def test_release_accounting_reproducibility_and_error_bars():
    rng = np.random.default_rng(1)
    x = np.zeros(200, dtype=np.int64)
    x[20:60] = rng.integers(30, 40, 40)
    x[150:160] = 200
    for neighbours in ("add_remove", "replace"):
        mech = StructureFirst(buckets=6, max_count=300, neighbours=neighbours, grid=4)
        a = mech.release(x, 2.0, rng=5)
        b = mech.release(x, 2.0, rng=5)
        np.testing.assert_array_equal(a.estimate, b.estimate)
        steps = a.parameters["private_steps"]
        assert [s["step"] for s in steps] == ["boundaries", "measure"]
        assert steps[0]["epsilon"] == pytest.approx(0.1) and steps[0]["times"] == 1
        assert spent(steps) <= Fraction(2.0) and float(spent(steps)) == pytest.approx(2.0)
        starts = np.array(a.parameters["starts"])
        assert starts[0] == 0 and np.all(np.diff(starts) > 0) and np.all(starts % 4 == 0) and starts.size == 6
        assert a.exact_error_bars is False and a.provenance.data_dependent is True
        stderr = a.noise_only_stderr(np.array([0, 10]), np.array([199, 50]))
        assert np.isfinite(stderr[0]) and stderr[1] > 0
        assert (stderr[0] < 1e-6 * stderr[1]) == (neighbours == "replace")  # the total is public under replace
        if neighbours == "replace":
            assert a.estimate.sum() == pytest.approx(x.sum())  # the public total
        if neighbours == "add_remove":
            boot = a.bootstrap(np.array([0, 10]), np.array([150, 50]), reps=200, rng=2)
            np.testing.assert_allclose(boot, a.noise_only_stderr(np.array([0, 10]), np.array([150, 50])), rtol=0.25)


def test_uniform_within_spreads_each_bucket_evenly():
    x = np.arange(64) % 7
    r = StructureFirst(buckets=4, within="uniform", grid=1).release(x, 1.0, rng=3)
    starts = r.parameters["starts"]
    for s, e in zip(starts, [*starts[1:], 64]):
        assert np.all(r.estimate[s:e] == r.estimate[s])


def test_one_bucket_spends_everything_on_the_counts():
    r = StructureFirst(buckets=1).release(np.array([3, 4, 5]), 1.0, rng=1)
    assert [s["step"] for s in r.parameters["private_steps"]] == ["measure"]
    assert r.parameters["starts"] == [0]
    r = StructureFirst(buckets=1, within="uniform").release(np.array([3, 4, 5]), 1.0, rng=1)
    assert r.estimate.sum() == pytest.approx(r.estimate[0] * 3)


def test_cell_counts_clip_every_bin_before_summing():
    counts = np.array([5, 0, 9, 1, 2, 7, 3])
    np.testing.assert_array_equal(cell_counts(counts, cell_edges(7, 3), 4), [4 + 0 + 4, 1 + 2 + 4, 3])


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_tiny_domains_release_finite_answers_and_error_bars(relation):
    """One or two bins, more buckets than cells, both within modes (one bin under replace
    measures nothing: its count is the public total)."""
    for n in (1, 2, 5):
        for k in (1, 2, 8):
            for within in ("hierarchy", "uniform"):
                x = np.arange(n) % 3 + 1
                r = StructureFirst(buckets=k, neighbours=relation, within=within).release(x, 1.0, rng=1)
                stderr = r.noise_only_stderr(np.array([0]), np.array([n - 1]))
                assert np.all(np.isfinite(r.estimate)) and np.all(np.isfinite(stderr))
                if relation == "replace":
                    assert r.estimate.sum() == pytest.approx(x.sum())

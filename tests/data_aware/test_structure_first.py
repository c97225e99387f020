"""StructureFirst (dprange.data_aware.structure_first): the v-optimal costs against brute force, the
boundary step against the definition of differential privacy (exact output probabilities on
a tiny domain, both relations), the sampler against those probabilities, the accounting and
seeded reproducibility."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dprange.data_aware.steps import spent
from dprange.data_aware.structure_first import (
    StructureFirst,
    boundary_probabilities,
    cell_edges,
    sse_matrix,
    vopt_costs,
)


def sse(x):
    x = np.asarray(x, dtype=float)
    return float(((x - x.mean()) ** 2).sum()) if x.size else 0.0


def test_vopt_costs_equal_brute_force():
    rng = np.random.default_rng(0)
    for n in (3, 5, 7):
        x = rng.integers(0, 9, n)
        s = sse_matrix(x, cell_edges(n, 1))
        costs = vopt_costs(s, n)
        for k in range(1, n + 1):
            best = min(
                sum(sse(x[a:b]) for a, b in zip((0, *cuts), (*cuts, n)))
                for cuts in itertools.combinations(range(1, n), k - 1)
            )
            assert costs[k, n] == pytest.approx(best, abs=1e-9)


@pytest.mark.parametrize(("neighbours", "changed"), [("add_remove", 1), ("replace", 2)])
def test_boundary_step_is_differentially_private_exactly(neighbours, changed):
    k, f, eps_step = 3, 2, 0.6
    worst = 0.0
    for x in itertools.product(range(4), repeat=4):  # counts above F = 2 exercise the clipping
        x = np.array(x)
        p = boundary_probabilities(x, k, f, eps_step, changed)
        moves = []
        for i in range(4):
            e = np.eye(4, dtype=int)[i]
            moves += [e] if changed == 1 else [np.eye(4, dtype=int)[j] - e for j in range(4) if j != i]
        for move in moves:
            y = x + move
            if np.any(y < 0):
                continue
            q = boundary_probabilities(y, k, f, eps_step, changed)
            worst = max(worst, max(abs(math.log(p[key] / q[key])) for key in p))
    assert worst <= (k - 1) * eps_step + 1e-12
    assert worst > 0.02  # the boundaries do follow the data (the 2F + 1 bound is loose here)


@pytest.mark.parametrize("changed", [1, 2])
def test_scores_move_by_at_most_the_declared_sensitivity(changed):
    f, n = 2, 4
    edges = cell_edges(n, 1)
    worst = 0.0
    for x in itertools.product(range(f + 1), repeat=n):
        x = np.minimum(np.array(x), f)
        sx = sse_matrix(x, edges)
        cx = vopt_costs(sx, 3)
        for i, j in itertools.product(range(n), repeat=2):
            y = x.copy()
            if changed == 1 and i == j:
                y[i] += 1
            elif changed == 1:
                continue
            else:
                if i == j or x[i] == 0:
                    continue
                y[i] -= 1
                y[j] += 1
            y = np.minimum(y, f)
            sy = sse_matrix(y, edges)
            cy = vopt_costs(sy, 3)
            for k in (1, 2):
                for right in range(k + 1, n + 1):
                    a = np.arange(k, right)
                    diff = np.abs((cx[k, a] + sx[a, right]) - (cy[k, a] + sy[a, right]))
                    worst = max(worst, float(diff.max()))
    assert worst <= changed * (2 * f + 1)
    assert worst >= 0.3 * changed * (2 * f + 1)  # the paper's bound is within a factor 3.4 here


def test_sampler_draws_the_exact_boundary_distribution():
    x = np.array([0, 5, 5, 0, 1])
    mech = StructureFirst(buckets=3, max_count=5, grid=1)
    p = boundary_probabilities(x, 3, 5, 2.0, 1)
    source = np.random.default_rng(3)
    draws = 4000
    seen: dict = {}
    for _ in range(draws):
        key = tuple(int(s) for s in mech.boundaries(x, 2.0, source)[1:])
        seen[key] = seen.get(key, 0) + 1
    assert set(seen) <= set(p)
    for key, prob in p.items():
        freq = seen.get(key, 0) / draws
        assert abs(freq - prob) <= 4 * math.sqrt(prob * (1 - prob) / draws) + 1e-3


def test_release_accounting_reproducibility_and_expansion():
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
        assert [s["step"] for s in steps] == ["boundaries", "measure"] and steps[0]["times"] == 5
        assert spent(steps) <= Fraction(2.0)
        assert float(spent(steps)) == pytest.approx(2.0)
        starts = np.array(a.parameters["starts"])
        assert starts[0] == 0 and np.all(np.diff(starts) > 0) and np.all(starts % 4 == 0) and starts.size == 6
        for s, e in zip(starts, [*starts[1:], x.size]):
            assert np.all(a.estimate[s:e] == a.estimate[s])
        assert a.exact_error_bars is False and a.provenance.data_dependent is True
        assert np.isfinite(a.noise_only_stderr(0, 50))


def test_one_bucket_spends_everything_on_the_count():
    r = StructureFirst(buckets=1).release(np.array([3, 4, 5]), 1.0, rng=1)
    assert [s["step"] for s in r.parameters["private_steps"]] == ["measure"]
    assert r.estimate.sum() == pytest.approx(r.estimate[0] * 3)

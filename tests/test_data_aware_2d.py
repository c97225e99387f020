"""2-D data-aware mechanisms (dprange.data_aware.grid, spatial_trees, hilbert): the Hilbert order
against its inverse and adjacency, the private-median cuts against the exponential mechanism's
definition and the neighbour ratio of the whole partition on tiny grids (exact output
probabilities), the tree least squares and its noise-only covariance against the dense GLS,
the accounting, honest error fields and seeded reproducibility."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

import dprange
from dprange import DAWA, DAWAHilbert, HybridTree, KDTree, ProductDomain
from dprange.data_aware.hilbert import hilbert_cells, hilbert_index, hilbert_sequence
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
from dprange.data_aware.steps import spent
from dprange.errors import ParameterError
from dprange.privacy.samplers import resolve_rng
from dprange.registry import GRID_MECHANISMS


# ------------------------------------------------------------------------- Hilbert order
@pytest.mark.parametrize("side", [1, 2, 4, 8, 32])
def test_hilbert_index_is_a_bijection_with_an_exact_inverse_and_adjacent_steps(side):
    x, y = np.indices((side, side)).reshape(2, -1)
    d = hilbert_index(side, x, y)
    assert sorted(d.tolist()) == list(range(side * side))
    back_x, back_y = hilbert_cells(side, d)
    np.testing.assert_array_equal(back_x, x)
    np.testing.assert_array_equal(back_y, y)
    cx, cy = hilbert_cells(side, np.arange(side * side))
    assert np.all(np.abs(np.diff(cx)) + np.abs(np.diff(cy)) == 1)  # consecutive cells are neighbours
    if side > 1:
        assert (cx[0], cy[0]) == (0, 0) and cx[-1] == side - 1 and cy[-1] == 0


def test_hilbert_sequence_of_other_shapes_skips_the_padding():
    for shape in [(3, 5), (5, 3), (1, 7), (8, 8), (6, 1)]:
        seq = hilbert_sequence(shape)
        assert sorted(seq.tolist()) == list(range(shape[0] * shape[1]))
        side = 1 << max(0, math.ceil(math.log2(max(shape))))
        rows, cols = np.unravel_index(seq, shape)
        assert np.all(np.diff(hilbert_index(side, rows, cols)) > 0)  # the curve's order, restricted
    with pytest.raises(ParameterError, match="power of two"):
        hilbert_index(6, 0, 0)
    with pytest.raises(ParameterError, match="2-D"):
        hilbert_sequence((2, 2, 2))


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


# ------------------------------------------------------------------------- releases
def grid_example(seed=0):
    rng = np.random.default_rng(seed)
    x = np.zeros((16, 16), dtype=np.int64)
    x[2:5, 3:9] = rng.integers(20, 40, (3, 6))
    x[10:12, 10:16] = rng.integers(0, 200, (2, 6))
    return x


MECHS = [KDTree(depth=4), HybridTree(kd_levels=2, height=5), DAWAHilbert()]


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: m.name)
def test_accounting_and_honest_error_fields(mech):
    x = grid_example()
    for epsilon in (0.1, 1.0, 7.0):
        for neighbours in ("add_remove", "replace"):
            m = type(mech)(**{**mech.parameters(), "neighbours": neighbours})
            r = m.release(x, epsilon, rng=1)
            steps = r.parameters["private_steps"]
            assert spent(steps) <= Fraction(epsilon)
            assert spent(steps) >= Fraction(epsilon) * Fraction(999999, 1000000)  # nothing left unspent
            assert Fraction(r.epsilon) >= spent(steps) and r.epsilon <= epsilon
            assert r.provenance.data_dependent and r.exact_error_bars is False
            one = r.rectangle([0, 0], [7, 9])
            assert math.isnan(one.stderr) and all(math.isnan(v) for v in one.confidence_interval())
            assert np.all(np.isnan(r.marginal(0).stderr))
            noise_only = r.noise_only_stderr([[0, 0], [3, 3]], [[7, 9], [15, 15]])
            assert np.all(np.isfinite(noise_only)) and np.all(noise_only > 0)
            assert r.to_dict()["error_bars"].startswith("not available")
            if neighbours == "replace":
                assert r.rectangle([0, 0], [15, 15]).value == pytest.approx(x.sum())


def test_tree_steps_are_declared_per_level():
    r = HybridTree(kd_levels=2, height=4, split_share=0.2).release(grid_example(), 1.0, rng=3)
    steps = r.parameters["private_steps"]
    assert [s["step"] for s in steps] == ["median", "median"] + ["counts"] * 5
    assert sum(s["epsilon"] for s in steps[:2]) == pytest.approx(0.2)
    counts = np.array([s["epsilon"] for s in steps[2:]])
    np.testing.assert_allclose(counts[1:] / counts[:-1], 2 ** (1 / 3))  # geometric, leaves last
    r = KDTree(depth=3, split_share=0.25, neighbours="replace").release(grid_example(), 2.0, rng=3)
    steps = r.parameters["private_steps"]
    assert [s["step"] for s in steps] == ["median"] * 3 + ["counts"]
    assert steps[-1]["epsilon"] == pytest.approx(1.5)
    assert r.parameters["leaves"] == 8 == len(r.parameters["leaf_rectangles"])


def test_leaf_counts_noise_spends_exactly_its_share():
    from dprange.data_aware.steps import laplace_spec

    for eps, sensitivity in ((0.05, 1), (0.7, 2), (1 / 3, 1)):
        spec = laplace_spec(eps, sensitivity)
        assert Fraction(sensitivity) / Fraction(spec.effective_scale) <= Fraction(eps)
        assert sensitivity / spec.effective_scale == pytest.approx(eps, rel=1e-9)


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: m.name)
def test_estimates_are_reproducible_from_a_seed(mech):
    x = grid_example(1)
    a, b = mech.release(x, 0.5, rng=11), mech.release(x, 0.5, rng=11)
    np.testing.assert_array_equal(a.counts, b.counts)
    assert a.parameters == b.parameters and a.provenance.seeded
    c = mech.release(x, 0.5, rng=12)
    assert not np.array_equal(a.counts, c.counts)
    assert not mech.release(x, 0.5).provenance.seeded


def test_dawa_hilbert_is_the_1_d_dawa_on_the_hilbert_order():
    x = grid_example(2)
    seq = hilbert_sequence(x.shape)
    r = DAWAHilbert(ratio=0.2).release(x, 0.8, rng=5)
    inner = DAWA(ratio=0.2).release(x.ravel()[seq], 0.8, rng=5)
    np.testing.assert_allclose(r.counts.ravel()[seq], inner.estimate)
    assert r.parameters["private_steps"] == inner.parameters["private_steps"]
    assert r.parameters["order"] == "hilbert"
    # noise-only errors: the 1-D model's, on the cells of the rectangle read in Hilbert order
    lows, highs = np.array([[1, 2]]), np.array([[9, 12]])
    w = np.zeros(x.shape)
    w[1:10, 2:13] = 1
    expected = np.sqrt(inner.noise_only_error_model.query_variance(w.ravel()[seq][None, :]))
    np.testing.assert_allclose(r.noise_only_stderr(lows, highs), expected)


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: m.name)
def test_bootstrap_agrees_with_the_noise_only_stderr(mech):
    """Both measure the noise alone given the private choices: the bootstrap's standard
    deviation matches the closed form within its Monte-Carlo error (fixed seed)."""
    r = mech.release(grid_example(3), 1.0, rng=2)
    lows, highs = np.array([[0, 0], [2, 3], [8, 8]]), np.array([[15, 15], [9, 12], [12, 15]])
    exact = r.noise_only_stderr(lows, highs)
    boot = r.bootstrap(lows, highs, reps=800, rng=3)
    finite = exact > 1e-9
    np.testing.assert_allclose(boot[finite], exact[finite], rtol=0.12)


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


# ------------------------------------------------------------------------- registry, facade
def test_registered_as_grid_mechanisms_and_released_by_name():
    for name in ("kd_tree", "hybrid_tree", "dawa_hilbert"):
        entry = GRID_MECHANISMS[name]
        assert entry.nameable and not entry.auto and entry.factory.data_aware
    domain = ProductDomain([dprange.Domain.integers(0, 15), dprange.Domain.integers(0, 15)])
    rng = np.random.default_rng(0)
    columns = [rng.integers(0, 16, 500), rng.integers(0, 8, 500)]
    for name in ("kd_tree", "hybrid_tree", "dawa_hilbert"):
        r = dprange.release_grid(columns, domain, 1.0, mechanism=name, rng=1)
        assert r.mechanism == name and r.exact_error_bars is False and r.domain is domain
        assert r.rectangle([0, 0], [15, 15]).value == pytest.approx(500, abs=200)
    r = dprange.release_grid(columns, domain, 1.0, mechanism="kd_tree", depth=2, rng=1)
    assert r.parameters["depth"] == 2 and r.parameters["leaves"] == 4


def test_bad_parameters_are_refused_before_the_data():
    with pytest.raises(ParameterError, match="kd_levels"):
        HybridTree(kd_levels=5, height=3)
    with pytest.raises(ParameterError, match="split_share"):
        KDTree(split_share=1.0)
    with pytest.raises(ParameterError, match="2-D"):
        KDTree().plan((4, 4, 4), 1.0)
    with pytest.raises(ParameterError, match="delta=0"):
        KDTree().release(grid_example(), 1.0, delta=1e-6)
    with pytest.raises(ParameterError, match="no data-free design"):
        KDTree().error_model((4, 4), 1.0)
    with pytest.raises(ParameterError, match="noise='auto'"):
        HybridTree(noise="gaussian").plan((4, 4), 1.0)
    r = KDTree(depth=2).release(grid_example(), 1.0, rng=1)
    with pytest.raises(ParameterError, match="reps"):
        r.bootstrap([0, 0], [3, 3], reps=1)
    assert resolve_rng(None) is not None


def test_cli_releases_a_data_aware_grid_by_name(tmp_path, capsys):
    import json

    from dprange.cli import main

    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 16, 400), rng.integers(0, 16, 400)
    path = tmp_path / "points.csv"
    path.write_text("a,b\n" + "".join(f"{u},{v}\n" for u, v in zip(a, b)))
    out = tmp_path / "grid.json"
    args = ["release", path, "-c", "a", "-c", "b", "--lo", 0, "--hi", 15, "--lo", 0, "--hi", 15, "--integers"]
    args += ["-e", 1, "--seed", 4, "-o", out, "-m", "hybrid_tree"]
    with pytest.raises(SystemExit) as exc:
        main([str(v) for v in args])
    stdout = capsys.readouterr().out
    assert exc.value.code == 0
    saved = json.loads(out.read_text())
    assert saved["kind"] == "data_aware_grid_release" and saved["error_bars"].startswith("not available")
    domain = ProductDomain([dprange.Domain.integers(0, 15), dprange.Domain.integers(0, 15)])
    same = dprange.release_grid([a, b], domain, 1.0, mechanism="hybrid_tree", rng=4)
    np.testing.assert_allclose(np.reshape(saved["counts"], (16, 16)), same.counts)
    assert saved["provenance"]["parameters"]["private_steps"] == same.parameters["private_steps"]
    assert "no error bars" in stdout and "±" not in stdout
    with pytest.raises(SystemExit) as exc:
        main([str(v) for v in [*args, "--branching", 4]])
    assert exc.value.code != 0
    assert "--branching is not a parameter of --mechanism hybrid_tree" in capsys.readouterr().err


def test_hybrid_auto_height_reaches_single_cells():
    x = np.random.default_rng(2).integers(0, 9, (12, 20))
    r = HybridTree(kd_levels=3).release(x, 1.0, rng=4)
    steps = r.parameters["private_steps"]
    assert [s["step"] for s in steps].count("counts") == 3 + 5 + 1  # kd levels, log2(32) halvings, the root
    assert r.parameters["leaves"] == x.size  # every leaf a single cell: no expansion bias
    with pytest.raises(ParameterError, match="height"):
        HybridTree(height=0)


def test_saved_release_answers_the_same_and_says_why_it_has_no_error_bars():
    from dprange.data_aware.grid import DataAwareGridRelease
    from dprange.errors import DataError

    domain = ProductDomain([dprange.Domain.integers(0, 15), dprange.Domain.integers(0, 15)])
    r = HybridTree(kd_levels=1, height=4)
    rel = r.release(grid_example(4), 1.0, rng=2, domain=domain)
    loaded = DataAwareGridRelease.from_json(rel.to_json())
    np.testing.assert_array_equal(loaded.counts, rel.counts)
    assert loaded.provenance == rel.provenance and loaded.domain == domain
    assert loaded.exact_error_bars is False and math.isnan(loaded.rectangle([0, 0], [3, 3]).stderr)
    with pytest.raises(ParameterError, match="no measurements"):
        loaded.noise_only_stderr([0, 0], [3, 3])
    with pytest.raises(DataError, match="data_aware_grid_release"):
        DataAwareGridRelease.from_json({"kind": "grid_release"})

"""The 2-D auto-data (dprange.data_aware.auto_grid): the feature step against the definition of
differential privacy (exact output probabilities on 2 x 2 grids, both relations), the choice as
post-processing of the noisy features, the accounting of every branch, the shipped selector's
file, and releases through dprange.release_grid."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from _helpers import (
    Script,
    assert_feature_step_exactly_private,
    grid_neighbours,
    joint_worst,
    recorded_rules,
    rule_test_rows,
)

import dprange
import dprange.data_aware.auto_data as auto_data_module
import dprange.data_aware.auto_grid as auto_grid_module
import dprange.data_aware.spatial_trees as spatial_trees_module
import dprange.data_aware.steps as steps_module
from conftest import REPO
from dprange import HybridTree, KDTree, ParameterError
from dprange.answers.grid import GridRelease
from dprange.data_aware.auto_grid import (
    CANDIDATE_PARAMETERS,
    GRID_CANDIDATES,
    GRID_FEATURES,
    GRID_FORMAT,
    GRID_SELECTOR_FILE,
    AutoDataGrid,
    GridSelector,
    choose_grid,
    grid_feature_matrix,
    shipped_grid,
    workload_boundary,
)
from dprange.data_aware.selector import Selector
from dprange.data_aware.steps import laplace_spec, spent
from dprange.inference.simplex_fit import simplex_fit
from dprange.mechanisms.grid import load_grid_release
from dprange.workloads.rectangles import Rectangles

GRID = np.arange(-7, 12)


def offpeak_by_definition(x: np.ndarray) -> int:
    """Records outside the heaviest cell of their 2 x 2 block, block by block (odd edges alone)."""
    out = 0
    for i in range(0, x.shape[0], 2):
        for j in range(0, x.shape[1], 2):
            block = x[i : i + 2, j : j + 2]
            out += int(block.sum() - block.max())
    return out


def bound_by_definition(x: np.ndarray) -> int:
    """Records in cells of the first or last row or column, cell by cell."""
    rows, cols = x.shape
    return int(sum(x[i, j] for i in range(rows) for j in range(cols) if i in (0, rows - 1) or j in (0, cols - 1)))


def corner_by_definition(x: np.ndarray) -> int:
    """Records in cells whose row is below rows / 8 and whose column is below columns / 8 (the
    first ceil(rows / 8) rows and ceil(columns / 8) columns), cell by cell."""
    rows, cols = x.shape
    return int(sum(x[i, j] for i in range(rows) for j in range(cols) if 8 * i < rows and 8 * j < cols))


def exact_features(x: np.ndarray) -> tuple[int, int, int, int, int, int]:
    """(records, non-empty cells, records in the HEAVY_CELLS heaviest cells (16 as shipped),
    records outside the heaviest cell of their 2 x 2 block, records on the grid's bounds, records
    in its lower corner block): the features of a grid, from their definitions (on a 3 x 3 grid
    the shipped top mass is every record and the corner block is the first cell)."""
    heavy = auto_grid_module.GridFeatures.HEAVY_CELLS
    top = int(np.sort(x.ravel())[::-1][:heavy].sum())
    masses = (offpeak_by_definition(x), bound_by_definition(x), corner_by_definition(x))
    return int(x.sum()), int((x > 0).sum()), top, *masses


def feature_pmfs(x, mech: AutoDataGrid, epsilon: float, boost: float = 1.0) -> list[np.ndarray]:
    """P(noisy total = t), P(noisy non-empty cells = z), P(noisy top mass = h), P(noisy off-peak
    mass = o), P(noisy bound mass = b), P(noisy corner mass = c), each on GRID (the total exact
    under replace): the factors
    of the features' joint law, whose noises are independent; ``boost`` multiplies each step's
    epsilon (2: half the noise)."""
    *shares, _ = mech.shares(epsilon)
    exact = exact_features(x)
    pmfs = [laplace_spec(boost * eps, 1).pmf(GRID - value) for eps, value in zip(shares[1:], exact[1:])]
    if mech.neighbours == "replace":
        return [(GRID == exact[0]).astype(float), *pmfs]
    return [laplace_spec(boost * shares[0], 1).pmf(GRID - exact[0]), *pmfs]


def neighbouring_grids(relation: str):
    """Every 3 x 3 grid of 1-4 records (counts 0..2 per cell) with each of its neighbours (four
    records let a move change the mass of the 3 heaviest cells: with three, the lightest is empty;
    the middle cell is the one off the grid's bounds)."""
    for cells in itertools.product(range(3), repeat=9):
        x = np.array(cells).reshape(3, 3)
        if 1 <= x.sum() <= 4:
            yield from ((x, y) for y in grid_neighbours(x, relation))


def factor_log_ratios(p: np.ndarray, q: np.ndarray, same_support: bool) -> np.ndarray:
    """log p / q over the outputs both give positive probability (asserted to exist; with
    ``same_support``, that the supports agree, as they must with a public total)."""
    if same_support:
        assert np.array_equal(p > 0, q > 0)
    both = (p > 1e-250) & (q > 1e-250)
    assert both.any()
    return np.log(p[both] / q[both])


def worst_feature_loss(mech: AutoDataGrid, epsilon: float, boost: float = 1.0) -> float:
    """The worst |log P_x(o) / P_y(o)| over neighbouring 3 x 3 grids and feature outputs o on
    GRID^6.  The joint law is the product of the six factors, so over the product of their
    outputs the log-ratio, a sum of one term per factor, is largest at each factor's largest term
    and smallest at each one's smallest: exactly the worst over GRID^6, factor by factor."""
    public = mech.neighbours == "replace"
    cache: dict = {}

    def pmfs(x):
        key = x.tobytes()
        if key not in cache:
            cache[key] = feature_pmfs(x, mech, epsilon, boost)
        return cache[key]

    worst = 0.0
    for x, y in neighbouring_grids(mech.neighbours):
        ratios = [factor_log_ratios(p, q, public) for p, q in zip(pmfs(x), pmfs(y))]
        worst = max(worst, sum(r.max() for r in ratios), -sum(r.min() for r in ratios))
    return worst


class ZeroNoise:
    """A noise spec whose samples are all 0: the features as computed, before their noise."""

    def sample(self, shape, rng):
        return np.zeros(shape, dtype=np.int64)


class FixedNoise:
    """A noise spec whose samples all equal ``value``."""

    def __init__(self, value: int):
        self.value = value

    def sample(self, shape, rng):
        return np.full(shape, self.value, dtype=np.int64)


def test_features_are_the_defined_queries_on_the_cells(monkeypatch):
    """The noise the pmf below adds is added to exactly these values (total, non-empty cells,
    records in the 16 heaviest cells, records off their block's peak, records on the bounds,
    records in the lower corner block), each step recorded with its share."""
    monkeypatch.setattr(auto_data_module, "laplace_spec", lambda epsilon, sensitivity: ZeroNoise())  # the features'
    monkeypatch.setattr(steps_module, "laplace_spec", lambda epsilon, sensitivity: ZeroNoise())  # the total's
    mech = AutoDataGrid(feature_share=0.3)
    for cells in itertools.product(range(3), repeat=4):
        x = np.array(cells).reshape(2, 2)
        *noisy, steps = mech.features(x, 2.0, rng=0)
        assert tuple(noisy) == exact_features(x)
        assert [s["step"] for s in steps] == ["total", "nonempty", "top", "offpeak", "bound", "corner"]
        assert [s["epsilon"] for s in steps] == list(mech.shares(2.0)[:6])
    rng = np.random.default_rng(3)
    # fewer, as many and more than 16 occupied cells; odd and even sides, square or not
    for shape, occupied in (((5, 5), 3), ((5, 5), 16), ((5, 5), 25), ((64, 64), 17), ((64, 64), 500), ((7, 12), 40)):
        x = np.zeros(shape[0] * shape[1], dtype=np.int64)
        x[rng.choice(x.size, occupied, replace=False)] = rng.integers(1, 5, occupied)
        x = x.reshape(shape)
        total, nonempty, top, offpeak, bound, corner, _ = mech.features(x, 2.0, rng=0)
        assert (total, nonempty, top, offpeak, bound, corner) == exact_features(x)
        assert top == (x.sum() if occupied <= 16 else np.sort(x.ravel())[-16:].sum())
    with pytest.raises(ParameterError, match="2-D grid"):
        mech.features(np.ones(16, dtype=np.int64), 2.0, rng=0)


def largest_neighbour_change(mass) -> int:
    """The most ``mass`` moves between neighbours, over every neighbour (both relations) of every
    3 x 3 grid of counts 0..2 with at most 4 records."""
    moved = 0
    for relation in ("add_remove", "replace"):
        for cells in itertools.product(range(3), repeat=9):
            x = np.array(cells).reshape(3, 3)
            if x.sum() <= 4:
                moved = max([moved, *(abs(mass(x) - mass(y)) for y in grid_neighbours(x, relation))])
    return moved


def test_offpeak_mass_values_and_sensitivity():
    """Isolated cells and a lattice of step 2 give 0; a flat grid 3/4 of N; one record added,
    removed or moved changes it by at most 1, and some change does move it (every neighbour of
    every 3 x 3 grid of counts 0..2 with at most 4 records)."""
    lattice = np.zeros((8, 8), dtype=np.int64)
    lattice[::2, ::2] = 5
    assert auto_grid_module.offpeak_mass(lattice) == 0
    assert auto_grid_module.offpeak_mass(np.full((6, 6), 4)) == 3 * 36
    assert auto_grid_module.offpeak_mass(np.array([[1, 2, 3]])) == 1  # blocks (1, 2) and (3)
    assert largest_neighbour_change(auto_grid_module.offpeak_mass) == 1


def test_bound_mass_values_and_sensitivity():
    """Every record of a grid of one or two rows or columns; none of a grid whose records lie
    inside; the definition on random grids of odd and even sides; one record added, removed or
    moved changes it by at most 1, and some change does move it (every neighbour of every 3 x 3
    grid of counts 0..2 with at most 4 records)."""
    rng = np.random.default_rng(8)
    for shape in ((1, 1), (1, 7), (2, 5), (6, 2)):
        x = rng.integers(0, 9, shape)
        assert auto_grid_module.bound_mass(x) == x.sum()
    inside = np.zeros((6, 6), dtype=np.int64)
    inside[1:5, 1:5] = 3
    assert auto_grid_module.bound_mass(inside) == 0
    for shape in ((3, 3), (5, 8), (16, 16), (7, 12)):
        x = rng.integers(0, 9, shape)
        assert auto_grid_module.bound_mass(x) == bound_by_definition(x)
    assert largest_neighbour_change(auto_grid_module.bound_mass) == 1


def test_corner_mass_values_and_sensitivity():
    """The first ceil(rows / 8) rows and ceil(columns / 8) columns: on 16 x 16 the 2 x 2 block at
    the origin, on 17 x 9 a 3 x 2 one, on grids of at most 8 rows and columns the first cell;
    none of a grid heaped on its last row and column; the definition on random grids of odd
    and even sides, square or not; one record added, removed or moved changes it by at most 1,
    and some change does move it (every neighbour of every 3 x 3 grid of counts 0..2 with at
    most 4 records)."""
    rng = np.random.default_rng(9)
    x = rng.integers(0, 9, (16, 16))
    assert auto_grid_module.corner_mass(x) == x[:2, :2].sum()
    x = rng.integers(0, 9, (17, 9))
    assert auto_grid_module.corner_mass(x) == x[:3, :2].sum()
    for shape in ((1, 1), (1, 7), (8, 8), (3, 5)):
        x = rng.integers(0, 9, shape)
        assert auto_grid_module.corner_mass(x) == x[0, 0]
    upper = np.zeros((32, 32), dtype=np.int64)
    upper[-1, :], upper[:, -1] = 5, 7
    assert auto_grid_module.corner_mass(upper) == 0
    for shape in ((3, 3), (5, 8), (16, 16), (7, 12), (33, 20), (64, 64)):
        x = rng.integers(0, 9, shape)
        assert auto_grid_module.corner_mass(x) == corner_by_definition(x)
    assert largest_neighbour_change(auto_grid_module.corner_mass) == 1


@pytest.mark.parametrize("feature", ["offpeak_mass", "bound_mass", "corner_mass"])
@pytest.mark.parametrize(
    "counts, message",
    [
        (np.ones(16, dtype=np.int64), "2-D grid"),
        (np.ones((2, 2, 2), dtype=np.int64), "2-D grid"),
        (np.array([[1, -1], [0, 2]]), "non-negative"),
        (np.array([[1.5, 0.0], [0.0, 2.0]]), "whole numbers"),
        (np.array([["a", "b"], ["c", "d"]]), "numeric"),
    ],
)
def test_grid_masses_reject_what_is_not_a_grid_of_counts(feature, counts, message):
    """A wrong input fails with the library's ParameterError, not numpy's, and says what is wrong."""
    with pytest.raises(ParameterError, match=message):
        getattr(auto_grid_module, feature)(counts)


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
@pytest.mark.parametrize("heavy", [2, 3])
def test_feature_step_is_private_to_its_declared_share(monkeypatch, neighbours, heavy):
    """On 3 x 3 grids the shipped top mass (16 cells) is every record, whose law under replace is
    the public total's; summing the 2 or 3 heaviest cells selects among the cells as the 16 do on
    larger grids (the sensitivity argument is the same for any fixed number of cells).  Not the
    heaviest cell alone: a record that raises it is its block's peak, so the off-peak mass cannot
    rise with it and the six steps' loss stays below their sum (no grid makes it tight).  The
    middle cell is the one off the grid's bounds, so a move can change the bound mass; the first
    cell is the corner block, so one can change the corner mass."""
    monkeypatch.setattr(auto_grid_module.GridFeatures, "HEAVY_CELLS", heavy)
    assert_feature_step_exactly_private(AutoDataGrid(feature_share=0.3, neighbours=neighbours), 2.0, worst_feature_loss)


def forced(choice: str) -> Selector:
    """A selector that names ``choice`` below 2^100 cells (so it buys the features: it is not one leaf)."""
    names = ("auto", "agrid") if choice == "auto" else ("auto", choice)
    nodes = [{"feature": GRID_FEATURES.index("log_cells"), "threshold": 100.0, "left": 1, "right": 2}]
    nodes += [{"leaf": names.index(choice)}, {"leaf": 1 - names.index(choice)}]
    return Selector("tree", names, {"nodes": nodes})


@pytest.mark.parametrize("choice", ["auto", "agrid", "dawa_hilbert"])
def test_a_constant_selector_buys_no_features(choice):
    """One leaf: no features bought; the release is the choice's at the whole epsilon (same draws;
    ``auto`` runs auto_toward_nonnegative)."""
    x = np.random.default_rng(5).integers(0, 30, (16, 16))
    mech = AutoDataGrid()
    mech.selector = Selector("tree", ("auto", choice), {"nodes": [{"leaf": 1 if choice != "auto" else 0}]})
    assert not mech.buys_features() and forced(choice).constant() is None
    r = mech.release(x, 0.7, rng=3)
    alone = mech.runs(choice, x.shape, 0.7).release(x, 0.7, rng=3)
    assert alone.mechanism == ("auto_toward_nonnegative" if choice == "auto" else choice)
    np.testing.assert_array_equal(r.counts, alone.counts)
    record = r.parameters
    assert record["features"] is None and record["chosen"] == alone.mechanism
    assert [s["step"] for s in record["private_steps"]] == [
        s["step"] for s in alone.parameters.get("private_steps") or [{"step": "measure"}]
    ]
    assert float(spent(record["private_steps"])) == pytest.approx(0.7)


def split(threshold: float) -> Selector:
    """auto when log10(N epsilon / cells) <= threshold, else agrid (a selector that reads a feature)."""
    nodes = [{"feature": 0, "threshold": threshold, "left": 1, "right": 2}, {"leaf": 0}, {"leaf": 1}]
    return Selector("tree", ("auto", "agrid"), {"nodes": nodes})


def choice_of(release) -> dict:
    """The record of the choice: the selection of an exact (GridRelease) branch, else the provenance's parameters."""
    return release.selection if getattr(release, "selection", None) else release.parameters


def test_choice_is_post_processing_of_the_noisy_features(monkeypatch):
    """Two very different grids given the same noisy features get the same choice; the choice a
    release records is the selector's on the features it records."""
    mech = AutoDataGrid()
    mech.selector = split(0.0)
    sparse, dense = np.zeros((8, 8), dtype=np.int64), np.random.default_rng(0).integers(0, 500, (8, 8))
    sparse[2, 3] = 4
    auto_name = mech.runs("auto", (8, 8), mech.shares(1.0)[-1]).name
    cases = (((10.0, 3.0, 5.0, 1.0, 4.0, 2.0), auto_name), ((5000.0, 60.0, 900.0, 300.0, 80.0, 9.0), "agrid"))
    for fixed, expected in cases:
        monkeypatch.setattr(AutoDataGrid, "features", lambda self, counts, epsilon, rng=None, f=fixed: (*f, []))
        assert [choice_of(mech.release(x, 1.0, rng=1))["chosen"] for x in (sparse, dense)] == [expected] * 2
    monkeypatch.undo()
    for x in (sparse, dense):
        record = choice_of(mech.release(x, 1.0, rng=2))
        f = record["features"]
        assert f["workload_boundary"] == workload_boundary("all-rectangles", (8, 8))
        features = (f["total"], f["nonempty"], f["top"], f["offpeak"], f["bound"], f["corner"])
        name = choose_grid(*features, 64, f["epsilon_left"], f["workload_boundary"], mech.selector)[0]
        assert record["chosen"] == mech.runs(name, (8, 8), f["epsilon_left"]).name


def boundary_by_definition(rectangles, shape) -> float:
    """The mean, over the rectangles, of each face's extent over the other axes' sides, for the
    faces not on the grid's edge, one rectangle at a time."""
    total = 0.0
    for lows, highs in rectangles:
        for a, n in enumerate(shape):
            other = math.prod((highs[b] - lows[b] + 1) / shape[b] for b in range(len(shape)) if b != a)
            total += other * ((lows[a] > 0) + (highs[a] < n - 1))
    return total / len(rectangles)


def every_rectangle(shape, kind: str):
    ranges = {
        "all": lambda n: [(i, j) for i in range(n) for j in range(i, n)],
        "prefix": lambda n: [(0, j) for j in range(n)],
        "cells": lambda n: [(i, i) for i in range(n)],
        "total": lambda n: [(0, n - 1)],
    }
    kinds = kind if isinstance(kind, tuple) else (kind,) * len(shape)
    for combo in itertools.product(*(ranges[k](n) for k, n in zip(kinds, shape))):
        yield [r[0] for r in combo], [r[1] for r in combo]


@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (5, 4), (3, 4, 2)])
def test_workload_boundary_closed_forms_equal_their_rectangles(shape):
    """The named workloads' closed forms equal the mean over their rectangles enumerated one by
    one; explicit rectangles give the same as their definition; marginals average every
    order-way marginal's cells."""
    for name, kind in (("all-rectangles", "all"), ("prefix-rectangles", "prefix")):
        rects = list(every_rectangle(shape, kind))
        assert workload_boundary(name, shape) == pytest.approx(boundary_by_definition(rects, shape), rel=1e-12)
        lows, highs = (np.array([r[i] for r in rects]) for i in (0, 1))
        explicit = Rectangles(shape, lows, highs)
        assert workload_boundary(explicit, shape) == pytest.approx(boundary_by_definition(rects, shape), rel=1e-12)
    for order in range(1, len(shape) + 1):
        rects = []
        for axes in itertools.combinations(range(len(shape)), order):
            kinds = tuple("cells" if a in axes else "total" for a in range(len(shape)))
            rects += list(every_rectangle(shape, kinds))
        expected = boundary_by_definition(rects, shape)
        assert workload_boundary("marginals", shape, order) == pytest.approx(expected, rel=1e-12)


def test_workload_boundary_values_and_checks():
    # prefix about 1, all rectangles about 4/3, single cells 4 / side, 1-way marginals about 2
    assert workload_boundary("prefix-rectangles", (256, 256)) == pytest.approx(2 * (255 / 256) * (257 / 512))
    assert workload_boundary("all-rectangles", (256, 256)) == pytest.approx(2 * (2 - 4 / 257) * (258 / 768))
    assert workload_boundary("marginals", (256, 256), 2) == pytest.approx(4 * 255 / 256**2)
    assert workload_boundary("marginals", (256, 256), 1) == pytest.approx(2 * 255 / 256)
    # one rectangle in the middle of a 10 x 10 grid, 2 x 3 cells: faces 2 * 3/10 + 2 * 2/10
    assert workload_boundary(Rectangles((10, 10), [[4, 3]], [[5, 5]]), (10, 10)) == pytest.approx(1.0)
    assert workload_boundary(Rectangles((10, 10), [[0, 0]], [[9, 9]]), (10, 10)) == 0.0  # no face inside
    assert workload_boundary(Rectangles((4, 4), np.zeros((0, 2), int), np.zeros((0, 2), int)), (4, 4)) == 0.0
    with pytest.raises(ParameterError, match="workload must be"):
        workload_boundary("ranges", (4, 4))
    with pytest.raises(ParameterError, match="order must be"):
        workload_boundary("marginals", (4, 4), 3)
    with pytest.raises(ParameterError, match="lie on a \\[4, 4\\] grid, not \\[4, 5\\]"):
        workload_boundary(Rectangles((4, 4), [[0, 0]], [[1, 1]]), (4, 5))
    with pytest.raises(ParameterError, match="every side of the grid"):
        workload_boundary("all-rectangles", (4, 0))


def test_release_records_the_workload_boundary_and_the_choice_reads_it(monkeypatch):
    """The same noisy features choose differently for workloads of short and long boundary when
    the selector splits on it; the release records the boundary it chose with."""
    nodes = [
        {"feature": GRID_FEATURES.index("workload_boundary"), "threshold": 1.1, "left": 1, "right": 2},
        {"leaf": 1},
        {"leaf": 0},
    ]
    sel = GridSelector("tree", ("auto", "dawa_hilbert"), {"nodes": nodes, "depth": 1})
    x = np.random.default_rng(3).integers(0, 30, (16, 16))
    for workload, chosen in (("prefix-rectangles", "dawa_hilbert"), ("all-rectangles", None)):
        mech = AutoDataGrid(workload=workload)
        mech.selector = sel
        record = choice_of(mech.release(x, 1.0, rng=4))
        assert record["features"]["workload_boundary"] == workload_boundary(workload, (16, 16))
        rest = record["features"]["epsilon_left"]
        assert record["chosen"] == (chosen or mech.runs("auto", (16, 16), rest).name)


def test_choose_grid_is_the_selector_on_feature_matrix():
    sel = shipped_grid()
    rng = np.random.default_rng(2)
    total, nonempty, top = 10 ** rng.uniform(1, 7, 50), rng.uniform(-5, 3000, 50), rng.uniform(0, 1e5, 50)
    offpeak, bound, corner = (rng.uniform(-100, 1e5, 50) for _ in range(3))
    names = choose_grid(total, nonempty, top, offpeak, bound, corner, 4096, 0.3, 1.2)
    x = grid_feature_matrix(total, nonempty, top, offpeak, bound, corner, 4096, 0.3, 1.2)
    assert names == sel.choose(x)
    np.testing.assert_allclose(x[:, 0], np.log10(np.maximum(total, 1) * 0.3 / 4096))  # N eps per cell
    np.testing.assert_allclose(x[:, 2], np.log10(np.clip(nonempty, 1, 4096) / 4096))  # share of non-empty cells
    np.testing.assert_allclose(x[:, 3], np.clip(top / np.maximum(total, 1), 0, 1))  # concentration
    np.testing.assert_allclose(x[:, 6], np.clip(offpeak / np.maximum(total, 1), 0, 1))  # off-peak share
    np.testing.assert_array_equal(x[:, 7], 1.2)  # the workload's boundary, as given
    np.testing.assert_allclose(x[:, 8], np.clip(bound / np.maximum(total, 1), 0, 1))  # bound share
    np.testing.assert_allclose(x[:, 9], np.log10(np.maximum(total, 1) * 0.3))  # N eps
    np.testing.assert_allclose(x[:, 10], np.clip(corner / np.maximum(total, 1), 0, 1))  # corner share
    assert x.shape == (50, len(GRID_FEATURES))
    assert set(names) <= set(sel.candidates) <= set(GRID_CANDIDATES)


@pytest.mark.parametrize("choice", GRID_CANDIDATES)
@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_every_branch_records_its_steps_and_spends_epsilon(choice, neighbours):
    """Each candidate runs with the epsilon left after the features; the recorded steps sum to
    epsilon (exactly at most, rounding up to it); with ``refit='never'`` the data-independent
    branch keeps its exact error bars and its record survives saving and loading."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 30, (16, 16))
    x[:8, :5] = 0
    epsilon = 0.7
    mech = AutoDataGrid(feature_share=0.1, neighbours=neighbours, refit="never")
    mech.selector = forced(choice)
    r = mech.release(x, epsilon, rng=3)
    rest = mech.shares(epsilon)[-1]
    record = r.selection if choice == "auto" else r.parameters
    steps = record["private_steps"]
    features = ["nonempty", "top", "offpeak", "bound", "corner"]
    features = features if neighbours == "replace" else ["total", *features]
    assert [s["step"] for s in steps[: len(features)]] == features
    assert record["features"]["epsilon_left"] == rest
    # exactly at most epsilon, short of it by the few ulps each mechanism's budget split rounds down
    assert spent(steps) <= Fraction(epsilon) and r.epsilon <= epsilon
    assert float(spent(steps)) == pytest.approx(epsilon, rel=1e-14) and r.epsilon == pytest.approx(epsilon, rel=1e-14)
    assert spent(steps[len(features) :]) <= Fraction(rest)
    np.testing.assert_array_equal(r.counts, mech.release(x, epsilon, rng=3).counts)
    if choice == "auto":
        inner = mech.candidate("auto", x.shape, rest)
        assert r.mechanism == inner.name and record["chosen"] == inner.name and r.measurements.epsilon == rest
        model = inner.error_model(x.shape, rest)
        lows, highs = np.array([[0, 0], [3, 2]]), np.array([[15, 15], [9, 11]])
        want = np.sqrt(model.rectangle_variance(lows, highs))
        np.testing.assert_allclose(r.rectangle(lows, highs).stderr, want, rtol=1e-9)
        loaded = load_grid_release(r.to_json())
        assert loaded.selection == json.loads(json.dumps(record)) and loaded.epsilon == r.epsilon
        assert r.to_dict()["privacy_statement"]["epsilon"] == r.epsilon
    else:
        assert r.mechanism == "auto-data" and record["chosen"] == choice
        assert not r.exact_error_bars and r.provenance.data_dependent
        ran = r.parameters["chosen_parameters"]
        for name, value in CANDIDATE_PARAMETERS.get(choice, {}).items():  # agrid_fine: AGrid, c2 = 1.25
            assert ran[name] == value


def test_replace_spends_nothing_on_the_public_total():
    x = np.arange(16).reshape(4, 4)
    r = AutoDataGrid(neighbours="replace").release(x, 1.0, rng=1)
    record = choice_of(r)
    assert [s["step"] for s in record["private_steps"]][:5] == ["nonempty", "top", "offpeak", "bound", "corner"]
    assert record["features"]["total"] == float(x.sum())


def test_shipped_rules_tree_chooses_as_its_rule_reads():
    """A rules fit (benchmarks/train_auto_grid.py, fit_rules) ships as a tree; on every input it
    must choose what its recorded decision list says: the alternative where log_signal_per_cell
    <= s; else the band's mechanism where log_signal_per_cell <= s1 on at most 2^c1 cells; else
    band2 where log_signal_per_cell <= s3 on at most 2^c3 cells with concentration >= q1; else
    band3 where log_signal_per_cell <= s4 with offpeak_share >= o; else band4 where
    log_signal_per_cell >= s5 with concentration >= q5; else band5 where log_signal_per_cell <= s6
    on at least 2^c6 cells with concentration >= q6, offpeak_share >= o6 and (where recorded)
    bound_share <= h6; else band6 where
    log_signal_per_cell <= s7 on at most 2^c7 cells with offpeak_share >= o7; else the alternative where
    log_sparsity <= z, log_signal_per_cell >= s2, concentration >= q and log_cells >= c2; else
    auto; and where that is auto, band7 where workload_boundary <= b8, log_signal_per_cell <= s8 on
    at least 2^c8 cells with concentration >= q8 and offpeak_share <= o8, else band8 where
    workload_boundary <= b9, log_signal_per_cell <= s9 on at least 2^c9 cells with concentration
    >= q9 and o9 <= offpeak_share <= u9, else (where recorded) band9 where concentration >= q10,
    workload_boundary >= b10, s10 <= log_signal_per_cell <= t10 and log_signal_per_occupied <= p10;
    over all of these, band10 where bound_share >= e11, workload_boundary >= b11, log_signal >=
    s11 and log_signal_per_cell <= t11; over all of these (where recorded), band12 where
    corner_share >= e13, offpeak_share >= o13, log_signal >= s13 and log_signal_per_cell <= t13;
    and over all, band11 where corner_share >= e12, workload_boundary <= b12, log_signal >= s12,
    l12 <= log_signal_per_cell <= t12 and log_cells <= c12, band13 there instead (where recorded)
    on at least 2^c14 cells; last (where recorded), band14 over a choice of auto, auto_nonnegative or
    DAWA where log_signal_per_occupied >= p15, log_signal_per_cell >= s15, workload_boundary >= b15,
    log_cells <= c15, log_sparsity <= z15, concentration >= q15 and offpeak_share <= o15; and over
    every choice (where recorded), band15 where log_signal_per_cell <= u16, log_signal_per_occupied
    >= p16, workload_boundary >= b16, log_cells <= c16, log_sparsity <= z16, concentration >= q16,
    bound_share >= k16, corner_share >= r16 and log_signal >= l16, and under it (where recorded) band16 where
    log_signal <= v17, log_signal_per_cell <= w17 and workload_boundary >= b17, band19 in its place
    (where recorded) where concentration <= q19 and log_signal >= x19."""
    sel = shipped_grid()
    rule = recorded_rules(sel)
    # signal per cell, _, sparsity, concentration, log2 cells, log epsilon, off-peak share, boundary
    columns = [(-4, 5), (-2, 4), (-4, 0), (0, 1), [10.0, 12.0, 14.0, 16.0], (-1, 0), (0, 0.75), (0.9, 2.0), (0, 1)]
    columns += [(1, 6), (0, 1)]  # log10 N eps, corner share
    thresholds = {"s": 0, "s1": 0, "z": 2, "s2": 0, "c1": 4, "q": 3, "c2": 4, "s3": 0, "c3": 4, "q1": 3}
    thresholds.update(
        {"s4": 0, "o": 6, "s5": 0, "q5": 3, "s6": 0, "c6": 4, "q6": 3, "o6": 6, "s7": 0, "c7": 4, "o7": 6}
    )
    thresholds.update(
        {"s8": 0, "c8": 4, "q8": 3, "o8": 6, "b8": 7, "s9": 0, "c9": 4, "q9": 3, "o9": 6, "u9": 6, "b9": 7}
    )
    refitting = "q10" in rule  # the non-negative branch (selectors fitted since auto_nonnegative)
    if refitting:
        thresholds.update({"q10": 3, "b10": 7, "s10": 0, "t10": 0, "p10": 1})
    thresholds.update({"e11": 8, "b11": 7, "s11": 9, "t11": 0})
    thresholds.update({"e12": 10, "b12": 7, "s12": 9, "l12": 0, "t12": 0, "c12": 4})
    if "h6" in rule:  # the towns branch's bound share (selectors fitted since the amounts-<k> family)
        thresholds["h6"] = 8
    spreading = "e13" in rule  # the corner spread branch (selectors fitted since it)
    if spreading:
        thresholds.update({"e13": 10, "o13": 6, "s13": 9, "t13": 0})
    large = rule.get("c14", 99.0) != 99.0  # the corner branch's band on large grids (selectors fitted since it)
    if large:
        thresholds["c14"] = 4
    supporting = rule.get("p15", 99.0) != 99.0  # the support branch (selectors fitted since it)
    if supporting:
        thresholds.update({"p15": 1, "s15": 0, "b15": 7, "z15": 2, "q15": 3, "o15": 6})
    low = rule.get("v17", -99.0) != -99.0  # the low-signal branch (selectors fitted since it)
    if low:
        thresholds.update({"v17": 9, "w17": 0, "b17": 7})
    smoothing = rule.get("q19", -9.0) != -9.0  # the smooth low-signal branch (selectors fitted since it)
    if smoothing:
        thresholds.update({"q19": 3, "x19": 9})
    pruning = rule.get("u16", -99.0) != -99.0  # the pruned branch (selectors fitted since it)
    if pruning:
        thresholds.update({"u16": 0, "p16": 1, "b16": 7, "z16": 2, "q16": 3, "k16": 8, "r16": 10, "l16": 9})
    placements = [(rule[k], (column,)) for k, column in thresholds.items()]
    x = rule_test_rows(sel, np.random.default_rng(6), 6000, columns, placements)
    signal, sparsity, concentration, cells, offpeak, boundary = x[:, 0], x[:, 2], x[:, 3], x[:, 4], x[:, 6], x[:, 7]
    occupied, bounded, records, cornered = x[:, 1], x[:, 8], x[:, 9], x[:, 10]
    concentrated = (signal <= rule["s8"]) & (cells >= rule["c8"]) & (concentration >= rule["q8"])
    concentrated &= offpeak <= rule["o8"]
    clustered = (signal <= rule["s9"]) & (cells >= rule["c9"]) & (concentration >= rule["q9"])
    clustered &= (offpeak >= rule["o9"]) & (offpeak <= rule["u9"])
    expected = []
    for i in range(x.shape[0]):
        sparse = sparsity[i] <= rule["z"] and signal[i] >= rule["s2"]
        if signal[i] <= rule["s"]:
            expected.append(rule["alternative"])
        elif signal[i] <= rule["s1"] and cells[i] <= rule["c1"]:
            expected.append(rule["band"])
        elif signal[i] <= rule["s3"] and cells[i] <= rule["c3"] and concentration[i] >= rule["q1"]:
            expected.append(rule["band2"])
        elif signal[i] <= rule["s4"] and offpeak[i] >= rule["o"]:
            expected.append(rule["band3"])
        elif signal[i] >= rule["s5"] and concentration[i] >= rule["q5"]:
            expected.append(rule["band4"])
        elif (
            signal[i] <= rule["s6"]
            and cells[i] >= rule["c6"]
            and concentration[i] >= rule["q6"]
            and offpeak[i] >= rule["o6"]
            and bounded[i] <= rule.get("h6", 9.0)
        ):
            expected.append(rule["band5"])
        elif signal[i] <= rule["s7"] and cells[i] <= rule["c7"] and offpeak[i] >= rule["o7"]:
            expected.append(rule["band6"])
        elif sparse and concentration[i] >= rule["q"] and cells[i] >= rule["c2"]:
            expected.append(rule["alternative"])
        else:
            expected.append("auto")
    listed = np.array([e == "auto" for e in expected])  # where the list runs auto
    for i in np.flatnonzero(listed):
        if concentrated[i] and boundary[i] <= rule["b8"]:
            expected[i] = rule["band7"]
        elif clustered[i] and boundary[i] <= rule["b9"]:
            expected[i] = rule["band8"]
        elif (
            refitting
            and concentration[i] >= rule["q10"]
            and boundary[i] >= rule["b10"]
            and rule["s10"] <= signal[i] <= rule["t10"]
            and occupied[i] <= rule["p10"]
        ):
            expected[i] = rule["band9"]
    on_bounds = (
        (bounded >= rule["e11"]) & (boundary >= rule["b11"]) & (records >= rule["s11"]) & (signal <= rule["t11"])
    )
    in_corner = (cornered >= rule["e12"]) & (boundary <= rule["b12"]) & (records >= rule["s12"])
    in_corner &= (signal >= rule["l12"]) & (signal <= rule["t12"]) & (cells <= rule["c12"])
    spread = np.zeros(x.shape[0], dtype=bool)
    if spreading:
        spread = (cornered >= rule["e13"]) & (offpeak >= rule["o13"]) & (records >= rule["s13"])
        spread &= signal <= rule["t13"]
    listed_choice = list(expected)
    expected = [rule["band10"] if on_bounds[i] else e for i, e in enumerate(expected)]
    bounded_choice = list(expected)
    expected = [rule["band12"] if spread[i] else e for i, e in enumerate(expected)]
    expected = [rule["band11"] if in_corner[i] else e for i, e in enumerate(expected)]
    if large:
        expected = [rule["band13"] if in_corner[i] and cells[i] >= rule["c14"] else e for i, e in enumerate(expected)]
        assert (in_corner & (cells < rule["c14"])).any() and (in_corner & (cells >= rule["c14"])).any()
        assert rule["band13"] != rule["band11"] and rule["band13"] in expected
    if supporting:  # over all, band14 where the choice is auto, auto_nonnegative or DAWA and every test holds
        supported = (occupied >= rule["p15"]) & (signal >= rule["s15"]) & (boundary >= rule["b15"])
        supported &= (cells <= rule["c15"]) & (sparsity <= rule["z15"]) & (concentration >= rule["q15"])
        supported &= offpeak <= rule["o15"]
        family = ("auto", "auto_nonnegative", "dawa_hilbert")
        replaced = np.array([supported[i] and e in family for i, e in enumerate(expected)])
        assert replaced.any() and (supported & ~replaced).any()
        for key, column in (("p15", occupied), ("s15", signal), ("z15", sparsity), ("q15", concentration)):
            assert (column[replaced] == rule[key]).any()  # rows on each threshold, at-least or at-most, taken
        expected = [rule["band14"] if replaced[i] else e for i, e in enumerate(expected)]
    if low:  # over every choice, band16 where every test holds
        lowered = (records <= rule["v17"]) & (signal <= rule["w17"]) & (boundary >= rule["b17"])
        assert lowered.any() and len({e for e, p in zip(expected, lowered) if p}) > 1
        assert (records[lowered] == rule["v17"]).any()  # rows on the at-most threshold, taken
        expected = [rule["band16"] if lowered[i] else e for i, e in enumerate(expected)]
    if smoothing:  # band19 in place of band16 where both its tests hold
        smoothed = (concentration <= rule["q19"]) & (records >= rule["x19"])
        smoothed &= np.array([e == rule["band16"] for e in expected])
        assert smoothed.any() and (lowered & ~smoothed).any()
        assert (concentration[smoothed] == rule["q19"]).any() and (records[smoothed] == rule["x19"]).any()
        expected = [rule["band19"] if smoothed[i] else e for i, e in enumerate(expected)]
    if pruning:  # over every choice, band15 where every test holds
        pruned = (signal <= rule["u16"]) & (occupied >= rule["p16"]) & (boundary >= rule["b16"])
        pruned &= (cells <= rule["c16"]) & (sparsity <= rule["z16"]) & (concentration >= rule["q16"])
        pruned &= (bounded >= rule["k16"]) & (cornered >= rule["r16"]) & (records >= rule["l16"])
        assert pruned.any() and len({e for e, p in zip(expected, pruned) if p}) > 1
        assert (signal[pruned] == rule["u16"]).any()  # rows on the at-most threshold, taken
        expected = [rule["band15"] if pruned[i] else e for i, e in enumerate(expected)]
    assert sel.choose(x) == expected
    if spreading and rule["e13"] != 9.0:  # the corner spread branch runs: both sides of each bound, a change
        gated = (offpeak >= rule["o13"]) & (records >= rule["s13"]) & (signal <= rule["t13"]) & ~in_corner
        assert (gated & (cornered < rule["e13"])).any() and (gated & (cornered >= rule["e13"])).any()
        gated = (cornered >= rule["e13"]) & (records >= rule["s13"]) & (signal <= rule["t13"]) & ~in_corner
        assert (gated & (offpeak < rule["o13"])).any() and (gated & (offpeak >= rule["o13"])).any()
        assert any(e != c for e, c, b in zip(expected, bounded_choice, spread & ~in_corner) if b)
    if rule["e12"] != 9.0:  # the corner branch runs: both sides of its bound, and it changes some choice
        gated = (boundary <= rule["b12"]) & (records >= rule["s12"]) & (signal >= rule["l12"])
        gated &= (signal <= rule["t12"]) & (cells <= rule["c12"])
        assert (gated & (cornered < rule["e12"])).any() and (gated & (cornered >= rule["e12"])).any()
        assert any(e != c for e, c, b in zip(expected, listed_choice, in_corner) if b)
    if rule["e11"] != 9.0:  # the bound branch runs: both sides of its bound, and it changes some choice
        gated = (boundary >= rule["b11"]) & (records >= rule["s11"]) & (signal <= rule["t11"])
        assert (gated & (bounded < rule["e11"])).any() and (gated & (bounded >= rule["e11"])).any()
        assert any(e != c for e, c, b in zip(expected, listed_choice, on_bounds) if b)
    expected = listed_choice  # the checks below are of the list under the bound branch
    for region, bound, gate in ((listed & concentrated, "b8", "s8"), (listed & clustered & ~concentrated, "b9", "s9")):
        if rule[gate] == -9.0:  # a branch the list leaves off never runs
            assert not region.any()
            continue
        assert (region & (boundary <= rule[bound])).any() and (region & (boundary > rule[bound])).any()

    def on(gate: str) -> bool:  # a branch the list leaves off (its gate at "never") never runs
        return rule[gate] not in (-9.0, 9.0)

    assert {"auto", rule["alternative"]} <= set(expected)
    band = (signal > rule["s"]) & (signal <= rule["s1"])
    if on("s1"):
        assert (band & (cells <= rule["c1"])).any() and (band & (cells > rule["c1"])).any()  # both sides of c1
        assert rule["band"] in expected
    second = (signal > rule["s"]) & (signal > rule["s1"]) & (signal <= rule["s3"]) & (cells <= rule["c3"])
    if on("s3"):
        assert (second & (concentration < rule["q1"])).any() and (second & (concentration >= rule["q1"])).any()
        assert rule["band2"] in expected
    else:
        assert not second.any()
    first_two = (signal <= rule["s"]) | ((signal <= rule["s1"]) & (cells <= rule["c1"]))
    banded = (signal <= rule["s3"]) & (cells <= rule["c3"]) & (concentration >= rule["q1"])
    third = ~first_two & ~banded & (signal <= rule["s4"])
    if on("s4"):
        assert (third & (offpeak < rule["o"])).any() and (third & (offpeak >= rule["o"])).any()  # both sides of o
        assert rule["band3"] in expected
    else:
        assert not third.any()
    peak = (signal > max(rule["s"], rule["s1"], rule["s3"], rule["s4"])) & (signal >= rule["s5"])
    if on("s5"):
        assert (peak & (concentration < rule["q5"])).any() and (peak & (concentration >= rule["q5"])).any()  # of q5
        assert rule["band4"] in expected
    else:
        assert not peak.any()
    towns = ~first_two & ~banded & ~(third & (offpeak >= rule["o"])) & (signal <= rule["s6"]) & (cells >= rule["c6"])
    towns &= concentration >= rule["q6"]
    if on("s6"):
        assert (towns & (offpeak < rule["o6"])).any() and (towns & (offpeak >= rule["o6"])).any()  # of o6
        assert {rule["band5"]} <= {e for e, t in zip(expected, towns & (offpeak >= rule["o6"])) if t}
        if rule.get("h6", 9.0) < 1.0:  # both sides of h6 among the rows the other settings send there
            reached = towns & (offpeak >= rule["o6"])
            assert (reached & (bounded <= rule["h6"])).any() and (reached & (bounded > rule["h6"])).any()
    else:
        assert not towns.any()
    small = ~first_two & ~banded & ~(third & (offpeak >= rule["o"])) & (signal <= rule["s7"]) & (cells <= rule["c7"])
    if on("s7"):
        assert (small & (offpeak < rule["o7"])).any() and (small & (offpeak >= rule["o7"])).any()  # both sides of o7
        assert {rule["band6"]} <= {e for e, t in zip(expected, small & (offpeak >= rule["o7"])) if t}
    else:
        assert not small.any()
    sparse = (signal > max(rule["s"], rule["s1"], rule["s3"])) & (sparsity <= rule["z"]) & (signal >= rule["s2"])
    assert on("z") and on("s2")  # the shipped list runs its sparse branch: check both sides of its bounds
    for low, high in (
        (concentration < rule["q"], concentration >= rule["q"]),
        (cells < rule["c2"], cells >= rule["c2"]),
    ):
        assert (sparse & low).any() and (sparse & high).any()  # both sides of q and of c2


def test_shipped_selector_loads_and_its_layout_is_checked():
    sel = shipped_grid()
    assert sel.candidates[0] == "auto" and set(sel.candidates) <= set(GRID_CANDIDATES)
    assert sel.training["script"] == "benchmarks/train_auto_grid.py"
    from importlib import resources

    data = json.loads(resources.files("dprange.data_aware").joinpath(GRID_SELECTOR_FILE).read_text())
    assert data["domain"] == "2-D grid" and data["format"] == GRID_FORMAT == 6
    assert GridSelector.from_dict(data).to_dict() == sel.to_dict() == json.loads(json.dumps(sel.to_dict()))
    with pytest.raises(ParameterError, match="another layout"):
        GridSelector.from_dict({**data, "format": data["format"] + 1})
    with pytest.raises(ParameterError, match="another layout"):
        GridSelector.from_dict({**data, "features": data["features"][::-1]})
    one_d = json.loads(resources.files("dprange.data_aware").joinpath("auto_data_selector.json").read_text())
    with pytest.raises(ParameterError, match="not a 2-D one"):
        GridSelector.from_dict(one_d)
    with pytest.raises(ParameterError, match="retrain"):
        GridSelector.from_dict({**data, "candidates": ["auto", "dawa"]})


def test_release_grid_runs_auto_data_and_charges_the_session():
    rng = np.random.default_rng(3)
    columns = np.column_stack([rng.integers(0, 32, 4000), rng.integers(0, 16, 4000)])
    domain = dprange.ProductDomain([dprange.Domain.integers(0, 31), dprange.Domain.integers(0, 15)])
    session = dprange.Session(2.0)
    r = dprange.release_grid(columns, domain, 0.5, mechanism="auto-data", rng=4, session=session)
    assert math.isclose(session.spent_epsilon, 0.5) and r.epsilon == pytest.approx(0.5, rel=1e-14) and r.epsilon <= 0.5
    direct = AutoDataGrid().release(domain.histogram(columns), 0.5, rng=4)
    np.testing.assert_array_equal(r.counts, direct.counts)
    with pytest.raises(ParameterError, match="delta=0"):
        AutoDataGrid().release(domain.histogram(columns), 0.5, delta=1e-6)


@pytest.mark.parametrize(
    "workload",
    ["prefix-rectangles", "rects", "marginals"],
)
def test_the_auto_branch_is_chosen_for_the_release_s_workload(workload):
    """release_grid hands auto-data its workload: the data-independent branch is the least
    exact expected error on those rectangles (as ``auto`` would choose at the epsilon left),
    not on all rectangles; explicit rectangles are saved and read back with the release."""
    from dprange.analysis.grid import select_grid
    from dprange.workloads.rectangles import Rectangles

    shape = (32, 16)
    columns = np.column_stack([np.arange(4000) % 32, np.arange(4000) % 16])
    domain = dprange.ProductDomain([dprange.Domain.integers(0, 31), dprange.Domain.integers(0, 15)])
    wanted = workload
    if workload == "rects":
        lows = np.array([[0, 0], [3, 2], [10, 0]])
        wanted = Rectangles(shape, lows, np.array([[0, 0], [3, 2], [10, 0]]))  # three cells
    kwargs = {"order": 1} if workload == "marginals" else {}
    mech = AutoDataGrid(workload=wanted, refit="never", **kwargs)
    mech.selector = forced("auto")
    checked = AutoDataGrid(workload=wanted, **kwargs)
    checked.selector = forced("auto")
    design = checked.release(domain.histogram(columns), 1.0, rng=4).parameters["chosen_parameters"]["design"]
    r = mech.release(domain.histogram(columns), 1.0, rng=4)
    rest = mech.shares(1.0)[-1]
    want = select_grid(shape, rest, workload=wanted, order=kwargs.get("order", 2)).mechanism
    assert r.mechanism == want.name and r.selection["chosen"] == want.name and design["mechanism"] == want.name
    chosen = {k: v for k, v in r.parameters.items() if k != "strategy"}  # the strategy: how it was built
    assert chosen == json.loads(json.dumps(want.parameters()))  # chosen for these rectangles
    assert repr(want) != repr(select_grid(shape, rest).mechanism)  # not the all-rectangles choice
    assert r.selection["feature_share"] == 0.05 and r.selection["order"] == kwargs.get("order", 2)
    loaded = load_grid_release(r.to_json())
    assert loaded.selection == json.loads(json.dumps(r.selection))
    if workload == "rects":
        assert r.selection["workload"] == {"shape": [32, 16], "lows": lows.tolist(), "highs": lows.tolist()}
        again = AutoDataGrid(**{k: v for k, v in r.selection.items() if k in ("workload", "feature_share")})
        assert isinstance(again.workload, Rectangles) and np.array_equal(again.workload.lows, lows)
    order = kwargs.get("order", 2)
    via_api = dprange.release_grid(columns, domain, 1.0, mechanism="auto-data", workload=wanted, order=order, rng=4)
    direct = AutoDataGrid(workload=wanted, order=order).release(domain.histogram(columns), 1.0, rng=4)
    assert via_api.mechanism == direct.mechanism and choice_of(via_api) == choice_of(direct)
    np.testing.assert_array_equal(via_api.counts, direct.counts)
    with pytest.raises(ParameterError, match="workload"):
        AutoDataGrid(workload="every-rectangle")


# ----------------------------------------------------------------------------- the whole release
#: The choices of the whole-release test: the real data-independent branch and two small trees
#: (the privacy argument holds for any eps-DP candidate: the choice is post-processing).
WHOLE = {
    "auto": None,
    "kd_tree": lambda relation: KDTree(depth=2, split_share=0.4, neighbours=relation),
    "hybrid_tree": lambda relation: HybridTree(kd_levels=1, split_share=0.4, neighbours=relation),
}


def whole_selector() -> Selector:
    """auto when at most one cell is (noisily) non-empty, else kd_tree when the noisy top mass (every record of
    a 3 x 3 grid) is at most half the noisy N, else hybrid_tree (every choice is reached in the test's feature
    window)."""
    nodes = [
        {"feature": 2, "threshold": -0.9, "left": 1, "right": 2},
        {"leaf": 0},
        {"feature": 3, "threshold": 0.5, "left": 3, "right": 4},
        {"leaf": 1},
        {"leaf": 2},
    ]
    return Selector("tree", tuple(WHOLE), {"nodes": nodes})


def release_law(rel) -> tuple[tuple, list]:
    """(the release's structure, [(noise spec, exact measured values)]) of a run with zero noise."""
    if isinstance(rel, GridRelease):
        return ("auto",), [(m.noise, np.asarray(m.values, dtype=np.int64)) for m in rel.measurements.measurements]
    fit = rel._noise
    key = tuple(tuple(np.concatenate([lv.lo, lv.hi], axis=1).ravel().tolist()) for lv in fit.levels)
    return key, [(spec, np.asarray(v, dtype=np.int64)) for spec, v in zip(fit.specs, fit.measured) if spec is not None]


def branch_laws(monkeypatch, mech: AutoDataGrid, x, epsilon: float):
    """({choice: {structure: (log P_x, measured rows)}}, the feature steps' noise specs): the
    release run with each choice forced, its private cuts enumerated (Script)."""
    laws: dict = {}
    real_candidate = AutoDataGrid.candidate
    for choice, build in WHOLE.items():
        with monkeypatch.context() as patch:
            patch.setattr(auto_grid_module, "choose_grid", lambda *args, c=choice: [c])
            small = (lambda self, name, shape, eps, b=build: b(self.neighbours)) if build else real_candidate
            patch.setattr(AutoDataGrid, "candidate", small)
            script = Script(patch, [spatial_trees_module])
            laws[choice] = {}
            for log_p, rel in script.enumerate(lambda: mech.release(x, epsilon, rng=0)):
                key, rows = release_law(rel)
                assert key not in laws[choice]
                laws[choice][key] = (log_p, rows)
            specs = [spec for spec, _ in script.draws[: 6 if mech.neighbours == "add_remove" else 5]]
    return laws, specs


def feature_log_ratios(spec, true_x: int, true_y: int, window: int) -> tuple[np.ndarray, np.ndarray]:
    """(feature values within ``window`` of both true values, log P_x(value) - log P_y(value))."""
    values = np.arange(min(true_x, true_y) - window, max(true_x, true_y) + window + 1)
    return values, np.log(spec.pmf(values - true_x)) - np.log(spec.pmf(values - true_y))


def whole_worst(monkeypatch, mech: AutoDataGrid, bases, epsilon: float, window: int = 40, offpeak_window: int = 3):
    """(worst log-ratio over the feature window (``offpeak_window`` for the off-peak, bound and
    corner masses, which the test selector does not read: the bound and corner masses, last,
    enter the sum at their worst terms for each value of the others) and every output of the
    chosen branch, its upper bound over all feature values, the choices reached)."""
    rest = mech.shares(epsilon)[-1]
    worst, upper, seen = 0.0, 0.0, set()
    for x in bases:
        laws_x, specs = branch_laws(monkeypatch, mech, x, epsilon)
        for y in grid_neighbours(x, mech.neighbours):
            laws_y, _ = branch_laws(monkeypatch, mech, y, epsilon)
            inner = {c: joint_worst(laws_x[c], laws_y[c]) for c in WHOLE}
            ratios = [feature_log_ratios(specs[0], int(x.sum()), int(y.sum()), window)]
            if mech.neighbours == "replace":
                ratios = [(np.array([x.sum()]), np.zeros(1))]
            ex, ey = exact_features(x), exact_features(y)
            ratios.append(feature_log_ratios(specs[-5], ex[1], ey[1], window))
            ratios.append(feature_log_ratios(specs[-4], ex[2], ey[2], window))
            ratios.append(feature_log_ratios(specs[-3], ex[3], ey[3], offpeak_window))
            _, bound = feature_log_ratios(specs[-2], ex[4], ey[4], offpeak_window)
            _, corner = feature_log_ratios(specs[-1], ex[5], ey[5], offpeak_window)
            t, z, h, o = np.meshgrid(*(values for values, _ in ratios), indexing="ij")
            boundary = workload_boundary(mech.workload, x.shape)
            names = choose_grid(t, z, h, o, ex[4], ex[5], x.size, rest, boundary, mech.selector)
            seen |= set(names)
            loss = np.array([inner[c] for c in names]).reshape(t.shape)
            f = [r for _, r in ratios]
            signed = f[0][:, None, None, None] + f[1][None, :, None, None] + f[2][None, None, :, None] + f[3]
            edges = bound.max() + corner.max(), bound.min() + corner.min()
            features = np.maximum(signed + edges[0], -(signed + edges[1]))
            worst = max(worst, float((features + loss).max()))
            upper = max(upper, sum(np.abs(r).max() for r in [*f, bound, corner]) + max(inner.values()))
    return worst, upper, seen


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.slow
def test_whole_release_joint_law_is_epsilon_dp(monkeypatch, relation):
    """The 2-D auto-data on 3 x 3 grids at epsilon 9 (features 0.9, the rest to the branch): the
    worst log-ratio over released features in a window of +-40 around the true values (every
    choice of the test selector reached) and the chosen branch's outputs (its private cuts and
    noisy counts, exactly) is at most epsilon, as is its bound over all feature values; it is
    tight, and the same code at twice the budget exceeds epsilon.  The auto branch's least squares
    (``refit='never'``): with the default check it releases post-processing of the same
    measurements (test_privacy_definition_2d_releases.py)."""
    epsilon = 9.0
    mech = AutoDataGrid(feature_share=0.1, neighbours=relation, refit="never")
    mech.selector = whole_selector()
    bases = [np.array([[2, 0, 0], [0, 0, 0], [0, 0, 1]]), np.array([[0, 1, 0], [0, 1, 0], [1, 0, 0]])]
    worst, upper, seen = whole_worst(monkeypatch, mech, bases, epsilon)
    assert seen == set(WHOLE)
    assert worst <= upper <= epsilon * (1 + 1e-12)
    assert worst >= 0.85 * epsilon
    assert whole_worst(monkeypatch, mech, bases[:1], 2 * epsilon, window=5)[0] > epsilon


def test_training_script_rules_fit_scores_every_decision_list_as_its_choices(monkeypatch):
    """benchmarks/train_auto_grid.py scores the sparse branch's settings at once (a product of row
    masks with the cells' indicator); on a random table over a small grid of lists it must pick
    the list a plain loop picks (each list's choices by rule_choice, its cells' mean errors, the
    same cost, rank and order; then the peak branch's settings with that list fixed, then the
    towns branch's, the small-grid branch's, the concentrated, clustered and non-negative
    branches', each with all before it fixed, all on the rows of shapes other than the
    ``bound-<k>`` and ``amounts-<k>`` ones; then the bound, corner, corner spread, large-corner,
    support, low-signal, smooth low-signal and pruned branches' on every row), and the tree it
    writes must choose as that list on every row."""
    import argparse
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("train_auto_grid")
    from train_auto_data import cell_means, rule_rank

    small = {
        "s": (-9.0, -1.0),
        "s1": (-9.0, 0.0),
        "c1": (12.0,),
        "band": ("agrid", "dawa_hilbert"),
        "z": (-9.0, -2.0, -1.0),
        "s2": (-9.0, 1.0),
        "alternative": ("dawa_hilbert", "agrid"),
        "q": (0.5,),
        "c2": (0.0, 12.0),
        "s3": (-9.0, 1.0),
        "c3": (12.0, 14.0),
        "q1": (0.3, 0.6),
        "band2": ("agrid", "kd_tree"),
        "s4": (-9.0, 0.5),
        "o": (0.3, 0.6),
        "band3": ("agrid", "dawa_hilbert"),
    }
    peak_grid = {"s5": (9.0, 0.5, 1.5), "q5": (0.4, 0.7), "band4": ("dawa_hilbert", "kd_tree")}
    towns_grid = {
        "s6": (-9.0, 0.0, 1.0),
        "c6": (10.0, 14.0),
        "q6": (0.0, 0.6),
        "o6": (0.2, 0.5),
        "h6": (9.0, 0.5),
        "band5": ("agrid", "kd_tree"),
    }
    monkeypatch.setattr(script, "GRID_RULE", small)
    monkeypatch.setattr(script, "PEAK_RULE", peak_grid)
    monkeypatch.setattr(script, "TOWNS_RULE", towns_grid)
    small_grid = {"s7": (-9.0, 0.0, 1.5), "c7": (12.0,), "o7": (0.1, 0.4), "band6": ("agrid", "ugrid")}
    monkeypatch.setattr(script, "SMALL_RULE", small_grid)
    concentrated_grid = {
        "s8": (-9.0, 0.0, 1.5),
        "c8": (10.0, 12.0),
        "q8": (0.2, 0.5),
        "o8": (0.3, 0.8),
        "b8": (1.1, 1.6),
        "band7": ("dawa_hilbert", "kd_tree"),
    }
    clustered_grid = {
        "s9": (-9.0, 0.5, 1.5),
        "c9": (10.0, 12.0),
        "q9": (0.1, 0.4),
        "o9": (0.1, 0.3),
        "u9": (0.6, 0.9),
        "b9": (1.2, 1.8),
        "band8": ("ugrid", "kd_tree"),
    }
    monkeypatch.setattr(script, "CONCENTRATED_RULE", concentrated_grid)
    monkeypatch.setattr(script, "CLUSTERED_RULE", clustered_grid)
    nonnegative_grid = {
        "q10": (9.0, 0.3, 0.6),
        "b10": (1.2, 0.0),
        "s10": (-1.5, 0.0),
        "t10": (1.0, 2.0),
        "p10": (9.0, 1.5),
        "band9": ("auto_nonnegative", "ugrid"),
    }
    monkeypatch.setattr(script, "NONNEGATIVE_RULE", nonnegative_grid)
    bound_grid = {
        "e11": (9.0, 0.2, 0.5, 0.8),
        "b11": (0.0, 1.5),
        "s11": (1.0, 2.5, 4.0),
        "t11": (0.5, 9.0),
        "band10": ("auto_nonnegative", "kd_tree", "auto", "agrid", "ugrid"),
    }
    monkeypatch.setattr(script, "BOUND_RULE", bound_grid)
    corner_grid = {
        "e12": (9.0, 0.3, 0.6),
        "b12": (1.5,),
        "s12": (1.0, 3.0),
        "l12": (-2.0, 0.0),
        "t12": (1.0, 9.0),
        "c12": (12.0, 14.0),
        "band11": ("agrid", "kd_tree"),
    }
    monkeypatch.setattr(script, "CORNER_RULE", corner_grid)
    spread_grid = {
        "e13": (9.0, 0.3, 0.6),
        "o13": (0.2, 0.5),
        "s13": (1.0, 3.0),
        "t13": (1.0, 9.0),
        "band12": ("kd_tree", "agrid", "dawa_hilbert", "ugrid", "auto"),
    }
    monkeypatch.setattr(script, "SPREAD_RULE", spread_grid)
    large_grid = {"c14": (99.0, 14.0, 12.0), "band13": ("kd_tree", "ugrid", "dawa_hilbert", "auto")}
    monkeypatch.setattr(script, "LARGE_CORNER_RULE", large_grid)
    support_grid = {
        "p15": (99.0, 1.5, 2.5),
        "s15": (-9.0, 0.0),
        "b15": (0.0, 1.5),
        "c15": (12.0, 14.0),
        "z15": (9.0, -1.5),
        "q15": (0.0, 0.3),
        "o15": (1.0, 0.5),
        "band14": ("ugrid", "kd_tree"),
    }
    monkeypatch.setattr(script, "SUPPORT_RULE", support_grid)
    low_grid = {"v17": (-99.0, 2.0, 3.5), "w17": (9.0, -1.0), "b17": (0.0, 1.5), "band16": ("ugrid", "kd_tree")}
    monkeypatch.setattr(script, "LOW_RULE", low_grid)
    smooth_grid = {"q19": (-9.0, 0.4, 0.8), "x19": (1.0, 3.0), "band19": ("agrid", "dawa_hilbert")}
    monkeypatch.setattr(script, "SMOOTH_RULE", smooth_grid)
    pruned_grid = {
        "u16": (-99.0, 0.0, 1.0),
        "p16": (-9.0,),
        "b16": (0.0, 1.5),
        "c16": (14.0,),
        "z16": (9.0,),
        "q16": (0.0, 0.3),
        "k16": (0.0,),
        "r16": (0.0, 0.5),
        "l16": (-9.0,),
        "band15": ("agrid", "kd_tree"),
    }
    monkeypatch.setattr(script, "PRUNED_RULE", pruned_grid)
    rng = np.random.default_rng(8)
    rows, candidates = 600, ("auto", "agrid", "ugrid", "dawa_hilbert", "kd_tree", "auto_nonnegative")
    x = np.column_stack(
        [
            rng.uniform(-2, 2, rows),
            rng.uniform(-1, 3, rows),
            rng.uniform(-3, 0, rows),
            rng.uniform(0, 1, rows),
            rng.choice([10.0, 12.0, 14.0], rows),
            rng.choice([-1.0, 0.0], rows),
            rng.uniform(0, 1, rows),
        ]
    )
    keys = [("shape", int(k), 0, 0.1, "w") for k in rng.integers(0, 40, rows)]  # 40 cells of ~15 rows
    heaped = {0: "bound-0", 3: "amounts-1"}  # shapes of the families heaped on the bounds
    keys = [(heaped.get(i % 7, k[0]), *k[1:]) for i, k in enumerate(keys)]
    per_row = rng.lognormal(0.0, 1.0, (rows, len(candidates) + 1))
    x = np.column_stack([x, rng.uniform(0.9, 2.0, rows), rng.uniform(0, 1, rows), rng.uniform(1, 5, rows)])
    x = np.column_stack([x, np.random.default_rng(9).uniform(0, 1, rows)])  # the corner share
    args = argparse.Namespace(to_auto=1.2, stage_to_auto=1.5, hinge=10.0)
    got = script.fit_rules(x, keys, per_row, candidates, args)
    listed = np.array([k[0] not in heaped.values() for k in keys])
    assert 0 < listed.sum() < rows

    def rank(rule, on=None, bound=1.2):  # on the rows ``on`` (all of them by default)
        on = np.ones(rows, dtype=bool) if on is None else on
        cell, size, mean = cell_means([k for k, m in zip(keys, on) if m], per_row[on])
        column = script.rule_choice(x[on], rule, candidates)
        error = np.bincount(cell, per_row[on][np.arange(int(on.sum())), column], minlength=size.size) / size
        ratio = error / mean[:, -1]
        cost = (error / mean.min(axis=1) - 1 + 10.0 * np.maximum(0.0, np.log(ratio))) * size
        return rule_rank(float(ratio.max()), float(cost.sum()), bound)

    never = {
        "s5": 9.0,
        "q5": 0.4,
        "band4": "dawa_hilbert",
        "s6": -9.0,
        "c6": 10.0,
        "q6": 0.0,
        "o6": 0.2,
        "h6": 9.0,
        "band5": "agrid",
        **{"s7": -9.0, "c7": 12.0, "o7": 0.1, "band6": "agrid"},
        **{"s8": -9.0, "c8": 10.0, "q8": 0.2, "o8": 0.3, "b8": 1.1, "band7": "dawa_hilbert"},
        **{"s9": -9.0, "c9": 10.0, "q9": 0.1, "o9": 0.1, "u9": 0.6, "b9": 1.2, "band8": "ugrid"},
        **{"q10": 9.0, "b10": 1.2, "s10": -1.5, "t10": 1.0, "p10": 9.0, "band9": "auto_nonnegative"},
        **{"e11": 9.0, "b11": 0.0, "s11": 1.0, "t11": 0.5, "band10": "auto_nonnegative"},
        **{"e12": 9.0, "b12": 1.5, "s12": 1.0, "l12": -2.0, "t12": 1.0, "c12": 12.0, "band11": "agrid"},
        **{"e13": 9.0, "o13": 0.2, "s13": 1.0, "t13": 1.0, "band12": "kd_tree"},
        **{"c14": 99.0, "band13": "kd_tree"},
        **{"p15": 99.0, "s15": -9.0, "b15": 0.0, "c15": 12.0, "z15": 9.0, "q15": 0.0, "o15": 1.0, "band14": "ugrid"},
        **{"v17": -99.0, "w17": 9.0, "b17": 0.0, "band16": "ugrid"},
        **{"q19": -9.0, "x19": 1.0, "band19": "agrid"},
        **{"u16": -99.0, "p16": -9.0, "b16": 0.0, "c16": 14.0, "z16": 9.0, "q16": 0.0, "k16": 0.0, "r16": 0.0},
        **{"l16": -9.0, "band15": "agrid"},
    }
    later = (
        (peak_grid, "s5"),
        (towns_grid, "s6"),
        (small_grid, "s7"),
        (concentrated_grid, "s8"),
        (clustered_grid, "s9"),
        (nonnegative_grid, "q10"),
        (bound_grid, "e11"),
        (corner_grid, "e12"),
        (spread_grid, "e13"),
        (large_grid, "c14"),
        (support_grid, "p15"),
        (low_grid, "v17"),
        (smooth_grid, "q19"),
        (pruned_grid, "u16"),
    )
    best, chosen = None, None
    for values in itertools.product(*small.values()):
        rule = {**dict(zip(small, values)), **never}
        if rule["s1"] == -9.0 and (rule["c1"], rule["band"]) != (12.0, "agrid"):
            continue
        if rule["z"] == -9.0 and (rule["s2"], rule["q"], rule["c2"]) != (-9.0, 0.5, 0.0):
            continue
        if rule["s4"] == -9.0 and (rule["o"], rule["band3"]) != (0.3, "agrid"):
            continue
        if rule["s3"] == -9.0 and (rule["c3"], rule["q1"], rule["band2"]) != (12.0, 0.3, "agrid"):
            continue
        key = rank(rule, listed)
        if best is None or key < best:
            best, chosen = key, rule
    whole_row = (bound_grid, corner_grid, spread_grid, large_grid, support_grid, low_grid, smooth_grid, pruned_grid)
    for grid, gate in later:  # each later stage, all before it fixed; the list's on its shapes' rows
        fixed, best = chosen, None
        for values in itertools.product(*grid.values()):
            setting = dict(zip(grid, values))
            if setting[gate] == never[gate] and any(setting[k] != never[k] for k in grid):
                continue
            key = rank(
                {**fixed, **setting},
                None if grid in whole_row else listed,
                bound=1.5,
            )
            if best is None or key < best:
                best, chosen = key, {**fixed, **setting}
    assert all(chosen[gate] != never[gate] for _, gate in later)  # each later stage changes it
    # the towns branch's bound share as the tree writes it (node 49 of the list), at a setting that bites
    capped = {**chosen, "h6": 0.5}
    tree = GridSelector("tree", candidates, {"nodes": script.rule_tree(capped, candidates)})
    capped_choice = script.rule_choice(x, capped, candidates)
    assert [candidates.index(c) for c in tree.choose(x)] == capped_choice.tolist()
    assert (capped_choice != script.rule_choice(x, chosen, candidates)).any()
    assert got.model["rules"] == chosen
    picked = script.rule_choice(x, chosen, candidates)
    assert [candidates.index(c) for c in got.choose(x)] == picked.tolist()
    assert len(set(picked.tolist())) >= 3
    # the same list without its non-negative branch (what the branch adds, scored from the same fits)
    base = script.without_refit(got)
    unrefitted = script.rule_choice(x, {**chosen, **{k: v[0] for k, v in nonnegative_grid.items()}}, candidates)
    assert [candidates.index(c) for c in base.choose(x)] == unrefitted.tolist() != picked.tolist()
    assert base.model["rules"]["q10"] == 9.0 and got.model["rules"] == chosen
    for branch, gate in ((script.bound_branch, "e11"), (script.corner_branch, "e12"), (script.spread_branch, "e13")):
        assert (branch(x, chosen) & (picked != script.rule_choice(x, {**chosen, gate: 9.0}, candidates))).any()
    large = script.corner_branch(x, chosen) & script.large_corner(x, chosen)
    assert (large & (picked != script.rule_choice(x, {**chosen, "c14": 99.0}, candidates))).any()
    assert (script.corner_branch(x, chosen) & ~large).any()  # the corner branch's band11 still runs somewhere
    # the support branch replaces only the choices of its family (auto, auto_nonnegative, DAWA), and the tree's
    # copies of its tests under each such leaf choose as it does
    unsupported = script.rule_choice(x, {**chosen, "p15": 99.0}, candidates)
    changed = picked != unsupported
    family = [candidates.index(c) for c in ("auto", "auto_nonnegative", "dawa_hilbert")]
    assert changed.any() and np.isin(unsupported[changed], family).all()
    assert (picked[changed] == candidates.index(chosen["band14"])).all()
    assert (script.support_branch(x, chosen) & ~changed).any()  # rows it would take where the list runs none of them
    # the pruned branch replaces every choice where its tests hold (the tree's copies of them under every leaf)
    unpruned = script.rule_choice(x, {**chosen, "u16": -99.0}, candidates)
    pruned = script.pruned_branch(x, chosen)
    assert pruned.any() and (picked[pruned] == candidates.index(chosen["band15"])).all()
    assert (picked[~pruned] == unpruned[~pruned]).all() and (picked != unpruned).any()
    # the smooth low-signal branch replaces only the low-signal branch's band where its tests hold (the
    # tree's copies of them under each leaf of that band choose as it does)
    unsmooth = script.rule_choice(x, {**chosen, "q19": -9.0}, candidates)
    smooth = picked != unsmooth
    assert smooth.any() and (unsmooth[smooth] == candidates.index(chosen["band16"])).all()
    assert (picked[smooth] == candidates.index(chosen["band19"])).all()
    band16 = unsmooth == candidates.index(chosen["band16"])
    assert (smooth == (script.smooth_branch(x, chosen) & band16 & ~pruned)).all()
    # the low-signal branch replaces every choice where its tests hold and neither the pruned branch's
    # nor the smooth branch's do
    unlow = script.rule_choice(x, {**chosen, "v17": -99.0}, candidates)
    low = script.low_branch(x, chosen) & ~pruned & ~smooth
    assert low.any() and (picked[low] == candidates.index(chosen["band16"])).all()
    assert (picked[~low & ~smooth] == unlow[~low & ~smooth]).all() and (picked != unlow).any()


@pytest.mark.parametrize("stage_to_auto, runs", [(1.2, False), (1.25, False), (1.5, True)])
def test_training_script_later_stages_bound_the_ratio_to_auto_by_stage_to_auto(monkeypatch, stage_to_auto, runs):
    """benchmarks/train_auto_grid.py fits a later stage's branch under ``--stage-to-auto``, not
    ``--to-auto``: on two cells, where the branch's band has a tenth of ``auto``'s error in one and
    1.3 times it in the other (its cost summed over both far below the list's without it), the
    branch runs only where the bound is above 1.3."""
    import argparse
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("train_auto_grid")
    candidates = ("auto", "agrid", "ugrid", "dawa_hilbert", "kd_tree", "auto_nonnegative")
    stages = ("GRID", "PEAK", "TOWNS", "SMALL", "CONCENTRATED", "CLUSTERED", "NONNEGATIVE", "BOUND", "CORNER", "SPREAD")
    off = {k: v[0] for stage in stages for k, v in getattr(script, f"{stage}_RULE").items()}
    x = np.zeros((4, len(GRID_FEATURES)))
    x[:, GRID_FEATURES.index("bound_share")] = 1.0
    x[:, GRID_FEATURES.index("workload_boundary")] = 1.5
    x[:, GRID_FEATURES.index("log_signal")] = 4.0
    keys = [("won", 4096, 10**4, 0.1, "w")] * 2 + [("lost", 4096, 10**4, 0.1, "w")] * 2
    others = [100.0] * 4  # ugrid, dawa_hilbert, kd_tree, auto_nonnegative
    per_row = np.array([[10.0, 1.0, *others, 10.0]] * 2 + [[1.0, 1.3, *others, 1.0]] * 2)  # ..., auto-whole
    grid = {"e11": (9.0, 0.5), "b11": (1.2,), "s11": (2.5,), "t11": (9.0,), "band10": ("agrid",)}
    args = argparse.Namespace(to_auto=1.2, stage_to_auto=stage_to_auto, hinge=10.0)
    costs = script._cell_cost(keys, per_row, args)
    chosen = script._fit_stages((grid,), {**off, "t11": 9.0}, x, per_row, candidates, args, costs)
    assert (chosen["e11"] == 0.5) == runs
    assert script.rule_choice(x, chosen, candidates).tolist() == ([1] * 4 if runs else [0] * 4)


def test_training_script_split_half_oracle_picks_on_half_the_trials_and_scores_the_other(monkeypatch):
    """benchmarks/train_auto_grid.py's split-half oracle: per DPBench cell, the column (candidates,
    the weighted branch, ``auto`` with the whole epsilon) of least mean MSE over the first half of
    the rows where the branch was measured, scored on the second half, and the other way round;
    other shapes and rows without the branch are left out."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("train_auto_grid")
    candidates = ("auto", "agrid")
    cell = ("GOWALLA", 4096, 10**4, 0.1, "prefix-rectangles")
    keys = [cell] * 5 + [("mix-0", *cell[1:])] * 4
    # columns: auto, agrid, auto with the whole epsilon; the weighted branch apart
    per_row = np.array(
        [[9.0, 2.0, 8.0], [7.0, 4.0, 8.0], [5.0, 50.0, 8.0], [3.0, 70.0, 8.0], [1.0, 1.0, 1.0]] + [[1.0, 1.0, 1.0]] * 4
    )
    weighted = np.array([6.0, 6.0, 1.0, 3.0, np.nan, 1.0, 1.0, 1.0, 1.0])
    got = script.split_half_oracle(keys, per_row, weighted, candidates)
    # first half (rows 0, 1): agrid's mean 3 is least; on rows 2, 3 it has 60, the weighted branch 2
    # second half (rows 2, 3): the weighted branch's 2 is least; on rows 0, 1 it has 6, agrid 3
    assert got["cells"] == 2
    assert got["regret_worst"] == pytest.approx(30.0)
    assert got["regret_geo_mean"] == pytest.approx(math.sqrt(30.0 * 2.0))
    assert got["to_auto_worst"] == pytest.approx(60.0 / 8.0)
    assert got["cells_above_2"] == 1
    assert got["worst_cell"]["choices"] == {"agrid": 2} and got["worst_cell"]["best"] == "auto_toward_nonnegative"
    assert script.split_half_oracle(keys[5:], per_row[5:], weighted[5:], candidates) is None


def test_training_script_averages_the_choice_over_the_features_noise(monkeypatch):
    """benchmarks/train_auto_grid.py --feature-draws: per cell, each trial's exact features (its
    sample, as the table drew it) with fresh noise draws, the selector choosing on each; on
    ``uniform`` (a corner share of 1/64) and ``corner`` (about 0.5 at 32 x 32, 10^5 records), a
    selector running ``agrid`` at a corner share of at least 0.3 and ``auto`` below picks by the
    features' noise: ``agrid`` in nearly every draw on ``corner`` and in none on ``uniform``, whose
    regret is then that of the weighted branch (the MSEs, hand-set, give the figures); a row
    without the weighted branch is left out; a constant ``auto`` runs with the whole epsilon."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("train_auto_grid")
    for x in (np.arange(16).reshape(4, 4), np.random.default_rng(4).integers(0, 9, (24, 17))):
        assert script.exact_features(x).tolist() == list(exact_features(x))  # the definitions above
    nodes = [
        {"feature": GRID_FEATURES.index("corner_share"), "threshold": 0.3, "left": 1, "right": 2},
        {"leaf": 0},
        {"leaf": 1},
    ]
    selector = GridSelector("tree", ("auto", "agrid"), {"nodes": nodes, "depth": 1})
    mse = {"auto": 5.0, "agrid": 1.0}
    rows = [
        {"shape": shape, "n": 1024, "scale": 10**5, "epsilon": 1.0, "workload": "prefix-rectangles", "trial": t}
        | {"mse": mse}
        for shape in ("uniform", "corner")
        for t in (0, 1, 2)
    ]
    weighted = np.array([2.0, 2.0, np.nan, 4.0, 4.0, 4.0])
    cells = script.feature_noise_cells(selector, rows, weighted, draws=50)
    whole = script.whole_auto(1024, 1.0, "prefix-rectangles")
    corner, uniform = cells  # sorted by shape
    assert uniform["choices"] == {"auto_toward_nonnegative": 100}  # two rows, 50 draws each
    assert uniform["regret"] == pytest.approx(2.0 / min(1.0, 2.0, 5.0, whole))
    assert corner["choices"].get("agrid", 0) >= 140 and sum(corner["choices"].values()) == 150
    share = corner["choices"]["agrid"] / 150
    assert corner["regret"] == pytest.approx((share * 1.0 + (1 - share) * 4.0) / min(1.0, whole))
    assert corner["to_auto"] == pytest.approx((share * 1.0 + (1 - share) * 4.0) / whole)
    # the noise enters the features: a noise of 10^9 on every feature makes every share near 1
    monkeypatch.setattr(script, "laplace_spec", lambda epsilon, sensitivity: FixedNoise(10**9))
    assert script.feature_noise_cells(selector, rows, weighted, draws=5)[1]["choices"] == {"agrid": 10}
    constant = GridSelector("tree", ("auto", "agrid"), {"nodes": [{"leaf": 0}], "depth": 0})
    for cell in script.feature_noise_cells(constant, rows, weighted, draws=5):
        assert list(cell["choices"]) == ["auto-whole"] and cell["to_auto"] == pytest.approx(1.0)


def fixed_training_shape(script, name: str, sides=(32, 64, 128)) -> np.ndarray:
    """The training shape ``name`` at 256 x 256, checked to be a distribution fixed by its seed
    and summed to each of ``sides`` from that grid (as the DPBench shapes are)."""
    fine = script.distribution(name, 256)
    assert fine.shape == (256, 256) and (fine >= 0).all() and math.isclose(fine.sum(), 1.0, rel_tol=1e-12)
    np.testing.assert_array_equal(fine, script.distribution(name, 256))  # the seed fixes it
    for side in sides:
        k = 256 // side
        coarse = fine.reshape(side, k, side, k).sum(axis=(1, 3))
        np.testing.assert_allclose(script.distribution(name, side), coarse, rtol=1e-12, atol=1e-300)
    return fine


def test_training_shapes_heaped_on_bounds_are_mixtures_moved_to_a_grid_edge(monkeypatch):
    """benchmarks/train_auto_grid.py's ``bound-<seed>`` shapes: fixed by their seed, summed to
    each side from 256 x 256; a share of 30-97% of the records moved to a bound of one attribute
    or both, keeping the other (so the grid's edges hold 30% or more of the mass, each heaped
    row or column the mixture's marginal up to its share); the family spans one attribute heaped
    and both."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("train_auto_grid")
    bounded = [name for name in script.SYNTHETIC if name.startswith("bound-")]
    assert len(bounded) == 8
    heaped_axes = set()
    for name in bounded:
        fine = fixed_training_shape(script, name, sides=(64,))
        assert auto_grid_module.bound_mass(np.round(fine * 1e9).astype(np.int64)) >= 0.3 * 1e9
        base = script.mixture(200 + int(name[6:]))
        base = base / base.sum()
        inner = fine[1:-1, 1:-1] / base[1:-1, 1:-1].clip(1e-300)
        kept = float(np.median(inner[base[1:-1, 1:-1] > 0]))  # the share of records no attribute moved
        assert 0.03 * 0.03 * 0.999 <= kept <= 0.7 * 1.001
        edges = [fine[0].sum(), fine[-1].sum(), fine[:, 0].sum(), fine[:, -1].sum()]
        heaped_axes.add(sum(e > 0.1 for e in edges))
    assert {1, 2} <= heaped_axes  # one attribute heaped in some shapes, both in others


def test_training_shapes_of_skewed_amounts_are_zero_inflated_corner_heaps(monkeypatch):
    """benchmarks/train_auto_grid.py's ``amounts-<seed>`` shapes: fixed by their seed, summed to
    each side from 256 x 256; two amounts from zero up, so the lower corner block holds mass in
    every shape (10% or more) and the mean cell of each amount is in the first quarter; the family
    spans shapes with most of their records on the bounds (zeros) and shapes with none of the
    corner block's mass off the bounds (zeros and top-coded values alone) to 5% or more of it
    there (a compact block of small non-zero values of both amounts)."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("train_auto_grid")
    names = [name for name in script.SYNTHETIC if name.startswith("amounts-")]
    assert len(names) == 8 and set(script.HEAPED_FAMILIES) == {"bound-", "amounts-"}
    inside, bounds = [], []
    for name in names:
        fine = fixed_training_shape(script, name, sides=(32,))
        assert auto_grid_module.corner_mass(np.round(fine * 1e9).astype(np.int64)) >= 0.1 * 1e9
        assert (fine * np.arange(256)[:, None]).sum() < 64 and (fine * np.arange(256)[None, :]).sum() < 64
        inside.append(fine[1:32, 1:32].sum())
        bounds.append(fine[0].sum() + fine[:, 0].sum() - fine[0, 0])
    assert min(inside) < 0.01 and max(inside) > 0.05
    assert max(bounds) > 0.9


def test_training_mixtures_are_fixed_distributions_summed_from_one_grid(monkeypatch):
    """benchmarks/train_auto_grid.py's random mixtures (``mix-<seed>``) are distributions fixed by
    their seed, drawn once at 256 x 256 and summed to each side (as the DPBench shapes are), and
    the family spans a few occupied cells (point masses alone) to every cell occupied (clusters
    or a floor)."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("train_auto_grid")
    training = [name for name in script.SYNTHETIC if name.startswith("mix-")]
    held = [name for name in script.UNSEEN if name.startswith("mix-")]
    assert len(training) == 24 and len(held) == 12 and not set(training) & set(held)
    occupied = []
    for name in training[:8]:
        fine = fixed_training_shape(script, name)
        occupied.append(int((fine > 0).sum()))
    assert min(occupied) <= 50 and max(occupied) == 256 * 256
    assert not np.array_equal(script.distribution("mix-0", 64), script.distribution("mix-1", 64))


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_the_weighted_auto_branch_moves_least_squares_toward_the_refit_of_the_same_measurements(neighbours):
    """With the default ``refit='weighted'`` the auto branch releases auto_toward_nonnegative at
    the epsilon left: the same private steps as least squares would spend, the cells the
    least-squares ones of ``refit='never'`` (the same draws) moved by the recorded weight toward
    their non-negative refit (the total kept; the public one under replace); in the median of
    seven releases above 0.8 on a sparse grid, under a half on a half-empty dense one (a single
    release's weight varies with its draws: 0-0.85 on the dense one); no exact error bars."""
    x = np.zeros((16, 16), dtype=np.int64)
    x[3, 4], x[10, 12], x[7, 7] = 400, 250, 90  # sparse: the refit wins
    dense = np.random.default_rng(2).poisson(20, (16, 16))
    dense[:, :6] = 0  # half empty, half dense: least squares wins
    weights: dict = {0: [], 1: []}
    for which, seed in itertools.product((0, 1), range(7)):
        grid = (x, dense)[which]
        weighted, never = (AutoDataGrid(neighbours=neighbours, refit=refit) for refit in ("weighted", "never"))
        weighted.selector = never.selector = forced("auto")
        r, exact = weighted.release(grid, 0.5, rng=seed), never.release(grid, 0.5, rng=seed)
        record = r.parameters
        assert r.mechanism == "auto-data" and record["chosen"] == "auto_toward_nonnegative"
        assert not r.exact_error_bars and np.isnan(r.rectangle([0, 0], [3, 3]).stderr)
        assert [s["step"] for s in record["private_steps"]] == [s["step"] for s in exact.selection["private_steps"]]
        assert r.epsilon == exact.epsilon
        weight = record["chosen_parameters"]["weight"]
        weights[which].append(weight)
        inner = never.candidate("auto", grid.shape, record["features"]["epsilon_left"])
        refitted = simplex_fit(exact.measurements, exact.counts.sum(), start=exact.counts.ravel(), tol=1e-5).x
        expected = exact.counts.ravel() + weight * (refitted - exact.counts.ravel())
        assert inner.name == record["chosen_parameters"]["design"]["mechanism"]
        np.testing.assert_allclose(r.counts.ravel(), expected, rtol=1e-9, atol=1e-6)
        assert r.counts.sum() == pytest.approx(exact.counts.sum() if neighbours == "add_remove" else grid.sum())
    assert np.median(weights[0]) > 0.8 and np.median(weights[1]) < 0.5  # (test_nonnegative_grid: 30)


def test_grids_above_the_weighted_refit_limit_keep_least_squares(monkeypatch):
    """Above WEIGHTED_REFIT_CELLS cells the auto branch releases least squares with its exact error
    bars even with ``refit='weighted'`` (the limit lowered to 255 cells for a 16 x 16 grid)."""
    import dprange.data_aware.auto_grid as auto_grid_module

    x = np.random.default_rng(2).poisson(5, (16, 16))
    mech = AutoDataGrid()
    mech.selector = forced("auto")
    assert mech.release(x, 0.5, rng=1).parameters["chosen"] == "auto_toward_nonnegative"
    monkeypatch.setattr(auto_grid_module, "WEIGHTED_REFIT_CELLS", 255)
    r = mech.release(x, 0.5, rng=1)
    never = AutoDataGrid(refit="never")
    never.selector = forced("auto")
    assert isinstance(r, GridRelease) and r.selection["chosen"] == never.release(x, 0.5, rng=1).selection["chosen"]
    np.testing.assert_array_equal(r.counts, never.release(x, 0.5, rng=1).counts)


def test_training_script_scores_auto_choices_with_the_weighted_branch(monkeypatch):
    """benchmarks/train_auto_grid.py's weighted_cell: a cell's rows where auto_toward_nonnegative
    was measured, ``auto`` choices (column 0) scored with its MSE, which joins the best
    candidate; other choices and ``auto`` with the whole epsilon (the last column) as they were;
    None where no row was measured."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("train_auto_grid")
    candidates = ("auto", "agrid")
    per_row = np.array([[10.0, 4.0, 9.0], [12.0, 6.0, 9.0], [11.0, 5.0, 9.0]])  # auto, agrid, auto-whole
    weighted = np.array([2.0, 3.0, np.nan])
    key = ("S", 1024, 1000, 0.1, "random-rectangles")
    cell = script.weighted_cell(key, [(0, 0), (1, 1), (2, 0)], per_row, weighted, candidates)
    # rows 0 and 1: auto_toward_nonnegative (2) and agrid (6); the best column mean is 2.5
    assert cell["regret"] == pytest.approx(4.0 / 2.5) and cell["to_auto"] == pytest.approx(4.0 / 9.0)
    assert cell["best"] == "auto_toward_nonnegative"
    assert cell["choices"] == {"agrid": 1, "auto_toward_nonnegative": 1}
    whole = script.weighted_cell(key, [(0, 2), (1, 2)], per_row, weighted, candidates)
    assert whole["choices"] == {"auto-whole": 2} and whole["to_auto"] == pytest.approx(1.0)
    assert script.weighted_cell(key, [(2, 0)], per_row, weighted, candidates) is None


def test_training_script_reads_tables_plain_or_compressed(monkeypatch, tmp_path):
    """benchmarks/train_auto_data.py's read_rows: a table's rows from a plain JSON-lines file and
    from the same file compressed by xz or gzip (the kept tables under benchmarks/tables/), read by
    the suffix; ``load`` joins comma-separated files in order."""
    import gzip
    import importlib
    import lzma

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("train_auto_data")
    rows = [{"shape": "S", "trial": t, "mse": {"auto": 1.0 / (t + 3)}} for t in range(3)]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (tmp_path / "t.jsonl").write_text(text)
    with lzma.open(tmp_path / "t.jsonl.xz", "wt") as handle:
        handle.write(text)
    with gzip.open(tmp_path / "t.jsonl.gz", "wt") as handle:
        handle.write(text)
    for name in ("t.jsonl", "t.jsonl.xz", "t.jsonl.gz"):
        assert script.read_rows(str(tmp_path / name)) == rows
    script.write_rows(str(tmp_path / "w.jsonl"), rows)
    assert (tmp_path / "w.jsonl").read_text() == text
    both = script.load(f"{tmp_path / 't.jsonl.xz'},{tmp_path / 't.jsonl'}")
    assert both == rows + rows


def test_training_script_trains_with_the_weighted_branch_as_auto(monkeypatch, tmp_path):
    """benchmarks/train_auto_grid.py --auto-branch weighted: each row's ``auto`` MSE is replaced
    by auto_toward_nonnegative's measurement of the same shape, setting, workload and trial; the
    other candidates' are kept and rows without a measurement are dropped (and logged)."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("train_auto_grid")
    key = {"shape": "S", "n": 1024, "scale": 1000, "epsilon": 0.1, "workload": "random-rectangles"}
    rows = [{**key, "trial": t, "mse": {"auto": 10.0 + t, "agrid": 4.0}} for t in range(3)]
    measured = tmp_path / "w.jsonl"
    other = tmp_path / "v.jsonl"
    measured.write_text(json.dumps({**key, "trial": 0, "mse": 2.5, "weight": 1.0}) + "\n")
    other.write_text(json.dumps({**key, "trial": 2, "mse": 7.0, "weight": 0.5}) + "\n")
    logged: list[str] = []
    kept = script.with_weighted_auto(rows, f"{measured},{other}", logged.append)
    assert [r["trial"] for r in kept] == [0, 2]
    assert [r["mse"] for r in kept] == [{"auto": 2.5, "agrid": 4.0}, {"auto": 7.0, "agrid": 4.0}]
    assert rows[0]["mse"]["auto"] == 10.0  # the caller's rows are not changed
    assert logged == ["--auto-branch weighted: 1 of 3 rows without its measurement dropped"]


def test_training_script_setting_oracle_picks_on_the_training_trials_of_the_same_cell(monkeypatch):
    """benchmarks/train_auto_grid.py's setting_oracle: per DPBench test cell the training table
    also has, the candidate (or ``auto`` with the whole epsilon, the last column) of least training
    mean, scored on the test rows: regret over the test's best mean and the ratio to its last
    column; cells of other shapes or absent from training are left out."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("train_auto_grid")
    candidates = ("auto", "agrid")
    a = ("ADULT-2D", 1024, 1000, 0.1, "random-rectangles")
    b = ("STROKE", 1024, 1000, 0.1, "random-rectangles")
    mix = ("mix-0", 1024, 1000, 0.1, "random-rectangles")
    train_keys = [a, a, b, mix]
    train = np.array([[10.0, 4.0, 9.0], [10.0, 8.0, 9.0], [3.0, 5.0, 9.0], [1.0, 9.0, 9.0]])
    test_keys = [a, a, b, mix, ("GOWALLA", 1024, 1000, 0.1, "random-rectangles")]
    test = np.array([[2.0, 12.0, 9.0], [4.0, 6.0, 9.0], [3.0, 1.0, 2.0], [1.0, 9.0, 9.0], [1.0, 1.0, 1.0]])
    oracle = script.setting_oracle((train_keys, train), (test_keys, test), candidates)
    # a: agrid (training mean 6 < 10, 9) scores 9 against auto's 3; b: auto scores 3 against 1
    assert oracle["cells"] == 2
    assert oracle["regret_worst"] == pytest.approx(3.0) and oracle["regret_mean"] == pytest.approx(3.0)
    assert oracle["to_auto_worst"] == pytest.approx(1.5)  # b: 3 over auto with the whole epsilon, 2
    assert script.setting_oracle((train_keys, train), ([mix], test[3:4]), candidates) is None


def test_to_auto_script_takes_the_uncertain_cells_where_the_branch_ran_and_measures_its_ratio(monkeypatch):
    """benchmarks/auto_grid_to_auto.py re-measures, with many trials, the held-out cells whose
    choices were all the weighted ``auto`` branch and whose ratio to ``auto`` is at least the
    threshold (most uncertain first); its ratio is the branch's mean squared error over its trials
    (fresh samples at seeds k = 200, 201, ..., released with noise seeds 5000 + k) over ``auto``'s exact
    error with the whole epsilon."""
    import importlib

    from dprange.data_aware.nonnegative_grid import AutoTowardNonnegative

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("auto_grid_to_auto")
    grid = importlib.import_module("train_auto_grid")
    assert script.parse_trials("32:300,256:20") == {32: 300, 256: 20}

    def cell(shape, to_auto, choices, n=1024):
        scored = {"to_auto": to_auto, "choices": choices}
        return {
            "shape": shape,
            "n": n,
            "scale": 1000,
            "epsilon": 1.0,
            "workload": "sized-rectangles",
            "weighted_auto": scored,
        }

    validation = {
        "shipped": "rules",
        "rules": {
            "cells": [
                cell("STROKE", 1.10, {grid.WEIGHTED: 10}),
                cell("GOWALLA", 1.30, {grid.WEIGHTED: 3}, n=65536),
                cell("ADULT-2D", 1.50, {grid.WEIGHTED: 9, "dawa_hilbert": 1}),  # not the branch alone
                cell("MDSALARY-OVERT", 1.02, {grid.WEIGHTED: 10}),  # under the threshold
                {"shape": "STROKE", "n": 4096, "scale": 1000, "epsilon": 1.0, "workload": "prefix-rectangles"},
            ],
            "unseen_cells": [
                cell("ring", 1.20, {grid.WEIGHTED: 3}, n=4096),
                cell("gradient", 1.01, {grid.WEIGHTED: 3}),
            ],
        },
        "tree1-margin0": {"cells": [cell("GOWALLA", 1.90, {grid.WEIGHTED: 10})]},  # not the shipped fit
    }
    assert script.uncertain_cells(validation, 1.05) == [
        ("GOWALLA", 256, 1000, 1.0, "sized-rectangles"),
        ("STROKE", 32, 1000, 1.0, "sized-rectangles"),
    ]
    assert script.uncertain_cells(validation, 1.05, "unseen_cells") == [("ring", 64, 1000, 1.0, "sized-rectangles")]
    del validation["rules"]["unseen_cells"]
    with pytest.raises(SystemExit, match="unseen_cells"):
        script.uncertain_cells(validation, 1.05, "unseen_cells")

    side, scale, epsilon, workload = 8, 10_000, 1.0, "random-rectangles"
    got = script.branch_to_auto("blobs-3", side, scale, epsilon, workload, 2)  # drawn, not read from shared data
    lows, highs = grid.evaluation_rectangles(side, workload)
    branch = AutoTowardNonnegative(workload=Rectangles((side, side), lows, highs))
    rest = AutoDataGrid().shares(epsilon)[-1]
    errors = []
    for k in (200, 201):
        counts = grid.sample(grid.distribution("blobs-3", side), scale, seed=k)
        errors.append(grid.rectangles_mse(branch.release(counts, rest, rng=5000 + k).counts, counts, lows, highs))
    whole = grid.whole_auto(side * side, epsilon, workload)
    assert got["mse"] == pytest.approx(np.mean(errors), rel=1e-12)
    assert got["mse_se"] == pytest.approx(np.std(errors, ddof=1) / np.sqrt(2), rel=1e-12)
    assert got["auto_whole"] == pytest.approx(whole, rel=1e-12)
    assert got["to_auto"] == pytest.approx(np.mean(errors) / whole, rel=1e-12)


def test_regret_script_scores_each_fold_s_choices_on_fresh_trials(monkeypatch):
    """benchmarks/auto_grid_regret.py re-measures the shipped fit's held-out cells whose weighted
    regret is at least the threshold (highest first) with the list fitted without the cell's
    shape (or, for a shape no fit trained on, the list fitted on every one): on fresh trials
    (sample seeds k = 2000, 2001, ..., release seeds 1000 + k) each trial's
    choice is read from its own noisy features, and the regret is the chosen releases' mean
    squared error over the best column's (the candidates, the weighted ``auto`` branch, ``auto``
    with the whole epsilon); ``auto`` chosen is scored as the weighted branch."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("auto_grid_regret")
    grid = importlib.import_module("train_auto_grid")

    def cell(shape, regret, n=1024):
        key = {"shape": shape, "n": n, "scale": 1000, "epsilon": 1.0, "workload": "sized-rectangles"}
        return key | {"weighted_auto": {"regret": regret}}

    validation = {
        "shipped": "rules",
        "candidates": ["auto", "agrid", "dawa_hilbert"],
        "rules": {"cells": [cell("STROKE", 1.6), cell("GOWALLA", 2.4, n=65536), cell("ADULT-2D", 1.2)]},
    }
    assert script.uncertain_cells(validation, 1.5) == [
        ("GOWALLA", 256, 1000, 1.0, "sized-rectangles"),
        ("STROKE", 32, 1000, 1.0, "sized-rectangles"),
    ]
    with pytest.raises(SystemExit, match="unseen_cells"):
        script.uncertain_cells(validation, 1.5, "unseen_cells")
    validation["rules"]["unseen_cells"] = [cell("ring", 2.1, n=4096), cell("gradient", 1.4)]
    assert script.uncertain_cells(validation, 1.5, "unseen_cells") == [("ring", 64, 1000, 1.0, "sized-rectangles")]
    with pytest.raises(SystemExit, match="no folds"):
        script.fold_selectors(validation)

    # a list whose first split no row passes (log_signal_per_cell above 99) leaves every row at
    # the second leaf: agrid, then auto
    candidates = ("auto", "agrid", "dawa_hilbert")
    for leaf, column in ((1, "agrid"), (0, grid.WEIGHTED)):
        nodes = [{"feature": 0, "threshold": 99.0, "left": 1, "right": 2}, {"leaf": leaf}, {"leaf": 2}]
        fold = Selector("tree", candidates, {"nodes": nodes})
        validation["rules"]["folds"] = {"STROKE": GridSelector(**vars(fold)).to_dict()}
        model = script.fold_selectors(validation)["STROKE"]
        side, scale, epsilon, workload = 8, 10_000, 1.0, "random-rectangles"
        job = (("blobs-3", side, scale, epsilon), (workload,), 3, model, candidates)
        (got,) = script.measure_group(job)
        lows, highs = grid.evaluation_rectangles(side, workload)
        rest = AutoDataGrid().shares(epsilon)[-1]
        p = grid.distribution("blobs-3", side)
        errors = {}
        for k in (2000, 2001, 2002):
            counts = grid.sample(p, scale, seed=k)
            for name in ("agrid", "dawa_hilbert"):
                released = AutoDataGrid().candidate(name, (side, side), rest).release(counts, rest, rng=1000 + k)
                errors.setdefault(name, []).append(grid.rectangles_mse(released.counts, counts, lows, highs))
        errors[grid.WEIGHTED] = [
            r["mse"] for r in grid.weighted_rows("blobs-3", side, scale, epsilon, range(2000, 2003), (workload,))
        ]
        means = {name: np.mean(e) for name, e in errors.items()}
        means["auto"] = grid.auto_mse((side, side), rest, lows, highs)
        means["auto-whole"] = grid.whole_auto(side * side, epsilon, workload)
        for name, mean in means.items():
            assert got["means"][name] == pytest.approx(mean, rel=1e-9), name
        assert got["choices"] == {column: 3}
        assert got["regret"] == pytest.approx(means[column] / min(means.values()), rel=1e-9)
        assert got["regret_low"] <= got["regret"] <= got["regret_high"]
        assert (got["trials"], got["first_trial"], got["side"]) == (3, 2000, 8)

    # the bootstrap interval: exact where every trial is alike, and inside the resamples' range
    rng = np.random.default_rng(0)
    same = script.regret_interval(np.full(4, 3.0), np.tile([2.0, 1.5], (4, 1)), rng)
    assert same == pytest.approx((2.0, 2.0))
    chosen, errors = np.array([1.0, 4.0, 2.0]), np.array([[1.0, 2.0], [1.0, 2.0], [1.0, 5.0]])
    low, high = script.regret_interval(chosen, errors, rng)
    assert 1.0 <= low < 7.0 / 3.0 < high <= 4.0


def test_training_script_refeature_draws_each_trial_s_features_again(monkeypatch):
    """benchmarks/train_auto_grid.py --refeature: each row's features are the current feature
    steps on its trial's sample with its trial's feature seed (as measure_cell draws them), the
    epsilon left in place and the bound and corner masses after it; the MSEs are kept; the rows of one trial
    (one per workload) share one draw; a row whose epsilon left differs from the current one
    is refused (its candidates ran with another budget)."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("train_auto_grid")
    from train_auto_data import feature_seed

    mech = AutoDataGrid()
    rest = mech.shares(1.0)[-1]
    rows = [
        {"shape": "uniform", "n": 1024, "scale": 1000, "epsilon": 1.0, "workload": w, "trial": t}
        | {"features": [0.0, 0.0, 0.0, 0.0, rest], "mse": {"auto": 1.0 + t}}
        for t in (0, 1)
        for w in ("random-rectangles", "prefix-rectangles")
    ]
    out = script.refeature(rows, lambda message: None)
    for row, new in zip(rows, out):
        counts = script.sample(script.distribution("uniform", 32), 1000, seed=row["trial"])
        *want, _ = mech.features(counts, 1.0, rng=feature_seed("uniform", 1024, 1000, 1.0, row["trial"]))
        assert new["features"] == [*want[:4], rest, *want[4:]] and new["mse"] == row["mse"]
    assert out[0]["features"] == out[1]["features"] != out[2]["features"]
    stale = [{**rows[0], "features": [0.0, 0.0, 0.0, 0.0, rest * 0.9]}]
    with pytest.raises(SystemExit, match="epsilon left moved"):
        script.refeature(stale, lambda message: None)


def test_training_script_measures_a_table_in_processes_as_in_one(monkeypatch, tmp_path):
    """benchmarks/train_auto_grid.py: the training table (measure, by measure_grid) and the
    weighted branch's rows (measure_weighted) measured in two processes are the one-process
    files byte for byte (every cell seeds its own samples and noise; rows in the cells' order),
    and --measure-only writes the table and no selector."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("train_auto_grid")
    monkeypatch.setattr(script, "EPSILONS", (1.0,))
    texts = {}
    for jobs in (1, 2):
        table, weighted = tmp_path / f"t{jobs}.jsonl", tmp_path / f"w{jobs}.jsonl"
        rows = script.measure(["blobs-3", "corner"], [8], [100, 10_000], 2, str(table), lambda _: None, 0, jobs)
        script.measure_weighted(["blobs-3"], [8], [100, 10_000], 2, str(weighted), lambda _: None, 100, jobs)
        texts[jobs] = table.read_text(), weighted.read_text()
        assert [json.loads(line) for line in texts[jobs][0].splitlines()] == rows
    assert texts[1] == texts[2]
    first = [json.loads(line) for line in texts[1][0].splitlines()]
    assert [(r["shape"], r["scale"], r["trial"]) for r in first[::3]] == [
        (shape, scale, trial) for shape in ("blobs-3", "corner") for scale in (100, 10_000) for trial in (0, 1)
    ]
    assert len(texts[1][1].splitlines()) == 2 * 2 * 3  # two scales, two trials, three workloads
    selector = tmp_path / "selector.json"
    code = script.main(
        ["--measure-only", "--measurements", str(tmp_path / "only.jsonl"), "--shapes", "blobs-3", "--sides", "8"]
        + ["--scales", "1e3", "--trials", "1", "--jobs", "1", "--selector", str(selector)]
    )
    assert code == 0 and (tmp_path / "only.jsonl").read_text() and not selector.exists()


def test_training_script_adds_a_candidate_to_a_table_as_a_measuring_run_has_it(monkeypatch, tmp_path):
    """benchmarks/train_auto_grid.py --add-candidates: a candidate measured alone on a table's
    cells and trials (grouped by their trials) gets the MSEs a measuring run of every candidate
    gives it (the same samples, features and release seeds), and the table's other figures and
    order are kept; a table whose trials are not consecutive is refused."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("train_auto_grid")
    whole = script.measure_cell("blobs-3", 32, 1000, 1.0, 2, {}, first_trial=4)
    whole += script.measure_cell("blobs-3", 32, 100000, 0.1, 1, {}, first_trial=7)
    assert all("agrid_fine" in r["mse"] for r in whole) and len(whole) == 9
    without = [{**r, "mse": {c: v for c, v in r["mse"].items() if c != "agrid_fine"}} for r in whole]
    path = str(tmp_path / "added.jsonl")
    added = script.add_candidates(without, ["agrid_fine"], path, lambda message: None)
    assert added == whole and script.read_rows(path) == whole
    assert not (tmp_path / "added.jsonl.fresh").exists()
    assert "agrid_fine" not in script.winners(without)  # a column some rows lack is no candidate
    gapped = [r for r in without if r["trial"] != 5]
    gapped += [{**r, "trial": 6} for r in without if r["trial"] == 5]
    with pytest.raises(SystemExit, match="not consecutive"):
        script.add_candidates(gapped, ["agrid_fine"], path, lambda message: None)


def test_training_script_scores_a_validations_folds_on_one_best_without_fitting(monkeypatch, tmp_path):
    """benchmarks/train_auto_grid.py --score-folds: each held-out shape's list from a validation
    file scored on a test table's rows of that shape, its choices read by name among the scored
    candidates (a list fitted before a candidate was added is scored on the best that includes
    it), a constant ``auto`` run with the whole epsilon, ``auto``'s choices by the weighted branch
    where measured; a list naming a candidate the table lacks is refused."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = importlib.import_module("train_auto_grid")
    side, epsilon, workload = 32, 1.0, "random-rectangles"
    key = {"n": side * side, "scale": 10**5, "epsilon": epsilon, "workload": workload}
    mse = {"auto": 8.0, "agrid": 4.0, "agrid_fine": 2.0}
    rows = [
        {"shape": shape, **key, "trial": t, "features": [1e5, 300.0, 5e4, 1e4, epsilon, 1e3, 2e3], "mse": mse}
        for shape in ("STROKE", "GOWALLA", "ring")
        for t in (100, 101)
    ]
    script.write_rows(str(tmp_path / "test.jsonl"), rows)
    weighted = tmp_path / "w.jsonl"
    weighted.write_text(json.dumps({"shape": "ring", **key, "trial": 100, "mse": 1.0, "weight": 1.0}) + "\n")
    # a split no row's features reach leaves every row at the first leaf
    split = [{"feature": 0, "threshold": 99.0, "left": 1, "right": 2}, {"leaf": 1}, {"leaf": 0}]
    folds = {
        "STROKE": GridSelector("tree", ("auto", "agrid"), {"nodes": split, "depth": 1}),
        "GOWALLA": GridSelector("tree", ("auto", "agrid"), {"nodes": [{"leaf": 0}], "depth": 0}),
        "ring": GridSelector("tree", ("auto", "agrid"), {"nodes": [{"leaf": 0}, {"leaf": 0}, {"leaf": 0}]}),
    }
    folds["ring"].model["nodes"] = [{"feature": 0, "threshold": 99.0, "left": 1, "right": 2}, {"leaf": 0}, {"leaf": 1}]
    validation = {
        "shipped": "rules",
        "candidates": ["auto", "agrid"],
        "rules": {"folds": {shape: fold.to_dict() for shape, fold in folds.items()}},
    }
    path = tmp_path / "validation.json"
    path.write_text(json.dumps(validation))
    whole = script.whole_auto(side * side, epsilon, workload)
    report = script.score_folds(str(path), str(tmp_path / "test.jsonl"), str(weighted), None, "auto,agrid_fine,agrid")
    assert report["candidates"] == ["auto", "agrid_fine", "agrid"]  # read by name, not by position
    dpbench = report["dpbench"]
    assert dpbench["cells"] == 2 and dpbench["cells_above_2"] == 1
    stroke_regret = 4.0 / min(2.0, whole)  # agrid over the best, agrid_fine (or auto with the whole epsilon)
    gowalla_regret = whole / min(2.0, whole)  # a constant auto buys no features
    assert dpbench["regret_worst"] == pytest.approx(max(stroke_regret, gowalla_regret))
    assert dpbench["regret_mean"] == pytest.approx((stroke_regret + gowalla_regret) / 2)
    # ring (a shape no fold held out but the list on every shape): auto, trial 100 by the weighted branch
    (ring,) = report["unseen"]["weighted_auto"]["worst_cell"]["choices"].items()
    assert ring == ("auto_toward_nonnegative", 1)
    assert report["unseen"]["weighted_auto"]["regret_worst"] == pytest.approx(1.0)
    assert report["unseen"]["regret_worst"] == pytest.approx(8.0 / min(2.0, whole))
    # the same lists scored on their own candidates: agrid is the best there
    own = script.score_folds(str(path), str(tmp_path / "test.jsonl"))
    assert own["dpbench"]["regret_worst"] == pytest.approx(max(4.0 / min(4.0, whole), whole / min(4.0, whole)))
    folds["STROKE"] = GridSelector("tree", ("auto", "dawa_hilbert"), {"nodes": split, "depth": 1})
    validation["rules"]["folds"]["STROKE"] = folds["STROKE"].to_dict()
    path.write_text(json.dumps(validation))
    with pytest.raises(SystemExit, match="dawa_hilbert"):
        script.score_folds(str(path), str(tmp_path / "test.jsonl"), "", None, "auto,agrid")
    with pytest.raises(SystemExit, match="no fit 'tree'"):
        script.score_folds(str(path), str(tmp_path / "test.jsonl"), "", "tree")

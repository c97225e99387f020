"""JointExp's output on its public grid (issue 30, item 1): no published float is computed from
a data value, and the whole output (interval and point) obeys the definition on tiny domains.

The code as it was published start + U (end - start) in floats, start and end data values, so
the set of possible outputs depended on the exact data (Mironov, "On Significance of the Least
Significant Bits for Differential Privacy", CCS 2012): with x = {0.2, 0.7} and x' = {0.2, 0.7 +
2^-30}, 16.6% of 3000 medians under x were impossible under x' (replace).  Now records are
placed at whole positions of a public grid and each output is the floor of a uniform point of
its interval, reported as its cell's value (docs/privacy.md, "Floats computed from data
values")."""

import itertools
import json
import math
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal, localcontext

import numpy as np
import pytest
from _helpers import chi_square_p, exact_decimal

import dprange
from dprange import ParameterError
from dprange.privacy.samplers import SecureRandom
from dprange.quantile_mechanisms import grid as quantile_grid
from dprange.quantile_mechanisms import joint_exp

RELATIONS = [("replace", {}), ("add_remove", {"n_max": 10})]


# ----------------------------------------------------------------------------- the grid


@pytest.mark.parametrize("relation, extra", RELATIONS)
def test_outputs_lie_on_the_declared_grid_and_depend_on_cells_only(relation, extra):
    """x = {0.2, 0.7} against x' = {0.2, 0.7 + 2^-45} (the same cell of 2^40): through
    dprange.quantiles with the same seeds the medians are equal bit for bit, and every one is
    a midpoint (c + 1/2) 2^-40 of the declared grid.  The code as it was failed both: its
    outputs interpolated between the data values themselves."""
    x, moved = [0.2, 0.7], [0.2, 0.7 + 2.0**-45]
    assert math.floor(0.7 * 2**40) == math.floor(moved[1] * 2**40)
    for seed in range(40):
        result = dprange.quantiles(
            x, [0.5], 1.0, bounds=(0, 1), method="joint_exp", neighbours=relation, rng=seed, **extra
        )
        other = dprange.quantiles(
            moved, [0.5], 1.0, bounds=(0, 1), method="joint_exp", neighbours=relation, rng=seed, **extra
        )
        value = float(result.values[0])
        assert (value * 2**41) % 2 == 1  # an odd multiple of 2^-41: a cell's midpoint (0 of 40 before)
        assert result.values.tobytes() == other.values.tobytes()
    grid = result.to_dict()["grid"]
    assert grid == {"lower": 0.0, "upper": 1.0, "cells": 2**40, "subcells": 1, "values": "cell midpoints"}


def test_integer_and_wide_integer_grids():
    """Integer bounds: one cell per integer cut into the largest power of two of sub-cells with at
    most 2^52 positions; wider ranges: 2^40 real cells of [a, b + 1), values floored; real
    bounds take ``cells``.  Values of positions are those cells' integers or midpoints."""
    ages = joint_exp.JointGrid.from_bounds((0, 100), integer=True)
    assert ages.cells.cells == 101 and ages.subcells == 2**45 and 101 * 2**45 <= 2**52 < 101 * 2**46
    assert ages.value([0, 2**45 - 1, 2**45, 101 * 2**45 - 1]).tolist() == [0.0, 0.0, 1.0, 100.0]
    wide = joint_exp.JointGrid.from_bounds((0, 2**60), integer=True)
    assert wide.floored and wide.positions == 2**40 and wide.to_dict()["upper"] == 2.0**60
    assert wide.value([0, 2**40 - 1]).tolist() == [2.0**19, 2.0**60 - 2.0**19]  # midpoints of 2^20-wide cells
    real = joint_exp.JointGrid.from_bounds((-5, 5), integer=False, cells=8)
    assert real.positions == 8 and real.value(np.arange(8)).tolist() == [-4.375 + 1.25 * i for i in range(8)]
    for bad in (0, 2**52 + 1, 2.5, True):
        with pytest.raises(ParameterError, match="cells"):
            joint_exp.JointGrid.from_bounds((0, 1), integer=False, cells=bad)


P_FLOOR = 1e-4


def test_records_are_placed_at_their_cell_or_a_uniform_sub_cell():
    """Real bounds: a record's position is its cell; integers: value k goes to a uniform sub-cell
    of [k S, (k + 1) S) (chi-square over the sub-cells, the grid shrunk to S = 4)."""
    real = joint_exp.JointGrid.from_bounds((0, 1), integer=False, cells=10)
    assert real.place([0.95, 0.0, 0.15, 1.0, 2.0, -1.0], None).tolist() == [0, 0, 1, 9, 9, 9]
    grid = joint_exp.JointGrid(quantile_grid.QuantileGrid(0.0, 2.0, 3, True), 4)
    placed = grid.place(np.full(4000, 1.0), np.random.default_rng(3))
    assert placed.min() >= 4 and placed.max() <= 7
    assert chi_square_p(np.bincount(placed - 4, minlength=4), np.full(4, 0.25)) > P_FLOOR


@pytest.mark.parametrize("source", ["numpy", "secure"])
def test_points_are_uniform_in_their_intervals(source):
    """_uniform_points draws one uniform integer on [start, end) per interval (chi-square)."""
    rng = np.random.default_rng(5) if source == "numpy" else SecureRandom()
    draws = np.array([joint_exp._uniform_points(np.array([3, 10]), np.array([8, 11]), rng) for _ in range(3000)])
    assert np.all(draws[:, 1] == 10)
    assert chi_square_p(np.bincount(draws[:, 0] - 3, minlength=5), np.full(5, 0.2)) > P_FLOOR


# ----------------------------------------------------------------------------- the whole output, exactly

LEVELS, EPSILON = [0.3, 0.6], 1.0


@dataclass(frozen=True)
class Case:
    """A tiny domain: real bounds [0, 1] cut into ``cells`` cells (one position each), or the
    integers 0..cells - 1 each cut into ``subcells`` positions (the grid shrunk so that every
    jitter can be enumerated); records are given as their cells."""

    cells: int
    integer: bool
    subcells: int
    n_max: int

    def values(self, cells):
        return [float(c) if self.integer else (c + 0.5) / self.cells for c in cells]

    def value(self, position: int) -> float:
        cell = position // self.subcells
        return float(cell) if self.integer else (cell + 0.5) / self.cells

    def quantiles(self, cells, relation, rng):
        extra = {"n_max": self.n_max} if relation == "add_remove" else {}
        bounds = (0, self.cells - 1) if self.integer else (0, 1)
        return dprange.quantiles(
            self.values(cells),
            LEVELS,
            EPSILON,
            bounds=bounds,
            method="joint_exp",
            neighbours=relation,
            rng=rng,
            integer=self.integer,
            cells=None if self.integer else self.cells,
            **extra,
        )


CASES = {"real": Case(4, False, 1, 3), "integer": Case(2, True, 2, 2)}


class ForcedSource(SecureRandom):
    """A random source whose integers are given in advance; it keeps the exact log probability
    of drawing them (each uniform on [low, high))."""

    def __init__(self, draws):
        self.draws, self.log_p = list(draws), Decimal(0)

    def integers(self, low, high=None, size=None):
        low, high = (0, low) if high is None else (low, high)
        value = np.asarray(self.draws.pop(0), dtype=np.int64)
        assert value.shape == (() if size is None else (size,)) and np.all((low <= value) & (value < high))
        self.log_p -= value.size * Decimal(high - low).ln()
        return int(value) if size is None else value


def forced_choices(chosen):
    """A stand-in for _exact_log_choice that makes the backward pass choose the intervals
    ``chosen`` and adds each choice's exact probability (from the float weights it is given)."""
    state = {"step": 0, "j": len(chosen) - 1, "log_p": Decimal(0)}

    def choose(log_weights, rng):
        j = state["j"]
        if state["step"] % 2 == 0:  # the interval of quantile j
            pick = chosen[j]
        else:  # how many quantiles before j share it
            pick = 0
            while j - pick - 1 >= 0 and chosen[j - pick - 1] == chosen[j]:
                pick += 1
            state["j"] = j - pick - 1
        state["step"] += 1
        live = [exact_decimal(v) for v in log_weights if np.isfinite(v)]
        top = max(live)
        state["log_p"] += exact_decimal(log_weights[pick]) - (sum((v - top).exp() for v in live).ln() + top)
        return pick

    return choose, state


def add_log(law, key, log_p):
    law[key] = log_p if key not in law else (law[key].exp() + log_p.exp()).ln()


def implementation_law(case, cells, relation, monkeypatch) -> dict:
    """{output values: log probability} of dprange.quantiles(method="joint_exp") on records in
    ``cells``: every path (each record's sub-cell, the interval choices, one point per output)
    forced in turn, each choice's probability taken exactly (60 digits) from the float weights
    the sampler is given, each draw uniform on the range the code asks for."""
    monkeypatch.setattr(joint_exp, "JOINT_MAX_POSITIONS", case.cells * case.subcells)  # the shrunk grid
    positions = case.cells * case.subcells
    jitters = list(itertools.product(range(case.subcells), repeat=len(cells))) if case.subcells > 1 else [None]
    law: dict = {}
    with localcontext() as ctx:
        ctx.prec = 60
        for jitter in jitters:
            placed = [c * case.subcells + (0 if jitter is None else o) for c, o in zip(cells, jitter or cells)]
            edges = [0, *sorted(placed), positions]
            for points in itertools.product(range(positions), repeat=len(LEVELS)):
                chosen = [int(np.searchsorted(edges, p, side="right")) - 1 for p in points]
                if chosen != sorted(chosen):
                    continue  # the sampler draws the points of sorted intervals
                choose, state = forced_choices(chosen)
                monkeypatch.setattr(joint_exp, "_exact_log_choice", choose)
                source = ForcedSource(([] if jitter is None else [jitter]) + list(points))
                result = case.quantiles(cells, relation, source)
                assert not source.draws and result.grid.positions == positions
                add_log(law, tuple(result.values.tolist()), state["log_p"] + source.log_p)
    return law


def definition_law(case, cells, scale) -> dict:
    """{output values: log probability} from the definition: records at whole positions (their
    cell times the sub-cells plus a uniform sub-cell), JointExp with density proportional to
    exp(-scale sum_i |n_i - g_i n|) on [0, positions), its outputs floored and reported as their
    cells' values.  Outputs in the positions c_1 <= ... <= c_m count n_i = #{records with
    c_{i-1} < position <= c_i} (a.s.) and have volume prod 1 / k! over groups of k equal
    positions.  60-digit Decimal."""
    n, positions = len(cells), case.cells * case.subcells
    law: dict = {}
    with localcontext() as ctx:
        ctx.prec = 60
        gaps = [Decimal(float(g)) for g in np.diff([0.0, *LEVELS, 1.0])]
        jitters = list(itertools.product(range(case.subcells), repeat=n))
        for jitter in jitters:
            placed = [c * case.subcells + o for c, o in zip(cells, jitter, strict=True)]
            weights = {}
            for combo in itertools.combinations_with_replacement(range(positions), len(LEVELS)):
                below = [sum(p <= c for p in placed) for c in combo]
                counts = np.diff([0, *below, n])
                score = sum(abs(Decimal(int(k)) - g * n) for k, g in zip(counts, gaps, strict=True))
                volume = math.prod(math.factorial(k) for k in Counter(combo).values())
                weights[combo] = -Decimal(scale) * score - Decimal(volume).ln()
            top = max(weights.values())
            log_total = sum((w - top).exp() for w in weights.values()).ln() + top + Decimal(len(jitters)).ln()
            for combo, w in weights.items():
                add_log(law, tuple(case.value(c) for c in combo), w - log_total)
    return law


def datasets(case, relation):
    """Multisets of cells: sizes 0..n_max under add/remove, 1..n_max under replace."""
    sizes = range(0 if relation == "add_remove" else 1, case.n_max + 1)
    return [combo for size in sizes for combo in itertools.combinations_with_replacement(range(case.cells), size)]


def neighbour_pairs(relation, data):
    """(x, x') pairs: one record added (add/remove) or one record's cell changed (replace)."""
    for x, y in itertools.combinations(data, 2):
        if relation == "add_remove" and len(y) == len(x) + 1 and not Counter(x) - Counter(y):
            yield x, y
        if relation == "replace" and len(x) == len(y) and sum((Counter(x) - Counter(y)).values()) == 1:
            yield x, y


def worst_loss(laws, relation) -> float:
    pairs = list(neighbour_pairs(relation, list(laws)))
    assert pairs
    return max(float(abs(laws[x][o] - laws[y][o])) for x, y in pairs for o in laws[x])


def exact_laws(case, relation, monkeypatch):
    """The replayed law and the definition's of every dataset, after checking that they have the
    same outputs (every vector of the grid, whatever the data) and differ by at most the public
    float bound that is charged; and the largest epsilon run at."""
    delta = joint_exp.joint_sensitivity(np.array(LEVELS), relation)
    width = case.cells if case.integer else 1.0  # JointExp's range: [a, b + 1) on integers
    laws, definitions, run_epsilons = {}, {}, set()
    for cells in datasets(case, relation):
        laws[cells] = implementation_law(case, cells, relation, monkeypatch)
        n_max = case.n_max if relation == "add_remove" else len(cells)  # replace: n is public
        run_epsilon = joint_exp.joint_charged_epsilon(EPSILON, np.array(LEVELS), relation, n_max, width)
        run_epsilons.add(run_epsilon)
        definitions[cells] = definition_law(case, cells, joint_exp.joint_scale(run_epsilon, delta))
        assert set(laws[cells]) == set(definitions[cells])
        gap = max(abs(laws[cells][o] - definitions[cells][o]) for o in laws[cells])
        assert gap <= Decimal((EPSILON - run_epsilon) / 2)
    return laws, definitions, max(run_epsilons)


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_whole_output_is_epsilon_dp_exactly_and_fails_at_half_the_noise(relation, monkeypatch):
    """Real bounds [0, 1] in 4 cells, levels 0.3, 0.6, up to 3 records: every output vector's
    probability under dprange.quantiles (all paths replayed exactly) is within the charged float
    bound of the definition's, and its worst loss over every pair of neighbours is at most
    epsilon (the definition's at most the epsilon run at).  With the scale doubled (half the
    noise) the worst loss exceeds epsilon: the check can fail."""
    case = CASES["real"]
    laws, definitions, run_epsilon = exact_laws(case, relation, monkeypatch)
    assert worst_loss(definitions, relation) <= run_epsilon < EPSILON
    assert 0.6 * EPSILON < worst_loss(laws, relation) <= EPSILON

    real_scale = joint_exp.joint_scale
    monkeypatch.setattr(joint_exp, "joint_scale", lambda eps, sens: 2 * real_scale(eps, sens))
    halved = {cells: implementation_law(case, cells, relation, monkeypatch) for cells in laws}
    assert worst_loss(halved, relation) > EPSILON


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_integer_output_with_its_sub_cells_follows_the_definition(relation, monkeypatch):
    """Integers 0..1, each cut into 2 sub-cells (the grid shrunk so that every record's sub-cell
    can be enumerated), up to 2 records: the law of dprange.quantiles's output (sub-cells,
    intervals and points replayed exactly) is the definition's mixture over sub-cells within
    the charged bound, and its worst loss is at most epsilon (far below it here: the uniform
    sub-cells blur a domain this small, so halving the noise is checked on the real case)."""
    laws, definitions, run_epsilon = exact_laws(CASES["integer"], relation, monkeypatch)
    assert worst_loss(definitions, relation) <= run_epsilon
    assert worst_loss(laws, relation) <= EPSILON


def test_cli_declares_the_grid(tmp_path, capsys):
    """dprange quantiles --method joint_exp names its output grid in the text and the JSON."""
    from dprange.cli import main

    path = tmp_path / "data.csv"
    path.write_text("x\n" + "\n".join(str(v) for v in np.random.default_rng(10).integers(0, 100, 200)) + "\n")
    base = ["quantiles", str(path), "-c", "x", "--lo", "0", "--hi", "99", "-e", "1", "--method", "joint_exp"]
    outputs = {}
    for extra in ([], ["--json"], ["--integers", "--json"]):
        with pytest.raises(SystemExit) as done:
            main([*base, "--q", "0.25,0.75", "--n-max", "1000", "--seed", "1", *extra])
        assert done.value.code == 0
        outputs[tuple(extra)] = capsys.readouterr().out
    assert "output grid: 1099511627776 cells of [0, 99], cell midpoints" in outputs[()].splitlines()
    real = json.loads(outputs[("--json",)])
    grid = joint_exp.JointGrid.from_bounds((0, 99), integer=False)
    assert real["grid"] == grid.to_dict() and real["grid"]["cells"] == 2**40
    assert all(grid.value(round(v / grid.cells.width - 0.5)) == v for v in real["values"])
    integer = json.loads(outputs[("--integers", "--json")])
    assert integer["grid"] == {"lower": 0.0, "upper": 99.0, "cells": 100, "subcells": 2**45, "values": "integers"}

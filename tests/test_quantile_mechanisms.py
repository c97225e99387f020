"""Quantile mechanisms on raw values against their definitions, with exact probabilities.

For tiny inputs every test builds the mechanism's output distribution from the definition in
this file (brute force over the grid, exact rationals for the scores), compares it with the
module's tables and with the sampler's empirical frequencies (chi-square, fixed seeds), and
checks that the distributions of every pair of neighbouring datasets differ by a factor of at
most e^epsilon.  Chi-square tests fail below p = 1e-4."""

import itertools
import json
import math
import zlib
from fractions import Fraction

import numpy as np
import pytest
from _helpers import (
    JOINT_LAW_CASES,
    _captured_scale,
    _joint_definition_decimal,
    chi_square_p,
    joint_bound_by_hand,
    joint_definition,
    joint_sampler_law,
)
from scipy import stats

import dprange
from dprange import DataError, ParameterError
from dprange.quantile_mechanisms import exponential, joint_exp
from dprange.quantile_mechanisms import grid as quantile_grid
from dprange.quantile_mechanisms import methods as qm

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


# ----------------------------------------------------------------------------- JointExp


@pytest.mark.parametrize(
    "lengths, levels, scale",
    [
        ([0.5, 0.1, 0.0, 0.3, 0.1], [0.3, 0.6], 0.4),  # n = 4 records, one tie
        ([0.2, 0.5, 0.3], [0.2, 0.5, 0.8], 0.1),  # n = 2, m = 3: runs of up to three outputs in one interval
    ],
)
def test_joint_exp_interval_distribution_equals_definition(lengths, levels, scale):
    lengths, levels = np.array(lengths), np.array(levels)
    definition = joint_definition(lengths, levels, scale)
    rng = np.random.default_rng(7)
    keys = sorted(definition)
    counts = dict.fromkeys(keys, 0)
    for _ in range(2500):
        counts[tuple(int(v) for v in joint_exp.joint_exponential_intervals(lengths, levels, scale, rng))] += 1
    live = [k for k in keys if definition[k] > 0]
    assert all(counts[k] == 0 for k in keys if definition[k] == 0)
    assert chi_square_p([counts[k] for k in live], [definition[k] for k in live]) > P_FLOOR


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_joint_exp_density_ratio_at_most_e_epsilon(relation):
    """The JointExp density (definition) at many sorted output vectors, for every neighbour."""
    data, a, b, levels, epsilon = [0.1, 0.35, 0.4, 0.8], 0.0, 1.0, np.array([0.25, 0.7]), 1.0
    scale = epsilon / (2 * joint_exp.joint_sensitivity(levels, relation))
    grid = np.linspace(0.02, 0.98, 25)
    outputs = [o for o in itertools.combinations_with_replacement(grid, 2)]

    def log_density(records):
        n = len(records)
        targets = np.diff(np.concatenate([[0.0], levels, [1.0]])) * n
        edges = np.concatenate([[a], np.asarray(outputs[0]) * 0, [b]])  # placeholder shape
        values = []
        for o in outputs:
            edges = np.concatenate([[a], o, [b + 1e-9]])
            counts = np.histogram(records, bins=edges)[0]
            values.append(-scale * float(np.abs(counts - targets).sum()))
        # normaliser: the exact integral over ordered vectors, from the interval enumeration
        lengths = np.diff(np.concatenate([[a], np.sort(records), [b]]))
        total = 0.0
        for combo in itertools.combinations_with_replacement(range(n + 1), len(levels)):
            counts = np.diff(np.concatenate([[0], combo, [n]]))
            weight = math.exp(-scale * float(np.abs(counts - targets).sum()))
            for i, k in zip(*np.unique(combo, return_counts=True), strict=True):
                weight *= lengths[i] ** k / math.factorial(k)
            total += weight
        return np.array(values) - math.log(total)

    base = log_density(data)
    grid_cells = [round(v * 20) / 20 for v in np.linspace(0.05, 0.95, 10)]
    others = [sorted(data + [c]) for c in grid_cells] + [data[:i] + data[i + 1 :] for i in range(4)]
    if relation == "replace":
        others = [sorted(data[:i] + [c] + data[i + 1 :]) for i in range(4) for c in grid_cells]
    worst = max(float(np.max(np.abs(base - log_density(o)))) for o in others)
    assert worst <= epsilon + 1e-9


def test_joint_exp_sensitivity_bounds_the_score_change():
    levels = np.array([0.2, 0.5, 0.9])
    data = [0.1, 0.3, 0.3, 0.6, 0.95]
    outputs = list(itertools.combinations_with_replacement([0.0, 0.2, 0.31, 0.5, 0.7, 1.0], 3))

    def scores(records):
        targets = np.diff(np.concatenate([[0.0], levels, [1.0]])) * len(records)
        out = []
        for o in outputs:
            counts = np.histogram(records, bins=np.concatenate([[0.0], o, [1.0 + 1e-9]]))[0]
            out.append(float(np.abs(counts - targets).sum()))
        return np.array(out)

    base = scores(data)
    for relation in ("add_remove", "replace"):
        if relation == "add_remove":
            others = [data + [c] for c in (0.05, 0.25, 0.4, 0.8, 0.99)] + [data[:i] + data[i + 1 :] for i in range(5)]
        else:
            others = [data[:i] + [c] + data[i + 1 :] for i in range(5) for c in (0.05, 0.25, 0.4, 0.8, 0.99)]
        change = max(float(np.max(np.abs(base - scores(o)))) for o in others)
        assert change <= joint_exp.joint_sensitivity(levels, relation) + 1e-12


def test_joint_exp_outputs_are_sorted_and_in_bounds_integer_data_floored():
    rng = np.random.default_rng(8)
    values = rng.integers(17, 91, 2000)
    out = joint_exp.joint_exponential_quantiles(
        values, [0.25, 0.5, 0.75], 1.0, (0, 100), integer=True, rng=rng, n_max=2000
    )
    assert np.all(np.diff(out) >= 0) and np.all(out == np.floor(out)) and out.min() >= 0 and out.max() <= 100
    assert np.all(np.abs(out - np.quantile(values, [0.25, 0.5, 0.75])) <= 2)


def test_bad_parameters_raise_parameter_error():
    grid = quantile_grid.QuantileGrid.from_bounds((0, 1), integer=False, cells=16)
    with pytest.raises(ParameterError, match="strictly increasing"):
        exponential.approximate_quantiles([0.5], [0.5, 0.2], 1.0, grid, rng=0)
    with pytest.raises(ParameterError, match="between 0 and 1"):
        exponential.approximate_quantiles([0.5], [0.0, 0.5], 1.0, grid, rng=0)
    with pytest.raises(ParameterError, match="epsilon"):
        joint_exp.joint_exponential_quantiles([0.5], [0.5], -1.0, (0, 1), rng=0)
    with pytest.raises(ParameterError, match="neighbours"):
        exponential.exponential_quantile([0.5], 0.5, 1.0, grid, neighbours="swap", rng=0)
    with pytest.raises(ParameterError, match="a < b"):
        quantile_grid.QuantileGrid.from_bounds((1, 0), integer=False)


# ----------------------------------------------------------------------------- the entry point


def test_quantiles_with_private_bounds_records_the_spend():
    rng = np.random.default_rng(9)
    values = rng.normal(40, 5, 4000)
    result = dprange.quantiles(
        values, [0.25, 0.5, 0.75], 1.0, bounds="private", bounds_share=0.2, method="approximate", rng=rng
    )
    assert result.bounds_source == "private" and result.bounds == (0.0, 64.0)
    assert result.bounds_epsilon == pytest.approx(0.2) and result.epsilon == 1.0
    assert np.all(np.abs(result.values - np.quantile(values, [0.25, 0.5, 0.75])) < 0.5)
    assert not result.has_intervals
    with pytest.raises(ParameterError, match="no honest confidence intervals"):
        result.confidence_interval()
    assert result.to_dict()["bounds"] == {
        "lower": 0.0,
        "upper": 64.0,
        "source": "private",
        "epsilon": pytest.approx(0.2),
    }


def test_quantiles_spend_never_exceeds_epsilon():
    """The remaining budget is rounded down until bounds + rest <= epsilon exactly."""
    rng = np.random.default_rng(10)
    result = dprange.quantiles(rng.normal(0, 1, 3000) + 10, [0.5], 0.3, bounds="private", bounds_share=0.1, rng=rng)
    assert result.bounds_epsilon == 0.3 * 0.1


def test_quantiles_histogram_route_has_intervals_that_cover():
    rng = np.random.default_rng(11)
    values = rng.integers(0, 50, 2000)
    truth = np.sort(values)[np.ceil(np.array([0.1, 0.5, 0.9]) * 2000).astype(int) - 1]
    result = dprange.quantiles(values, [0.1, 0.5, 0.9], 1.0, bounds=(0, 63), integer=True, method="histogram", rng=rng)
    lower, upper = result.confidence_interval(0.05, simultaneous=True)
    assert np.all((lower <= truth) & (truth <= upper))
    assert result.to_dict()["intervals"]["alpha"] == 0.05


def test_auto_uses_public_facts_only():
    """Same public facts, different data: the same method."""
    a = dprange.quantiles(np.zeros(100), [0.5], 1.0, bounds=(0, 10), rng=0)
    b = dprange.quantiles(np.full(5000, 9.0), [0.5], 1.0, bounds=(0, 10), rng=0)
    assert a.method == b.method and a.reason == b.reason != ""


def test_quantiles_refuses_missing_bounds_and_bad_values():
    with pytest.raises(ParameterError, match="bounds"):
        dprange.quantiles([1.0, 2.0], [0.5], 1.0)
    with pytest.raises(DataError, match="NaN"):
        dprange.quantiles([1.0, float("nan")], [0.5], 1.0, bounds=(0, 3))
    with pytest.raises(ParameterError, match="method"):
        dprange.quantiles([1.0], [0.5], 1.0, bounds=(0, 3), method="median")
    with pytest.raises(ParameterError, match="bounds_share"):
        dprange.quantiles([1.0], [0.5], 1.0, bounds="private", bounds_share=1.5)


def test_cli_quantiles(tmp_path, capsys):
    from dprange.cli import main

    path = tmp_path / "data.csv"
    rng = np.random.default_rng(12)
    path.write_text("age\n" + "\n".join(str(v) for v in rng.integers(20, 60, 3000)) + "\n")
    with pytest.raises(SystemExit) as done:
        main(
            [
                "quantiles",
                str(path),
                "-c",
                "age",
                "--lo",
                "0",
                "--hi",
                "100",
                "--integers",
                "-e",
                "1",
                "--q",
                "0.25,0.5",
                "--method",
                "histogram",
                "--seed",
                "1",
            ]
        )
    out = capsys.readouterr().out
    assert done.value.code == 0 and "q=0.5:" in out and "[" in out and "bin edges" in out
    with pytest.raises(SystemExit) as done:
        main(["quantiles", str(path), "-c", "age", "-e", "1"])
    assert done.value.code == 2 and "--private-bounds" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        main(
            ["quantiles", str(path), "-c", "age", "--private-bounds", "-e", "1", "--integers", "--json", "--seed", "3"]
        )
    result = json.loads(capsys.readouterr().out)
    assert done.value.code == 0 and result["bounds"]["source"] == "private" and result["bounds"]["upper"] == 64.0


def test_wide_integer_bounds_use_real_cells_and_integer_outputs():
    rng = np.random.default_rng(13)
    values = rng.integers(0, 1000, 3000)
    result = dprange.quantiles(values, [0.5], 2.0, bounds=(0, 2**40), integer=True, method="approximate", rng=rng)
    assert result.values[0] == np.floor(result.values[0]) and abs(result.values[0] - np.median(values)) < 2**40 / 2**19


# ----------------------------------------------------------------------------- JointExp's floats


def test_exact_log_choice_follows_the_float_weights():
    """Probabilities exp(w_i) / sum exp(w): -inf never, far tails (exp underflows) never seen."""
    weights = np.array([0.5, -np.inf, 0.0, -1.25, -2000.0, 0.5 - math.log(3.0)])
    finite = np.isfinite(weights)
    probs = np.zeros(weights.size)
    probs[finite] = np.exp(weights[finite] - np.logaddexp.reduce(weights[finite]))
    rng = np.random.default_rng(31)
    counts = np.bincount([joint_exp._exact_log_choice(weights, rng) for _ in range(4000)], minlength=weights.size)
    assert counts[1] == 0 and counts[4] == 0
    live = probs > 1e-12
    assert chi_square_p(counts[live], probs[live]) > P_FLOOR


@pytest.mark.parametrize("lengths, levels, scale", JOINT_LAW_CASES)
def test_joint_exp_law_is_within_its_float_error_bound(lengths, levels, scale, monkeypatch):
    """Every interval vector's probability under the sampler (its float weights, chosen
    exactly) is within joint_log_error_bound nats of the definition (60-digit Decimal)."""
    definition = _joint_definition_decimal(lengths, np.asarray(levels), scale)
    bound = joint_exp.joint_log_error_bound(np.asarray(lengths), len(levels), scale)
    worst = max(
        abs(float(joint_sampler_law(lengths, levels, scale, combo, monkeypatch) - log_p))
        for combo, log_p in definition.items()
    )
    assert worst <= bound
    assert bound < 1e-9  # tiny inputs: the bound itself is small


def test_joint_log_error_bound_formula():
    """The staged bound, and at most the whole-run one 4 m E (the bound as it was)."""
    lengths = np.array([0.5, 2.0, 0.25])  # n = 2, max |log L| = log 4
    m, scale = 3, 0.5
    magnitude = 3 * 0.5 * 3 + 3 * (math.log(4.0) + 1) + math.log(24.0) + 3 * math.log(4.0) + 1
    per_weight = 3 * (2 + 3 + 12) * 2.0**-52 * (magnitude + 2) + 3 * math.exp(-50.0)
    bound = joint_exp.joint_log_error_bound(lengths, m, scale)
    assert bound == pytest.approx(joint_bound_by_hand(2, 3, 0.5, math.log(4.0)), rel=1e-12)
    assert bound < 4 * 3 * per_weight


def test_auto_rule_by_levels_only():
    """Without a record count (n=None): m = 1: the exponential mechanism; 2..9: JointExp;
    >= 10: the histogram route, whatever the bounds (integer, small or wide, or real) and
    epsilon (with n: tests/test_quantile_bins.py)."""
    for integer, width in ((True, 100), (True, 1_500_000), (False, 10.0)):
        for epsilon in (0.1, 1.0):
            chosen = [qm.auto_method(m, epsilon, integer=integer, width=width)[0] for m in (1, 2, 9, 10, 99)]
            assert chosen == ["approximate", "joint_exp", "joint_exp", "histogram", "histogram"]


def test_histogram_route_bins_follow_n_times_epsilon():
    """The default bins on real bounds are histogram_bins(n x epsilon) with n public (replace)
    or declared (n_max); bins= overrides them."""
    from dprange.quantile_mechanisms.bins import histogram_bins

    values = np.random.default_rng(4).normal(0, 1, 400)
    for epsilon, n_max, bins in ((0.1, 10**5, 256), (1.0, 10**5, 4096), (1.0, 400, 16)):
        result = dprange.quantiles(values, [0.5], epsilon, bounds=(-5, 5), method="histogram", rng=5, n_max=n_max)
        assert result.release.domain.size == bins == histogram_bins(n_max * epsilon) == result.bins
    result = dprange.quantiles(values, [0.5], 0.1, bounds=(-5, 5), method="histogram", bins=32, rng=5)
    assert result.release.domain.size == 32


QUANTILES_COVERAGE_CASES = {
    # every record on one bin edge of the default domain at epsilon 0.1 (8 bins at n = 300; -1.25 is
    # an edge of (-5, 5) cut into any 2^k >= 8 bins; the 256 bins of the epsilon-only rule had -1.09)
    "point-mass-on-edge": (lambda rng: np.full(300, -1.25), (-5.0, 5.0), False),
    # integers on a real domain: atoms at every integer
    "integers-on-real-bounds": (lambda rng: rng.integers(-3, 4, 400).astype(float), (-5.0, 5.0), False),
    # integer data on integer bounds: one bin per value
    "integer-bounds": (lambda rng: np.clip(np.round(rng.normal(40, 12, 400)), 0, 100), (0.0, 100.0), True),
}


@pytest.mark.parametrize("case", sorted(QUANTILES_COVERAGE_CASES))
def test_quantiles_histogram_route_covers_on_awkward_data(case):
    """dprange.quantiles' intervals (the default bins at epsilon 0.1) hold the true quantile in
    at least 95% of 100 releases per level, and all three levels at once in 95% (simultaneous),
    up to Monte-Carlo error (fails when P(Binomial(100, 0.95) <= hits) < 0.001)."""
    make, bounds, integer = QUANTILES_COVERAGE_CASES[case]
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    values = make(rng)
    levels = np.array([0.1, 0.5, 0.9])
    ordered = np.sort(values)
    truth = ordered[np.ceil(levels * ordered.size - 1e-9).astype(int) - 1]
    trials, pointwise, together = 100, np.zeros(3), 0
    for _ in range(trials):
        result = dprange.quantiles(values, levels, 0.1, bounds=bounds, integer=integer, method="histogram", rng=rng)
        lower, upper = result.confidence_interval(0.05)
        pointwise += (lower <= truth) & (truth <= upper)
        lower, upper = result.confidence_interval(0.05, simultaneous=True)
        together += bool(np.all((lower <= truth) & (truth <= upper)))
    floor = stats.binom.ppf(1e-3, trials, 0.95)
    assert np.all(pointwise >= floor) and together >= floor, (pointwise, together)


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_joint_exp_charges_twice_its_public_float_bound(relation, monkeypatch):
    """The run's scale is that of epsilon - 2 x public bound at n_max, and the privacy loss of
    the run, epsilon' + 2 x joint_log_error_bound(its lengths), stays within epsilon (the code
    as it was ran at epsilon itself: the loss exceeded epsilon by twice the bound)."""
    rng = np.random.default_rng(40)
    values, levels, epsilon = rng.normal(0, 1, 300), np.array([0.25, 0.5, 0.75]), 0.5
    seen = _captured_scale(monkeypatch)
    n_max = 1000 if relation == "add_remove" else None
    joint_exp.joint_exponential_quantiles(values, levels, epsilon, (-4, 4), neighbours=relation, rng=rng, n_max=n_max)
    delta = joint_exp.joint_sensitivity(levels, relation)
    full_scale = epsilon / (2 * delta)
    declared = 1000 if relation == "add_remove" else 300  # replace: n is public
    charged = epsilon - 2 * joint_bound_by_hand(declared, 3, full_scale, max(744.5, math.log(8.0)))
    assert seen["scale"] == pytest.approx(charged / (2 * delta), rel=1e-12)
    assert seen["scale"] < full_scale
    loss = 2 * delta * seen["scale"] + 2 * joint_exp.joint_log_error_bound(seen["lengths"], 3, seen["scale"])
    assert loss <= epsilon


def test_joint_public_bound_dominates_every_dataset_bound():
    """Lengths down to the smallest subnormal and up to the width: the public bound at n_max is
    at least the data's bound for every n <= n_max."""
    rng = np.random.default_rng(41)
    public = joint_exp.joint_public_error_bound(50, 4, 0.3, 10.0)
    for n in (0, 1, 17, 50):
        for lengths in (
            rng.uniform(0, 10.0 / (n + 1), n + 1),
            np.concatenate([[5e-324, 10.0], np.zeros(n - 1)]) if n else np.array([10.0]),
        ):
            assert joint_exp.joint_log_error_bound(lengths, 4, 0.3) <= public
    assert joint_exp.joint_public_error_bound(51, 4, 0.3, 10.0) > public


def test_joint_exp_needs_a_record_bound_under_add_remove():
    values = np.linspace(0, 1, 40)
    with pytest.raises(ParameterError, match="n_max"):
        joint_exp.joint_exponential_quantiles(values, [0.5, 0.7], 1.0, (0, 1), rng=0)
    with pytest.raises(DataError, match="n_max = 39"):
        joint_exp.joint_exponential_quantiles(values, [0.5, 0.7], 1.0, (0, 1), rng=0, n_max=39)
    with pytest.raises(ParameterError, match="n_max must be"):
        joint_exp.joint_exponential_quantiles(values, [0.5, 0.7], 1.0, (0, 1), rng=0, n_max=0)
    with pytest.raises(ParameterError, match="would cost"):  # the charge would eat half of epsilon
        joint_exp.joint_exponential_quantiles(
            values, list(np.linspace(0.01, 0.99, 99)), 1e-6, (0, 1), rng=0, n_max=10**9
        )
    out = joint_exp.joint_exponential_quantiles(values, [0.5, 0.7], 1.0, (0, 1), rng=0, neighbours="replace")
    assert out.shape == (2,) and out[0] <= out[1]


def test_auto_uses_joint_exp_only_with_a_record_bound():
    values = np.random.default_rng(42).normal(0, 1, 200)
    plain = dprange.quantiles(values, [0.25, 0.75], 1.0, bounds=(-4, 4), rng=1)
    assert plain.method == "approximate" and "n_max" in plain.reason
    bounded = dprange.quantiles(values, [0.25, 0.75], 1.0, bounds=(-4, 4), rng=1, n_max=500)
    assert bounded.method == "joint_exp"
    replace = dprange.quantiles(values, [0.25, 0.75], 1.0, bounds=(-4, 4), rng=1, neighbours="replace")
    assert replace.method == "joint_exp"

"""JointExp (dprange.quantile_mechanisms.joint_exp; Gillenwater, Joseph, Kulesza, ICML 2021) against
its definition with exact probabilities: the interval law and density ratio, the score's exact
sensitivity for the float gaps the sampler uses, the output on its public grid (no published
float computed from a data value; issue 30, item 1), and the working precision's charge
(double and x87 extended, against a 60-digit definition)."""

import itertools
import math
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from _helpers import chi_square_p

import dprange
from dprange import DataError, ParameterError
from dprange.privacy import exact_choice as exact_choice_module
from dprange.privacy.samplers import SecureRandom
from dprange.quantile_mechanisms import grid as quantile_grid
from dprange.quantile_mechanisms import joint_exp

P_FLOOR = 1e-4


def joint_definition(lengths, levels, scale):
    """{interval index vector: prob} of JointExp's discrete part, by enumeration."""
    n, m = len(lengths) - 1, len(levels)
    targets = np.diff(np.concatenate([[0.0], levels, [1.0]])) * n
    out = {}
    for combo in itertools.combinations_with_replacement(range(n + 1), m):
        counts = np.diff(np.concatenate([[0], combo, [n]]))
        weight = math.exp(-scale * float(np.abs(counts - targets).sum()))
        for i, k in zip(*np.unique(combo, return_counts=True), strict=True):
            weight *= lengths[i] ** k / math.factorial(k)
        out[combo] = weight
    total = math.fsum(out.values())
    return {key: value / total for key, value in out.items()}


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


def _joint_definition_decimal(lengths, levels, scale):
    """{interval vector: log probability} of JointExp's discrete part in 60-digit Decimal, with
    the targets the module computes (float gaps times n, taken exactly)."""
    from decimal import localcontext

    n, m = len(lengths) - 1, len(levels)
    gaps = np.diff(np.concatenate([[0.0], levels, [1.0]]))
    with localcontext() as ctx:
        ctx.prec = 60
        targets = [Decimal(float(g)) * n for g in gaps]
        weights = {}
        for combo in itertools.combinations_with_replacement(range(n + 1), m):
            counts = np.diff(np.concatenate([[0], combo, [n]]))
            score = sum(abs(Decimal(int(c)) - t) for c, t in zip(counts, targets, strict=True))
            log_w = -Decimal(scale) * score
            for i, k in zip(*np.unique(combo, return_counts=True), strict=True):
                if lengths[i] == 0:
                    log_w = None
                    break
                log_w += int(k) * Decimal(float(lengths[i])).ln() - Decimal(math.factorial(int(k))).ln()
            if log_w is not None:
                weights[combo] = log_w
        top = max(weights.values())
        log_total = sum((w - top).exp() for w in weights.values()).ln() + top
        return {key: w - log_total for key, w in weights.items()}


def exact_decimal(x) -> Decimal:
    """A float64 or long double as a Decimal, exactly up to 60 digits."""
    if np.isinf(x):
        return Decimal("-Infinity") if x < 0 else Decimal("Infinity")
    num, den = x.as_integer_ratio()
    return Decimal(num) / Decimal(den)


def joint_sampler_law(lengths, levels, scale, combo, monkeypatch, dtype=np.float64):
    """log P(the sampler returns ``combo``) on the path of ``dtype``: the backward pass replayed
    with its choices forced, each choice's probability taken exactly (60 digits) from the
    weights it is given, which must be of ``dtype`` (never rounded on the way)."""
    from decimal import localcontext

    total = [Decimal(0)]
    state = {"step": 0, "j": len(levels) - 1}

    def forced(log_weights, rng):
        assert log_weights.dtype == dtype
        j = state["j"]
        if state["step"] % 2 == 0:  # the interval of quantile j
            choice = combo[j]
        else:  # how many quantiles before j share its interval
            choice = 0
            while j - choice - 1 >= 0 and combo[j - choice - 1] == combo[j]:
                choice += 1
            state["j"] = j - choice - 1
        state["step"] += 1
        with localcontext() as ctx:
            ctx.prec = 60
            live = [exact_decimal(v) for v in log_weights if np.isfinite(v)]
            top = max(live)
            log_norm = sum((v - top).exp() for v in live).ln() + top
            total[0] += exact_decimal(log_weights[choice]) - log_norm
        return choice

    monkeypatch.setattr(joint_exp, "_exact_log_choice", forced)
    out = joint_exp.joint_exponential_intervals(np.asarray(lengths, dtype=dtype), np.asarray(levels), scale, None)
    assert tuple(int(v) for v in out) == combo
    return total[0]


JOINT_LAW_CASES = [
    ([0.5, 0.1, 0.0, 0.3, 0.1], [0.3, 0.6], 0.4),  # a tie: an empty interval
    ([0.2, 0.5, 0.3], [0.2, 0.5, 0.8], 0.1),  # runs of three outputs in one interval
    ([1e-3, 0.25, 2.5, 1e-6, 0.04, 7.0], [0.1, 0.5, 0.9], 40.0),  # large exponents, tiny lengths
    ([1e-200, 3e5, 1e-9, 2.0, 1e-300], [0.2, 0.5, 0.8], 100.0),  # weights thousands of nats apart
    ([1e-250, 0.5, 1e250, 0.5], [0.4, 0.6], 300.0),  # log lengths of +-575, exponents near 1000
]


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


def joint_bound_by_hand(n, m, scale, log_l, unit=2.0**-53):
    """4 sum_{j < m} E_j, E_j = (S + m + 12) 2u sum_{s <= j} (V_s + 2) + (j + 1) e^-50, V_s the
    magnitude bound V with m replaced by s + 1, S = min(n, 2 ceil(sqrt(n + 1)))."""
    depth = min(n, 2 * math.ceil(math.sqrt(n + 1)))
    total, magnitudes = 0.0, 0.0
    for j in range(m):
        s = j + 1  # quantiles placed by stage j
        magnitudes += 3 * scale * (n + 1) + s * (log_l + 1) + math.log(math.factorial(s + 1)) + s * math.log(n + 2) + 3
        total += 4 * ((depth + m + 12) * 2 * unit * magnitudes + s * math.exp(-50.0))
    return total


def test_joint_log_error_bound_formula():
    """The staged bound, and at most the whole-run one 4 m E (the bound as it was)."""
    lengths = np.array([0.5, 2.0, 0.25])  # n = 2, max |log L| = log 4
    m, scale = 3, 0.5
    magnitude = 3 * 0.5 * 3 + 3 * (math.log(4.0) + 1) + math.log(24.0) + 3 * math.log(4.0) + 1
    per_weight = 3 * (2 + 3 + 12) * 2.0**-52 * (magnitude + 2) + 3 * math.exp(-50.0)
    bound = joint_exp.joint_log_error_bound(lengths, m, scale)
    assert bound == pytest.approx(joint_bound_by_hand(2, 3, 0.5, math.log(4.0)), rel=1e-12)
    assert bound < 4 * 3 * per_weight


# ----------------------------------------------------------------------------- JointExp's charge


def _captured_scale(monkeypatch):
    seen = {}
    real = joint_exp.joint_exponential_intervals

    def spy(lengths, levels, scale, rng):
        seen["lengths"], seen["scale"] = lengths, scale
        return real(lengths, levels, scale, rng)

    monkeypatch.setattr(joint_exp, "joint_exponential_intervals", spy)
    return seen


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


LEVEL_SETS = [[0.3, 0.6], [0.1, 0.5, 0.9], list(np.arange(1, 100) / 100), list(np.arange(1, 20) / 20)]


def exact_sensitivity(levels) -> Fraction:
    """max over neighbours of |score change| under add/remove for gaps g (float differences of
    0, the levels and 1, taken exactly): one gap count moves by 1 and every target by its gap,
    so (1 - g_s) + (G - g_s), G = sum g, largest at the smallest gap."""
    gaps = [Fraction(g) for g in np.diff(np.concatenate([[0.0], levels, [1.0]])).tolist()]
    return 1 + sum(gaps) - 2 * min(gaps)


@pytest.mark.parametrize("levels", LEVEL_SETS, ids=["2", "3", "99", "19"])
def test_sensitivity_is_the_float_gaps_exact_sensitivity_rounded_up(levels):
    """2 (1 - min gap) in double was below the sensitivity of [0.3, 0.6] (1 - 0.3 rounds down:
    8e-17 relative) and of [0.1, 0.5, 0.9] (its float gaps sum to 1 + 2^-55: 1.5e-17): now the
    exact value, rounded up to a double."""
    exact = exact_sensitivity(np.array(levels))
    got = joint_exp.joint_sensitivity(np.array(levels), "add_remove")
    assert Fraction(got) >= exact and Fraction(np.nextafter(got, 0.0)) < exact
    assert joint_exp.joint_sensitivity(np.array(levels), "replace") == 2.0


def test_the_uneven_gaps_are_really_uneven():
    """The cases above can fail: the former double formula is below the exact sensitivity."""
    assert exact_sensitivity(np.array([0.3, 0.6])) > Fraction(2.0 * (1.0 - 0.3))
    gaps = np.diff([0.0, 0.1, 0.5, 0.9, 1.0]).tolist()
    assert sum(Fraction(g) for g in gaps) == 1 + Fraction(2) ** -55


def test_run_scale_never_exceeds_run_epsilon_over_twice_the_sensitivity(monkeypatch):
    """2 x scale x sensitivity <= the epsilon the mechanism runs at, exactly, and scale is the
    largest double that does so; epsilons are chosen where plain division rounds the scale up
    (found among 200 candidates, so the check can fail)."""
    levels, n_max, seen = np.array([0.3, 0.6]), 500, {}
    delta = joint_exp.joint_sensitivity(levels, "add_remove")
    real = joint_exp.joint_exponential_intervals

    def spy(lengths, levels, scale, rng):
        seen["scale"] = scale
        return real(lengths, levels, scale, rng)

    monkeypatch.setattr(joint_exp, "joint_exponential_intervals", spy)
    rounded_up = []
    for epsilon in np.linspace(0.3, 3.0, 200):
        run = joint_exp.joint_charged_epsilon(float(epsilon), levels, "add_remove", n_max, 2.0)
        if 2 * Fraction(run / (2 * delta)) * Fraction(delta) > Fraction(run):
            rounded_up.append(float(epsilon))
    assert len(rounded_up) >= 3
    values = np.random.default_rng(1).uniform(0, 2, 50)
    for epsilon in rounded_up[:3]:
        _, charge = joint_exp.joint_exponential_run(values, levels, epsilon, (0, 2), rng=2, n_max=n_max)
        scale = Fraction(seen["scale"])
        assert 2 * scale * Fraction(delta) <= Fraction(charge.run_epsilon)
        assert 2 * Fraction(np.nextafter(seen["scale"], np.inf)) * Fraction(delta) > Fraction(charge.run_epsilon)


EXTENDED = joint_exp.extended_precision_available()
needs_extended = pytest.mark.skipif(not EXTENDED, reason="this platform's long double is not wider than double")
PATHS = ["double", pytest.param("extended", marks=needs_extended)]


# ----------------------------------------------------------------------------- the charge


def test_unit_roundoff_is_half_the_spacing_at_one():
    """u = eps / 2 = epsneg of the working dtype: 2^-53 for double, 2^-64 for x87 extended."""
    assert joint_exp.unit_roundoff("double") == 2.0**-53 == float(np.finfo(np.float64).epsneg)
    if EXTENDED:
        info = np.finfo(np.longdouble)
        assert joint_exp.unit_roundoff("extended") == float(info.eps) / 2 == float(info.epsneg)
        if info.nmant == 63:
            assert joint_exp.unit_roundoff("extended") == 2.0**-64
    with pytest.raises(ParameterError, match="precision must be"):
        joint_exp.unit_roundoff("quad")


@pytest.mark.parametrize("precision", PATHS)
def test_charge_is_the_formula_with_the_dtypes_unit_roundoff(precision):
    """epsilon - run epsilon = 2 x 4 sum_j E_j, E_j = (S + m + 12) 2u sum_{s <= j} (V_s + 2) +
    (j + 1) e^-50, with u of the dtype used and S = min(n, 2 ceil(sqrt(n + 1))) the chain of the
    two-level running log-sum (the code as it was had 2u = 2^-52 whatever the precision, S = n
    for a sequential sum, and 4 m E with every stage at the last one's size)."""
    levels = np.arange(1, 100) / 100
    unit = 2.0**-53 if precision == "double" else float(np.finfo(np.longdouble).eps) / 2
    for epsilon, n_max, width in ((0.1, 32561, 1e5), (1.0, 1000, 8.0), (0.5, 10**5, 1e-3)):
        scale = epsilon / (2 * joint_exp.joint_sensitivity(levels, "add_remove"))
        log_l = max(744.5, abs(math.log(width)))
        expected = epsilon - 2 * joint_bound_by_hand(n_max, 99, scale, log_l, unit)
        charged = joint_exp.joint_charged_epsilon(epsilon, levels, "add_remove", n_max, width, precision)
        assert charged == pytest.approx(expected, rel=1e-13, abs=1e-17)


@needs_extended
def test_many_levels_at_small_epsilon_lose_under_one_percent():
    """m = 99, epsilon 0.1, width 1e5: at n_max = 32561 (Adult's size) the charge is below 1% of
    epsilon in either precision (44% as it was) and double is kept; at n_max = 10^6 double would
    lose 1.9%, so extended runs, and loses under 0.001%."""
    levels = np.arange(1, 100) / 100

    def share(n_max, precision):
        return (0.1 - joint_exp.joint_charged_epsilon(0.1, levels, "add_remove", n_max, 1e5, precision)) / 0.1

    assert joint_exp.joint_precision(0.1, levels, "add_remove", 32561, 1e5) == "double"
    assert share(32561, "double") < 0.002 and share(32561, "extended") < 1e-6
    assert joint_exp.joint_precision(0.1, levels, "add_remove", 10**6, 1e5) == "extended"
    assert share(10**6, "double") > 0.01 and share(10**6, "extended") < 1e-5
    if np.finfo(np.longdouble).nmant == 63:
        assert share(10**6, "extended") == pytest.approx(share(10**6, "double") / 2048, rel=1e-3)


def test_precision_rule_uses_extended_only_above_one_percent(monkeypatch):
    """Double where its charge is at most 1% of epsilon (m = 19 up to n_max = 10^6, m = 99 up to
    10^5) or where long double is double; extended beyond (m = 99 at n_max = 10^6: 1.9% at
    epsilon 0.1, 1.5% at 1) when the platform has it."""
    levels19, levels99 = np.arange(1, 20) / 20, np.arange(1, 100) / 100
    assert joint_exp.joint_precision(0.1, levels19, "add_remove", 10**6, 1e5) == "double"  # 0.06%
    assert joint_exp.joint_precision(0.1, levels99, "add_remove", 10**5, 1e5) == "double"  # 0.22%
    assert joint_exp.joint_precision(1.0, levels99, "add_remove", 10**6, 1e5) == ("extended" if EXTENDED else "double")
    monkeypatch.setattr(joint_exp, "extended_precision_available", lambda: False)
    assert joint_exp.joint_precision(1.0, levels99, "add_remove", 10**6, 1e5) == "double"
    with pytest.raises(ParameterError, match="not wider than double"):
        joint_exp.check_precision("extended")


@pytest.mark.parametrize("precision", PATHS)
def test_run_pays_its_own_precisions_bound(precision, monkeypatch):
    """The run's scale is that of epsilon minus twice the public bound of the precision used, its
    lengths are in that precision, and epsilon' + 2 x the run's own bound is at most epsilon."""
    seen = _captured_scale(monkeypatch)
    rng = np.random.default_rng(40)
    values, levels, epsilon = rng.normal(0, 1, 300), np.array([0.25, 0.5, 0.75]), 0.5
    _, charge = joint_exp.joint_exponential_run(
        values, levels, epsilon, (-4, 4), rng=rng, n_max=1000, _precision=precision
    )
    delta = joint_exp.joint_sensitivity(levels, "add_remove")
    assert charge.precision == precision and charge.unit_roundoff == joint_exp.unit_roundoff(precision)
    assert charge.run_epsilon == joint_exp.joint_charged_epsilon(epsilon, levels, "add_remove", 1000, 8.0, precision)
    assert seen["scale"] == joint_exp.joint_scale(charge.run_epsilon, delta)  # run_epsilon / (2 delta), rounded down
    assert 2 * Fraction(seen["scale"]) * Fraction(delta) <= Fraction(charge.run_epsilon)
    assert seen["lengths"].dtype == joint_exp.working_dtype(precision)
    bound = joint_exp.joint_log_error_bound(np.asarray(seen["lengths"], dtype=float), 3, seen["scale"], precision)
    assert 2 * delta * seen["scale"] + 2 * bound <= epsilon


# ----------------------------------------------------------------------------- the extended path's law


@needs_extended
@pytest.mark.parametrize(
    "lengths, levels, scale",
    [
        ([0.5, 0.1, 0.0, 0.3, 0.1], [0.3, 0.6], 0.4),  # n = 4 records, one tie
        ([0.2, 0.5, 0.3], [0.2, 0.5, 0.8], 0.1),  # runs of up to three outputs in one interval
    ],
)
def test_extended_interval_distribution_equals_definition(lengths, levels, scale):
    """The extended path's sampler frequencies against the enumerated definition (chi-square)."""
    levels = np.array(levels)
    definition = joint_definition(np.array(lengths), levels, scale)
    rng = np.random.default_rng(7)
    keys = sorted(definition)
    counts = dict.fromkeys(keys, 0)
    for _ in range(2500):
        out = joint_exp.joint_exponential_intervals(np.array(lengths, dtype=np.longdouble), levels, scale, rng)
        counts[tuple(int(v) for v in out)] += 1
    live = [k for k in keys if definition[k] > 0]
    assert all(counts[k] == 0 for k in keys if definition[k] == 0)
    assert chi_square_p([counts[k] for k in live], [definition[k] for k in live]) > P_FLOOR


@needs_extended
@pytest.mark.parametrize("lengths, levels, scale", JOINT_LAW_CASES)
def test_extended_law_is_within_its_bound(lengths, levels, scale, monkeypatch):
    """Every interval vector's probability under the extended path (long double weights, chosen
    exactly) is within the extended bound (2048 times the double one's smaller on x86-64) of
    the 60-digit definition."""
    definition = _joint_definition_decimal(lengths, np.asarray(levels), scale)
    bound = joint_exp.joint_log_error_bound(np.asarray(lengths), len(levels), scale, "extended")
    worst = max(
        abs(float(joint_sampler_law(lengths, levels, scale, combo, monkeypatch, np.longdouble) - log_p))
        for combo, log_p in definition.items()
    )
    assert worst <= bound
    assert bound < joint_exp.joint_log_error_bound(np.asarray(lengths), len(levels), scale, "double") / 1000


@needs_extended
def test_exact_log_choice_takes_long_doubles_exactly(monkeypatch):
    """The exponent handed to the exact sampler is the exact difference of the long doubles (bits
    below double's precision kept) and the draws follow the weights (chi-square)."""
    tail = np.longdouble(2) ** -60
    weights = np.array([0.0, -1.0, -np.inf, -0.5], dtype=np.longdouble) + np.array([tail, 3 * tail, 0, 0])
    seen = {}
    real = exact_choice_module.exact_choice

    def spy(sizes, exponents, slack, exact_exponent, rng):
        seen["exact"] = [exact_exponent(r) for r in range(len(sizes))]
        return real(sizes, exponents, slack, exact_exponent, rng)

    monkeypatch.setattr(joint_exp, "exact_choice", spy)  # where _exact_log_choice looks it up
    joint_exp._exact_log_choice(weights, np.random.default_rng(5))
    assert seen["exact"] == [Fraction(0), Fraction(1) - 2 * Fraction(2) ** -60, Fraction(1, 2) + Fraction(2) ** -60]
    monkeypatch.setattr(joint_exp, "exact_choice", real)
    rng = np.random.default_rng(6)
    counts = np.bincount([joint_exp._exact_log_choice(weights, rng) for _ in range(3000)], minlength=4)
    probs = np.exp(np.array([0.0, -1.0, -np.inf, -0.5]))
    assert counts[2] == 0 and chi_square_p(counts[[0, 1, 3]], probs[[0, 1, 3]] / probs[[0, 1, 3]].sum()) > P_FLOOR


# ----------------------------------------------------------------------------- the platform's assumptions


@pytest.mark.parametrize("precision", PATHS)
def test_logaddexp_and_log_obey_the_per_operation_bound(precision):
    """The analysis assumes numpy's log-add-exp errs by at most u |result| + (K' + 1.39 K + 0.37) u
    with exp within K' = 1 and log1p within K = 2 ulps (glibc's listed maxima for long double on
    x86-64; 1 and 1 for double), and log by one ulp (2u relative), in the working dtype.  Checked
    against 60-digit Decimal on inputs from equal to 10^4 nats apart, magnitudes up to 10^5."""
    u = joint_exp.unit_roundoff(precision)
    dtype = joint_exp.working_dtype(precision)
    rng = np.random.default_rng(9)
    x = rng.uniform(-1e5, 1e5, 400).astype(dtype)
    gap = np.concatenate([[0.0, 1e-19, 1e-10], rng.exponential(3.0, 300), rng.uniform(0, 1e4, 94)])
    x, y = x[: gap.size], x[: gap.size] - gap.astype(dtype)
    got = np.logaddexp(x, y)
    worst = 0.0
    with localcontext() as ctx:
        ctx.prec = 60
        for a, b, r in zip(x, y, got, strict=True):
            da, db = exact_decimal(a), exact_decimal(b)
            exact = da + (1 + (db - da).exp()).ln()
            worst = max(worst, float(abs(exact_decimal(r) - exact) / Decimal(u)) - float(abs(exact) / Decimal(u)))
        assert worst <= 1 + 1.39 * 2 + 0.37
        lengths = np.concatenate([rng.uniform(0, 10, 50), 10.0 ** rng.uniform(-300, 300, 50), [5e-324, 1e300]])
        for length, log in zip(lengths, np.log(lengths.astype(dtype)), strict=True):
            exact = exact_decimal(dtype.type(length)).ln()
            assert abs(exact_decimal(log) - exact) <= 2 * Decimal(u) * abs(exact)


# ----------------------------------------------------------------------------- the two-level running sum


@pytest.mark.parametrize("dtype", [np.float64, pytest.param(np.longdouble, marks=needs_extended)])
def test_two_level_running_logsumexp_equals_the_running_sum(dtype):
    """_prefix_logsumexp against numpy's sequential accumulate and a 60-digit running sum: same
    -inf entries, values within 2u (|value| + 2) per log-add-exp of its chains (rows of 1 to
    1001 entries)."""
    rng = np.random.default_rng(12)
    u = Decimal(float(np.finfo(dtype).eps) / 2)
    for length in (1, 2, 4, 5, 16, 17, 101, 1001):
        rows = (rng.normal(0, 40, (3, length)) + rng.uniform(-700, 700, (3, 1))).astype(dtype)
        rows[0, ::3] = -np.inf
        rows[1, :] = -np.inf
        got = joint_exp._prefix_logsumexp(rows)
        assert got.dtype == dtype and got.shape == rows.shape
        assert np.array_equal(np.isinf(got), np.isinf(np.logaddexp.accumulate(rows, axis=1)))
        depth = min(length - 1, 2 * math.ceil(math.sqrt(length)) - 2)
        with localcontext() as ctx:
            ctx.prec = 60
            for row, out in zip(rows, got, strict=True):
                running = Decimal(0)
                for value, result in zip(row, out, strict=True):
                    running += exact_decimal(value).exp() if np.isfinite(value) else 0
                    if running:
                        exact = running.ln()
                        assert abs(exact_decimal(result) - exact) <= (depth + 1) * 2 * u * (abs(exact) + 2)


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


@pytest.mark.parametrize("extended", [False, True])
def test_joint_affordable_is_the_refusal_boundary(monkeypatch, extended):
    """joint_affordable is True exactly where joint_charged_epsilon, at the precision the run
    would use, returns (charge < epsilon / 2); both outcomes occur."""
    if extended and not joint_exp.extended_precision_available():
        pytest.skip("this platform's long double is not wider than double")
    monkeypatch.setattr(joint_exp, "extended_precision_available", lambda: extended)
    levels = np.arange(1, 12) / 12
    outcomes = set()
    for n_max in (10**4, 10**6, 10**8, 10**9, 10**10, 10**12):
        for epsilon in (0.1, 1.0):
            precision = joint_exp.joint_precision(epsilon, levels, "add_remove", n_max, 10.0)
            try:
                charged = joint_exp.joint_charged_epsilon(epsilon, levels, "add_remove", n_max, 10.0, precision)
            except ParameterError:
                charged = None
            affordable = joint_exp.joint_affordable(epsilon, levels, "add_remove", n_max, 10.0)
            assert affordable is (charged is not None)
            outcomes.add(affordable)
            if charged is not None:
                assert epsilon / 2 < charged < epsilon
    assert outcomes == {True, False}

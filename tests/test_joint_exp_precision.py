"""JointExp's working precision: the charge at double and extended precision, the extended
path's law against a 60-digit definition, and the platform assumptions its bound rests on.

The extended path runs where numpy's long double is wider than double (x87 80-bit on x86-64
Linux); its tests are skipped elsewhere.  Everything forced onto a path uses the private
``_precision`` keyword or long double lengths."""

import json
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from _helpers import (
    JOINT_LAW_CASES,
    _captured_scale,
    _joint_definition_decimal,
    chi_square_p,
    exact_decimal,
    joint_bound_by_hand,
    joint_definition,
    joint_sampler_law,
)

import dprange
from dprange import ParameterError
from dprange.privacy import exact_choice as exact_choice_module
from dprange.quantile_mechanisms import joint_exp

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


@needs_extended
def test_quantiles_records_the_precision_and_the_charge():
    """dprange.quantiles with JointExp: the result (and its JSON) names the working precision
    and the epsilon the mechanism ran at; 99 levels at epsilon 0.1 and n_max = 10^6 run in
    extended precision, 2 levels in double."""
    values = np.random.default_rng(3).uniform(0, 1e5, 200)
    levels = np.arange(1, 100) / 100
    many = dprange.quantiles(values, levels, 0.1, bounds=(0, 1e5), method="joint_exp", rng=2, n_max=10**6)
    assert many.float_error.precision == "extended" and many.float_error.charge < 1e-5
    few = dprange.quantiles(values, [0.25, 0.75], 0.1, bounds=(0, 1e5), method="joint_exp", rng=2, n_max=10**6)
    assert few.float_error.precision == "double"
    record = many.to_dict()["float_error"]
    assert record["precision"] == "extended" and record["run_epsilon"] == many.float_error.run_epsilon
    assert record["epsilon"] == 0.1 and record["n_max"] == 10**6
    hist = dprange.quantiles(values, [0.5], 0.1, bounds=(0, 1e5), method="histogram", rng=2, n_max=32561)
    assert hist.float_error is None and hist.to_dict()["float_error"] is None


P_FLOOR = 1e-4


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


def test_cli_prints_jointexps_precision_and_charge(tmp_path, capsys):
    """dprange quantiles --method joint_exp names the working precision and the epsilon run at,
    in the text output and the JSON (the code as it was printed neither)."""
    from dprange.cli import main

    path = tmp_path / "data.csv"
    path.write_text("x\n" + "\n".join(f"{v:.4f}" for v in np.random.default_rng(10).normal(0, 1, 300)) + "\n")
    base = ["quantiles", str(path), "-c", "x", "--lo", "-5", "--hi", "5", "-e", "1", "--method", "joint_exp"]
    outputs = {}
    for extra in ([], ["--json"]):
        with pytest.raises(SystemExit) as done:
            main([*base, "--q", "0.25,0.75", "--n-max", "1000", "--seed", "1", *extra])
        assert done.value.code == 0
        outputs[tuple(extra)] = capsys.readouterr().out
    record = json.loads(outputs[("--json",)])["float_error"]
    run = 1.0 - joint_exp.joint_charged_epsilon(1.0, np.array([0.25, 0.75]), "add_remove", 1000, 10.0, "double")
    assert record["precision"] == "double" and record["charge"] == pytest.approx(run, rel=1e-9)
    line = f"float error: double precision, ran at epsilon {record['run_epsilon']:.10g} (charge {record['charge']:.3g})"
    assert line in outputs[()].splitlines()

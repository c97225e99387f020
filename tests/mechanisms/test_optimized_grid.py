"""Kronecker products of optimised 1-D strategies and optimised marginals
(dprange.mechanisms.optimized_grid): least squares and rectangle variances against the dense
formulas, the product identity of the error, coarser quantisation on three or more axes,
explicit rectangles, the identity product where lower, Monte-Carlo and saved releases."""

from __future__ import annotations

import functools
import itertools
import json
import math
import shutil
from fractions import Fraction

import numpy as np
import pytest
from _helpers import indicator

import dprange.mechanisms.optimized_grid as optimized_kd
from dprange.analysis.grid import expected_error, l2_optimum_bound
from dprange.analysis.grid import expected_error as grid_expected_error
from dprange.errors import DataError, ParameterError
from dprange.inference.kron import KronPIdentityEstimate
from dprange.inference.p_identity import PIdentityEstimate
from dprange.mechanisms.grid import Kronecker, load_grid_release
from dprange.mechanisms.optimized import Optimized
from dprange.mechanisms.optimized_grid import (
    AUTO_MARGINALS_MAX_AXES,
    OptimizedKronecker,
    OptimizedMarginals,
    kd_auto_candidates,
)
from dprange.operators import Kron, definition_sensitivity_power
from dprange.optimize.cache import cache_path
from dprange.optimize.p_identity import P_IDENTITY_NORMS, PIdentityStrategy, column_scales, default_rows
from dprange.privacy.noise import gaussian_sigma
from dprange.privacy.samplers import resolve_rng
from dprange.workloads import Rectangles, make_workload
from dprange.workloads import all_rectangles as all_rectangles_kd
from dprange.workloads import prefix_rectangles as prefix_rectangles_kd


def all_rectangles(shape):
    """Every rectangle of a 2-D grid as (R, 2) lows and highs."""
    per_axis = [np.triu_indices(n) for n in shape]
    pick = np.stack(np.meshgrid(*(np.arange(lo.size) for lo, _ in per_axis), indexing="ij"), -1).reshape(-1, 2)
    lows = np.stack([per_axis[a][0][pick[:, a]] for a in range(2)], 1)
    highs = np.stack([per_axis[a][1][pick[:, a]] for a in range(2)], 1)
    return lows, highs


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_estimate_and_rectangle_variances_equal_the_dense_least_squares(neighbours):
    shape = (6, 5)
    mech = OptimizedKronecker(neighbours=neighbours)
    factors = [s.block for s in mech.axis_strategies(shape)]
    A = np.kron(factors[0].dense(), factors[1].dense())
    y = np.random.default_rng(0).normal(size=A.shape[0]) * 4
    total = 23.0 if neighbours == "replace" else None
    estimate = KronPIdentityEstimate(shape, factors, 2.0, y, total)
    n = A.shape[1]
    gram_inv = np.linalg.inv(A.T @ A)
    x = gram_inv @ A.T @ y
    cov = 2.0 * gram_inv
    if total is not None:
        w = gram_inv.sum(axis=1)
        x = x + w * (total - x.sum()) / w.sum()
        cov = cov - 2.0 * np.outer(w, w) / w.sum()
        assert estimate.leaves.sum() == pytest.approx(total, rel=1e-12)
    np.testing.assert_allclose(estimate.leaves, x, rtol=1e-9, atol=1e-9)
    lows, highs = all_rectangles(shape)
    Q = indicator(shape, lows, highs)
    np.testing.assert_allclose(
        estimate.rectangle_variance(lows, highs), np.einsum("ij,jk,ik->i", Q, cov, Q), rtol=1e-9, atol=1e-12
    )
    W = np.random.default_rng(1).normal(size=(3, n))
    np.testing.assert_allclose(estimate.query_variance(W), np.einsum("ij,jk,ik->i", W, cov, W), rtol=1e-9)


@pytest.mark.usefixtures("private_cache")
def test_sensitivity_is_the_product_of_the_axes_and_the_noise_is_calibrated_on_it():
    shape = (8, 6)
    mech = OptimizedKronecker()
    strategies = mech.axis_strategies(shape)
    plan = mech.plan(shape, 0.5)
    A = np.kron(strategies[0].explicit(), strategies[1].explicit())
    expected = int(np.abs(A).sum(axis=0).max())
    assert expected == strategies[0].block.sensitivity_power(1, "add_remove") * strategies[1].block.sensitivity_power(
        1, "add_remove"
    )
    assert plan.sensitivity_power(1, "add_remove") == pytest.approx(0.5 * expected)
    spec = mech.measure(np.zeros(shape, dtype=np.int64), 0.5, rng=0).measurements[0].noise
    assert spec.scale == pytest.approx(expected / 0.5, rel=1e-12)


@pytest.mark.usefixtures("private_cache")
def test_error_on_all_rectangles_is_the_product_of_the_axes_and_beats_fixed_kronecker():
    """Average variance over all rectangles of 32 x 32: v prod_a (mean of the axis' range
    variances at unit noise); against the fixed Kronecker products (identity, Haar, trees of
    branching 2, 4, 8, 16; the best is identity, 236.5) the optimised product (204.8) gains 1.155x."""
    shape = (32, 32)
    lows, highs = all_rectangles(shape)
    opt = OptimizedKronecker().error_model(shape, 1.0)
    opt_error = opt.rectangle_variance(lows, highs).mean()
    axis = Optimized("all-range").error_model(32, 1.0)
    lo, hi = np.triu_indices(32)
    unit = axis.range_variance(lo, hi) / axis.variance
    assert opt_error == pytest.approx(opt.variance * unit.mean() ** 2, rel=1e-9)
    fixed = min(
        Kronecker(axes).error_model(shape, 1.0).rectangle_variance(lows, highs).mean()
        for axes in ("identity", "haar", 2, 4, 8, 16)
    )
    assert fixed >= 1.12 * opt_error


@pytest.mark.usefixtures("private_cache")
def test_monte_carlo_rectangle_variances_agree_with_the_exact_ones():
    """200 seeded releases of a fixed 5 x 4 grid (float Laplace): every rectangle's empirical
    variance within 4 sd of the exact one, sd = sqrt((kurtosis - 1) / 200) with kurtosis <= 6
    (a weighted sum of independent Laplace variables), so 63%; and the mean error of every
    rectangle within 4 standard errors of 0."""
    shape, reps = (5, 4), 200
    counts = np.random.default_rng(2).integers(0, 30, shape)
    mech = OptimizedKronecker(noise="laplace_float")
    lows, highs = all_rectangles(shape)
    truth = indicator(shape, lows, highs) @ counts.ravel()
    answers = np.array([mech.release(counts, 1.0, rng=s).rectangle(lows, highs).value for s in range(reps)])
    exact = mech.error_model(shape, 1.0).rectangle_variance(lows, highs)
    assert np.var(answers, axis=0) == pytest.approx(exact, rel=4 * np.sqrt(5 / reps))
    assert np.all(np.abs(answers.mean(axis=0) - truth) <= 4 * np.sqrt(exact / reps))


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_release_round_trips_and_follows_delta(delta):
    counts = np.random.default_rng(3).poisson(9, (7, 4))
    mech = OptimizedKronecker("prefix-rectangles")
    release = mech.release(counts, 1.0, delta=delta, rng=5)
    kind = release.measurements.measurements[0].noise.kind
    assert (kind == "gaussian") == (delta > 0)
    loaded = load_grid_release(release.to_json())
    lows, highs = all_rectangles((7, 4))
    np.testing.assert_allclose(loaded.rectangle(lows, highs).value, release.rectangle(lows, highs).value)
    np.testing.assert_allclose(loaded.rectangle(lows, highs).stderr, release.rectangle(lows, highs).stderr)


@pytest.mark.usefixtures("private_cache")
def test_l2_optimal_axes_are_the_dense_optimum_in_the_l2_template_shape():
    """Template l2-optimal: every axis' block is the 1-D L2 optimum written as [I; B] D with
    p = n (as_p_identity_l2): its Gram matrix is the optimum's with the diagonal raised to 1,
    every column of unit L2 norm; the product's exact error is within 1e-4 of the k-D optimum
    (grid_analysis.l2_optimum_bound) and below the L2 template's."""
    from dprange.optimize.l2_optimum import as_p_identity_l2, l2_optimum
    from dprange.optimize.p_identity import p_identity_matrix
    from dprange.workloads import AllRange

    optimum = l2_optimum(AllRange(12).gram())
    theta = as_p_identity_l2(optimum.strategy)
    assert theta.shape == (12, 12)
    shaped = p_identity_matrix(theta, norm=2)
    gram = optimum.strategy.T @ optimum.strategy
    raised = gram + np.diag(1.0 - np.diag(gram))
    np.testing.assert_allclose(shaped.T @ shaped, raised, atol=1e-10)
    np.testing.assert_allclose(np.linalg.norm(shaped, axis=0), 1.0, atol=1e-12)
    shape = (12, 9)
    errors = {
        template: expected_error(OptimizedKronecker(template=template), shape, "all-rectangles", 1.0, delta=1e-6)
        for template in ("l2-optimal", "p-identity-l2")
    }
    bound = l2_optimum_bound(shape, "all-rectangles", 1.0, 1e-6)
    assert bound <= errors["l2-optimal"] <= 1.0001 * bound
    assert errors["l2-optimal"] < errors["p-identity-l2"]
    mech = OptimizedKronecker(template="l2-optimal")
    mech.follow_delta(1e-6)
    assert [s.rows for s in mech.axis_strategies(shape)] == [24, 18]
    assert [s.describe()["template"] for s in mech.axis_strategies(shape)] == ["l2-optimal"] * 2


@pytest.mark.usefixtures("private_cache")
def test_l2_optimal_monte_carlo_and_round_trip():
    """200 seeded Gaussian releases of a 5 x 4 grid with the axes' L2 optima: every rectangle's
    empirical variance within 4 sd of the exact one (Gaussian: sd sqrt(2 / 200) = 10%), the
    mean within 4 standard errors; a release loads with the same answers and error bars."""
    shape, reps = (5, 4), 200
    counts = np.random.default_rng(2).integers(0, 30, shape)
    mech = OptimizedKronecker(template="l2-optimal")
    lows, highs = all_rectangles(shape)
    truth = indicator(shape, lows, highs) @ counts.ravel()
    releases = [mech.release(counts, 1.0, delta=1e-6, rng=s) for s in range(reps)]
    answers = np.array([r.rectangle(lows, highs).value for r in releases])
    exact = mech.error_model(shape, 1.0, delta=1e-6).rectangle_variance(lows, highs)
    assert np.var(answers, axis=0) == pytest.approx(exact, rel=4 * np.sqrt(2 / reps))
    assert np.all(np.abs(answers.mean(axis=0) - truth) <= 4 * np.sqrt(exact / reps))
    loaded = load_grid_release(releases[0].to_json())
    np.testing.assert_allclose(loaded.rectangle(lows, highs).value, releases[0].rectangle(lows, highs).value)
    np.testing.assert_allclose(loaded.rectangle(lows, highs).stderr, releases[0].rectangle(lows, highs).stderr)


@pytest.mark.usefixtures("private_cache")
def test_l2_optimal_refuses_axes_above_its_limit():
    mech = OptimizedKronecker(template="l2-optimal")
    mech.follow_delta(1e-6)
    with pytest.raises(ParameterError, match=r"axis 1 \(4097 bins\): template l2-optimal solves axes of at most 4096"):
        mech.axis_strategies((4, 4097))
    assert not mech.axis_ready(4097) and mech.axis_ready(64)


@pytest.mark.usefixtures("private_cache")
def test_a_release_made_with_another_quantisation_is_refused_on_load(monkeypatch):
    """A saved grid release is read against its design rebuilt from its parameters; where the
    rebuilt calibration differs (here: a coarser default quantisation, as a later version might
    choose) the load is refused instead of reading the values against other integers."""
    import json

    import dprange.mechanisms.optimized_grid as okd
    from dprange.errors import DataError

    counts = np.random.default_rng(3).poisson(9, (7, 4))
    saved = OptimizedKronecker("all-rectangles").release(counts, 1.0, delta=1e-6, rng=5).to_json()
    assert load_grid_release(saved).shape == (7, 4)
    tampered = json.loads(saved)
    tampered["measurements"][0]["noise"]["scale"] *= 2
    with pytest.raises(DataError, match="does not match its design"):
        load_grid_release(tampered)
    monkeypatch.setattr(okd.OptimizedKronecker, "_fitting_bits", lambda self, shape, eps: 10)  # coarser
    with pytest.raises(DataError, match="does not match its design"):
        load_grid_release(saved)


@pytest.mark.usefixtures("private_cache")
def test_bad_parameters_are_refused():
    with pytest.raises(ParameterError, match="workload"):
        OptimizedKronecker("marginals")


@pytest.mark.usefixtures("private_cache")
def test_marginal_release_round_trips():
    counts = np.random.default_rng(4).poisson(5, (6, 5, 4))
    release = OptimizedMarginals(2).release(counts, 1.0, rng=1)
    loaded = load_grid_release(release.to_json())
    for axes in ((0, 1), (1, 2)):
        np.testing.assert_allclose(loaded.marginal(axes).value, release.marginal(axes).value)
        np.testing.assert_allclose(loaded.marginal(axes).stderr, release.marginal(axes).stderr)
        assert np.all(np.isfinite(release.marginal(axes).stderr))


# ----------------------------------------------------------------------------- quantisation on three or more axes


def exact_l2_sensitivity_squared(A: np.ndarray, neighbours: str) -> int:
    """Delta_2^2 of an integer matrix by the definition in Python integers (its entries reach
    2^36 on three axes, whose squares float sums would round)."""
    columns = [[int(v) for v in col] for col in np.asarray(A, dtype=np.int64).T]
    if neighbours == "add_remove":
        return max(sum(v * v for v in col) for col in columns)
    return max(sum((u - v) ** 2 for u, v in zip(a, b)) for a, b in itertools.combinations(columns, 2))


def smallest_float_root(square: int) -> float:
    root = math.sqrt(square)
    while Fraction(root) ** 2 < square:
        root = math.nextafter(root, math.inf)
    return root


def unit_norm_axis(strategy) -> np.ndarray:
    """The unquantised axis strategy [I; B] D (unit column norms)."""
    scale = column_scales(strategy.theta, P_IDENTITY_NORMS[strategy.template])
    return np.vstack([np.diag(1.0 / scale), strategy.theta / scale])


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_three_l2_axes_are_quantised_coarser_and_the_noise_is_calibrated_on_the_measured_matrix(neighbours):
    """At the 1-D quantisation (2^16 per axis) three L2 axes need sigma 1.3e15 > 2^40 (the
    release failed with "epsilon is too small"); each axis is now quantised at 2^-12 of its
    largest entry, and the discrete Gaussian's sigma is the one for the exact L2 sensitivity of
    the integer product as measured (the definition, in integers)."""
    shape, epsilon, delta = (3, 3, 2), 1.0, 1e-6
    mech = OptimizedKronecker(template="p-identity-l2", neighbours=neighbours)
    default = np.kron(
        np.kron(*[s.explicit() for s in mech.axis_strategies(shape)[:2]]), mech.axis_strategies(shape)[2].explicit()
    )
    too_fine = exact_l2_sensitivity_squared(default, neighbours)
    assert math.sqrt(too_fine) * gaussian_sigma(epsilon, delta, 1.0) > 2.0**40  # 1.3e15
    counts = np.random.default_rng(4).poisson(20, shape)
    release = mech.release(counts, epsilon, delta=delta, rng=1)
    (m,) = release.measurements.measurements
    bits = mech.quantisation_bits(shape, epsilon)
    assert bits == 12
    for factor, strategy in zip(m.block.factors, mech.axis_strategies(shape)):
        np.testing.assert_array_equal(factor.dense(), strategy.quantised(2.0**-bits, keep_norms=True)[1].dense())
    A = m.block.dense()
    square = exact_l2_sensitivity_squared(A, neighbours)
    assert m.noise.kind == "gaussian" and m.noise.scale <= 2.0**40
    assert m.noise.scale >= gaussian_sigma(epsilon, delta, smallest_float_root(square))
    assert m.noise.scale == pytest.approx(gaussian_sigma(epsilon, delta, math.sqrt(square)), rel=1e-9)
    loaded = load_grid_release(release.to_json())
    lows, highs = [[0, 0, 0], [1, 0, 1]], [[2, 2, 1], [2, 1, 1]]
    np.testing.assert_allclose(loaded.rectangle(lows, highs).value, release.rectangle(lows, highs).value)
    np.testing.assert_allclose(loaded.rectangle(lows, highs).stderr, release.rectangle(lows, highs).stderr)


@pytest.mark.usefixtures("private_cache")
def test_three_l1_axes_are_quantised_coarser_and_the_laplace_scale_is_the_measured_sensitivity():
    """Prefixes on 10 x 10 x 10 (epsilon-DP, epsilon 0.5): 2^48 x 2 at the 1-D quantisation;
    at 2^-12 per axis the discrete Laplace scale is the exact L1 sensitivity of the measured
    product / epsilon."""
    shape = (10, 10, 10)
    mech = OptimizedKronecker("prefix-rectangles", template="p-identity")
    assert all(np.any(s.theta) for s in mech.axis_strategies(shape))
    spec = mech.measure(np.zeros(shape, dtype=np.int64), 0.5, rng=0).measurements[0].noise
    assert mech.quantisation_bits(shape, 0.5) == 12
    A = Kron(mech.axis_blocks(shape, 12)).dense()
    assert spec.kind == "discrete_laplace" and spec.scale <= 2.0**40
    assert spec.scale == pytest.approx(definition_sensitivity_power(A, 1, "add_remove") / 0.5, rel=1e-12)
    # The norm-keeping rounding: every column of the product sums to exactly prod_a K_a.
    factors = [s.quantised(2.0**-12)[0] for s in mech.axis_strategies(shape)]
    assert definition_sensitivity_power(A, 1, "add_remove") == math.prod(factors)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("workload", ["all-rectangles", "prefix-rectangles"])
@pytest.mark.parametrize(("shape", "bits"), [((6, 5, 4), 12), ((4, 3, 3, 2), 9)])
def test_exact_error_of_the_coarse_quantisation_is_the_dense_one_and_within_half_a_percent_of_unquantised(
    workload, shape, bits
):
    """On 6 x 5 x 4 and 4 x 3 x 3 x 2 (L2 template, epsilon 1, delta 1e-6; 2^-12 and 2^-9 per
    axis) the error model's variances are those of the dense least squares on the measured
    integer product, and the mean error over the workload is within 0.5% of the unquantised
    product's (unit column norms, sensitivity 1)."""
    epsilon, delta = 1.0, 1e-6
    mech = OptimizedKronecker(workload, template="p-identity-l2")
    model = mech.error_model(shape, epsilon, delta=delta)
    assert mech.quantisation_bits(shape, epsilon) == bits
    A = mech.plan(shape, epsilon).blocks[0].dense()
    W = {"all-rectangles": all_rectangles_kd, "prefix-rectangles": prefix_rectangles_kd}[workload](shape).dense()
    dense = model.variance * np.einsum("ij,jk,ik->i", W, np.linalg.inv(A.T @ A), W)
    np.testing.assert_allclose(model.query_variance(W), dense, rtol=1e-8)
    assert expected_error(mech, shape, workload, epsilon, delta=delta) == pytest.approx(dense.mean(), rel=1e-8)
    axes = [unit_norm_axis(s) for s in mech.axis_strategies(shape)]
    U = functools.reduce(np.kron, axes)
    unquantised = gaussian_sigma(epsilon, delta, 1.0) ** 2 * np.mean(
        np.einsum("ij,jk,ik->i", W, np.linalg.inv(U.T @ U), W)
    )
    assert dense.mean() == pytest.approx(unquantised, rel=0.005)


@pytest.mark.usefixtures("private_cache")
def test_five_optimised_l2_axes_are_refused_with_the_quantisation_as_the_reason():
    """Five L2 axes need about 2^45 at 2^-9 per axis (the coarsest kept for the L2 template):
    the refusal names the quantisation and the remedies that apply, not "epsilon is too
    small"."""
    mech = OptimizedKronecker(template="p-identity-l2")
    shape = (3, 3, 3, 2, 2)
    for call in (
        lambda: mech.error_model(shape, 1.0, delta=1e-6),
        lambda: mech.release(np.ones(shape, dtype=np.int64), 1.0, delta=1e-6, rng=0),
    ):
        with pytest.raises(ParameterError) as info:
            call()
        message = str(info.value)
        assert "cannot measure this 5-axis grid" in message
        assert "quantised to integers and the factors multiply" in message
        assert "2^9 x 2^9 x 2^9 x 2^9 x 2^9" in message and "above the supported 2^40" in message
        assert "use fewer axes" in message and "kd_hierarchy" in message
        assert "Laplace template" not in message and "larger epsilon" not in message  # 2^45 alone is above 2^40
        assert "epsilon is too small" not in message


@pytest.mark.usefixtures("private_cache")
def test_four_l2_axes_at_a_small_epsilon_suggest_a_larger_one_or_the_laplace_template():
    """At epsilon 0.1 the Gaussian needs 39.5 per unit of sensitivity, the product at 2^-9 per
    axis has sensitivity 6.9e10 (below 2^40), so 16 per unit would fit: Laplace needs 10."""
    with pytest.raises(ParameterError) as info:
        OptimizedKronecker(template="p-identity-l2").error_model((3, 3, 3, 2), 0.1, delta=1e-6)
    message = str(info.value)
    assert "a larger epsilon or delta (the noise per unit of sensitivity must fall from 39.5 to 16)" in message
    assert "the Laplace template (pure epsilon-DP, 10 per unit of sensitivity: template='p-identity'" in message
    assert "epsilon is too small" not in message


@pytest.mark.usefixtures("private_cache")
def test_an_epsilon_too_small_for_any_strategy_keeps_the_epsilon_message():
    """Laplace noise at epsilon 1e-13 needs scale 1e13 > 2^40 per unit of sensitivity: no
    quantisation is the cause there."""
    with pytest.raises(ParameterError, match="epsilon is too small"):
        OptimizedKronecker("prefix-rectangles", template="p-identity").error_model((10, 10, 10), 1e-13)


@pytest.mark.usefixtures("private_cache")
def test_two_axes_keep_the_one_dimensional_quantisation():
    mech = OptimizedKronecker("prefix-rectangles", template="p-identity-l2")
    mech.follow_delta(1e-6)
    assert mech.quantisation_bits((16, 16), 1.0) == 16
    plan = mech.plan((16, 16), 1.0)
    for factor, strategy in zip(plan.blocks[0].factors, mech.axis_strategies((16, 16))):
        assert factor is strategy.block


@pytest.mark.usefixtures("private_cache")
def test_a_bin_whose_weight_rounds_to_zero_at_the_coarser_quantisation_is_refused():
    """An axis strategy with a column of B near 1e4 (L2 norm s = 1e4): its identity weight
    1 / s is 6.6 at 2^16 but rounds to 0 at the 2^-12 three axes need; the product would be
    rank deficient, so it is refused rather than measured."""
    mech = OptimizedKronecker(template="p-identity-l2")
    theta = np.array([[1e4, 0.3, 0.2]])
    mech._axis_cache[3, "p-identity-l2"] = PIdentityStrategy(theta, "p-identity-l2", 0.0, True)
    assert np.all(mech.axis_strategies((3, 3, 3))[0].block.diagonal > 0)
    with pytest.raises(ParameterError, match="rounds to zero"):
        mech.error_model((3, 3, 3), 1.0, delta=1e-6)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize(("total", "exact_dtype"), [(2**23, np.int64), (2**44, object)])
def test_measured_answers_are_the_exact_integers_of_the_product(total, exact_dtype):
    """On 6 x 5 x 4 (L2 axes at 2^-12) with 2^23 records the float product rounded 8 answers (by
    up to 6); the measurement adds the noise to the exact integer answers, in int64 below 2^62
    and in Python integers above (2^44 records: answers near 2^80, noisy values then rounded to
    floats)."""
    shape = (6, 5, 4)
    mech = OptimizedKronecker("prefix-rectangles", template="p-identity-l2")
    counts = np.random.default_rng(0).multinomial(total, np.full(120, 1 / 120)).reshape(shape)
    measurements = mech.measure(counts, 1.0, delta=1e-6, rng=11)
    (m,) = measurements.measurements
    A = m.block.dense().astype(np.int64).astype(object)
    exact = A.dot(counts.ravel().astype(object))
    answers = m.block.answers(counts.ravel())
    assert answers.dtype == exact_dtype and [int(v) for v in answers] == list(exact)
    if exact_dtype is np.int64:
        assert np.any(np.rint(m.block.matvec(counts.ravel())).astype(np.int64) != answers)  # float rounds
    noise = m.noise.sample(exact.shape, resolve_rng(11))
    want = exact + noise
    np.testing.assert_array_equal(m.values, want.astype(float) if exact_dtype is object else want.astype(np.int64))


@pytest.mark.usefixtures("private_cache")
def test_a_saved_release_whose_rebuilt_strategy_differs_is_refused():
    """optimized_kronecker's JSON rebuilds its axes' strategies (disk cache or a new
    optimisation).  Where the cache at the key holds another well-formed strategy (here the
    all-ranges one at the prefixes' key), the noise scale can still match (it did on 24 x 3),
    and the loaded estimate moved by up to 7.7; the saved digest of the measured integer
    design now refuses it, and a release whose strategy is rebuilt the same loads as before."""
    shape = (24, 3)
    counts = np.random.default_rng(1).poisson(5, shape)
    release = OptimizedKronecker("prefix-rectangles", template="p-identity").release(counts, 1.0, rng=1)
    saved = release.to_json()
    np.testing.assert_allclose(
        load_grid_release(saved).rectangle([[0, 0]], [[9, 2]]).value, release.rectangle([[0, 0]], [[9, 2]]).value
    )
    p = default_rows(24, "p-identity")
    Optimized("all-range", template="p-identity").strategy(24)
    planted = cache_path(make_workload("all-range", 24), "p-identity", p, 1)
    shutil.copy(planted, cache_path(make_workload("prefix", 24), "p-identity", p, 1))
    with pytest.raises(DataError, match="strategy"):
        load_grid_release(saved)


# ----------------------------------------------------------------------------- explicit rectangles


def prefix_by_short_rectangles(n: int, count: int, seed: int) -> Rectangles:
    """Rectangles that are a prefix on axis 0 and a range of width at most 4 on axis 1 (a CDF
    of one column within narrow bands of another): no fixed product is made for them."""
    rng = np.random.default_rng(seed)
    top, start = rng.integers(0, n, count), rng.integers(0, n, count)
    end = np.minimum(start + rng.integers(0, 4, count), n - 1)
    return Rectangles((n, n), np.stack([np.zeros(count, dtype=np.int64), start], 1), np.stack([top, end], 1))


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_explicit_rectangles_error_is_the_dense_least_squares_error(neighbours):
    """The exact error on explicit rectangles (the identity comparison's and expected_error's)
    is the mean of q^T Cov q over the rectangles with Cov from the dense product strategy
    as measured (its quantised blocks, its calibrated noise, the public total under replace)."""
    rects = prefix_by_short_rectangles(9, 60, 31)
    mech = OptimizedKronecker(rects, neighbours=neighbours)
    plan = mech.optimised_plan((9, 9), 1.0)
    (block,) = plan.blocks
    A = np.kron(block.factors[0].dense(), block.factors[1].dense())
    (spec,) = mech._noise(plan, 1.0, 0.0)
    cov = spec.variance * np.linalg.inv(A.T @ A)
    if neighbours == "replace":
        w = np.linalg.inv(A.T @ A).sum(axis=1)
        cov = cov - spec.variance * np.outer(w, w) / w.sum()
    Q = indicator((9, 9), rects.lows, rects.highs)
    dense = np.einsum("ij,jk,ik->i", Q, cov, Q).mean()
    assert mech._mean_error((9, 9), plan, 1.0) == pytest.approx(dense, rel=1e-9)
    if not mech.measures_identity((9, 9), 1.0):
        assert expected_error(mech, (9, 9), rects, 1.0) == pytest.approx(dense, rel=1e-9)


@pytest.mark.usefixtures("private_cache")
def test_explicit_rectangles_are_optimised_axis_by_axis_and_auto_takes_them():
    """Prefixes on one axis, narrow ranges on the other, 64 x 64, epsilon 1: the axes
    optimised for these rectangles (the prefix axis gets a strategy, the narrow axis keeps
    about the identity) have 2.17x less variance than the best fixed k-D strategy (the identity
    product, 149.99) and 3.1x less than the product optimised for all rectangles (217.7);
    under (1, 1e-6) the L2 optimum on each axis gains 2.58x.  auto (select_grid) ranks and
    takes them."""
    from dprange.analysis.grid import select_grid

    rects = prefix_by_short_rectangles(64, 2000, 0)
    for delta, gain in ((0.0, 2.1), (1e-6, 2.5)):
        chosen = select_grid((64, 64), 1.0, workload=rects, delta=delta)
        assert isinstance(chosen.mechanism, OptimizedKronecker) and chosen.mechanism.workload is rects
        fixed = min(c.error for c in chosen.table if not isinstance(c.mechanism, OptimizedKronecker))
        assert fixed >= gain * chosen.error
    product = expected_error(OptimizedKronecker("all-rectangles"), (64, 64), rects, 1.0)
    assert product >= 3.0 * expected_error(OptimizedKronecker(rects), (64, 64), rects, 1.0)


@pytest.mark.usefixtures("private_cache")
def test_the_kept_pass_has_the_least_loss_and_the_first_starts_from_the_identity(monkeypatch):
    """Random rectangles on 24 x 20: the second pass lowers the loss (66.671 -> 66.660) and
    the strategies kept are the second pass's, their loss sum_q prod_a r_qa^T S_a r_qa
    recomputed from them; the first pass optimises the first axis against the identity on the
    other (weights = its lengths, normalised to mean 1)."""
    from dprange.mechanisms import optimized_grid as okd

    rng = np.random.default_rng(0)
    ends = np.stack([rng.integers(0, 24, (300, 2)), rng.integers(0, 20, (300, 2))], 1)
    rects = Rectangles((24, 20), ends.min(2), ends.max(2))
    seen = []
    original = okd.OptimizedKronecker._axis_strategy
    monkeypatch.setattr(
        okd.OptimizedKronecker,
        "_axis_strategy",
        lambda self, mech, n, axis: seen.append(mech.workload.weights.copy()) or original(self, mech, n, axis),
    )
    mech = OptimizedKronecker(rects)
    passes = mech.describe_strategy((24, 20), 1.0)["pass_losses"]
    assert len(passes) == 2 and passes[1] < passes[0] * (1 - 1e-5)
    factors = [
        PIdentityEstimate(s.block.diagonal, s.block.rows, 1.0).range_variance(rects.lows[:, a], rects.highs[:, a])
        * s.factor**2
        for a, (n, s) in enumerate(zip((24, 20), mech.axis_strategies((24, 20))))
    ]
    assert np.mean(factors[0] * factors[1]) == pytest.approx(min(passes), rel=1e-12)
    lengths = rects.highs[:, 1] - rects.lows[:, 1] + 1.0
    np.testing.assert_allclose(seen[0], lengths / lengths.mean(), rtol=1e-12)
    assert len(seen) == 2 * 2  # two passes over two axes


@pytest.mark.usefixtures("private_cache")
def test_explicit_rectangles_round_trip_and_a_wrong_grid_is_refused():
    """The saved parameters hold the rectangles (shape, lows, highs) and rebuild the same
    mechanism; a release loads with the same error bars; the repr is short; rectangles on
    another grid are refused before anything is measured."""
    rects = prefix_by_short_rectangles(16, 50, 32)
    counts = np.random.default_rng(33).poisson(5, (16, 16))
    mech = OptimizedKronecker(rects)
    params = mech.parameters()
    assert params["workload"]["shape"] == [16, 16] and len(params["workload"]["lows"]) == 50
    again = OptimizedKronecker(**json.loads(json.dumps(params)))
    np.testing.assert_array_equal(again.workload.highs, rects.highs)
    assert "Rectangles(shape=[16, 16], rectangles=50)" in repr(mech) and len(repr(mech)) < 200
    release = mech.release(counts, 1.0, rng=34)
    loaded = load_grid_release(release.to_json())
    np.testing.assert_allclose(
        loaded.rectangle(rects.lows, rects.highs).value, release.rectangle(rects.lows, rects.highs).value
    )
    np.testing.assert_allclose(
        loaded.rectangle(rects.lows, rects.highs).stderr, release.rectangle(rects.lows, rects.highs).stderr
    )
    with pytest.raises(ParameterError, match=r"rectangles are on a \[16, 16\] grid"):
        OptimizedKronecker(rects).plan((16, 12), 1.0)
    with pytest.raises(ParameterError, match="saved rectangles"):
        OptimizedKronecker({"shape": [4, 4], "lows": [[0, 0]]})


@pytest.mark.usefixtures("private_cache")
def test_three_axes_of_explicit_rectangles_keep_their_own_coarser_strategies():
    """On 12 x 12 x 12 (three optimised axes at epsilon 1: each quantised coarser) the axes of
    the same size get their own strategies (a prefix, a prefix of at least half the axis and
    one of two long prefixes per rectangle), each measured at its own coarse quantisation; the exact error is
    the dense one."""
    rng = np.random.default_rng(35)
    count = 80
    lows = np.zeros((count, 3), dtype=np.int64)
    highs = np.stack([rng.integers(0, 12, count), rng.integers(6, 12, count), np.full(count, 10)], 1)
    highs[::2, 2] = 11
    rects = Rectangles((12, 12, 12), lows, highs)
    mech = OptimizedKronecker(rects)
    bits = mech.quantisation_bits((12, 12, 12), 1.0)
    strategies = mech.axis_strategies((12, 12, 12))
    assert bits < 16 and all(np.any(s.theta) for s in strategies)
    assert not np.array_equal(strategies[0].theta, strategies[1].theta)
    plan = mech.optimised_plan((12, 12, 12), 1.0)
    for factor, strategy in zip(plan.blocks[0].factors, strategies):
        expected = strategy.quantised(2.0**-bits, keep_norms=True)[1]
        np.testing.assert_array_equal(factor.dense(), expected.dense())
    # A rectangle's q^T (A^T A)^-1 q is the product of the axes' dense q_a^T (A_a^T A_a)^-1 q_a
    # (the 9 x 9 test above checks the whole product densely; here the product's A^T A has
    # condition 8e10 and its 1728^2 tiny entries of both signs cancel in float64 to 1e-7)
    (spec,) = mech._noise(plan, 1.0, 0.0)
    per_axis = []
    for a, factor in enumerate(plan.blocks[0].factors):
        Q = indicator((12,), lows[:, [a]], highs[:, [a]])
        per_axis.append(np.einsum("ij,jk,ik->i", Q, np.linalg.inv(factor.dense().T @ factor.dense()), Q))
    dense = spec.variance * np.mean(np.prod(per_axis, axis=0))
    assert mech._mean_error((12, 12, 12), plan, 1.0) == pytest.approx(dense, rel=1e-9)


@pytest.mark.usefixtures("private_cache")
def test_monte_carlo_agrees_with_the_exact_variances_of_explicit_rectangles():
    """200 seeded releases (float Laplace) with the axes optimised for prefix-by-narrow
    rectangles of 12 x 6: each rectangle's empirical variance within 4 sd of the exact one
    (as in the Monte-Carlo test above) and the mean error within 4 standard errors of 0."""
    shape, reps = (12, 6), 200
    rng = np.random.default_rng(36)
    start = rng.integers(0, 6, 40)
    lows = np.stack([np.zeros(40, dtype=np.int64), start], 1)
    rects = Rectangles(shape, lows, np.stack([rng.integers(0, 12, 40), np.minimum(start + 1, 5)], 1))
    counts = np.random.default_rng(37).integers(0, 30, shape)
    mech = OptimizedKronecker(rects, noise="laplace_float")
    assert not mech.measures_identity(shape, 1.0)
    truth = indicator(shape, rects.lows, rects.highs) @ counts.ravel()
    answers = np.array([mech.release(counts, 1.0, rng=s).rectangle(rects.lows, rects.highs).value for s in range(reps)])
    exact = mech.error_model(shape, 1.0).rectangle_variance(rects.lows, rects.highs)
    assert np.var(answers, axis=0) == pytest.approx(exact, rel=4 * np.sqrt(5 / reps))
    assert np.all(np.abs(answers.mean(axis=0) - truth) <= 4 * np.sqrt(exact / reps))


@pytest.mark.usefixtures("private_cache")
def test_auto_optimises_explicit_rectangles_on_axes_up_to_its_limit():
    """Cold, auto builds the axes for explicit rectangles up to RECTANGLE_AUTO_MAX_N bins, and
    never past the 1-D template's own limit."""
    from dprange.mechanisms import optimized_grid as okd

    rects = Rectangles((8, 8), [[0, 0]], [[3, 5]])
    limit = okd.RECTANGLE_AUTO_MAX_N
    assert OptimizedKronecker(rects).axis_ready(limit) and not OptimizedKronecker(rects).axis_ready(limit + 1)
    assert not OptimizedKronecker(rects, template="p-identity-l2").axis_ready(256)  # the L2 template's 128


@pytest.mark.usefixtures("private_cache")
def test_the_svd_bound_of_explicit_rectangles_is_that_of_their_dense_matrix_and_bounds_every_mechanism(monkeypatch):
    """grid_analysis.svd_bound of a Rectangles equals the 1-D bound of the dense rectangle matrix
    (Li and Miklau's bound depends on W only), lies below the exact error of every candidate
    auto ranks (the optimised product included), and is refused past RECTANGLES_SVD_MAX_CELLS."""
    from dprange.analysis import grid as grid_analysis
    from dprange.analysis import svd_bound as svd_bound_1d
    from dprange.analysis.grid import select_grid, svd_bound
    from dprange.workloads import Explicit

    rects = prefix_by_short_rectangles(12, 150, 38)
    for delta in (0.0, 1e-6):
        bound = svd_bound((12, 12), rects, 1.0, delta)
        assert bound == pytest.approx(svd_bound_1d(Explicit(rects.dense()), 1.0, delta), rel=1e-12)
        table = select_grid((12, 12), 1.0, workload=rects, delta=delta).table
        assert any(isinstance(c.mechanism, OptimizedKronecker) for c in table)
        assert all(c.error > bound for c in table)
    with pytest.raises(ParameterError, match="grid, not"):
        svd_bound((12, 11), rects, 1.0)
    monkeypatch.setattr(grid_analysis, "RECTANGLES_SVD_MAX_CELLS", 100)
    with pytest.raises(ParameterError, match="at most 100 cells"):
        svd_bound((12, 12), rects, 1.0)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_explicit_rectangles_sensitivity_and_calibration_are_the_definitions(neighbours, delta):
    """The product optimised for explicit rectangles (optimised axes, not the identity): its
    L1 / L2 sensitivity equals the definition on the dense measured matrix, both relations, and
    its calibrated noise spends at most epsilon by the definition (L1 for Laplace; for the
    Gaussian, sigma is gaussian_sigma of the definition's L2 sensitivity)."""
    rects = prefix_by_short_rectangles(12, 60, 39)
    mech = OptimizedKronecker(rects, neighbours=neighbours)
    mech.follow_delta(delta)
    plan = mech.optimised_plan((12, 12), 1.0)
    assert any(np.any(s.theta) for s in mech.axis_strategies((12, 12)))
    dense = plan.blocks[0].dense()
    for p in (1, 2):
        exact = float(plan.sensitivity_power(p, neighbours))
        assert exact == pytest.approx(float(definition_sensitivity_power(dense, p, neighbours)), rel=1e-12)
    (spec,) = mech._noise(plan, 1.0, delta)
    if delta == 0:
        assert float(definition_sensitivity_power(dense / spec.scale, 1, neighbours)) <= 1.0 * (1 + 1e-12)
    else:
        l2 = float(definition_sensitivity_power(dense, 2, neighbours)) ** 0.5
        assert spec.scale >= gaussian_sigma(1.0, delta, l2) * (1 - 1e-12)


@pytest.mark.usefixtures("private_cache")
def test_more_extra_rows_than_an_axis_bins_are_refused_naming_the_axis():
    from dprange.mechanisms.optimized_grid import OptimizedKronecker

    with pytest.raises(ParameterError, match=r"optimized_kronecker, axis 1 \(5 bins\): rows=6 is more than the 5"):
        OptimizedKronecker(rows=6).plan((6, 5), 1.0)


def test_optimized_kronecker_takes_an_axis_of_eight_bins(private_cache):
    counts = np.random.default_rng(0).poisson(5, (8, 3))
    release = OptimizedKronecker("prefix-rectangles").release(counts, 1.0, rng=2)
    assert release.rectangle(np.array([[0, 0]]), np.array([[7, 2]])).value.shape == (1,)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize(("shape", "epsilon"), [((20, 20), 1.0), ((24, 24), 5.0)])
def test_the_optimised_product_falls_back_to_the_identity_product(shape, epsilon):
    """All rectangles of 20 x 20 at epsilon 1: the product of the optimised axes had 106.70
    against the identity product's 99.02."""
    error = grid_expected_error(OptimizedKronecker("all-rectangles"), shape, "all-rectangles", epsilon)
    identity = grid_expected_error(Kronecker("identity"), shape, "all-rectangles", epsilon)
    assert error == pytest.approx(identity, rel=1e-9)


@pytest.mark.usefixtures("private_cache")
def test_the_optimised_product_is_kept_where_lower():
    mech = OptimizedKronecker("all-rectangles")
    error = grid_expected_error(mech, (32, 32), "all-rectangles", 1.0)
    assert error == pytest.approx(204.8307, rel=1e-5)
    assert any(block.rows.shape[0] for block in mech.plan((32, 32), 1.0).blocks[0].factors)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_an_identity_product_release_round_trips(neighbours):
    counts = np.random.default_rng(1).poisson(5, (20, 20))
    mech = OptimizedKronecker("all-rectangles", neighbours=neighbours)
    release = mech.release(counts, 1.0, rng=3)
    assert not any(f.rows.shape[0] for f in release.measurements.blocks[0].factors)
    loaded = load_grid_release(release.to_json())
    np.testing.assert_array_equal(loaded.estimate.leaves, release.estimate.leaves)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize(("n", "saved_identity"), [(20, False), (32, True)])
def test_a_release_measured_with_the_other_product_still_loads(monkeypatch, n, saved_identity):
    """Releases saved before the identity comparison measured the optimised product on 20 x 20
    at epsilon 1 (the current design is the identity product); a release that measured the
    identity product was compared with the optimised axes of its time (the disk cache, another
    optimisation, a later version), where 32 x 32 now keeps the optimised product.  Both load
    as measured, and a tampered noise scale is still refused."""
    counts = np.random.default_rng(1).poisson(5, (n, n))
    with monkeypatch.context() as patch:  # the choice as it was when the release was saved
        patch.setattr(OptimizedKronecker, "identity_is_lower", lambda *args: saved_identity)
        saved = OptimizedKronecker("all-rectangles").release(counts, 1.0, rng=3)
    assert any(f.rows.shape[0] for f in saved.measurements.blocks[0].factors) is not saved_identity
    assert OptimizedKronecker("all-rectangles").measures_identity((n, n), 1.0) is not saved_identity
    loaded = load_grid_release(saved.to_json())
    np.testing.assert_array_equal(loaded.estimate.leaves, saved.estimate.leaves)
    lows, highs = np.array([[0, 0], [3, 5]]), np.array([[n - 1, n - 1], [10, 7]])
    np.testing.assert_array_equal(loaded.rectangle(lows, highs).stderr, saved.rectangle(lows, highs).stderr)
    tampered = saved.to_dict()
    tampered["measurements"][0]["noise"]["scale"] *= 0.5
    with pytest.raises(DataError, match="does not match its design"):
        load_grid_release(tampered)


@pytest.mark.usefixtures("private_cache")
def test_auto_skips_optimised_marginals_on_many_axes(monkeypatch):
    calls = []
    monkeypatch.setattr(optimized_kd, "optimize_marginals", lambda *a, **k: calls.append(a) or (None, 0.0))
    shape = (2,) * (AUTO_MARGINALS_MAX_AXES + 1)
    assert kd_auto_candidates(shape, workload="marginals", order=2) == [] and calls == []


@pytest.mark.usefixtures("private_cache")
def test_template_auto_under_delta_round_trips_through_json():
    """The saved parameters say template 'auto'; the loader plans at the saved delta (it
    planned the L1 template before: 1000 saved values against 714 rows)."""
    counts = np.random.default_rng(3).poisson(9, (32, 20))
    release = OptimizedKronecker().release(counts, 1.0, delta=1e-6, rng=5)
    loaded = load_grid_release(release.to_json())
    lows, highs = [[0, 0], [3, 7], [10, 0]], [[31, 19], [20, 8], [10, 19]]
    np.testing.assert_allclose(loaded.rectangle(lows, highs).value, release.rectangle(lows, highs).value)
    np.testing.assert_allclose(loaded.rectangle(lows, highs).stderr, release.rectangle(lows, highs).stderr)

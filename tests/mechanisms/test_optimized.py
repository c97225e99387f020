"""Optimised 1-D strategies (dprange.mechanisms.optimized): the Optimized mechanism's exact error
(the matrix mechanism's on the measured strategy), Monte-Carlo, JSON round trips, the identity
measured where its error as released is lower, replace neighbours, the Woodbury release path,
and auto's choice among the optimised templates and the cache."""

import json

import numpy as np
import pytest
from _helpers import bounded_ranges, cached_templates, measured, short_ranges

import dprange
import dprange.inference.p_identity as pid
from dprange.analysis import expected_error, l2_optimum_bound, select, svd_bound
from dprange.answers.release import load_release
from dprange.errors import ParameterError
from dprange.inference.p_identity import DiagonalPlusRows, PIdentityEstimate
from dprange.mechanisms.basic import Flat
from dprange.mechanisms.matrix import Matrix
from dprange.mechanisms.optimized import (
    AUTO_CACHED_MAX_N,
    AUTO_DENSE_MAX_N,
    AUTO_OPTIMIZE_FAST_MAX_N,
    AUTO_OPTIMIZE_MAX_N,
    Optimized,
    auto_candidate,
    auto_candidates,
    auto_optimise_limit,
)
from dprange.mechanisms.optimized_grid import OptimizedKronecker
from dprange.operators import definition_sensitivity_power
from dprange.optimize.cache import cache_path
from dprange.optimize.p_identity import (
    Gram,
    default_rows,
    p_identity_matrix,
)
from dprange.strategies.matrix import DENSE_COVARIANCE_LIMIT
from dprange.workloads import AllRange, Explicit, Prefix, Ranges, make_workload


def prefix_identity_mix(n):
    return Explicit(np.vstack([np.tril(np.ones((n, n))), np.eye(n)]))


def best_fixed(workload, epsilon=1.0, delta=0.0):
    """The best error among the mechanisms auto ranks, without the optimised one."""
    cands = [c for c in select(workload, None, epsilon, delta=delta).table if not isinstance(c.mechanism, Optimized)]
    return min(c.error for c in cands)


# ----------------------------------------------------------------------------- the mechanism


@pytest.mark.usefixtures("private_cache")
def test_exact_error_is_the_matrix_mechanisms_on_the_measured_strategy():
    """Optimized is the matrix mechanism on its quantised strategy: p-identity when delta = 0,
    the exact L2 optimum when delta > 0 (template auto: its trace is below the L2 template's),
    the L2 template and the eigen-design when asked."""
    for delta, given, template in (
        (0.0, "auto", "p-identity"),
        (1e-6, "eigen", "eigen"),
        (1e-6, "p-identity-l2", "p-identity-l2"),
        (1e-6, "auto", "l2-optimal"),
    ):
        mech = Optimized("prefix", template=given)
        for workload in (Prefix(24), AllRange(24)):
            error = expected_error(mech, workload, 1.0, delta=delta)
            strategy = mech.strategy(24)
            assert strategy.template == template and not strategy.cached
            same = Matrix(strategy.explicit())
            assert error == pytest.approx(expected_error(same, workload, 1.0, delta=delta), rel=1e-9)


UNUSUAL = {
    "bounded-ranges": lambda: bounded_ranges(64, 300, 16),
    "prefix+identity": lambda: prefix_identity_mix(64),
    "explicit-0/1": lambda: Explicit(np.random.default_rng(0).integers(0, 2, size=(40, 64))),
}


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize(
    "name,delta,gain",
    [
        ("explicit-0/1", 1e-6, 1.85),  # measured 1.90 (the exact L2 optimum): the issue's 1.5x is met here
        ("bounded-ranges", 1e-6, 1.25),  # measured 1.277, the most any matrix mechanism gains (below)
        ("prefix+identity", 0.0, 1.15),  # measured 1.18
        ("explicit-0/1", 0.0, 1.03),  # measured 1.05
    ],
)
def test_optimised_beats_the_best_fixed_strategy_on_unusual_workloads(name, delta, gain):
    """The gains measured at n = 64 (docs/optimized.md): below the issue's 1.5x except for
    the explicit 0/1 matrix under (epsilon, delta); bounded ranges under pure epsilon-DP lose
    (0.94x), where auto keeps the hierarchy (test below)."""
    workload = UNUSUAL[name]()
    optimised = expected_error(Optimized(workload), workload, 1.0, delta=delta)
    assert best_fixed(workload, delta=delta) >= gain * optimised


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("name", list(UNUSUAL))
def test_under_eps_delta_the_optimum_reaches_the_least_error_of_any_matrix_mechanism(name):
    """Template auto with delta > 0 measures the exact L2 optimum (n <= 1024): its error as
    released is within 0.1% of ``l2_optimum_bound``, below which no matrix mechanism with
    dprange's Gaussian goes; so best fixed / optimised is the most any strategy can gain."""
    workload = UNUSUAL[name]()
    optimised = expected_error(Optimized(workload), workload, 1.0, delta=1e-6)
    bound = l2_optimum_bound(workload, 1.0, 1e-6)
    assert bound <= optimised <= 1.001 * bound


@pytest.mark.usefixtures("private_cache")
def test_monte_carlo_variance_agrees_with_the_exact_error():
    """400 seeded releases of a fixed histogram: the empirical variance of every prefix is
    within 25% of the exact one (chi-square: sd of a variance estimate is sqrt(2/400) = 7%)
    and the mean error is within 4 standard errors of 0."""
    n, reps = 16, 400
    mech = Optimized("prefix", noise="laplace_float")
    counts = np.random.default_rng(1).integers(0, 40, n)
    truth = np.cumsum(counts)
    answers = np.array([mech.release(counts, 1.0, rng=seed).prefix(np.arange(n)).value for seed in range(reps)])
    exact = mech.error_model(n, 1.0).range_variance(np.zeros(n, dtype=int), np.arange(n))
    assert np.var(answers, axis=0) == pytest.approx(exact, rel=0.25)
    assert np.all(np.abs(answers.mean(axis=0) - truth) <= 4 * np.sqrt(exact / reps))


def without_cache_state(described: dict) -> dict:
    """A strategy's description without whether it (or a strategy built with it) was read from
    or stored in the disk cache: a mechanism rebuilt after a release reads them from it."""
    kept = {k: v for k, v in described.items() if k not in ("cached", "stored")}
    if "also_built" in kept:
        kept["also_built"] = [{k: v for k, v in other.items() if k != "cached"} for other in kept["also_built"]]
    return kept


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize(("epsilon", "measured"), [(0.5, "optimised"), (5.0, "identity")])
def test_release_round_trips_through_json(tmp_path, epsilon, measured):
    """The saved strategy says what was measured (at epsilon 5 the identity: lower error as
    released: test_at_epsilon_5_the_identity_is_measured_where_it_is_lower); the mechanism rebuilt from the saved
    parameters at the saved privacy measures the same strategy."""
    counts = np.random.default_rng(2).poisson(20, 30)
    release = Optimized("all-range").release(counts, epsilon, rng=4)
    path = tmp_path / "r.json"
    release.to_json(path)
    loaded = load_release(path)
    np.testing.assert_array_equal(loaded.estimate, release.estimate)
    lo, hi = np.triu_indices(30)
    np.testing.assert_array_equal(loaded.range(lo, hi).stderr, release.range(lo, hi).stderr)
    saved = json.loads(path.read_text())
    strategy = saved["parameters"]["strategy"]
    assert strategy["template"] == "p-identity" and strategy["optimisation_seconds"] >= 0
    assert strategy["measured"] == measured and (strategy["quantisation_factor"] == 1) == (measured == "identity")
    rebuilt = Optimized(**{k: v for k, v in saved["parameters"].items() if k != "strategy"})
    design = rebuilt.design(30, saved["privacy"]["epsilon"], delta=saved["privacy"]["delta"])
    assert without_cache_state(rebuilt.strategy(30).describe()) == without_cache_state(strategy)
    assert design.blocks[0].shape == (strategy["rows"], 30)


@pytest.mark.usefixtures("private_cache")
def test_bad_parameters_are_refused():
    with pytest.raises(ParameterError, match="workload"):
        Optimized(42)
    with pytest.raises(ParameterError, match="unknown workload"):
        Optimized("no-such-workload")
    with pytest.raises(ParameterError, match="optimised for 10 bins"):
        Optimized(Prefix(10)).strategy(12)
    with pytest.raises(ParameterError, match="n <= 4096"):
        Optimized().strategy(5000)


@pytest.mark.usefixtures("private_cache")
def test_more_extra_rows_than_bins_are_refused_before_optimising(monkeypatch):
    """rows = p above n was accepted and cost O(n p^2) a step (100 bins, p = 1000: 22 s), for
    a template with at most n useful extra rows; refused at strategy time, with the default."""

    def no_optimisation(*args, **kwargs):
        raise AssertionError("optimised")

    monkeypatch.setattr(dprange.mechanisms.optimized, "optimize_p_identity", no_optimisation)
    for template, default in (("p-identity", 6), ("p-identity-l2", 25), ("dense", 6), ("auto", 6)):
        with pytest.raises(ParameterError) as exc:
            Optimized(rows=101, template=template).strategy(100)
        assert str(exc.value).startswith("rows=101 is more than the 100 bins the strategy is optimised for")
        assert f"give rows <= 100, or rows=0 for the default ({default} here" in str(exc.value)
    counts = np.ones(100, dtype=int)
    with pytest.raises(ParameterError, match="rows=1000 is more than the 100 bins"):
        dprange.release(counts, dprange.Domain.integers(0, 99), 1.0, mechanism=Optimized(rows=1000))
    assert Optimized(rows=1000, template="eigen").strategy(12).template == "eigen"  # rows unused there


# ----------------------------------------------------------------------------- auto


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("delta", [0.0, 1e-6])
@pytest.mark.parametrize("name", ["bounded-ranges", "prefix+identity"])
def test_auto_ranks_the_optimised_strategy_and_returns_the_least_error(delta, name):
    workload = UNUSUAL[name]()
    selection = select(workload, None, 1.0, delta=delta)
    assert any(isinstance(c.mechanism, Optimized) for c in selection.table)
    assert selection.error == min(c.error for c in selection.table)
    assert selection.error == pytest.approx(expected_error(selection.mechanism, workload, 1.0, delta=delta))


@pytest.mark.usefixtures("private_cache")
def test_auto_optimises_only_small_domains_unless_cached():
    """p-Identity and, under add/remove, the L2 optimum are optimised up to 1024 bins (a few
    seconds at most); the L2 template and the replace programs up to 128."""
    assert auto_optimise_limit("p-identity", "add_remove") == auto_optimise_limit("p-identity", "replace") == 1024
    assert auto_optimise_limit("l2-optimal", "add_remove") == AUTO_OPTIMIZE_FAST_MAX_N == 1024
    assert auto_optimise_limit("l2-optimal", "replace") == auto_optimise_limit("p-identity-l2", "add_remove") == 128
    kw = {"noise": "auto"}
    assert auto_candidate(AllRange(AUTO_OPTIMIZE_FAST_MAX_N + 1), 0.0, neighbours="add_remove", **kw) is None
    assert auto_candidate(AllRange(AUTO_OPTIMIZE_MAX_N + 1), 1e-6, neighbours="replace", **kw) is None
    assert auto_candidate(AllRange(AUTO_OPTIMIZE_MAX_N + 1), 0.0, neighbours="add_remove", **kw) is not None
    assert auto_candidate(Prefix(8), 0.0, neighbours="add_remove", **kw) is not None


@pytest.mark.usefixtures("private_cache")
def test_auto_ranks_the_l2_optimum_alone_under_add_remove():
    """Under add/remove the L2 template is a point of the L2 optimum's program, so auto ranks
    the optimum alone (as template auto builds it alone); under replace both."""
    kw = {"noise": "auto"}
    assert [m.template for m in auto_candidates(Prefix(16), 1e-6, neighbours="add_remove", **kw)] == ["l2-optimal"]
    replace = auto_candidates(Prefix(16), 1e-6, neighbours="replace", **kw)
    assert [m.template for m in replace] == ["p-identity-l2", "l2-optimal"]


@pytest.mark.usefixtures("private_cache")
def test_auto_says_when_it_leaves_out_an_optimised_strategy_that_is_not_cached(capsys):
    """Above auto_optimise_limit (p-Identity: 1024) bins auto ranks the optimised strategy only once it is cached;
    the selection (and dprange error) says so instead of leaving it out silently."""
    from dprange.cli import main

    n = AUTO_OPTIMIZE_FAST_MAX_N + 1
    selection = select("prefix", n, 1.0)
    assert not any(isinstance(c.mechanism, Optimized) for c in selection.table)
    ((left_out, reason),) = [(m, r) for m, r in selection.excluded if isinstance(m, Optimized)]
    assert isinstance(left_out.workload, Prefix) and left_out.template == "p-identity"
    assert f"no cached strategy for {n} bins" in reason and "mechanism='optimized'" in reason
    with pytest.raises(SystemExit):
        main(["error", "--n", str(n), "-w", "prefix", "-e", "1"])
    assert f"excluded {left_out!r}: {reason}" in capsys.readouterr().out
    Optimized("prefix").strategy(n)  # cached now: ranked, nothing left out
    selection = select("prefix", n, 1.0)
    assert any(isinstance(c.mechanism, Optimized) for c in selection.table) and not selection.excluded


@pytest.mark.usefixtures("private_cache")
def test_auto_ranks_a_cached_strategy_up_to_the_dense_covariance_limit(monkeypatch, tmp_path):
    """A cached L2 optimum ((epsilon, delta)) is ranked up to AUTO_CACHED_MAX_N = 4096 bins,
    every size it is solved for (its dense release: about 16 s with 10^6 records at 4096), a
    cached p-Identity strategy up to 4096 too (Woodbury); nothing above 4096."""
    monkeypatch.setattr(Optimized, "cache_state", lambda *args, **kwargs: "cached")  # every size "cached"
    kw = {"neighbours": "add_remove", "noise": "auto"}

    def templates(n, delta):
        return [m.template for m in auto_candidates(AllRange(n), delta, **kw)]

    assert AUTO_CACHED_MAX_N == DENSE_COVARIANCE_LIMIT == 4096
    assert templates(AUTO_CACHED_MAX_N, 1e-6) == ["l2-optimal"]  # the L2 template is a point of its program
    assert templates(4096, 0.0) == ["p-identity"]
    assert templates(4097, 0.0) == [] == templates(4097, 1e-6) and auto_candidate(AllRange(4097), 0.0, **kw) is None


def damage(path, how: str) -> None:
    """Replace a cache file by one that does not load (empty) or does not fit (a NaN)."""
    if how == "empty":
        path.write_bytes(b"")
    else:
        np.savez(path, theta=np.full((2, 3), np.nan), seconds=np.array(1.0), trace=np.array(2.0))


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("how", ["empty", "nan"])
def test_auto_lists_a_damaged_cache_file_as_not_cached_and_never_optimises(monkeypatch, how):
    """auto took a cache file's existence for a cached strategy: a damaged one was ranked as
    cached, then optimised again inside select (about 16 s at 4096 bins), which promised to
    use only cached strategies.  It is now excluded with its reason, nothing optimised."""
    n = AUTO_OPTIMIZE_FAST_MAX_N + 1
    Optimized("prefix").strategy(n)
    path = cache_path(Prefix(n), "p-identity", n // 16, 1)
    assert path.exists()
    damage(path, how)

    def no_optimisation(*args, **kwargs):
        raise AssertionError("optimised inside auto")

    monkeypatch.setattr(dprange.mechanisms.optimized, "optimize_p_identity", no_optimisation)
    selection = select("prefix", n, 1.0)
    assert not any(isinstance(c.mechanism, Optimized) for c in selection.table)
    ((left_out, reason),) = [(m, r) for m, r in selection.excluded if isinstance(m, Optimized)]
    assert left_out.template == "p-identity"
    assert f"the cached strategy for {n} bins is damaged" in reason and "mechanism='optimized'" in reason


@pytest.mark.usefixtures("private_cache")
def test_auto_reads_a_cached_strategy_once(monkeypatch):
    """'Cached' means the file loads and fits; auto reads it once per call (the check keeps
    the arrays for the strategy it then builds)."""
    n = AUTO_OPTIMIZE_FAST_MAX_N + 1
    Optimized("prefix").strategy(n)
    reads = []
    real = dprange.optimize.cache._load
    monkeypatch.setattr(
        dprange.mechanisms.optimized, "_load", lambda path, *a, **k: reads.append(path) or real(path, *a, **k)
    )
    selection = select("prefix", n, 1.0)
    assert isinstance(selection.mechanism, Optimized) and selection.mechanism.strategy(n).cached
    assert len(reads) == 1


@pytest.mark.usefixtures("private_cache")
def test_auto_builds_the_dense_template_only_from_a_cache_file_that_loads(monkeypatch):
    """template auto (delta = 0) builds the dense template above AUTO_DENSE_MAX_N bins only
    when it is cached: a damaged file counted as cached and the dense template (O(n^3) a
    step) was optimised."""
    n = AUTO_DENSE_MAX_N + 1
    path = cache_path(Prefix(n), "dense", default_rows(n), 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")

    def no_dense(*args, **kwargs):
        raise AssertionError("dense template optimised")

    monkeypatch.setattr(dprange.mechanisms.optimized, "optimize_dense_template", no_dense)
    assert Optimized("prefix").strategy(n).template == "p-identity"


@pytest.mark.usefixtures("private_cache")
def test_release_with_auto_uses_the_optimised_strategy_where_it_is_best():
    counts = np.random.default_rng(0).integers(0, 9, 64)
    release = dprange.release(counts, dprange.Domain.integers(0, 63), 1.0, mechanism="auto", rng=0)
    assert release.mechanism == "optimized"


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("workload", ["prefix", Ranges([0, 5, 20], [9, 30, 31], 32)])
def test_a_named_optimised_mechanism_is_optimised_for_the_release_workload(workload):
    """mechanism="optimized" with workload= optimises for that workload (it was optimised for
    all ranges whatever the workload), with the error of Optimized(workload)."""
    chosen = dprange.api.choose_mechanism("optimized", 32, 1.0, workload=workload)
    assert chosen.workload is workload or chosen.workload == workload
    counts = np.random.default_rng(3).integers(0, 9, 32)
    release = dprange.release(counts, dprange.Domain.integers(0, 31), 1.0, mechanism="optimized", workload=workload)
    expected = Optimized(workload).error_model(32, 1.0)
    lo, hi = np.triu_indices(32)
    np.testing.assert_allclose(release.range(lo, hi).stderr, np.sqrt(expected.range_variance(lo, hi)), rtol=1e-12)
    with pytest.raises(ParameterError, match="unknown workload"):
        dprange.release(counts, dprange.Domain.integers(0, 31), 1.0, mechanism="optimized", workload="no-such")


@pytest.mark.usefixtures("private_cache")
def test_the_optimised_mechanisms_are_exported_like_the_others():
    """The README's mechanism table names Optimized beside Flat and Matrix: dprange.Optimized
    (and the k-D OptimizedKronecker, OptimizedMarginals) work as dprange.Flat does."""
    import dprange.mechanisms.optimized_grid as optimized_kd

    assert dprange.Optimized is Optimized
    assert dprange.OptimizedKronecker is optimized_kd.OptimizedKronecker
    assert dprange.OptimizedMarginals is optimized_kd.OptimizedMarginals
    assert {"Optimized", "OptimizedKronecker", "OptimizedMarginals"} <= set(dprange.__all__)


@pytest.mark.usefixtures("private_cache")
def test_svd_bound_is_below_the_optimised_error():
    for workload in (AllRange(32), Prefix(32)):
        assert svd_bound(workload, 1.0) <= expected_error(Optimized(workload), workload, 1.0)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize(
    "mechanism",
    [
        lambda: Optimized("all-range", template="p-identity"),
        lambda: Matrix(np.random.default_rng(2).uniform(0, 1, (80, 64))),
    ],
    ids=["p-identity", "matrix"],
)
def test_measures_the_exact_integer_answers_of_a_large_total(mechanism):
    """64 bins of about 2^47 records (2^53 in all), strategies quantised to entries near 2^16: the
    L1 p-Identity strategy's extra rows reach 2^69, which int64 wrapped modulo 2^64 (errors
    near 2^65), and an explicit matrix's answers were rounded by the float product (an error
    the sensitivity does not cover either); the measurement adds the noise to the exact
    integers (Python integers past 2^62) and rounds the noisy values to floats."""
    from dprange.privacy.samplers import resolve_rng

    counts = np.random.default_rng(1).multinomial(2**53, np.full(64, 1 / 64))
    measurements = mechanism().measure(counts, 1.0, rng=5)
    (m,) = measurements.measurements
    exact = m.block.dense().astype(np.int64).astype(object).dot(counts.astype(object))
    assert max(exact) > 2**63
    assert [int(v) for v in m.block.answers(counts)] == list(exact)
    want = exact + m.noise.sample(exact.shape, resolve_rng(5))
    np.testing.assert_array_equal(m.values, want.astype(float))


def best_fixed_under_replace(workload) -> float:
    table = select(workload, None, 1.0, neighbours="replace").table
    return min(c.error for c in table if not isinstance(c.mechanism, Optimized))


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize(("workload", "gain"), [(Prefix(64), 1.12), (AllRange(128), 1.06)])
def test_replace_optimum_beats_the_best_fixed_strategy_and_the_add_remove_optimum(workload, gain):
    """Under replace (epsilon 1) the strategy optimised with the public total gains over the
    best fixed strategy (measured 1.145x on prefixes of 64 bins, 1.082x on all ranges of 128),
    where the add/remove optimum measured under replace was behind it (prefixes of 64 bins:
    81.25 against 73.23); auto picks it."""
    n = workload.n
    mech = Optimized(workload, neighbours="replace")
    optimised = expected_error(mech, workload, 1.0)
    described = mech.strategy(n).describe()
    assert described["optimised_for"] == "replace" and described["measured"] == "optimised"
    fixed = best_fixed_under_replace(workload)
    assert optimised * gain <= fixed
    add_remove = Optimized(workload).strategy(n)
    assert add_remove.optimised_for == "add_remove"
    before = expected_error(Matrix(p_identity_matrix(add_remove.theta), neighbours="replace"), workload, 1.0)
    assert optimised < before
    selection = select(workload, None, 1.0, neighbours="replace")
    assert isinstance(selection.mechanism, Optimized)
    assert selection.error == pytest.approx(optimised, rel=1e-12)


@pytest.mark.usefixtures("private_cache")
def test_replace_strategy_has_its_own_cache_entry_and_the_kd_axes_keep_add_remove():
    """The replace strategy is cached apart from the add/remove one and read back; the dense
    template starts from the add/remove optimum under either relation; the k-D product's axes
    keep the add/remove optimum under replace (its public total is not a product of the axes')."""
    replace = Optimized("prefix", neighbours="replace").strategy(48)
    add_remove = Optimized("prefix").strategy(48)
    assert not np.allclose(replace.theta, add_remove.theta)
    again = Optimized("prefix", neighbours="replace").strategy(48)
    assert again.cached and again.optimised_for == "replace"
    np.testing.assert_array_equal(again.theta, replace.theta)
    assert Optimized("prefix").strategy(48).cached
    dense = Optimized("prefix", template="dense", neighbours="replace").strategy(48)
    assert dense.optimised_for == "add_remove"
    assert Optimized("prefix", template="dense").strategy(48).cached  # the same strategy, one file
    kd = OptimizedKronecker("prefix-rectangles", neighbours="replace")
    plain = OptimizedKronecker("prefix-rectangles")
    np.testing.assert_array_equal(kd.axis_strategies((48, 4))[0].theta, plain.axis_strategies((48, 4))[0].theta)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.slow
def test_replace_monte_carlo_variance_agrees_with_the_exact_error():
    """2000 seeded releases under replace (public total, discrete Laplace): every prefix's
    empirical variance within 20% of the exact one, the mean within 4 standard errors.  The
    errors' kurtosis is up to 5.4 here (sd of a variance estimate sqrt((5.4 - 1) / 2000) = 4.7%,
    so 20% is over 4 sd; with 400 releases the sd was 10.6% and the 31 correlated prefixes
    all ran 1.1-1.27x high at seed 0..399, where 4000 gave 0.965-1.045)."""
    n, reps = 32, 2000
    mech = Optimized("prefix", neighbours="replace")
    assert mech.strategy(n).optimised_for == "replace"
    counts = np.random.default_rng(1).integers(0, 40, n)
    truth = np.cumsum(counts)
    answers = np.array([mech.release(counts, 1.0, rng=seed).prefix(np.arange(n - 1)).value for seed in range(reps)])
    model = mech.error_model(n, 1.0)
    assert mech.strategy(n).describe()["measured"] == "optimised"
    exact = model.range_variance(np.zeros(n - 1, dtype=int), np.arange(n - 1))
    assert np.var(answers, axis=0) == pytest.approx(exact, rel=0.20)
    assert np.all(np.abs(answers.mean(axis=0) - truth[:-1]) <= 4 * np.sqrt(exact / reps))


def as_before(mech: Optimized) -> Optimized:
    """``mech`` measuring the add/remove optimum under replace, as before the replace loss."""
    mech.replace_program = lambda n, template: False  # type: ignore[method-assign]
    return mech


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("workload", [Prefix(64), AllRange(64)])
def test_replace_l2_template_is_non_negative_near_the_replace_optimum(workload):
    """Under replace at (1, 1e-6) the L2 template keeps B >= 0 (so every pair of unit columns
    moves the answers by at most sqrt(2), the value its loss assumes) and is within 4% of the
    least error of any matrix mechanism with that noise (measured 2.6% and 3.3% at 64 bins),
    below the add/remove L2 template measured under replace (127.02 against 150.68 on
    prefixes)."""
    n, delta = workload.n, 1e-6
    mech = Optimized(workload, template="p-identity-l2", neighbours="replace")
    error = expected_error(mech, workload, 1.0, delta=delta)
    strategy = mech.strategy(n)
    assert strategy.optimised_for == "replace" and np.all(strategy.theta >= 0)
    columns = p_identity_matrix(strategy.theta, 2)
    distances = np.linalg.norm(columns[:, :, None] - columns[:, None, :], axis=0)
    assert distances.max() == pytest.approx(np.sqrt(2), rel=1e-9)
    bound = l2_optimum_bound(workload, 1.0, delta, neighbours="replace")
    assert bound <= error <= 1.04 * bound
    before = expected_error(
        as_before(Optimized(workload, template="p-identity-l2", neighbours="replace")), workload, 1.0, delta=delta
    )
    assert error < before


@pytest.mark.usefixtures("private_cache")
def test_auto_under_replace_above_the_replace_program_ranks_by_the_replace_objective(monkeypatch):
    """Template auto with delta > 0 under replace: up to L2_REPLACE_MAX_N bins the replace
    program's optimum; above it the L2 template optimised for replace or the add/remove L2
    optimum, whichever has the lower replace objective (their traces are of different losses),
    which is the one of lower exact error as released."""
    import dprange.mechanisms.optimized as optimized

    monkeypatch.setattr(optimized, "L2_REPLACE_MAX_N", 32)
    for workload in (Prefix(40), AllRange(40)):
        mech = Optimized(workload, neighbours="replace")
        error = expected_error(mech, workload, 1.0, delta=1e-6)
        described = mech.strategy(40).describe()
        assert [other["template"] for other in described["also_built"]] == ["l2-optimal"]
        template = Optimized(workload, template="p-identity-l2", neighbours="replace")
        optimum = Optimized(workload, template="l2-optimal", neighbours="replace")
        errors = {
            "p-identity-l2": expected_error(template, workload, 1.0, delta=1e-6),
            "l2-optimal": expected_error(optimum, workload, 1.0, delta=1e-6),
        }
        assert template.strategy(40).optimised_for == "replace" and optimum.strategy(40).optimised_for == "add_remove"
        assert described["template"] == min(errors, key=errors.get)
        assert error == pytest.approx(min(errors.values()), rel=1e-12)
    small = Optimized(Prefix(24), neighbours="replace")
    small.design(24, 1.0, delta=1e-6)
    described = small.strategy(24).describe()
    assert described["template"] == "l2-optimal" and described["optimised_for"] == "replace"


@pytest.mark.usefixtures("private_cache")
def test_short_ranges_measure_the_identity_with_flat_s_error():
    workload = short_ranges()
    mech = Optimized(workload)
    error = expected_error(mech, workload, 1.0)
    assert error == pytest.approx(expected_error(Flat(), workload, 1.0), rel=1e-12)
    described = mech.strategy(256).describe()
    assert described["measured"] == "identity" and described["template"] == "p-identity"
    assert described["quantisation_factor"] == 1 and described["rows"] == 256
    errors = described["mean_error_as_released"]
    assert errors["identity"] == pytest.approx(error, rel=1e-12)
    assert errors["optimised"] == pytest.approx(error / 0.9206369589286394, rel=1e-6)  # 8.6% worse


@pytest.mark.usefixtures("private_cache")
def test_prefixes_plus_unit_queries_measure_the_identity():
    """Prefixes and the unit queries weighted 16: the optimised strategy as released had
    1 / 0.966 of the identity's error."""
    n = 256
    workload = Explicit(np.vstack([np.tril(np.ones((n, n))), 16 * np.eye(n)]))
    error = expected_error(Optimized(workload), workload, 1.0)
    assert error == pytest.approx(expected_error(Flat(), workload, 1.0), rel=1e-12)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("workload", ["all-range", "prefix"])
def test_at_epsilon_5_the_identity_is_measured_where_it_is_lower(workload):
    """At epsilon 5 the discrete Laplace of sensitivity 1 has 0.0137 where the optimised
    strategy's noise per unit is 0.08: on all ranges of 64 bins the optimised strategy as
    released had 4.1 times Flat's error (1.233 against 0.301)."""
    w = make_workload(workload, 64)
    error = expected_error(Optimized(workload), w, 5.0)
    assert error == pytest.approx(expected_error(Flat(), w, 5.0), rel=1e-12)


@pytest.mark.usefixtures("private_cache")
def test_all_ranges_at_epsilon_1_keep_the_optimised_strategy():
    mech = Optimized("all-range")
    strategy = measured(mech, 256, 1.0)
    optimised = mech.optimised_strategy(256)
    assert strategy.describe()["measured"] == "optimised"
    np.testing.assert_array_equal(strategy.block.diagonal, optimised.block.diagonal)
    np.testing.assert_array_equal(strategy.block.rows, optimised.block.rows)
    w = make_workload("all-range", 256)
    error = expected_error(mech, w, 1.0)
    assert error == pytest.approx(64.89112, rel=1e-5)  # as before the choice
    assert error < expected_error(Flat(), w, 1.0) / 2.4


@pytest.mark.usefixtures("private_cache")
def test_epsilon_delta_keeps_the_l2_template_at_epsilon_1_and_measures_the_identity_at_20():
    """The discrete Gaussian's variance per unit is sigma^2 at sigma 4.5 (epsilon 1, delta
    1e-6) but 0.36 of it at sigma 0.32 (epsilon 20)."""
    w = make_workload("all-range", 64)
    kept = Optimized("all-range")
    assert measured(kept, 64, 1.0, 1e-6).describe()["measured"] == "optimised"
    assert expected_error(kept, w, 1.0, delta=1e-6) < expected_error(Flat(), w, 1.0, delta=1e-6) / 4
    fallback = Optimized("all-range")
    error = expected_error(fallback, w, 20.0, delta=1e-6)
    assert error == pytest.approx(expected_error(Flat(), w, 20.0, delta=1e-6), rel=1e-12)
    assert fallback.strategy(64).describe()["template"] == "l2-optimal"  # the identity carries it


@pytest.mark.usefixtures("private_cache")
def test_the_choice_follows_epsilon_and_is_cached_per_privacy_setting():
    mech = Optimized("all-range")
    assert measured(mech, 64, 1.0).describe()["measured"] == "optimised"
    assert measured(mech, 64, 5.0).describe()["measured"] == "identity"
    assert measured(mech, 64, 1.0).describe()["measured"] == "optimised"
    assert mech.strategy(64).block.rows.shape[0] > 0


@pytest.mark.usefixtures("private_cache")
def test_replace_neighbours_compare_with_flat():
    w = make_workload("all-range", 64)
    error = expected_error(Optimized("all-range", neighbours="replace"), w, 5.0)
    assert error == pytest.approx(expected_error(Flat(neighbours="replace"), w, 5.0), rel=1e-9)


@pytest.mark.usefixtures("private_cache")
def test_explicit_dense_and_eigen_templates_fall_back_too():
    w = make_workload("all-range", 32)
    assert expected_error(Optimized("all-range", template="dense"), w, 5.0) == pytest.approx(
        expected_error(Flat(), w, 5.0), rel=1e-12
    )
    eigen = Optimized("all-range", template="eigen")
    assert expected_error(eigen, w, 40.0, delta=1e-6) == pytest.approx(
        expected_error(Flat(), w, 40.0, delta=1e-6), rel=1e-12
    )


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("epsilon", [1.0, 50.0])
def test_also_built_lists_each_other_template_once(epsilon):
    """Template auto with delta > 0 under replace builds the L2 p-Identity strategy and the exact
    L2 optimum; the strategy measured (a copy of the chosen one, or the identity standing in for
    it) lists the other template only, so the time spent is not counted twice.  Under
    add/remove it builds the optimum alone."""
    described = measured(Optimized("all-range", neighbours="replace"), 64, epsilon, 1e-6).describe()
    assert described["measured"] == ("optimised" if epsilon == 1.0 else "identity")
    (other,) = described["also_built"]
    assert {described["template"], other["template"]} == {"p-identity-l2", "l2-optimal"}


@pytest.mark.usefixtures("private_cache")
def test_a_release_under_epsilon_delta_builds_only_the_strategy_it_measures():
    """The checks before any value is read ask for the strategy at (epsilon, delta): template
    auto builds the L2 optimum alone, not first the epsilon-DP p-Identity template (15 s at
    4096 bins, spent for nothing) as the strategy before any design was."""
    values = np.random.default_rng(12).integers(0, 32, 300)
    release = dprange.release(values, dprange.Domain.integers(0, 31), 1.0, delta=1e-6, mechanism=Optimized("prefix"))
    assert cached_templates() == {"l2"}  # v5-prefix-n32-l2-optimal-dual.npz
    assert release.to_dict()["provenance"]["parameters"]["strategy"]["template"] == "l2-optimal"
    dprange.release(values, dprange.Domain.integers(0, 31), 1.0, mechanism=Optimized("prefix"))
    assert cached_templates() == {"l2", "p", "dense"}  # and for epsilon-DP p-identity and (n <= 64) dense


def test_template_auto_builds_the_optimum_alone_under_add_remove(monkeypatch, tmp_path):
    """Template auto at (1, 1e-6) on 32 bins builds the L2 optimum alone under add/remove
    (nothing else in also_built), the strategy of template l2-optimal; under replace it still
    builds and compares both."""
    monkeypatch.setenv("DPRANGE_CACHE_DIR", str(tmp_path))
    auto = Optimized("prefix", template="auto")
    auto.design(32, 1.0, delta=1e-6)
    strategy = auto.optimised_strategy(32)
    assert strategy.template == "l2-optimal" and "also_built" not in strategy.describe()
    alone = Optimized("prefix", template="l2-optimal").optimised_strategy(32)
    assert strategy.trace == pytest.approx(alone.trace, rel=1e-12)
    on_replace = Optimized("prefix", template="auto", neighbours="replace")
    on_replace.design(32, 1.0, delta=1e-6)
    replace = on_replace.optimised_strategy(32)
    built = [strategy["template"] for strategy in replace.describe().get("also_built", [])]
    assert sorted(built + [replace.template]) == ["l2-optimal", "p-identity-l2"]


@pytest.mark.parametrize("n", range(2, 17))
@pytest.mark.parametrize("workload", ["prefix", "all-range"])
def test_every_small_domain_gets_a_releasable_strategy(n, workload, private_cache):
    """On prefixes of 6 and 8 bins the optimiser drifted to 1 - 4e-7 of the identity's loss
    through one column of B near 1.5e5, whose identity weight then rounded to zero, so that
    release (and OptimizedKronecker on an axis of 8 bins) refused the strategy.  A gain that
    small now keeps the identity; every strategy releases, never worse than the identity."""
    mech = Optimized(workload)
    strategy = mech.strategy(n)
    assert np.all(strategy.block.diagonal > 0)
    identity_trace = float(Gram(mech.workload_on(n)).diag.sum())
    assert strategy.trace <= identity_trace * (1 + 1e-12)
    counts = np.arange(n) % 3
    rel = dprange.release(counts, dprange.Domain.integers(0, n - 1), 1.0, mechanism=mech, rng=1)
    assert np.isfinite(rel.range(0, n - 1).stderr)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("workload", [AllRange(32), Prefix(32)])
def test_auto_under_eps_delta_ranks_the_l2_optimum_and_keeps_the_least_error(workload):
    """Under add/remove auto ranks the exact L2 optimum alone (the L2 template is a point of its
    program: as released its error is higher, checked here), under replace both L2 templates."""
    kw = {"noise": "auto"}
    assert [m.template for m in auto_candidates(workload, 1e-6, neighbours="add_remove", **kw)] == ["l2-optimal"]
    assert [m.template for m in auto_candidates(workload, 0.0, neighbours="add_remove", **kw)] == ["p-identity"]
    replace = auto_candidates(workload, 1e-6, neighbours="replace", **kw)
    assert [m.template for m in replace] == ["p-identity-l2", "l2-optimal"]
    selection = select(workload, None, 1.0, delta=1e-6)
    optimised = {c.mechanism.template: c.error for c in selection.table if isinstance(c.mechanism, Optimized)}
    assert set(optimised) == {"l2-optimal"}
    template = expected_error(Optimized(workload, template="p-identity-l2"), workload, 1.0, delta=1e-6)
    assert optimised["l2-optimal"] < template  # the exact optimum (as released)
    assert selection.error == min(c.error for c in selection.table)
    assert selection.error <= optimised["l2-optimal"]


@pytest.mark.usefixtures("private_cache")
def test_gaussian_release_with_the_l2_template_uses_the_woodbury_path():
    from dprange.inference.p_identity import PIdentityEstimate

    counts = np.random.default_rng(3).poisson(20, 32)
    release = Optimized("prefix", template="p-identity-l2").release(counts, 1.0, delta=1e-6, rng=2)
    assert isinstance(release.error_model, PIdentityEstimate)
    assert release.measurements.measurements[0].noise.kind == "gaussian"
    strategy = Optimized("prefix", template="p-identity-l2").strategy(32)
    assert np.any(strategy.block.rows < 0)  # the L2 template's rows take both signs


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_optimized_release_uses_the_woodbury_path_and_round_trips(tmp_path, neighbours):
    counts = np.random.default_rng(8).poisson(30, 40)
    mech = Optimized("prefix", neighbours=neighbours)
    release = mech.release(counts, 1.0, rng=3)
    assert isinstance(release.error_model, PIdentityEstimate)
    assert isinstance(mech.strategy(40).block, DiagonalPlusRows)
    if neighbours == "replace":
        assert release.total().value == pytest.approx(counts.sum())
    path = tmp_path / "r.json"
    release.to_json(path)
    loaded = load_release(path)
    lo, hi = np.triu_indices(40)
    np.testing.assert_allclose(loaded.range(lo, hi).stderr, release.range(lo, hi).stderr, rtol=1e-12)
    assert isinstance(loaded.error_model, PIdentityEstimate)


@pytest.mark.usefixtures("private_cache")
def test_release_matches_the_dense_matrix_mechanism():
    """Same strategy, same noise draws: Optimized (Woodbury) and Matrix (dense covariance)
    give the same estimate and standard errors.  (32 bins: on 24 the identity has the lower
    error as released and is measured instead.)"""
    counts = np.random.default_rng(9).poisson(10, 32)
    mech = Optimized("all-range")
    same = dprange.Matrix(mech.strategy(32).explicit())
    a, b = mech.release(counts, 1.0, rng=11), same.release(counts, 1.0, rng=11)
    np.testing.assert_allclose(a.estimate, b.estimate, rtol=1e-9, atol=1e-9)
    lo, hi = np.triu_indices(32)
    np.testing.assert_allclose(a.range(lo, hi).stderr, b.range(lo, hi).stderr, rtol=1e-9)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_release_never_forms_the_dense_strategy(monkeypatch, neighbours):
    """Calibration (the one-block stack takes the block's own sensitivity), measurement, GLS
    and error bars run without A's dense form: with the pairs limit at 0 the replace scale is
    the triangle bound 2 max_j ||a_j||_1, add/remove the exact max_j ||a_j||_1.  (128 bins:
    under replace on 48 the identity has the lower error as released and is measured instead.)"""
    mech = Optimized("all-range", neighbours=neighbours)
    strategy = mech.strategy(128)
    column_l1 = definition_sensitivity_power(strategy.explicit(), 1, "add_remove")

    def refuse(self):
        raise AssertionError("dense form used")

    monkeypatch.setattr(DiagonalPlusRows, "dense", refuse)
    monkeypatch.setattr(pid, "PAIRS_LIMIT", 0)
    strategy.block._sensitivity_cache.clear()
    counts = np.random.default_rng(10).poisson(5, 128)
    release = mech.release(counts, 0.5, rng=1)
    spec = release.measurements.measurements[0].noise
    assert spec.scale == pytest.approx((1 if neighbours == "add_remove" else 2) * column_l1 / 0.5, rel=1e-12)
    assert np.all(np.isfinite(release.range(0, np.arange(128)).stderr))


# ----------------------------------------------------------------------------- announcing long work


@pytest.mark.usefixtures("private_cache")
def test_a_long_optimisation_is_announced_once_on_stderr(monkeypatch, capsys):
    """One line before the optimisation (what, about how long, where it is cached); none when
    the strategy comes from the cache, nor with progress switched off."""
    import dprange.mechanisms.optimized as optimized_module
    from dprange.optimize.cache import cache_dir
    from dprange.progress import set_progress

    monkeypatch.setattr(optimized_module, "ANNOUNCE_SECONDS", 0.0)
    monkeypatch.delenv("DPRANGE_PROGRESS", raising=False)
    monkeypatch.setattr(dprange.progress, "_switch", {"on": True})
    Optimized("prefix").strategy(32)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("optimising a strategy for 32 bins (prefix, p-identity); about ")
    assert lines[0].endswith(f"s of CPU, once: it is cached in {cache_dir()}")
    Optimized("prefix").strategy(32)
    assert capsys.readouterr().err == ""
    previous = set_progress(False)
    try:
        Optimized("all-range").strategy(32)
    finally:
        set_progress(previous)
    assert capsys.readouterr().err == ""


def test_the_estimate_announces_the_issue_case_and_not_small_domains():
    """The 1000-bin prefix release (25 s of wall time on a busy machine, issue 34) is announced;
    64 bins are not; the estimate is the step model times the steps L-BFGS-B is allowed."""
    from dprange.mechanisms.optimized import ANNOUNCE_SECONDS, optimisation_seconds
    from dprange.optimize.p_identity import STEP_SECONDS

    assert optimisation_seconds("p-identity", 1000, 62) >= ANNOUNCE_SECONDS
    assert optimisation_seconds("p-identity", 64, 4) < ANNOUNCE_SECONDS
    a, b, c = STEP_SECONDS
    assert optimisation_seconds("p-identity-l2", 1000, 128) == pytest.approx(400 * (a + b * 128**2 * 1000 + c * 128e3))
    assert optimisation_seconds("p-identity", 256, 16) == pytest.approx(400 * (a + b * 16**2 * 256 + c * 16 * 256))
    assert optimisation_seconds("dense", 64, 4) is None

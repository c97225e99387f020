"""Optimised strategies (dprange.mechanisms.optimized): the p-Identity loss and gradient, the eigen-design,
the Optimized mechanism (exact error, Monte-Carlo, JSON round trip, cache) and auto's choice."""

import json

import numpy as np
import pytest
from _helpers import bounded_ranges

import dprange
from dprange.analysis import expected_error, l2_optimum_bound, select, svd_bound
from dprange.answers.release import load_release
from dprange.errors import ParameterError
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
from dprange.optimize.cache import cache_path
from dprange.optimize.p_identity import default_rows
from dprange.strategies.matrix import DENSE_COVARIANCE_LIMIT
from dprange.workloads import AllRange, Explicit, Prefix, Ranges

pytestmark = pytest.mark.usefixtures("private_cache")  # every test: an empty strategy cache


def prefix_identity_mix(n):
    return Explicit(np.vstack([np.tril(np.ones((n, n))), np.eye(n)]))


def best_fixed(workload, epsilon=1.0, delta=0.0):
    """The best error among the mechanisms auto ranks, without the optimised one."""
    cands = [c for c in select(workload, None, epsilon, delta=delta).table if not isinstance(c.mechanism, Optimized)]
    return min(c.error for c in cands)


# ----------------------------------------------------------------------------- the mechanism


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


@pytest.mark.parametrize(
    "name,delta,gain",
    [
        ("explicit-0/1", 1e-6, 1.85),  # measured 1.90 (the exact L2 optimum): the 1.5x is met here
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


@pytest.mark.parametrize("name", list(UNUSUAL))
def test_under_eps_delta_the_optimum_reaches_the_least_error_of_any_matrix_mechanism(name):
    """Template auto with delta > 0 measures the exact L2 optimum (n <= 1024): its error as
    released is within 0.1% of ``l2_optimum_bound``, below which no matrix mechanism with
    dprange's Gaussian goes; so best fixed / optimised is the most any strategy can gain."""
    workload = UNUSUAL[name]()
    optimised = expected_error(Optimized(workload), workload, 1.0, delta=1e-6)
    bound = l2_optimum_bound(workload, 1.0, 1e-6)
    assert bound <= optimised <= 1.001 * bound


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


@pytest.mark.parametrize(("epsilon", "measured"), [(0.5, "optimised"), (5.0, "identity")])
def test_release_round_trips_through_json(tmp_path, epsilon, measured):
    """The saved strategy says what was measured (at epsilon 5 the identity: lower error as
    released, tests/test_optimized_identity.py); the mechanism rebuilt from the saved
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


def test_bad_parameters_are_refused():
    with pytest.raises(ParameterError, match="workload"):
        Optimized(42)
    with pytest.raises(ParameterError, match="unknown workload"):
        Optimized("no-such-workload")
    with pytest.raises(ParameterError, match="optimised for 10 bins"):
        Optimized(Prefix(10)).strategy(12)
    with pytest.raises(ParameterError, match="n <= 4096"):
        Optimized().strategy(5000)


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


def test_more_extra_rows_than_an_axis_bins_are_refused_naming_the_axis():
    from dprange.mechanisms.optimized_grid import OptimizedKronecker

    with pytest.raises(ParameterError, match=r"optimized_kronecker, axis 1 \(5 bins\): rows=6 is more than the 5"):
        OptimizedKronecker(rows=6).plan((6, 5), 1.0)


# ----------------------------------------------------------------------------- auto


@pytest.mark.parametrize("delta", [0.0, 1e-6])
@pytest.mark.parametrize("name", ["bounded-ranges", "prefix+identity"])
def test_auto_ranks_the_optimised_strategy_and_returns_the_least_error(delta, name):
    workload = UNUSUAL[name]()
    selection = select(workload, None, 1.0, delta=delta)
    assert any(isinstance(c.mechanism, Optimized) for c in selection.table)
    assert selection.error == min(c.error for c in selection.table)
    assert selection.error == pytest.approx(expected_error(selection.mechanism, workload, 1.0, delta=delta))


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


def test_auto_ranks_the_l2_optimum_alone_under_add_remove():
    """Under add/remove the L2 template is a point of the L2 optimum's program, so auto ranks
    the optimum alone (as template auto builds it alone); under replace both."""
    kw = {"noise": "auto"}
    assert [m.template for m in auto_candidates(Prefix(16), 1e-6, neighbours="add_remove", **kw)] == ["l2-optimal"]
    replace = auto_candidates(Prefix(16), 1e-6, neighbours="replace", **kw)
    assert [m.template for m in replace] == ["p-identity-l2", "l2-optimal"]


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


def test_release_with_auto_uses_the_optimised_strategy_where_it_is_best():
    counts = np.random.default_rng(0).integers(0, 9, 64)
    release = dprange.release(counts, dprange.Domain.integers(0, 63), 1.0, mechanism="auto", rng=0)
    assert release.mechanism == "optimized"


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


def test_the_optimised_mechanisms_are_exported_like_the_others():
    """The README's mechanism table names Optimized beside Flat and Matrix: dprange.Optimized
    (and the k-D OptimizedKronecker, OptimizedMarginals) work as dprange.Flat does."""
    import dprange.mechanisms.optimized_grid as optimized_kd

    assert dprange.Optimized is Optimized
    assert dprange.OptimizedKronecker is optimized_kd.OptimizedKronecker
    assert dprange.OptimizedMarginals is optimized_kd.OptimizedMarginals
    assert {"Optimized", "OptimizedKronecker", "OptimizedMarginals"} <= set(dprange.__all__)


def test_svd_bound_is_below_the_optimised_error():
    for workload in (AllRange(32), Prefix(32)):
        assert svd_bound(workload, 1.0) <= expected_error(Optimized(workload), workload, 1.0)


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

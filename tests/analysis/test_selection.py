"""dprange.analysis.selection: ``select`` is never worse than a fixed choice and ranks by exact
error (threads equal serial, NaN errors excluded), the optimised budget split, the default
candidates, and auto's defaults, options and cache."""

from __future__ import annotations

import numpy as np
import pytest

import dprange
from dprange import Domain, Flat, Hierarchical, ParameterError, Wavelet
from dprange.analysis import default_candidates, expected_error, optimal_hierarchy, optimized_budget, select
from dprange.analysis import selection as analysis
from dprange.inference.tree import PrefixVariances
from dprange.mechanisms.basic import hierarchy_candidates
from dprange.workloads import AllRange, Identity, Prefix


def test_selection_is_never_worse_and_beats_fixed_choices():
    n, eps = 300, 1.0
    fixed = [Flat(), Hierarchical(2), Hierarchical(16), Wavelet()]
    for workload in (AllRange(n), Prefix(n), Identity(n)):
        sel = select(workload, None, eps)
        errors = [c.error for c in sel.table]
        assert sel.error == min(errors) and errors == sorted(errors)
        best_fixed = min(expected_error(m, workload, eps) for m in fixed)
        assert sel.error <= best_fixed
        assert expected_error(sel.mechanism, workload, eps) == pytest.approx(sel.error)
    # on all ranges some tuned hierarchy strictly beats the four fixed choices
    sel = select(AllRange(n), None, eps)
    assert sel.error < min(expected_error(m, AllRange(n), eps) for m in fixed)
    # identity: Flat is optimal
    assert isinstance(select(Identity(n), None, eps).mechanism, Flat)


def test_optimized_budget_beats_rules():
    n, eps = 256, 1.0
    budget, err = optimized_budget(Prefix(n), None, eps, 4, neighbours="replace", noise="laplace_float")
    assert sum(budget) == pytest.approx(eps)
    for rule in ("uniform", "geometric"):
        assert (
            err
            <= expected_error(Hierarchical(4, rule, neighbours="replace", noise="laplace_float"), Prefix(n), eps) + 1e-9
        )
    sel = optimal_hierarchy(AllRange(64), None, eps, noise="laplace_float")
    assert sel.error == min(c.error for c in sel.table)


def test_threaded_ranking_equals_serial(monkeypatch):
    n = 3000
    serial = analysis.select("all-range", n, 0.5, optimize_budget=False)
    monkeypatch.setattr(analysis, "PARALLEL_RANK_MIN_N", 1)
    monkeypatch.setattr(analysis, "RANK_WORKERS", 2)
    monkeypatch.setattr(analysis.os, "cpu_count", lambda: 2)
    calls = []
    real = analysis.ThreadPoolExecutor

    class Counting(real):
        def __init__(self, *args, **kwargs):
            calls.append(kwargs.get("max_workers"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(analysis, "ThreadPoolExecutor", Counting)
    threaded = analysis.select("all-range", n, 0.5, optimize_budget=False)
    assert calls == [2]
    assert [repr(c.mechanism) for c in threaded.table] == [repr(c.mechanism) for c in serial.table]
    assert [c.error for c in threaded.table] == [c.error for c in serial.table]
    assert [(repr(m), reason) for m, reason in threaded.excluded] == [(repr(m), r) for m, r in serial.excluded]


class NaNError(Flat):
    """A candidate whose exact error is NaN (as Wavelet's was under a tiny epsilon)."""

    def error_model(self, n, epsilon, *, delta=0.0):
        model = super().error_model(n, epsilon, delta=delta)
        model.range_variance = lambda lo, hi: np.full(np.broadcast(np.asarray(lo), np.asarray(hi)).shape, np.nan)
        nan = np.full(n, np.nan)
        model.prefix_variances = lambda: PrefixVariances(nan, nan, nan, np.nan)  # the one-pass path too
        return model


def test_selection_never_ranks_a_nan_error():
    """W4: NaN errors sort first under Python's sort; they are excluded with a reason, and
    with no candidate left select raises."""
    sel = select(AllRange(8), None, 1.0, candidates=[NaNError(), Hierarchical(2)])
    assert isinstance(sel.mechanism, Hierarchical) and len(sel.table) == 1
    assert len(sel.excluded) == 1 and "not finite" in sel.excluded[0][1]
    assert sel.to_dict()["excluded"][0]["reason"].startswith("its expected error is nan")
    with pytest.raises(ParameterError, match="no candidate mechanism"):
        select(AllRange(8), None, 1.0, candidates=[NaNError()])
    with pytest.raises(ParameterError, match="epsilon is too small"):
        select(AllRange(8), None, 1e-300)


# ----------------------------------------------------------------------------- defaults and auto


def test_defaults_are_the_least_error_choices():
    """Hierarchical() does not measure the root (the root version is worse on every range
    workload here); release(mechanism=None) is auto on the declared workload."""
    for n in (64, 1024):
        for wl in (AllRange(n), Prefix(n)):
            assert expected_error(Hierarchical(), wl, 1.0) < expected_error(Hierarchical(measure_root=True), wl, 1.0)
    values = np.random.default_rng(12).integers(0, 100, 500)
    dom = Domain.integers(0, 99)
    for wl in ("prefix", "identity"):
        rel = dprange.release(values, dom, 1.0, workload=wl, rng=0)
        chosen = select(wl, 100, 1.0)
        assert rel.mechanism == chosen.mechanism.name
        assert rel.parameters.get("branching") == getattr(chosen.mechanism, "branching", None)


def test_auto_accepts_inference_and_noise_and_caches(monkeypatch):
    calls = []
    real_select = analysis.select

    def counting_select(*args, **kwargs):
        calls.append((args, kwargs))
        return real_select(*args, **kwargs)

    monkeypatch.setattr(analysis, "select", counting_select)
    monkeypatch.setattr(analysis, "_SELECTION_CACHE", {})
    values = np.random.default_rng(13).integers(0, 50, 400)
    dom = Domain.integers(0, 49)
    rel = dprange.release(
        values, dom, 0.7, mechanism="auto", workload="prefix", inference="nnls", noise="laplace_float", rng=0
    )
    assert rel.inference == "nnls" and rel.noise == "laplace_float" and len(calls) == 1
    rel2 = dprange.release(values, dom, 0.7, mechanism="auto", workload="prefix", noise="laplace_float", rng=1)
    assert len(calls) == 1 and rel2.inference == "gls"  # cache hit, and the cached object is not mutated

    # the same mechanism (Optimized since it is ranked on 50 bins; a hierarchy before), up to
    # post-processing and whether an optimised strategy was read from or stored in the disk cache
    obtained = ("cached", "stored")

    def chosen(params):
        kept = {k: v for k, v in params.items() if k not in ("inference", "inference_options")}
        return {**kept, "strategy": {k: v for k, v in params["strategy"].items() if k not in obtained}}

    assert rel2.mechanism == rel.mechanism
    assert chosen(rel2.parameters) == chosen(rel.parameters)
    for release in (rel, rel2):  # either optimised and stored, or read from the cache
        assert tuple(release.parameters["strategy"][k] for k in obtained) in ((True, False), (False, True))
    dprange.release(values, dom, 0.7, mechanism="auto", workload="prefix", noise="discrete_laplace", rng=1)
    assert len(calls) == 2  # a different public parameter is a different selection
    with pytest.raises(ParameterError):
        dprange.release(values, dom, 0.7, mechanism="auto", inference="lasso")


def test_optimised_split_is_a_candidate_and_wins_when_best():
    sel = select(AllRange(256), None, 1.0)
    tuned = [c for c in sel.table if isinstance(c.mechanism, Hierarchical) and isinstance(c.mechanism.budget, list)]
    assert len(tuned) == 1
    rules = [
        c.error for c in sel.table if isinstance(c.mechanism, Hierarchical) and isinstance(c.mechanism.budget, str)
    ]
    assert tuned[0].error < min(rules)  # measured: 2-5% below the best rule
    fixed = [c for c in sel.table if not isinstance(c.mechanism, dprange.Optimized)]
    assert min(fixed, key=lambda c: c.error).mechanism is tuned[0].mechanism  # the best fixed strategy
    assert isinstance(sel.mechanism, dprange.Optimized) and sel.error < tuned[0].error  # optimised up to 1024 bins
    assert expected_error(tuned[0].mechanism, AllRange(256), 1.0) == pytest.approx(tuned[0].error)
    # explicit candidates are ranked as given
    plain = select(AllRange(256), None, 1.0, candidates=[Flat(), Hierarchical(4)])
    assert len(plain.table) == 2


def test_default_candidates_are_the_former_grid():
    """The registry's candidates are exactly the list analysis built by hand: Flat, Wavelet,
    then the hierarchies (order matters: ties go to the first)."""
    for n, fast in ((1000, False), (1000, True), (2, False)):
        for neighbours in ("add_remove", "replace"):
            kwargs = {"neighbours": neighbours, "noise": "auto"}
            branchings = [b for b in ([4, 8, 16, 32, 64] if fast else []) if b < max(n, 3)] or None
            expected = [Flat(**kwargs), Wavelet(**kwargs)] + hierarchy_candidates(
                n,
                **kwargs,
                branchings=branchings,
                budgets=("uniform",) if fast else ("uniform", "geometric"),
                measure_root=(False,) if fast else (True, False),
            )
            got = default_candidates(n, neighbours=neighbours, fast=fast)
            assert [repr(m) for m in got] == [repr(m) for m in expected]
    assert len(default_candidates(1000)) == 2 + 14 * 2 * 2

"""Quantile and CDF intervals that hold whatever the data look like inside a bin, the point
estimate rule, and the defaults and caching of the automatic choice.

Coverage tests: many seeded releases on small domains; the interval must cover the true
quantile (or CDF value) in at least 95% of them up to Monte-Carlo error only: the test fails
when P(Binomial(trials, 0.95) <= hits) < 0.001, i.e. when the observed coverage is
significantly below the nominal level."""

import re

import numpy as np
import pytest
from _helpers import true_quantiles

import dprange
import dprange.analysis.selection as analysis
from dprange import Domain, Flat, Hierarchical, ParameterError, Wavelet
from dprange.analysis import expected_error, max_error, select
from dprange.workloads import AllRange, Prefix


def test_demo_intervals_contain_the_true_quantiles(tmp_path):
    from click.testing import CliRunner

    from dprange.cli.demo import example_path
    from dprange.cli.group import cli
    from dprange.io import read_column

    result = CliRunner().invoke(cli, ["demo", "--output", str(tmp_path), "--seed", "5"])
    assert result.exit_code == 0, result.output
    assert "prefix workload" in result.output and "simultaneous" in result.output
    rows = re.findall(r"^\s+(0\.\d)\s+(\S+)\s+\[\s*(\S+),\s*(\S+)\]", result.output, flags=re.M)
    assert len(rows) == 9
    truth = true_quantiles(read_column(example_path(), "income"), [float(r[0]) for r in rows])
    for (q, _, lo, hi), t in zip(rows, truth):
        assert float(lo) <= t <= float(hi), (q, lo, hi, t)
    assert truth[0] == 0.0  # 12% zeros: the 10% quantile is 0


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


def test_expected_error_refuses_nonlinear_inference():
    for inference in ("nnls", "l1"):
        with pytest.raises(ParameterError, match="gls"):
            expected_error(Hierarchical(4, inference=inference), "prefix", 1.0, n=32)
        with pytest.raises(ParameterError, match="gls"):
            max_error(Wavelet(inference=inference), "prefix", 1.0, n=32)

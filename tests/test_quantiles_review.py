"""Review of the quantiles' record count (dprange.quantile_mechanisms.bins): the parts of epsilon that a
saved session ledger names, the CLI's text output, and auto's choice without any count."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import dprange
from dprange.privacy.session import Session
from dprange.quantile_mechanisms import bins as qb

LEVELS_19 = np.arange(1, 20) / 20


def test_a_saved_session_names_the_noisy_count_and_bounds_spends(tmp_path):
    """The ledger's entry holds the total; its description names the parts spent on private
    bounds and on the noisy record count, so a saved session shows that a count was drawn."""
    path = tmp_path / "ledger.json"
    session = Session.open(path, 2.0)
    values = np.random.default_rng(1).normal(30, 5, 600)
    result = dprange.quantiles(
        values, LEVELS_19, 0.5, bounds="private", bounds_share=0.1, method="histogram", rng=2, session=session
    )
    assert result.count.source == "noisy count" and result.count_epsilon == 0.5 * 0.05
    entry = json.loads(path.read_text())["entries"][0]
    assert entry["epsilon"] == 0.5
    assert entry["what"] == (
        f"quantiles at 19 levels (of which bounds epsilon {0.5 * 0.1!r}, record count epsilon {0.5 * 0.05!r})"
    )
    # public n (replace), public bounds: nothing but the quantiles is spent, and the entry says so
    dprange.quantiles(values, LEVELS_19, 0.5, bounds=(0, 60), neighbours="replace", rng=3, session=session)
    assert Session.open(path).entries[1].what == "quantiles at 19 levels"


def test_cli_text_output_names_the_noisy_count_and_the_bins(tmp_path, capsys):
    """The text output (not only --json) says what the count cost, its value and the bins;
    with --n-max no budget goes to a count and no count line is printed."""
    from dprange.cli import main

    path = tmp_path / "data.csv"
    path.write_text("x\n" + "\n".join(f"{v:.4f}" for v in np.random.default_rng(10).normal(0, 1, 2000)) + "\n")
    base = ["quantiles", str(path), "-c", "x", "--lo", "-5", "--hi", "5", "-e", "1", "--method", "histogram"]
    outputs = {}
    for extra in ([], ["--json"], ["--n-max", "4000"]):
        with pytest.raises(SystemExit) as done:
            main([*base, "--seed", "1", *extra])
        assert done.value.code == 0
        outputs[tuple(extra)] = capsys.readouterr().out
    counted = json.loads(outputs[("--json",)])["record_count"]
    lines = outputs[()].splitlines()
    assert f"record count (noisy, epsilon 0.05): {counted['value']}" in lines
    assert f"histogram bins: {qb.histogram_bins(counted['value'] * 0.95)}" in lines
    declared = outputs[("--n-max", "4000")].splitlines()
    assert not any(line.startswith("record count") for line in declared)
    assert f"histogram bins: {qb.histogram_bins(4000 * 1.0)}" in declared


def test_the_former_api_histogram_bins_does_not_silently_change_meaning():
    """dprange.api.histogram_bins(epsilon) was documented (256 bins at epsilon 0.1); the rule
    of n x epsilon took over that name in dprange.api and answered 8 to the same call.  The
    old name is gone (an AttributeError, not a different number)."""
    import dprange.api

    assert not hasattr(dprange.api, "histogram_bins")
    assert qb.epsilon_only_bins(0.1) == 256 and qb.histogram_bins(0.1) == 8


def test_a_histogram_route_release_warns_nothing():
    """The budget search scores a too-small level budget as inf; its numerical gradient met
    inf - inf and numpy printed "invalid value encountered in subtract" to the user."""
    rng = np.random.default_rng(5)
    values = rng.uniform(-5, 5, 1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = dprange.quantiles(
            values, np.arange(1, 100) / 100, 0.1, bounds=(-5, 5), method="histogram", rng=rng, bins=128, n_max=1000
        )
    assert result.values.shape == (99,)

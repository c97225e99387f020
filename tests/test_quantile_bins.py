"""The histogram route's resolution from n x epsilon and the record count it reads
(dprange.quantile_mechanisms.bins): the rule, where n comes from, what the noisy count costs, its exact
law and privacy, and that nothing reads n unpaid."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dprange.quantile_mechanisms import bins as qb


def test_cli_count_share(tmp_path, capsys):
    from dprange.cli import main

    path = tmp_path / "data.csv"
    path.write_text("x\n" + "\n".join(f"{v:.4f}" for v in np.random.default_rng(10).normal(0, 1, 2000)) + "\n")
    base = ["quantiles", str(path), "-c", "x", "--lo", "-5", "--hi", "5", "-e", "1", "--method", "histogram"]
    with pytest.raises(SystemExit) as done:
        main([*base, "--seed", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert done.value.code == 0 and out["record_count"]["source"] == "noisy count"
    assert out["record_count"]["epsilon"] == pytest.approx(0.05)
    assert out["bins"] == qb.histogram_bins(out["record_count"]["value"] * 0.95)
    with pytest.raises(SystemExit) as done:
        main([*base, "--seed", "1", "--count-share", "0", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert done.value.code == 0 and out["record_count"] is None and out["bins"] == qb.epsilon_only_bins(1.0)
    with pytest.raises(SystemExit) as done:
        main([*base, "--count-share", "2"])
    assert done.value.code != 0 and "--count-share" in capsys.readouterr().err

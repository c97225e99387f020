"""dprange.cli.demo: the demo's decile intervals contain the true quantiles."""

import re

from _helpers import true_quantiles


def test_demo_intervals_contain_the_true_quantiles(tmp_path):
    from click.testing import CliRunner

    from dprange.cli.demo import example_path
    from dprange.cli.group import cli
    from dprange.io import read_column

    result = CliRunner().invoke(cli, ["demo", "--output", str(tmp_path), "--seed", "5"])
    assert result.exit_code == 0, result.output
    assert "prefix workload" in result.output and "simultaneous" in result.output
    # the table shows the interval first, then the point (issue 34)
    rows = re.findall(r"^\s+(0\.\d)\s+\[\s*(\S+),\s*(\S+)\]\s+(\S.*)$", result.output, flags=re.M)
    assert len(rows) == 9
    truth = true_quantiles(read_column(example_path(), "income"), [float(r[0]) for r in rows])
    for (q, lo, hi, _), t in zip(rows, truth):
        assert float(lo) <= t <= float(hi), (q, lo, hi, t)
    assert truth[0] == 0.0  # 12% zeros: the 10% quantile is 0

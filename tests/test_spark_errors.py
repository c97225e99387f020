"""The Spark engine's checks that need neither Java nor a SparkSession: a missing pyspark
names the extra to install, and the CLI refuses --spark-master without --engine spark."""

from __future__ import annotations

import pytest

from dprange.cli import main


def test_cli_spark_master_needs_engine_spark(tmp_path, capsys):
    path = tmp_path / "a.csv"
    path.write_text("x\n1\n")
    args = ["release", str(path), "-c", "x", "--lo", "0", "--hi", "3", "--integers", "-e", "1"]
    with pytest.raises(SystemExit) as exc:
        main([*args, "--spark-master", "local[2]", "-o", str(tmp_path / "r.json")])
    assert exc.value.code == 2
    assert "--spark-master needs --engine spark" in capsys.readouterr().err

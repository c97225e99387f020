"""The local streaming engine: batch-by-batch counts equal the in-memory histogram, and bad
values stop the count with a message naming the file, the row and the value."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _helpers import write_csv

from dprange.cli import main


def _run(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    return info.value.code, capsys.readouterr()


def test_cli_releases_a_glob_as_one_column_and_equals_the_in_memory_release(tmp_path, ints, capsys, monkeypatch):
    for k, part in enumerate(np.array_split(ints, 3)):
        write_csv(tmp_path / f"part-{k}.csv", part)
    whole = write_csv(tmp_path / "whole.csv", ints)
    common = ["-c", "x", "--lo", "-3", "--hi", "49", "--integers", "-e", "1", "-m", "flat", "--seed", "3"]
    code, _ = _run(["release", str(tmp_path / "part-*.csv"), *common, "-o", str(tmp_path / "glob.json")], capsys)
    assert code == 0
    code, _ = _run(["release", whole, *common, "-o", str(tmp_path / "whole.json")], capsys)
    assert code == 0
    monkeypatch.setattr("dprange.cli.options.STREAM_FROM_BYTES", 0)  # the same file through the streaming engine
    code, _ = _run(["release", whole, *common, "-o", str(tmp_path / "streamed.json")], capsys)
    assert code == 0
    hist = [
        json.loads((tmp_path / name).read_text())["histogram"] for name in ("glob.json", "whole.json", "streamed.json")
    ]
    assert hist[0] == hist[1] == hist[2]


def test_cli_stops_at_a_bad_value_in_the_last_file_and_writes_nothing(tmp_path, ints, capsys):
    write_csv(tmp_path / "part-0.csv", ints)
    write_csv(tmp_path / "part-1.csv", [1, 2, None])
    out = tmp_path / "out.json"
    argv = ["release", str(tmp_path / "part-*.csv"), "-c", "x", "--lo", "-3", "--hi", "49", "--integers", "-e", "1"]
    code, captured = _run([*argv, "-o", str(out)], capsys)
    assert code == 2 and not out.exists()
    assert captured.err.count("\n") == 1 and "row 4 of" in captured.err and "part-1.csv" in captured.err
    assert "--drop-missing" in captured.err

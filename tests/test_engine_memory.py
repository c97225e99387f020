"""The streaming engine reads a Parquet file one row group at a time: Arrow's memory stays
at about one row group, whatever the number of groups (measured in a fresh process, whose
Arrow memory pool high-water mark is its own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

MEASURE = r"""
import json, sys
import pyarrow as pa
import dprange
from dprange.engines import stream_histogram
counts = stream_histogram(sys.argv[1], "x", dprange.Domain.interval(0.0, 1.0, 64), batch_rows=1 << 16)
print(json.dumps({"rows": int(counts.sum()), "arrow_peak": pa.default_memory_pool().max_memory()}))
"""


def test_arrow_memory_is_one_row_group_not_the_file(tmp_path):
    groups, group_rows = 24, 1 << 17
    values = np.random.default_rng(4).random(groups * group_rows)  # 24 MiB of float64, incompressible
    path = str(tmp_path / "many-groups.parquet")
    pq.write_table(pa.table({"x": values}), path, row_group_size=group_rows, compression="none")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", MEASURE, path], capture_output=True, text=True, check=True, env=env)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["rows"] == values.size
    group_bytes = group_rows * 8  # 1 MiB
    assert result["arrow_peak"] < 6 * group_bytes, result  # reading ahead through the file held ~24 MiB

"""The Spark engine's checks that need neither Java nor a SparkSession (dprange.engines.spark): a
missing pyspark names the extra to install, and the engine name and frames are checked first.
The engine on a real SparkSession: tests/engines/test_spark.py."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import dprange
from dprange import Domain, ParameterError
from dprange.engines.spark import get_session, is_spark_frame, spark_histogram


def test_missing_pyspark_names_the_spark_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark raises ImportError
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(ParameterError, match=r"pip install 'dprange\[spark\]'"):
        get_session()
    path = tmp_path / "a.csv"
    path.write_text("x\n1\n")
    with pytest.raises(ParameterError, match=r"dprange\[spark\]"):
        spark_histogram(str(path), "x", Domain.integers(0, 3))
    with pytest.raises(ParameterError, match=r"dprange\[spark\]"):
        dprange.release_files(str(path), "x", Domain.integers(0, 3), 1.0, engine="spark")


def test_engine_name_and_frames_are_checked_without_spark(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("x\n1\n")
    with pytest.raises(ParameterError, match="engine must be 'local' or 'spark', got 'dask'"):
        dprange.release_files(str(path), "x", Domain.integers(0, 3), 1.0, engine="dask")
    assert not is_spark_frame(np.arange(3))

"""dprange.engines.frames: data frames as inputs (pandas, pyarrow, polars): only the named column is
computed."""

from __future__ import annotations

import numpy as np
import pytest

import dprange
from dprange import DataError, Domain, ParameterError

pa = pytest.importorskip("pyarrow")


# ----------------------------------------------------------------------------- DataFrames
class FakeLazyFrame:
    """A stand-in for a polars LazyFrame that fails if more than the selected column is computed."""

    def __init__(self, columns: dict):
        self.columns = columns
        self.selected: list[str] = []

    def collect_schema(self):
        return type("Schema", (), {"names": lambda _: list(self.columns)})()

    def select(self, name):
        self.selected.append(name)
        column = pa.array(self.columns[name])
        one = type("Frame", (), {"get_column": lambda _, n: type("S", (), {"to_arrow": lambda _: column})()})()
        return type("Lazy", (), {"collect": lambda _: one})()

    def collect(self):
        raise AssertionError("the whole frame was collected")


FakeLazyFrame.__module__ = "polars.lazyframe.frame"

FakeLazyFrame.__name__ = "LazyFrame"


def test_dataframe_inputs_release_the_named_column_only(ints):
    pd = pytest.importorskip("pandas")
    domain = Domain.integers(-3, 49)
    expected = dprange.release(ints, domain, 1.0, mechanism="flat", rng=9).histogram().value
    frames = [
        pd.DataFrame({"x": ints, "y": -ints}),
        pa.table({"x": ints, "y": -ints}),
        pa.record_batch([pa.array(ints), pa.array(-ints)], names=["x", "y"]),
    ]
    lazy = FakeLazyFrame({"x": ints, "y": -ints})
    for frame in [*frames, lazy]:
        got = dprange.release(frame, domain, 1.0, mechanism="flat", rng=9, column="x").histogram().value
        np.testing.assert_array_equal(got, expected)
    assert lazy.selected == ["x"]
    median = dprange.quantiles(frames[1], [0.5], 1.0, bounds=(-3, 49), integer=True, rng=2, column="x")
    same = dprange.quantiles(ints, [0.5], 1.0, bounds=(-3, 49), integer=True, rng=2)
    assert median.values.tolist() == same.values.tolist()
    with pytest.raises(DataError, match="column 'z' not found in the DataFrame; columns are: x, y"):
        dprange.release(frames[0], domain, 1.0, column="z")
    with pytest.raises(ParameterError, match="name the column"):
        dprange.release(frames[1], domain, 1.0)
    with pytest.raises(ParameterError, match="pass the column itself"):
        dprange.release(ints, domain, 1.0, column="x")


def test_polars_frames_when_installed(ints):
    pl = pytest.importorskip("polars")
    domain = Domain.integers(-3, 49)
    expected = domain.histogram(ints)
    frame = pl.DataFrame({"x": ints, "y": -ints})
    for data in (frame, frame.lazy()):
        counts = dprange.engines.select_column(data, "x")
        np.testing.assert_array_equal(domain.histogram(counts), expected)


def test_categorical_columns_of_every_frame_release_like_the_list():
    import pandas as pd

    cells = ["Male", "Female", None, "Female", "x", "Male", "Male"]
    domain = Domain.categories(["Male", "Female"], other=True)
    frames = [
        pd.DataFrame({"s": cells, "y": range(7)}),
        pd.DataFrame({"s": pd.Series(cells, dtype="category")}),
        pa.table({"s": pa.array(cells).dictionary_encode()}),
        pa.record_batch({"s": pa.array(cells)}),
    ]
    try:
        import polars as pl
    except ImportError:
        pass
    else:
        frames += [pl.DataFrame({"s": cells}), pl.DataFrame({"s": pl.Series(cells, dtype=pl.Categorical)}).lazy()]
    expected = dprange.release(cells, domain, 1.0, mechanism="flat", rng=2, drop_missing=True)
    assert domain.histogram(cells, drop_missing=True).tolist() == [3, 2, 1]
    for frame in frames:
        rel = dprange.release(frame, domain, 1.0, mechanism="flat", rng=2, drop_missing=True, column="s")
        np.testing.assert_array_equal(rel.estimate, expected.estimate)

"""`dprange release` with several columns reads a glob pattern as the 1-D command does: the
files it matches, in name order, as one input (it used to say the pattern does not exist)."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import grid_args, run_cli

from dprange import Domain, ProductDomain
from dprange.api import release_grid
from dprange.cli.parse import concatenate_columns
from dprange.mechanisms.grid import Kronecker, load_grid_release


def test_a_glob_pattern_is_read_as_its_files_in_name_order(tmp_path, capsys):
    rng = np.random.default_rng(3)
    age, hours = rng.integers(18, 60, 900), rng.integers(0, 50, 900)
    for k in range(3):  # part-0 .. part-2, 300 records each; a non-matching file beside them
        part = slice(300 * k, 300 * (k + 1))
        text = "age,hours\n" + "".join(f"{a},{h}\n" for a, h in zip(age[part], hours[part]))
        (tmp_path / f"part-{k}.csv").write_text(text)
    (tmp_path / "other.csv").write_text("age,hours\n30,99\n")  # out of bounds if it were read
    out = tmp_path / "grid.json"
    code, stdout, err = run_cli(grid_args(tmp_path / "part-*.csv", out, "-m", "kronecker"), capsys)
    assert code == 0 and err == ""
    domain = ProductDomain([Domain.integers(18, 59), Domain.integers(0, 49)])
    same = release_grid([age, hours], domain, 1.0, mechanism=Kronecker(), rng=4)
    np.testing.assert_allclose(load_grid_release(out.read_text()).counts, same.counts, rtol=0, atol=1e-9)
    code, _, err = run_cli(grid_args(tmp_path / "none-*.csv", tmp_path / "g.json"), capsys)
    assert code == 2 and err.count("\n") == 1 and "matches no files" in err


def test_columns_of_several_files_keep_integers_exact():
    big = 2**62 + 1  # not a float64
    ints = concatenate_columns([np.array([big, 3]), np.array([1.0, np.nan]), np.array([7])])
    assert ints.dtype == np.int64 and ints.tolist() == [big, 3, 1, None, 7]
    masked = concatenate_columns([np.ma.masked_array([big, 0], [False, True]), np.array([2])])
    assert masked.dtype == np.int64 and masked.tolist() == [big, None, 2]
    plain = concatenate_columns([np.array([1, 2]), np.array([3.0])])
    assert type(plain) is np.ndarray and plain.dtype == np.int64 and plain.tolist() == [1, 2, 3]
    reals = concatenate_columns([np.array([1, 2]), np.array([0.5, np.nan])])
    assert reals.dtype == np.float64 and reals[:3].tolist() == [1.0, 2.0, 0.5] and np.isnan(reals[3])


@pytest.mark.parametrize("missing", ["drop", "stop"])
def test_missing_values_of_any_file_are_dropped_or_stop(tmp_path, capsys, missing):
    (tmp_path / "a.csv").write_text("age,hours\n20,1\n21,2\n")
    (tmp_path / "b.csv").write_text("age,hours\n,3\n22,4\n")
    extra = ["--drop-missing"] if missing == "drop" else []
    out = tmp_path / "g.json"
    code, _, err = run_cli(grid_args(tmp_path / "*.csv", out, "-m", "kronecker", *extra), capsys)
    if missing == "stop":
        assert code == 2 and err == (
            "dprange: error: 1 records have a missing value (NaN/None); clean them or pass --drop-missing "
            "to drop those records\n"
        )
        assert not out.exists()
        return
    assert code == 0
    domain = ProductDomain([Domain.integers(18, 59), Domain.integers(0, 49)])
    same = release_grid([[20, 21, 22], [1, 2, 4]], domain, 1.0, mechanism=Kronecker(), rng=4)
    np.testing.assert_allclose(load_grid_release(out.read_text()).counts, same.counts, rtol=0, atol=1e-9)


def test_values_beyond_int64_in_one_file_are_not_wrapped(tmp_path, capsys):
    """A whole-number float column beyond int64 (1e20) or infinite was cast to int64 and
    wrapped to -2^63, so that --clip put the record in the lowest bin instead of the highest."""
    parts = concatenate_columns([np.array([20]), np.array([1e20, -np.inf])])
    assert parts.dtype == np.float64 and parts.tolist() == [20.0, 1e20, -np.inf]
    (tmp_path / "a.csv").write_text("age,hours\n20,1\n")
    (tmp_path / "b.csv").write_text("age,hours\n1e20,3\n")
    out = tmp_path / "g.json"
    code, _, err = run_cli(grid_args(tmp_path / "*.csv", out, "-m", "kronecker", "--clip"), capsys)
    assert code == 0, err
    domain = ProductDomain([Domain.integers(18, 59), Domain.integers(0, 49)])
    same = release_grid([[20, 59], [1, 3]], domain, 1.0, mechanism=Kronecker(), rng=4)
    np.testing.assert_allclose(load_grid_release(out.read_text()).counts, same.counts, rtol=0, atol=1e-9)

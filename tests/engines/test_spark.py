"""The Spark engine on a real local SparkSession (local[2]): its counts equal the local
engine's exactly (1-D, product domains, several files, globs, clip, drop), bad values and
blank lines stop the count with the local engine's message naming the file and row, and
local-DP reports aggregate to the same state as the local aggregator."""

from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import pytest

import dprange
from dprange import DataError, Domain, DomainError, ParameterError, ProductDomain
from dprange.engines import stream_histogram
from dprange.io import nul_bytes_error

# A SparkSession takes 15-20 s to start and each test several seconds: `make test` leaves them to `make test-slow`.
pytestmark = pytest.mark.slow

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("the Spark engine needs Java (17 for Spark 4): `java` is not on PATH", allow_module_level=True)
try:
    import pyspark  # noqa: F401
except ImportError:
    pytest.skip("pyspark is not installed (pip install 'dprange[spark]')", allow_module_level=True)

from dprange.engines.spark import files_frame, get_session, spark_histogram, spark_ldp_aggregate  # noqa: E402


@pytest.fixture(scope="module")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("dprange-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "512m")
        .config("spark.sql.files.maxPartitionBytes", "8k")  # several partitions even for small files
        .config("spark.sql.files.openCostInBytes", "1k")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def write_csv(path, cells, other=None, header="x,y") -> str:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(header + "\n")
        for i, v in enumerate(cells):
            fh.write(f"{'' if v is None else v},{i if other is None else other[i]}\n")
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Integer and real columns in CSV and Parquet, split over several files."""
    folder = tmp_path_factory.mktemp("spark")
    rng = np.random.default_rng(11)
    ints = rng.integers(-3, 50, 6000)
    reals = rng.uniform(0.0, 10.0, 6000).round(3)
    out = {"ints": ints, "reals": reals, "folder": folder}
    for k in range(3):
        part = slice(2000 * k, 2000 * (k + 1))
        out[f"csv{k}"] = write_csv(folder / f"part-{k}.csv", ints[part], reals[part])
        table = pa.table({"x": ints[part], "y": reals[part]})
        out[f"pq{k}"] = str(folder / f"part-{k}.parquet")
        pq.write_table(table, out[f"pq{k}"], row_group_size=300)
    return out


# ----------------------------------------------------------------------------- equality
def test_one_csv_file_equals_the_local_engine(spark, files):
    domain = Domain.integers(-3, 49)
    local = stream_histogram(files["csv0"], "x", domain)
    counts = spark_histogram(files["csv0"], "x", domain, spark=spark)
    assert counts.dtype == np.int64
    np.testing.assert_array_equal(counts, local)
    np.testing.assert_array_equal(counts, domain.histogram(files["ints"][:2000]))


def test_glob_of_parquet_files_and_a_list_of_csv_equal_local(spark, files):
    domain = Domain.interval(0.0, 10.0, 37)
    pattern = str(files["folder"] / "part-*.parquet")
    np.testing.assert_array_equal(
        spark_histogram(pattern, "y", domain, spark=spark), stream_histogram(pattern, "y", domain)
    )
    csvs = [files["csv0"], files["csv1"], files["csv2"]]
    counts = spark_histogram(csvs, "y", domain, spark=spark)
    np.testing.assert_array_equal(counts, stream_histogram(csvs, "y", domain))
    np.testing.assert_array_equal(counts, domain.histogram(files["reals"]))


def test_a_spark_dataframe_and_mixed_formats_equal_local(spark, files):
    domain = Domain.integers(-3, 49)
    frame = spark.read.parquet(files["pq1"], files["pq2"])
    np.testing.assert_array_equal(
        spark_histogram(frame, "x", domain), stream_histogram([files["pq1"], files["pq2"]], "x", domain)
    )
    mixed = [files["csv0"], files["pq1"]]
    np.testing.assert_array_equal(
        spark_histogram(mixed, "x", domain, spark=spark), stream_histogram(mixed, "x", domain)
    )


def test_product_domain_equals_the_in_memory_grid(spark, files):
    grid = ProductDomain([Domain.integers(-3, 49), Domain.interval(0.0, 10.0, 8)])
    expected = grid.histogram([files["ints"], files["reals"]])
    pattern = str(files["folder"] / "part-*.csv")
    counts = spark_histogram(pattern, ["x", "y"], grid, spark=spark)
    assert counts.shape == (53, 8)
    np.testing.assert_array_equal(counts, expected)
    frame = spark.read.parquet(str(files["folder"] / "part-*.parquet"))
    np.testing.assert_array_equal(spark_histogram(frame, ["x", "y"], grid), expected)


def test_clip_and_drop_missing_equal_local(spark, tmp_path):
    cells: list = [str(v) for v in np.random.default_rng(3).integers(0, 20, 3000)]
    cells[5], cells[1000], cells[2999] = "NA", None, " null"
    cells[7], cells[2500] = "25", "-4"
    path = write_csv(tmp_path / "c.csv", cells)
    domain = Domain.integers(0, 15)
    local = stream_histogram(path, "x", domain, clip=True, drop_missing=True)
    counts = spark_histogram(path, "x", domain, clip=True, drop_missing=True, spark=spark)
    np.testing.assert_array_equal(counts, local)
    assert counts.sum() == 3000 - 3
    assert counts[15] == local[15] >= 1  # clipped from 25 and the values 15..19


def test_product_domain_drops_whole_records_like_the_grid(spark, tmp_path):
    x = np.arange(40) % 5
    y = (np.arange(40) * 7) % 6
    xs: list = x.astype(str).tolist()
    ys: list = y.astype(str).tolist()
    xs[3], ys[9] = None, "NA"
    path = write_csv(tmp_path / "g.csv", xs, ys)
    grid = ProductDomain([Domain.integers(0, 4), Domain.integers(0, 5)])
    keep = np.ones(40, bool)
    keep[[3, 9]] = False
    counts = spark_histogram(path, ["x", "y"], grid, drop_missing=True, spark=spark)
    np.testing.assert_array_equal(counts, grid.histogram([x[keep], y[keep]]))


# ----------------------------------------------------------------------------- errors
def test_out_of_bounds_names_file_row_and_value_like_local(spark, tmp_path):
    cells = [str(v % 10) for v in range(3000)]
    cells[2222] = "99"
    cells[2900] = "98"
    path = write_csv(tmp_path / "oob.csv", cells)
    domain = Domain.integers(0, 9)
    with pytest.raises(DomainError) as local:
        stream_histogram(path, "x", domain)
    with pytest.raises(DomainError) as remote:
        spark_histogram(path, "x", domain, spark=spark)
    assert str(remote.value) == str(local.value)
    assert "value 99 on row 2224 of" in str(remote.value) and "oob.csv" in str(remote.value)


def test_first_bad_value_of_the_first_file_in_parquet(spark, tmp_path):
    values = np.arange(5000, dtype=float) % 7
    values[4321] = np.nan
    first = str(tmp_path / "p-0.parquet")
    pq.write_table(pa.table({"x": values}), first, row_group_size=500)
    second = str(tmp_path / "p-1.parquet")
    later = np.zeros(100)
    later[3] = 50.0
    pq.write_table(pa.table({"x": later}), second)
    domain = Domain.interval(0.0, 7.0, 7)
    with pytest.raises(DomainError) as local:
        stream_histogram(str(tmp_path / "p-*.parquet"), "x", domain)
    with pytest.raises(DomainError) as remote:
        spark_histogram(str(tmp_path / "p-*.parquet"), "x", domain, spark=spark)
    assert str(remote.value) == str(local.value)
    assert "missing value (empty/NaN/null) on row 4322 of" in str(remote.value)


def test_non_numeric_cell_and_missing_column_are_data_errors(spark, tmp_path):
    cells = ["1", "2", "x7", "3"]
    path = write_csv(tmp_path / "t.csv", cells)
    with pytest.raises(DataError) as local:
        stream_histogram(path, "x", Domain.integers(0, 9))
    with pytest.raises(DataError) as remote:
        spark_histogram(path, "x", Domain.integers(0, 9), spark=spark)
    assert str(remote.value) == str(local.value)
    assert "x7" in str(remote.value) and "row 4" in str(remote.value)
    with pytest.raises(DataError, match="column 'z' not found"):
        spark_histogram(path, "z", Domain.integers(0, 9), spark=spark)


def test_csv_files_with_different_headers_are_refused_not_read_by_position(spark, tmp_path):
    first = write_csv(tmp_path / "h-0.csv", ["1", "2"], ["7", "7"], header="x,y")
    second = write_csv(tmp_path / "h-1.csv", ["7", "7"], ["3", "4"], header="y,x")  # x is the second column here
    domain = Domain.integers(0, 9)
    np.testing.assert_array_equal(stream_histogram([first, second], "x", domain), domain.histogram([1, 2, 3, 4]))
    with pytest.raises(DataError, match="Spark could not read the CSV input: .*same header"):
        spark_histogram([first, second], "x", domain, spark=spark)


def test_product_domain_error_names_the_column(spark, tmp_path):
    path = write_csv(tmp_path / "g.csv", ["1", "2", "3"], ["0", "9", "1"])
    grid = ProductDomain([Domain.integers(0, 4), Domain.integers(0, 5)])
    with pytest.raises(DomainError, match=r"column 'y': value 9 on row 3 of .*outside the public bounds \[0, 5\]"):
        spark_histogram(path, ["x", "y"], grid, spark=spark)


def test_callers_dataframe_names_the_file_without_a_row(spark, files):
    frame = spark.read.parquet(files["pq0"]).filter("x > 10")  # filtered: file rows are unknown
    with pytest.raises(DomainError, match=r"value \d+ on a row of '.*part-0.parquet' lies outside .*\[0, 40\]"):
        spark_histogram(frame, "x", Domain.integers(0, 40))


def test_dataframe_without_files_names_the_partition(spark):
    frame = spark.createDataFrame([(float(i % 5),) for i in range(50)] + [(None,)], "x double").repartition(1)
    with pytest.raises(DomainError, match=r"missing value .* on record 51 of Spark partition 0"):
        spark_histogram(frame, "x", Domain.interval(0.0, 5.0, 5))


def test_bad_requests_are_parameter_errors(spark, files):
    with pytest.raises(ParameterError, match="2 axes"):
        spark_histogram(files["csv0"], "x", ProductDomain([Domain.integers(0, 1)] * 2), spark=spark)
    with pytest.raises(ParameterError, match="clip must be True or False"):
        spark_histogram(files["csv0"], "x", Domain.integers(0, 1), clip="yes", spark=spark)
    with pytest.raises(ParameterError, match="SparkSession or a master URL"):
        get_session(42)


# ----------------------------------------------------------------------------- API and CLI
def test_release_files_with_the_spark_engine_equals_local_with_one_seed(spark, files):
    domain = Domain.integers(-3, 49)
    pattern = str(files["folder"] / "part-*.parquet")
    here = dprange.release_files(pattern, "x", domain, 1.0, mechanism="hierarchical", rng=7)
    there = dprange.release_files(
        pattern, "x", domain, 1.0, mechanism="hierarchical", rng=7, engine="spark", spark=spark
    )
    np.testing.assert_array_equal(there.histogram().value, here.histogram().value)
    frame = spark.read.parquet(pattern)
    direct = dprange.release(frame, domain, 1.0, mechanism="hierarchical", rng=7, column="x")
    np.testing.assert_array_equal(direct.histogram().value, here.histogram().value)
    with pytest.raises(ParameterError, match="engine must be 'local' or 'spark'"):
        dprange.release_files(pattern, "x", domain, 1.0, engine="dask")


def test_release_grid_of_a_spark_dataframe_uses_its_columns(spark, files):
    grid = ProductDomain([Domain.integers(-3, 49), Domain.interval(0.0, 10.0, 8)])
    frame = spark.read.parquet(str(files["folder"] / "part-*.parquet"))
    there = dprange.release(frame.select("x", "y"), grid, 1.0, mechanism="kronecker", rng=3)
    here = dprange.release([files["ints"], files["reals"]], grid, 1.0, mechanism="kronecker", rng=3)
    np.testing.assert_array_equal(there.counts, here.counts)


def run_cli(args) -> int:
    from dprange.cli import main

    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code


def test_cli_engine_spark_writes_the_same_release(spark, files, tmp_path):
    pattern = str(files["folder"] / "part-*.csv")
    common = ["release", pattern, "-c", "x", "--lo", "-3", "--hi", "49", "--integers", "-e", "1", "--seed", "5"]
    common += ["-m", "flat"]
    assert run_cli([*common, "-o", str(tmp_path / "local.json")]) == 0
    assert (
        run_cli([*common, "--engine", "spark", "--spark-master", "local[2]", "-o", str(tmp_path / "spark.json")]) == 0
    )
    local = dprange.load_release(str(tmp_path / "local.json"))
    remote = dprange.load_release(str(tmp_path / "spark.json"))
    np.testing.assert_array_equal(remote.histogram().value, local.histogram().value)
    grid = ["release", files["csv0"], "-c", "x", "-c", "y", "--lo", "-3", "--hi", "49", "--bins", "53"]
    grid += ["--lo", "0", "--hi", "10", "--bins", "8", "-e", "1", "--seed", "5", "-m", "kronecker"]
    assert run_cli([*grid, "-o", str(tmp_path / "g1.json")]) == 0
    assert run_cli([*grid, "--engine", "spark", "-o", str(tmp_path / "g2.json")]) == 0
    assert (tmp_path / "g1.json").read_text() == (tmp_path / "g2.json").read_text()


# ----------------------------------------------------------------------------- local DP
@pytest.mark.parametrize("oracle", ["oue", "hrr"])
def test_ldp_reports_aggregate_to_the_local_state(spark, tmp_path, oracle):
    from dprange.ldp import HierarchicalHistogram, ProtocolReports

    values = np.random.default_rng(2).integers(0, 16, 900)
    protocol = HierarchicalHistogram(16, 4, oracle, epsilon=2.0)
    paths = []
    for k in range(2):
        reports = protocol.randomize(values[450 * k : 450 * (k + 1)], rng=10 + k)
        paths.append(str(tmp_path / f"r{k}.jsonl"))
        reports.to_jsonl(paths[-1])
    local = protocol.aggregator()
    for path in paths:
        local.add(ProtocolReports.load(path))
    remote = spark_ldp_aggregate(spark.read.text(paths).repartition(3), protocol)
    assert remote.n == local.n == 900
    for level, agg in local.levels.items():
        assert remote.levels[level].n == agg.n
        np.testing.assert_array_equal(remote.levels[level].summary, agg.summary)
    np.testing.assert_array_equal(remote.release().histogram().value, local.release().histogram().value)
    if oracle == "oue":  # report files read by the engine itself
        from_files = spark_ldp_aggregate(paths, protocol, spark=spark)
        for level, agg in local.levels.items():
            np.testing.assert_array_equal(from_files.levels[level].summary, agg.summary)


def test_ldp_reports_of_another_protocol_are_refused(spark, tmp_path):
    from dprange.errors import ReportError
    from dprange.ldp import HierarchicalHistogram

    made = HierarchicalHistogram(16, 4, "oue", epsilon=2.0)
    made.randomize(np.arange(16), rng=1).to_jsonl(str(tmp_path / "r.jsonl"))
    other = HierarchicalHistogram(16, 4, "oue", epsilon=1.0)
    with pytest.raises(ReportError, match="epsilon"):
        spark_ldp_aggregate(spark.read.text(str(tmp_path / "r.jsonl")), other)


# ----------------------------------------------------------------------------- blank lines
# Spark's CSV reader skips blank lines, the local engine reads them as a record of missing
# values.  Both engines stop on the first one with the same message and row (unless
# drop_missing, when both drop it), and rows named in other errors are the file's lines on
# both, blank lines included.
BLANK_DOMAIN = Domain.integers(0, 5)

#: (file text, row of the first blank line); the values are 1 and 2 in every case.
BLANK_CASES = {
    "middle": ("x,y\n1,a\n\n2,b\n", 3),
    "spaces and a tab": ("x\n1\n \t \n2\n", 3),
    "crlf": ("x\r\n1\r\n\r\n2\r\n", 3),
    "trailing": ("x\n1\n2\n\n", 4),
}


def both_errors(path, **options) -> tuple[str, str]:
    """The error messages of the local and the Spark engine counting column x of ``path``."""
    spark_session = options.pop("spark")
    with pytest.raises(DomainError) as local:
        stream_histogram(path, "x", BLANK_DOMAIN, **options)
    with pytest.raises(DomainError) as remote:
        spark_histogram(path, "x", BLANK_DOMAIN, spark=spark_session, **options)
    return str(local.value), str(remote.value)


@pytest.mark.parametrize("case", BLANK_CASES)
def test_a_blank_line_stops_both_engines_at_its_row_or_is_dropped_by_both(spark, tmp_path, case):
    text, row = BLANK_CASES[case]
    path = tmp_path / "blank.csv"
    path.write_bytes(text.encode())
    local, remote = both_errors(str(path), spark=spark)
    assert remote == local  # Spark used to count [0, 1, 1, 0, 0, 0] without a word
    assert local == (
        f"missing value (empty/NaN/null) on row {row} of {str(path)!r}; "
        "clean it or pass drop_missing=True to drop such rows"
    )
    expected = [0, 1, 1, 0, 0, 0]
    np.testing.assert_array_equal(stream_histogram(str(path), "x", BLANK_DOMAIN, drop_missing=True), expected)
    np.testing.assert_array_equal(
        spark_histogram(str(path), "x", BLANK_DOMAIN, drop_missing=True, spark=spark), expected
    )


def test_a_nul_line_is_refused_by_both_engines_with_one_message(spark, tmp_path):
    """Spark's reader skipped a line of NUL bytes as blank (Java's trim: with drop_missing it
    counted [0, 1, 1, 0, 0, 0]) while the local engine refused the file as binary, and read NULs
    past its first 64 KiB as a cell.  A NUL anywhere now refuses the file on both engines, with
    one message, whatever drop_missing; a problem of an earlier input file still comes first."""
    early = tmp_path / "nul.csv"
    early.write_bytes(b"x\n1\n\x00\x00\n2\n")
    late = tmp_path / "late.csv"
    late.write_bytes(b"x\n" + b"1\n" * 40_000 + b"\x00\x00\n2\n")  # past the 64 KiB the local engine sniffs
    for path in (str(early), str(late)):
        for drop_missing in (False, True):
            with pytest.raises(DataError) as local:
                stream_histogram(path, "x", BLANK_DOMAIN, drop_missing=drop_missing)
            with pytest.raises(DataError) as remote:
                spark_histogram(path, "x", BLANK_DOMAIN, drop_missing=drop_missing, spark=spark)
            assert str(remote.value) == str(local.value) == str(nul_bytes_error(path))
    bad = tmp_path / "a.csv"
    bad.write_text("x\n1\n9\n")  # out of bounds on row 3, in the file before the NUL
    local_error, remote_error = both_errors([str(bad), str(early)], spark=spark)
    assert remote_error == local_error and local_error.startswith("value 9 on row 3 of")


#: Lines Spark's CSV reader passed over (a short row read with nulls, a long one cut to the
#: header, blank lines of other characters skipped) that the local engine stops at.
LINE_CASES = {
    "short row": "x,y\n1,2\n3\n4,5\n",
    "long quoted row": 'x,y\n1,"a,b"\n3,"c",5\n',
    "spaces in two columns": "x,y\n1,2\n \t\n3,4\n",
    "control characters": "x\n1\n\x01\n2\n",
    "blank then short": "x,y\n1,2\n\n3\n",
}


@pytest.mark.parametrize("case", LINE_CASES)
def test_a_row_of_another_width_stops_both_engines_at_its_row(spark, tmp_path, case):
    """Spark counted these rows ([0, 1, 0, 1, 1, 0] for the short row); both engines now stop
    at the same row with the same message, with and without drop_missing.  A row of another
    width refuses its file whatever else is in it (the blank line before it too)."""
    path = tmp_path / "rows.csv"
    path.write_bytes(LINE_CASES[case].encode())
    for drop_missing in (False, True):
        with pytest.raises(DataError) as local:
            stream_histogram(str(path), "x", BLANK_DOMAIN, drop_missing=drop_missing)
        with pytest.raises(DataError) as remote:
            spark_histogram(str(path), "x", BLANK_DOMAIN, drop_missing=drop_missing, spark=spark)
        assert str(remote.value) == str(local.value)
        assert ("field(s) but the header names" in str(local.value)) == (case != "control characters")


def test_rows_are_the_file_lines_across_splits(spark, tmp_path):
    """20 KB: three 8 KB splits (rows 1-4096, 4097-8192, ...).  Blank lines at rows 5000
    and 6000, a bad value at row 7000, all in the second split: without drop_missing both
    engines stop at row 5000; with it both name row 7000 for the bad value (Spark's records
    used to number it 6998)."""
    lines = ["x"] + [str(i % 5) for i in range(10_000)]
    lines[4999], lines[5999], lines[6999] = "", "  ", "99"
    path = tmp_path / "long.csv"
    path.write_text("\n".join(lines) + "\n")
    local, remote = both_errors(str(path), spark=spark)
    assert remote == local and "on row 5000 of" in local
    local, remote = both_errors(str(path), spark=spark, drop_missing=True)
    assert "on row 7000 of" in local and "on row 7000 of" in remote and "outside the public bounds" in remote


def test_the_first_problem_in_input_order_is_reported(spark, tmp_path):
    bad = tmp_path / "a.csv"
    bad.write_text("x\n1\n9\n")  # out of bounds on row 3
    blank = tmp_path / "b.csv"
    blank.write_text("x\n\n1\n")  # blank on row 2
    for order, want in (([bad, blank], f"on row 3 of {str(bad)!r}"), ([blank, bad], f"on row 2 of {str(blank)!r}")):
        local, remote = both_errors([str(p) for p in order], spark=spark)
        assert want in local and want in remote
    path = tmp_path / "one.csv"
    path.write_text("x\n9\n\n")  # one file, the bad value before the blank line (the reverse: test above)
    local, remote = both_errors(str(path), spark=spark)
    assert (
        local.startswith("value 9")
        and remote.startswith("value 9")
        and "on row 2 of" in local
        and "on row 2 of" in remote
    )


def test_grid_inputs_and_the_cli_frame_stop_on_a_blank_line(spark, tmp_path):
    path = tmp_path / "grid.csv"
    path.write_text("x,y\n1,2\n\n3,4\n")
    grid = ProductDomain([BLANK_DOMAIN, BLANK_DOMAIN])
    message = r"column 'x': missing value \(empty/NaN/null\) on row 3 of"
    with pytest.raises(DomainError, match=message):
        spark_histogram(str(path), ["x", "y"], grid, spark=spark)
    with pytest.raises(DomainError, match=message):  # what `dprange release -c x -c y --engine spark` reads
        files_frame(str(path), ["x", "y"], spark, domain=grid, drop_missing=False)
    expected = np.zeros((6, 6), dtype=np.int64)
    expected[1, 2] = expected[3, 4] = 1
    frame = files_frame(str(path), ["x", "y"], spark, domain=grid, drop_missing=True)
    np.testing.assert_array_equal(spark_histogram(frame, ["x", "y"], grid, drop_missing=True), expected)
    np.testing.assert_array_equal(
        spark_histogram(str(path), ["x", "y"], grid, drop_missing=True, spark=spark), expected
    )


def test_privacy_units_and_groups_on_spark_give_the_exact_counts_at_huge_epsilon(spark, tmp_path):
    """privacy_id / by= counted by Spark (groupBy id and group by windows): with k above every
    id's rows and m = 2 groups the per-group histograms equal the true ones; with k = 1 each
    group holds one row per id; a Spark DataFrame and files give the same."""
    import pandas as pd

    rng = np.random.default_rng(4)
    ids = rng.integers(0, 60, size=400)
    frame = pd.DataFrame({"id": ids, "g": np.where(rng.random(400) < 0.5, "a", "b"), "x": rng.integers(0, 8, 400)})
    path = tmp_path / "units.parquet"
    frame.to_parquet(path, index=False)
    domain = Domain.integers(0, 7)
    args = {"by": "g", "groups": ["a", "b"], "privacy_id": "id", "mechanism": "flat", "rng": 3}
    files = dprange.release_files(
        str(path), "x", domain, 1e6, engine="spark", spark=spark, max_rows_per_id=400, max_groups_per_id=2, **args
    )
    sdf = spark.createDataFrame(frame)
    direct = dprange.release(sdf, domain, 1e6, column="x", max_rows_per_id=400, max_groups_per_id=2, **args)
    for key in ("a", "b"):
        truth = np.bincount(frame.x[frame.g == key], minlength=8)
        np.testing.assert_allclose(files[key].histogram().value, truth, atol=1e-6)
        np.testing.assert_allclose(direct[key].histogram().value, truth, atol=1e-6)
    one = dprange.release(sdf, domain, 1e6, column="x", max_rows_per_id=1, max_groups_per_id=2, **args)
    for key in ("a", "b"):
        assert one[key].total().value == pytest.approx(frame.id[frame.g == key].nunique(), abs=1e-6)
    single = dprange.release(sdf, domain, 1e6, column="x", max_rows_per_id=1, max_groups_per_id=1, **args)
    assert single["a"].total().value + single["b"].total().value == pytest.approx(frame.id.nunique(), abs=1e-6)


# ----------------------------------------------------------------------------- private keys
@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    """Ids 0-59 in keys " a", "b ", "c" (text with spaces, missing markers), a double key column
    (integral values, NaN); one id alone holds the key "<TAB>solo"; as a frame, CSV and Parquet."""
    import pandas as pd

    rng = np.random.default_rng(33)
    n = 400
    frame = pd.DataFrame(
        {
            "id": np.append(rng.integers(0, 60, n), 99),
            "g": np.append(rng.choice([" a", "b ", "c", "NA", ""], n), "\tsolo"),
            "f": np.append(rng.choice([1.0, 2.5, 3.0, np.nan], n), 2.5),
            "x": np.append(rng.integers(0, 8, n), 3),
        }
    )
    folder = tmp_path_factory.mktemp("keys")
    frame.to_csv(folder / "k.csv", index=False)
    frame.to_parquet(folder / "k.parquet", index=False)
    return frame, str(folder / "k.csv"), str(folder / "k.parquet")


def ids_per_key(frame, by) -> dict:
    """Distinct ids (or rows, without ids) per key as the local engine labels keys, by pandas."""
    import pandas as pd

    column = frame[by]
    keys = column if pd.api.types.is_numeric_dtype(column) else column.astype(str).str.strip()
    present = keys.notna() & ~keys.isin(["", "NA", "nan"])
    return frame[present].groupby(keys[present]).id.nunique().to_dict()


def test_private_key_counts_on_spark_equal_the_local_engine(spark, keyed):
    """With m at least every id's number of keys, the distinct ids per key counted by Spark
    equal the local engine's (frames, CSV and Parquet) and pandas's; without ids, rows per key;
    a double column's integral keys are integers, text keys stripped of any white space, a
    decimal column's keys their text."""
    from dprange.engines.key_counts import KeyBounder, KeyCounter, file_key_counts
    from dprange.engines.spark_keys import spark_key_counts

    frame, csv, parquet = keyed
    sdf = spark.createDataFrame(frame)
    for by, id_column, m in (("g", None, 1), ("f", "id", 4)):
        counter = KeyCounter(None if id_column is None else KeyBounder(np.random.default_rng(1), m))
        counter.add(frame[by], None if id_column is None else frame[id_column])
        labels, counts = spark_key_counts(sdf, by, id_column=id_column, max_keys_per_id=m, rng=np.random.default_rng(2))
        assert labels == counter.counts()[0] and counts.tolist() == counter.counts()[1].tolist()
    assert labels == [1, 2.5, 3] and isinstance(labels[0], int)
    assert dict(zip(labels, counts.tolist())) == ids_per_key(frame, "f")
    for path in (csv, parquet):
        local = file_key_counts(path, "g", "id", KeyBounder(np.random.default_rng(1), 4))
        there = spark_key_counts(
            path, "g", id_column="id", max_keys_per_id=4, rng=np.random.default_rng(2), spark=spark
        )
        assert there[0] == local[0] == ["a", "b", "c", "solo"]
        assert there[1].tolist() == local[1].tolist() == [ids_per_key(frame, "g")[k] for k in local[0]]
    from decimal import Decimal

    decimals = parquet.replace("k.parquet", "d.parquet")
    pq.write_table(
        pa.table({"g": pa.array([Decimal("1.5"), Decimal(2), None, Decimal("1.5")], pa.decimal128(9, 2))}), decimals
    )
    there = spark_key_counts(decimals, "g", id_column=None, max_keys_per_id=1, rng=None, spark=spark)
    assert there[0] == file_key_counts(decimals, "g", None, None)[0] == ["1.50", "2.00"]
    assert there[1].tolist() == [2, 1]


def test_private_key_counts_on_spark_bound_each_id_to_m_keys(spark):
    """Every id holds two keys (two rows each): with m = 1 each id is counted once, in a key
    the keyed hash picks (both keys picked by some ids), and one id added (under the same
    secret) adds one to one key: the others' choices do not move; with m = 2 in both.  More keys than
    the limit, and a missing id, are refused."""
    import pandas as pd

    from dprange.engines.spark_keys import spark_key_counts

    pairs = [("p", "q"), ("q", "r"), ("p", "r")]
    rows = [(i, key) for i in range(60) for key in pairs[i % 3] for _ in range(2)]
    sdf = spark.createDataFrame(pd.DataFrame(rows, columns=["id", "g"]))
    one = spark_key_counts(sdf, "g", id_column="id", max_keys_per_id=1, rng=np.random.default_rng(7))
    assert one[0] == ["p", "q", "r"] and one[1].sum() == 60 and one[1].min() > 0 and one[1].max() < 40
    joined = spark.createDataFrame(pd.DataFrame(rows + [(60, "p"), (60, "q")], columns=["id", "g"]))
    plus = spark_key_counts(joined, "g", id_column="id", max_keys_per_id=1, rng=np.random.default_rng(7))
    assert sorted((plus[1] - one[1]).tolist()) == [0, 0, 1]  # the same secret: only the new id's choice is new
    two = spark_key_counts(sdf, "g", id_column="id", max_keys_per_id=2, rng=np.random.default_rng(7))
    assert two[1].tolist() == [40, 40, 40]
    with pytest.raises(DataError, match="at most 2 distinct keys.*groups="):
        spark_key_counts(sdf, "g", id_column=None, max_keys_per_id=1, rng=np.random.default_rng(7), limit=2)
    gap = spark.createDataFrame(pd.DataFrame({"id": ["u", None, "v"], "g": ["p", "q", "p"]}))
    with pytest.raises(DataError, match="missing id"):
        spark_key_counts(gap, "g", id_column="id", max_keys_per_id=1, rng=np.random.default_rng(7))


def test_private_keys_on_spark_release_the_true_histograms_at_huge_epsilon(spark, keyed):
    """by= without groups= on a Spark DataFrame at epsilon 1e6: the keys held by many ids are
    kept (the one held by a single id is kept with probability delta), and each kept key's
    histogram is the true one, as on the local engine, for text keys and a double key column;
    a declared key that reads like a missing marker ("NA") still matches its rows."""
    frame, _, _ = keyed
    sdf = spark.createDataFrame(frame)
    domain = Domain.integers(0, 7)
    args = {"delta": 1e-6, "mechanism": "flat", "rng": 3}
    rows = dprange.release(sdf, domain, 1e6, column="x", by="g", **args)
    assert rows.keys == ["a", "b", "c"] == dprange.release(frame, domain, 1e6, column="x", by="g", **args).keys
    ids = {"privacy_id": "id", "max_rows_per_id": 400, "max_groups_per_id": 4}
    reals = dprange.release(sdf, domain, 1e6, column="x", by="f", **args, **ids)
    assert reals.keys == [1, 2.5, 3] == dprange.release(frame, domain, 1e6, column="x", by="f", **args, **ids).keys
    declared = dprange.release(sdf, domain, 1e6, column="x", by="g", groups=["NA", "a"], mechanism="flat", rng=3)
    for grouped, column in ((rows, frame.g.str.strip()), (reals, frame.f), (declared, frame.g.str.strip())):
        for key in grouped.keys:
            truth = np.bincount(frame.x[column == key], minlength=8)
            np.testing.assert_allclose(grouped[key].histogram().value, truth, atol=1e-6)


def test_cli_engine_spark_selects_private_keys(spark, keyed, tmp_path):
    """dprange release FILE --by g --delta 1e-6 --engine spark (ids bounded to 4 keys and 400
    rows): the keys held by many ids, sorted, each with its true histogram at epsilon 1e6."""
    frame, csv, _ = keyed
    out = tmp_path / "keys.json"
    line = ["release", csv, "-c", "x", "--lo", "0", "--hi", "7", "--integers", "--by", "g", "--delta", "1e-6"]
    line += ["--privacy-id", "id", "--max-rows-per-id", "400", "--max-groups-per-id", "4", "-e", "1e6", "-m", "flat"]
    assert run_cli([*line, "--engine", "spark", "--seed", "2", "-o", str(out)]) == 0
    grouped = dprange.GroupedRelease.from_json(out)
    assert grouped.keys == ["a", "b", "c"] and grouped.key_selection["delta"] == 1e-6
    for key in grouped.keys:
        truth = np.bincount(frame.x[frame.g.str.strip() == key], minlength=8)
        np.testing.assert_allclose(grouped[key].histogram().value, truth, atol=1e-6)


# ----------------------------------------------------------------------------- categories
def test_categorical_csv_and_parquet_equal_the_local_engine(spark, tmp_path):
    rng = np.random.default_rng(2)
    pool = np.array(["Private", " Self-emp", "State-gov ", '"Gov, local"', "7", "", "NA", "?"], dtype=object)
    cells = rng.choice(pool, 3000).tolist()
    csv = write_csv(tmp_path / "c.csv", cells)
    plain = [None if c.strip() in ("", "NA") else c.strip('"') for c in cells]
    parquet = str(tmp_path / "c.parquet")
    pq.write_table(
        pa.table({"x": pa.array(plain).dictionary_encode(), "y": np.arange(3000)}), parquet, row_group_size=500
    )
    domain = Domain.categories(["Private", "Self-emp", "State-gov", "Gov, local", 7], other=True)
    expected = domain.histogram(plain, drop_missing=True)
    assert expected.min() > 0
    for path in (csv, parquet):
        counts = spark_histogram(path, "x", domain, drop_missing=True, spark=spark)
        np.testing.assert_array_equal(counts, stream_histogram(path, "x", domain, drop_missing=True))
        np.testing.assert_array_equal(counts, expected)
    strict = Domain.categories(["Private", "Self-emp", "State-gov", "Gov, local", 7])
    with pytest.raises(DomainError, match="not among the 5 public categories.*other=True"):
        spark_histogram(csv, "x", strict, drop_missing=True, spark=spark)


def test_categorical_axis_of_a_product_domain_equals_the_in_memory_grid(spark, tmp_path):
    rng = np.random.default_rng(3)
    sex = rng.choice(["Male", "Female", ""], 2000).tolist()
    age = rng.integers(0, 5, 2000)
    path = write_csv(tmp_path / "g.csv", sex, age)
    grid = ProductDomain([Domain.categories(["Female", "Male"]), Domain.integers(0, 4)])
    expected = grid.histogram([[s or None for s in sex], age], drop_missing=True)
    np.testing.assert_array_equal(spark_histogram(path, ["x", "y"], grid, drop_missing=True, spark=spark), expected)
    frame = files_frame(path, ["x", "y"], spark, domain=grid, drop_missing=True)
    here = dprange.release_grid(
        [[s or None for s in sex], age], grid, 1.0, mechanism="kronecker", rng=5, drop_missing=True
    )
    there = dprange.release_grid(frame, grid, 1.0, mechanism="kronecker", rng=5, drop_missing=True)
    np.testing.assert_array_equal(there.counts, here.counts)


def test_cli_engine_spark_releases_categories_like_local(spark, tmp_path):
    rng = np.random.default_rng(4)
    path = write_csv(tmp_path / "c.csv", rng.choice(["Male", "Female", "", "x"], 900), rng.integers(0, 3, 900))
    one = ["release", path, "-c", "x", "--categories", "x=Male,Female", "--other", "--drop-missing", "-e", "1"]
    one += ["--seed", "2", "-m", "flat"]
    assert run_cli([*one, "-o", str(tmp_path / "l1.json")]) == 0
    assert run_cli([*one, "--engine", "spark", "-o", str(tmp_path / "s1.json")]) == 0
    local, remote = (dprange.load_release(str(tmp_path / f"{w}1.json")) for w in "ls")
    np.testing.assert_array_equal(remote.histogram().value, local.histogram().value)
    assert remote.labels == ["Male", "Female", "other"]
    two = ["release", path, "-c", "x", "-c", "y", "--categories", "x=Male,Female", "--other", "--lo", "0", "--hi"]
    two += ["2", "--integers", "--drop-missing", "-e", "1", "--seed", "2", "-m", "kronecker"]
    assert run_cli([*two, "-o", str(tmp_path / "l2.json")]) == 0
    assert run_cli([*two, "--engine", "spark", "-o", str(tmp_path / "s2.json")]) == 0
    assert (tmp_path / "l2.json").read_text() == (tmp_path / "s2.json").read_text()

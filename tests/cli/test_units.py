"""dprange.cli.units: ``dprange release --privacy-id --by --groups`` on a copy of Adult with a
synthetic id column (1-20 rows per id, made in a temporary folder), and ``dprange error
--max-rows-per-id --groups``: the cost of contribution bounding before any data are read."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from _helpers import run_cli

from conftest import SHARED
from dprange import GroupedRelease, Session

ADULT = SHARED / "data" / "adult" / "adult.csv"


@pytest.fixture(scope="module")
def adult_ids(tmp_path_factory):
    """Adult with an id column: ids of 1-20 rows, rows shuffled.  One age of the shared copy is
    39.5 (a planted defect); it is rounded here so that --integers reads every row."""
    if not ADULT.exists():
        pytest.skip("needs ../shared/data/adult/adult.csv")
    frame = pd.read_csv(ADULT)
    rng = np.random.default_rng(33)
    sizes = rng.integers(1, 21, size=len(frame))
    ids = np.repeat(np.arange(sizes.size), sizes)[: len(frame)]
    frame["id"] = rng.permutation(ids)
    frame["age"] = frame["age"].round()
    path = tmp_path_factory.mktemp("adult") / "adult.csv"
    frame.to_csv(path, index=False)
    return path


ISSUE_LINE = "-c age --lo 0 --hi 120 --integers --by sex --groups Male,Female --privacy-id id --max-rows-per-id 3 -e 1"


def test_the_issue_command_line_releases_one_table_per_group(adult_ids, tmp_path, capsys):
    out, png = tmp_path / "out.json", tmp_path / "out.png"
    code, stdout, stderr = run_cli(["release", adult_ids, *ISSUE_LINE.split(), "-o", out, "--plot", png], capsys)
    assert code == 0, stderr
    assert "sex = Male" in stdout and "sex = Female" in stdout
    assert stdout.count("95% simultaneous interval") == 2
    assert "add or remove one id with all its rows" in stdout
    grouped = GroupedRelease.from_json(out)
    assert grouped.keys == ["Male", "Female"] and grouped.epsilon == 1.0
    assert json.loads(out.read_text())["groups"][1]["key"] == "Female"
    assert grouped["Male"].provenance.privacy_unit["max_rows_per_id"] == 3
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_at_huge_epsilon_with_k_above_every_id_the_groups_are_exact(adult_ids, tmp_path, capsys):
    out = tmp_path / "out.json"
    # ids hold rows of both sexes: m = 2 groups and k = 20 rows per id keep every row
    args = ISSUE_LINE.replace("--max-rows-per-id 3 -e 1", "--max-rows-per-id 20 --max-groups-per-id 2 -e 1e6").split()
    code, _, stderr = run_cli(["release", adult_ids, *args, "--mechanism", "flat", "-o", out], capsys)
    assert code == 0, stderr
    grouped = GroupedRelease.from_json(out)
    frame = pd.read_csv(adult_ids, skipinitialspace=True)
    for key in ("Male", "Female"):
        truth = np.bincount(frame.age[frame.sex == key].astype(int), minlength=121)
        np.testing.assert_allclose(grouped[key].histogram().value, truth, atol=1e-6)


def test_a_session_is_charged_the_total_once(adult_ids, tmp_path, capsys):
    ledger = tmp_path / "ledger.json"
    args = ["release", adult_ids, *ISSUE_LINE.split(), "-o", tmp_path / "o.json"]
    code, stdout, stderr = run_cli([*args, "--session", ledger, "--session-epsilon", "3"], capsys)
    assert code == 0, stderr
    session = Session.open(ledger)
    assert len(session.entries) == 1 and session.entries[0].epsilon == 1.0
    assert "privacy unit 'id'" in session.entries[0].what


def test_groups_from_a_file_and_the_refusals(adult_ids, tmp_path, capsys):
    keys = tmp_path / "keys.txt"
    keys.write_text("Female\n")
    args = ["release", adult_ids, "-c", "age", "--lo", "0", "--hi", "120", "--integers", "-e", "1"]
    code, stdout, stderr = run_cli([*args, "--by", "sex", "--groups-file", keys, "-o", tmp_path / "f.json"], capsys)
    assert code == 0, stderr
    assert GroupedRelease.from_json(tmp_path / "f.json").keys == ["Female"]
    assert "one row must be one person" in stdout
    for extra, message in [
        (["--by", "sex"], "--by needs --groups"),
        (["--privacy-id", "id"], "needs max_rows_per_id"),
        (["--privacy-id", "id", "--max-rows-per-id", "2", "--delta", "1e-6"], "delta > 0"),
        (["--by", "sex", "--groups", "Male", "--groups-file", keys], "not both"),
    ]:
        code, _, stderr = run_cli([*args, *extra, "-o", tmp_path / "x.json"], capsys)
        assert code == 2 and message in stderr, (extra, stderr)


def test_help_says_one_row_must_be_one_person(capsys):
    code, stdout, _ = run_cli(["release", "--help"], capsys)
    assert code == 0
    assert "One row must be one person" in " ".join(stdout.split())
    assert "WITHOUT IT, ONE ROW MUST BE ONE PERSON" in " ".join(stdout.split())


def test_error_shows_the_cost_of_contribution_bounding(capsys):
    fixed = ["--mechanisms", "flat,h2"]
    code, plain, _ = run_cli(["error", "--n", "16", "-e", "1", "--json", *fixed], capsys)
    assert code == 0
    code, bounded, _ = run_cli(
        [
            "error",
            "--n",
            "16",
            "-e",
            "1",
            "--max-rows-per-id",
            "3",
            "--groups",
            "10",
            "--max-groups-per-id",
            "2",
            "--json",
        ],
        capsys,
    )
    assert code == 0
    plain, bounded = json.loads(plain), json.loads(bounded)
    assert bounded["contribution_bounding"]["row_epsilon"] * 6 <= 1.0
    factor = bounded["contribution_bounding"]["rmse_factor"]
    assert factor == pytest.approx(bounded["rmse"] / plain["rmse"], rel=1e-12)
    # discrete Laplace noise of scale 6 b has a little more than 36 times the variance of scale b
    assert 6.0 < factor < 6.3
    code, text, _ = run_cli(["error", "--n", "16", "-e", "1", "--max-rows-per-id", "3"], capsys)
    assert code == 0 and "contribution bounding: at most 3 rows per id" in text and "x that of one row" in text
    code, _, stderr = run_cli(["error", "--n", "16", "-e", "1", "--max-rows-per-id", "3", "--delta", "1e-6"], capsys)
    assert code == 2 and "delta > 0" in stderr


def test_by_without_groups_selects_the_keys_privately(adult_ids, tmp_path, capsys):
    """--by sex alone with --delta: keys chosen from the data with --key-share of epsilon and all
    of delta, both sexes kept (thousands of ids each), sorted; the session charged once."""
    out, ledger = tmp_path / "p.json", tmp_path / "ledger.json"
    line = ISSUE_LINE.replace("--groups Male,Female ", "").split()
    extra = ["--delta", "1e-6", "--key-share", "0.2", "--session", ledger, "--session-epsilon", "2"]
    extra += ["--session-delta", "1e-5"]
    code, stdout, stderr = run_cli(["release", adult_ids, *line, *extra, "-o", out], capsys)
    assert code == 0, stderr
    assert "keys selected privately: epsilon=0.2, delta=1e-06 (2 kept" in stdout
    grouped = GroupedRelease.from_json(out)
    assert grouped.keys == ["Female", "Male"] and grouped.key_selection["epsilon"] == 0.2
    assert all(r.epsilon == pytest.approx(0.8) and r.delta == 0 for r in grouped.releases)
    session = Session.open(ledger)
    assert len(session.entries) == 1 and session.entries[0].epsilon == 1.0 and session.entries[0].delta == 1e-6
    assert "keys selected privately" in session.entries[0].what
    for extra, message in [
        (["--key-share", "0.5"], "--key-share needs --by without --groups"),
        (["--by", "sex", "--delta", "1e-6", "--key-share", "1.5"], "key_share"),
    ]:
        args = ["release", adult_ids, "-c", "age", "--lo", "0", "--hi", "120", "--integers", "-e", "1", *extra]
        code, _, stderr = run_cli([*args, "-o", tmp_path / "x.json"], capsys)
        assert code == 2 and message in stderr, (extra, stderr)


WORKCLASS = "Private,Self-emp-not-inc,Self-emp-inc,Federal-gov,Local-gov,State-gov,Without-pay,Never-worked"


def test_a_categorical_column_with_ids_and_groups(adult_ids, tmp_path, capsys):
    """-c workclass --categories ... --other with --by sex --privacy-id id: one labelled table of
    category counts per sex; at epsilon 1e6 with k = 20 and m = 2 (every row kept) each group's
    counts are the true ones (the "?" rows in the other bin); the plot and the table carry labels."""
    out, png = tmp_path / "wc.json", tmp_path / "wc.png"
    args = ["release", adult_ids, "-c", "workclass", "--categories", f"workclass={WORKCLASS}", "--other"]
    args += ["--by", "sex", "--groups", "Male,Female", "--privacy-id", "id", "--max-rows-per-id", "20"]
    args += ["--max-groups-per-id", "2", "-e", "1e6", "--mechanism", "flat", "-o", out, "--plot", png]
    code, stdout, stderr = run_cli(args, capsys)
    assert code == 0, stderr
    assert "sex = Male" in stdout and "Self-emp-not-inc" in stdout and "Never-worked" in stdout
    grouped = GroupedRelease.from_json(out)
    frame = pd.read_csv(adult_ids, skipinitialspace=True)
    labels = WORKCLASS.split(",")
    for key in ("Male", "Female"):
        rows = frame.workclass[frame.sex == key]
        truth = [int((rows == label).sum()) for label in labels] + [int((~rows.isin(labels)).sum())]
        np.testing.assert_allclose(grouped[key].histogram().value, truth, atol=1e-6)
        assert grouped[key].domain.bin_labels()[:8] == labels
    table = grouped.to_pandas()
    assert table.category.tolist()[:9] == [*labels, "other"] and table["count"].sum() == len(frame)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the issue's line: k = 3, epsilon 1, one group per id
    line = [*args[:7], "--by", "sex", "--groups", "Male,Female", "--privacy-id", "id", "--max-rows-per-id", "3"]
    code, stdout, stderr = run_cli([*line, "-e", "1", "-o", tmp_path / "k3.json"], capsys)
    assert code == 0, stderr
    assert GroupedRelease.from_json(tmp_path / "k3.json")["Female"].epsilon == 1.0


def test_the_keys_of_a_categorical_by_column_from_categories(adult_ids, tmp_path, capsys):
    """--by sex --categories sex=Female,Male: the categories are the public keys, in their order."""
    out = tmp_path / "c.json"
    args = ["release", adult_ids, *ISSUE_LINE.replace("--groups Male,Female", "--categories sex=Female,Male").split()]
    code, stdout, stderr = run_cli([*args, "-o", out], capsys)
    assert code == 0, stderr
    assert GroupedRelease.from_json(out).keys == ["Female", "Male"] and "sex = Female" in stdout
    code, _, stderr = run_cli([*args, "--groups", "Male", "-o", out], capsys)
    assert code == 2 and "give the keys of --by once" in stderr

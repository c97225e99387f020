"""dprange.cli.report: ``dprange report RELEASE -o page.html`` (1-D and grid releases saved by
``dprange release``) and ``dprange release --report``: the same page, options checked before any
work, and the column name on the plots' axes."""

import re

import pytest
from _helpers import _release, grid_args, run_cli

pytest.importorskip("matplotlib")


def quantile_rows(page: str) -> list[str]:
    section = page.split("<h2>Quantiles</h2>", 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr>(.*?)</tr>", section)


def test_release_report_is_the_page_of_the_saved_release(csv_file, tmp_path, capsys):
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    code, stdout, err = run_cli(_release(csv_file, "-o", out, "--report", page, "--workload", "prefix"), capsys)
    assert code == 0, err
    assert stdout.strip().endswith(f"wrote {out} and {page}")
    direct = page.read_text(encoding="utf-8")
    assert "<h1>Private release of age</h1>" in direct and direct.count("<img ") == 2
    again = tmp_path / "again.html"
    code, stdout, err = run_cli(["report", out, "-o", again, "-c", "age"], capsys)
    assert code == 0 and stdout.strip() == f"wrote {again}", err
    loaded = again.read_text(encoding="utf-8")
    assert quantile_rows(loaded) == quantile_rows(direct) and len(quantile_rows(direct)) == 10
    assert "from r.json" in loaded  # the footer names the release file
    code, _, err = run_cli(["report", out, "-o", tmp_path / "plain.html"], capsys)  # the column the JSON records
    assert code == 0 and "<h1>Private release of age</h1>" in (tmp_path / "plain.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("mechanism", ["kronecker", "dawa_pruned", "auto_pruned"])
def test_report_of_a_grid_release_has_its_heatmap(tmp_path, capsys, mechanism):
    """A grid release's page (exact or data-aware) has its heatmap and total, from ``release
    --report`` and from ``dprange report`` on the saved file."""
    path = tmp_path / "grid.csv"
    path.write_text("age,hours\n" + "".join(f"{18 + i % 40},{i % 50}\n" for i in range(300)))
    out, page = tmp_path / "g.json", tmp_path / "g.html"
    code, _, err = run_cli(grid_args(path, out, "--report", page, "-m", mechanism), capsys)
    assert code == 0, err
    written = page.read_text(encoding="utf-8")
    assert "Cell counts" in written and written.count("<img ") == 1 and "age × hours" in written
    assert ("(no error bars)" in written) == (mechanism != "kronecker")
    assert ("standard error is in the release" in written) == (mechanism == "kronecker")
    again = tmp_path / "again.html"
    code, _, err = run_cli(["report", out, "-o", again, "-c", "<a>", "-c", "b", "--title", "Grid & co"], capsys)
    assert code == 0, err
    text = again.read_text(encoding="utf-8")
    assert "<h1>Grid &amp; co</h1>" in text and "&lt;a&gt; × b" in text and "<a>" not in text


@pytest.mark.parametrize(
    "extra, message",
    [
        (["-o", "page.png"], "must end in .html"),
        (["-c", "a", "-c", "b"], "--column given 2 times; this release has 1 column"),
        (["--alpha", "0"], "alpha"),
    ],
)
def test_report_refusals(csv_file, tmp_path, capsys, extra, message):
    out = tmp_path / "r.json"
    assert run_cli(_release(csv_file, "-o", out), capsys)[0] == 0
    code, _, err = run_cli(["report", out, *extra], capsys)
    assert code == 2 and message in err and err.count("\n") == 1


def test_report_of_a_missing_or_foreign_file(tmp_path, capsys):
    code, _, err = run_cli(["report", tmp_path / "none.json", "-o", tmp_path / "p.html"], capsys)
    assert code == 2 and "does not exist" in err
    foreign = tmp_path / "foreign.json"
    foreign.write_text('{"hello": 1}')
    code, _, err = run_cli(["report", foreign, "-o", tmp_path / "p.html"], capsys)
    assert code == 2 and not (tmp_path / "p.html").exists()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--report", "r.txt"], "--report 'r.txt' must end in .html"),
        (["-o", "same.html", "--report", "same.html"], "--report names the same file"),
        (["--report", "{tmp}"], "is a directory"),
    ],
)
def test_release_report_checked_before_reading(csv_file, tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    args = [str(tmp_path) if a == "{tmp}" else a for a in extra]
    code, _, err = run_cli(_release(csv_file, *args), capsys)
    assert code == 2 and message in err
    assert not list(tmp_path.glob("*.json"))


def test_release_plot_names_its_axis_by_the_column(csv_file, tmp_path, capsys, monkeypatch):
    from dprange.answers import plot_style

    seen = []
    finish = plot_style.finish
    monkeypatch.setattr(plot_style, "finish", lambda plt, fig, ax, *a: seen.append(ax) or finish(plt, fig, ax, *a))
    png = tmp_path / "cdf.png"
    code, _, err = run_cli(_release(csv_file, "-o", tmp_path / "r.json", "--plot", png, "--log-x"), capsys)
    assert code == 0, err
    assert seen[0].get_xlabel() == "age" and seen[0].get_title(loc="left") == "Cumulative distribution of age"
    assert seen[0].get_xscale() == "symlog"  # integers 0..120: the edges start at -0.5

"""dprange.answers.report: the HTML page of a release holds the privacy statement built from its
provenance, the quantile table with the release's own intervals, and inline figures; user text is
escaped; and the page renders in headless Chromium (tests/_browser.py) without console errors,
with every figure decoded and no request beyond the page's own file and its data: images.

The browser tests skip without Chromium locally and fail without it in CI (.ci/run installs it)."""

import html
import re

import numpy as np
import pytest
from _browser import Chromium, chromium_or_skip
from _helpers import plotted_ages_release, plotted_grid_release

import dprange
from dprange import Domain
from dprange.answers import report

pytest.importorskip("matplotlib")

HOSTILE = "<img src=x onerror=alert(1)> \"quoted\" & 'single' </table><script>alert(2)</script>"


@pytest.fixture(scope="module")
def ages():
    return plotted_ages_release()


@pytest.fixture(scope="module")
def prefix():
    """A release made for the CDF (the prefix workload), on integer data with a point mass at 0."""
    values = np.concatenate([np.zeros(900, dtype=int), np.random.default_rng(6).integers(1, 64, 300)])
    return dprange.release(values, Domain.integers(0, 63), 1.0, workload="prefix", neighbours="replace", rng=7)


@pytest.fixture(scope="module")
def grid():
    return plotted_grid_release()


@pytest.fixture(scope="module")
def grouped():
    """Ages by sex from Adult-like rows: two public groups, each released at epsilon 1."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(8)
    rows = pd.DataFrame({"sex": rng.choice(["female", "male"], 3000), "age": rng.integers(17, 90, 3000)})
    return dprange.release(rows, Domain.integers(0, 99), 1.0, column="age", by="sex", groups=["female", "male"], rng=9)


@pytest.fixture(scope="module")
def pages(ages, prefix, grid, grouped, tmp_path_factory):
    folder = tmp_path_factory.mktemp("reports")
    written = {}
    for name, release, options in [
        ("ages", ages, {"column": "age", "units": "years"}),
        ("prefix", prefix, {"column": "visits", "log_x": True}),
        ("grid", grid, {"column": ["age", "hours"]}),
        ("hostile", ages, {"column": HOSTILE, "units": HOSTILE}),
        ("grouped", grouped, {"column": "age", "units": "years"}),
    ]:
        path = folder / f"{name}.html"
        path.write_text(report.report_html(release, **options), encoding="utf-8")
        written[name] = path
    return written


@pytest.fixture(scope="module")
def browser():
    with Chromium(chromium_or_skip()) as chromium:
        yield chromium


def table_rows(page: str, heading: str) -> list[list[str]]:
    """The unescaped cells of the first table after <h2>heading</h2>."""
    section = page.split(f"<h2>{heading}</h2>", 1)[1]
    table = section.split("</table>", 1)[0]
    return [
        [html.unescape(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", table)
    ]


@pytest.mark.slow
def test_quantile_table_shows_the_release_intervals_then_points(ages, pages):
    rows = table_rows(pages["ages"].read_text(encoding="utf-8"), "Quantiles")
    assert rows[0] == ["level", "95% simultaneous interval", "point estimate"]
    answer = ages.quantile(np.array(report.QUANTILE_LEVELS))
    lower, upper = answer.confidence_interval(0.05, simultaneous=True)
    for row, q, v, lo, hi in zip(rows[1:], report.QUANTILE_LEVELS, answer.value, lower, upper):
        assert row == [f"{q:g}", f"[{lo:.6g}, {hi:.6g}]", f"{v:.6g}"]
    assert len(rows) == 10


def test_release_without_exact_errors_shows_points_and_says_why():
    values = np.random.default_rng(1).integers(0, 50, 300)
    nnls = dprange.release(values, Domain.integers(0, 63), 1.0, mechanism="hierarchical", inference="nnls", rng=1)
    page = report.report_html(nnls)
    rows = table_rows(page, "Quantiles")
    points = nnls.quantile(np.array(report.QUANTILE_LEVELS)).value
    assert [row[1:] for row in rows[1:]] == [["—", f"{v:.6g}"] for v in points]
    assert report.NO_EXACT_ERRORS in html.unescape(page) and "(no error bars)" in page
    assert "no band: errors not known exactly" in page and page.count("<img ") == 2


def test_statement_in_words_from_the_provenance(ages, prefix, grid):
    text = " ".join(report.privacy_statement(ages, "age"))
    assert "ε-differential privacy with ε = 0.5 (pure: δ = 0)" in text
    assert "one record added or removed" in text and "the number of records is protected" in text
    assert "[0, 100] in 50 equal bins" in text and "mechanism (hierarchical)" in text
    assert "seeded (predictable)" in text and "cryptographically secure" not in text
    replaced = " ".join(report.privacy_statement(prefix))
    assert "one record's value changed" in replaced and f"the number of records ({prefix.public_total:.6g})" in replaced
    assert "the integers 0 to 63" in replaced
    gridded = " ".join(report.privacy_statement(grid))
    assert "the integers 0 to 9 (one bin each); the integers 0 to 7" in gridded and "ε = 1" in gridded


def test_statement_of_local_and_data_aware_releases():
    from dprange import DAWA
    from dprange.ldp.range_protocols import Flat
    from dprange.ldp.simulate import simulate

    local = simulate(Flat(16, "grr", epsilon=1.0), np.full(16, 40), rng=2).release()
    text = " ".join(report.privacy_statement(local))
    assert "every user randomised their own report (grr frequency oracle) with ε = 1" in text
    assert "Noise:" not in text and "one record's value changed" in text
    aware = DAWA().release(np.arange(32) % 5 * 10, 1.0)
    text = " ".join(report.privacy_statement(aware))
    assert "chose the design from the data" in text and "no exact error bars" in text
    assert "Part of the budget" not in " ".join(report.privacy_statement(plotted_ages_release()))


def test_statement_the_release_carries_is_used_and_escaped(ages, monkeypatch):
    monkeypatch.setattr(type(ages), "privacy_statement", "Saved <b>statement</b>.", raising=False)
    assert report.privacy_statement(ages) == ["Saved <b>statement</b>."]
    page = report.report_html(ages)
    assert "<p>Saved &lt;b&gt;statement&lt;/b&gt;.</p>" in page


def test_grid_page_has_the_heatmap_and_the_total(grid, pages):
    page = pages["grid"].read_text(encoding="utf-8")
    assert page.count("<img ") == 1 and "Cell counts" in page and "Quantiles" not in page
    total = grid.rectangle([0, 0], [9, 7])
    assert f"{total.value:.6g} ± {total.stderr:.6g} (1 s.e.)" in html.unescape(page)
    assert "<h1>Private release of age × hours</h1>" in page


def test_hostile_column_name_is_escaped_everywhere(pages):
    page = pages["hostile"].read_text(encoding="utf-8")
    assert "<script" not in page and "onerror=alert" not in page.replace("onerror=alert(1)&gt;", "")
    assert html.escape(HOSTILE, quote=True) in page
    assert page.count("<img ") == 2 and page.count("<table>") == 2  # the name closed no table


def test_page_is_self_contained(pages):
    for path in pages.values():
        page = path.read_text(encoding="utf-8")
        assert all(src.startswith("data:image/png;base64,") for src in re.findall(r'src="([^"]*)"', page))
        text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)
        assert not re.search(r"(?i)://|href=|url\(|@import|<link|<iframe|<object", text)
        assert report.CONTENT_SECURITY_POLICY in page and "<script" not in page


def test_browser_harness_sees_errors(browser, tmp_path):
    """The browser checks below can fail: a page with a console error, an exception and a missing
    image is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><img src="missing.png"><script>console.error("boom"); throw new Error("x")</script>')
    seen = browser.load(bad)
    assert any("boom" in e for e in seen["errors"]) and any("exception" in e for e in seen["errors"])
    assert any("missing.png" in e for e in seen["errors"])
    assert browser.evaluate("Array.from(document.images).map(i => i.naturalWidth)") == [0]


def test_grouped_page_has_each_group_its_total_quantiles_and_one_statement(grouped, pages):
    """A grouped release: the groups' spend in all and the public keys in the statement, the
    groups' own statement once (they share it), a row per group with its total and interval,
    the CDFs on one figure, the histograms as panels, and each group's deciles as its release
    gives them."""
    page = pages["grouped"].read_text(encoding="utf-8")
    assert "<h1>Private release of age by sex</h1>" in page
    statement = html.unescape(page.split('<div class="statement">', 1)[1].split("</div>", 1)[0])
    assert "One release per value of sex (2 groups); together they spend ε = 1 in all." in statement
    assert "The values of sex are public" in statement and statement.count("satisfies ε-differential privacy") == 1
    rows = table_rows(page, "Groups")
    assert [r[0] for r in rows[1:]] == ["female", "male"]
    for row, key in zip(rows[1:], ["female", "male"]):
        total = grouped[key].total()
        low, high = total.confidence_interval(0.05)
        assert row[1].startswith(report.fmt(total.value)) and f"[{report.fmt(low)}, {report.fmt(high)}]" in row[1]
    for key in ("female", "male"):
        deciles = table_rows(page, f"sex = {key}")[1:]
        answer = grouped[key].quantile(np.asarray(report.QUANTILE_LEVELS))
        lower, upper = answer.confidence_interval(0.05, simultaneous=True)
        assert [r[1] for r in deciles] == [f"[{report.fmt(lo)}, {report.fmt(hi)}]" for lo, hi in zip(lower, upper)]
    assert page.count("<h2>Cumulative distributions</h2>") == 1 and page.count("<h2>Histograms</h2>") == 1


def test_grouped_page_of_groups_with_different_statements_puts_each_in_its_section(grouped):
    """Groups whose statements differ (here one released with replace neighbours) carry their own."""
    mixed = dprange.GroupedRelease(
        "sex",
        ["female", "male"],
        [grouped["female"], dprange.release(np.arange(50), Domain.integers(0, 99), 1.0, neighbours="replace", rng=1)],
        1.0,
    )
    page = html.unescape(report.report_html(mixed, column="age"))
    assert "Each group's release:" not in page
    assert page.count('<div class="statement">') == 3


@pytest.mark.parametrize("name, images", [("ages", 2), ("prefix", 2), ("grid", 1), ("hostile", 2), ("grouped", 2)])
def test_page_renders_in_chromium_with_its_figures(browser, pages, name, images):
    seen = browser.load(pages[name])
    assert seen["errors"] == []
    assert all(url.startswith(("file://", "data:image/png")) for url in seen["requests"]), seen["requests"]
    shown = browser.evaluate(
        "Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.naturalHeight, i.alt])"
    )
    assert len(shown) == images
    assert all(done and width > 500 and height > 300 for done, width, height, _ in shown)
    assert browser.evaluate("document.scripts.length") == 0
    text = browser.evaluate("document.body.innerText")
    assert "differential privacy" in text and "Made by dprange" in text
    if name == "hostile":  # shown as text, not markup
        assert HOSTILE in text
        assert browser.evaluate("document.querySelectorAll('[onerror]').length") == 0
        assert [alt.split(" of ")[0] for *_, alt in shown] == ["Cumulative distribution", "Histogram"]
        assert all(HOSTILE in alt for *_, alt in shown)

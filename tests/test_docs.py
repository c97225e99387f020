"""The docs pages generated from the registries are up to date and name every mechanism, protocol
and oracle with its paper; the docs site (mkdocs.yml) lists every page, and the code of its
runnable pages (getting started, the tutorial) runs."""

from __future__ import annotations

import numpy as np
import pytest
from test_readme import fenced_blocks, shell_commands

from conftest import REPO, SHARED
from dprange.cli import main
from dprange.registry import FREQUENCY_ORACLES, LDP_PROTOCOLS, REGISTRIES, docs_markdown


def test_docs_list_protocols_and_oracles_with_their_papers():
    assert LDP_PROTOCOLS in REGISTRIES and FREQUENCY_ORACLES in REGISTRIES
    page = docs_markdown()
    assert "## Local-DP protocols" in page and "## Local-DP frequency oracles" in page
    assert "| `haar` | HaarHRR:" in page
    assert 'Wang, Blocki, Li and Jha, "Locally Differentially Private Protocols for Frequency Estimation"' in page
    for entry in FREQUENCY_ORACLES.values():
        assert entry.citation is not None
    assert {str(e.citation) for e in LDP_PROTOCOLS.values()} == {
        'Cormode, Kulkarni and Srivastava, "Answering Range Queries Under Local Differential Privacy", PVLDB 2019'
    }


DOCS = REPO / "docs" / "mechanisms.md"


def test_docs_page_is_up_to_date():
    with open(DOCS, encoding="utf-8") as fh:
        written = fh.read()
    assert written == docs_markdown(), "regenerate: python -m dprange.registry --docs > docs/mechanisms.md"


# ----------------------------------------------------------------------------- the docs site

#: The pages whose code runs here, in order within each page (a tutorial drops in as one more
#: name: docs/tutorial.md); each runs in a fresh namespace and working directory.
RUNNABLE_PAGES = ["getting-started.md", "tutorial.md"]


def _page(name: str) -> str:
    path = REPO / "docs" / name
    if not path.exists():
        pytest.skip(f"docs/{name} is not written yet")
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", RUNNABLE_PAGES)
def test_page_code_runs(name, tmp_path, monkeypatch, capsys):
    """Every ```python block runs in order; every `dprange` line of a ```sh block runs
    through the CLI on a CSV of the columns it names (age), in the same folder."""
    text = _page(name)
    monkeypatch.chdir(tmp_path)
    if name == "tutorial.md":  # the tutorial reads the UCI Adult data of ../shared (a link, never a copy)
        adult = SHARED / "data" / "adult" / "adult.csv"
        if not adult.exists():
            pytest.skip("needs ../shared/data/adult/adult.csv (the tutorial reads it)")
        (tmp_path / "adult.csv").symlink_to(adult)
    ages = np.random.default_rng(1).integers(18, 90, 500)
    (tmp_path / "ages.csv").write_text("age\n" + "\n".join(map(str, ages)) + "\n")
    namespace: dict = {"__name__": "docs"}
    blocks = fenced_blocks(text, "python")
    assert blocks, f"docs/{name} has no python block"
    for lineno, code in blocks:
        exec(compile(code, f"docs/{name}:{lineno}", "exec"), namespace)
    for lineno, argv in shell_commands(text):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 0, f"docs/{name}:{lineno}: {capsys.readouterr().err}"


def test_site_lists_every_page():
    """mkdocs.yml's nav names every docs/*.md page (a page left out is built but unreachable)."""
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    for page in sorted((REPO / "docs").glob("*.md")):
        assert f": {page.name}" in nav, f"add docs/{page.name} to the nav of mkdocs.yml"

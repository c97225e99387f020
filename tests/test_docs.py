"""The docs pages generated from the registries are up to date and name every mechanism, protocol
and oracle with its paper."""

from __future__ import annotations

from conftest import REPO
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

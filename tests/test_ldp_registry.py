"""Local-DP protocols and frequency oracles in the registry: one registration reaches the
``dprange ldp`` choices and help, the protocol lookup (options and report headers),
``make_oracle`` and the docs; contingency tables check their inference and noise against
the registry."""

from __future__ import annotations

from _helpers import _choices, _squeezed
from click.testing import CliRunner

from dprange.cli.ldp import ldp
from dprange.registry import FREQUENCY_ORACLES, INFERENCE, LDP_PROTOCOLS, REGISTRIES, docs_markdown


# ------------------------------------------------------------------ the registered names
def test_ldp_cli_choices_are_the_registries():
    for command in ("encode", "simulate"):
        assert _choices(command, "protocol") == LDP_PROTOCOLS.names() == ("hierarchical", "haar", "flat")
        assert _choices(command, "oracle") == FREQUENCY_ORACLES.names() == ("grr", "oue", "olh", "hrr")
    for command in ("aggregate", "simulate"):
        assert _choices(command, "inference") == INFERENCE.names() == ("gls", "nnls", "l1")


def test_help_lists_every_protocol_and_oracle_with_its_summary():
    text = _squeezed(CliRunner().invoke(ldp, ["simulate", "--help"]).output)
    for registry in (LDP_PROTOCOLS, FREQUENCY_ORACLES, INFERENCE):
        for name, entry in registry.items():
            assert _squeezed(f"{name}: {entry.summary}") in text


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

"""Local-DP protocols and frequency oracles in the registry: one registration reaches the
``dprange ldp`` choices and help, the protocol lookup (options and report headers),
``make_oracle`` and the docs; contingency tables check their inference and noise against
the registry."""

from __future__ import annotations

import contextlib
import inspect
import json

import numpy as np
import pytest
from click.testing import CliRunner

from dprange import ParameterError, ReportError, _params
from dprange.cli.ldp import build_protocol, ldp, protocol_from_header
from dprange.ldp import GRR, Flat, HaarHRR, HierarchicalHistogram, make_oracle, protocols
from dprange.ldp.protocols import protocol_class, register_protocol
from dprange.registry import FREQUENCY_ORACLES, INFERENCE, LDP_PROTOCOLS, REGISTRIES, docs_markdown


# ------------------------------------------------------------------ a toy protocol and oracle
class ToyFlat(Flat):
    """Flat under another name (what a new protocol adds): its reports carry "ldp-toy"."""

    name = "ldp-toy"


class ToyOracle(GRR):
    """GRR under another name (what a new oracle adds)."""

    name = "toy-rr"


@contextlib.contextmanager
def registered_toys():
    register_protocol(ToyFlat, "toy", summary="a toy protocol registered by the test")
    FREQUENCY_ORACLES.add(ToyOracle, summary="a toy oracle registered by the test")
    try:
        yield
    finally:
        LDP_PROTOCOLS.unregister("toy")
        FREQUENCY_ORACLES.unregister("toy-rr")


@pytest.fixture
def toys():
    with registered_toys():
        yield


def _choices(command: str, option: str) -> tuple:
    (param,) = [p for p in ldp.commands[command].params if p.name == option]
    return tuple(param.type.choices)  # type: ignore[attr-defined]


def _squeezed(text: str) -> str:
    return "".join(text.split())


@pytest.fixture
def population(tmp_path):
    path = tmp_path / "values.csv"
    rng = np.random.default_rng(5)
    path.write_text("v\n" + "\n".join(str(int(v)) for v in rng.integers(0, 8, 300)) + "\n")
    return path


# ------------------------------------------------------------------ the registered names
def test_ldp_cli_choices_are_the_registries():
    for command in ("encode", "simulate"):
        assert _choices(command, "protocol") == LDP_PROTOCOLS.names() == ("hierarchical", "haar", "flat")
        assert _choices(command, "oracle") == FREQUENCY_ORACLES.names() == ("grr", "oue", "olh", "hrr")
    for command in ("aggregate", "simulate"):
        assert _choices(command, "inference") == INFERENCE.names() == ("gls", "nnls", "l1")


def test_registered_protocols_build_their_classes_and_read_back_their_headers():
    for option, cls in (("hierarchical", HierarchicalHistogram), ("flat", Flat)):
        proto = build_protocol(option, 16, 1.0, 2, "olh")
        assert type(proto) is cls and proto.oracle_name == "olh"
        assert protocol_class(cls.name) is cls
        assert protocol_from_header(proto.describe()).describe() == proto.describe()
    haar = build_protocol("haar", 16, 1.0, 2, "olh")
    assert haar.name == "ldp-haar-hrr" and haar.levels == 4 and haar.oracle_name == "hrr"
    assert build_protocol("hierarchical", 16, 1.0, 2, "oue").tree.depth == 4  # 16 = 2^4


def test_make_oracle_is_the_oracle_registry():
    for name in FREQUENCY_ORACLES:
        oracle = make_oracle(name, 6, 1.0)
        assert oracle.name == name and type(oracle) is FREQUENCY_ORACLES[name].factory
    with pytest.raises(ParameterError, match=r"^unknown oracle 'xyz'; choose grr, oue, olh, hrr$"):
        make_oracle("xyz", 6, 1.0)
    with pytest.raises(ParameterError, match=r"^unknown protocol 'tree'; choose hierarchical, haar, flat$"):
        build_protocol("tree", 16, 1.0, 2, "oue")


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


# ------------------------------------------------------------------ one registration reaches everything
def test_a_registered_toy_protocol_and_oracle_reach_the_cli_and_the_lookups(toys, population, tmp_path):
    assert _choices("simulate", "protocol") == ("hierarchical", "haar", "flat", "toy")
    assert _choices("encode", "oracle") == ("grr", "oue", "olh", "hrr", "toy-rr")
    assert "toy:atoyprotocolregisteredbythetest" in _squeezed(CliRunner().invoke(ldp, ["encode", "--help"]).output)
    proto = build_protocol("toy", 8, 1.0, 4, "toy-rr")
    assert type(proto) is ToyFlat and type(proto.oracle(1)) is ToyOracle
    assert type(make_oracle("toy-rr", 8, 1.0)) is ToyOracle

    run = CliRunner().invoke
    reports, release = tmp_path / "r.npz", tmp_path / "rel.json"
    args = ["encode", str(population), "-c", "v", "--lo", "0", "--hi", "7", "-e", "1", "--seed", "3"]
    result = run(ldp, [*args, "--protocol", "toy", "--oracle", "toy-rr", "-o", str(reports)])
    assert result.exit_code == 0, result.output
    assert "ldp-toy" in result.output
    result = run(ldp, ["aggregate", str(reports), "-o", str(release)])  # the header names ldp-toy
    assert result.exit_code == 0, result.output
    parameters = json.loads(release.read_text())["provenance"]["parameters"]
    assert parameters["protocol"] == "ldp-toy" and parameters["oracle"] == "toy-rr"
    assert sum(parameters["users_per_level"].values()) == 300


def test_unregistering_removes_the_toy_everywhere(population, tmp_path):
    with registered_toys():
        header = build_protocol("toy", 8, 1.0, 4, "grr").describe()
    assert "toy" not in _choices("simulate", "protocol") and "toy-rr" not in _choices("simulate", "oracle")
    result = CliRunner().invoke(
        ldp, ["encode", str(population), "-c", "v", "--lo", "0", "--hi", "7", "-e", "1", "--protocol", "toy"]
    )
    assert result.exit_code == 2 and "'toy' is not one of 'hierarchical', 'haar', 'flat'" in result.output
    with pytest.raises(ReportError, match="unknown protocol 'ldp-toy' in the reports"):
        protocol_from_header(header)
    with pytest.raises(ParameterError, match="unknown oracle 'toy-rr'"):
        make_oracle("toy-rr", 8, 1.0)


def test_a_name_is_registered_once():
    with pytest.raises(ParameterError, match="protocol 'flat' is already registered"):
        register_protocol(ToyFlat, "flat", summary="twice")
    with pytest.raises(ParameterError, match="oracle 'grr' is already registered"):
        FREQUENCY_ORACLES.add(GRR, summary="twice")
    assert LDP_PROTOCOLS.names() == ("hierarchical", "haar", "flat")


# ------------------------------------------------------------------ declared constructor parameters
@pytest.mark.parametrize("cls", [HierarchicalHistogram, HaarHRR, Flat])
def test_protocols_declare_their_parameters(cls):
    names = [p.name for p in cls.PARAMS]
    assert list(inspect.signature(cls).parameters) == names
    assert (
        LDP_PROTOCOLS[{HierarchicalHistogram: "hierarchical", HaarHRR: "haar", Flat: "flat"}[cls]].params == cls.PARAMS
    )
    assert names[0] == "domain_size" and "epsilon" in names


def test_one_bind_call_checks_every_protocol_parameter(monkeypatch):
    calls = []

    def spy(params, args, kwargs, owner):
        calls.append(owner)
        return _params.bind(params, args, kwargs, owner)

    monkeypatch.setattr(protocols, "bind", spy)
    proto = HierarchicalHistogram(16, [2, 8], "olh", epsilon=1, oracle_options={"hash_pool": 8})
    assert calls == ["HierarchicalHistogram"]
    assert tuple(proto.tree.branching) == (2, 8) and proto.epsilon == 1.0 and isinstance(proto.epsilon, float)
    assert proto.oracle(2).hash_pool == 8


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: HierarchicalHistogram(16, 1), r"^branching must be an integer >= 2, got 1$"),
        (lambda: HaarHRR(1), r"^domain_size must be an integer >= 2, got 1$"),
        (lambda: Flat(16, epsilon=-1), r"^epsilon must be a positive finite number, got -1$"),
        (
            lambda: HierarchicalHistogram(16, 4, level_probabilities=[1.0]),
            r"^level_probabilities must be 2 non-negative numbers summing to 1$",
        ),
        # each of these was accepted, or a TypeError / ValueError, before the declarations
        (lambda: Flat(16, "xyz"), r"^unknown oracle 'xyz'; choose grr, oue, olh, hrr$"),
        (lambda: Flat(16, "oue", oracle_options={"g": 3}), r"^oracle_options \['g'\] are not options of the oue"),
        (
            lambda: HierarchicalHistogram(16, 4, "oue", epsilon=1, bogus=1),
            r"^HierarchicalHistogram has no parameter bogus; its parameters are domain_size, branching, oracle",
        ),
        (lambda: HierarchicalHistogram(16, 4, "oue", oracle_options="g"), r"^oracle_options must be a dict"),
        (lambda: HaarHRR(16, "x"), r"^HaarHRR takes at most 1 positional parameters \(domain_size\), got 2"),
        (
            lambda: HierarchicalHistogram(16, 4, level_probabilities="ab"),
            r"^level_probabilities must be a list of non-negative numbers summing to 1, got 'ab'$",
        ),
    ],
)
def test_bad_protocol_parameters_are_parameter_errors(build, message):
    with pytest.raises(ParameterError, match=message):
        build()

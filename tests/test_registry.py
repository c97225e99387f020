"""The registry (dprange.registry; one registration per mechanism, inference method, noise kind,
workload): one registration reaches make_mechanism, dprange.release, auto, the CLI and the docs;
names match what interprets them; the listing order is declared."""

from __future__ import annotations

import contextlib
import inspect
import json
import subprocess
import sys

import numpy as np
import pytest
from _helpers import run_cli
from click.testing import CliRunner

import dprange
from conftest import REPO
from dprange import Domain, Flat, Hierarchical, Matrix, Mechanism, ParameterError, Wavelet, api
from dprange._params import Integer, Param, replaced
from dprange.analysis import default_candidates
from dprange.api.common import make_mechanism
from dprange.cli.group import cli
from dprange.inference.dispatch import METHODS
from dprange.mechanisms import base as mechanisms_base
from dprange.privacy.samplers import NOISE_KINDS
from dprange.registry import (
    GRID_MECHANISMS,
    GRID_WORKLOADS,
    INFERENCE,
    MECHANISMS,
    NOISE,
    REGISTRIES,
    WORKLOADS,
    Entry,
    Registry,
    docs_markdown,
)
from dprange.workloads import make_workload

DOCS = REPO / "docs" / "mechanisms.md"


# ------------------------------------------------------------------ a toy mechanism
class Toy(Flat):
    """Flat under another name, with a parameter of its own (what a new mechanism adds)."""

    name = "toy"
    PARAMS = (Param("shift", Integer(0), "a toy parameter", default=0), *Mechanism.PARAMS)


@contextlib.contextmanager
def registered_toy():
    MECHANISMS.add(Toy, summary="a toy registered by the registry test", auto=True)
    try:
        yield
    finally:
        MECHANISMS.unregister("toy")


@pytest.fixture
def toy():
    with registered_toy():
        yield


@pytest.fixture
def ages_csv(tmp_path):
    path = tmp_path / "ages.csv"
    values = np.random.default_rng(1).integers(0, 16, 200)
    path.write_text("age\n" + "\n".join(str(v) for v in values) + "\n")
    return path


def release_args(path, out, *extra):
    return ["release", str(path), "-c", "age", "--lo", "0", "--hi", "15", "--integers", "-e", "1", "--seed", "0"] + [
        "-o",
        str(out),
        *extra,
    ]


def test_one_registration_reaches_make_mechanism_release_auto_cli_and_docs(toy, ages_csv, tmp_path, capsys):
    mech = make_mechanism("toy", shift=2)
    assert isinstance(mech, Toy) and mech.shift == 2 and mech.neighbours == "add_remove"
    with pytest.raises(ParameterError, match="shift must be an integer >= 0, got -1"):
        make_mechanism("toy", shift=-1)
    rel = dprange.release(np.arange(16), Domain.integers(0, 15), 1.0, mechanism="toy", rng=0)
    assert rel.mechanism == "toy"
    assert [type(m) for m in default_candidates(8)][:3] == [Flat, Wavelet, Hierarchical]
    assert sum(isinstance(m, Toy) for m in default_candidates(8)) == 1
    assert "| `toy` | a toy registered by the registry test | yes |" in docs_markdown()
    code, _, err = run_cli(release_args(ages_csv, tmp_path / "r.json", "-m", "toy"), capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "r.json").read_text())["mechanism"] == "toy"
    help_text = CliRunner().invoke(cli, ["release", "--help"]).output
    assert _squeezed("toy: a toy registered by the registry test") in _squeezed(help_text)


def test_unregistering_removes_it_everywhere(ages_csv, tmp_path, capsys):
    with registered_toy():
        assert "toy" in MECHANISMS.names()
    assert "toy" not in MECHANISMS
    with pytest.raises(ParameterError, match="unknown mechanism 'toy'"):
        make_mechanism("toy")
    assert not any(isinstance(m, Toy) for m in default_candidates(8))
    code, _, err = run_cli(release_args(ages_csv, tmp_path / "r.json", "-m", "toy"), capsys)
    assert code == 2 and "'toy' is not one of" in err


def test_a_name_is_registered_once(toy):
    with pytest.raises(ParameterError, match="already registered"):
        MECHANISMS.add(Toy, summary="again")
    with pytest.raises(ParameterError, match="cannot be registered as a workload"):
        WORKLOADS.register(MECHANISMS["toy"])
    with pytest.raises(TypeError):
        MECHANISMS["x"] = MECHANISMS["toy"]  # type: ignore[index]  # a read-only mapping


# ------------------------------------------------------------------ generated views
def _choices(command: str, option: str) -> tuple:
    (param,) = [p for p in cli.commands[command].params if p.name == option]
    return tuple(param.type.choices)  # type: ignore[attr-defined]


def test_cli_choices_are_the_registry():
    assert _choices("release", "mechanism") == (  # matrix needs a matrix; k-D ones take several --column
        "flat",
        "wavelet",
        "hierarchical",
        "optimized",
        "dawa",
        "mwem",
        "structure-first",
        "auto-data",
        *GRID_MECHANISMS.names(nameable=True),
        "auto",
    )
    assert _choices("release", "inference") == INFERENCE.names() == ("gls", "nnls", "l1")
    assert _choices("release", "noise") == ("auto", *NOISE.names()) == _choices("error", "noise")
    assert WORKLOADS.names(auto=True) == ("all-range", "prefix", "identity")
    assert WORKLOADS.names() == ("all-range", "prefix", "identity", "random-ranges")
    assert _choices("release", "workload") == (*WORKLOADS.names(auto=True), *GRID_WORKLOADS.names(auto=True))
    assert _choices("error", "workload") == (*WORKLOADS.names(), *GRID_WORKLOADS.names())


def _squeezed(text: str) -> str:
    """Without whitespace: help is wrapped to the terminal, also at hyphens."""
    return "".join(text.split())


def test_help_lists_every_registered_name_with_its_summary():
    release_help = _squeezed(CliRunner().invoke(cli, ["release", "--help"]).output)
    for registry, names in (
        (MECHANISMS, MECHANISMS.names(nameable=True)),
        (INFERENCE, INFERENCE.names()),
        (NOISE, NOISE.names()),
        (WORKLOADS, WORKLOADS.names(auto=True)),
    ):
        for name in names:
            assert _squeezed(f"{name}: {registry[name].summary}") in release_help
    assert (
        _squeezed("--mechanism hierarchical only (given without --mechanism, it selects hierarchical)") in release_help
    )
    error_help = _squeezed(CliRunner().invoke(cli, ["error", "--help"]).output)
    assert _squeezed(f"random-ranges: {WORKLOADS['random-ranges'].summary}") in error_help


def test_docs_page_is_up_to_date():
    with open(DOCS, encoding="utf-8") as fh:
        written = fh.read()
    assert written == docs_markdown(), "regenerate: python -m dprange.registry --docs > docs/mechanisms.md"


def test_python_m_registry_docs_prints_the_page():
    result = subprocess.run(
        [sys.executable, "-m", "dprange.registry", "--docs"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout == docs_markdown()


def test_registered_names_match_what_interprets_them():
    assert NOISE.names() == NOISE_KINDS  # the samplers of dprange.privacy.noise
    assert INFERENCE.names() == METHODS  # the methods of dprange.inference.infer
    for registry in REGISTRIES:
        for name, entry in registry.items():
            assert entry.name == name and entry.summary and entry.kind == registry.kind
            if entry.factory is not None and hasattr(entry.factory, "name"):
                assert entry.factory.name == name
    for name in WORKLOADS:
        workload = make_workload(name, 8, k=5)
        assert workload.name == name and workload.n == 8
    assert make_workload("random-ranges", 8, k=5).m == 5
    with pytest.raises(ParameterError, match="unknown workload 'bogus'; choose all-range, prefix, identity, random"):
        make_workload("bogus", 8)


@pytest.mark.parametrize("name", MECHANISMS.names(nameable=True))
def test_every_nameable_mechanism_releases_by_name(name):
    rel = dprange.release(np.arange(8), Domain.integers(0, 7), 1.0, mechanism=name, rng=2)
    if getattr(MECHANISMS[name].factory, "data_aware", False):  # no data-free error model
        assert rel.mechanism == name and not rel.exact_error_bars
        return
    model = make_mechanism(name).error_model(8, 1.0)
    assert rel.mechanism == name
    assert rel.total().stderr == pytest.approx(np.sqrt(model.range_variance(0, 7)), rel=1e-12)


def test_matrix_is_registered_but_needs_its_matrix():
    assert "matrix" in MECHANISMS and not MECHANISMS["matrix"].nameable and not MECHANISMS["matrix"].auto
    with pytest.raises(ParameterError, match=r"mechanism 'matrix' needs strategy: build Matrix\(...\)"):
        make_mechanism("matrix")
    with pytest.raises(ParameterError, match="needs strategy"):
        dprange.release([1], Domain.integers(0, 3), 1.0, mechanism="matrix")


# ------------------------------------------------------------------ declarative parameters
CLASSES = [Flat, Hierarchical, Wavelet, Matrix]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_classes_declare_parameters_instead_of_writing_checks(cls):
    """No mechanism but Matrix (a cross-parameter rank check) has an __init__ of its own, and
    the signature users see is the declaration."""
    assert ("__init__" in vars(cls)) == (cls is Matrix)
    sig = inspect.signature(cls)
    assert list(sig.parameters) == [p.name for p in cls.PARAMS]
    for p in cls.PARAMS:
        assert p.doc and p.constraint.describe()
        if not p.required:  # every default meets its own constraint
            p.constraint.check(p.default, p.name)


def test_one_call_checks_every_parameter(monkeypatch):
    calls = []
    real = mechanisms_base.bind

    def spy(params, args, kwargs, owner):
        calls.append((owner, [p.name for p in params], dict(kwargs)))
        return real(params, args, kwargs, owner)

    monkeypatch.setattr(mechanisms_base, "bind", spy)
    Hierarchical(4, "geometric", measure_root=True, noise="gaussian")
    assert calls == [
        (
            "Hierarchical",
            ["branching", "budget", "measure_root", "neighbours", "noise", "inference", "inference_options"],
            {"measure_root": True, "noise": "gaussian"},
        )
    ]


@pytest.mark.parametrize(
    "build,message",
    [
        (lambda: Hierarchical(1), "branching must be an integer >= 2, got 1"),
        (lambda: Hierarchical([4, 1]), "every branching factor must be an integer >= 2, got 1"),
        (lambda: Hierarchical([]), "the branching list is empty"),
        (lambda: Hierarchical(2, "random"), "budget must be one of uniform, geometric or a list, got 'random'"),
        (lambda: Hierarchical(2, 0.5), "budget must be 'uniform', 'geometric' or a list of per-level budgets"),
        (lambda: Hierarchical(measure_root="no"), "measure_root must be True or False, got 'no'"),
        (lambda: Flat(neighbours="swap"), "neighbours must be one of add_remove, replace, got 'swap'"),
        (lambda: Flat(noise="normal"), "noise must be one of auto, discrete_laplace, laplace_float, gaussian"),
        (lambda: Wavelet(inference="lasso"), "inference must be one of gls, nnls, l1, got 'lasso'"),
        (lambda: Flat(inference_options={"alpah": 1}), r"unknown inference options \['alpah'\]"),
        (lambda: Flat(inference_options=0.9), "inference_options must be a dict"),
        (lambda: Flat(branching=4), "Flat has no parameter branching; its parameters are neighbours, noise"),
        (lambda: Flat("replace"), "Flat takes at most 0 positional parameters"),
        (lambda: Hierarchical(4, branching=4), "Hierarchical got branching twice"),
        (lambda: Matrix(), r"Matrix needs strategy \(the strategy A"),
        (lambda: Matrix(np.zeros((2, 2))), "the strategy matrix is zero"),
        (lambda: Matrix(np.eye(3), budget="uniform"), "Matrix has no parameter budget"),
    ],
)
def test_bad_parameters_are_parameter_errors(build, message):
    """Every one is a ParameterError; measure_root="no" used to be taken as True (the root
    measured), and positional or unknown arguments were bare TypeErrors."""
    with pytest.raises(ParameterError, match=message):
        build()


def test_values_are_normalised_once():
    mech = Hierarchical(np.array([4, 4]), (0.25, 0.75), measure_root=np.bool_(True))
    assert mech.branching == [4, 4] and type(mech.branching[0]) is int
    assert mech.budget == [0.25, 0.75] and mech.measure_root is True
    assert Hierarchical(16.0).branching == 16 and Flat(inference_options=None).inference_options == {}


def test_replaced_builds_a_checked_copy_and_leaves_the_original():
    mech = Hierarchical([4, 4], [0.5, 0.5], neighbours="replace")
    other = replaced(mech, inference="l1")
    assert other is not mech and mech.inference == "gls" and other.inference == "l1"
    assert repr(other) == repr(Hierarchical([4, 4], [0.5, 0.5], neighbours="replace", inference="l1"))
    with pytest.raises(ParameterError, match="inference must be one of"):
        replaced(mech, inference="bogus")


def test_cli_release_goes_through_dprange_release(ages_csv, tmp_path, capsys, monkeypatch):
    calls = []
    real = api.release

    def spy(values, domain, epsilon, **kwargs):
        calls.append(kwargs["mechanism"])
        return real(values, domain, epsilon, **kwargs)

    monkeypatch.setattr(api, "release", spy)
    code, out, err = run_cli(release_args(ages_csv, tmp_path / "r.json", "--workload", "prefix"), capsys)
    assert code == 0, err
    assert len(calls) == 1 and isinstance(calls[0], Mechanism)
    assert f"auto: chose {calls[0]!r} for the prefix workload" in out
    code, _, err = run_cli(
        release_args(ages_csv, tmp_path / "h.json", "--branching", "4,4", "--inference", "l1"), capsys
    )
    assert code == 0, err
    assert isinstance(calls[1], Hierarchical) and calls[1].branching == [4, 4] and calls[1].inference == "l1"


@pytest.mark.parametrize(
    "extra,message",
    [
        (["-m", "flat", "--branching", "4"], "--branching is not a parameter of --mechanism flat"),
        (["-m", "wavelet", "--root"], "--root is not a parameter of --mechanism wavelet"),
        (["-m", "auto", "--budget", "geometric"], "--budget cannot be given with --mechanism auto"),
    ],
)
def test_options_the_mechanism_does_not_take_are_refused(ages_csv, tmp_path, capsys, monkeypatch, extra, message):
    """They used to be ignored without a word (the release ran with other parameters than
    the user asked for); now they fail before the data is read."""
    import dprange.cli.release as cli_module

    monkeypatch.setattr(cli_module, "read_column", lambda *a: pytest.fail("data read before the options were checked"))
    code, _, err = run_cli(release_args(ages_csv, tmp_path / "r.json", *extra), capsys)
    assert code == 2 and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r.json").exists()


def test_entry_records_are_typed_and_frozen():
    entry = MECHANISMS["hierarchical"]
    assert isinstance(entry, Entry) and entry.factory is Hierarchical and entry.params == Hierarchical.PARAMS
    assert entry.auto and entry.nameable and entry.citation and "Qardaji" in str(entry.citation)
    with pytest.raises(AttributeError):
        entry.name = "other"  # type: ignore[misc]


def test_listing_order_is_declared_not_the_import_order():
    """A registry lists its entries in its declared order whatever order they were registered in
    (modules may be imported in any order); names it does not declare follow, as registered."""
    registry = Registry("widget", "Widgets", order=("b", "a"))
    for name in ("extra", "a", "b"):
        registry.register(Entry("widget", name, f"widget {name}"))
    assert registry.names() == ("b", "a", "extra") and list(registry) == ["b", "a", "extra"]
    assert MECHANISMS.names()[:3] == ("flat", "wavelet", "hierarchical")
    assert GRID_MECHANISMS.names()[0] == "kronecker"

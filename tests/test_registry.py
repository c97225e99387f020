"""The registry (dprange.registry; one registration per mechanism, inference method, noise kind,
workload): one registration reaches make_mechanism, dprange.release, auto, the CLI and the docs;
names match what interprets them; the listing order is declared."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import numpy as np
import pytest
from _helpers import release_args, run_cli
from click.testing import CliRunner

import dprange
from dprange import (
    Domain,
    Flat,
    FourierMarginals,
    Hierarchical,
    KDHierarchy,
    Kronecker,
    Mechanism,
    ParameterError,
    Privelet,
    Quadtree,
    Wavelet,
)
from dprange._params import Integer, Param
from dprange.analysis import default_candidates
from dprange.api.common import make_mechanism
from dprange.cli.group import cli
from dprange.inference.dispatch import METHODS
from dprange.mechanisms import base as mechanisms_base
from dprange.mechanisms.optimized_grid import OptimizedKronecker, OptimizedMarginals
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
        "auto-data",  # also the 2-D auto-data's name: listed once
        *(name for name in GRID_MECHANISMS.names(nameable=True) if name != "auto-data"),
        "auto",
    )
    assert "auto-data" in GRID_MECHANISMS.names(nameable=True)
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
        chosen = rel.parameters.get("chosen")  # auto-data: exact bars exactly when its choice is data-independent
        independent = chosen in MECHANISMS and not getattr(MECHANISMS[chosen].factory, "data_aware", False)
        assert rel.mechanism == name and rel.exact_error_bars == independent
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


def test_k_d_mechanisms_are_registered_apart_from_the_1_d_ones():
    data_aware = (
        "kd_tree",
        "hybrid_tree",
        "dawa_hilbert",
        "dawa_pruned",
        "ugrid",
        "agrid",
        "auto_nonnegative",
        "auto_toward_nonnegative",
        "auto_support",
        "auto_pruned",
        "auto-data",
    )  # data_aware.grid(s), .pruned_hilbert, .nonnegative_grid, .support_grid, .pruned_grid, .auto_grid: never auto
    independent = ("kronecker", "kd_hierarchy", "quadtree", "privelet", "fourier")
    optimized = ("optimized_kronecker", "optimized_marginals")
    assert GRID_MECHANISMS.names() == (*independent, *optimized, *data_aware)
    assert GRID_MECHANISMS.names(auto=True) == ("kronecker", "kd_hierarchy", "fourier", *optimized)
    # quadtree = kd_hierarchy(2) in 2-D, privelet = kronecker("haar")
    factories = [Kronecker, KDHierarchy, Quadtree, Privelet, FourierMarginals, OptimizedKronecker, OptimizedMarginals]
    assert [GRID_MECHANISMS[n].factory for n in independent + optimized] == factories
    for entry in MECHANISMS.values():  # the 1-D registry (run on 1-D counts by its tests) has none of them
        assert entry.factory is not None and not issubclass(entry.factory, mechanisms_base.GridMechanism)
    assert GRID_WORKLOADS.names() == ("all-rectangles", "prefix-rectangles", "marginals")
    page = docs_markdown()
    assert "## k-D mechanisms" in page and "## k-D workloads" in page
    for name in GRID_MECHANISMS:
        assert f"| `{name}` | {GRID_MECHANISMS[name].summary}" in page

"""Packaging: one version source and the PEP 561 marker that makes the package's type hints usable."""

import tomllib
import warnings

import pytest
from packaging.version import Version

import dprange
from conftest import REPO as ROOT

PYPROJECT = ROOT / "pyproject.toml"
PACKAGE_DIR = ROOT / "src" / "dprange"


def _pyproject() -> dict:
    with PYPROJECT.open("rb") as handle:
        return tomllib.load(handle)


def _setuptools_configuration() -> dict:
    """The configuration as setuptools expands it when it builds the package (dynamic fields resolved)."""
    read_configuration = pytest.importorskip("setuptools.config.pyprojecttoml").read_configuration
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # setuptools calls [tool.setuptools] "beta"
        return read_configuration(PYPROJECT, expand=True)


def test_pyproject_has_no_second_version():
    project = _pyproject()["project"]
    assert "version" not in project
    assert "version" in project["dynamic"]
    assert _pyproject()["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "dprange.__version__"}


def test_built_version_is_the_package_version():
    assert _setuptools_configuration()["project"]["version"] == dprange.__version__


def test_version_is_a_release_number():
    version = Version(dprange.__version__)
    assert str(version) == dprange.__version__
    assert not version.is_devrelease and version.release >= (0, 1, 0)


def test_py_typed_marker_is_shipped():
    assert (PACKAGE_DIR / "py.typed").is_file()
    patterns = _setuptools_configuration()["tool"]["setuptools"]["package-data"]["dprange"]
    shipped = {path.name for pattern in patterns for path in PACKAGE_DIR.glob(pattern)}
    assert "py.typed" in shipped
    assert any(name.endswith(".csv") for name in shipped)  # the example data still ships


def test_ci_checks_lint_before_tests():
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line.split()[:2] for line in ci_lines if line.startswith("make ")]
    assert commands == [["make", "lint"], ["make", "test"], ["make", "test-slow"]]
    makefile = (ROOT / "Makefile").read_text()
    # the README's `make test` and `make test-slow` split the suite by the declared marker, nothing left out
    test_recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    slow_recipe = makefile.split("\ntest-slow:", 1)[1].split("\n\n", 1)[0]
    assert '-m "not slow" tests' in test_recipe and "-m slow tests" in slow_recipe
    assert any(marker.startswith("slow:") for marker in _pyproject()["tool"]["pytest"]["ini_options"]["markers"])
    lint_recipe = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0]
    for tool in ("ruff check", "ruff format --check", "mypy"):
        assert f"$(BIN)/{tool}" in lint_recipe
    lint_extra = _pyproject()["project"]["optional-dependencies"]["lint"]
    assert {requirement.split("~=")[0] for requirement in lint_extra} == {"ruff", "mypy"}

"""The module layout of dprange: packages by pipeline stage in layers, each importing only the
layers below it; no import cycles; no imports hidden in functions.

The import graph is built statically: every module under src/dprange is parsed with ``ast``,
relative imports are resolved, and each import of another dprange module is recorded as
module-level (runs when the module is imported) or function-level (runs when the function
is called).  Importing a submodule also runs its package's ``__init__`` (``from
.inference.tree import x`` depends on ``dprange.inference``), except for the packages that
contain the importer, which Python has already started loading.
"""

from __future__ import annotations

import ast
import importlib
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import dprange
from conftest import REPO

PACKAGE = REPO / "src" / "dprange"

#: The layers, top first: a module may import only from its own row (without a cycle) and the
#: rows below it (docs/architecture.md).  A module is placed by its first name under dprange
#: (its package, or the top-level module); ``__main__`` modules are entry points, like the CLI.
LAYERS = (
    ("cli", "__main__"),
    ("api",),
    ("engines",),
    ("data_aware", "ldp"),
    ("analysis",),
    ("mechanisms", "quantile_mechanisms"),
    ("answers",),
    ("optimize",),
    ("inference",),
    ("measurements",),
    ("strategies",),
    ("domain", "columns", "operators", "cholesky", "workloads", "registry", "io"),
    ("privacy",),
    ("errors", "_validation", "_params", "_lazy", "progress"),
)


def layer_of(module: str) -> int | None:
    """The row of ``module`` (0 is the top), or None for the package itself and unplaced modules."""
    parts = module.split(".")
    if parts[-1] == "__main__":
        return 0
    if len(parts) < 2:
        return None
    for row, names in enumerate(LAYERS):
        if parts[1] in names:
            return row
    return None


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # a dprange module or package
    names: tuple  # the names taken from it (empty for ``import x``)
    function_level: bool
    line: int


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under ``root`` (a package dir)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([package] + parts)] = path
    return out


def _base(importer: str, is_package: bool, level: int) -> str:
    """The package a relative import of ``level`` dots in ``importer`` starts from."""
    parts = importer.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts)


def _targets(node, importer: str, is_package: bool, modules) -> list[tuple[str, tuple]]:
    """(module, names) pairs that an import statement loads, within the known modules."""
    if isinstance(node, ast.Import):
        return [(alias.name, ()) for alias in node.names if alias.name in modules]
    if node.level:
        base = _base(importer, is_package, node.level)
        source = f"{base}.{node.module}" if node.module else base
    else:
        source = node.module or ""
    if source not in modules:
        return []
    out = []
    for alias in node.names:
        sub = f"{source}.{alias.name}"
        out.append((sub, ()) if sub in modules else (source, (alias.name,)))
    return out


def _with_packages(target: str, importer: str, root_package: str) -> list[str]:
    """``target`` and the packages above it that importing it loads (not the root package,
    nor the packages containing the importer, which are already being loaded)."""
    parts = target.split(".")
    containing = {".".join(importer.split(".")[:i]) for i in range(1, importer.count(".") + 2)}
    out = [target]
    for i in range(2, len(parts)):
        package = ".".join(parts[:i])
        if package != root_package and package not in containing:
            out.append(package)
    return out


def _walk(node, function_level: bool):
    """Every import node under ``node``, with whether it sits inside a function."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, function_level
        inside = function_level or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from _walk(child, inside)


def collect_imports(root: Path, package: str) -> list[Import]:
    """Every import of one module of ``package`` by another, from the source under ``root``."""
    modules = module_names(root, package)
    out = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node, function_level in _walk(tree, False):
            for target, names in _targets(node, name, is_package, modules):
                for dependency in _with_packages(target, name, package):
                    if dependency != name:
                        out.append(
                            Import(name, dependency, names if dependency == target else (), function_level, node.lineno)
                        )
    return out


def find_cycle(edges) -> list[str] | None:
    """One cycle (as a closed path of module names) in the directed graph, or None."""
    graph: dict[str, set] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    state = dict.fromkeys(graph, 0)  # 0 unvisited, 1 on the current path, 2 finished
    path: list[str] = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state[nxt] == 1:
                return path[path.index(nxt) :] + [nxt]
            if state[nxt] == 0:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if state[node] == 0:
            found = visit(node)
            if found:
                return found
    return None


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return collect_imports(PACKAGE, "dprange")


# ------------------------------------------------------------------ the checker itself


def _write(root: Path, files: dict) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def test_checker_resolves_relative_imports_and_levels(tmp_path):
    _write(
        tmp_path / "pkg",
        {
            "__init__.py": "from .a import f\nfrom . import b\n",
            "a.py": "import os\nfrom .sub.c import g\n\ndef f():\n    from . import b\n    return b\n",
            "b.py": "class K:\n    from .a import f\n",
            "sub/__init__.py": "",
            "sub/c.py": "from ..b import K\nfrom . import d\n",
            "sub/d.py": "import pkg.a\n",
        },
    )
    found = {(i.importer, i.target, i.names, i.function_level) for i in collect_imports(tmp_path / "pkg", "pkg")}
    assert found == {
        ("pkg", "pkg.a", ("f",), False),
        ("pkg", "pkg.b", (), False),
        ("pkg.a", "pkg.sub.c", ("g",), False),
        ("pkg.a", "pkg.sub", (), False),  # the package's __init__ runs first
        ("pkg.a", "pkg.b", (), True),
        ("pkg.b", "pkg.a", ("f",), False),  # a class body runs at import
        ("pkg.sub.c", "pkg.b", ("K",), False),
        ("pkg.sub.c", "pkg.sub.d", (), False),  # not pkg.sub: c's own package is loading already
        ("pkg.sub.d", "pkg.a", (), False),
    }


def test_checker_finds_cycles():
    assert find_cycle([("a", "b"), ("b", "c")]) is None
    assert find_cycle([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]) == ["a", "b", "c", "a"]
    assert find_cycle([("x", "x")]) == ["x", "x"]


# ------------------------------------------------------------------ dprange's layout


def test_graph_covers_the_package(imports):
    importers = {i.importer for i in imports}
    assert {
        "dprange",
        "dprange.analysis",
        "dprange.analysis.cdf_trees",
        "dprange.mechanisms.basic",
        "dprange.api.histogram",
        "dprange.ldp.analysis",
    } <= importers
    assert any(i.importer == "dprange.analysis.cdf_trees" and i.target == "dprange.mechanisms.basic" for i in imports)


def test_no_cycle_among_module_level_imports(imports):
    cycle = find_cycle((i.importer, i.target) for i in imports if not i.function_level)
    assert cycle is None, "module-level import cycle: " + " -> ".join(cycle)


def test_no_function_level_imports_of_dprange_modules(imports):
    hidden = sorted({(i.importer, i.target) for i in imports if i.function_level})
    assert hidden == [], "\n".join(f"{a} imports {b} inside a function" for a, b in hidden)


def test_no_cycle_counting_function_level_imports(imports):
    cycle = find_cycle((i.importer, i.target) for i in imports)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_module_has_a_layer():
    unplaced = [m for m in module_names(PACKAGE, "dprange") if m != "dprange" and layer_of(m) is None]
    assert unplaced == [], f"add these to LAYERS: {unplaced}"


def test_no_module_imports_a_layer_above_its_own(imports):
    upward = sorted(
        f"{i.importer}:{i.line} imports {i.target}{' (in a function)' if i.function_level else ''}"
        for i in imports
        if i.importer != "dprange"
        and layer_of(i.importer) is not None
        and layer_of(i.target) is not None
        and layer_of(i.target) < layer_of(i.importer)
    )
    assert upward == [], "\n".join(upward)


def test_the_layer_check_fails_on_an_upward_import(tmp_path):
    """The check above can fail: a strategy importing a mechanism (row 5 from row 10) is caught,
    at module level and inside a function alike."""
    _write(
        tmp_path / "dprange",
        {
            "__init__.py": "",
            "mechanisms/__init__.py": "",
            "mechanisms/base.py": "from ..strategies import trees\n",
            "strategies/__init__.py": "",
            "strategies/trees.py": "def f():\n    from ..mechanisms import base\n    return base\n",
            "strategies/other.py": "from ..mechanisms.base import x\n",
        },
    )
    found = collect_imports(tmp_path / "dprange", "dprange")
    upward = sorted({(i.importer, i.target) for i in found if layer_of(i.target) < layer_of(i.importer)})
    assert upward == [
        ("dprange.strategies.other", "dprange.mechanisms"),
        ("dprange.strategies.other", "dprange.mechanisms.base"),
        ("dprange.strategies.trees", "dprange.mechanisms"),
        ("dprange.strategies.trees", "dprange.mechanisms.base"),
    ]


# ------------------------------------------------------------------ names still resolve


def test_every_public_name_resolves():
    missing = [name for name in dprange.__all__ if not hasattr(dprange, name)]
    assert missing == []


def test_names_modules_import_from_each_other_resolve(imports):
    missing = []
    for imp in imports:
        module = importlib.import_module(imp.target)
        missing += [
            f"{imp.importer}:{imp.line} from {imp.target} import {name}"
            for name in imp.names
            if not hasattr(module, name)
        ]
    assert missing == []


def _resolves(module: str, name: str) -> bool:
    """Whether ``from module import name`` works (an attribute, or a submodule)."""
    if hasattr(importlib.import_module(module), name):
        return True
    try:
        importlib.import_module(f"{module}.{name}")
    except ModuleNotFoundError:
        return False
    return True


def _imports_of_dprange(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "dprange":
            for alias in node.names:
                yield node.module, alias.name


def test_names_tests_and_benchmarks_import_resolve():
    files = sorted((REPO / "tests").rglob("*.py")) + sorted((REPO / "benchmarks").glob("*.py"))
    missing = []
    for path in files:
        for module, name in _imports_of_dprange(path):
            if not _resolves(module, name):
                missing.append(f"{path.name}: from {module} import {name}")
    assert missing == []


def test_the_facade_is_the_public_release():
    from dprange import api

    assert dprange.release is api.release
    assert dprange.release_grid is api.release_grid and dprange.quantiles is api.quantiles


# ------------------------------------------------------------------ what importing costs


HEAVY = ("scipy.optimize", "pandas", "pyarrow", "matplotlib", "cryptography", "tqdm")


@pytest.mark.parametrize("statement", ["import dprange", "import dprange.cli", "import dprange.cli.ldp"])
def test_importing_dprange_and_its_cli_loads_no_heavy_optional_module(statement):
    """`import dprange` and `dprange --help` (which imports dprange.cli) stay cheap: scipy.optimize
    (~0.3 s, needed only by budget optimisation, Gaussian calibration and isotonic fits),
    pandas, pyarrow, matplotlib (I/O and plots), cryptography (the first secure draw) and
    tqdm are imported where they are used, not at import time."""
    import subprocess
    import sys

    code = f"{statement}; import sys; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == ""


def test_lazy_modules_import_on_first_use():
    from dprange._lazy import lazy_module
    from dprange.analysis import selection as analysis

    stand_in = lazy_module("json")
    assert stand_in.dumps([1]) == "[1]"
    with pytest.raises(AttributeError):
        stand_in._private  # noqa: B018
    assert analysis.optimize.minimize_scalar(lambda x: (x - 2.0) ** 2).x == pytest.approx(2.0)


#: Module size and top-level breadth the layout keeps (docs/architecture.md): a module over this
#: many lines does several jobs and is split by job; the top level holds the cross-cutting modules.
MAX_MODULE_LINES = 700
MAX_TOP_LEVEL_MODULES = 15


def test_no_module_is_over_the_line_limit():
    lines = {str(path.relative_to(PACKAGE)): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    assert {name: n for name, n in lines.items() if n > MAX_MODULE_LINES} == {}


def test_the_top_level_holds_few_modules():
    top = sorted(path.name for path in PACKAGE.glob("*.py") if path.name != "__init__.py")
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top

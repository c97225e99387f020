"""dprange/__init__.py: the public names are imported on first use.  ``import dprange`` loads
no numpy; every name of ``__all__`` resolves to the object of its module; and a registry read
after importing only the registry sees every entry, as when the package imported everything."""

import ast
import subprocess
import sys

import dprange
from conftest import REPO


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_import_loads_no_numpy():
    assert _run("import sys, dprange; print('numpy' in sys.modules, 'scipy' in sys.modules)").split() == [
        "False",
        "False",
    ]


def test_all_names_the_lazy_table_and_the_type_checking_imports():
    lazy = {name for names in dprange._EXPORTS.values() for name in names}
    tree = ast.parse((REPO / "src" / "dprange" / "__init__.py").read_text())
    checked = next(node for node in tree.body if isinstance(node, ast.If))  # if TYPE_CHECKING:
    typed = {alias.asname or alias.name for node in checked.body for alias in node.names}
    assert lazy == typed == set(dprange.__all__)
    assert len(dprange.__all__) == len(set(dprange.__all__))


def test_every_public_name_is_its_module_object():
    import importlib

    for module, names in dprange._EXPORTS.items():
        loaded = importlib.import_module(f"dprange.{module}")
        for name in names:
            expected = loaded if module == name else getattr(loaded, name)
            assert getattr(dprange, name) is expected, name
    assert set(dprange.__all__) <= set(dir(dprange))


def test_registry_read_first_sees_every_entry():
    """Reading a registry before anything else imported the mechanisms fills it first."""
    code = "from dprange.registry import {0}; print(sorted({0}))"
    complete = _run("import dprange, sys\n[getattr(dprange, n) for n in dprange.__all__]\n" + code.format("MECHANISMS"))
    assert _run(code.format("MECHANISMS")) == complete
    assert "flat" in complete.lower() and "hierarchical" in complete.lower()

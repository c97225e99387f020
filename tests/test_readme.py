"""The README's code runs: every ```python block and every `dprange` line of every ```sh block.

Python blocks run in order in one shared namespace (the README reads top to bottom: later
blocks use ``ages``, ``domain`` and ``rel`` from the quick start), inside a temporary working
directory so that the files they write (release.json, release.npz) land there.  Shell lines
that start with ``dprange`` run through :func:`dprange.cli.main` in a temporary directory
holding the files a user would have: data.csv and data.parquet with columns income and age,
and cdfs.csv, the rectangles a --ranges example names.

A few snippets are slow at the README's sizes; they run smaller through :data:`SUBSTITUTIONS`,
each with its reason.  Everything else runs as written: if a snippet breaks, fix the README.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import shlex

import numpy as np
import pytest

from conftest import REPO
from dprange.cli import main

README = REPO / "README.md"

#: (text in the README, what the test runs instead, why).  Every entry must match the README.
SUBSTITUTIONS = [
    (
        "dprange error --n 1048576",
        "dprange error --n 131072",
        "2^20 bins take about 5 s on a loaded machine; 2^17 exercises the same coarse grid (n > 2^16)",
    ),
    (
        "sparse.bootstrap(30, 39)",
        "sparse.bootstrap(30, 39, reps=5)",
        "the default 200 replicates rerun ADMM 200 times (15-35 s measured); 5 run the same code",
    ),
    (
        "ldp.optimal_branching(2**16, 2**26, 1.0, consistency=False)",
        "ldp.optimal_branching(2**8, 2**26, 1.0, consistency=False)",
        "without consistency each branching averages 10^6 sampled ranges at D = 2^16 (about 15 s)",
    ),
]

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def readme_text() -> str:
    with open(README, encoding="utf-8") as fh:
        return fh.read()


def substituted(code: str) -> str:
    for old, new, _ in SUBSTITUTIONS:
        code = code.replace(old, new)
    return code


def fenced_blocks(text: str, language: str) -> list[tuple[int, str]]:
    """(line number, code) of every fenced block in ``language``, in order."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(2)) for m in FENCE.finditer(text) if m.group(1) == language]


def shell_commands(text: str) -> list[tuple[int, list[str]]]:
    """(line number, argv after 'dprange') of every line of the sh blocks that starts with
    ``dprange``; backslash continuations are joined and trailing # comments dropped."""
    commands = []
    for start, code in fenced_blocks(text, "sh"):
        joined = code.replace("\\\n", " ")
        lineno = start
        for line in joined.splitlines():
            lineno += 1
            words = shlex.split(substituted(line), comments=True)
            if words and words[0] == "dprange":
                commands.append((lineno, words[1:]))
    return commands


PYTHON_BLOCKS = fenced_blocks(readme_text(), "python")
SHELL_COMMANDS = shell_commands(readme_text())


def test_readme_has_the_snippets_this_file_runs():
    assert len(PYTHON_BLOCKS) >= 5
    assert len(SHELL_COMMANDS) >= 8
    assert any(argv[:1] == ["release"] for _, argv in SHELL_COMMANDS)
    assert any(argv[:2] == ["ldp", "encode"] for _, argv in SHELL_COMMANDS)


@pytest.mark.parametrize("old, new, reason", SUBSTITUTIONS)
def test_every_substitution_matches_the_readme(old, new, reason):
    """A substitution whose text left the README would silently stop applying."""
    assert readme_text().count(old) == 1, f"{old!r} is not in README.md (once); update SUBSTITUTIONS"


def test_snippet_extraction():
    text = (
        "x\n```python\na = 1\n```\n```sh\nmake demo  # no\ndprange error --n 1048576 \\\n    --epsilon 1 # note\n```\n"
    )
    assert fenced_blocks(text, "python") == [(2, "a = 1\n")]
    assert shell_commands(text) == [(7, ["error", "--n", "131072", "--epsilon", "1"])]


def run_up_to(session, index: int, run_one) -> None:
    """Run every snippet up to ``index`` not yet run, in README order (later snippets use
    what earlier ones defined or wrote, also when a test is selected alone).  A failure is
    kept for the snippet's own test and does not stop the ones after it."""
    while session["done"] <= index:
        current = session["done"]
        session["done"] += 1
        try:
            run_one(session, current)
        except Exception as exc:  # noqa: BLE001 - re-raised by the snippet's own test
            session["failures"][current] = exc


@pytest.fixture(scope="module")
def python_session(tmp_path_factory):
    """A shared namespace and working directory for the Python blocks."""
    return {
        "namespace": {"__name__": "readme"},
        "cwd": tmp_path_factory.mktemp("readme-python"),
        "done": 0,
        "failures": {},
    }


def run_python_block(session, index: int) -> None:
    lineno, code = PYTHON_BLOCKS[index]
    previous = os.getcwd()
    os.chdir(session["cwd"])
    try:
        exec(compile(substituted(code), f"README.md:{lineno}", "exec"), session["namespace"])
    finally:
        os.chdir(previous)


@pytest.mark.parametrize("index", range(len(PYTHON_BLOCKS)), ids=[f"line{n}" for n, _ in PYTHON_BLOCKS])
def test_python_block_runs(python_session, index):
    run_up_to(python_session, index, run_python_block)
    if index in python_session["failures"]:
        raise python_session["failures"][index]
    if index == 0:
        for name in ("release.json", "release.npz"):
            assert (python_session["cwd"] / name).stat().st_size > 0, name


@pytest.fixture(scope="module")
def shell_session(tmp_path_factory):
    """A folder holding the files the README's commands name: data.csv and data.parquet
    (columns income and age), cdfs.csv (rectangles of the 24 x 25 grid for --ranges); later
    commands read what earlier ones wrote (ldp aggregate reads the reports of ldp encode)."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("matplotlib")
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path_factory.mktemp("readme-sh")
    rng = np.random.default_rng(7)
    income = rng.integers(0, 250_001, 2000)
    age = rng.integers(0, 121, 2000)
    with open(folder / "data.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["income", "age"])
        writer.writerows(zip(income.tolist(), age.tolist()))
    pq.write_table(pa.table({"income": income, "age": age}), folder / "data.parquet")
    with open(folder / "cdfs.csv", "w", newline="") as fh:  # --ranges: the age CDF in every income bin
        writer = csv.writer(fh)
        writer.writerow(["age_lo", "age_hi", "income_lo", "income_hi"])
        writer.writerows((0, a, b, b) for b in range(25) for a in range(24))
    return {"cwd": folder, "done": 0, "failures": {}}


def run_shell_command(session, index: int) -> None:
    lineno, argv = SHELL_COMMANDS[index]
    previous = os.getcwd()
    os.chdir(session["cwd"])
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            with pytest.raises(SystemExit) as exit_info:
                main(argv)
    finally:
        os.chdir(previous)
    assert exit_info.value.code == 0, f"README.md:{lineno}: dprange {' '.join(argv)} failed: {err.getvalue()}"


@pytest.mark.parametrize("index", range(len(SHELL_COMMANDS)), ids=[f"line{n}" for n, _ in SHELL_COMMANDS])
def test_shell_command_exits_zero(shell_session, index):
    run_up_to(shell_session, index, run_shell_command)
    if index in shell_session["failures"]:
        raise shell_session["failures"][index]
    if index == len(SHELL_COMMANDS) - 1:
        for name in ("release.json", "cdf.png", "reports.npz", "ldp-release.json"):
            assert (shell_session["cwd"] / name).stat().st_size > 0, name


INLINE_NAME = re.compile(r"\b(dprange|ldp|Release|QuantileAnswer|Answer|rel)((?:\.[A-Za-z_]\w*)+)")


def inline_names(text: str) -> list[tuple[str, str]]:
    """(root, dotted attributes) of every name the README's inline code spans mention."""
    prose = FENCE.sub("", text)
    return sorted({m.groups() for span in re.findall(r"`([^`\n]+)`", prose) for m in INLINE_NAME.finditer(span)})


def test_every_name_in_the_prose_exists(python_session):
    """The names the README mentions outside its code blocks (``dprange.analysis.cdf_trees``,
    ``ldp.SHORTCUT_EXACT``, ``QuantileAnswer.interpolated``...) resolve, on the objects the
    README's own snippets built."""
    import dprange
    from dprange import ldp

    run_up_to(python_session, len(PYTHON_BLOCKS) - 1, run_python_block)
    namespace = python_session["namespace"]
    rel = namespace["rel"]
    roots = {
        "dprange": dprange,
        "ldp": ldp,
        "Release": rel,
        "rel": rel,
        "QuantileAnswer": namespace["q"],
        "Answer": rel.range(30, 39),
    }
    names = inline_names(readme_text())
    assert ("ldp", ".SHORTCUT_EXACT") in names
    missing = []
    for root, dotted in names:
        obj = roots[root]
        for attribute in dotted.strip(".").split("."):
            if not hasattr(obj, attribute):
                missing.append(root + dotted)
                break
            obj = getattr(obj, attribute)
    assert not missing, f"README.md names what does not exist: {missing}"

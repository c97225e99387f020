"""The identity as released: an optimised strategy is measured quantised (K = 2^k, noise about
the continuous one per unit of sensitivity) where the identity is measured at K = 1 (the
discrete Laplace of sensitivity 1: 1.84 at epsilon 1 against 2, 0.0137 against 0.08 at 5), so
``Optimized`` measures the identity wherever its exact error as released is lower."""

import numpy as np
import pytest
from _helpers import run_cli

from dprange.cli.render import strategy_note
from dprange.mechanisms.optimized import Optimized

pytestmark = pytest.mark.usefixtures("private_cache")  # 256-bin strategies stay out of the session cache


def test_the_command_line_note_names_the_identity():
    mech = Optimized("all-range")
    mech.design(64, 5.0)
    note = strategy_note(mech.strategy(64).describe())
    assert note.startswith("strategy: the identity (64 bins), measured in place of the optimised p-identity strategy")


@pytest.mark.parametrize(("n", "epsilon", "measured_choice"), [(64, 5.0, "identity"), (64, 1.0, "optimised")])
def test_the_strategy_measured_is_not_listed_as_also_built(n, epsilon, measured_choice):
    """One template (p-identity) builds one strategy: the release names it (or the identity
    measured in its place) and lists nothing else, nor counts its time twice."""
    mech = Optimized("all-range", template="p-identity")
    mech.design(n, epsilon)
    described = mech.strategy(n).describe()
    assert described["measured"] == measured_choice
    assert "also_built" not in described
    note = strategy_note(described)
    assert "also built" not in note and f"optimised in {described['optimisation_seconds']:.2f} s" in note


@pytest.mark.parametrize(("columns", "epsilon", "said"), [(1, 5, True), (2, 5, True), (2, 1, False)])
def test_the_command_line_says_when_the_identity_was_measured(tmp_path, capsys, columns, epsilon, said):
    rng = np.random.default_rng(1)
    path = tmp_path / "data.csv"
    path.write_text("a,b\n" + "".join(f"{a},{b}\n" for a, b in zip(rng.integers(0, 40, 300), rng.integers(0, 40, 300))))
    args = ["release", path, "-c", "a", "--lo", 0, "--hi", 39, "--integers", "-e", epsilon, "--seed", 2]
    if columns == 2:
        args += ["-c", "b", "--lo", 0, "--hi", 39, "-m", "optimized_kronecker"]
    else:
        args += ["-m", "optimized"]
    code, stdout, err = run_cli([*args, "-o", tmp_path / "out.json"], capsys)
    assert code == 0, err
    message = "measured the identity on every axis" if columns == 2 else "strategy: the identity (40 bins)"
    assert (message in stdout) is said

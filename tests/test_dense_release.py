"""The dense release in O(n^2) a release: the measured matrix's cached (A^T A)^-1
(Explicit.gram_inverse, adopt_gram_inverse), least squares by it (inverse_gls) against the
exact least-squares solution and the dense covariance, the exact integer answers by BLAS,
quantisation's early exit against the full search, and the disk cache of a dense optimised
strategy (its inverse and variance terms stored, checked when read, mapped from the file)."""

import numpy as np
import pytest

import dprange
from dprange.mechanisms.optimized import Optimized
from dprange.optimize import cache as optimized

pytestmark = pytest.mark.usefixtures("private_cache")


# ----------------------------------------------------------------------------- what a release builds


def cached_templates() -> set[str]:
    return {path.name.split("-n32-")[1].split("-")[0] for path in optimized.cache_dir().glob("*-n32-*.npz")}


def test_a_release_under_epsilon_delta_builds_only_the_strategy_it_measures():
    """The checks before any value is read ask for the strategy at (epsilon, delta): template
    auto builds the L2 optimum alone, not first the epsilon-DP p-Identity template (15 s at
    4096 bins, spent for nothing) as the strategy before any design was."""
    values = np.random.default_rng(12).integers(0, 32, 300)
    release = dprange.release(values, dprange.Domain.integers(0, 31), 1.0, delta=1e-6, mechanism=Optimized("prefix"))
    assert cached_templates() == {"l2"}  # v5-prefix-n32-l2-optimal-dual.npz
    assert release.to_dict()["provenance"]["parameters"]["strategy"]["template"] == "l2-optimal"
    dprange.release(values, dprange.Domain.integers(0, 31), 1.0, mechanism=Optimized("prefix"))
    assert cached_templates() == {"l2", "p", "dense"}  # and for epsilon-DP p-identity and (n <= 64) dense


def test_the_error_command_builds_only_the_strategy_at_its_delta(capsys):
    from dprange.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["error", "--n", "32", "-w", "prefix", "-e", "1", "--delta", "1e-6", "--mechanisms", "flat,optimized"])
    assert exc.value.code == 0, capsys.readouterr().err
    assert cached_templates() == {"l2"}

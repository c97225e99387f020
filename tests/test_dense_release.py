"""The dense release in O(n^2) a release: the measured matrix's cached (A^T A)^-1
(Explicit.gram_inverse, adopt_gram_inverse), least squares by it (inverse_gls) against the
exact least-squares solution and the dense covariance, the exact integer answers by BLAS,
quantisation's early exit against the full search, and the disk cache of a dense optimised
strategy (its inverse and variance terms stored, checked when read, mapped from the file)."""

import pytest
from _helpers import cached_templates

pytestmark = pytest.mark.usefixtures("private_cache")


def test_the_error_command_builds_only_the_strategy_at_its_delta(capsys):
    from dprange.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["error", "--n", "32", "-w", "prefix", "-e", "1", "--delta", "1e-6", "--mechanisms", "flat,optimized"])
    assert exc.value.code == 0, capsys.readouterr().err
    assert cached_templates() == {"l2"}

"""Reference scaffolding several test files share: dense GLS covariances and estimates (with a
public total, on the sum-zero subspace) and the Monte-Carlo check of an exact error model.

(conftest.py keeps ``range_matrix``, ``dense_gls`` by the KKT system and
``weighted_tree_problem``.)"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from dprange.cli import main

#: Relative cut-off of the pseudo-inverses: the normal matrices here are well conditioned on
#: their range, and the null directions (the total, unmeasured Fourier subspaces) are exact zeros.
PINV_RTOL = 1e-10


def gls_covariance(G: np.ndarray, public_total: bool, *, singular: bool = False) -> np.ndarray:
    """Covariance of the GLS estimate whose normal matrix is G = A^T V^-1 A.

    With a public total the estimate lies on the affine space 1^T x = total: the covariance
    is P pinv(P G P) P with P = I - 1 1^T / n, the projection on the sum-zero subspace.
    Otherwise inv(G), or pinv(G) when G is ``singular`` (unmeasured directions; only
    estimable queries of it are meaningful).  O(n^3)."""
    n = G.shape[0]
    if public_total:
        P = np.eye(n) - 1.0 / n
        return P @ np.linalg.pinv(P @ G @ P, rtol=PINV_RTOL, hermitian=True) @ P
    if singular:
        return np.linalg.pinv(G, rtol=PINV_RTOL, hermitian=True)
    return np.linalg.inv(G)


def gls_estimate(A: np.ndarray, y: np.ndarray, v: np.ndarray, total=None, *, singular: bool = False):
    """(x-hat, covariance) of GLS on the dense stacked system y = A x + noise of variances v;
    with a public ``total``, on the affine space 1^T x = total (shifted to it, then the
    sum-zero subspace)."""
    G = A.T @ (A / v[:, None])
    cov = gls_covariance(G, total is not None, singular=singular)
    base = np.zeros(A.shape[1]) if total is None else np.full(A.shape[1], total / A.shape[1])
    return base + cov @ (A.T @ ((y - A @ base) / v)), cov


def quadratic_forms(Q: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """diag(Q cov Q^T): the variance of every query (row of Q)."""
    return np.einsum("ij,jk,ik->i", Q, cov, Q)


def assert_unbiased_with_variance(runs, truth, variance, *, sds: float = 4.0, rtol: float = 0.2) -> None:
    """Monte-Carlo check of an exact error model: ``runs`` (R x queries) of independent
    releases have means within ``sds`` standard errors sqrt(variance / R) of ``truth`` and
    sample variances within ``rtol`` of ``variance`` (the default 0.2 is 3.4 s.d. of the
    sample variance of R = 600 normal draws, relative s.d. sqrt(2 / R))."""
    runs = np.asarray(runs, dtype=float)
    variance = np.asarray(variance, dtype=float)
    se_mean = np.sqrt(variance / runs.shape[0])
    assert np.all(np.abs(runs.mean(axis=0) - truth) < sds * se_mean)
    np.testing.assert_allclose(runs.var(axis=0, ddof=1), variance, rtol=rtol)


def peak_bytes_raising(error, load) -> int:
    """The peak of Python and NumPy allocations (tracemalloc) while ``load()`` raises ``error``:
    what a loader materialised before refusing a file."""
    tracemalloc.start()
    try:
        with pytest.raises(error):
            load()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


class Unreadable:
    """Values that fail the test if anything reads them (a refusal before the data are read)."""

    def __array__(self, *args, **kwargs):
        raise AssertionError("the values were read")

    def __len__(self):
        raise AssertionError("the values were read")


def run_cli(args, capsys):
    """Run the command line in this process: (exit status, stdout, stderr); arguments may be
    numbers or paths."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def _cli(args, capsys):
    """Run the command line in this process: (exit status, captured output)."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return exc.value.code, capsys.readouterr()

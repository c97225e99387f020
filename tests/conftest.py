"""Fixtures every test folder shares: the strategy caches, a seeded generator, the input files
of the command-line tests and the module-scoped releases of the answers tests; REPO and SHARED
(the repository and the read-only ../shared beside it); and the dense references several
files compare with (range_matrix, dense_gls by the KKT system, weighted_tree_problem)."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest

import dprange
from dprange import Domain, Hierarchical, Wavelet

#: The repository root, and the read-only material beside it (../shared: data sets, papers).
REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


@pytest.fixture(autouse=True, scope="session")
def strategy_cache(tmp_path_factory):
    """Optimised strategies (dprange.mechanisms.optimized) are cached in a temporary directory, not the user's."""
    previous = os.environ.get("DPRANGE_CACHE_DIR")
    os.environ["DPRANGE_CACHE_DIR"] = str(tmp_path_factory.mktemp("dprange-cache"))
    yield
    if previous is None:
        os.environ.pop("DPRANGE_CACHE_DIR", None)
    else:
        os.environ["DPRANGE_CACHE_DIR"] = previous


#: Saved releases of at most this many bins or cells are checked against the published schema
#: as the tests save them (larger ones cost seconds to validate; tests/answers/test_describe.py
#: checks every kind).
SCHEMA_CHECK_LIMIT = 20_000


@pytest.fixture(autouse=True, scope="session")
def saved_releases_follow_the_schema():
    """Every release the test suite saves as JSON (Release.to_json, GridRelease.to_json,
    DataAwareGridRelease.to_json, dprange quantiles -o) is validated against the published
    JSON Schema when it is written (issue 34): a file that does not follow it fails the test
    that wrote it.  Skipped without jsonschema (the test extra)."""
    try:
        import jsonschema
    except ImportError:
        yield
        return
    from dprange.answers import grid, writers
    from dprange.answers import release as release_module
    from dprange.answers.describe import release_schema
    from dprange.data_aware.grid import DataAwareGridRelease
    from dprange.quantile_mechanisms.methods import QuantilesResult

    validator = jsonschema.Draft202012Validator(release_schema())
    patch = pytest.MonkeyPatch()

    def checked(document: dict, size: int) -> dict:
        if size <= SCHEMA_CHECK_LIMIT:
            error = jsonschema.exceptions.best_match(validator.iter_errors(writers.jsonable(document)))
            if error is not None:
                raise AssertionError(
                    f"a saved release breaks the published schema at {error.json_path}: {error.message}"
                )
        return document

    original_save = release_module.save_json

    def save_json(release, path, alpha, *, cdf=False):
        """Release.to_json, then the text or file it made checked (read back: no recomputation)."""
        saved = original_save(release, path, alpha, cdf=cdf)
        if release.n <= SCHEMA_CHECK_LIMIT:
            text = saved if path is None else Path(saved).read_text(encoding="utf-8")
            checked(json.loads(text), release.n)
        return saved

    for cls in (grid.GridRelease, DataAwareGridRelease):
        original = cls.to_json
        patch.setattr(cls, "to_json", lambda self, _to_json=original: _check_text(checked, _to_json(self), self))
    original_document = QuantilesResult.to_document
    patch.setattr(
        QuantilesResult,
        "to_document",
        lambda self, *args, **kwargs: checked(original_document(self, *args, **kwargs), len(self.q)),
    )
    patch.setattr(release_module, "save_json", save_json)
    yield
    patch.undo()


def _check_text(checked, text: str, release) -> str:
    checked(json.loads(text), int(np.prod(release.shape)))
    return text


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """An empty strategy cache of the test's own (modules that measure optimisation or caching
    use it for every test: ``pytestmark = pytest.mark.usefixtures("private_cache")``)."""
    monkeypatch.setenv("DPRANGE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def range_matrix(n, lo, hi):
    """Dense 0/1 matrix of inclusive ranges (one row per query)."""
    idx = np.arange(n)
    lo = np.asarray(lo)[:, None]
    hi = np.asarray(hi)[:, None]
    return ((idx >= lo) & (idx <= hi)).astype(float)


def dense_gls(A, y, v, total=None):
    """Reference GLS by the explicit formula (with a known-total constraint via KKT)."""
    Wi = np.diag(1.0 / v)
    n = A.shape[1]
    if total is None:
        cov = np.linalg.inv(A.T @ Wi @ A)
        return cov @ A.T @ Wi @ y, cov
    K = np.block([[A.T @ Wi @ A, np.ones((n, 1))], [np.ones((1, n)), np.zeros((1, 1))]])
    sol = np.linalg.solve(K, np.concatenate([A.T @ Wi @ y, [total]]))
    return sol[:n], np.linalg.inv(K)[:n, :n]


def exact_nnls_with_equality(M, b, C, d):
    """min ||M x - b||^2 s.t. x >= 0, C x = d by enumerating supports (n <= 8): on the optimal
    support S the problem is an equality-constrained least squares (KKT system); the optimum
    is the best feasible (x_S >= 0) candidate, since the problem is convex."""
    n = M.shape[1]
    best, best_x = np.inf, None
    for size in range(1, n + 1):
        for support in itertools.combinations(range(n), size):
            S = list(support)
            Ms, Cs = M[:, S], C[:, S]
            k = C.shape[0]
            K = np.block([[Ms.T @ Ms, Cs.T], [Cs, np.zeros((k, k))]])
            sol = np.linalg.lstsq(K, np.concatenate([Ms.T @ b, d]), rcond=None)[0][:size]
            if sol.min() < -1e-12 or np.abs(Cs @ sol - d).max() > 1e-9:
                continue
            x = np.zeros(n)
            x[S] = sol
            value = np.sum((M @ x - b) ** 2)
            if value < best:
                best, best_x = value, x
    return best_x


def weighted_tree_problem(rng, n, support, values, known_total, branching=3):
    """A sparse histogram measured by a tree with random per-level weights (1 / noise scale)
    and Laplace noise: returns (tree, level_weights, row_weights, y, total)."""
    from dprange.strategies.trees import TreeStrategy

    tree = TreeStrategy(n, branching, measure_root=not known_total, known_total=known_total)
    x = np.zeros(n)
    x[support] = values
    level_weights = [None] * (tree.depth + 1)
    for d in tree.measured_depths:
        level_weights[d] = rng.uniform(0.3, 1.5)
    w = np.concatenate([np.full(tree.level_sizes[d], level_weights[d]) for d in tree.measured_depths])
    y = tree.dense() @ x + rng.laplace(0, 1 / w)
    return tree, level_weights, w, y, (float(x.sum()) if known_total else None)


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "data.csv"
    rng = np.random.default_rng(0)
    ages = rng.integers(18, 90, 500)
    with open(path, "w") as fh:
        fh.write("age,name,score\n")
        for i, a in enumerate(ages):
            fh.write(f"{a},p{i},{rng.random():.4f}\n")
    return path


@pytest.fixture
def ints():
    return np.random.default_rng(5).integers(-3, 50, 5000)


@pytest.fixture
def two_columns(tmp_path):
    rng = np.random.default_rng(1)
    age, hours = rng.integers(18, 60, 600), rng.integers(0, 50, 600)
    path = tmp_path / "people.csv"
    path.write_text("age,hours,third\n" + "".join(f"{a},{h},{a % 3}\n" for a, h in zip(age, hours)))
    return path, age, hours


@pytest.fixture
def ages_csv(tmp_path):
    path = tmp_path / "ages.csv"
    values = np.random.default_rng(1).integers(0, 16, 200)
    path.write_text("age\n" + "\n".join(str(v) for v in values) + "\n")
    return path


@pytest.fixture(scope="module")
def integer_release():
    """Hierarchical(4) on the integers 10..59 (50 bins)."""
    counts = np.random.default_rng(1).poisson(20, 50)
    return Hierarchical(4).release(counts, 1.0, rng=2, domain=Domain.integers(10, 59))


@pytest.fixture(scope="module")
def interval_release():
    """Wavelet on [0, 5] in 40 bins of width 0.125 (edges exact in binary)."""
    counts = np.random.default_rng(3).poisson(20, 40)
    return Wavelet(neighbours="replace").release(counts, 1.0, rng=4, domain=Domain.interval(0.0, 5.0, 40))


@pytest.fixture(scope="module")
def gls_release():
    counts = np.random.default_rng(3).poisson(30, 100)
    return Hierarchical(4).release(counts, 1.0, rng=7, domain=dprange.Domain.interval(0, 50, 100))

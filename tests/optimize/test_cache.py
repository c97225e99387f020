"""The strategy cache (dprange.optimize.cache): strategies are saved with their inverse and variance
terms, mapped aligned and read back to release like those built; unreadable, unfitting, stale or
planted files are recomputed or refused; the files stay private; ``cache show / clear``."""

import os

import numpy as np
import pytest
from _helpers import mode

import dprange
from dprange.mechanisms.optimized import Optimized
from dprange.operators import Explicit
from dprange.optimize import cache as optimized
from dprange.optimize.cache import cache_dir, cache_path
from dprange.optimize.p_identity import Gram, strategy_variance_terms
from dprange.strategies.matrix import MatrixStrategy
from dprange.workloads import AllRange, Prefix

# ----------------------------------------------------------------------------- the disk cache


@pytest.mark.usefixtures("private_cache")
def test_a_dense_strategy_is_cached_with_its_inverse_and_variance_terms():
    workload = Prefix(24)
    built = Optimized(workload, template="eigen").optimised_strategy(24)
    path = cache_path(workload, "eigen", 0, 1)
    with np.load(path) as saved:
        assert {"strategy", "gram_inverse", "variance_terms"} <= set(saved.files)
        np.testing.assert_allclose(saved["gram_inverse"], np.linalg.inv(built.matrix.T @ built.matrix), rtol=1e-9)
        expected = strategy_variance_terms(MatrixStrategy(saved["strategy"]), Gram(workload))
        np.testing.assert_allclose(saved["variance_terms"], expected, rtol=1e-12)
    read = Optimized(workload, template="eigen").optimised_strategy(24)
    assert read.cached and read.block._dense_gram is None  # the inverse adopted, A^T A never formed
    assert read.variance_terms == pytest.approx(expected, rel=1e-12)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("damage", ["without", "wrong"])
def test_a_cache_file_without_a_matching_inverse_is_completed(damage):
    """A file written before the inverse was kept (or holding another matrix's) is read, the
    inverse computed and the file written again with it."""
    workload = Prefix(20)
    Optimized(workload, template="eigen").optimised_strategy(20)
    path = cache_path(workload, "eigen", 0, 1)
    with np.load(path) as saved:
        arrays = {k: saved[k] for k in saved.files}
    if damage == "without":
        del arrays["gram_inverse"], arrays["variance_terms"]
    else:
        arrays["gram_inverse"] = arrays["gram_inverse"] * 1.01
    np.savez(path, **arrays)
    read = Optimized(workload, template="eigen").optimised_strategy(20)
    assert read.cached and read.variance_terms is not None
    with np.load(path) as saved:
        np.testing.assert_allclose(saved["gram_inverse"], np.linalg.inv(read.matrix.T @ read.matrix), rtol=1e-9)


@pytest.mark.usefixtures("private_cache")
def test_large_members_are_mapped_aligned_and_equal_what_numpy_reads(monkeypatch, tmp_path):
    """Written by the cache (every member aligned): the large members mapped read-only and
    aligned, the small ones read; np.load reads the same file.  Written by np.savez (members
    unaligned): the large ones are copied into memory, aligned.  A file truncated inside a
    mapped member is not loaded."""
    monkeypatch.setattr(optimized, "MAPPED_MIN_BYTES", 500)
    rng = np.random.default_rng(9)
    arrays = {
        "strategy": np.asfortranarray(rng.random((9, 9))),
        "small": np.arange(3.0),
        "trace": np.array(2.0),
        "gram_inverse": rng.random((10, 10)),
    }
    for writer in ("cache", "savez"):
        path = tmp_path / f"{writer}.npz"
        if writer == "cache":
            optimized._write_arrays(path, arrays)
            with np.load(path) as saved:
                for key, value in arrays.items():
                    np.testing.assert_array_equal(saved[key], value)
        else:
            np.savez(path, **arrays)
        read = optimized._read_arrays(path)
        for key, value in arrays.items():
            np.testing.assert_array_equal(read[key], value)
            assert read[key].flags.aligned
        for key in ("strategy", "gram_inverse"):
            assert read[key].flags.owndata is (writer == "savez")  # mapped where aligned in the file
            assert read[key].flags.writeable is (writer == "savez")
        assert read["small"].flags.writeable  # read by numpy, not mapped
    path = tmp_path / "cache.npz"
    path.write_bytes(path.read_bytes()[:900])  # truncated inside the mapped strategy
    assert optimized._load(path, "strategy", 9) is None


@pytest.mark.usefixtures("private_cache")
def test_a_release_from_the_cache_equals_the_release_that_built_it():
    """Same data and seed: the release that optimised the strategy (inverse computed) and one
    from the cache (inverse adopted, arrays mapped) give the same estimate and error bars."""
    values = np.random.default_rng(10).integers(0, 32, 500)
    domain = dprange.Domain.integers(0, 31)
    releases = [
        dprange.release(values, domain, 1.0, delta=1e-6, mechanism=Optimized("prefix", template="eigen"), rng=11)
        for _ in range(2)
    ]
    first, second = (r.range(np.arange(32), 31) for r in releases)
    np.testing.assert_allclose(first.value, second.value, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(first.stderr, second.stderr, rtol=1e-12)


def plant_inverse(path, old_probes: int = 2) -> np.ndarray:
    """Replace the inverse in the cache file ``path`` by X = S + D with S = (A^T A)^-1 of the
    strategy as measured and D M-sized but zero on Q = A^T A R, R the fixed public probes the
    check used before (seed 0): X A^T A r = r for those r, so that check passed it."""
    arrays = {k: np.array(v) for k, v in optimized._read_arrays(path).items()}
    A = MatrixStrategy(arrays["strategy"]).block.matrix
    n = A.shape[1]
    Q = A.T @ (A @ np.random.default_rng(0).standard_normal((n, old_probes)))
    M = np.random.default_rng(5).standard_normal((n, n)) * np.abs(arrays["gram_inverse"]).max()
    arrays["gram_inverse"] = arrays["gram_inverse"] + (M - (M @ Q) @ np.linalg.pinv(Q))
    optimized._write_arrays(path, arrays)
    return arrays["gram_inverse"]


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("route", ["release", "load"])
def test_an_inverse_planted_to_pass_fixed_probes_is_rejected_with_a_warning(monkeypatch, tmp_path, route):
    """Issue 30 item 4: an inverse built to pass the old fixed probes moved estimates by
    thousands on counts below 10.  Probes drawn from the secure source at each check reject
    it with a warning: a release (or a loaded release) equals the one made without the cache,
    and a release rewrites the file with the true inverse."""
    from dprange.inference import least_squares as ls

    n = 24
    values = np.random.default_rng(10).integers(0, n, 60)
    domain = dprange.Domain.integers(0, n - 1)

    def release():
        return dprange.release(values, domain, 1.0, delta=1e-6, mechanism=Optimized("prefix", template="eigen"), rng=11)

    clean = release()  # builds the cache
    path = cache_path(Prefix(n), "eigen", 0, 1)
    planted = plant_inverse(path)
    lo, hi = np.triu_indices(n)
    if route == "release":
        with pytest.warns(UserWarning, match="fails the check on random probes"):
            again = release()
        np.testing.assert_array_equal(again.estimate, clean.estimate)
        np.testing.assert_allclose(again.range(lo, hi).stderr, clean.range(lo, hi).stderr, rtol=1e-9)
        with np.load(path) as saved:
            assert not np.array_equal(saved["gram_inverse"], planted)
            A = again.measurements.blocks[0].matrix
            np.testing.assert_allclose(saved["gram_inverse"] @ (A.T @ A), np.eye(n), atol=1e-8)
    else:
        monkeypatch.setattr(ls, "PACKED_MIN_ENTRIES", 100)
        monkeypatch.setattr(optimized, "CACHED_INVERSE_MIN_BINS", 1)
        clean.to_json(tmp_path / "release.json")
        with pytest.warns(UserWarning, match="fails the check on random probes"):
            loaded = dprange.load_release(tmp_path / "release.json")
        np.testing.assert_allclose(loaded.range(lo, hi).stderr, clean.range(lo, hi).stderr, rtol=1e-9)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("cache", ["kept", "cleared", "another strategy", "wrong inverse", "refused candidate"])
def test_a_loaded_dense_release_adopts_the_inverse_its_strategy_has_in_the_cache(monkeypatch, tmp_path, cache):
    """Loading a saved dense release takes (A^T A)^-1 from the cache file of the same strategy
    (no factorisation: 5.4 of 6.3 s at 4096 bins); without that file, beside another
    strategy's, or with an inverse that fails the check, it is computed; the error bars are
    the release's either way."""
    from dprange.inference import least_squares as ls
    from dprange.operators import dense as operators

    monkeypatch.setattr(ls, "PACKED_MIN_ENTRIES", 100)
    monkeypatch.setattr(optimized, "CACHED_INVERSE_MIN_BINS", 1)
    values = np.random.default_rng(17).integers(0, 28, 400)
    mechanism = Optimized("prefix", template="eigen")
    release = dprange.release(values, dprange.Domain.integers(0, 27), 1.0, delta=1e-6, mechanism=mechanism, rng=18)
    release.to_json(tmp_path / "release.json")
    path = cache_path(Prefix(28), "eigen", 0, 1)
    if cache == "cleared":
        optimized.clear_cache()
    elif cache == "another strategy":
        path.unlink()
        Optimized("all-range", template="eigen").optimised_strategy(28)  # cached under the same n
    elif cache == "wrong inverse":
        arrays = {k: np.array(v) for k, v in optimized._read_arrays(path).items()}
        arrays["gram_inverse"] = arrays["gram_inverse"] * (1 + 1e-6)
        optimized._write_arrays(path, arrays)
    elif cache == "refused candidate":  # a file whose strategy does not quantise is passed over

        def refuse(matrix):
            raise dprange.errors.ParameterError("not a strategy")

        monkeypatch.setattr(optimized, "MatrixStrategy", refuse)
    factorised = []
    original = operators.well_conditioned_cholesky
    monkeypatch.setattr(operators, "well_conditioned_cholesky", lambda g: factorised.append(1) or original(g))
    loaded = dprange.load_release(tmp_path / "release.json")
    assert bool(factorised) is (cache != "kept")
    lo, hi = np.triu_indices(28)
    np.testing.assert_allclose(loaded.range(lo, hi).stderr, release.range(lo, hi).stderr, rtol=1e-9)
    assert not optimized.adopt_cached_inverse(Explicit(np.eye(28)))  # no cached strategy is the identity


# ----------------------------------------------------------------------------- managing the cache


@pytest.mark.usefixtures("private_cache")
def test_cache_show_lists_the_strategies_and_clear_removes_only_them(capsys):
    from dprange.cli import main

    Optimized("prefix", template="eigen").optimised_strategy(16)
    Optimized("all-range").optimised_strategy(16)
    directory = optimized.cache_dir()
    (directory / "notes.txt").write_text("not a strategy")
    (directory / "v5-prefix-n16-eigen-dual.123.tmp.npz").write_bytes(b"left by an interrupted write")
    names = sorted(path.name for path in optimized.cache_files())
    assert names == sorted(p.name for p in directory.glob("v5-*.npz")) and len(names) == 4  # auto: p-identity, dense
    sizes = [path.stat().st_size for path in optimized.cache_files()]
    assert sizes == sorted(sizes, reverse=True)  # largest first
    with pytest.raises(SystemExit) as exc:
        main(["cache", "show"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and f"strategy cache {directory}: 4 files" in out
    assert all(name in out for name in names) and "notes.txt" not in out
    with pytest.raises(SystemExit) as exc:
        main(["cache", "clear"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and out.startswith("removed 4 files")
    assert optimized.cache_files() == [] and (directory / "notes.txt").exists()
    again = Optimized("prefix", template="eigen").optimised_strategy(16)
    assert not again.cached  # optimised again when next needed


@pytest.mark.usefixtures("private_cache")
def test_an_absent_cache_directory_lists_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("DPRANGE_CACHE_DIR", str(tmp_path / "never-made"))
    assert optimized.cache_files() == [] and optimized.clear_cache() == (0, 0)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("template", ["p-identity", "p-identity-l2", "eigen", "dense"])
def test_strategies_read_back_mapped_release_like_those_built(monkeypatch, template):
    """Every member mapped read-only (MAPPED_MIN_BYTES = 1): strategies read from the cache (and
    the dense template started from a mapped p-Identity optimum) release as the ones built."""
    monkeypatch.setattr(optimized, "MAPPED_MIN_BYTES", 1)
    values = np.random.default_rng(14).integers(0, 24, 400)
    domain = dprange.Domain.integers(0, 23)
    delta = 1e-6 if template in ("p-identity-l2", "eigen") else 0.0
    answers = []
    for _ in range(2):  # built, then read back mapped
        mechanism = Optimized("prefix", template=template)
        release = dprange.release(values, domain, 1.0, delta=delta, mechanism=mechanism, rng=15)
        answers.append(release.range(np.arange(24), 23))
    assert mechanism.optimised_strategy(24).cached
    np.testing.assert_allclose(answers[0].value, answers[1].value, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(answers[0].stderr, answers[1].stderr, rtol=1e-12)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("why", ["uncertified", "ill-conditioned"])
def test_a_strategy_without_an_adoptable_inverse_is_cached_once(monkeypatch, why):
    """Where no inverse would be adopted (none certified, or one less accurate than the check
    asks), the file keeps the variance terms alone and is not written again on each read; the
    release computes what it needs."""
    from dprange.operators import dense as operators

    if why == "uncertified":
        monkeypatch.setattr(operators.Explicit, "gram_inverse", lambda self: None)
    else:
        monkeypatch.setattr(operators.Explicit, "_maps_back", lambda self, inverse, tolerance=None: False)
    workload = Prefix(20)
    Optimized(workload, template="eigen").optimised_strategy(20)
    path = cache_path(workload, "eigen", 0, 1)
    with np.load(path) as saved:
        assert "gram_inverse" not in saved.files and saved["variance_terms"].shape == (3,)
    written = path.stat().st_mtime_ns
    values = np.random.default_rng(16).integers(0, 20, 300)
    for _ in range(2):
        release = dprange.release(
            values, dprange.Domain.integers(0, 19), 1.0, delta=1e-6, mechanism=Optimized(workload, template="eigen")
        )
        assert np.isfinite(release.range(0, 9).stderr)
    assert path.stat().st_mtime_ns == written


@pytest.mark.usefixtures("private_cache")
def test_a_stale_partial_cache_file_is_rewritten_private(monkeypatch):
    """A temporary file of the same name left by an interrupted write (world-readable, say)
    does not pass its mode on to the cache file written over it."""
    monkeypatch.setattr(os, "getpid", lambda: 4242)
    path = optimized.cache_dir() / "v5-test-n4-eigen-dual.npz"
    path.parent.mkdir(parents=True)
    stale = path.with_suffix(".4242.tmp.npz")
    stale.write_bytes(b"left over")
    os.chmod(stale, 0o666)
    assert optimized._store(path, {"strategy": np.eye(4)})
    assert mode(path) == 0o600 and not stale.exists()


@pytest.mark.usefixtures("private_cache")
def test_the_strategy_is_cached_on_disk_and_read_back(monkeypatch, tmp_path):
    first = Optimized("all-range").strategy(20)
    assert not first.cached and any(cache_dir().iterdir())
    second = Optimized("all-range").strategy(20)
    assert second.cached and second.seconds == first.seconds
    np.testing.assert_array_equal(second.explicit(), first.explicit())
    monkeypatch.delenv("DPRANGE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "dprange"


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize(
    "content",
    [b"", b"PK\x03\x04not a zip", "truncated", "no theta", "wrong shape"],
    ids=["empty", "bad-zip", "truncated", "no-theta", "wrong-shape"],
)
def test_an_unreadable_or_unfitting_cache_file_is_recomputed(content):
    """The cache only saves time: an empty, corrupt or truncated file (a full disk, a copy
    cut short) raised EOFError / BadZipFile, one without the strategy a KeyError, and one of
    another shape was used for the wrong number of bins.  Each is now recomputed and replaced."""
    fresh = Optimized("all-range").strategy(20)
    path = cache_path(AllRange(20), "p-identity", fresh.theta.shape[0], 1)
    if content == "truncated":
        content = path.read_bytes()[:200]
    elif content == "no theta":
        np.savez(path, seconds=np.array(1.0), trace=np.array(2.0))
    elif content == "wrong shape":
        np.savez(path, theta=np.zeros((1, 7)), seconds=np.array(1.0), trace=np.array(2.0))
    if isinstance(content, bytes):
        path.write_bytes(content)
    again = Optimized("all-range").strategy(20)
    assert not again.cached and again.stored and again.n == 20
    np.testing.assert_array_equal(again.theta, fresh.theta)
    assert Optimized("all-range").strategy(20).cached  # replaced by a good file


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize(
    "arrays",
    [
        {"theta": np.full((2, 20), np.nan)},
        {"theta": np.full((2, 20), np.inf)},
        {"theta": np.full((2, 20), "a")},
        {"theta": np.full((2, 20), 1 + 1j)},
        {"theta": -np.ones((2, 20))},
        {"theta": np.ones((2, 20)), "seconds": np.ones(3)},
        {"theta": np.ones((2, 20)), "trace": np.array(np.nan)},
    ],
    ids=["nan", "inf", "text", "complex", "negative-l1", "seconds-not-a-number", "trace-nan"],
)
def test_a_cache_file_with_values_no_optimisation_gives_is_recomputed(arrays):
    """A zip that reads but holds values no optimisation writes (non-finite, text, complex,
    negative L1 weights, a time that is not one number) made the release fail ('the strategy
    matrix has non-finite entries', 'could not convert string to float', a weight rounding to
    zero) or dropped the imaginary part; like an unreadable file it is recomputed and replaced."""
    fresh = Optimized("all-range").strategy(20)
    path = cache_path(AllRange(20), "p-identity", fresh.theta.shape[0], 1)
    np.savez(path, **{"seconds": np.array(1.0), "trace": np.array(2.0), **arrays})
    again = Optimized("all-range").strategy(20)
    assert not again.cached and again.stored
    np.testing.assert_array_equal(again.theta, fresh.theta)
    assert again.trace == fresh.trace
    assert Optimized("all-range").strategy(20).cached  # replaced by a good file


@pytest.mark.usefixtures("private_cache")
def test_a_cached_dense_strategy_with_a_non_finite_entry_is_recomputed():
    """The same for the dense strategies (eigen-design) stored as a matrix."""
    fresh = Optimized(Prefix(12), template="eigen").strategy(12)
    path = cache_path(Prefix(12), "eigen", 0, 1)
    matrix = np.array(fresh.matrix, dtype=float)
    matrix[0, 0] = np.nan
    np.savez(path, strategy=matrix, seconds=np.array(1.0), trace=np.array(2.0))
    again = Optimized(Prefix(12), template="eigen").strategy(12)
    assert not again.cached and again.stored
    np.testing.assert_array_equal(again.matrix, fresh.matrix)

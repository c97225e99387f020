"""The dense release in O(n^2) a release: the measured matrix's cached (A^T A)^-1
(Explicit.gram_inverse, adopt_gram_inverse), least squares by it (inverse_gls) against the
exact least-squares solution and the dense covariance, the exact integer answers by BLAS,
quantisation's early exit against the full search, and the disk cache of a dense optimised
strategy (its inverse and variance terms stored, checked when read, mapped from the file)."""

import base64
import zlib

import numpy as np
import pytest
from _helpers import integer_strategy

import dprange
from dprange.inference.dispatch import least_squares
from dprange.inference.least_squares import DenseGLSEstimate, dense_covariance, gls, inverse_gls
from dprange.measurements import LinearMeasurement, Measurements
from dprange.mechanisms.optimized import Optimized, auto_optimise_limit
from dprange.operators import Explicit
from dprange.optimize import cache as optimized
from dprange.optimize.cache import cache_path
from dprange.optimize.p_identity import Gram, strategy_variance_terms
from dprange.strategies.matrix import MatrixStrategy
from dprange.workloads import Prefix

pytestmark = pytest.mark.usefixtures("private_cache")


# ----------------------------------------------------------------------------- least squares by the inverse


def constrained_least_squares(A: np.ndarray, y: np.ndarray, total: float) -> np.ndarray:
    """argmin ||A x - y|| subject to 1^T x = total, from the KKT system."""
    n = A.shape[1]
    kkt = np.block([[A.T @ A, np.ones((n, 1))], [np.ones((1, n)), np.zeros((1, 1))]])
    return np.linalg.solve(kkt, np.concatenate([A.T @ y, [total]]))[:n]


@pytest.mark.parametrize("total", [None, 123.0])
def test_inverse_gls_is_the_least_squares_solution_and_its_covariance(total):
    rng = np.random.default_rng(3)
    A = integer_strategy(40, 15, 3)
    y = A @ rng.integers(0, 50, 15) + rng.normal(0.0, 4.0, 40)
    x, covariance = inverse_gls(A, np.linalg.inv(A.T @ A), y, 2.5, total=total)
    expected = np.linalg.lstsq(A, y, rcond=None)[0] if total is None else constrained_least_squares(A, y, total)
    np.testing.assert_allclose(x, expected, rtol=1e-11, atol=1e-9)
    if total is not None:
        assert x.sum() == pytest.approx(total, rel=1e-13)
    np.testing.assert_allclose(covariance(), dense_covariance(A, 2.5, total is not None), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("total", [None, 123.0])
def test_range_variances_from_the_unformed_covariance_are_those_of_the_covariance(total):
    """The prefix sums the range variances read are taken from S row by row (ScaledInverse),
    without the n x n covariance: they equal the cumulative sums of the covariance itself, and
    every range's variance equals q^T C q; the covariance is not formed by asking for ranges."""
    from dprange.inference.least_squares import ScaledInverse, prefix_sums_2d

    A = integer_strategy(40, 15, 4)
    y = A @ np.arange(15.0)
    x, lazy = inverse_gls(A, np.linalg.inv(A.T @ A), y, 2.5, total=total)
    assert isinstance(lazy, ScaledInverse)
    covariance = lazy()
    reference = np.zeros((16, 16))
    reference[1:, 1:] = covariance.cumsum(axis=0).cumsum(axis=1)
    np.testing.assert_allclose(lazy.prefix_sums(), reference, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(prefix_sums_2d(covariance), reference, rtol=1e-12, atol=1e-12)
    estimate = DenseGLSEstimate(Explicit(A), 2.5, x, total is not None, lazy)
    lo, hi = np.triu_indices(15)
    Q = (np.arange(15)[None, :] >= lo[:, None]) & (np.arange(15)[None, :] <= hi[:, None])
    exact = np.einsum("ij,jk,ik->i", Q, covariance, Q)
    np.testing.assert_allclose(estimate.range_variance(lo, hi), np.maximum(exact, 0), rtol=1e-9, atol=1e-12)
    assert estimate._covariance is lazy  # ranges did not form the covariance
    with pytest.raises(dprange.errors.ParameterError, match="square matrix"):
        prefix_sums_2d(np.ones((3, 4)))
    with pytest.raises(dprange.errors.ParameterError, match="explicit strategy block"):
        optimized.adopt_cached_inverse(np.eye(3))


def measurements_of(A, values, variance, total=None):
    measurement = LinearMeasurement(Explicit(A), np.asarray(values, dtype=float), variance)
    return Measurements([measurement], A.shape[1], 1.0, total=total)


@pytest.mark.parametrize("total", [None, 40.0])
def test_least_squares_on_one_explicit_block_goes_by_the_inverse_and_equals_lsmr(total):
    """The dispatch takes the inverse (no LSMR iterations) for a well-conditioned explicit
    block; the estimate and every range variance equal LSMR's and the dense covariance's."""
    rng = np.random.default_rng(4)
    A = integer_strategy(30, 10, 4)
    y = A @ rng.integers(0, 9, 10) + rng.normal(0.0, 3.0, 30)
    estimate = least_squares(measurements_of(A, y, 9.0, total))
    assert isinstance(estimate, DenseGLSEstimate) and estimate.iterations == 0
    reference = gls(Explicit(A), y, np.full(30, 9.0), total=total)
    np.testing.assert_allclose(estimate.leaves, reference.leaves, rtol=1e-9, atol=1e-9)
    covariance = dense_covariance(A, 9.0, total is not None)
    np.testing.assert_allclose(estimate.covariance, covariance, rtol=1e-9, atol=1e-12)
    lo, hi = np.triu_indices(10)
    direct = np.array([covariance[a : b + 1, a : b + 1].sum() for a, b in zip(lo, hi)])
    np.testing.assert_allclose(estimate.range_variance(lo, hi), np.maximum(direct, 0.0), rtol=1e-9, atol=1e-10)


def test_an_ill_conditioned_block_goes_by_lsmr(monkeypatch):
    """Above the limit on the condition bound the inverse is not used (LSMR iterates); the
    estimate is still the least-squares solution."""
    from dprange.inference import dispatch

    monkeypatch.setattr(dispatch, "INVERSE_CONDITION_LIMIT", 1.0)
    rng = np.random.default_rng(5)
    A = integer_strategy(30, 10, 5)
    y = A @ rng.integers(0, 9, 10) + rng.normal(0.0, 3.0, 30)
    estimate = least_squares(measurements_of(A, y, 4.0))
    assert estimate.iterations > 0
    np.testing.assert_allclose(estimate.leaves, np.linalg.lstsq(A, y, rcond=None)[0], rtol=1e-8, atol=1e-8)


# ----------------------------------------------------------------------------- the disk cache


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


def test_a_damaged_packed_strategy_is_refused():
    from dprange.errors import ParameterError
    from dprange.inference.least_squares import pack_integers, unpack_integers

    A = np.arange(12.0).reshape(3, 4)
    text = pack_integers(A)
    with pytest.raises(ParameterError, match="exactly 3 x 5"):
        unpack_integers(text, (3, 5))  # fewer entries than the shape
    with pytest.raises(ParameterError, match="exactly 2 x 4"):
        unpack_integers(text, (2, 4))  # more: decompression stops past the shape
    with pytest.raises(ParameterError, match="does not decode"):
        unpack_integers("not base64!", (3, 4))
    with pytest.raises(ParameterError, match="does not decode"):
        unpack_integers(base64.b64encode(b"plain bytes").decode(), (3, 4))
    bomb = base64.b64encode(zlib.compress(bytes(10**7))).decode()  # 10 MB of zeros in 10 kB
    with pytest.raises(ParameterError, match="exactly 3 x 4"):
        unpack_integers(bomb, (3, 4))
    with pytest.raises(ParameterError, match="integer"):
        pack_integers(A + 0.5)


# ----------------------------------------------------------------------------- managing the cache


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


def test_an_absent_cache_directory_lists_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("DPRANGE_CACHE_DIR", str(tmp_path / "never-made"))
    assert optimized.cache_files() == [] and optimized.clear_cache() == (0, 0)


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


def test_new_helpers_refuse_bad_input():
    from dprange.errors import ParameterError

    with pytest.raises(ParameterError, match="template must be one of"):
        auto_optimise_limit("p-identty", "add_remove")
    with pytest.raises(ParameterError, match="neighbours"):
        auto_optimise_limit("p-identity", "bounded")
    A = integer_strategy(6, 4, 17)
    inverse = np.linalg.inv(A.T @ A)
    with pytest.raises(ParameterError, match="expected 6 measured values"):
        inverse_gls(A, inverse, np.zeros(5), 1.0)
    with pytest.raises(ParameterError, match="4 x 4 inverse"):
        inverse_gls(A, inverse[:3, :3], np.zeros(6), 1.0)
    with pytest.raises(ParameterError, match="positive and finite"):
        inverse_gls(A, inverse, np.zeros(6), 0.0)

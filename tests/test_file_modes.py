"""File modes (issue 30 item 8): a release is meant to be published, so the files a release
writes (``to_json``, ``to_npz``, ``dprange release -o``) follow the umask; the ledger and the
strategy cache stay 0600 whatever it is (docs/privacy.md, "## Trust boundaries")."""

import contextlib
import os

import numpy as np
import pytest
from _helpers import mode

import dprange
from dprange.cli import main
from dprange.optimize import cache as optimized

pytestmark = pytest.mark.usefixtures("private_cache")


@contextlib.contextmanager
def umask(mask: int):
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "data.csv"
    values = np.random.default_rng(0).integers(0, 16, 200)
    path.write_text("x\n" + "".join(f"{v}\n" for v in values))
    return path


@pytest.mark.parametrize(("mask", "published"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_releases_follow_the_umask_and_ledgers_and_caches_stay_private(csv_file, tmp_path, capsys, mask, published):
    output, ledger = tmp_path / "out" / "release.json", tmp_path / "ledger.json"
    command = ["release", str(csv_file), "-c", "x", "--lo", "0", "--hi", "15", "--integers", "-e", "1"]
    command += ["-m", "optimized", "-o", str(output), "--session", str(ledger), "--session-epsilon", "5"]
    with umask(mask):
        with pytest.raises(SystemExit) as exc:
            main(command)
        assert exc.value.code == 0, capsys.readouterr().err
        release = dprange.load_release(output)
        saved = [release.to_json(tmp_path / "api.json"), release.to_npz(tmp_path / "api.npz")]
    assert mode(output) == published  # the command's release (0600 before issue 30)
    assert all(mode(path) == published for path in saved)  # the library's
    assert mode(ledger) == 0o600
    cached = optimized.cache_files()
    assert cached and all(mode(path) == 0o600 for path in cached)  # 0644 under umask 022 before
    assert mode(optimized.cache_dir()) == 0o700

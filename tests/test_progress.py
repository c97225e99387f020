"""Progress bars (dprange.progress; issue 12, item 5): drawn only on a terminal, for long work,
unless switched off."""

import io
import sys

import numpy as np
import pytest

import dprange.progress as progress
from dprange.cli import main
from dprange.progress import progress_bar, progress_enabled, set_progress, tracked

pytest.importorskip("tqdm")


class FakeTerminal(io.StringIO):
    """A stderr that says it is a terminal and keeps what was written."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def terminal(monkeypatch):
    """stderr is a fake terminal, bars appear at once, progress is on (as in a shell)."""
    fake = FakeTerminal()
    monkeypatch.setattr(progress, "_default_stream", lambda: fake)  # pytest resets sys.stderr for each test
    monkeypatch.setattr(progress, "DELAY_SECONDS", 0.0)
    monkeypatch.setattr(progress, "REFRESH_SECONDS", 0.0)
    monkeypatch.delenv(progress.ENV_VARIABLE, raising=False)
    previous = set_progress(True)
    yield fake
    set_progress(previous)


def _count_rows(rows_per_batch: list[int], stream=None) -> None:
    with progress_bar("reading", unit="rows", unit_scale=True, stream=stream) as bar:
        for rows in rows_per_batch:
            bar.update(rows)


def test_off_when_the_stream_is_not_a_terminal(monkeypatch):
    monkeypatch.delenv(progress.ENV_VARIABLE, raising=False)
    monkeypatch.setattr(progress, "DELAY_SECONDS", 0.0)
    plain = io.StringIO()
    assert not progress_enabled(plain)
    _count_rows([1000, 2000], stream=plain)
    assert plain.getvalue() == ""


def test_a_terminal_shows_a_bar_with_the_description_count_and_unit(terminal):
    assert progress_enabled()
    _count_rows([1000, 2000, 3000])
    drawn = terminal.getvalue()
    assert "reading" in drawn and "6.00k" in drawn and "rows" in drawn


def test_set_progress_false_and_the_environment_switch_silence_it(terminal, monkeypatch):
    assert set_progress(False) is True
    _count_rows([10])
    assert terminal.getvalue() == ""
    set_progress(True)
    monkeypatch.setenv(progress.ENV_VARIABLE, "0")
    _count_rows([10])
    assert terminal.getvalue() == ""
    monkeypatch.setenv(progress.ENV_VARIABLE, "1")
    _count_rows([10])
    assert "reading" in terminal.getvalue()


def test_small_work_and_a_missing_tqdm_stay_silent(terminal, monkeypatch):
    assert list(tracked(range(3), "small", large=False)) == [0, 1, 2]
    assert terminal.getvalue() == ""
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    assert list(tracked(range(3), "no tqdm")) == [0, 1, 2]
    assert terminal.getvalue() == ""


def test_tracked_yields_every_item_and_counts_to_the_total(terminal):
    assert list(tracked(["a", "b", "c"], "letters")) == ["a", "b", "c"]
    assert "letters" in terminal.getvalue() and "3/3" in terminal.getvalue()


def test_the_streaming_engine_reports_rows(terminal, tmp_path):
    from dprange import Domain
    from dprange.engines import stream_histogram

    path = tmp_path / "x.csv"
    path.write_text("x\n" + "\n".join(str(v % 10) for v in range(5000)) + "\n")
    counts = stream_histogram(str(path), "x", Domain.integers(0, 9), batch_rows=1000)
    assert counts.tolist() == [500] * 10
    drawn = terminal.getvalue()
    assert "reading" in drawn and "5.00k" in drawn and "rows" in drawn


def test_admm_shows_its_iterations_only_from_the_size_threshold(terminal, monkeypatch):
    import dprange.inference.l1_admm as l1

    A, y = np.eye(4), np.array([1.0, 2.0, 3.0, 4.0])
    l1.admm(A, y, maxiter=5, tol=0.0)
    assert terminal.getvalue() == ""  # n = 4 is far below the threshold
    monkeypatch.setattr(l1, "PROGRESS_MIN_N", 4)
    result = l1.admm(A, y, maxiter=5, tol=0.0)
    assert result.iterations == 5
    assert "ADMM" in terminal.getvalue() and "5/5" in terminal.getvalue()


def test_select_ranks_candidates_with_a_bar_at_large_n(terminal):
    from dprange import Flat, select

    select("identity", 2**16, 1.0, candidates=[Flat()])
    assert "ranking candidates" in terminal.getvalue()
    terminal.seek(0)
    terminal.truncate()
    select("identity", 2**8, 1.0, candidates=[Flat()])
    assert terminal.getvalue() == ""


def test_ldp_simulation_counts_levels(terminal):
    from dprange.ldp.range_protocols import HierarchicalHistogram
    from dprange.ldp.simulate import simulate

    protocol = HierarchicalHistogram(16, epsilon=1.0)
    simulate(protocol, np.full(16, 50), rng=0)
    assert "simulating levels" in terminal.getvalue()


def test_strategy_optimisation_counts_optimiser_iterations(terminal):
    from dprange.optimize.p_identity import optimize_p_identity

    gram = np.tril(np.ones((6, 6))).T @ np.tril(np.ones((6, 6)))  # prefix workload on 6 bins
    optimize_p_identity(gram, 2, maxiter=20)
    assert "optimising strategy" in terminal.getvalue()


def _release_glob(tmp_path, quiet: bool):
    for k in range(2):
        (tmp_path / f"part-{k}.csv").write_text("x\n" + "\n".join(str(v % 10) for v in range(300)) + "\n")
    argv = ["release", str(tmp_path / "part-*.csv"), "-c", "x", "--lo", "0", "--hi", "9", "--integers"]
    argv += ["-e", "1", "-m", "flat", "--seed", "1", "-o", str(tmp_path / "out.json")]
    with pytest.raises(SystemExit) as info:
        main(["--quiet", *argv] if quiet else argv)
    assert info.value.code == 0


def test_cli_draws_a_bar_on_a_terminal_and_quiet_silences_it_for_that_command_only(terminal, tmp_path):
    _release_glob(tmp_path, quiet=False)
    assert "reading" in terminal.getvalue()
    terminal.seek(0)
    terminal.truncate()
    _release_glob(tmp_path, quiet=True)
    assert terminal.getvalue() == ""
    assert progress_enabled()  # --quiet lasts for its command only


def _simulate_cli(tmp_path, *quiet: str) -> None:
    np.save(tmp_path / "hist.npy", np.full(16, 20))
    argv = ["ldp", *quiet, "simulate", str(tmp_path / "hist.npy"), "-e", "1", "--seed", "0"]
    with pytest.raises(SystemExit) as info:
        main([*argv, "-o", str(tmp_path / "sim.json")])
    assert info.value.code == 0


def test_ldp_group_accepts_quiet(terminal, tmp_path):
    _simulate_cli(tmp_path)
    assert "simulating levels" in terminal.getvalue()
    terminal.seek(0)
    terminal.truncate()
    _simulate_cli(tmp_path, "--quiet")
    assert terminal.getvalue() == ""
    assert progress_enabled()


def test_the_l2_optimum_shows_the_share_of_its_duality_gap_closed(terminal):
    """The solve's bar counts whole percents of the way (in log gap) from the first gap to the
    tolerance and ends at 100% when it converges, not at steps out of the 200-step limit."""
    from dprange.optimize import l2_optimum as optimal_l2
    from dprange.workloads import Prefix

    def evaluate(point):  # dual 1 - |p - 1|^2 below primal 1 + |p - 1|^2: the gap closes at p = 1
        square = float(np.sum((point - 1.0) ** 2))
        return 1.0 - square, -2.0 * (point - 1.0), 1.0 + square, None

    best = optimal_l2._maximise_dual(
        evaluate, np.zeros(3), maxiter=50, description="optimising strategy (L2 optimum)", large=True, tolerance=1e-6
    )
    assert (best.primal - best.bound) / best.primal <= 1e-6
    drawn = terminal.getvalue()
    assert "optimising strategy (L2 optimum)" in drawn and "100/100" in drawn and "/200" not in drawn
    assert ".0/100" not in drawn.replace("| 0/100", "")  # whole percents
    assert optimal_l2.l2_optimum(Prefix(8).gram()).steps >= 1  # a real solve runs with the bar too

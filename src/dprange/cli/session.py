"""``dprange session`` and ``dprange cache``: the privacy ledger shared by releases, and the
on-disk strategy cache; the session options' helpers used by the release commands.
"""

from __future__ import annotations

import os

import click

from .. import api
from ..engines.local import expand_inputs
from ..errors import ParameterError
from ..optimize.cache import cache_dir, cache_files, clear_cache
from ..privacy.session import Session
from .group import cli
from .options import STREAM_FROM_BYTES, check_not_an_input, check_output_path


def streams(input_path: str) -> bool:
    """Whether INPUT is read by the streaming engine: a glob pattern, or a file of at least
    :data:`STREAM_FROM_BYTES` (smaller files are read whole, with the readers of dprange.io)."""
    if not os.path.exists(input_path):
        return any(ch in input_path for ch in "*?[")
    return os.path.isfile(input_path) and os.path.getsize(input_path) >= STREAM_FROM_BYTES


def charge_before_reading(
    session: Session | None, epsilon, delta, input_path: str, engine: str, what: str, mech
) -> Session | None:
    """Charge --session for a release about to read INPUT, once every option has been
    checked: the spend is in the ledger file before the first byte of INPUT is read and stays
    whatever the outcome (a bad row answers a question about the data; docs/privacy.md).
    A local INPUT that names no file is refused first, free (the file system is not the data).
    The ledger is opened again here, so that spends by other processes since this command
    started are counted rather than refused as a change; the charge itself is checked and
    written under the ledger's lock.  Returns the session charged."""
    if session is None:
        return None
    if engine == "local":
        expand_inputs(input_path)
    assert session.path is not None  # --session always names the ledger
    current = Session.open(session.path, session.epsilon, session.delta)
    api.charge_before_reading(current, epsilon, delta, what, repr(mech))
    return current


def session_summary(session: Session, path) -> str:
    """What the session has spent (its ledger was saved when the release was charged)."""
    return (
        f"session {path}: spent {float(session.spent_epsilon):.6g} of epsilon {session.epsilon:g} "
        f"in {len(session.entries)} releases"
    )


def open_session(path, epsilon, delta, files) -> Session | None:
    """The session of --session (resumed, or created with --session-epsilon), checked before
    any data are read; None without --session."""
    if path is None:
        if epsilon is not None:
            raise ParameterError("--session-epsilon needs --session LEDGER.json (the file that records the spends)")
        return None
    check_output_path(path, "--session")
    check_not_an_input(path, [f for f in files if f], "--session")
    return Session.open(path, epsilon, delta)


@cli.group("session")
def session_group():
    """Privacy sessions: one budget spent by several releases (--session on 'dprange release')."""


@session_group.command("init")
@click.argument("ledger", type=click.Path(dir_okay=False))
@click.option("--epsilon", "-e", type=float, required=True, help="The session's whole privacy budget epsilon.")
@click.option("--delta", type=float, default=0.0, show_default=True, help="The session's whole delta.")
def session_init(ledger, epsilon, delta):
    """Start a session of budget EPSILON recorded in LEDGER (a JSON file that must not exist)."""
    check_output_path(ledger, "LEDGER")
    if os.path.exists(ledger):
        raise ParameterError(f"the ledger {ledger!r} exists already; resume it with --session or choose a new file")
    Session(epsilon, delta, path=ledger).save()
    click.echo(f"started a session of epsilon {epsilon:g}, delta {delta:g} in {ledger}")


@session_group.command("show")
@click.argument("ledger", type=click.Path(dir_okay=False))
def session_show(ledger):
    """Print the spends recorded in LEDGER and what is left."""
    session = Session.open(ledger)
    for entry in session.entries:
        click.echo(
            f"{entry.when}  epsilon {entry.epsilon:<12.6g} delta {entry.delta:<8.3g} {entry.kind:<7} {entry.what}"
        )
    click.echo(
        f"spent epsilon {float(session.spent_epsilon):.6g} of {session.epsilon:g} "
        f"(left {session.remaining_epsilon:.6g}), delta {float(session.spent_delta):.3g} of {session.delta:g}"
    )


@cli.group("cache")
def cache_group():
    """The strategy cache: optimised strategies kept on disk for the next release
    ($DPRANGE_CACHE_DIR, else $XDG_CACHE_HOME/dprange or ~/.cache/dprange)."""


def _megabytes(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


@cache_group.command("show")
def cache_show():
    """List the cached strategies, largest first (a dense strategy on 4096 bins and its inverse
    take 256 MiB)."""
    files = cache_files()
    sizes = [path.stat().st_size for path in files]
    click.echo(f"strategy cache {cache_dir()}: {len(files)} files, {_megabytes(sum(sizes))}")
    for path, size in zip(files, sizes):
        click.echo(f"{_megabytes(size):>12}  {path.name}")


@cache_group.command("clear")
def cache_clear():
    """Remove every cached strategy (each is optimised again when next needed); other files in
    the directory are left."""
    removed, freed = clear_cache()
    click.echo(f"removed {removed} files ({_megabytes(freed)}) from the strategy cache {cache_dir()}")

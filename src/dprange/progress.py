"""Progress bars on long work, with tqdm as the optional ``progress`` extra.

A bar is shown only when all of these hold: progress is switched on (:func:`set_progress`,
the environment variable ``DPRANGE_PROGRESS`` is not ``0``, the CLI was not given
``--quiet``), the stream (stderr by default) is a terminal, tqdm is installed, the call site
says the work is large, and the work has already run for :data:`DELAY_SECONDS`.  Otherwise
every helper here is a no-op, so output piped to a file or captured by tests never changes.
Bars go to stderr and are erased when done (``leave=False``): stdout is never touched.

Before long work whose length is known in advance, :func:`announce` writes one line to stderr
saying what is done and about how long it takes (on a terminal or not, unless progress is
switched off), so that a user who waits knows why.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Sized
from contextlib import contextmanager
from typing import IO, Any

#: A bar appears only after the work has run this long (tqdm's ``delay``): short work stays silent.
DELAY_SECONDS = 2.0


#: The least time between two redraws of a bar (tqdm's ``mininterval``).
REFRESH_SECONDS = 0.1


#: The environment variable that switches progress off when set to 0.
ENV_VARIABLE = "DPRANGE_PROGRESS"


_switch = {"on": True}


def set_progress(on: bool) -> bool:
    """Switch progress bars on or off for this process; returns the previous setting."""
    previous = _switch["on"]
    _switch["on"] = bool(on)
    return previous


def _default_stream() -> IO:
    """Where bars go unless a stream is given: the current stderr (looked up at each call)."""
    return sys.stderr


def progress_enabled(stream: IO | None = None) -> bool:
    """Whether a bar may be drawn on ``stream`` (default stderr): switched on, not disabled
    by ``DPRANGE_PROGRESS=0``, and the stream is a terminal."""
    if not progress_switched_on():
        return False
    stream = _default_stream() if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # a closed or detached stream is not a terminal
        return False


def progress_switched_on() -> bool:
    """Whether progress is on (:func:`set_progress`, ``DPRANGE_PROGRESS`` not ``0``, no ``--quiet``)."""
    return _switch["on"] and os.environ.get(ENV_VARIABLE, "").strip() != "0"


def announce(message: str, *, stream: IO | None = None) -> None:
    """Write ``message`` as one line to ``stream`` (default stderr) unless progress is off."""
    if progress_switched_on():
        print(message, file=_default_stream() if stream is None else stream, flush=True)


class _Silent:
    """The bar used when progress is off: accepts updates and does nothing."""

    def update(self, n: float = 1) -> None:
        pass


def _tqdm_class() -> Any:
    try:
        from tqdm import tqdm  # noqa: PLC0415 - optional dependency, imported only when a bar is drawn
    except ImportError:
        return None
    return tqdm


@contextmanager
def progress_bar(
    description: str,
    *,
    total: float | None = None,
    unit: str = "it",
    unit_scale: bool = False,
    large: bool = True,
    stream: IO | None = None,
) -> Iterator[Any]:
    """A bar with ``update(n)`` for work counted in ``unit`` (e.g. rows: shows rows/s;
    ``unit_scale``: 1.20M rather than 1200000); a silent stand-in unless ``large`` and
    :func:`progress_enabled` and tqdm is installed."""
    tqdm = _tqdm_class() if large and progress_enabled(stream) else None
    if tqdm is None:
        yield _Silent()
        return
    bar = tqdm(
        total=total,
        desc=description,
        unit=unit,
        unit_scale=unit_scale,
        leave=False,
        delay=DELAY_SECONDS,
        mininterval=REFRESH_SECONDS,
        file=_default_stream() if stream is None else stream,
        dynamic_ncols=True,
    )
    try:
        yield bar
    finally:
        bar.close()


def tracked(
    items: Iterable,
    description: str,
    *,
    total: float | None = None,
    unit: str = "it",
    large: bool = True,
    stream: IO | None = None,
) -> Iterator:
    """Iterate over ``items`` with a bar counting one per item (see :func:`progress_bar`).
    ``total`` defaults to ``len(items)`` where it has one."""
    if total is None and isinstance(items, Sized):
        total = len(items)
    with progress_bar(description, total=total, unit=unit, large=large, stream=stream) as bar:
        for item in items:
            yield item
            bar.update(1)


def quiet_for_command(quiet: bool) -> None:
    """For a CLI group's ``--quiet``: switch bars off until the current click command ends."""
    if quiet:
        import click  # noqa: PLC0415 - the library itself does not need click here

        previous = set_progress(False)
        click.get_current_context().call_on_close(lambda: set_progress(previous))

"""The ``dprange`` command.

    dprange release data.csv --column income --lo 0 --hi 250000 --bins 1024 --epsilon 1
    dprange quantiles data.csv --column income --lo 0 --hi 250000 --epsilon 1
    dprange demo --output demo-output

Every error caused by the input is one line "dprange: error: ..." on stderr and exit status 2,
without traceback; every option is checked before data are read, and outputs are written
only once everything succeeded (atomically: a failure leaves no output file).

This module imports no command: the group (:mod:`.group`) imports each when it runs, so that
``dprange --help`` stays cheap.
"""

from __future__ import annotations

import os
import sys

import click

from ..errors import DPRangeError
from .group import EXIT_USAGE, cli
from .messages import REDACT_VARIABLE, cli_message, redacting


def main(argv=None):
    """Entry point: run the CLI; every error is one line "dprange: error: ..." on stderr.

    Exit status 0 on success, 2 for any error caused by the input or the options, 1 when
    aborted or on an internal error (a bug: please report it)."""
    saved = os.environ.get(REDACT_VARIABLE)
    try:
        code = _run(argv)
    finally:
        if saved is None:
            os.environ.pop(REDACT_VARIABLE, None)
        else:
            os.environ[REDACT_VARIABLE] = saved
    sys.exit(code)


def _error(message: str, code: int = EXIT_USAGE) -> int:
    click.echo(f"dprange: error: {cli_message(message)}", err=True)
    return code


def _run(argv) -> int:
    try:
        result = cli.main(args=argv, prog_name="dprange", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help())
        return _error(f"no command given; choose one of the commands above ('{exc.ctx.command_path} --help')")
    except click.exceptions.Abort:
        click.echo("dprange: aborted", err=True)
        return 1
    except click.ClickException as exc:
        return _error(exc.format_message(), EXIT_USAGE)
    except DPRangeError as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))
    except UnicodeDecodeError as exc:  # an input file in another encoding, or binary
        return _error(
            f"an input file is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8 CSV or use Parquet"
        )
    except MemoryError:
        return _error("not enough memory for this request; use fewer bins or a smaller input")
    except Exception as exc:  # noqa: BLE001 - a bug: one line, no traceback, no private values when redacting
        detail = type(exc).__name__ if redacting() else f"{type(exc).__name__}: {exc}"
        return _error(f"internal error ({detail}); please report it with the command you ran", 1)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    main()

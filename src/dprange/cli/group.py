"""The ``dprange`` command group; each command is imported only when it runs or shows its help.

``dprange --help`` imports neither numpy nor a command module (only click, the lazy package, errors and
progress; ``benchmarks/cli_startup.py`` measures it): the group lists the commands of
:data:`COMMANDS` with their one-line summaries from that table, and imports a command's module
when the command is invoked or asked for its help.  A new command module is one line in
:data:`COMMANDS`; the module defines its command with ``@click.command`` (or
``@cli.command``, which also adds it to the group when the module is imported).  An entry whose
module is not installed is left out of the group (found without importing it), so a line may
name a module that another branch adds.
"""

from __future__ import annotations

import importlib
import importlib.util

import click

from ..progress import quiet_for_command

EXIT_USAGE = 2


#: Each command: "module:attribute" of its click command, and the summary ``dprange --help``
#: lists (the first sentence of the command's help; tests/cli/test_group.py checks them).
COMMANDS: dict[str, tuple[str, str]] = {
    "cache": (
        "dprange.cli.session:cache_group",
        "The strategy cache: optimised strategies kept on disk for the next release ($DPRANGE_CACHE_DIR, "
        "else $XDG_CACHE_HOME/dprange or ~/.cache/dprange).",
    ),
    "demo": (
        "dprange.cli.demo:demo_command",
        "Release the built-in example data (synthetic incomes) and show what dprange produces.",
    ),
    "error": (
        "dprange.cli.error:error_command",
        "Exact expected error of mechanisms before touching any data, and the recommended one.",
    ),
    "ldp": ("dprange.cli.ldp:ldp", "Local differential privacy: users randomise their own values (Cormode et al."),
    "quantiles": (
        "dprange.cli.quantiles:quantiles_command",
        "Private quantiles of one column of a CSV or Parquet file, from the raw values.",
    ),
    "release": (
        "dprange.cli.release:release_command",
        "Release a private histogram of one column (or several) of a CSV or Parquet file.",
    ),
    "session": (
        "dprange.cli.session:session_group",
        "Privacy sessions: one budget spent by several releases (--session on 'dprange release').",
    ),
    # Saved releases: the report page, the summary and the queries.
    "report": ("dprange.cli.report:report_command", "Write a saved release as one self-contained HTML page."),
    "show": (
        "dprange.cli.show:show_command",
        "Summarise a saved release (1-D or k-D): input, mechanism, privacy, total and deciles.",
    ),
    "query": (
        "dprange.cli.show:query_command",
        "Answer range counts, quantiles and CDF values from a saved release, with intervals.",
    ),
}


class LazyGroup(click.Group):
    """A click group whose commands are named in a table of "module:attribute" and imported on
    first use; its help lists them from the table's summaries without importing them."""

    def __init__(self, *args, lazy_commands: dict[str, tuple[str, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy_commands = {name: entry for name, entry in lazy_commands.items() if _installed(entry[0])}
        self.commands = _Commands(self.commands, self._load)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        try:
            return self.commands[cmd_name]
        except KeyError:
            return None

    def _load(self, name: str) -> click.Command:
        """The command ``name`` of the table, imported (KeyError for a name not in it)."""
        module, attribute = self.lazy_commands[name][0].split(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module}:{attribute} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their summaries (as click's Group, without importing the lazy ones)."""
        names = [n for n in self.list_commands(ctx) if n in self.lazy_commands or not self.commands[n].hidden]
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, self._summary(name, limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def _summary(self, name: str, limit: int) -> str:
        if name in self.lazy_commands:
            return click.Command(name, help=self.lazy_commands[name][1]).get_short_help_str(limit)
        return self.commands[name].get_short_help_str(limit)


def _installed(target: str) -> bool:
    """Whether the module of a "module:attribute" entry exists (looked up, not imported)."""
    return importlib.util.find_spec(target.split(":")[0]) is not None


class _Commands(dict[str, click.Command]):
    """A group's commands by name (click's ``Group.commands``): a name of the lazy table is
    imported when first looked up, so ``cli.commands["release"]`` works as with eager imports."""

    def __init__(self, commands, load):
        super().__init__(commands)
        self._load = load

    def __missing__(self, name: str) -> click.Command:
        self[name] = command = self._load(name)
        return command


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dprange")
@click.option("--quiet", is_flag=True, help="No progress bars (they appear only on a terminal, for long work).")
def cli(quiet):
    """dprange: differentially private histograms, range queries, CDFs and quantiles.

    Bounds and bins are public and must not be read from the data. Every answer comes with
    an exact standard error. Run 'dprange COMMAND --help' for each command's options.
    """
    quiet_for_command(quiet)

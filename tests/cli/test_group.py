"""dprange.cli.group: the lazy command table.  ``dprange --help`` lists every command without
importing one (nor numpy or scipy), each table entry is the command it names, and its summary
is the command's own first sentence."""

import importlib.util
import subprocess
import sys

import click
import pytest
from _helpers import run_cli

from dprange.cli.group import COMMANDS, cli

#: Imports ``dprange --help`` must not make: the library's numerical stack and the command modules.
HEAVY = ("numpy", "scipy", "dprange.registry", "dprange.cli.release", "dprange.cli.options")


def _modules_after(argv: list[str]) -> set[str]:
    """The modules loaded by a fresh interpreter that runs ``dprange ARGV``."""
    script = (
        "import sys\n"
        "from dprange.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('MODULES', ' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    line = next(line for line in result.stderr.splitlines() if line.startswith("MODULES "))
    return set(line.split()[1:])


def test_top_level_help_imports_no_command_nor_numpy():
    loaded = _modules_after(["--help"])
    assert not [name for name in HEAVY if name in loaded]


def test_a_command_is_imported_when_it_runs():
    loaded = _modules_after(["release", "--help"])
    assert "dprange.cli.release" in loaded and "dprange.cli.demo" not in loaded


def test_help_lists_every_command_of_the_table(capsys):
    code, out, _ = run_cli(["--help"], capsys)
    listed = out.split("Commands:")[1].split()
    assert code == 0 and set(cli.lazy_commands) <= set(listed) and {"release", "demo", "ldp"} <= set(listed)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_table_entry_is_the_command_with_its_summary(name):
    """Each command of an installed module is the command its entry names, and the summary
    ``dprange --help`` shows from the table is the one the command's own help gives."""
    if importlib.util.find_spec(COMMANDS[name][0].split(":")[0]) is None:
        assert cli.get_command(click.Context(cli), name) is None  # a command of another branch
        return
    command = cli.get_command(click.Context(cli), name)
    assert isinstance(command, click.Command) and command.name == name
    from_table = click.Command(name, help=COMMANDS[name][1]).get_short_help_str(60)
    assert from_table == command.get_short_help_str(60)


def test_unknown_command_is_a_usage_error(capsys):
    code, out, err = run_cli(["bogus"], capsys)
    assert code == 2 and out == "" and "No such command 'bogus'" in err

"""The ``dprange`` command group, to which every command module adds its commands."""

from __future__ import annotations

import click

from ..progress import quiet_for_command

EXIT_USAGE = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dprange")
@click.option("--quiet", is_flag=True, help="No progress bars (they appear only on a terminal, for long work).")
def cli(quiet):
    """dprange: differentially private histograms, range queries, CDFs and quantiles.

    Bounds and bins are public and must not be read from the data. Every answer comes with
    an exact standard error. Run 'dprange COMMAND --help' for each command's options.
    """
    quiet_for_command(quiet)

"""``dprange report``: a saved release (1-D or grid) as one self-contained HTML page
(:mod:`dprange.answers.report`); ``dprange release --report`` writes the same page beside the
release.  Post-processing only: no budget is spent and no data are read.
"""

from __future__ import annotations

import os

import click

from ..answers.report import is_grid, report_html
from ..errors import ParameterError
from .group import cli
from .options import StagedOutputs, check_alpha, check_not_an_input, check_output_path
from .saved_release import read_release

REPORT_SUFFIXES = (".html", ".htm")


def check_report_path(path: str | None, option: str = "--report") -> str | None:
    """A report must name a .html file, and matplotlib must be installed (checked before any work)."""
    if path is None:
        return None
    check_output_path(path, option)
    if not str(path).lower().endswith(REPORT_SUFFIXES):
        raise ParameterError(f"{option} {path!r} must end in .html (the report is one HTML page)")
    try:
        import matplotlib  # noqa: F401, PLC0415 - optional dependency: only whether it is installed
    except ImportError:
        raise ParameterError(f"{option} needs matplotlib for its figures: pip install 'dprange[plot]'") from None
    return path


def check_report_option(report: str | None, inputs, outputs) -> None:
    """--report of ``dprange release``: a .html path that is neither an input nor another output."""
    if report is None:
        return
    check_report_path(report)
    check_not_an_input(report, inputs, "--report")
    for other in outputs:
        if other and os.path.abspath(other) == os.path.abspath(report):
            raise ParameterError("--report names the same file as another output; give different paths")


def report_bytes(release, *, column=None, units=None, alpha=0.05, log_x=False, title=None, source=None) -> bytes:
    """The report page of ``release`` as UTF-8 bytes (rendered in memory: nothing is written yet)."""
    page = report_html(release, column=column, units=units, alpha=alpha, log_x=log_x, title=title, source=source)
    return page.encode("utf-8")


@cli.command("report")
@click.argument("release_path", metavar="RELEASE", type=click.Path(dir_okay=False))
@click.option("--output", "-o", default="report.html", show_default=True, help="Where to write the HTML page (.html).")
@click.option(
    "--column",
    "-c",
    multiple=True,
    help="Name of the released column for titles and axes (repeat it for a grid release); default: what "
    "the release records, else 'value'.",
)
@click.option("--units", default=None, help="Units of a one-column release's values, on its axes (e.g. years, USD).")
@click.option("--title", default=None, help="Heading of the page (default: 'Private release of COLUMN').")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="1 - the level of every interval and band.")
@click.option("--log-x", is_flag=True, help="Logarithmic value axes (symmetric-log when the domain starts at 0).")
def report_command(release_path, output, column, units, title, alpha, log_x):
    """Write a saved release as one self-contained HTML page.

    The page holds the privacy statement in words, a summary, the quantiles with their
    intervals, the CDF with its confidence band and the histogram with error bars (a grid
    release: the heatmap of its cells).  It needs no network to view: the figures are inline.
    No budget is spent: the page is drawn from the release alone."""
    check_alpha(alpha)
    check_report_path(output, "--output")
    check_not_an_input(output, [release_path])
    release = read_release(release_path)
    axes = len(release.shape) if is_grid(release) else 1
    if column and len(column) != axes:
        raise ParameterError(
            f"--column given {len(column)} times; this release has {axes} column(s): give one per column"
        )
    names = (list(column) if axes > 1 else column[0]) if column else None
    page = report_bytes(
        release, column=names, units=units, alpha=alpha, log_x=log_x, title=title, source=os.path.basename(release_path)
    )
    staged = StagedOutputs()
    staged.add(output, page)
    staged.commit()
    click.echo(f"wrote {output}")


def written(paths) -> str:
    """The outputs a command wrote, for its last line: "a.json", "a.json and b.png", "a, b and c"."""
    given = [str(p) for p in paths if p]
    return given[0] if len(given) == 1 else f"{', '.join(given[:-1])} and {given[-1]}"

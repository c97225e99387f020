"""``dprange demo``: release the built-in example incomes and show what a release gives."""

from __future__ import annotations

import os
from importlib import resources

import click

from .. import api
from .._validation import check_epsilon
from ..answers.release import Release
from ..domain import Domain
from ..errors import DPRangeError
from ..io import read_column
from .group import cli
from .options import check_output_folder, check_seed
from .parse import check_privacy
from .render import format_deciles, stage_outputs


def example_path() -> str:
    """Path of the example dataset shipped inside the package."""
    return str(resources.files("dprange") / "data" / "example_incomes.csv")


@cli.command("demo")
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False),
    default="demo-output",
    show_default=True,
    help="Folder for the demo's outputs.",
)
@click.option("--epsilon", "-e", type=float, default=1.0, show_default=True, help="Privacy budget.")
@click.option("--seed", type=int, default=None, help="Seed the noise (reproducible demo); default: OS entropy.")
def demo_command(output, epsilon, seed):
    """Release the built-in example data (synthetic incomes) and show what dprange produces.

    The demo shows quantiles, so it declares the prefix (CDF) workload and lets 'auto' pick
    the mechanism with the least exact error on it.
    """
    check_output_folder(output)
    check_epsilon(epsilon)
    check_seed(seed)
    path = example_path()
    domain = Domain.interval(0, 250_000, 1024)
    mech = api.choose_mechanism("auto", domain.size, epsilon, workload="prefix")
    check_privacy(mech, domain.size, epsilon, 0.0)
    values = read_column(path, "income")
    released = api.release(values, domain, epsilon, mechanism=mech, rng=seed)
    assert isinstance(released, Release)  # one column, no group-by
    result = released.with_labels("income", None, path)
    json_path = os.path.join(output, "release.json")
    png_path: str | None = os.path.join(output, "cdf.png")
    try:
        staged = stage_outputs(result, json_path, png_path, 0.05, column="income", cdf=True)
    except DPRangeError:  # no matplotlib: the JSON alone
        staged = stage_outputs(result, json_path, None, 0.05, cdf=True)
        png_path = None
    text = format_deciles(result, 0.05)
    staged.commit()
    click.echo(f"example data: {path} ({values.size} records, column 'income')")
    click.echo(f"mechanism (auto, prefix workload): {mech!r}, epsilon={epsilon:g}, domain {domain!r}")
    click.echo(text)
    click.echo(f"outputs: {os.path.abspath(json_path)}" + (f", {os.path.abspath(png_path)}" if png_path else ""))

"""``dprange quantiles``: quantiles of a column of raw values, with their intervals."""

from __future__ import annotations

import json

import click

from .. import api
from .._validation import NEIGHBOURS, check_epsilon
from ..errors import ParameterError
from ..io import read_column
from ..quantile_mechanisms.bins import COUNT_SHARE
from ..registry import QUANTILE_METHODS
from .group import cli
from .options import RegistryChoice, RegistryHelpOption, check_alpha, check_seed


@cli.command("quantiles")
@click.argument("input_path", metavar="INPUT", type=click.Path(dir_okay=False))
@click.option("--column", "-c", required=True, help="Name of the numeric column.")
@click.option(
    "--q",
    "levels",
    default="0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9",
    show_default=True,
    help="Comma-separated levels in (0, 1), increasing.",
)
@click.option("--epsilon", "-e", type=float, required=True, help="Privacy budget epsilon (> 0), bounds included.")
@click.option("--lo", type=float, default=None, help="Public lower bound (with --hi; omit both for --private-bounds).")
@click.option("--hi", type=float, default=None, help="Public upper bound.")
@click.option("--private-bounds", is_flag=True, help="Find the bounds privately, spending --bounds-share of epsilon.")
@click.option(
    "--bounds-share", type=float, default=0.1, show_default=True, help="Share of epsilon spent on --private-bounds."
)
@click.option("--integers", is_flag=True, help="The values are integers (integer bounds and outputs).")
@click.option(
    "--method",
    type=RegistryChoice(lambda: ("auto", *QUANTILE_METHODS.names())),
    default="auto",
    show_default=True,
    cls=RegistryHelpOption,
    help_text=lambda: (
        "auto (chosen from public facts: docs/quantiles.md) or one of: "
        + "; ".join(f"{name}: {QUANTILE_METHODS[name].summary}" for name in QUANTILE_METHODS)
    ),
)
@click.option(
    "--neighbours",
    type=click.Choice(NEIGHBOURS),
    default="add_remove",
    show_default=True,
    help="Neighbouring relation (replace: the number of records is public).",
)
@click.option("--seed", type=int, default=None, help="Seed the noise (reproducible, not private); default: OS entropy.")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Intervals at level 1 - alpha.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--n-max",
    "n_max",
    type=int,
    default=None,
    help="Public upper bound on the number of records (JointExp needs it under add_remove; "
    "the histogram route's bins and auto use it as the record count).",
)
@click.option(
    "--count-share",
    type=float,
    default=COUNT_SHARE,
    show_default=True,
    help="Share of epsilon spent on a noisy record count when the histogram route's bins or auto need n "
    "(add_remove without --n-max); 0 spends none.",
)
def quantiles_command(
    input_path,
    column,
    levels,
    epsilon,
    lo,
    hi,
    private_bounds,
    bounds_share,
    integers,
    method,
    neighbours,
    seed,
    alpha,
    as_json,
    n_max,
    count_share,
):
    """Private quantiles of one column of a CSV or Parquet file, from the raw values.

    Prints each level's estimate, with its confidence interval when the method has honest
    ones (the histogram route), the method used and what the bounds cost.
    """
    check_alpha(alpha)
    check_epsilon(epsilon)
    check_seed(seed)
    try:
        q = [float(part) for part in levels.split(",") if part.strip()]
    except ValueError:
        raise ParameterError(f"--q must be comma-separated numbers in (0, 1), got {levels!r}") from None
    if private_bounds:
        if lo is not None or hi is not None:
            raise ParameterError("give either --lo and --hi (public bounds) or --private-bounds, not both")
        bounds: object = "private"
    elif lo is None or hi is None:
        raise ParameterError("quantiles needs --lo and --hi (public bounds) or --private-bounds")
    else:
        bounds = (lo, hi)
    values = read_column(input_path, column)
    result = api.quantiles(
        values,
        q,
        epsilon,
        bounds=bounds,
        method=method,
        rng=seed,
        bounds_share=bounds_share,
        neighbours=neighbours,
        integer=integers,
        n_max=n_max,
        count_share=count_share,
    )
    if as_json:
        click.echo(json.dumps(result.to_dict(alpha)))
        return
    click.echo(
        f"{result.method} quantiles of {column!r}: epsilon={epsilon:g} (bounds {result.bounds_source} "
        f"[{result.bounds[0]:g}, {result.bounds[1]:g}], epsilon {result.bounds_epsilon:g}), neighbours={neighbours}"
    )
    if result.reason:
        click.echo(f"auto: {result.reason}")
    if result.count is not None and result.count.epsilon > 0:
        click.echo(f"record count (noisy, epsilon {result.count.epsilon:g}): {result.count.value}")
    if result.bins is not None:
        click.echo(f"histogram bins: {result.bins}")
    if result.float_error is not None:  # JointExp: what its float error cost
        fe = result.float_error
        click.echo(
            f"float error: {fe.precision} precision, ran at epsilon {fe.run_epsilon:.10g} (charge {fe.charge:.3g})"
        )
    if result.grid is not None:  # JointExp: the public grid its values lie on
        grid = result.grid.to_dict()
        click.echo(f"output grid: {grid['cells']} cells of [{grid['lower']:g}, {grid['upper']:g}], {grid['values']}")
    if result.has_intervals:
        lower, upper = result.confidence_interval(alpha)
        for level, value, a, b in zip(result.q, result.values, lower, upper, strict=True):
            click.echo(f"  q={level:g}: {value:.6g}  [{a:.6g}, {b:.6g}]")
        click.echo(f"intervals: pointwise at level {1 - alpha:g}; ends are bin edges, valid whatever the data in a bin")
    else:
        for level, value in zip(result.q, result.values, strict=True):
            click.echo(f"  q={level:g}: {value:.6g}")
        click.echo(f"{result.method} has no honest confidence intervals; use --method histogram for intervals")

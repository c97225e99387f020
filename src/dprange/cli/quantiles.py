"""``dprange quantiles``: quantiles of a column of raw values, with their intervals."""

from __future__ import annotations

import json

import click
import numpy as np

from .. import api
from .._validation import NEIGHBOURS, check_epsilon
from ..answers.describe import Labels
from ..answers.writers import jsonable
from ..engines.local import expand_inputs
from ..errors import DPRangeError, ParameterError
from ..io import read_column
from ..quantile_mechanisms.bins import COUNT_SHARE
from ..registry import QUANTILE_METHODS
from .group import cli
from .options import (
    RegistryChoice,
    RegistryHelpOption,
    StagedOutputs,
    check_alpha,
    check_not_an_input,
    check_output_path,
    check_seed,
    session_options,
    with_options,
)
from .render import placement_notes, point_text
from .session import open_session, session_summary


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
    default="histogram",
    show_default=True,
    cls=RegistryHelpOption,
    help_text=lambda: (
        "histogram (the default: the one with confidence intervals), auto (the most accurate for the number of "
        "levels, chosen from public facts: docs/quantiles.md; it may have no intervals) or one of: "
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
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the result as JSON (self-describing: its schema is docs/release.schema.json).",
)
@click.option("--units", default=None, help="Units of the values (e.g. USD): saved in the --output JSON.")
@with_options(session_options)
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
    output,
    units,
    session_path,
    session_epsilon,
    session_delta,
    n_max,
    count_share,
):
    """Private quantiles of one column of a CSV or Parquet file, from the raw values.

    Prints each level's confidence interval and estimate (the default method, histogram, has
    honest intervals; --method auto may pick a more accurate one without), the method used in
    plain words and what the bounds cost.  With --session, the release spends from a ledger
    that names the column and the file; with --output, the result is saved as JSON.
    """
    check_alpha(alpha)
    check_epsilon(epsilon)
    check_seed(seed)
    labels = Labels.of(column, units, input_path)
    if output is not None:
        check_output_path(output)
        check_not_an_input(output, [input_path])
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
    session = open_session(session_path, session_epsilon, session_delta, [input_path, *([output] if output else [])])
    if session is not None:
        expand_inputs(input_path)  # a path that names no file is refused first, free
    values = ColumnOnUse(input_path, column)  # read by dprange.quantiles after the session is charged
    try:
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
            session=session,
            label=f"column {column!r} of {input_path!r}",
        )
    except ColumnUnreadable as exc:
        raise exc.error from None
    explanation = plain_explanation(result)
    staged = StagedOutputs()
    if output is not None:
        document = result.to_document(alpha, labels=labels, explanation=explanation)
        staged.add(output, json.dumps(jsonable(document), indent=1, allow_nan=False))
    staged.commit()
    if as_json:
        click.echo(json.dumps(result.to_dict(alpha)))
        return
    click.echo(
        f"{result.method} quantiles of {column!r}: epsilon={epsilon:g} (bounds {result.bounds_source} "
        f"[{result.bounds[0]:g}, {result.bounds[1]:g}], epsilon {result.bounds_epsilon:g}), neighbours={neighbours}"
    )
    click.echo(explanation)
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
        answer = result.release.quantile(result.q)  # type: ignore[attr-defined]
        for i, (level, a, b) in enumerate(zip(result.q, lower, upper, strict=True)):
            click.echo(f"  q={level:g}: [{a:.6g}, {b:.6g}]  {point_text(answer, i)}")
        click.echo(f"intervals: pointwise at level {1 - alpha:g}; ends are bin edges, valid whatever the data in a bin")
        click.echo("\n".join(placement_notes(answer)))
    else:
        for level, value in zip(result.q, result.values, strict=True):
            click.echo(f"  q={level:g}: {value:.6g}")
        click.echo(f"{result.method} has no honest confidence intervals; use --method histogram for intervals")
    if session is not None:
        click.echo(session_summary(session, session_path))
    if output is not None:
        click.echo(f"wrote {output}")


class ColumnOnUse:
    """COLUMN of INPUT, read when the quantiles first use the values: after --session was
    charged (a call that reads data is charged whatever its outcome)."""

    def __init__(self, path: str, column: str):
        self.path, self.column = path, column

    def __array__(self, dtype=None, copy=None):
        try:
            return np.asarray(read_column(self.path, self.column), dtype=dtype)
        except DPRangeError as exc:  # carried past numpy's conversion, which would turn it into another error
            raise ColumnUnreadable(exc) from None


class ColumnUnreadable(Exception):
    """Reading the column failed (``error``: the one-line DPRangeError to report)."""

    def __init__(self, error: DPRangeError):
        super().__init__(str(error))
        self.error = error


#: What each method does, in plain words (``dprange quantiles`` prints the one used).
PLAIN_METHODS = {
    "histogram": "counts the values in public bins, adds noise to the counts, and reads each quantile off the "
    "running total; its intervals come from the known size of that noise",
    "joint_exp": "picks all the quantiles together at random, favouring values that split the data in the "
    "right proportions; accurate for a few quantiles, but it gives no intervals",
    "approximate": "finds the quantiles by splitting the range again and again at a private middle value; "
    "it gives no intervals",
}


def plain_explanation(result) -> str:
    """One sentence on the method used and, for auto, why it was chosen, without jargon."""
    what = PLAIN_METHODS.get(result.method, QUANTILE_METHODS[result.method].summary)
    if not result.reason:
        return f"method: {result.method}, which {what}."
    return (
        f"method: {result.method} (chosen by auto as the most accurate for {result.q.size} levels at this budget, "
        f"by the measurements in docs/quantiles.md), which {what}."
    )

"""``dprange release``: one column (a histogram, CDF and quantiles) or several (a k-D histogram),
from CSV or Parquet, local or Spark, charged to a session before INPUT is read.
"""

from __future__ import annotations

import functools
import os
import re

import click

from .. import api
from .._validation import check_delta, check_epsilon
from ..analysis.grid import check_answers_workload
from ..answers.describe import Labels
from ..answers.plot import plot_heatmap
from ..answers.release import Release
from ..api.common import release_workload
from ..engines.spark import files_frame
from ..errors import DataError, DomainError, ParameterError
from ..io import CATEGORIES_HINT, read_column, read_text_column
from ..registry import GRID_MECHANISMS, GRID_WORKLOADS, MECHANISMS, WORKLOADS
from .group import cli
from .options import (
    StagedOutputs,
    check_alpha,
    check_not_an_input,
    check_output_path,
    check_plot_path,
    check_ranges_option,
    check_seed,
    mechanism_options,
    ranges_option,
    redact_option,
    session_options,
    with_options,
)
from .parse import (
    build_domain,
    build_product_domain,
    check_neighbours_and_missing,
    check_no_bounds,
    chosen_mechanism,
    grid_mechanism_params,
    grid_workload,
    mechanism_given,
    one_per_column,
    parse_categories,
    ranges_file,
    read_grid_columns,
    rectangles_file,
)
from .render import (
    axis_strategy_notes,
    check_made_for_workload,
    format_categories,
    format_deciles,
    format_grid_table,
    stage_outputs,
    strategy_note,
    workload_label,
)
from .report import check_report_option, report_bytes, written
from .session import charge_before_reading, open_session, session_summary, streams
from .units import unit_options, unit_release_command, wants_units


def grid_release_command(options: dict) -> None:
    """``dprange release`` with several --column: the k-D histogram as a GridRelease JSON."""
    o = options
    columns = o["column"]
    labels = Labels.of(list(columns), o["units"] or None, o["input_path"])  # checked before the data are read
    check_alpha(o["alpha"])
    check_output_path(o["output"])
    check_plot_path(o["plot"])
    inputs = [o["input_path"], *([o["ranges"]] if o["ranges"] else [])]
    check_not_an_input(o["output"], inputs)
    check_not_an_input(o["plot"], inputs, "--plot")
    if o["plot"] and os.path.abspath(o["plot"]) == os.path.abspath(o["output"]):
        raise ParameterError("--plot and --output name the same file; give two different paths")
    if o["plot"] and len(columns) != 2:
        raise ParameterError(f"--plot draws a heatmap of two columns; this release has {len(columns)}")
    check_report_option(o["report"], inputs, [o["output"], o["plot"]])
    check_neighbours_and_missing(o["neighbours"], o["drop_missing"])
    epsilon, delta = check_epsilon(o["epsilon"]), check_delta(o["delta"])
    session = open_session(
        o["session_path"],
        o["session_epsilon"],
        o["session_delta"],
        [o["input_path"], o["output"], o["plot"], o["report"]],
    )
    if session is not None:
        epsilon, delta = session.allot(epsilon, delta)
    if o["inference"] != "gls":
        raise ParameterError("several --column are released with exact least squares only; use --inference gls")
    mechanism = o["mechanism"]
    if mechanism in MECHANISMS and mechanism not in GRID_MECHANISMS:  # auto-data is both: one per dimension
        raise ParameterError(
            f"--mechanism {mechanism} releases one column; with several use "
            f"{', '.join(GRID_MECHANISMS.names(nameable=True))} or auto"
        )
    categories = o["categories"]
    domain = build_product_domain(columns, o["lo"], o["hi"], o["bins"], o["integers"], categories)
    if o["ranges"] is None:
        default = click.get_current_context().get_parameter_source("workload") == click.core.ParameterSource.DEFAULT
        # categorical axes: the marginals unless asked otherwise; prefix workloads refused
        workload = release_workload(domain, None if categories and default else grid_workload(o["workload"]), o["clip"])
    else:
        workload = rectangles_file(o["ranges"], columns, domain.shape)
    given = {name: value for name, value in o["mechanism_params"].items() if value is not None}
    params = grid_mechanism_params(mechanism, given, explicit=mechanism_given())
    if mechanism in GRID_MECHANISMS:
        check_made_for_workload("--mechanism", mechanism, workload)
        entry = GRID_MECHANISMS[mechanism]  # built as the library builds it, to word a refusal in options
        named = entry.build(
            neighbours=o["neighbours"], noise=o["noise"], **{**entry.declared(workload=workload), **params}
        )
        check_answers_workload(named, domain.shape, workload, epsilon, delta=delta, option="--mechanism")
    mech = api.choose_grid_mechanism(
        mechanism,
        domain.shape,
        epsilon,
        delta=delta,
        neighbours=o["neighbours"],
        workload=workload,
        noise=o["noise"],
        **params,
    )
    mech.plan(domain.shape, epsilon)
    check_seed(o["seed"])
    what = api.files_ledger_what(o["input_path"], list(columns), domain)
    session = charge_before_reading(session, epsilon, delta, o["input_path"], o["engine"], what, mech)
    if o["engine"] == "spark":
        values = files_frame(
            o["input_path"], list(columns), o["spark_master"], domain=domain, drop_missing=o["drop_missing"]
        )
    else:
        values = read_grid_columns(o["input_path"], columns, set(categories))
    try:
        result = api.release_grid(
            values,
            domain,
            epsilon,
            mechanism=mech,
            delta=delta,
            rng=o["seed"],
            clip=o["clip"],
            drop_missing=o["drop_missing"],
        )
    except DomainError as exc:  # the library numbers the axes; the user named the columns
        axis = re.match(r"axis (\d+): ", str(exc))
        if axis is None:
            raise
        raise DomainError(f"--column {columns[int(axis.group(1))]}: {str(exc)[axis.end() :]}") from None
    result = result.with_labels(list(columns), labels.units or None, labels.source)
    staged = StagedOutputs()
    staged.add(o["output"], result.to_json())
    if o["plot"]:
        import io  # noqa: PLC0415

        buffer = io.BytesIO()
        plot_heatmap(result, buffer, labels=(columns[0], columns[1]))
        staged.add(o["plot"], buffer.getvalue())
    if o["report"]:
        staged.add(o["report"], report_bytes(result, column=list(columns), alpha=o["alpha"]))
    lines = []
    if mechanism == "auto":
        lines.append(f"auto: chose {mech!r} for the {workload_label(workload, o['ranges'])}")
    shape = "x".join(str(n) for n in domain.shape)
    lines.append(
        f"{result.mechanism} release of {' x '.join(repr(c) for c in columns)}: {shape} cells, "
        f"epsilon={epsilon:g}, delta={delta:g}, neighbours={o['neighbours']}"
    )
    described = result.parameters.get("strategy")
    if not (isinstance(described, dict) and "axes" in described):
        described = None  # a data-aware release's strategy is its inner 1-D mechanism's, not per axis
    if described and described.get("measured") == "identity":
        lines.append(
            "measured the identity on every axis (one count per cell): its exact error as released is lower "
            "than that of the product of the optimised axes"
        )
    if described:  # each axis' optimised 1-D strategy as the release records it: time and cache
        lines.extend(axis_strategy_notes(columns, described["axes"]))
    total = result.rectangle([0] * len(columns), [n - 1 for n in domain.shape])
    if not getattr(result, "exact_error_bars", True):  # data-aware (dprange.data_aware.grid)
        lines.append(f"total: {total.value:.1f} (no error bars: the estimate has a data-dependent bias)")
    elif result.measurements.total is not None:
        lines.append(f"total (public): {result.measurements.total:.0f}")
    else:
        low, high = total.confidence_interval(o["alpha"])
        lines.append(
            f"total: {total.value:.1f} ± {total.stderr:.1f} (1 s.e.); {100 * (1 - o['alpha']):g}% interval "
            f"[{low:.1f}, {high:.1f}]"
        )
    if categories:
        lines.extend(format_grid_table(result, columns, o["alpha"]))
    if getattr(result, "exact_error_bars", True):
        lines.append("rectangles, marginals and dominance counts: dprange.load_grid_release(path)")
    if session is not None:
        lines.append(session_summary(session, o["session_path"]))
    staged.commit()
    click.echo("\n".join(lines))
    click.echo(f"wrote {written([o['output'], o['plot'], o['report']])}")


def by_column(by: str | None, columns) -> list[str]:
    """The --by column where --categories may name it (its categories are then the keys)."""
    return [by] if by is not None and by not in columns else []


def with_categories_hint(command):
    """The command, its "not numeric" errors naming the option that declares categories."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except DataError as exc:
            if CATEGORIES_HINT not in str(exc):
                raise
            raise DataError(f"{exc} (--categories COL=a,b,c)") from None

    return run


@cli.command("release")
@click.argument("input_path", metavar="INPUT", type=click.Path(dir_okay=False))
@click.option(
    "--column",
    "-c",
    required=True,
    multiple=True,
    help="Name of the numeric column to release; repeat it for a k-D release (one --lo/--hi/--bins per column).",
)
@click.option("--lo", type=float, multiple=True, help="Public lower bound of the values (one per --column).")
@click.option("--hi", type=float, multiple=True, help="Public upper bound of the values (one per --column).")
@click.option("--bins", type=int, multiple=True, help="Number of equal bins over [lo, hi] (one per --column).")
@click.option("--integers", is_flag=True, help="One bin per integer lo..hi instead of --bins (every column).")
@click.option(
    "--categories",
    multiple=True,
    metavar="COL=a,b,c",
    help="Column COL is categorical: one bin per public category, in this order (repeat per column; no "
    "--lo/--hi/--bins for it).  The list must come from public knowledge (a code book), never from INPUT.  "
    "COL may be the --by column: its categories are then the public group keys (as --groups).",
)
@click.option(
    "--categories-file",
    multiple=True,
    metavar="COL=PATH",
    help="Like --categories, the categories read from a UTF-8 file, one per line (for labels with commas).",
)
@click.option(
    "--other",
    is_flag=True,
    help="Count values outside the --categories lists in a last 'other' bin instead of failing on them.",
)
@click.option(
    "--units",
    multiple=True,
    help="Units of the values (one per --column, e.g. USD): saved in the release JSON and shown on tables.",
)
@click.option("--clip", is_flag=True, help="Clip values outside [lo, hi] to the bounds instead of failing.")
@click.option(
    "--drop-missing", is_flag=True, help="Drop empty/NaN cells instead of failing (the count dropped is not released)."
)
@with_options(mechanism_options)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    default="release.json",
    show_default=True,
    help="Where to write the release as JSON.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also save a PNG of the CDF with its confidence band (two columns: a heatmap of the cell counts).",
)
@click.option(
    "--report",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also save the release as one self-contained HTML page (privacy statement, quantiles, CDF, histogram; "
    "two columns: the heatmap).  The same page as 'dprange report'.",
)
@click.option("--log-x", is_flag=True, help="Logarithmic value axis in --plot and --report (symmetric-log from 0).")
@with_options(session_options)
@ranges_option(
    "Instead of --workload: a CSV (or Parquet) file of the ranges to optimise for, one per row, as bin "
    "indices (0-based, inclusive): columns lo and hi for one --column; <column>_lo and <column>_hi for each "
    "of several (rectangles).  No privacy cost: the data are not read for them."
)
@click.option(
    "--engine",
    type=click.Choice(["local", "spark"]),
    default="local",
    show_default=True,
    help="Who counts the values: this process (streaming large inputs), or Spark (pip install 'dprange[spark]').",
)
@click.option(
    "--spark-master",
    default=None,
    help="Spark master URL for --engine spark (spark://host:7077, yarn, local[4]); default local[*].",
)
@with_options(unit_options)
@redact_option
@with_categories_hint
def release_command(
    input_path,
    column,
    lo,
    hi,
    bins,
    integers,
    categories,
    categories_file,
    other,
    units,
    clip,
    drop_missing,
    epsilon,
    delta,
    mechanism,
    workload,
    neighbours,
    noise,
    inference,
    seed,
    alpha,
    output,
    plot,
    report,
    log_x,
    session_path,
    session_epsilon,
    session_delta,
    ranges,
    engine,
    spark_master,
    privacy_id,
    max_rows_per_id,
    by,
    groups,
    groups_file,
    max_groups_per_id,
    key_share,
    **mechanism_params,
):
    """Release a private histogram of one column (or several) of a CSV or Parquet file.

    One row must be one person, unless --privacy-id names the column of the person: then at
    most --max-rows-per-id random rows are kept per id and the release protects one id with
    all its rows.  --by COL --groups a,b releases one histogram per public key under one
    epsilon (a table of deciles per group; --plot draws one panel per group); --by COL alone
    selects the keys privately (needs --delta; --key-share of epsilon chooses them).

    Reads COLUMN of INPUT, bins it on the public domain, measures it with the chosen
    mechanism, writes the release (histogram, standard errors, deciles, parameters) as JSON
    and prints the deciles with confidence intervals.  INPUT may be a glob pattern in quotes
    ('data/part-*.parquet'): its files are read as one column.  Large inputs and patterns are
    read in batches (bounded memory).  With --session, the release spends from a ledger.
    With several --column (each with its own --lo, --hi and --bins, in order) it releases the
    k-D histogram (GridRelease JSON: rectangles, marginals and dominance counts with exact
    errors) and prints the marginals' totals.  --engine spark counts on a Spark cluster
    (--spark-master URL; INPUT may then be an hdfs:// or s3a:// URL); the release is the same.
    """
    if spark_master is not None and engine != "spark":
        raise ParameterError("--spark-master needs --engine spark")
    check_ranges_option(ranges)
    unit_args = {"privacy_id": privacy_id, "max_rows_per_id": max_rows_per_id, "by": by, "groups": groups}
    unit_args |= {"groups_file": groups_file, "max_groups_per_id": max_groups_per_id, "key_share": key_share}
    if len(column) > 1 and wants_units(unit_args):
        raise ParameterError("--privacy-id and --by release one --column for now")
    categorical = parse_categories(categories, categories_file, [*column, *by_column(by, column)], other)
    by_keys = None
    if by in categorical and by in by_column(by, column):
        by_keys = list(categorical.pop(by).labels or ())[: -1 if other else None]
    if by_keys is not None:
        if groups is not None or groups_file is not None:
            raise ParameterError("give the keys of --by once: --groups, --groups-file or --categories")
        if categorical == {} and other:
            raise ParameterError("--other adds a bin to a categorical --column; the keys of --by have none")
    if wants_units(unit_args) and ranges is not None:
        raise ParameterError("--ranges is not offered with --privacy-id or --by yet; use --workload")
    if wants_units(unit_args) and log_x:
        raise ParameterError("--log-x is not offered with --privacy-id or --by yet")
    if len(column) > 1:
        grid_release_command(
            dict(
                session_path=session_path,
                session_epsilon=session_epsilon,
                session_delta=session_delta,
                input_path=input_path,
                column=column,
                lo=lo,
                hi=hi,
                bins=bins,
                integers=integers,
                categories=categorical,
                units=units,
                clip=clip,
                drop_missing=drop_missing,
                epsilon=epsilon,
                delta=delta,
                mechanism=mechanism,
                workload=workload,
                neighbours=neighbours,
                noise=noise,
                inference=inference,
                seed=seed,
                alpha=alpha,
                output=output,
                plot=plot,
                report=report,
                mechanism_params=mechanism_params,
                ranges=ranges,
                engine=engine,
                spark_master=spark_master,
            )
        )
        return
    column = column[0]
    lo, hi, bins = (
        one_per_column(values, option, 1) for values, option in ((lo, "--lo"), (hi, "--hi"), (bins, "--bins"))
    )
    if mechanism in GRID_MECHANISMS and mechanism not in MECHANISMS:
        raise ParameterError(f"--mechanism {mechanism} releases several columns; give two or more --column")
    if workload in GRID_WORKLOADS:
        raise ParameterError(
            f"--workload {workload} is for several columns; "
            f"with one --column use {', '.join(WORKLOADS.names(auto=True))}"
        )
    labels = Labels.of(column, units or None, input_path)  # checked before the data are read
    check_alpha(alpha)
    check_output_path(output)
    check_plot_path(plot)
    inputs = [input_path, *([ranges] if ranges else [])]
    check_not_an_input(output, inputs)
    check_not_an_input(plot, inputs, "--plot")
    if plot and os.path.abspath(plot) == os.path.abspath(output):
        raise ParameterError("--plot and --output name the same file; give two different paths")
    check_report_option(report, inputs, [output, plot])
    check_neighbours_and_missing(neighbours, drop_missing)
    check_epsilon(epsilon)
    check_delta(delta)
    session = open_session(session_path, session_epsilon, session_delta, [input_path, output, plot, report])
    if session is not None:
        epsilon, delta = session.allot(epsilon, delta)
    if wants_units(unit_args):
        args = dict(input_path=input_path, column=column, lo=lo, hi=hi, bins=bins, integers=integers, clip=clip)
        args |= dict(drop_missing=drop_missing, epsilon=epsilon, delta=delta, mechanism=mechanism, workload=workload)
        args |= dict(neighbours=neighbours, noise=noise, inference=inference, seed=seed, alpha=alpha, output=output)
        args |= dict(plot=plot, session_path=session_path, engine=engine, spark_master=spark_master, **unit_args)
        args |= dict(categories=categorical.get(column), by_keys=by_keys, units=units, report=report)
        unit_release_command(args, session, mechanism_params)
        return
    if column in categorical:
        check_no_bounds(lo, hi, bins, integers, f"--column {column} has --categories")
        domain = categorical[column]
        default = click.get_current_context().get_parameter_source("workload") == click.core.ParameterSource.DEFAULT
        workload = release_workload(domain, None if default else workload, clip)  # identity by default
    else:
        domain = build_domain(lo, hi, bins, integers)
    if ranges is not None:
        workload = ranges_file(ranges, domain.size)
    mech = chosen_mechanism(
        mechanism,
        mechanism_params,
        domain.size,
        epsilon,
        delta,
        neighbours=neighbours,
        workload=workload,
        inference=inference,
        noise=noise,
    )
    check_seed(seed)
    what = api.files_ledger_what(input_path, column, domain)
    session = charge_before_reading(session, epsilon, delta, input_path, engine, what, mech)
    options = {"mechanism": mech, "delta": delta, "rng": seed, "clip": clip, "drop_missing": drop_missing}
    if engine == "spark":
        result = api.release_files(input_path, column, domain, epsilon, engine="spark", spark=spark_master, **options)
    elif streams(input_path):
        result = api.release_files(input_path, column, domain, epsilon, **options)
    else:
        read = read_text_column if domain.categorical else read_column
        result = api.release(read(input_path, column), domain, epsilon, **options)
    assert isinstance(result, Release)  # no privacy unit or group-by here (cli/units.py)
    result = result.with_labels(column, labels.units or None, labels.source)
    staged = stage_outputs(result, output, plot, alpha, column=column, log_x=log_x, cdf=workload == "prefix")
    if report:
        staged.add(report, report_bytes(result, column=column, alpha=alpha, log_x=log_x))
    lines = []
    if mechanism == "auto":
        lines.append(f"auto: chose {mech!r} for the {workload_label(workload, ranges)}")
    lines.append(
        f"{result.mechanism} release of {column!r}: {domain!r}, epsilon={epsilon:g}, delta={delta:g}, "
        f"neighbours={neighbours}"
    )
    note = strategy_note(result.parameters.get("strategy"))
    if note is not None:
        lines.append(note)
    lines.append(format_categories(result, alpha) if domain.categorical else format_deciles(result, alpha))
    if session is not None:
        lines.append(session_summary(session, session_path))
    staged.commit()
    click.echo("\n".join(lines))
    click.echo(f"wrote {written([output, plot, report])}")

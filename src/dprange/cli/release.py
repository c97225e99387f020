"""``dprange release``: one column (a histogram, CDF and quantiles) or several (a k-D histogram),
from CSV or Parquet, local or Spark, charged to a session before INPUT is read.
"""

from __future__ import annotations

import os
import re

import click

from .. import api
from .._validation import check_delta, check_epsilon
from ..analysis.grid import check_answers_workload
from ..answers.describe import Labels
from ..answers.plot import plot_heatmap
from ..engines.spark import files_frame
from ..errors import DomainError, ParameterError
from ..io import read_column
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
    parse_mechanism_params,
    ranges_option,
    redact_option,
    session_options,
    with_options,
)
from .parse import (
    build_domain,
    build_product_domain,
    check_neighbours_and_missing,
    check_privacy,
    grid_mechanism_params,
    grid_workload,
    one_per_column,
    ranges_file,
    read_grid_columns,
    rectangles_file,
)
from .render import (
    axis_strategy_notes,
    check_made_for_workload,
    format_deciles,
    stage_outputs,
    strategy_note,
    workload_label,
)
from .session import charge_before_reading, open_session, session_summary, streams


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
    check_neighbours_and_missing(o["neighbours"], o["drop_missing"])
    epsilon, delta = check_epsilon(o["epsilon"]), check_delta(o["delta"])
    session = open_session(
        o["session_path"], o["session_epsilon"], o["session_delta"], [o["input_path"], o["output"], o["plot"]]
    )
    if session is not None:
        epsilon, delta = session.allot(epsilon, delta)
    if o["inference"] != "gls":
        raise ParameterError("several --column are released with exact least squares only; use --inference gls")
    mechanism = o["mechanism"]
    if mechanism in MECHANISMS:
        raise ParameterError(
            f"--mechanism {mechanism} releases one column; with several use "
            f"{', '.join(GRID_MECHANISMS.names(nameable=True))} or auto"
        )
    domain = build_product_domain(columns, o["lo"], o["hi"], o["bins"], o["integers"])
    if o["ranges"] is None:
        workload = grid_workload(o["workload"])
    else:
        workload = rectangles_file(o["ranges"], columns, domain.shape)
    explicit = click.get_current_context().get_parameter_source("mechanism") != click.core.ParameterSource.DEFAULT
    given = {name: value for name, value in o["mechanism_params"].items() if value is not None}
    params = grid_mechanism_params(mechanism, given, explicit=explicit)
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
        values = read_grid_columns(o["input_path"], columns)
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
    lines = []
    if mechanism == "auto":
        lines.append(f"auto: chose {mech!r} for the {workload_label(workload, o['ranges'])}")
    shape = "x".join(str(n) for n in domain.shape)
    lines.append(
        f"{result.mechanism} release of {' x '.join(repr(c) for c in columns)}: {shape} cells, "
        f"epsilon={epsilon:g}, delta={delta:g}, neighbours={o['neighbours']}"
    )
    described = result.parameters.get("strategy")
    if described and described.get("measured") == "identity":
        lines.append(
            "measured the identity on every axis (one count per cell): its exact error as released is lower "
            "than that of the product of the optimised axes"
        )
    if described:  # each axis' optimised 1-D strategy as the release records it: time and cache
        lines.extend(axis_strategy_notes(columns, described["axes"]))
    total = result.rectangle([0] * len(columns), [n - 1 for n in domain.shape])
    if not getattr(result, "exact_error_bars", True):  # data-aware (dprange.data_aware.grid)
        lines.append(f"total: {total.value:.1f} (no error bars: private data-dependent choices bias the estimate)")
    elif result.measurements.total is not None:
        lines.append(f"total (public): {result.measurements.total:.0f}")
    else:
        low, high = total.confidence_interval(o["alpha"])
        lines.append(
            f"total: {total.value:.1f} ± {total.stderr:.1f} (1 s.e.); {100 * (1 - o['alpha']):g}% interval "
            f"[{low:.1f}, {high:.1f}]"
        )
    if getattr(result, "exact_error_bars", True):
        lines.append("rectangles, marginals and dominance counts: dprange.load_grid_release(path)")
    if session is not None:
        lines.append(session_summary(session, o["session_path"]))
    staged.commit()
    click.echo("\n".join(lines))
    click.echo(f"wrote {o['output']}" + (f" and {o['plot']}" if o["plot"] else ""))


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
@redact_option
def release_command(
    input_path,
    column,
    lo,
    hi,
    bins,
    integers,
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
    session_path,
    session_epsilon,
    session_delta,
    ranges,
    engine,
    spark_master,
    **mechanism_params,
):
    """Release a private histogram of one column (or several) of a CSV or Parquet file.

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
    if mechanism in GRID_MECHANISMS:
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
    check_neighbours_and_missing(neighbours, drop_missing)
    check_epsilon(epsilon)
    check_delta(delta)
    session = open_session(session_path, session_epsilon, session_delta, [input_path, output, plot])
    if session is not None:
        epsilon, delta = session.allot(epsilon, delta)
    domain = build_domain(lo, hi, bins, integers)
    if ranges is not None:
        workload = ranges_file(ranges, domain.size)
    explicit = click.get_current_context().get_parameter_source("mechanism") != click.core.ParameterSource.DEFAULT
    given = {name: value for name, value in mechanism_params.items() if value is not None}
    mechanism, params = parse_mechanism_params(MECHANISMS, mechanism, given, explicit=explicit)
    mech = api.choose_mechanism(
        mechanism,
        domain.size,
        epsilon,
        delta=delta,
        neighbours=neighbours,
        workload=workload,
        inference=inference,
        noise=noise,
        **params,
    )
    check_privacy(mech, domain.size, epsilon, delta)
    check_seed(seed)
    what = api.files_ledger_what(input_path, column, domain)
    session = charge_before_reading(session, epsilon, delta, input_path, engine, what, mech)
    options = {"mechanism": mech, "delta": delta, "rng": seed, "clip": clip, "drop_missing": drop_missing}
    if engine == "spark":
        result = api.release_files(input_path, column, domain, epsilon, engine="spark", spark=spark_master, **options)
    elif streams(input_path):
        result = api.release_files(input_path, column, domain, epsilon, **options)
    else:
        result = api.release(read_column(input_path, column), domain, epsilon, **options)
    result = result.with_labels(column, labels.units or None, labels.source)
    staged = stage_outputs(result, output, plot, alpha, cdf=workload == "prefix")
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
    lines.append(format_deciles(result, alpha))
    if session is not None:
        lines.append(session_summary(session, session_path))
    staged.commit()
    click.echo("\n".join(lines))
    click.echo(f"wrote {output}" + (f" and {plot}" if plot else ""))

"""The ``dprange`` command.

    dprange release data.csv --column income --lo 0 --hi 250000 --bins 1024 --epsilon 1
    dprange quantiles data.csv --column income --lo 0 --hi 250000 --epsilon 1
    dprange demo --output demo-output

Every error caused by the input is one line "dprange: error: ..." on stderr and exit status 2,
without traceback; every option is checked before data are read, and outputs are written
only once everything succeeded (atomically: a failure leaves no output file).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from importlib import resources

import click
import numpy as np

from . import api
from ._cli_helpers import (
    MAX_QUERIES,
    REDACT_VARIABLE,
    RegistryChoice,
    RegistryHelpOption,
    StagedOutputs,
    check_alpha,
    check_not_an_input,
    check_output_folder,
    check_output_path,
    check_plot_path,
    check_seed,
    check_size,
    check_tree_size,
    cli_message,
    mechanism_param_options,
    parse_mechanism_params,
    redact_option,
    redacting,
    summaries,
    with_options,
)
from ._params import OneOf, find
from ._validation import NEIGHBOURS, check_delta, check_epsilon
from .analysis import l2_optimum_bound, select
from .analysis import svd_bound as svd_bound_1d
from .domain import Domain
from .engines.local import expand_inputs
from .engines.spark import files_frame
from .errors import DomainError, DPRangeError, ParameterError
from .io import column_names, read_column
from .ldp.cli import ldp
from .mechanisms import Mechanism, make_mechanism, resolve_noise
from .multidim import RECTANGLES_SVD_MAX_CELLS, check_answers_workload, select_grid, svd_bound
from .multidim import l2_optimum_bound as l2_optimum_bound_kd
from .optimized import cache_dir, cache_files, clear_cache
from .plot import plot_cdf, plot_heatmap
from .product_domain import ProductDomain
from .progress import quiet_for_command
from .quantile_bins import COUNT_SHARE
from .registry import GRID_MECHANISMS, GRID_WORKLOADS, INFERENCE, MECHANISMS, NOISE, QUANTILE_METHODS, WORKLOADS
from .session import Session
from .strategies import TreeStrategy
from .workloads import Ranges, Workload, make_workload
from .workloads_kd import Rectangles

EXIT_USAGE = 2

#: Largest n for which ``dprange error`` computes the exact L2 optimum beside the SVD bound
#: (about a second at 256 bins; O(n^3) a step).
CLI_L2_OPTIMUM_MAX_N = 256

#: The same under replace neighbours (the pair-weight program: about a second at 128 bins,
#: 3-8 s at 256).
CLI_L2_REPLACE_MAX_N = 128


def _mechanism_choices() -> tuple[str, ...]:
    """--mechanism: the mechanisms a name builds (1-D, then k-D for several columns), and auto."""
    return (*MECHANISMS.names(nameable=True), *GRID_MECHANISMS.names(nameable=True), "auto")


def _noise_choices() -> tuple[str, ...]:
    """--noise: auto and every registered noise kind (the mechanisms' declared choices)."""
    constraint = find(Mechanism.PARAMS, "noise").constraint
    assert isinstance(constraint, OneOf)
    return constraint.values


def _mechanism_help() -> str:
    return (
        "How the histogram is measured: "
        + summaries(MECHANISMS, MECHANISMS.names(nameable=True))
        + "; with several --column: "
        + summaries(GRID_MECHANISMS, GRID_MECHANISMS.names(nameable=True))
        + "; auto: the mechanism with the least exact expected error on --workload."
    )


def _inference_help() -> str:
    return "Post-processing: " + summaries(INFERENCE, INFERENCE.names()) + " (Release.bootstrap)."


def _noise_help() -> str:
    return (
        "Noise: auto = discrete Laplace if delta = 0, Gaussian if delta > 0; " + summaries(NOISE, NOISE.names()) + "."
    )


def _release_workload_help() -> str:
    return (
        "With --mechanism auto, optimized, optimized_kronecker or optimized_marginals: the queries to "
        "optimise for (no privacy cost: the error is data-independent): "
        + summaries(WORKLOADS, WORKLOADS.names(auto=True))
        + "; with several --column (all-range means all-rectangles, prefix means prefix-rectangles): "
        + summaries(GRID_WORKLOADS, GRID_WORKLOADS.names(auto=True))
        + "."
    )


def _release_workload_choices() -> tuple[str, ...]:
    return (*WORKLOADS.names(auto=True), *GRID_WORKLOADS.names(auto=True))


def _error_workload_choices() -> tuple[str, ...]:
    return (*WORKLOADS.names(), *GRID_WORKLOADS.names())


def _error_workload_help() -> str:
    return (
        "The queries whose expected error is reported: "
        + summaries(WORKLOADS, WORKLOADS.names())
        + "; with --shape: "
        + summaries(GRID_WORKLOADS, GRID_WORKLOADS.names())
        + "."
    )


def build_domain(lo, hi, bins, integers: bool) -> Domain:
    if lo is None or hi is None:
        raise ParameterError("give the public bounds with --lo and --hi")
    if integers and bins is not None:
        raise ParameterError("give either --integers or --bins, not both")
    if integers:
        domain = Domain.integers(lo, hi)
        check_size(domain.size, f"--integers over [{domain.lo}, {domain.hi}]")
        return domain
    if bins is None:
        raise ParameterError("give --bins N (equal bins over [lo, hi]) or --integers (one bin per integer)")
    if bins > 0:
        check_size(bins, f"--bins {bins}")
    domain = Domain.interval(lo, hi, bins)
    if not math.isfinite(domain.hi - domain.lo):
        raise ParameterError(
            f"--hi - --lo must be a finite number, got {domain.hi:g} - {domain.lo:g}; narrow the bounds"
        )
    return domain


def one_per_column(values: tuple, option: str, columns: int):
    """The value of ``option`` for each of ``columns`` columns (None when not given at all);
    the k-D release takes one value per --column, in order."""
    if not values:
        return None if columns == 1 else (None,) * columns
    if len(values) != columns:
        raise ParameterError(
            f"{option} was given {len(values)} times for {columns} --column; give one {option} per --column, in order"
        )
    return values[0] if columns == 1 else tuple(values)


def build_product_domain(columns, lo, hi, bins, integers: bool) -> ProductDomain:
    """One Domain per column from the repeated --lo/--hi/--bins (or --integers for all)."""
    k = len(columns)
    if len(set(columns)) != k:
        raise ParameterError(f"--column names a column twice ({', '.join(columns)}); give each column once")
    lows, highs = one_per_column(lo, "--lo", k), one_per_column(hi, "--hi", k)
    if integers and bins:
        raise ParameterError("give either --integers or --bins, not both")
    sizes = (None,) * k if integers else one_per_column(bins, "--bins", k)
    domains = []
    for name, a, b, n in zip(columns, lows, highs, sizes):
        try:
            domains.append(build_domain(a, b, n, integers))
        except ParameterError as exc:
            raise ParameterError(f"--column {name}: {exc}") from None
    domain = ProductDomain(domains)
    check_size(domain.size, f"the grid {'x'.join(str(n) for n in domain.shape)}")
    return domain


def grid_mechanism_params(mechanism: str, given: dict, *, explicit: bool) -> dict:
    """--branching, --budget and --root for a k-D mechanism: kronecker takes --branching as its
    per-axis strategies (4, or 4,identity,haar) and --budget; privelet --branching as its axes
    (haar,identity); kd_hierarchy --branching, --budget and --root; quadtree --budget and --root."""
    if not given:
        return {}
    options = {"branching": "--branching", "budget": "--budget", "measure_root": "--root"}
    named = ", ".join(options[name] for name in given)
    taking = {
        "kronecker": {"branching": "axes", "budget": "budget"},
        "kd_hierarchy": {"branching": "branching", "budget": "budget", "measure_root": "measure_root"},
        "quadtree": {"budget": "budget", "measure_root": "measure_root"},
        "privelet": {"branching": "axes"},
    }
    if not explicit or mechanism == "auto":
        raise ParameterError(f"{named} with several --column: give --mechanism {' or '.join(taking)}")
    takes = taking.get(mechanism, {})
    params: dict = {}
    for name, value in given.items():
        if name not in takes:
            raise ParameterError(f"{options[name]} is not a parameter of --mechanism {mechanism}")
        if takes[name] == "axes":
            parts = [p.strip() for p in str(value).split(",")]
            value = [int(p) if p.isascii() and p.isdigit() else p for p in parts]
            value = value[0] if len(value) == 1 else value
        elif name == "branching":
            if not (str(value).isascii() and str(value).isdigit()):
                raise ParameterError(f"--branching must be a whole number >= 2 for kd_hierarchy, got {value!r}")
            value = int(value)
        params[takes[name]] = value
    return params


def grid_workload(workload: str) -> str:
    """The k-D workload of --workload (all-range and prefix read as their k-D counterparts)."""
    mapped = {"all-range": "all-rectangles", "prefix": "prefix-rectangles"}.get(workload, workload)
    if mapped not in GRID_WORKLOADS:
        raise ParameterError(
            f"--workload {workload} is for one column; with several use {', '.join(GRID_WORKLOADS.names(auto=True))}"
        )
    return mapped


def ranges_file(path: str, n: int) -> Ranges:
    """The ranges of ``--ranges FILE`` for one column: columns ``lo`` and ``hi``
    (:func:`ranges_ends`)."""
    lows, highs = ranges_ends(path, [("lo", "hi")], [n])
    return Ranges(lows[:, 0], highs[:, 0], int(n))


def rectangles_file(path: str, columns, shape) -> Rectangles:
    """The rectangles of ``--ranges FILE`` for several columns: ``<column>_lo`` and
    ``<column>_hi`` for each (:func:`ranges_ends`)."""
    lows, highs = ranges_ends(path, [(f"{c}_lo", f"{c}_hi") for c in columns], shape)
    return Rectangles(tuple(shape), lows, highs)


def ranges_ends(path: str, names, shape) -> tuple[np.ndarray, np.ndarray]:
    """(lows, highs), one row per query, of a ``--ranges`` file (CSV or Parquet) whose columns
    ``names`` (a (lo, hi) pair per axis) hold bin indices (0-based, inclusive, as the release
    numbers its bins) on ``shape``.  The queries choose what the strategy is optimised for and
    cost no privacy (the data are never read for them); refused with the file and column (or
    row) named where they do not fit."""
    ends = []
    for name in (name for pair in names for name in pair):
        try:
            column = read_column(path, name)
        except DPRangeError as exc:
            raise ParameterError(f"--ranges {path}: {exc}") from None
        values = np.asarray(column)
        if values.size == 0 or values.size > MAX_QUERIES:
            raise ParameterError(f"--ranges {path}: give 1 to {MAX_QUERIES} ranges, not {values.size}")
        integers = values.dtype.kind == "i" and not np.ma.is_masked(column)  # masked: missing cells
        if not integers and not (
            values.dtype.kind == "f" and np.all(np.isfinite(values)) and np.all(values == np.round(values))
        ):
            raise ParameterError(f"--ranges {path}: column {name!r} must hold bin indices (integers, none missing)")
        ends.append(values.astype(np.int64))
    lows, highs = np.stack(ends[0::2], axis=1), np.stack(ends[1::2], axis=1)
    sides = np.asarray(shape)
    bad = np.flatnonzero(np.any((lows < 0) | (lows > highs) | (highs >= sides), axis=1))
    if bad.size:
        row = int(bad[0])
        raise ParameterError(
            f"--ranges {path}: row {row + 1} ({lows[row].tolist()} to {highs[row].tolist()}) is not a range of bins: "
            f"each needs 0 <= lo <= hi < the bins {list(shape)}"
        )
    return lows, highs


def ranges_axes(path: str, k: int) -> list[str]:
    """The axis names of a --ranges file for ``dprange error --shape`` (no --column there): the
    names of its ``<name>_lo`` columns in header order, each with its ``<name>_hi``, k of them."""
    try:
        names = column_names(path)
    except DPRangeError as exc:
        raise ParameterError(f"--ranges {path}: {exc}") from None
    axes = [name[: -len("_lo")] for name in names if name.endswith("_lo")]
    if len(axes) != k or any(f"{axis}_hi" not in names for axis in axes):
        raise ParameterError(
            f"--ranges {path}: with a {k}-axis --shape it needs <name>_lo and <name>_hi columns for {k} names, "
            f"in axis order (found _lo columns for {axes})"
        )
    return axes


def ranges_option(help_text: str):
    """The --ranges FILE option of ``release`` and ``error`` (read by :func:`ranges_ends`)."""
    return click.option("--ranges", type=click.Path(dir_okay=False), default=None, help=help_text)


def check_ranges_option(ranges: str | None) -> None:
    """--ranges replaces --workload: both given is refused."""
    if ranges is None:
        return
    source = click.get_current_context().get_parameter_source("workload")
    if source != click.core.ParameterSource.DEFAULT:
        raise ParameterError("give --workload or --ranges, not both: --ranges names the queries to optimise for")


def workload_label(workload, ranges: str | None) -> str:
    """How the output names the workload: "<name> workload", or "<m> ranges (or rectangles) of
    <the --ranges file>"."""
    if ranges is None:
        return f"{workload} workload"
    count = workload.m if isinstance(workload, Workload) else workload.shape[0]
    return f"{count} {'ranges' if isinstance(workload, Workload) else 'rectangles'} of {ranges}"


def grid_release_command(options: dict) -> None:
    """``dprange release`` with several --column: the k-D histogram as a GridRelease JSON."""
    o = options
    columns = o["column"]
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
    what = f"k-D histogram on {domain!r}"
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
    if not getattr(result, "exact_error_bars", True):  # data-aware (dprange.data_aware_2d)
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
        lines.append("rectangles, marginals and dominance counts: dprange.multidim.load_grid_release(path)")
    if session is not None:
        lines.append(session_summary(session, o["session_path"]))
    staged.commit()
    click.echo("\n".join(lines))
    click.echo(f"wrote {o['output']}" + (f" and {o['plot']}" if o["plot"] else ""))


def read_grid_columns(input_path: str, columns) -> list:
    """The k-D command's columns of INPUT: one file, or the files a glob pattern matches (in
    name order, as the 1-D command reads them), each column concatenated over the files."""
    pattern = not os.path.exists(input_path) and any(ch in input_path for ch in "*?[")
    files = expand_inputs(input_path) if pattern else [input_path]
    return [concatenate_columns([read_column(path, name) for path in files]) for name in columns]


def concatenate_columns(parts: list):
    """One column from the same column of several files (read by :func:`dprange.io.read_column`),
    integers kept exact: int64 (masked where missing) unless some value is fractional."""
    if len(parts) == 1:
        return parts[0]
    integral = all(
        p.dtype.kind in "iu" or np.all(np.isnan(p) | ((p == np.floor(p)) & (np.abs(p) < 2.0**63))) for p in parts
    )
    if not integral:  # fractional, infinite or beyond int64 (1e20 would wrap to -2^63): floats
        return np.concatenate([np.ma.filled(np.ma.asarray(p, dtype=float), np.nan) for p in parts])
    as_ints = [  # the floats here are whole numbers below 2^63 or missing (NaN): exact as int64
        p if p.dtype.kind in "iu" else np.ma.masked_array(np.where(np.isnan(p), 0, p).astype(np.int64), np.isnan(p))
        for p in parts
    ]
    if not any(np.ma.is_masked(p) for p in as_ints):
        return np.concatenate([np.ma.getdata(p) for p in as_ints])
    return np.ma.concatenate(as_ints)


def check_privacy(mech, n: int, epsilon: float, delta: float) -> None:
    """Everything about the mechanism that can fail, checked before any data is read: the
    tree's size (the command's limit), then what the library checks before reading
    (:func:`dprange.api.check_release`: epsilon, delta, the per-level noise, inference)."""
    strategy = mech.strategy_at(n, epsilon, delta)
    if isinstance(strategy, TreeStrategy):
        check_tree_size(strategy)
    api.check_release(mech, n, epsilon, delta)


def check_neighbours_and_missing(neighbours: str, drop_missing: bool) -> None:
    """With replace neighbours the total is published exactly; after dropping missing values
    it would be the number of complete rows, which reveals how many rows were dropped."""
    if neighbours == "replace" and drop_missing:
        raise ParameterError(
            "--drop-missing cannot be used with --neighbours replace: the public total would reveal "
            "how many rows were dropped; clean the missing values first or use --neighbours add_remove"
        )


def format_deciles(release, alpha: float) -> str:
    """The deciles with simultaneous (1 - alpha) intervals: all nine hold at once."""
    q = np.linspace(0.1, 0.9, 9)
    lines = []
    try:
        answer = release.quantile(q)
        lower, upper = (
            answer.confidence_interval(alpha, simultaneous=True) if release.exact_error_bars else (None, None)
        )
    except ParameterError as exc:
        lines.append(f"deciles unavailable: {exc}")
        answer, lower = None, None
    if answer is not None and not release.exact_error_bars:
        lines.append(f"{'quantile':>9}  {'estimate':>14}  ({release.inference} inference: no closed-form intervals)")
        for qi, v in zip(q, np.atleast_1d(answer.value)):
            lines.append(f"{qi:>9.1f}  {v:>14.6g}")
    if lower is not None and upper is not None:  # set together
        level = f"{100 * (1 - alpha):g}% simultaneous interval"
        lines.append(f"{'quantile':>9}  {'estimate':>14}  {level:>31}")
        for qi, v, lo, hi in zip(q, np.atleast_1d(answer.value), lower, upper):
            lines.append(f"{qi:>9.1f}  {v:>14.6g}  [{lo:>13.6g}, {hi:>13.6g}]")
        lines.append(
            "intervals end at bin edges and hold whatever the values inside a bin"
            + ("; estimates interpolate inside their bin" if answer.interpolated else "")
        )
    total = release.total()
    if release.public_total is not None:
        lines.append(f"total (public): {total.value:.0f}")
    elif not release.exact_error_bars:
        lines.append(f"total: {total.value:.1f}")
    else:
        lines.append(f"total: {total.value:.1f} ± {total.stderr:.1f} (1 s.e.)")
    return "\n".join(lines)


def strategy_note(strategy: dict | None) -> str | None:
    """How an optimised strategy (``-m optimized``, :mod:`dprange.optimized`) was obtained: its
    optimisation time and whether it was read from, stored in or could not be stored in the
    disk cache; None for other mechanisms."""
    if not strategy or "optimisation_seconds" not in strategy:
        return None
    head = f"strategy: {strategy['template']}, {strategy['rows']} x {strategy['bins']}"
    if strategy.get("optimised_for") == "replace":  # Optimized.replace_program
        head += " (optimised for replace neighbours)"
    if strategy.get("measured") == "identity":  # Optimized.released_strategy
        errors = strategy["mean_error_as_released"]
        head = (
            f"strategy: the identity ({strategy['bins']} bins), measured in place of the optimised "
            f"{strategy['template']} strategy: lower exact error as released ({errors['identity']:.6g} "
            f"against {errors['optimised']:.6g} per query)"
        )
    seconds, where = f"{strategy['optimisation_seconds']:.2f}", cache_dir()
    if strategy["cached"]:
        note = f"{head}, read from the strategy cache {where} (optimised in {seconds} s when first built)"
    elif strategy.get("stored"):
        note = f"{head}, optimised in {seconds} s and stored in the strategy cache {where} for the next release"
    else:
        note = (
            f"{head}, optimised in {seconds} s; not stored: the strategy cache {where} cannot be written "
            "(set DPRANGE_CACHE_DIR to a writable folder)"
        )
    return note + also_built_note(strategy)


def also_built_note(strategy: dict) -> str:
    """The other strategies built for the choice (``also_built``: template auto compares two,
    the dense templates start from others) and the optimisation time spent on all of them."""
    others = strategy.get("also_built") or []
    if not others:
        return ""
    parts = [
        f"{o['template']} "
        + (
            f"(read from the cache, optimised in {o['optimisation_seconds']:.2f} s when first built)"
            if o["cached"]
            else f"(optimised in {o['optimisation_seconds']:.2f} s)"
        )
        for o in others
    ]
    optimised_now = [s["optimisation_seconds"] for s in (strategy, *others) if not s["cached"]]
    if not optimised_now:
        return f"; also built: {', '.join(parts)}; none optimised now (all read from the cache)"
    return f"; also built: {', '.join(parts)}; {sum(optimised_now):.2f} s of optimisation in all"


def axis_strategy_notes(columns, strategies) -> list[str]:
    """One :func:`strategy_note` per column of a k-D optimised release (its saved per-axis
    descriptions); columns with as many bins share one strategy (optimised once), named after
    the first column that uses it."""
    lines: list[str] = []
    first: dict[int, str] = {}
    for column, strategy in zip(columns, strategies):
        bins = strategy["bins"]
        if bins in first:
            lines.append(f"--column {column}: the strategy of --column {first[bins]} (the same {bins} bins)")
            continue
        first[bins] = column
        lines.append(f"--column {column}: {strategy_note(strategy)}")
    return lines


def render_plot(release, alpha) -> bytes:
    """The CDF plot as PNG bytes (rendered in memory: nothing is written yet)."""
    import io  # noqa: PLC0415

    buffer = io.BytesIO()
    plot_cdf(release, buffer, alpha=alpha)
    return buffer.getvalue()


def stage_outputs(release, output, plot, alpha) -> StagedOutputs:
    """The release JSON (and the plot) produced in memory, ready to be written."""
    staged = StagedOutputs()
    if output:
        staged.add(output, release.to_json(alpha=alpha))
    if plot:
        staged.add(plot, render_plot(release, alpha))
    return staged


#: Inputs of at least this size are read by the streaming engine (bounded memory).
STREAM_FROM_BYTES = 64 << 20

session_options = [
    click.option(
        "--session",
        "session_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Spend from the privacy session recorded in this ledger (JSON); refused if it would overspend.",
    ),
    click.option(
        "--session-epsilon",
        type=float,
        default=None,
        help="Create the --session ledger with this whole budget if it does not exist yet.",
    ),
    click.option("--session-delta", type=float, default=0.0, show_default=True, help="The new session's delta."),
]

mechanism_options = [
    click.option("--epsilon", "-e", type=float, required=True, help="Privacy budget epsilon (> 0)."),
    click.option(
        "--delta",
        type=float,
        default=0.0,
        show_default=True,
        help="Privacy parameter delta in [0, 1); delta > 0 switches the default noise to Gaussian.",
    ),
    click.option(
        "--mechanism",
        "-m",
        type=RegistryChoice(_mechanism_choices),
        default="auto",
        show_default=True,
        cls=RegistryHelpOption,
        help_text=_mechanism_help,
    ),
    click.option(
        "--workload",
        type=RegistryChoice(_release_workload_choices),
        default="all-range",
        show_default=True,
        cls=RegistryHelpOption,
        help_text=_release_workload_help,
    ),
    *mechanism_param_options(MECHANISMS),
    click.option(
        "--neighbours",
        type=click.Choice(NEIGHBOURS),
        default="add_remove",
        show_default=True,
        help="Neighbouring relation: add/remove one record, or replace one record's value (the total is then public).",
    ),
    click.option(
        "--noise",
        type=RegistryChoice(_noise_choices),
        default="auto",
        show_default=True,
        cls=RegistryHelpOption,
        help_text=_noise_help,
    ),
    click.option(
        "--inference",
        type=RegistryChoice(INFERENCE.names),
        default="gls",
        show_default=True,
        cls=RegistryHelpOption,
        help_text=_inference_help,
    ),
    click.option(
        "--seed",
        type=int,
        default=None,
        help="Seed the noise for a reproducible experiment. Never for a real release: the default reads OS entropy.",
    ),
    click.option(
        "--alpha", type=float, default=0.05, show_default=True, help="Confidence intervals at level 1 - alpha."
    ),
]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dprange")
@click.option("--quiet", is_flag=True, help="No progress bars (they appear only on a terminal, for long work).")
def cli(quiet):
    """dprange: differentially private histograms, range queries, CDFs and quantiles.

    Bounds and bins are public and must not be read from the data. Every answer comes with
    an exact standard error. Run 'dprange COMMAND --help' for each command's options.
    """
    quiet_for_command(quiet)


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
    staged = stage_outputs(result, output, plot, alpha)
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


def streams(input_path: str) -> bool:
    """Whether INPUT is read by the streaming engine: a glob pattern, or a file of at least
    :data:`STREAM_FROM_BYTES` (smaller files are read whole, with the readers of dprange.io)."""
    if not os.path.exists(input_path):
        return any(ch in input_path for ch in "*?[")
    return os.path.isfile(input_path) and os.path.getsize(input_path) >= STREAM_FROM_BYTES


def charge_before_reading(
    session: Session | None, epsilon, delta, input_path: str, engine: str, what: str, mech
) -> Session | None:
    """Charge --session for a release about to read INPUT, once every option has been
    checked: the spend is in the ledger file before the first byte of INPUT is read and stays
    whatever the outcome (a bad row answers a question about the data; docs/privacy.md).
    A local INPUT that names no file is refused first, free (the file system is not the data).
    The ledger is opened again here, so that spends by other processes since this command
    started are counted rather than refused as a change; the charge itself is checked and
    written under the ledger's lock.  Returns the session charged."""
    if session is None:
        return None
    if engine == "local":
        expand_inputs(input_path)
    assert session.path is not None  # --session always names the ledger
    current = Session.open(session.path, session.epsilon, session.delta)
    api.charge_before_reading(current, epsilon, delta, what, repr(mech))
    return current


def session_summary(session: Session, path) -> str:
    """What the session has spent (its ledger was saved when the release was charged)."""
    return (
        f"session {path}: spent {float(session.spent_epsilon):.6g} of epsilon {session.epsilon:g} "
        f"in {len(session.entries)} releases"
    )


def open_session(path, epsilon, delta, files) -> Session | None:
    """The session of --session (resumed, or created with --session-epsilon), checked before
    any data are read; None without --session."""
    if path is None:
        if epsilon is not None:
            raise ParameterError("--session-epsilon needs --session LEDGER.json (the file that records the spends)")
        return None
    check_output_path(path, "--session")
    check_not_an_input(path, [f for f in files if f], "--session")
    return Session.open(path, epsilon, delta)


@cli.group("session")
def session_group():
    """Privacy sessions: one budget spent by several releases (--session on 'dprange release')."""


@session_group.command("init")
@click.argument("ledger", type=click.Path(dir_okay=False))
@click.option("--epsilon", "-e", type=float, required=True, help="The session's whole privacy budget epsilon.")
@click.option("--delta", type=float, default=0.0, show_default=True, help="The session's whole delta.")
def session_init(ledger, epsilon, delta):
    """Start a session of budget EPSILON recorded in LEDGER (a JSON file that must not exist)."""
    check_output_path(ledger, "LEDGER")
    if os.path.exists(ledger):
        raise ParameterError(f"the ledger {ledger!r} exists already; resume it with --session or choose a new file")
    Session(epsilon, delta, path=ledger).save()
    click.echo(f"started a session of epsilon {epsilon:g}, delta {delta:g} in {ledger}")


@session_group.command("show")
@click.argument("ledger", type=click.Path(dir_okay=False))
def session_show(ledger):
    """Print the spends recorded in LEDGER and what is left."""
    session = Session.open(ledger)
    for entry in session.entries:
        click.echo(
            f"{entry.when}  epsilon {entry.epsilon:<12.6g} delta {entry.delta:<8.3g} {entry.kind:<7} {entry.what}"
        )
    click.echo(
        f"spent epsilon {float(session.spent_epsilon):.6g} of {session.epsilon:g} "
        f"(left {session.remaining_epsilon:.6g}), delta {float(session.spent_delta):.3g} of {session.delta:g}"
    )


@cli.group("cache")
def cache_group():
    """The strategy cache: optimised strategies kept on disk for the next release
    ($DPRANGE_CACHE_DIR, else $XDG_CACHE_HOME/dprange or ~/.cache/dprange)."""


def _megabytes(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


@cache_group.command("show")
def cache_show():
    """List the cached strategies, largest first (a dense strategy on 4096 bins and its inverse
    take 256 MiB)."""
    files = cache_files()
    sizes = [path.stat().st_size for path in files]
    click.echo(f"strategy cache {cache_dir()}: {len(files)} files, {_megabytes(sum(sizes))}")
    for path, size in zip(files, sizes):
        click.echo(f"{_megabytes(size):>12}  {path.name}")


@cache_group.command("clear")
def cache_clear():
    """Remove every cached strategy (each is optimised again when next needed); other files in
    the directory are left."""
    removed, freed = clear_cache()
    click.echo(f"removed {removed} files ({_megabytes(freed)}) from the strategy cache {cache_dir()}")


@cli.command("error")
@click.option("--n", "n", type=int, default=None, help="Number of bins (or --shape for a k-D grid).")
@click.option(
    "--shape",
    default=None,
    help="A k-D grid's sides, e.g. 64x64 or 50x100x7: rank the k-D mechanisms (kronecker, kd_hierarchy).",
)
@click.option(
    "--order", type=int, default=2, show_default=True, help="--shape with -w marginals: the marginals' order."
)
@click.option(
    "--workload",
    "-w",
    type=RegistryChoice(_error_workload_choices),
    default="all-range",
    show_default=True,
    cls=RegistryHelpOption,
    help_text=_error_workload_help,
)
@click.option("--queries", type=int, default=1000, show_default=True, help="random-ranges: how many ranges.")
@ranges_option(
    "Instead of --workload: a CSV (or Parquet) file of ranges, as bin indices (0-based, inclusive): columns "
    "lo and hi with --n; with --shape, <name>_lo and <name>_hi for each axis in order (as dprange release "
    "--ranges reads them)."
)
@click.option("--epsilon", "-e", type=float, required=True, help="Privacy budget epsilon (> 0).")
@click.option("--delta", type=float, default=0.0, show_default=True, help="delta in [0, 1); > 0 means Gaussian noise.")
@click.option(
    "--neighbours",
    type=click.Choice(NEIGHBOURS),
    default="add_remove",
    show_default=True,
    help="Neighbouring relation (replace: the total is public).",
)
@click.option(
    "--noise",
    type=RegistryChoice(_noise_choices),
    default="auto",
    show_default=True,
    cls=RegistryHelpOption,
    help_text=_noise_help,
)
@click.option(
    "--mechanisms",
    default=None,
    cls=RegistryHelpOption,
    help_text=lambda: (
        f"Comma-separated candidates among {', '.join(MECHANISMS.names(nameable=True))} and hB "
        "(= hierarchical with branching B), e.g. flat,wavelet,h2,h16; default: the grid auto ranks."
    ),
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def error_command(n, shape, order, workload, queries, ranges, epsilon, delta, neighbours, noise, mechanisms, as_json):
    """Exact expected error of mechanisms before touching any data, and the recommended one.

    The error of a least-squares mechanism does not depend on the data, so this costs no
    privacy. Expected error is the average variance over the workload's queries (counts^2);
    the table shows its square root (RMSE, in counts).  With --shape (a k-D grid) it ranks
    the k-D mechanisms on all-rectangles (the default), prefix-rectangles or marginals.
    --ranges ranks them on the ranges (or rectangles) of a file instead.
    """
    check_epsilon(epsilon)
    check_delta(delta)
    check_ranges_option(ranges)
    if shape is not None:
        if n is not None:
            raise ParameterError("give --n (one axis) or --shape (a k-D grid), not both")
        grid_error_command(shape, order, workload, epsilon, delta, neighbours, noise, mechanisms, as_json, ranges)
        return
    if n is None:
        raise ParameterError("Missing option '--n' (the number of bins; or --shape for a k-D grid)")
    if workload in GRID_WORKLOADS:
        raise ParameterError(
            f"--workload {workload} needs --shape (a k-D grid); with --n use {', '.join(WORKLOADS.names())}"
        )
    if n < 1:
        raise ParameterError(f"--n must be a number of bins >= 1, got {n}")
    check_size(n, f"--n {n}")
    if workload == "random-ranges" and not 1 <= queries <= MAX_QUERIES:
        raise ParameterError(f"--queries must be between 1 and {MAX_QUERIES}, got {queries}")
    kind = resolve_noise(noise, delta)  # the noise the table's mechanisms use (gaussian needs delta > 0)
    wl = make_workload(workload, n, k=queries) if ranges is None else ranges_file(ranges, n)
    candidates = None
    if mechanisms is not None:
        candidates = [
            _parse_candidate(name.strip(), neighbours, noise, wl) for name in mechanisms.split(",") if name.strip()
        ]
        if not candidates:
            raise ParameterError("--mechanisms is empty; name candidates such as flat,wavelet,h16")
        for cand in candidates:
            strategy = cand.strategy_at(n, epsilon, delta)
            if isinstance(strategy, TreeStrategy):
                check_tree_size(strategy, "--mechanisms hB:")
    selection = select(wl, None, epsilon, delta=delta, neighbours=neighbours, noise=noise, candidates=candidates)
    # Li and Miklau's bound holds under add/remove (under replace a public total is free).  All
    # ranges, prefixes and the identity have closed-form singular values (any n); other workloads
    # eigendecompose the n x n Gram, O(n^3), so only up to 4096 bins.
    bound = (
        svd_bound_1d(wl, epsilon, delta, noise=noise)
        if neighbours == "add_remove" and (wl.closed_form_spectrum or n <= 4096)
        else None
    )
    # The exact optimum of the L2 program (an n x n eigendecomposition a step): small n only.
    optimum = (
        l2_optimum_bound(wl, epsilon, delta, noise=noise, neighbours=neighbours)
        if n <= (CLI_L2_OPTIMUM_MAX_N if neighbours == "add_remove" else CLI_L2_REPLACE_MAX_N)
        else None
    )
    if as_json:
        out = selection.to_dict()
        out["svd_bound"] = bound
        out["l2_optimum_bound"] = optimum
        click.echo(json.dumps(out, indent=1))
        return
    named = workload_label(workload if ranges is None else wl, ranges)
    click.echo(f"{named}, n={n}, epsilon={epsilon:g}, delta={delta:g}, neighbours={neighbours}, noise={kind}")
    click.echo(f"{'rank':>4}  {'RMSE':>12}  mechanism")
    for rank, cand in enumerate(selection.table[:15], start=1):
        click.echo(f"{rank:>4}  {cand.error**0.5:>12.4f}  {cand.mechanism!r}")
    if len(selection.table) > 15:
        click.echo(f"      ... {len(selection.table) - 15} more (use --json)")
    for mech, reason in selection.excluded:
        click.echo(f"excluded {mech!r}: {reason}")
    if bound is not None:
        click.echo(f"lower bound for any matrix mechanism (Li and Miklau, SVD bound): RMSE {bound**0.5:.4f}")
    if optimum is not None:
        echo_l2_optimum(optimum, delta, "optimized", neighbours)
    click.echo(f"recommended: {selection.mechanism!r}")


def echo_l2_optimum(optimum: float, delta: float, reached_by: str, neighbours: str = "add_remove") -> None:
    """The line of ``dprange error`` with the exact L2 optimum (dprange.optimal_l2)."""
    relation = " under replace, with the public total" if neighbours == "replace" else ""
    if delta > 0:
        click.echo(
            f"least error of any matrix mechanism with this noise{relation} (the exact optimum, Yuan et al. "
            f"2016; reached by {reached_by}): RMSE {optimum**0.5:.4f}"
        )
    else:
        click.echo(
            f"tighter lower bound{relation} (the exact optimum with L2 columns, Yuan et al. 2016; epsilon-DP's "
            f"L1 columns cost more): RMSE {optimum**0.5:.4f}"
        )


def check_made_for_workload(option: str, mechanism: str, workload: str) -> None:
    """Refuse a k-D mechanism optimised for other workloads than --workload (it takes the
    release's, :meth:`dprange.registry.Entry.declared`), naming the mechanism and the option."""
    declared = {p.name: p for p in GRID_MECHANISMS[mechanism].params}
    if "workload" not in declared:
        return
    try:
        declared["workload"].constraint.check(workload, "workload")
    except ParameterError as exc:
        raise ParameterError(f"{option} {mechanism} is not made for --workload {workload} ({exc})") from None


def parse_shape(text: str) -> tuple[int, ...]:
    """--shape: sides joined by x (64x64, 50x100x7)."""
    parts = str(text).lower().split("x")
    if not all(p.strip().isascii() and p.strip().isdigit() and int(p) >= 1 for p in parts):
        raise ParameterError(f"--shape must be sides >= 1 joined by x, e.g. 64x64 or 50x100x7, got {text!r}")
    sides = tuple(int(p) for p in parts)
    check_size(math.prod(sides), f"--shape {text}")
    return sides


def grid_error_command(
    shape, order, workload, epsilon, delta, neighbours, noise, mechanisms, as_json, ranges=None
) -> None:
    """``dprange error --shape``: the k-D mechanisms ranked by exact expected error (on the
    rectangles of ``ranges``, a file, where given: their SVD bound on grids of at most
    RECTANGLES_SVD_MAX_CELLS cells, no exact L2 optimum)."""
    sides = parse_shape(shape)
    if ranges is None:
        name: str | Rectangles = grid_workload(workload)
    else:
        name = rectangles_file(ranges, ranges_axes(ranges, len(sides)), sides)
    if name == "marginals" and not 1 <= order <= len(sides):
        raise ParameterError(f"--order must be 1..{len(sides)} for a {len(sides)}-D --shape, got {order}")
    kind = resolve_noise(noise, delta)
    candidates = None
    if mechanisms is not None:
        names = [m.strip().lower() for m in mechanisms.split(",") if m.strip()]
        if not names:
            raise ParameterError("--mechanisms is empty; name candidates such as kronecker,kd_hierarchy")
        for m in names:
            if m not in GRID_MECHANISMS:
                raise ParameterError(
                    f"unknown k-D mechanism {m!r} in --mechanisms; use {', '.join(GRID_MECHANISMS.names())}"
                )
        for m in names:
            check_made_for_workload("--mechanisms", m, name)
        candidates = [
            GRID_MECHANISMS[m].build(
                neighbours=neighbours, noise=noise, **GRID_MECHANISMS[m].declared(workload=name, order=order)
            )
            for m in names
        ]
        for cand in candidates:
            check_answers_workload(cand, sides, name, epsilon, delta=delta, order=order, option="--mechanisms")
    selection = select_grid(
        sides,
        epsilon,
        workload=name,
        delta=delta,
        neighbours=neighbours,
        noise=noise,
        order=order,
        candidates=candidates,
    )
    # Under replace a public total is free and the add/remove bound need not hold; the bound
    # has closed forms for the three grid workloads (any side).
    named = isinstance(name, str)  # explicit rectangles: the bound of their dense Gram, small grids only
    bounded = named or math.prod(sides) <= RECTANGLES_SVD_MAX_CELLS
    bound = (
        svd_bound(sides, name, epsilon, delta, order=order, noise=noise)
        if neighbours == "add_remove" and bounded
        else None
    )
    # The exact L2 optimum: of rectangles, the product of the axes' (each axis' O(n^3) steps, so
    # sides up to CLI_L2_OPTIMUM_MAX_N); of marginals, the SVD bound itself (multidim.l2_optimum_bound).
    rectangles = name in ("all-rectangles", "prefix-rectangles")
    optimum = (
        l2_optimum_bound_kd(sides, name, epsilon, delta, order=order, noise=noise)
        if neighbours == "add_remove" and named and (not rectangles or max(sides) <= CLI_L2_OPTIMUM_MAX_N)
        else None
    )
    if as_json:
        out = selection.to_dict()
        out["svd_bound"] = bound
        out["l2_optimum_bound"] = optimum
        click.echo(json.dumps(out, indent=1))
        return
    label = "x".join(str(n) for n in sides)
    title = workload_label(name, ranges)
    click.echo(f"{title}, shape={label}, epsilon={epsilon:g}, delta={delta:g}, neighbours={neighbours}, noise={kind}")
    click.echo(f"{'rank':>4}  {'RMSE':>12}  mechanism")
    for rank, cand in enumerate(selection.table[:15], start=1):
        click.echo(f"{rank:>4}  {cand.error**0.5:>12.4f}  {cand.mechanism!r}")
    if len(selection.table) > 15:
        click.echo(f"      ... {len(selection.table) - 15} more (use --json)")
    for mech, reason in selection.excluded:
        click.echo(f"excluded {mech!r}: {reason}")
    if bound is not None:
        click.echo(f"lower bound for any matrix mechanism (Li and Miklau, SVD bound): RMSE {bound**0.5:.4f}")
    if optimum is not None and rectangles:  # for marginals it is the SVD bound above
        echo_l2_optimum(optimum, delta, "optimized_kronecker")
    click.echo(f"recommended: {selection.mechanism!r}")


def _parse_candidate(name: str, neighbours: str, noise: str, workload: Workload):
    """One --mechanisms entry: a registered name (any case; optimized is optimised for
    ``workload``), or hB for hierarchical with branching B."""
    lowered = name.lower()
    names = MECHANISMS.names(nameable=True)
    if lowered in names:
        return make_mechanism(
            lowered, neighbours=neighbours, noise=noise, **MECHANISMS[lowered].declared(workload=workload)
        )
    if lowered.startswith("h") and lowered[1:].isascii() and lowered[1:].isdigit():
        return make_mechanism("hierarchical", neighbours=neighbours, noise=noise, branching=int(lowered[1:]))
    raise ParameterError(f"unknown mechanism {name!r} in --mechanisms; use {', '.join(names)} or hB (e.g. h16)")


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
    result = api.release(values, domain, epsilon, mechanism=mech, rng=seed)
    json_path = os.path.join(output, "release.json")
    png_path: str | None = os.path.join(output, "cdf.png")
    try:
        staged = stage_outputs(result, json_path, png_path, 0.05)
    except DPRangeError:  # no matplotlib: the JSON alone
        staged = stage_outputs(result, json_path, None, 0.05)
        png_path = None
    text = format_deciles(result, 0.05)
    staged.commit()
    click.echo(f"example data: {path} ({values.size} records, column 'income')")
    click.echo(f"mechanism (auto, prefix workload): {mech!r}, epsilon={epsilon:g}, domain {domain!r}")
    click.echo(text)
    click.echo(f"outputs: {os.path.abspath(json_path)}" + (f", {os.path.abspath(png_path)}" if png_path else ""))


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


cli.add_command(ldp)


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

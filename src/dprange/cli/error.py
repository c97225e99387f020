"""``dprange error``: the exact expected error of mechanisms on a workload, and the lower bounds,
before any data are read.
"""

from __future__ import annotations

import json
import math

import click

from .._validation import NEIGHBOURS, check_delta, check_epsilon
from ..analysis.error import l2_optimum_bound
from ..analysis.error import svd_bound as svd_bound_1d
from ..analysis.grid import RECTANGLES_SVD_MAX_CELLS, check_answers_workload, select_grid, svd_bound
from ..analysis.grid import l2_optimum_bound as l2_optimum_bound_kd
from ..analysis.selection import select
from ..errors import ParameterError
from ..registry import GRID_MECHANISMS, GRID_WORKLOADS, MECHANISMS, WORKLOADS
from ..strategies.calibration import resolve_noise
from ..strategies.trees import TreeStrategy
from ..workloads.ranges import make_workload
from ..workloads.rectangles import Rectangles
from .group import cli
from .options import (
    MAX_QUERIES,
    RegistryChoice,
    RegistryHelpOption,
    _error_workload_choices,
    _error_workload_help,
    _noise_choices,
    _noise_help,
    check_ranges_option,
    check_size,
    check_tree_size,
    ranges_option,
    with_options,
)
from .parse import _parse_candidate, grid_workload, parse_shape, ranges_axes, ranges_file, rectangles_file
from .render import check_made_for_workload, echo_l2_optimum, workload_label
from .units import bounding_epsilon, bounding_note, error_unit_options

#: Largest n for which ``dprange error`` computes the exact L2 optimum beside the SVD bound
#: (O(n^3) a step; timing: docs/analysis.md).
CLI_L2_OPTIMUM_MAX_N = 256


#: The same under replace neighbours (the pair-weight program, slower; docs/analysis.md).
CLI_L2_REPLACE_MAX_N = 128


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
@with_options(error_unit_options)
def error_command(
    n,
    shape,
    order,
    workload,
    queries,
    ranges,
    epsilon,
    delta,
    neighbours,
    noise,
    mechanisms,
    as_json,
    max_rows_per_id,
    group_count,
    max_groups_per_id,
):
    """Exact expected error of mechanisms before touching any data, and the recommended one.

    The error of a least-squares mechanism does not depend on the data, so this costs no
    privacy. Expected error is the average variance over the workload's queries (counts^2);
    the table shows its square root (RMSE, in counts).  With --shape (a k-D grid) it ranks
    the k-D mechanisms on all-rectangles (the default), prefix-rectangles or marginals.
    --ranges ranks them on the ranges (or rectangles) of a file instead.  --max-rows-per-id K
    (several rows per person), --groups N and --max-groups-per-id M (a --by release) show the
    error at the epsilon each group's mechanism runs at, epsilon / (M K), and its cost.
    """
    check_epsilon(epsilon)
    check_delta(delta)
    check_ranges_option(ranges)
    run_at = bounding_epsilon(epsilon, delta, neighbours, max_rows_per_id, group_count, max_groups_per_id)
    if run_at is not None and shape is not None:
        raise ParameterError("--max-rows-per-id and --groups apply to one column (--n) for now")
    asked, epsilon = epsilon, epsilon if run_at is None else run_at
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
    note = None
    if run_at is not None:
        unbounded = select(wl, None, asked, delta=delta, neighbours=neighbours, noise=noise, candidates=candidates)
        factor = (selection.table[0].error / unbounded.table[0].error) ** 0.5
        note = bounding_note(asked, run_at, max_rows_per_id, group_count, max_groups_per_id, factor)
    if as_json:
        out = selection.to_dict()
        out["svd_bound"] = bound
        out["l2_optimum_bound"] = optimum
        if note is not None:
            out["contribution_bounding"] = {"epsilon": asked, "row_epsilon": run_at, "rmse_factor": factor}
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
    if note is not None:
        click.echo(note)
    click.echo(f"recommended: {selection.mechanism!r}")


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
    # sides up to CLI_L2_OPTIMUM_MAX_N); of marginals, the SVD bound itself (analysis.grid.l2_optimum_bound).
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

"""What the commands print: decile tables, notes on the strategy chosen and how it was obtained,
and plots.
"""

from __future__ import annotations

import click
import numpy as np

from ..answers.plot import plot_bars, plot_cdf
from ..errors import ParameterError
from ..optimize.cache import cache_dir
from ..registry import GRID_MECHANISMS
from ..workloads.ranges import Workload
from .options import StagedOutputs


def workload_label(workload, ranges: str | None) -> str:
    """How the output names the workload: "<name> workload", or "<m> ranges (or rectangles) of
    <the --ranges file>"."""
    if ranges is None:
        return f"{workload} workload"
    count = workload.m if isinstance(workload, Workload) else workload.shape[0]
    return f"{count} {'ranges' if isinstance(workload, Workload) else 'rectangles'} of {ranges}"


def format_deciles(release, alpha: float) -> str:
    """The deciles with simultaneous (1 - alpha) intervals (all nine hold at once), the
    interval first, then the point by the placement rule of :mod:`dprange.answers.cdf`: a
    value, a guess marked "~" (interpolated inside its bin), or no point where the bin's mass
    is concentrated (the bin is printed instead)."""
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
        lines.append(f"{'quantile':>9}  {'estimate':<28}  ({release.inference} inference: no closed-form intervals)")
        for i, qi in enumerate(q):
            lines.append(f"{qi:>9.1f}  {point_text(answer, i)}")
    if lower is not None and upper is not None:  # set together
        level = f"{100 * (1 - alpha):g}% simultaneous interval"
        lines.append(f"{'quantile':>9}  {level:<30}  estimate")
        for i, (qi, lo, hi) in enumerate(zip(q, lower, upper)):
            lines.append(f"{qi:>9.1f}  [{lo:>13.6g}, {hi:>13.6g}]  {point_text(answer, i)}")
        lines.append("intervals end at bin edges and hold whatever the values inside a bin")
    if answer is not None:
        lines.extend(placement_notes(answer))
    lines.append(_total_line(release))
    return "\n".join(lines)


def format_categories(release, alpha: float) -> str:
    """The count of every category of a categorical release with its standard error and
    (1 - alpha) interval (each interval on its own), then the total."""
    lines = []
    counts = release.histogram()
    exact = release.exact_error_bars
    width = min(max(len(label) for label in release.labels), 40)
    header = f"{'category':<{width}}  {'estimate':>12}"
    if exact:
        lower, upper = counts.confidence_interval(alpha)
        header += f"  {'s.e.':>9}  {f'{100 * (1 - alpha):g}% interval':>27}"
    lines.append(header)
    for i, label in enumerate(release.labels):
        row = f"{label[:width]:<{width}}  {counts.value[i]:>12.1f}"
        if exact:
            row += f"  {counts.stderr[i]:>9.2f}  [{lower[i]:>11.1f}, {upper[i]:>11.1f}]"
        lines.append(row)
    if not exact:
        lines.append(f"({release.inference} inference: no closed-form intervals)")
    lines.append(_total_line(release))
    return "\n".join(lines)


def format_grid_table(release, columns, alpha: float, max_cells: int = 400) -> list[str]:
    """The labelled 2-way table of a 2-D release with categorical axes (at most ``max_cells``
    cells: rows the first column's bins, columns the second's), and each categorical axis'
    one-way marginal with its standard errors and (1 - alpha) intervals."""
    lines = []
    labels = release.labels
    axes = [a for a, d in enumerate(release.domain.domains) if d.categorical]
    exact = getattr(release, "exact_error_bars", True)
    if len(release.shape) == 2 and release.counts.size <= max_cells and max(release.shape) <= 40:
        counts = release.counts
        first = min(max(len(label) for label in labels[0]), 30)
        width = max(10, *(min(len(label), 14) for label in labels[1]))
        lines.append(f"{columns[0]} x {columns[1]}: estimated counts")
        lines.append(f"{'':<{first}}  " + "  ".join(f"{label[:14]:>{width}}" for label in labels[1]))
        for i, label in enumerate(labels[0]):
            lines.append(f"{label[:first]:<{first}}  " + "  ".join(f"{v:>{width}.1f}" for v in counts[i]))
        if exact:
            lines.append(f"(cell standard error about {float(np.median(release.marginal((0, 1)).stderr)):.3g})")
    for a in axes:
        marginal = release.marginal(a)
        lines.append(f"{columns[a]}: estimated counts" + (" ± 1 s.e., interval" if exact else ""))
        bounds = marginal.confidence_interval(alpha) if exact else None
        for i, label in enumerate(labels[a]):
            row = f"  {label[:30]:<30}  {marginal.value[i]:>12.1f}"
            if bounds is not None:
                row += f" ± {marginal.stderr[i]:.2f}  [{bounds[0][i]:.1f}, {bounds[1][i]:.1f}]"
            lines.append(row)
    return lines


def _total_line(release) -> str:
    total = release.total()
    if release.public_total is not None:
        return f"total (public): {total.value:.0f}"
    if not release.exact_error_bars:
        return f"total: {total.value:.1f}"
    return f"total: {total.value:.1f} ± {total.stderr:.1f} (1 s.e.)"


def point_text(answer, i: int) -> str:
    """The estimate of level i as printed: the value ("exact"), "~value" (interpolated: a
    guess), or "no point: in bin [a, b)" (concentrated: where in the bin is unknown)."""
    value = float(np.atleast_1d(answer.value)[i])
    placement = None if answer.placement is None else str(np.atleast_1d(answer.placement)[i])
    if placement == "concentrated":
        low, high = np.atleast_1d(answer.bin_lower)[i], np.atleast_1d(answer.bin_upper)[i]
        return f"no point: in bin [{low:.6g}, {high:.6g})"
    if placement == "interpolated":
        return f"~{value:.6g}"
    return f"{value:.6g}"


def placement_notes(answer) -> list[str]:
    """One line per placement rule the table uses (none for exact values)."""
    used = set() if answer.placement is None else {str(p) for p in np.atleast_1d(answer.placement)}
    notes = []
    if "interpolated" in used:
        notes.append("~: a guess inside its bin, as if the values there were spread evenly")
    if "concentrated" in used:
        notes.append(
            "no point: most of that bin's records sit together (e.g. many equal values), so where the "
            "quantile lies inside the bin is unknown"
        )
    return notes


def strategy_note(strategy: dict | None) -> str | None:
    """How an optimised strategy (``-m optimized``, :mod:`dprange.mechanisms.optimized`) was obtained: its
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


def render_plot(release, alpha, *, column: str | None = None, log_x: bool = False) -> bytes:
    """The CDF plot as PNG bytes (rendered in memory: nothing is written yet); ``column`` names
    the value axis."""
    import io  # noqa: PLC0415

    buffer = io.BytesIO()
    if release.domain.categorical:
        plot_bars(release, buffer, alpha=alpha, column=column)
    else:
        plot_cdf(release, buffer, alpha=alpha, column=column, log_x=log_x)
    return buffer.getvalue()


def stage_outputs(
    release, output, plot, alpha, *, column: str | None = None, log_x: bool = False, cdf: bool = False
) -> StagedOutputs:
    """The release JSON (and the plot) produced in memory, ready to be written; ``cdf``: the
    JSON carries the CDF with its band (asked for with ``--workload prefix``)."""
    staged = StagedOutputs()
    if output:
        staged.add(output, release.to_json(alpha=alpha, cdf=cdf))
    if plot:
        staged.add(plot, render_plot(release, alpha, column=column, log_x=log_x))
    return staged


def echo_l2_optimum(optimum: float, delta: float, reached_by: str, neighbours: str = "add_remove") -> None:
    """The line of ``dprange error`` with the exact L2 optimum (dprange.optimize.l2_optimum)."""
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

"""``dprange release`` with a privacy unit (``--privacy-id``, ``--max-rows-per-id``) or a
group-by with public keys (``--by``, ``--groups`` / ``--groups-file``): one release, or one per
group under one epsilon, counted by the local streaming engine (:mod:`dprange.api.units`).
"""

from __future__ import annotations

import io

import click

from .. import api
from ..answers.grouped import GroupedRelease
from ..api.common import release_workload
from ..api.private_keys import KEY_SHARE, check_private_keys, split_epsilon
from ..api.units import row_epsilon
from ..errors import DataError, ParameterError
from ..privacy.units import check_unit_release, make_unit
from .options import StagedOutputs, check_seed
from .parse import build_domain, check_no_bounds, chosen_mechanism
from .render import format_categories, format_deciles, stage_outputs
from .report import report_bytes, written
from .session import charge_before_reading, session_summary

#: The options ``dprange release`` takes for privacy units and group-by.
unit_options = [
    click.option(
        "--privacy-id",
        default=None,
        help="Column naming the person of each row.  WITHOUT IT, ONE ROW MUST BE ONE PERSON: with several rows "
        "per person the guarantee is per row, not per person.  Needs --max-rows-per-id.",
    ),
    click.option(
        "--max-rows-per-id",
        type=int,
        default=None,
        help="Rows kept per id (per group with --by), chosen at random; the noise scales with it.",
    ),
    click.option(
        "--by",
        default=None,
        help="Column of the group keys: one release per key of --groups; without --groups the keys are "
        "selected privately from the data (needs --delta; see --key-share).",
    ),
    click.option(
        "--groups",
        default=None,
        help="The public group keys, comma-separated (rows with other keys are dropped; keys are never read "
        "from the data).",
    ),
    click.option(
        "--groups-file",
        type=click.Path(dir_okay=False, exists=True),
        default=None,
        help="Instead of --groups: a text file of the public group keys, one per line.",
    ),
    click.option(
        "--max-groups-per-id",
        type=int,
        default=1,
        show_default=True,
        help="Groups kept per id (chosen at random); each group is released at epsilon / this.",
    ),
    click.option(
        "--key-share",
        type=float,
        default=KEY_SHARE,
        show_default=True,
        help="--by without --groups: the share of epsilon (with all of --delta) that selects the keys privately "
        "(Desfontaines et al., PoPETs 2022); the rest releases the keys kept.",
    ),
]


def wants_units(options: dict) -> bool:
    """Whether any privacy-unit or group-by option was given."""
    keys = ("privacy_id", "max_rows_per_id", "by", "groups", "groups_file")
    given = any(options.get(k) is not None for k in keys) or options.get("max_groups_per_id", 1) != 1
    return given or options.get("key_share", KEY_SHARE) != KEY_SHARE


def group_keys(groups: str | None, groups_file: str | None) -> list[str] | None:
    """The public keys of --groups or --groups-file (read before any data)."""
    if groups is not None and groups_file is not None:
        raise ParameterError("give --groups or --groups-file, not both")
    if groups_file is not None:
        try:
            with open(groups_file, encoding="utf-8") as fh:
                keys = [line.strip() for line in fh if line.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(f"cannot read --groups-file {groups_file!r}: {exc}") from None
        return keys
    if groups is None:
        return None
    return [key.strip() for key in groups.split(",") if key.strip()]


def unit_release_command(o: dict, session, mechanism_params: dict) -> None:
    """The release of one column with a privacy unit and / or group-by (options ``o``, checked
    by the caller up to the session's allotment); prints a table of deciles per group."""
    keys = group_keys(o["groups"], o["groups_file"]) if o.get("by_keys") is None else list(o["by_keys"])
    private_keys = o["by"] is not None and keys is None
    unit = make_unit(o["privacy_id"], o["max_rows_per_id"], o["max_groups_per_id"])
    epsilon, delta = o["epsilon"], o["delta"]
    release_epsilon, release_delta = epsilon, delta
    if private_keys:
        if delta <= 0:
            raise ParameterError(
                "--by needs --groups a,b,c or --groups-file (the public list of keys), or --delta > 0 to select the "
                "keys from the data privately"
            )
        check_private_keys(o["by"], delta, o["key_share"])
        release_epsilon, release_delta = split_epsilon(epsilon, o["key_share"])[1], 0.0
    elif o["key_share"] != KEY_SHARE:
        raise ParameterError("--key-share needs --by without --groups (keys selected privately)")
    run_at = api.row_epsilon(unit, release_epsilon)
    domain, workload = _domain_and_workload(o)
    mech = chosen_mechanism(
        o["mechanism"],
        mechanism_params,
        domain.size,
        run_at,
        release_delta,
        neighbours=o["neighbours"],
        workload=workload,
        inference=o["inference"],
        noise=o["noise"],
    )
    check_seed(o["seed"])
    what = api.files_ledger_what(o["input_path"], o["column"], domain) + _unit_note(unit, o["by"], keys)
    session = charge_before_reading(session, epsilon, delta, o["input_path"], o["engine"], what, mech)
    passed = {
        key: o[key] for key in ("clip", "drop_missing", "privacy_id", "max_rows_per_id", "max_groups_per_id", "by")
    }
    options = {
        "mechanism": mech,
        "delta": delta,
        "rng": o["seed"],
        "groups": keys,
        "key_share": o["key_share"],
        **passed,
    }
    options |= {"engine": o["engine"], "spark": o["spark_master"], "units": o.get("units")}
    result = api.release_files(o["input_path"], o["column"], domain, epsilon, **options)
    lines = [_unit_line(unit)]
    if isinstance(result, GroupedRelease):
        staged = _stage_grouped(result, o["output"], o["plot"], o["alpha"], o["column"])
        for key, release in result.items():
            lines.append(f"{o['by']} = {key}: {release.mechanism} at epsilon={release.epsilon:g}")
            lines.append(_summary(release, o["alpha"]))
        lines.insert(1, f"{len(result)} groups by {o['by']!r}, epsilon={epsilon:g} in all")
        if result.key_selection is not None:
            lines.insert(2, _key_line(result.key_selection, len(result)))
    else:
        staged = stage_outputs(result, o["output"], o["plot"], o["alpha"])
        lines.append(f"{result.mechanism} release of {o['column']!r}: {domain!r}, epsilon={epsilon:g}")
        lines.append(_summary(result, o["alpha"]))
    if o.get("report"):
        page = report_bytes(result, column=o["column"], units=o.get("units"), alpha=o["alpha"])
        staged.add(o["report"], page)
    if session is not None:
        lines.append(session_summary(session, o["session_path"]))
    staged.commit()
    click.echo("\n".join(lines))
    click.echo(f"wrote {written([o['output'], o['plot'], o.get('report')])}")


def _domain_and_workload(o: dict):
    """The public domain of --column (its --categories, or --lo / --hi / --bins) and the
    workload (on categories: one count per category unless --workload is given)."""
    if o.get("categories") is None:
        return build_domain(o["lo"], o["hi"], o["bins"], o["integers"]), o["workload"]
    check_no_bounds(o["lo"], o["hi"], o["bins"], o["integers"], f"--column {o['column']} has --categories")
    domain = o["categories"]
    default = click.get_current_context().get_parameter_source("workload") == click.core.ParameterSource.DEFAULT
    return domain, release_workload(domain, None if default else o["workload"], o["clip"])


def _summary(release, alpha: float) -> str:
    """The table printed for a release: its categories' counts, or its deciles."""
    return format_categories(release, alpha) if release.domain.categorical else format_deciles(release, alpha)


def _stage_grouped(grouped: GroupedRelease, output, plot, alpha, column: str | None = None) -> StagedOutputs:
    staged = StagedOutputs()
    if output:
        staged.add(output, grouped.to_json(alpha=alpha))
    if plot:
        buffer = io.BytesIO()
        grouped.plot(buffer, alpha=alpha, column=column)
        staged.add(plot, buffer.getvalue())
    return staged


def _unit_line(unit) -> str:
    if unit is None:
        return "privacy unit: one row (one row must be one person; see --privacy-id)"
    return (
        f"privacy unit: id column {unit.id_column!r}, at most {unit.max_rows_per_id} rows per id"
        f" (add or remove one id with all its rows; noise calibrated for epsilon / {unit.max_rows_per_id}"
        f"{' / ' + str(unit.max_groups_per_id) if unit.max_groups_per_id > 1 else ''} per row)"
    )


def _key_line(chosen: dict, kept: int) -> str:
    return (
        f"keys selected privately: epsilon={chosen['epsilon']:g}, delta={chosen['delta']:g} "
        f"({kept} kept, sorted; the others and their number are not published)"
    )


def _unit_note(unit, by, keys) -> str:
    if by is not None and keys is None:
        note = f", by {by!r} over keys selected privately"
    else:
        note = "" if by is None else f", by {by!r} over {len(keys or [])} public groups"
    if unit is not None:
        note += f", privacy unit {unit.id_column!r} (at most {unit.max_rows_per_id} rows per id)"
    return note


#: The options ``dprange error`` takes to show the cost of contribution bounding.
error_unit_options = [
    click.option(
        "--max-rows-per-id",
        type=int,
        default=None,
        help="Rows kept per person (dprange release --privacy-id): each row's noise is calibrated for epsilon / K.",
    ),
    click.option("--groups", "group_count", type=int, default=None, help="Groups of a --by release (public keys)."),
    click.option(
        "--max-groups-per-id",
        type=int,
        default=1,
        show_default=True,
        help="Groups kept per person: each group's release gets epsilon / M.",
    ),
]


def bounding_epsilon(epsilon: float, delta: float, neighbours: str, k, groups, m: int) -> float | None:
    """The epsilon each group's mechanism runs at under contribution bounding (k rows per id,
    m of ``groups`` groups per id), or None when no such option was given; checked as a
    release with them would be (pure DP, add/remove)."""
    if k is None and groups is None and m == 1:
        return None
    if groups is not None and groups < 1:
        raise ParameterError(f"--groups must be a number of groups >= 1, got {groups}")
    if m != 1 and (groups is None or k is None):
        raise ParameterError("--max-groups-per-id needs --groups and --max-rows-per-id")
    if groups is not None and m > groups:
        raise ParameterError(f"--max-groups-per-id {m} exceeds --groups {groups}")
    unit = None if k is None else make_unit("id", k, m)
    check_unit_release(unit, delta, neighbours, "dprange error")
    return row_epsilon(unit, epsilon)


def bounding_note(epsilon: float, run_at: float, k, groups, m: int, factor: float) -> str:
    """The line of ``dprange error`` saying what contribution bounding costs."""
    rows = f"at most {k} rows per id" if k is not None else "one row per person"
    where = f", {m} of {groups} groups per id" if groups is not None else ""
    per = " per group" if groups is not None else ""
    return (
        f"contribution bounding: {rows}{where}; the mechanisms run at epsilon {run_at:.6g} per row "
        f"(epsilon {epsilon:g} / {m * (k or 1)}), so the RMSE above{per} is {factor:.4g}x that of one row per "
        f"person at epsilon {epsilon:g}"
    )

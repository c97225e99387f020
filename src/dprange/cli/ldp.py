"""``dprange ldp``: the client (encode), the server (aggregate) and simulation.

Like the main command: every option is checked before data are read, outputs are produced
in memory and written atomically at the end, and errors are one line (``dprange.cli.main``).
"""

from __future__ import annotations

import json
import os

import click
import numpy as np

from .._validation import check_epsilon
from ..domain import Domain
from ..errors import ParameterError, ReportError
from ..io import load_npy, read_column
from ..ldp.protocols import ProtocolReports, protocol_class
from ..ldp.range_protocols import HaarHRR, TreeProtocol
from ..ldp.simulate import SHORTCUT_EXACT, simulate
from ..progress import quiet_for_command
from ..registry import FREQUENCY_ORACLES, INFERENCE, LDP_PROTOCOLS
from .options import (
    RegistryChoice,
    RegistryHelpOption,
    StagedOutputs,
    check_not_an_input,
    check_output_path,
    check_seed,
    check_size,
    check_tree_size,
    redact_option,
    redacting,
    summaries,
    with_options,
)

#: Simulation runs every client for oracles without an exact shortcut (HRR, OLH): O(users).
MAX_PER_USER_SIMULATION = 1 << 28


#: With a shortcut the work is O(bins), but counts must stay exact in float64.
MAX_SIMULATED_USERS = 1 << 52


inference_option = click.option(
    "--inference",
    type=RegistryChoice(INFERENCE.names),
    default="gls",
    show_default=True,
    cls=RegistryHelpOption,
    help_text=lambda: "Post-processing: " + summaries(INFERENCE, INFERENCE.names()) + " (Release.bootstrap).",
)


def build_protocol(protocol, domain_size, epsilon, branching, oracle):
    """The registered protocol of the options, fully validated (epsilon for every level's
    oracle, tree size)."""
    check_epsilon(epsilon)
    if domain_size < 2:
        raise ParameterError(f"local-DP protocols need at least 2 bins, got {domain_size}")
    check_size(domain_size, "the domain")
    proto = LDP_PROTOCOLS.lookup(protocol).build(domain_size, epsilon, oracle=oracle, branching=branching)
    if isinstance(proto, TreeProtocol):
        check_tree_size(proto.tree)
    return proto


def protocol_from_header(header: dict):
    """The protocol a report file declares; any inconsistency in the header is a ReportError."""
    if not isinstance(header, dict):
        raise ReportError("malformed report header: the protocol description is not a JSON object")
    name = header.get("protocol")
    try:
        size = header["domain_size"]
        if isinstance(size, int) and not isinstance(size, bool):  # before any structure of that size is built
            check_size(size, "the report header's domain_size")
        proto = protocol_class(name).from_header(header)
    except KeyError as exc:
        raise ReportError(f"malformed report header: missing {exc}") from None
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:  # ParameterError is a ValueError
        raise ReportError(f"malformed report header: {exc}") from None
    if proto.describe() != header:
        raise ReportError("the report header does not describe a valid protocol")
    return proto


def _domain(lo, hi, bins):
    if lo is None or hi is None:
        raise ParameterError("give the public bounds with --lo and --hi")
    if bins is None:
        domain = Domain.integers(lo, hi)
        check_size(domain.size, f"one bin per integer over [{domain.lo}, {domain.hi}]")
        return domain
    if bins > 0:
        check_size(bins, f"--bins {bins}")
    return Domain.interval(lo, hi, bins)


protocol_options = [
    click.option(
        "--protocol",
        type=RegistryChoice(LDP_PROTOCOLS.names),
        default="hierarchical",
        show_default=True,
        cls=RegistryHelpOption,
        help_text=lambda: "Range-query protocol: " + summaries(LDP_PROTOCOLS, LDP_PROTOCOLS.names()) + ".",
    ),
    click.option(
        "--oracle",
        type=RegistryChoice(FREQUENCY_ORACLES.names),
        default="oue",
        show_default=True,
        cls=RegistryHelpOption,
        help_text=lambda: (
            "Frequency oracle of the protocols that take one: "
            + summaries(FREQUENCY_ORACLES, FREQUENCY_ORACLES.names())
            + "."
        ),
    ),
    click.option("--branching", type=int, default=4, show_default=True, help="Branching factor of the hierarchy."),
    click.option("--epsilon", "-e", type=float, required=True, help="Each user's privacy budget (local DP)."),
]


@click.group("ldp")
@click.option("--quiet", is_flag=True, help="No progress bars (they appear only on a terminal, for long work).")
def ldp(quiet):
    """Local differential privacy: users randomise their own values (Cormode et al. 2019).

    encode (client) -> report files -> aggregate (server) -> release JSON; simulate runs a
    whole population without materialising reports where that is exact.
    """
    quiet_for_command(quiet)


@ldp.command("encode")
@click.argument("input_path", metavar="INPUT", type=click.Path(dir_okay=False))
@click.option("--column", "-c", required=True, help="Numeric column holding each user's value.")
@click.option("--lo", type=float, help="Public lower bound.")
@click.option("--hi", type=float, help="Public upper bound.")
@click.option("--bins", type=int, default=None, help="Equal bins over [lo, hi] (default: one bin per integer).")
@with_options(protocol_options)
@click.option("--seed", type=int, default=None, help="Seed for experiments only; the default reads OS entropy.")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    default="reports.npz",
    show_default=True,
    help="Where to write the randomised reports (.jsonl/.json: JSON lines; else compact binary).",
)
@redact_option
def encode(input_path, column, lo, hi, bins, protocol, oracle, branching, epsilon, seed, output):
    """Client side: randomise every row's value and write the reports (never the values)."""
    check_output_path(output)
    check_not_an_input(output, [input_path])
    check_seed(seed)
    domain = _domain(lo, hi, bins)
    proto = build_protocol(protocol, domain.size, epsilon, branching, oracle)
    values = domain.bucketize(read_column(input_path, column))
    if values.size == 0:
        raise ParameterError(f"{input_path!r} has no rows in column {column!r}; there is nothing to encode")
    reports = proto.randomize(values, seed)
    staged = StagedOutputs()
    staged.add(output, reports.encoded(output))
    staged.commit()
    click.echo(f"wrote {reports.n} reports ({proto.name}, epsilon={epsilon:g}, {domain!r}) to {output}")


@ldp.command("aggregate")
@click.argument("reports", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--lo", type=float, help="Public lower bound (labels the release's domain).")
@click.option("--hi", type=float, help="Public upper bound.")
@click.option("--bins", type=int, default=None, help="Equal bins over [lo, hi] (default: one bin per integer).")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    default="release.json",
    show_default=True,
    help="Where to write the release as JSON.",
)
@inference_option
@redact_option
def aggregate(reports, lo, hi, bins, output, inference):
    """Server side: merge report files (all from one protocol) into a release JSON."""
    check_output_path(output)
    check_not_an_input(output, reports)
    domain = _domain(lo, hi, bins) if lo is not None or hi is not None or bins is not None else None
    _check_distinct(reports)
    loaded = [_load(path) for path in reports]
    try:
        proto = protocol_from_header(loaded[0].header)
    except ReportError as exc:
        raise ReportError(f"{reports[0]}: {exc}") from None
    if domain is not None and domain.size != proto.domain_size:
        raise ParameterError(
            f"--lo/--hi/--bins give {domain.size} bins but the reports cover {proto.domain_size} values; "
            "give the bounds the reports were encoded with"
        )
    agg = proto.aggregator()
    for path, rep in zip(reports, loaded):
        try:
            agg.add(rep)
        except ReportError as exc:
            raise ReportError(f"{path}: {exc}") from None
    release = agg.release(domain, inference=inference)
    staged = StagedOutputs()
    staged.add(output, release.to_json())
    staged.commit()
    click.echo(f"aggregated {agg.n} reports from {len(reports)} file(s) with {proto.name}; wrote {output}")


def _check_distinct(paths) -> None:
    """The same file twice would count its users twice."""
    seen: dict[str, str] = {}
    for path in paths:
        key = os.path.realpath(path)
        if key in seen:
            raise ParameterError(
                f"report file {path!r} is given twice (as {seen[key]!r}); each user must be counted once"
            )
        seen[key] = path


def _load(path) -> ProtocolReports:
    try:
        return ProtocolReports.load(path)
    except ReportError as exc:
        message = str(exc)
        raise ReportError(message if str(path) in message else f"{path}: {message}") from None


@ldp.command("simulate")
@click.argument("input_path", metavar="INPUT", type=click.Path(dir_okay=False))
@click.option("--column", "-c", default=None, help="CSV/Parquet column of values; omit for a .npy histogram.")
@click.option("--lo", type=float, help="Public lower bound (with --column).")
@click.option("--hi", type=float, help="Public upper bound (with --column).")
@click.option("--bins", type=int, default=None, help="Equal bins over [lo, hi].")
@with_options(protocol_options)
@click.option("--scale", type=int, default=1, show_default=True, help="Replicate the population this many times.")
@click.option("--seed", type=int, default=None, help="Seed of the simulation.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None, help="Also write the release JSON.")
@inference_option
@redact_option
def simulate_command(
    input_path, column, lo, hi, bins, protocol, oracle, branching, epsilon, scale, seed, output, inference
):
    """Simulate the protocol on a population and print its range and prefix errors (RMSE x 1000)."""
    if output is not None:
        check_output_path(output)
        check_not_an_input(output, [input_path])
    check_seed(seed)
    if scale < 1:
        raise ParameterError(f"--scale must be an integer >= 1, got {scale}")
    check_epsilon(epsilon)
    if column is None:
        if lo is not None or hi is not None or bins is not None:
            raise ParameterError("--lo, --hi and --bins apply to --column; a .npy histogram already has its bins")
        counts = load_histogram(input_path)
        domain = None
        proto = build_protocol(protocol, counts.size, epsilon, branching, oracle)
    else:
        domain = _domain(lo, hi, bins)
        proto = build_protocol(protocol, domain.size, epsilon, branching, oracle)
        counts = domain.histogram(read_column(input_path, column))
    counts = scaled_population(counts, scale, proto, oracle)
    release = simulate(proto, counts, rng=seed).release(domain, inference=inference)
    n = counts.sum()
    truth = np.concatenate([[0], np.cumsum(counts)])
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, counts.size, (2, 100_000))
    lo_q, hi_q = np.minimum(a, b), np.maximum(a, b)
    rmse_range = np.sqrt(np.mean((release.range(lo_q, hi_q).value - (truth[hi_q + 1] - truth[lo_q])) ** 2)) / n
    prefix = release.prefix(np.arange(counts.size)).value
    rmse_prefix = np.sqrt(np.mean((prefix - truth[1:]) ** 2)) / n
    result = {
        "protocol": proto.describe(),
        "users": int(n),
        "inference": inference,
        "rmse_x1000_ranges": 1000 * rmse_range,
        "rmse_x1000_prefixes": 1000 * rmse_prefix,
    }
    if output:
        staged = StagedOutputs()
        staged.add(output, release.to_json())
        staged.commit()
    click.echo(json.dumps(result, indent=1))


def load_histogram(path) -> np.ndarray:
    """A population histogram from a .npy file: a 1-D array of non-negative whole numbers
    (floats are accepted only when every entry is a whole number: never truncated)."""
    counts = load_npy(path)
    if not isinstance(counts, np.ndarray) or counts.dtype.kind not in "iuf":
        kind = "a .npz archive" if not isinstance(counts, np.ndarray) else f"dtype {counts.dtype}"
        raise ParameterError(f"{path!r} must hold a numeric histogram (integer counts), not {kind}")
    if counts.ndim != 1:
        raise ParameterError(f"{path!r} must hold a 1-D histogram (one count per bin), got shape {counts.shape}")
    if counts.size < 2:
        raise ParameterError(f"{path!r} holds {counts.size} bin(s); a histogram needs at least 2 bins")
    check_size(counts.size, f"the histogram in {path!r}")
    if counts.dtype.kind == "f":
        finite = np.isfinite(counts)
        if not finite.all() or np.any(counts != np.floor(counts)):
            raise ParameterError(
                f"{path!r} must hold whole-number counts; it has fractional, NaN or infinite "
                "entries (they are never rounded)"
            )
        if np.any(np.abs(counts) > 2.0**53):
            raise ParameterError(f"{path!r} has counts above 2^53, which float64 cannot hold exactly")
    if np.any(counts < 0):
        raise ParameterError(f"{path!r} has negative counts; a histogram counts users")
    if counts.dtype.kind == "u" and counts.max() > np.iinfo(np.int64).max:
        raise ParameterError(f"{path!r} has counts above 2^63")
    return counts.astype(np.int64)


def scaled_population(counts, scale: int, proto, oracle: str) -> np.ndarray:
    """counts * scale, refused when it has no users or more than the simulation can run."""
    users = int(counts.sum()) * scale
    if users == 0:
        raise ParameterError("the population is empty (every count is 0); there is nothing to simulate")
    per_user = isinstance(proto, HaarHRR) or not SHORTCUT_EXACT.get(oracle, False)
    limit = MAX_PER_USER_SIMULATION if per_user else MAX_SIMULATED_USERS
    if users > limit:
        how = "runs every client" if per_user else "keeps counts exact in float64"
        count = "too many" if redacting() else str(users)
        raise ParameterError(
            f"the simulation would have {count} users; with this protocol and oracle it {how} and "
            f"supports at most {limit}; lower --scale"
        )
    return counts * scale

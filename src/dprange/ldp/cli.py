"""``dprange ldp``: the client (encode), the server (aggregate) and simulation."""

from __future__ import annotations

import json
import os

import click
import numpy as np

from .._cli_helpers import with_options
from ..domain import Domain
from ..errors import ParameterError, ReportError
from ..io import load_npy, read_column
from .protocols import Flat, HaarHRR, HierarchicalHistogram, ProtocolReports
from .simulate import simulate

PROTOCOLS = ("hierarchical", "haar", "flat")


def build_protocol(protocol, domain_size, epsilon, branching, oracle):
    if protocol == "hierarchical":
        return HierarchicalHistogram(domain_size, branching, oracle, epsilon=epsilon)
    if protocol == "haar":
        return HaarHRR(domain_size, epsilon=epsilon)
    if protocol == "flat":
        return Flat(domain_size, oracle, epsilon=epsilon)
    raise ParameterError(f"unknown protocol {protocol!r}")


def protocol_from_header(header: dict):
    name = header.get("protocol")
    try:
        if name == "ldp-hierarchical":
            proto = HierarchicalHistogram(header["domain_size"], header["branching"], header["oracle"],
                                          epsilon=header["epsilon"], level_probabilities=header["level_probabilities"],
                                          oracle_options=header.get("oracle_options") or None)
        elif name == "ldp-haar-hrr":
            proto = HaarHRR(header["domain_size"], epsilon=header["epsilon"],
                            level_probabilities=header["level_probabilities"])
        elif name == "ldp-flat":
            proto = Flat(header["domain_size"], header["oracle"], epsilon=header["epsilon"],
                         oracle_options=header.get("oracle_options") or None)
        else:
            raise ReportError(f"unknown protocol {name!r} in the reports")
    except (KeyError, TypeError) as exc:
        raise ReportError(f"malformed report header: missing {exc}") from None
    if proto.describe() != header:
        raise ReportError("the report header does not describe a valid protocol")
    return proto


def _domain(lo, hi, bins):
    if lo is None or hi is None:
        raise ParameterError("give the public bounds with --lo and --hi")
    return Domain.integers(lo, hi) if bins is None else Domain.interval(lo, hi, bins)


protocol_options = [
    click.option("--protocol", type=click.Choice(PROTOCOLS), default="hierarchical", show_default=True,
                 help="hierarchical (HH_B), haar (HaarHRR) or flat (one frequency oracle)."),
    click.option("--oracle", type=click.Choice(["oue", "olh", "hrr", "grr"]), default="oue", show_default=True,
                 help="Frequency oracle for hierarchical and flat."),
    click.option("--branching", type=int, default=4, show_default=True, help="Branching factor of the hierarchy."),
    click.option("--epsilon", "-e", type=float, required=True, help="Each user's privacy budget (local DP)."),
]


@click.group("ldp")
def ldp():
    """Local differential privacy: users randomise their own values (Cormode et al. 2019).

    encode (client) -> report files -> aggregate (server) -> release JSON; simulate runs a
    whole population without materialising reports where that is exact.
    """


@ldp.command("encode")
@click.argument("input_path", metavar="INPUT", type=click.Path(dir_okay=False))
@click.option("--column", "-c", required=True, help="Numeric column holding each user's value.")
@click.option("--lo", type=float, help="Public lower bound.")
@click.option("--hi", type=float, help="Public upper bound.")
@click.option("--bins", type=int, default=None, help="Equal bins over [lo, hi] (default: one bin per integer).")
@with_options(protocol_options)
@click.option("--seed", type=int, default=None, help="Seed for experiments only; the default reads OS entropy.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default="reports.npz", show_default=True,
              help="Where to write the randomised reports (compact binary).")
def encode(input_path, column, lo, hi, bins, protocol, oracle, branching, epsilon, seed, output):
    """Client side: randomise every row's value and write the reports (never the values)."""
    domain = _domain(lo, hi, bins)
    values = domain.bucketize(read_column(input_path, column))
    proto = build_protocol(protocol, domain.size, epsilon, branching, oracle)
    reports = proto.randomize(values, seed)
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    reports.save(output)
    click.echo(f"wrote {reports.n} reports ({proto.name}, epsilon={epsilon:g}, {domain!r}) to {output}")


@ldp.command("aggregate")
@click.argument("reports", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--lo", type=float, help="Public lower bound (labels the release's domain).")
@click.option("--hi", type=float, help="Public upper bound.")
@click.option("--bins", type=int, default=None, help="Equal bins over [lo, hi] (default: one bin per integer).")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default="release.json", show_default=True)
def aggregate(reports, lo, hi, bins, output):
    """Server side: merge report files (all from one protocol) into a release JSON."""
    loaded = [ProtocolReports.load(path) for path in reports]
    proto = protocol_from_header(loaded[0].header)
    agg = proto.aggregator()
    for path, rep in zip(reports, loaded):
        try:
            agg.add(rep)
        except ReportError as exc:
            raise ReportError(f"{path}: {exc}") from None
    domain = _domain(lo, hi, bins) if lo is not None or hi is not None else None
    release = agg.release(domain)
    release.to_json(output)
    click.echo(f"aggregated {agg.n} reports from {len(reports)} file(s) with {proto.name}; wrote {output}")


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
def simulate_command(input_path, column, lo, hi, bins, protocol, oracle, branching, epsilon, scale, seed, output):
    """Simulate the protocol on a population and print its range and prefix errors (RMSE x 1000)."""
    if column is None:
        try:
            counts = load_npy(input_path)
        except (OSError, ValueError) as exc:
            raise ParameterError(f"cannot read {input_path!r} as a .npy histogram: {exc}") from None
        domain = None
    else:
        domain = _domain(lo, hi, bins)
        counts = domain.histogram(read_column(input_path, column))
    counts = np.asarray(counts).astype(np.int64) * scale
    proto = build_protocol(protocol, counts.size, epsilon, branching, oracle)
    release = simulate(proto, counts, rng=seed).release(domain)
    n = counts.sum()
    truth = np.concatenate([[0], np.cumsum(counts)])
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, counts.size, (2, 100_000))
    lo_q, hi_q = np.minimum(a, b), np.maximum(a, b)
    rmse_range = np.sqrt(np.mean((release.range(lo_q, hi_q).value - (truth[hi_q + 1] - truth[lo_q])) ** 2)) / n
    prefix = release.prefix(np.arange(counts.size)).value
    rmse_prefix = np.sqrt(np.mean((prefix - truth[1:]) ** 2)) / n
    result = {"protocol": proto.describe(), "users": int(n), "rmse_x1000_ranges": 1000 * rmse_range,
              "rmse_x1000_prefixes": 1000 * rmse_prefix}
    if output:
        release.to_json(output)
    click.echo(json.dumps(result, indent=1))

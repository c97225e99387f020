"""Small helpers shared by the ``dprange`` command and its ``ldp`` group.

* option lists (``with_options``) and early validation of options (``check_alpha``,
  ``check_output_path``, ``check_plot_path``, ``check_size``), so that a bad option fails
  before any data is read or any file is written;
* options generated from the registry (:mod:`dprange.registry`): ``RegistryChoice`` reads
  the registered names when the option is used, ``RegistryHelpOption`` writes its help from
  their summaries when help is shown, and ``mechanism_param_options`` makes one option per
  declared mechanism parameter that names one (``--branching``...);
* ``StagedOutputs``: every output is produced in memory first and written at the end,
  each through a temporary file in its target folder and ``os.replace``, so a failure
  leaves no output behind (not even a folder the command created);
* ``cli_message`` (in :mod:`.messages`): library messages name Python keywords (``clip=True``);
  the command line user needs option names (``--clip``);
* ``--redact``: sets ``DPRANGE_REDACT=1`` for the run, which the library honours by keeping
  private quantities (counts of bad rows, raw values, row numbers) out of its messages.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Sequence

import click

from .._params import Flag, OneOf, Param, find
from .._validation import NEIGHBOURS
from ..answers.writers import published_mode
from ..errors import ParameterError
from ..mechanisms.base import Mechanism
from ..registry import GRID_MECHANISMS, GRID_WORKLOADS, INFERENCE, MECHANISMS, NOISE, WORKLOADS, Registry

# The entry point reads these from .messages (without the registry); re-exported for the command modules.
from .messages import REDACT_VARIABLE
from .messages import cli_message as cli_message
from .messages import redacting as redacting

#: Largest number of bins (or padded tree leaves) the command accepts, stricter than the
#: library's :data:`dprange.domain.MAX_BINS` (2^26): 2^24 bins take 128 MiB per int64 array,
#: and a command-line release also writes every bin to JSON.
CLI_MAX_BINS = 1 << 24


#: Largest --queries of the random-ranges workload (two int64 arrays of this length).
MAX_QUERIES = 10_000_000


def with_options(options):
    """Apply a list of click options to a command, in order."""

    def decorate(func):
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


# ---------------------------------------------------------------- options from the registry
class RegistryChoice(click.Choice):
    """A choice among names read when the option is used, so that a name registered after
    the command was defined is a valid choice too."""

    def __init__(self, names: Callable[[], Sequence[str]]):
        self._names = names
        super().__init__((), case_sensitive=True)

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(self._names())

    @choices.setter
    def choices(self, value) -> None:
        """click.Choice sets its choices once; here the registry is read instead."""


class RegistryHelpOption(click.Option):
    """An option whose help text is written (from the registry) when help is shown."""

    def __init__(self, *args, help_text: Callable[[], str], **kwargs):
        super().__init__(*args, **kwargs)
        self.help_text = help_text

    def get_help_record(self, ctx):
        self.help = self.help_text()
        return super().get_help_record(ctx)


def summaries(registry: Registry, names: Sequence[str]) -> str:
    """ "name: summary" of each of ``names``, for a help text."""
    return "; ".join(f"{name}: {registry[name].summary}" for name in names)


def mechanism_params(registry: Registry) -> dict[str, tuple[Param, list[str]]]:
    """{parameter name: (its declaration, the mechanisms declaring it)} for every declared
    parameter of a mechanism buildable by name that names a command-line option."""
    out: dict[str, tuple[Param, list[str]]] = {}
    for entry in registry.values():
        if entry.nameable:
            for param in entry.params:
                if param.option:
                    out.setdefault(param.name, (param, []))[1].append(entry.name)
    return out


def mechanism_param_options(registry: Registry) -> list:
    """One click option per mechanism parameter that names an option, defaulting to None
    (not given: the class's declared default applies)."""
    options = []
    for name, (param, owners) in mechanism_params(registry).items():
        where = " or ".join(owners)
        implied = f"given without --mechanism, it selects {owners[0]}" if len(owners) == 1 else "give --mechanism"
        default = "" if isinstance(param.constraint, Flag) else f" [default: {param.default}]"
        options.append(
            click.option(
                param.option,
                name,
                default=None,
                help=f"--mechanism {where} only ({implied}): {param.doc}.{default}",
            )
        )
    return options


def option_of(registry: Registry, name: str) -> str:
    """The option of mechanism parameter ``name`` ("--root/--no-root" reads "--root")."""
    return mechanism_params(registry)[name][0].option.split("/")[0]


def parse_mechanism_params(registry: Registry, mechanism: str, given: dict, *, explicit: bool) -> tuple[str, dict]:
    """The mechanism named (or implied) and its parameters from the options ``given``.

    Options given without --mechanism (``explicit`` False) select the one mechanism that
    declares them all; an option that the mechanism does not declare is an error (it would
    otherwise be ignored silently), and so is any with auto, which chooses its own."""
    if not given:
        return mechanism, {}
    options = ", ".join(option_of(registry, name) for name in given)
    if not explicit:
        owners = [
            name for name, entry in registry.items() if entry.nameable and set(given) <= {p.name for p in entry.params}
        ]
        if len(owners) != 1:
            raise ParameterError(
                f"{options}: give --mechanism ({' or '.join(owners) or 'no mechanism takes them all'})"
            )
        mechanism = owners[0]
    if mechanism == "auto":
        owners = sorted({owner for name in given for owner in mechanism_params(registry)[name][1]})
        raise ParameterError(
            f"{options} cannot be given with --mechanism auto, which chooses its own parameters; "
            f"use --mechanism {' or '.join(owners)}"
        )
    declared = {p.name: p for p in registry.lookup(mechanism).params}
    params = {}
    for name, value in given.items():
        if name not in declared:
            raise ParameterError(f"{option_of(registry, name)} is not a parameter of --mechanism {mechanism}")
        param = declared[name]
        params[name] = value if isinstance(value, bool) else param.constraint.parse(value, option_of(registry, name))
    return mechanism, params


# ---------------------------------------------------------------- early option checks
def check_alpha(alpha: float) -> float:
    """--alpha: the intervals' level is 1 - alpha, so alpha must lie strictly between 0 and 1."""
    if not (math.isfinite(alpha) and 0.0 < alpha < 1.0):
        raise ParameterError(f"--alpha must be a number in (0, 1) (intervals at level 1 - alpha), got {alpha!r}")
    return alpha


def check_output_path(path: str, option: str = "--output") -> str:
    """An output path must name a file: not empty, not a folder, not inside a file."""
    if path is None or not str(path).strip():
        raise ParameterError(f"{option} is empty; give the path of the file to write")
    if os.path.isdir(path) or str(path).endswith((os.sep, "/")):
        raise ParameterError(
            f"{option} {path!r} is a folder; give a file path such as {os.path.join(path, 'release.json')!r}"
        )
    parent = _existing_ancestor(os.path.dirname(os.path.abspath(path)))
    if not os.path.isdir(parent):
        raise ParameterError(f"{option} {path!r} lies inside {parent!r}, which is a file, not a folder")
    if not os.access(parent, os.W_OK):
        raise ParameterError(f"{option} {path!r}: cannot write in {parent!r} (permission denied)")
    return path


def check_not_an_input(path: str | None, inputs, option: str = "--output") -> None:
    """Writing an output over an input file would destroy the data (or the reports)."""
    if not path:
        return
    target = os.path.realpath(path)
    for source in inputs:
        if os.path.realpath(source) == target:
            raise ParameterError(f"{option} {path!r} is the input file {source!r}; write the output elsewhere")


def check_output_folder(path: str, option: str = "--output") -> str:
    """An output folder (demo): not empty and not an existing file."""
    if path is None or not str(path).strip():
        raise ParameterError(f"{option} is empty; give the folder to write into")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ParameterError(f"{option} {path!r} is a file, not a folder")
    parent = _existing_ancestor(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ParameterError(f"{option} {path!r} lies inside {parent!r}, which is a file, not a folder")
    return path


def _existing_ancestor(folder: str) -> str:
    while folder and not os.path.exists(folder):
        up = os.path.dirname(folder)
        if up == folder:
            break
        folder = up
    return folder


PLOT_SUFFIXES = (".png",)


def check_plot_path(path: str | None) -> str | None:
    """--plot must name a .png file, and matplotlib must be installed (checked before any work)."""
    if path is None:
        return None
    check_output_path(path, "--plot")
    if not str(path).lower().endswith(PLOT_SUFFIXES):
        raise ParameterError(f"--plot {path!r} must end in .png (the plot is saved as PNG)")
    try:
        import matplotlib  # noqa: F401, PLC0415
    except ImportError:
        raise ParameterError("--plot needs matplotlib: pip install 'dprange[plot]', or leave out --plot") from None
    return path


def check_seed(seed) -> None:
    """--seed: a non-negative integer (or absent)."""
    if seed is not None and seed < 0:
        raise ParameterError(f"--seed must be a non-negative integer, got {seed}")


def check_size(size: int, what: str) -> int:
    """A number of bins (or padded leaves) the machine can hold, else a clear error."""
    limit = CLI_MAX_BINS
    if size > limit:
        raise ParameterError(f"{what} gives {size} bins, more than the {limit} dprange supports; use fewer bins")
    return size


def check_tree_size(strategy, option: str = "--branching") -> None:
    """A tree whose levels pad far beyond the domain (a factor larger than the bins) is refused."""
    limit = CLI_MAX_BINS
    for d, b in enumerate(strategy.branching):
        padded = strategy.level_sizes[d] * b
        if padded > limit:
            raise ParameterError(
                f"{option} factor {b} pads a level to {padded} nodes, more than the {limit} "
                f"dprange supports; use factors of at most {max(2, strategy.n)}"
            )


# ---------------------------------------------------------------- outputs
class StagedOutputs:
    """Outputs kept in memory until :meth:`commit` writes them all.

    Each file goes to a temporary file in its target folder, then ``os.replace`` puts it in
    place, so a reader never sees a partial file and a failure leaves nothing behind
    (temporary files and folders created for the outputs are removed again).  The files are
    releases and plots, meant to be published: their mode follows the umask
    (:func:`~dprange.answers.writers.published_mode`)."""

    def __init__(self):
        self.files: list[tuple[str, bytes]] = []

    def add(self, path: str, content) -> None:
        self.files.append((path, content.encode("utf-8") if isinstance(content, str) else bytes(content)))

    def commit(self) -> None:
        created: list[str] = []
        temporary: list[tuple[str, str]] = []
        try:
            for path, data in self.files:
                folder = os.path.dirname(os.path.abspath(path))
                created.extend(_make_folders(folder))
                fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
                temporary.append((tmp, path))
                with os.fdopen(fd, "wb") as fh:
                    os.fchmod(fh.fileno(), published_mode())  # mkstemp made it 0600; a release follows the umask
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
            for tmp, path in temporary:
                os.replace(tmp, path)
        except BaseException:
            for tmp, _ in temporary:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            for folder in reversed(created):
                try:
                    os.rmdir(folder)
                except OSError:
                    pass
            raise


def _make_folders(folder: str) -> list[str]:
    """Create ``folder`` and missing parents; return the ones created, outermost first."""
    missing = []
    while folder and not os.path.exists(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    for path in reversed(missing):
        os.mkdir(path)
    return list(reversed(missing))


# ---------------------------------------------------------------- --redact
def _set_redact(ctx, param, value):
    if value:
        os.environ[REDACT_VARIABLE] = "1"
    return value


redact_option = click.option(
    "--redact",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=_set_redact,
    help="Keep private quantities (counts of bad rows, raw values, row numbers) out of error messages.",
)


def _mechanism_choices() -> tuple[str, ...]:
    """--mechanism: the mechanisms a name builds (1-D, then k-D for several columns), and auto."""
    names = (*MECHANISMS.names(nameable=True), *GRID_MECHANISMS.names(nameable=True), "auto")
    return tuple(dict.fromkeys(names))  # a name in both (auto-data) once


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

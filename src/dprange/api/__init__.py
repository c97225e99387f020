"""The facade: ``dprange.release`` (one column, from values, frames or files), ``release_grid``
(several columns) and ``quantiles`` (from raw values).  Each checks its parameters, charges its
session before the data are read, chooses the mechanism by exact expected error where asked,
and hands the counts to the pipeline."""

from .common import REPLACE_DROP_MISSING_MESSAGE, charge_before_reading, make_mechanism, resolve_neighbours
from .grid import choose_grid_mechanism, release_grid
from .histogram import check_release, choose_mechanism, files_ledger_what, release, release_files
from .quantile_release import histogram_binned, quantiles, quantiles_ledger_what
from .units import group_epsilon, row_epsilon

__all__ = [
    "REPLACE_DROP_MISSING_MESSAGE",
    "charge_before_reading",
    "check_release",
    "choose_grid_mechanism",
    "choose_mechanism",
    "files_ledger_what",
    "group_epsilon",
    "histogram_binned",
    "make_mechanism",
    "quantiles",
    "quantiles_ledger_what",
    "release",
    "release_files",
    "release_grid",
    "resolve_neighbours",
    "row_epsilon",
]

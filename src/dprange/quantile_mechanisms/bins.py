"""The histogram route's resolution from the signal n x epsilon, and where n comes from.

The histogram route of :func:`dprange.quantiles` (a private histogram for the prefix
workload, read by ``Release.quantile``; Qardaji, Yang and Li, PVLDB 2013) cuts real (or wide
integer) bounds into equal bins.  Its error has two parts: the noise of a prefix count, which
grows with the tree's depth (log bins) and as 1 / epsilon, and the records that linear
interpolation misplaces inside the bin that holds a quantile, which grow as n / bins.  They
balance where bins is proportional to the signal n x epsilon: :func:`histogram_bins` is
2^round(log2(n epsilon / 32)), clipped to [8, 2^16].

The constants (p = 1, c = 1/32 in 2^round(log2(c (n epsilon)^p))) were fitted over all cells
of ``benchmarks/quantile_bins.py`` at once and checked on held-out trials; the calibration,
its worst cells and the held-out check are in docs/quantiles.md, "The histogram route's bins".
Uniform data want fewer bins (interpolation is exact on them), so they are the rule's worst
case.

n is private under add/remove.  :func:`record_count` takes it from public facts first: n
itself under "replace" (published exactly by that relation), a declared public ``n_max``
(an upper bound: the bins are then those of n_max records), else a noisy count that spends
its own declared share of epsilon (exact discrete Laplace of scale 1 / epsilon_count, the
count's sensitivity under add/remove being 1): an epsilon_count-DP release, composed
sequentially with the rest (the total spend is recorded in the result).  The bins need only
the order of magnitude of n: at the default share 5% and epsilon 0.1 the count's noise has
standard deviation about 283 records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ParameterError
from ..privacy.samplers import sample_discrete_laplace
from .private_bounds import noise_scale

SIGNAL_PER_BIN = 32  # n x epsilon per bin at the balance point (calibrated, see the module doc)


MIN_BINS = 8


MAX_BINS = 2**16  # beyond the measured range (n epsilon <= 32561: 1024 bins) the rule extrapolates


COUNT_SHARE = 0.05  # default share of epsilon for the noisy count


MAX_EPSILON_ONLY_BINS = 1024


def histogram_bins(signal: float) -> int:
    """Bins of the histogram route for the signal n x epsilon: 2^round(log2(signal / 32)),
    clipped to [8, 2^16] (the module doc has the calibration)."""
    if not signal > 0 or not math.isfinite(signal):
        return MIN_BINS if not signal > 0 else MAX_BINS
    return int(min(MAX_BINS, max(MIN_BINS, 2 ** round(math.log2(signal / SIGNAL_PER_BIN)))))


def epsilon_only_bins(epsilon: float) -> int:
    """Bins when no record count may be used (count_share=0, n private and no n_max):
    clip(2^round(log2(2560 epsilon)), 64, 1024), i.e. :func:`histogram_bins` at about 82000
    records, capped at 1024."""
    return int(min(MAX_EPSILON_ONLY_BINS, max(64, 2 ** round(math.log2(2560 * epsilon)))))


@dataclass(frozen=True)
class RecordCount:
    """The number of records the bins and the automatic choice use, and where it came from.

    ``source``: "public" (n under replace neighbours), "n_max" (a declared public upper
    bound) or "noisy count" (``value`` is max(1, n + discrete Laplace noise), epsilon_count-DP);
    ``epsilon``: what it cost (0 unless noisy)."""

    value: int
    source: str
    epsilon: float = 0.0

    def to_dict(self) -> dict:
        return {"value": self.value, "source": self.source, "epsilon": self.epsilon}


def check_count_share(count_share) -> float:
    if isinstance(count_share, bool) or not isinstance(count_share, float | int) or not 0 <= count_share < 1:
        raise ParameterError(
            f"count_share must be a number in [0, 1) (CLI: --count-share), got {count_share!r}; "
            "0 spends nothing on a record count"
        )
    return float(count_share)


def noisy_count(n: int, epsilon: float, rng) -> int:
    """n plus exact discrete Laplace noise of scale 1 / epsilon (rounded up): epsilon-DP
    under add/remove, where one record changes n by 1; at least 1.  Cost: one draw."""
    noise = int(sample_discrete_laplace(noise_scale(epsilon, "add_remove"), 1, rng)[0])
    return max(1, int(n) + noise)


def public_count(n: int, *, neighbours: str, n_max: int | None) -> RecordCount | None:
    """The record count from public facts, or None when only a paid-for count would do."""
    if neighbours == "replace":
        return RecordCount(int(n), "public")
    if n_max is not None:
        return RecordCount(int(n_max), "n_max")
    return None


def record_count(n: int, epsilon_count: float, *, rng) -> RecordCount:
    """A noisy count of ``n`` records at ``epsilon_count`` (> 0)."""
    if not epsilon_count > 0:
        raise ParameterError("a noisy record count needs count_share > 0 (CLI: --count-share)")
    return RecordCount(noisy_count(n, epsilon_count, rng), "noisy count", float(epsilon_count))

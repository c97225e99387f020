"""``dawa_pruned``: DAWA over the Hilbert order with the buckets whose estimate does not stand out
of its own noise set to zero and the rest scaled back to the total.

DAWA (:class:`~dprange.data_aware.grid.DAWAHilbert`) measures a few buckets of the Hilbert-ordered
cells and spreads each bucket's estimate evenly over its cells.  Where few records lie among many
empty cells and the signal per cell is low (10^3 records at epsilon 0.1), most buckets are empty
and their noisy estimates, spread over every cell they cover, are most of a rectangle's error.
This release keeps DAWA's partition and measurements and post-processes its bucket estimates:

1. run DAWA on the Hilbert order (:class:`~dprange.data_aware.grid.DAWAHilbert`, every private
   step of it, recorded);
2. mark *empty*, of the buckets whose estimated total is below ``threshold`` times its standard
   error (the noise-only error model of the bucket estimate given the partition: public once
   the partition is released), taken from the lowest ratio of the two up, the longest run whose
   estimates sum to below ``joint`` times the standard error of that sum (:func:`marked_buckets`);
   none where no run passes;
3. publish the estimate with the marked buckets at zero and the others multiplied by the total
   over their sum (:func:`pruned_totals`; the total is DAWA's estimated one, 0 if negative, or
   the public one under replace), each spread evenly over its cells as DAWA does; where none is
   marked, or no bucket stands out, DAWA's estimate itself.

It has DAWA's privacy (its recorded steps): the marks and the scale read the noisy bucket
estimates and their public error model, never the data.  A marked bucket that holds records loses
them to the others in proportion to their estimates (the total is kept), a bias that depends on
the data: the answers have no exact error bars, and no noise-only ones either (the scale moves
with the noise of every bucket); the bootstrap re-draws the bucket measurements around the
released estimate and re-runs steps 2-3 with the partition held, so it describes the noise given
the buckets, not the error of spreading a bucket evenly: read it as a lower bound on the error
(docs/data-aware.md, "dawa_pruned").  The default threshold, 3, keeps a bucket only when it
stands out clearly: at the low signal where this release wins, a lower one keeps noise spikes and
loses most of the gain (docs/data-aware.md, "dawa_pruned").  The joint test keeps a smooth grid's
many light buckets, each below its threshold but together holding many records, from being
emptied; on heaped grids the empty buckets pass it and a light bucket that holds a few records
is left out of the run.

The pruning of buckets that hold nothing is PrivTree's (Zhang, Xiao and Xie, SIGMOD 2016) taken as
post-processing of DAWA's buckets (Li, Hay, Miklau and Wang, PVLDB 2014).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._params import Custom, Param
from ..answers.bootstrap import resample_leaves
from ..errors import ParameterError
from ..mechanisms.base import Mechanism
from ..registry import GRID_MECHANISMS, Citation
from .grid import DataAwareGridRelease, DAWAHilbert, HilbertNoise
from .support_grid import check_threshold

#: The default threshold, in standard errors of a bucket's estimate.
DEFAULT_THRESHOLD = 3.0
#: The default joint threshold, in standard errors of the marked buckets' summed estimate.
DEFAULT_JOINT = 2.0


def pruned_totals(totals, marked, total: float) -> np.ndarray | None:
    """The bucket ``totals`` set to zero where ``marked`` (a mask holding every negative total)
    and scaled on the rest to sum to ``total``; None where the rest sums to nothing."""
    totals = np.asarray(totals, dtype=float)
    kept = np.where(marked, 0.0, totals)
    mass = float(kept.sum())
    if mass <= 0.0:
        return None
    return kept * (max(float(total), 0.0) / mass)


def bucket_deviations(inner) -> np.ndarray:
    """The standard error of every bucket's estimated total under DAWA's release ``inner`` (its
    bucket estimate's noise-only error model, given the partition)."""
    _, _, starts = inner._reduced
    reduced = inner.noise_only_error_model.reduced
    buckets = np.arange(np.asarray(starts).size)
    return np.sqrt(np.maximum(np.asarray(reduced.range_variance(buckets, buckets), dtype=float), 0.0))


def marked_buckets(totals, deviations, threshold: float, joint: float, nested_variances) -> np.ndarray:
    """Step 2 (boolean, per bucket): of the buckets whose ``totals`` are below ``threshold`` times
    their ``deviations``, in order of total over deviation, the longest run from the lowest whose
    sum is below ``joint`` times its standard error (``nested_variances(order)``: the variance of
    the summed estimate of the first k buckets of ``order``, for every k); none where no run
    passes."""
    totals = np.asarray(totals, dtype=float)
    deviations = np.asarray(deviations, dtype=float)
    marked = np.zeros(totals.size, dtype=bool)
    below = np.flatnonzero(totals < threshold * deviations)
    if below.size == 0:
        return marked
    ratios = np.divide(totals[below], deviations[below], out=np.full(below.size, -np.inf), where=deviations[below] > 0)
    order = below[np.argsort(ratios, kind="stable")]
    sums = np.cumsum(totals[order])
    passing = np.flatnonzero(sums < joint * np.sqrt(np.maximum(nested_variances(order), 0.0)))
    if passing.size:
        marked[order[: passing[-1] + 1]] = True
    return marked


def prune(totals, deviations, threshold, joint, nested_variances, public_total) -> tuple[np.ndarray | None, int]:
    """Steps 2-3 on bucket estimates (:func:`marked_buckets`, :func:`pruned_totals`) with the total
    the public one where given, else the estimates' sum: (the pruned totals, the buckets kept),
    (None, every bucket) where none is marked or no bucket stands out."""
    totals = np.asarray(totals, dtype=float)
    marked = marked_buckets(totals, deviations, threshold, joint, nested_variances)
    if not marked.any():
        return None, totals.size
    total = public_total if public_total is not None else float(np.sum(totals))
    kept = pruned_totals(totals, marked, total)
    return kept, (totals.size if kept is None else int(totals.size - marked.sum()))


class PrunedHilbertNoise(HilbertNoise):
    """Post-processing state of a ``dawa_pruned`` release: ``resample`` re-draws DAWA's bucket
    measurements around the released bucket totals and re-runs the marks and the scale."""

    def __init__(self, inner, sequence, shape, cells, mechanism, deviations, public_total):
        super().__init__(inner, sequence, shape)
        self.cells = np.asarray(cells, dtype=float)
        self.mechanism = mechanism
        self.deviations = deviations
        self.public_total = public_total

    def query_variance(self, cell_weights):
        raise ParameterError(
            "a pruned DAWA release has no closed-form noise-only variance; use the release's bootstrap(...)"
        )

    def resample(self, rng) -> np.ndarray:
        measurements, method, starts = self.inner._reduced
        released = np.add.reduceat(self.cells.ravel()[self.sequence], starts)
        replicate = resample_leaves(measurements, released, method, rng)
        kept, _ = self.mechanism.pruned(self.inner, replicate, self.deviations, self.public_total)
        return expand(self.sequence, self.shape, starts, replicate if kept is None else kept)


def expand(sequence, shape, starts, totals) -> np.ndarray:
    """Bucket totals spread evenly over their runs of the Hilbert order, as a grid."""
    n = sequence.size
    sizes = np.append(starts[1:], n) - starts
    cells = np.empty(n)
    cells[sequence] = np.repeat(np.asarray(totals, dtype=float) / sizes, sizes)
    return cells.reshape(shape)


class PrunedDAWAHilbert(DAWAHilbert):
    """DAWA over the Hilbert order, its buckets below ``threshold`` standard errors set to zero
    and the rest scaled back to the total (module doc).  DAWA's privacy; answers without exact
    error bars."""

    name = "dawa_pruned"

    PARAMS = (
        *(p for p in DAWAHilbert.PARAMS if p not in Mechanism.PARAMS),
        Param(
            "threshold",
            Custom(check_threshold, "finite number >= 0"),
            "a bucket is taken as empty where its estimated total is below this many of its standard errors",
            default=DEFAULT_THRESHOLD,
        ),
        Param(
            "joint",
            Custom(check_threshold, "finite number >= 0"),
            "of the buckets below their threshold, the longest run from the lowest whose estimates sum to below "
            "this many standard errors of that sum is taken as empty",
            default=DEFAULT_JOINT,
        ),
        *Mechanism.PARAMS,
    )
    threshold: float
    joint: float

    def pruned(self, inner, totals, deviations, public_total) -> tuple[np.ndarray | None, int]:
        """Steps 2-3 (:func:`prune`) on bucket ``totals`` of DAWA's release ``inner``."""
        nested = inner.noise_only_error_model.reduced.nested_variances
        return prune(totals, deviations, self.threshold, self.joint, nested, public_total)

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None) -> DataAwareGridRelease:  # type: ignore[override]
        released = super().release(counts, epsilon, delta=delta, rng=rng, domain=domain)  # every private step
        noise = released._noise
        inner, sequence = noise.inner, noise.sequence
        _, _, starts = inner._reduced
        totals = np.add.reduceat(np.asarray(inner.estimate, dtype=float), starts)
        public_total = released.provenance.total  # the public N under replace, else None
        deviations = bucket_deviations(inner)
        kept, kept_buckets = self.pruned(inner, totals, deviations, public_total)
        cells = released.counts if kept is None else expand(sequence, released.shape, starts, kept)
        parameters = {
            **released.provenance.parameters,
            "threshold": self.threshold,
            "joint": self.joint,
            "kept_buckets": kept_buckets,
            "buckets": int(starts.size),
        }
        provenance = dataclasses.replace(released.provenance, parameters=parameters)
        return DataAwareGridRelease(
            released.shape,
            cells,
            provenance,
            PrunedHilbertNoise(inner, sequence, released.shape, cells, self, deviations, public_total),
            domain=domain,
        )


GRID_MECHANISMS.add(
    PrunedDAWAHilbert,
    summary="data-aware 2-D: DAWA on the Hilbert order with the buckets its estimate finds empty set to zero and "
    "the rest scaled back to its total (post-processing; error bars by bootstrap, not exact)",
    citation=Citation(
        "Li, Hay, Miklau and Wang",
        "A Data- and Workload-Aware Algorithm for Range Queries Under Differential Privacy",
        "PVLDB 2014",
    ),
)

"""auto-data's trained selector: which 1-D mechanism to run, from noisy features only.

In the spirit of Pythia (Kotsogiannis, Machanavajjhala, Hay and Miklau, "Pythia: Data Dependent
Differentially Private Algorithm Selection", SIGMOD 2017): a model trained on public data only
(the DPBench 1-D shapes and synthetic shapes under many scales, epsilons and workloads) maps
private features of the data to a mechanism.  Choosing is post-processing of the noisy
features: nothing here reads the data.

The model ships as data (``auto_data_selector.json`` beside this module: small, versioned)
and is retrained by ``benchmarks/train_auto_data.py``, which also writes its leave-one-shape-out
validation.  Two kinds of model are supported, and the script ships the one that validates
better:

* ``"ridge"``: for every data-aware candidate, a ridge regression of the log of its mean squared
  error over that of the data-independent ``auto`` on a quadratic expansion of the features;
  the candidate of least predicted log-ratio plus ``margin`` wins (``auto`` predicts 0);
* ``"tree"``: a shallow decision tree over the features whose leaves name a candidate: a
  cost-sensitive tree (each leaf the candidate of least mean log-ratio, plus ``margin`` for a
  data-aware one, among the training rows that reach it), or a rule per workload between
  ``auto`` and DAWA written as a tree (thresholds on the merge share, the concentration and the
  signal, recorded beside it under ``rules``).

``margin`` (a log error ratio) makes the choice conservative: a data-aware mechanism must be
predicted to beat ``auto``, whose error is known exactly, by that much.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

import numpy as np

from .._validation import check_epsilon, check_positive_int
from ..errors import ParameterError
from ..mechanisms.base import check_counts

#: The selector's inputs, in order (all post-processing of the noisy features and public values).
FEATURES = (
    "log_signal",  # log10 of noisy N times the epsilon left
    "merge_share",  # noisy least dyadic merge cost over the cost of every bin alone, in [0.001, 1.5]
    "log_merge_share",  # log10 of merge_share
    "concentration",  # noisy mass of the heaviest bins over noisy N, in [0, 1]
    "log_bins",  # log2 of the number of bins
    "log_epsilon",  # log10 of the epsilon left
    "prefix",  # 1 when the release is tuned for prefixes, 0 for all ranges
)

#: The share of the epsilon left that the merge cost's bucket penalty is priced at: DAWA's
#: measurement share at its default partition ratio 0.25 (the penalty is 1 / that epsilon).
MERGE_MEASURE_SHARE = 0.75

#: Version of the JSON layout (not of a particular fit: the file records its training).
FORMAT = 1

SELECTOR_FILE = "auto_data_selector.json"


def heavy_bins(n: int) -> int:
    """How many of the heaviest bins the concentration feature sums: n / 64, at least 1 (public)."""
    return max(1, n // 64)


def top_mass(counts: np.ndarray, heavy: int | None = None) -> int:
    """The number of records in the ``heavy`` (default heavy_bins(n)) heaviest bins (non-negative
    counts): one record added, removed or moved changes it by at most 1 (it is a maximum over bin
    sets of sums of counts).  Only the non-empty bins are partitioned: empty ones add nothing, and
    a selection among many equal zeros is what made the partition slow on sparse grids."""
    m = heavy_bins(counts.size) if heavy is None else max(1, int(heavy))
    occupied = counts[counts > 0]  # O(n); the partition below is O(occupied)
    if occupied.size <= m:
        return int(occupied.sum())
    return int(np.partition(occupied, occupied.size - m)[occupied.size - m :].sum())


def merge_penalty(epsilon: float) -> int:
    """The bucket penalty of :func:`merge_cost` for a release with ``epsilon`` left: DAWA's
    ceil(1 / eps2), eps2 its measurement share (public: a function of epsilon only)."""
    return max(1, math.ceil(1.0 / (MERGE_MEASURE_SHARE * check_epsilon(epsilon))))


def merge_cost(counts: np.ndarray, penalty: int) -> int:
    """The least cost over the aligned dyadic partitions of the bins of sum_B (d(B) + penalty),
    d(B) = min_c sum_{k in B} |x_k - c| (:func:`~dprange.data_aware.privtree.median_deviations`;
    0 for one bin): DAWA's partition objective (Li, Hay, Miklau and Wang, PVLDB 2014) with the
    median for the mean, minimised exactly bottom-up over the dyadic tree in O(n log n).

    Near ``penalty * n`` (every bin alone) where no merge pays, far below it where large regions
    are flat (e.g. empty).  One record added or removed moves every bucket's d(B) by at most 1,
    and it lies in one bucket of each partition, so every partition's cost, and the least one,
    moves by at most 1 (2 when a record moves under replace).  An integer for integer counts."""
    counts = check_counts(counts)
    penalty = check_positive_int(penalty, "penalty")
    n = counts.size
    cost = np.full(n, penalty, dtype=np.int64)  # level of single bins
    size = 1
    while size < n:
        size *= 2
        if cost.size % 2:  # the truncated last node has one child: its split costs that child's
            cost = np.append(cost, 0)
        split = cost.reshape(-1, 2).sum(axis=1)
        # counts is check_counts' own copy: _sorted_deviations sorts its nodes in place
        cost = np.minimum(_sorted_deviations(counts, size) + penalty, split)
    return int(cost.sum())


def _sorted_deviations(runs: np.ndarray, size: int) -> np.ndarray:
    """median_deviations(counts, size) from ``runs``, the counts with every aligned node of
    size / 2 sorted, which it leaves with every node of ``size`` sorted.  A full node is two
    sorted runs, which a stable sort (Timsort) merges in O(size); on a sorted node of even size
    d(B) is the sum of its upper half less that of its lower half.  Cost: one merge pass and one
    sum over the counts per level, where median_deviations makes a selection per node."""
    n = runs.size
    whole = (n // size) * size
    nodes = runs[:whole].reshape(-1, size)
    if size == 2:  # pairs: a sort per row of two costs more than a minimum and a maximum
        low = np.minimum(nodes[:, 0], nodes[:, 1])
        nodes[:, 1] = np.maximum(nodes[:, 0], nodes[:, 1])
        nodes[:, 0] = low
    else:
        nodes.sort(axis=1, kind="stable")  # in place: O(n) per level, two sorted runs per node
    halves = nodes.reshape(-1, 2, size // 2).sum(axis=2)
    deviations = halves[:, 1] - halves[:, 0]
    if whole < n:  # the truncated last node, sorted whole: d(B) about its middle element
        tail = runs[whole:]
        tail.sort(kind="stable")
        deviations = np.append(deviations, np.abs(tail - tail[(tail.size - 1) // 2]).sum())
    return deviations


def feature_matrix(total, merge, top, n, epsilon, prefix) -> np.ndarray:
    """The rows of FEATURES from noisy (total, merge cost, top mass), the public number of bins,
    the epsilon left for the chosen mechanism and the workload; broadcasts over arrays.  The
    merge cost is read against :func:`merge_penalty` of that epsilon times n."""
    total, merge, top, n, epsilon, prefix = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (total, merge, top, n, epsilon, prefix))
    )
    records = np.maximum(total, 1.0)
    penalty = np.vectorize(merge_penalty, otypes=[float])(epsilon)
    share = np.clip(merge / (penalty * n), 0.001, 1.5)
    columns = (
        np.log10(records * epsilon),
        share,
        np.log10(share),
        np.clip(top / records, 0.0, 1.0),
        np.log2(n),
        np.log10(epsilon),
        (prefix > 0).astype(float),
    )
    return np.stack(columns, axis=-1)


def quadratic(x: np.ndarray) -> np.ndarray:
    """[1, x, x_i x_j for i <= j]: the ridge model's basis."""
    x = np.atleast_2d(x)
    i, j = np.triu_indices(x.shape[1])
    return np.concatenate([np.ones((x.shape[0], 1)), x, x[:, i] * x[:, j]], axis=1)


@dataclass
class Selector:
    """A trained choice among ``candidates`` (the first is the data-independent ``auto``)."""

    kind: str
    candidates: tuple[str, ...]
    model: dict
    training: dict = field(default_factory=dict)

    def choose_index(self, x: np.ndarray) -> np.ndarray:
        """Index into ``candidates`` for every row of the feature matrix ``x``."""
        x = self.within_training(x)
        if self.kind == "ridge":
            return np.argmin(self.predict(x), axis=1)
        if self.kind == "tree":
            return self._leaves(x)
        raise ParameterError(f"unknown selector kind {self.kind!r}; retrain with benchmarks/train_auto_data.py")

    def within_training(self, x: np.ndarray) -> np.ndarray:
        """The features clipped to the range seen in training (``lower``, ``upper``): outside it
        the model would extrapolate (e.g. a quadratic in the number of bins), so an input past
        the edge is read as the edge."""
        x = np.atleast_2d(np.asarray(x, dtype=float))
        if "lower" in self.model:
            x = np.clip(x, self.model["lower"], self.model["upper"])
        return x

    def choose(self, x: np.ndarray) -> list[str]:
        return [self.candidates[i] for i in self.choose_index(x)]

    def constant(self) -> str | None:
        """The candidate this selector names whatever the features (a tree whose leaves all name
        it), else None.  A release with a constant selector buys no features: they would spend
        epsilon on a choice already made."""
        if self.kind != "tree":
            return None
        leaves = {node["leaf"] for node in self.model["nodes"] if "leaf" in node}
        return self.candidates[leaves.pop()] if len(leaves) == 1 else None

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Ridge: predicted log error ratios to ``auto`` (rows x candidates; ``auto`` is 0)."""
        basis = quadratic((self.within_training(x) - self.model["mean"]) / self.model["scale"])
        coef = np.asarray(self.model["coef"], dtype=float)  # (basis, candidates - 1)
        margin = float(self.model.get("margin", 0.0))  # a data-aware choice must beat auto by this log-ratio
        return np.concatenate([np.zeros((basis.shape[0], 1)), basis @ coef + margin], axis=1)

    def _leaves(self, x: np.ndarray) -> np.ndarray:
        """The tree's leaf choice for every row (all rows walk down together, one level a step)."""
        nodes = self.model["nodes"]
        at = np.zeros(x.shape[0], dtype=np.int64)
        for _ in range(len(nodes)):
            moved = False
            for k, node in enumerate(nodes):
                here = at == k
                if "leaf" in node or not here.any():
                    continue
                left = x[here, node["feature"]] <= node["threshold"]
                at[here] = np.where(left, node["left"], node["right"])
                moved = True
            if not moved:
                break
        return np.array([nodes[k]["leaf"] for k in at], dtype=np.int64)

    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "features": list(FEATURES),
            "kind": self.kind,
            "candidates": list(self.candidates),
            "model": {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in self.model.items()},
            "training": self.training,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Selector:
        if data.get("format") != FORMAT or tuple(data.get("features", ())) != FEATURES:
            raise ParameterError("the auto-data selector file has another layout; retrain it")
        model = dict(data["model"])
        for key in ("mean", "scale", "lower", "upper"):
            if key in model:
                model[key] = np.asarray(model[key], dtype=float)
        return cls(data["kind"], tuple(data["candidates"]), model, dict(data.get("training", {})))


@lru_cache(maxsize=1)
def shipped() -> Selector:
    """The selector that ships with the package."""
    text = resources.files(__package__).joinpath(SELECTOR_FILE).read_text(encoding="utf-8")
    return Selector.from_dict(json.loads(text))

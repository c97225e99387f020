"""The range-query protocols of Cormode, Kulkarni and Srivastava (PVLDB 2019): the hierarchical
histogram, the Haar wavelet with HRR, and flat, each a protocol whose aggregator builds
measurements for exact least squares.
"""

from __future__ import annotations

import inspect

import numpy as np

from .._params import IntegerOrList, Param
from ..errors import ParameterError, ReportError
from ..inference.dispatch import infer
from ..operators.base import Operator
from ..operators.structured import HaarLevel, TreeLevel
from ..registry import FREQUENCY_ORACLES, Citation
from ..strategies.trees import HaarStrategy, TreeStrategy
from .oracles import HRR, make_oracle
from .protocols import DOMAIN_SIZE, EPSILON, LEVEL_PROBABILITIES, ORACLE, ORACLE_OPTIONS, Protocol, register_protocol


class TreeProtocol(Protocol):
    """A protocol whose levels are the depths of a level-uniform tree (``self.tree``, root
    known): exact weighted least squares on the tree (:func:`dprange.inference.tree.tree_gls`)."""

    tree: TreeStrategy
    oracle_options: dict

    def _check_oracle_options(self) -> None:
        """The oracle takes the options, with values it accepts (checked at epsilon 1: the
        protocol's epsilon may come later)."""
        oracle_class = FREQUENCY_ORACLES[self.oracle_name].factory
        if oracle_class is not None and not _takes(oracle_class, self.oracle_options):
            raise ParameterError(
                f"oracle_options {sorted(self.oracle_options)} are not options of the {self.oracle_name} oracle; "
                "leave them out or choose the oracle that takes them"
            )
        make_oracle(self.oracle_name, max(2, self.tree.level_sizes[1]), 1.0, **self.oracle_options)

    def level_size(self, level: int) -> int:
        return self.tree.level_sizes[level]

    def oracle(self, level: int):
        return make_oracle(self.oracle_name, max(2, self.tree.level_sizes[level]), self._eps(), **self.oracle_options)

    def node_frequencies(self, counts, n_users) -> dict:
        return {l: s / n_users for l, s in enumerate(self.tree.level_sums(counts))}

    def level_block(self, level: int) -> Operator:
        return TreeLevel(self.tree, level)


class HierarchicalHistogram(TreeProtocol):
    """HH_B with exact least-squares consistency (see module doc)."""

    name = "ldp-hierarchical"

    PARAMS = (
        DOMAIN_SIZE,
        Param(
            "branching",
            IntegerOrList(2, "every branching factor", "the branching list is empty; give at least one factor >= 2"),
            "branching factor B >= 2 of the tree, or per-level factors from the root down",
            default=4,
            positional=True,
            option="--branching",
        ),
        ORACLE,
        EPSILON,
        LEVEL_PROBABILITIES,
        ORACLE_OPTIONS,
    )

    def _configure(self, values: dict) -> None:
        self.tree = TreeStrategy(self.domain_size, values["branching"], measure_root=False, known_total=True)
        self.oracle_name = values["oracle"]
        self.oracle_options = values["oracle_options"]
        self._check_oracle_options()

    @classmethod
    def from_options(cls, domain_size: int, epsilon: float, *, oracle: str = "oue", branching=4) -> Protocol:
        return cls(domain_size, branching, oracle, epsilon=epsilon)

    @classmethod
    def from_header(cls, header: dict) -> Protocol:
        return cls(
            header["domain_size"],
            header["branching"],
            header["oracle"],
            epsilon=header["epsilon"],
            level_probabilities=header["level_probabilities"],
            oracle_options=header.get("oracle_options") or None,
        )

    @property
    def levels(self) -> int:
        return self.tree.depth

    def describe(self) -> dict:
        return {
            **super().describe(),
            "branching": list(self.tree.branching),
            "oracle": self.oracle_name,
            "oracle_options": self.oracle_options,
        }

    def _report_level(self, level, values, source):
        return self.oracle(level).randomize(values // self.tree.block_sizes[level], source)


class HaarHRR(Protocol):
    """HaarHRR (see module doc).  The domain is padded to a power of two.

    Limitation: when D is not a power of two the padded bins are estimated like the others
    (Privelet's square inversion) rather than constrained to their known value 0, so the D
    released bins need not sum to the public total N (their sum's error is the padded
    bins' estimate).  Use a power of two D (as the paper does) for a consistent release."""

    name = "ldp-haar-hrr"
    oracle_name = "hrr"

    def _configure(self, values: dict) -> None:
        self.haar = HaarStrategy(self.domain_size, known_total=True)

    @classmethod
    def from_options(cls, domain_size: int, epsilon: float, *, oracle: str = "oue", branching=4) -> Protocol:
        return cls(domain_size, epsilon=epsilon)

    @classmethod
    def from_header(cls, header: dict) -> Protocol:
        return cls(header["domain_size"], epsilon=header["epsilon"], level_probabilities=header["level_probabilities"])

    @property
    def levels(self) -> int:
        return self.haar.height

    def level_size(self, level: int) -> int:
        return 2 ** (level - 1)

    def oracle(self, level: int):
        return HRR(max(2, 2 ** (level - 1)), self._eps())

    def _report_level(self, level, values, source):
        shift = self.haar.height - level  # bit of v that picks the half of its depth-(level-1) node
        node = values >> (shift + 1)
        sign = 1 - 2 * ((values >> shift) & 1)
        return self.oracle(level).randomize(node, source, signs=sign)

    def node_frequencies(self, counts, n_users) -> dict:
        """Level l's frequencies are those of the depth l - 1 nodes of the padded domain
        (HRR's f-dependent term of the signed coefficient)."""
        padded = np.zeros(self.haar.size)
        padded[: self.domain_size] = counts
        return {l: padded.reshape(2 ** (l - 1), -1).sum(axis=1) / n_users for l in range(1, self.haar.height + 1)}

    def _check_users(self, users):
        if any(u == 0 for u in users.values()):
            raise ReportError("some Haar level received no reports; collect more reports")

    def level_block(self, level: int) -> Operator:
        return HaarLevel(self.haar, level)

    def _plug_in_frequencies(self, values, users, n):
        """From the reconstruction with the f-independent variances (clipped at 0): the
        levels hold signed differences, not node counts.  The reconstruction (the inverse
        transform) does not depend on the variances."""
        first = infer(self.level_measurements(values, self.level_variances(users, n), n))
        return self.node_frequencies(np.clip(first.leaves, 0, None), n)


class Flat(TreeProtocol):
    """The flat baseline: one frequency oracle over all D values (no hierarchy).

    Its one level is measured as the depth-1 ``TreeLevel`` of a one-level tree (the identity
    on the D bins) rather than an ``Identity`` block: so ``infer`` takes the exact O(D) tree
    path with the known total (an equal shift of every bin), not the iterative generic one."""

    name = "ldp-flat"

    PARAMS = (DOMAIN_SIZE, ORACLE, EPSILON, ORACLE_OPTIONS)

    def _configure(self, values: dict) -> None:
        self.oracle_name = values["oracle"]
        self.oracle_options = values["oracle_options"]
        self.tree = TreeStrategy(self.domain_size, (self.domain_size,), measure_root=False, known_total=True)
        self._check_oracle_options()

    @classmethod
    def from_options(cls, domain_size: int, epsilon: float, *, oracle: str = "oue", branching=4) -> Protocol:
        return cls(domain_size, oracle, epsilon=epsilon)

    @classmethod
    def from_header(cls, header: dict) -> Protocol:
        return cls(
            header["domain_size"],
            header["oracle"],
            epsilon=header["epsilon"],
            oracle_options=header.get("oracle_options") or None,
        )

    @property
    def levels(self) -> int:
        return 1

    def describe(self) -> dict:
        return {**super().describe(), "oracle": self.oracle_name, "oracle_options": self.oracle_options}

    def _report_level(self, level, values, source):
        return self.oracle(1).randomize(values, source)


CKS_2019 = Citation(
    "Cormode, Kulkarni and Srivastava", "Answering Range Queries Under Local Differential Privacy", "PVLDB 2019"
)


register_protocol(
    HierarchicalHistogram,
    "hierarchical",
    summary="HH_B: every user reports one level of a B-ary tree through a frequency oracle (--oracle, --branching)",
    citation=CKS_2019,
)


register_protocol(
    HaarHRR,
    "haar",
    summary="HaarHRR: every user reports one level of Haar coefficients through Hadamard randomised response",
    citation=CKS_2019,
)


register_protocol(
    Flat,
    "flat",
    summary="one frequency oracle over all values, no hierarchy (--oracle): the baseline",
    citation=CKS_2019,
)


def _takes(oracle_class, options: dict) -> bool:
    """Whether the oracle's constructor (domain_size, epsilon, ...) accepts these options."""
    try:
        inspect.signature(oracle_class).bind(2, 1.0, **options)
    except TypeError:
        return False
    return True

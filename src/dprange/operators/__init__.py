"""Linear operators that know their Gram matrix and sensitivity: the identity, prefix sums, tree
levels, Haar levels, explicit matrices, weighted stacks and Kronecker products."""

from .base import Gram, Operator, Sum, check_norm, check_relation, definition_sensitivity_power
from .dense import Explicit, exact_integer_dtype
from .structured import HaarLevel, Identity, Kron, Prefix, Total, TreeLevel, VStack, Weighted, block_answers

__all__ = [
    "Explicit",
    "Gram",
    "HaarLevel",
    "Identity",
    "Kron",
    "Operator",
    "Prefix",
    "Sum",
    "Total",
    "TreeLevel",
    "VStack",
    "Weighted",
    "block_answers",
    "check_norm",
    "check_relation",
    "definition_sensitivity_power",
    "exact_integer_dtype",
]

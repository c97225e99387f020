"""Local differential privacy (Cormode, Kulkarni, Srivastava, PVLDB 2019; seed 002).

Frequency oracles (``GRR``, ``OUE``, ``OLH``, ``HRR``), range-query protocols
(``HierarchicalHistogram``, ``HaarHRR``, ``Flat``) that release a :class:`dprange.Release`,
exact simulation (``simulate``) and exact error analysis (``expected_error``,
``optimal_branching``).
"""

from .analysis import expected_error, optimal_branching
from .oracles import GRR, HRR, OLH, OUE, Reports, make_oracle
from .protocols import Flat, HaarHRR, HierarchicalHistogram, ProtocolReports
from .simulate import simulate

__all__ = ["GRR", "HRR", "OLH", "OUE", "Flat", "HaarHRR", "HierarchicalHistogram", "ProtocolReports", "Reports",
           "expected_error", "make_oracle", "optimal_branching", "simulate"]

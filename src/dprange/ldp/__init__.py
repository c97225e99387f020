"""Local differential privacy (Cormode, Kulkarni, Srivastava, "Answering Range Queries Under
Local Differential Privacy", PVLDB 2019).

Frequency oracles (``GRR``, ``OUE``, ``OLH``, ``HRR``), range-query protocols
(``HierarchicalHistogram``, ``HaarHRR``, ``Flat``) whose aggregators build
:class:`dprange.measurements.Measurements` and release a :class:`dprange.Release` by
:func:`dprange.inference.infer` ("gls", or "nnls" / "l1" with bootstrap standard errors),
exact simulation (``simulate``), exact error analysis (``expected_error``,
``optimal_branching``) and the paper's two-stage consistency as a baseline
(``two_stage_consistency``; releases use exact weighted least squares).
"""

from .analysis import expected_error, optimal_branching
from .consistency import two_stage_consistency
from .oracles import GRR, HRR, OLH, OUE, make_oracle
from .protocols import ProtocolReports
from .range_protocols import Flat, HaarHRR, HierarchicalHistogram
from .reports import Reports
from .simulate import SHORTCUT_EXACT, simulate

__all__ = [
    "GRR",
    "HRR",
    "OLH",
    "OUE",
    "SHORTCUT_EXACT",
    "Flat",
    "HaarHRR",
    "HierarchicalHistogram",
    "ProtocolReports",
    "Reports",
    "expected_error",
    "make_oracle",
    "optimal_branching",
    "simulate",
    "two_stage_consistency",
]

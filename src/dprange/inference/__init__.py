"""Inference: post-processing of measurements into an estimate of the histogram.

Exact generalised least squares (trees, wavelets, any operator), non-negative least squares
and maximum-likelihood L1 by ADMM (Lee, Wang, Kifer 2015), and CDF consistency.
"""

from .consistency import consistent_cdf
from .dispatch import NonlinearEstimate, infer
from .l1_admm import ADMMResult, admm, generic_x_update, tree_x_update
from .least_squares import gls
from .nnls import nnls
from .tree import tree_error_model, tree_gls
from .wavelet import haar_error_model, haar_estimate

__all__ = [
    "ADMMResult",
    "NonlinearEstimate",
    "admm",
    "consistent_cdf",
    "generic_x_update",
    "gls",
    "infer",
    "haar_error_model",
    "haar_estimate",
    "nnls",
    "tree_error_model",
    "tree_gls",
    "tree_x_update",
]

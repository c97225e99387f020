"""Exact expected error of 1-D mechanisms on workloads, and lower bounds on it (the choice of a
mechanism by that error is :mod:`dprange.analysis.selection`).

A linear mechanism with least-squares inference has an unbiased estimate whose covariance
does not depend on the data, so the error of every answer is known before any data is
touched, and choosing a mechanism by it costs no privacy (Li, Hay, Rastogi, Miklau,
McGregor, "Optimizing Linear Counting Queries Under Differential Privacy", PODS 2010: the
error of the matrix mechanism; Qardaji, Yang, Li, "Understanding Hierarchical Methods for
Differentially Private Histograms", PVLDB 2013, sections 3-5; Rameshwar and Tandon,
"Optimal Tree-Based Mechanisms for Differentially Private Approximate CDFs", 2024,
section IV).

* ``expected_error``: the average over the workload's queries of the variance of the answer
  (counts squared).  ``max_error``: the largest such variance (for ``Prefix`` under the
  replace model this is the squared l-infinity error of Rameshwar and Tandon, times n^2).
* Fast paths (no n x n matrix): range workloads use the mechanisms' O(depth) range
  variances.  ``AllRange`` uses, with prefixes P_k = x_0 + ... + x_{k-1},

      sum over all ranges of Var = (n + 1) sum_k Var(P_k) - Var(sum_k P_k),

  (pair every two of the n + 1 prefix points; sum_k P_k = sum_i (n - i) x_i is one linear
  query), so it costs O(n depth).
* ``svd_bound``: the lower bound on the total error of any matrix mechanism (Li and Miklau,
  "Optimal Error of Query Sets under the Differentially-Private Matrix Mechanism", ICDT
  2013): v (1/n)(sum of singular values of W)^2, v the least noise variance per unit of
  sensitivity that dprange's noise of that kind can have (:func:`noise_variance_floor`).
  ``l2_optimum_bound``: the tighter bound v OPT, OPT the exact optimum of the matrix mechanism
  with L2 sensitivity (:mod:`dprange.optimize.l2_optimum`; Yuan, Yang, Zhang and Hao, KDD 2016).
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_delta, check_epsilon, check_neighbours
from ..errors import ParameterError
from ..inference.error_sums import variance_sums
from ..mechanisms.base import Mechanism
from ..optimize.l2_optimum import check_l2_optimum_bins, l2_optimum, l2_replace_optimum
from ..privacy.noise import discrete_gaussian_variance, gaussian_sigma
from ..strategies.calibration import resolve_noise
from ..workloads.ranges import (
    AllRange,
    Identity,
    Prefix,
    Workload,
    check_workload_bins,
    make_workload,
    not_a_workload,
    singular_value_sum,
)

#: Largest number of queries whose variances are listed one by one (max_error on AllRange).
MAX_LISTED_QUERIES = 20_000_000


def _resolve(workload, n):
    if isinstance(workload, str):
        if n is None:
            raise ParameterError("give n when the workload is named")
        return make_workload(workload, n)
    if not isinstance(workload, Workload):
        raise not_a_workload(workload)
    check_workload_bins(workload, n)
    return workload


def query_variances(model, workload: Workload) -> np.ndarray:
    """The exact variance of every query of ``workload`` under an error model."""
    if workload.m > MAX_LISTED_QUERIES:
        raise ParameterError(f"{workload.m} queries are too many to list; use expected_error")
    one_pass = _one_pass_variances(model, workload)
    if one_pass is not None:
        return one_pass.prefix if isinstance(workload, Prefix) else one_pass.bins
    lohi = workload.ranges()
    if lohi is not None:
        return np.asarray(model.range_variance(*lohi), dtype=float)
    W = workload.dense()
    out = np.empty(W.shape[0])
    step = max(1, 2_000_000 // max(workload.n, 1))
    for start in range(0, W.shape[0], step):
        out[start : start + step] = model.query_variance(W[start : start + step])
    return out


def _one_pass_variances(model, workload: Workload):
    """The model's one-pass prefix / bin variances (tree models) when the workload's queries
    are exactly the n prefixes or the n bins, else None."""
    if type(workload) not in (Prefix, Identity) or not hasattr(model, "prefix_variances"):
        return None
    return model.prefix_variances()


def _prefix_variances(model, n: int) -> np.ndarray:
    """Var(x_0 + ... + x_k) for every k: one tree pass when the model has it, else n ranges."""
    if hasattr(model, "prefix_variances"):
        return model.prefix_variances().prefix
    ks = np.arange(n, dtype=np.int64)
    return np.asarray(model.range_variance(np.zeros(n, dtype=np.int64), ks), dtype=float)


def workload_error(model, workload: Workload) -> float:
    """Average variance over the workload's queries, with the all-range identity.

    Prefix, bin and all-range workloads on tree and Haar models take the sums of their
    variances from one blocked pass (:func:`~dprange.inference.error_sums.variance_sums`),
    in O(depth x block) memory.
    """
    n = workload.n
    if type(workload) in (AllRange, Prefix, Identity):
        sums = variance_sums(model)  # trees and Haar: no n-vector of variances
        if sums is not None:
            total = {AllRange: sums.all_ranges(n), Prefix: sums.prefix, Identity: sums.bins}[type(workload)]
            return total / workload.m
    if isinstance(workload, AllRange):
        prefix = _prefix_variances(model, n)
        weights = (n - np.arange(n)).astype(float)
        combined = float(np.asarray(model.query_variance(weights[None, :])).ravel()[0])
        return ((n + 1) * prefix.sum() - combined) / workload.m
    return float(query_variances(model, workload).mean())


def _require_linear(mechanism: Mechanism) -> None:
    """The error formulas hold for least-squares inference only (NNLS / L1 are non-linear)."""
    inference = getattr(mechanism, "inference", "gls")
    if inference != "gls":
        raise ParameterError(
            f"the exact error is known for least-squares (gls) inference only, not {inference}; "
            "use Release.bootstrap for its error, or rank the gls version of the mechanism"
        )


def expected_error(mechanism: Mechanism, workload, epsilon, *, delta=0.0, n=None) -> float:
    """Exact average variance (counts^2) of ``mechanism``'s answers to ``workload``.

    Least-squares (gls) inference only: for NNLS / L1 inference it raises ParameterError
    rather than return the least-squares number, which is not their error."""
    _require_linear(mechanism)
    workload = _resolve(workload, n)
    return workload_error(mechanism.error_model(workload.n, epsilon, delta=delta), workload)


def max_error(mechanism: Mechanism, workload, epsilon, *, delta=0.0, n=None) -> float:
    """Exact largest variance over the workload's queries (worst query; gls inference only)."""
    _require_linear(mechanism)
    workload = _resolve(workload, n)
    return float(query_variances(mechanism.error_model(workload.n, epsilon, delta=delta), workload).max())


def noise_variance_floor(epsilon, delta=0.0, noise="auto") -> float:
    """The least variance a noise draw of dprange's ``noise`` kind at (epsilon, delta) can have
    per unit of sensitivity: the factor v of :func:`svd_bound`.

    Li and Miklau's bound (ICDT 2013) says trace(W (B^T B)^-1 W^T) >= (sum sigma)^2 / (n c^2)
    for any strategy B whose columns have L2 norm at most c.  Scale every row i of a strategy A
    by 1 / sqrt(var_i), its noise's standard deviation (GLS does exactly this): the error is
    then trace(W (B^T B)^-1 W^T), and v is 1 / c^2 for the worst column of B.

    * laplace_float: 2 / eps^2.  Continuous Laplace with L1 sensitivity 1: ||b_j||_2 <=
      ||b_j||_1 = sum_i |a_ij| / (sqrt(2) b_i) <= eps / sqrt(2).
    * discrete_laplace: 1 / (2 sinh^2(eps / 2)) (1.84 at eps = 1, against 2; 0.110 against
      0.222 at eps = 3).  A row with scale b_i has variance 1 / (2 sinh^2(e_i / 2)), e_i = 1 / b_i,
      and the privacy condition is sum_i |a_ij| e_i <= eps for every column.  The strategy is
      an integer matrix, so a row with a_ij != 0 has e_i <= eps; as sinh(x) / x increases,
      sinh(e_i / 2) <= (e_i / eps) sinh(eps / 2), hence ||b_j||_1 = sqrt(2) sum_i |a_ij|
      sinh(e_i / 2) <= sqrt(2) sinh(eps / 2).  Reached by Flat on the identity workload.
    * gaussian (the discrete Gaussian, calibrated by :func:`dprange.privacy.noise.gaussian_sigma`):
      Var_DG(sigma), the variance of the discrete Gaussian with parameter sigma =
      gaussian_sigma(eps, delta) (20.53 at eps = 1, delta = 1e-6; Li and Miklau's classical
      factor 2 log(2 / delta) / eps^2 = 29.0 would not bound dprange's mechanisms).  The
      condition is sum_i a_ij^2 / sigma_i^2 <= 1 / sigma^2, so a row with a_ij != 0 has
      sigma_i >= sigma; Var_DG(s) / s^2 increases with s (checked on a grid in the tests), so
      Var_DG(sigma_i) >= sigma_i^2 Var_DG(sigma) / sigma^2 and ||b_j||_2^2 <= 1 / Var_DG(sigma).
      Reached by Flat on the identity workload.

    Sampled scales are never below the requested ones (:func:`dprange.privacy.samplers.effective_scale`)
    and every variance above increases with the scale, so the floor holds for the noise as drawn.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    kind = resolve_noise(noise, delta)
    if kind == "laplace_float":
        return 2.0 / epsilon / epsilon  # 0 at a huge epsilon (epsilon**2 would overflow)
    if kind == "discrete_laplace":
        if epsilon > 700.0:  # the same value, 2 e^-eps / (1 - e^-eps)^2, where sinh^2 would overflow
            return 2.0 * math.exp(-epsilon) / math.expm1(-epsilon) ** 2
        return 0.5 / math.sinh(epsilon / 2.0) ** 2
    return discrete_gaussian_variance(gaussian_sigma(epsilon, delta) ** 2)


def svd_bound(workload, epsilon, delta=0.0, *, n=None, noise="auto") -> float:
    """Lower bound on the average error per query of any matrix mechanism for ``workload``
    (Li and Miklau, ICDT 2013): v (sum of singular values of W)^2 / (n m), v =
    :func:`noise_variance_floor` for ``noise`` (as the mechanisms take it: "auto" is discrete
    Laplace when delta = 0, else the discrete Gaussian).  No mechanism of dprange with that
    noise has a lower :func:`expected_error` (least-squares inference on a data-independent
    strategy) on the workload under add/remove neighbours; NNLS / L1 inference and the
    data-aware mechanisms are not linear, and their error on given data can fall below it.
    ``noise="laplace_float"`` gives the textbook epsilon-DP bound (2 / eps^2) that HDMM's
    experiments compare strategies against.

    The singular values have closed forms for all ranges, prefixes and the identity
    (:meth:`dprange.workloads.Workload.singular_values`: O(n), any n); other workloads
    eigendecompose W^T W, O(n^3), n <= 8192.
    """
    workload = _resolve(workload, n)
    factor = noise_variance_floor(epsilon, delta, noise)
    singular_sum = singular_value_sum(workload.singular_values())
    return factor * singular_sum**2 / workload.n / workload.m


def l2_optimum_bound(workload, epsilon, delta=0.0, *, n=None, noise="auto", neighbours="add_remove") -> float:
    """Lower bound on the average error per query of any matrix mechanism for ``workload``,
    at least :func:`svd_bound`: v OPT / m, where OPT is the least trace(G (A^T A)^-1) over all
    strategies A with columns of L2 norm at most 1 (a convex program in A^T A: Yuan, Yang,
    Zhang and Hao, KDD 2016; :mod:`dprange.optimize.l2_optimum`) and v = :func:`noise_variance_floor`.
    OPT is taken as the dual value the solver reached, a lower bound at every step of it,
    within a relative 1e-6 of the optimum (1e-4 above 1024 bins).  Under (epsilon, delta) it is the least error of any
    matrix mechanism with dprange's Gaussian noise (add/remove neighbours), reached up to
    quantisation by ``Optimized(template="l2-optimal")``; the SVD bound is this program with
    every column weight equal, so it lies below.  Under epsilon-DP it is a valid bound (an L1
    column norm is at least its L2 norm) that need not be reachable.  O(n^3) a step, a few
    steps: n <= 4096 (:func:`dprange.optimize.l2_optimum.l2_optimum`; timings: docs/optimized.md,
    "The L2 optimum above 1024 bins").

    ``neighbours="replace"``: the same for replace neighbours, whose least squares use the
    public total and whose sensitivity is the largest pairwise column distance
    (:func:`dprange.optimize.l2_optimum.l2_replace_optimum`, n <= 256): the least error of any matrix
    mechanism with dprange's Gaussian under replace, reached up to quantisation by
    ``Optimized(template="l2-optimal", neighbours="replace")``."""
    workload = _resolve(workload, n)
    factor = noise_variance_floor(epsilon, delta, noise)
    replace = check_neighbours(neighbours) == "replace"
    check_l2_optimum_bins(workload.n, replace=replace)
    solve = l2_replace_optimum if replace else l2_optimum
    return factor * solve(workload.gram()).bound / workload.m

"""What the coarser per-axis quantisation of ``optimized_kronecker`` costs on three or more axes.

For each template (p-identity: discrete Laplace at epsilon; p-identity-l2: discrete Gaussian at
(epsilon, delta)), workload (all rectangles, prefix rectangles) and shape, add/remove:

* ``bits``: the per-axis quantisation chosen (tolerance 2^-bits; 16 is the 1-D default), or the
  refusal;
* ``error``: the exact expected error (mean variance per query) as released
  (:func:`dprange.analysis.grid.expected_error`);
* ``unquantised``: the same for the unquantised product (unit column norms, sensitivity 1),
  noise variance per unit scale^2 times the product of the axes' exact mean range variances
  (dense, per axis);
* ``default``: the product at the 1-D quantisation (2^-16) as if the samplers had no 2^40 cap,
  the error a release would have had with it;
* the relative costs against both.

    python benchmarks/kd_quantisation.py [--shapes 8x8x8,16x16x16] [--epsilon 1] [--delta 1e-6]

Prints one JSON object (one row per case).  Axes optimised cold use a temporary strategy cache
(DPRANGE_CACHE_DIR) unless one is set.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np

from dprange.analysis.grid import axis_ranges, expected_error
from dprange.errors import ParameterError
from dprange.mechanisms.optimized_grid import OptimizedKronecker
from dprange.optimize.p_identity import P_IDENTITY_NORMS, column_scales
from dprange.privacy.noise import gaussian_sigma, noise_variance

WORKLOADS = {"all-rectangles": "all", "prefix-rectangles": "prefix"}
SHAPES = "8x8x8,16x16x16,32x32x32,64x64x64,8x8x8x8,16x16x16x16,32x32x32x32,8x8x8x8x8,32x32"


def mean_range_variance(A: np.ndarray, family) -> float:
    """Mean of q^T (A^T A)^-1 q over the axis' ranges (dense)."""
    inverse = np.linalg.inv(A.T @ A)
    lows, highs = family
    Q = np.zeros((len(lows), A.shape[1]))
    for i, (lo, hi) in enumerate(zip(lows, highs)):
        Q[i, lo : hi + 1] = 1.0
    return float(np.mean(np.einsum("ij,jk,ik->i", Q, inverse, Q)))


def unit_norm_axis(strategy) -> np.ndarray:
    scale = column_scales(strategy.theta, P_IDENTITY_NORMS[strategy.template])
    return np.vstack([np.diag(1.0 / scale), strategy.theta / scale])


def case(workload: str, template: str, shape: tuple, epsilon: float, delta: float) -> dict:
    gaussian = template == "p-identity-l2"
    delta = delta if gaussian else 0.0
    mech = OptimizedKronecker(workload, template=template)
    mech.follow_delta(delta)
    strategies = mech.axis_strategies(shape)
    row: dict = {"workload": workload, "template": template, "shape": "x".join(map(str, shape))}
    if not any(np.any(s.theta) for s in strategies):
        return {**row, "bits": None, "note": "identity on every axis"}
    norm = P_IDENTITY_NORMS[template]
    unquantised, default = 1.0, 1.0
    for strategy, n in zip(strategies, shape):
        family = axis_ranges(n, WORKLOADS[workload])
        unquantised *= mean_range_variance(unit_norm_axis(strategy), family)
        A = strategy.explicit()
        sensitivity = float((np.abs(A) ** norm).sum(axis=0).max()) ** (1.0 / norm)
        default *= mean_range_variance(A, family) * sensitivity**2
    unit = gaussian_sigma(epsilon, delta, 1.0) if gaussian else 1.0 / epsilon
    kind = "gaussian" if gaussian else "discrete_laplace"
    per_unit = float(noise_variance(kind, unit * 2.0**30)) / 2.0**60  # variance / scale^2, large scales
    row.update(unquantised=per_unit * unquantised, default=per_unit * default)
    start = time.process_time()
    try:
        row["bits"] = mech.quantisation_bits(shape, epsilon)
        row["error"] = expected_error(mech, shape, workload, epsilon, delta=delta)
    except ParameterError as exc:
        return {**row, "bits": None, "refused": str(exc)}
    row["cpu_s"] = round(time.process_time() - start, 3)
    row["cost_vs_unquantised_pct"] = 100.0 * (row["error"] / row["unquantised"] - 1.0)
    row["cost_vs_default_pct"] = 100.0 * (row["error"] / row["default"] - 1.0)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    args = parser.parse_args()
    shapes = [tuple(int(n) for n in s.split("x")) for s in args.shapes.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        os.environ.setdefault("DPRANGE_CACHE_DIR", folder)
        rows = [
            case(workload, template, shape, args.epsilon, args.delta)
            for workload in WORKLOADS
            for template in P_IDENTITY_NORMS
            for shape in shapes
        ]
    print(json.dumps({"epsilon": args.epsilon, "delta": args.delta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

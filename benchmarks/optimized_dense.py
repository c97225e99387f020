"""The dense L1 templates (dprange.optimize.dense) against p-Identity and the SVD bound on all
ranges and prefixes (issue 15's 1.9x at n = 256); JSON lines, one per (workload, start).

Starts: the p-Identity optimum (p = n / 16), the best hierarchy of ``select`` (its levels
weighted by their budgets, plus 1e-3 of the largest entry so that no entry sits on the
bound), and the signed template from the p-Identity optimum.  Ratios are HDMM's: RMSE,
sqrt(trace / ((sum of singular values)^2 / n)) (see benchmarks/optimized.py); CPU seconds.

    OPENBLAS_NUM_THREADS=1 python benchmarks/optimized_dense.py [--n 256] [--steps 2000]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--steps", type=int, default=2000, help="L-BFGS-B steps per start")
    args = parser.parse_args()

    from dprange.analysis import select  # noqa: PLC0415
    from dprange.mechanisms.optimized import Optimized  # noqa: PLC0415
    from dprange.optimize.dense import dense_loss, optimize_dense  # noqa: PLC0415
    from dprange.optimize.p_identity import Gram, optimize_p_identity  # noqa: PLC0415
    from dprange.workloads.ranges import AllRange, Prefix, singular_value_sum  # noqa: PLC0415

    n = args.n
    for workload in (AllRange(n), Prefix(n)):
        gram = workload.gram()
        bound = singular_value_sum(workload.singular_values()) ** 2 / n

        def report(start, trace, cpu, **extra):
            row = {"workload": workload.name, "n": n, "start": start, "rmse_over_bound": (trace / bound) ** 0.5}
            print(json.dumps({**row, "cpu_seconds": cpu, **extra}), flush=True)

        cpu = time.process_time()
        theta, trace = optimize_p_identity(Gram(workload), max(1, n // 16))
        report("p-identity", trace, time.process_time() - cpu)
        p_identity = np.vstack([np.eye(n), theta])

        table = select(workload, None, 1.0).table
        tree = min((c for c in table if not isinstance(c.mechanism, Optimized)), key=lambda c: c.error).mechanism
        design = tree.design(n, 1.0)
        # Laplace scale b = 1 / epsilon_level: rows weighted by epsilon_level = sqrt(2 / variance).
        levels = np.vstack([m.block.dense() * np.sqrt(2.0 / m.variance) for m in design.measurements])
        levels = levels[np.abs(levels).sum(axis=1) > 0]
        levels = levels + 1e-3 * levels.max()
        report("best hierarchy (start)", dense_loss(levels, gram)[0], 0.0, mechanism=repr(tree))

        for name, start, signed in (
            ("dense from p-identity", p_identity, False),
            ("dense from best hierarchy", levels, False),
            ("signed from p-identity", p_identity, True),
        ):
            cpu = time.process_time()
            end, trace = optimize_dense(gram, start, maxiter=args.steps, signed=signed)
            report(name, trace, time.process_time() - cpu, negative_entries=int((end < 0).sum()))


if __name__ == "__main__":
    main()

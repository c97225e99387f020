"""Does a multi-scale start let the dense L1 template beat p-Identity at n = 1024? (issue 15,
"all prefixes at 1024 and 4096 within 2.5x of the SVD bound"); JSON lines, one per start.

Hypothesis probed: the p-Identity optimum (McKenna, Miklau, Hay and Machanavajjhala, VLDB
2018) has about three scales (the identity, p overlapping tents ~2n/p wide, 4 wide rows), while
hierarchies (Qardaji, Yang and Li, PVLDB 2013) use log_b n levels; a strategy with more scales
might be better at large n.  The dense template (dprange.optimize.dense: any Theta >= 0 with
unit L1 columns, exact loss and gradient by Cholesky, L-BFGS-B) runs from

* ``p-identity``: the p-Identity optimum [I; B] (the control: does dense improve on it at all?);
* ``p-identity+blocks``: [I; B] plus the rows of fixed block partitions at the missing scales
  (``--blocks``, each partition's rows weighted ``--block-weight``, added to every column sum);
* ``hierarchy``: the best hierarchy of ``dprange.analysis.select`` (its per-level budgets
  optimised), its levels weighted by their budgets (Laplace scale 1 / epsilon_level).

Ratios are HDMM's: RMSE, sqrt(trace(G (A^T A)^-1) / ((sum of singular values of W)^2 / n)),
exact traces (Cholesky), never Monte-Carlo.  CPU seconds of this process, one BLAS thread.

    OPENBLAS_NUM_THREADS=1 python benchmarks/optimized_multiscale.py [--n 1024] [--workload prefix]
        [--steps 150] [--starts p-identity,p-identity+blocks,hierarchy] [--blocks 8,256]

The default (prefixes, n = 1024, 150 steps per start, three starts) takes about 4 CPU minutes
(0.45-0.5 s a step on one thread; with 200 steps 294 CPU s, 13.7 min wall at load average 8-9
on 2 cores); the figures in docs/optimized.md ("Multi-scale starts") used --steps 500 and
1400: at 150 steps the hierarchy start is still on its way down.  The last line summarises:
the best start and its gain in RMSE over p-Identity.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def block_rows(n: int, size: int) -> np.ndarray:
    """The partition of n bins into consecutive blocks of ``size`` (the last may be shorter):
    one 0/1 row per block (ceil(n / size) x n)."""
    starts = np.arange(0, n, size)
    rows = np.zeros((starts.size, n))
    for r, lo in enumerate(starts):
        rows[r, lo : lo + size] = 1.0
    return rows


class StepCounter:
    """A progress-bar stand-in that counts L-BFGS-B iterations."""

    def __init__(self) -> None:
        self.steps = 0

    def update(self, k: int = 1) -> None:
        self.steps += k


def hierarchy_start(workload, n: int) -> tuple[np.ndarray, str]:
    """The best non-optimised candidate of ``select`` (epsilon = 1) as a dense Theta: every
    level's rows weighted by its budget, so each column's L1 norm is the spent epsilon."""
    from dprange.analysis import select  # noqa: PLC0415
    from dprange.mechanisms.optimized import Optimized  # noqa: PLC0415

    table = select(workload, None, 1.0).table
    best = min((c for c in table if not isinstance(c.mechanism, Optimized)), key=lambda c: c.error).mechanism
    plan = best.plan(best.strategy(n), 1.0)
    theta = np.vstack([block.dense() * eps for block, eps in zip(plan.blocks, plan.budget) if eps > 0])
    return theta[np.abs(theta).sum(axis=1) > 0], repr(best)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--workload", choices=("prefix", "all-range"), default="prefix")
    parser.add_argument("--steps", type=int, default=150, help="L-BFGS-B steps per dense start")
    parser.add_argument("--rows", type=int, default=0, help="p of the p-Identity optimum (0: the default)")
    parser.add_argument("--starts", default="p-identity,p-identity+blocks,hierarchy")
    parser.add_argument("--blocks", default="8,256", help="block sizes of the added partitions")
    parser.add_argument("--block-weight", type=float, default=0.05)
    args = parser.parse_args()
    os.environ.setdefault("DPRANGE_PROGRESS", "0")

    from threadpoolctl import threadpool_limits  # noqa: PLC0415

    from dprange.optimize.dense import dense_loss, optimize_dense  # noqa: PLC0415
    from dprange.optimize.p_identity import Gram, default_rows, optimize_p_identity  # noqa: PLC0415
    from dprange.workloads.ranges import AllRange, Prefix, singular_value_sum  # noqa: PLC0415

    n = args.n
    workload = (Prefix if args.workload == "prefix" else AllRange)(n)
    gram = workload.gram()
    bound = singular_value_sum(workload.singular_values()) ** 2 / n  # closed form, O(n)

    def ratio(trace: float) -> float:
        return (trace / bound) ** 0.5

    def report(start: str, **fields) -> None:
        print(json.dumps({"workload": workload.name, "n": n, "start": start, **fields}), flush=True)

    with threadpool_limits(limits=1, user_api="blas"):
        p = args.rows or default_rows(n)
        cpu = time.process_time()
        theta, trace = optimize_p_identity(Gram(workload), p)  # 200 steps from the banded start
        report("p-identity (template)", rows=p, rmse_over_bound=ratio(trace), cpu_seconds=time.process_time() - cpu)
        p_identity = np.vstack([np.eye(n), theta])
        control = ratio(dense_loss(p_identity, gram)[0])  # the same trace, dense: O(n^3)
        best = ("p-identity (template)", control)

        for name in args.starts.split(","):
            extra = {}
            if name == "p-identity":
                start = p_identity
            elif name == "p-identity+blocks":
                sizes = [int(b) for b in args.blocks.split(",")]
                start = np.vstack([p_identity, *(args.block_weight * block_rows(n, b) for b in sizes)])
                extra = {"blocks": sizes, "block_weight": args.block_weight}
            elif name == "hierarchy":
                start, mechanism = hierarchy_start(workload, n)
                extra = {"mechanism": mechanism}
            else:
                raise SystemExit(f"unknown start {name!r}")
            start_trace = dense_loss(start, gram)[0]  #                                  O(k n^2 + n^3)
            counter = StepCounter()
            cpu = time.process_time()
            end, trace = optimize_dense(gram, start, maxiter=args.steps, bar=counter)  # O(k n^2 + n^3) a step
            report(
                name,
                rows=int(start.shape[0]),
                start_rmse_over_bound=ratio(start_trace),
                rmse_over_bound=ratio(trace),
                gain_over_p_identity=1.0 - ratio(trace) / control,
                steps=counter.steps,
                cpu_seconds=time.process_time() - cpu,
                nonzero_rows=int((end.max(axis=1) > 1e-9).sum()),
                **extra,
            )
            best = min(best, (name, ratio(trace)), key=lambda b: b[1])
    summary = {"best_start": best[0], "rmse_over_bound": best[1], "gain_over_p_identity": 1.0 - best[1] / control}
    print(json.dumps({"summary": summary, "load_average": os.getloadavg(), "cpus": os.cpu_count()}), flush=True)


if __name__ == "__main__":
    main()

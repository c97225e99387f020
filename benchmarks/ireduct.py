"""iReduct against an even split of epsilon on overlapping marginals of the DPBench 2-D shapes.

Each 256 x 256 histogram of ../shared/data/dpbench/2D, coarsened to 32 x 32, is answered for
three sets of counting queries at once: its two 1-way marginals and its 32 x 32 cells (every
record in one cell of each, so the even split gives each query epsilon / 3).  Relative error
|answer - true| / max(true, sanity) with sanity 10 (the public bound of Xiao, Bender, Hay and
Gehrke, SIGMOD 2011); mean and max over the queries, averaged over ``--trials`` seeded trials;
CPU seconds per run (median).

    python benchmarks/ireduct.py [--trials 5]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import scipy.sparse as sp

from dprange.data_aware.ireduct import ireduct, marginal_queries
from dprange.data_aware.steps import laplace_spec

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "dpbench", "2D")
SANITY = 10.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    rows, seconds = [], []
    for name in sorted(f for f in os.listdir(DATA) if f.endswith(".npy")):
        x = np.rint(np.load(os.path.join(DATA, name))).astype(np.int64).reshape(32, 8, 32, 8).sum(axis=(1, 3))
        queries = sp.vstack([marginal_queries(x.shape, 0), marginal_queries(x.shape, 1), sp.identity(x.size)]).tocsr()
        true = queries @ x.ravel()
        for epsilon in (0.1, 1.0):
            out: dict = {"ireduct": [], "even": []}
            for t in range(args.trials):
                start = time.process_time()
                run = ireduct(x, queries, epsilon, sanity=SANITY, rng=t)
                seconds.append(time.process_time() - start)
                even = true + laplace_spec(epsilon / 3, 1).sample(true.shape, np.random.default_rng(1000 + t))
                for key, answers in (("ireduct", run.answers), ("even", even)):
                    rel = np.abs(answers - true) / np.maximum(true, SANITY)
                    out[key].append((rel.mean(), rel.max()))
            row = {"shape": name.removesuffix(".npy"), "epsilon": epsilon, "queries": int(true.size)}
            for key, values in out.items():
                row[f"{key}_mean_relative_error"] = float(np.mean([v[0] for v in values]))
                row[f"{key}_max_relative_error"] = float(np.mean([v[1] for v in values]))
            rows.append(row)
    print(
        json.dumps({"trials": args.trials, "median_cpu_s_per_run": float(np.median(seconds)), "rows": rows}, indent=1)
    )


if __name__ == "__main__":
    main()

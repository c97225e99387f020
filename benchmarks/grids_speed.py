"""Speed of UG and AG (dprange.data_aware.grids, issue 32 item 4), as JSON.

Target: AG on a 1024 x 1024 grid from 10^7 two-column records in under 3 s.  The records are
a mixture of a few Gaussian clusters and a uniform background (seeded), integers 0..1023 per
column.  Timed per mechanism (``ugrid``, ``agrid``), epsilon 0.1 and 1, add/remove:

* ``histogram``: the product domain's histogram of the records (what ``release_grid`` reads);
* ``release``: ``mechanism.release(counts, epsilon)`` on that histogram (noisy total, levels,
  least squares, spread);
* ``end_to_end``: ``dprange.release_grid(columns, domain, epsilon, mechanism=name)``, the
  target's figure.

CPU seconds (``time.process_time``) and wall seconds, medians of ``--repeats`` runs
(``multidim_speed.measure``); the machine
is shared, so CPU time is the figure to compare, and the 1-minute load average is reported.

    python benchmarks/grids_speed.py [--repeats 5] [--records 10000000] [--side 1024]
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
from multidim_speed import measure  # the sibling script: benchmarks/ is on sys.path when run

import dprange
from dprange import AdaptiveGrid, Domain, ProductDomain, UniformGrid

TARGET_S = 3.0


def records(n: int, side: int, seed: int = 0) -> np.ndarray:
    """(n, 2) integer records: 80% in six Gaussian clusters, 20% uniform."""
    rng = np.random.default_rng(seed)
    clustered = int(0.8 * n)
    centres = rng.uniform(0.1 * side, 0.9 * side, (6, 2))
    spreads = rng.uniform(0.01 * side, 0.08 * side, 6)
    which = rng.integers(0, 6, clustered)
    points = centres[which] + rng.normal(size=(clustered, 2)) * spreads[which, None]
    background = rng.uniform(0, side, (n - clustered, 2))
    return np.clip(np.vstack([points, background]), 0, side - 1).astype(np.int64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--records", type=int, default=10**7)
    ap.add_argument("--side", type=int, default=1024)
    args = ap.parse_args()
    data = records(args.records, args.side)
    domain = ProductDomain([Domain.integers(0, args.side - 1)] * 2)
    counts = domain.histogram(data)
    out: dict = {
        "records": args.records,
        "grid": [args.side, args.side],
        "target_s": TARGET_S,
        "histogram": measure(lambda: domain.histogram(data), args.repeats),
        "cases": [],
    }
    for mech in (UniformGrid(), AdaptiveGrid()):
        for epsilon in (0.1, 1.0):
            rel = mech.release(counts, epsilon, rng=0)
            case = {
                "mechanism": mech.name,
                "epsilon": epsilon,
                "cells": {k: rel.parameters[k] for k in ("grid",)},
                "measured_cells": int(sum(level.size for level in rel._noise.levels[1:])),
                "release": measure(lambda m=mech, e=epsilon: m.release(counts, e, rng=1), args.repeats),
                "end_to_end": measure(
                    lambda m=mech, e=epsilon: dprange.release_grid(data, domain, e, mechanism=m.name, rng=1),
                    args.repeats,
                ),
            }
            case["within_target"] = case["end_to_end"]["cpu_s"] < TARGET_S
            out["cases"].append(case)
            print(json.dumps(case), flush=True)
    out["load_average_1min"] = os.getloadavg()[0]
    out["cpus"] = os.cpu_count()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

"""Optimised strategies (issue 15) against the best fixed strategy and the SVD bound; JSON.

Ratios to the SVD bound are reported as HDMM reports them: in RMSE.  HDMM's experiments
(McKenna et al., VLDB 2018; ``experiments/journal/oned.py`` of their repository) compute a
strategy's ``rootmse`` = sqrt(trace(W^T W (A^T A)^+) Delta^2 / m) and the bound as
sqrt((sum of singular values of W)^2 / n / m), both without the noise factor, and compare the
two; the ratio of RMSEs is the square root of the ratio of average variances printed here
beside it (``*_variance``).  The noise constants agree: the Laplace variance 2 Delta_1^2 /
eps^2 of the mechanism and the 2 / eps^2 of ``svd_bound(..., noise="laplace_float")`` (an L2
bound, so Delta_1 >= Delta_2 makes it a valid, not necessarily reachable, bound under pure
epsilon-DP; the optimised strategy's discrete Laplace on a finely quantised integer matrix has
the continuous variance to within 1e-10).  Under (epsilon, delta) the bound is
``svd_bound(..., delta)`` with dprange's discrete Gaussian (its variance at
``gaussian_sigma(eps, delta)``, 20.5 at (1, 1e-6), not Li and Miklau's 2 log(2 / delta) / eps^2 =
29.0, which would sit above dprange's own Gaussian mechanisms).

Exact expected error, average variance per query, epsilon = 1:

* all ranges and all prefixes at n = 256 and 1024 (and 4096 with ``--full``): Optimized
  (p-Identity with L1 columns, discrete Laplace, quantised: the mechanism as released), the
  best candidate ``select`` ranks without it, the SVD bound, and the eigen-design's L1 score
  (its strategy charged its L1 sensitivity, Laplace noise) as a reference point;
* (epsilon, delta) = (1, 1e-6): the trace of the eigen-design, of the L2 p-Identity
  template and of the exact L2 optimum (``template="l2-optimal"``, :mod:`dprange.optimize.l2_optimum`)
  against the bound with the same noise factor (``strategy_ratio``: trace(G (A^T A)^-1)
  max-column-L2-norm^2 / ((sum sigma)^2 / n), the issue's criterion), the exact error of
  Optimized (template auto: the L2 optimum under add/remove) and the best fixed strategy;
* workloads no fixed strategy is designed for, at n = 256: random ranges of width at most
  32, prefixes plus unit queries, an explicit random 0/1 matrix, all ranges on a permuted
  domain (HDMM's "permuted range") (both privacy models), with ``best_fixed_over_bound_variance``:
  the best fixed strategy's error over the SVD bound with dprange's own noise floor (discrete
  Laplace under epsilon-DP, the discrete Gaussian under (epsilon, delta); add/remove
  neighbours), both for the noise the mechanisms draw as released.  No matrix mechanism with
  that noise has a least-squares error below the bound, so the ratio caps the gain any
  optimised strategy can show over the best fixed one; ``best_fixed_over_l2_optimum_variance``
  the same with ``l2_optimum_bound`` (the exact optimum of the L2 program: the least error of
  any matrix mechanism with that noise under (epsilon, delta), a tighter cap); under
  pure epsilon-DP also the dense L1 templates (``template="dense"`` and ``"dense-signed"``,
  :mod:`dprange.optimize.dense`: exact error, gain over the best fixed strategy and over
  p-Identity, CPU seconds of the optimisation from the cached p-Identity or dense optimum);
* CPU seconds: the optimisation (cold cache) and a release of 10^6 records with the cached
  strategy (median of 5, CPU and wall);
* ``--speed [--baseline SRC]``: only the cold p-Identity (L1) optimisation with the default
  settings, all ranges and prefixes at n = 256, 1024, 4096: CPU seconds (time.process_time)
  and the RMSE ratio of the unquantised strategy to the SVD bound, sqrt(trace(G (A^T A)^-1) /
  ((sum sigma)^2 / n)); each case in a fresh process, with ``--baseline`` (another checkout's
  ``src``, e.g. ``git worktree add /tmp/old <commit>``) interleaved case by case with this one.

    OPENBLAS_NUM_THREADS=1 python benchmarks/optimized.py [--full] [--cache-dir DIR]
    OPENBLAS_NUM_THREADS=1 python benchmarks/optimized.py --speed [--baseline /tmp/old/src] [--repeats 1]
    OPENBLAS_NUM_THREADS=1 python benchmarks/optimized.py --sweep [--n 256] [--match width-at-most]
    OPENBLAS_NUM_THREADS=1 python benchmarks/optimized.py --replace [--full]
    OPENBLAS_NUM_THREADS=1 python benchmarks/optimized.py --l2 [--full] [--baseline /tmp/old/src]

``--l2``: the exact L2 optimum (:mod:`dprange.optimize.l2_optimum`) on all ranges and prefixes of 256 and
1024 bins (``--full``: also 2048 and 4096): the cold solve's CPU and wall seconds, steps and
trace and bound over the SVD bound, with ``--baseline`` interleaved case by case (up to 1024
bins); then template auto at (1, 1e-6) as released (the L2 optimum at every size now) against
the L2 template and the best fixed strategy, and a release of 10^6 records with the cached
strategy (median of 5 in one process, CPU and wall, each read from the disk cache by a fresh
mechanism; and the wall seconds of the first error bar after it, which forms the covariance),
and the wall seconds of loading it saved as JSON, with its strategy's inverse adopted from the
cache and without (median of 3).

``--sweep``: how the gain over the best fixed strategy depends on the workload's shape, n = 256
(``--n``), both privacy models: random ranges of width at most w (w = 2 ... n; 2000 ranges,
public seed 0), every range of width exactly w (sliding windows, w = 16, 32, 64), and all
prefixes plus c times the unit queries (c = 0.25 ... 16).  Each row has the gain
(best fixed / Optimized with template auto, exact errors as released), the cap (best fixed
/ the SVD bound with the noise floor of the noise drawn: no matrix mechanism with that noise
gains more) and the exact cap (best fixed / ``l2_optimum_bound``, solved up to 4096 bins: under
(epsilon, delta) exactly the most a matrix mechanism with that noise gains).

``--replace``: replace neighbours at (1, 1e-6), all ranges and prefixes on 64, 256 and 1024
bins: the L2 optimum of the replace program (``template="l2-optimal"``, pairwise sensitivity
and public total; up to 256 bins), the L2 template optimised for replace and for the add/remove
loss (as measured before), template auto, the best fixed strategy and the replace bound (up to
256 bins), exact errors as released; then epsilon = 1 (delta = 0) on 64, 256 and 1024
bins (``--full``: also 4096): the p-Identity template optimised with the public total
(``Optimized(neighbours="replace")``; its CPU), what ``Optimized`` measured under replace
before (the add/remove p-Identity optimum, or the identity where its exact error as released
is lower), and the best fixed strategy.

Uses its own cache directory (default: a fresh temporary one) so that the optimisation is
measured cold.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

EPSILON = 1.0
DELTA = 1e-6
#: The noise and neighbouring relation of every mechanism ranked here and of the bound beside
#: them: "auto" is what the mechanisms draw as released (discrete Laplace when delta = 0, else
#: the discrete Gaussian).
NOISE = "auto"
NEIGHBOURS = "add_remove"


def cpu_and_wall(fn):
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - cpu, time.perf_counter() - wall


SPEED_CASE = """
import json, sys, time
import numpy as np
from dprange.mechanisms.optimized import Gram, default_rows, optimize_p_identity
from dprange.workloads import AllRange, Prefix
name, n = sys.argv[1], int(sys.argv[2])
workload = (AllRange if name == "all-range" else Prefix)(n)
gram = Gram(workload)
p = default_rows(n)
cpu = time.process_time()
theta, trace = optimize_p_identity(gram, p)
cpu = time.process_time() - cpu
singular = float(np.sqrt(np.clip(np.linalg.eigvalsh(workload.gram()), 0, None)).sum())
print(json.dumps({"rows": p, "cpu_seconds": cpu, "rmse_ratio": (trace / (singular**2 / n)) ** 0.5}))
"""


def speed(baseline: str | None, repeats: int) -> None:
    """The cold optimisation, this checkout against ``baseline`` (module doc), case by case."""
    sources = {"new": str(Path(__file__).resolve().parents[1] / "src")}
    if baseline:
        sources = {"old": str(Path(baseline).resolve()), **sources}
    rows = []
    for n in (256, 1024, 4096):
        for name in ("all-range", "prefix"):
            for _ in range(repeats):
                for label, src in sources.items():
                    env = {**os.environ, "PYTHONPATH": src, "DPRANGE_PROGRESS": "0"}
                    out = subprocess.run(
                        [sys.executable, "-c", SPEED_CASE, name, str(n)],
                        env=env,
                        check=True,
                        capture_output=True,
                        text=True,
                    )
                    row = {"code": label, "workload": name, "n": n, **json.loads(out.stdout)}
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    print_summary(openblas_threads=os.environ.get("OPENBLAS_NUM_THREADS"), speed=rows)


L2_CASE = """
import json, sys, time
import numpy as np
from dprange.optimize.l2_optimum import l2_optimum
from dprange.workloads import AllRange, Prefix
name, n = sys.argv[1], int(sys.argv[2])
gram = (AllRange if name == "all-range" else Prefix)(n).gram()
singular = float(np.sqrt(np.clip(np.linalg.eigvalsh(gram), 0, None)).sum())
cpu, wall = time.process_time(), time.perf_counter()
result = l2_optimum(gram)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
bound = singular**2 / n
print(json.dumps({"cpu_seconds": cpu, "wall_seconds": wall, "steps": result.steps,
                  "trace_over_svd_bound": result.trace / bound, "bound_over_svd_bound": result.bound / bound}))
"""


def l2_large(baseline: str | None, full: bool) -> None:
    """``--l2``: the exact L2 optimum's cold solve, this checkout against ``baseline`` case by
    case in fresh processes (the baseline only up to 1024 bins, where it stopped), then template
    auto at (1, 1e-6) as released against the best fixed strategy and the L2 template, and a
    release of 10^6 records with the cached strategy (median of 5) and its first error bar."""
    sizes = (256, 1024, 2048, 4096) if full else (256, 1024)
    sources = {"new": str(Path(__file__).resolve().parents[1] / "src")}
    if baseline:
        sources = {"old": str(Path(baseline).resolve()), **sources}
    solves = []
    for n in sizes:
        for name in ("all-range", "prefix"):
            for label, src in sources.items():
                if label == "old" and n > 1024:
                    continue
                env = {**os.environ, "PYTHONPATH": src, "DPRANGE_PROGRESS": "0"}
                out = subprocess.run(
                    [sys.executable, "-c", L2_CASE, name, str(n)], env=env, check=True, capture_output=True, text=True
                )
                solves.append({"code": label, "workload": name, "n": n, **json.loads(out.stdout)})
                print(json.dumps(solves[-1]), flush=True)

    import dprange  # noqa: PLC0415 - after the cache directory is set
    from dprange.analysis import expected_error, select, svd_bound  # noqa: PLC0415
    from dprange.mechanisms.optimized import Optimized  # noqa: PLC0415
    from dprange.workloads.ranges import AllRange, Prefix, singular_value_sum  # noqa: PLC0415

    released = []
    for n in sizes:
        for workload in (AllRange(n), Prefix(n)):
            relaxed = singular_value_sum(workload.singular_values()) ** 2 / n
            auto = Optimized(workload, template="auto")
            error, cpu, wall = cpu_and_wall(lambda w=workload, m=auto: expected_error(m, w, EPSILON, delta=DELTA))
            template = Optimized(workload, template="p-identity-l2")
            table = select(workload, None, EPSILON, delta=DELTA, neighbours=NEIGHBOURS, noise=NOISE).table
            fixed = min((c for c in table if not isinstance(c.mechanism, Optimized)), key=lambda c: c.error)
            values = np.random.default_rng(2).integers(0, n, 10**6)
            domain = dprange.Domain.integers(0, n - 1)
            timings, error_bars = [], []
            for _ in range(5):  # a fresh mechanism each time: the strategy is read from the disk cache
                release, release_cpu, release_wall = cpu_and_wall(
                    lambda w=workload: dprange.release(values, domain, EPSILON, delta=DELTA, mechanism=Optimized(w))
                )
                timings.append((release_cpu, release_wall))
                error_bars.append(cpu_and_wall(lambda r=release: r.range(0, n // 2).stderr)[2])  # the covariance
            loads = load_timings(release)
            row = {
                "workload": workload.name,
                "n": n,
                "optimized": error,
                "chosen_template": auto.strategy(n).template,
                "design_cpu_seconds_cold": cpu,
                "design_wall_seconds_cold": wall,
                "svd_bound": svd_bound(workload, EPSILON, DELTA),
                "optimized_strategy_ratio": auto.optimised_strategy(n).trace / relaxed,
                "p_identity_l2_strategy_ratio": template.optimised_strategy(n).trace / relaxed,
                "best_fixed": fixed.error,
                "best_fixed_mechanism": repr(fixed.mechanism),
                "fixed_over_optimized_variance": fixed.error / error,
                "release_records": 10**6,
                "release_cpu_seconds_median": statistics.median(t[0] for t in timings),
                "release_wall_seconds_median": statistics.median(t[1] for t in timings),
                "release_wall_seconds": [round(t[1], 3) for t in timings],
                "first_error_bar_wall_seconds_median": statistics.median(error_bars),
                **loads,
            }
            print(json.dumps(row), flush=True)
            released.append(row)
    print_summary(
        epsilon=EPSILON,
        delta=DELTA,
        openblas_threads=os.environ.get("OPENBLAS_NUM_THREADS"),
        l2_solves=solves,
        l2_released=released,
    )


def load_timings(release, repeats: int = 3) -> dict:
    """Wall seconds (medians of ``repeats``, alternated) of ``dprange.load_release`` on the
    release saved as JSON: with the inverse of its strategy adopted from the disk cache, and
    without (the cache's inverse not looked for: the O(n^3) factorisation, as before)."""
    import dprange  # noqa: PLC0415
    from dprange.optimize import cache as optimized  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "release.json"
        release.to_json(path)
        adopted, computed = [], []
        limit = optimized.CACHED_INVERSE_MIN_BINS
        for _ in range(repeats):
            adopted.append(cpu_and_wall(lambda: dprange.load_release(path))[2])
            optimized.CACHED_INVERSE_MIN_BINS = math.inf
            try:
                computed.append(cpu_and_wall(lambda: dprange.load_release(path))[2])
            finally:
                optimized.CACHED_INVERSE_MIN_BINS = limit
    return {
        "load_wall_seconds_median": statistics.median(adopted),
        "load_without_cached_inverse_wall_seconds_median": statistics.median(computed),
    }


def print_summary(**fields) -> None:
    """The run's JSON summary: the machine, its CPUs and load average, then ``fields``."""
    machine = {"machine": platform.platform(), "cpus": os.cpu_count(), "load_average": os.getloadavg()}
    print(json.dumps({**machine, **fields}, indent=1))


def sweep_workloads(n: int) -> dict:
    """The ``--sweep`` workloads on ``n`` bins (module doc), by name."""
    from dprange.workloads import Explicit, Ranges  # noqa: PLC0415

    workloads = {}
    for width in (2, 4, 8, 16, 32, 64, 128, 256):
        if width <= n:
            rng = np.random.default_rng(0)
            lo = rng.integers(0, n - width + 1, 2000)
            workloads[f"ranges-width-at-most-{width}"] = Ranges(lo, lo + rng.integers(0, width, 2000), n)
    for width in (16, 32, 64):
        if width <= n:
            lo = np.arange(n - width + 1)
            workloads[f"ranges-width-{width}"] = Ranges(lo, lo + width - 1, n)
    prefixes = np.tril(np.ones((n, n)))
    for weight in (0.25, 0.5, 1, 2, 4, 8, 16):
        workloads[f"prefixes+{weight}x-units"] = Explicit(np.vstack([prefixes, weight * np.eye(n)]))
    return workloads


def sweep(n: int, match: str = "") -> None:
    """Gain of the optimised strategy over the best fixed one and its cap (``--sweep``)."""
    from dprange.analysis import expected_error, l2_optimum_bound, select, svd_bound  # noqa: PLC0415
    from dprange.mechanisms.optimized import Optimized  # noqa: PLC0415

    rows = []
    for name, workload in sweep_workloads(n).items():
        if match not in name:
            continue
        for delta in (0.0, DELTA):
            mechanism = Optimized(workload, neighbours=NEIGHBOURS, noise=NOISE)
            optimized, cpu, _ = cpu_and_wall(
                lambda m=mechanism, w=workload, d=delta: expected_error(m, w, EPSILON, delta=d)
            )
            # after the optimisation, so that its CPU time is measured with a cold cache
            table = select(workload, None, EPSILON, delta=delta, neighbours=NEIGHBOURS, noise=NOISE).table
            fixed = min((c for c in table if not isinstance(c.mechanism, Optimized)), key=lambda c: c.error)
            bound = svd_bound(workload, EPSILON, delta, noise=NOISE)
            row = {
                "workload": name,
                "n": n,
                "delta": delta,
                "optimized": optimized,
                "template": mechanism.strategy(n).template,
                "best_fixed": fixed.error,
                "best_fixed_mechanism": fixed.mechanism.name,
                "gain": fixed.error / optimized,
                "cap": fixed.error / bound,
                "exact_cap": fixed.error / l2_optimum_bound(workload, EPSILON, delta, noise=NOISE),
                "cpu_seconds": cpu,  # the optimisation (cold cache) and the exact error
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    print_summary(epsilon=EPSILON, delta=DELTA, neighbours=NEIGHBOURS, sweep=rows)


def optimised_for_add_remove(mech):
    """``mech`` (an ``Optimized`` under replace) measuring the strategies optimised for the
    add/remove loss, as ``Optimized`` did under replace before the replace losses: the "before"
    columns of ``--replace``."""
    mech.replace_program = lambda n, template: False
    return mech


def replace_neighbours(sizes) -> None:
    """``--replace``: under replace neighbours at (1, 1e-6), all ranges and prefixes: the L2
    optimum of the replace program (template l2-optimal, up to 256 bins), the L2 template
    optimised for replace and, "before", the L2 template optimised for the add/remove loss
    measured under replace, template auto, the best fixed strategy and the replace bound
    (``l2_optimum_bound(..., neighbours="replace")``, up to 256 bins), exact errors per query as
    released, and the CPU of the replace program and of the L2 template."""
    from dprange.analysis import expected_error, l2_optimum_bound, select  # noqa: PLC0415
    from dprange.mechanisms.optimized import Optimized  # noqa: PLC0415
    from dprange.optimize.l2_optimum import L2_REPLACE_MAX_N  # noqa: PLC0415
    from dprange.workloads import AllRange, Prefix  # noqa: PLC0415

    def error(mech, workload):
        return expected_error(mech, workload, EPSILON, delta=DELTA)

    rows = []
    for n in sizes:
        for workload in (AllRange(n), Prefix(n)):
            row: dict = {"workload": workload.name, "n": n}
            optimum = Optimized(workload, template="l2-optimal", neighbours="replace")
            if n <= L2_REPLACE_MAX_N:  # first: auto builds it too (and would leave it in the cache)
                _, row["replace_program_cpu_seconds"], _ = cpu_and_wall(lambda m=optimum, w=workload: m.strategy(w.n))
            template = Optimized(workload, template="p-identity-l2", neighbours="replace")
            _, row["l2_template_cpu_seconds"], _ = cpu_and_wall(lambda m=template, w=workload: m.strategy(w.n))
            row["p_identity_l2"] = error(template, workload)
            previous = optimised_for_add_remove(Optimized(workload, template="p-identity-l2", neighbours="replace"))
            row["p_identity_l2_add_remove_loss"] = error(previous, workload)
            auto = Optimized(workload, neighbours="replace")
            row["auto"] = error(auto, workload)
            row["auto_template"] = auto.strategy(n).describe()["template"]
            table = select(workload, None, EPSILON, delta=DELTA, neighbours="replace").table
            fixed = min((c for c in table if not isinstance(c.mechanism, Optimized)), key=lambda c: c.error)
            row |= {"best_fixed": fixed.error, "best_fixed_mechanism": fixed.mechanism.name}
            row["fixed_over_l2_template"] = fixed.error / row["p_identity_l2"]
            row["fixed_over_auto"] = fixed.error / row["auto"]
            if n <= L2_REPLACE_MAX_N:
                row["l2_optimal"] = error(optimum, workload)
                row["replace_bound"] = bound = l2_optimum_bound(workload, EPSILON, DELTA, neighbours="replace")
                row["l2_optimal_over_bound"] = row["l2_optimal"] / bound
                row["l2_template_over_bound"] = row["p_identity_l2"] / bound
                row["fixed_over_l2_optimal"] = fixed.error / row["l2_optimal"]
            print(json.dumps(row), flush=True)
            rows.append(row)
    print_summary(epsilon=EPSILON, delta=DELTA, neighbours="replace", replace=rows)


def replace_neighbours_pure(sizes) -> None:
    """``--replace``, epsilon-DP: the p-Identity template optimised for replace neighbours (the
    loss with the public total) against the add/remove optimum measured under replace and the
    best fixed strategy, exact errors per query as released (module doc)."""
    from dprange.analysis import expected_error, select  # noqa: PLC0415
    from dprange.mechanisms.optimized import Optimized  # noqa: PLC0415
    from dprange.workloads import AllRange, Prefix  # noqa: PLC0415

    rows = []
    for n in sizes:
        for workload in (AllRange(n), Prefix(n)):
            mech = Optimized(workload, neighbours="replace")
            _, cpu, _ = cpu_and_wall(lambda m=mech, w=workload: m.strategy(w.n))
            optimised = expected_error(mech, workload, EPSILON)
            previous = optimised_for_add_remove(Optimized(workload, neighbours="replace"))
            before = expected_error(previous, workload, EPSILON)
            table = select(workload, None, EPSILON, neighbours="replace").table
            fixed = min((c for c in table if not isinstance(c.mechanism, Optimized)), key=lambda c: c.error)
            row = {
                "workload": workload.name,
                "n": n,
                "replace_optimised": optimised,
                "measured": mech.strategy(n).describe()["measured"],
                "before": before,  # the add/remove optimum, or the identity where lower as released
                "measured_before": previous.strategy(n).describe()["measured"],
                "best_fixed": fixed.error,
                "best_fixed_mechanism": fixed.mechanism.name,
                "fixed_over_replace_optimised": fixed.error / optimised,
                "fixed_over_before": fixed.error / before,
                "optimisation_cpu_seconds": cpu,
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    print_summary(epsilon=EPSILON, delta=0.0, neighbours="replace", replace_pure=rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also n = 4096")
    parser.add_argument("--speed", action="store_true", help="only the cold optimisation's CPU time and ratio")
    parser.add_argument("--baseline", default=None, help="with --speed or --l2: another checkout's src to compare")
    parser.add_argument(
        "--l2", action="store_true", help="only the exact L2 optimum: its solve and releases (--full: 2048, 4096)"
    )
    parser.add_argument("--repeats", type=int, default=1, help="with --speed: runs of each case")
    parser.add_argument("--cache-dir", default=None, help="strategy cache (default: a fresh temporary directory)")
    parser.add_argument("--skip-standard", action="store_true", help="only the unusual workloads and releases")
    parser.add_argument("--sweep", action="store_true", help="only the gain and its cap across workload shapes")
    parser.add_argument("--n", type=int, default=256, help="with --sweep: the number of bins")
    parser.add_argument("--match", default="", help="with --sweep: only the workloads whose name contains this")
    parser.add_argument(
        "--replace", action="store_true", help="only the replace-neighbour comparisons (64 to 1024 bins; --full: 4096)"
    )
    args = parser.parse_args()
    if args.speed:
        speed(args.baseline, args.repeats)
        return
    os.environ["DPRANGE_CACHE_DIR"] = args.cache_dir or tempfile.mkdtemp(prefix="dprange-bench-")
    if args.l2:
        l2_large(args.baseline, args.full)
        return
    if args.sweep:
        sweep(args.n, args.match)
        return
    if args.replace:
        replace_neighbours((64, 256, 1024))
        replace_neighbours_pure((64, 256, 1024, 4096) if args.full else (64, 256, 1024))
        return

    import dprange  # noqa: PLC0415 - after the cache directory is set
    from dprange.analysis import expected_error, l2_optimum_bound, select, svd_bound  # noqa: PLC0415
    from dprange.mechanisms.optimized import Optimized  # noqa: PLC0415
    from dprange.optimize.l2_optimum import strategy_trace  # noqa: PLC0415
    from dprange.optimize.p_identity import column_norm, eigen_design  # noqa: PLC0415
    from dprange.workloads.ranges import AllRange, Explicit, Prefix, Ranges, singular_value_sum  # noqa: PLC0415

    def best_fixed(workload, delta):
        table = select(workload, None, EPSILON, delta=delta, neighbours=NEIGHBOURS, noise=NOISE).table
        best = min((c for c in table if not isinstance(c.mechanism, Optimized)), key=lambda c: c.error)
        return best.error, repr(best.mechanism)

    def optimised(workload, delta, template="auto"):
        mech = Optimized(workload, template=template)
        strategy, cpu, _ = cpu_and_wall(lambda: mech.strategy(workload.n) if delta == 0 else None)
        error = expected_error(mech, workload, EPSILON, delta=delta)
        strategy = mech.strategy(workload.n)
        return error, strategy, cpu

    sizes = (256, 1024, 4096) if args.full else (256, 1024)
    standard = []
    for n in () if args.skip_standard else sizes:
        for workload in (AllRange(n), Prefix(n)):
            bound = svd_bound(workload, EPSILON, noise="laplace_float")
            err, strategy, opt_cpu = optimised(workload, 0.0)
            fixed, fixed_name = best_fixed(workload, 0.0)
            gram = workload.gram()
            relaxed = singular_value_sum(workload.singular_values()) ** 2 / n
            eigen, eigen_cpu, _ = cpu_and_wall(lambda g=gram: eigen_design(g))
            eigen_trace = strategy_trace(eigen, gram)
            eigen_l1 = 2 / EPSILON**2 * column_norm(eigen, 1) ** 2 * eigen_trace / workload.m
            l2 = Optimized(workload, template="p-identity-l2")
            _, l2_cpu, _ = cpu_and_wall(lambda w=workload, m=l2: m.strategy(w.n))
            optimum = Optimized(workload, template="l2-optimal")
            _, optimum_cpu, _ = cpu_and_wall(lambda w=workload, m=optimum: m.strategy(w.n))
            d_err, d_strategy, _ = optimised(workload, DELTA)
            d_fixed, d_fixed_name = best_fixed(workload, DELTA)
            row = {
                "workload": workload.name,
                "n": n,
                "optimized": err,
                "rows": strategy.rows - n,
                "best_fixed": fixed,
                "best_fixed_mechanism": fixed_name,
                "svd_bound": bound,
                "optimized_over_bound_rmse": (err / bound) ** 0.5,
                "optimized_over_bound_variance": err / bound,
                "fixed_over_optimized_variance": fixed / err,
                "eigen_l1_score": eigen_l1,
                "eigen_l1_over_bound_rmse": (eigen_l1 / bound) ** 0.5,
                "optimisation_cpu_seconds": opt_cpu,
                "eps_delta": {
                    "eigen_strategy_ratio": eigen_trace * column_norm(eigen, 2) ** 2 / relaxed,
                    "p_identity_l2_strategy_ratio": l2.strategy(n).trace / relaxed,
                    "l2_optimal_strategy_ratio": optimum.strategy(n).trace / relaxed,
                    "chosen_template": d_strategy.template,
                    "optimized": d_err,
                    "svd_bound": svd_bound(workload, EPSILON, DELTA),
                    "best_fixed": d_fixed,
                    "best_fixed_mechanism": d_fixed_name,
                    "fixed_over_optimized_variance": d_fixed / d_err,
                    "eigen_cpu_seconds": eigen_cpu,
                    "p_identity_l2_cpu_seconds": l2_cpu,
                    "l2_optimal_cpu_seconds": optimum_cpu,
                },
            }
            print(json.dumps(row), flush=True)
            standard.append(row)

    n = 256
    rng = np.random.default_rng(0)
    lo = rng.integers(0, n - 32 + 1, 2000)
    unusual_workloads = {
        "bounded-ranges-width-32": Ranges(lo, lo + rng.integers(0, 32, 2000), n),
        "prefix+identity": Explicit(np.vstack([np.tril(np.ones((n, n))), np.eye(n)])),
        "explicit-0/1": Explicit(np.random.default_rng(1).integers(0, 2, size=(100, n))),
        # HDMM's "permuted range": all ranges over a domain whose order the queries do not follow
        # (a categorical column in arbitrary order); the fixed strategies assume the order
        "permuted-all-ranges": Explicit(AllRange(n).dense()[:, np.random.default_rng(3).permutation(n)]),
    }
    unusual = []
    for name, workload in unusual_workloads.items():
        for delta in (0.0, DELTA):
            err, strategy, seconds = optimised(workload, delta)
            fixed, fixed_name = best_fixed(workload, delta)
            row = {
                "workload": name,
                "n": n,
                "delta": delta,
                "optimized": err,
                "template": strategy.template,
                "best_fixed": fixed,
                "best_fixed_mechanism": fixed_name,
                "fixed_over_optimized_variance": fixed / err,
                "svd_bound": svd_bound(workload, EPSILON, delta, noise="laplace_float" if delta == 0 else "auto"),
            }
            released_bound = svd_bound(workload, EPSILON, delta, noise=NOISE)
            row["svd_bound_as_released"] = released_bound
            row["best_fixed_over_bound_variance"] = fixed / released_bound  # the most any strategy can gain
            exact = l2_optimum_bound(workload, EPSILON, delta, noise=NOISE)
            row["best_fixed_over_l2_optimum_variance"] = fixed / exact  # tighter; exact under (epsilon, delta)
            if delta == 0:  # the dense L1 template (epsilon-DP only)
                for template in ("dense", "dense-signed"):
                    dense_err, dense_strategy, dense_cpu = optimised(workload, delta, template)
                    row[template] = {
                        "optimized": dense_err,
                        "rows": dense_strategy.rows,
                        "fixed_over_optimized_variance": fixed / dense_err,
                        "p_identity_over_dense_variance": err / dense_err,
                        "optimisation_cpu_seconds": dense_cpu,  # from the cached p-Identity / dense optimum
                    }
            print(json.dumps(row), flush=True)
            unusual.append(row)

    releases = []
    for n in sizes:
        values = np.random.default_rng(2).integers(0, n, 10**6)
        domain = dprange.Domain.integers(0, n - 1)
        Optimized("all-range").strategy(n)  # into the cache (already there unless --skip-standard)
        cpu, wall = [], []
        for _ in range(5):  # a fresh mechanism each time: the strategy is read from the disk cache
            _, c, w = cpu_and_wall(lambda: dprange.release(values, domain, EPSILON, mechanism=Optimized("all-range")))
            cpu.append(c)
            wall.append(w)
        releases.append(
            {
                "n": n,
                "records": 10**6,
                "release_cpu_seconds_median": statistics.median(cpu),
                "release_wall_seconds_median": statistics.median(wall),
            }
        )
        print(json.dumps(releases[-1]), flush=True)

    print(
        json.dumps(
            {
                "machine": platform.platform(),
                "cpus": os.cpu_count(),
                "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
                "epsilon": EPSILON,
                "delta": DELTA,
                "standard": standard,
                "unusual": unusual,
                "releases": releases,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

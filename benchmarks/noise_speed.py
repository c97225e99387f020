"""Secure noise speed, side by side with numpy's generator (CPU seconds, median of --repeats).

    python benchmarks/noise_speed.py [--quick] [--repeats 3]

Rows per scale b (n = 10^7 draws, 10^6 with --quick):

* ``secure``: dprange's default source (ChaCha20 keystream), exact discrete Laplace by the
  one-word inverse CDF (``dprange.privacy._laplace_table``);
* ``secure_cks``: the same keystream through Canonne-Kamath-Steinke's Algorithm 2 (what the
  secure source ran before, then on ``os.urandom``);
* ``seeded``: a seeded numpy Generator through the same exact sampler as before (CKS);
* ``numpy_laplace``: numpy's ``Generator.laplace`` (continuous, not private as implemented:
  the reference speed of a plain generator);
* ``numpy_geometric_difference``: a discrete Laplace from numpy's geometric draws (G1 - G2).

Also the raw byte rates of the keystream and of ``os.urandom`` (80 MB).  Target (issue 16):
``secure`` within 2x of ``numpy_laplace``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time

import numpy as np

from dprange.privacy._keystream import Keystream
from dprange.privacy.samplers import SecureRandom, _laplace_rational, sample_discrete_laplace


class _Delegate:
    """Hides the SecureRandom type so the sampler takes its CKS path on the keystream."""

    def __init__(self, source):
        self.integers = source.integers


def cpu(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n = 10**6 if args.quick else 10**7
    rows = []
    for scale in (1.0, 10.0, 1000.0):
        secure = SecureRandom()
        sample_discrete_laplace(scale, 1000, secure)  # build the table once (cached per scale)
        t, s = _laplace_rational(scale)
        r = math.exp(-s / t)
        rng = np.random.default_rng(0)
        row = {
            "scale": scale,
            "draws": n,
            "secure": cpu(lambda: sample_discrete_laplace(scale, n, secure), args.repeats),
            "secure_cks": cpu(lambda: sample_discrete_laplace(scale, n, _Delegate(secure)), args.repeats),
            "seeded": cpu(lambda: sample_discrete_laplace(scale, n, rng), args.repeats),
            "numpy_laplace": cpu(lambda: rng.laplace(scale=scale, size=n), args.repeats),
            "numpy_geometric_difference": cpu(lambda: rng.geometric(1 - r, n) - rng.geometric(1 - r, n), args.repeats),
        }
        row["secure_over_numpy_laplace"] = row["secure"] / row["numpy_laplace"]
        rows.append(row)
    stream = Keystream()
    size = 80 * 10**6
    rates = {
        "bytes": size,
        "chacha20_keystream_s": cpu(lambda: stream.read(size), args.repeats),
        "os_urandom_s": cpu(lambda: os.urandom(size), args.repeats),
    }
    print(
        json.dumps(
            {
                "benchmark": "noise_speed",
                "statistic": "median CPU seconds (time.process_time)",
                "cpu_count": os.cpu_count(),
                "load_average": os.getloadavg(),
                "discrete_laplace": rows,
                "random_bytes": rates,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

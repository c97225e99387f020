"""CPU seconds of short ``dprange`` commands in a fresh process, imports included (issue 34, item 7).

* ``dprange --help``: the lazy command table (src/dprange/cli/group.py) lists the commands
  without importing any of them, numpy or scipy; the target is under 0.3 s of CPU;
* ``dprange release --help``: imports the release command, the registry and the mechanisms
  (its options and choices come from the registry);
* ``dprange show RELEASE`` on a small saved release (64 bins, 200 records), where the ``show``
  command exists (``dprange.cli.show``); otherwise the row says it was skipped.  It reads the
  summary the saved file holds, without numpy; the target is under 0.3 s of CPU too;
* ``python -c pass``: the interpreter alone, the floor.

Medians of ``--repeats`` runs of the child's user + system CPU seconds (the machine may be
shared: CPU seconds, not wall time), and the modules each command loaded.  ``--src`` runs the
commands from another source tree (e.g. main's) to compare side by side in one run.

    python benchmarks/cli_startup.py --repeats 7
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

#: The target of issue 34: ``dprange --help`` and ``dprange show`` under this many CPU seconds.
TARGET_SECONDS = 0.3

#: Runs the CLI in-process with the given arguments, then prints the loaded modules' count and
#: whether numpy and scipy were among them (on stderr, after the command's own output).
RUNNER = (
    "import sys\n"
    "from dprange.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit:\n"
    "    pass\n"
    "print('MODULES', len(sys.modules), 'numpy' in sys.modules, 'scipy' in sys.modules, file=sys.stderr)\n"
)


def child_cpu(argv: list[str], env: dict) -> tuple[float, str]:
    """(user + system CPU seconds of one child process running ``argv``, its stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(argv, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {result.stderr.strip()}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), result.stderr


def measure(args: list[str], env: dict, repeats: int) -> dict:
    """Median CPU seconds of ``dprange ARGS`` over ``repeats`` fresh processes, and its imports."""
    argv = [sys.executable, "-c", RUNNER, *args]
    runs = [child_cpu(argv, env) for _ in range(repeats)]
    last = runs[-1][1].strip().splitlines()[-1].split()
    return {
        "cpu_s_median": round(statistics.median(seconds for seconds, _ in runs), 4),
        "cpu_s_runs": [round(seconds, 4) for seconds, _ in runs],
        "modules": int(last[1]),
        "numpy_imported": last[2] == "True",
        "scipy_imported": last[3] == "True",
    }


def small_release(folder: Path, env: dict) -> Path:
    """A saved 64-bin release of 200 records (``dprange release``), for ``show``."""
    data = folder / "small.csv"
    data.write_text("age\n" + "\n".join(str(20 + (7 * i) % 50) for i in range(200)) + "\n")
    output = folder / "release.json"
    argv = [sys.executable, "-c", RUNNER, "release", str(data), "-c", "age", "--lo", "0", "--hi", "100"]
    argv += ["--bins", "64", "-e", "1", "-o", str(output), "--seed", "1"]
    child_cpu(argv, env)
    return output


def show_available(env: dict) -> bool:
    """Whether the tree that ``env`` runs has the ``show`` command (dprange.cli.show)."""
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('dprange.cli.show') is None)"
    return subprocess.run([sys.executable, "-c", probe], env=env).returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--src", default=None, help="the source tree to run (default: this checkout's src)")
    options = parser.parse_args()
    src = options.src or str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": src, "DPRANGE_PROGRESS": "0"}
    interpreter = [child_cpu([sys.executable, "-c", "pass"], env)[0] for _ in range(options.repeats)]
    commands = {
        "dprange --help": measure(["--help"], env, options.repeats),
        "dprange release --help": measure(["release", "--help"], env, options.repeats),
    }
    if show_available(env):
        with tempfile.TemporaryDirectory() as folder:
            release = small_release(Path(folder), env)
            commands["dprange show RELEASE"] = measure(["show", str(release)], env, options.repeats)
    else:
        commands["dprange show RELEASE"] = {"skipped": "no 'show' command in this tree (dprange.cli.show)"}
    help_seconds = commands["dprange --help"]["cpu_s_median"]
    show_seconds = commands["dprange show RELEASE"].get("cpu_s_median")
    print(
        json.dumps(
            {
                "benchmark": "cli_startup",
                "src": src,
                "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
                "repeats": options.repeats,
                "python_pass_cpu_s_median": round(statistics.median(interpreter), 4),
                "commands": commands,
                "target_help_cpu_s": TARGET_SECONDS,
                "help_under_target": help_seconds < TARGET_SECONDS,
                "show_under_target": None if show_seconds is None else show_seconds < TARGET_SECONDS,
                "tqdm_installed": importlib.util.find_spec("tqdm") is not None,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()

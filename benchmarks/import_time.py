"""What a user waits for before genpqr does anything: the interpreter, ``import genpqr`` and the
command line's ``--version`` / ``--help`` (docs/benchmarks.md, "Start-up: imports on demand").

Each case runs in a fresh child process (no warm module cache beyond the operating system's file
cache, which the first, discarded, run fills); the table gives the median of ``--repeats`` wall
times, its target and the heavy libraries the case left in ``sys.modules``.

Cases:

* ``python``: ``python -c pass`` -- the floor every case pays (interpreter start, site);
* ``import genpqr``: ``python -c "import genpqr"``;
* ``genpqr --version``, ``genpqr --help``, ``genpqr fit --help``: the console script's entry
  (``from genpqr.app.cli import main; main()``), as the installed ``genpqr`` runs it;
* ``GenPQR()``: ``from genpqr import GenPQR; GenPQR()`` -- the first use, which imports what a fit
  needs (scikit-learn, scipy): reported, not targeted.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/import_time.py [--repeats 5]

Prints the machine, the load average before and after, and one table (markdown).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

ENTRY = "import sys; from genpqr.app.cli import main; sys.exit(main())"
PROBE = ("; import sys; print(','.join(sorted(m for m in ('sklearn', 'scipy.stats', 'scipy', 'pandas', "
         "'pandas.io.parsers', 'pyarrow', 'torch', 'matplotlib', 'jinja2') if m in sys.modules)))")

# (case, python arguments, target in seconds or None)
CASES = [
    ("python -c pass (floor)", ["-c", "pass"], None),
    ("import genpqr", ["-c", "import genpqr"], 1.0),
    ("genpqr --version", ["-c", ENTRY, "--version"], 0.2),
    ("genpqr --help", ["-c", ENTRY, "--help"], 0.5),
    ("genpqr fit --help", ["-c", ENTRY, "fit", "--help"], 0.5),
    ("GenPQR() (first use)", ["-c", "from genpqr import GenPQR; GenPQR()"], None),
]


def _wall(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _heavy(args: list[str]) -> str:
    """The heavy libraries left in ``sys.modules`` once the case has run (``--help``/``--version``
    exit through SystemExit, so the probe runs in a ``finally``)."""
    code = args[1]
    probe = PROBE.lstrip("; ")
    wrapped = f"try:\n    exec({code!r})\nfinally:\n    {probe}"
    out = subprocess.run([sys.executable, "-c", wrapped, *args[2:]], check=False, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--repeats", type=int, default=5, help="timed runs per case (default: 5)")
    args = p.parse_args(argv)
    print(f"machine: {platform.machine()} {os.cpu_count()} cores; Python {platform.python_version()}; "
          f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows = []
    for name, case_args, target in CASES:
        _wall(case_args)  # discarded: fills the file cache
        times = [_wall(case_args) for _ in range(args.repeats)]
        rows.append((name, statistics.median(times), min(times), target, _heavy(case_args)))
    floor = rows[0][1]
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print(f"| case | median of {args.repeats} (s) | best (s) | over the floor (s) | target (s) | met | "
          "heavy modules loaded |")
    print("|---|---|---|---|---|---|---|")
    for name, median, best, target, heavy in rows:
        met = "" if target is None else ("yes" if median < target else "no")
        print(f"| {name} | {median:.3f} | {best:.3f} | {median - floor:.3f} | "
              f"{'' if target is None else f'{target:.1f}'} | {met} | {heavy or 'none'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

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

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/import_time.py [--repeats 5] [--src DIR ...]

``--src DIR`` (repeatable) times the genpqr of each source folder (``DIR`` holds ``genpqr/``), the
runs of the folders interleaved, so that two versions are compared under the same load; the
table then has one column per folder and the ratio of the first to the last.

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
PROBE = ("; import sys; print('HEAVY:' + ','.join(sorted(m for m in ('sklearn', 'scipy.stats', 'scipy', 'pandas', "
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


def _env(src: str | None) -> dict | None:
    if src is None:
        return None
    return {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.abspath(src), os.environ.get("PYTHONPATH", "")])}


def _wall(args: list[str], src: str | None = None) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=_env(src))
    return time.perf_counter() - start


def _heavy(args: list[str], src: str | None = None) -> str:
    """The heavy libraries left in ``sys.modules`` once the case has run (``--help``/``--version``
    exit through SystemExit, so the probe runs in a ``finally``)."""
    code = args[1]
    probe = PROBE.lstrip("; ")
    wrapped = f"try:\n    exec({code!r})\nfinally:\n    {probe}"
    out = subprocess.run([sys.executable, "-c", wrapped, *args[2:]], check=False, capture_output=True, text=True,
                         env=_env(src))
    marked = [line for line in out.stdout.splitlines() if line.startswith("HEAVY:")]
    return marked[-1].removeprefix("HEAVY:") if marked else "(failed)"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--repeats", type=int, default=5, help="timed runs per case (default: 5)")
    p.add_argument("--src", action="append", default=None, metavar="DIR",
                   help="a source folder holding genpqr/ (repeatable; default: the genpqr Python imports)")
    args = p.parse_args(argv)
    srcs = args.src or [None]
    print(f"machine: {platform.machine()} {os.cpu_count()} cores; Python {platform.python_version()}; "
          f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows = []
    for name, case_args, target in CASES:
        for src in srcs:
            _wall(case_args, src)  # discarded: fills the file cache
        times = {src: [] for src in srcs}
        for _ in range(args.repeats):
            for src in srcs:  # interleaved: the folders see the same load
                times[src].append(_wall(case_args, src))
        rows.append((name, target, [statistics.median(times[src]) for src in srcs],
                     _heavy(case_args, srcs[-1])))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    heads = [f"median of {args.repeats} (s)"] if len(srcs) == 1 else [f"{src}: median of {args.repeats} (s)"
                                                                     for src in srcs] + ["ratio first/last"]
    print("| case | " + " | ".join(heads) + " | target (s) | met | heavy modules loaded |")
    print("|---|" + "---|" * (len(heads) + 3))
    for name, target, medians, heavy in rows:
        cells = [f"{m:.3f}" for m in medians] + ([f"{medians[0] / medians[-1]:.1f}x"] if len(srcs) > 1 else [])
        met = "" if target is None else ("yes" if medians[-1] < target else "no")
        print(f"| {name} | " + " | ".join(cells) + f" | {'' if target is None else f'{target:.1f}'} | {met} | "
              f"{heavy or 'none'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

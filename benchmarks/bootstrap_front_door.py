"""The README's bootstrap example as a user runs it, with replicates from reweighted counts against
replicates refitted (docs/benchmarks.md, "The bootstrap of the exact path").

The command (examples/README.md):

    genpqr fit examples/data/choices.csv --episode episode --time time --state state --action action \\
        --gamma 0.9 --normalization anchor:a --features examples/data/features.csv \\
        --bootstrap 200 --n-jobs 2 --out DIR

Cases (``--cases``, comma-separated), each in a child process (wall seconds; CPU seconds of the
child and the workers it waited for):

* ``cli``: the command as it is (exact path: replicates from the episodes' reweighted counts,
  :mod:`genpqr.evaluation._count_replicates`);
* ``cli-refit``: the same command with the count path switched off (every replicate refits
  GenPQR on its resampled episodes, as before);
* ``cli-before``: the command run on another checkout's code (``--before-src DIR``, e.g. the
  ``src`` of the commit before the count path), when given;
* ``cli-no-bootstrap``: the command without ``--bootstrap`` (the floor: the fit and its files);

and in this process, the bootstrap alone (``bootstrap_sources`` as ``genpqr fit`` calls it, 200
replicates, one worker):

* ``boot-counts`` / ``boot-refit``: with the command's statistic (the reward table and the NPL
  parameters re-estimated per replicate; two random features per (state, action), zero at the
  anchor: the same cost as the example's);
* ``boot-table-counts`` / ``boot-table-refit``: the reward table alone (no ``--features``).

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bootstrap_front_door.py [--cases ...]
        [--n-boot 200] [--n-jobs 2] [--before-src DIR]

Prints one table (markdown): case, wall s, CPU s, and the ratio named in the last column.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "examples" / "data"

OFF = ("import sys, genpqr.evaluation._count_replicates as c; c.count_plan = lambda *a, **k: None; "
       "from genpqr.app.cli import main; sys.exit(main(sys.argv[1:]))")
ON = "import sys; from genpqr.app.cli import main; sys.exit(main(sys.argv[1:]))"


def command(out: str, n_boot: int, n_jobs: int) -> list:
    args = ["fit", str(DATA / "choices.csv"), "--episode", "episode", "--time", "time", "--state", "state",
            "--action", "action", "--gamma", "0.9", "--normalization", "anchor:a", "--features",
            str(DATA / "features.csv"), "--out", out, "--quiet"]
    return args + (["--bootstrap", str(n_boot), "--n-jobs", str(n_jobs)] if n_boot else [])


def child(code: str, args: list, src: str) -> tuple[float, float]:
    """``(wall, cpu)`` seconds of ``python -c code args`` with ``PYTHONPATH=src``."""
    env = dict(os.environ, PYTHONPATH=src, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise RuntimeError(f"the command failed:\n{done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def in_process(n_boot: int, features: bool, method: str) -> tuple[float, float]:
    """``bootstrap_sources`` as ``genpqr fit`` runs it on the example (one worker)."""
    import pandas as pd

    from genpqr import GenPQR, from_pandas, normalization as N
    from genpqr.app.results import TabularStatistic
    from genpqr.app.structural import StructuralStatistic
    from genpqr.evaluation import bootstrap_sources
    from genpqr.stage1 import FrequencyClassifier

    frame = pd.read_csv(DATA / "choices.csv")
    data = from_pandas(frame, episode="episode", time="time", state="state", action="action")
    n = int(frame["state"].max()) + 1
    est = GenPQR(N.anchor_action("a"), gamma=0.9, q_model="exact", n_states=n, random_state=0,
                 policy_model=FrequencyClassifier(n_states=n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = est.fit(data)
        if features:  # two features per (state, action), zero at the anchor 'a' (random: the cost is the same)
            x = np.random.default_rng(0).normal(size=(n, 3, 2))
            x[:, 0] = 0.0
            stat = StructuralStatistic(x, ["bonus", "level"], "npl")
        else:
            stat = TabularStatistic()
        start, cpu = time.perf_counter(), time.process_time()
        bootstrap_sources(est, data, n_boot=n_boot, both_statistic=stat, random_state=0, progress=False,
                          fitted=full, method=method)
    return time.perf_counter() - start, time.process_time() - cpu


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="cli,cli-refit,cli-before,cli-no-bootstrap,boot-counts,boot-refit,"
                                           "boot-table-counts,boot-table-refit")
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--before-src", default=None)
    args = parser.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c and (c != "cli-before" or args.before_src)]
    src = str(ROOT / "src")
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            out = str(Path(tmp) / case)
            if case == "cli":
                rows[case] = child(ON, command(out, args.n_boot, args.n_jobs), src)
            elif case == "cli-refit":
                rows[case] = child(OFF, command(out, args.n_boot, args.n_jobs), src)
            elif case == "cli-before":
                rows[case] = child(ON, command(out, args.n_boot, args.n_jobs), args.before_src)
            elif case == "cli-no-bootstrap":
                rows[case] = child(ON, command(out, 0, 1), src)
            elif case.startswith("boot-"):
                rows[case] = in_process(args.n_boot, "table" not in case, "refit" if case.endswith("refit") else "auto")
            else:
                raise SystemExit(f"unknown case {case!r}")
            print(f"  {case}: {rows[case][0]:.2f} s", file=sys.stderr)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load {os.getloadavg()[0]:.2f} after the run; {args.n_boot} replicates, --n-jobs {args.n_jobs}")
    print()
    print("| case | wall s | CPU s | ratio |")
    print("|---|---:|---:|---|")
    floor = rows.get("cli-no-bootstrap")
    for case, (wall, cpu) in rows.items():
        if case.startswith("cli") and case != "cli-no-bootstrap" and floor:
            ratio = f"{wall / floor[0]:.2f}x the command without --bootstrap"
        elif case.endswith("-counts") and case.replace("counts", "refit") in rows:
            ratio = f"refit / counts: {rows[case.replace('counts', 'refit')][0] / wall:.2f}x (wall)"
        else:
            ratio = ""
        print(f"| {case} | {wall:.2f} | {cpu:.2f} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

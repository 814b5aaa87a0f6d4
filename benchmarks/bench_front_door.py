"""Every front-door command in one table (``make bench-front-door``): its time end to
end as a user runs it, the floor it names, the ratio, and the target.

Cases (``--cases``, comma-separated; default all):

* ``import``, ``version``, ``help``, ``fit-help``: ``python -c "import genpqr"``, ``genpqr
  --version``, ``genpqr --help``, ``genpqr fit --help`` in a fresh interpreter; floor: ``python -c
  pass``. Targets 1 s, 0.2 s, 0.5 s, 0.5 s.
* ``tabular-4k``: ``genpqr fit`` on 4,000 logged choices (20 states, 2 actions); floor: the same
  ``GenPQR`` fitted in this process (the estimation alone). Target 2 s end to end.
* ``readme-bootstrap``: the examples/README.md command (``--features``, ``--bootstrap 200 --n-jobs
  2``); floor: the same command without ``--bootstrap``. Target 7 s.
* ``transitions``: ``genpqr fit`` with the default ``--transition auto`` on the thin-cell benchmark
  (benchmarks/transition_front_door.py); floor: ``--transition counts``. Target 2x.
* ``items-1k``: the 1,000-item, 200,000-choice fit of benchmarks/front_door.py (``genpqr fit
  --action-features``); floor: its first stage alone. Target 30 s.
* ``items-10k``: the same with 10,000 items and 1,000,000 choices (2 logged choices per (state,
  item) cell). Target 2 minutes; the reward MSE at the logged pairs is printed beside it (the
  full-softmax reference of docs/benchmarks.md, "Many actions with action features": 0.0007 with
  the true kernel).

Times are wall seconds of the child process (and its CPU seconds, which a loaded machine inflates
less); each case runs once (``--repeat N``: the median of N).

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench_front_door.py [--cases ...] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
CASES = ("import", "version", "help", "fit-help", "tabular-4k", "readme-bootstrap", "transitions", "items-1k",
         "items-10k")
TARGETS = {"import": (1.0, "s"), "version": (0.2, "s"), "help": (0.5, "s"), "fit-help": (0.5, "s"),
           "tabular-4k": (2.0, "s"), "readme-bootstrap": (7.0, "s"), "transitions": (2.0, "x"),
           "items-1k": (30.0, "s"), "items-10k": (120.0, "s")}


def child(cmd, cwd=None) -> tuple:
    """``cmd`` in a child process: (wall seconds, CPU seconds); raises on failure."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    out = proc.stdout.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{out[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def timed(fn, repeat: int) -> tuple:
    runs = [fn() for _ in range(repeat)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


GENPQR = [sys.executable, "-m", "genpqr"]
CHOICES = ["--episode", "episode", "--time", "time", "--state", "state", "--action", "action"]


def startup(case, repeat):
    cmd = {"import": [sys.executable, "-c", "import genpqr"], "version": GENPQR + ["--version"],
           "help": GENPQR + ["--help"], "fit-help": GENPQR + ["fit", "--help"]}[case]
    return timed(lambda: child(cmd), repeat), timed(lambda: child([sys.executable, "-c", "pass"]), repeat), \
        "python -c pass"


def tabular_4k(tmp: Path, repeat):
    from genpqr import GenPQR, from_pandas, normalization as N
    from genpqr.envs import random_mdp, simulate_tabular
    from genpqr.stage2 import soft_optimal_policy

    mdp = random_mdp(20, 2, gamma=0.9, random_state=0)
    data = simulate_tabular(mdp, soft_optimal_policy(mdp.reward, mdp.kernel, 0.9), n_episodes=400, horizon=10,
                            random_state=1)
    import pandas as pd

    frame = pd.DataFrame({"episode": data.episode_ids, "time": data.timesteps,
                          "state": data.states[:, 0].astype(int), "action": data.actions})
    frame.to_csv(tmp / "t4k.csv", index=False)
    cmd = GENPQR + ["fit", str(tmp / "t4k.csv"), *CHOICES, "--gamma", "0.9", "--normalization", "anchor:0",
                    "--quiet"]

    def library():
        t0, c0 = time.perf_counter(), time.process_time()
        GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", cross_fit=5, random_state=0, progress=False).fit(
            from_pandas(frame, episode="episode", time="time", state="state", action="action"))
        return time.perf_counter() - t0, time.process_time() - c0

    counter = iter(range(10 ** 6))
    return (timed(lambda: child(cmd + ["--out", str(tmp / f"t4k-{next(counter)}")]), repeat),
            timed(library, repeat), f"GenPQR(...).fit in process, {len(frame)} rows")


def readme_bootstrap(tmp: Path, repeat):
    base = GENPQR + ["fit", str(ROOT / "examples/data/choices.csv"), *CHOICES, "--gamma", "0.9",
                     "--normalization", "anchor:a", "--features", str(ROOT / "examples/data/features.csv"),
                     "--n-jobs", "2", "--quiet"]
    counter = iter(range(10 ** 6))
    return (timed(lambda: child(base + ["--bootstrap", "200", "--out", str(tmp / f"b-{next(counter)}")]), repeat),
            timed(lambda: child(base + ["--out", str(tmp / f"nb-{next(counter)}")]), repeat),
            "the same command without --bootstrap")


def transitions(tmp: Path, repeat):
    import transition_front_door as tfd
    from genpqr import stage2

    mdp, _ = tfd.clustered_mdp(random_state=0)
    behaviour = stage2.soft_optimal_policy(mdp.reward, mdp.kernel, mdp.gamma)
    tfd.write_data(mdp, behaviour, 5000, 0, tmp / "thin.csv", 20, None)
    counter = iter(range(10 ** 6))

    def run(flag):
        _, wall, _, cpu = tfd.run_cli(tmp / "thin.csv", tmp / f"thin-{flag}-{next(counter)}", flag, None)
        return wall, cpu

    return timed(lambda: run("auto"), repeat), timed(lambda: run("counts"), repeat), "--transition counts"


def items(tmp: Path, repeat, n_items=1000, n_choices=200_000):
    import front_door as fd

    case = fd.many_items_mdp(n_items=n_items)
    episode, t, s, a, s2 = fd.simulate(case, n_choices=n_choices)
    fd.write_csv(tmp, case["x"], episode, t, s, a)
    runs = []

    def cli():
        runs.append(fd.run_cli(tmp, case["truth"], s, a, 5))
        return runs[-1]["wall_s"], runs[-1]["cpu_s"]

    measured = timed(cli, repeat)
    print(f"  items-{n_items}: reward MSE {runs[-1]['mse_logged']:.4f} at the logged pairs, "
          f"{runs[-1]['mse_cells']:.4f} over the cells", file=sys.stderr)
    data = fd.transitions(case["x"], episode, t, s, a, s2)
    n_states = case["truth"].shape[0]
    floor = timed(lambda: (lambda r: (r["wall_s"], r["cpu_s"]))(fd.run_first_stage(data, n_states)), repeat)
    return measured, floor, f"the conditional logit alone (MSE {runs[-1]['mse_logged']:.4f} at the logged pairs)"


def items_1k(tmp: Path, repeat):
    return items(tmp, repeat)


def items_10k(tmp: Path, repeat):
    return items(tmp, repeat, n_items=10_000, n_choices=1_000_000)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--repeat", type=int, default=1)
    args = p.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        p.error(f"unknown case(s) {unknown}; choose among {list(CASES)}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.1f}")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for case in cases:
            runner = {"tabular-4k": tabular_4k, "readme-bootstrap": readme_bootstrap, "transitions": transitions,
                      "items-1k": items_1k, "items-10k": items_10k}.get(case)
            (wall, cpu), (floor_wall, floor_cpu), floor = (startup(case, args.repeat) if runner is None
                                                           else runner(tmp, args.repeat))
            target, unit = TARGETS[case]
            ratio = wall / floor_wall if floor_wall > 0 else np.nan
            met = (ratio if unit == "x" else wall) <= target
            rows.append((case, wall, cpu, floor, floor_wall, ratio, f"{target:g}{' s' if unit == 's' else 'x'}",
                         "yes" if met else "no"))
            print(f"  {case}: {wall:.2f} s wall, {cpu:.2f} s CPU", file=sys.stderr)
    print("\n| case | wall s | CPU s | floor | floor wall s | ratio | target | met |")
    print("|---|---|---|---|---|---|---|---|")
    for case, wall, cpu, floor, floor_wall, ratio, target, met in rows:
        print(f"| {case} | {wall:.2f} | {cpu:.2f} | {floor} | {floor_wall:.2f} | {ratio:.1f}x | {target} | {met} |")
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    return rows


if __name__ == "__main__":
    main()

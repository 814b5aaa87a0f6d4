"""What ``report.html`` costs against the rest of ``genpqr fit`` (docs/benchmarks.md, "The fit report").

Each case runs ``genpqr fit`` as a user does, in a child process (one thread), and splits its wall time
into the report (building the report's context, rendering the page, writing ``report.html``) and the
rest (import, parse, fit, the other files). The report's share is timed inside the child by wrapping
``genpqr.app.report.context_from_outputs`` and ``write_report``; a figure's first ``import matplotlib``
counts as the report's.

Cases (``--cases``, comma-separated):

* ``choices``: the README's command on the bundled data (6,000 rows, 15 states, 3 actions), with
  ``--features`` (the structural section) and ``--bootstrap 20`` (the interval figure);
* ``tabular-4k``: 4,000 rows on 20 states and 2 actions (400 episodes of 10 steps), the README defaults;
* ``bus``: the simulated bus panel of the golden tests (30 buses x 60 months, 40 mileage bins) with
  ``--transition increment:4:replace --features``;
* ``lqg``: continuous actions, the bundled ``lqg.csv`` (``--action-type continuous --normalization
  gaussian:0,1``);
* ``items-1k``, ``items-10k``: 1,000 and 10,000 items with 4 features each, 5 states and 200 logged
  choices, anchored on the most chosen item (a large action table and few rows);
* ``items-10k-10``, ``items-100k-10``: a huge action table with almost no data, 10,000 or 100,000 items
  and 10 logged choices (five episodes of two): the label checks (linear in the items) and the report's
  per-action figures (the most visited items only) at their largest; the last column counts the items the
  report names (at most ``TOP_ACTIONS`` per figure and table, whatever the table's size);
* ``items-1k-20k``: docs/benchmarks.md's "Many items on tabular states" through the command line at
  20,000 choices: 1,000 items on 50 states (a 50 x 1,000 reward table).

``--src NAME=PATH`` (repeatable) runs every case under each ``PYTHONPATH`` in turn, in one run (e.g. the
code before a change, exported with ``git archive``, against the working tree)::

    OMP_NUM_THREADS=1 python benchmarks/report_cost.py [--cases choices,tabular-4k,...] [--repeat 1]
        [--src before=/tmp/before/src --src after=src] [--keep DIR]

Prints one table (markdown): case, source, wall seconds of the whole command, seconds of the report,
the report's share, the command without the report, the report's size.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "genpqr" / "datasets" / "data"
COMMON = ["--episode", "episode", "--time", "time", "--state", "state", "--action", "action", "--gamma", "0.9"]
CASES = ("choices", "tabular-4k", "bus", "lqg", "items-1k", "items-10k", "items-10k-10", "items-100k-10",
         "items-1k-20k")
#: items, logged choices, states
ITEMS = {"items-1k": (1000, 200, 5), "items-10k": (10_000, 200, 5), "items-10k-10": (10_000, 10, 5),
         "items-100k-10": (100_000, 10, 5),
         "items-1k-20k": (1000, 20_000, 50)}

#: The child: times the report's part of ``genpqr fit`` and prints it as the last line.
CHILD = r"""
import sys, time
t0 = time.perf_counter()
import genpqr.app.report as R
spent = [0.0, 0.0]
def timed(fn):
    def wrapper(*args, **kwargs):
        t, c = time.perf_counter(), time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t
            spent[1] += time.process_time() - c
    return wrapper
R.context_from_outputs, R.write_report = timed(R.context_from_outputs), timed(R.write_report)
from genpqr.app.cli import main
code = main(sys.argv[1:])
print(f"REPORT_SECONDS {spent[0]:.6f} {spent[1]:.6f}")
sys.exit(code)
"""


def tabular_4k(folder: Path, n_states=20, n_episodes=400, horizon=10, seed=0) -> Path:
    """4,000 rows on 20 states x 2 actions: a random MDP's logit behaviour, a uniform start."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n_states, 2))
    policy = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    kernel = rng.dirichlet(np.ones(n_states) * 0.3, size=(n_states, 2))
    s = rng.integers(0, n_states, n_episodes)
    rows = []
    for t in range(horizon):
        a = (rng.random(n_episodes) < policy[s, 1]).astype(int)
        rows.append(pd.DataFrame({"episode": np.arange(n_episodes), "time": t, "state": s, "action": a}))
        cdf = np.cumsum(kernel[s, a], axis=1)
        s = np.minimum((rng.random(n_episodes)[:, None] > cdf).sum(axis=1), n_states - 1)
    path = folder / "tabular4k.csv"
    pd.concat(rows).sort_values(["episode", "time"]).to_csv(path, index=False)
    return path


def bus_panel(folder: Path, n_states=40):
    """The golden tests' bus panel and its features file."""
    import pandas as pd

    from genpqr.envs._rust import bus_engine, simulate_buses

    engine = bus_engine(n_states=n_states, rc=4.0, theta11=40.0)
    panel = simulate_buses(engine, n_buses=30, n_periods=60, random_state=0)
    panel.frame.drop(columns="next_mileage").to_csv(folder / "bus.csv", index=False)
    X = engine.features("rust")
    rows = [dict(state_index=s, action=a, RC=X[s, k, 0], theta11=X[s, k, 1])
            for s in range(n_states) for k, a in enumerate(["keep", "replace"])]
    pd.DataFrame(rows).to_csv(folder / "bus_features.csv", index=False)


def many_items(folder: Path, n_items: int, n_rows=200, n_states=5, n_features=4, seed=0) -> tuple:
    """``n_items`` items with ``n_features`` N(0, 1) features; ``n_rows`` choices of a conditional logit on
    ``n_states`` states, episodes of ``min(10, n_rows // 5)`` steps (five episodes at least: the default
    cross-fitting's folds), next states uniform. Returns the two files and
    the most chosen item (the anchor: mean-zero is refused when most items are never taken)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_items, n_features))
    taste = rng.normal(size=(n_states, n_features))
    scores = taste @ x.T
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    cdf = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    s = rng.integers(0, n_states, n_rows)
    a = np.minimum((rng.random(n_rows)[:, None] > cdf[s]).sum(axis=1), n_items - 1)
    horizon = max(min(10, n_rows // 5), 1)
    logs, items = folder / f"logs{n_items}-{n_rows}-{n_states}.csv", folder / f"items{n_items}-{n_rows}-{n_states}.csv"
    pd.DataFrame({"episode": np.arange(n_rows) // horizon, "time": np.arange(n_rows) % horizon, "state": s,
                  "action": a}).to_csv(logs, index=False)
    table = pd.DataFrame(x, columns=[f"f{j}" for j in range(n_features)])
    table.insert(0, "action", np.arange(n_items))
    table.to_csv(items, index=False)
    return logs, items, int(np.bincount(a).argmax())


def case_args(name: str, folder: Path) -> list:
    """The ``genpqr fit`` arguments of a case (its files written into ``folder``)."""
    if name == "choices":
        return [DATA / "choices.csv", *COMMON, "--normalization", "anchor:a", "--features", DATA / "features.csv",
                "--bootstrap", "20"]
    if name == "tabular-4k":
        return [tabular_4k(folder), *COMMON, "--normalization", "anchor:0"]
    if name == "bus":
        bus_panel(folder)
        return [folder / "bus.csv", "--episode", "bus", "--time", "month", "--state", "mileage", "--action",
                "action", "--gamma", "0.975", "--normalization", "anchor:replace", "--transition",
                "increment:4:replace", "--n-states", "40", "--features", folder / "bus_features.csv"]
    if name == "lqg":
        return [DATA / "lqg.csv", "--episode", "episode", "--time", "time", "--state", "s", "--action", "a",
                "--action-type", "continuous", "--gamma", "0.9", "--normalization", "gaussian:0,1"]
    if name in ITEMS:
        logs, items, anchor = many_items(folder, *ITEMS[name])
        return [logs, *COMMON, "--normalization", f"anchor:{anchor}", "--action-features", items]
    raise ValueError(f"unknown case {name!r}; expected one of {', '.join(CASES)}")


def run_case(args: list, out: Path, src: str) -> dict:
    """``genpqr fit ARGS --quiet --out OUT`` in a child process under ``PYTHONPATH=src``: wall and CPU
    seconds of the command and of its report, the report's size."""
    env = {**os.environ, "PYTHONPATH": str(Path(src).resolve()), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    cmd = [sys.executable, "-c", CHILD, "fit", *map(str, args), "--quiet", "--out", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=out.parent)
    log = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0 or "REPORT_SECONDS" not in log:
        raise RuntimeError(f"genpqr fit failed ({' '.join(map(str, args))}):\n{log[-3000:]}")
    report_wall, report_cpu = map(float, log.rsplit("REPORT_SECONDS", 1)[1].split()[:2])
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "report_s": report_wall,
            "report_cpu_s": report_cpu, "size_kb": (out / "report.html").stat().st_size / 1024,
            "ticks": _largest_figure_ticks(out / "report.html")}


def _largest_figure_ticks(report: Path) -> int:
    """The most text labels one of the report's SVG figures carries (tick labels, legends): bounded
    by the figures' top actions, not the table's size."""
    import re

    html = report.read_text(encoding="utf-8", errors="replace")
    return max([len(re.findall(r"<text\b", svg)) for svg in re.findall(r"<svg\b.*?</svg>", html, flags=re.S)],
               default=0)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--src", action="append", default=None,
                   help="NAME=PATH: run every case with PYTHONPATH=PATH (repeatable; default: this tree's src)")
    p.add_argument("--repeat", type=int, default=1, help="runs per case and source (the one of least CPU is shown)")
    p.add_argument("--keep", help="a folder for the data and the fit folders (default: a temporary one)")
    a = p.parse_args(argv)
    sources = [s.split("=", 1) for s in (a.src or [f"this={ROOT / 'src'}"])]
    print(f"machine: {platform.machine()} {os.cpu_count()} cores; Python {platform.python_version()}; "
          f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(a.keep or tmp).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        for case in [c for c in a.cases.split(",") if c]:
            args = case_args(case, folder)
            for name, src in sources:
                runs = [run_case(args, folder / f"{case}-{name}-{i}", src) for i in range(a.repeat)]
                best = min(runs, key=lambda r: r["cpu_s"])
                rows.append((case, name, best))
                print(f"{case} [{name}]: {best}", flush=True)
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print("| case | code | genpqr fit wall (CPU) s | report wall (CPU) s | report share of CPU | "
          "without the report, CPU s | report.html (KB) | labels in its largest figure |")
    print("|---|---|---|---|---|---|---|---|")
    for case, name, r in rows:
        print(f"| {case} | {name} | {r['wall_s']:.2f} ({r['cpu_s']:.2f}) | {r['report_s']:.2f} "
              f"({r['report_cpu_s']:.2f}) | {r['report_cpu_s'] / r['cpu_s']:.0%} | {r['cpu_s'] - r['report_cpu_s']:.2f} "
              f"| {r['size_kb']:.0f} | {r['ticks']} |")


if __name__ == "__main__":
    main()

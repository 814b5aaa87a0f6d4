"""Speed of the exp2 methods, measured in one run (one process, one thread, fits in turn).

For each seed: GenPQR (BC, NN) with the default schedule, GenPQR (BC, NN) with the paper's
8 x 4 schedule, and DeepPQR, all on the same behaviour-cloning settings; optionally the
AIRL and MaxEnt-IRL baselines. Prints fit wall time (data simulation excluded) and test
reward MSE per method, and the ratios.

    python benchmarks/exp2_speed.py --seeds 5 [--with-airl]
    python benchmarks/exp2_speed.py --seeds 20 --methods "GenPQR (BC, NN)" "GenPQR (BC, LSTD)" ...
    python benchmarks/exp2_speed.py --seeds 20 --methods "GenPQR (default path)" "GenPQR (BC, NN, paper 8x4)"

"GenPQR (default path)" is ``GenPQR()`` as users call it (only the normalization, gamma and seed
given): the library's defaults against the paper's schedule.

Prints the load average before and after: on a shared machine compare the ratios only. The
"cpu" column is the thread CPU time of the whole method call (fit and test evaluation), less
sensitive than wall time to other processes on a shared machine.

To compare two checkouts, run this script alternately with each one's ``src`` on PYTHONPATH
(docs/benchmarks.md, "Autograd networks").
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
from threadpoolctl import threadpool_limits

from genpqr.envs import make_synthetic_data
from genpqr.experiments._methods import get_method


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--with-airl", action="store_true", help="also time AIRL and MaxEnt-IRL")
    ap.add_argument("--methods", nargs="+", help="registered method names (the first is the ratios' base)")
    ap.add_argument("--no-warmup", action="store_true", help="do not fit each method once before timing")
    args = ap.parse_args()
    names = ["GenPQR (BC, NN)", "GenPQR (BC, NN, paper 8x4)", "DeepPQR"]
    if args.with_airl:
        names += ["AIRL state reward", "MaxEnt-IRL", "GenPQR (AIRL, NN)"]
    if args.methods:
        names = list(args.methods)
    print(f"load average before: {os.getloadavg()}")
    rows = {n: [] for n in names}
    with threadpool_limits(1):
        import torch  # noqa: F401  (imported before timing)

        if not args.no_warmup:  # one untimed fit per method: imports and first-call costs paid here
            small = make_synthetic_data(0, 50)
            for name in names:
                get_method(name)(small, 0)
        for seed in range(args.seeds):
            data = make_synthetic_data(seed, 1000)
            for name in names:
                method = get_method(name)
                cpu0 = time.thread_time()
                row = method(data, seed)
                cpu = time.thread_time() - cpu0
                rows[name].append((row["fit_time"], row["reward_mse"], row["reward_corr"], cpu))
                print(f"seed {seed} {name}: fit {row['fit_time']:.3f} s, cpu {cpu:.3f} s, MSE {row['reward_mse']:.4f}, "
                      f"corr {row['reward_corr']:.4f}", flush=True)
    print(f"machine: {platform.machine()}, python {platform.python_version()}; exp2 size (1000 trajectories), "
          f"seeds 0..{args.seeds - 1}, one process, one thread, methods fitted in turn")
    print("| method | fit time (s) mean | max | cpu (s) mean | MSE mean ± 95% CI | corr mean |")
    print("|---|---|---|---|---|---|")
    for name in names:
        a = np.array(rows[name])
        ci = 1.96 * a[:, 1].std(ddof=1) / np.sqrt(len(a)) if len(a) > 1 else float("nan")
        print(f"| {name} | {a[:, 0].mean():.3f} | {a[:, 0].max():.3f} | {a[:, 3].mean():.3f} | "
              f"{a[:, 1].mean():.3f} ± {ci:.3f} | {a[:, 2].mean():.3f} |")
    base = np.array(rows[names[0]])
    for name in names[1:]:
        other = np.array(rows[name])
        wall, cpu = other[:, 0] / base[:, 0], other[:, 3] / base[:, 3]
        print(f"ratio {name} / {names[0]}: wall {np.mean(wall):.2f} (per-seed mean; min {wall.min():.2f}), "
              f"cpu {np.mean(cpu):.2f} (min {cpu.min():.2f}); {names[0]}'s MSE lower on "
              f"{int(np.sum(other[:, 1] > base[:, 1]))} of {len(base)} seeds")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()

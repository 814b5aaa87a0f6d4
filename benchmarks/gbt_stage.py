"""Boosted FQE stage of GenPQR (BC, GBT) on exp2 seeds: the current implementation against the
previous prediction path, measured in one run (one process, one thread).

Both fit the same prefitted behaviour-cloning policy (so only stage 2 is timed: the offset,
mu at the next states and boosted FQE with its 20% validation split and refit). "previous"
re-creates the old prediction path by monkeypatching: a 2-entry prediction cache (thrashed
by the four requests per iteration) and Q predicted at every action for every request.

    python benchmarks/gbt_stage.py --seeds 20
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from contextlib import contextmanager

import numpy as np
from threadpoolctl import threadpool_limits

import genpqr.models._boosting as boosting
from genpqr.envs import make_synthetic_data
from genpqr.experiments import _methods as M


@contextmanager
def previous_path():
    """The prediction path before the incremental-cache fix (same trees, same MSE up to rounding)."""
    size, at = boosting._Q_CACHE_SIZE, boosting.BoostedQModel.predict_q_at
    boosting._Q_CACHE_SIZE = 2
    del boosting.BoostedQModel.predict_q_at
    try:
        yield
    finally:
        boosting._Q_CACHE_SIZE = size
        boosting.BoostedQModel.predict_q_at = at


def stage2(data, seed, policy):
    est = M.build_genpqr_gbt(data, seed, M.GENPQR_GBT_DEFAULTS)
    est.set_params(policy_model=policy, policy_prefit=True)
    start = time.perf_counter()
    est.fit(data.train)
    elapsed = time.perf_counter() - start
    return elapsed, M.evaluate(est, data)["reward_mse"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    rows = {"previous": [], "current": []}
    warnings.simplefilter("ignore")
    with threadpool_limits(1):
        for seed in range(args.seeds):
            data = make_synthetic_data(seed, 1000)
            policy = M.behaviour_cloning(seed, {"bc": M.BC_DEFAULTS}).fit(data.train.states, data.train.actions)
            with previous_path():
                rows["previous"].append(stage2(data, seed, policy))
            rows["current"].append(stage2(data, seed, policy))
    print(f"exp2 size (1000 trajectories), seeds 0..{args.seeds - 1}, one process, one thread; stage 2 of GenPQR (BC, GBT)")
    print("| implementation | stage-2 time (s) mean | max | MSE mean |")
    print("|---|---|---|---|")
    for name, values in rows.items():
        a = np.array(values)
        print(f"| {name} | {a[:, 0].mean():.3f} | {a[:, 0].max():.3f} | {a[:, 1].mean():.4f} |")
    prev, cur = np.array(rows["previous"]), np.array(rows["current"])
    print(f"time ratio previous / current: {np.mean(prev[:, 0] / cur[:, 0]):.2f} (per-seed mean); "
          f"max |MSE difference|: {np.max(np.abs(prev[:, 1] - cur[:, 1])):.2e}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()

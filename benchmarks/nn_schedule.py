"""GenPQR (BC, NN) on the exp2 benchmark: fit time and accuracy per training schedule.

The paper trains behaviour cloning for 40 epochs (batch 256) and neural FQE for 8 Bellman
iterations x 4 epochs (batch 256). This script times the full GenPQR fit (data simulation
excluded) and measures test reward MSE / correlation against the true anchor-normalized
reward for several schedules, over the same seeds, one process, one thread.

    python benchmarks/nn_schedule.py --seeds 10
    python benchmarks/nn_schedule.py --seeds 10 --schedules bc40-16x1b512,bc40b512lr1e-2-16x1b512

Schedule names: bc<BC epochs>[b<BC batch>][lr<BC lr>]-<FQE iterations>x<epochs per iteration>
[b<FQE batch>][lr<FQE lr>] (default batch 256, learning rates 5e-3).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

from genpqr import GenPQR
from genpqr import normalization as N
from genpqr.envs import make_synthetic_data
from genpqr.models._nn import DuelingQNetwork, MLPClassifier
from genpqr.stage2 import FQE

# name: (BC epochs, BC batch, FQE iterations, epochs per iteration, FQE batch[, BC lr, FQE lr]);
# learning rates default to the paper's 5e-3
SCHEDULES = {
    "paper": (40, 256, 8, 4, 256),
    "bc40-8x2": (40, 256, 8, 2, 256),
    "bc40-16x1": (40, 256, 16, 1, 256),
    "bc40-16x1b512": (40, 256, 16, 1, 512),
    "bc40-12x1b512": (40, 256, 12, 1, 512),
    "bc40-24x1b512": (40, 256, 24, 1, 512),
    "bc40-32x1b512": (40, 256, 32, 1, 512),
    "bc40-32x1b1024": (40, 256, 32, 1, 1024),
    "bc40-48x1b1024": (40, 256, 48, 1, 1024),
    "bc20b512-8x2b512": (20, 512, 8, 2, 512),
    "bc20b512-16x1b512": (20, 512, 16, 1, 512),
    "bc20b512-12x1b512": (20, 512, 12, 1, 512),
    "bc15b512-10x1b512": (15, 512, 10, 1, 512),
    # larger behaviour-cloning batches with the learning rate scaled up (autograd's
    # per-step overhead is paid per mini-batch)
    "bc20-16x1b512": (20, 256, 16, 1, 512),
    "bc25-16x1b512": (25, 256, 16, 1, 512),
    "bc30-16x1b512": (30, 256, 16, 1, 512),
    "bc20b512lr1e-2-16x1b512": (20, 512, 16, 1, 512, 1e-2),
    "bc20-8x4": (20, 256, 8, 4, 256),
    "bc40b512lr7e-3-16x1b512": (40, 512, 16, 1, 512, 7e-3),
    "bc40b512lr1e-2-16x1b512": (40, 512, 16, 1, 512, 1e-2),
    "bc30b512lr1e-2-16x1b512": (30, 512, 16, 1, 512, 1e-2),
    "bc40b1024lr1e-2-16x1b512": (40, 1024, 16, 1, 512, 1e-2),
    "bc40-16x1b1024lr7e-3": (40, 256, 16, 1, 1024, 5e-3, 7e-3),
    "bc40b512lr1e-2-16x1b1024lr7e-3": (40, 512, 16, 1, 1024, 1e-2, 7e-3),
}


def fit_one(data, seed, schedule):
    bc_epochs, bc_batch, iters, epochs, batch, bc_lr, q_lr = (*schedule, 5e-3, 5e-3)[:7]
    model = GenPQR(N.anchor_action(0), gamma=0.9, clip=(0.01, 0.99), random_state=seed,
                   policy_model=MLPClassifier(max_epochs=bc_epochs, batch_size=bc_batch, learning_rate=bc_lr,
                                              random_state=seed),
                   q_model=FQE(DuelingQNetwork(epochs_per_iteration=epochs, batch_size=batch, learning_rate=q_lr,
                                               random_state=seed), n_iterations=iters, tol=None),
                   progress=False)
    t0 = time.perf_counter()
    model.fit(data.train)
    seconds = time.perf_counter() - t0
    est = model.reward(data.test.states, actions=data.test.actions)
    true = data.true_test_reward()
    return seconds, float(np.mean((est - true) ** 2)), float(np.corrcoef(est, true)[0, 1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--n-train", type=int, default=1000)
    ap.add_argument("--schedules", default=",".join(SCHEDULES))
    args = ap.parse_args()
    names = args.schedules.split(",")
    rows = {name: [] for name in names}
    warnings.simplefilter("ignore")  # coverage / convergence warnings of every fit: the table is the output
    with threadpool_limits(1):
        fit_one(make_synthetic_data(0, 20), 0, SCHEDULES[names[0]])  # warm-up: first-call costs are not a schedule's
        for seed in range(args.seeds):
            data = make_synthetic_data(seed, args.n_train)
            for name in names:
                rows[name].append(fit_one(data, seed, SCHEDULES[name]))
    print(f"exp2 size: {args.n_train} trajectories, seeds 0..{args.seeds - 1}; time = GenPQR.fit wall seconds")
    print("schedule = bc<BC epochs>[b<BC batch>][lr<BC lr>]-<FQE iterations>x<epochs per iteration>[b<FQE batch>]"
          "[lr<FQE lr>] (default batch 256, lr 5e-3)")
    print("| schedule | time (s) mean | time (s) max | MSE mean +- 95% CI | MSE - first's, paired +- 95% CI "
          "| corr mean |")
    print("|---|---|---|---|---|---|")
    base = np.array(rows[names[0]])
    for name in names:
        arr = np.array(rows[name])
        ci = 1.96 * arr[:, 1].std(ddof=1) / np.sqrt(len(arr)) if len(arr) > 1 else float("nan")
        diff = arr[:, 1] - base[:, 1]
        dci = 1.96 * diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else float("nan")
        print(f"| {name} | {arr[:, 0].mean():.3f} | {arr[:, 0].max():.3f} | {arr[:, 1].mean():.3f} +- {ci:.3f} "
              f"| {diff.mean():+.3f} +- {dci:.3f} | {arr[:, 2].mean():.3f} |")


if __name__ == "__main__":
    main()

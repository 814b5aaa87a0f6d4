"""``GenPQR()``'s defaults on the repository's continuous-state, finite-action designs, against the
defaults they replaced (a standardized linear logit and FQE with HistGradientBoostingRegressor).

Designs (each seed draws fresh training and test data; the reward error is the mean squared error
against the true normalized reward at the test set's (state, logged action) pairs):

* ``exp2``: the paper's Experiment 2 (1000 trajectories, common anchor);
* ``exp1-200``, ``exp1-1000``, ``exp1-2500``: Experiment 1's settings (200 and 1000 trajectories
  with a rare anchor, shift -1; 2500 with a common one);
* ``K=10``: the many-actions benchmark at K = 10 (2500 trajectories);
* ``ring``: the non-linear ring (``genpqr.envs._nonlinear.RingProblem``, 24 states, gamma 0.8) with
  its action discretized to 5 points, the state index given as one numeric column, anchored at the
  middle action; the truth is the exact tabular reward of the discretized problem;
* ``choices``: the bundled example's MDP (``examples/make_example_data.py``: 15 states, 3
  actions, 600 episodes of 10 steps, anchor "a"), the state index as one numeric column.

    python benchmarks/default_path_designs.py --seeds 3 [--designs exp2 ring] [--methods new old]

Prints the load average before and after, each fit's thread CPU time, and a table of mean MSE
and CPU per design and method. ``old`` costs about 90 s of CPU per Experiment 2 fit.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from genpqr import GenPQR
from genpqr import normalization as N
from genpqr.envs import make_synthetic_data


def synthetic(seed, n_train, shift=0.0, n_actions=5):
    d = make_synthetic_data(seed, n_train, n_actions=n_actions, anchor_shift=shift)
    return d.train, d.test, d.true_test_reward(), N.anchor_action(0), 0.9


def ring(seed, n_states=24, n_actions=5, n_episodes=500, horizon=10):
    from genpqr.envs import simulate_tabular
    from genpqr.envs._nonlinear import RingProblem
    from genpqr.stage2 import TabularMDP, recover_reward
    from genpqr.stage2._tabular import as_kernel

    problem = RingProblem(n_states=n_states, gamma=0.8)
    log_policy, P, _ = problem.discretized(n_actions)
    kernel = as_kernel(P, n_actions)
    norm = N.anchor_action(n_actions // 2)
    truth = recover_reward(log_policy, kernel, 0.8, norm).reward
    mdp = TabularMDP(kernel, 0.8, truth)
    rng = np.random.default_rng(seed)
    train = simulate_tabular(mdp, np.exp(log_policy), n_episodes, horizon, random_state=rng)
    test = simulate_tabular(mdp, np.exp(log_policy), 300, horizon, random_state=rng)
    return train, test, truth[test.states[:, 0].astype(int), test.actions], norm, 0.8


def choices(seed):
    import importlib.util

    from genpqr import stage2
    from genpqr.envs import random_mdp, simulate_tabular

    spec = importlib.util.spec_from_file_location("make_example_data",
                                                  Path(__file__).parents[1] / "examples" / "make_example_data.py")
    mk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mk)
    mdp = random_mdp(mk.S, mk.K, n_next=3, gamma=mk.GAMMA, random_state=mk.SEED)
    reward = mk.features() @ np.array(list(mk.THETA.values()))
    mdp = stage2.TabularMDP(mdp.kernel, mk.GAMMA, reward)
    policy = stage2.soft_optimal_policy(reward, mdp.kernel, mk.GAMMA)
    rng = np.random.default_rng(seed)
    train = simulate_tabular(mdp, policy, 600, 10, random_state=rng)
    test = simulate_tabular(mdp, policy, 300, 10, random_state=rng)
    return train, test, reward[test.states[:, 0].astype(int), test.actions], N.anchor_action(0), mk.GAMMA


DESIGNS = {
    "exp2": lambda s: synthetic(s, 1000),
    "exp1-200": lambda s: synthetic(s, 200, -1.0),
    "exp1-1000": lambda s: synthetic(s, 1000, -1.0),
    "exp1-2500": lambda s: synthetic(s, 2500, 0.0),
    "K=10": lambda s: synthetic(s, 2500, 0.0, n_actions=10),
    "ring": ring,
    "choices": choices,
}


def old_defaults(norm, gamma, seed):
    """The defaults before: StandardScaler -> LogisticRegression, FQE with HistGradientBoostingRegressor."""
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return GenPQR(norm, gamma=gamma, random_state=seed, progress=False,
                  policy_model=make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
                  q_model=HistGradientBoostingRegressor(max_iter=100))


METHODS = {
    "new": lambda norm, gamma, seed: GenPQR(norm, gamma=gamma, random_state=seed, progress=False),
    "old": old_defaults,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    rows = []
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for design in args.designs:
            for seed in range(args.seeds):
                train, test, truth, norm, gamma = DESIGNS[design](seed)
                for name in args.methods:
                    cpu0 = time.thread_time()
                    model = METHODS[name](norm, gamma, seed).fit(train)
                    estimate = model.reward(test.states, test.labels_of())
                    cpu = time.thread_time() - cpu0
                    mse = float(np.mean((estimate - truth) ** 2))
                    rows.append((design, name, seed, mse, cpu, float(np.var(truth))))
                    print(f"{design} seed {seed} {name}: MSE {mse:.4f}, cpu {cpu:.2f} s", flush=True)
    print(f"seeds 0..{args.seeds - 1}, one process, one thread")
    print("| design | true reward variance | " + " | ".join(f"{m} MSE | {m} cpu (s)" for m in args.methods) + " |")
    print("|---" * (2 + 2 * len(args.methods)) + "|")
    for design in args.designs:
        cells, var = [], np.mean([r[5] for r in rows if r[0] == design])
        for name in args.methods:
            sel = [r for r in rows if r[0] == design and r[1] == name]
            cells += [f"{np.mean([r[3] for r in sel]):.4f}", f"{np.mean([r[4] for r in sel]):.2f}"]
        print(f"| {design} | {var:.3f} | " + " | ".join(cells) + " |")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()

"""Sample-path counterfactuals on the synthetic benchmark: the soft-optimal policy of GenPQR's
recovered reward vs that of the true reward, by KL and by value.

Per seed (``genpqr.envs._synthetic``, K = 5, gamma = 0.9, anchor action 0 with g = 0, which is
true of the benchmark's reward):

1. GenPQR (logistic policy, gradient-boosted FQE) on ``--n-train`` logged trajectories.
2. Soft fitted Q iteration (gradient boosting per action) of the recovered reward on
   simulated transitions: every action at ``--n-states`` logged states (the environment's
   deterministic ``T(s, a)``), giving ``pi_hat``. The same iteration on the TRUE reward gives
   ``pi_fqi`` (what soft FQI itself loses), and the truth is ``pi* = env.policy_proba``.
3. On the test states: mean ``KL(pi* || pi)``, and the soft value (true reward plus entropy)
   of each policy by Monte Carlo rollouts, against the closed-form ``V*``: the regret.
4. A discount counterfactual, gamma' = 0.8: soft FQI of the true reward at 0.8 is the
   reference; the recovered reward under the (true) anchor normalization vs under mean-zero
   (``renormalize``): KL to the reference. Theory: only the true normalization identifies it.

Run: ``OMP_NUM_THREADS=1 python benchmarks/soft_fqi_synthetic.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor

from genpqr import GenPQR, normalization as N
from genpqr.counterfactuals import IdentificationWarning, SoftFQI, soft_counterfactual
from genpqr.data import from_arrays
from genpqr.envs import make_synthetic_data
from genpqr.stage2 import FQE


def mean_kl(p, q):
    return float(np.mean(np.sum(p * (np.log(p) - np.log(np.clip(q, 1e-300, None))), axis=1)))


def soft_value(env, policy_fn, starts, *, n_rollouts, horizon, rng):
    """Monte Carlo ``E[sum_t gamma^t (r(s_t, a_t) - log pi(a_t|s_t))]`` from each start, plus the
    tail ``gamma^H V*(s_H)``; mean over starts."""
    s = np.repeat(starts, n_rollouts, axis=0)
    total, disc = np.zeros(len(s)), 1.0
    for _ in range(horizon):
        p = policy_fn(s)
        a = np.minimum((rng.random(len(s))[:, None] >= np.cumsum(p, axis=1)).sum(axis=1), p.shape[1] - 1)
        total += disc * (env.true_reward(s, a) - np.log(p[np.arange(len(s)), a]))
        s, disc = env.transition(s, a), disc * env.gamma
    total += disc * env.true_value(s)
    return float(total.mean())


def simulated(env, states):
    K = env.n_actions
    s = np.repeat(states, K, axis=0)
    a = np.tile(np.arange(K), len(states))
    return from_arrays(s, a, env.transition(s, a), action_labels=np.arange(K))


def fqi_settings(n_iterations):
    return SoftFQI(HistGradientBoostingRegressor(max_iter=50, random_state=0), encoding="per_action",
                   n_iterations=n_iterations, tol=1e-3)


def run_seed(seed, args):
    data = make_synthetic_data(seed, n_train=args.n_train, n_test=args.n_test)
    env = data.env
    model = GenPQR(N.anchor_action(0), gamma=env.gamma, random_state=seed, progress=False,
                   q_model=FQE(n_iterations=args.n_iterations, tol=1e-4)).fit(data.train)
    rng = np.random.default_rng(seed)
    starts = data.train.states[rng.choice(data.train.n, size=min(args.n_states, data.train.n), replace=False)]
    sim = simulated(env, starts)
    fqi_hat = soft_counterfactual(model, sim, fqi=fqi_settings(args.n_iterations))
    truth_rewards = env.true_reward(sim.states, sim.actions)
    fqi_true = fqi_settings(args.n_iterations).fit(sim.states, sim.actions, truth_rewards, sim.next_states,
                                                   env.gamma, n_actions=env.n_actions)
    test = data.test.states
    pi_star = env.policy_proba(test)
    value_rng = np.random.default_rng(seed + 1)
    starts_v = test[: args.n_value_starts]
    kw = dict(n_rollouts=args.n_rollouts, horizon=args.horizon, rng=value_rng)
    v_star = float(np.mean(env.true_value(starts_v)))
    row = dict(seed=seed, kl_recovered=mean_kl(pi_star, fqi_hat.policy(test)),
               kl_true_reward=mean_kl(pi_star, fqi_true.policy(test)),
               kl_stage1=mean_kl(pi_star, np.exp(model.log_policy(test))),
               v_star=v_star, v_star_mc=soft_value(env, env.policy_proba, starts_v, **kw),
               v_recovered=soft_value(env, fqi_hat.policy, starts_v, **kw),
               v_true_reward=soft_value(env, fqi_true.policy, starts_v, **kw))
    # discount counterfactual gamma' = 0.8
    ref = fqi_settings(args.n_iterations).fit(sim.states, sim.actions, truth_rewards, sim.next_states, 0.8,
                                              n_actions=env.n_actions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdentificationWarning)
        anchor = soft_counterfactual(model, sim, gamma=0.8, fqi=fqi_settings(args.n_iterations))
        mean_zero = soft_counterfactual(model.renormalize(N.mean_zero()), sim, gamma=0.8,
                                        fqi=fqi_settings(args.n_iterations))
    pi_ref = ref.policy(test)
    row.update(kl_gamma08_anchor=mean_kl(pi_ref, anchor.policy(test)),
               kl_gamma08_mean_zero=mean_kl(pi_ref, mean_zero.policy(test)))
    return row


def markdown(frame) -> str:
    """A Markdown table (no optional dependency)."""
    cells = [[v if isinstance(v, str) else f"{v:.4f}" if isinstance(v, float) else str(v) for v in row]
             for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])


def main(argv=None):
    import pandas as pd

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--n-train", type=int, default=500, help="logged trajectories of 10 steps")
    p.add_argument("--n-test", type=int, default=100)
    p.add_argument("--n-states", type=int, default=1000, help="states at which every action is simulated")
    p.add_argument("--n-iterations", type=int, default=40)
    p.add_argument("--n-value-starts", type=int, default=100)
    p.add_argument("--n-rollouts", type=int, default=20)
    p.add_argument("--horizon", type=int, default=40)
    p.add_argument("--quick", action="store_true", help="1 seed, small sizes (a smoke run)")
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.n_train, args.n_states, args.n_iterations, args.n_test = 1, 200, 400, 25, 50
        args.n_value_starts, args.n_rollouts, args.horizon = 30, 5, 25
    start = time.perf_counter()
    frame = pd.DataFrame([run_seed(seed, args) for seed in range(args.seeds)])
    frame["regret_recovered"] = frame["v_star"] - frame["v_recovered"]
    frame["regret_true_reward"] = frame["v_star"] - frame["v_true_reward"]
    cols = ["seed", "kl_stage1", "kl_recovered", "kl_true_reward", "v_star", "v_star_mc", "regret_recovered",
            "regret_true_reward", "kl_gamma08_anchor", "kl_gamma08_mean_zero"]
    table = frame[cols]
    mean = table.mean(numeric_only=True).to_frame().T.assign(seed="mean")
    print(markdown(pd.concat([table, mean])[cols]))
    print(f"\n{time.perf_counter() - start:.0f} s")
    return frame


if __name__ == "__main__":
    main()

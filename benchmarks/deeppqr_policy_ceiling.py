"""DeepPQR's policy-limited ceiling on the exp2 benchmark (1000 trajectories, shift 0).

In the benchmark the transitions are deterministic and the anchor action does not move the
state, so DeepPQR's population fixed point given an estimate pi_hat is, in closed form,

    r(s, a) = log pi_hat(a|s) - 10 log pi_hat(0|s) + 9 log pi_hat(0|T(s, a))     (gamma 0.9, alpha 1)

(W(s) = -9 log pi_hat(0|s), h(s, a) = -10 log pi_hat(0|T(s, a))). Its MSE and correlation with
the true reward are what DeepPQR reaches with perfectly fitted networks on that policy estimate.
With the true policy the formula is the true reward (checked to 1e-8 on every seed).

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/deeppqr_policy_ceiling.py --seeds 5

Prints per seed and on average the ceiling's MSE / correlation and the policy's test NLL for
the behaviour-cloning ("DeepPQR") and AIRL ("DeepPQR (AIRL)") policy estimates of the exp2 rows.
"""

import argparse

import numpy as np

from genpqr.baselines._base import fit_stage1
from genpqr.envs._synthetic import make_synthetic_data
from genpqr.experiments._methods import METHODS, PAPER_CLIP, stage1_model


def plug_in(log_policy, env, S, A):
    return log_policy(S)[np.arange(len(S)), A] - 10 * log_policy(S)[:, 0] + 9 * log_policy(env.transition(S, A))[:, 0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    res = {}
    for seed in range(args.seeds):
        d = make_synthetic_data(seed, 1000)
        S, A, truth = d.test.states, d.test.actions, d.true_test_reward()
        exact = plug_in(d.env.log_policy, d.env, S, A)
        assert np.max(np.abs(exact - truth)) < 1e-8, "closed form does not match the true reward"
        for name in ("DeepPQR", "DeepPQR (AIRL)"):
            pol = fit_stage1(stage1_model(d, seed, METHODS[name].defaults), False, d.train, PAPER_CLIP, seed)
            r = plug_in(pol.log_proba, d.env, S, A)
            nll = -np.mean(pol.log_proba(S)[np.arange(len(S)), A])
            m, c = np.mean((r - truth) ** 2), np.corrcoef(r, truth)[0, 1]
            res.setdefault(name, []).append((m, c, nll))
            print(f"seed {seed} {name}: policy-limited MSE {m:.3f} corr {c:.3f} NLL {nll:.4f}", flush=True)
    print("| policy of | ceiling MSE | ceiling corr | NLL |\n|---|---|---|---|")
    for name, v in res.items():
        v = np.array(v)
        print(f"| {name} | {v[:, 0].mean():.3f} | {v[:, 1].mean():.3f} | {v[:, 2].mean():.4f} |")


if __name__ == "__main__":
    main()

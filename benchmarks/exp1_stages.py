"""Stage-1 vs stage-2 error of GenPQR on the synthetic benchmark (docs/benchmarks.md, "Stage-2 updates
at 200 trajectories").

For each seed, GenPQR (anchor normalization, neural FQE with the given q_model options) is refitted on
a prefit stage-1 policy: the true policy, behaviour cloning or AIRL. Printed per seed: GenPQR's reward
MSE and correlation; the "plug-in" MSE, the reward that the identification theorem gives for the
stage-1 policy alone, ``log pi(a|s) - 10 log pi(0|s) + 9 log pi(0|s')`` (the stage-1 error with an
exact stage 2); the test NLL; the MSE of log pi(0|s).

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/exp1_stages.py 200 -1 0,1,2,3,4 true,bc,airl \
        "{}" "{'epochs_per_iteration': 8}"

Arguments: n_train, anchor shift, seeds, stage-1 kinds, AIRL keyword overrides, q_model overrides
(Python literals).
"""
import ast
import sys
import warnings

import numpy as np

from genpqr.baselines._airl import AIRL
from genpqr.envs._synthetic import make_synthetic_data
from genpqr.estimator import GenPQR
from genpqr.experiments import _methods as M
from genpqr.models._nn import DuelingQNetwork
from genpqr.stage2 import FQE


class TruePolicy:
    """The benchmark's policy as a prefit classifier."""

    def __init__(self, env):
        self.env, self.classes_ = env, np.arange(env.n_actions)

    def predict_proba(self, X):
        return self.env.policy_proba(X)


def clipped_log(P):
    P = np.clip(P, *M.PAPER_CLIP)
    return np.log(P / P.sum(1, keepdims=True))


def main(n_train, shift, seeds, kinds, airl_kw, q_kw):
    opts = M.merge_options(M.GENPQR_NN_DEFAULTS, {"q_model": q_kw})
    res = {k: [] for k in kinds}
    for seed in seeds:
        d = make_synthetic_data(seed, n_train, anchor_shift=shift)
        truth, S, A = d.true_test_reward(), d.test.states, d.test.actions
        rows = np.arange(len(A))
        for kind in kinds:
            if kind == "true":
                pol = TruePolicy(d.env)
            elif kind == "bc":
                pol = M.behaviour_cloning(seed, opts).fit(d.train.states, d.train.actions)
            else:
                pol = AIRL(transition=d.env.transition, random_state=seed, **airl_kw).fit(d.train)
            lp, lpn = clipped_log(pol.predict_proba(S)), clipped_log(pol.predict_proba(d.env.transition(S, A)))
            plug = lp[rows, A] - 10 * lp[:, 0] + 9 * lpn[:, 0]
            est = GenPQR(normalization=M.anchor_normalization(), gamma=M.GAMMA, policy_model=pol, policy_prefit=True,
                         q_model=FQE(DuelingQNetwork(random_state=seed, **M.layer_tuples(opts["q_model"])),
                                     **opts["fqe"]),
                         clip=M.PAPER_CLIP, random_state=seed, progress=False).fit(d.train)
            r = est.reward(S, A)
            row = (np.mean((r - truth) ** 2), np.corrcoef(r, truth)[0, 1], np.mean((plug - truth) ** 2),
                   -np.mean(lp[rows, A]), np.mean((lp[:, 0] - d.env.log_policy(S)[:, 0]) ** 2))
            res[kind].append(row)
            print(f"seed {seed} {kind:5s} mse {row[0]:.3f} corr {row[1]:.2f} plug-in {row[2]:.3f} nll {row[3]:.3f} "
                  f"mse(log pi0) {row[4]:.4f}", flush=True)
    for kind in kinds:
        print(kind, "MEAN mse %.3f corr %.2f plug-in %.3f nll %.3f mse(log pi0) %.4f" % tuple(np.mean(res[kind], 0)))


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    a = sys.argv[1:]
    main(int(a[0]), float(a[1]), [int(s) for s in a[2].split(",")], a[3].split(","),
         ast.literal_eval(a[4]) if len(a) > 4 else {}, ast.literal_eval(a[5]) if len(a) > 5 else {})

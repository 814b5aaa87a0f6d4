"""Many actions: which behaviour-cloning settings keep GenPQR (BC, NN)'s reward MSE from growing with |A|?
(docs/benchmarks.md, "Many actions: behaviour-cloning variance").

For each seed, |A| and behaviour-cloning variant (2500 trajectories, shift 0, one thread) it fits the
policy estimate once and prints the stage-1 diagnostics: the "plug-in" reward MSE (the reward that the
identification theorem gives for the clipped estimate alone, ``log pi(a|s) - 10 log pi(0|s) +
9 log pi(0|s')``, i.e. the stage-1 error with an exact stage 2), the MSE of log pi(0|s), the test NLL;
then (unless ``--stage1-only``) GenPQR's reward MSE and correlation with neural FQE on that prefit
estimate (``q_model`` options of GENPQR_NN_DEFAULTS, overridable).

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/many_actions_bc.py --seeds 0,1,2,3 --actions 5,40 \
        --variants "default={}" "ens4={'ensemble': 4}" [--structure direct] [--normalization mean-zero]

``plugin_true0`` is the plug-in reward with the *true* ``log pi(0|.)`` substituted for the estimate's
(the other actions' conditional probabilities kept): the part of the stage-1 error that is not the
anchor's. ``--structure`` sets GenPQR's FQE structure (default: the continuation); ``--normalization
mean-zero`` fits GenPQR under ``mean_zero()`` and scores it against the exact mean-zero truth
(``SyntheticEnv.true_reward(..., normalization=...)``).

A variant is ``label=<dict of MLPClassifier keyword arguments>`` merged over BC_DEFAULTS, or
``ensemble: m`` averages the log-probabilities of m networks (seeds seed + 1000 i), or
``label="true"`` for the true policy (GenPQR's stage-2 error alone).
"""
import argparse
import ast
import os
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

from genpqr.envs import make_synthetic_data
from genpqr.estimator import GenPQR
from genpqr.experiments import _methods as M
from genpqr.models._nn import DuelingQNetwork, MLPClassifier
from genpqr.normalization import mean_zero
from genpqr.stage2 import FQE


class TruePolicy:
    """The benchmark's policy as a prefit classifier (variant value ``"true"``: the stage-2 ceiling)."""

    def __init__(self, env):
        self.env, self.classes_ = env, np.arange(env.n_actions)

    def predict_proba(self, X):
        return self.env.policy_proba(X)


class LogitAverage:
    """A prefit ensemble: the softmax of the members' mean log-probabilities (variant key ``ensemble``)."""

    def __init__(self, members):
        self.members, self.classes_ = members, members[0].classes_

    def predict_proba(self, X):
        z = np.mean([m.predict_log_proba(X) for m in self.members], axis=0)
        z = np.exp(z - z.max(1, keepdims=True))
        return z / z.sum(1, keepdims=True)


def clipped_log(P):
    P = np.clip(P, *M.PAPER_CLIP)
    return np.log(P / P.sum(1, keepdims=True))


def with_anchor(log_p, log_p0):
    """``log_p`` (n, K) with column 0 replaced by ``log_p0`` and the others rescaled to sum to one."""
    out = log_p.copy()
    out[:, 1:] += (np.log1p(-np.exp(log_p0)) - np.log1p(-np.exp(log_p[:, 0])))[:, None]
    out[:, 0] = log_p0
    return out


def run_one(seed, K, bc_kw, q_kw, stage1_only, structure="continuation", normalization="anchor"):
    d = make_synthetic_data(seed, 2500, n_actions=K)
    truth, S, A = d.true_test_reward(), d.test.states, d.test.actions
    rows = np.arange(len(A))
    t = time.perf_counter()
    if bc_kw == "true":
        pol = TruePolicy(d.env)
    else:
        kw = dict(bc_kw)
        n_members = kw.pop("ensemble", 1)
        members = [MLPClassifier(random_state=seed + 1000 * i, **M.layer_tuples({**M.BC_DEFAULTS, **kw}))
                   .fit(d.train.states, d.train.actions) for i in range(n_members)]
        pol = members[0] if n_members == 1 else LogitAverage(members)
    bc_time = time.perf_counter() - t
    lp, lpn = clipped_log(pol.predict_proba(S)), clipped_log(pol.predict_proba(d.env.transition(S, A)))
    plug = lp[rows, A] - 10 * lp[:, 0] + 9 * lpn[:, 0]
    true0, true0_next = d.env.log_policy(S)[:, 0], d.env.log_policy(d.env.transition(S, A))[:, 0]
    lp_t, lpn_t = with_anchor(lp, true0), with_anchor(lpn, true0_next)
    plug_true0 = lp_t[rows, A] - 10 * true0 + 9 * true0_next
    out = {"plugin": np.mean((plug - truth) ** 2), "plugin_true0": np.mean((plug_true0 - truth) ** 2),
           "nll": -np.mean(lp[rows, A]), "lpi0": np.mean((lp[:, 0] - true0) ** 2), "bc_s": bc_time}
    if not stage1_only:
        q = M.updates_schedule(M.layer_tuples({**M.GENPQR_NN_DEFAULTS["q_model"], **q_kw}), d.train.n)
        fqe = {**M.GENPQR_NN_DEFAULTS["fqe"], "structure": structure}
        norm = M.anchor_normalization() if normalization == "anchor" else mean_zero()
        est = GenPQR(normalization=norm, gamma=M.GAMMA, policy_model=pol, policy_prefit=True,
                     q_model=FQE(DuelingQNetwork(random_state=seed, **q), **fqe), clip=M.PAPER_CLIP,
                     random_state=seed, progress=False).fit(d.train)
        if normalization != "anchor":
            truth = d.env.true_reward(S, A, normalization=norm)
        r = est.reward(S, A)
        out["mse"], out["corr"] = np.mean((r - truth) ** 2), np.corrcoef(r, truth)[0, 1]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0,1,2,3")
    p.add_argument("--actions", default="5,40")
    p.add_argument("--variants", nargs="+", default=["default={}"])
    p.add_argument("--q-model", default="{}", help="q_model overrides (Python literal)")
    p.add_argument("--stage1-only", action="store_true")
    p.add_argument("--structure", default="continuation", choices=["continuation", "direct"])
    p.add_argument("--normalization", default="anchor", choices=["anchor", "mean-zero"])
    a = p.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    Ks = [int(k) for k in a.actions.split(",")]
    variants = [(v.split("=", 1)[0], ast.literal_eval(v.split("=", 1)[1])) for v in a.variants]
    q_kw = ast.literal_eval(a.q_model)
    print(f"load average before: {os.getloadavg()}", flush=True)
    res = {}
    with threadpool_limits(1):
        for seed in seeds:
            for K in Ks:
                for label, kw in variants:
                    row = run_one(seed, K, kw, q_kw, a.stage1_only, a.structure, a.normalization)
                    res.setdefault((label, K), []).append(row)
                    print(f"seed {seed} K {K:2d} {label:12s} " + " ".join(f"{k} {v:.3f}" for k, v in row.items()),
                          flush=True)
    print("MEANS (± standard error over seeds)")
    for (label, K), rows in sorted(res.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        keys = rows[0].keys()
        txt = []
        for k in keys:
            v = np.array([r[k] for r in rows])
            txt.append(f"{k} {v.mean():.3f}±{v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else 0:.3f}")
        print(f"{label:12s} K {K:2d} n {len(rows)} " + " ".join(txt))
    for label, _ in variants:
        if (label, Ks[0]) in res and (label, Ks[-1]) in res and "mse" in res[(label, Ks[0])][0]:
            g = np.mean([r["mse"] for r in res[(label, Ks[-1])]]) / np.mean([r["mse"] for r in res[(label, Ks[0])]])
            print(f"{label:12s} growth K {Ks[0]} -> {Ks[-1]}: {g:.2f}x")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    main()

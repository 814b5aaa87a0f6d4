"""Many actions: probes of the anchor's stage-1 error (docs/benchmarks.md, "FQE structure").

Per seed and |A| (2500 trajectories, shift 0, one thread) it prints the plug-in reward MSE
(``log pi(a|s) - 10 log pi(0|s) + 9 log pi(0|s')`` of a clipped estimate against the true reward,
i.e. the stage-1 error with an exact stage 2) for

* behaviour cloning (MLP (64, 64), weight decay 1e-3) as it is, and with the *true* log pi(0|.)
  substituted (the other actions' conditional probabilities kept);
* behaviour cloning with log pi(0|.) from a separate anchor-vs-rest logistic regression on
  polynomial (degree 2, 3) or spline features (C = 0.1, 1), and that model's MSE of log pi(0|s);
* the true policy and behaviour cloning under the clip bounds (low, 0.99), low in 0.01, 0.005,
  0.002, or no clip; and the share of true probabilities below 0.01.

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/many_actions_anchor_probes.py --seeds 0,1,2,3 --actions 5,40
"""
import argparse
import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures, SplineTransformer, StandardScaler
from threadpoolctl import threadpool_limits

from genpqr.envs import make_synthetic_data
from genpqr.experiments import _methods as M
from genpqr.models._nn import MLPClassifier
from many_actions_bc import with_anchor  # benchmarks/ is the script's folder, first on sys.path


def clipped_log(P, low=M.PAPER_CLIP[0]):
    """``log`` of the rows of ``P`` clipped to (low, 0.99) (no clip for ``low=None``) and renormalized."""
    P = np.clip(P, low, M.PAPER_CLIP[1]) if low else P
    return np.log(P / P.sum(1, keepdims=True))


def probe(seed, K):
    d = make_synthetic_data(seed, 2500, n_actions=K)
    S, A = d.test.states, d.test.actions
    rows, S2, truth = np.arange(len(A)), d.env.transition(S, A), d.true_test_reward()

    def plug(lp, lpn):
        return np.mean((lp[rows, A] - 10 * lp[:, 0] + 9 * lpn[:, 0] - truth) ** 2)

    out = {}
    true_lp = d.env.log_policy(S)
    out["share of true pi < 0.01"] = np.mean(np.exp(true_lp) < 0.01)
    bc = MLPClassifier(random_state=seed, **M.layer_tuples({**M.BC_DEFAULTS, "weight_decay": 1e-3}))
    bc.fit(d.train.states, d.train.actions)
    P, P2 = bc.predict_proba(S), bc.predict_proba(S2)
    lp, lpn = clipped_log(P), clipped_log(P2)
    out["BC"] = plug(lp, lpn)
    out["BC, true log pi0"] = plug(with_anchor(lp, true_lp[:, 0]), with_anchor(lpn, d.env.log_policy(S2)[:, 0]))
    out["log pi0 MSE, BC"] = np.mean((lp[:, 0] - true_lp[:, 0]) ** 2)
    y0 = (d.train.actions == 0).astype(int)
    for name, features in (("poly2", PolynomialFeatures(2)), ("poly3", PolynomialFeatures(3)),
                           ("spline", SplineTransformer(n_knots=5))):
        for C in (0.1, 1.0):
            m = make_pipeline(StandardScaler(), features, StandardScaler(), LogisticRegression(C=C, max_iter=2000))
            m.fit(d.train.states, y0)
            l0, l0n = np.log(m.predict_proba(S)[:, 1]), np.log(m.predict_proba(S2)[:, 1])
            out[f"BC, log pi0 from {name} C={C}"] = plug(with_anchor(lp, l0), with_anchor(lpn, l0n))
            out[f"log pi0 MSE, {name} C={C}"] = np.mean((l0 - true_lp[:, 0]) ** 2)
    for low in (0.01, 0.005, 0.002, None):
        out[f"true policy, clip {low}"] = plug(clipped_log(d.env.policy_proba(S), low),
                                               clipped_log(d.env.policy_proba(S2), low))
        out[f"BC, clip {low}"] = plug(clipped_log(P, low), clipped_log(P2, low))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0,1,2,3")
    p.add_argument("--actions", default="5,40")
    a = p.parse_args()
    with threadpool_limits(1):
        for K in [int(k) for k in a.actions.split(",")]:
            rows = [probe(int(s), K) for s in a.seeds.split(",")]
            for key in rows[0]:
                print(f"K {K:2d}  {key:38s} {np.mean([r[key] for r in rows]):.4f}", flush=True)


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    main()

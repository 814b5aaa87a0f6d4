"""Closed-form Q-evaluation (genpqr.stage2.LSTDQ) on exp2 seeds: feature maps x ridge x truncation,
beside neural FQE (the library's GenPQR (BC, NN) default), all on the same prefitted
behaviour-cloning policy, so the times are stage 2 only (one process, one thread).

    python benchmarks/lstd_features.py --seeds 8
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from sklearn.pipeline import make_union
from threadpoolctl import threadpool_limits

from genpqr.envs import make_synthetic_data
from genpqr.experiments import _methods as M
from genpqr.stage2 import LSTDQ, PolicyFeatures, fourier_features, spline_features

FEATURES = {
    "policy hidden layer (64)": lambda seed: PolicyFeatures(),
    "policy hidden + log pi": lambda seed: PolicyFeatures(log_proba=True),
    "splines (5 knots, cubic)": lambda seed: spline_features(),
    "random Fourier (300)": lambda seed: fourier_features(300, 0.1, random_state=seed),
    "splines + random Fourier (100)": lambda seed: make_union(spline_features(),
                                                              fourier_features(100, 0.1, random_state=seed)),
}
ALPHAS = (1e-4, 1e-3)
ITERATIONS = (8, 16, None)


def _fit(est, data):
    start = time.perf_counter()
    est.fit(data.train)
    return time.perf_counter() - start, M.evaluate(est, data)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=8)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    warnings.simplefilter("ignore")
    rows = {}
    with threadpool_limits(1):
        for seed in range(args.seeds):
            data = make_synthetic_data(seed, 1000)
            policy = M.behaviour_cloning(seed, {"bc": M.BC_DEFAULTS}).fit(data.train.states, data.train.actions)
            nn = M.build_genpqr_nn(data, seed, M.GENPQR_NN_DEFAULTS).set_params(policy_model=policy, policy_prefit=True)
            t, r = _fit(nn, data)
            rows.setdefault(("neural FQE (default, 16 x 1)", "", ""), []).append((t, r["reward_mse"], r["reward_corr"]))
            for fname, make in FEATURES.items():
                for alpha in ALPHAS:
                    for it in ITERATIONS:
                        q = LSTDQ(features=make(seed), alpha=alpha, n_iterations=it)
                        est = M._genpqr(data, seed, {"bc": M.BC_DEFAULTS}, q).set_params(policy_model=policy,
                                                                                          policy_prefit=True)
                        t, r = _fit(est, data)
                        key = (fname, f"{alpha:g}", "fixed point" if it is None else f"{it} steps")
                        rows.setdefault(key, []).append((t, r["reward_mse"], r["reward_corr"]))
    print(f"exp2 size (1000 trajectories), seeds 0..{args.seeds - 1}; stage 2 only (policy prefitted)")
    print("| stage 2 | alpha | solve | time (s) mean | MSE mean ± 95% CI | corr mean |")
    print("|---|---|---|---|---|---|")
    for (name, alpha, solve), values in rows.items():
        a = np.array(values)
        ci = 1.96 * a[:, 1].std(ddof=1) / np.sqrt(len(a)) if len(a) > 1 else float("nan")
        print(f"| {name} | {alpha} | {solve} | {a[:, 0].mean():.3f} | {a[:, 1].mean():.3f} ± {ci:.3f} | "
              f"{a[:, 2].mean():.3f} |")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()

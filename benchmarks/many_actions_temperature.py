"""Many actions: does temperature calibration of behaviour cloning (T chosen by held-out log
loss on a 20% row split, then the classifier refitted on all rows) help GenPQR (BC, NN)?
Prints per seed and the means of (fit time, reward MSE, corr, policy NLL, T) at K = 5 and 40,
2500 trajectories, shift 0, one thread.

    python benchmarks/many_actions_temperature.py 4
"""
import os
import sys, time, warnings, numpy as np
warnings.simplefilter("ignore")
from threadpoolctl import threadpool_limits
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from genpqr.envs import make_synthetic_data
from genpqr.experiments import _methods as M
from genpqr.models._nn import MLPClassifier

class TempScaled(ClassifierMixin, BaseEstimator):
    def __init__(self, base=None, seed=0):
        self.base, self.seed = base, seed
    def fit(self, X, y):
        rng = np.random.default_rng(self.seed); n = len(y); val = rng.random(n) < 0.2
        m = clone(self.base).fit(X[~val], y[~val])
        lp = m.predict_log_proba(X[val]); yi = np.searchsorted(m.classes_, y[val])
        f = lambda t: -np.mean(log_softmax(lp / t, axis=1)[np.arange(val.sum()), yi])
        self.T_ = minimize_scalar(f, bounds=(0.3, 5), method="bounded").x
        self.model_ = clone(self.base).fit(X, y); self.classes_ = self.model_.classes_
        return self
    def predict_proba(self, X):
        return np.exp(log_softmax(self.model_.predict_log_proba(X) / self.T_, axis=1))

res = {}
print(f"load average before: {os.getloadavg()}")
with threadpool_limits(1):
    for seed in range(int(sys.argv[1])):
        for K in (5, 40):
            data = make_synthetic_data(seed, 2500, n_actions=K)
            for name in ("BC", "BC+T"):
                est = M.build_genpqr_nn(data, seed, M.GENPQR_NN_DEFAULTS)
                if name == "BC+T":
                    est.set_params(policy_model=TempScaled(MLPClassifier(random_state=seed, **M.BC_DEFAULTS), seed))
                t = time.perf_counter(); est.fit(data.train); ft = time.perf_counter() - t
                r = M.evaluate(est, data)
                T = getattr(est.policy_.models[0], "T_", 1.0)
                res.setdefault((name, K), []).append((ft, r["reward_mse"], r["reward_corr"], r["policy_nll"], T))
                print(seed, K, name, np.round(res[(name, K)][-1], 3), flush=True)
for k, v in res.items():
    print(k, np.array(v).mean(0).round(3))
print(f"load average after: {os.getloadavg()}")

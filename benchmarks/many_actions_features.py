"""Many actions with action features: GenPQR's reward MSE on the paper's many-actions setting when
stage 1 scores (state, action) pairs from action features (docs/benchmarks.md, "Many actions with
action features").

Setting: ``make_synthetic_data(seed, trajectories, n_actions=K)`` (2,500 trajectories of 10 steps by
default), anchor normalization on action 0, gamma 0.9; reward MSE at the test set's (state, logged
action) pairs, as benchmarks/many_actions_bc.py computes it. Each action ``a`` gets two feature
vectors (an ``ActionTable``):

* ``move``: ``[Delta_a, Delta_a^2, 1{a = 0}]``, the action's lattice move (what a practitioner knows of
  a route or a price step; says nothing of the policy's per-action weights);
* ``attr``: ``[W_a, b_a, |W_a|]``, the action's row of the benchmark's policy weights, i.e. item
  attributes that drive the choice (the policy stays nonlinear in them: ``0.8 tanh(c)``).

Methods (each one fit of stage 1 and stage 2 per seed and K):

* ``bc``: today's default, GenPQR (BC, NN) as ``get_config("many-actions")`` runs it: MLPClassifier per
  action (weight decay 1e-3) + neural FQE (16 x 4 epochs, regressing the continuation);
* ``cl-move`` / ``cl-attr``: ``ConditionalLogit`` on the move / attribute features, state basis
  ``[1, s, s*s]``, C = 1, + the same neural FQE (every neural stage 2 here is ``bc``'s);
* ``cl-attr+af``: ``cl-attr`` + stage 2 ``encoding="action_features"`` (one
  HistGradientBoostingRegressor on ``[s, x_a]``, 16 iterations);
* ``tt-mlp``: ``TwoTowerClassifier(interaction="mlp")`` on the attribute features (score
  ``g(f(s) * h(x_a))``: state tower (64,), affine action tower, embedding 8, ``g`` (32,), 10 epochs:
  ``TT_MLP``) + the same neural FQE;
* ``oracle``: the correctly specified first stage (the benchmark's own parametric form, W and b
  unknown, maximum likelihood; ``many_actions_heads.py``'s "oracle" head) + neural FQE: the reference;
* ``deeppqr``: the paper's baseline, the registered "DeepPQR" method with the "many-actions" experiment's
  options (the specification's settings on ``bc``'s behaviour-cloning estimate: same network, same seed).

``--large K`` adds a large-K part on the same dynamics (``--large-trajectories``): ``cl-attr+af``
and ``oracle+af``, fit seconds, peak resident memory (``ru_maxrss`` of the process so far: run the
large part alone for its own peak), and the reward MSE over the test states x (actions taken >= 50
times) and x (never-taken actions) (at most ``--eval-actions`` actions per group).

``--rec K`` adds the recommendation-style part (``rec_data``: K items, ``--rec-trajectories`` episodes of 10
steps, ground truth known): stage 1 ``two-tower+af`` (the default ``TwoTowerClassifier``), ``bilinear+af`` (the
true form ``[1, s]' W x_a`` as linear towers of rank 3, fitted like the two tower) or ``cl-true+af`` (the true
form by exact maximum likelihood, ``ConditionalLogit``), each with stage 2 ``encoding="action_features"`` (HGB of
``--rec-q-iter`` trees, ``--rec-fqe-iter`` FQE iterations), anchor on item 0. It prints the fit's wall and CPU
seconds, its peak resident memory (``ru_maxrss``; run one ``--rec-methods`` per process for its own peak) and the
reward MSE on actions taken >= 50 times and on never-taken ones (500 fresh states x up to 50 actions each).

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/many_actions_features.py --seeds 0,1 --out /tmp/maf
    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/many_actions_features.py --actions "" --large 1000
"""
from __future__ import annotations

import argparse
import csv
import os
import resource
import sys
import time
import warnings

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits

from genpqr import ActionTable, from_arrays
from genpqr.envs import make_synthetic_data
from genpqr.estimator import GenPQR
from genpqr.experiments import _configs as C, _methods as M
from genpqr.models._nn import DuelingQNetwork, MLPClassifier
from genpqr.stage1 import ConditionalLogit
from genpqr.stage2 import FQE

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from many_actions_heads import HeadClassifier  # noqa: E402  (the correctly specified "oracle" form)

METHODS = ("bc", "cl-move", "cl-attr", "cl-attr+af", "tt-mlp", "oracle", "deeppqr")
#: TwoTowerClassifier settings of ``tt-mlp`` (chosen on seeds 0-3 at K = 40, docs/benchmarks.md).
TT_MLP = dict(interaction="mlp", embedding_dim=8, max_epochs=10)


class OracleForm:
    """The benchmark's parametric policy form with W and b unknown (maximum likelihood, 60 epochs of Adam),
    as a prefit classifier over all K actions (actions above the largest taken code get probability 0)."""

    def __init__(self, K, seed, tiny=False):
        self.classes_, self.head = np.arange(K), HeadClassifier(seed, head="oracle", wd=0.0,
                                                                epochs=2 if tiny else 60, lr=1e-2)

    def fit(self, X, y):
        self.head.fit(X, y)
        return self

    def predict_proba(self, X):
        P = self.head.predict_proba(X)
        return np.hstack([P, np.zeros((len(P), len(self.classes_) - P.shape[1]))])


def quadratic_basis(s):
    return np.hstack([s, s * s])


def features(env, kind):
    if kind == "move":
        d = env.delta / 0.35
        return np.column_stack([d, d * d, np.arange(env.n_actions) == 0]).astype(float)
    return np.column_stack([env.W, env.b, np.abs(env.W)])


def with_table(tr, X):
    return from_arrays(tr.states, tr.actions, tr.next_states, terminated=tr.terminated, truncated=tr.truncated,
                       episode_ids=tr.episode_ids, action_features=ActionTable(np.arange(len(X)), X))


def stage1(method, d, seed, tiny=False):
    X, y = d.train.states, d.train.actions
    if method == "bc":
        kw = M.layer_tuples({**M.BC_DEFAULTS, "weight_decay": C.MANY_ACTIONS_BC_WEIGHT_DECAY,
                             **({"hidden_layer_sizes": (16,), "max_epochs": 2} if tiny else {})})
        return MLPClassifier(random_state=seed, **kw).fit(X, y)
    if method.startswith("oracle"):
        return OracleForm(d.env.n_actions, seed, tiny).fit(X, y)
    if method == "tt-mlp":
        from genpqr.models import TwoTowerClassifier
        kw = {**TT_MLP, **({"max_epochs": 1} if tiny else {})}
        return TwoTowerClassifier(features(d.env, "attr"), random_state=seed, **kw).fit(X, y)
    kind = "move" if "move" in method else "attr"
    return ConditionalLogit(features(d.env, kind), state_basis=quadratic_basis, C=1.0).fit(X, y)


def stage2(method, pol, d, seed, tiny=False):
    common = dict(normalization=M.anchor_normalization(), gamma=M.GAMMA, policy_model=pol, policy_prefit=True,
                  clip=M.PAPER_CLIP, random_state=seed, progress=False)
    if method.endswith("+af"):
        hgb = HistGradientBoostingRegressor(max_iter=10 if tiny else 100, random_state=seed)
        fqe = FQE(hgb, encoding="action_features", n_iterations=2 if tiny else 16, tol=None, structure="continuation")
        return GenPQR(q_model=fqe, **common).fit(with_table(d.train, features(d.env, "attr")))
    q = M.updates_schedule(M.layer_tuples({**M.GENPQR_NN_DEFAULTS["q_model"],
                                           "epochs_per_iteration": C.MANY_ACTIONS_FQE_EPOCHS}), d.train.n)
    fqe = {**M.GENPQR_NN_DEFAULTS["fqe"], "structure": C.MANY_ACTIONS_FQE_STRUCTURE}
    if tiny:
        q, fqe = {**q, "hidden_layer_sizes": (16,)}, {**fqe, "n_iterations": 2}
    return GenPQR(q_model=FQE(DuelingQNetwork(random_state=seed, **q), **fqe), **common).fit(d.train)


def deeppqr(d, seed, tiny=False):
    """DeepPQR fitted on ``d.train`` as the "many-actions" experiment runs it (``get_method("DeepPQR")`` with
    that experiment's options: behaviour cloning with ``bc``'s weight decay, the specification's DeepPQR)."""
    method = M.get_method("DeepPQR")
    options = method.resolve(C.get_config("many-actions").options["DeepPQR"], tiny=tiny)
    return method.build(d, seed, options).fit(d.train)


def run_small(seed, K, method, trajectories, tiny=False):
    d = make_synthetic_data(seed, trajectories, n_actions=K)
    t = time.perf_counter()
    if method == "deeppqr":
        est = deeppqr(d, seed, tiny)
    else:
        est = stage2(method, stage1(method, d, seed, tiny), d, seed, tiny)
    sec = time.perf_counter() - t
    truth, r = d.true_test_reward(), est.reward(d.test.states, d.test.actions)
    return {"seed": seed, "K": K, "method": method, "mse": float(np.mean((r - truth) ** 2)), "fit_s": sec}


def group_mse(est, env, S, actions):
    if len(actions) == 0:
        return float("nan")
    SS, AA = np.repeat(S, len(actions), axis=0), np.tile(actions, len(S))
    return float(np.mean((est.reward(SS, AA) - env.true_reward(SS, AA)) ** 2))


def run_large(K, method, trajectories, seed=0, eval_actions=50, tiny=False):
    d = make_synthetic_data(seed, trajectories, n_actions=K)
    counts = np.bincount(d.train.actions, minlength=K)
    t = time.perf_counter()
    pol = stage1("oracle" if method.startswith("oracle") else "cl-attr", d, seed, tiny)
    est = stage2("x+af", pol, d, seed, tiny)
    sec = time.perf_counter() - t
    rng = np.random.default_rng(0)
    pick = lambda a: np.sort(rng.choice(a, min(eval_actions, len(a)), replace=False)) if len(a) else a
    S = d.test.states[rng.choice(d.test.n, min(500, d.test.n), replace=False)]
    return {"seed": seed, "K": K, "method": method, "n": d.train.n, "fit_s": sec,
            "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "taken>=50": int((counts >= 50).sum()), "never_taken": int((counts == 0).sum()),
            "mse": float(np.mean((est.reward(d.test.states, d.test.actions) - d.true_test_reward()) ** 2)),
            "mse_taken>=50": group_mse(est, d.env, S, pick(np.flatnonzero(counts >= 50))),
            "mse_never": group_mse(est, d.env, S, pick(np.flatnonzero(counts == 0)))}


REC_W = np.array([[1.0, -0.5, 0.3, 1.0], [0.5, 0.0, 0.4, 0.0], [0.0, 0.4, -0.3, 0.0]])


def rec_data(K, trajectories, seed, horizon=10):
    """Recommendation-style episodes: K items with features ``x_a = [N(0, I_3), -log rank_a]`` (item 0 the most
    popular, the anchor), states ``s ~ N(0, I_2)`` drawn afresh each step whatever the choice, choices from
    ``pi(a|s) ~ exp([1, s]' W x_a)``. The transitions ignore the action, so the anchor-normalized true reward is
    ``r(s, a) = log pi(a|s) - log pi(0|s) = [1, s]' W (x_a - x_0)``."""
    x = np.random.default_rng(99).normal(size=(K, 3))
    x = np.column_stack([x, -np.log1p(np.arange(K))])
    rng = np.random.default_rng(seed)
    n = trajectories * horizon
    S = rng.normal(size=(n + trajectories, 2))
    idx = np.arange(n).reshape(trajectories, horizon) + np.arange(trajectories)[:, None]
    states, next_states = S[idx.ravel()], S[idx.ravel() + 1]
    scores = np.hstack([np.ones((n, 1)), states]) @ REC_W
    y = np.empty(n, dtype=np.int64)
    u = rng.random(n)
    step = max(1, 2 ** 22 // K)
    for lo in range(0, n, step):  # inverse CDF in row blocks of 4M entries (n x K never dense)
        z = scores[lo:lo + step] @ x.T
        p = np.exp(z - z.max(1, keepdims=True))
        y[lo:lo + step] = (p.cumsum(1) > u[lo:lo + step, None] * p.sum(1, keepdims=True)).argmax(1)
    truncated = np.zeros((trajectories, horizon), bool)
    truncated[:, -1] = True
    data = from_arrays(states, y, next_states, terminated=np.zeros(n, bool), truncated=truncated.ravel(),
                       episode_ids=np.repeat(np.arange(trajectories), horizon),
                       action_features=ActionTable(np.arange(K), x))
    reward = lambda s, a: np.einsum("ij,ij->i", np.hstack([np.ones((len(s), 1)), s]) @ REC_W, x[a] - x[0])
    return data, x, reward


def rss_mb() -> float:
    """The process's current resident memory (MB), from /proc (NaN where there is none)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20
    except OSError:
        return float("nan")


def rec_policy(method, x, data, seed, epochs, batch, tiny=False, loss="auto"):
    """Stage 1 of a ``--rec`` row: the generic two tower, the true form as linear towers of rank 3
    (``bilinear``, the same score ``[1, s]' W x_a`` fitted by the same stochastic optimiser), or the
    true form by exact maximum likelihood (``cl-true``, :class:`ConditionalLogit`)."""
    from genpqr.models import TwoTowerClassifier
    common = dict(max_epochs=2 if tiny else epochs, batch_size=batch, random_state=seed, loss=loss)
    if method.startswith("two-tower"):
        return TwoTowerClassifier(x, **common).fit(data.states, data.actions)
    if method.startswith("bilinear"):
        return TwoTowerClassifier(x, state_layers=(), action_layers=(), embedding_dim=3, **common) \
            .fit(data.states, data.actions)
    return ConditionalLogit(x, state_basis="linear", C=np.inf, max_iter=50 if tiny else 1000) \
        .fit(data.states, data.actions)


def run_rec(K, method, trajectories, seed=0, eval_actions=50, tiny=False, epochs=20, batch=256, q_iter=100,
            fqe_iter=16, loss="auto"):
    data, x, reward = rec_data(K, trajectories, seed)
    counts = np.bincount(data.actions, minlength=K)
    rss_before = rss_mb()
    t, cpu = time.perf_counter(), time.process_time()
    pol = rec_policy(method, x, data, seed, epochs, batch, tiny, loss)
    t1 = time.perf_counter() - t
    est = GenPQR(normalization=M.anchor_normalization(), gamma=M.GAMMA, policy_model=pol, policy_prefit=True, clip=None,
                 random_state=seed, progress=False,
                 q_model=FQE(HistGradientBoostingRegressor(max_iter=10 if tiny else q_iter, random_state=seed),
                             encoding="action_features", n_iterations=2 if tiny else fqe_iter, tol=None,
                             structure="continuation")).fit(data)
    sec, cpu = time.perf_counter() - t, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"K {K} {method}: fit {sec:.1f} s wall, {cpu:.1f} s CPU (stage 1 {t1:.1f} s), peak RSS {peak:.0f} MB "
          f"({rss_before:.0f} MB before the fit)", flush=True)
    rng = np.random.default_rng(0)
    pick = lambda a: np.sort(rng.choice(a, min(eval_actions, len(a)), replace=False)) if len(a) else a
    S = rng.normal(size=(500, 2))

    def mse(actions):
        if len(actions) == 0:
            return float("nan")
        SS, AA = np.repeat(S, len(actions), axis=0), np.tile(actions, len(S))
        return float(np.mean((est.reward(SS, AA) - reward(SS, AA)) ** 2))

    logged = np.arange(min(5000, data.n))
    return {"seed": seed, "K": K, "method": method, "n": data.n, "fit_s": sec, "fit_cpu_s": cpu, "stage1_s": t1,
            "maxrss_mb": peak, "rss_before_mb": rss_before, "large_path": type(est.stage2_).__name__ == "LargeStage2",
            "taken>=50": int((counts >= 50).sum()), "never_taken": int((counts == 0).sum()),
            "mse": float(np.mean(
                (est.reward(data.states[logged], data.actions[logged])
                 - reward(data.states[logged], data.actions[logged])) ** 2)),
            "mse_taken>=50": mse(pick(np.flatnonzero(counts >= 50))),
            "mse_never": mse(pick(np.flatnonzero(counts == 0)))}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated (20 seeds: 0,...,19)")
    p.add_argument("--actions", default="5,40", help="K of the small part ('' to skip it)")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--trajectories", type=int, default=2500)
    p.add_argument("--large", default="", help="K of the large part, e.g. 1000,10000")
    p.add_argument("--large-trajectories", type=int, default=1000)
    p.add_argument("--large-methods", default="cl-attr+af,oracle+af")
    p.add_argument("--rec", default="", help="K of the recommendation-style part, e.g. 1000,10000")
    p.add_argument("--rec-trajectories", type=int, default=10000)
    p.add_argument("--rec-methods", default="two-tower+af,cl-true+af",
                   help="two-tower+af, bilinear+af (the true form, linear towers), cl-true+af (the true form, MLE)")
    p.add_argument("--rec-epochs", type=int, default=20, help="two-tower / bilinear epochs")
    p.add_argument("--rec-batch", type=int, default=256, help="two-tower / bilinear rows per mini-batch")
    p.add_argument("--rec-q-iter", type=int, default=100, help="boosting iterations of the stage-2 HGB")
    p.add_argument("--rec-fqe-iter", type=int, default=16, help="FQE iterations")
    p.add_argument("--rec-loss", default="auto", help="two-tower / bilinear loss: auto, full or sampled")
    p.add_argument("--eval-actions", type=int, default=50)
    p.add_argument("--tiny", action="store_true", help="tiny networks and iterations (smoke test)")
    p.add_argument("--out", help="a new folder for results.csv (must not exist)")
    a = p.parse_args(argv)
    if a.out:
        os.makedirs(a.out)  # fresh folder only
    warnings.simplefilter("ignore")
    seeds = [int(s) for s in a.seeds.split(",")]
    print(f"load average before: {os.getloadavg()}", flush=True)
    rows = []
    with threadpool_limits(1):
        import torch
        torch.set_num_threads(1)
        for K in [int(k) for k in a.actions.split(",") if k]:
            for seed in seeds:
                for m in a.methods.split(","):
                    r = run_small(seed, K, m, a.trajectories, a.tiny)
                    rows.append(r)
                    print(f"seed {seed} K {K} {m:11s} mse {r['mse']:.3f} fit {r['fit_s']:.1f}s", flush=True)
        summary = []
        for K in sorted({r["K"] for r in rows}):
            for m in a.methods.split(","):
                v = np.array([r["mse"] for r in rows if r["K"] == K and r["method"] == m])
                s = np.mean([r["fit_s"] for r in rows if r["K"] == K and r["method"] == m])
                se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else 0.0
                summary.append((K, m, len(v), v.mean(), se, s))
        if summary:
            print("| K | method | seeds | reward MSE (± s.e.) | fit (s) |\n|---|---|---|---|---|")
            for K, m, n, mean, se, s in summary:
                print(f"| {K} | {m} | {n} | {mean:.3f} ± {se:.3f} | {s:.1f} |")
        large = []
        for K in [int(k) for k in a.large.split(",") if k]:
            for m in a.large_methods.split(","):
                r = run_large(K, m, a.large_trajectories, eval_actions=a.eval_actions, tiny=a.tiny)
                large.append(r)
                print(r, flush=True)
        for K in [int(k) for k in a.rec.split(",") if k]:
            for m in a.rec_methods.split(","):
                r = run_rec(K, m, a.rec_trajectories, eval_actions=a.eval_actions, tiny=a.tiny, epochs=a.rec_epochs,
                            batch=a.rec_batch, q_iter=a.rec_q_iter, fqe_iter=a.rec_fqe_iter, loss=a.rec_loss)
                large.append({**r, "method": "rec " + m})
                print(r, flush=True)
        if large:
            print("| K | method | n | taken >= 50 | never taken | fit (s) | fit CPU (s) | peak RSS (MB) | MSE logged | "
                  "MSE taken >= 50 | MSE never taken |\n|---|---|---|---|---|---|---|---|---|---|---|")
            for r in large:
                print(f"| {r['K']:,} | {r['method']} | {r['n']:,} | {r['taken>=50']} | {r['never_taken']} | "
                      f"{r['fit_s']:.1f} | {r.get('fit_cpu_s', float('nan')):.1f} | {r['maxrss_mb']:.0f} | "
                      f"{r['mse']:.4f} | {r['mse_taken>=50']:.4f} | {r['mse_never']:.4f} |")
    print(f"load average after: {os.getloadavg()}")
    if a.out:
        keys = sorted({k for r in rows + large for k in r})
        with open(os.path.join(a.out, "results.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, keys)
            w.writeheader()
            w.writerows(rows + large)
    return rows, large


if __name__ == "__main__":
    main()

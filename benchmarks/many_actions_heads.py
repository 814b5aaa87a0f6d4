"""Many actions: do output heads that share strength across actions reduce the stage-1 error of the rare anchor?
(Companion of benchmarks/many_actions_bc.py.)

For each seed, |A| and head variant (2500 trajectories, shift 0, one thread) it fits a behaviour-cloning network
once and prints the stage-1 diagnostics of many_actions_bc.py: the "plug-in" reward MSE (the reward that the
identification theorem gives for the clipped estimate alone, ``log pi(a|s) - 10 log pi(0|s) + 9 log pi(0|s')``),
the MSE of log pi(0|s) against the truth, the test NLL (held-out log loss: the selection criterion) and the fit
seconds. Every network is a trunk (hidden layers, activation ``act``) followed by a head:

* ``linear``   -- one linear layer, 64 weights per action (the MLPClassifier architecture);
* ``lowrank``  -- logits ``h(s) U V^T + b`` with rank ``rank``;
* ``bilinear`` -- an embedding ``e_a`` (dim ``emb``) per action, ``t_j(s, a) = e_a^T M_j h(s)`` for
  ``j = 1..m``, logit ``= shared MLP(t(s, a))`` (``q`` units, activation ``act``) ``+ b_a``;
* ``concat``   -- logit ``= shared MLP([h(s), e_a])`` (``q`` units) ``+ b_a``;
* ``oracle``   -- NOT generic, a diagnostic: the benchmark's own parametric form with unknown W and b, fitted
  by maximum likelihood (what a correctly specified model achieves from the same rows).

Adam (lr 5e-3, batch 256, weight decay 1e-3 on every parameter), 40 epochs unless the variant says otherwise.

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/many_actions_heads.py --seeds 0,1,2,3 --actions 5,40

Measured (mean plug-in MSE, K=5 / K=40; reference = MLPClassifier (64, 64) ReLU, weight decay 1e-3):
seeds 0-3: reference 0.106 / 0.257; bilinear e16 m8 q32 relu 0.143 / 0.246; linear tanh 0.053 / 0.330;
bilinear e16 m8 q32 tanh 0.073 / 0.210 (ep60: - / 0.200); oracle form 0.016 / 0.072.
seeds 0-9: reference 0.119 / 0.271; bilinear e16 m8 q32 tanh 0.083 / 0.196 (ratio 2.4x, reference 2.3x).
Even the oracle form grows 4.5x from K=5 to K=40 (the anchor count falls 8x), so no stage-1 model
meets a 1.6x growth bound on this measure; heads can only lower the level.
"""
import argparse
import ast
import math
import time
import warnings

import numpy as np
import torch
from threadpoolctl import threadpool_limits
from torch import nn
from torch.nn import functional as F

from genpqr.envs import make_synthetic_data
from genpqr.experiments import _methods as M
from genpqr.models._nn import MLPClassifier
from genpqr.models._torch_training import make_optimizer, optimization_step, standardization

ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh, "silu": F.silu, "gelu": F.gelu}

VARIANTS = {
    "MLPClassifier (ref)": None,
    "linear relu": {"head": "linear"},
    "linear tanh": {"head": "linear", "act": "tanh"},
    "lowrank8 relu": {"head": "lowrank", "rank": 8},
    "concat e8 q64 relu": {"head": "concat", "emb": 8, "q": 64},
    "bilinear e16 m8 q32 relu": {"head": "bilinear", "emb": 16, "m": 8, "q": 32},
    "bilinear e16 m8 q32 tanh": {"head": "bilinear", "emb": 16, "m": 8, "q": 32, "act": "tanh"},
    "bilinear e16 m8 q32 tanh ep60": {"head": "bilinear", "emb": 16, "m": 8, "q": 32, "act": "tanh", "epochs": 60},
    "ORACLE FORM (diagnostic)": {"head": "oracle", "wd": 0.0, "epochs": 60, "lr": 1e-2},
}


def uniform(shape, fan_in, generator):
    bound = 1.0 / math.sqrt(fan_in)
    return nn.Parameter(torch.empty(shape).uniform_(-bound, bound, generator=generator))


class HeadNet(nn.Module):
    """Trunk + one of the heads of the module docstring; ``forward`` gives logits (n, K)."""

    def __init__(self, d, K, generator, head="linear", hidden=(64, 64), emb=8, m=4, q=32, rank=4, act="relu"):
        super().__init__()
        self.head, self.act, self.m, self.emb = head, ACTIVATIONS[act], m, emb
        g, sizes = generator, (d, *hidden)
        self.W = nn.ParameterList([uniform((i, o), i, g) for i, o in zip(sizes[:-1], sizes[1:])])
        self.b = nn.ParameterList([uniform((o,), i, g) for i, o in zip(sizes[:-1], sizes[1:])])
        H = sizes[-1]
        self.bias = nn.Parameter(torch.zeros(K))
        if head == "oracle":
            self.Wo = nn.Parameter(0.3 * torch.randn((K, d), generator=g))
        elif head == "linear":
            self.out = uniform((H, K), H, g)
        elif head == "lowrank":
            self.U, self.V = uniform((H, rank), H, g), uniform((K, rank), rank, g)
        elif head in ("bilinear", "concat"):
            self.E = nn.Parameter(torch.randn((K, emb), generator=g))
            first = m if head == "bilinear" else H + emb
            self.M = uniform((H, m * emb), H, g) if head == "bilinear" else uniform((H, q), first, g)
            self.C = uniform((emb, q), first, g) if head == "concat" else uniform((m, q), first, g)
            self.c0, self.c1 = uniform((q,), first, g), uniform((q, 1), q, g)
        else:
            raise ValueError(f"unknown head {head!r}")

    def forward(self, x):
        if self.head == "oracle":  # the benchmark's policy form (inputs are raw states)
            x = x / math.sqrt(x.shape[1])
            z = x @ self.Wo.t() + self.bias
            return 0.8 * torch.tanh(z + 0.35 * torch.sin(1.5 * z) + 0.2 * (x * x) @ self.Wo.abs().t())
        for W, b in zip(self.W, self.b):
            x = self.act(torch.addmm(b, x, W))
        if self.head == "linear":
            return x @ self.out + self.bias
        if self.head == "lowrank":
            return (x @ self.U) @ self.V.t() + self.bias
        if self.head == "bilinear":
            t = ((x @ self.M).view(x.shape[0], self.m, self.emb) @ self.E.t()).transpose(1, 2)  # (n, K, m)
            return (self.act(t @ self.C + self.c0) @ self.c1)[..., 0] + self.bias
        pre = (x @ self.M)[:, None, :] + (self.E @ self.C)[None] + self.c0  # concat: (n, K, q)
        return (self.act(pre) @ self.c1)[..., 0] + self.bias


class HeadClassifier:
    """Minimal fit / predict_proba around :class:`HeadNet` (the training loop of MLPClassifier)."""

    def __init__(self, seed, epochs=40, lr=5e-3, wd=1e-3, batch_size=256, **net):
        self.seed, self.epochs, self.lr, self.wd, self.batch_size, self.net = seed, epochs, lr, wd, batch_size, net

    def fit(self, X, y):
        g = torch.Generator().manual_seed(self.seed)
        self.mean, self.scale = standardization(X, self.net.get("head") != "oracle")
        net = HeadNet(X.shape[1], int(y.max()) + 1, g, **self.net)
        adam = make_optimizer("adam", net.parameters(), lr=self.lr, weight_decay=self.wd)
        Xt = torch.from_numpy(((X - self.mean) / self.scale).astype(np.float32))
        yt = torch.as_tensor(y, dtype=torch.int64)
        for _ in range(self.epochs):
            perm = torch.randperm(len(y), generator=g)
            for start in range(0, len(y), self.batch_size):
                idx = perm[start:start + self.batch_size]
                optimization_step(F.cross_entropy(net(Xt[idx]), yt[idx]), adam)
        self.net_ = net.double()
        return self

    def predict_proba(self, X):
        with torch.no_grad():
            return torch.softmax(self.net_(torch.from_numpy((X - self.mean) / self.scale)), 1).numpy()


def clipped_log(P):
    P = np.clip(P, *M.PAPER_CLIP)
    return np.log(P / P.sum(1, keepdims=True))


def diagnostics(model, data) -> dict:
    S, A = data.test.states, data.test.actions
    rows, S2 = np.arange(len(A)), data.env.transition(S, A)
    lp, lpn = clipped_log(model.predict_proba(S)), clipped_log(model.predict_proba(S2))
    plug = lp[rows, A] - 10 * lp[:, 0] + 9 * lpn[:, 0]
    return {"plug-in MSE": np.mean((plug - data.true_test_reward()) ** 2),
            "log pi0 MSE": np.mean((lp[:, 0] - data.env.log_policy(S)[:, 0]) ** 2),
            "test NLL": -np.mean(lp[rows, A])}


def fit_variant(spec, data, seed):
    X, y = data.train.states, data.train.actions
    if spec is None:
        kwargs = M.layer_tuples({**M.BC_DEFAULTS, "weight_decay": 1e-3})
        return MLPClassifier(random_state=seed, **kwargs).fit(X, y)
    return HeadClassifier(seed, **spec).fit(X, y)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2,3")
    parser.add_argument("--actions", default="5,40")
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS),
                        help="names of VARIANTS, or label=<dict of HeadClassifier keyword arguments>")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    seeds = [int(s) for s in args.seeds.split(",")]
    specs = {}
    for v in args.variants:
        label, _, text = v.partition("=")
        specs[label] = ast.literal_eval(text) if text else VARIANTS[label]
    print(f"seeds {seeds}; mean over seeds")
    print(f"{'K':>3} {'variant':32s} {'plug-in MSE':>11} {'log pi0 MSE':>11} {'test NLL':>9} {'fit s':>6}")
    with threadpool_limits(1):
        torch.set_num_threads(1)
        for K in [int(k) for k in args.actions.split(",")]:
            datasets = {seed: make_synthetic_data(seed, 2500, n_actions=K) for seed in seeds}
            for label, spec in specs.items():
                rows = []
                for seed in seeds:
                    start = time.perf_counter()
                    model = fit_variant(spec, datasets[seed], seed)
                    rows.append({**diagnostics(model, datasets[seed]), "sec": time.perf_counter() - start})
                mean = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
                print(f"{K:3d} {label:32s} {mean['plug-in MSE']:11.4f} {mean['log pi0 MSE']:11.4f} "
                      f"{mean['test NLL']:9.4f} {mean['sec']:6.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Many items with features on tabular user states, through the front door: ``GenPQR(...).fit`` and
``genpqr fit`` as a user runs them (docs/benchmarks.md, "Many items on tabular states").

The case: ``--items`` items (default 1,000) with ``--features`` features each (default 6, i.i.d.
N(0, 1)), ``--states`` user states (default 50), ``--choices`` logged choices (default 200,000: episodes
of 10 steps, start state uniform). The logged policy is a conditional logit on one-hot states,
``pi(a|s) ~ exp(theta_s' x_a)`` with ``theta_s ~ N(0, 0.6^2 I)``: the default first stage of ``genpqr fit
--action-features`` on tabular states (``ConditionalLogit(state_basis="onehot")``) is correctly specified.
Transitions depend on the item through its genre (the largest of its first four features): with
probability 0.5 the user moves ``1 + genre`` states on (mod S), else to a state drawn from a per-state
Dirichlet(1) row (the kernel is sparse: S K rows of at most S + 1 entries). Gamma 0.9, mean-zero normalization (``mu = 1/K``, ``g = 0``). The true reward is
GenPQR's exact recovery from the true policy and kernel (the reward for which the logged policy is
soft-optimal under this normalization).

Reward error: the root-mean-square and mean squared error against the truth over the logged (state,
item) pairs (``MSE logged``) and over every (state, item) cell (``MSE cells``, the items never taken
included).

Cases (``--cases``, comma-separated):

* ``library``: ``GenPQR(normalization=mean_zero(), gamma=0.9, q_model="exact", n_states=S,
  policy_model=ConditionalLogit(state_basis="onehot", n_states=S), cross_fit=5, random_state=0)`` --
  what ``genpqr fit`` builds for this data -- timed around ``fit`` (``--cross-fit 0``: no folds);
* ``first-stage``: the conditional logit alone, ``fit`` on the rows (the floor of the estimation: the
  counting pass plus the optimisation over S x K scores);
* ``two-tower``: the same GenPQR with ``TwoTowerClassifier`` (default settings) on one-hot states, the
  generic many-actions model, for the reward error it reaches on these data;
* ``softmax-pass``: the floor of the continuous-state alternative, one exact log-partition pass
  (``bilinear_log_partition``) over 20,000 rows x 10,000 items, scaled to 1e6 x 1e4 scores;
* ``cli``: ``genpqr fit LOGS.csv --episode user --time t --state state --action item --action-features
  items.csv --normalization mean-zero --gamma 0.9 --out DIR`` in a child process (wall time, peak
  resident memory by ``os.wait4``), the reward error read from its ``rewards.csv``.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/front_door.py [--cases library,first-stage,cli]
        [--items 1000] [--features 6] [--states 50] [--choices 200000] [--cross-fit 5] [--seed 0]
        [--transition auto] [--keep DIR]

Prints one table (markdown): case, wall seconds, CPU seconds, peak RSS, reward errors, and the ratio
to the ``first-stage`` row (the floor it names) when that row is run.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

GAMMA = 0.9


def many_items_mdp(n_items=1000, n_features=6, n_states=50, seed=0):
    """The case: ``dict(x (K, d) features, policy (S, K), background (S, S), move (S, K), truth (S, K))``;
    the kernel is ``P(.|s, a) = 0.5 background[s] + 0.5 1{move[s, a]}`` and ``truth`` the reward."""
    from genpqr import normalization as N
    from genpqr.stage2 import recover_reward
    from genpqr.stage2._tabular import TransitionKernel

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_items, n_features))
    taste = 0.6 * rng.normal(size=(n_states, n_features))
    scores = taste @ x.T
    policy = np.exp(scores - scores.max(axis=1, keepdims=True))
    policy /= policy.sum(axis=1, keepdims=True)
    genre = np.argmax(x[:, :min(4, n_features)], axis=1)
    background = rng.dirichlet(np.ones(n_states), size=n_states)  # (S, S)
    move = (np.arange(n_states)[:, None] + 1 + genre[None, :]) % n_states  # (S, K)
    kernel = TransitionKernel(_kernel_matrix(background, move), n_states, n_items)
    truth = recover_reward(np.log(policy), kernel, GAMMA, N.mean_zero()).reward
    return dict(x=x, policy=policy, background=background, move=move, truth=truth, kernel=kernel)


def _kernel_matrix(background, move):
    """The (S K, S) sparse kernel ``0.5 background[s] + 0.5 1{move[s, a]}``."""
    import scipy.sparse as sp

    S, K = move.shape
    rows = np.arange(S * K)
    dense_part = sp.csr_matrix(np.repeat(0.5 * background, K, axis=0))
    return (dense_part + sp.csr_matrix((np.full(S * K, 0.5), (rows, move.ravel())), shape=(S * K, S))).tocsr()


def simulate(case, n_choices=200_000, horizon=10, seed=0):
    """Episodes of ``horizon`` steps from a uniform start: ``(episode, t, state, item, next_state)`` arrays."""
    rng = np.random.default_rng(seed + 1)
    policy, background, move = case["policy"], case["background"], case["move"]
    S, K = policy.shape
    n_episodes = -(-n_choices // horizon)
    cdf_pi, cdf_bg = np.cumsum(policy, axis=1), np.cumsum(background, axis=1)
    state = rng.integers(0, S, size=n_episodes)
    out = {k: np.empty((n_episodes, horizon), dtype=np.int64) for k in ("s", "a", "s2")}
    for t in range(horizon):
        a = _draw(cdf_pi, state, rng.random(n_episodes))
        s2 = np.where(rng.random(n_episodes) < 0.5, move[state, a], _draw(cdf_bg, state, rng.random(n_episodes)))
        out["s"][:, t], out["a"][:, t], out["s2"][:, t] = state, a, s2
        state = s2
    keep = slice(0, n_choices)
    episode = np.repeat(np.arange(n_episodes), horizon)[keep]
    t = np.tile(np.arange(horizon), n_episodes)[keep]
    return episode, t, out["s"].ravel()[keep], out["a"].ravel()[keep], out["s2"].ravel()[keep]


def _draw(cdf, rows, u):
    """Inverse-CDF draws: for each ``rows[i]`` the first column whose ``cdf`` reaches ``u[i]``
    (one search per distinct row: no (n, K) comparison)."""
    out = np.empty(rows.size, dtype=np.int64)
    for r in np.unique(rows):
        sel = np.flatnonzero(rows == r)
        out[sel] = np.searchsorted(cdf[r], u[sel], side="left")
    return np.minimum(out, cdf.shape[1] - 1)


def transitions(x, episode, t, s, a, s2, horizon=10):
    """The :class:`genpqr.data.Transitions` of the logs (items labelled 0..K-1, the table attached)."""
    import genpqr

    last = np.r_[episode[1:] != episode[:-1], True]
    return genpqr.from_arrays(s, a, s2, episode_ids=episode, timesteps=t, terminated=np.zeros(s.size, bool),
                              truncated=last, action_features=genpqr.ActionTable(np.arange(x.shape[0]), x))


def errors(reward, truth, s, a) -> dict:
    """Reward MSE at the logged pairs and over every cell."""
    return {"mse_logged": float(np.mean((reward[s, a] - truth[s, a]) ** 2)),
            "mse_cells": float(np.mean((reward - truth) ** 2))}


def _timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def run_library(data, truth, s, a, S, cross_fit, policy_model=None, seed=0, transition="auto"):
    from genpqr import GenPQR, normalization as N
    from genpqr.stage1 import ConditionalLogit

    model = ConditionalLogit(state_basis="onehot", n_states=S) if policy_model is None else policy_model
    est = GenPQR(normalization=N.mean_zero(), gamma=GAMMA, q_model="exact", n_states=S, policy_model=model,
                 cross_fit=cross_fit or None, random_state=seed, progress=False, transition_model=transition)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est, wall, cpu = _timed(lambda: est.fit(data))
    reward = est.reward_table().to_numpy()
    chosen = est.transition_model_
    name = "counts" if chosen is None else "true kernel" if not isinstance(transition, str) else type(chosen).__name__
    return {"wall_s": wall, "cpu_s": cpu, **errors(reward, truth, s, a), "note": f"transition: {name}"}


def run_first_stage(data, S):
    from genpqr.stage1 import ConditionalLogit

    model = ConditionalLogit(np.asarray(data.action_table.features), state_basis="onehot", n_states=S, progress=False)
    model, wall, cpu = _timed(lambda: model.fit(data.states, data.actions))
    return {"wall_s": wall, "cpu_s": cpu, "note": f"{model.n_iter_} L-BFGS iterations on {model.n_fit_units_} "
                                                  f"distinct states"}


def run_two_tower(data, truth, s, a, S, cross_fit, seed=0, transition="auto"):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    from genpqr.models import TwoTowerClassifier

    model = make_pipeline(OneHotEncoder(categories=[np.arange(S, dtype=np.float64)], sparse_output=False),
                          TwoTowerClassifier(np.asarray(data.action_table.features), random_state=seed))
    return run_library(data, truth, s, a, S, cross_fit, policy_model=model, seed=seed, transition=transition)


def run_softmax_pass(n_rows=20_000, n_items=10_000, dim=4, seed=0):
    """The floor of a full softmax over many items with continuous states: one exact log-partition
    ``log sum_a exp(F_i' H_a)`` over ``n_rows x n_items`` scores (``genpqr.stage1._bilinear.bilinear_log_partition``,
    one thread), scaled to 1e6 rows x 1e4 items (1e10 scores: one pass of an exact fit or of the
    many-actions stage 2)."""
    from genpqr.stage1._bilinear import bilinear_log_partition

    rng = np.random.default_rng(seed)
    F, H = rng.normal(size=(n_rows, dim)) * 0.7, rng.normal(size=(n_items, dim))
    _, wall, cpu = _timed(lambda: bilinear_log_partition(F, H))
    scale = 1e10 / (n_rows * n_items)
    return {"wall_s": wall, "cpu_s": cpu,
            "note": f"{n_rows:,} x {n_items:,} scores; {cpu * scale:.0f} CPU s per 1e10 scores (1e6 rows x 1e4 items)"}


def write_csv(folder: Path, x, episode, t, s, a):
    import pandas as pd

    pd.DataFrame({"user": episode, "t": t, "state": s, "item": a}).to_csv(folder / "logs.csv", index=False)
    items = pd.DataFrame(x, columns=[f"f{j}" for j in range(x.shape[1])])
    items.insert(0, "item", np.arange(x.shape[0]))
    items.to_csv(folder / "items.csv", index=False)


def run_cli(folder: Path, truth, s, a, cross_fit, extra=()):
    """``genpqr fit`` in a child process: wall seconds, peak RSS (MB), reward errors from rewards.csv."""
    import pandas as pd

    out = folder / f"fit{cross_fit}"
    cmd = [sys.executable, "-m", "genpqr", "fit", str(folder / "logs.csv"), "--episode", "user", "--time", "t",
           "--state", "state", "--action", "item", "--action-features", str(folder / "items.csv"),
           "--normalization", "mean-zero", "--gamma", str(GAMMA), "--cross-fit", str(cross_fit), "--quiet",
           "--out", str(out), *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=os.environ.copy())
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    log = proc.stdout.read().decode()
    if status != 0:
        raise RuntimeError(f"genpqr fit failed:\n{log}")
    table = pd.read_csv(out / "rewards.csv")
    reward = _reward_from_table(table, truth.shape)
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024,
            **errors(reward, truth, s, a), "note": " ".join(cmd[3:]).replace(str(folder) + "/", "")}


def _reward_from_table(table, shape):
    """The (S, K) reward of ``rewards.csv`` (one row per state; a column per item label)."""
    S, K = shape
    by_label = {str(c)[len("reward_"):]: c for c in table.columns
                if str(c).startswith("reward_") and not str(c).endswith(("_se", "_lo", "_hi"))}
    if "state" in table.columns and len(table) == S and all(str(k) in by_label for k in range(K)):
        out = np.full(shape, np.nan)
        rows = table["state"].to_numpy(dtype=np.int64)
        for k in range(K):
            out[rows, k] = table[by_label[str(k)]].to_numpy(dtype=np.float64)
        return out
    long = table  # long format: state, action, reward
    out = np.full(shape, np.nan)
    out[long["state"].to_numpy(dtype=np.int64), long[long.columns[1]].to_numpy(dtype=np.int64)] = \
        long["reward"].to_numpy(dtype=np.float64)
    return out


def many_items_cases(cases=("first-stage", "library", "cli"), *, items=1000, features=6, states=50, choices=200_000,
                     cross_fit=5, seed=0, transition="auto", keep=None, echo=print) -> list[tuple[str, dict]]:
    """Run ``cases`` (module docstring) on one simulated data set; ``[(case, figures)]`` with ``wall_s``,
    ``cpu_s``, ``rss_mb``, ``note`` and, where a reward is fitted, ``mse_logged`` and ``mse_cells``. For
    ``make bench-front-door``: the ``cli`` row is the end-to-end time and ``first-stage`` its floor."""
    case = many_items_mdp(items, features, states, seed)
    x, truth = case["x"], case["truth"]
    episode, t, s, act, s2 = simulate(case, choices, seed=seed)
    data = transitions(x, episode, t, s, act, s2)
    counts = np.bincount(act, minlength=items)
    echo(f"{items} items x {features} features, {states} states, {data.n:,} choices ({int((counts == 0).sum())} "
         f"items never taken; {data.n / (states * items):.1f} choices per (state, item) cell)")
    kernel = case["kernel"] if transition == "true" else transition
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for name in cases:
            if name == "first-stage":
                r = run_first_stage(data, states)
            elif name == "library":
                r = run_library(data, truth, s, act, states, cross_fit, seed=seed, transition=kernel)
            elif name == "two-tower":
                r = run_two_tower(data, truth, s, act, states, cross_fit, seed=seed, transition=kernel)
            elif name == "softmax-pass":
                r = run_softmax_pass()
            elif name == "cli":
                if transition == "true":
                    raise ValueError("--transition true is for the library cases (genpqr fit reads a kernel file)")
                if not (folder / "logs.csv").exists():
                    write_csv(folder, x, episode, t, s, act)
                r = run_cli(folder, truth, s, act, cross_fit, () if transition == "auto" else ("--transition",
                                                                                              transition))
            else:
                raise ValueError(f"unknown case {name!r}")
            r.setdefault("rss_mb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
            rows.append((name, r))
            echo(f"{name}: {r}")
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="first-stage,library,cli")
    p.add_argument("--items", type=int, default=1000)
    p.add_argument("--features", type=int, default=6)
    p.add_argument("--states", type=int, default=50)
    p.add_argument("--choices", type=int, default=200_000)
    p.add_argument("--cross-fit", type=int, default=5, help="episode folds (0: none), as genpqr fit --cross-fit")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--transition", default="auto",
                   help="GenPQR transition_model / genpqr fit --transition; 'true': the true kernel (the library "
                        "cases: the reward error is then the first stage's alone)")
    p.add_argument("--keep", help="a folder for the CSV files and the fit folders (default: a temporary one)")
    a = p.parse_args(argv)
    print(f"machine: {platform.machine()} {os.cpu_count()} cores; Python {platform.python_version()}; "
          f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    try:
        rows = many_items_cases([c for c in a.cases.split(",") if c], items=a.items, features=a.features,
                                states=a.states, choices=a.choices, cross_fit=a.cross_fit, seed=a.seed,
                                transition=a.transition, keep=a.keep, echo=lambda text: print(text, flush=True))
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    floor = dict(rows).get("first-stage", {}).get("wall_s")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print("| case | wall (s) | CPU (s) | x floor | peak RSS (MB) | MSE logged | MSE cells | note |")
    print("|---|---|---|---|---|---|---|---|")
    for case, r in rows:
        ratio = f"{r['wall_s'] / floor:.1f}" if floor else ""
        print(f"| {case} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {ratio} | {r['rss_mb']:.0f} | "
              f"{r.get('mse_logged', float('nan')):.2e} | {r.get('mse_cells', float('nan')):.2e} | {r['note']} |")


if __name__ == "__main__":
    main()

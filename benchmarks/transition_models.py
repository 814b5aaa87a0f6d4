"""Transition models on a clustered MDP with a known reward: which kernel recovers the reward.

The MDP: 700 states in 20 clusters, 25 actions (a 5 x 5 grid of two treatment levels). The
kernel is low-rank plus treatment effects: ``P(s'|s,a) = sum_k phi_k(s,a) psi_k(s')`` with 8
next-state profiles ``psi_k`` (each spread over two clusters, with its own termination
probability) and weights ``phi(s,a) = softmax(B[cluster(s)] + b_s + level_1(a) F + level_2(a) G
+ level_1(a) H[cluster(s)])``. The reward is known; the logged policy is its soft-optimal policy
(temperature 1); 40,000 rows in episodes of at most 20 steps (terminations included).

For counts, each transition model of :mod:`genpqr.stage2`, the one ``select_transition_model``
chooses, and the true kernel, the table gives: the held-out next-state log-likelihood per move
(episode folds), the reward error of ``GenPQR`` against the truth (both in the anchor
normalization ``r(s, 0) = 0``; root mean square over the logged (s, a) rows), and the
visit-weighted total-variation distance between the logged policy and the soft-optimal policy of
the recovered reward re-solved under the true kernel.

    python benchmarks/transition_models.py [--rows 40000] [--seed 0] [--classifier]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np
import scipy.sparse as sp

from genpqr import GenPQR, normalization as N, stage2
from genpqr.stage2._transition_models import TransitionMoves
from genpqr.stage2._transition_selection import default_candidates
from genpqr.envs._tabular import simulate_tabular
from genpqr.stage1 import FrequencyClassifier


def clustered_mdp(n_states=700, n_clusters=20, n_levels=5, rank=8, gamma=0.99, scale=6.0,
                  random_state=0):
    """``(TabularMDP, cluster per state)``: the kernel and reward described in the module docstring."""
    rng = np.random.default_rng(random_state)
    S, K = n_states, n_levels * n_levels
    cluster = np.sort(rng.integers(0, n_clusters, S))
    level1, level2 = np.divmod(np.arange(K), n_levels)
    members = [np.flatnonzero(cluster == c) for c in range(n_clusters)]
    psi = np.zeros((rank, S + 1))
    health = np.linspace(-1.0, 1.0, rank)  # profile k leads to healthier clusters as k grows
    cluster_health = np.zeros(n_clusters)
    order = np.argsort(rng.random(n_clusters))
    for k in range(rank):
        for c in order[2 * k % n_clusters: 2 * k % n_clusters + 2]:
            psi[k, members[c]] = rng.dirichlet(np.full(members[c].size, 0.5))
            cluster_health[c] = health[k]
        psi[k, :S] /= psi[k, :S].sum()
        psi[k] *= 1.0 - (0.02 + 0.10 * rng.random())
        psi[k, S] = 1.0 - psi[k, :S].sum()
    B = rng.normal(0.0, 1.0, (n_clusters, rank))
    F, G = np.linspace(-0.8, 0.8, rank), rng.normal(0.0, 0.5, rank)
    H = rng.normal(0.0, 0.3, (n_clusters, rank))
    logits = (B[cluster][:, None, :] + rng.normal(0.0, 0.2, (S, 1, rank)) + level1[None, :, None] * F
              + level2[None, :, None] * G + level1[None, :, None] * H[cluster][:, None, :])
    phi = np.exp(logits - logits.max(axis=2, keepdims=True))
    phi /= phi.sum(axis=2, keepdims=True)
    P = np.einsum("sak,kt->sat", phi, psi[:, :S])
    state_value = cluster_health[cluster] + rng.normal(0.0, 0.2, S)
    cost = 0.15 * level1 + 0.1 * level2 + 0.05 * level1 * level2 / n_levels
    reward = scale * (state_value[:, None] - cost[None, :] * (1.0 - 0.5 * state_value[:, None])
                      + rng.normal(0, 0.1, (S, K)))
    return stage2.TabularMDP.create(P, gamma, reward), cluster


def visit_weighted_tv(policy, behaviour, visits):
    """``sum_s w(s) * 0.5 * sum_a |policy - behaviour|`` with ``w`` the state's share of rows."""
    w = visits / visits.sum()
    return float(np.sum(w * 0.5 * np.abs(policy - behaviour).sum(axis=1)))


def evaluate(name, kernel, data, mdp, truth, behaviour, seed):
    """GenPQR with ``kernel`` and cell frequencies as the first stage (what ``genpqr fit`` uses for
    a state column of category codes): (reward RMSE over the logged rows, policy distance, seconds)."""
    S, K = mdp.n_states, mdp.n_actions
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = GenPQR(N.anchor_action(0), gamma=mdp.gamma, q_model="exact", n_states=S, transition_model=kernel,
                       policy_model=FrequencyClassifier(n_states=S), random_state=seed, progress=False).fit(data)
    seconds = time.perf_counter() - t0
    r_hat = model.stage2_.recovery.reward
    s = data.states[:, 0].astype(int)
    rmse = float(np.sqrt(np.mean((r_hat[s, data.actions] - truth[s, data.actions]) ** 2)))
    resolved = stage2.soft_optimal_policy(r_hat, mdp.kernel, mdp.gamma)
    visits = np.bincount(s, minlength=S).astype(float)
    return rmse, visit_weighted_tv(resolved, behaviour, visits), seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=40_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--classifier", action="store_true", help="also a multinomial logistic next-state classifier "
                                                              "on the cluster (one-hot) and the action (100 L-BFGS "
                                                              "steps; slow)")
    args = ap.parse_args()
    t_start = time.perf_counter()
    mdp, cluster = clustered_mdp(random_state=args.seed)
    S, K = mdp.n_states, mdp.n_actions
    behaviour = stage2.soft_optimal_policy(mdp.reward, mdp.kernel, mdp.gamma)
    data = simulate_tabular(mdp, behaviour, n_episodes=args.rows // 8, horizon=20, random_state=args.seed)
    data = data[: np.searchsorted(data.episode_ids, data.episode_ids[min(args.rows, data.n) - 1], side="right")]
    truth = stage2.normalized_reward(mdp.reward, mdp.kernel, mdp.gamma, N.anchor_action(0))
    moves = TransitionMoves.from_transitions(data, S)
    cells = np.bincount(moves.rows, minlength=S * K)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores (shared), python {platform.python_version()}")
    print(f"MDP: S={S} K={K} gamma={mdp.gamma}; data: {data.n} rows, {data.n_episodes} episodes, "
          f"{int(data.terminated.sum())} terminated; {np.count_nonzero(cells)} cells observed, median "
          f"{np.median(cells[cells > 0]):.0f} moves per observed cell")
    candidates = default_candidates(args.seed)
    if args.classifier:
        from sklearn.linear_model import LogisticRegression

        from sklearn.exceptions import ConvergenceWarning

        warnings.filterwarnings("ignore", category=ConvergenceWarning)  # 100 L-BFGS steps: a budget, stated
        onehot = np.eye(cluster.max() + 1)[cluster]
        candidates["classifier"] = stage2.ClassifierKernel(LogisticRegression(C=10.0, max_iter=100), onehot)
    t0 = time.perf_counter()
    selection = stage2.select_transition_model(data, candidates, random_state=args.seed, n_states=S)
    t_select = time.perf_counter() - t0
    print(selection.summary())
    print(f"(selection: {t_select:.0f} s)\n")
    held_out = {row["name"]: row["log_likelihood"] for row in selection.scores}
    true_ll = float(np.mean(np.log(np.where(moves.outcomes < S, mdp.kernel.dense()[moves.states, moves.actions,
                                                                                   np.minimum(moves.outcomes, S - 1)],
                                            1.0 - mdp.kernel.dense()[moves.states, moves.actions].sum(axis=1)))))
    print("| transition model | held-out log-likelihood per move | reward RMSE | policy TV under the true kernel "
          "| GenPQR fit (s) |")
    print("|---|---|---|---|---|")
    rows = [(name, None) for name in candidates] + [("true kernel", mdp.kernel.dense())]
    for name, kernel in rows:
        if kernel is None:
            kernel = selection.models[name].kernel()
        rmse, tv, seconds = evaluate(name, kernel, data, mdp, truth, behaviour, args.seed)
        ll = held_out.get(name, true_ll)
        label = f"{name} (chosen)" if name == selection.chosen else name
        print(f"| {label} | {ll:.4f}{'' if name in held_out else ' (in-sample, known)'} | {rmse:.3f} | {tv:.3f} "
              f"| {seconds:.1f} |")
    s = data.states[:, 0].astype(int)
    frequencies = np.bincount(s * K + data.actions, minlength=S * K).reshape(S, K)
    frequencies = frequencies / np.maximum(frequencies.sum(axis=1, keepdims=True), 1)
    floor = visit_weighted_tv(frequencies, behaviour, np.bincount(s, minlength=S).astype(float))
    print(f"\nsampling floor: the logged policy's empirical frequencies are {floor:.3f} from it (policy TV)")
    print(f"total time {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()

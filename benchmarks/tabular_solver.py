"""Exact tabular recovery at scale: which linear solver, and how fast.

Sparse random MDP, S = 100,000 states, K = 10 actions, 10 next states per pair,
gamma = 0.95. Recovers the reward from the exact soft-optimal log-policy under the
anchor-action and the mean-zero normalization with each solver, and prints a table:
wall time of ``recover_reward`` (building P_mu, solving, reading off r and v), the
sup-norm residual of the Q-Bellman equation, and iterations.

    python benchmarks/tabular_solver.py [--states 100000] [--solvers gmres,bicgstab,iteration,direct]
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from genpqr import normalization as N, stage2
from genpqr.envs import random_mdp


def q_residual(rec, kernel, gamma):
    """max |Q - (u - g + gamma P mu Q)|."""
    target = rec.log_policy - rec.g[:, None] + gamma * kernel.expect(rec.mu_q)
    return float(np.max(np.abs(rec.q - target)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--states", type=int, default=100_000)
    ap.add_argument("--actions", type=int, default=10)
    ap.add_argument("--next", type=int, default=10)
    ap.add_argument("--gamma", type=float, default=0.95)
    ap.add_argument("--solvers", default="auto,gmres,bicgstab,iteration,direct")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    t0 = time.perf_counter()
    mdp = random_mdp(args.states, args.actions, n_next=args.next, gamma=args.gamma, random_state=0)
    t_build = time.perf_counter() - t0
    # a log-policy with the right structure without paying for a soft-optimal solve:
    # the soft-optimal policy of some reward is any softmax; take softmax(reward).
    u = mdp.reward - np.log(np.exp(mdp.reward).sum(axis=1, keepdims=True))
    print(f"machine: {platform.machine()} {platform.processor() or ''}, python {platform.python_version()}")
    print(f"MDP: S={args.states} K={args.actions} next={args.next} gamma={args.gamma} "
          f"nnz(P)={mdp.kernel.matrix.nnz} (built in {t_build:.1f}s)")
    print()
    print(f"| normalization | solver | time (s, best of {args.repeats}) | Q-Bellman residual | iterations |")
    print("|---|---|---|---|---|")
    for norm_name, norm in (("anchor action 0", N.anchor_action(0)), ("mean-zero", N.mean_zero())):
        for solver in args.solvers.split(","):
            if solver == "direct" and args.states > 20_000:
                print(f"| {norm_name} | direct (SuperLU) | skipped: fill-in on a random sparse graph (see docs) | | |")
                continue
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                rec = stage2.recover_reward(u, mdp.kernel, args.gamma, norm, solver=solver, tol=1e-10)
                times.append(time.perf_counter() - t0)
            res = q_residual(rec, mdp.kernel, args.gamma)
            print(f"| {norm_name} | {rec.solve.solver if solver != 'auto' else 'auto -> ' + rec.solve.solver} "
                  f"| {min(times):.3f} | {res:.1e} | {rec.solve.iterations} |")


if __name__ == "__main__":
    main()

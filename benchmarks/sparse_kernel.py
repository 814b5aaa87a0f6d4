"""GenPQR's exact tabular fit with a sparse transition kernel: time and peak memory.

Random MDP with ``--next`` next states per (state, action) pair, gamma = 0.9, data simulated
under a random (Dirichlet) policy. For each problem size, ``GenPQR(q_model="exact")`` is fitted
with cell-frequency stage 1 and the kernel either estimated from counts (sparse, the default)
or given: sparse (S*K, S), dense (S, K, S) where that fits, or a low-rank model
``P(s'|s,a) = sum_k phi_k(s,a) psi_k(s')`` known only through ``expect``/``push`` (every next
state reachable: no sparse form; ``genpqr.stage2._kernels.KernelOperator``). Prints a table: the kernel's
storage, wall time of ``fit``, the peak of traced allocations during ``fit`` (tracemalloc),
the process's peak resident memory, the Q-Bellman residual ``max |Q - (u - g + gamma P mu Q)|``
and, where a dense fit ran, the largest reward difference between the sparse and dense fits.

    python benchmarks/sparse_kernel.py [--sizes 500x20,10000x100] [--episodes 2000] [--horizon 20]
"""

from __future__ import annotations

import argparse
import platform
import resource
import time
import tracemalloc
import warnings

import numpy as np

from genpqr import GenPQR, normalization as N
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.stage1 import FrequencyClassifier

GAMMA = 0.9
DENSE_MAX_BYTES = 500 * 1024 ** 2  # dense fits only where the (S, K, S) array is below 500 MiB


class LowRankKernel:
    """``P(s'|s,a) = sum_k phi_k(s,a) psi_k(s')`` (rows of ``phi`` and of ``psi`` on the simplex): a
    kernel with every next state reachable, given to GenPQR only through ``expect`` and ``push``."""

    def __init__(self, n_states, n_actions, rank, seed):
        rng = np.random.default_rng(seed)
        self.n_states, self.n_actions = n_states, n_actions
        self.phi = rng.dirichlet(np.ones(rank), size=n_states * n_actions)  # (S*K, r)
        self.psi = rng.dirichlet(np.full(n_states, 0.1), size=rank)  # (r, S)

    def expect(self, values):
        values = np.asarray(values)
        out = self.phi @ (self.psi @ values.reshape(self.n_states, -1))
        return out.reshape((self.n_states, self.n_actions) + values.shape[1:])

    def push(self, weights):
        weights = np.asarray(weights)
        out = self.psi.T @ (self.phi.T @ weights.reshape(self.n_states * self.n_actions, -1))
        return out.reshape((self.n_states,) + weights.shape[2:])


def fit(data, S, transition_model):
    """``(model, seconds, peak traced bytes)`` of one exact fit."""
    tracemalloc.start()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # weak-support warnings of random data; the figures are about cost
        model = GenPQR(N.anchor_action(0), gamma=GAMMA, q_model="exact", n_states=S, transition_model=transition_model,
                       policy_model=FrequencyClassifier(n_states=S)).fit(data)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return model, seconds, peak


def q_residual(model):
    rec, kernel = model.stage2_.recovery, model.stage2_.kernel
    target = rec.log_policy - rec.g[:, None] + GAMMA * kernel.expect(rec.mu_q)
    return float(np.max(np.abs(rec.q - target)))


def rows_for(S, K, args):
    mdp = random_mdp(S, K, n_next=args.next, gamma=GAMMA, random_state=args.seed)
    policy = np.random.default_rng(args.seed).dirichlet(np.ones(K), size=S)
    data = simulate_tabular(mdp, policy, args.episodes, args.horizon, random_state=args.seed)
    sparse = mdp.kernel.matrix
    dense_bytes = 8 * S * K * S
    kernels = {"counts (sparse)": None, "given, sparse": sparse}
    if dense_bytes <= DENSE_MAX_BYTES:
        kernels["given, dense"] = sparse.toarray().reshape(S, K, S)
    low_rank = LowRankKernel(S, K, args.rank, args.seed)
    kernels[f"rank-{args.rank} model (products only)"] = low_rank
    fits = {}
    for name, P in kernels.items():
        model, seconds, peak = fit(data, S, P)
        fits[name] = model
        if name == "given, dense":
            store = f"{dense_bytes / 1024 ** 2:.0f} MiB dense"
        elif P is low_rank:
            store = f"factors, {(low_rank.phi.nbytes + low_rank.psi.nbytes) / 1024 ** 2:.1f} MiB"
        else:
            store = (f"{model.stage2_.kernel.matrix.nnz:,} nnz, "
                     f"{_csr_bytes(model.stage2_.kernel.matrix) / 1024 ** 2:.1f} MiB")
        diff = ""
        if name == "given, dense":
            diff = f"{np.max(np.abs(model.stage2_.recovery.reward - fits['given, sparse'].stage2_.recovery.reward)):.1e}"
        yield (f"| {S:,} x {K} | {data.n:,} | {name} | {store} | {dense_bytes / 1024 ** 3:.3g} GiB | {seconds:.2f} | "
               f"{peak / 1024 ** 2:.0f} | {q_residual(model):.1e} | {diff} |")
        del model


def _csr_bytes(m):
    return m.data.nbytes + m.indices.nbytes + m.indptr.nbytes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="500x20,10000x100", help="comma-separated SxK problem sizes")
    ap.add_argument("--next", type=int, default=3, help="next states per (state, action) pair")
    ap.add_argument("--rank", type=int, default=10, help="rank of the product-only (low-rank) kernel")
    ap.add_argument("--episodes", type=int, default=2000)
    ap.add_argument("--horizon", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(f"machine: {platform.machine()}, python {platform.python_version()}, gamma={GAMMA}, "
          f"{args.next} next states per pair")
    print()
    print("| S x K | rows | kernel | storage | dense would need | fit (s) | peak traced (MiB) | Q-Bellman residual "
          "| max reward diff sparse vs dense |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
        S, K = (int(x) for x in size.lower().split("x"))
        for row in rows_for(S, K, args):
            print(row, flush=True)
    print()
    print(f"process peak resident memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()

"""Out-of-core fits from Parquet at scale (docs/benchmarks.md, "Out-of-core fits"): wall time and peak memory.

(a) closed-form path: ``--continuous-rows`` transitions (default 1e7) of an 8-dimensional
    continuous state and 10 actions: episodes of 100 steps, ``s' = 0.9 s + B[a] + 0.3 eps``,
    a logit behaviour policy ``softmax(s W + b)``; fitted by ``GenPQR(q_model=LSTDQ())`` with
    the anchor normalization (action 0) through :func:`genpqr.scale.fit_parquet`.
    Reward accuracy: no closed-form truth exists in continuous states, so the table shows
    the stage-1 log loss beside the true policy's (the entropy floor it can reach).
(b) tabular path: ``--tabular-rows`` rows (default 1e7) of a panel on 1e4 states and 4
    actions (a sparse random MDP, 5 successors per pair, gamma 0.9), episodes of 1,000 steps
    of its soft-optimal policy; fitted by ``GenPQR(q_model="exact")`` (frequency first stage).
    Reward accuracy: RMSE against the true reward in the anchor normalization
    (:func:`genpqr.stage2.normalized_reward`) over the visited states.

The data is simulated block by block (vectorized over episodes) and written as one Parquet
file per block, so the simulation never holds the dataset; each fit runs in a fresh process
whose peak resident memory (``resource.getrusage(...).ru_maxrss``) is reported. Data is
written under ``--workdir`` (default a temporary folder) and deleted afterwards.

``--dask-workers 1,2`` also fits each case with :func:`genpqr.scale.fit_dask` on a
``distributed.LocalCluster`` of that many worker processes (one thread each), in a fresh
process per count: the table gives the fit's wall time (cluster start apart), the client's
and the largest worker's peak memory, and the largest difference of the reward from the
streamed fit's on 200 fixed states (closed form) or over the reward table (tabular).

    python benchmarks/large_scale.py [--continuous-rows 1e7] [--tabular-rows 1e7] [--chunk-rows 250000]
                                     [--dask-workers 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

D, K_CONT, T_CONT = 8, 10, 100
S_TAB, K_TAB, T_TAB, GAMMA = 10_000, 4, 1_000, 0.9


# ============================================================================ simulation
def continuous_parameters(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(D, K_CONT)) * 0.6, rng.normal(size=K_CONT) * 0.3, rng.normal(size=(K_CONT, D)) * 0.3


def simulate_continuous(folder: Path, n_rows: int, block_episodes: int = 10_000, seed: int = 0):
    """Parquet files of episodes of T_CONT steps, sorted by episode; returns the true policy's
    mean log loss (the entropy of the behaviour)."""
    import pandas as pd

    W, b, B = continuous_parameters(seed)
    rng = np.random.default_rng(seed + 1)
    n_episodes = max(1, int(n_rows) // T_CONT)
    entropy, count = 0.0, 0
    for first in range(0, n_episodes, block_episodes):
        E = min(block_episodes, n_episodes - first)
        x = np.empty((T_CONT, E, D))
        a = np.empty((T_CONT, E), dtype=np.int64)
        x[0] = rng.normal(size=(E, D))
        for t in range(T_CONT):
            logits = x[t] @ W + b
            logits -= logits.max(axis=1, keepdims=True)
            logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
            a[t] = np.argmax(logp + rng.gumbel(size=logp.shape), axis=1)
            entropy -= logp[np.arange(E), a[t]].sum()
            count += E
            if t + 1 < T_CONT:
                x[t + 1] = 0.9 * x[t] + B[a[t]] + 0.3 * rng.normal(size=(E, D))
        frame = pd.DataFrame(x.transpose(1, 0, 2).reshape(-1, D), columns=[f"x{i}" for i in range(D)])
        frame.insert(0, "t", np.tile(np.arange(T_CONT, dtype=np.int32), E))
        frame.insert(0, "ep", np.repeat(np.arange(first, first + E, dtype=np.int64), T_CONT))
        frame["a"] = a.T.reshape(-1).astype(np.int8)
        frame.to_parquet(folder / f"part-{first // block_episodes:05d}.parquet", row_group_size=250_000)
    return entropy / count


def tabular_mdp(seed=0):
    from genpqr import stage2
    from genpqr.envs import random_mdp

    mdp = random_mdp(S_TAB, K_TAB, n_next=5, gamma=GAMMA, random_state=seed)
    policy = stage2.soft_optimal_policy(mdp.reward, mdp.kernel, GAMMA)
    return mdp, policy


def simulate_tabular(folder: Path, n_rows: int, block_episodes: int = 2_000, seed: int = 0):
    """Parquet files of episodes of T_TAB steps of the soft-optimal policy, sorted by episode."""
    import pandas as pd

    mdp, policy = tabular_mdp(seed)
    m = mdp.kernel.matrix.tocsr()
    m.sort_indices()
    succ = m.indices.reshape(S_TAB * K_TAB, 5)
    cum_p = np.cumsum(m.data.reshape(S_TAB * K_TAB, 5), axis=1)
    cum_pi = np.cumsum(policy, axis=1)
    rng = np.random.default_rng(seed + 1)
    n_episodes = max(1, int(n_rows) // T_TAB)
    for first in range(0, n_episodes, block_episodes):
        E = min(block_episodes, n_episodes - first)
        s = np.empty((T_TAB, E), dtype=np.int32)
        a = np.empty((T_TAB, E), dtype=np.int8)
        s[0] = rng.integers(S_TAB, size=E)
        for t in range(T_TAB):
            a[t] = np.minimum((rng.random(E)[:, None] > cum_pi[s[t]]).sum(axis=1), K_TAB - 1)
            if t + 1 < T_TAB:
                row = s[t].astype(np.int64) * K_TAB + a[t]
                j = np.minimum((rng.random(E)[:, None] > cum_p[row]).sum(axis=1), 4)
                s[t + 1] = succ[row, j]
        frame = pd.DataFrame({"ep": np.repeat(np.arange(first, first + E, dtype=np.int64), T_TAB),
                              "t": np.tile(np.arange(T_TAB, dtype=np.int32), E),
                              "s": s.T.reshape(-1), "a": a.T.reshape(-1)})
        frame.to_parquet(folder / f"part-{first // block_episodes:05d}.parquet", row_group_size=500_000)


# ============================================================================ fits (in a child process)
def _estimator(kind):
    from genpqr import GenPQR
    from genpqr import normalization as N
    from genpqr.stage2 import LSTDQ
    from genpqr.stage1 import FrequencyClassifier

    if kind == "continuous":
        return GenPQR(q_model=LSTDQ(), normalization=N.anchor_action(0), gamma=GAMMA, random_state=0)
    return GenPQR(q_model="exact", normalization=N.anchor_action(0), gamma=GAMMA, n_states=S_TAB,
                  policy_model=FrequencyClassifier(n_states=S_TAB))  # categorical states: frequencies, as measured


def _columns(kind):
    state = [f"x{i}" for i in range(D)] if kind == "continuous" else "s"
    return dict(episode="ep", time="t", state=state, action="a")


def fit_child(kind: str, folder: str, chunk_rows: int, workers: int = 0) -> dict:
    """One fit, streamed (``workers=0``) or on a local Dask cluster of ``workers`` processes."""
    import warnings

    from genpqr.scale import fit_parquet

    warnings.simplefilter("ignore")
    extra = {}
    if workers:
        from distributed import Client, LocalCluster

        from genpqr.scale import fit_dask

        t0 = time.perf_counter()
        cluster = LocalCluster(n_workers=workers, processes=True, threads_per_worker=1, dashboard_address=":0")
        client = Client(cluster)
        extra["cluster_start_s"] = time.perf_counter() - t0
        start = time.perf_counter()
        model = fit_dask(_estimator(kind), folder, client=client, chunk_rows=chunk_rows, progress=False,
                         **_columns(kind))
        seconds = time.perf_counter() - start
        rss = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        extra["worker_peak_mb"] = max(rss.values())
        client.close()
        cluster.close()
    else:
        start = time.perf_counter()
        model = fit_parquet(_estimator(kind), folder, chunk_rows=chunk_rows, progress=False, **_columns(kind))
        seconds = time.perf_counter() - start
    if kind == "continuous":
        probe = model.reward(np.random.default_rng(5).normal(size=(200, D)))
        accuracy = {"policy_log_loss": model.diagnostics_.policy_log_loss}
    else:
        from genpqr import normalization as N
        from genpqr import stage2

        mdp, _ = tabular_mdp()
        truth = stage2.normalized_reward(mdp.reward, mdp.kernel, GAMMA, N.anchor_action(0))
        probe = model.reward_table().to_numpy()
        visited = model.visited_states_
        accuracy = {"reward_rmse": float(np.sqrt(np.mean((probe[visited] - truth[visited]) ** 2))),
                    "reward_scale": float(np.std(truth[visited]))}
    return dict(rows=model.diagnostics_.n_transitions, seconds=seconds, probe=np.asarray(probe).ravel().tolist(),
                peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, **accuracy, **extra)


def run_fit(kind, folder, chunk_rows, workers=0) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    out = subprocess.run([sys.executable, __file__, "--child", kind, str(folder), str(chunk_rows), str(workers)],
                         env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.parquet"))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--continuous-rows", type=float, default=1e7)
    p.add_argument("--tabular-rows", type=float, default=1e7)
    p.add_argument("--chunk-rows", type=int, default=250_000)
    p.add_argument("--dask-workers", default="", help="comma-separated worker-process counts, e.g. 1,2")
    p.add_argument("--workdir", default=None)
    p.add_argument("--child", nargs=4, metavar=("KIND", "FOLDER", "CHUNK", "WORKERS"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(fit_child(args.child[0], args.child[1], int(args.child[2]), int(args.child[3]))))
        return
    workers = [int(w) for w in args.dask_workers.split(",") if w.strip()]
    root = Path(tempfile.mkdtemp(prefix="genpqr-large-", dir=args.workdir))
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}"
          f"; load {_load()}; chunk_rows {args.chunk_rows:,}")
    print(f"{'case':<34} {'rows':>12} {'simulate s':>10} {'Parquet MB':>10} {'fit s':>8} {'peak MB':>8}  accuracy")
    cases = [("continuous", args.continuous_rows, "(a) closed form, 8-d state, K=10"),
             ("tabular", args.tabular_rows, "(b) tabular, S=1e4, K=4")]
    dask_rows = []
    try:
        for kind, n_rows, label in cases:
            if n_rows <= 0:
                continue
            folder = root / kind
            folder.mkdir()
            t0 = time.perf_counter()
            extra = simulate_continuous(folder, n_rows) if kind == "continuous" else simulate_tabular(folder, n_rows)
            sim = time.perf_counter() - t0
            size = disk_bytes(folder) / 2**20
            res = run_fit(kind, folder, args.chunk_rows)
            if kind == "continuous":
                acc = f"policy log loss {res['policy_log_loss']:.4f} (true policy {extra:.4f})"
            else:
                acc = f"reward RMSE {res['reward_rmse']:.4f} (sd of true reward {res['reward_scale']:.3f})"
            print(f"{label:<34} {res['rows']:>12,} {sim:>10.1f} {size:>10.0f} {res['seconds']:>8.1f} "
                  f"{res['peak_mb']:>8.0f}  {acc}", flush=True)
            for n in workers:
                got = run_fit(kind, folder, args.chunk_rows, n)
                diff = float(np.max(np.abs(np.asarray(got["probe"]) - np.asarray(res["probe"]))))
                dask_rows.append((label, n, got, diff, _load()))
            shutil.rmtree(folder)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if dask_rows:
        print(f"\n{'fit_dask on a LocalCluster':<34} {'workers':>7} {'start s':>8} {'fit s':>8} {'client MB':>9} "
              f"{'worker MB':>9} {'max |diff|':>10}  load after")
        for label, n, got, diff, load in dask_rows:
            print(f"{label:<34} {n:>7} {got['cluster_start_s']:>8.1f} {got['seconds']:>8.1f} {got['peak_mb']:>9.0f} "
                  f"{got['worker_peak_mb']:>9.0f} {diff:>10.1e}  {load}")
    print(f"# load after: {_load()}")


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()

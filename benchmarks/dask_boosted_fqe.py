"""Boosted FQE on a Dask cluster (``genpqr.scale.fit_dask`` with a ``BoostedQModel``)
against the in-memory fit, with 1 and 2 worker processes.

Writes a continuous-state panel (2 state columns, 3 actions, episodes of 20 steps, a logit
behaviour policy) as a folder of Parquet files, fits stage 1 once (a logistic regression on
all rows, passed as ``policy_prefit``, so both fits share it), then times

* the in-memory ``GenPQR(q_model=BoostedQModel()).fit`` on the same rows (one process), and
* ``fit_dask`` on a ``distributed.LocalCluster`` of N single-threaded worker processes for
  each N of ``--workers`` (the cluster start is timed apart from the fit),

and prints the wall times, the time per Bellman iteration and the RMS difference of the
rewards from the in-memory fit's (over 2,000 of the data's states, per action; the in-memory
rewards' standard deviation over those states is printed for scale).

    OMP_NUM_THREADS=1 python benchmarks/dask_boosted_fqe.py --rows 1e6 --iterations 30 --workers 1,2
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from genpqr.stage2 import FQE


def write_panel(folder: Path, n_rows: int, n_files: int = 4, row_group_rows: int = 50_000, seed: int = 0):
    """Episodes of 20 steps: ``x' = 0.8 x + 0.3 (a - 1) + 0.5 eps``, ``P(a|x)`` logit in
    ``(0, x0, -x1)``; returns the frame."""
    rng = np.random.default_rng(seed)
    T, n_ep = 20, max(1, n_rows // 20)
    x = np.empty((n_ep, T, 2))
    a = np.empty((n_ep, T), dtype=np.int64)
    x[:, 0] = rng.normal(size=(n_ep, 2))
    for t in range(T):
        logits = np.column_stack([np.zeros(n_ep), x[:, t, 0], -x[:, t, 1]])
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        a[:, t] = (rng.random(n_ep)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
        if t + 1 < T:
            x[:, t + 1] = 0.8 * x[:, t] + 0.3 * (a[:, t, None] - 1) + 0.5 * rng.normal(size=(n_ep, 2))
    frame = pd.DataFrame({"ep": np.repeat(np.arange(n_ep), T), "t": np.tile(np.arange(T), n_ep),
                          "x0": x[:, :, 0].ravel(), "x1": x[:, :, 1].ravel(),
                          "a": np.array(["stay", "go", "wait"])[a.ravel()]})
    folder.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, n_ep, n_files + 1).astype(int) * T
    for i in range(n_files):
        frame.iloc[bounds[i]:bounds[i + 1]].to_parquet(folder / f"part-{i}.parquet", row_group_size=row_group_rows)
    return frame


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=float, default=1e6)
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--workers", default="1,2", help="comma-separated worker-process counts")
    p.add_argument("--npartitions", type=int, default=8)
    args = p.parse_args()

    from distributed import Client, LocalCluster
    from sklearn.linear_model import LogisticRegression

    from genpqr import GenPQR
    from genpqr.data import from_pandas
    from genpqr.scale import fit_dask
    from genpqr.models._boosting import BoostedQModel
    from genpqr.normalization import anchor_action

    warnings.simplefilter("ignore")  # FQE with lr 0.05 is not converged after 30 iterations, in every fit
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "panel"
        frame = write_panel(folder, int(args.rows))
        cols = dict(episode="ep", time="t", state=["x0", "x1"], action="a")
        data = from_pandas(frame, **cols)
        policy = LogisticRegression(max_iter=1000).fit(data.states, data.actions)
        est = GenPQR(q_model=FQE(BoostedQModel(), n_iterations=args.iterations, tol=None), policy_model=policy,
                     policy_prefit=True, gamma=0.9, normalization=anchor_action("stay"), clip=(1e-3, 1.0),
                     progress=False)
        X = data.states[np.random.default_rng(1).choice(data.n, 2000, replace=False)]
        print(f"{data.n:,} rows, {args.iterations} Bellman iterations, load {os.getloadavg()[0]:.2f}")
        start = time.perf_counter()
        ref = GenPQR(**est.get_params(deep=False)).fit(data)
        wall = time.perf_counter() - start
        print(f"in memory, one process        fit {wall:7.1f} s  {wall / args.iterations:6.2f} s/iteration  "
              f"load {os.getloadavg()[0]:.2f}  reward SD {np.array2string(ref.reward(X).std(axis=0), precision=4)}")
        for n in [int(w) for w in args.workers.split(",") if w.strip()]:
            start = time.perf_counter()
            with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                    Client(cluster) as client:
                started = time.perf_counter() - start
                start = time.perf_counter()
                got = fit_dask(est, folder, client=client, npartitions=args.npartitions, progress=False, **cols)
                wall = time.perf_counter() - start
            rms = np.sqrt(np.mean((got.reward(X) - ref.reward(X)) ** 2, axis=0))
            print(f"fit_dask, {n} worker process(es) start {started:5.1f} s  fit {wall:7.1f} s  "
                  f"{wall / args.iterations:6.2f} s/iteration  load {os.getloadavg()[0]:.2f}  "
                  f"reward RMS diff {np.array2string(rms, precision=4)}")


if __name__ == "__main__":
    main()

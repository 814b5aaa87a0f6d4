"""The neural stages on CPU and on CUDA, side by side.

Times, for each device, the three neural stages of the library on data of the exp2 benchmark's
size (10,000 rows by default):

* behaviour cloning: ``MLPClassifier`` (64, 64), 40 epochs at batch 256 (stage 1);
* neural FQE: ``DuelingQNetwork`` (128, 128), 16 Bellman iterations of one epoch at batch 512,
  each followed by ``predict_q`` on the next states (stage 2, as GenPQR runs it);
* a continuous-action density: ``MixtureDensityNetwork`` (3 components, (32, 32) tanh), 60
  epochs at batch 512, no early stopping.

Every stage is run once per device to warm up (CUDA context, kernels) and then timed
``--repeats`` times (the minimum is reported); CUDA work is synchronised before the clock stops.
The same seed gives the same initial weights and shuffles on both devices (all draws come from a
CPU generator), so the table also reports how far the two fits' outputs are apart.

    python benchmarks/gpu_stages.py [--rows 10000] [--repeats 3]
    python benchmarks/gpu_stages.py --rows 200000          # where a GPU pays

Without CUDA the script says so and exits with status 0 (``--cpu-only`` times the CPU column
alone, to check the script on such a machine).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np


def _data(rows: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    d, K = 5, 5
    X = rng.normal(size=(rows, d))
    logits = X @ rng.normal(size=(d, K))
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    y = (proba.cumsum(axis=1) < rng.random(rows)[:, None]).sum(axis=1).clip(max=K - 1)  # y ~ softmax(logits)
    X_next = X + 0.1 * rng.normal(size=(rows, d))
    u = -np.abs(X[:, 0]) - 0.2 * y
    A = (np.sin(X[:, :1]) + 0.3 * rng.normal(size=(rows, 1))) * np.where(rng.random((rows, 1)) < 0.5, -1.0, 1.0)
    return X, y, X_next, u, A, K


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def stage_bc(data, device: str):
    from genpqr.models._nn import MLPClassifier

    X, y, *_ = data
    clf = MLPClassifier(random_state=0, device=device).fit(X, y)
    return clf.predict_proba(X[:2000])


def stage_fqe(data, device: str):
    from genpqr.models._nn import DuelingQNetwork

    X, y, X_next, u, _, K = data
    model = DuelingQNetwork(batch_size=512, epochs_per_iteration=1, random_state=0, device=device)
    q_next = np.zeros((X.shape[0], K))
    for _ in range(16):
        model.fit_q(X, y, u + 0.9 * q_next.mean(axis=1), K)
        q_next = model.predict_q(X_next)
    return q_next[:2000]


def stage_mdn(data, device: str):
    from genpqr.models._neural_densities import MixtureDensityNetwork

    X, _, _, _, A, _ = data
    mdn = MixtureDensityNetwork(n_components=3, hidden_layer_sizes=(32, 32), max_epochs=60, batch_size=512,
                                validation_fraction=0.0, random_state=0, device=device).fit(X, A)
    return mdn.log_prob(X[:2000], A[:2000])


STAGES = {"behaviour cloning (MLPClassifier)": stage_bc, "neural FQE (DuelingQNetwork, 16 x 1)": stage_fqe,
          "density (MixtureDensityNetwork)": stage_mdn}


def time_stage(fn, data, device: str, repeats: int):
    fn(data, device)  # warm-up
    best, out = np.inf, None
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        out = fn(data, device)
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000, help="training rows (default: exp2's 10,000)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cpu-only", action="store_true", help="time the CPU column even without CUDA")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: nothing to time (pip install 'genpqr[torch]')")
        return 0
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices.append("cuda")
    elif not args.cpu_only:
        print("CUDA is not available (torch.cuda.is_available() is False): no GPU timings on this machine; "
              "skipped. Run it where a GPU is present, or pass --cpu-only to time the CPU column alone.")
        return 0
    data = _data(args.rows)
    print(f"rows: {args.rows}; torch {torch.__version__}; CPU: one torch thread (OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')})"
          + (f"; GPU: {torch.cuda.get_device_name(0)}" if "cuda" in devices else "")
          + f"; min of {args.repeats} runs after a warm-up; load average {os.getloadavg()}")
    header = "| stage | " + " | ".join(f"{d} (s)" for d in devices)
    header += " | cpu / cuda | max abs difference |" if "cuda" in devices else " |"
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for name, fn in STAGES.items():
        results = {d: time_stage(fn, data, d, args.repeats) for d in devices}
        row = f"| {name} | " + " | ".join(f"{results[d][0]:.3f}" for d in devices)
        if "cuda" in devices:
            diff = float(np.max(np.abs(results["cpu"][1] - results["cuda"][1])))
            row += f" | {results['cpu'][0] / results['cuda'][0]:.2f} | {diff:.2e} |"
        else:
            row += " |"
        print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Many actions with features: the two-tower stage 1 (genpqr.models.TwoTowerClassifier) at K = 50,
1,000 and 10,000 actions, sampled softmax with the log-Q correction against the full softmax.

Data: K items with features x_a ~ N(0, I_3), states s ~ N(0, I_2), actions drawn from the true
bilinear policy pi(a|s) ~ exp([1, s] W x_a); n training rows (seed 0) and 2,000 held-out rows
(seed 1). For each K and loss it fits the default two tower (state tower ReLU (64,) -> 16, affine
action tower -> 16, Adam lr 5e-3, batch 256) and prints the fit seconds, seconds per epoch, the
held-out log loss, the true policy's held-out log loss and their difference (the excess), and the
mean KL(true || fitted) on the held-out states. Prediction always normalises over all K actions.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/many_actions_two_tower.py
    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/many_actions_two_tower.py --actions 50,1000 --epochs 20
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from genpqr.models import TwoTowerClassifier

W = np.array([[1.0, -0.5, 0.3], [0.5, 0.0, 0.4], [0.0, 0.4, -0.3]])


def choices(n: int, K: int, seed: int):
    """Items (K, 3), states (n, 2), actions (n,) and the true log pi (n, K)."""
    rng = np.random.default_rng(seed)
    x = np.random.default_rng(99).normal(size=(K, 3))
    states = rng.normal(size=(n, 2))
    scores = np.hstack([np.ones((n, 1)), states]) @ W @ x.T
    log_pi = scores - scores.max(axis=1, keepdims=True)
    log_pi -= np.log(np.exp(log_pi).sum(axis=1, keepdims=True))
    y = (np.exp(log_pi).cumsum(axis=1) > rng.random(n)[:, None]).argmax(axis=1)
    return x, states, y, log_pi


def run(K: int, loss: str, n: int, epochs: int, negatives: int) -> dict:
    x, states, y, _ = choices(n, K, 0)
    _, test_states, test_y, test_log_pi = choices(2000, K, 1)
    model = TwoTowerClassifier(x, loss=loss, max_epochs=epochs, n_negatives=negatives, random_state=0)
    start = time.perf_counter()
    model.fit(states, y)
    seconds = time.perf_counter() - start
    log_pi = model.predict_log_proba(test_states)
    rows = np.arange(test_y.size)
    log_loss, truth = -log_pi[rows, test_y].mean(), -test_log_pi[rows, test_y].mean()
    kl = (np.exp(test_log_pi) * (test_log_pi - log_pi)).sum(axis=1).mean()
    return dict(K=K, loss=loss, taken=np.unique(y).size, fit_s=seconds, epoch_s=np.mean(model.epoch_seconds_),
                log_loss=log_loss, truth=truth, excess=log_loss - truth, kl=kl)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actions", default="50,1000,10000")
    parser.add_argument("--losses", default="sampled,full")
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--negatives", type=int, default=256)
    args = parser.parse_args()
    run(50, "sampled", 500, 1, 16)  # warm-up: torch's import and first-call costs stay out of the table
    print(f"n={args.rows} training rows, 2000 held out, {args.epochs} epochs, m={args.negatives} negatives")
    print("| K | loss | actions taken | fit (s) | per epoch (s) | held-out log loss | true policy's | excess | mean KL |")
    print("|---|---|---|---|---|---|---|---|---|")
    for K in (int(k) for k in args.actions.split(",")):
        for loss in args.losses.split(","):
            r = run(K, loss, args.rows, args.epochs, args.negatives)
            print(f"| {r['K']:,} | {r['loss']} | {r['taken']:,} | {r['fit_s']:.2f} | {r['epoch_s']:.3f} | "
                  f"{r['log_loss']:.4f} | {r['truth']:.4f} | {r['excess']:.4f} | {r['kl']:.4f} |", flush=True)


if __name__ == "__main__":
    main()

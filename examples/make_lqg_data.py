"""Regenerate examples/data/lqg.csv (and its copy shipped in the package, genpqr.datasets): logged continuous actions with a closed-form reward.

The default 1-D linear-quadratic-Gaussian problem of :func:`genpqr.envs.make_lqg`
(``s' = 0.8 s + 0.5 a + N(0, 0.3^2)``, ``r(s, a) = -(0.5 s^2 + 0.8 a^2 + 0.4 s a) + 0.3 s - 0.2 a``,
gamma 0.9). The logged behaviour is its soft-optimal (maximum-entropy) Gaussian policy; 200
episodes of 10 steps starting at ``s ~ N(0, 1)``. ``true_reward`` is the normalized reward under
``anchor:0`` (``r(s, 0) = 0``), the closed form that ``genpqr fit --normalization anchor:0``
estimates.

    python examples/make_lqg_data.py
"""

from pathlib import Path

import numpy as np
import pandas as pd

from genpqr.normalization import point_anchor
from genpqr.envs import make_lqg

N_EPISODES, HORIZON, SEED = 200, 10, 3


def simulate(n_episodes=N_EPISODES, horizon=HORIZON, seed=SEED) -> pd.DataFrame:
    """Long format: episode, time, s, a, true_reward (normalized by a0 = 0)."""
    problem = make_lqg()
    rng = np.random.default_rng(seed)
    truth = problem.normalized_reward(point_anchor(0.0))
    s = problem.sample_states(n_episodes, rng)
    parts = []
    for t in range(horizon):
        a = problem.sample_actions(s, rng)
        parts.append(pd.DataFrame({"episode": np.arange(n_episodes), "time": t, "s": s[:, 0], "a": a[:, 0],
                                   "true_reward": problem.evaluate(truth, s, a)}))
        s = problem.step(s, a, rng)
    return pd.concat(parts).sort_values(["episode", "time"], kind="stable").reset_index(drop=True)


if __name__ == "__main__":
    frame = simulate().round(5)
    for folder in (Path(__file__).parent / "data", Path(__file__).parents[1] / "src" / "genpqr" / "datasets" / "data"):
        frame.to_csv(folder / "lqg.csv", index=False)
        print(f"wrote {folder / 'lqg.csv'}")

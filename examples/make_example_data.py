"""Regenerate examples/data/choices.csv and examples/data/features.csv (and their copies shipped in
the package, genpqr.datasets).

A random sparse tabular MDP (15 states, 3 actions "a", "b", "c", gamma 0.9) whose reward is
linear in two features, with action "a" as the zero-reward anchor:

    r(s, a) = 0,   r(s, b) = bonus + level * x(s),   r(s, c) = bonus - level * x(s),
    x(s) = s / 14,  bonus = -0.3,  level = 1.2.

The logged behaviour is the reward's soft-optimal (maximum-entropy) policy; 600 episodes of
10 steps; ``outcome`` is the realised reward plus N(0, 0.5^2) noise.

    python examples/make_example_data.py
"""

import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from genpqr import stage2
from genpqr.envs import random_mdp, simulate_tabular

S, K, GAMMA, SEED = 15, 3, 0.9, 7
LABELS = np.array(["a", "b", "c"])
THETA = {"bonus": -0.3, "level": 1.2}
DEFAULT_OUT = Path(__file__).parent / "data"
PACKAGE_DATA = Path(__file__).parents[1] / "src" / "genpqr" / "datasets" / "data"


def features() -> np.ndarray:
    x = np.arange(S) / (S - 1)
    f = np.zeros((S, K, 2))
    f[:, 1:, 0] = 1.0  # bonus: leaving the anchor
    f[:, 1, 1], f[:, 2, 1] = x, -x  # level
    return f


def main(out: Path = DEFAULT_OUT) -> None:
    mdp = random_mdp(S, K, n_next=3, gamma=GAMMA, random_state=SEED)
    reward = features() @ np.array(list(THETA.values()))
    mdp = stage2.TabularMDP(mdp.kernel, GAMMA, reward)
    policy = stage2.soft_optimal_policy(reward, mdp.kernel, GAMMA)
    data = simulate_tabular(mdp, policy, n_episodes=600, horizon=10, outcome_noise=0.5, random_state=SEED)
    frame = pd.DataFrame({"episode": data.episode_ids, "time": data.timesteps.astype(int),
                          "state": data.states[:, 0].astype(int), "action": LABELS[data.actions],
                          "outcome": np.round(data.outcomes, 4)})
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "choices.csv", index=False)
    f = features()
    rows = [{"state": s, "action": LABELS[a], "bonus": f[s, a, 0], "level": round(f[s, a, 1], 6) + 0.0}
            for s in range(S) for a in range(K)]
    pd.DataFrame(rows).to_csv(out / "features.csv", index=False)
    print(f"{len(frame)} rows, {frame.episode.nunique()} episodes -> {out}")
    if out == DEFAULT_OUT:  # the copies genpqr.datasets ships
        for name in ("choices.csv", "features.csv"):
            shutil.copyfile(out / name, PACKAGE_DATA / name)
        print(f"copied to {PACKAGE_DATA}")


if __name__ == "__main__":
    main()

"""How often do `genpqr fit`'s structural intervals on the bundled example's design cover the truth?

Draws fresh data sets from the MDP and behaviour of ``make_example_data.py`` (the same 15-state
problem, 600 episodes of 10 steps, new simulation seeds), fits each with the README's command
(without the bootstrap) and reports, per parameter, the mean estimate, its bias and spread
across draws, the mean OPG standard error, and the share of draws whose estimate lies within
1.96 standard errors of the truth.

    python examples/example_coverage.py [--draws 30]
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
import make_example_data as M  # noqa: E402

from genpqr import stage2  # noqa: E402
from genpqr.envs import random_mdp, simulate_tabular  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=30)
    draws = p.parse_args().draws
    mdp = random_mdp(M.S, M.K, n_next=3, gamma=M.GAMMA, random_state=M.SEED)
    reward = M.features() @ np.array(list(M.THETA.values()))
    mdp = stage2.TabularMDP(mdp.kernel, M.GAMMA, reward)
    policy = stage2.soft_optimal_policy(reward, mdp.kernel, M.GAMMA)
    features = Path(__file__).parent / "data" / "features.csv"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        csv, out = Path(tmp) / "choices.csv", Path(tmp) / "fit"
        for draw in range(draws):
            data = simulate_tabular(mdp, policy, n_episodes=600, horizon=10, random_state=100 + draw)
            pd.DataFrame({"episode": data.episode_ids, "time": data.timesteps.astype(int),
                          "state": data.states[:, 0].astype(int), "action": M.LABELS[data.actions]}).to_csv(
                csv, index=False)
            subprocess.run([sys.executable, "-m", "genpqr", "fit", str(csv), "--episode", "episode", "--time", "time",
                            "--state", "state", "--action", "action", "--gamma", str(M.GAMMA), "--normalization",
                            "anchor:a", "--features", str(features), "--out", str(out)], capture_output=True, check=True)
            rows.append(pd.read_csv(out / "parameters.csv").set_index("parameter"))
    for name, truth in M.THETA.items():
        est = np.array([r.loc[name, "estimate"] for r in rows])
        se = np.array([r.loc[name, "std_error"] for r in rows])
        print(f"{name}: truth {truth}, mean {est.mean():.4f}, bias {est.mean() - truth:+.4f}, sd {est.std(ddof=1):.4f}, "
              f"mean SE {se.mean():.4f}, coverage of estimate +- 1.96 SE {np.mean(np.abs(est - truth) < 1.96 * se):.0%} "
              f"({draws} draws)")


if __name__ == "__main__":
    main()

"""
Out of core: fit a folder of Parquet files chunk by chunk
=========================================================

Logs too large for memory are read in chunks by :func:`genpqr.scale.fit_parquet`: on
the exact tabular path it accumulates choice and transition counts, so memory holds one chunk
plus the counts whatever the number of rows, and the answer is the in-memory fit's. Here a
log of 40,000 rows is written as a folder of four Parquet files (sorted by episode, as the
reader requires) in a temporary folder, fitted in chunks of 5,000 rows, and compared with the
in-memory fit of the same rows and with the truth.
"""

# %%
# A log on disk
# -------------
# A random tabular MDP (50 states, 3 actions), 2,000 episodes of 20 steps of its soft-optimal
# behaviour, in long format: one row per episode and time step.
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from genpqr import GenPQR, from_pandas, normalization as N, stage2
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.evaluation import plot_reward_recovery
from genpqr.stage1 import FrequencyClassifier
from genpqr.scale import fit_parquet

gamma, n_states = 0.9, 50
mdp = random_mdp(n_states, 3, n_next=5, gamma=gamma, reward_scale=0.5, random_state=0)
behaviour = stage2.soft_optimal_policy(mdp.reward, mdp.kernel, gamma)
logs = simulate_tabular(mdp, behaviour, n_episodes=2000, horizon=20, random_state=1).to_pandas()
frame = logs[["episode", "time", "s0", "action"]].rename(columns={"s0": "state"})
frame = frame.astype({"time": int, "state": int})

# a temporary folder, removed when the example ends
workdir = tempfile.TemporaryDirectory(prefix="genpqr-out-of-core-")
folder = Path(workdir.name)
for part, episodes in enumerate(np.array_split(np.arange(2000), 4)):
    part_rows = frame[frame.episode.isin(episodes)]
    part_rows.to_parquet(folder / f"part-{part}.parquet", index=False)
print(frame.head())
print(sorted(p.name for p in folder.iterdir()), f"{len(frame)} rows")

# %%
# Fit in chunks
# -------------
# ``fit_parquet`` takes an unfitted :class:`~genpqr.GenPQR` whose parameters configure the fit
# and returns a fitted one. On the tabular path stage 1 is the cell frequencies read off the
# counts.
normalization = N.anchor_action(0)
estimator = GenPQR(normalization, gamma=gamma, q_model="exact", n_states=n_states,
                   random_state=0)
streamed = fit_parquet(estimator, folder, episode="episode", time="time", state="state",
                       action="action", chunk_rows=5000, progress=False)
print(streamed.summary())

# %%
# The same rows in memory
# -----------------------
# :func:`genpqr.from_pandas` on the whole table and the in-memory fit with the same first stage
# (cell frequencies) give the same reward, up to rounding.
data = from_pandas(frame, episode="episode", time="time", state="state", action="action")
in_memory = GenPQR(normalization, gamma=gamma, q_model="exact", n_states=n_states,
                   policy_model=FrequencyClassifier(n_states=n_states), random_state=0)
in_memory.fit(data)
streamed_table = streamed.reward_table().to_numpy()
memory_table = in_memory.reward_table().to_numpy()
print(f"max |streamed - in memory| = {np.max(np.abs(streamed_table - memory_table)):.1e}")

truth = stage2.normalized_reward(mdp.reward, mdp.kernel, gamma, normalization)
print(f"reward MSE against the truth: {np.mean((streamed_table - truth) ** 2):.4f}")

fig, ax = plt.subplots(figsize=(6, 5), layout="constrained")
plot_reward_recovery(truth, streamed_table, ax=ax, label="(state, action) pairs, streamed fit")
ax.set_title("streamed from Parquet, chunks of 5,000 rows")

"""
Recover a reward from logged behaviour
======================================

The demo of ``make demo``, in a few lines: a random tabular MDP with a known reward, logs
simulated from its maximum-entropy (soft-optimal) behaviour, and GenPQR's exact tabular path
recovering the reward from the logs alone. Behaviour identifies the reward only up to
potential shaping; the anchor normalization ``r(s, 0) = 0`` picks one member of that class,
so the recovered reward is compared with the true reward *under the same normalization*
(:func:`genpqr.stage2.normalized_reward`).
"""

# %%
# A known problem and its logs
# ----------------------------
# 30 states, 3 actions, each (state, action) pair reaches 4 random next states. The behaviour
# is the soft-optimal policy of the true reward; 1,000 episodes of 20 steps are logged.
import matplotlib.pyplot as plt
import numpy as np

from genpqr import GenPQR, normalization as N, stage2
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.evaluation import plot_reward_recovery, plot_reward_table

gamma = 0.9
mdp = random_mdp(30, 3, n_next=4, gamma=gamma, reward_scale=0.5, random_state=3)
behaviour = stage2.soft_optimal_policy(mdp.reward, mdp.kernel, gamma)
data = simulate_tabular(mdp, behaviour, n_episodes=1000, horizon=20, random_state=1)
print(f"{data.n} logged transitions in {data.n_episodes} episodes")

# %%
# Recover the reward
# ------------------
# ``q_model="exact"``: states are table indices, the kernel is estimated from counts and the
# linear Bellman equation ``Q = u - g + gamma P mu Q`` is solved exactly, with ``u = log pi_hat``
# from the first stage (cell frequencies here: the cells are well filled).
normalization = N.anchor_action(0)
model = GenPQR(normalization, gamma=gamma, q_model="exact", n_states=30, random_state=0)
model.fit(data)
print(model.summary())

# %%
# Against the truth
# -----------------
# The true reward under the same normalization, and the error of the estimate.
truth = stage2.normalized_reward(mdp.reward, mdp.kernel, gamma, normalization)
estimate = model.reward_table().to_numpy()
error = estimate - truth
correlation = np.corrcoef(truth[:, 1:].ravel(), estimate[:, 1:].ravel())[0, 1]
print(f"reward MSE {np.mean(error ** 2):.4f}, max |error| {np.max(np.abs(error)):.3f}, "
      f"correlation {correlation:.3f}\n(actions 1 and 2; action 0 is 0 in both)")

fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), layout="constrained")
lim = float(np.max(np.abs(truth)))
plot_reward_table(truth, ax=axes[0], title="true normalized reward", vmin=-lim, vmax=lim)
plot_reward_table(estimate, ax=axes[1], title="recovered from the logs", vmin=-lim, vmax=lim)
plot_reward_recovery(truth, estimate, ax=axes[2])
axes[2].set_title("recovered vs true")

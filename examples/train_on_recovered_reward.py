"""Train a policy with stable-baselines3 on GenPQR's recovered reward, and compare it with
behaviour cloning, under the true reward, in the logged environment and in a changed one.

The environment is a small tabular gymnasium environment built here from a random MDP
(``genpqr.envs.random_mdp``: 20 states, 3 actions, 4 successors per state-action pair, gamma
0.9). Its true reward is 0 for action 0 in every state, so the anchor normalization
``r(s, 0) = 0`` is true of it, and a recovered reward transfers to changed dynamics
(``docs/counterfactuals.md``).

1. An expert-ish behaviour (the soft-optimal policy of the true reward) logs episodes.
2. GenPQR (exact tabular path, anchor action 0) recovers the reward.
3. PPO trains on ``RecoveredRewardWrapper(env, RewardFunction(model))`` for ``--timesteps``.
4. Behaviour cloning is the estimated policy ``pi_hat`` (stochastic) and its greedy version.
5. Each policy's expected discounted return under the TRUE reward (exact policy evaluation
   from a uniform initial state, times 1 - gamma: a per-step average) is printed, in the
   logged environment and in a changed one (new random transitions), where PPO is retrained
   on the recovered reward while behaviour cloning keeps what it copied.

Run: ``OMP_NUM_THREADS=1 python examples/train_on_recovered_reward.py --timesteps 20000``
"""

from __future__ import annotations

import argparse
import warnings

import gymnasium as gym
import numpy as np

from genpqr import GenPQR, normalization as N, stage2 as T
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.counterfactuals import RecoveredRewardWrapper, RewardFunction

S, K, GAMMA, HORIZON = 20, 3, 0.9, 30


class TabularEnv(gym.Env):
    """A finite MDP as a gymnasium environment: Discrete observations (the state index),
    uniform initial state, episodes truncated after ``horizon`` steps."""

    def __init__(self, mdp, horizon=HORIZON):
        self.mdp, self.horizon = mdp, horizon
        self.observation_space = gym.spaces.Discrete(mdp.n_states)
        self.action_space = gym.spaces.Discrete(mdp.n_actions)
        self._P = mdp.kernel.dense()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.state, self.t = int(self.np_random.integers(self.mdp.n_states)), 0
        return self.state, {}

    def step(self, action):
        reward = float(self.mdp.reward[self.state, action])
        self.state = int(self.np_random.choice(self.mdp.n_states, p=self._P[self.state, action]))
        self.t += 1
        return self.state, reward, False, self.t >= self.horizon, {}


def make_world(seed):
    mdp = random_mdp(S, K, n_next=4, gamma=GAMMA, reward_scale=1.5, random_state=seed)
    reward = mdp.reward.copy()
    reward[:, 0] = 0.0  # the anchor normalization is true of this reward
    changed = random_mdp(S, K, n_next=4, gamma=GAMMA, random_state=seed + 1000).kernel
    return T.TabularMDP(mdp.kernel, GAMMA, reward), T.TabularMDP(changed, GAMMA, reward)


def true_return(mdp, policy):
    """Per-step average discounted return ``(1 - gamma) mean_s V^pi(s)`` under the true reward."""
    _, v = T.policy_evaluation(mdp.reward, policy, mdp.kernel, mdp.gamma)
    return float((1 - mdp.gamma) * v.mean())


def optimal_policy(mdp, n_iterations=2000):
    """The (unregularized) optimal deterministic policy of the true reward, by value iteration."""
    v = np.zeros(mdp.n_states)
    for _ in range(n_iterations):
        v = np.max(mdp.reward + mdp.gamma * mdp.kernel.expect(v), axis=1)
    return greedy(mdp.reward + mdp.gamma * mdp.kernel.expect(v))


def greedy(policy):
    return np.eye(policy.shape[1])[policy.argmax(axis=1)]


def ppo_policy(env, timesteps, seed):
    """PPO's action probabilities at every state after ``timesteps`` steps."""
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    agent = PPO("MlpPolicy", env, gamma=GAMMA, n_steps=256, batch_size=64, learning_rate=3e-3, ent_coef=0.01,
                seed=seed, verbose=0, device="cpu")
    agent.learn(total_timesteps=timesteps)
    obs = agent.policy.obs_to_tensor(np.arange(S))[0]
    with torch.no_grad():
        return agent.policy.get_distribution(obs).distribution.probs.cpu().numpy().astype(np.float64)


def main(argv=None):
    p = argparse.ArgumentParser(description="PPO on GenPQR's recovered reward vs behaviour cloning")
    p.add_argument("--timesteps", type=int, default=20_000, help="PPO steps per training run")
    p.add_argument("--episodes", type=int, default=300, help="logged expert episodes (of 20 steps)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    logged, changed = make_world(args.seed)
    expert = T.soft_optimal_policy(logged.reward, logged.kernel, GAMMA)
    data = simulate_tabular(logged, expert, n_episodes=args.episodes, horizon=20, random_state=args.seed)
    model = GenPQR(N.anchor_action(0), gamma=GAMMA, q_model="exact", n_states=S, clip=(0.01, 0.99)).fit(data)
    reward = RewardFunction(model)
    bc = np.exp(model.log_policy(np.arange(S)[:, None]))
    rows = []
    for name, mdp in (("logged", logged), ("changed", changed)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SB3's notes on tiny rollouts
            ppo = ppo_policy(RecoveredRewardWrapper(TabularEnv(mdp), reward), args.timesteps, args.seed)
        best = T.soft_optimal_policy(mdp.reward, mdp.kernel, GAMMA)
        policies = {"optimal (true reward)": optimal_policy(mdp), "soft-optimal (true reward)": best,
                    "PPO on recovered reward": ppo,
                    "behaviour cloning": bc, "uniform random": np.full((S, K), 1.0 / K)}
        for method, pol in policies.items():
            greedy_return = np.nan if method in ("uniform random", "optimal (true reward)") else true_return(mdp, greedy(pol))
            rows.append((name, method, true_return(mdp, pol), greedy_return))
    print(f"GenPQR fit on {data.n} logged transitions; PPO {args.timesteps} steps per environment")
    print("true return ((1 - gamma) x mean discounted return from a uniform initial state)")
    print("| environment | policy | stochastic | greedy |\n|---|---|---|---|")
    for env_name, method, stoch, greed in rows:
        print(f"| {env_name} | {method} | {stoch:.3f} | {'-' if np.isnan(greed) else f'{greed:.3f}'} |")
    return rows


if __name__ == "__main__":
    main()

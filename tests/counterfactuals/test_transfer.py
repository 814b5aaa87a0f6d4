"""Reward transfer: callable, gymnasium wrapper, imitation interfaces, and the SB3 example."""

import importlib.util
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

from genpqr import GenPQR, normalization as N, stage2 as T
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.counterfactuals import RewardFunction

S, K = 6, 3
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def fitted():
    mdp = random_mdp(S, K, n_next=3, gamma=0.9, random_state=0)
    pol = T.soft_optimal_policy(mdp.reward, mdp.kernel, 0.9)
    data = simulate_tabular(mdp, pol, n_episodes=50, horizon=10, random_state=1)
    return GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", n_states=S).fit(data)


def test_reward_function_is_vectorized_and_matches_the_table(fitted):
    fn = RewardFunction(fitted)
    table = fitted.reward_table().to_numpy()
    s = np.array([0, 3, 5, 3])
    a = np.array([2, 0, 1, 1])
    np.testing.assert_allclose(fn(s[:, None], a), table[s, a], atol=1e-12)
    assert fn(np.array([3.0]), 1) == pytest.approx(table[3, 1])
    scaled = RewardFunction(fitted, scale=2.0, shift=-1.0)
    np.testing.assert_allclose(scaled(s[:, None], a), 2 * table[s, a] - 1, atol=1e-12)
    onehot = RewardFunction(fitted, obs_to_state=lambda obs: obs.argmax(axis=1)[:, None])
    np.testing.assert_allclose(onehot(np.eye(S)[s], a), table[s, a], atol=1e-12)
    back = pickle.loads(pickle.dumps(fn))
    np.testing.assert_allclose(back(s[:, None], a), table[s, a])
    with pytest.raises(ValueError, match="action must be"):
        fn(s[:, None], a[:2])


def test_imitation_reward_fn_signature(fitted):
    fn = RewardFunction(fitted).as_imitation_reward_fn()
    s, a = np.array([[1.0], [2.0]]), np.array([0, 2])
    out = fn(s, a, s, np.array([False, True]))
    assert out.shape == (2,) and out.dtype == np.float64
    np.testing.assert_allclose(out, fitted.reward(s, a))


def test_gymnasium_wrapper_replaces_the_reward(fitted):
    gym = pytest.importorskip("gymnasium")
    from genpqr.counterfactuals import RecoveredRewardWrapper

    sys.path.insert(0, str(EXAMPLES))
    try:
        from train_on_recovered_reward import TabularEnv
    finally:
        sys.path.remove(str(EXAMPLES))
    mdp = random_mdp(S, K, n_next=3, gamma=0.9, random_state=0)
    env = RecoveredRewardWrapper(TabularEnv(mdp, horizon=5), RewardFunction(fitted))
    assert isinstance(env, gym.Wrapper)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    obs, _ = env.reset(seed=0)
    table = fitted.reward_table().to_numpy()
    for t in range(5):
        action = t % K
        nxt, r, term, trunc, info = env.step(action)
        assert r == pytest.approx(table[obs, action])
        assert info["true_reward"] == pytest.approx(mdp.reward[obs, action])
        obs = nxt
    assert trunc
    with pytest.raises(TypeError, match="callable"):
        RecoveredRewardWrapper(TabularEnv(mdp), 3.0)


@pytest.mark.adapters
def test_imitation_reward_net(fitted):
    pytest.importorskip("imitation")
    import gymnasium as gym
    import torch

    from genpqr.counterfactuals import to_imitation_reward_net

    net = to_imitation_reward_net(RewardFunction(fitted), gym.spaces.Box(0, S, (1,)), gym.spaces.Discrete(K))
    s, a = np.array([[1.0], [4.0]]), np.array([2, 0])
    expected = fitted.reward(s, a)
    np.testing.assert_allclose(net.predict_processed(s, a, s, np.zeros(2, bool)), expected)
    out = net(torch.as_tensor(s, dtype=torch.float32), torch.nn.functional.one_hot(torch.as_tensor(a), K).float(),
              torch.as_tensor(s, dtype=torch.float32), torch.zeros(2))
    np.testing.assert_allclose(out.numpy(), expected, atol=1e-5)


@pytest.mark.adapters
def test_imitation_reward_vec_env_wrapper_pays_the_recovered_reward(fitted):
    """imitation's RewardVecEnvWrapper around an SB3 vector env, with the net's
    predict_processed or the plain RewardFn: each step pays r_hat(obs before the step, action),
    and PPO trains on it."""
    pytest.importorskip("imitation")
    pytest.importorskip("stable_baselines3")
    from imitation.rewards.reward_wrapper import RewardVecEnvWrapper
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from genpqr.counterfactuals import to_imitation_reward_net

    TabularEnv = example_env()
    mdp = random_mdp(S, K, n_next=3, gamma=0.9, random_state=0)
    table = fitted.reward_table().to_numpy()
    reward = RewardFunction(fitted)
    venv = DummyVecEnv([lambda: TabularEnv(mdp, horizon=50)] * 2)
    net = to_imitation_reward_net(reward, venv.observation_space, venv.action_space)
    for reward_fn in (net.predict_processed, reward.as_imitation_reward_fn()):
        env = RewardVecEnvWrapper(venv, reward_fn=reward_fn)
        obs = env.reset()
        for t in range(6):
            actions = np.array([t % K, (t + 1) % K])
            before = obs.ravel().astype(int)
            obs, rewards, _, _ = env.step(actions)
            np.testing.assert_allclose(rewards, table[before, actions], atol=1e-6)
    PPO("MlpPolicy", env, n_steps=64, batch_size=32, seed=0, device="cpu").learn(total_timesteps=128)


def example_env():
    sys.path.insert(0, str(EXAMPLES))
    try:
        from train_on_recovered_reward import TabularEnv
    finally:
        sys.path.remove(str(EXAMPLES))
    return TabularEnv


def test_example_trains_ppo_on_the_recovered_reward():
    pytest.importorskip("stable_baselines3")
    spec = importlib.util.spec_from_file_location("train_example", EXAMPLES / "train_on_recovered_reward.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = module.main(["--timesteps", "1024", "--episodes", "100"])
    table = {(env, method): (stoch, greedy) for env, method, stoch, greedy in rows}
    for env in ("logged", "changed"):
        best = table[(env, "soft-optimal (true reward)")][1]
        assert table[(env, "PPO on recovered reward")][1] > table[(env, "uniform random")][0] + 0.3 * best
        assert np.isfinite(table[(env, "behaviour cloning")][0])

"""The dataset adapters of genpqr.data on datasets built by the real libraries (Minari's
``DataCollector``, d3rlpy's ``MDPDataset``, imitation's rollouts), offline.

These libraries pin gymnasium versions that cannot share the main environment: the tests
run in their own one (``make test-adapters``, marker ``adapters``) and are skipped, with the
reason, where the libraries are not installed.

The environment is a five-state chain with an absorbing goal and a time limit, so that both
kinds of episode end occur and the truth is known: an episode *terminated* exactly when its
last observation is the goal; otherwise it was cut by the time limit (*truncated*).
"""

from __future__ import annotations

import importlib
import os

import numpy as np
import pytest

pytestmark = pytest.mark.adapters
# `make test-adapters` sets this: there a missing library is a failure, not a skip
REQUIRED = os.environ.get("GENPQR_REQUIRE_ADAPTERS") == "1"


def need(module, reason):
    if REQUIRED:
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"{reason} (make test-adapters)")


gym = need("gymnasium", "the adapter tests need gymnasium")

import genpqr  # noqa: E402
from genpqr.data import from_episodes  # noqa: E402
from genpqr.data import from_d3rlpy, from_imitation, from_minari  # noqa: E402

N_STATES, GOAL, HORIZON = 5, 4, 6


class Chain(gym.Env):
    """States 0..4, actions 0 (left) and 1 (right); reaching 4 terminates; reward -1 per step."""

    observation_space = gym.spaces.Discrete(N_STATES)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.s = 0
        return self.s, {}

    def step(self, action):
        self.s = min(self.s + 1, GOAL) if int(action) == 1 else max(self.s - 1, 0)
        return self.s, -1.0, self.s == GOAL, False, {}


ENV_ID = "GenpqrTestChain-v0"
if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=Chain, max_episode_steps=HORIZON)


def play(env, n_episodes, seed=0):
    """Run a random-but-rightward behaviour; returns the episodes as recorded by us."""
    rng = np.random.default_rng(seed)
    episodes = []
    for e in range(n_episodes):
        obs, _ = env.reset(seed=seed + e)
        states, actions, rewards = [obs], [], []
        while True:
            a = int(rng.random() < 0.6)
            obs, r, terminated, truncated, _ = env.step(a)
            states.append(obs)
            actions.append(a)
            rewards.append(r)
            if terminated or truncated:
                break
        episodes.append({"states": np.asarray(states, float)[:, None], "actions": np.asarray(actions),
                         "rewards": np.asarray(rewards), "terminated": bool(terminated)})
    return episodes


def assert_ends_match_the_environment(data):
    """Terminated exactly at the goal; the other episode ends are truncated; one end per episode."""
    last = np.r_[data.episode_ids[1:] != data.episode_ids[:-1], True]
    at_goal = data.next_states[:, 0] == GOAL
    assert np.array_equal(data.terminated, last & at_goal)
    assert np.array_equal(data.truncated, last & ~at_goal)
    assert data.terminated.any() and data.truncated.any()  # both kinds occur


def assert_same(a, b):
    for k in ("states", "actions", "next_states", "terminated", "truncated", "episode_ids", "rewards"):
        assert np.array_equal(getattr(a, k), getattr(b, k), equal_nan=getattr(a, k).dtype.kind == "f"), k


def fit_reward(data):
    model = genpqr.GenPQR(genpqr.normalization.anchor_action(0), gamma=0.9, q_model="exact", n_states=N_STATES)
    return model.fit(data).reward_table()


def test_minari_data_collector(tmp_path, monkeypatch):
    minari = need("minari", "needs minari[create]")
    need("jax", "Minari's DataCollector needs minari[create] (jax)")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    env = minari.DataCollector(gym.make(ENV_ID))
    recorded = play(env, 30)
    dataset = env.create_dataset(dataset_id="genpqr-test/chain-v0", algorithm_name="random-rightward",
                                 author="genpqr tests", author_email="none@example.org", code_permalink="none",
                                 description="five-state chain")
    env.close()
    assert (tmp_path / "genpqr-test").is_dir()  # written where MINARI_DATASETS_PATH says, nothing downloaded
    reloaded = minari.load_dataset("genpqr-test/chain-v0")
    for ds in (dataset, reloaded):
        data = from_minari(ds)
        assert data.n_episodes == 30 and data.n == sum(len(e["actions"]) for e in recorded)
        assert_same(data, from_episodes(recorded))
        assert_ends_match_the_environment(data)
    assert np.allclose(fit_reward(from_minari(reloaded)), fit_reward(from_episodes(recorded)), atol=1e-12)


def test_d3rlpy_mdp_dataset():
    d3rlpy = need("d3rlpy", "needs d3rlpy")
    recorded = play(gym.make(ENV_ID), 30, seed=100)
    # d3rlpy's layout: T observations for T actions; terminals / timeouts flag each episode's last step
    obs = np.concatenate([e["states"][:-1] for e in recorded]).astype(np.float32)
    acts = np.concatenate([e["actions"] for e in recorded])
    rews = np.concatenate([e["rewards"] for e in recorded])
    ends = np.cumsum([len(e["actions"]) for e in recorded]) - 1
    terminals, timeouts = np.zeros(len(acts)), np.zeros(len(acts))
    terminals[ends] = [e["terminated"] for e in recorded]
    timeouts[ends] = [not e["terminated"] for e in recorded]
    dataset = d3rlpy.dataset.MDPDataset(obs, acts, rews, terminals, timeouts,
                                        action_space=d3rlpy.ActionSpace.DISCRETE)
    assert len(dataset.episodes) == 30
    data = from_d3rlpy(dataset)
    # a time-limited episode's last step has no observed next state: it is kept as a choice-only
    # row (stage 1 and the choice counts), not as a transition
    kept = sum(len(e["actions"]) - (not e["terminated"]) for e in recorded)
    assert data.n == len(acts) and data.with_next().n == kept
    assert data.n_choice_only == sum(not e["terminated"] for e in recorded)
    expected = from_episodes([dict(e, states=e["states"][:-1]) for e in recorded])
    assert_same(data, expected)
    term_last = np.flatnonzero(data.terminated)
    assert term_last.size == sum(e["terminated"] for e in recorded)
    assert np.array_equal(data.truncated.sum(), sum(not e["terminated"] for e in recorded))


def test_imitation_rollouts_separate_time_limits_from_terminal_states():
    need("imitation", "needs imitation")
    from imitation.data import rollout
    from imitation.data.types import TrajectoryWithRew
    from imitation.data.wrappers import RolloutInfoWrapper
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = DummyVecEnv([lambda: RolloutInfoWrapper(gym.make(ENV_ID))] * 2)
    venv.seed(0)
    trajs = rollout.generate_trajectories(None, venv, rollout.make_min_episodes(30), rng=np.random.default_rng(0))
    assert all(isinstance(t, TrajectoryWithRew) and t.terminal for t in trajs)  # imitation: every episode "terminal"
    data = from_imitation(trajs)
    assert data.n_episodes == len(trajs) and data.n == sum(len(t.acts) for t in trajs)
    assert_ends_match_the_environment(data)
    truncated_by_info = [bool(t.infos[-1]["TimeLimit.truncated"]) for t in trajs]
    ends = np.flatnonzero(data.truncated | data.terminated)
    assert data.truncated[ends].tolist() == truncated_by_info
    reference = from_episodes([{"states": np.asarray(t.obs, float)[:, None], "actions": t.acts, "rewards": t.rews,
                                "terminated": t.obs[-1] == GOAL} for t in trajs])
    assert_same(data, reference)
    # a fragment (terminal=False) that stops before the episode's end is truncated
    frag = TrajectoryWithRew(obs=trajs[0].obs[:3], acts=trajs[0].acts[:2], infos=trajs[0].infos[:2], terminal=False,
                             rews=trajs[0].rews[:2])
    assert from_imitation([frag]).truncated.tolist() == [False, True]
    assert np.allclose(fit_reward(data), fit_reward(reference), atol=1e-12)

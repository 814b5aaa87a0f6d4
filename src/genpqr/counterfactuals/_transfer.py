r"""Reward transfer: GenPQR's recovered reward as a reward for reinforcement-learning libraries.

* :class:`RewardFunction`: the fitted reward as a vectorized callable
  ``(obs (n, d), action (n,)) -> reward (n,)`` (a single ``(d,)`` observation and scalar action
  give a float), with an optional ``obs_to_state`` map (e.g. a discretization for a tabular fit).
* :class:`RecoveredRewardWrapper` (needs gymnasium): a ``gymnasium.Wrapper`` whose ``step``
  returns the recovered reward ``r(s_t, a_t)`` of the observation *before* the step and the
  action taken (gymnasium's ``RewardWrapper.reward`` sees neither), keeping the
  environment's own reward in ``info["true_reward"]``. Train any gymnasium agent on it, e.g.
  stable-baselines3's PPO or DQN.
* :meth:`RewardFunction.as_imitation_reward_fn` and :func:`to_imitation_reward_net`: the
  reward in imitation's interfaces, ``RewardFn(state, action, next_state, done) -> (n,)``
  (for ``imitation.rewards.reward_wrapper.RewardVecEnvWrapper``) and a
  ``imitation.rewards.reward_nets.RewardNet`` whose ``predict_processed`` returns it. imitation
  is imported only when the net is built.

The recovered reward is one member of the shaping class of the behaviour's reward (paper,
Lemma "Potential-based shaping invariance"): in the *same* environment and discount every
member has the same soft-optimal policy, so any normalization trains the same MaxEnt agent; in a
*changed* environment or discount the transferred policy is right only when the normalization
is true of the real reward (:mod:`genpqr.counterfactuals`).
"""

from __future__ import annotations

import numpy as np

from ..data._validation import as_float_array

__all__ = ["RewardFunction", "RecoveredRewardWrapper", "to_imitation_reward_net"]


class RewardFunction:
    """``(obs, action) -> r_hat(s, a)`` from a fitted GenPQR (vectorized, picklable).

    Parameters
    ----------
    model : fitted GenPQR
    obs_to_state : callable, optional
        ``obs (n, d_obs) -> states (n, d)`` in the model's state representation (default:
        the observation itself).
    scale, shift : float
        Affine map ``scale * r + shift`` (a positive ``scale`` does not change the optimal
        policy of an unregularized learner; it changes the MaxEnt temperature).
    """

    def __init__(self, model, obs_to_state=None, scale: float = 1.0, shift: float = 0.0):
        model._check_fitted()
        self.model, self.obs_to_state, self.scale, self.shift = model, obs_to_state, float(scale), float(shift)

    def __call__(self, obs, action):
        """Reward at ``(obs, action)``: obs (n, d) with action (n,) labels -> (n,); obs (d,) with a
        scalar action -> float."""
        single = np.ndim(action) == 0
        X = np.asarray(obs, dtype=np.float64)
        if single:
            X = X.reshape(1, -1)
        if self.obs_to_state is not None:
            X = np.asarray(self.obs_to_state(X), dtype=np.float64)
        X = as_float_array(X, "obs", ndim=2, allow_1d_as_column=True)
        actions = np.atleast_1d(np.asarray(action))
        if actions.ndim != 1 or actions.shape[0] != X.shape[0]:
            raise ValueError(f"action must be a scalar or shape ({X.shape[0]},) like obs, got {np.shape(action)}")
        if actions.dtype.kind == "f" and np.all(actions == np.round(actions)):
            actions = actions.astype(np.int64)
        r = self.scale * self.model.reward(X, actions) + self.shift
        return float(r[0]) if single else r

    def as_imitation_reward_fn(self):
        """imitation's ``RewardFn``: ``(state, action, next_state, done) -> (n,)`` numpy."""
        return _ImitationRewardFn(self)


class _ImitationRewardFn:
    def __init__(self, reward):
        self.reward = reward

    def __call__(self, state, action, next_state, done):
        return np.asarray(self.reward(np.asarray(state), np.asarray(action)), dtype=np.float64)


# ============================================================================ gymnasium
_WRAPPER = {}


def _wrapper_class():
    """``RecoveredRewardWrapper``, built on first use so that gymnasium stays optional."""
    if "cls" in _WRAPPER:
        return _WRAPPER["cls"]
    try:
        import gymnasium
    except ImportError as exc:  # pragma: no cover - exercised only without gymnasium
        raise ImportError("RecoveredRewardWrapper needs gymnasium (pip install 'genpqr[rl]')") from exc

    class RecoveredRewardWrapper(gymnasium.Wrapper):
        """A gymnasium environment whose reward is ``reward(obs_t, action_t)``.

        Parameters
        ----------
        env : gymnasium.Env
        reward : RewardFunction or callable ``(obs (1, d), action (1,)) -> (1,)``
            Usually ``RewardFunction(model, obs_to_state)``.

        Notes
        -----
        ``info["true_reward"]`` keeps the environment's reward.
        """

        def __init__(self, env, reward):
            super().__init__(env)
            if not callable(reward):
                raise TypeError(f"reward must be callable (obs, action) -> reward, got {type(reward).__name__}")
            self.recovered_reward = reward
            self._obs = None

        def reset(self, **kwargs):
            """Reset the wrapped environment (``self.env``) and keep its first observation, the
            state at which the next step's reward is evaluated."""
            obs, info = self.env.reset(**kwargs)
            self._obs = obs
            return obs, info

        def step(self, action):
            """Step the wrapped environment; the reward returned is the recovered reward at the
            observation before the step and ``action``, ``info["true_reward"]`` the environment's."""
            if self._obs is None:
                raise RuntimeError("call reset() before step()")
            obs, true_reward, terminated, truncated, info = self.env.step(action)
            r = self.recovered_reward(np.asarray(self._obs, dtype=np.float64)[None], np.asarray([action]))
            info = dict(info, true_reward=true_reward)
            self._obs = obs
            return obs, float(np.asarray(r).ravel()[0]), terminated, truncated, info

    RecoveredRewardWrapper.__module__ = __name__
    _WRAPPER["cls"] = RecoveredRewardWrapper
    return RecoveredRewardWrapper


def __getattr__(name):
    if name == "RecoveredRewardWrapper":
        return _wrapper_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ============================================================================ imitation
def to_imitation_reward_net(reward: RewardFunction, observation_space, action_space):
    """An ``imitation.rewards.reward_nets.RewardNet`` returning the recovered reward.

    ``predict_processed(state, action, next_state, done)`` (numpy in, numpy out; what
    ``RewardVecEnvWrapper`` and imitation's evaluation call) returns ``reward(state, action)``;
    ``forward`` does the same on tensors (one-hot actions for a ``Discrete`` space are decoded).
    The net has no trainable parameters: it is a fixed reward, not a discriminator.
    """
    import torch
    from imitation.rewards.reward_nets import RewardNet

    class GenPQRRewardNet(RewardNet):
        def __init__(self):
            super().__init__(observation_space, action_space, normalize_images=False)
            self.recovered_reward = reward

        def forward(self, state, action, next_state, done):
            a = action.detach().cpu().numpy()
            if a.ndim == 2:  # one-hot (RewardNet.preprocess of a Discrete action)
                a = a.argmax(axis=1)
            r = self.recovered_reward(state.detach().cpu().numpy().reshape(len(a), -1), a)
            return torch.as_tensor(np.asarray(r), dtype=torch.float32, device=state.device)

        def predict_processed(self, state, action, next_state, done, **kwargs):
            return np.asarray(self.recovered_reward(np.asarray(state).reshape(len(state), -1), np.asarray(action)),
                              dtype=np.float64)

    return GenPQRRewardNet()

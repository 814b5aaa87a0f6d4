r"""The synthetic benchmark of the paper's experiments (Sec. 6, App. "Simulation details").

This module implements ``/work/shared/benchmarks/synthetic-env.md`` exactly; that page is
the specification, this docstring records only how it is realised and what we chose where
it is silent.

What the specification fixes
----------------------------
* ``p = 5`` state coordinates, ``K`` actions (5 in the paper; 10, 20, 40 in the many-action
  study), ``gamma = 0.9``, temperature ``alpha = 1``, anchor action ``0`` with ``g = 0``.
* ``W`` (K x p) i.i.d. ``N(0, 0.7^2)``; ``b`` = K evenly spaced values from 0.5 down to
  -0.3, plus the *anchor-logit shift* on ``b[0]``.
* Policy: ``x = s / sqrt(p)``, ``z = W x + b``,
  ``c = z + 0.35 sin(1.5 z) + 0.2 |W| (x * x)``, ``pi = softmax(0.8 tanh(c) / alpha)``.
* Transitions: ``s' = s + Delta[a] * ones(p)`` with ``Delta[0] = 0`` and ``Delta[1:]`` the
  ``K - 1`` evenly spaced values from -0.35 to 0.35; ``s'`` is reset to the zero vector
  when any coordinate exceeds 5 in absolute value.
* True reward, anchor-normalized (``r(s, 0) = 0``), defined so that ``pi`` is soft-optimal:
  ``V(s) = -(1/(1-gamma)) log pi(0|s)``, ``Q(s, a) = log pi(a|s) + V(s)``,
  ``r(s, a) = Q(s, a) - gamma V(T(s, a))``, i.e. for general ``gamma``

  .. math:: r(s,a) = \log\pi(a|s) - \tfrac{1}{1-\gamma}\log\pi(0|s)
            + \tfrac{\gamma}{1-\gamma}\log\pi(0|T(s,a)),

  which is the specification's ``log pi(a|s) - 10 log pi(0|s) + 9 log pi(0|T(s,a))`` at
  ``gamma = 0.9``. (Derivation: the spec's ``Q(s, a) = log pi(a|s) - log pi(0|s) + Q(s, 0)``
  with ``Q(s, 0) = -(gamma/(1-gamma)) log pi(0|s)`` equals ``log pi(a|s) + V(s)``; hence
  ``logsumexp_a Q(s, .) = V(s)`` and ``Q - V = log pi``: ``pi`` is soft-optimal for ``r``.)
* Data: ``s0 ~ N(0, I_p)``, trajectories of ``H = 10`` steps, ``a_t ~ pi``, no terminal flags;
  logged rewards ``r + N(0, 0.05^2)`` (**no IRL method may use them**: they exist only for the
  supervised "linear reward" oracle reference); test set of 300 trajectories from the same
  ``W, b`` and an independent random stream.
* Metrics: reward MSE and Pearson correlation at the test set's (state, logged action) pairs,
  policy NLL on test rows, anchor count of the training set; seeds summarised by mean and
  ``1.96 sd / sqrt(n_seeds)`` (``seed_summary``).

What we chose where the specification is silent
------------------------------------------------
* **Random streams.** ``np.random.SeedSequence(seed).spawn(3)`` gives three independent
  children: child 0 draws ``W`` (``default_rng(child0).normal(0, 0.7, size=(K, p))``, row-major,
  so for a fixed ``p`` the first rows of ``W`` agree between different ``K``), child 1 the
  training data and child 2 the test data. The test set therefore does not depend on
  ``n_train``, and the training set does not depend on ``n_test``.
  Within ``SyntheticEnv.simulate`` the draws are, in this order: ``s0`` as
  ``standard_normal((n, p))``; the action uniforms as ``random((H, n))`` (row ``t`` drives step
  ``t`` through the inverse CDF of ``pi(.|s_t)``); the reward noise as
  ``normal(0, 0.05, (n, H))``.
* **Delta** is built as integer multiples ``Delta[a] = m[a] * step`` of one lattice step
  (``step = 0.35 / (K - 2)`` times the gcd of the multipliers; for ``K = 2`` the single value
  is -0.35). It equals ``np.linspace(-0.35, 0.35, K - 1)`` up to floating rounding, and makes
  every reachable state lie on a 1-D lattice (used by ``genpqr.envs._synthetic_lattice``).
  For even ``K`` one of the moving actions (``K = 4``: action 2) has ``Delta = 0``, as the
  linspace definition implies.
* **Reset order.** The box check is applied to ``s + Delta[a]`` after the move; "exceeds" is
  strict (``|s'_j| > 5``). Initial states are *not* clipped or reset, so an ``s0`` outside the
  box (probability about 3e-6 per trajectory) is logged as drawn; any action from it,
  including the anchor, resets to zero.
* **Out-of-box states.** ``T(s, 0) = s`` inside the box, so there the spec's formulas hold
  verbatim. For a state outside the box ``T(s, 0) = 0``, and we keep the reward exactly
  anchor-normalized and ``pi`` exactly soft-optimal by using the general identity
  ``V(s) = gamma V(T(s, 0)) - log pi(0|s)`` (i.e. ``V(s) = gamma V(0) - log pi(0|s)`` there) in
  ``Q = log pi + V`` and ``r = Q - gamma V(T)``. This differs from the spec's literal formula
  only at such states.
* **Seed summaries** use the sample standard deviation (``ddof = 1``).
* ``K >= 2`` any integer and ``p >= 1`` are accepted; ``gamma`` is a parameter (default 0.9),
  ``alpha`` is fixed at 1 (library convention: scale is absorbed into the reward).

Ground truth under other normalizations
---------------------------------------
For any normalization ``mu r = g`` the true reward is computed exactly (no rollouts) on the
1-D lattice of reachable states: ``genpqr.envs._synthetic_lattice`` states the formulas,
the solve and its accuracy.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np

from ..data._validation import as_float_array, check_gamma, check_random_state
from ..data import Transitions, from_arrays
from ..normalization import Normalization
from ._synthetic_lattice import normalized_w

__all__ = [
    "SyntheticEnv",
    "SyntheticData",
    "make_synthetic_env",
    "make_synthetic_data",
    "seed_summary",
    "BOX",
    "W_SCALE",
    "REWARD_NOISE",
]

BOX = 5.0  #: states with any ``|coordinate| > BOX`` are reset to zero
W_SCALE = 0.7  #: standard deviation of the entries of ``W``
REWARD_NOISE = 0.05  #: standard deviation of the logged reward noise
_ALPHA = 1.0  # temperature (fixed; absorbed into the reward)


def _streams(seed) -> list[np.random.SeedSequence]:
    """(W, train, test) child seed sequences of ``seed``."""
    if isinstance(seed, bool) or not isinstance(seed, (numbers.Integral, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return np.random.SeedSequence(int(seed)).spawn(3)


def _lattice_moves(n_actions: int) -> tuple[float, np.ndarray]:
    """``(step, m)`` with ``Delta = m * step``: ``Delta[0] = 0``, ``Delta[1:]`` the ``K - 1``
    evenly spaced values from -0.35 to 0.35, ``m`` integers with gcd 1."""
    if n_actions == 2:
        return 0.35, np.array([0, -1], dtype=np.int64)
    m = np.concatenate([[0], 2 * np.arange(n_actions - 1) - (n_actions - 2)]).astype(np.int64)
    div = int(np.gcd.reduce(np.abs(m[1:])))
    return 0.35 / (n_actions - 2) * div, m // div


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


# ============================================================================== environment
@dataclass(frozen=True, eq=False)
class SyntheticEnv:
    """The synthetic MDP of one seed: policy, deterministic transitions, true reward.

    Build with :meth:`from_seed` (or :func:`make_synthetic_env`).

    Attributes
    ----------
    W : ndarray of shape (K, p)
        Policy weights, i.i.d. ``N(0, 0.7^2)``.
    b : ndarray of shape (K,)
        Action biases, the anchor-logit shift already added to ``b[0]``.
    delta : ndarray of shape (K,)
        Derived: the per-action shift ``Delta`` (``Delta[0] = 0``).
    gamma : float
        Discount factor.
    anchor_shift : float
        The shift added to ``b[0]`` (recorded for reference).
    seed : int or None
        The seed ``W`` was drawn from.
    """

    W: np.ndarray
    b: np.ndarray
    gamma: float = 0.9
    anchor_shift: float = 0.0
    seed: int | None = None

    def __post_init__(self):
        W = as_float_array(self.W, "W", ndim=2).copy()
        b = as_float_array(self.b, "b", ndim=1).copy()
        if W.shape[0] < 2:
            raise ValueError(f"W must have at least 2 rows (actions), got shape {W.shape}")
        if b.shape != (W.shape[0],):
            raise ValueError(f"b must have shape ({W.shape[0]},) to match W {W.shape}, got {b.shape}")
        W.setflags(write=False)
        b.setflags(write=False)
        step, moves = _lattice_moves(W.shape[0])
        delta = moves * step
        moves.setflags(write=False)
        delta.setflags(write=False)
        object.__setattr__(self, "W", W)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "gamma", check_gamma(self.gamma))
        object.__setattr__(self, "_step", step)
        object.__setattr__(self, "_moves", moves)
        object.__setattr__(self, "delta", delta)

    @classmethod
    def from_seed(cls, seed: int, n_actions: int = 5, anchor_shift: float = 0.0, state_dim: int = 5,
                  gamma: float = 0.9) -> "SyntheticEnv":
        """The environment of ``seed``: ``W`` from the first child of ``SeedSequence(seed)``.

        Parameters
        ----------
        seed : int >= 0
        n_actions : int >= 2
            ``K`` (5 in the paper's main experiments; up to 40 in the many-action study).
        anchor_shift : float
            Added to ``b[0]``: 0.0 (anchor common, about 25% of actions) or -1.0 (rare, ~16%).
        state_dim : int >= 1
            ``p``.
        gamma : float in [0, 1)
        """
        for name, val, low in (("n_actions", n_actions, 2), ("state_dim", state_dim, 1)):
            if isinstance(val, bool) or not isinstance(val, (numbers.Integral, np.integer)) or val < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {val!r}")
        if not np.isfinite(anchor_shift):
            raise ValueError(f"anchor_shift must be a finite number, got {anchor_shift!r}")
        rng = np.random.default_rng(_streams(seed)[0])
        W = rng.normal(0.0, W_SCALE, size=(int(n_actions), int(state_dim)))
        b = np.linspace(0.5, -0.3, int(n_actions))
        b[0] += float(anchor_shift)
        return cls(W=W, b=b, gamma=gamma, anchor_shift=float(anchor_shift), seed=int(seed))

    # ------------------------------------------------------------------ shapes
    @property
    def n_actions(self) -> int:
        return int(self.W.shape[0])

    @property
    def state_dim(self) -> int:
        return int(self.W.shape[1])

    @property
    def anchor(self) -> int:
        """The anchor action code (0)."""
        return 0

    def _states(self, states, name="states") -> np.ndarray:
        s = as_float_array(states, name, ndim=2)
        if s.shape[1] != self.state_dim:
            raise ValueError(f"{name} must have shape (n, {self.state_dim}), got {s.shape}")
        return s

    def _actions(self, actions, n: int) -> np.ndarray:
        a = np.asarray(actions)
        if a.shape != (n,):
            raise ValueError(f"actions must have shape ({n},) to match states, got {a.shape}")
        if a.size and (not np.issubdtype(a.dtype, np.integer)):
            if not np.issubdtype(a.dtype, np.number) or not np.all(a == np.round(a)):
                raise TypeError(f"actions must be integer codes in [0, {self.n_actions}), got dtype {a.dtype}")
        a = a.astype(np.int64)
        if a.size and (a.min() < 0 or a.max() >= self.n_actions):
            raise ValueError(f"actions must be codes in [0, {self.n_actions}), got values in [{a.min()}, {a.max()}]")
        return a

    # ------------------------------------------------------------------ policy
    def policy_logits(self, states) -> np.ndarray:
        """``score / alpha`` with ``score = 0.8 tanh(c)``, shape (n, K)."""
        s = self._states(states)
        x = s / np.sqrt(self.state_dim)
        z = x @ self.W.T + self.b
        c = z + 0.35 * np.sin(1.5 * z) + 0.2 * (x * x) @ np.abs(self.W).T
        return 0.8 * np.tanh(c) / _ALPHA

    def log_policy(self, states) -> np.ndarray:
        """``log pi(a|s)``, shape (n, K) (stable log-softmax)."""
        return _log_softmax(self.policy_logits(states))

    def policy_proba(self, states) -> np.ndarray:
        """``pi(a|s)``, shape (n, K)."""
        return np.exp(self.log_policy(states))

    # ------------------------------------------------------------------ dynamics
    def in_box(self, states) -> np.ndarray:
        """True where every ``|coordinate| <= 5``, shape (n,)."""
        return np.all(np.abs(self._states(states)) <= BOX, axis=1)

    def transition(self, states, actions) -> np.ndarray:
        """``T(s, a) = s + Delta[a] * ones(p)``, reset to 0 if any ``|coordinate| > 5``."""
        s = self._states(states)
        nxt = s + self.delta[self._actions(actions, len(s))][:, None]
        nxt[np.any(np.abs(nxt) > BOX, axis=1)] = 0.0
        return nxt

    def _all_next(self, s: np.ndarray) -> np.ndarray:
        """``T(s, a)`` for every action, shape (n * K, p), row ``i * K + a``."""
        n, K = len(s), self.n_actions
        return self.transition(np.repeat(s, K, axis=0), np.tile(np.arange(K), n))

    # ------------------------------------------------------------------ truth (anchor)
    def true_value(self, states) -> np.ndarray:
        """Soft value ``V(s) = -(1/(1-gamma)) log pi(0|s)`` of the anchor-normalized reward,
        shape (n,). (Outside the box, ``V(s) = gamma V(0) - log pi(0|s)``; see module notes.)"""
        s = self._states(states)
        log_p0 = self.log_policy(s)[:, 0]
        value = -log_p0 / (1.0 - self.gamma)
        out = ~np.all(np.abs(s) <= BOX, axis=1)
        if out.any():
            v_zero = -self.log_policy(np.zeros((1, self.state_dim)))[0, 0] / (1.0 - self.gamma)
            value[out] = self.gamma * v_zero - log_p0[out]
        return value

    def true_q(self, states, actions=None) -> np.ndarray:
        """Soft Q of the anchor-normalized reward, ``Q(s, a) = log pi(a|s) + V(s)``:
        shape (n, K), or (n,) at the given ``actions``."""
        s = self._states(states)
        q = self.log_policy(s) + self.true_value(s)[:, None]
        if actions is None:
            return q
        return q[np.arange(len(s)), self._actions(actions, len(s))]

    def true_reward(self, states, actions=None, normalization: Normalization | None = None) -> np.ndarray:
        """The true reward: shape (n, K), or (n,) at the given ``actions``.

        ``normalization=None``: the anchor-normalized reward in closed form,
        ``r(s, a) = Q(s, a) - gamma V(T(s, a))`` (the specification's formula).
        Otherwise the unique reward satisfying ``normalization`` for which ``pi`` is
        soft-optimal (Theorem ``thm:unique``), computed exactly on the reachable lattice (see
        the notes of ``genpqr.envs._synthetic_lattice``; accuracy ~1e-12, checked). Action codes in ``normalization`` are
        this environment's codes ``0..K-1``.
        """
        s = self._states(states)
        n, K = len(s), self.n_actions
        rows = None if actions is None else self._actions(actions, n)
        if normalization is None:
            if rows is None:
                v_next = self.true_value(self._all_next(s)).reshape(n, K)
                return self.true_q(s) - self.gamma * v_next
            return self.true_q(s, rows) - self.gamma * self.true_value(self.transition(s, rows))
        w_s, w_next, log_p = self._solve_w(s, normalization)
        r = log_p - w_s[:, None] + self.gamma * w_next
        return r if rows is None else r[np.arange(n), rows]

    def shaping_potential(self, states, normalization: Normalization) -> np.ndarray:
        """``c(s)`` with ``r_mu = r + c - gamma c(T)`` (Lemma ``lem:shaping``), shape (n,):
        ``c = -W - V`` with ``W = mu Q^mu_{u-g}`` (``genpqr.envs._synthetic_lattice``)."""
        s = self._states(states)
        return -self._solve_w(s, normalization)[0] - self.true_value(s)

    # ------------------------------------------------------------------ exact lattice solve
    def _solve_w(self, s: np.ndarray, normalization: Normalization):
        """``W`` at ``s`` (n,), at ``T(s, a)`` (n, K), and ``log pi`` at ``s`` (n, K)."""
        return normalized_w(s, normalization, log_policy=self.log_policy, gamma=self.gamma, step=self._step,
                            moves=self._moves, box=BOX)

    # ------------------------------------------------------------------ simulation
    def simulate(self, n_trajectories: int, horizon: int = 10, random_state=None) -> Transitions:
        """Logged trajectories: ``s0 ~ N(0, I_p)``, ``a_t ~ pi(.|s_t)``, ``s_{t+1} = T(s_t, a_t)``.

        Rows are episode-major (trajectory 0 steps 0..H-1, then trajectory 1, ...), with
        ``episode_ids``, ``timesteps``, ``terminated`` all False and ``truncated`` True on each
        trajectory's last step only. ``rewards`` holds the logged rewards
        ``r(s, a) + N(0, 0.05^2)`` with ``r`` the anchor-normalized truth: **no IRL method may
        use them** (supervised oracle baselines only). Draw order: module docstring.

        Parameters
        ----------
        n_trajectories : int >= 1
        horizon : int >= 1
        random_state : None, int or numpy Generator
        """
        for name, val in (("n_trajectories", n_trajectories), ("horizon", horizon)):
            if isinstance(val, bool) or not isinstance(val, (numbers.Integral, np.integer)) or val < 1:
                raise ValueError(f"{name} must be a positive integer, got {val!r}")
        n, H, p = int(n_trajectories), int(horizon), self.state_dim
        rng = check_random_state(random_state)
        states = np.empty((n, H, p))
        actions = np.empty((n, H), dtype=np.int64)
        states[:, 0] = rng.standard_normal((n, p))
        uniforms = rng.random((H, n))
        for t in range(H):
            cdf = np.cumsum(self.policy_proba(states[:, t]), axis=1)
            actions[:, t] = np.minimum((uniforms[t][:, None] >= cdf).sum(axis=1), self.n_actions - 1)
            nxt = self.transition(states[:, t], actions[:, t])
            if t + 1 < H:
                states[:, t + 1] = nxt
        noise = rng.normal(0.0, REWARD_NOISE, size=(n, H))
        s_flat = states.reshape(n * H, p)
        a_flat = actions.reshape(-1)
        next_flat = np.concatenate([states[:, 1:], nxt[:, None]], axis=1).reshape(n * H, p)
        rewards = self.true_reward(s_flat, a_flat) + noise.reshape(-1)
        return from_arrays(
            s_flat, a_flat, next_flat,
            terminated=np.zeros(n * H, dtype=bool),
            truncated=np.tile(np.arange(H) == H - 1, n),
            episode_ids=np.repeat(np.arange(n), H),
            timesteps=np.tile(np.arange(H), n),
            rewards=rewards,
            action_labels=np.arange(self.n_actions),
            state_names=[f"s{j}" for j in range(p)],
        )


# ============================================================================== data of a seed
@dataclass(frozen=True, eq=False)
class SyntheticData:
    """One seed's benchmark: the environment and its train and test data.

    Attributes
    ----------
    env : SyntheticEnv
    train, test : Transitions
    seed : int
    """

    env: SyntheticEnv
    train: Transitions
    test: Transitions
    seed: int

    @property
    def anchor_count(self) -> int:
        """Number of training rows whose action is the anchor (0)."""
        return int(np.sum(self.train.actions == self.env.anchor))

    def true_test_reward(self, normalization: Normalization | None = None) -> np.ndarray:
        """True reward at the test set's (state, logged action) pairs, shape (n_test,)."""
        return self.env.true_reward(self.test.states, self.test.actions, normalization)

    def evaluate(self, reward, log_proba=None, normalization: Normalization | None = None) -> dict:
        """The specification's per-seed metrics.

        Parameters
        ----------
        reward : array-like of shape (n_test,)
            Estimated reward at the test (state, logged action) pairs, under ``normalization``.
        log_proba : array-like of shape (n_test, K) or (n_test,), optional
            Estimated (clipped) ``log pi_hat`` at test states (all actions, or the logged one).
        normalization : Normalization, optional
            Default: the anchor normalization of the specification.

        Returns
        -------
        dict with ``reward_mse``, ``reward_corr`` (Pearson), ``true_reward_var``, ``anchor_count``
        and, if ``log_proba`` is given, ``policy_nll``.
        """
        truth = self.true_test_reward(normalization)
        est = as_float_array(reward, "reward", ndim=1)
        if est.shape != truth.shape:
            raise ValueError(f"reward must have shape {truth.shape} (one value per test row), got {est.shape}")
        out = {
            "reward_mse": float(np.mean((est - truth) ** 2)),
            "reward_corr": float(np.corrcoef(est, truth)[0, 1]) if np.std(est) > 0 else float("nan"),
            "true_reward_var": float(np.var(truth)),
            "anchor_count": self.anchor_count,
        }
        if log_proba is not None:
            lp = as_float_array(log_proba, "log_proba")
            n = self.test.n
            if lp.shape == (n, self.env.n_actions):
                lp = lp[np.arange(n), self.test.actions]
            elif lp.shape != (n,):
                raise ValueError(f"log_proba must have shape ({n}, {self.env.n_actions}) or ({n},), got {lp.shape}")
            out["policy_nll"] = float(-np.mean(lp))
        return out


def make_synthetic_env(seed: int, n_actions: int = 5, anchor_shift: float = 0.0, state_dim: int = 5,
                       gamma: float = 0.9) -> SyntheticEnv:
    """Alias of ``SyntheticEnv.from_seed``."""
    return SyntheticEnv.from_seed(seed, n_actions=n_actions, anchor_shift=anchor_shift,
                                  state_dim=state_dim, gamma=gamma)


def make_synthetic_data(seed: int, n_train: int, n_test: int = 300, n_actions: int = 5,
                        anchor_shift: float = 0.0, horizon: int = 10, state_dim: int = 5,
                        gamma: float = 0.9) -> SyntheticData:
    """The benchmark of ``seed``: ``W`` from child 0, training trajectories from child 1 and
    test trajectories from child 2 of ``SeedSequence(seed)`` (independent streams; the same
    ``W`` and ``b``)."""
    env = make_synthetic_env(seed, n_actions, anchor_shift, state_dim, gamma)
    _, train_seq, test_seq = _streams(seed)
    train = env.simulate(n_train, horizon, random_state=np.random.default_rng(train_seq))
    test = env.simulate(n_test, horizon, random_state=np.random.default_rng(test_seq))
    return SyntheticData(env=env, train=train, test=test, seed=int(seed))


def seed_summary(values) -> tuple[float, float]:
    """``(mean, 1.96 * sd / sqrt(n))`` over per-seed values (sample sd, ``ddof = 1``)."""
    v = as_float_array(values, "values", ndim=1)
    if v.size < 2:
        raise ValueError(f"values must hold at least 2 per-seed results, got {v.size}")
    return float(v.mean()), float(1.96 * v.std(ddof=1) / math.sqrt(v.size))

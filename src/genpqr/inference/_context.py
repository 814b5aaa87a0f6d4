"""What a target is checked against, and the checks: a fitted model's actions, discount,
normalization and (tabular) states; policies, distributions and rewards that the data identify."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data._validation import plain, short_list
from ..normalization import Normalization
from ..normalization._normalization import (AnchorWeights, BehaviorWeights, FixedOffset, FixedWeights,
                                            StateAnchorWeights)

__all__ = []

REWARDS = ("normalized", "log_policy")
BEHAVIOR = ("behavior", "behaviour")


# ============================================================================ context
@dataclass(frozen=True)
class Context:
    """What a target is checked against: the fitted model's actions, discount, normalization,
    and (tabular) states."""

    n_actions: int
    gamma: float
    labels: np.ndarray
    encode: object
    taken: np.ndarray
    normalization: Normalization | None
    n_states: int | None = None
    visited: np.ndarray | None = None

    @property
    def tabular(self) -> bool:
        return self.n_states is not None

    def grid(self) -> np.ndarray:
        return np.arange(self.n_states, dtype=np.float64)[:, None]


# ============================================================================ checks
def check_reward(reward, gamma, ctx: Context | None, what: str) -> float | None:
    if reward not in REWARDS:
        raise ValueError(f"reward must be one of {list(REWARDS)}, got {reward!r}")
    if gamma is not None and not 0.0 <= float(gamma) < 1.0:
        raise ValueError(f"gamma must be in [0, 1), got {gamma!r}")
    if ctx is None:
        return gamma
    g = ctx.gamma if gamma is None else float(gamma)
    if reward == "log_policy" and abs(g - ctx.gamma) > 1e-12:
        raise ValueError(
            f"{what}: reward='log_policy' is identified only at the agent's discount gamma={ctx.gamma:g} (the log-"
            f"policy reward differs from the agent's by potential shaping, which cancels in value differences at "
            f"that discount only; notes Thm 2); at gamma={g:g} value the normalized reward: reward='normalized'")
    if reward == "normalized":
        check_normalization(ctx.normalization, what)
    return g


def check_normalization(norm, what: str) -> None:
    """Normalized-reward targets need fixed weights ``mu`` and a fixed offset ``g``."""
    if norm is None:
        raise ValueError(f"{what}: the model has no normalization to define the normalized reward")
    if not isinstance(norm.mu, (AnchorWeights, FixedWeights, StateAnchorWeights)):
        raise ValueError(
            f"{what}: the normalization ({norm.describe()}) weights by the estimated behaviour policy, so the "
            f"normalized reward moves with the first stage in a way these influence functions do not carry; use "
            f"fixed weights (anchor_action, state_anchor, mean_zero, weighted), or reward='log_policy' for a policy value")
    if not isinstance(norm.g, FixedOffset):
        raise ValueError(
            f"{what}: the normalization's offset ({norm.g.describe()}) is estimated from the data (or from the "
            f"kernel), which these influence functions do not carry; give a fixed g (scalar, (S,) array or callable)")


def resolve_policy(policy, ctx: Context, what: str):
    """A policy argument as ``(S, K)`` probabilities on the tabular grid, a callable
    ``states -> (n, K)``, or None for the behaviour policy; refused when it puts weight on an
    action the data never shows."""
    if isinstance(policy, str):
        if policy.lower() in BEHAVIOR:
            return None
        raise ValueError(f"{what}: a policy given by name must be 'behavior', got {policy!r}")
    if isinstance(policy, Normalization):
        policy = policy.mu.bind(ctx.encode)
        if isinstance(policy, BehaviorWeights):
            return None
        weights = policy
        fn = (lambda states: weights.probabilities(states, ctx.n_actions, None))
    elif isinstance(policy, dict):
        table = np.zeros(ctx.n_actions)
        codes = ctx.encode(list(policy), "policy")
        table[codes] = [float(v) for v in policy.values()]
        fn = constant_policy(table)
    elif callable(policy):
        fn = policy
    else:
        arr = np.asarray(policy, dtype=np.float64)
        if arr.ndim == 1:
            fn = constant_policy(arr)
        elif arr.ndim == 2 and ctx.tabular:
            if arr.shape != (ctx.n_states, ctx.n_actions):
                raise ValueError(f"{what}: policy must have shape (S, K) = ({ctx.n_states}, {ctx.n_actions}) (or "
                                 f"(K,) for every state), got {arr.shape}")
            fn = (lambda states, a=arr: a[states[:, 0].astype(np.int64)])
        else:
            raise ValueError(f"{what}: policy must be 'behavior', a Normalization, a dict label -> probability, a "
                             f"(K,) array{', an (S, K) array' if ctx.tabular else ''} or a callable states -> (n, K); "
                             f"got an array of shape {arr.shape}")
    return checked_policy(fn, ctx, what)


def constant_policy(row):
    row = np.asarray(row, dtype=np.float64)
    return lambda states: np.broadcast_to(row, (len(states), row.size)).copy()


def checked_policy(fn, ctx: Context, what: str):
    if not ctx.tabular:
        return PolicyFunction(fn, ctx, what)
    table = check_probabilities(fn(ctx.grid()), (ctx.n_states, ctx.n_actions), what)
    check_taken(table, ctx, what)
    return table


def check_probabilities(p, shape, what: str) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    if p.shape != tuple(shape):
        raise ValueError(f"{what}: policy probabilities must have shape {tuple(shape)}, got {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0) or np.max(np.abs(p.sum(axis=1) - 1.0), initial=0) > 1e-8:
        raise ValueError(f"{what}: policy probabilities must be non-negative and sum to 1 over the actions")
    return p


def check_taken(table, ctx: Context, what: str) -> None:
    unseen = np.flatnonzero((np.max(table, axis=0) > 0) & ~ctx.taken)
    if unseen.size:
        raise ValueError(
            f"{what}: the policy puts probability on action(s) {short_list([plain(x) for x in ctx.labels[unseen]])} "
            f"that the data never shows: no choice reveals their reward, so the value is not identified")


@dataclass(frozen=True)
class PolicyFunction:
    """A policy on continuous states: ``states -> (n, K)`` probabilities, checked when called."""

    fn: object
    ctx: Context
    what: str

    def __call__(self, states) -> np.ndarray:
        p = check_probabilities(self.fn(states), (len(states), self.ctx.n_actions), self.what)
        check_taken(p, self.ctx, self.what)
        return p


def check_start(start, ctx: Context | None, what: str):
    if start is None or (isinstance(start, str) and start == "data"):
        return None
    if isinstance(start, str):
        raise ValueError(f"{what}: start must be 'data' or an (S,) distribution over states, got {start!r}")
    if ctx is None:
        return np.asarray(start, dtype=np.float64)
    if not ctx.tabular:
        raise ValueError(f"{what}: a start distribution (S,) needs tabular states; on continuous states values "
                         f"start from the data's state law (start='data')")
    arr = np.asarray(start, dtype=np.float64)
    if arr.shape != (ctx.n_states,) or np.any(arr < 0) or abs(arr.sum() - 1.0) > 1e-8:
        raise ValueError(f"{what}: start must be a distribution over the {ctx.n_states} states (shape "
                         f"({ctx.n_states},), non-negative, summing to 1), got shape {arr.shape}")
    check_visited(arr, ctx, what, "start")
    return arr


def check_visited(mass, ctx: Context, what: str, name: str) -> None:
    """Weight on states no row visits: the reward there is the first stage's extrapolation."""
    if ctx.visited is None:
        return
    off = np.flatnonzero((np.abs(mass) > 0) & ~ctx.visited)
    if off.size:
        raise ValueError(f"{what}: {name} puts weight on state(s) {short_list(off.tolist())} that no row visits: "
                         f"the reward there is not identified by the data")



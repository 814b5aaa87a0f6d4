"""Logged transitions with continuous actions, and the action space they live in.

:class:`ContinuousTransitions` mirrors :class:`genpqr.data.Transitions` with real-valued
actions of shape ``(n, m)`` instead of integer codes, an :class:`ActionSpace` (the stated
support: a box, possibly unbounded) and optional ``sample_weight``. The reference measure of
every log-density in :mod:`genpqr.continuous` is Lebesgue measure on that action space
(unless a :class:`~genpqr.measures.ReferenceMeasure` is given), so the space is part
of the data, not an afterthought: actions outside it are an error.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .._checks import as_float_array, check_length
from ..data import EpisodeRows, _flags, _optional_vector

__all__ = ["ActionSpace", "ContinuousTransitions", "from_arrays", "as_actions"]


@dataclass(frozen=True, eq=False)
class ActionSpace:
    """A box ``[low, high]`` in ``R^m``; infinite bounds allowed (``R^m`` by default).

    Attributes
    ----------
    low, high : ndarray of shape (m,)
    """

    low: np.ndarray
    high: np.ndarray

    def __post_init__(self):
        low = np.atleast_1d(np.asarray(self.low, dtype=np.float64)).copy()
        high = np.atleast_1d(np.asarray(self.high, dtype=np.float64)).copy()
        if low.ndim != 1 or low.shape != high.shape:
            raise ValueError(f"action_low and action_high must be (m,) arrays of equal shape, got {low.shape} and "
                             f"{high.shape}")
        if np.isnan(low).any() or np.isnan(high).any():
            raise ValueError("action_low and action_high must not be NaN")
        if np.any(low >= high):
            j = int(np.argmax(low >= high))
            raise ValueError(f"action_low must be below action_high in every dimension; dimension {j} has "
                             f"low={low[j]} >= high={high[j]}")
        low.setflags(write=False)
        high.setflags(write=False)
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    @classmethod
    def create(cls, dim: int, low=None, high=None) -> "ActionSpace":
        """``low``/``high``: None (unbounded), a scalar or an (m,) array."""
        lo = np.full(dim, -np.inf) if low is None else np.broadcast_to(np.asarray(low, dtype=np.float64), (dim,))
        hi = np.full(dim, np.inf) if high is None else np.broadcast_to(np.asarray(high, dtype=np.float64), (dim,))
        return cls(lo, hi)

    @property
    def dim(self) -> int:
        return int(self.low.size)

    @property
    def is_bounded(self) -> bool:
        """Every dimension has finite bounds (the Lebesgue reference measure is finite)."""
        return bool(np.all(np.isfinite(self.low)) and np.all(np.isfinite(self.high)))

    @property
    def is_unbounded(self) -> bool:
        """No dimension has a finite bound (``R^m``)."""
        return bool(np.all(np.isinf(self.low)) and np.all(np.isinf(self.high)))

    @property
    def volume(self) -> float:
        return float(np.prod(self.high - self.low)) if self.is_bounded else float("inf")

    def contains(self, actions: np.ndarray) -> np.ndarray:
        """Boolean mask over the leading axes of ``actions`` (..., m): inside the closed box."""
        return np.all((actions >= self.low) & (actions <= self.high), axis=-1)

    def check(self, actions: np.ndarray, name: str = "actions") -> None:
        """Raise ValueError when any action lies outside the space."""
        inside = self.contains(actions)
        if not np.all(inside):
            bad = np.argwhere(~inside)[0]
            first = tuple(int(i) for i in bad)
            where = f"row {first[0]}" if len(first) == 1 else f"index {first}"
            raise ValueError(
                f"{name} has {int((~inside).sum())} action(s) outside the stated support {self.describe()} "
                f"(first at {where}: {np.asarray(actions)[first].tolist()}); widen action_low/action_high or "
                "fix the data"
            )

    def same_as(self, other: "ActionSpace") -> bool:
        return self.dim == other.dim and np.array_equal(self.low, other.low) and np.array_equal(self.high, other.high)

    def describe(self) -> str:
        if self.is_unbounded:
            return f"R^{self.dim}"
        parts = [f"[{lo:g}, {hi:g}]" for lo, hi in zip(self.low, self.high)]
        return " x ".join(parts)

    def reference_measure(self) -> str:
        """The default reference measure: Lebesgue measure on the space."""
        return f"Lebesgue measure on {self.describe()}"

    def __repr__(self):
        return f"ActionSpace({self.describe()})"


def as_actions(actions, name: str = "actions", dim: int | None = None) -> np.ndarray:
    """Real actions as an (n, m) float array (a 1-D input is one action dimension)."""
    arr = np.asarray(actions)
    if arr.dtype.kind not in "iuf":
        raise TypeError(
            f"{name} must be real-valued (continuous actions), got dtype {arr.dtype}; for discrete action labels "
            "use genpqr.from_arrays and genpqr.GenPQR"
        )
    arr = as_float_array(arr, name, ndim=2, allow_1d_as_column=True)
    if dim is not None and arr.shape[1] != dim:
        raise ValueError(f"{name} must have {dim} column(s) (the action dimension), got {arr.shape[1]}")
    return arr


@dataclass(frozen=True, eq=False)
class ContinuousTransitions(EpisodeRows):
    """Validated transitions ``(s_i, a_i, s'_i)`` with real actions. Build with :func:`from_arrays`.

    Attributes
    ----------
    states, next_states : ndarray of shape (n, d)
    actions : ndarray of shape (n, m)
    terminated, truncated : ndarray of shape (n,), bool
    episode_ids : ndarray of shape (n,), int64
    action_space : ActionSpace
    sample_weight : ndarray of shape (n,) or None
        Non-negative row weights (e.g. quadrature weights of an exact design, importance weights).
    outcomes, rewards, timesteps : ndarray of shape (n,) or None
    """

    states: np.ndarray
    actions: np.ndarray
    next_states: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    episode_ids: np.ndarray
    action_space: ActionSpace
    sample_weight: np.ndarray | None = None
    outcomes: np.ndarray | None = None
    rewards: np.ndarray | None = None
    timesteps: np.ndarray | None = None
    state_names: tuple[str, ...] | None = field(default=None)

    _ROW_FIELDS = EpisodeRows._ROW_FIELDS + ("sample_weight",)

    def __post_init__(self):
        if self.actions.ndim != 2 or self.actions.shape[1] != self.action_space.dim:
            raise ValueError(f"actions must have shape (n, {self.action_space.dim}), got {self.actions.shape}")
        self._check_rows()
        self.action_space.check(self.actions)

    @property
    def action_dim(self) -> int:
        return int(self.actions.shape[1])

    @property
    def weights(self) -> np.ndarray:
        """``sample_weight`` or ones, shape (n,)."""
        return np.ones(self.n) if self.sample_weight is None else np.asarray(self.sample_weight)

    def to_pandas(self):
        """One row per transition: state columns, action columns ``a0..``, next-state columns."""
        import pandas as pd

        names = list(self.state_names or [f"s{j}" for j in range(self.state_dim)])
        frame = pd.DataFrame(self.states, columns=names)
        frame.insert(0, "episode", self.episode_ids)
        for j in range(self.action_dim):
            frame[f"a{j}"] = self.actions[:, j]
        for j, name in enumerate(names):
            frame[f"next_{name}"] = self.next_states[:, j]
        frame["terminated"] = self.terminated
        frame["truncated"] = self.truncated
        for name in ("sample_weight", "outcomes", "rewards"):
            if getattr(self, name) is not None:
                frame[name] = getattr(self, name)
        return frame


def from_arrays(states, actions, next_states, *, action_low=None, action_high=None, terminated=None,
                truncated=None, episode_ids=None, sample_weight=None, outcomes=None, rewards=None, timesteps=None,
                state_names: Sequence[str] | None = None) -> ContinuousTransitions:
    """Continuous-action transitions from arrays.

    Parameters
    ----------
    states, next_states : array-like of shape (n, d) or (n,)
    actions : array-like of shape (n, m) or (n,)
        Real-valued actions.
    action_low, action_high : float or array-like of shape (m,), optional
        The stated support (default unbounded: ``R^m``). Actions outside raise ValueError.
        The reference measure of the log-densities, hence the recovered reward, is Lebesgue
        measure on this box.
    terminated, truncated : array-like of bool, shape (n,), optional
    episode_ids : array-like of shape (n,), optional (default: one episode per row)
    sample_weight : array-like of shape (n,), optional
        Non-negative row weights used by both stages.
    outcomes, rewards, timesteps : array-like of shape (n,), optional
    """
    states_arr = as_float_array(states, "states", ndim=2, allow_1d_as_column=True).copy()
    next_arr = as_float_array(next_states, "next_states", ndim=2, allow_1d_as_column=True).copy()
    acts = as_actions(actions).copy()
    n = acts.shape[0]
    if n == 0:
        raise ValueError("transitions must contain at least one row, got 0")
    check_length(states_arr, n, "states", "actions")
    check_length(next_arr, n, "next_states", "actions")
    if next_arr.shape[1] != states_arr.shape[1]:
        raise ValueError(f"next_states must have the same number of columns as states ({states_arr.shape[1]}), "
                         f"got {next_arr.shape[1]}")
    _warn_if_discrete(np.asarray(actions), acts)
    space = ActionSpace.create(acts.shape[1], action_low, action_high)
    if episode_ids is None:
        ep = np.arange(n, dtype=np.int64)
    else:
        ep_raw = np.asarray(episode_ids)
        if ep_raw.shape != (n,):
            raise ValueError(f"episode_ids must have shape ({n},), got {ep_raw.shape}")
        ep = np.unique(ep_raw, return_inverse=True)[1].astype(np.int64).reshape(-1)
    weight = _optional_vector(sample_weight, n, "sample_weight")
    if weight is not None and (weight.min() < 0 or weight.sum() <= 0):
        raise ValueError("sample_weight must be non-negative with a positive sum")
    return ContinuousTransitions(
        states=states_arr, actions=acts, next_states=next_arr, terminated=_flags(terminated, n, "terminated"),
        truncated=_flags(truncated, n, "truncated"), episode_ids=ep, action_space=space, sample_weight=weight,
        outcomes=_optional_vector(outcomes, n, "outcomes"), rewards=_optional_vector(rewards, n, "rewards"),
        timesteps=_optional_vector(timesteps, n, "timesteps"),
        state_names=tuple(state_names) if state_names is not None else None,
    )


def _warn_if_discrete(raw: np.ndarray, acts: np.ndarray) -> None:
    """Integer-coded actions with few distinct values are probably discrete choices."""
    if raw.dtype.kind in "iub" and acts.shape[0] >= 50:
        n_unique = np.unique(acts, axis=0).shape[0]
        if n_unique <= 20:
            warnings.warn(
                f"actions are integers with only {n_unique} distinct values; if they are discrete choices use "
                "genpqr.from_arrays and genpqr.GenPQR (a density over a handful of points is not a continuous "
                "policy)", UserWarning, stacklevel=3)

"""Deprecated: continuous-action transitions are :class:`genpqr.Transitions` over a
:class:`genpqr.spaces.BoxActions` (build them with ``genpqr.from_arrays(...,
action_space="box")``). The names here build the unified class and warn.

* :data:`ActionSpace` is :class:`genpqr.spaces.BoxActions`;
* :func:`from_arrays` is ``genpqr.from_arrays(..., action_space="box")``;
* ``ContinuousTransitions(...)`` builds a :class:`~genpqr.transitions.Transitions`, and
  ``isinstance(x, ContinuousTransitions)`` is true for transitions with continuous actions.
"""

from __future__ import annotations

import warnings
from typing import Sequence

from ..builders import from_arrays as _from_arrays
from ..spaces import BoxActions, as_actions
from ..transitions import Transitions

__all__ = ["ActionSpace", "ContinuousTransitions", "from_arrays", "as_actions"]

#: The box action space (former name).
ActionSpace = BoxActions


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated and will be removed in the next release; use {new}", DeprecationWarning,
                  stacklevel=3)


class _ContinuousMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Transitions) and not obj.action_space.is_finite


class ContinuousTransitions(metaclass=_ContinuousMeta):
    """Deprecated alias: builds a :class:`~genpqr.transitions.Transitions` with continuous actions."""

    def __new__(cls, *args, **kwargs):
        _deprecated("genpqr.continuous.ContinuousTransitions", "genpqr.Transitions (action_space=BoxActions)")
        return Transitions(*args, **kwargs)


def from_arrays(states, actions, next_states, *, action_low=None, action_high=None, terminated=None,
                truncated=None, episode_ids=None, sample_weight=None, outcomes=None, rewards=None, timesteps=None,
                state_names: Sequence[str] | None = None) -> Transitions:
    """Deprecated: ``genpqr.from_arrays(states, actions, next_states, action_space="box", ...)``."""
    _deprecated("genpqr.continuous.from_arrays", "genpqr.from_arrays(..., action_space='box')")
    return _from_arrays(states, actions, next_states, action_space="box", action_low=action_low,
                        action_high=action_high, terminated=terminated, truncated=truncated, episode_ids=episode_ids,
                        sample_weight=sample_weight, outcomes=outcomes, rewards=rewards, timesteps=timesteps,
                        state_names=state_names)

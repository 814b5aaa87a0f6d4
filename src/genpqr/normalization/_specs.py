"""The normalizations users name (``anchor:a``, ``mean-zero``, ``gaussian:0,1``...): the entries of
:data:`genpqr.registry.NORMALIZATIONS` (finite actions) and
:data:`genpqr.registry.CONTINUOUS_NORMALIZATIONS` (a box), beside the classes they build
(``genpqr.normalization._normalization``). Factories import lazily: declaring them imports nothing heavy.

Finite-action factories receive ``label(text, what)`` (the data's action label typed as
``text``) and ``state_column(name, holds, what)`` (a data column's value per state, or a lookup
at new states; ``holds`` is ``"labels"`` or ``"numbers"``); box factories receive the action
``space`` and the logged ``actions`` (n, m).
"""

from __future__ import annotations

import warnings

from ..messages import Mention, Message
from ..registry import (ANCHORED, COLUMN, CONTINUOUS_NORMALIZATIONS, NORMALIZATIONS, OUTCOME, STREAMS, Argument)

__all__: list = []


# ------------------------------------------------------------------------------ finite actions
@NORMALIZATIONS.register("anchor", argument=Argument("ACTION"), capabilities=(STREAMS, ANCHORED),
                         help="all weight on the anchor action: r(s, ACTION) = 0 in every state")
def _anchor(action, *, label, **context):
    from ._normalization import anchor_action

    return anchor_action(label(action, "anchor action"))


@NORMALIZATIONS.register("mean-zero", capabilities=(STREAMS,), aliases=("meanzero",),
                         elsewhere=" (the continuous counterpart of mean-zero is uniform, on bounded actions)",
                         help="uniform weights: the reward averages 0 over the actions in every state")
def _mean_zero(_, **context):
    from ._normalization import mean_zero

    return mean_zero()


@NORMALIZATIONS.register("state-anchor", argument=Argument("COLUMN"), capabilities=(COLUMN, ANCHORED),
                         column="labels", missing=False,
                         help="the anchor action of each state, read from a data column")
def _state_anchor(column, *, state_column, **context):
    from ._normalization import state_anchor

    return state_anchor(state_column(column, "labels", "anchor action"))


@NORMALIZATIONS.register("value", argument=Argument("COLUMN"), capabilities=(COLUMN,), column="numbers",
                         missing=True, help="the behaviour's value V(s) = COLUMN (one value per state)")
def _value(column, *, state_column, **context):
    from ._normalization import value

    return value(state_column(column, "numbers", "value"))


@NORMALIZATIONS.register("behavior", argument=Argument("OUTCOME_COLUMN"), aliases=("behaviour",),
                         capabilities=(COLUMN, OUTCOME), column="numbers", missing=False,
                         help="mu = the behaviour policy, g(s) = E[OUTCOME_COLUMN | s]")
def _behavior(column, **context):
    from ._normalization import behavior

    return behavior()


# ------------------------------------------------------------------------------ a box of actions
def _numbers(text: str) -> tuple:
    import math

    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or not all(math.isfinite(v) for v in values):
        raise ValueError("numbers (one value per action dimension, comma-separated)")
    return values


def _mean_scale(text: str) -> tuple:
    values = _numbers(text)
    if len(values) != 2 or values[1] <= 0:
        raise ValueError("a mean and a positive scale")
    return values


def _no_outcome_column(text: str):
    raise ValueError("no outcome column for continuous actions (g from an outcome column is not supported for "
                     "continuous actions; behavior alone is mu = pi_hat with a mean reward of 0 under the behaviour)")


@CONTINUOUS_NORMALIZATIONS.register("anchor", argument=Argument("VALUE[,VALUE...]", _numbers),
                                    help="point mass at the anchor action VALUE (one value per dimension)")
def _point_anchor(values, *, space, actions, **context):
    import numpy as np

    from ..exceptions import WeakSupportWarning
    from ._normalization import point_anchor

    m = space.dim
    if len(values) not in (1, m):
        raise ValueError(Message(Mention("normalization"), f" anchor needs one value per action dimension ({m}), got "
                                                           f"{len(values)}: {list(values)}"))
    a0 = np.broadcast_to(np.asarray(values, dtype=np.float64), (m,)).copy()
    if not space.contains(a0[None])[0]:
        raise ValueError(f"the anchor action {a0.tolist()} lies outside the action support {space.describe()}")
    lo, hi = actions.min(axis=0), actions.max(axis=0)
    if np.any((a0 < lo) | (a0 > hi)):
        warnings.warn(f"the anchor action {a0.tolist()} lies outside the range of the logged actions "
                      f"({lo.tolist()} to {hi.tolist()}): the reward there rests on extrapolation of the policy "
                      "density", WeakSupportWarning)
    return point_anchor(a0 if m > 1 else float(a0[0]))


@CONTINUOUS_NORMALIZATIONS.register("gaussian", argument=Argument("MEAN,SCALE", _mean_scale),
                                    help="mu = N(MEAN, SCALE^2) in every dimension (unbounded actions)")
def _gaussian(values, *, space, **context):
    from ._normalization import gaussian

    if not space.is_unbounded:
        raise ValueError(Message(Mention("normalization"), f" gaussian puts mass outside the bounded action support "
                                                           f"{space.describe()}; use uniform or anchor:VALUE"))
    return gaussian(values[0], values[1])


@CONTINUOUS_NORMALIZATIONS.register("uniform", help="uniform mu on the box (bounded actions)")
def _uniform(_, *, space, **context):
    from ._normalization import uniform

    if not space.is_bounded:
        raise ValueError(Message(Mention("normalization"), " uniform needs bounded actions: give ",
                                 Mention("action_low"), " and ", Mention("action_high")))
    return uniform()


@CONTINUOUS_NORMALIZATIONS.register("behavior", argument=Argument("", _no_outcome_column, optional=True),
                                    aliases=("behaviour",), form="behavior",
                                    help="mu = the behaviour's density pi_hat, g = 0")
def _behavior_kernel(_, **context):
    from ..actions import BehaviorKernel
    from ._normalization import FixedOffset, Normalization

    return Normalization(BehaviorKernel(), FixedOffset(0.0), "behavior")

"""``genpqr fit --action-type continuous``: the continuous-action path of :func:`genpqr.app.workflow.run_fit`.

The action column(s) hold real numbers (``--action a1,a2`` for several dimensions) inside an
optional box ``[--action-low, --action-high]`` (default ``R^m``). Next states are paired with
rows exactly as for discrete actions (``genpqr.data._long_format.long_format_rows``: the last row of an
episode that did not terminate has no next state and is dropped). The model is
:class:`genpqr.GenPQR` on transitions with continuous actions (a
:class:`~genpqr.data.BoxActions`):

* policy (``--policy-model``): a density of :data:`genpqr.registry.DENSITIES`, ``gaussian``
  (:class:`~genpqr.actions.LinearGaussianDensity`, degree 2, heteroscedastic) by default; the
  built-in ones are squashed onto the box (:class:`~genpqr.actions.SquashedDensity`) when the
  actions are bounded, one named by its import path ``package.module:Class`` is used as is;
* Q (``--q-model``): a regressor on ``[s, a]`` of :data:`genpqr.registry.CONTINUOUS_Q_MODELS`,
  ``linear`` (degree-2 polynomial features + least squares) by default;
* normalization: a reference kernel of :data:`genpqr.registry.CONTINUOUS_NORMALIZATIONS`
  (``anchor:VALUE[,VALUE...]``, ``gaussian:MEAN,SCALE``, ``uniform``, ``behavior``);
* ``--integration``: a rule of :data:`genpqr.registry.INTEGRATION_RULES` (default ``mc:32``).

Outputs as for discrete actions: ``model.joblib`` (``genpqr.load``), ``rewards.csv`` (one
row per data row: episode, time, state and action columns, ``reward`` and ``continuation``
at the logged action), ``config.json``, ``report.html`` (:mod:`genpqr.app.report_continuous`).
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np

from ..data._validation import data_row
from .build import FitData, build_estimator
from .config import CONTINUOUS, FIT_OPTIONS, FitConfig, action_columns
from .outputs import FitOutputs, warning_messages, write_outputs

__all__ = ["action_columns", "action_space", "check_actions", "read_continuous", "run_continuous_fit",
           "DEFAULT_INTEGRATION"]

DEFAULT_INTEGRATION = "mc:32"


def action_space(config: FitConfig, dim: int):
    """The :class:`~genpqr.data.BoxActions` of ``--action-low/--action-high``."""
    from ..data import BoxActions as ActionSpace

    if config.action_low is None:
        return ActionSpace.create(dim)
    bounds = []
    for flag, values in (("--action-low", config.action_low), ("--action-high", config.action_high)):
        if len(values) not in (1, dim):
            raise ValueError(f"{flag} needs one value or one per action dimension ({dim}), got {len(values)}: "
                             f"{values}")
        bounds.append(np.broadcast_to(np.asarray(values, dtype=np.float64), (dim,)))
    space = ActionSpace(*bounds)
    if not (space.is_bounded or space.is_unbounded):
        raise ValueError(f"the action support {space.describe()} is bounded in some dimensions only; give finite "
                         "--action-low and --action-high in every dimension (or neither)")
    return space


# ============================================================================ data
def read_continuous(frame, config: FitConfig, space):
    """:class:`~genpqr.data.Transitions` with continuous actions from the long-format frame."""
    from ..data import from_arrays
    from ..data._long_format import check_some_rows, long_format_rows

    cols = action_columns(config)
    rows = long_format_rows(frame, episode=config.episode, time=config.time, state=config.state,
                            terminated=config.terminated, truncated=config.truncated, time_gaps=config.time_gaps,
                            other=cols)
    check_some_rows(rows, config.episode)
    df, idx = rows.frame, rows.index
    return from_arrays(rows.states, df[cols].to_numpy()[idx], rows.next_states, action_space="box",
                       action_low=space.low,
                       action_high=space.high, terminated=rows.terminated, truncated=rows.truncated,
                       episode_ids=rows.episode_ids, timesteps=rows.timesteps,
                       outcomes=None if not config.outcome else df[config.outcome].to_numpy(dtype=np.float64)[idx],
                       state_names=list(config.state))


def check_actions(frame, config: FitConfig, space) -> np.ndarray:
    """Numeric, finite actions inside the support; returns the (n_rows, m) action array."""
    import pandas as pd

    for col in action_columns(config):
        series = frame[col]
        if not (pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)):
            example = series.dropna().iloc[0] if series.notna().any() else None
            raise ValueError(f"action column {col!r} must hold numbers with --action-type continuous, got text (e.g. "
                             f"{example!r}); for action labels use --action-type discrete")
        values = series.to_numpy(dtype=np.float64)
        if not np.all(np.isfinite(values)):
            bad = int(np.flatnonzero(~np.isfinite(values))[0])
            raise ValueError(f"action column {col!r} has {int((~np.isfinite(values)).sum())} missing or infinite "
                             f"value(s) (first at {data_row(bad)})")
    actions = frame[action_columns(config)].to_numpy(dtype=np.float64)
    inside = space.contains(actions)
    if not inside.all():
        row = int(np.flatnonzero(~inside)[0])
        raise ValueError(f"{int((~inside).sum())} action(s) lie outside --action-low/--action-high "
                         f"{space.describe()} (first at {data_row(row)}: {actions[row].tolist()}); widen the bounds or "
                         "fix the data")
    if np.unique(actions, axis=0).shape[0] < 2:
        raise ValueError(f"the action column(s) {action_columns(config)} hold a single value: no policy density and "
                         "no reward can be estimated")
    return actions


# ============================================================================ the fit
def run_continuous_fit(config: FitConfig, frame):
    """Fit :class:`genpqr.GenPQR` to a checked frame of continuous actions and write the outputs;
    returns FitOutputs."""
    unsupported = FIT_OPTIONS.refused(config, CONTINUOUS)
    if unsupported:
        raise ValueError(f"{', '.join(unsupported)} cannot be combined with --action-type continuous (tabular "
                         "mode and the bootstrap are for discrete actions)")
    config = replace(config, policy_model=config.policy_model or "gaussian", q_model=config.q_model or "linear",
                     integration=config.integration or DEFAULT_INTEGRATION)
    m = len(action_columns(config))
    space = action_space(config, m)
    actions = check_actions(frame, config, space)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = read_continuous(frame, config, space)
        if config.cross_fit >= 2 and data.n_episodes < config.cross_fit:
            raise ValueError(f"--cross-fit {config.cross_fit} needs at least {config.cross_fit} episodes, but the "
                             f"data has {data.n_episodes}; lower it or use --cross-fit 0 (in-sample diagnostics)")
        built = build_estimator(config, FitData(transitions=data, space=space, actions=data.actions))
        model = built.estimator.fit(data)
    rewards = continuous_rewards(model, frame, config, actions)
    outputs = FitOutputs(config, model, data, rewards, None, None, warning_messages(caught), {}, False)
    write_outputs(outputs, n_rows=len(frame))
    return outputs


def continuous_rewards(model, frame, config: FitConfig, actions: np.ndarray):
    """One row per data row: episode, time, state and action columns, reward, continuation."""
    states = frame[config.state].to_numpy(dtype=np.float64)
    cols = [config.episode, config.time, *config.state, *action_columns(config)]
    rewards = frame[list(dict.fromkeys(cols))].copy()
    rewards["reward"] = model.reward(states, actions)
    rewards["continuation"] = model.continuation(states, actions)
    return rewards

"""``genpqr fit --action-type continuous``: the continuous-action path of :func:`genpqr.app.workflow.run_fit`.

The action column(s) hold real numbers (``--action a1,a2`` for several dimensions) inside an
optional box ``[--action-low, --action-high]`` (default ``R^m``). Next states are paired with
rows exactly as for discrete actions (:func:`genpqr.data.long_format_rows`: the last row of an
episode that did not terminate has no next state and is dropped). The model is
:class:`genpqr.GenPQR` on transitions with continuous actions (a
:class:`~genpqr.data.BoxActions`):

* policy (``--policy-model``): ``gaussian`` (:class:`~genpqr.actions.LinearGaussianDensity`,
  degree 2, heteroscedastic; default), ``mlp-gaussian``, ``mdn``, ``flow`` (needs ``zuko``) or
  ``package.module:Class``; the built-in ones are squashed onto the box
  (:class:`~genpqr.actions.SquashedDensity`) when the actions are bounded, an imported one is
  used as is;
* Q (``--q-model``): a regressor on ``[s, a]``: ``linear`` (degree-2 polynomial features +
  least squares; default), ``hgb``, ``mlp`` (scikit-learn ``MLPRegressor`` on standardized
  inputs), ``lightgbm`` or ``package.module:Class``;
* normalization: ``anchor:VALUE[,VALUE...]`` (point mass), ``gaussian:MEAN,SCALE``,
  ``uniform`` (bounded actions), ``behavior`` (``mu = pi_hat``);
* ``--integration``: ``mc:N`` (default ``mc:32``), ``gauss-hermite:N``, ``gauss-legendre:N``.

Outputs as for discrete actions: ``model.joblib`` (``genpqr.load``), ``rewards.csv`` (one
row per data row: episode, time, state and action columns, ``reward`` and ``continuation``
at the logged action), ``config.json``, ``report.html`` (:mod:`genpqr.app.report_continuous`).
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np

from ..data.validation import data_row
from .config import (CONTINUOUS_POLICY_MODELS, CONTINUOUS_Q_MODELS, FitConfig, action_columns,
                     parse_integration, parse_normalization)
from .model_choice import import_object
from .outputs import FitOutputs, warning_messages, write_outputs

__all__ = ["action_columns", "action_space", "check_actions", "make_density", "continuous_q_settings",
           "make_integration", "continuous_normalization", "read_continuous", "run_continuous_fit",
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


# ============================================================================ models
def make_density(name: str, space, seed: int):
    """The stage-1 conditional density named by ``--policy-model`` (squashed onto a bounded box)."""
    from .. import actions as C
    from ..models.neural_densities import FlowDensity, MixtureDensityNetwork, MLPGaussianDensity

    if name == "gaussian":
        base = C.LinearGaussianDensity(degree=2, heteroscedastic=True)
    elif name == "mlp-gaussian":
        base = MLPGaussianDensity(random_state=seed)
    elif name == "mdn":
        base = MixtureDensityNetwork(n_components=3, random_state=seed)
    elif name == "flow":
        FlowDensity._zuko()  # a clear ImportError now rather than at fit time
        base = FlowDensity(random_state=seed)
    elif ":" in name:
        return import_object(name, "density")
    else:
        hint = (" (a classifier for discrete actions; continuous actions need a conditional density)"
                if name in ("frequency", "logistic", "mlp", "lightgbm") else "")
        raise ValueError(f"--policy-model {name} cannot be used with --action-type continuous{hint}; use one of "
                         f"{list(CONTINUOUS_POLICY_MODELS)} or package.module:Class")
    return C.SquashedDensity(base, space.low, space.high) if space.is_bounded else base


def continuous_q_settings(name: str, *, seed: int, n_iterations: int | None) -> dict:
    """GenPQR keyword arguments for the stage-2 regressor named by ``--q-model`` (an FQE)."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from ..stage2 import FQE

    if name == "linear":
        from sklearn.linear_model import LinearRegression
        from sklearn.preprocessing import PolynomialFeatures

        return dict(q_model=FQE(make_pipeline(PolynomialFeatures(2), LinearRegression()),
                                n_iterations=n_iterations or 500, tol=1e-6))
    if name == "hgb":
        from sklearn.ensemble import HistGradientBoostingRegressor

        return dict(q_model=FQE(HistGradientBoostingRegressor(max_iter=100, random_state=seed),
                                n_iterations=n_iterations or 50, tol=1e-4))
    if name == "mlp":
        from sklearn.neural_network import MLPRegressor

        return dict(q_model=FQE(make_pipeline(StandardScaler(), MLPRegressor((64, 64), max_iter=200,
                                                                             random_state=seed)),
                                n_iterations=n_iterations or 30, tol=1e-4))
    if name == "lightgbm":
        try:
            from lightgbm import LGBMRegressor
        except ImportError:
            raise ValueError("--q-model lightgbm needs the lightgbm package (pip install genpqr[lightgbm])") from None
        return dict(q_model=FQE(LGBMRegressor(verbose=-1, random_state=seed, n_jobs=1),
                                n_iterations=n_iterations or 50, tol=1e-4))
    if ":" in name:
        return dict(q_model=FQE(import_object(name, "Q model"), n_iterations=n_iterations or 100))
    hint = " (the exact solver needs discrete actions and tabular states)" if name == "exact" else ""
    raise ValueError(f"--q-model {name} cannot be used with --action-type continuous{hint}; use one of "
                     f"{list(CONTINUOUS_Q_MODELS)} or package.module:Class")


def make_integration(spec: str):
    """The integration rule of ``--integration``."""
    from ..actions import GaussHermite, GaussLegendre, MonteCarlo

    kind, n = parse_integration(spec)
    return {"mc": MonteCarlo, "gauss-hermite": GaussHermite, "gauss-legendre": GaussLegendre}[kind](n)


def continuous_normalization(kind: str, arg, space, actions: np.ndarray):
    """The :class:`~genpqr.normalization.Normalization` (a reference kernel ``mu``) of a parsed continuous spec."""
    from .. import normalization as CN
    from ..exceptions import WeakSupportWarning
    from ..actions import BehaviorKernel

    m = space.dim
    if kind == "anchor":
        if len(arg) not in (1, m):
            raise ValueError(f"--normalization anchor needs one value per action dimension ({m}), got {len(arg)}: "
                             f"{list(arg)}")
        a0 = np.broadcast_to(np.asarray(arg, dtype=np.float64), (m,)).copy()
        if not space.contains(a0[None])[0]:
            raise ValueError(f"the anchor action {a0.tolist()} lies outside the action support {space.describe()}")
        lo, hi = actions.min(axis=0), actions.max(axis=0)
        if np.any((a0 < lo) | (a0 > hi)):
            warnings.warn(f"the anchor action {a0.tolist()} lies outside the range of the logged actions "
                          f"({lo.tolist()} to {hi.tolist()}): the reward there rests on extrapolation of the policy "
                          "density", WeakSupportWarning)
        return CN.point_anchor(a0 if m > 1 else float(a0[0]))
    if kind == "gaussian":
        if not space.is_unbounded:
            raise ValueError(f"--normalization gaussian puts mass outside the bounded action support "
                             f"{space.describe()}; use uniform or anchor:VALUE")
        return CN.gaussian(arg[0], arg[1])
    if kind == "uniform":
        if not space.is_bounded:
            raise ValueError("--normalization uniform needs bounded actions: give --action-low and --action-high")
        return CN.uniform()
    return CN.Normalization(BehaviorKernel(), CN.FixedOffset(0.0), "behavior")


# ============================================================================ data
def read_continuous(frame, config: FitConfig, space):
    """:class:`~genpqr.data.Transitions` with continuous actions from the long-format frame."""
    from ..data import from_arrays
    from ..data import check_some_rows, long_format_rows

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
    from ..estimator import ContinuousOptions, GenPQR

    unsupported = [flag for flag, on in (("--bins", config.bins), ("--features", config.features),
                                         ("--transition", config.transition not in ("counts", "auto")),
                                         ("--n-states", config.n_states), ("--bootstrap", config.bootstrap))
                   if on]
    if unsupported:
        raise ValueError(f"{', '.join(unsupported)} cannot be combined with --action-type continuous (tabular "
                         "mode and the bootstrap are for discrete actions)")
    if config.q_model == "exact":
        continuous_q_settings("exact", seed=0, n_iterations=None)
    kind, arg = parse_normalization(config.normalization, continuous=True)
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
        normalization = continuous_normalization(kind, arg, space, data.actions)
        model = GenPQR(normalization=normalization, gamma=config.gamma,
                       policy_model=make_density(config.policy_model, space, config.seed),
                       cross_fit=config.cross_fit if config.cross_fit >= 2 else None, random_state=config.seed,
                       **continuous_q_settings(config.q_model, seed=config.seed, n_iterations=config.n_iterations),
                       continuous=ContinuousOptions(integration=make_integration(config.integration))).fit(data)
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

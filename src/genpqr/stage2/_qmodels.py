"""Q-models of fitted Q evaluation (:mod:`genpqr.stage2`): how a regressor sees actions.

Finite actions: a regressor enters in one of four encodings (``"per_action"``: one clone
per action on ``s``; ``"joint"``: one regressor on ``[s, onehot(a)]``; ``"action_features"``:
one regressor on ``[s, x_a]`` from the action table, shared across actions and predicting
never-taken ones (``genpqr.stage2._feature_q.FeatureQ``); ``"native"``: a model with
``fit_q``/``predict_q``, e.g. :class:`TabularQModel`), behind ``make_q_model``.
Continuous actions: one regressor on ``[s, a]``, fitted with ``fit_regressor`` (sample
weights routed to a Pipeline's last step).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import numpy as np

from ..data._estimator_base import LightEstimator
from ..data._validation import check_state_indices, clone_learner as clone
from ._column_weights import ColumnWeights, column_mu_sum
from ._feature_q import FeatureQ
from ._regress import fit_regressor

__all__ = ["TabularQModel", "FQEHistory", "BellmanTargets", "q_from_continuation", "make_q_model", "warm_start_ok",
           "predict_columns", "predict_at", "fit_regressor", "mu_sum", "ENCODINGS"]

#: The finite-action encodings of ``make_q_model``.
ENCODINGS = ("auto", "per_action", "joint", "action_features", "native")


def _is_native(model) -> bool:
    return hasattr(model, "fit_q") and hasattr(model, "predict_q")


def warm_start_ok(regressor) -> bool:
    """True when ``warm_start=True`` means "start from the previous solution"."""
    from sklearn.ensemble import BaseEnsemble

    if not hasattr(regressor, "get_params") or "warm_start" not in regressor.get_params(deep=False):
        return False
    name = type(regressor).__name__
    return not isinstance(regressor, BaseEnsemble) and "GradientBoosting" not in name


class TabularQModel(LightEstimator):
    """Native Q-model for tabular states: ``Q(s, a)`` is the mean target of cell (s, a),
    i.e. least squares on one-hot (s, a) features; unvisited cells keep ``default``.

    Parameters
    ----------
    n_states : int
    default : float
        Value of cells without data.
    """

    def __init__(self, n_states: int, default: float = 0.0):
        self.n_states = n_states
        self.default = default

    def fit_q(self, states, actions, targets, n_actions, sample_weight=None):
        s = check_state_indices(states, self.n_states)
        cells = s * n_actions + np.asarray(actions, dtype=np.int64)
        size = self.n_states * n_actions
        w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        sums = np.bincount(cells, weights=targets if w is None else w * targets, minlength=size)
        counts = np.bincount(cells, weights=w, minlength=size)
        table = np.full(size, float(self.default))
        seen = counts > 0
        table[seen] = sums[seen] / counts[seen]
        self.table_ = table.reshape(self.n_states, n_actions)
        return self

    def predict_q(self, states):
        return self.table_[check_state_indices(states, self.n_states)]


class _PerActionQ:
    """One regressor per action (features: states)."""

    def __init__(self, regressor, n_actions: int, warm_start: bool):
        self.models = [clone(regressor) for _ in range(n_actions)]
        self.fitted = [False] * n_actions
        self.warm_start = warm_start
        self.n_actions = n_actions

    def fit_q(self, states, actions, targets, n_actions, sample_weight=None):
        for a, model in enumerate(self.models):
            rows = actions == a
            if not rows.any() or (sample_weight is not None and not np.any(sample_weight[rows] > 0)):
                continue
            fit_regressor(model, states[rows], targets[rows], None if sample_weight is None else sample_weight[rows])
            if self.warm_start and not self.fitted[a]:
                model.set_params(warm_start=True)
            self.fitted[a] = True
        return self

    def predict_q(self, states):
        out = np.zeros((states.shape[0], self.n_actions))
        for a, model in enumerate(self.models):
            if self.fitted[a]:
                out[:, a] = model.predict(states)
        return out


class _JointQ:
    """One regressor on ``[s, onehot(a)]``; predicts all actions in one call."""

    def __init__(self, regressor, n_actions: int, warm_start: bool):
        self.model = clone(regressor)
        self.n_actions = n_actions
        self.warm_start = warm_start
        self.fitted = False

    def _features(self, states, actions):
        onehot = np.zeros((states.shape[0], self.n_actions))
        onehot[np.arange(states.shape[0]), actions] = 1.0
        return np.hstack([states, onehot])

    def fit_q(self, states, actions, targets, n_actions, sample_weight=None):
        fit_regressor(self.model, self._features(states, actions), targets, sample_weight)
        if self.warm_start and not self.fitted:
            self.model.set_params(warm_start=True)
        self.fitted = True
        return self

    def predict_q(self, states):
        n, K = states.shape[0], self.n_actions
        rep = np.repeat(states, K, axis=0)
        acts = np.tile(np.arange(K), n)
        return np.asarray(self.model.predict(self._features(rep, acts))).reshape(n, K)


class _NativeQ:
    def __init__(self, model):
        self.model = clone(model)

    def fit_q(self, states, actions, targets, n_actions, sample_weight=None):
        if sample_weight is None:
            self.model.fit_q(states, actions, targets, n_actions)
            return self
        if "sample_weight" in inspect.signature(self.model.fit_q).parameters:
            self.model.fit_q(states, actions, targets, n_actions, sample_weight=sample_weight)
        elif np.ptp(sample_weight) == 0:
            self.model.fit_q(states, actions, targets, n_actions)
        else:
            raise TypeError(f"q_model {type(self.model).__name__} (a native Q-model, FQE) does not accept "
                            f"sample_weight in fit_q, but the data carries non-uniform row weights")
        return self

    def predict_q(self, states):
        return np.asarray(self.model.predict_q(states), dtype=np.float64)

    def predict_q_columns(self, states, columns):
        """Q at the ``columns`` actions (others may be 0), when the model can skip actions."""
        if hasattr(self.model, "predict_q_at"):  # models with the partial-prediction interface
            return np.asarray(self.model.predict_q(states, columns=columns), dtype=np.float64)
        return self.predict_q(states)

    def predict_q_at(self, states, actions):
        if hasattr(self.model, "predict_q_at"):
            return np.asarray(self.model.predict_q_at(states, actions), dtype=np.float64)
        return self.predict_q(states)[np.arange(len(actions)), actions]


def make_q_model(regressor, encoding: str, n_actions: int, warm_start="auto", action_features=None,
                 interactions=False, block_size=65536):
    """Wrap ``regressor`` in the internal ``fit_q``/``predict_q`` interface (``action_features``
    (K, d), ``interactions`` and ``block_size``: the ``"action_features"`` encoding only)."""
    if regressor is None:
        from sklearn.ensemble import HistGradientBoostingRegressor

        regressor = HistGradientBoostingRegressor(max_iter=100)
    if encoding == "auto":
        encoding = "native" if _is_native(regressor) else "joint"
    if encoding == "native":
        if not _is_native(regressor):
            raise TypeError(f"q_model {type(regressor).__name__} has no fit_q/predict_q for the native encoding")
        return _NativeQ(regressor)
    if not hasattr(regressor, "fit") or not hasattr(regressor, "predict"):
        raise TypeError(f"q_model must be a regressor with fit() and predict(), got {type(regressor).__name__}")
    ws = warm_start_ok(regressor) if warm_start == "auto" else bool(warm_start)
    if encoding == "per_action":
        return _PerActionQ(regressor, n_actions, ws)
    if encoding == "joint":
        return _JointQ(regressor, n_actions, ws)
    if encoding == "action_features":
        return FeatureQ(regressor, action_features, ws, interactions, block_size)
    raise ValueError(f"encoding must be one of {ENCODINGS}, got {encoding!r}")


def predict_columns(model, states, columns):
    """``Q(s, .)`` where only ``columns`` are needed (a native model may skip the others)."""
    if hasattr(model, "predict_q_columns"):
        return model.predict_q_columns(states, columns)
    return model.predict_q(states)


def mu_sum(model, states, weights, columns) -> np.ndarray:
    """``sum_a w(s_i, a) Q(s_i, a)`` over the ``columns`` actions, shape (n,); in blocks of actions
    when the model can (the ``"action_features"`` encoding), else from ``predict_columns``."""
    if hasattr(model, "mu_sum"):
        return model.mu_sum(states, weights, columns)
    return np.sum(weights * predict_columns(model, states, columns), axis=1)


def predict_at(model, states, actions):
    """``Q(s_i, a_i)``, shape (n,)."""
    if hasattr(model, "predict_q_at"):
        return model.predict_q_at(states, actions)
    return model.predict_q(states)[np.arange(len(actions)), actions]


@dataclass
class FQEHistory:
    """Per-iteration diagnostics (lists of floats, one entry per iteration)."""

    bellman_residual: list = field(default_factory=list)
    target_change: list = field(default_factory=list)
    validation_residual: list = field(default_factory=list)


class BellmanTargets:
    """FQE's finite-action targets of the regressed quantity: ``Q`` (direct, ``next_reward``
    None) or ``f = P mu Q`` (continuation, ``Q = reward + gamma f``), shared by the in-memory
    (:class:`genpqr.stage2.FQE`) and the streamed (:mod:`genpqr.scale`) iteration.

    ``reward``, ``continues``, ``next_reward``: shape (n,); ``next_mu``: (n, K), or a
    ``genpqr.stage2._column_weights.ColumnWeights`` (a few or sampled columns)."""

    def __init__(self, reward, continues, next_mu, next_reward, gamma):
        self.reward, self.next_mu, self.next_reward, self.gamma = reward, next_mu, next_reward, gamma
        self.bootstrap = gamma * continues if next_reward is None else continues
        self.sparse = isinstance(next_mu, ColumnWeights)  # mu on a few (or sampled) columns: no (n, K)
        self.support = next_mu.columns if self.sparse else np.flatnonzero(np.any(next_mu != 0, axis=0))

    def first(self) -> np.ndarray:
        """The targets of the first fit (``Q_0 = 0`` / ``f_0 = 0``)."""
        if self.next_reward is None:
            return self.reward.copy()
        return self.bootstrap * self.next_reward

    def targets(self, model, next_states) -> np.ndarray:
        """The next iteration's targets from the fitted ``model``."""
        mu_next = column_mu_sum(model, next_states, self.next_mu, getattr(model, "block_size", 65536)) \
            if self.sparse else mu_sum(model, next_states, self.next_mu, self.support)
        if self.next_reward is None:
            return self.reward + self.bootstrap * mu_next
        return self.bootstrap * (self.next_reward + self.gamma * mu_next)

    def q_scale(self, delta) -> np.ndarray:
        """A difference of the regressed quantity as a difference of Q (times gamma for f)."""
        return delta if self.next_reward is None else self.gamma * delta


def q_from_continuation(f, base, gamma) -> np.ndarray:
    """``Q = base + gamma f`` for a model that regressed the continuation ``f = P mu Q``
    (``f`` and ``base = u(s, .) - g(s)`` of shape (n, K)); refuses a missing or misshapen base."""
    if base is None or np.shape(base) != np.shape(f):
        raise ValueError(f"this FQE regressed the continuation f = P mu Q: predict_q needs base = u(s, .) - g(s) of "
                         f"shape {np.shape(f)}, got {None if base is None else np.shape(base)}")
    return base + gamma * f

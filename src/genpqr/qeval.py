r"""Stage 2: evaluate ``Q = u - g + gamma P mu Q`` from samples (paper, Alg. 2, FQE).

Fitted Q evaluation: starting from ``Q_0 = 0``, iterate

    y_i = u(s_i, a_i) - g(s_i) + gamma (1 - terminated_i) sum_a' mu(a'|s'_i) Q_{k-1}(s'_i, a')
    Q_k = regress y on (s_i, a_i)

A regressor enters in one of three encodings:

* ``"per_action"``: one clone per action, fitted on that action's rows, features ``s``;
* ``"joint"``: one regressor on ``[s, onehot(a)]``;
* ``"native"``: a Q-model with ``fit_q(states, actions, targets, n_actions)`` and
  ``predict_q(states) -> (n, K)`` (e.g. the dueling network, boosted trees, the tabular
  cell-mean model below). It is called once per iteration on the same object, so it can
  warm-start.

The same model objects are reused across iterations; scikit-learn regressors whose
``warm_start`` continues from the previous solution (linear models, MLPs) are switched to
warm starts after the first fit (ensembles, whose ``warm_start`` adds members, are not).

Stopping rule: after each iteration the change of the Bellman targets
``max_i |y^{(k+1)}_i - y^{(k)}_i|`` (= gamma times the sup change of ``mu Q`` at the next
states, the projected Bellman residual) is compared with ``tol``. Diagnostics record the
sample Bellman residual ``RMS_i(Q_k(s_i, a_i) - y^{(k+1)}_i)`` per iteration. With
``validation_fraction`` set, a share of episodes is held out, the held-out Bellman residual
picks the iteration count (patience ``n_iter_no_change``), and the loop is re-run on all
rows for that many iterations.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.ensemble import HistGradientBoostingRegressor
from tqdm.auto import tqdm

from ._checks import as_float_array, check_gamma, check_random_state, check_state_indices, clone_learner as clone
from .exceptions import ConvergenceWarning

__all__ = ["FQE", "TabularQModel", "FQEHistory", "make_q_model"]


def _is_native(model) -> bool:
    return hasattr(model, "fit_q") and hasattr(model, "predict_q")


def _warm_start_ok(regressor) -> bool:
    """True when ``warm_start=True`` means "start from the previous solution"."""
    from sklearn.ensemble import BaseEnsemble

    if not hasattr(regressor, "get_params") or "warm_start" not in regressor.get_params(deep=False):
        return False
    name = type(regressor).__name__
    return not isinstance(regressor, BaseEnsemble) and "GradientBoosting" not in name


class TabularQModel(BaseEstimator):
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

    def fit_q(self, states, actions, targets, n_actions):
        s = check_state_indices(states, self.n_states)
        cells = s * n_actions + np.asarray(actions, dtype=np.int64)
        size = self.n_states * n_actions
        sums = np.bincount(cells, weights=targets, minlength=size)
        counts = np.bincount(cells, minlength=size)
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

    def fit_q(self, states, actions, targets, n_actions):
        for a, model in enumerate(self.models):
            rows = actions == a
            if not rows.any():
                continue
            model.fit(states[rows], targets[rows])
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

    def fit_q(self, states, actions, targets, n_actions):
        self.model.fit(self._features(states, actions), targets)
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

    def fit_q(self, states, actions, targets, n_actions):
        self.model.fit_q(states, actions, targets, n_actions)
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


def make_q_model(regressor, encoding: str, n_actions: int, warm_start="auto"):
    """Wrap ``regressor`` in the internal ``fit_q``/``predict_q`` interface."""
    if regressor is None:
        regressor = HistGradientBoostingRegressor(max_iter=100)
    if encoding == "auto":
        encoding = "native" if _is_native(regressor) else "joint"
    if encoding == "native":
        if not _is_native(regressor):
            raise TypeError(f"q_model {type(regressor).__name__} has no fit_q/predict_q for the native encoding")
        return _NativeQ(regressor)
    if not hasattr(regressor, "fit") or not hasattr(regressor, "predict"):
        raise TypeError(f"q_model must be a regressor with fit() and predict(), got {type(regressor).__name__}")
    ws = _warm_start_ok(regressor) if warm_start == "auto" else bool(warm_start)
    if encoding == "per_action":
        return _PerActionQ(regressor, n_actions, ws)
    if encoding == "joint":
        return _JointQ(regressor, n_actions, ws)
    raise ValueError(f"encoding must be 'auto', 'per_action', 'joint' or 'native', got {encoding!r}")


def _predict_columns(model, states, columns):
    """``Q(s, .)`` where only ``columns`` are needed (a native model may skip the others)."""
    if hasattr(model, "predict_q_columns"):
        return model.predict_q_columns(states, columns)
    return model.predict_q(states)


def _predict_at(model, states, actions):
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


class FQE(BaseEstimator):
    """Fitted Q evaluation of ``Q^mu_{u-g}`` (paper, Algorithm 2).

    Parameters
    ----------
    regressor : regressor or native Q-model, optional
        Default: ``HistGradientBoostingRegressor(max_iter=100)``.
    encoding : {"auto", "per_action", "joint", "native"}
        ``"auto"``: native if the model has ``fit_q``, else joint.
    n_iterations : int
        Maximum number of Bellman iterations (the paper's K).
    tol : float or None
        Stop when the sup change of the Bellman targets is <= ``tol``; None runs all iterations.
    warm_start : "auto" or bool
    validation_fraction : float or None
        Share of episodes held out to choose the iteration count by held-out Bellman residual.
    n_iter_no_change : int
        Patience for that choice.
    refit : bool
        After choosing the count on the split, re-run on all rows.
    progress : bool or None
        tqdm progress bar (None: only on a terminal).
    random_state : int, Generator or None
    """

    def __init__(self, regressor=None, encoding="auto", n_iterations=100, tol=1e-6, warm_start="auto",
                 validation_fraction=None, n_iter_no_change=10, refit=True, progress=False, random_state=None):
        self.regressor = regressor
        self.encoding = encoding
        self.n_iterations = n_iterations
        self.tol = tol
        self.warm_start = warm_start
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.refit = refit
        self.progress = progress
        self.random_state = random_state

    def fit(self, states, actions, next_states, continues, reward, next_mu, gamma, groups=None):
        """Run FQE.

        Parameters
        ----------
        states, next_states : ndarray of shape (n, d)
        actions : ndarray of shape (n,), int codes
        continues : ndarray of shape (n,)
            ``1 - terminated``.
        reward : ndarray of shape (n,)
            ``u(s_i, a_i) - g(s_i)``.
        next_mu : ndarray of shape (n, K)
            ``mu(.|s'_i)``.
        gamma : float
        groups : ndarray of shape (n,), optional
            Episode ids (for the validation split).
        """
        gamma = check_gamma(gamma)
        states = as_float_array(states, "states", ndim=2)
        next_states = as_float_array(next_states, "next_states", ndim=2)
        actions = np.asarray(actions, dtype=np.int64)
        reward = as_float_array(reward, "reward", ndim=1)
        next_mu = as_float_array(next_mu, "next_mu", ndim=2)
        continues = as_float_array(continues, "continues", ndim=1)
        n, K = next_mu.shape
        if self.n_iterations < 1:
            raise ValueError(f"n_iterations must be at least 1, got {self.n_iterations}")
        data = (states, actions, next_states, continues, reward, next_mu)
        self.n_actions_ = K
        self.history_ = FQEHistory()
        n_iter = self.n_iterations
        if self.validation_fraction:
            train, val = self._split(n, groups)
            model, _, best = self._loop([d[train] for d in data], gamma, n_iter, [d[val] for d in data])
            self.best_iteration_ = best
            if self.refit:
                self.history_ = FQEHistory(validation_residual=self.history_.validation_residual)
                model, converged, _ = self._loop(data, gamma, best)
            else:
                converged = True
        else:
            model, converged, _ = self._loop(data, gamma, n_iter)
        self.model_ = model
        self.converged_ = converged
        self.n_iter_ = len(self.history_.bellman_residual)
        if self.tol is not None and not converged and not self.validation_fraction:
            warnings.warn(
                f"FQE did not reach tol={self.tol:g} in {self.n_iterations} iterations (last target change "
                f"{self.history_.target_change[-1]:.3g}); raise n_iterations or tol",
                ConvergenceWarning, stacklevel=2,
            )
        return self

    def _split(self, n, groups):
        rng = check_random_state(self.random_state)
        groups = np.arange(n) if groups is None else np.asarray(groups)
        uniq = np.unique(groups)
        n_val = max(1, int(round(self.validation_fraction * uniq.size)))
        if n_val >= uniq.size:
            raise ValueError("validation_fraction leaves no training episodes")
        val = np.isin(groups, rng.choice(uniq, size=n_val, replace=False))
        return ~val, val

    def _loop(self, data, gamma, n_iter, val_data=None):
        states, actions, next_states, continues, reward, next_mu = data
        K = next_mu.shape[1]
        model = make_q_model(self.regressor, self.encoding, K, self.warm_start)
        bootstrap = gamma * continues
        targets = reward.copy()  # Q_0 = 0
        best, best_loss, stall, converged = 0, np.inf, 0, False
        bar = tqdm(range(n_iter), desc="FQE", disable=(None if self.progress is None else not self.progress),
                   leave=False)
        support = np.flatnonzero(np.any(next_mu != 0, axis=0))  # actions mu ever weighs
        for _ in bar:
            model.fit_q(states, actions, targets, K)
            new_targets = reward + bootstrap * np.sum(next_mu * _predict_columns(model, next_states, support), axis=1)
            q_fit = _predict_at(model, states, actions)
            change = float(np.max(np.abs(new_targets - targets)))
            self.history_.bellman_residual.append(float(np.sqrt(np.mean((q_fit - new_targets) ** 2))))
            self.history_.target_change.append(change)
            targets = new_targets
            if val_data is not None:
                loss = self._validation_residual(model, val_data, gamma)
                self.history_.validation_residual.append(loss)
                if loss < best_loss - 1e-12:
                    best, best_loss, stall = len(self.history_.validation_residual), loss, 0
                else:
                    stall += 1
                    if stall >= self.n_iter_no_change:
                        break
            elif self.tol is not None and change <= self.tol:
                converged = True
                break
            bar.set_postfix(change=f"{change:.2e}")
        return model, converged, max(best, 1)

    @staticmethod
    def _validation_residual(model, val_data, gamma):
        states, actions, next_states, continues, reward, next_mu = val_data
        support = np.flatnonzero(np.any(next_mu != 0, axis=0))
        y = reward + gamma * continues * np.sum(next_mu * _predict_columns(model, next_states, support), axis=1)
        q = _predict_at(model, states, actions)
        return float(np.mean((q - y) ** 2))

    def predict_q(self, states) -> np.ndarray:
        """``Q(s, a)`` for every action, shape (n, K)."""
        if not hasattr(self, "model_"):
            from .exceptions import NotFittedError

            raise NotFittedError("this FQE is not fitted yet; call fit first")
        return self.model_.predict_q(as_float_array(states, "states", ndim=2, allow_1d_as_column=True))

"""Gradient-boosted Q-model (LightGBM) for fitted Q evaluation.

:class:`BoostedQModel` is a *native Q-model* of stage 2: ``fit_q`` / ``predict_q`` on the
features ``[s, onehot(a)]``, growing one LightGBM ensemble across Bellman iterations (each call
adds ``trees_per_iteration`` trees fitted to the new targets, starting from the current
ensemble's predictions).

LightGBM is an optional dependency: it is imported when the model is fitted, never when
``genpqr`` or this module is imported.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator

from ..data._validation import as_float_array, seed_from
from ..exceptions import NotFittedError
from ._qnetwork import validate_q_inputs

__all__ = ["BoostedQModel"]

#: predict_q / predict_q_at remember Q for this many distinct requests (FQE with a validation split
#: makes four per iteration: next states and states, of the training and the validation rows).
_Q_CACHE_SIZE = 6


def _import_lightgbm():
    try:
        import lightgbm
    except ImportError as exc:  # pragma: no cover - exercised only without lightgbm
        raise ImportError(
            "BoostedQModel needs LightGBM, which is an optional dependency: "
            "install it with `pip install 'genpqr[lightgbm]'`"
        ) from exc
    return lightgbm


def _state_action_features(states: np.ndarray, actions: np.ndarray, n_actions: int) -> np.ndarray:
    """Features ``[s, onehot(a)]``.

    Parameters
    ----------
    states : ndarray of shape (n, d)
    actions : ndarray of shape (n,), int codes in ``[0, n_actions)``
    n_actions : int

    Returns
    -------
    features : ndarray of shape (n, d + n_actions), float64
    """
    n, d = states.shape
    features = np.zeros((n, d + n_actions))
    features[:, :d] = states
    features[np.arange(n), d + actions] = 1.0
    return features


def _all_actions_features(states: np.ndarray, n_actions: int) -> np.ndarray:
    """Features of every (state, action) pair, row ``i * K + a`` for state i and action a.

    Returns
    -------
    features : ndarray of shape (m * n_actions, d + n_actions), float64
    """
    m, d = states.shape
    features = np.empty((m * n_actions, d + n_actions))
    features[:, :d] = np.repeat(states, n_actions, axis=0)
    features[:, d:] = np.tile(np.eye(n_actions), (m, 1))
    return features


class BoostedQModel(BaseEstimator):
    """LightGBM Q-model on ``[s, onehot(a)]``, grown across Bellman iterations.

    The first :meth:`fit_q` call trains ``trees_per_iteration`` regression trees (L2 loss) on
    the targets (LightGBM starts from their mean); every later call adds ``trees_per_iteration``
    more trees fitted to the new targets, boosting from the current ensemble. With the paper's
    setting -- one tree per Bellman update, learning rate 0.05, 32 leaves, at least 20 rows per
    leaf -- each update moves Q at most 5% of the way towards the new targets. The number of
    updates (at most 30 in the paper, chosen by early stopping on a validation split) is decided
    by the FQE loop, not here.

    Two shortcuts keep a Bellman iteration cheap; both give the same numbers as the plain
    route (the tests check it):

    * when a call sees the same rows as the booster's training set (the usual FQE case: only
      the targets change), the booster is updated in place with LightGBM's L2 gradient
      ``Q - y`` from the training scores it maintains, instead of re-binning the data and
      re-predicting it (``lightgbm.train(init_model=booster_, keep_training_booster=True)``,
      used for the first call and whenever the rows change);
    * :meth:`predict_q` remembers its last results for a couple of state arrays and, since
      trees are only ever appended, evaluates only the trees added since (FQE asks for
      ``Q(s', .)`` at the same next states every iteration).

    Parameters
    ----------
    learning_rate : float, default=0.05
        Shrinkage of every tree.
    num_leaves : int, default=32
        Maximum leaves per tree.
    min_child_samples : int, default=20
        Minimum rows per leaf (LightGBM's ``min_data_in_leaf``).
    trees_per_iteration : int, default=1
        Trees added by each :meth:`fit_q` call.
    random_state : int, numpy Generator/RandomState or None, default=None
        LightGBM's ``seed``. Training without row or feature subsampling is deterministic
        whatever the seed.
    n_jobs : int, default=1
        LightGBM threads for training and prediction; ``-1`` or ``None`` uses all cores. More
        than one rarely pays at this size (one tree on ~10^4 rows), and when the cores are
        shared -- seeds run in parallel processes -- OpenMP threads waiting on each other at
        every barrier can make a call one to two orders of magnitude slower.

    Attributes
    ----------
    booster_ : lightgbm.Booster
        The ensemble, on features ``[s, onehot(a)]`` of width ``n_features_in_ + n_actions_``.
    n_trees_ : int
        Trees in the ensemble. Grows by ``trees_per_iteration`` per call, except when LightGBM
        finds no admissible split (e.g. fewer than ``2 * min_child_samples`` rows), in which case
        it adds none.
    n_actions_ : int
        Number of actions K fixed by the first call.
    n_features_in_ : int
        State dimension d.
    n_iter_ : int
        Number of :meth:`fit_q` calls so far.
    """

    def __init__(
        self,
        learning_rate=0.05,
        num_leaves=32,
        min_child_samples=20,
        trees_per_iteration=1,
        random_state=None,
        n_jobs=1,
    ):
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.trees_per_iteration = trees_per_iteration
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _lgb_params(self) -> dict:
        def positive(value, name, integer, minimum):
            kind = numbers.Integral if integer else numbers.Real
            if isinstance(value, bool) or not isinstance(value, kind) or not value >= minimum:
                what = "an integer" if integer else "a number"
                raise ValueError(f"{name} must be {what} >= {minimum}, got {value!r}")
            return int(value) if integer else float(value)

        learning_rate = positive(self.learning_rate, "learning_rate", False, 0.0)
        if learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        n_jobs = self.n_jobs
        if n_jobs is None or n_jobs == -1:
            num_threads = 0  # LightGBM: OpenMP default, all cores
        else:
            num_threads = positive(n_jobs, "n_jobs", True, 1)
        params = {
            "objective": "regression",
            "learning_rate": learning_rate,
            "num_leaves": positive(self.num_leaves, "num_leaves", True, 2),
            "min_data_in_leaf": positive(self.min_child_samples, "min_child_samples", True, 1),
            "num_threads": num_threads,
            "deterministic": True,
            "force_col_wise": True,
            "verbose": -1,
        }
        seed = seed_from(self.random_state)
        if seed is not None:
            params["seed"] = seed
        return params

    def fit_q(self, states, actions, targets, n_actions):
        """Add ``trees_per_iteration`` trees fitted to ``targets``, boosting from the current model.

        Parameters
        ----------
        states : array-like of shape (n, d)
            Finite states (not modified).
        actions : array-like of shape (n,)
            Integer action codes in ``[0, n_actions)``.
        targets : array-like of shape (n,)
            Regression targets, e.g. ``u - g + gamma * sum_a' mu(a'|s') Q(s', a')``.
        n_actions : int
            Number of actions K; must equal the first call's.

        Returns
        -------
        self : BoostedQModel
        """
        states, actions, targets, n_actions = validate_q_inputs(states, actions, targets, n_actions)
        trees = self.trees_per_iteration
        if isinstance(trees, bool) or not isinstance(trees, numbers.Integral) or trees < 1:
            raise ValueError(f"trees_per_iteration must be an integer >= 1, got {trees!r}")
        fitted = hasattr(self, "booster_")
        if fitted:
            self._check_same_problem(states, n_actions)
        self.booster_ = self._boost(_state_action_features(states, actions, n_actions), targets, int(trees))
        if not fitted:
            self.n_actions_ = n_actions
            self.n_features_in_ = states.shape[1]
            self.n_iter_ = 0
        self.n_iter_ += 1
        return self

    def _check_same_problem(self, states, n_actions: int) -> None:
        """A later ``fit_q`` call must have the first call's action count and state width."""
        if n_actions != self.n_actions_:
            raise ValueError(
                f"n_actions is {n_actions} but the first fit_q call used {self.n_actions_}; "
                "clone the model to fit a different problem"
            )
        if states.shape[1] != self.n_features_in_:
            raise ValueError(
                f"states has {states.shape[1]} features (columns) but the first fit_q call "
                f"had {self.n_features_in_}"
            )

    def _boost(self, features, targets, trees: int):
        """``trees`` more trees on ``features -> targets``; returns the booster."""
        lgb = _import_lightgbm()
        booster = getattr(self, "booster_", None)
        if booster is not None and self._can_continue_in_place(features):
            # Same rows as the booster's training set: boost in place with the L2 gradient
            # Q - y (LightGBM's own "regression" gradient, labels rounded to float32 as it
            # stores them), from the training scores LightGBM keeps up to date.
            labels = targets.astype(np.float32).astype(np.float64)
            hessian = np.ones(labels.shape[0])

            def l2_objective(preds, _train_data):
                return preds - labels, hessian

            for _ in range(trees):
                booster.update(fobj=l2_objective)
            return booster
        # First call, or new rows: a new training set, boosting from the current ensemble
        # (LightGBM starts it from the ensemble's predictions and merges the trees).
        params = self._lgb_params()
        train_set = lgb.Dataset(features, label=targets, params=params)
        booster = lgb.train(params, train_set, num_boost_round=trees, init_model=booster,
                            keep_training_booster=True)
        self._train_features = features
        return booster

    def _can_continue_in_place(self, features: np.ndarray) -> bool:
        """Whether ``booster_`` still holds a training set built from exactly ``features``."""
        previous = getattr(self, "_train_features", None)
        return (
            previous is not None
            and getattr(self.booster_, "train_set", None) is not None
            and previous.shape == features.shape
            and np.array_equal(previous, features)
        )

    def __getstate__(self):
        # The booster pickles without its training set, so the caches go too.
        state = super().__getstate__()
        state.pop("_train_features", None)
        state.pop("_q_cache", None)
        return state

    @property
    def n_trees_(self) -> int:
        if not hasattr(self, "booster_"):
            raise AttributeError("n_trees_ is set by fit_q")
        return int(self.booster_.num_trees())

    def _check_predict_states(self, states) -> np.ndarray:
        if not hasattr(self, "booster_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call fit_q(states, actions, "
                "targets, n_actions) before predicting"
            )
        states = as_float_array(states, "states", ndim=2)
        if states.shape[1] != self.n_features_in_:
            raise ValueError(
                f"states has {states.shape[1]} features (columns) but the model was fitted with "
                f"{self.n_features_in_}"
            )
        return states

    def _cached_predict(self, key: tuple, make_features) -> np.ndarray:
        """Ensemble predictions at the feature rows that ``key`` (a tag and arrays) describes.

        Q is a sum over trees and trees are only ever appended, so for a key seen before only
        the trees added since are evaluated, on the feature matrix kept with it (FQE asks for
        Q at the same next states, states and validation rows every iteration).
        """
        n_trees = self.n_trees_
        # Booster.predict does not inherit the booster's num_threads: without it, it runs on
        # every core (see n_jobs for why that can be very slow).
        threads = self._lgb_params()["num_threads"]
        cache = getattr(self, "_q_cache", None) or []
        for i, (cached_key, features, cached_trees, cached) in enumerate(cache):
            if cached_trees <= n_trees and _same_key(cached_key, key):
                if cached_trees < n_trees:
                    increment = self.booster_.predict(features, start_iteration=cached_trees, num_threads=threads)
                    cached = cached + np.asarray(increment, dtype=np.float64)
                del cache[i]
                break
        else:
            features = make_features()
            cached = np.asarray(self.booster_.predict(features, num_threads=threads), dtype=np.float64)
            key = tuple(k.copy() if isinstance(k, np.ndarray) else k for k in key)
            cached_key = key
        cache.insert(0, (cached_key, features, n_trees, cached))
        self._q_cache = cache[:_Q_CACHE_SIZE]
        return cached

    def predict_q(self, states, columns=None) -> np.ndarray:
        """Q(s, a) for every action, from one vectorized prediction.

        Parameters
        ----------
        states : array-like of shape (m, d)
        columns : array-like of int, optional
            Only these actions are evaluated (the others are returned as 0): e.g. the support
            of ``mu`` when only ``sum_a mu(a|s) Q(s, a)`` is needed.

        Returns
        -------
        q : ndarray of shape (m, n_actions), float64
        """
        states = self._check_predict_states(states)
        m, K = states.shape[0], self.n_actions_
        if m == 0:
            return np.empty((0, K))
        cols = np.arange(K) if columns is None else np.unique(np.asarray(columns, dtype=np.int64))
        if cols.size and (cols[0] < 0 or cols[-1] >= K):
            raise ValueError(f"columns must be action codes in 0..{K - 1}, got {cols.tolist()}")
        out = np.zeros((m, K))
        if cols.size:
            pred = self._cached_predict(("all", states, cols), lambda: _columns_features(states, cols, K))
            out[:, cols] = pred.reshape(m, cols.size)
        return out

    def predict_q_at(self, states, actions) -> np.ndarray:
        """Q(s_i, a_i) at the given pairs, shape (m,) (one prediction per row, not K)."""
        states = self._check_predict_states(states)
        actions = np.asarray(actions, dtype=np.int64)
        if actions.shape != (states.shape[0],):
            raise ValueError(f"actions must have shape ({states.shape[0]},), got {actions.shape}")
        if actions.size and (actions.min() < 0 or actions.max() >= self.n_actions_):
            raise ValueError(f"actions must be codes in 0..{self.n_actions_ - 1}")
        if states.shape[0] == 0:
            return np.empty(0)
        pred = self._cached_predict(("at", states, actions),
                                    lambda: _state_action_features(states, actions, self.n_actions_))
        return pred.copy()


def _same_key(a: tuple, b: tuple) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray) != isinstance(y, np.ndarray):
            return False
        if isinstance(x, np.ndarray):
            if x.shape != y.shape or not np.array_equal(x, y):
                return False
        elif x != y:
            return False
    return True


def _columns_features(states: np.ndarray, columns: np.ndarray, n_actions: int) -> np.ndarray:
    """Features of (state i, action columns[j]) at row ``i * len(columns) + j``."""
    if columns.size == n_actions:
        return _all_actions_features(states, n_actions)
    m, d = states.shape
    features = np.zeros((m * columns.size, d + n_actions))
    features[:, :d] = np.repeat(states, columns.size, axis=0)
    features[np.arange(m * columns.size), d + np.tile(columns, m)] = 1.0
    return features

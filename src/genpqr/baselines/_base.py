"""Shared machinery of the reward baselines: input checks, the stage-1 policy estimate (fitted
or prefit), and the base classes that give every baseline GenPQR's ``reward`` / ``log_policy``
interface."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from sklearn.base import BaseEstimator

from ..data._validation import as_float_array, check_length, seed_from
from ..data import Transitions
from ..data._spaces import FiniteActions
from ..exceptions import NotFittedError
from ..models._torch_training import check_positive
from ..normalization import Normalization, anchor_action
from ..normalization._normalization import FixedOffset
from ..stage1._policy import FittedPolicy, check_clip, check_classifier, clip_proba, fit_policy

__all__ = ["fit_stage1", "check_transitions", "default_normalization", "check_fixed_offset", "RewardBaseline",
           "PolicyBaseline", "SoftmaxPolicyMixin", "fit_inputs", "check_count", "check_batch_size"]


# ============================================================================ shared helpers
def check_transitions(data) -> Transitions:
    if not isinstance(data, Transitions):
        raise TypeError(
            f"data must be genpqr.data.Transitions (build it with from_arrays / from_pandas / from_episodes), "
            f"got {type(data).__name__}"
        )
    return data


def default_normalization(data: Transitions) -> Normalization:
    """Anchor action = the first action label, ``g = 0``."""
    return anchor_action(data.encoder.labels[0])


def check_fixed_offset(norm, who: str) -> Normalization:
    if not isinstance(norm, Normalization):
        raise TypeError(f"normalization must be a genpqr Normalization (e.g. anchor_action(0)), got {type(norm).__name__}")
    if not isinstance(norm.g, FixedOffset):
        raise ValueError(
            f"{who} needs a given g(s) (a scalar, an (S,) array or a callable); the normalization "
            f"({norm.describe()}) estimates g from data, which {who} does not support"
        )
    return norm


def check_prefit_classifier(model, n_actions: int):
    if isinstance(model, type):
        raise TypeError(f"policy_model must be a fitted classifier instance, got the class {model.__name__}")
    if not hasattr(model, "predict_proba"):
        raise TypeError(
            f"policy_model must have predict_proba() (a fitted probabilistic classifier), got {type(model).__name__}"
        )
    classes = getattr(model, "classes_", None)
    if classes is not None:
        classes = np.asarray(classes)
        ok = classes.ndim == 1 and np.issubdtype(classes.dtype, np.integer) and classes.size <= n_actions
        ok = ok and (classes.size == 0 or (classes.min() >= 0 and classes.max() < n_actions))
        if not ok:
            raise ValueError(
                f"with policy_prefit=True, policy_model.classes_ must be action codes in [0, {n_actions}) (fit it on "
                f"Transitions.actions, not on labels), got {classes.tolist()[:10]}"
            )
    return model


def fit_stage1(policy_model, policy_prefit: bool, data: Transitions, clip, random_state) -> FittedPolicy:
    """Stage 1 of a policy-based baseline.

    Parameters
    ----------
    policy_model : classifier, FittedPolicy or None
        ``None``: :class:`genpqr.models.MLPClassifier` (paper's behaviour cloning) with
        ``random_state``. Otherwise a classifier with ``fit``/``predict_proba`` (cloned and
        fitted on ``(data.states, data.actions)``), or, with ``policy_prefit=True``, a fitted
        classifier whose ``classes_`` are action codes (e.g. ``GenPQR.policy_.models[0]``) or a
        ``genpqr.stage1._policy.FittedPolicy`` (e.g. ``GenPQR.policy_``), used as is.
    policy_prefit : bool
    data : Transitions
    clip : (low, high) or None
        Applied to every probability (rows renormalized), also to a prefit policy.
    random_state : int, Generator or None

    Returns
    -------
    FittedPolicy
    """
    clip = check_clip(clip)
    K = data.n_actions
    if not isinstance(policy_prefit, (bool, np.bool_)):
        raise TypeError(f"policy_prefit must be True or False, got {policy_prefit!r}")
    if policy_prefit:
        if policy_model is None:
            raise ValueError("policy_prefit=True needs a fitted policy_model (got None)")
        if isinstance(policy_model, FittedPolicy):
            if policy_model.n_actions != K:
                raise ValueError(
                    f"policy_model is a FittedPolicy over {policy_model.n_actions} actions but the data has {K}"
                )
            if policy_model.fold_of_row is not None and policy_model.fold_of_row.shape[0] != data.n:
                raise ValueError(
                    f"policy_model is a cross-fitted FittedPolicy for {policy_model.fold_of_row.shape[0]} rows but the "
                    f"data has {data.n}; pass it only with the transitions it was fitted on"
                )
            return replace(policy_model, clip=clip)
        return FittedPolicy([check_prefit_classifier(policy_model, K)], None, K, clip)
    if isinstance(policy_model, FittedPolicy):
        raise TypeError("policy_model is an already fitted FittedPolicy; pass policy_prefit=True to use it as is")
    if policy_model is None:
        from ..models._nn import MLPClassifier

        policy_model = MLPClassifier(random_state=seed_from(random_state))
    check_classifier(policy_model)
    return fit_policy(policy_model, data, clip=clip, random_state=seed_from(random_state))


class RewardBaseline(BaseEstimator):
    """Prediction plumbing shared by the baselines (states check, label selection, fitted check)."""

    name = "baseline"

    def _check_fitted(self):
        if not hasattr(self, "fit_time_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit(transitions) first")

    def _states(self, states) -> np.ndarray:
        self._check_fitted()
        X = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"states must have {self.n_features_in_} column(s) like the training data, got {X.shape[1]}")
        return X

    def _select(self, table: np.ndarray, actions) -> np.ndarray:
        """``table`` (n, K), or its entries at the action *labels* ``actions`` (n,)."""
        if actions is None:
            return table
        codes = self.encoder_.encode(actions)
        if codes.shape[0] != table.shape[0]:
            raise ValueError(f"actions has {codes.shape[0]} entries but states has {table.shape[0]} rows")
        return table[np.arange(table.shape[0]), codes]

    def _record_data(self, data: Transitions) -> None:
        self.encoder_ = data.encoder
        self.n_actions_ = data.n_actions
        self.n_features_in_ = data.state_dim

    def reward(self, states, actions=None) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError


class PolicyBaseline(RewardBaseline):
    """A baseline built on a stage-1 policy estimate (``policy_`` attribute)."""

    def log_policy(self, states) -> np.ndarray:
        """``log pi_hat(.|s)`` of the (clipped, renormalized) stage-1 policy, shape (n, K)."""
        X = self._states(states)
        return self.policy_.log_proba(X)


# ============================================================================ neural baselines' helpers
def fit_inputs(data, y):
    """Dispatch ``fit(Transitions)`` / ``fit(X, y)`` of the neural baselines (MaxEnt-IRL, AIRL).

    Returns
    -------
    states : ndarray (n, d) float64
    codes : ndarray (n,) int64 in ``0..K-1``
    classes : ndarray (K,)
        ``arange(K)`` (action codes) for Transitions, else the sorted labels of ``y``.
    encoder : FiniteActions
        Maps the labels accepted by ``reward(states, actions)`` to codes.
    transitions : Transitions or None
    """
    if isinstance(data, Transitions):
        if y is not None:
            raise ValueError("y must be None when data is a Transitions object (its actions are the labels)")
        if data.n == 0:
            raise ValueError("data must hold at least one transition, got 0")
        return data.states, data.actions.astype(np.int64), np.arange(data.n_actions), data.encoder, data
    if y is None:
        raise TypeError(
            f"fit needs genpqr.data.Transitions, or (X, y) arrays of states and action labels; got "
            f"{type(data).__name__} and y=None"
        )
    X = as_float_array(data, "X", ndim=2)
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be a 1-D array of action labels, got shape {y.shape}")
    check_length(y, X.shape[0], "y", "X")
    if X.shape[0] == 0:
        raise ValueError("X must have at least one row, got 0")
    classes, codes = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise ValueError(f"y must contain at least two action labels, got 1 ({classes[0]!r})")
    return X, codes.astype(np.int64).ravel(), classes, FiniteActions(classes), None


def check_count(value, name: str, *, allow_zero: bool) -> int:
    """An integer ``> 0`` (``>= 0`` with ``allow_zero``), else ValueError naming it."""
    return check_positive(value, name, integer=True, allow_zero=allow_zero)


def check_batch_size(batch_size, n: int) -> int:
    """Rows per mini-batch, at most ``n``; ``None`` means full batch."""
    if batch_size is None:
        return n
    return min(check_count(batch_size, "batch_size", allow_zero=False), n)


def _softmax_rows(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    return p


class SoftmaxPolicyMixin:
    """``predict_proba`` / ``predict`` / ``log_policy`` from ``self._policy_logits(X)``."""

    def predict_proba(self, X) -> np.ndarray:
        """Unclipped policy probabilities, shape (n, K); columns ordered as ``classes_``."""
        return _softmax_rows(self._policy_logits(self._states(X)))

    def predict_log_proba(self, X) -> np.ndarray:
        """``log`` of :meth:`predict_proba` (unclipped, stable), shape (n, K)."""
        z = self._policy_logits(self._states(X))
        z = z - z.max(axis=1, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=1, keepdims=True))

    def predict(self, X) -> np.ndarray:
        """Most probable action (an element of ``classes_``), shape (n,)."""
        best = np.argmax(self._policy_logits(self._states(X)), axis=1)  # checks fitted before classes_
        return self.classes_[best]

    def log_policy(self, states) -> np.ndarray:
        """``log pi_hat(.|s)``, clipped to ``clip`` and renormalized (as the library's stage 1
        does, ``genpqr.stage1._policy.clip_proba``), shape (n, K)."""
        return np.log(clip_proba(self.predict_proba(states), self.clip_)[0])

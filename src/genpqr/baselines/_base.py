"""Shared machinery of the reward baselines: input checks, the stage-1 policy estimate (fitted
or prefit), and the base classes that give every baseline GenPQR's ``reward`` / ``log_policy``
interface."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from sklearn.base import BaseEstimator

from .._checks import as_float_array, seed_from
from ..data import Transitions
from ..exceptions import NotFittedError
from ..normalization import FixedOffset, Normalization, anchor_action
from ..policy import FittedPolicy, _check_clip, check_classifier, fit_policy

__all__ = ["fit_stage1"]


# ============================================================================ shared helpers
def _check_transitions(data) -> Transitions:
    if not isinstance(data, Transitions):
        raise TypeError(
            f"data must be genpqr.data.Transitions (build it with from_arrays / from_pandas / from_episodes), "
            f"got {type(data).__name__}"
        )
    return data


def _default_normalization(data: Transitions) -> Normalization:
    """Anchor action = the first action label, ``g = 0``."""
    return anchor_action(data.encoder.labels[0])


def _check_fixed_offset(norm, who: str) -> Normalization:
    if not isinstance(norm, Normalization):
        raise TypeError(f"normalization must be a genpqr Normalization (e.g. anchor_action(0)), got {type(norm).__name__}")
    if not isinstance(norm.g, FixedOffset):
        raise ValueError(
            f"{who} needs a given g(s) (a scalar, an (S,) array or a callable); the normalization "
            f"({norm.describe()}) estimates g from data, which {who} does not support"
        )
    return norm


def _check_prefit_classifier(model, n_actions: int):
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
        ``None``: :class:`genpqr.models.nn.MLPClassifier` (paper's behaviour cloning) with
        ``random_state``. Otherwise a classifier with ``fit``/``predict_proba`` (cloned and
        fitted on ``(data.states, data.actions)``), or, with ``policy_prefit=True``, a fitted
        classifier whose ``classes_`` are action codes (e.g. ``GenPQR.policy_.models[0]``) or a
        :class:`~genpqr.policy.FittedPolicy` (e.g. ``GenPQR.policy_``), used as is.
    policy_prefit : bool
    data : Transitions
    clip : (low, high) or None
        Applied to every probability (rows renormalized), also to a prefit policy.
    random_state : int, Generator or None

    Returns
    -------
    FittedPolicy
    """
    clip = _check_clip(clip)
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
        return FittedPolicy([_check_prefit_classifier(policy_model, K)], None, K, clip)
    if isinstance(policy_model, FittedPolicy):
        raise TypeError("policy_model is an already fitted FittedPolicy; pass policy_prefit=True to use it as is")
    if policy_model is None:
        from ..models.nn import MLPClassifier

        policy_model = MLPClassifier(random_state=seed_from(random_state))
    check_classifier(policy_model)
    return fit_policy(policy_model, data, clip=clip, random_state=seed_from(random_state))


class _RewardBaseline(BaseEstimator):
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


class _PolicyBaseline(_RewardBaseline):
    """A baseline built on a stage-1 policy estimate (``policy_`` attribute)."""

    def log_policy(self, states) -> np.ndarray:
        """``log pi_hat(.|s)`` of the (clipped, renormalized) stage-1 policy, shape (n, K)."""
        X = self._states(states)
        return self.policy_.log_proba(X)


# ============================================================================ log-policy pseudo-reward

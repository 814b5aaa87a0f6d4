r"""Data-driven offsets ``g`` of a normalization ``mu r = g`` (finite actions; :mod:`genpqr.normalization`),
chosen by the offset's capabilities:

* ``needs_outcomes`` (``genpqr.normalization._normalization.OutcomeOffset``, ``behavior(g=None)``):
  ``g(s) = E[y | s]``, regressed on every observed choice (``RegressedOffset``), or on the
  exact path the state means of ``y`` (``state_means``);
* ``needs_transitions`` (``genpqr.normalization._normalization.ValueOffset``): ``g = h - gamma mu P h``
  with ``(P h)(s, a)`` regressed per action (``ValueTargetOffset``).
"""

from __future__ import annotations

import numpy as np

from ..data._validation import as_float_array, check_state_indices, clone_learner as clone, seed_from
from ..normalization._normalization import FixedOffset
from ..stage2._qmodels import fit_regressor, make_q_model

__all__ = ["RegressedOffset", "ValueTargetOffset", "default_regressor", "outcomes", "state_means", "fit_offset"]


class RegressedOffset:
    """``g(s) = E[y | s]`` from a fitted regressor."""

    def __init__(self, model):
        self.model = model

    def __call__(self, states):
        return np.asarray(self.model.predict(as_float_array(states, "states", ndim=2)), dtype=np.float64)


class ValueTargetOffset:
    """``g(s) = h(s) - gamma sum_a mu(a|s) E[h(s') | s, a]`` with the expectation regressed per action."""

    def __init__(self, h, next_h_model, mu_fn, gamma):
        self.h, self.next_h_model, self.mu_fn, self.gamma = h, next_h_model, mu_fn, gamma

    def __call__(self, states):
        states = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
        return self.h(states) - self.gamma * np.sum(self.mu_fn(states) * self.next_h_model.predict_q(states), axis=1)


def default_regressor(random_state):
    """The default offset regressor: gradient boosting."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(max_iter=100, random_state=seed_from(random_state))


def outcomes(data) -> np.ndarray:
    """The outcomes ``y`` of ``data``, refusing data without them."""
    if data.outcomes is None:
        raise ValueError("behavior() with g=None estimates g = E[y|s] from outcomes, but the data has no outcomes")
    return data.outcomes


def state_means(data, n_states: int) -> np.ndarray:
    """``E[y | s]`` per tabular state (the overall mean at unvisited states), shape (S,)."""
    y = outcomes(data)
    s = check_state_indices(data.states, n_states)
    w = data.weights  # row weights (ones without sample_weight)
    sums = np.bincount(s, weights=w * y, minlength=n_states)
    counts = np.bincount(s, weights=w, minlength=n_states)
    return np.where(counts > 0, sums / np.where(counts > 0, counts, 1), y.mean() if data.sample_weight is None else np.average(y, weights=w))


def fit_offset(offset, choices, data, mu_fn, *, gamma, n_actions, offset_model=None, random_state=None):
    """A callable ``g(states)`` for the offset of a bound normalization.

    ``choices``: every observed choice (for ``E[y|s]``); ``data``: the complete transitions
    (for ``P h``); ``mu_fn``: ``states -> mu(.|s)``; ``offset_model``: the regressor when the
    offset names none (default :func:`default_regressor`)."""
    if offset.needs_outcomes:
        model = clone(offset.regressor or offset_model or default_regressor(random_state))
        fit_regressor(model, choices.states, outcomes(choices), choices.sample_weight, slot="offset_model")
        return RegressedOffset(model)
    if offset.needs_transitions:
        return _fit_value_offset(offset, data, mu_fn, gamma, n_actions, offset_model, random_state)
    return offset


def _fit_value_offset(offset, data, mu_fn, gamma, n_actions, offset_model, random_state):
    """``g = h - gamma mu P h`` with ``(P h)(s, a)`` regressed per action."""
    h = FixedOffset(offset.h)
    if np.ndim(offset.h) == 0 and not callable(offset.h) and not data.terminated.any():
        return FixedOffset(float(offset.h) * (1.0 - gamma))
    target = h(data.next_states) * data.continues
    base = offset.regressor or offset_model or default_regressor(random_state)
    ph = make_q_model(base, "per_action", n_actions, warm_start=False)
    kw = {} if data.sample_weight is None else {"sample_weight": np.asarray(data.sample_weight, dtype=np.float64)}
    ph.fit_q(data.states, data.actions, target, n_actions, **kw)
    return ValueTargetOffset(h, ph, mu_fn, gamma)

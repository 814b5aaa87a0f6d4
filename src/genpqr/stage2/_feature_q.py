r"""A Q-model that shares across actions (:mod:`genpqr.stage2`, ``encoding="action_features"``).

One regressor on joint rows ``[s, x_a]`` (with ``interactions=True`` also the products
``s_j x_a^k``), where ``x_a`` is action ``a``'s row of the data's action table
(:class:`genpqr.data.ActionTable`). ``Q(s, a)`` -- or, with ``structure="continuation"``,
``f(s, a) = (P mu Q)(s, a)`` -- is a prediction for *every* action in the table, also the
ones no row takes: what is learned about one action transfers to the actions whose features
are near it.

The mu-sums ``sum_a w(s, a) Q(s, a)`` that FQE's targets need run over blocks of (state,
action) pairs: no call to the regressor sees more than ``block_size`` joint rows, so the dense
``n x K x (d_s + d_x)`` input is never built. The blocked sum is exact (the same predictions,
summed in another order).
"""

from __future__ import annotations

import numpy as np

from ..data._validation import as_float_array, clone_learner as clone
from ..exceptions import ActionTableError
from ._regress import fit_regressor

__all__ = ["FeatureQ", "joint_features", "action_blocks"]


def joint_features(states, features, interactions: bool = False) -> np.ndarray:
    """Joint rows ``[s, x]`` (and the products ``s_j x^k`` when ``interactions``), shape
    (n, d_s + d_x [+ d_s d_x]), from ``states`` (n, d_s) and ``features`` (n, d_x)."""
    parts = [states, features]
    if interactions:
        parts.append((states[:, :, None] * features[:, None, :]).reshape(states.shape[0], -1))
    return np.hstack(parts)


def action_blocks(n_states: int, columns, block_size: int):
    """Yield ``(state_slice, action_codes)`` covering ``n_states x columns`` with at most
    ``block_size`` (state, action) pairs per block."""
    columns = np.asarray(columns, dtype=np.int64)
    if n_states == 0 or columns.size == 0:
        return
    rows = max(1, min(n_states, int(block_size)))
    per = max(1, int(block_size) // rows)
    for start in range(0, n_states, rows):
        for j in range(0, columns.size, per):
            yield slice(start, min(start + rows, n_states)), columns[j:j + per]


class FeatureQ:
    """One regressor on ``[s, x_a]`` (internal ``fit_q``/``predict_q`` interface).

    Parameters
    ----------
    regressor : regressor with fit/predict
    action_features : ndarray of shape (K, d_x)
        The action table's features, row ``a`` for action code ``a``.
    warm_start : bool
    interactions : bool
        Append the products ``s_j x_a^k`` (a linear regressor then fits a state-dependent
        linear function of the action features).
    block_size : int
        Most joint (state, action) rows passed to the regressor in one call when predicting.
    """

    def __init__(self, regressor, action_features, warm_start: bool, interactions: bool = False,
                 block_size: int = 65536):
        if action_features is None:
            raise ActionTableError("encoding='action_features' needs the actions' features: the data has no action "
                                   "table (build the Transitions with action_features=...), or pass "
                                   "action_features of shape (K, d) to FQE.fit")
        self.features = as_float_array(action_features, "action_features", ndim=2, allow_1d_as_column=True)
        if isinstance(block_size, bool) or int(block_size) < 1:
            raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
        self.model = clone(regressor)
        self.n_actions = self.features.shape[0]
        self.warm_start, self.interactions, self.block_size = warm_start, bool(interactions), int(block_size)
        self.fitted = False

    def _rows(self, states, actions) -> np.ndarray:
        return joint_features(states, self.features[actions], self.interactions)

    def fit_q(self, states, actions, targets, n_actions, sample_weight=None):
        if n_actions != self.n_actions:
            raise ActionTableError(f"the action table has {self.n_actions} actions but the data has {n_actions}")
        fit_regressor(self.model, self._rows(states, actions), targets, sample_weight)
        if self.warm_start and not self.fitted:
            self.model.set_params(warm_start=True)
        self.fitted = True
        return self

    def _predict_block(self, states, codes) -> np.ndarray:
        """Q at ``states`` x ``codes``, shape (n, len(codes)), in one regressor call."""
        n, b = states.shape[0], codes.size
        rows = self._rows(np.repeat(states, b, axis=0), np.tile(codes, n))
        return np.asarray(self.model.predict(rows), dtype=np.float64).reshape(n, b)

    def predict_q_columns(self, states, columns) -> np.ndarray:
        """Q at the ``columns`` actions (the others 0), shape (n, K), in blocks."""
        out = np.zeros((states.shape[0], self.n_actions))
        for rows, codes in action_blocks(states.shape[0], columns, self.block_size):
            out[rows, codes] = self._predict_block(states[rows], codes)
        return out

    def predict_q(self, states) -> np.ndarray:
        return self.predict_q_columns(states, np.arange(self.n_actions))

    def predict_q_at(self, states, actions) -> np.ndarray:
        out = np.empty(states.shape[0])
        for start in range(0, states.shape[0], self.block_size):
            rows = slice(start, start + self.block_size)
            out[rows] = self.model.predict(self._rows(states[rows], np.asarray(actions)[rows]))
        return out

    def mu_sum(self, states, weights, columns=None) -> np.ndarray:
        """``sum_a w(s_i, a) Q(s_i, a)``, shape (n,), over the ``columns`` actions (default:
        where some weight is non-zero), block by block: no (n, K) Q and no dense joint input."""
        weights = np.asarray(weights, dtype=np.float64)
        if columns is None:
            columns = np.flatnonzero(np.any(weights != 0, axis=0))
        out = np.zeros(states.shape[0])
        for rows, codes in action_blocks(states.shape[0], columns, self.block_size):
            out[rows] += np.sum(weights[rows][:, codes] * self._predict_block(states[rows], codes), axis=1)
        return out

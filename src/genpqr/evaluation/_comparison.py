r"""Comparing rewards across methods.

Two rewards that differ by potential shaping induce the same behaviour, so raw MSE between
them is meaningless. Two remedies:

* **Shared normalization** (:func:`compare_normalized`): map both rewards to the same
  normalization ``mu r = g`` (shaping lemma: ``r + c - gamma P c`` with
  ``(I - gamma P_mu) c = g - mu r``), then report MSE and Pearson correlation, weighted by a
  distribution over state-action pairs. Exactly invariant to shaping ``c - gamma P c``.
* **EPIC** (Gleave et al., 2021; :func:`epic_distance`): canonicalize each reward as a function
  of transitions,
  ``C(R)(s, a, s') = R(s, a) + gamma E_A R(s', A) - E_A R(s, A) - gamma E_{S, A} R(S, A)``
  with ``S ~ D_S`` and ``A ~ D_A`` independent, and report
  ``sqrt((1 - rho(C(R_a), C(R_b))) / 2)``, ``rho`` the Pearson correlation over transitions
  drawn from a coverage distribution. EPIC needs no model of ``P`` and is invariant to
  shaping with a *realised* potential ``gamma phi(s') - phi(s)`` and to positive scaling;
  the expected shaping ``c(s) - gamma (P c)(s, a)`` of state-action rewards is removed
  exactly only under deterministic transitions (otherwise up to the noise
  ``gamma (c(s') - (P c)(s, a))``).
"""

from __future__ import annotations

import numpy as np

from ..data._validation import as_float_array
from ..normalization import Normalization
from ..stage2 import normalized_reward
from ..stage2._tabular import as_kernel

__all__ = ["compare_normalized", "epic_distance", "epic_distance_tabular"]


def _weighted_stats(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> dict:
    w = w / w.sum()
    mse = float(np.sum(w * (a - b) ** 2))
    ma, mb = np.sum(w * a), np.sum(w * b)
    cov = np.sum(w * (a - ma) * (b - mb))
    va, vb = np.sum(w * (a - ma) ** 2), np.sum(w * (b - mb) ** 2)
    corr = float(cov / np.sqrt(va * vb)) if va > 0 and vb > 0 else float("nan")
    return {"mse": mse, "corr": corr}


def compare_normalized(reward_a, reward_b, P, gamma, normalization: Normalization, weights=None) -> dict:
    """MSE and correlation of two tabular rewards (S, K) after mapping both to ``normalization``.

    Parameters
    ----------
    weights : ndarray of shape (S, K), optional
        Distribution over state-action pairs (e.g. visit frequencies). Default uniform.

    Returns
    -------
    dict with ``mse``, ``corr`` and the two normalized tables ``a`` and ``b``.
    """
    a = as_float_array(reward_a, "reward_a", ndim=2)
    b = as_float_array(reward_b, "reward_b", ndim=2)
    if a.shape != b.shape:
        raise ValueError(f"reward_a and reward_b must have the same shape, got {a.shape} and {b.shape}")
    kernel = as_kernel(P, a.shape[1])
    na, nb = (normalized_reward(r, kernel, gamma, normalization) for r in (a, b))
    w = np.ones_like(na) if weights is None else as_float_array(weights, "weights", ndim=2)
    if w.shape != na.shape or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"weights must be non-negative of shape {na.shape} with positive sum")
    return {**_weighted_stats(na.ravel(), nb.ravel(), w.ravel()), "a": na, "b": nb}


def _canonical(r_sa, r_next, r_here, action_dist, state_mean: float, gamma: float) -> np.ndarray:
    """Canonicalized state-action reward at transitions:
    ``R(s,a) + gamma E_A R(s',A) - E_A R(s,A) - gamma E_{S,A} R(S,A)``."""
    return r_sa + gamma * (r_next @ action_dist) - r_here @ action_dist - gamma * state_mean


def epic_distance(reward_a, reward_b, states, actions, next_states, gamma, *, action_dist=None,
                  state_samples=None) -> float:
    """EPIC distance from samples, for state-action rewards given as callables ``states -> (n, K)``.

    Parameters
    ----------
    reward_a, reward_b : callable
        E.g. ``model.reward`` of two fitted models.
    states, next_states : ndarray of shape (n, d); actions : ndarray of shape (n,) codes
        Transitions of the coverage distribution.
    gamma : float
    action_dist : ndarray of shape (K,), optional
        ``D_A`` (default uniform).
    state_samples : ndarray of shape (m, d), optional
        Draws of ``D_S`` (default: ``states``).
    """
    states = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
    next_states = as_float_array(next_states, "next_states", ndim=2, allow_1d_as_column=True)
    actions = np.asarray(actions, dtype=np.int64)
    pool = states if state_samples is None else as_float_array(state_samples, "state_samples", ndim=2,
                                                                allow_1d_as_column=True)
    canon = []
    for reward in (reward_a, reward_b):
        r_s, r_next, r_pool = (np.asarray(reward(x), dtype=np.float64) for x in (states, next_states, pool))
        K = r_s.shape[1]
        dist = np.full(K, 1.0 / K) if action_dist is None else np.asarray(action_dist, dtype=np.float64)
        r_sa = r_s[np.arange(len(actions)), actions]
        canon.append(_canonical(r_sa, r_next, r_s, dist, float(np.mean(r_pool @ dist)), gamma))
    rho = float(np.corrcoef(canon[0], canon[1])[0, 1])
    return float(np.sqrt(max(0.0, (1.0 - rho) / 2.0)))


def epic_distance_tabular(reward_a, reward_b, P, gamma, *, coverage=None, state_dist=None,
                          action_dist=None) -> float:
    """Exact EPIC distance for tabular rewards of shape (S, K) or transition rewards (S, K, S).

    The Pearson correlation is taken over ``(s, a, s')`` with weights
    ``coverage(s, a) P(s'|s, a)`` (default uniform over (s, a)); ``D_S`` and ``D_A`` default to
    uniform. Canonicalization: ``C(R)(s,a,s') = R(s,a,s') + gamma m(s') - m(s) - gamma E_S m(S)``
    with ``m(s) = E_{A ~ D_A, S' ~ D_S} R(s, A, S')``.
    """
    a = as_float_array(reward_a, "reward_a")
    b = as_float_array(reward_b, "reward_b")
    if a.shape[:2] != b.shape[:2] or a.ndim not in (2, 3) or b.ndim not in (2, 3):
        raise ValueError(f"reward_a and reward_b must have the same shape (S, K) or (S, K, S), got {a.shape} and {b.shape}")
    S, K = a.shape[:2]
    dense = as_kernel(P, K).dense()
    cov = np.ones((S, K)) if coverage is None else as_float_array(coverage, "coverage", ndim=2)
    d_s = np.full(S, 1.0 / S) if state_dist is None else np.asarray(state_dist, dtype=np.float64)
    d_a = np.full(K, 1.0 / K) if action_dist is None else np.asarray(action_dist, dtype=np.float64)
    weights = (cov[:, :, None] * dense).ravel()
    canon = []
    for r in (a, b):
        R = np.broadcast_to(r[:, :, None], (S, K, S)) if r.ndim == 2 else r
        m = np.einsum("sat,a,t->s", R, d_a, d_s)
        canon.append((R + gamma * m[None, None, :] - m[:, None, None] - gamma * float(d_s @ m)).ravel())
    rho = _weighted_stats(canon[0], canon[1], weights)["corr"]
    return float(np.sqrt(max(0.0, (1.0 - rho) / 2.0)))

r"""Simple reference baselines.

* ``LogPolicyReward`` -- the log-policy pseudo-reward ``r(s, a) = log pi_hat(a|s) - g(s)``
  (the trivial optimum ``(u*, 0)`` of the relaxed problem, paper Lemma "Trivial optimum of the
  relaxed problem", shifted by ``g``).
* ``LinearRewardOracle`` -- ridge regression of the *logged* rewards on action-specific
  linear features: a supervised oracle reference, **not** an IRL method.

Every baseline follows one interface (scikit-learn style, like :class:`genpqr.GenPQR`):
``fit(data: Transitions) -> self``; ``reward(states, actions=None)`` giving ``(n, K)`` or, with
action *labels*, ``(n,)``; ``log_policy(states)`` giving the clipped stage-1 ``log pi_hat``
``(n, K)`` (``None`` for methods without a policy); ``fit_time_`` in seconds.

The shared stage-1 logic (``genpqr.baselines._base.fit_stage1``) accepts a classifier to be fitted (cloned, as
``genpqr.stage1._policy.fit_policy`` does) or, with ``policy_prefit=True``, an already fitted
classifier or ``genpqr.stage1._policy.FittedPolicy`` used as is, so that several methods can share
one policy estimate (the paper's matched comparison).
"""

from __future__ import annotations

import numbers
import time

import numpy as np
from sklearn.linear_model import Ridge

from ..data import Transitions
from ..stage1._policy import DEFAULT_CLIP
from ._base import (PolicyBaseline, RewardBaseline, check_fixed_offset, check_transitions, default_normalization,
                    fit_stage1)

__all__ = ["LogPolicyReward", "LinearRewardOracle"]


# ============================================================================ shared helpers
class LogPolicyReward(PolicyBaseline):
    r"""Log-policy pseudo-reward ``r(s, a) = log pi_hat(a|s) - g(s)`` (paper's baseline).

    ``(log pi, 0)`` is the trivial optimum of the *relaxed* IRL problem (paper, Lemma "Trivial
    optimum of the relaxed problem"): it reproduces the behaviour (with continuation value 0)
    but ignores the normalization. It is therefore **not** the normalized reward: under the
    anchor normalization ``r(s, a_dagger) = g(s)`` the normalized reward is
    ``log pi(a|s) - W(s) + gamma E[W(s')|s, a]`` with ``W`` the anchored value (Theorem "IRL via
    a Bellman equation"), which differs from ``log pi(a|s) - g(s)`` by a potential-shaping term.
    Even at ``gamma = 0`` the two differ: there the anchor-normalized reward is
    ``log pi(a|s) - log pi(a_dagger|s) + g(s)``, so the pseudo-reward coincides with it only
    where ``log pi(a_dagger|s) = 2 g(s)`` (for ``g = 0``: where the anchor has probability
    one). The method takes no ``gamma``
    (it uses none). Only ``g`` of the normalization is used; ``mu`` is ignored.

    Parameters
    ----------
    policy_model : classifier with ``predict_proba``, FittedPolicy or None
        Stage 1. Default :class:`genpqr.models.MLPClassifier` ``(random_state=random_state)``.
        With ``policy_prefit=True``: an already fitted classifier (``classes_`` = action codes)
        or a ``genpqr.stage1._policy.FittedPolicy``, used as is (not cloned, not refitted).
    policy_prefit : bool, default False
    clip : (low, high) or None, default (0.01, 0.99)
        Probability clip bounds; rows renormalized.
    normalization : Normalization, optional
        Supplies ``g`` (must be given, not data-estimated). Default ``anchor_action(first
        label)``, i.e. ``g = 0``.
    random_state : int, Generator or None

    Attributes
    ----------
    policy_ : FittedPolicy
    normalization_ : Normalization (labels bound to codes)
    encoder_ : FiniteActions
    n_actions_, n_features_in_ : int
    fit_time_ : float
        Seconds spent in ``fit`` (stage 1 included).
    """

    name = "Log-policy pseudo-reward"

    def __init__(self, policy_model=None, policy_prefit=False, clip=DEFAULT_CLIP, normalization=None,
                 random_state=None):
        self.policy_model = policy_model
        self.policy_prefit = policy_prefit
        self.clip = clip
        self.normalization = normalization
        self.random_state = random_state

    def fit(self, data: Transitions, y=None) -> "LogPolicyReward":
        """Fit stage 1 on ``data``; returns self."""
        start = time.perf_counter()
        data = check_transitions(data)
        norm = self.normalization if self.normalization is not None else default_normalization(data)
        norm = check_fixed_offset(norm, "LogPolicyReward").bind(data.encoder.encode)
        policy = fit_stage1(self.policy_model, self.policy_prefit, data, self.clip, self.random_state)
        self._record_data(data)
        self.normalization_ = norm
        self.policy_ = policy
        self.fit_time_ = time.perf_counter() - start
        return self

    def reward(self, states, actions=None) -> np.ndarray:
        """``log pi_hat(a|s) - g(s)``: (n, K), or (n,) at the given action labels."""
        X = self._states(states)
        table = self.policy_.log_proba(X) - self.normalization_.g(X)[:, None]
        return self._select(table, actions)


# ============================================================================ supervised oracle
class LinearRewardOracle(RewardBaseline):
    r"""Linear reward oracle: ridge regression of the **logged rewards** (supervised reference).

    **Not an IRL method.** It sees ``data.rewards`` -- the rewards that IRL methods must
    recover without seeing -- and regresses them on action-specific linear features
    ``onehot(a) (x) (1, s)``: a separate intercept and slope vector per action,
    ``r_hat(s, a) = c_a + s @ beta_a``. It measures what a linear reward model achieves when
    the rewards are observed (the benchmark's "linear reward baseline").

    The design has ``K (d + 1)`` columns and no extra global intercept
    (``Ridge(fit_intercept=False)``): the per-action intercepts are the intercept, and all
    coefficients, intercepts included, are penalized by ``alpha``. States are not standardized.

    Parameters
    ----------
    alpha : float >= 0, default 1.0
        Ridge penalty (``sklearn.linear_model.Ridge``).

    Attributes
    ----------
    intercepts_ : ndarray of shape (K,)
    coef_ : ndarray of shape (K, d)
    ridge_ : Ridge
    encoder_ : FiniteActions
    n_actions_, n_features_in_ : int
    fit_time_ : float

    Notes
    -----
    :meth:`log_policy` returns ``None``: the oracle has no policy estimate (so that
    ``SyntheticData.evaluate(reward, model.log_policy(X))`` simply omits the NLL).
    """

    name = "Linear reward (supervised oracle: sees logged rewards; not IRL)"

    def __init__(self, alpha=1.0):
        self.alpha = alpha

    def fit(self, data: Transitions, y=None) -> "LinearRewardOracle":
        """Ridge-regress ``data.rewards`` on ``onehot(a) (x) (1, s)``; returns self."""
        start = time.perf_counter()
        data = check_transitions(data)
        if data.rewards is None:
            raise ValueError(
                "LinearRewardOracle regresses the logged rewards, but data.rewards is None; build the transitions "
                "with rewards=... (this oracle is a supervised reference and needs observed rewards)"
            )
        alpha = self.alpha
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not (np.isfinite(alpha) and alpha >= 0):
            raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")
        K, d = data.n_actions, data.state_dim
        features = self._features(data.states, data.actions, K)
        ridge = Ridge(alpha=float(alpha), fit_intercept=False).fit(features, data.rewards)
        coef = ridge.coef_.reshape(K, d + 1)
        self._record_data(data)
        self.ridge_ = ridge
        self.intercepts_ = coef[:, 0].copy()
        self.coef_ = coef[:, 1:].copy()
        self.fit_time_ = time.perf_counter() - start
        return self

    @staticmethod
    def _features(states: np.ndarray, codes: np.ndarray, K: int) -> np.ndarray:
        n, d = states.shape
        design = np.zeros((n, K, d + 1))
        design[np.arange(n), codes, 0] = 1.0
        design[np.arange(n), codes, 1:] = states
        return design.reshape(n, K * (d + 1))

    def reward(self, states, actions=None) -> np.ndarray:
        """``c_a + s @ beta_a``: (n, K), or (n,) at the given action labels."""
        X = self._states(states)
        return self._select(X @ self.coef_.T + self.intercepts_, actions)

    def log_policy(self, states):
        """None: a supervised reward regression has no policy estimate."""
        self._check_fitted()
        return None

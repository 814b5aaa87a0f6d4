"""Reward-recovery baselines behind GenPQR's interface.

Every baseline is a scikit-learn style estimator with ``fit(transitions) -> self``,
``reward(states, actions=None)`` ((n, K), or (n,) at action labels), ``log_policy(states)``
(the clipped stage-1 ``log pi_hat`` (n, K), or ``None`` without a policy), ``fit_time_`` and a
human-readable ``name``.

* :class:`DeepPQR` -- Geng et al. (2020), anchor-action normalization only.
* :class:`LogPolicyReward` -- the log-policy pseudo-reward ``log pi_hat - g``.
* :class:`LinearRewardOracle` -- ridge regression of the *logged* rewards: a supervised oracle
  reference, not an IRL method.

(MaxEnt-IRL, AIRL and NFXP are to come.)
"""

from .deeppqr import DeepPQR
from .simple import LinearRewardOracle, LogPolicyReward, fit_stage1

__all__ = ["DeepPQR", "LogPolicyReward", "LinearRewardOracle", "fit_stage1"]

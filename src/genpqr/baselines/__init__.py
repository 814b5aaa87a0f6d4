"""Reward-recovery baselines behind GenPQR's interface.

Every baseline is a scikit-learn style estimator with ``fit(transitions) -> self``,
``reward(states, actions=None)`` ((n, K), or (n,) at action labels), ``log_policy(states)``
(the clipped stage-1 ``log pi_hat`` (n, K), or ``None`` without a policy), ``fit_time_`` and a
human-readable ``name``.

* :class:`DeepPQR` -- Geng et al. (2020), anchor-action normalization only.
* ``LogPolicyReward`` -- the log-policy pseudo-reward ``log pi_hat - g``.
* ``LinearRewardOracle`` -- ridge regression of the *logged* rewards: a supervised oracle
  reference, not an IRL method.

* :class:`AIRL` -- offline adversarial IRL: a stage-1 policy estimator (``predict_proba``) and
  the "AIRL state reward" baseline (its state-only reward head).
* :class:`MaxEntIRL` -- neural softmax-Q model whose logits are reported as the reward.
* :class:`NFXP` -- Rust's nested fixed point maximum likelihood (Newton-Kantorovich inner solve),
  the econometric reference for linear-in-parameters flow utilities.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._deeppqr import DeepPQR
    from ._airl import AIRL
    from ._maxent import MaxEntIRL
    from ..structural._nfxp import NFXP

__all__ = ["DeepPQR", "AIRL", "MaxEntIRL", "NFXP"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)

r"""Stage 1 at the pairs asked for, in blocks of bounded memory (many actions).

For ``K`` in the thousands a dense ``(n, K)`` matrix of probabilities does not fit: at ``n =
10^6`` and ``K = 10^4`` it is 80 GB. Stage 2 needs ``u = log pi`` only at the taken actions and
at the normalization's support, so these functions compute ``log pi(a_ij | s_i)`` for given codes
``a_ij`` and hold at most ``max_bytes`` of ``(rows x actions)`` scores at any time:

* a bilinear policy ``pi(a|s) ~ exp(F_s^T H_a)`` (:class:`genpqr.stage1.ConditionalLogit`,
  ``genpqr.models.TwoTowerClassifier``) by an online log-sum-exp over blocks of rows and of actions,
  ``log pi(a|s) = F_s^T H_a - log sum_b exp(F_s^T H_b)`` (exact: the same sum in another order);
* any other fitted policy by ``FittedPolicy.raw_proba`` on blocks of rows, clipped and
  renormalized per row as ``clip_proba`` does (the same numbers as the dense path).
"""

from __future__ import annotations

import numpy as np

from ..data._validation import as_float_array
from ._bilinear import DENSE_LIMIT_BYTES, block_rows
from ._policy import clip_proba

__all__ = ["log_policy_at"]


def log_policy_at(policy, states, codes, max_bytes: int = DENSE_LIMIT_BYTES, return_clipped: bool = False):
    """``u = log pi_hat`` of a fitted policy (``genpqr.stage1._policy.FittedPolicy``, one model, not
    cross-fitted) at action codes ``codes`` (n,) or (n, c), never holding more than ``max_bytes``
    of (rows x actions) probabilities.

    A model with ``predict_log_proba_at(X, codes, max_bytes=...)`` (a bilinear policy over action
    features) and no clipping (bounds (0, 1)) is asked directly; otherwise ``raw_proba`` runs on
    blocks of rows, each clipped and renormalized like the dense :meth:`FittedPolicy.log_policy`.
    With ``return_clipped`` also the boolean (same shape) of entries at a clip bound.
    """
    X = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
    codes = np.asarray(codes, dtype=np.int64)
    if codes.shape[:1] != (X.shape[0],) or codes.ndim not in (1, 2):
        raise ValueError(f"codes must have shape ({X.shape[0]},) or ({X.shape[0]}, c), got {codes.shape}")
    if policy.fold_of_row is not None or len(policy.models) != 1:
        raise ValueError("log_policy_at needs one policy model fitted on all rows (no cross-fitting)")
    model, K = policy.models[0], policy.n_actions
    classes = getattr(model, "classes_", None)
    if hasattr(model, "predict_log_proba_at") and tuple(policy.clip) == (0.0, 1.0) and classes is not None \
            and np.array_equal(np.asarray(classes), np.arange(K)):
        u = np.asarray(model.predict_log_proba_at(X, codes, max_bytes=max_bytes), dtype=np.float64)
        return (u, np.zeros(codes.shape, dtype=bool)) if return_clipped else u
    u, clipped = np.empty(codes.shape), np.zeros(codes.shape, dtype=bool)
    step = block_rows(K, max_bytes)
    for r0 in range(0, X.shape[0], step):
        proba, hit = clip_proba(policy.raw_proba(X[r0:r0 + step]), policy.clip)
        c = codes[r0:r0 + step].reshape(proba.shape[0], -1)
        rows = np.arange(proba.shape[0])[:, None]
        with np.errstate(divide="ignore"):
            u[r0:r0 + step] = np.log(proba[rows, c]).reshape(codes[r0:r0 + step].shape)
        clipped[r0:r0 + step] = hit[rows, c].reshape(codes[r0:r0 + step].shape)
    return (u, clipped) if return_clipped else u

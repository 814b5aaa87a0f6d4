r"""The models :class:`genpqr.GenPQR` uses by default on finite actions when the states are not
tabular indices (``q_model`` other than ``"exact"``): one place that picks them.

* Stage 1, ``default_policy_model``: :class:`genpqr.stage1.BasisLogit`, a multinomial
  logit on the standardized state, its cubic splines per coordinate and (up to
  ``genpqr.stage1._basis_logit.MAX_INTERACTION_DIM`` columns) their pairwise products, the non-linear terms
  shrunk toward the linear logit.
* Stage 2, ``default_q_model``: the closed-form LSTD fixed point
  (:class:`genpqr.stage2.LSTDQ`) on the same basis of the state (:class:`genpqr.stage1.StateBasis`),
  one weight vector per action. FQE with its default regressor
  (``HistGradientBoostingRegressor``) remains the default where LSTD per action does not apply:
  ``encoding`` ``"joint"``, ``"action_features"`` or ``"native"``, or more than
  ``MAX_DEFAULT_LSTD_FEATURES`` features over all actions (many actions).

Why (docs/benchmarks.md, "The default path of Experiment 2"): on the paper's Experiment 2 this
pair is the fastest path measured at the lowest reward error, and its settings were chosen by
held-out policy log loss and held-out Bellman residual, not by the reward; the same section
reports it on the repository's other continuous-state designs.
"""

from __future__ import annotations

from ..stage1._first_stage import FirstStageChoice

__all__ = ["default_policy_model", "default_q_model", "MAX_DEFAULT_LSTD_FEATURES", "DEFAULT_LSTD_ALPHA"]

#: Ridge of the default LSTD solve (``(A / n + alpha I) w = b / n``): the held-out Bellman residual
#: is flat from 1e-7 to 1e-5 and rises above (4-5x at LSTDQ's generic 1e-4) on the repository's
#: continuous-state designs; the most regularized value of the flat part.
DEFAULT_LSTD_ALPHA = 1e-5

#: The default stage 2 is LSTD per action up to this many features over all actions
#: (``K * (basis columns + 1)``: a dense system of this order); above it, FQE.
MAX_DEFAULT_LSTD_FEATURES = 4096


def default_policy_model(data):
    """``(classifier, FirstStageChoice)``: the stage-1 default for non-tabular states."""
    from ..stage1 import BasisLogit  # scikit-learn transformers: imported where the default is built

    model = BasisLogit()
    return model, FirstStageChoice("basis-logit", "the default for non-tabular states: a logit on splines and "
                                                  "products of the standardized state (BasisLogit)")


def _basis_size(state_dim: int) -> int:
    from ..stage1._basis_logit import DEFAULT_KNOTS, MAX_INTERACTION_DIM

    pairs = state_dim * (state_dim - 1) // 2 if state_dim <= MAX_INTERACTION_DIM else 0
    return state_dim * (DEFAULT_KNOTS + 3) + pairs


def default_q_model(data, *, encoding="auto", random_state=None):
    """The stage-2 default for non-tabular states: an :class:`~genpqr.stage2.LSTDQ` on
    :class:`~genpqr.stage1.StateBasis` features, or None (FQE with its default regressor) where
    it does not apply (module docstring)."""
    from ..stage1 import StateBasis
    from ..stage2 import LSTDQ

    if encoding not in ("auto", "per_action"):
        return None
    if data.n_actions * (_basis_size(data.state_dim) + 1) > MAX_DEFAULT_LSTD_FEATURES:
        return None
    return LSTDQ(features=StateBasis(), alpha=DEFAULT_LSTD_ALPHA, random_state=random_state)

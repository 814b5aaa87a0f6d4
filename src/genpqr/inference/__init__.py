"""Debiased, efficient inference for what a user asks of a recovered reward.

A *target* is a smooth functional of the law of the logged rows: the value of a known policy,
of a counterfactual softmax policy, their differences, and linear functionals of the normalized
reward (a mean, the value at cells, the projection on features). :func:`infer` estimates it by
the one-step correction of the plug-in with its efficient influence function (episode-grouped
cross-fitting; the Riesz representers in closed form on tabular states), and reports the
influence-function standard error, a Wald interval, the plug-in beside it, per-fold figures and
diagnostics (:class:`InferenceResult`). Method: van der Laan, Bibaut & Kallus, "Efficient
Inference for Inverse Reinforcement Learning and Dynamic Discrete Choice Models" (arXiv
2512.24407), with the influence functions of the counterfactual softmax value and of the
normalized-reward targets corrected (docs/inference.md).
"""

from ._infer import AUTO_FOLDS, CORRECTION_WARN, EPISODE_WARN, ESS_WARN, WEIGHT_WARN, infer, plug_in, projection_inference
from ._result import SE_KIND, InferenceResult, InferenceSummary
from ._spec import TARGET_KINDS, parse_target, target_kind
from ._targets import Target, policy_value, reward_at, reward_mean, reward_projection, softmax_value, value_difference
from ..exceptions import InferenceWarning

__all__ = ["infer", "plug_in", "projection_inference", "InferenceResult", "InferenceSummary", "SE_KIND", "Target", "policy_value", "softmax_value",
           "value_difference", "reward_mean", "reward_at", "reward_projection", "InferenceWarning", "AUTO_FOLDS", "parse_target", "target_kind", "TARGET_KINDS", "WEIGHT_WARN",
           "ESS_WARN", "EPISODE_WARN", "CORRECTION_WARN"]

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

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._infer import infer, projection_inference
    from ._result import InferenceResult
    from ..exceptions import InferenceWarning
    from ._targets import policy_value, reward_at, reward_mean, reward_projection, softmax_value, value_difference
    from ._spec import parse_target

__all__ = ["infer", "InferenceResult", "InferenceWarning", "projection_inference", "policy_value", "softmax_value",
           "value_difference", "reward_mean", "reward_at", "reward_projection", "parse_target"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)

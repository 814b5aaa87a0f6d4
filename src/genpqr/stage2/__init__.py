"""Stage 2: ``Q = u - g + gamma P mu Q``. Fitted Q evaluation and its Q-models, closed-form
LSTD with feature maps, the exact tabular solver (the oracle) and the tabular transition
models, transition kernels behind one protocol (``expect``/``push``: dense, sparse, or a
model's products), linear Bellman solves, the stage objects the estimator holds.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._qeval import FQE
    from ._lstd import LSTDQ
    from ._qmodels import TabularQModel
    from ._features import PolicyFeatures, fourier_features, onehot_features, spline_features
    from ._tabular import (TabularMDP, estimate_transitions, normalized_reward, policy_evaluation, recover_reward,
                           soft_optimal_policy, soft_optimal_solution, value_difference)
    from ._transition_models import CountKernel, ShrinkageKernel
    from ._transition_lowrank import LowRankKernel
    from ._transition_classifier import ClassifierKernel
    from ._transition_selection import select_transition_model

__all__ = ["FQE", "LSTDQ", "TabularQModel", "PolicyFeatures", "spline_features", "fourier_features",
           "onehot_features", "TabularMDP", "soft_optimal_policy", "soft_optimal_solution", "policy_evaluation",
           "normalized_reward", "recover_reward", "value_difference", "estimate_transitions", "CountKernel",
           "ShrinkageKernel", "LowRankKernel", "ClassifierKernel", "select_transition_model"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)

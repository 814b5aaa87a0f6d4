"""Stage 2: ``Q = u - g + gamma P mu Q``. Fitted Q evaluation and its Q-models, closed-form
LSTD with feature maps, the exact tabular solver (the oracle) and the tabular transition
models, transition kernels behind one protocol (``expect``/``push``: dense, sparse, or a
model's products), linear Bellman solves, the stage objects the estimator holds.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._qeval import FQE, STRUCTURES
    from ._feature_q import FeatureQ, action_blocks, joint_features
    from ._qmodels import (ENCODINGS, BellmanTargets, FQEHistory, TabularQModel, fit_regressor, make_q_model, predict_at,
                           mu_sum, predict_columns, q_from_continuation, warm_start_ok)
    from ._lstd import BellmanProblem, BellmanStatistics, LSTDQ
    from ._features import (FEATURE_MAPS, PolicyFeatures, bind_policy, fourier_features, learned_representation,
                            make_features, onehot_features, spline_features)
    from ._kernels import DENSE_KERNEL_MAX_BYTES, ROW_SUM_TOL, KernelOperator, is_kernel_like
    from ._tabular import (SoftOptimalSolution, TabularMDP, TabularRecovery, TransitionKernel, as_kernel,
                           estimate_transitions, kernel_from_counts, normalized_reward, policy_evaluation, recover_reward,
                           soft_optimal_policy, soft_optimal_solution, transition_counts, value_difference)
    from ._linear_bellman import DIRECT_MAX_STATES, LinearSolveInfo, solve_linear_bellman
    from ._stages import ExactStage2, ReferenceWeights, SampleStage2
    from ._transition_models import CountKernel, ShrinkageKernel, TransitionMoves
    from ._transition_lowrank import LowRankKernel
    from ._transition_classifier import ClassifierKernel
    from ._kernel_files import SPARSE_FILE_BYTES, check_kernel_against_moves, load_kernel
    from ._transition_selection import (AutoTransition, TransitionSelection, default_candidates,
                                        select_transition_model, singleton_share)
    from ._transition_spec import TRANSITION_SPECS, is_count_spec, is_estimated_spec, resolve_transition_model
    from ._column_weights import ColumnWeights, column_mu_sum, sample_columns

__all__ = ["FQE", "STRUCTURES", "ENCODINGS", "FeatureQ", "action_blocks", "joint_features", "mu_sum", "TabularQModel", "FQEHistory", "BellmanTargets", "q_from_continuation", "make_q_model",
           "warm_start_ok", "predict_columns", "predict_at", "fit_regressor", "BellmanProblem", "BellmanStatistics",
           "LSTDQ", "spline_features", "fourier_features", "onehot_features", "PolicyFeatures", "make_features",
           "bind_policy", "learned_representation", "FEATURE_MAPS", "TransitionKernel", "KernelOperator",
           "is_kernel_like", "DENSE_KERNEL_MAX_BYTES", "TabularMDP", "TabularRecovery",
           "SoftOptimalSolution", "as_kernel", "soft_optimal_policy", "soft_optimal_solution", "policy_evaluation",
           "normalized_reward", "recover_reward", "value_difference", "estimate_transitions", "transition_counts",
           "kernel_from_counts", "ROW_SUM_TOL", "DIRECT_MAX_STATES", "LinearSolveInfo", "solve_linear_bellman",
           "ExactStage2", "SampleStage2", "ReferenceWeights", "TransitionMoves", "CountKernel", "ShrinkageKernel",
           "LowRankKernel", "ClassifierKernel", "AutoTransition", "TransitionSelection", "select_transition_model",
           "default_candidates", "load_kernel", "check_kernel_against_moves", "SPARSE_FILE_BYTES", "TRANSITION_SPECS", "is_count_spec", "is_estimated_spec", "singleton_share",
           "resolve_transition_model", "ColumnWeights", "column_mu_sum", "sample_columns"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)

"""Stage 1: policy models' glue. Probabilities or densities -> ``u = log pi`` (clipped),
frequency and spline classifiers' checks, the default basis logit of continuous states, the conditional logit over actions with features, cross-fitting by episode, first-stage reports, the E-step of latent agent types.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._policy import (DEFAULT_CLIP, FittedDensity, FittedPolicy, FREQUENCY_CHECK_EXCLUSIONS, FrequencyClassifier,
                          check_classifier, check_clip, clip_log_proba, clip_proba, fit_density, fit_policy, fit_stage1,
                          is_auto, prefit_density, prefit_policy)
    from ._conditional_logit import (STATE_BASES, ConditionalLogit, action_codes, action_feature_matrix, bind_action_features,
                                     check_feature_dim)
    from ._clipping import (AUTO_LOW_FRACTION, AUTO_LOW_MAX, CLIP_WARN_FRACTION, PAPER_CLIP, auto_clip, resolve_policy_clip,
                            auto_clip_from_summary, check_bounds, clip_binds_message, clip_fractions, mu_expectation,
                            parse_clip, safe_log, warn_if_clip_binds)
    from ._stage1 import PROGRESS_DELAY, FittedStage1, cross_fit_models, forward_progress, progress_bar
    from ._cells import (COMPRESS_SHARE, ChoiceCells, FitOnCells, RowTable, choice_cells, compresses, distinct_rows,
                         present_keys, repeated_rows)
    from ._bilinear import DENSE_LIMIT_BYTES, bilinear_log_partition, bilinear_log_proba_at, block_rows
    from ._blocked import log_policy_at
    from ._latent_types import (SEPARATION_WARN, latent_type_warnings, TypePosterior, episode_codes, mixing_log_prior,
                                separation_share, type_posteriors,
                                type_row_weights)
    from ._first_stage import (C_GRID, DEFAULT_SEED, FirstStageChoice, KNOT_GRID, SPARSE_MEDIAN_VISITS, SPARSE_ZERO_SHARE,
                               SplineLogit, cells_are_sparse, choose_tabular_policy, given_first_stage, select_spline_logit,
                               sparsity, state_is_ordered)
    from ._basis_logit import DEFAULT_C, DEFAULT_KNOTS, MAX_INTERACTION_DIM, BasisLogit, StateBasis

__all__ = ["DENSE_LIMIT_BYTES", "bilinear_log_partition", "bilinear_log_proba_at", "block_rows", "log_policy_at",
           "ConditionalLogit", "STATE_BASES", "bind_action_features", "check_feature_dim", "action_feature_matrix",
           "action_codes", "RowTable", "ChoiceCells", "FitOnCells", "choice_cells", "distinct_rows", "repeated_rows", "present_keys", "compresses",
           "COMPRESS_SHARE", "FittedDensity", "fit_density", "prefit_density", "clip_proba", "clip_log_proba",
           "FrequencyClassifier", "FREQUENCY_CHECK_EXCLUSIONS", "FittedPolicy", "fit_policy", "prefit_policy",
           "fit_stage1", "check_classifier", "check_clip", "is_auto", "DEFAULT_CLIP", "PAPER_CLIP",
           "CLIP_WARN_FRACTION", "AUTO_LOW_MAX", "AUTO_LOW_FRACTION", "parse_clip", "check_bounds",
           "auto_clip_from_summary", "auto_clip", "resolve_policy_clip", "clip_fractions", "clip_binds_message", "warn_if_clip_binds",
           "safe_log", "mu_expectation", "FittedStage1", "cross_fit_models", "PROGRESS_DELAY", "progress_bar", "forward_progress", "TypePosterior",
           "SEPARATION_WARN",
           "latent_type_warnings", "episode_codes",
           "type_posteriors", "mixing_log_prior", "type_row_weights", "separation_share", "SplineLogit", "select_spline_logit",
           "cells_are_sparse", "choose_tabular_policy", "FirstStageChoice", "state_is_ordered", "given_first_stage",
           "sparsity", "SPARSE_MEDIAN_VISITS", "SPARSE_ZERO_SHARE", "KNOT_GRID", "C_GRID", "DEFAULT_SEED",
           "BasisLogit", "StateBasis", "MAX_INTERACTION_DIM", "DEFAULT_C", "DEFAULT_KNOTS"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)

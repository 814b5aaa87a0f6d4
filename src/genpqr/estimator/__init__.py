"""The estimator: :class:`GenPQR` (one class for finite and box actions), its fitted state
(:class:`FittedState`, one object set by ``fit``), the fit paths it chooses (strategies:
:class:`FinitePath` with the many-actions stage 2 :class:`LargePath`, :class:`BoxPath`,
:class:`TypesPath`), the option objects of path-specific knobs (:class:`ContinuousOptions`,
:class:`TypeOptions`), diagnostics and their checks, offsets, persistence (:func:`load`); signed
files and output folders as transactions in the public module :mod:`genpqr.estimator.manifest`.
"""

from ._estimator import GenPQR, load
from ._state import STATE_FORMAT, ContinuousState, FittedState, TabularState, TypesState
from ._options import ContinuousOptions, TypeOptions, fqe_spec, q_model_kind
from ._estimator_finite import FinitePath, as_weights, is_closed_form, mu_expectation, safe_log
from ._estimator_box import BoxPath
from ._defaults import DEFAULT_LSTD_ALPHA, MAX_DEFAULT_LSTD_FEATURES, default_policy_model, default_q_model
from ._estimator_large import (EXACT_READ_PAIRS, MU_SAMPLES, LargePath, LargeStage2, behaviour_proposal,
                               large_path_applies, reference_columns)
from ._diagnostics import ContinuousDiagnostics, Diagnostics, FitDiagnostics, FitSummary
from ._diagnostic_checks import (CLIP_SHARE, COVERAGE_LIMIT, COVERAGE_SHARE, MLE_UNAFFECTED, REWARD_OUTPUT,
                                 THIN_SHARE, THIN_TRANSITIONS, emit, failed_diagnostics, poorly_covered,
                                 thin_transitions)
from ._offsets import RegressedOffset, ValueTargetOffset, default_regressor, fit_offset, outcomes, state_means
from ._latent_types import (SEPARATION_WARN, LatentTypeWarning, TypeFit, TypesPath, ccp_parameter_count,
                            fit_type_models, information_criteria, type_criteria, type_loglik_terms, type_warnings)
from ._persistence import HOLDS, MODEL_FILE, dump, pickled_parts, read_model, require_data, without_data

__all__ = ["GenPQR", "load", "FittedState", "TabularState", "ContinuousState", "TypesState", "STATE_FORMAT",
           "ContinuousOptions", "TypeOptions", "fqe_spec", "q_model_kind", "FinitePath", "is_closed_form",
           "as_weights", "BoxPath", "FitDiagnostics", "Diagnostics",
           "ContinuousDiagnostics", "FitSummary", "CLIP_SHARE", "COVERAGE_LIMIT", "COVERAGE_SHARE", "REWARD_OUTPUT",
           "MLE_UNAFFECTED", "THIN_TRANSITIONS", "THIN_SHARE", "thin_transitions", "poorly_covered", "failed_diagnostics",
           "emit", "RegressedOffset", "ValueTargetOffset",
           "default_regressor", "outcomes", "state_means", "fit_offset", "dump", "read_model", "without_data",
           "require_data", "pickled_parts", "HOLDS", "MODEL_FILE", "safe_log", "mu_expectation",
           "SEPARATION_WARN", "LatentTypeWarning", "TypeFit", "TypesPath", "ccp_parameter_count", "fit_type_models",
           "information_criteria", "type_criteria", "type_loglik_terms", "type_warnings", "MU_SAMPLES",
           "EXACT_READ_PAIRS", "behaviour_proposal", "LargeStage2", "LargePath", "large_path_applies",
           "reference_columns", "default_policy_model", "default_q_model", "MAX_DEFAULT_LSTD_FEATURES",
           "DEFAULT_LSTD_ALPHA"]

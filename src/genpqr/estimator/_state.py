r"""The fitted state of :class:`genpqr.GenPQR`: one typed object, set in one place.

``GenPQR.fit`` runs a fit path (:mod:`genpqr.estimator`: the finite-action, box-action and
latent-type paths in memory; the streamed and distributed fits of :mod:`genpqr.scale`), which
returns a :class:`FittedState`; the estimator stores it as ``fitted_`` and nothing else writes it.
The fitted attributes users read (``policy_``, ``stage2_``, ``normalization_``, ...) are
read-only views of its fields (``StateView``): an attribute whose field is None (or whose
part, e.g. the exact path's ``TabularState``, is absent) does not exist, so ``hasattr``
tells the paths apart as before. The few things a caller may add to a fitted model go through
methods that return a new estimator (``with_training_data``, ``with_structural``) or a fit
option (``fit(X, first_stage=...)``).

A saved model is this object (with the parameters); ``STATE_FORMAT`` is its format, and a
model file of another format is refused with a message to refit
(:class:`genpqr.exceptions.ModelFormatError`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..exceptions import ModelFormatError

__all__ = ["FittedState", "TabularState", "ContinuousState", "TypesState", "STATE_FORMAT"]

#: The format of a saved :class:`FittedState` (2: the one-object state; 1: attributes set one by one).
STATE_FORMAT = 2


@dataclass(frozen=True, kw_only=True)
class TabularState:
    """What the exact tabular path (``q_model="exact"``) adds to the fitted state.

    Attributes
    ----------
    n_states : int
        ``S``, the number of tabular states.
    visited_states : ndarray of shape (S,), bool
        States with an observed choice (rewards elsewhere are not identified).
    transition_counts : ndarray of shape (S, K)
        Observed moves ``(s, a) -> s'`` per cell, terminated ones included.
    transition_model : None or object
        None when the kernel is the counts, else the transition model or kernel used.
    transition_selection : None or TransitionSelection
        ``transition_model="auto"``: the held-out comparison and its reason.
    """

    n_states: int
    visited_states: np.ndarray
    transition_counts: np.ndarray
    transition_model: object = None
    transition_selection: object = None


@dataclass(frozen=True, kw_only=True)
class ContinuousState:
    """What the box-action path adds to the fitted state.

    Attributes
    ----------
    reference : ReferenceMeasure
        ``lambda`` of ``u = log dpi/dlambda``.
    reference_measure : str
        Its description on the action space.
    density_integrals : ndarray of shape (m,)
        The policy density's numerical integrals at a few states (NaN when not checked).
    mc_seeds : list of int
        Seeds of the fit's and of the read-off's Monte Carlo nodes.
    kernel : ReferenceKernel
        ``mu`` bound to the action space and the policy.
    integration : IntegrationRule
        The rule of the ``mu``-integrals.
    """

    reference: object
    reference_measure: str
    density_integrals: np.ndarray
    mc_seeds: list
    kernel: object = None
    integration: object = None


@dataclass(frozen=True, kw_only=True)
class TypesState:
    """What a fit with latent types (``n_types > 1``) holds instead of one stage 1 and stage 2.

    Attributes
    ----------
    type_models : list of GenPQR
        One fitted one-type model per type, in decreasing order of proportion.
    type_episodes : ndarray of shape (n_episodes,)
        The episode ids, sorted (the rows of ``type_weights``).
    type_weights : ndarray of shape (n_episodes, M)
        Posterior type probabilities per episode.
    type_proportions : ndarray of shape (M,)
        Mixing proportions (averaged over episodes when they depend on covariates).
    type_mixing_coef : ndarray or None
        The multinomial logit of the mixing on covariates (None without covariates).
    loglik : float
    n_em_iter : int
    em_converged : bool
    n_params : int or None
        Free parameters (None when the first stage's cannot be counted).
    aic, bic : float
    type_separation : float
        Share of the way the posteriors moved from the proportions to certain types.
    em_start_logliks : list of float
        The log likelihood of every EM start.
    """

    type_models: list
    type_episodes: np.ndarray
    type_weights: np.ndarray
    type_proportions: np.ndarray
    type_mixing_coef: object
    loglik: float
    n_em_iter: int
    em_converged: bool
    n_params: object
    aic: float
    bic: float
    type_separation: float
    em_start_logliks: list


@dataclass(frozen=True, kw_only=True)
class FittedState:
    """Everything a fitted :class:`genpqr.GenPQR` holds (``GenPQR.fitted_``); its fields are
    read through the estimator's attributes of the same name with a trailing underscore
    (``policy`` -> ``policy_``). A field that is None is no attribute.

    Attributes
    ----------
    gamma : float
        The discount, checked.
    action_space : FiniteActions or BoxActions
        The data's action space (finite: the label-code map, ``encoder_``).
    state_dim : int
        Number of state columns.
    normalization : Normalization or None
        ``mu r = g`` bound to the action codes (a box: ``mu`` a reference kernel). None with types.
    policy : FittedPolicy or FittedStage1 or None
        Stage 1 (the exact path: one full-sample fit). None with types.
    policy_folds : FittedPolicy or None
        The exact path's cross-fitted fold models, for out-of-fold diagnostics only.
    first_stage : FirstStageChoice or None
        Finite actions: which stage-1 model was used and why.
    stage2 : ExactStage2, SampleStage2, LargeStage2 or FQE, or None
        The fitted stage 2 (``q``, ``mu``, ``g``, ``u`` at any states); a box: the FQE. None with types.
    diagnostics : Diagnostics or ContinuousDiagnostics or None
    taken_actions : ndarray of shape (K,), bool, or None
        Finite actions: whether some training row takes each action.
    training_data : Transitions or None
        None in a model saved without its data and after an out-of-core fit.
    data_fingerprint : str or None
        :meth:`~genpqr.data.Transitions.fingerprint` of the training data (None out of core).
    saved_without_data : bool
        True in a model saved with ``include_data=False``.
    tabular : TabularState or None
        The exact tabular path's tables.
    continuous : ContinuousState or None
        The box-action path's measure, rule and kernel.
    types : TypesState or None
        A fit with latent types.
    structural : object or None
        A structural fit attached with ``GenPQR.with_structural`` (``genpqr fit --features``).
    q_model : object or None
        Finite actions: the stage-2 model of the fit (``"exact"``, ``q_model``, or where that is
        None the default ``genpqr.estimator._defaults.default_q_model`` picked; None there: FQE's default).
    format : int
        ``STATE_FORMAT`` of the code that made it.
    """

    gamma: float
    action_space: object
    state_dim: int
    normalization: object = None
    policy: object = None
    policy_folds: object = None
    first_stage: object = None
    stage2: object = None
    diagnostics: object = None
    taken_actions: np.ndarray | None = None
    training_data: object = None
    data_fingerprint: str | None = None
    saved_without_data: bool = False
    tabular: TabularState | None = None
    continuous: ContinuousState | None = None
    types: TypesState | None = None
    structural: object = None
    q_model: object = None
    format: int = STATE_FORMAT

    @property
    def is_box(self) -> bool:
        """Fitted on continuous actions (a box)."""
        return not self.action_space.is_finite

    @property
    def is_exact(self) -> bool:
        """Fitted on the exact tabular path."""
        return self.tabular is not None

    def replace(self, **changes) -> "FittedState":
        """A copy with ``changes`` (``replace``)."""
        return dataclasses.replace(self, **changes)


def check_state_format(state, where: str = "this model") -> None:
    """Raise :class:`~genpqr.exceptions.ModelFormatError` unless ``state`` is a
    :class:`FittedState` of ``STATE_FORMAT``."""
    found = getattr(state, "format", None) if isinstance(state, FittedState) else None
    if found != STATE_FORMAT:
        raise ModelFormatError(f"{where} was saved by another version of genpqr (fitted-state format "
                               f"{found if found is not None else 1}, this version reads {STATE_FORMAT}); refit it "
                               f"with this version (GenPQR(...).fit(data), or genpqr fit) and save it again")


class StateView:
    """A read-only attribute of :class:`genpqr.GenPQR` reading a field of its ``fitted_``
    (``path``: field names, e.g. ``("tabular", "n_states")``). The attribute does not exist
    before ``fit``, when a part on the path is None, or when the field is None (unless
    ``none_is_value``: then None is its value)."""

    def __init__(self, *path: str, none_is_value: bool = False, derive=None):
        self.path, self.none_is_value, self.derive = path, none_is_value, derive
        self.name = "_".join(path) + "_"

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.__dict__.get("fitted_")
        if value is None:
            raise AttributeError(f"{type(obj).__name__} has no attribute {self.name!r} (not fitted)")
        for i, part in enumerate(self.path):
            value = getattr(value, part)
            last = i == len(self.path) - 1
            if value is None and not (last and self.none_is_value):
                raise AttributeError(f"this {type(obj).__name__} fit has no {self.name!r}")
        if self.derive is not None:
            value = self.derive(value)
            if value is None:
                raise AttributeError(f"this {type(obj).__name__} fit has no {self.name!r}")
        return value

    def __set__(self, obj, value):
        raise AttributeError(f"{self.name} is read-only: fit sets the fitted state (fitted_); to attach training "
                             f"data or a structural fit use with_training_data / with_structural, which return a "
                             f"new estimator")

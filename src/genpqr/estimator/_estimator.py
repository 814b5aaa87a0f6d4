r"""``GenPQR``: policy estimation, then Q-evaluation, then reward read-off (paper, Alg. 1),
for finite and continuous actions.

::

    u(s, a) = log dpi/dlambda (a|s)                   stage 1, a classifier (finite actions:
                                                      u = log pi_hat) or a conditional density
    Q = u - g + gamma P mu Q                          stage 2, FQE or exact solve
    r = Q - mu Q + g,   v = (u - g - Q) / gamma = -P mu Q   (Theorem "IRL via a Bellman equation")

The ``mu``-integrals are sums over the K actions with weights ``mu(a|s)`` for a finite action
set, and a quadrature or Monte Carlo rule over a box (:mod:`genpqr.actions`). ``fit`` chooses a
fit path, a strategy object that reads the estimator's parameters and returns its fitted state
(:class:`~genpqr.estimator.FittedState`, stored as ``fitted_``, the only fitted attribute):
``genpqr.estimator._estimator_finite.FinitePath`` (with the many-actions stage 2 of
``genpqr.estimator._estimator_large.LargePath``), ``genpqr.estimator._estimator_box.BoxPath``,
``genpqr.estimator._latent_types.TypesPath``, or an out-of-core fit of :mod:`genpqr.scale` passed as
``X``. The fitted attributes (``policy_``, ``stage2_``, ...) are read-only views of that state.
"""

from __future__ import annotations

import copy

import numpy as np
from ..data import Transitions
from .. import exceptions
from ..data._estimator_base import LightEstimator
from ..data._validation import as_float_array
from ._diagnostics import Diagnostics, FitSummary
from ._estimator_box import (BoxPath, box_continuation, box_inputs, box_mu_q, box_needs_actions, box_q, box_reward,
                             box_summary, box_u)
from ._estimator_finite import FinitePath, as_weights
from ._finite_readout import (bellman_residual, exact_value_difference, finite_summary, renormalize_exact,
                              sample_value_difference, with_kernel)
from ._latent_types import TypesPath
from ._options import check_n_types
from ._persistence import require_data
from ._state import FittedState, StateView, check_state_format

__all__ = ["GenPQR", "Diagnostics", "load"]


def _finite(space):
    return space if space.is_finite else None


class GenPQR(LightEstimator):
    """Generalized Policy-to-Q-to-Reward (GenPQR) reward recovery.

    Parameters
    ----------
    normalization : Normalization, optional
        ``mu r = g`` (see :mod:`genpqr.normalization`). Default: ``mean_zero()``.
    gamma : float in [0, 1)
    policy_model : classifier with ``predict_proba``, optional
        Stage 1, used as given. Default (None): on the exact tabular path the rule of ``genpqr
        fit --policy-model auto`` (``genpqr.stage1._first_stage.choose_tabular_policy``, the same
        function): a spline logit chosen by episode-grouped cross-validation when the state is
        ordered and its cells are sparse, else cell frequencies
        (:class:`~genpqr.stage1.FrequencyClassifier`). The state counts as ordered when
        ``transition_model`` is an increment kernel (:class:`genpqr.structural.IncrementKernel`)
        or ``n_states`` is given (``genpqr.stage1._first_stage.state_is_ordered``; for a categorical
        state index with ``n_states`` pass ``FrequencyClassifier(n_states)``). The rule's folds
        are drawn with ``random_state`` (None: 0, ``genpqr fit``'s default ``--seed``), so the same data give the
        same first stage, and the same reward, through both doors. ``first_stage_`` says which was used and why.
        Other paths: :class:`genpqr.stage1.BasisLogit`, a logit on splines and products of the
        standardized state. With continuous actions a conditional density (default
        ``LinearGaussianDensity(degree=2, heteroscedastic=True)``, squashed onto a bounded box).
    policy_prefit : bool
        If True, ``policy_model`` is already fitted (on action codes or labels matching the data's) and is used as
        is: not cloned, not refitted. Lets several estimators share one policy estimate. Incompatible with
        ``cross_fit``.
    q_model : "exact", "lstd", LSTDQ, FQE, regressor, or native Q-model, optional
        Stage 2. ``"exact"``: states are tabular indices, ``P`` is estimated (``transition_model``) and the
        Bellman equation is solved exactly. ``"lstd"`` or a :class:`genpqr.stage2.LSTDQ`: one linear
        solve in features (``"lstd"`` is ``LSTDQ(encoding="per_action")``; pair features ``phi(s) (x)
        x_a`` with ``LSTDQ(encoding="action_features")``). Otherwise fitted Q evaluation: a
        :class:`genpqr.stage2.FQE` holds its settings (``encoding``, ``n_iterations``, ``tol``,
        ``warm_start``, ``validation_fraction``, ``n_iter_no_change``, ``structure``,
        ``freeze_transformers``, ...; its ``progress`` is this estimator's and its ``random_state``,
        when None, this estimator's); a bare regressor or native Q-model ``m`` (or None: gradient
        boosting) is ``FQE(m)`` with FQE's defaults. With continuous actions the regressor sees ``[s, a]``.
        Default (None) on finite actions and non-tabular states: ``LSTDQ(features=StateBasis(),
        alpha=1e-5)``, else FQE (``genpqr.estimator._defaults.default_q_model``).
    clip : "auto", (low, high) or None
        Probability clip bounds (rows renormalized after clipping). ``"auto"`` (default):
        chosen from the data so that no bound binds on an observed action -- no clip when the
        first stage's probabilities are all positive, else a floor ``low = min(0.01, 0.5 * p_min)``,
        ``p_min`` the smallest fitted probability of an observed action (:mod:`genpqr.stage1`).
        The paper used (0.01, 0.99); ``None``: no clip. A :class:`ClippingWarning` is raised when more
        than ``genpqr.stage1._clipping.CLIP_WARN_FRACTION`` of the observed choices are decided by a bound.
        Finite actions (continuous actions: ``ContinuousOptions(min_log_density=...)``).
    cross_fit : int or None
        Number of episode folds for cross-fitting stage 1. Fitted Q evaluation and LSTD use the
        out-of-fold probabilities at the training rows. On the exact tabular path the reward
        table, the clip (``clip="auto"``) and the structural estimators' start use one
        full-sample fit of stage 1 whatever ``cross_fit`` is: the exact solve on a state grid
        has no training rows to keep apart, and averaging fold models would make the reward
        depend on the folds. There the fold models (``policy_folds_``) give the out-of-fold
        diagnostics only (``diagnostics_.policy_log_loss``, the report's calibration), so
        ``cross_fit=None`` and ``genpqr fit``'s default ``--cross-fit 5`` give the same reward.
    n_states : int, optional
        Number of tabular states (exact path; default max index + 1).
    transition_model : "auto", "counts", None, kernel, transition model or callable
        Exact path: where ``P`` comes from. ``"auto"`` (default, the same as ``genpqr fit``'s
        ``--transition auto``): chosen by held-out next-state log-likelihood over episode folds among
        counts, :class:`~genpqr.stage2.ShrinkageKernel` and :class:`~genpqr.stage2.LowRankKernel`
        (:func:`genpqr.stage2.select_transition_model`; counts stay unless another model beats them by
        2 standard errors, so well-filled cells keep the counts and their reward); the comparison is
        ``transition_selection_`` and a line of :meth:`summary`. ``"counts"`` or None: the count
        kernel (:func:`genpqr.stage2.estimate_transitions`, sparse). A kernel (dense (S, K, S), sparse
        (S*K, S) or any object with ``expect``/``push``: ``genpqr.stage2._kernels.as_kernel``): known
        transitions. A transition model of :mod:`genpqr.stage2` or a callable ``(transitions,
        n_states, n_actions) -> kernel``: an estimator (e.g. :class:`genpqr.stage2.ShrinkageKernel`,
        ``genpqr.structural._ddc.increment_kernel``). Weighted rows and a single episode keep the
        counts under ``"auto"``; so do streamed fits. The comparison's episode folds come from
        ``random_state`` (None: seed 0, as ``genpqr fit``'s default ``--seed``).
    solver : str
        Linear solver of the exact path (``genpqr.stage2._linear_bellman.solve_linear_bellman``).
    offset_model : regressor, optional
        Estimates data-driven ``g`` (outcome or value normalizations) when the
        normalization does not name one. Default gradient boosting. Finite actions.
    min_support : int
        Warn (:class:`WeakSupportWarning`) when fewer rows support ``mu`` (continuous actions: when
        the effective sample size of ``mu / pi_hat`` is below it).
    continuous : ContinuousOptions, optional
        Continuous actions (``X.action_space`` a :class:`~genpqr.data.BoxActions`; paper, App.
        "Continuous-Action Extension"): the integration rule of the ``mu``-integrals, the reference
        measure ``lambda``, the log-density floor and the density checks
        (:class:`~genpqr.estimator.ContinuousOptions`; None: its defaults). The default
        normalization there is ``uniform()`` on a bounded box and ``behavior(g=0)`` otherwise.
    n_types : int
        Latent agent types (finite actions): ``n_types > 1`` runs EM over episodes with a weighted
        stage 1 and stage 2 per type (``genpqr.estimator._latent_types.TypesPath``). An integer >= 1.
    types : TypeOptions, optional
        The EM's settings (:class:`~genpqr.estimator.TypeOptions`: mixing covariates,
        type-specific transitions, starts, iterations, tolerance; None: its defaults).
    random_state : int or None
    progress : bool or None
        Progress bars (None: only on a terminal).

    Attributes
    ----------
    fitted_ : FittedState
        The fitted state, one object (:class:`~genpqr.estimator.FittedState`); the attributes
        below are read-only views of its fields, and exist only where the fit has them.
    policy_ : FittedPolicy
        Stage 1 (exact tabular path: one full-sample fit, also when ``cross_fit`` is set).
    policy_folds_ : FittedPolicy or None
        Finite actions: the exact path's cross-fitted fold models (``cross_fit`` set), for the
        out-of-fold diagnostics only; None otherwise (and in a model saved without its data).
    first_stage_ : FirstStageChoice
        Finite actions: which stage-1 model was used and why (``genpqr.stage1._first_stage.FirstStageChoice``:
        ``"spline"`` or ``"frequency"`` by the tabular rule, ``"given"``, or ``"basis-logit"``);
        printed by :meth:`summary`. ``genpqr fit`` records its ``--policy-model`` choice here
        (``fit(X, first_stage=...)``).
    q_model_ : object
        Finite actions: ``q_model`` or its default (None: FQE's default regressor).
    normalization_ : Normalization (labels bound to codes)
    gamma_ : float
    action_space_ : FiniteActions or BoxActions
    encoder_ : FiniteActions
        Finite actions: labels <-> codes ``0..K-1``.
    n_actions_ : int
        Finite actions: K.
    taken_actions_ : ndarray of shape (K,), bool
        Finite actions: the actions some training row takes. False marks an action listed only in
        the data's action table: its reward is a prediction from its features (through the
        policy model), not an estimate from observed choices.
    stage2_ : ExactStage2, SampleStage2, LargeStage2 or FQE
        The fitted stage 2.
    diagnostics_ : Diagnostics or ContinuousDiagnostics
    training_data_ : Transitions
        Absent from a model saved with ``save(path, include_data=False)`` and from an
        out-of-core fit (:meth:`with_training_data` gives it back).
    n_states_ : int
        Exact path: the number of tabular states.
    visited_states_ : ndarray of shape (S,), bool
        Exact path: states with an observed choice; rewards elsewhere are not identified (see :meth:`reward_table`).
    transition_counts_ : ndarray of shape (S, K)
        Exact path: observed moves (s, a) -> s' per cell, terminated ones included (not choices).
    transition_model_ : None or object
        Exact path: None when the kernel is the counts, else the transition model or kernel used.
    transition_selection_ : None or ``genpqr.stage2._transition_selection.TransitionSelection``
        Exact path with ``transition_model="auto"``: the held-out comparison and its reason.
    state_dim_ : int
        Number of state columns.
    data_fingerprint_ : str
        :meth:`~genpqr.data.Transitions.fingerprint` of the training data (kept when the data is
        left out of a save): whether data read again is the data of the fit, by content.
    reference_, reference_measure_, density_integrals_, kernel_, integration_, fqe_, mc_seeds_
        Continuous actions: the reference measure and its description, the policy density's
        integrals, ``mu`` bound to the space, the integration rule, the FQE (``stage2_``), the
        Monte Carlo seeds (``genpqr.estimator._state.ContinuousState``).
    type_models_, type_episodes_, type_weights_, type_proportions_, type_mixing_coef_, loglik_, n_em_iter_, \
em_converged_, n_params_, aic_, bic_, type_separation_, em_start_logliks_
        Latent types (``n_types > 1``): a one-type GenPQR per type, the posteriors per episode,
        the mixture's fit (``genpqr.estimator._state.TypesState``).
    structural_ : StructuralFit
        Only when attached with :meth:`with_structural` (``genpqr fit --features``): the structural
        fit that :meth:`counterfactual` uses by default (see :func:`genpqr.structural.fit_structural`).

    Notes
    -----
    Model selection: ``fit(X)`` takes a ``Transitions`` as ``X``, :meth:`score` is the
    held-out policy log likelihood minus the held-out squared Bellman residual, and a
    ``Transitions`` is split by scikit-learn's splitters, so ``GridSearchCV(GenPQR(...),
    {"q_model__n_iterations": [...]}, cv=GroupKFold(5)).fit(data, groups=data.episode_ids)``
    chooses FQE's settings (docs/model_selection.md).
    """

    def __init__(self, normalization=None, gamma=0.9, policy_model=None, policy_prefit=False, q_model=None,
                 clip="auto", cross_fit=None, n_states=None, transition_model="auto", solver="auto",
                 offset_model=None, min_support=30, continuous=None, n_types=1, types=None, random_state=None,
                 progress=None):
        self.normalization = normalization
        self.gamma = gamma
        self.policy_model = policy_model
        self.policy_prefit = policy_prefit
        self.q_model = q_model
        self.clip = clip
        self.cross_fit = cross_fit
        self.n_states = n_states
        self.transition_model = transition_model
        self.solver = solver
        self.offset_model = offset_model
        self.min_support = min_support
        self.continuous = continuous
        self.n_types = n_types
        self.types = types
        self.random_state = random_state
        self.progress = progress

    # ------------------------------------------------------------------ the fitted state, read-only
    gamma_ = StateView("gamma")
    action_space_ = StateView("action_space")
    encoder_ = StateView("action_space", derive=_finite)
    n_actions_ = StateView("action_space", derive=lambda space: space.n_actions if space.is_finite else None)
    state_dim_ = StateView("state_dim")
    normalization_ = StateView("normalization")
    policy_ = StateView("policy")
    policy_folds_ = StateView("policy_folds", none_is_value=True)
    first_stage_ = StateView("first_stage")
    stage2_ = StateView("stage2")
    diagnostics_ = StateView("diagnostics")
    taken_actions_ = StateView("taken_actions")
    training_data_ = StateView("training_data")
    data_fingerprint_ = StateView("data_fingerprint")
    saved_without_data_ = StateView("saved_without_data", derive=lambda saved: True if saved else None)
    structural_ = StateView("structural")
    q_model_ = StateView("q_model")
    n_states_ = StateView("tabular", "n_states")
    visited_states_ = StateView("tabular", "visited_states")
    transition_counts_ = StateView("tabular", "transition_counts")
    transition_model_ = StateView("tabular", "transition_model", none_is_value=True)
    transition_selection_ = StateView("tabular", "transition_selection", none_is_value=True)
    reference_ = StateView("continuous", "reference")
    reference_measure_ = StateView("continuous", "reference_measure")
    density_integrals_ = StateView("continuous", "density_integrals")
    mc_seeds_ = StateView("continuous", "mc_seeds")
    kernel_ = StateView("continuous", "kernel")
    integration_ = StateView("continuous", "integration")
    fqe_ = StateView(derive=lambda state: state.stage2 if state.is_box else None)
    type_models_ = StateView("types", "type_models")
    type_episodes_ = StateView("types", "type_episodes")
    type_weights_ = StateView("types", "type_weights")
    type_proportions_ = StateView("types", "type_proportions")
    type_mixing_coef_ = StateView("types", "type_mixing_coef", none_is_value=True)
    loglik_ = StateView("types", "loglik")
    n_em_iter_ = StateView("types", "n_em_iter")
    em_converged_ = StateView("types", "em_converged")
    n_params_ = StateView("types", "n_params", none_is_value=True)
    aic_ = StateView("types", "aic")
    bic_ = StateView("types", "bic")
    type_separation_ = StateView("types", "type_separation")
    em_start_logliks_ = StateView("types", "em_start_logliks")

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None, *, first_stage=None):
        """Fit both stages on logged transitions ``X`` (a :class:`~genpqr.data.Transitions`;
        ``y`` is ignored: the actions are the labels); returns self.

        ``X`` can be split by scikit-learn's model selection (``GridSearchCV``,
        ``cross_validate``): split by episode, ``groups=X.episode_ids`` with ``GroupKFold``;
        see :meth:`score` and docs/model_selection.md. ``X`` may also be an out-of-core fit of
        :mod:`genpqr.scale` (an object with ``fit_state(estimator)``, e.g. what
        :func:`genpqr.scale.fit_parquet` passes), which then runs the fit.

        ``first_stage`` (a ``genpqr.stage1._first_stage.FirstStageChoice``, optional): how the caller
        chose ``policy_model``, recorded as ``first_stage_`` instead of ``"given"`` (``genpqr fit``
        records its ``--policy-model`` rule this way).

        The fit path (finite actions, continuous actions, latent types, or ``X``'s own) returns the
        fitted state (:class:`~genpqr.estimator.FittedState`); it is stored here as ``fitted_``,
        replacing any earlier fit."""
        fit_state = getattr(X, "fit_state", None)
        if callable(fit_state) and not isinstance(X, Transitions):
            state = fit_state(self)
        else:
            state = self._path(X).fit(X, first_stage=first_stage)
        self.fitted_ = state  # the one place a fit sets the fitted state
        return self

    def _path(self, data):
        """The strategy of an in-memory fit on ``data``."""
        if not isinstance(data, Transitions):
            raise TypeError(
                f"data must be genpqr.data.Transitions (build it with from_arrays / from_pandas / "
                f"from_episodes), got {type(data).__name__}"
            )
        if check_n_types(self.n_types) > 1:  # latent types: EM over episodes, one fit per type
            return TypesPath(self)
        return FinitePath(self) if data.is_finite else BoxPath(self)

    def _fitted_copy(self, state: FittedState, **params) -> "GenPQR":
        """A shallow copy of this estimator with ``params`` replaced and the fitted state ``state``."""
        new = copy.copy(self)
        new.__dict__.update(params)
        new.fitted_ = state
        return new

    def __setstate__(self, state):
        """Unpickling (a model file): a fitted state of another format is refused with a message
        to refit (:class:`~genpqr.exceptions.ModelFormatError`)."""
        if "fitted_" in state or any(k.endswith("_") and not k.startswith("_") for k in state):
            check_state_format(state.get("fitted_"), "this model file")
        super().__setstate__(state)

    @property
    def _is_box(self) -> bool:
        """Fitted on continuous actions (a box)."""
        state = self.__dict__.get("fitted_")
        return state is not None and state.is_box

    # ------------------------------------------------------------------ prediction
    def _check_fitted(self, types_ok=False):
        state = self.__dict__.get("fitted_")
        if state is None:
            raise exceptions.NotFittedError("this GenPQR is not fitted yet; call fit(transitions) first")
        if state.types is not None and not types_ok:
            raise TypeError(f"this GenPQR has {len(state.types.type_models)} latent types: use type_models_[m] (one "
                            f"per type)")

    def _states(self, states):
        self._check_fitted()
        X = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
        d = self.fitted_.state_dim
        if X.shape[1] != d:
            raise ValueError(f"states must have {d} column(s) like the training data, got {X.shape[1]}")
        return X

    def _select(self, table, actions):
        if actions is None:
            return table
        codes = self.encoder_.encode(actions)
        if codes.shape[0] != table.shape[0]:
            raise ValueError(f"actions has {codes.shape[0]} entries but states has {table.shape[0]} rows")
        return table[np.arange(table.shape[0]), codes]

    def _box(self, states, actions, what):
        """``(state, X, A)`` of a continuous-action read-off at ``actions`` (required)."""
        box_needs_actions(actions, what)
        self._check_fitted()
        return (self.fitted_, *box_inputs(self.fitted_, states, actions))

    def log_policy(self, states, actions=None) -> np.ndarray:
        """``u(s, .) = log pi_hat(.|s)`` (clipped), shape (n, K); with continuous actions
        ``u(s, a) = log dpi_hat/dlambda`` (clipped at ``min_log_density``) at ``actions``, (n,)."""
        if self._is_box:
            return box_u(*self._box(states, actions, "log_policy"))[0]
        u = self.stage2_.u(self._states(states))
        return u if actions is None else self._select(u, actions)

    def q(self, states, actions=None) -> np.ndarray:
        """``Q^mu_{u-g}``: (n, K), or (n,) at the given action labels (continuous actions:
        at the given actions, (n,))."""
        if self._is_box:
            return box_q(*self._box(states, actions, "q"))[0]
        return self._select(self.stage2_.q(self._states(states)), actions)

    def mu_q(self, states) -> np.ndarray:
        """``(mu Q)(s)``, shape (n,): the sum over the actions with weights ``mu(a|s)``, or
        with continuous actions ``int Q(s, a) mu(da|s)`` by the fitted integration rule (Monte
        Carlo draws seeded from ``random_state``: the same states give the same values)."""
        X = self._states(states)
        if self._is_box:
            return box_mu_q(self.fitted_, X)
        return np.sum(self.stage2_.mu(X) * self.stage2_.q(X), axis=1)

    def reward(self, states, actions=None, *, as_frame: bool = False):
        """``r = Q - mu Q + g``: (n, K), or (n,) at the given action labels (continuous
        actions: at the given actions, (n,)).

        ``as_frame=True`` returns a labelled pandas object instead of the array: a DataFrame
        whose columns are the action labels (one row per state, indexed like ``states`` when it
        is a DataFrame), or with ``actions`` a Series named ``reward``."""
        if self._is_box:
            out = box_reward(*self._box(states, actions, "reward"))
            return self._as_frame(out, states, actions) if as_frame else out
        X = self._states(states)
        if actions is not None and hasattr(self.stage2_, "reward_at"):  # many actions: only the pairs asked
            out = self.stage2_.reward_at(X, self.encoder_.encode(actions))
        else:
            q = self.stage2_.q(X)
            out = self._select(q - np.sum(self.stage2_.mu(X) * q, axis=1)[:, None] + self.stage2_.g(X)[:, None],
                               actions)
        return self._as_frame(out, states, actions) if as_frame else out

    def _as_frame(self, values, states, actions):
        """``values`` (n, K) or (n,) as a DataFrame with the action labels as columns, or a Series."""
        import pandas as pd

        index = states.index if isinstance(states, (pd.DataFrame, pd.Series)) else None
        if values.ndim == 1:
            return pd.Series(values, index=index, name="reward")
        return pd.DataFrame(values, index=index, columns=list(self.encoder_.labels))

    def continuation(self, states, actions=None) -> np.ndarray:
        """``v = (u - g - Q) / gamma`` (= ``-P mu Q``): (n, K) or (n,). Zero when gamma = 0."""
        if self._is_box:
            return box_continuation(*self._box(states, actions, "continuation"))
        X = self._states(states)
        if self.fitted_.is_exact:
            return self._select(self.stage2_.recovery.continuation[self.stage2_.index(X)], actions)
        if self.gamma_ == 0:
            return self._select(np.zeros((X.shape[0], self.n_actions_)), actions)
        v = (self.stage2_.u(X) - self.stage2_.g(X)[:, None] - self.stage2_.q(X)) / self.gamma_
        return self._select(v, actions)

    def reward_table(self):
        """Exact path: the reward as a DataFrame (states x action labels).

        Rows of states with no observed choice (``~visited_states_``) are not identified by the
        data: the policy there falls back to its default (the frequency policy: the overall
        action frequencies) and the reward follows from that, not from behaviour. Columns of
        actions no row takes (an action table's, ``~taken_actions_``) are predictions from the
        actions' features; ``attrs["never_taken"]`` lists their labels."""
        import pandas as pd

        self._check_fitted()
        if not self.fitted_.is_exact:
            raise ValueError("reward_table() needs the exact tabular path (q_model='exact')")
        table = pd.DataFrame(self.stage2_.recovery.reward, columns=self.encoder_.labels)
        taken = getattr(self, "taken_actions_", np.ones(self.n_actions_, dtype=bool))
        table.attrs["never_taken"] = self.encoder_.labels[~taken].tolist()
        return table

    def policy_value_difference(self, policy_1, policy_2, states=None) -> np.ndarray:
        r"""``V^{pi_1}(s) - V^{pi_2}(s)`` under the reward ``u = log pi_hat`` (no normalization
        needed: Theorem "Identification of policy value differences"). Finite actions.

        Policies are a Normalization (its ``mu``), an (S, K) / (K,) array of probabilities or a
        callable ``states -> (n, K)``. Returns shape (S,) on the exact path (or at ``states``),
        else at ``states`` (default: the training states).
        """
        from ..normalization import Normalization

        self._check_fitted()
        pols = [as_weights(p.bind(self.encoder_.encode) if isinstance(p, Normalization) else p)
                for p in (policy_1, policy_2)]
        X = None if states is None else self._states(states)
        if self.fitted_.is_exact:
            return exact_value_difference(self.fitted_, pols, X)
        return sample_value_difference(self, pols, X)

    def policy_log_loss(self, data: Transitions) -> float:
        """``-mean log pi_hat(a|s)`` on (held-out) transitions, with clipped probabilities
        (continuous actions: the weighted ``-mean u(s, a)``)."""
        self._check_fitted()
        if self._is_box:
            if not isinstance(data, Transitions) or data.is_finite:
                raise TypeError(f"data must be Transitions with continuous actions (a box action space), got "
                                f"{type(data).__name__}")
            return float(-np.average(self.log_policy(data.states, data.actions), weights=data.weights))
        codes = self.encoder_.encode(data.labels_of())
        u = self.log_policy(data.states)
        return float(-np.mean(u[np.arange(data.n), codes]))

    def score(self, X: Transitions, y=None) -> float:
        r"""Held-out fit of both stages (higher is better): what ``GridSearchCV`` maximizes.

        ``score = L_1 - L_2`` on transitions ``X`` (``y`` is ignored), with

        * ``L_1 = (1/n) sum_i log pi_hat(a_i|s_i)`` over every choice row of ``X`` (clipped
          probabilities, as the model uses them): the mean policy log likelihood, nats per choice
          (stage 1; ``= -policy_log_loss(X)``);
        * ``L_2 = (1/m) sum_j delta_j^2`` over the ``m`` rows of ``X`` with an observed next state,
          ``delta_j = u(s_j, a_j) - g(s_j) + gamma (1 - terminated_j) sum_a' mu(a'|s'_j) Q(s'_j, a')
          - Q(s_j, a_j)``: the mean squared sample Bellman residual of the fitted ``Q`` in the
          equation stage 2 solves (``Q = u - g + gamma P mu Q``, paper Alg. 1) under the fitted
          normalization and ``u = log pi_hat``; nats squared (``Q`` is in units of ``u``).

        Both terms are on the scale of ``u = log pi`` and a perfect model has ``L_2`` at its
        noise floor, so they are added with weight 1. For a fixed policy model (the usual grid
        over ``q_model`` and its hyperparameters) ``L_1`` is the same for every candidate and
        the ranking is by ``L_2``: the held-out version of the loss every FQE iteration
        minimizes. For the policy model ``L_1`` dominates. Other weightings: score with
        :meth:`score_terms` (e.g. ``scoring={"policy": ..., "bellman": ...}`` in
        ``GridSearchCV``; docs/model_selection.md).

        Caveats. ``E[delta^2 | s, a] = (T Q - Q)^2(s, a) + gamma^2 Var[mu Q(s') | s, a]``: the
        sample residual carries the spread of ``mu Q`` over next states (the double-sampling
        term), so it is not zero at the true ``Q``; it compares candidates, it is not an error
        bar. The normalization is an identifying assumption, not a fit choice: do not select it
        by this score. Score on held-out *episodes* (``GroupKFold`` with ``groups=episode_ids``):
        row-level folds put the neighbouring rows of one trajectory on both sides of the split
        and reward memorization.
        """
        terms = self.score_terms(X)
        return terms["policy_log_likelihood"] - terms["bellman_mse"]

    def score_terms(self, X: Transitions) -> dict:
        """The two terms of :meth:`score` on transitions ``X``: ``policy_log_likelihood``
        (``L_1``), ``bellman_mse`` (``L_2``), and the rows they average over (``n_choices``,
        ``n_transitions``)."""
        self._check_fitted()
        if not isinstance(X, Transitions):
            raise TypeError(f"X must be genpqr.data.Transitions, got {type(X).__name__}")
        if self._is_box or not X.is_finite:
            raise NotImplementedError("score is implemented for finite actions (the continuous-action Bellman "
                                      "residual needs the mu-integral at held-out next states)")
        codes = self.encoder_.encode(X.labels_of())
        u_rows = self.log_policy(X.states)[np.arange(X.n), codes]
        data = X.subset(X.next_observed) if X.n_choice_only else X
        if data.n == 0:
            raise ValueError("X has no row with an observed next state: the Bellman term needs transitions "
                             "(split by episode so that held-out folds hold whole episodes)")
        residual = bellman_residual(self, data, self.encoder_.encode(data.labels_of()))
        return {"policy_log_likelihood": float(np.mean(u_rows)), "bellman_mse": float(np.mean(residual ** 2)),
                "n_choices": int(X.n), "n_transitions": int(data.n)}

    # ------------------------------------------------------------------ re-use of stage 1
    def renormalize(self, normalization) -> "GenPQR":
        """A copy under another normalization, re-solving stage 2 only (stage 1 is re-used;
        remark after Theorem "IRL via a Bellman equation"). ``self`` is unchanged. Needs the
        training data, except on the exact path: a model saved with ``include_data=False``
        re-solves from its stored log-policy table, kernel and choice counts (the same numbers;
        an outcome-regression offset ``behavior(g=None)`` still needs the data)."""
        self._check_fitted()
        state = self.fitted_
        if state.training_data is None and state.is_exact:
            return self._fitted_copy(renormalize_exact(state, normalization, self.solver), normalization=normalization)
        require_data(self, "renormalize")
        path = BoxPath(self) if state.is_box else FinitePath(self, q_model=state.q_model)
        return self._fitted_copy(path.solve(state, normalization), normalization=normalization)

    def with_kernel(self, kernel, *, transition_counts=None) -> "GenPQR":
        """Exact path: a copy whose reward is re-solved under another transition ``kernel`` (an
        ``genpqr.stage2._kernels.as_kernel`` kernel on the same states), keeping this fit's ``u``,
        normalization, choice counts and discount; ``transition_counts`` (S, K) replaces
        ``transition_counts_`` when given. ``self`` is unchanged. The bootstrap's split of the
        reward's uncertainty by source (:mod:`genpqr.evaluation`) re-solves with a replicate's
        kernel or stage 1 this way."""
        self._check_fitted()
        if not self.fitted_.is_exact:
            raise ValueError("with_kernel needs the exact tabular path (q_model='exact')")
        return self._fitted_copy(with_kernel(self.fitted_, kernel, self.solver, transition_counts))

    def with_training_data(self, data: Transitions) -> "GenPQR":
        """A copy holding ``data`` as its training data (a model saved without it, or fitted out
        of core), after checking that ``data`` is the data of the fit: its
        :meth:`~genpqr.data.Transitions.fingerprint` equals ``data_fingerprint_`` (every row, in
        order, with its labels). ``self`` is unchanged. ``ValueError`` when they differ or the fit
        kept no fingerprint."""
        self._check_fitted(types_ok=True)
        if not isinstance(data, Transitions):
            raise TypeError(f"data must be genpqr.data.Transitions, got {type(data).__name__}")
        expected = self.fitted_.data_fingerprint
        if expected is None:
            raise ValueError("this fit kept no fingerprint of its data (an out-of-core fit), so data read again "
                             "cannot be checked against it; refit in memory instead")
        if data.fingerprint() != expected:
            raise ValueError("data differs from the data of the fit (its fingerprint does not match "
                             "data_fingerprint_: other rows, another order or other labels)")
        return self._fitted_copy(self.fitted_.replace(training_data=data, saved_without_data=False))

    def with_structural(self, structural) -> "GenPQR":
        """A copy holding ``structural`` (a :class:`genpqr.structural.StructuralFit` estimated on
        this model, e.g. by :func:`genpqr.structural.fit_structural`) as ``structural_``: the fit
        :meth:`counterfactual` answers on by default, saved with the model. ``self`` is unchanged."""
        self._check_fitted(types_ok=True)
        return self._fitted_copy(self.fitted_.replace(structural=structural))

    # ------------------------------------------------------------------ counterfactuals
    def counterfactual(self, reward_change=None, transitions=None, gamma=None, *, parameter_change=None,
                       route="auto", structural=None, initial=None, horizon=None, state_values=None,
                       check_normalization=None, n_boot=0, level=0.95, n_jobs=1, random_state=None, progress=None,
                       warn=True, min_visits=10, support_threshold=0.05, money_parameter=None):
        r"""Soft-optimal behaviour under changed primitives (exact tabular path; :mod:`genpqr.counterfactuals`).

        Two routes. *Nonparametric*: the soft-optimal policy of ``(r_hat + delta, P', gamma')``
        against the baseline ``(r_hat, P_hat, gamma)``, with whether the answer is invariant to the
        normalization (re-solved under ``check_normalization``;
        :class:`~genpqr.counterfactuals.IdentificationWarning` if not). *Structural* (with a structural fit: ``structural=`` or ``self.structural_``, set by
        ``genpqr fit --features``; :func:`genpqr.structural.fit_structural`): the same on the
        estimated flow utility ``x @ theta`` (``parameter_change`` moves ``theta``), with
        delta-method intervals from the parameters' covariance. ``route="auto"`` (default) answers
        by the structural route when there is a structural fit, and then also reports the
        nonparametric answer and the gap between them (``route_gap``). Every answer says how much
        of its occupancy lies on states and cells the data saw fewer than ``min_visits`` times
        (``result.support``; :class:`~genpqr.exceptions.ExtrapolationWarning` above
        ``support_threshold``), and the bootstrap counts replicates that left the data's support.
        ``money_parameter`` (the name of the structural parameter that converts utility into money,
        e.g. the replacement cost) adds the welfare change in money units (``result.welfare``).

        Parameters: see :func:`genpqr.counterfactuals.counterfactual`.

        Returns
        -------
        CounterfactualResult
        """
        from ..counterfactuals import counterfactual

        return counterfactual(self, reward_change, transitions, gamma, parameter_change=parameter_change, route=route,
                              structural=structural, initial=initial, horizon=horizon, state_values=state_values,
                              check_normalization=check_normalization, n_boot=n_boot, level=level, n_jobs=n_jobs,
                              random_state=random_state, progress=progress, warn=warn, min_visits=min_visits,
                              support_threshold=support_threshold, money_parameter=money_parameter)

    from ._infer import infer  # GenPQR.infer(target): debiased inference on the reward (genpqr.inference)

    # ------------------------------------------------------------------ persistence
    def save(self, path, include_data: bool = False) -> None:
        """Save the fitted model to a signed file; reload with :func:`genpqr.load`.

        A pickle (joblib; cloudpickle for user closures such as a lambda ``g``) behind a header
        with its size, SHA-256 and an HMAC under this user's key (``genpqr.estimator._manifest``), written
        atomically. A model file is code: :func:`genpqr.load` loads only what genpqr signed.
        The file holds the parameters and the fitted state (``fitted_``, format
        ``genpqr.estimator._state.STATE_FORMAT``): a file of another format is refused on loading
        with a message to refit.

        ``include_data=False`` (default) leaves out the training transitions and the per-row
        cross-fitting folds (O(n) bytes): the saved model still predicts (``reward``,
        ``continuation``, ``q``, ``reward_table``, ``summary``; ``value_difference`` on the exact
        path) but cannot ``renormalize`` or be refitted. ``include_data=True`` keeps them.
        See :mod:`genpqr.estimator`.
        """
        from ._persistence import dump

        self._check_fitted(types_ok=True)
        dump(self, path, include_data=include_data)

    def summary(self):
        """A short account of the fit (``genpqr.estimator._diagnostics.FitSummary``): ``print(model.summary())``
        or ``str(...)`` gives the text (sizes, normalization, support and coverage, the policy log loss,
        the clip, the stage-2 solve and the first stage), ``.to_frame()`` its figures, and a notebook
        shows it as a table. With a structural fit (``structural_``, set by ``genpqr fit --features``),
        its parameter table follows (``tables``, ``as_text()``, ``as_html()``, ``as_latex()``)."""
        self._check_fitted()
        summary = box_summary(self.fitted_, type(self).__name__) if self._is_box else finite_summary(self.fitted_)
        structural = getattr(self, "structural_", None)
        if structural is not None and hasattr(structural, "summary"):
            return structural.summary().after(summary)
        return summary


def load(path, trusted: bool = False) -> GenPQR:
    """Load a model saved with :meth:`GenPQR.save`, from its file or a ``genpqr fit`` output folder
    (checked against its ``manifest.json``). A model file is code: without ``trusted`` only a file
    ``save`` signed under this user's key (or that a signed manifest lists) loads, checked before
    anything in it runs; ``trusted=True`` loads any, for a source you trust. Raises
    ``UntrustedFileError``, ``IntegrityError``, ``ModelFormatError`` (a file of an older genpqr:
    refit) or ``TypeError`` (see ``genpqr.estimator._persistence.read_model``)."""
    from ._persistence import read_model

    model = read_model(path, trusted=trusted)
    if not isinstance(model, GenPQR):
        raise TypeError(f"{path} does not hold a GenPQR model (got {type(model).__name__})")
    return model

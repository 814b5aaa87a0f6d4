r"""``GenPQR``: policy estimation, then Q-evaluation, then reward read-off (paper, Alg. 1),
for finite and continuous actions.

::

    u(s, a) = log dpi/dlambda (a|s)                   stage 1, a classifier (finite actions:
                                                      u = log pi_hat) or a conditional density
    Q = u - g + gamma P mu Q                          stage 2, FQE or exact solve
    r = Q - mu Q + g,   v = (u - g - Q) / gamma = -P mu Q   (Theorem "IRL via a Bellman equation")

The ``mu``-integrals are sums over the K actions with weights ``mu(a|s)`` for a finite action
set, and a quadrature or Monte Carlo rule over a box (:mod:`genpqr.actions`). The fitting steps
of each are in :class:`~genpqr.estimator.FinitePath` and :class:`~genpqr.estimator.BoxPath`; the
fitted stage-2 objects in :mod:`genpqr.stage2`, the diagnostics in
:class:`~genpqr.estimator.FitDiagnostics`.
"""

from __future__ import annotations

import copy

import numpy as np
from sklearn.base import BaseEstimator

from ..data.validation import as_float_array
from ..data import Transitions
from ._diagnostics import Diagnostics
from ._estimator_box import BoxPath
from ._estimator_finite import FinitePath
from ..exceptions import NotFittedError
from ..normalization import Normalization
from ._persistence import require_data
from ..stage2 import ExactStage2, ReferenceWeights, SampleStage2
from ._offsets import RegressedOffset, ValueTargetOffset
from ._latent_types import fit_latent_types

__all__ = ["GenPQR", "Diagnostics", "load"]

# Former private names, importable (and unpickled from saved models) under their old paths.
_ExactStage2, _SampleStage2, _ReferenceWeights = ExactStage2, SampleStage2, ReferenceWeights
_RegressedOffset, _ValueTargetOffset = RegressedOffset, ValueTargetOffset


class GenPQR(FinitePath, BoxPath, BaseEstimator):
    """Generalized Policy-to-Q-to-Reward (GenPQR) reward recovery.

    Parameters
    ----------
    normalization : Normalization, optional
        ``mu r = g`` (see :mod:`genpqr.normalization`). Default: ``mean_zero()``.
    gamma : float in [0, 1)
    policy_model : classifier with ``predict_proba``, optional
        Stage 1, used as given. Default (None): on the exact tabular path the rule of ``genpqr
        fit --policy-model auto`` (:func:`genpqr.stage1.choose_tabular_policy`, the same
        function): a spline logit chosen by episode-grouped cross-validation when the state is
        ordered and its cells are sparse, else cell frequencies
        (:class:`~genpqr.stage1.FrequencyClassifier`). The state counts as ordered when
        ``transition_model`` is an increment kernel (:class:`genpqr.structural.ddc.IncrementKernel`)
        or ``n_states`` is given (:func:`~genpqr.stage1.state_is_ordered`; for a categorical
        state index with ``n_states`` pass ``FrequencyClassifier(n_states)``). The rule's folds
        are drawn with ``random_state`` (None: 0, ``genpqr fit``'s default ``--seed``), so the same data give the
        same first stage, and the same reward, through both doors. ``first_stage_`` says which was used and why.
        Other paths: :class:`genpqr.stage1.BasisLogit`, a logit on splines and products of the standardized state.
    policy_prefit : bool
        If True, ``policy_model`` is already fitted (on action codes or labels matching the data's) and is used as
        is: not cloned, not refitted. Lets several estimators share one policy estimate. Incompatible with
        ``cross_fit``.
    q_model : "exact", "lstd", LSTDQ, regressor, or native Q-model, optional
        Stage 2. ``"exact"``: states are tabular indices, ``P`` is estimated (``transition_model``) and the
        Bellman equation is solved exactly. ``"lstd"`` or a :class:`genpqr.stage2.LSTDQ`: one linear solve in features (``"lstd"``
        is ``LSTDQ()``; pair features ``phi(s) (x) x_a`` with ``encoding="action_features"``). Otherwise FQE. Default:
        ``LSTDQ(features=StateBasis(), alpha=1e-5)``, else FQE (:func:`genpqr.estimator.default_q_model`).
    encoding : {"auto", "per_action", "joint", "action_features", "native"}
        How a regressor sees actions (see :mod:`genpqr.stage2`); ``"action_features"``: one
        regressor on ``[s, x_a]`` from the data's action table, shared across actions.
    n_iterations : int
        Maximum FQE iterations K.
    tol : float or None
        FQE stopping rule on the sup change of the Bellman targets.
    warm_start : "auto" or bool
    structure : {"continuation", "direct"}
        What FQE regresses (finite and continuous actions; :mod:`genpqr.stage2`):
        ``"continuation"`` (default) only ``f = P mu Q`` and adds the known ``u - g`` back
        (``Q = u - g + gamma f``), so the regressor never has to learn ``log pi_hat``;
        ``"direct"``: Q itself (the paper's Algorithm 2 as written). Both have the same fixed
        point when the regression is exact; with many actions or a misspecified regressor the
        continuation is far more accurate (docs/benchmarks.md, "FQE structure").
    clip : "auto", (low, high) or None
        Probability clip bounds (rows renormalized after clipping). ``"auto"`` (default):
        chosen from the data so that no bound binds on an observed action -- no clip when the
        first stage's probabilities are all positive, else a floor ``low = min(0.01, 0.5 * p_min)``,
        ``p_min`` the smallest fitted probability of an observed action (:mod:`genpqr.stage1`).
        The paper used (0.01, 0.99); ``None``: no clip. A :class:`ClippingWarning` is raised when more
        than :data:`genpqr.stage1.CLIP_WARN_FRACTION` of the observed choices are decided by a bound.
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
        (S*K, S) or any object with ``expect``/``push``: :func:`~genpqr.stage2.as_kernel`): known
        transitions. A transition model of :mod:`genpqr.stage2` or a callable ``(transitions,
        n_states, n_actions) -> kernel``: an estimator (e.g. :class:`genpqr.stage2.ShrinkageKernel`,
        :func:`genpqr.structural.ddc.increment_kernel`). Weighted rows and a single episode keep the
        counts under ``"auto"``; so do streamed fits. The comparison's episode folds come from
        ``random_state`` (None: seed 0, as ``genpqr fit``'s default ``--seed``).
    solver : str
        Linear solver of the exact path (:func:`genpqr.stage2.solve_linear_bellman`).
    validation_fraction, n_iter_no_change : FQE early stopping (see :class:`~genpqr.stage2.FQE`).
    offset_model : regressor, optional
        Estimates data-driven ``g`` (outcome or value normalizations) when the
        normalization does not name one. Default gradient boosting.
    min_support : int
        Warn (:class:`WeakSupportWarning`) when fewer rows support ``mu``.
    random_state : int or None
    progress : bool or None
        Progress bars (None: only on a terminal).
    integration, reference, min_log_density, check_density, density_tol, freeze_transformers
        Continuous actions (``X.action_space`` a :class:`~genpqr.data.BoxActions`; paper, App.
        "Continuous-Action Extension"). ``integration``: the rule of the ``mu``-integrals, an
        :class:`~genpqr.actions.IntegrationRule` (default ``MonteCarlo()``, 32 antithetic draws,
        common random numbers across iterations; ``GaussHermite``, ``GaussLegendre``).
        ``reference``: the reference measure ``lambda`` of ``u = log dpi/dlambda`` (default
        :class:`~genpqr.actions.Lebesgue` on the action space). ``min_log_density``: lower clip
        of ``u`` (the continuous analogue of probability clipping; None: no clip).
        ``check_density``/``density_tol``: verify numerically that the policy density (and a user
        kernel) integrates to one. ``freeze_transformers``: fit a Pipeline q_model's transformers
        once. With continuous actions the policy model is a conditional density (default
        ``LinearGaussianDensity(degree=2, heteroscedastic=True)``, squashed onto a bounded box),
        ``q_model`` a regressor on ``[s, a]``, the default normalization ``uniform()`` on a bounded
        box and ``behavior(g=0)`` otherwise, and ``min_support`` bounds the effective sample size
        of ``mu / pi_hat``; ``encoding``, ``clip``, ``n_states``, ``transition_model``, ``solver``,
        ``validation_fraction``, ``n_iter_no_change``, ``offset_model`` and ``progress`` apply to
        finite actions only.
    n_types, type_covariates, type_specific_transitions, n_em_starts, max_em_iter, em_tol
        Latent agent types (finite actions; ``n_types > 1``): EM over episodes with a weighted stage 1
        and stage 2 per type, mixing on ``type_covariates`` (None, ``"initial_state"`` or (n_episodes, d)),
        ``n_em_starts`` starts (k-means, then random) (:func:`genpqr.estimator.fit_latent_types`). Then fitted:
        ``type_models_`` (a GenPQR per type), ``type_weights_``, ``type_proportions_``, ``loglik_``, ``aic_``, ``bic_``.

    Attributes
    ----------
    policy_ : FittedPolicy
        Stage 1 (exact tabular path: one full-sample fit, also when ``cross_fit`` is set).
    policy_folds_ : FittedPolicy or None
        Finite actions: the exact path's cross-fitted fold models (``cross_fit`` set), for the
        out-of-fold diagnostics only; None otherwise (and in a model saved without its data).
    first_stage_ : FirstStageChoice
        Finite actions: which stage-1 model was used and why (:class:`genpqr.stage1.FirstStageChoice`:
        ``"spline"`` or ``"frequency"`` by the tabular rule, ``"given"``, or ``"basis-logit"``);
        printed by :meth:`summary`. ``genpqr fit`` records its ``--policy-model`` choice here.
    q_model_ : object
        Finite actions: ``q_model`` or its default (None: FQE's default regressor).
    normalization_ : Normalization (labels bound to codes)
    encoder_ : ActionEncoder
    taken_actions_ : ndarray of shape (K,), bool
        Finite actions: the actions some training row takes. False marks an action listed only in
        the data's action table: its reward is a prediction from its features (through the
        policy model), not an estimate from observed choices.
    diagnostics_ : Diagnostics
    training_data_ : Transitions
        Absent from a model saved with ``save(path, include_data=False)``.
    visited_states_ : ndarray of shape (S,), bool
        Exact path: states with an observed choice; rewards elsewhere are not identified (see :meth:`reward_table`).
    transition_counts_ : ndarray of shape (S, K)
        Exact path: observed moves (s, a) -> s' per cell, terminated ones included (not choices).
    transition_model_ : None or object
        Exact path: None when the kernel is the counts, else the transition model or kernel used.
    transition_selection_ : None or :class:`~genpqr.stage2.TransitionSelection`
        Exact path with ``transition_model="auto"``: the held-out comparison and its reason.
    state_dim_ : int
        Number of state columns.
    data_fingerprint_ : str
        :meth:`~genpqr.data.Transitions.fingerprint` of the training data (kept when the data is
        left out of a save): whether data read again is the data of the fit, by content.
    structural_ : StructuralFit
        Only when set by ``genpqr fit --features``: the structural fit that :meth:`counterfactual` uses by
        default (see :func:`genpqr.structural.fit_structural`).

    Notes
    -----
    Model selection: ``fit(X)`` takes a ``Transitions`` as ``X``, :meth:`score` is the
    held-out policy log likelihood minus the held-out squared Bellman residual, and a
    ``Transitions`` is split by scikit-learn's splitters, so ``GridSearchCV(GenPQR(...),
    {"q_model": [...]}, cv=GroupKFold(5)).fit(data, groups=data.episode_ids)`` chooses the Q
    model (docs/model_selection.md).
    """

    def __init__(self, normalization=None, gamma=0.9, policy_model=None, policy_prefit=False, q_model=None,
                 encoding="auto",
                 n_iterations=100, tol=1e-6, warm_start="auto", clip="auto", cross_fit=None, n_states=None,
                 transition_model="auto", solver="auto", validation_fraction=None, n_iter_no_change=10, offset_model=None, min_support=30,
                 random_state=None, progress=None, structure="continuation", integration=None, reference=None,
                 min_log_density=None, check_density=True, density_tol=1e-2, freeze_transformers=True, n_types=1,
                 type_covariates=None, type_specific_transitions=False, n_em_starts=3, max_em_iter=200, em_tol=1e-8):
        self.normalization = normalization
        self.gamma = gamma
        self.policy_model = policy_model
        self.policy_prefit = policy_prefit
        self.q_model = q_model
        self.encoding = encoding
        self.n_iterations = n_iterations
        self.tol = tol
        self.warm_start = warm_start
        self.clip = clip
        self.cross_fit = cross_fit
        self.n_states = n_states
        self.transition_model = transition_model
        self.solver = solver
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.offset_model = offset_model
        self.min_support = min_support
        self.random_state = random_state
        self.progress = progress
        self.structure = structure
        self.integration = integration
        self.reference = reference
        self.min_log_density = min_log_density
        self.check_density = check_density
        self.density_tol = density_tol
        self.freeze_transformers = freeze_transformers
        self.n_types, self.type_covariates, self.type_specific_transitions = n_types, type_covariates, type_specific_transitions
        self.n_em_starts, self.max_em_iter, self.em_tol = n_em_starts, max_em_iter, em_tol

    # ------------------------------------------------------------------ fitting
    @property
    def _exact(self) -> bool:
        return isinstance(self.q_model, str) and self.q_model == "exact"

    def fit(self, X: Transitions, y=None):
        """Fit both stages on logged transitions ``X`` (a :class:`~genpqr.data.Transitions`;
        ``y`` is ignored: the actions are the labels); returns self.

        ``X`` can be split by scikit-learn's model selection (``GridSearchCV``,
        ``cross_validate``): split by episode, ``groups=X.episode_ids`` with ``GroupKFold``;
        see :meth:`score` and docs/model_selection.md."""
        data = X
        if not isinstance(data, Transitions):
            raise TypeError(
                f"data must be genpqr.data.Transitions (build it with from_arrays / from_pandas / "
                f"from_episodes), got {type(data).__name__}"
            )
        if self.n_types != 1:  # latent types: EM over episodes, one fit per type
            return fit_latent_types(self, data)
        fitted = self._fit_finite(data) if data.is_finite else self._fit_box(data)
        self.data_fingerprint_ = data.fingerprint()  # kept in a slim save: is a file read again the same data?
        return fitted

    @property
    def _is_box(self) -> bool:
        """Fitted on continuous actions (a box)."""
        return hasattr(self, "action_space_") and not self.action_space_.is_finite

    def _fit_stage2(self, normalization):
        if self._is_box:
            return self._fit_box_stage2(normalization)
        return self._fit_finite_stage2(normalization)

    # ------------------------------------------------------------------ prediction
    def _check_fitted(self, types_ok=False):
        if hasattr(self, "type_models_") and not types_ok:
            raise TypeError(f"this GenPQR has {len(self.type_models_)} latent types: use type_models_[m] (one per type)")
        if not hasattr(self, "stage2_") and not hasattr(self, "type_models_"):
            raise NotFittedError("this GenPQR is not fitted yet; call fit(transitions) first")

    def _states(self, states):
        self._check_fitted()
        X = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
        d = self.state_dim_ if hasattr(self, "state_dim_") else self.training_data_.state_dim
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

    def log_policy(self, states, actions=None) -> np.ndarray:
        """``u(s, .) = log pi_hat(.|s)`` (clipped), shape (n, K); with continuous actions
        ``u(s, a) = log dpi_hat/dlambda`` (clipped at ``min_log_density``) at ``actions``, (n,)."""
        if self._is_box:
            self._box_needs_actions(actions, "log_policy")
            return self._u(*self._box_inputs(states, actions))[0]
        u = self.stage2_.u(self._states(states))
        return u if actions is None else self._select(u, actions)

    def q(self, states, actions=None) -> np.ndarray:
        """``Q^mu_{u-g}``: (n, K), or (n,) at the given action labels (continuous actions:
        at the given actions, (n,))."""
        if self._is_box:
            self._box_needs_actions(actions, "q")
            return self._box_q(*self._box_inputs(self._states(states), actions))[0]
        return self._select(self.stage2_.q(self._states(states)), actions)

    def mu_q(self, states) -> np.ndarray:
        """``(mu Q)(s)``, shape (n,): the sum over the actions with weights ``mu(a|s)``, or
        with continuous actions ``int Q(s, a) mu(da|s)`` by the fitted integration rule (Monte
        Carlo draws seeded from ``random_state``: the same states give the same values)."""
        X = self._states(states)
        if self._is_box:
            return self._box_mu_q(self._box_inputs(X))
        return np.sum(self.stage2_.mu(X) * self.stage2_.q(X), axis=1)

    def reward(self, states, actions=None, *, as_frame: bool = False):
        """``r = Q - mu Q + g``: (n, K), or (n,) at the given action labels (continuous
        actions: at the given actions, (n,)).

        ``as_frame=True`` returns a labelled pandas object instead of the array: a DataFrame
        whose columns are the action labels (one row per state, indexed like ``states`` when it
        is a DataFrame), or with ``actions`` a Series named ``reward``."""
        if self._is_box:
            self._box_needs_actions(actions, "reward")
            out = self._box_reward(*self._box_inputs(self._states(states), actions))
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
            self._box_needs_actions(actions, "continuation")
            return self._box_continuation(*self._box_inputs(self._states(states), actions))
        X = self._states(states)
        if isinstance(self.stage2_, ExactStage2):
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
        if not isinstance(self.stage2_, ExactStage2):
            raise ValueError("reward_table() needs the exact tabular path (q_model='exact')")
        table = pd.DataFrame(self.stage2_.recovery.reward, columns=self.encoder_.labels)
        taken = getattr(self, "taken_actions_", np.ones(self.n_actions_, dtype=bool))
        table.attrs["never_taken"] = self.encoder_.labels[~taken].tolist()
        return table

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
        residual = self._bellman_residual(data, self.encoder_.encode(data.labels_of()))
        return {"policy_log_likelihood": float(np.mean(u_rows)), "bellman_mse": float(np.mean(residual ** 2)),
                "n_choices": int(X.n), "n_transitions": int(data.n)}

    # ------------------------------------------------------------------ re-use of stage 1
    def renormalize(self, normalization: Normalization) -> "GenPQR":
        """A copy under another normalization, re-solving stage 2 only (stage 1 is re-used;
        remark after Theorem "IRL via a Bellman equation"). ``self`` is unchanged. Needs the
        training data, except on the exact path: a model saved with ``include_data=False``
        re-solves from its stored log-policy table, kernel and choice counts (the same numbers;
        an outcome-regression offset ``behavior(g=None)`` still needs the data)."""
        self._check_fitted()
        if not hasattr(self, "training_data_") and isinstance(self.stage2_, ExactStage2):
            return self._renormalize_exact(normalization)
        require_data(self, "renormalize")
        new = copy.copy(self)
        new.normalization = normalization
        new._fit_stage2(normalization)
        return new

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
        with its size, SHA-256 and an HMAC under this user's key (:mod:`genpqr.estimator.manifest`), written
        atomically. A model file is code: :func:`genpqr.load` loads only what genpqr signed.

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
        """A short account of the fit (:class:`genpqr.estimator.FitSummary`): ``print(model.summary())``
        or ``str(...)`` gives the text (sizes, normalization, support and coverage, the policy log loss,
        the clip, the stage-2 solve and the first stage), ``.to_frame()`` its figures, and a notebook
        shows it as a table. With a structural fit (``structural_``, set by ``genpqr fit --features``),
        its parameter table follows (``tables``, ``as_text()``, ``as_html()``, ``as_latex()``)."""
        self._check_fitted()
        summary = self._box_summary() if self._is_box else self._finite_summary()
        structural = getattr(self, "structural_", None)
        if structural is not None and hasattr(structural, "summary"):
            return structural.summary().after(summary)
        return summary


def load(path, trusted: bool = False) -> GenPQR:
    """Load a model saved with :meth:`GenPQR.save`, from its file or a ``genpqr fit`` output folder
    (checked against its ``manifest.json``). A model file is code: without ``trusted`` only a file
    ``save`` signed under this user's key (or that a signed manifest lists) loads, checked before
    anything in it runs; ``trusted=True`` loads any, for a source you trust. Raises
    ``UntrustedFileError``, ``IntegrityError`` or ``TypeError`` (see :func:`genpqr.estimator.read_model`)."""
    from ._persistence import read_model

    model = read_model(path, trusted=trusted)
    if not isinstance(model, GenPQR):
        raise TypeError(f"{path} does not hold a GenPQR model (got {type(model).__name__})")
    return model

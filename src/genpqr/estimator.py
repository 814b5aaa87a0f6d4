r"""``GenPQR``: policy estimation, then Q-evaluation, then reward read-off (paper, Alg. 1).

    u(s, a) = log pi_hat(a|s)                         stage 1, any classifier
    Q = u - g + gamma P mu Q                          stage 2, FQE or exact solve
    r = Q - mu Q + g,   v = (u - g - Q) / gamma = -P mu Q   (Theorem "IRL via a Bellman equation")
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from . import tabular
from ._checks import (as_float_array, check_gamma, check_state_indices, clone_learner as clone, plain, seed_from,
                      short_list)
from .data import Transitions
from .diagnostic_checks import emit, failed_diagnostics
from .exceptions import NotFittedError
from .persistence import require_data
from .normalization import (
    FixedOffset,
    FixedWeights,
    Normalization,
    OutcomeOffset,
    ValueOffset,
    mean_zero,
)
from .clipping import clip_fractions
from .policy import FittedPolicy, FrequencyClassifier, check_classifier, clip_proba, fit_policy, prefit_policy
from .qeval import FQE, make_q_model

__all__ = ["GenPQR", "Diagnostics", "load"]


@dataclass
class Diagnostics:
    """What a user needs to trust a fit (all computed on the training data).

    Attributes
    ----------
    n_transitions, n_episodes : int
    action_counts : dict label -> rows
    support_count : int
        Rows whose action has positive weight under ``mu`` at their state (for an anchor
        normalization: the anchor count).
    policy_log_loss : float
        ``-mean log pi_hat(a_i|s_i)`` with clipped probabilities; out-of-fold when
        cross-fitting (``policy_log_loss_kind``), else in-sample.
    fraction_clipped : float
        Share of rows whose observed action's probability hit a clip bound.
    fraction_floored : float
        Share of rows at whose state some action's probability is below the lower bound
        (its ``log pi_hat`` is the floor ``log(low)``).
    clip : (low, high)
        The bounds used; ``clip_rule`` says how they were chosen (``clip="auto"``).
    max_mu_over_pi : float
        ``max_{i, a} mu(a|s_i) / pi_hat(a|s_i)``: the coverage constant of the theory.
    bellman_residuals, target_changes : list of float
        Per FQE iteration (empty for the exact solver).
    n_iterations : int
    converged : bool
    solver : str
    n_last_choices : int
        Rows that are choices without an observed next state (an episode's last row):
        counted in ``n_transitions``, stage 1 and the choice counts, not in stage 2.
    n_states : int
        Exact tabular path: the number of states (0 otherwise).
    unvisited_states : list of int
        Exact tabular path: the state indices with no observed choice (``~visited_states_``):
        their rewards are not identified by the data (a failed check, so a warning).
    warnings : list of str
        ``"Category: message"`` of every failed check (:mod:`genpqr.diagnostic_checks`), also
        raised as warnings by ``fit``.
    """

    n_transitions: int
    n_episodes: int
    action_counts: dict
    support_count: int
    policy_log_loss: float
    policy_log_loss_kind: str
    fraction_clipped: float
    max_mu_over_pi: float
    bellman_residuals: list = field(default_factory=list)
    target_changes: list = field(default_factory=list)
    n_iterations: int = 0
    converged: bool = True
    solver: str = ""
    n_last_choices: int = 0
    n_states: int = 0
    unvisited_states: list = field(default_factory=list)
    fraction_floored: float = 0.0
    clip: tuple = (0.0, 1.0)
    clip_rule: str = ""
    warnings: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


# ============================================================================ stage-2 results
class _ExactStage2:
    """Tables on a finite state space (states are indices)."""

    def __init__(self, recovery: tabular.TabularRecovery, kernel, counts):
        self.recovery, self.kernel, self.counts = recovery, kernel, counts
        self.n_states = recovery.q.shape[0]

    def _idx(self, states):
        return check_state_indices(states, self.n_states)

    def q(self, states):
        return self.recovery.q[self._idx(states)]

    def mu(self, states, proba=None):
        return self.recovery.mu[self._idx(states)]

    def g(self, states):
        return self.recovery.g[self._idx(states)]

    def u(self, states):
        return self.recovery.log_policy[self._idx(states)]


class _SampleStage2:
    """FQE's fitted Q with callables for mu, g and u."""

    def __init__(self, fqe: FQE, normalization: Normalization, policy: FittedPolicy, g_fn, n_actions: int):
        self.fqe, self.normalization, self.policy, self.g_fn, self.n_actions = fqe, normalization, policy, g_fn, n_actions

    def q(self, states):
        return self.fqe.predict_q(states)

    def mu(self, states, proba=None):
        if proba is None and self.normalization.mu.needs_policy:
            proba = self.policy.proba(states)
        return self.normalization.weights(states, self.n_actions, proba)

    def g(self, states):
        return self.g_fn(states)

    def u(self, states):
        return self.policy.log_proba(states)


# ============================================================================ the estimator
class GenPQR(BaseEstimator):
    """Generalized Policy-to-Q-to-Reward (GenPQR) reward recovery.

    Parameters
    ----------
    normalization : Normalization, optional
        ``mu r = g`` (see :mod:`genpqr.normalization`). Default: ``mean_zero()``.
    gamma : float in [0, 1)
    policy_model : classifier with ``predict_proba``, optional
        Stage 1. Default: :class:`~genpqr.policy.FrequencyClassifier` for the exact
        tabular path, else standardized multinomial logistic regression.
    policy_prefit : bool
        If True, ``policy_model`` is already fitted (on action codes or labels matching the
        data's) and is used as is: not cloned, not refitted. Lets several estimators share
        one policy estimate. Incompatible with ``cross_fit``.
    q_model : "exact", "lstd", LSTDQ, regressor, or native Q-model, optional
        Stage 2. ``"exact"``: states are tabular indices, ``P`` is estimated from counts and
        the Bellman equation is solved exactly. ``"lstd"`` or a :class:`genpqr.lstd.LSTDQ`:
        one linear solve in features (``"lstd"`` is ``LSTDQ()`` with its defaults). Otherwise
        FQE with this regressor (default ``HistGradientBoostingRegressor``).
    encoding : {"auto", "per_action", "joint", "native"}
        How a regressor sees actions (see :mod:`genpqr.qeval`).
    n_iterations : int
        Maximum FQE iterations K.
    tol : float or None
        FQE stopping rule on the sup change of the Bellman targets.
    warm_start : "auto" or bool
    clip : "auto", (low, high) or None
        Probability clip bounds (rows renormalized after clipping). ``"auto"`` (default):
        chosen from the data so that no bound binds on an observed action -- no clip when the
        first stage's probabilities are all positive, else a floor ``low = min(0.01, 0.5 x``
        the smallest fitted probability of an observed action``)`` (:mod:`genpqr.clipping`).
        The paper used (0.01, 0.99); ``None``: no clip. A :class:`ClippingWarning` is raised
        when more than :data:`genpqr.clipping.CLIP_WARN_FRACTION` of the observed choices are
        decided by a bound.
    cross_fit : int or None
        Number of episode folds for cross-fitting stage 1.
    n_states : int, optional
        Number of tabular states (exact path; default max index + 1).
    transition_model : None, kernel, or callable, optional
        Exact path: where ``P`` comes from. None: maximum likelihood from counts
        (:func:`genpqr.tabular.estimate_transitions`); a kernel (dense (S, K, S), sparse
        (S*K, S) or :class:`~genpqr.tabular.TransitionKernel`): known transitions; a callable
        ``(transitions, n_states, n_actions) -> kernel``: a structured estimator (e.g.
        :func:`genpqr.ddc.increment_kernel`).
    solver : str
        Linear solver of the exact path (:func:`genpqr.tabular.solve_linear_bellman`).
    validation_fraction, n_iter_no_change : FQE early stopping (see :class:`~genpqr.qeval.FQE`).
    offset_model : regressor, optional
        Estimates data-driven ``g`` (outcome or value normalizations) when the
        normalization does not name one. Default gradient boosting.
    min_support : int
        Warn (:class:`WeakSupportWarning`) when fewer rows support ``mu``.
    random_state : int or None
    progress : bool or None
        Progress bars (None: only on a terminal).

    Attributes
    ----------
    policy_ : FittedPolicy
    normalization_ : Normalization (labels bound to codes)
    encoder_ : ActionEncoder
    diagnostics_ : Diagnostics
    training_data_ : Transitions
        Absent from a model saved with ``save(path, include_data=False)``.
    visited_states_ : ndarray of shape (S,), bool
        Exact path: states with at least one observed choice; rewards at the others are not
        identified by the data (see :meth:`reward_table`).
    state_dim_ : int
        Number of state columns.

    Model selection: ``fit(X)`` takes a ``Transitions`` as ``X``, :meth:`score` is the
    held-out policy log likelihood minus the held-out squared Bellman residual, and a
    ``Transitions`` is split by scikit-learn's splitters, so ``GridSearchCV(GenPQR(...),
    {"q_model": [...]}, cv=GroupKFold(5)).fit(data, groups=data.episode_ids)`` chooses the Q
    model (docs/model_selection.md).
    """

    def __init__(self, normalization=None, gamma=0.9, policy_model=None, policy_prefit=False, q_model=None,
                 encoding="auto",
                 n_iterations=100, tol=1e-6, warm_start="auto", clip="auto", cross_fit=None, n_states=None,
                 transition_model=None, solver="auto", validation_fraction=None, n_iter_no_change=10, offset_model=None, min_support=30,
                 random_state=None, progress=None):
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
        from .continuous.data import ContinuousTransitions

        data = X

        if isinstance(data, ContinuousTransitions):
            raise TypeError("GenPQR needs discrete actions, but data holds continuous actions "
                            "(genpqr.continuous.ContinuousTransitions): use genpqr.continuous.ContinuousGenPQR")
        if not isinstance(data, Transitions):
            raise TypeError(
                f"data must be genpqr.data.Transitions (build it with from_arrays / from_pandas / "
                f"from_episodes), got {type(data).__name__}"
            )
        if isinstance(self.q_model, str) and self.q_model not in ("exact", "lstd"):
            raise ValueError(f"q_model must be 'exact', 'lstd', a regressor or a native Q-model; got the string "
                             f"{self.q_model!r}")
        self.gamma_ = check_gamma(self.gamma)
        if data.n_actions < 2 or np.count_nonzero(data.action_counts()) < 2:
            raise ValueError(
                f"the data has only one action ({plain(data.labels_of(data.actions[:1])[0])!r}); a reward cannot be "
                "identified from choices among one option"
            )
        self.encoder_ = data.encoder
        self.n_actions_ = data.n_actions
        if self._exact:
            self.n_states_ = self._infer_n_states(data)
        policy_model = self.policy_model
        if policy_model is None:
            policy_model = (FrequencyClassifier(n_states=self.n_states_) if self._exact
                            else make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)))
        if not self.policy_prefit:
            check_classifier(policy_model)
        self.training_data_ = data
        self.state_dim_ = data.state_dim
        if self.policy_prefit:
            if self.policy_model is None or self.cross_fit:
                raise ValueError("policy_prefit=True needs a fitted policy_model and no cross_fit")
            self.policy_ = prefit_policy(policy_model, data, clip=self.clip)
        else:
            self.policy_ = fit_policy(policy_model, data, clip=self.clip, cross_fit=self.cross_fit,
                                      random_state=seed_from(self.random_state),
                                      progress=False if self._exact else self.progress)
        self._fit_stage2(self.normalization if self.normalization is not None else mean_zero())
        return self

    def _infer_n_states(self, data):
        if data.state_dim != 1:
            raise ValueError(f"q_model='exact' needs tabular states (one index column), got {data.state_dim} columns")
        n_states = self.n_states
        nxt = data.with_next().next_states
        if n_states is None:
            n_states = int(max(data.states.max(), nxt.max())) + 1
        check_state_indices(data.states, n_states, "states")
        check_state_indices(nxt, n_states, "next_states")
        return int(n_states)

    def _fit_stage2(self, normalization):
        if not isinstance(normalization, Normalization):
            raise TypeError(f"normalization must be a genpqr Normalization, got {type(normalization).__name__}")
        data = self.training_data_  # every observed choice (stage 1, diagnostics)
        trans = data.with_next()  # the complete transitions (stage 2)
        norm = normalization.bind(data.encoder.encode)
        raw = self.policy_.training_raw_proba(data.states)
        proba, clipped = clip_proba(raw, self.policy_.clip)
        mu_rows = norm.weights(data.states, self.n_actions_, proba)
        self._check_support(norm, data, mu_rows)
        self.normalization_ = norm
        self._check_transition_support(norm, trans, mu_rows[data.next_observed])
        if self._exact:
            self.stage2_ = self._fit_exact(norm, trans, data)
        else:
            self.stage2_ = self._fit_fqe(norm, trans, proba[data.next_observed])
        self.diagnostics_ = self._diagnostics(data, raw, proba, clipped, mu_rows)

    def _check_support(self, norm, data, mu_rows):
        counts = data.action_counts()
        needed = np.flatnonzero((mu_rows.max(axis=0) > 0) & (counts == 0))
        if needed.size:
            labels = data.encoder.decode(needed)
            what = "anchor action" if norm.name in ("anchor", "state-anchor") else "action"
            raise ValueError(
                f"the normalization ({norm.describe()}) puts weight on {what}(s) {short_list(labels)} that never "
                f"occur in the data (no observed choice takes them); the data cannot support this "
                f"normalization{_continuous_hint(data, labels)}"
            )

    def _check_transition_support(self, norm, trans, mu_trans):
        """An action weighted by ``mu`` must be seen with a next state (``P(.|s, a)`` enters
        ``P mu Q``), unless a given transition model supplies it."""
        if trans.n == self.training_data_.n or (self._exact and self.transition_model is not None):
            return
        seen = np.bincount(trans.actions, minlength=self.n_actions_) > 0
        needed = np.flatnonzero((mu_trans.max(axis=0) > 0) & ~seen)
        if needed.size:
            labels = trans.encoder.decode(needed)
            raise ValueError(
                f"the normalization ({norm.describe()}) puts weight on action(s) {short_list(labels)} that never "
                f"occur in the data with an observed next state (only as the last choice of an episode), so "
                f"P(.|s, a) cannot be estimated for them; give a transition_model or another normalization"
                f"{_continuous_hint(trans, labels)}")

    def _fit_exact(self, norm, data, choices):
        """``data``: complete transitions (the kernel); ``choices``: every observed choice
        (``counts``, the visits per state-action pair of :func:`genpqr.ddc.choice_counts`)."""
        S, K = self.n_states_, self.n_actions_
        kernel, _ = tabular.estimate_transitions(
            data.states, data.actions, data.next_states, S, K, terminated=data.terminated)
        s = check_state_indices(choices.states, S, "states")
        counts = np.bincount(s * K + choices.actions, minlength=S * K).reshape(S, K).astype(np.float64)
        if self.transition_model is not None:
            given = self.transition_model(data, S, K) if callable(self.transition_model) else self.transition_model
            kernel = tabular.as_kernel(given, K)
            if kernel.n_states != S:
                raise ValueError(f"transition_model has {kernel.n_states} states but the data has {S}")
        grid = np.arange(S, dtype=np.float64)[:, None]
        u = _safe_log(self.policy_.proba(grid))
        if isinstance(norm.g, OutcomeOffset):  # E[y|s] from every observed row
            norm = Normalization(norm.mu, FixedOffset(self._state_means(choices)), norm.name)
        recovery = tabular.recover_reward(u, kernel, self.gamma_, norm, solver=self.solver)
        self.visited_states_ = np.asarray(counts).sum(axis=1) > 0
        return _ExactStage2(recovery, kernel, counts)

    def _state_means(self, data):
        y = self._outcomes(data)
        s = check_state_indices(data.states, self.n_states_)
        sums = np.bincount(s, weights=y, minlength=self.n_states_)
        counts = np.bincount(s, minlength=self.n_states_)
        return np.where(counts > 0, sums / np.maximum(counts, 1), y.mean())

    @staticmethod
    def _outcomes(data):
        if data.outcomes is None:
            raise ValueError("behavior() with g=None estimates g = E[y|s] from outcomes, but the data has no outcomes")
        return data.outcomes

    def _fit_fqe(self, norm, data, proba):
        rows = self.training_data_.next_observed
        next_proba = clip_proba(self.policy_.training_raw_proba(data.next_states, rows=rows), self.policy_.clip)[0]
        policy = self.policy_
        K = self.n_actions_
        mu_fn = _ReferenceWeights(norm, policy, K)
        g_fn = self._fit_offset(norm, data, mu_fn)
        g_rows = g_fn(data.states)
        u_rows = _safe_log(proba[np.arange(data.n), data.actions])
        if _is_closed_form(self.q_model):
            evaluator = self._fit_closed_form(data, u_rows - g_rows, mu_fn(data.next_states, next_proba), next_proba,
                                              g_fn)
            return _SampleStage2(evaluator, norm, policy, g_fn, K)
        fqe = FQE(regressor=self.q_model, encoding=self.encoding, n_iterations=self.n_iterations, tol=self.tol,
                  warm_start=self.warm_start, validation_fraction=self.validation_fraction,
                  n_iter_no_change=self.n_iter_no_change, progress=self.progress, random_state=self.random_state)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # re-raised below with context
            fqe.fit(data.states, data.actions, data.next_states, data.continues, u_rows - g_rows,
                    mu_fn(data.next_states, next_proba), self.gamma_, groups=data.episode_ids)
        return _SampleStage2(fqe, norm, policy, g_fn, K)

    def _fit_closed_form(self, data, reward, next_mu, next_proba, g_fn):
        """Stage 2 by one linear solve in features (:class:`genpqr.lstd.LSTDQ`)."""
        from .lstd import LSTDQ, BellmanProblem

        model = LSTDQ(random_state=self.random_state) if isinstance(self.q_model, str) else clone(self.q_model)
        g_next = g_fn(data.next_states)
        next_reward = np.sum(next_mu * (_safe_log(next_proba) - g_next[:, None]), axis=1)
        problem = BellmanProblem(data.states, data.actions, data.next_states, data.continues, reward, next_mu,
                                 self.gamma_, next_reward=next_reward, log_policy=self.policy_.log_proba,
                                 offset=g_fn, policy_models=list(self.policy_.models))
        return model.fit_bellman(problem)

    def _fit_offset(self, norm, data, mu_fn):
        offset = norm.g
        if isinstance(offset, OutcomeOffset):  # E[y|s] from every observed row
            data = self.training_data_
            model = clone(offset.regressor or self.offset_model or _default_regressor(self.random_state))
            model.fit(data.states, self._outcomes(data))
            return _RegressedOffset(model)
        if isinstance(offset, ValueOffset):
            return self._fit_value_offset(offset, data, mu_fn)
        return offset

    def _fit_value_offset(self, offset, data, mu_fn):
        """``g = h - gamma mu P h`` with ``(P h)(s, a)`` regressed per action."""
        h = FixedOffset(offset.h)
        gamma = self.gamma_
        if np.ndim(offset.h) == 0 and not callable(offset.h) and not data.terminated.any():
            return FixedOffset(float(offset.h) * (1.0 - gamma))
        target = h(data.next_states) * data.continues
        base = offset.regressor or self.offset_model or _default_regressor(self.random_state)
        ph = make_q_model(base, "per_action", self.n_actions_, warm_start=False)
        ph.fit_q(data.states, data.actions, target, self.n_actions_)
        return _ValueTargetOffset(h, ph, mu_fn, gamma)

    def _diagnostics(self, data, raw, proba, clipped, mu_rows):
        rows = np.arange(data.n)
        stage2 = self.stage2_
        if isinstance(stage2, _SampleStage2):
            hist = stage2.fqe.history_
            extra = dict(bellman_residuals=list(hist.bellman_residual), target_changes=list(hist.target_change),
                         n_iterations=stage2.fqe.n_iter_, converged=bool(stage2.fqe.converged_),
                         solver=getattr(stage2.fqe, "solver_name_", "fqe"))
        else:
            info = stage2.recovery.solve
            extra = dict(bellman_residuals=[info.residual], n_iterations=info.iterations,
                         converged=True, solver=info.solver, n_states=int(self.n_states_),
                         unvisited_states=np.flatnonzero(~self.visited_states_).tolist())
        diag = Diagnostics(
            n_transitions=data.n,
            n_episodes=data.n_episodes,
            action_counts=dict(zip(data.action_labels.tolist(), data.action_counts().tolist())),
            support_count=int(np.sum(mu_rows[rows, data.actions] > 0)),
            policy_log_loss=float(-np.mean(np.log(proba[rows, data.actions]))),
            policy_log_loss_kind="out-of-fold" if self.cross_fit else "in-sample",
            fraction_clipped=float(np.mean(clipped[rows, data.actions])),
            fraction_floored=clip_fractions(raw, data.actions, self.policy_.clip)[1],
            clip=tuple(float(c) for c in self.policy_.clip), clip_rule=self.policy_.clip_rule,
            max_mu_over_pi=float(np.max(mu_rows / proba)),
            n_last_choices=data.n_choice_only,
            **extra,
        )
        failures = failed_diagnostics(diag, normalization=self.normalization_.describe(), clip=self.policy_.clip,
                                      min_support=self.min_support, tol=self.tol,
                                      early_stopping=bool(self.validation_fraction),
                                      max_iterations=self.n_iterations)
        diag.warnings = emit(failures, stacklevel=5)
        return diag

    # ------------------------------------------------------------------ prediction
    def _check_fitted(self):
        if not hasattr(self, "stage2_"):
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

    def log_policy(self, states) -> np.ndarray:
        """``u(s, .) = log pi_hat(.|s)`` (clipped), shape (n, K)."""
        return self.stage2_.u(self._states(states))

    def q(self, states, actions=None) -> np.ndarray:
        """``Q^mu_{u-g}``: (n, K), or (n,) at the given action labels."""
        return self._select(self.stage2_.q(self._states(states)), actions)

    def reward(self, states, actions=None) -> np.ndarray:
        """``r = Q - mu Q + g``: (n, K), or (n,) at the given action labels."""
        X = self._states(states)
        q = self.stage2_.q(X)
        mu_q = np.sum(self.stage2_.mu(X) * q, axis=1)
        return self._select(q - mu_q[:, None] + self.stage2_.g(X)[:, None], actions)

    def continuation(self, states, actions=None) -> np.ndarray:
        """``v = (u - g - Q) / gamma`` (= ``-P mu Q``): (n, K) or (n,). Zero when gamma = 0."""
        X = self._states(states)
        if isinstance(self.stage2_, _ExactStage2):
            return self._select(self.stage2_.recovery.continuation[self.stage2_._idx(X)], actions)
        if self.gamma_ == 0:
            return self._select(np.zeros((X.shape[0], self.n_actions_)), actions)
        v = (self.stage2_.u(X) - self.stage2_.g(X)[:, None] - self.stage2_.q(X)) / self.gamma_
        return self._select(v, actions)

    def reward_table(self):
        """Exact path: the reward as a DataFrame (states x action labels).

        Rows of states with no observed choice (``~visited_states_``) are not identified by the
        data: the policy there falls back to its default (the frequency policy: the overall
        action frequencies) and the reward follows from that, not from behaviour."""
        import pandas as pd

        self._check_fitted()
        if not isinstance(self.stage2_, _ExactStage2):
            raise ValueError("reward_table() needs the exact tabular path (q_model='exact')")
        return pd.DataFrame(self.stage2_.recovery.reward, columns=self.encoder_.labels)

    def policy_log_loss(self, data: Transitions) -> float:
        """``-mean log pi_hat(a|s)`` on (held-out) transitions, with clipped probabilities."""
        self._check_fitted()
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
        codes = self.encoder_.encode(X.labels_of())
        u_rows = self.log_policy(X.states)[np.arange(X.n), codes]
        data = X.subset(X.next_observed) if X.n_choice_only else X
        if data.n == 0:
            raise ValueError("X has no row with an observed next state: the Bellman term needs transitions "
                             "(split by episode so that held-out folds hold whole episodes)")
        residual = self._bellman_residual(data, self.encoder_.encode(data.labels_of()))
        return {"policy_log_likelihood": float(np.mean(u_rows)), "bellman_mse": float(np.mean(residual ** 2)),
                "n_choices": int(X.n), "n_transitions": int(data.n)}

    def _bellman_residual(self, data: Transitions, codes) -> np.ndarray:
        """``delta_j`` of :meth:`score` at complete transitions ``data``, shape (m,)."""
        S = self._states(data.states)
        rows = np.arange(data.n)
        stage2 = self.stage2_
        target = stage2.u(S)[rows, codes] - stage2.g(S)
        live = np.flatnonzero(data.continues > 0)
        if live.size:
            nxt = self._states(data.next_states[live])
            target[live] += self.gamma_ * np.sum(stage2.mu(nxt) * stage2.q(nxt), axis=1)
        return target - stage2.q(S)[rows, codes]

    # ------------------------------------------------------------------ re-use of stage 1
    def renormalize(self, normalization: Normalization) -> "GenPQR":
        """A copy under another normalization, re-solving stage 2 only (stage 1 is re-used;
        remark after Theorem "IRL via a Bellman equation"). ``self`` is unchanged. Needs the
        training data, except on the exact path: a model saved with ``include_data=False``
        re-solves from its stored log-policy table, kernel and choice counts (the same numbers;
        an outcome-regression offset ``behavior(g=None)`` still needs the data)."""
        self._check_fitted()
        if not hasattr(self, "training_data_") and isinstance(self.stage2_, _ExactStage2):
            return self._renormalize_exact(normalization)
        require_data(self, "renormalize")
        new = copy.copy(self)
        new.normalization = normalization
        new._fit_stage2(normalization)
        return new

    def _renormalize_exact(self, normalization) -> "GenPQR":
        """:meth:`renormalize` of a slim exact-path model from ``stage2_`` alone."""
        if not isinstance(normalization, Normalization):
            raise TypeError(f"normalization must be a genpqr Normalization, got {type(normalization).__name__}")
        norm = normalization.bind(self.encoder_.encode)
        if isinstance(norm.g, OutcomeOffset):
            require_data(self, "renormalize to behavior() with an estimated offset E[y|s]")
        old = self.stage2_
        counts = np.asarray(old.counts, dtype=np.float64)
        u = old.recovery.log_policy
        grid = np.arange(self.n_states_, dtype=np.float64)[:, None]
        mu = norm.weights(grid, self.n_actions_, np.exp(u))
        unseen = np.flatnonzero((mu[counts.sum(axis=1) > 0].max(axis=0, initial=0) > 0) & (counts.sum(axis=0) == 0))
        if unseen.size:
            raise ValueError(f"the normalization ({norm.describe()}) puts weight on action(s) "
                             f"{short_list(self.encoder_.decode(unseen))} that never occur in the data; the data "
                             f"cannot support this normalization")
        recovery = tabular.recover_reward(u, old.kernel, self.gamma_, norm, solver=self.solver)
        new = copy.copy(self)
        new.normalization, new.normalization_ = normalization, norm
        new.stage2_ = _ExactStage2(recovery, old.kernel, old.counts)
        visited = counts.sum(axis=1) > 0
        ratio = float(np.max((mu / np.exp(u))[visited])) if visited.any() else float("nan")
        new.diagnostics_ = dataclasses.replace(self.diagnostics_, max_mu_over_pi=ratio, warnings=[])
        return new

    def policy_value_difference(self, policy_1, policy_2, states=None) -> np.ndarray:
        r"""``V^{pi_1}(s) - V^{pi_2}(s)`` under the reward ``u = log pi_hat`` (no normalization
        needed: Theorem "Identification of policy value differences").

        Policies are a Normalization (its ``mu``), an (S, K) / (K,) array of probabilities or a
        callable ``states -> (n, K)``. Returns shape (S,) on the exact path (or at ``states``),
        else at ``states`` (default: the training states).
        """
        self._check_fitted()
        pols = [_as_weights(p.bind(self.encoder_.encode) if isinstance(p, Normalization) else p)
                for p in (policy_1, policy_2)]
        if isinstance(self.stage2_, _ExactStage2):
            grid = np.arange(self.n_states_, dtype=np.float64)[:, None]
            u = self.stage2_.recovery.log_policy
            p1, p2 = (w.probabilities(grid, self.n_actions_, np.exp(u)) for w in pols)
            diff = tabular.value_difference(u, p1, p2, self.stage2_.kernel, self.gamma_)
            return diff if states is None else diff[self.stage2_._idx(self._states(states))]
        require_data(self, "value_difference with fitted Q evaluation")
        rows = self.training_data_.next_observed
        data = self.training_data_.with_next()
        X = data.states if states is None else self._states(states)
        values = []
        proba_rows = clip_proba(self.policy_.training_raw_proba(data.states, rows=rows), self.policy_.clip)[0]
        u_rows = np.log(proba_rows[np.arange(data.n), data.actions])
        for w in pols:
            next_p = w.probabilities(data.next_states, self.n_actions_, self.policy_.proba(data.next_states))
            if _is_closed_form(self.q_model):
                fqe = self._closed_form_value(data, u_rows, next_p)
            else:
                fqe = FQE(regressor=self.q_model, encoding=self.encoding, n_iterations=self.n_iterations,
                          tol=self.tol, warm_start=self.warm_start, progress=self.progress,
                          random_state=self.random_state)
                fqe.fit(data.states, data.actions, data.next_states, data.continues, u_rows, next_p, self.gamma_,
                        groups=data.episode_ids)
            p_here = w.probabilities(X, self.n_actions_, self.policy_.proba(X))
            values.append(np.sum(p_here * fqe.predict_q(X), axis=1))
        return values[0] - values[1]

    def _closed_form_value(self, data, u_rows, next_p):
        """``Q^{mu}_u`` by LSTD on the Q target (no offset), for policy value differences."""
        from .lstd import LSTDQ, BellmanProblem

        model = LSTDQ(random_state=self.random_state) if isinstance(self.q_model, str) else clone(self.q_model)
        model.set_params(target="q")
        problem = BellmanProblem(data.states, data.actions, data.next_states, data.continues, u_rows, next_p,
                                 self.gamma_, policy_models=list(self.policy_.models))
        return model.fit_bellman(problem)

    # ------------------------------------------------------------------ counterfactuals
    def counterfactual(self, reward_change=None, transitions=None, gamma=None, *, initial=None, horizon=None,
                       state_values=None, check_normalization=None, n_boot=0, level=0.95, n_jobs=1,
                       random_state=None, progress=None, warn=True):
        r"""Soft-optimal behaviour under changed primitives (exact tabular path; :mod:`genpqr.counterfactual`).

        Solves the soft-optimal policy of ``(r_hat + delta, P', gamma')`` and of the baseline
        ``(r_hat, P_hat, gamma)``, their stationary (and given-initial-state) distributions of
        states and actions, and states whether the answer is invariant to the normalization
        (re-solved under ``check_normalization``; :class:`IdentificationWarning` if not).

        Parameters
        ----------
        reward_change : dict, ndarray or callable, optional
            ``delta``: ``{label: amount or (S,) array}``, a (K,) or (S, K) array, or a callable
            ``reward (S, K) -> (S, K)`` of the fitted reward (a change that depends on the reward
            level, e.g. a percentage change of a cost; not invariant).
        transitions : kernel or callable, optional
            ``P'``: dense (S, K, S), sparse (S*K, S), ``TransitionKernel``, or a callable
            ``TransitionKernel -> kernel`` of the fitted kernel (re-applied per bootstrap replicate).
        gamma : float, optional
            ``gamma'``.
        initial : int or ndarray of shape (S,), optional
            Initial state (index) or distribution: adds the distribution from it (average over
            ``horizon`` steps, else the discounted occupancy) and the value ``d_0 V``.
        state_values : ndarray of shape (S,), optional
            ``x(s)`` for the mean state (default: the index).
        check_normalization : Normalization or False, optional
            Second normalization (default: mean-zero, or an anchor on the most frequent action
            when the model is mean-zero); False skips the check (gaps are NaN).
        n_boot : int
            Bootstrap replicates over episodes (refit and re-solve per replicate; 0: none).

        Returns
        -------
        CounterfactualResult
        """
        from .counterfactual import counterfactual

        return counterfactual(self, reward_change, transitions, gamma, initial=initial, horizon=horizon,
                              state_values=state_values, check_normalization=check_normalization, n_boot=n_boot,
                              level=level, n_jobs=n_jobs, random_state=random_state, progress=progress, warn=warn)

    # ------------------------------------------------------------------ persistence
    def save(self, path, include_data: bool = False) -> None:
        """Save the fitted model (joblib; cloudpickle for user-supplied closures such as a lambda
        ``g``); reload with :func:`genpqr.load`.

        ``include_data=False`` (default) leaves out the training transitions and the per-row
        cross-fitting folds (O(n) bytes): the saved model still predicts (``reward``,
        ``continuation``, ``q``, ``reward_table``, ``summary``; ``value_difference`` on the exact
        path) but cannot ``renormalize`` or be refitted. ``include_data=True`` keeps them.
        See :mod:`genpqr.persistence`.
        """
        from .persistence import dump

        self._check_fitted()
        dump(self, path, include_data=include_data)

    def summary(self) -> str:
        """A short human-readable account of the fit."""
        self._check_fitted()
        d = self.diagnostics_
        lines = [
            f"GenPQR fit: {d.n_transitions} transitions in {d.n_episodes} episodes, K={self.n_actions_}, gamma={self.gamma_}"
            if not d.n_last_choices else
            f"GenPQR fit: {d.n_transitions} choices ({d.n_transitions - d.n_last_choices} with an observed next state, "
            f"{d.n_last_choices} last choices without one) in {d.n_episodes} episodes, K={self.n_actions_}, "
            f"gamma={self.gamma_}",
            f"  normalization: {self.normalization_.describe()}",
            f"  support rows: {d.support_count}; max mu/pi_hat: {d.max_mu_over_pi:.3g}",
            f"  policy log loss ({d.policy_log_loss_kind}): {d.policy_log_loss:.4f}; clipped: {d.fraction_clipped:.2%}",
            f"  probability clip: ({d.clip[0]:.3g}, {d.clip[1]:.3g}) [{d.clip_rule}]; observed actions at a bound: "
            f"{d.fraction_clipped:.2%}; rows with an action at the floor: {d.fraction_floored:.2%}",
            f"  stage 2: {d.solver}, {d.n_iterations} iteration(s), converged={d.converged}",
        ]
        return "\n".join(lines)


class _ReferenceWeights:
    """``mu(.|s)`` of a bound normalization at any states (the fitted policy for ``mu = pi``)."""

    def __init__(self, normalization, policy, n_actions):
        self.normalization, self.policy, self.n_actions = normalization, policy, n_actions

    def __call__(self, states, proba=None):
        if proba is None and self.normalization.mu.needs_policy:
            proba = self.policy.proba(states)
        return self.normalization.weights(states, self.n_actions, proba)


class _RegressedOffset:
    """``g(s) = E[y | s]`` from a fitted regressor."""

    def __init__(self, model):
        self.model = model

    def __call__(self, states):
        return np.asarray(self.model.predict(as_float_array(states, "states", ndim=2)), dtype=np.float64)


class _ValueTargetOffset:
    """``g(s) = h(s) - gamma sum_a mu(a|s) E[h(s') | s, a]`` with the expectation regressed per action."""

    def __init__(self, h, next_h_model, mu_fn, gamma):
        self.h, self.next_h_model, self.mu_fn, self.gamma = h, next_h_model, mu_fn, gamma

    def __call__(self, states):
        states = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
        return self.h(states) - self.gamma * np.sum(self.mu_fn(states) * self.next_h_model.predict_q(states), axis=1)


def _is_closed_form(q_model) -> bool:
    """Stage 2 solved in closed form from sample statistics (``"lstd"`` or a model with ``fit_bellman``)."""
    return (isinstance(q_model, str) and q_model == "lstd") or hasattr(q_model, "fit_bellman")


def _safe_log(proba):
    """``log`` of estimated probabilities, refusing zeros with an actionable message."""
    if np.any(proba <= 0):
        raise ValueError(
            "the estimated policy gives probability 0 to some action (e.g. an action never observed at a "
            "state), so log pi is -inf; use clip='auto' (a floor below every observed action's probability), "
            "clip=(low, high) with low > 0, or a smooth policy model (genpqr.first_stage.SplineLogit)"
        )
    return np.log(proba)


def _as_weights(policy):
    if isinstance(policy, Normalization):
        return policy.mu
    return FixedWeights(policy)


def _default_regressor(random_state):
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(max_iter=100, random_state=seed_from(random_state))


def load(path) -> GenPQR:
    """Load a model saved with :meth:`GenPQR.save` or
    :meth:`genpqr.continuous.ContinuousGenPQR.save` (e.g. ``genpqr fit``'s ``model.joblib``)."""
    import joblib

    from .continuous.estimator import ContinuousGenPQR

    model = joblib.load(path)
    if not isinstance(model, (GenPQR, ContinuousGenPQR)):
        raise TypeError(f"{path} does not hold a GenPQR model (nor a ContinuousGenPQR; got {type(model).__name__})")
    return model


def _continuous_hint(data, labels) -> str:
    """When many numeric labels look like real-valued actions: point to the continuous path."""
    if np.asarray(labels).dtype.kind in "iuf" and data.n_actions > 20:
        return (f"; the data has {data.n_actions:,} distinct numeric actions: if they are real-valued "
                f"(continuous) actions use genpqr.continuous.ContinuousGenPQR (genpqr fit: --action-type "
                f"continuous)")
    return ""

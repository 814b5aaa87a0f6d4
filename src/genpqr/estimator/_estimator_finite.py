r"""The finite-action path of :class:`genpqr.GenPQR` (paper, Alg. 1): stage 1 a classifier
(``u = log pi_hat``, clipped), stage 2 the exact tabular solve (``q_model="exact"``), a
closed-form solve in features (``"lstd"``) or FQE, and the checks and diagnostics of the fit.

:class:`FinitePath` holds these steps (a mixin, like :class:`genpqr.estimator.BoxPath` for
continuous actions); :class:`genpqr.GenPQR` calls them when ``X.action_space`` is finite.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings

import numpy as np
from .. import stage2 as tabular
from ..messages import Mention, Message
from ..data.validation import check_gamma, check_state_indices, clone_learner as clone, plain, seed_from, short_list
from ..stage1 import (choose_tabular_policy, clip_fractions, clip_proba, fit_policy, fit_stage1,
                      given_first_stage, mu_expectation, safe_log, state_is_ordered)
from ._diagnostic_checks import emit, failed_diagnostics, poorly_covered, thin_transitions
from ._defaults import default_policy_model, default_q_model
from ._diagnostics import Diagnostics, FitSummary
from ._estimator_large import fit_large_stage2, large_path_applies
from ..normalization import FixedOffset, FixedWeights, Normalization, OutcomeOffset, mean_zero
from ._offsets import fit_offset, state_means
from ._persistence import require_data
from ..stage2 import ExactStage2, FQE, ReferenceWeights, SampleStage2

__all__ = ["FinitePath", "is_closed_form", "safe_log", "mu_expectation", "as_weights"]


class FinitePath:
    """The finite-action steps of :class:`genpqr.GenPQR` (a mixin: it reads the estimator's
    parameters and sets its fitted attributes)."""

    def policy_value_difference(self, policy_1, policy_2, states=None) -> np.ndarray:
        r"""``V^{pi_1}(s) - V^{pi_2}(s)`` under the reward ``u = log pi_hat`` (no normalization
        needed: Theorem "Identification of policy value differences").

        Policies are a Normalization (its ``mu``), an (S, K) / (K,) array of probabilities or a
        callable ``states -> (n, K)``. Returns shape (S,) on the exact path (or at ``states``),
        else at ``states`` (default: the training states).
        """
        self._check_fitted()
        pols = [as_weights(p.bind(self.encoder_.encode) if isinstance(p, Normalization) else p)
                for p in (policy_1, policy_2)]
        if isinstance(self.stage2_, ExactStage2):
            return self._exact_value_difference(pols, states)
        return self._sample_value_difference(pols, states)

    def _fit_finite(self, data):
        """Both stages on transitions with a finite action set; returns self."""
        if isinstance(self.q_model, str) and self.q_model not in ("exact", "lstd"):
            raise ValueError(f"q_model must be 'exact', 'lstd', a regressor or a native Q-model; got the string "
                             f"{self.q_model!r}")
        self.gamma_ = check_gamma(self.gamma)
        if data.n_actions < 2 or np.count_nonzero(data.action_counts()) < 2:
            raise ValueError(
                f"the data has only one action ({plain(data.labels_of(data.actions[:1])[0])!r}); a reward cannot be "
                "identified from choices among one option"
            )
        self.encoder_ = self.action_space_ = data.encoder
        self.n_actions_ = data.n_actions
        self.taken_actions_ = data.taken_actions()  # False: an action of the table never taken (a prediction)
        if self._exact:
            self.n_states_ = self._infer_n_states(data)
        policy_model, self.first_stage_ = self._first_stage(data)
        self.q_model_ = self.q_model if self.q_model is not None or self._exact else \
            default_q_model(data, encoding=self.encoding, random_state=self.random_state)
        self.training_data_ = data
        self.state_dim_ = data.state_dim
        seed = seed_from(self.random_state)
        # exact path: one full-sample stage 1 (the reward, the clip, the structural start); cross-fitted fold
        # models give the out-of-fold diagnostics only (policy_folds_)
        full = self._exact and not self.policy_prefit
        self.policy_ = fit_stage1(policy_model, data, prefit=self.policy_prefit, clip=self.clip,
                                  cross_fit=None if full else self.cross_fit, random_state=seed,
                                  progress=self.progress)
        self.policy_folds_ = None
        if full and self.cross_fit:
            self.policy_folds_ = fit_policy(policy_model, data, clip=self.policy_.clip, cross_fit=self.cross_fit,
                                            random_state=seed, progress=self.progress)
            self.policy_folds_.clip_rule = self.policy_.clip_rule
        self._fit_finite_stage2(self.normalization if self.normalization is not None else mean_zero())
        return self

    def _first_stage(self, data):
        """``(classifier, FirstStageChoice)``: ``policy_model`` as given, else on the exact path
        the rule of ``genpqr fit --policy-model auto`` (:func:`genpqr.stage1.choose_tabular_policy`,
        the state ordered by :func:`~genpqr.stage1.state_is_ordered`), else the default of
        non-tabular states (:func:`genpqr.estimator.default_policy_model`)."""
        if self.policy_model is not None or self.policy_prefit:
            return self.policy_model, given_first_stage(self.policy_model, prefit=self.policy_prefit)
        if self._exact:
            ordered = state_is_ordered(self.transition_model, self.n_states)
            return choose_tabular_policy(data, self.n_states_, ordered=ordered, random_state=self.random_state)
        return default_policy_model(data)

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

    def _fit_finite_stage2(self, normalization):
        if not isinstance(normalization, Normalization):
            raise TypeError(f"normalization must be a genpqr Normalization, got {type(normalization).__name__}")
        data = self.training_data_  # every observed choice (stage 1, diagnostics)
        trans = data.with_next()  # the complete transitions (stage 2)
        norm = normalization.bind(data.encoder.encode)
        if large_path_applies(self, data, norm):  # many actions: no (n, K) arrays
            fit_large_stage2(self, norm, data)
            return
        # (n, K) per-row values held once per distinct (fold, state) row: tabular states repeat
        table = self.policy_.training_table(data.states)
        raw = table.values
        proba, clipped = clip_proba(raw, self.policy_.clip)
        mu_rows = norm.weights(table.states, self.n_actions_, proba)
        self._check_support(norm, data, mu_rows)
        self.normalization_ = norm
        self._check_transition_support(norm, trans, table.rows(mu_rows)[data.next_observed] if table.index is None
                                       else mu_rows[np.bincount(table.index[data.next_observed],
                                                                minlength=mu_rows.shape[0]) > 0])
        if self._exact:
            self.stage2_ = self._fit_exact(norm, trans, data)
        else:
            self.stage2_ = self._fit_fqe(norm, trans, table.rows(proba)[data.next_observed])
        self.diagnostics_ = self._diagnostics(data, table, proba, clipped, mu_rows)

    def _check_support(self, norm, data, mu_rows):
        counts = data.action_counts()
        needed = np.flatnonzero((mu_rows.max(axis=0) > 0) & (counts == 0))
        if needed.size:
            labels = data.encoder.decode(needed)
            what = "anchor action" if norm.name in ("anchor", "state-anchor") else "action"
            raise ValueError(Message(
                f"the normalization ({norm.describe()}) puts weight on {what}(s) {short_list(labels)} that never "
                f"occur in the data (no observed choice takes them); the data cannot support this normalization",
                continuous_hint(data, labels), _table_hint(data)))

    def _check_transition_support(self, norm, trans, mu_trans):
        """An action weighted by ``mu`` must be seen with a next state (``P(.|s, a)`` enters
        ``P mu Q``), unless a given kernel or structure supplies it (a transition model fitted on
        these data, ``"auto"`` included, would only lend it other actions' moves: refused too)."""
        given = self.transition_model
        learned = tabular.is_estimated_spec(given) or hasattr(given, "predict_proba")
        if trans.n == self.training_data_.n or (self._exact and not learned):
            return
        seen = np.bincount(trans.actions, minlength=self.n_actions_) > 0
        needed = np.flatnonzero((mu_trans.max(axis=0) > 0) & ~seen)
        if needed.size:
            labels = trans.encoder.decode(needed)
            raise ValueError(Message(
                f"the normalization ({norm.describe()}) puts weight on action(s) {short_list(labels)} that never "
                f"occur in the data with an observed next state (only as the last choice of an episode), so "
                f"P(.|s, a) cannot be estimated for them; give a known kernel or structure (transition_model) "
                f"or another normalization", continuous_hint(trans, labels)))

    def _fit_exact(self, norm, data, choices):
        """``data``: complete transitions (the kernel); ``choices``: every observed choice
        (``counts``, the visits per state-action pair of :func:`genpqr.structural.ddc.choice_counts`)."""
        S, K = self.n_states_, self.n_actions_
        kernel, self.transition_counts_ = tabular.estimate_transitions(
            data.states, data.actions, data.next_states, S, K, terminated=data.terminated,
            sample_weight=data.sample_weight)  # weighted counts when the rows carry weights
        s = check_state_indices(choices.states, S, "states")
        counts = np.bincount(s * K + choices.actions, weights=choices.sample_weight,
                             minlength=S * K).reshape(S, K).astype(np.float64)
        given, self.transition_selection_ = tabular.resolve_transition_model(
            self.transition_model, data, S, random_state=seed_from(self.random_state), progress=self.progress)
        self.transition_model_ = given
        if given is not None:
            if self.transition_selection_ is not None:  # "auto": the chosen model, fitted on every move
                given = given.kernel()
            elif callable(given):
                given = given(data, S, K)
            kernel = tabular.as_kernel(given, K)
            if kernel.n_states != S:
                raise ValueError(f"transition_model has {kernel.n_states} states but the data has {S}")
        grid = np.arange(S, dtype=np.float64)[:, None]
        u = safe_log(self.policy_.proba(grid))
        if isinstance(norm.g, OutcomeOffset):  # E[y|s] from every observed row
            norm = Normalization(norm.mu, FixedOffset(state_means(choices, S)), norm.name)
        recovery = tabular.recover_reward(u, kernel, self.gamma_, norm, solver=self.solver)
        self.visited_states_ = np.asarray(counts).sum(axis=1) > 0
        return ExactStage2(recovery, kernel, counts)

    def _fit_fqe(self, norm, data, proba):
        rows = self.training_data_.next_observed
        next_proba = clip_proba(self.policy_.training_raw_proba(data.next_states, rows=rows), self.policy_.clip)[0]
        policy = self.policy_
        K = self.n_actions_
        mu_fn = ReferenceWeights(norm, policy, K)
        g_fn = fit_offset(norm.g, self.training_data_, data, mu_fn, gamma=self.gamma_, n_actions=K,
                          offset_model=self.offset_model, random_state=self.random_state)
        g_rows = g_fn(data.states)
        u_rows = safe_log(proba[np.arange(data.n), data.actions])
        if is_closed_form(self._q_model()):
            evaluator = self._fit_closed_form(data, u_rows - g_rows, mu_fn(data.next_states, next_proba), next_proba,
                                              g_fn)
            return SampleStage2(evaluator, norm, policy, g_fn, K)
        next_mu = mu_fn(data.next_states, next_proba)
        fqe = FQE(regressor=self._q_model(), encoding=self.encoding, n_iterations=self.n_iterations, tol=self.tol,
                  warm_start=self.warm_start, validation_fraction=self.validation_fraction,
                  n_iter_no_change=self.n_iter_no_change, progress=self.progress, random_state=self.random_state,
                  structure=self.structure)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # re-raised below with context
            fqe.fit(data.states, data.actions, data.next_states, data.continues, u_rows - g_rows, next_mu,
                    self.gamma_, groups=data.episode_ids, sample_weight=data.sample_weight,
                    next_reward=mu_expectation(next_mu, next_proba, g_fn(data.next_states)),
                    action_features=_action_features(data))
        return SampleStage2(fqe, norm, policy, g_fn, K)

    def _fit_closed_form(self, data, reward, next_mu, next_proba, g_fn):
        """Stage 2 by one linear solve in features (:class:`genpqr.stage2.LSTDQ`)."""
        from ..stage2 import BellmanProblem

        model = self._lstd_model()
        next_reward = mu_expectation(next_mu, next_proba, g_fn(data.next_states))
        problem = BellmanProblem(data.states, data.actions, data.next_states, data.continues, reward, next_mu,
                                 self.gamma_, next_reward=next_reward, log_policy=self.policy_.log_policy,
                                 offset=g_fn, policy_models=list(self.policy_.models),
                                 sample_weight=data.sample_weight, action_features=_action_features(data))
        return model.fit_bellman(problem)

    def _diagnostics(self, data, table, proba, clipped, mu_rows):
        """The fit's diagnostics; ``table`` (:class:`genpqr.stage1.RowTable`) the raw probabilities
        per distinct (fold, state) row, ``proba``, ``clipped`` and ``mu_rows`` on its rows."""
        raw, index = table.values, table.index
        stage2 = self.stage2_
        if isinstance(stage2, SampleStage2):
            hist = stage2.fqe.history_
            extra = dict(bellman_residuals=list(hist.bellman_residual), target_changes=list(hist.target_change),
                         n_iterations=stage2.fqe.n_iter_, converged=bool(stage2.fqe.converged_),
                         solver=getattr(stage2.fqe, "solver_name_", "fqe"))
        else:
            info = stage2.recovery.solve
            extra = dict(bellman_residuals=[info.residual], n_iterations=info.iterations,
                         converged=True, solver=info.solver, n_states=int(self.n_states_),
                         unvisited_states=np.flatnonzero(~self.visited_states_).tolist(),
                         **thin_transitions(stage2.counts, self.transition_counts_, data.encoder.decode,
                                            estimated=getattr(self, "transition_model_", None) is None))
        diag = Diagnostics(
            n_transitions=data.n,
            n_episodes=data.n_episodes,
            action_counts=dict(zip(data.action_labels.tolist(), data.action_counts().tolist())),
            support_count=int(np.sum(table.at(mu_rows, data.actions) > 0)),
            **self._policy_log_loss(data, table, proba),
            fraction_clipped=float(np.average(table.at(clipped, data.actions), weights=data.sample_weight)),
            fraction_floored=clip_fractions(raw, data.actions, self.policy_.clip, index=index)[1],
            clip=tuple(float(c) for c in self.policy_.clip), clip_rule=self.policy_.clip_rule,
            max_mu_over_pi=float(np.max(mu_rows / proba)),
            coverage_share=float(np.mean(table.rows(poorly_covered(mu_rows, proba)))),
            n_last_choices=data.n_choice_only,
            n_never_taken=None if data.action_table is None else int(np.sum(~data.taken_actions())),
            **extra,
        )
        failures = failed_diagnostics(diag, normalization=self.normalization_.describe(), clip=self.policy_.clip,
                                      min_support=self.min_support, tol=self.tol,
                                      early_stopping=bool(self.validation_fraction),
                                      max_iterations=self.n_iterations)
        diag.warnings = emit(failures, stacklevel=6)
        return diag

    def _policy_log_loss(self, data, table, proba) -> dict:
        """``policy_log_loss`` (weighted with ``sample_weight``) and its kind: out of fold when
        cross-fitted (on the exact path from ``policy_folds_``, clipped at the full-sample bounds;
        infinite when a held-out choice gets probability 0), else in-sample from ``proba`` (on the
        rows of ``table``)."""
        folds = getattr(self, "policy_folds_", None)
        if folds is not None:
            table = folds.training_table(data.states)
            proba = clip_proba(table.values, self.policy_.clip)[0]
        w = data.sample_weight  # row weights (e.g. a latent type's): the weighted mean over rows of weight > 0
        keep = slice(None) if w is None else np.asarray(w) > 0
        with np.errstate(divide="ignore"):
            loss = float(-np.average(np.log(table.at(proba, data.actions))[keep], weights=None if w is None else w[keep]))
        held_out = folds is not None or self.policy_.cross_fitted
        return dict(policy_log_loss=loss, policy_log_loss_kind="out-of-fold" if held_out else "in-sample")

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
    def _renormalize_exact(self, normalization):
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
        new.stage2_ = ExactStage2(recovery, old.kernel, old.counts)
        visited = counts.sum(axis=1) > 0
        ratio = float(np.max((mu / np.exp(u))[visited])) if visited.any() else float("nan")
        visits = counts.sum(axis=1)
        share = float(visits @ poorly_covered(mu, np.exp(u)) / visits.sum()) if visited.any() else float("nan")
        new.diagnostics_ = dataclasses.replace(self.diagnostics_, max_mu_over_pi=ratio, coverage_share=share,
                                               warnings=[])
        return new

    def _exact_value_difference(self, pols, states):
        grid = np.arange(self.n_states_, dtype=np.float64)[:, None]
        u = self.stage2_.recovery.log_policy
        p1, p2 = (w.probabilities(grid, self.n_actions_, np.exp(u)) for w in pols)
        diff = tabular.value_difference(u, p1, p2, self.stage2_.kernel, self.gamma_)
        return diff if states is None else diff[self.stage2_.index(self._states(states))]

    def _sample_value_difference(self, pols, states):
        require_data(self, "value_difference with fitted Q evaluation")
        rows = self.training_data_.next_observed
        data = self.training_data_.with_next()
        X = data.states if states is None else self._states(states)
        values = []
        proba_rows = clip_proba(self.policy_.training_raw_proba(data.states, rows=rows), self.policy_.clip)[0]
        u_rows = np.log(proba_rows[np.arange(data.n), data.actions])
        for w in pols:
            next_proba = self.policy_.proba(data.next_states)
            next_p = w.probabilities(data.next_states, self.n_actions_, next_proba)
            if is_closed_form(self._q_model()):
                fqe = self._closed_form_value(data, u_rows, next_p)
                q = fqe.predict_q(X)
            else:
                fqe = FQE(regressor=self._q_model(), encoding=self.encoding, n_iterations=self.n_iterations,
                          tol=self.tol, warm_start=self.warm_start, progress=self.progress,
                          random_state=self.random_state, structure=self.structure)
                fqe.fit(data.states, data.actions, data.next_states, data.continues, u_rows, next_p, self.gamma_,
                        groups=data.episode_ids, next_reward=mu_expectation(next_p, next_proba, 0.0),
                        action_features=_action_features(data))
                q = fqe.predict_q(X, base=self.policy_.log_policy(X) if fqe.continuation_ else None)
            p_here = w.probabilities(X, self.n_actions_, self.policy_.proba(X))
            values.append(np.sum(p_here * q, axis=1))
        return values[0] - values[1]

    def _closed_form_value(self, data, u_rows, next_p):
        """``Q^{mu}_u`` by LSTD on the Q target (no offset), for policy value differences."""
        from ..stage2 import BellmanProblem

        model = self._lstd_model()
        model.set_params(target="q")
        problem = BellmanProblem(data.states, data.actions, data.next_states, data.continues, u_rows, next_p,
                                 self.gamma_, policy_models=list(self.policy_.models),
                                 action_features=_action_features(data))
        return model.fit_bellman(problem)

    def _lstd_model(self):
        """A clone of the user's LSTDQ, or for ``q_model="lstd"`` the default one (pair features
        ``phi(s) (x) x_a`` with ``encoding="action_features"``)."""
        from ..stage2 import LSTDQ

        if not isinstance(self._q_model(), str):
            return clone(self._q_model())
        encoding = "action_features" if self.encoding == "action_features" else "per_action"
        return LSTDQ(encoding=encoding, random_state=self.random_state)

    def _q_model(self):
        """The stage-2 model of the fit: ``q_model``, or for None the default of
        :func:`genpqr.estimator.default_q_model` (``q_model_``; None there: FQE's default regressor)."""
        return getattr(self, "q_model_", self.q_model)

    def _finite_summary(self) -> FitSummary:
        d = self.diagnostics_
        n_next = d.n_transitions - d.n_last_choices
        title = (f"GenPQR fit: {d.n_transitions} transitions in {d.n_episodes} episodes, K={self.n_actions_}, "
                 f"gamma={self.gamma_}" if not d.n_last_choices else
                 f"GenPQR fit: {d.n_transitions} choices ({n_next} with an observed next state, {d.n_last_choices} "
                 f"last choices without one) in {d.n_episodes} episodes, K={self.n_actions_}, gamma={self.gamma_}")
        lines = [
            ("normalization", self.normalization_.describe()),
            ("support rows", f"{d.support_count}; max mu/pi_hat: {d.max_mu_over_pi:.3g}"),
            (f"policy log loss ({d.policy_log_loss_kind})", f"{d.policy_log_loss:.4f}; clipped: {d.fraction_clipped:.2%}"),
            ("probability clip", f"({d.clip[0]:.3g}, {d.clip[1]:.3g}) [{d.clip_rule}]; observed actions at a bound: "
                                 f"{d.fraction_clipped:.2%}; rows with an action at the floor: {d.fraction_floored:.2%}"),
            ("stage 2", f"{d.solver}{self._structure_note()}, {d.n_iterations} iteration(s), converged={d.converged}"),
        ]
        never = getattr(d, "n_never_taken", None)  # absent from models fitted before it existed
        if never is not None:
            lines.append(("action table", f"{self.n_actions_} actions, {never} never taken"
                                          + (": their rewards are predictions from their features" if never else "")))
        first = getattr(self, "first_stage_", None)  # absent from models fitted before it existed
        if first is not None:
            lines.append(("first stage", first.describe()))
        selection = getattr(self, "transition_selection_", None)
        if selection is not None:
            text = selection.summary().removeprefix("transition model: ")
            lines.append(("transition model", text.replace("\n", "\n  ")))
        kernel_note = getattr(getattr(self.stage2_, "kernel", None), "note", "")
        if kernel_note:
            lines.append(("transition kernel", kernel_note))
        figures = dict(n_choices=d.n_transitions, n_with_next_state=n_next, n_last_choices=d.n_last_choices,
                       n_episodes=d.n_episodes, n_actions=self.n_actions_, gamma=self.gamma_,
                       normalization=self.normalization_.describe(), support_count=d.support_count,
                       max_mu_over_pi=d.max_mu_over_pi, policy_log_loss=d.policy_log_loss,
                       policy_log_loss_kind=d.policy_log_loss_kind, fraction_clipped=d.fraction_clipped,
                       fraction_floored=d.fraction_floored, clip_low=d.clip[0], clip_high=d.clip[1],
                       clip_rule=d.clip_rule, solver=d.solver, n_iterations=d.n_iterations, converged=d.converged,
                       n_never_taken=never, first_stage=None if first is None else first.name,
                       first_stage_reason=None if first is None else first.reason)
        return FitSummary(title, tuple(lines), figures)

    def _structure_note(self) -> str:
        fqe = getattr(self.stage2_, "fqe", None)
        if not hasattr(fqe, "continuation_"):
            return ""
        return " (regressing the continuation P mu Q)" if fqe.continuation_ else " (regressing Q directly)"


def _action_features(data):
    """The action table's features (K, d) for ``encoding="action_features"``, or None."""
    table = data.action_table
    return None if table is None else np.asarray(table.features)


def is_closed_form(q_model) -> bool:
    """Stage 2 solved in closed form from sample statistics (``"lstd"`` or a model with ``fit_bellman``)."""
    return (isinstance(q_model, str) and q_model == "lstd") or hasattr(q_model, "fit_bellman")


def as_weights(policy):
    """A policy argument of :meth:`GenPQR.policy_value_difference` as action weights."""
    if isinstance(policy, Normalization):
        return policy.mu
    return FixedWeights(policy)


def _table_hint(data) -> str:
    """With an action table: anchor the reward on an action that is taken."""
    if data.action_table is None:
        return ""
    taken = data.encoder.decode(np.flatnonzero(data.taken_actions())[:1])[0]
    return (f"; the action table lists actions the data never takes: normalize on taken actions, e.g. "
            f"normalization.anchor_action({plain(taken)!r})")


def continuous_hint(data, labels) -> str:
    """When many numeric labels look like real-valued actions: point to the continuous path."""
    if np.asarray(labels).dtype.kind in "iuf" and data.n_actions > 20:
        return Message(f"; the data has {data.n_actions:,} distinct numeric actions: if they are real-valued "
                       f"(continuous) actions use ", Mention("action_space", "box", python="genpqr.from_arrays(..., "
                                                                                         "action_space='box')"))
    return ""

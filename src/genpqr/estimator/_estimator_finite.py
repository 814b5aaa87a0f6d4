r"""The finite-action path of :class:`genpqr.GenPQR` (paper, Alg. 1): stage 1 a classifier
(``u = log pi_hat``, clipped), stage 2 the exact tabular solve (``q_model="exact"``), a
closed-form solve in features (``"lstd"``) or FQE, and the checks and diagnostics of the fit.

``FinitePath`` is a strategy: :meth:`GenPQR.fit <genpqr.GenPQR.fit>` chooses it when
``X.action_space`` is finite, it reads the estimator's parameters and returns a
:class:`~genpqr.estimator.FittedState` (it never sets the estimator's attributes). Many actions
(``n x K`` too large for dense arrays) take the stage 2 of :mod:`genpqr.estimator` (``LargePath``).
"""

from __future__ import annotations

import contextvars
import warnings
from contextlib import contextmanager

import numpy as np
from .. import stage2 as tabular
from ..stage2._kernels import as_kernel
from ..stage2._tabular import TabularRecovery, recovery_inputs
from ..stage2._lstd import BellmanProblem
from ..stage2._transition_spec import is_estimated_spec, resolve_transition_model
from ..messages import Mention, Message
from ..data._validation import check_gamma, check_state_indices, clone_learner as clone, plain, seed_from, short_list
from ..normalization import Normalization
from ..normalization._normalization import FixedOffset, FixedWeights
from ..stage1._first_stage import choose_tabular_policy, given_first_stage, state_is_ordered
from ..stage1._clipping import clip_fractions, mu_expectation, safe_log
from ..stage1._policy import clip_proba, fit_policy, fit_stage1
from ..stage2._stages import ExactStage2, ReferenceWeights, SampleStage2
from ._diagnostic_checks import emit, failed_diagnostics, poorly_covered, thin_transitions
from ._defaults import default_policy_model, default_q_model
from ._diagnostics import Diagnostics
from ._estimator_large import LargePath, large_path_applies
from ._offsets import fit_offset, state_means
from ._options import fqe_for_fit, fqe_spec, q_model_kind
from ._state import FittedState, TabularState

__all__ = ["FinitePath", "is_closed_form", "safe_log", "mu_expectation", "as_weights", "lean_fits"]

_LEAN = contextvars.ContextVar("genpqr_lean_fits", default=False)


@contextmanager
def lean_fits():
    """Within: a finite-action fit gives the nuisances of inference and skips the rest: the
    diagnostics (and their warnings), the data's fingerprint and, on the exact path, stage 2's
    solve (the fit has no ``diagnostics_``, no ``data_fingerprint_`` and no reward or Q tables; its
    stage 1, clipped ``u``, kernel and normalization weights are those a full fit on the same rows
    gives, bit for bit). The refits of
    ``genpqr.inference.infer``'s folds, which read only those; never a model a user is given."""
    token = _LEAN.set(True)
    try:
        yield
    finally:
        _LEAN.reset(token)


class FinitePath:
    """The finite-action fit of a :class:`genpqr.GenPQR` (``estimator``: read, never written)."""

    def __init__(self, estimator, q_model=None):
        self.est = estimator
        #: the stage-2 model of the fit: ``q_model``, or where it is None the default that
        #: ``genpqr.estimator._defaults.default_q_model`` picks for the data (set in :meth:`fit`)
        self.q_model = estimator.q_model if q_model is None else q_model
        self.kind = q_model_kind(self.q_model)

    @property
    def exact(self) -> bool:
        return self.kind == "exact"

    def fit(self, data, first_stage=None) -> FittedState:
        """Both stages on transitions with a finite action set. ``first_stage``: the caller's
        record of how it chose ``policy_model`` (kept as ``first_stage_``)."""
        est = self.est
        gamma = check_gamma(est.gamma)
        if data.n_actions < 2 or np.count_nonzero(data.action_counts()) < 2:
            raise ValueError(
                f"the data has only one action ({plain(data.labels_of(data.actions[:1])[0])!r}); a reward cannot be "
                "identified from choices among one option"
            )
        n_states = self.infer_n_states(data) if self.exact else None
        if est.q_model is None and not self.exact:  # GenPQR()'s default stage 2 for these data
            self.q_model = default_q_model(data, random_state=est.random_state)
            self.kind = q_model_kind(self.q_model)
        policy_model, choice = self.first_stage(data, n_states)
        seed = seed_from(est.random_state)
        # exact path: one full-sample stage 1 (the reward, the clip, the structural start); cross-fitted fold
        # models give the out-of-fold diagnostics only (policy_folds_)
        full = self.exact and not est.policy_prefit
        policy = fit_stage1(policy_model, data, prefit=est.policy_prefit, clip=est.clip,
                            cross_fit=None if full else est.cross_fit, random_state=seed, progress=est.progress)
        folds = None
        if full and est.cross_fit:
            folds = fit_policy(policy_model, data, clip=policy.clip, cross_fit=est.cross_fit, random_state=seed,
                               progress=est.progress)
            folds.clip_rule = policy.clip_rule
        state = FittedState(gamma=gamma, action_space=data.encoder, state_dim=data.state_dim, policy=policy,
                            policy_folds=folds, first_stage=choice if first_stage is None else first_stage,
                            taken_actions=data.taken_actions(), training_data=data,
                            data_fingerprint=None if _LEAN.get() else data.fingerprint(),
                            q_model=self.q_model if not self.exact else "exact")
        normalization = est.normalization if est.normalization is not None else _default_normalization()
        return self.stage2(state, normalization, n_states)

    def first_stage(self, data, n_states=None):
        """``(classifier, FirstStageChoice)``: ``policy_model`` as given, else on the exact path
        the rule of ``genpqr fit --policy-model auto`` (``genpqr.stage1._first_stage.choose_tabular_policy``,
        the state ordered by ``genpqr.stage1._first_stage.state_is_ordered``), else the default of
        non-tabular states (``genpqr.estimator._defaults.default_policy_model``)."""
        est = self.est
        if est.policy_model is not None or est.policy_prefit:
            return est.policy_model, given_first_stage(est.policy_model, prefit=est.policy_prefit)
        if self.exact:
            ordered = state_is_ordered(est.transition_model, est.n_states)
            return choose_tabular_policy(data, n_states, ordered=ordered, random_state=est.random_state)
        return default_policy_model(data)

    def infer_n_states(self, data) -> int:
        if data.state_dim != 1:
            raise ValueError(f"q_model='exact' needs tabular states (one index column), got {data.state_dim} columns")
        n_states = self.est.n_states
        nxt = data.with_next().next_states
        if n_states is None:
            n_states = int(max(data.states.max(), nxt.max())) + 1
        check_state_indices(data.states, n_states, "states")
        check_state_indices(nxt, n_states, "next_states")
        return int(n_states)

    # ------------------------------------------------------------------ stage 2
    def solve(self, state: FittedState, normalization) -> FittedState:
        """Stage 2 again on a fitted state (its stage 1 and training data) under ``normalization``."""
        return self.stage2(state, normalization, state.tabular.n_states if state.tabular is not None else None)

    def stage2(self, state, normalization, n_states) -> FittedState:
        check_normalization(normalization)
        data = state.training_data  # every observed choice (stage 1, diagnostics)
        trans = data.with_next()  # the complete transitions (stage 2)
        norm = normalization.bind(data.encoder.encode)
        if large_path_applies(self.est, data, norm, state.policy):  # many actions: no (n, K) arrays
            return LargePath(self.est).solve(state, norm)
        # (n, K) per-row values held once per distinct (fold, state) row: tabular states repeat
        table = state.policy.training_table(data.states)
        proba, clipped = clip_proba(table.values, state.policy.clip)
        mu_rows = norm.weights(table.states, data.n_actions, proba)
        self._check_support(norm, data, mu_rows)
        self._check_transition_support(norm, data, trans, table.rows(mu_rows)[data.next_observed]
                                       if table.index is None else
                                       mu_rows[np.bincount(table.index[data.next_observed],
                                                           minlength=mu_rows.shape[0]) > 0])
        tables = None
        if self.exact:
            stage2, tables = self._fit_exact(state, norm, trans, data, n_states)
        else:
            stage2 = self._fit_sample(state, norm, trans, table.rows(proba)[data.next_observed])
        state = state.replace(normalization=norm, stage2=stage2, tabular=tables)
        if _LEAN.get():
            return state
        return state.replace(diagnostics=self._diagnostics(state, table, proba, clipped, mu_rows))

    def _check_support(self, norm, data, mu_rows):
        counts = data.action_counts()
        needed = np.flatnonzero((mu_rows.max(axis=0) > 0) & (counts == 0))
        if needed.size:
            labels = data.encoder.decode(needed)
            what = "anchor action" if norm.mu.is_point_mass else "action"
            raise ValueError(Message(
                f"the normalization ({norm.describe()}) puts weight on {what}(s) {short_list(labels)} that never "
                f"occur in the data (no observed choice takes them); the data cannot support this normalization",
                continuous_hint(data, labels), _table_hint(data)))

    def _check_transition_support(self, norm, data, trans, mu_trans):
        """An action weighted by ``mu`` must be seen with a next state (``P(.|s, a)`` enters
        ``P mu Q``), unless a given kernel or structure supplies it (a transition model fitted on
        these data, ``"auto"`` included, would only lend it other actions' moves: refused too)."""
        given = self.est.transition_model
        learned = is_estimated_spec(given) or hasattr(given, "predict_proba")
        if trans.n == data.n or (self.exact and not learned):
            return
        seen = np.bincount(trans.actions, minlength=data.n_actions) > 0
        needed = np.flatnonzero((mu_trans.max(axis=0) > 0) & ~seen)
        if needed.size:
            labels = trans.encoder.decode(needed)
            raise ValueError(Message(
                f"the normalization ({norm.describe()}) puts weight on action(s) {short_list(labels)} that never "
                f"occur in the data with an observed next state (only as the last choice of an episode), so "
                f"P(.|s, a) cannot be estimated for them; give a known kernel or structure (transition_model) "
                f"or another normalization", continuous_hint(trans, labels)))

    def _fit_exact(self, state, norm, data, choices, n_states):
        """``data``: complete transitions (the kernel); ``choices``: every observed choice
        (``counts``, the visits per state-action pair of :func:`genpqr.structural.choice_counts`).
        Returns ``(ExactStage2, TabularState)``."""
        est, S, K = self.est, n_states, choices.n_actions
        kernel, transition_counts = tabular.estimate_transitions(
            data.states, data.actions, data.next_states, S, K, terminated=data.terminated,
            sample_weight=data.sample_weight)  # weighted counts when the rows carry weights
        s = check_state_indices(choices.states, S, "states")
        counts = np.bincount(s * K + choices.actions, weights=choices.sample_weight,
                             minlength=S * K).reshape(S, K).astype(np.float64)
        given, selection = resolve_transition_model(est.transition_model, data, S,
                                                            random_state=seed_from(est.random_state),
                                                            progress=est.progress)
        model = given
        if given is not None:
            if selection is not None:  # "auto": the chosen model, fitted on every move
                given = given.kernel()
            elif callable(given):
                given = given(data, S, K)
            kernel = as_kernel(given, K)
            if kernel.n_states != S:
                raise ValueError(f"transition_model has {kernel.n_states} states but the data has {S}")
        grid = np.arange(S, dtype=np.float64)[:, None]
        u = safe_log(state.policy.proba(grid))
        if norm.g.needs_outcomes:  # E[y|s] from every observed row
            norm = Normalization(norm.mu, FixedOffset(state_means(choices, S)), norm.name)
        if _LEAN.get():  # a fold's nuisances (u, kernel, normalization): Q is not read
            u, kernel, mu, g = recovery_inputs(u, kernel, state.gamma, norm)
            recovery = TabularRecovery(None, None, None, u, mu, g, state.gamma, None)
        else:
            recovery = tabular.recover_reward(u, kernel, state.gamma, norm, solver=est.solver)
        tables = TabularState(n_states=S, visited_states=np.asarray(counts).sum(axis=1) > 0,
                              transition_counts=transition_counts, transition_model=model,
                              transition_selection=selection)
        return ExactStage2(recovery, kernel, counts), tables

    def _fit_sample(self, state, norm, data, proba):
        """Stage 2 by FQE or a closed-form solve on the complete transitions ``data``."""
        est, policy, choices = self.est, state.policy, state.training_data
        rows = choices.next_observed
        next_proba = clip_proba(policy.training_raw_proba(data.next_states, rows=rows), policy.clip)[0]
        K = choices.n_actions
        mu_fn = ReferenceWeights(norm, policy, K)
        g_fn = fit_offset(norm.g, choices, data, mu_fn, gamma=state.gamma, n_actions=K,
                          offset_model=est.offset_model, random_state=est.random_state)
        g_rows = g_fn(data.states)
        u_rows = safe_log(proba[np.arange(data.n), data.actions])
        next_mu = mu_fn(data.next_states, next_proba)
        next_reward = mu_expectation(next_mu, next_proba, g_fn(data.next_states))
        if self.kind == "closed_form":
            problem = BellmanProblem(
                data.states, data.actions, data.next_states, data.continues, u_rows - g_rows, next_mu, state.gamma,
                next_reward=next_reward, log_policy=policy.log_policy, offset=g_fn,
                policy_models=list(policy.models), sample_weight=data.sample_weight,
                action_features=action_features(data))
            return SampleStage2(lstd_model(est, self.q_model).fit_bellman(problem), norm, policy, g_fn, K)
        fqe = fqe_for_fit(self.q_model, random_state=est.random_state, progress=est.progress)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # re-raised below with context
            fqe.fit(data.states, data.actions, data.next_states, data.continues, u_rows - g_rows, next_mu,
                    state.gamma, groups=data.episode_ids, sample_weight=data.sample_weight, next_reward=next_reward,
                    action_features=action_features(data))
        return SampleStage2(fqe, norm, policy, g_fn, K)

    # ------------------------------------------------------------------ diagnostics
    def _diagnostics(self, state, table, proba, clipped, mu_rows):
        """The fit's diagnostics; ``table`` (``genpqr.stage1._cells.RowTable``) the raw probabilities
        per distinct (fold, state) row, ``proba``, ``clipped`` and ``mu_rows`` on its rows."""
        data, stage2, tables, policy = state.training_data, state.stage2, state.tabular, state.policy
        if tables is None:
            hist = stage2.fqe.history_
            extra = dict(bellman_residuals=list(hist.bellman_residual), target_changes=list(hist.target_change),
                         n_iterations=stage2.fqe.n_iter_, converged=bool(stage2.fqe.converged_),
                         solver=getattr(stage2.fqe, "solver_name_", "fqe"))
        else:
            info = stage2.recovery.solve
            extra = dict(bellman_residuals=[info.residual], n_iterations=info.iterations,
                         converged=True, solver=info.solver, n_states=int(tables.n_states),
                         unvisited_states=np.flatnonzero(~tables.visited_states).tolist(),
                         **thin_transitions(stage2.counts, tables.transition_counts, data.encoder.decode,
                                            estimated=tables.transition_model is None))
        diag = Diagnostics(
            n_transitions=data.n,
            n_episodes=data.n_episodes,
            action_counts=dict(zip(data.action_labels.tolist(), data.action_counts().tolist())),
            support_count=int(np.sum(table.at(mu_rows, data.actions) > 0)),
            **policy_log_loss(state, table, proba),
            fraction_clipped=float(np.average(table.at(clipped, data.actions), weights=data.sample_weight)),
            fraction_floored=clip_fractions(table.values, data.actions, policy.clip, index=table.index)[1],
            clip=tuple(float(c) for c in policy.clip), clip_rule=policy.clip_rule,
            max_mu_over_pi=float(np.max(mu_rows / proba)),
            coverage_share=float(np.mean(table.rows(poorly_covered(mu_rows, proba)))),
            n_last_choices=data.n_choice_only,
            n_never_taken=None if data.action_table is None else int(np.sum(~data.taken_actions())),
            **extra,
        )
        failures = failed_diagnostics(diag, normalization=state.normalization.describe(), clip=policy.clip,
                                      min_support=self.est.min_support, **self.convergence_rule())
        diag.warnings = emit(failures, stacklevel=6)
        return diag

    def convergence_rule(self) -> dict:
        """The FQE stopping rule the convergence check reads (``tol``, early stopping, the limit)."""
        if self.kind != "fqe":
            return {}
        spec = fqe_spec(self.q_model)
        return dict(tol=spec.tol, early_stopping=bool(spec.validation_fraction), max_iterations=spec.n_iterations)


def policy_log_loss(state, table, proba) -> dict:
    """``policy_log_loss`` (weighted with ``sample_weight``) and its kind: out of fold when
    cross-fitted (on the exact path from ``policy_folds``, clipped at the full-sample bounds;
    infinite when a held-out choice gets probability 0), else in-sample from ``proba`` (on the
    rows of ``table``)."""
    data, folds = state.training_data, state.policy_folds
    if folds is not None:
        table = folds.training_table(data.states)
        proba = clip_proba(table.values, state.policy.clip)[0]
    w = data.sample_weight  # row weights (e.g. a latent type's): the weighted mean over rows of weight > 0
    keep = slice(None) if w is None else np.asarray(w) > 0
    with np.errstate(divide="ignore"):
        loss = float(-np.average(np.log(table.at(proba, data.actions))[keep], weights=None if w is None else w[keep]))
    held_out = folds is not None or state.policy.cross_fitted
    return dict(policy_log_loss=loss, policy_log_loss_kind="out-of-fold" if held_out else "in-sample")


def _default_normalization():
    from ..normalization import mean_zero

    return mean_zero()


def check_normalization(normalization, example: str = "") -> None:
    if not isinstance(normalization, Normalization):
        raise TypeError(f"normalization must be a genpqr Normalization{example}, got {type(normalization).__name__}")


def lstd_model(est, q_model=None):
    """A clone of the fit's closed-form model (``q_model``, default ``est.q_model``), or for
    ``q_model="lstd"`` the default :class:`~genpqr.stage2.LSTDQ` (one-hot pair features, per action)."""
    from ..stage2 import LSTDQ

    q_model = est.q_model if q_model is None else q_model
    if not isinstance(q_model, str):
        return clone(q_model)
    return LSTDQ(encoding="per_action", random_state=est.random_state)


def action_features(data):
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

r"""What a fitted finite-action :class:`genpqr.GenPQR` computes beyond ``q`` and ``reward``:
policy value differences (Theorem "Identification of policy value differences"), the sample
Bellman residual of :meth:`~genpqr.GenPQR.score`, the exact path's re-solves from its stored
tables (a slim model's :meth:`~genpqr.GenPQR.renormalize`, another kernel), and the summary.

Each function takes the fitted :class:`~genpqr.estimator.FittedState` (``model.fitted_``) and
the estimator's parameters; the re-solves return a new state.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import stage2 as tabular
from ..stage2._lstd import BellmanProblem
from ..data._validation import short_list
from ..messages import Mention, Message
from ..normalization import Normalization
from ..stage1._policy import clip_proba
from ..stage1._clipping import mu_expectation
from ..stage2._stages import ExactStage2
from ._diagnostic_checks import poorly_covered
from ._diagnostics import FitSummary
from ._estimator_finite import action_features, check_normalization, lstd_model
from ._options import fqe_for_fit, q_model_kind
from ._persistence import require_data
from ._state import FittedState

__all__: list = []  # the estimator's own helpers (GenPQR's methods call them)


def exact_value_difference(state: FittedState, weights, states=None) -> np.ndarray:
    """``V^{pi_1} - V^{pi_2}`` under ``u`` on the exact path: (S,), or at ``states`` (indices)."""
    n_states, K = state.tabular.n_states, state.action_space.n_actions
    grid = np.arange(n_states, dtype=np.float64)[:, None]
    u = state.stage2.recovery.log_policy
    p1, p2 = (w.probabilities(grid, K, np.exp(u)) for w in weights)
    diff = tabular.value_difference(u, p1, p2, state.stage2.kernel, state.gamma)
    return diff if states is None else diff[state.stage2.index(states)]


def sample_value_difference(model, weights, states=None) -> np.ndarray:
    """``V^{pi_1} - V^{pi_2}`` under ``u`` by a Q evaluation per policy (FQE or the closed
    form, as the fit's ``q_model``) at ``states`` (default the training states)."""
    require_data(model, "value_difference with fitted Q evaluation")
    state = model.fitted_
    policy, K, gamma = state.policy, state.action_space.n_actions, state.gamma
    rows = state.training_data.next_observed
    data = state.training_data.with_next()
    X = data.states if states is None else states
    proba_rows = clip_proba(policy.training_raw_proba(data.states, rows=rows), policy.clip)[0]
    u_rows = np.log(proba_rows[np.arange(data.n), data.actions])
    values = []
    for w in weights:
        next_proba = policy.proba(data.next_states)
        next_p = w.probabilities(data.next_states, K, next_proba)
        if q_model_kind(fitted_q_model(model)) == "closed_form":
            q = _closed_form_value(model, data, u_rows, next_p, gamma).predict_q(X)
        else:
            fqe = fqe_for_fit(fitted_q_model(model), random_state=model.random_state, progress=model.progress,
                              validation_fraction=None)
            fqe.fit(data.states, data.actions, data.next_states, data.continues, u_rows, next_p, gamma,
                    groups=data.episode_ids, next_reward=mu_expectation(next_p, next_proba, 0.0),
                    action_features=action_features(data))
            q = fqe.predict_q(X, base=policy.log_policy(X) if fqe.continuation_ else None)
        p_here = w.probabilities(X, K, policy.proba(X))
        values.append(np.sum(p_here * q, axis=1))
    return values[0] - values[1]


def _closed_form_value(model, data, u_rows, next_p, gamma):
    """``Q^{mu}_u`` by LSTD on the Q target (no offset), for policy value differences."""
    lstd = lstd_model(model, fitted_q_model(model))
    lstd.set_params(target="q")
    problem = BellmanProblem(data.states, data.actions, data.next_states, data.continues, u_rows, next_p,
                                     gamma, policy_models=list(model.fitted_.policy.models),
                                     action_features=action_features(data))
    return lstd.fit_bellman(problem)


def bellman_residual(model, data, codes) -> np.ndarray:
    """``delta_j`` of :meth:`GenPQR.score` at complete transitions ``data``, shape (m,)."""
    S = model._states(data.states)
    rows = np.arange(data.n)
    stage2, gamma = model.fitted_.stage2, model.fitted_.gamma
    target = stage2.u(S)[rows, codes] - stage2.g(S)
    live = np.flatnonzero(data.continues > 0)
    if live.size:
        nxt = model._states(data.next_states[live])
        target[live] += gamma * np.sum(stage2.mu(nxt) * stage2.q(nxt), axis=1)
    return target - stage2.q(S)[rows, codes]


def renormalize_exact(state: FittedState, normalization, solver) -> FittedState:
    """The exact path's state re-solved under ``normalization`` from its stored tables alone
    (``u``, the kernel and the choice counts: a model saved without its data)."""
    check_normalization(normalization)
    norm = normalization.bind(state.action_space.encode)
    if norm.g.needs_outcomes:
        raise ValueError(Message("renormalize to behavior() with an estimated offset E[y|s] needs the training "
                                 "data, but this model was saved without it; save it with ",
                                 Mention("include_data", True, python="save(path, include_data=True)"),
                                 " or refit it"))
    old, K = state.stage2, state.action_space.n_actions
    counts = np.asarray(old.counts, dtype=np.float64)
    u = old.recovery.log_policy
    grid = np.arange(state.tabular.n_states, dtype=np.float64)[:, None]
    mu = norm.weights(grid, K, np.exp(u))
    unseen = np.flatnonzero((mu[counts.sum(axis=1) > 0].max(axis=0, initial=0) > 0) & (counts.sum(axis=0) == 0))
    if unseen.size:
        raise ValueError(f"the normalization ({norm.describe()}) puts weight on action(s) "
                         f"{short_list(state.action_space.decode(unseen))} that never occur in the data; the data "
                         f"cannot support this normalization")
    recovery = tabular.recover_reward(u, old.kernel, state.gamma, norm, solver=solver)
    visited = counts.sum(axis=1) > 0
    ratio = float(np.max((mu / np.exp(u))[visited])) if visited.any() else float("nan")
    visits = counts.sum(axis=1)
    share = float(visits @ poorly_covered(mu, np.exp(u)) / visits.sum()) if visited.any() else float("nan")
    diagnostics = dataclasses.replace(state.diagnostics, max_mu_over_pi=ratio, coverage_share=share, warnings=[])
    return state.replace(normalization=norm, stage2=ExactStage2(recovery, old.kernel, old.counts),
                         diagnostics=diagnostics)


def with_kernel(state: FittedState, kernel, solver, transition_counts=None) -> FittedState:
    """The exact path's state re-solved under another transition ``kernel`` (its ``u``, its
    normalization, its counts and discount kept; an outcome offset at the fit's ``g``)."""
    from ..normalization._normalization import FixedOffset

    old = state.stage2.recovery
    normalization = state.normalization
    if normalization.g.needs_outcomes:  # the fit's E[y|s], as solved
        normalization = Normalization(normalization.mu, FixedOffset(old.g), normalization.name)
    recovery = tabular.recover_reward(old.log_policy, kernel, state.gamma, normalization, solver=solver)
    tables = state.tabular
    if transition_counts is not None:
        tables = dataclasses.replace(tables, transition_counts=transition_counts)
    return state.replace(stage2=ExactStage2(recovery, kernel, state.stage2.counts), tabular=tables)


def finite_summary(state: FittedState) -> FitSummary:
    """:meth:`GenPQR.summary` of a finite-action fit."""
    d, K, gamma, norm = state.diagnostics, state.action_space.n_actions, state.gamma, state.normalization
    n_next = d.n_transitions - d.n_last_choices
    title = (f"GenPQR fit: {d.n_transitions} transitions in {d.n_episodes} episodes, K={K}, gamma={gamma}"
             if not d.n_last_choices else
             f"GenPQR fit: {d.n_transitions} choices ({n_next} with an observed next state, {d.n_last_choices} "
             f"last choices without one) in {d.n_episodes} episodes, K={K}, gamma={gamma}")
    lines = [
        ("normalization", norm.describe()),
        ("support rows", f"{d.support_count}; max mu/pi_hat: {d.max_mu_over_pi:.3g}"),
        (f"policy log loss ({d.policy_log_loss_kind})", f"{d.policy_log_loss:.4f}; clipped: {d.fraction_clipped:.2%}"),
        ("probability clip", f"({d.clip[0]:.3g}, {d.clip[1]:.3g}) [{d.clip_rule}]; observed actions at a bound: "
                             f"{d.fraction_clipped:.2%}; rows with an action at the floor: {d.fraction_floored:.2%}"),
        ("stage 2", f"{d.solver}{_structure_note(state.stage2)}, {d.n_iterations} iteration(s), "
                    f"converged={d.converged}"),
    ]
    never, first = d.n_never_taken, state.first_stage
    if never is not None:
        lines.append(("action table", f"{K} actions, {never} never taken"
                                      + (": their rewards are predictions from their features" if never else "")))
    if first is not None:
        lines.append(("first stage", first.describe()))
    lines += _transition_lines(state)
    figures = dict(n_choices=d.n_transitions, n_with_next_state=n_next, n_last_choices=d.n_last_choices,
                   n_episodes=d.n_episodes, n_actions=K, gamma=gamma, normalization=norm.describe(),
                   support_count=d.support_count, max_mu_over_pi=d.max_mu_over_pi, policy_log_loss=d.policy_log_loss,
                   policy_log_loss_kind=d.policy_log_loss_kind, fraction_clipped=d.fraction_clipped,
                   fraction_floored=d.fraction_floored, clip_low=d.clip[0], clip_high=d.clip[1],
                   clip_rule=d.clip_rule, solver=d.solver, n_iterations=d.n_iterations, converged=d.converged,
                   n_never_taken=never, first_stage=None if first is None else first.name,
                   first_stage_reason=None if first is None else first.reason)
    return FitSummary(title, tuple(lines), figures)


def _transition_lines(state) -> list:
    lines = []
    selection = None if state.tabular is None else state.tabular.transition_selection
    if selection is not None:
        text = selection.summary().removeprefix("transition model: ")
        lines.append(("transition model", text.replace("\n", "\n  ")))
    kernel_note = getattr(getattr(state.stage2, "kernel", None), "note", "")
    if kernel_note:
        lines.append(("transition kernel", kernel_note))
    return lines


def _structure_note(stage2) -> str:
    fqe = getattr(stage2, "fqe", None)
    if not hasattr(fqe, "continuation_"):
        return ""
    return " (regressing the continuation P mu Q)" if fqe.continuation_ else " (regressing Q directly)"


def fitted_q_model(model):
    """The stage-2 model the fit used (``q_model_``: ``q_model`` or the default it picked)."""
    fitted = getattr(model.fitted_, "q_model", None)
    return model.q_model if fitted is None else fitted

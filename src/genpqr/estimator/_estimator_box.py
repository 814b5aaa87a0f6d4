r"""The continuous-action path of :class:`genpqr.GenPQR` (paper, App. "Continuous-Action
Extension", Theorem "Continuous-action fixed-point identification", Alg. "Continuous-Action
GenPQR"): what differs from finite actions when the action space is a box.

    u(s, a) = log dpi/dlambda (a|s)                   stage 1, a conditional density
    Q = u - g + gamma P mu Q                          stage 2, FQE with mu-nodes
    r = Q - mu Q + g,   v = -P mu Q                   read-off, mu Q by the same rule

The reference measure ``lambda`` (Lebesgue on the action space unless
``ContinuousOptions(reference=...)`` says otherwise) is part of the model: ``u`` is a density
against it, and a different ``lambda`` gives a different normalized reward. It is recorded in
``reference_measure_`` and the summary. ``BoxPath`` is the strategy
:meth:`GenPQR.fit <genpqr.GenPQR.fit>` chooses when ``X.action_space`` is a
:class:`~genpqr.data.BoxActions`: it returns a :class:`~genpqr.estimator.FittedState`; the
read-off functions (``box_q``, ``box_mu_q``, ...) take that state.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from ..actions import BehaviorKernel, Lebesgue, LinearGaussianDensity, MonteCarlo, SquashedDensity
from ..actions._integration import IntegrationRule
from ..actions._measures import ReferenceMeasure
from ..actions._densities import check_normalized
from ..data._spaces import as_actions
from ..data._validation import as_float_array, check_gamma, check_length, check_random_state, seed_from
from ..exceptions import ConvergenceWarning
from ..normalization import Normalization, uniform
from ..normalization._normalization import FixedOffset
from ..stage1._policy import fit_stage1
from ._diagnostic_checks import emit, failed_diagnostics
from ._diagnostics import ContinuousDiagnostics, FitSummary
from ._estimator_finite import check_normalization
from ._options import ContinuousOptions, fqe_for_fit, options
from ._state import ContinuousState, FittedState

__all__ = ["BoxPath", "ContinuousDiagnostics"]


class BoxPath:
    """The continuous-action fit of a :class:`genpqr.GenPQR` (``estimator``: read, never written)."""

    def __init__(self, estimator):
        self.est = estimator
        self.options = options(estimator.continuous, ContinuousOptions, "continuous")

    def fit(self, data, first_stage=None) -> FittedState:
        """Both stages on transitions with continuous actions."""
        est, opts = self.est, self.options
        gamma = check_gamma(est.gamma)
        space = data.action_space
        reference = Lebesgue() if opts.reference is None else opts.reference
        if not isinstance(reference, ReferenceMeasure):
            raise TypeError(f"reference must be a measure of genpqr.actions (Lebesgue, GaussianReference, PointMass), got "
                            f"{type(reference).__name__}")
        policy = self._fit_density(data, reference)
        _check_policy_support(policy, space)
        integrals = (self._check_normalized(policy, data, "policy_model") if opts.check_density
                     else np.array([np.nan]))
        rng = check_random_state(est.random_state)
        seeds = [int(s) for s in rng.integers(0, 2**31 - 1, size=2)]
        parts = ContinuousState(reference=reference, reference_measure=reference.describe(space),
                                density_integrals=integrals, mc_seeds=seeds)
        state = FittedState(gamma=gamma, action_space=space, state_dim=data.state_dim, policy=policy,
                            training_data=data, data_fingerprint=data.fingerprint(), continuous=parts)
        normalization = est.normalization if est.normalization is not None else _default_normalization(space)
        return self.solve(state, normalization)

    def _fit_density(self, data, reference):
        est, model = self.est, self.est.policy_model
        if model is None and not est.policy_prefit:
            base = LinearGaussianDensity(degree=2, heteroscedastic=True)
            space = data.action_space
            model = SquashedDensity(base, space.low, space.high) if space.is_bounded else base
        return fit_stage1(model, data, prefit=est.policy_prefit, cross_fit=est.cross_fit,
                          random_state=seed_from(est.random_state), reference=reference,
                          min_log_density=self.options.min_log_density)

    def _check_normalized(self, density, data, name):
        rng = np.random.default_rng(0)
        rows = rng.choice(data.n, size=min(8, data.n), replace=False)
        return check_normalized(density, data.states[rows], tol=self.options.density_tol, random_state=0, name=name)

    def _rule(self):
        rule = MonteCarlo() if self.options.integration is None else self.options.integration
        if not isinstance(rule, IntegrationRule):
            raise TypeError(f"integration must be a genpqr.actions IntegrationRule (MonteCarlo, GaussHermite, "
                            f"GaussLegendre), got {type(rule).__name__}")
        return rule

    def solve(self, state: FittedState, normalization) -> FittedState:
        """Stage 2 on a state holding stage 1 and the training data, under ``normalization``."""
        check_normalization(normalization, " (e.g. genpqr.normalization.point_anchor(0.0))")
        space, data, rule = state.action_space, state.training_data, self._rule()
        normalization = normalization.for_space(space)
        kernel = normalization.mu.bind(space, state.policy)
        if kernel.user_density and self.options.check_density:
            self._check_normalized(_KernelAsDensity(kernel, space), data, "mu")
        next_states, next_index = data.next_states, None
        deterministic = kernel.is_point_mass or not rule.is_random
        if deterministic and self.est.cross_fit is None:  # the same nodes at equal next states: compute once
            next_states, next_index = np.unique(data.next_states, axis=0, return_inverse=True)
            next_index = next_index.reshape(-1)
        nodes = rule.nodes(kernel, next_states, np.random.default_rng(state.continuous.mc_seeds[0]), support=space)
        _check_nodes(nodes, space, kernel)
        rows = np.arange(data.n)
        g_rows, g_next = normalization.g(data.states), normalization.g(next_states)
        u_rows, clipped = box_u(state, data.states, data.actions, rows)
        J = nodes.n_nodes
        node_rows = None if next_index is not None else np.repeat(rows, J)  # row-aligned (out-of-fold) scoring
        u_next, _ = box_u(state, nodes.repeat_states(next_states), nodes.flat_actions, node_rows)
        u_next = u_next.reshape(len(next_states), J)
        if not np.all(np.isfinite(u_next)):
            raise ValueError(f"the policy density is zero at {int((~np.isfinite(u_next)).sum())} of mu's nodes: mu is not "
                             "dominated by pi_hat there; choose mu inside the policy's support or set min_log_density")
        fqe = fqe_for_fit(self.est.q_model, random_state=self.est.random_state, progress=self.est.progress)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # re-raised by the diagnostics checks, with context
            fqe.fit(data.states, data.actions, next_states, data.continues, u_rows - g_rows, nodes, state.gamma,
                    sample_weight=data.sample_weight, next_base=u_next - g_next[:, None], next_index=next_index)
        parts = dataclasses.replace(state.continuous, kernel=kernel, integration=rule)
        state = state.replace(normalization=normalization, stage2=fqe, continuous=parts)
        diag = self._diagnostics(state, u_rows, clipped, u_next, nodes, next_states)
        return state.replace(diagnostics=diag)

    def _diagnostics(self, state, u_rows, clipped, u_next, nodes, next_states):
        data, kernel, policy, fqe = state.training_data, state.continuous.kernel, state.policy, state.stage2
        w = data.weights
        ratio = ess = np.nan
        if not kernel.is_point_mass:
            flat_states = nodes.repeat_states(next_states)
            flat_actions = nodes.flat_actions
            log_ratio = kernel.log_prob(flat_states, flat_actions) - policy.log_prob(flat_states, flat_actions)
            ratio = float(np.exp(np.max(log_ratio)))
            iw = w * np.exp(kernel.log_prob(data.states, data.actions) - policy.log_prob(data.states, data.actions))
            ess = float(iw.sum() ** 2 / np.sum(iw ** 2)) if np.sum(iw ** 2) > 0 else 0.0
        hist, integrals, opts = fqe.history_, state.continuous.density_integrals, self.options
        diag = ContinuousDiagnostics(
            n_transitions=data.n, n_episodes=data.n_episodes, action_dim=data.action_dim,
            action_space=data.action_space.describe(), reference_measure=state.continuous.reference_measure,
            normalization=state.normalization.describe(), integration=state.continuous.integration.describe(),
            n_mu_nodes=nodes.n_nodes, policy_log_loss=float(-np.average(u_rows, weights=w)),
            policy_log_loss_kind="out-of-fold" if self.est.cross_fit else "in-sample",
            density_integral_range=(float(np.min(integrals)), float(np.max(integrals))),
            fraction_clipped=float(np.average(clipped, weights=w)), min_log_density_on_mu=float(np.min(u_next)),
            max_mu_over_pi=ratio, support_ess=ess, bellman_residuals=list(hist.bellman_residual),
            target_changes=list(hist.target_change), n_iterations=fqe.n_iter_,
            converged=bool(fqe.converged_), solver=f"fqe-{fqe.structure}")
        clip = None if opts.min_log_density is None else f"min_log_density={opts.min_log_density:g}"
        diag.warnings = emit(failed_diagnostics(diag, normalization=kernel.describe(), clip=clip,
                                                min_support=self.est.min_support, tol=fqe.tol), stacklevel=6)
        return diag


def _default_normalization(space):
    return uniform() if space.is_bounded else Normalization(BehaviorKernel(), FixedOffset(0.0), "behavior")


def _check_policy_support(policy, space):
    support = policy.support_
    if not support.same_as(space):
        raise ValueError(
            f"policy_model's support {support.describe()} differs from the data's action space {space.describe()}; "
            "the log-density must be a density on the action space (reference measure: Lebesgue on it). For a "
            "bounded space use a bounded family such as SquashedDensity(base, low, high)")


def _check_nodes(nodes, space, kernel):
    inside = space.contains(nodes.actions)
    if not np.all(inside):
        raise ValueError(f"mu ({kernel.describe()}) puts mass outside the action space {space.describe()} "
                         f"({int((~inside).sum())} node(s)); mu must be dominated by the reference measure")


# ------------------------------------------------------------------ read-off
def box_u(state, states, actions, rows=None):
    """``u = log dpi/dlambda``, clipped below at ``min_log_density``; (u, clipped mask). With
    ``rows``: out of fold at those training rows (``genpqr.stage1._stage1.FittedStage1``)."""
    if rows is None:
        return state.policy.log_policy(states, actions, return_clipped=True)
    return state.policy.training_log_policy(states, actions, rows, return_clipped=True)


def box_inputs(state, states, actions=None):
    """``states`` (and ``actions``) checked against the fit: ``X`` or ``(X, A)``."""
    X = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
    if X.shape[1] != state.state_dim:
        raise ValueError(f"states must have {state.state_dim} column(s) like the training data, got {X.shape[1]}")
    if actions is None:
        return X
    A = as_actions(actions, dim=state.action_space.dim)
    check_length(A, X.shape[0], "actions", "states")
    state.action_space.check(A, "actions")
    return X, A


def box_needs_actions(actions, what):
    if actions is None:
        raise ValueError(f"{what} with continuous actions needs the actions (n, m) at which to evaluate it")


def box_q(state, X, A):
    """``(Q(s, a), u - g)`` at the rows of ``X``, ``A``."""
    base = box_u(state, X, A)[0] - state.normalization.g(X)
    return state.stage2.predict_q(X, A, base), base


def box_mu_q(state, X):
    """``int Q(s, a) mu(da|s)`` by the fitted rule (the read-off's nodes, seeded by the fit)."""
    parts = state.continuous
    nodes = parts.integration.nodes(parts.kernel, X, np.random.default_rng(parts.mc_seeds[1]),
                                    support=state.action_space, readoff=True)
    q_nodes, _ = box_q(state, nodes.repeat_states(X), nodes.flat_actions)
    return nodes.integrate(q_nodes)


def box_reward(state, X, A):
    return box_q(state, X, A)[0] - box_mu_q(state, X) + state.normalization.g(X)


def box_continuation(state, X, A):
    base = box_u(state, X, A)[0] - state.normalization.g(X)
    return -state.stage2.predict_continuation(X, A, base)


def box_summary(state, name: str = "GenPQR") -> FitSummary:
    """:meth:`GenPQR.summary` of a continuous-action fit."""
    d, gamma = state.diagnostics, state.gamma
    title = (f"{name} fit: {d.n_transitions} transitions in {d.n_episodes} episodes, action space "
             f"{d.action_space}, gamma={gamma}")
    lo, hi = d.density_integral_range
    lines = (
        ("reference measure", d.reference_measure),
        ("normalization", d.normalization),
        ("integration", f"{d.integration}; {d.n_mu_nodes} node(s) per next state; max mu/pi_hat: "
                        f"{d.max_mu_over_pi:.3g}; support ESS: {d.support_ess:.1f}"),
        (f"policy log loss ({d.policy_log_loss_kind})", f"{d.policy_log_loss:.4f}; density integrals in "
                                                        f"[{lo:.4f}, {hi:.4f}]; clipped: {d.fraction_clipped:.2%}"),
        ("stage 2", f"{d.solver}, {d.n_iterations} iteration(s), converged={d.converged}"),
    )
    figures = dict(n_transitions=d.n_transitions, n_episodes=d.n_episodes, action_space=d.action_space,
                   gamma=gamma, reference_measure=d.reference_measure, normalization=d.normalization,
                   integration=d.integration, n_mu_nodes=d.n_mu_nodes, max_mu_over_pi=d.max_mu_over_pi,
                   support_ess=d.support_ess, policy_log_loss=d.policy_log_loss,
                   policy_log_loss_kind=d.policy_log_loss_kind, density_integral_low=lo, density_integral_high=hi,
                   fraction_clipped=d.fraction_clipped, solver=d.solver, n_iterations=d.n_iterations,
                   converged=d.converged)
    return FitSummary(title, lines, figures)


class _KernelAsDensity:
    """A user kernel seen through the density interface (for ``check_normalized``)."""

    def __init__(self, kernel, space):
        self.kernel = kernel
        self.support_ = kernel.support() or space

    def sample(self, states, n_samples, random_state=None):
        return self.kernel.sample(states, n_samples, check_random_state(random_state))

    def log_prob(self, states, actions):
        return self.kernel.log_prob(states, actions)

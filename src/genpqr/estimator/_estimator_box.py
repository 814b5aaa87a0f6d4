r"""The continuous-action path of :class:`genpqr.GenPQR` (paper, App. "Continuous-Action
Extension", Theorem "Continuous-action fixed-point identification", Alg. "Continuous-Action
GenPQR"): what differs from finite actions when the action space is a box.

    u(s, a) = log dpi/dlambda (a|s)                   stage 1, a conditional density
    Q = u - g + gamma P mu Q                          stage 2, FQE with mu-nodes
    r = Q - mu Q + g,   v = -P mu Q                   read-off, mu Q by the same rule

The reference measure ``lambda`` (Lebesgue on the action space unless ``reference`` says
otherwise) is part of the model: ``u`` is a density against it, and a different ``lambda``
gives a different normalized reward. It is recorded in ``reference_measure_`` and the summary.
:class:`BoxPath` holds these steps; :class:`genpqr.GenPQR` calls them when
``X.action_space`` is a :class:`~genpqr.data.BoxActions`.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..data.validation import as_float_array, check_gamma, check_length, check_random_state, seed_from
from ..actions import (BehaviorKernel, DensityKernel, IntegrationRule, Lebesgue, LinearGaussianDensity, MonteCarlo,
                       ReferenceMeasure, SquashedDensity, check_normalized)
from ._diagnostic_checks import emit, failed_diagnostics
from ._diagnostics import ContinuousDiagnostics, FitSummary
from ..exceptions import ConvergenceWarning
from ..normalization import FixedOffset, Normalization, uniform
from ..stage1 import fit_stage1
from ..stage2 import FQE
from ..data import as_actions

__all__ = ["BoxPath", "ContinuousDiagnostics"]


class BoxPath:
    """The continuous-action steps of :class:`genpqr.GenPQR` (a mixin: it reads the
    estimator's parameters and sets its fitted attributes)."""

    def _fit_box(self, data):
        """Both stages on transitions with continuous actions; returns self."""
        self.gamma_ = check_gamma(self.gamma)
        self.action_space_ = space = data.action_space
        reference = Lebesgue() if self.reference is None else self.reference
        if not isinstance(reference, ReferenceMeasure):
            raise TypeError(f"reference must be a genpqr.actions.ReferenceMeasure, got "
                            f"{type(reference).__name__}")
        self.reference_ = reference
        self.reference_measure_ = reference.describe(space)
        self.training_data_ = data
        self.state_dim_ = data.state_dim
        self.policy_ = self._fit_density(data)
        self._check_policy_support(space)
        self.density_integrals_ = (self._check_normalized(self.policy_, data, "policy_model")
                                   if self.check_density else np.array([np.nan]))
        rng = check_random_state(self.random_state)
        self.mc_seeds_ = [int(s) for s in rng.integers(0, 2**31 - 1, size=2)]
        normalization = self.normalization if self.normalization is not None else self._box_default_normalization()
        self._fit_box_stage2(normalization)
        return self

    def _box_default_normalization(self):
        return uniform() if self.action_space_.is_bounded else Normalization(BehaviorKernel(), FixedOffset(0.0), "behavior")

    def _fit_density(self, data):
        model = self.policy_model
        if model is None and not self.policy_prefit:
            base = LinearGaussianDensity(degree=2, heteroscedastic=True)
            space = data.action_space
            model = SquashedDensity(base, space.low, space.high) if space.is_bounded else base
        return fit_stage1(model, data, prefit=self.policy_prefit, cross_fit=self.cross_fit,
                          random_state=seed_from(self.random_state), reference=self.reference_,
                          min_log_density=self.min_log_density)

    def _check_policy_support(self, space):
        support = self.policy_.support_
        if not support.same_as(space):
            raise ValueError(
                f"policy_model's support {support.describe()} differs from the data's action space {space.describe()}; "
                "the log-density must be a density on the action space (reference measure: Lebesgue on it). For a "
                "bounded space use a bounded family such as SquashedDensity(base, low, high)")

    def _check_normalized(self, density, data, name):
        rng = np.random.default_rng(0)
        rows = rng.choice(data.n, size=min(8, data.n), replace=False)
        return check_normalized(density, data.states[rows], tol=self.density_tol, random_state=0, name=name)

    def _fit_box_stage2(self, normalization):
        if not isinstance(normalization, Normalization):
            raise TypeError(f"normalization must be a genpqr Normalization (e.g. "
                            f"genpqr.normalization.point_anchor(0.0)), got {type(normalization).__name__}")
        normalization = normalization.for_space(self.action_space_)
        data, space = self.training_data_, self.action_space_
        rule = self._rule()
        kernel = normalization.mu.bind(space, self.policy_)
        if isinstance(kernel, DensityKernel) and self.check_density:
            self._check_normalized(_KernelAsDensity(kernel, space), data, "mu")
        next_states, next_index = data.next_states, None
        deterministic = kernel.is_point_mass or not isinstance(rule, MonteCarlo)
        if deterministic and self.cross_fit is None:  # the same nodes at equal next states: compute once
            next_states, next_index = np.unique(data.next_states, axis=0, return_inverse=True)
            next_index = next_index.reshape(-1)
        nodes = rule.nodes(kernel, next_states, np.random.default_rng(self.mc_seeds_[0]), support=space)
        self._check_nodes(nodes, space, kernel)
        rows = np.arange(data.n)
        g_rows, g_next = normalization.g(data.states), normalization.g(next_states)
        u_rows, clipped = self._u(data.states, data.actions, rows)
        J = nodes.n_nodes
        node_rows = None if next_index is not None else np.repeat(rows, J)  # row-aligned (out-of-fold) scoring
        u_next, _ = self._u(nodes.repeat_states(next_states), nodes.flat_actions, node_rows)
        u_next = u_next.reshape(len(next_states), J)
        if not np.all(np.isfinite(u_next)):
            raise ValueError(f"the policy density is zero at {int((~np.isfinite(u_next)).sum())} of mu's nodes: mu is not "
                             "dominated by pi_hat there; choose mu inside the policy's support or set min_log_density")
        fqe = FQE(regressor=self.q_model, structure=self.structure, n_iterations=self.n_iterations,
                            tol=self.tol, warm_start=self.warm_start, freeze_transformers=self.freeze_transformers)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # re-raised by the diagnostics checks, with context
            fqe.fit(data.states, data.actions, next_states, data.continues, u_rows - g_rows, nodes, self.gamma_,
                    sample_weight=data.sample_weight, next_base=u_next - g_next[:, None], next_index=next_index)
        self.normalization_, self.kernel_, self.integration_, self.fqe_ = normalization, kernel, rule, fqe
        self.stage2_ = fqe
        self.diagnostics_ = self._box_diagnostics(data, u_rows, clipped, u_next, nodes, next_states, kernel)

    def _rule(self):
        rule = MonteCarlo() if self.integration is None else self.integration
        if not isinstance(rule, IntegrationRule):
            raise TypeError(f"integration must be a genpqr.actions IntegrationRule (MonteCarlo, GaussHermite, "
                            f"GaussLegendre), got {type(rule).__name__}")
        return rule

    @staticmethod
    def _check_nodes(nodes, space, kernel):
        inside = space.contains(nodes.actions)
        if not np.all(inside):
            raise ValueError(f"mu ({kernel.describe()}) puts mass outside the action space {space.describe()} "
                             f"({int((~inside).sum())} node(s)); mu must be dominated by the reference measure")

    def _u(self, states, actions, rows=None):
        """``u = log dpi/dlambda``, clipped below at ``min_log_density``; (u, clipped mask). With
        ``rows``: out of fold at those training rows (:class:`genpqr.stage1.FittedStage1`)."""
        if rows is None:
            return self.policy_.log_policy(states, actions, return_clipped=True)
        return self.policy_.training_log_policy(states, actions, rows, return_clipped=True)

    def _box_diagnostics(self, data, u_rows, clipped, u_next, nodes, next_states, kernel):
        w = data.weights
        ratio = ess = np.nan
        if not kernel.is_point_mass:
            flat_states = nodes.repeat_states(next_states)
            log_ratio = (kernel.log_prob(flat_states, nodes.flat_actions)
                         - self.policy_.log_prob(flat_states, nodes.flat_actions))
            ratio = float(np.exp(np.max(log_ratio)))
            iw = w * np.exp(kernel.log_prob(data.states, data.actions) - self.policy_.log_prob(data.states, data.actions))
            ess = float(iw.sum() ** 2 / np.sum(iw ** 2)) if np.sum(iw ** 2) > 0 else 0.0
        hist = self.fqe_.history_
        diag = ContinuousDiagnostics(
            n_transitions=data.n, n_episodes=data.n_episodes, action_dim=data.action_dim,
            action_space=data.action_space.describe(), reference_measure=self.reference_measure_,
            normalization=self.normalization_.describe(), integration=self.integration_.describe(),
            n_mu_nodes=nodes.n_nodes, policy_log_loss=float(-np.average(u_rows, weights=w)),
            policy_log_loss_kind="out-of-fold" if self.cross_fit else "in-sample",
            density_integral_range=(float(np.min(self.density_integrals_)), float(np.max(self.density_integrals_))),
            fraction_clipped=float(np.average(clipped, weights=w)), min_log_density_on_mu=float(np.min(u_next)),
            max_mu_over_pi=ratio, support_ess=ess, bellman_residuals=list(hist.bellman_residual),
            target_changes=list(hist.target_change), n_iterations=self.fqe_.n_iter_,
            converged=bool(self.fqe_.converged_), solver=f"fqe-{self.fqe_.structure}")
        clip = None if self.min_log_density is None else f"min_log_density={self.min_log_density:g}"
        diag.warnings = emit(failed_diagnostics(diag, normalization=kernel.describe(), clip=clip,
                                                min_support=self.min_support, tol=self.tol), stacklevel=6)
        return diag

    # ------------------------------------------------------------------ prediction
    def _box_inputs(self, states, actions=None):
        X = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
        d = self.state_dim_ if hasattr(self, "state_dim_") else self.training_data_.state_dim
        if X.shape[1] != d:
            raise ValueError(f"states must have {d} column(s) like the training data, got {X.shape[1]}")
        if actions is None:
            return X
        A = as_actions(actions, dim=self.action_space_.dim)
        check_length(A, X.shape[0], "actions", "states")
        self.action_space_.check(A, "actions")
        return X, A

    def _box_needs_actions(self, actions, what):
        if actions is None:
            raise ValueError(f"{what} with continuous actions needs the actions (n, m) at which to evaluate it")

    def _box_q(self, X, A):
        base = self._u(X, A)[0] - self.normalization_.g(X)
        return self.fqe_.predict_q(X, A, base), base

    def _box_mu_q(self, X):
        nodes = self.integration_.nodes(self.kernel_, X, np.random.default_rng(self.mc_seeds_[1]),
                                        support=self.action_space_, readoff=True)
        q_nodes, _ = self._box_q(nodes.repeat_states(X), nodes.flat_actions)
        return nodes.integrate(q_nodes)

    def _box_reward(self, X, A):
        return self._box_q(X, A)[0] - self._box_mu_q(X) + self.normalization_.g(X)

    def _box_continuation(self, X, A):
        base = self._u(X, A)[0] - self.normalization_.g(X)
        return -self.fqe_.predict_continuation(X, A, base)

    def _box_summary(self) -> FitSummary:
        d = self.diagnostics_
        title = (f"{type(self).__name__} fit: {d.n_transitions} transitions in {d.n_episodes} episodes, action space "
                 f"{d.action_space}, gamma={self.gamma_}")
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
                       gamma=self.gamma_, reference_measure=d.reference_measure, normalization=d.normalization,
                       integration=d.integration, n_mu_nodes=d.n_mu_nodes, max_mu_over_pi=d.max_mu_over_pi,
                       support_ess=d.support_ess, policy_log_loss=d.policy_log_loss,
                       policy_log_loss_kind=d.policy_log_loss_kind, density_integral_low=lo, density_integral_high=hi,
                       fraction_clipped=d.fraction_clipped, solver=d.solver, n_iterations=d.n_iterations,
                       converged=d.converged)
        return FitSummary(title, lines, figures)


class _KernelAsDensity:
    """A user kernel seen through the density interface (for :func:`check_normalized`)."""

    def __init__(self, kernel, space):
        self.kernel = kernel
        self.support_ = kernel.support() or space

    def sample(self, states, n_samples, random_state=None):
        return self.kernel.sample(states, n_samples, check_random_state(random_state))

    def log_prob(self, states, actions):
        return self.kernel.log_prob(states, actions)

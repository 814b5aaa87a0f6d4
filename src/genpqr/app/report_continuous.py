"""The ``genpqr fit`` report for continuous actions (:class:`genpqr.GenPQR` on a box action space).

Same page as :mod:`genpqr.app.report` (the base template and building blocks of
:mod:`genpqr.app.report_base`; ``templates/continuous.html``); the sections adapted to
real-valued actions: data summary with an action histogram per dimension (support bounds and
the anchor marked), policy fit (mean log density, out-of-fold when cross-fitted, against an
action-only baseline, and the PIT histogram: ``F_pi_hat(a_i|s_i)`` per action dimension, flat
when the conditional density is calibrated), Q-evaluation convergence (Bellman residuals per
FQE iteration), the reward (partial dependence on each state column at the median action, and
on each action dimension at the median state), coverage (point mass: ``log pi_hat(a0(s)|s)``
at the logged states; a kernel: ``mu/pi_hat`` at the logged rows, its effective sample size
and ``max mu/pi_hat``) and the warnings.
"""

from __future__ import annotations

import numpy as np

from ..evaluation._plotting import RESIDUAL_FLOOR_NOTE
from .config import action_columns
from .report_base import MAX_PD_COLUMNS, ReportContext, ReportFigure, data_summary, fig_convergence, render_page
from .report_plot import Axes, Figure
from .report_svg import BLUE, GREEN, LIGHT, RED, histogram

__all__ = ["context_continuous", "continuous_figures", "render_continuous_html"]

PIT_ROWS = 2000
PIT_DRAWS = 200


def context_continuous(outputs, n_rows: int | None = None) -> ReportContext:
    """A :class:`ReportContext` for a continuous-action fit."""
    model, data, config = outputs.model, outputs.data, outputs.config
    summary = data_summary(data, config, n_rows)
    summary.update({
        "action dimensions": data.action_dim,
        "action support": data.action_space.describe(),
    })
    if n_rows is not None and n_rows > data.n:
        summary["rows without an observed next state (dropped)"] = n_rows - data.n
    names = action_columns(config)
    for j, name in enumerate(names):
        a = data.actions[:, j]
        summary[f"action {name}: mean (sd), range"] = f"{a.mean():.4g} ({a.std():.4g}), [{a.min():.4g}, {a.max():.4g}]"
    return ReportContext(model=model, config=config.to_dict(), data_summary=summary, rewards=outputs.rewards,
                         warnings=list(outputs.warnings), tabular=False, state_names=list(config.state),
                         level=config.level, continuous=True, action_names=names)


# ============================================================================ pieces computed from the model
def _anchor_rows(model, states):
    """The anchor actions a0(s) (n, m) for a point-mass mu, else None."""
    return model.kernel_.anchor(states) if model.kernel_.is_point_mass else None


def baseline_log_density(model) -> tuple[float, str]:
    """Mean log density of the actions under an action-only model (no state): a Gaussian on
    ``R^m``, the uniform density on a bounded box."""
    data, space = model.training_data_, model.action_space_
    if space.is_bounded:
        return -float(np.log(space.volume)), "uniform on the box"
    from scipy.stats import multivariate_normal

    A = data.actions
    cov = np.atleast_2d(np.cov(A, rowvar=False)) + 1e-12 * np.eye(A.shape[1])
    return float(np.mean(multivariate_normal(A.mean(axis=0), cov).logpdf(A))), "Gaussian fitted to the actions"


def pit_values(model, max_rows: int = PIT_ROWS, n_draws: int = PIT_DRAWS, random_state=0) -> np.ndarray:
    """Probability integral transform per action dimension, ``(n_rows, m)``: the share of draws
    from ``pi_hat(.|s_i)`` below ``a_i`` (out-of-fold when cross-fitted). Uniform when calibrated."""
    rng = np.random.default_rng(random_state)
    data, policy = model.training_data_, model.policy_
    rows = np.sort(rng.choice(data.n, size=min(max_rows, data.n), replace=False))
    S, A = data.states[rows], data.actions[rows]
    draws = np.empty((rows.size, n_draws, A.shape[1]))
    if policy.fold_of_row is None:
        draws[:] = policy.sample(S, n_draws, random_state=rng)
    else:
        folds = policy.fold_of_row[rows]
        for k, m in enumerate(policy.models):
            sel = folds == k
            if sel.any():
                draws[sel] = m.sample(S[sel], n_draws, random_state=rng)
    below = (draws < A[:, None, :]).mean(axis=1)
    ties = (draws == A[:, None, :]).mean(axis=1)
    return below + 0.5 * ties


# ============================================================================ figures
def _action_name(ctx, j: int) -> str:
    return str(ctx.action_names[j]) if j < len(ctx.action_names) else f"a{j}"


def _panels_figure(panels, title: str) -> Figure:
    """Panels side by side (at most three a row), as the matplotlib figures were."""
    ncols = min(len(panels), 3)
    return Figure(panels, ncols=ncols, width=min(940, 380 * ncols + 40), panel_height=280, title=title)


def _fig_actions(ctx):
    model = ctx.model
    data, space = model.training_data_, model.action_space_
    anchors = _anchor_rows(model, data.states)
    panels = []
    for j in range(data.action_dim):
        ax = Axes("", _action_name(ctx, j), "transitions")
        ax.hist(*histogram(data.actions[:, j], 40))
        if np.isfinite(space.low[j]):
            ax.vline(float(space.low[j]), "grey", width=1, dash="4 3", label="support bounds")
            ax.vline(float(space.high[j]), "grey", width=1, dash="4 3")
        if anchors is not None:
            a0 = np.unique(anchors[:, j])
            ax.vline(float(a0[0]), RED, label="anchor a0" if a0.size == 1 else "anchor a0(s)")
        panels.append(ax)
    return _panels_figure(panels, "logged actions")


def _fig_pit(ctx):
    pit = pit_values(ctx.model)
    panels = []
    for j in range(pit.shape[1]):
        ax = Axes("", f"F_pi_hat({_action_name(ctx, j)} | s) at the logged action", "density", xlim=(0, 1))
        ax.hist(*histogram(pit[:, j], 20, range_=(0, 1), density=True))
        ax.hline(1.0, "black", width=1, dash="4 3", label="calibrated")
        panels.append(ax)
    return _panels_figure(panels, f"probability integral transform ({ctx.model.diagnostics_.policy_log_loss_kind}, "
                                  f"{pit.shape[0]} rows)")


def _grid(values, lo=None, hi=None, size=50):
    a, b = np.quantile(values, [0.01, 0.99])
    if lo is not None:
        a, b = max(a, lo), min(b, hi)
    return np.unique(values) if np.unique(values).size <= 30 else np.linspace(a, b, size)


def _fig_partial_dependence(ctx):
    model = ctx.model
    data, space = model.training_data_, model.action_space_
    S, A = data.states, data.actions
    s_names = list(ctx.state_names) or [f"s{j}" for j in range(S.shape[1])]
    a_names = list(ctx.action_names) or [f"a{j}" for j in range(A.shape[1])]
    d, m = min(S.shape[1], MAX_PD_COLUMNS), min(A.shape[1], MAX_PD_COLUMNS)
    s_med, a_med = np.median(S, axis=0), np.median(A, axis=0)
    panels = []
    for j in range(d):
        grid_values = _grid(S[:, j])
        states = np.tile(s_med, (grid_values.size, 1))
        states[:, j] = grid_values
        actions = np.tile(a_med, (grid_values.size, 1))
        ax = Axes("", str(s_names[j]), "reward at the median action")
        ax.line(grid_values, model.reward(states, actions), BLUE, marker="o" if grid_values.size <= 30 else None,
                size=2)
        panels.append(ax)
    for k in range(m):
        grid_values = _grid(A[:, k], space.low[k], space.high[k])
        actions = np.tile(a_med, (grid_values.size, 1))
        actions[:, k] = grid_values
        states = np.tile(s_med, (grid_values.size, 1))
        ax = Axes("", str(a_names[k]), "reward at the median state")
        ax.line(grid_values, model.reward(states, actions), GREEN)
        panels.append(ax)
    return _panels_figure(panels, "partial dependence of the reward (the other inputs at their medians)")


def _fig_coverage(ctx):
    model = ctx.model
    data = model.training_data_
    anchors = _anchor_rows(model, data.states)
    if anchors is not None:
        at_anchor = model.policy_.log_prob(data.states, anchors)
        at_logged = model.policy_.log_prob(data.states, data.actions)
        bins = np.linspace(min(at_anchor.min(), np.quantile(at_logged, 0.01)), max(at_anchor.max(), at_logged.max()),
                           41)
        if np.ptp(bins) < 1e-9:
            bins = 40
        ax = Axes("support of the anchor under the estimated policy", "log pi_hat(a|s) at each logged state",
                  "transitions")
        ax.hist(*histogram(at_logged, bins), LIGHT, label="at the logged actions")
        ax.hist(*histogram(at_anchor, bins), BLUE, opacity=0.8, label="at the anchor a0(s)")
    else:
        log_ratio = (model.kernel_.log_prob(data.states, data.actions)
                     - model.policy_.log_prob(data.states, data.actions)) / np.log(10.0)
        ax = Axes("importance weights of mu against the behaviour", "log10 mu(a|s) / pi_hat(a|s) at the logged (s, a)",
                  "transitions")
        if np.ptp(log_ratio) < 1e-9:
            ax.bars([log_ratio[0]], [log_ratio.size], width=0.1)
        else:
            ax.hist(*histogram(log_ratio, 40))
        ess = model.diagnostics_.support_ess
        ax.vline(float(np.max(log_ratio)), RED, label=f"max at the rows; ESS = {ess:.1f}")
    return Figure([ax], width=500, panel_height=300)


def continuous_figures(ctx: ReportContext) -> list[ReportFigure]:
    """Every figure of the continuous-action report, in order."""
    return [
        ReportFigure("data", "Histogram of the logged actions per dimension (support bounds dashed, the anchor in "
                             "red).", _fig_actions(ctx)),
        ReportFigure("policy", "Probability integral transform of the logged actions under the stage-1 density, per "
                               "dimension (Monte Carlo, "
                               f"{PIT_DRAWS} draws per row): flat when calibrated; a U shape means too narrow, a "
                               "hump too wide, a slope a shifted mean.", _fig_pit(ctx)),
        ReportFigure("q", "Sample Bellman residual (RMS) and the largest change of the Bellman targets per "
                          f"fitted-Q-evaluation iteration. Convergence is the target change going to zero; "
                          f"{RESIDUAL_FLOOR_NOTE}.", fig_convergence(ctx)),
        ReportFigure("reward", "Partial dependence of the recovered reward on each state column (action at its "
                               "median) and on each action dimension (state at its median).",
                     _fig_partial_dependence(ctx)),
        ReportFigure("coverage", "Point mass: the estimated policy density at the anchor compared with that at the "
                                 "logged actions (far below: the anchor is rarely taken there). Kernel: the "
                                 "importance weights mu/pi_hat at the logged rows.", _fig_coverage(ctx)),
    ]


# ============================================================================ HTML
def render_continuous_html(ctx: ReportContext) -> str:
    """The continuous-action report as one HTML string (``continuous.html``)."""
    model = ctx.model
    d = model.diagnostics_
    return render_page(
        "continuous.html", ctx, continuous_figures(ctx),
        normalization=d.normalization, gamma=f"{model.gamma_:g}", reference_measure=d.reference_measure,
        data_summary=list(ctx.data_summary.items()), policy_rows=_policy_rows(ctx),
        out_of_fold=d.policy_log_loss_kind == "out-of-fold",
        q_rows=[("solver", f"continuous fitted Q evaluation ({d.solver})"),
                ("Q model", str(ctx.config.get("q_model"))), ("mu-integrals", d.integration),
                ("nodes per next state", d.n_mu_nodes), ("iterations", d.n_iterations), ("converged", d.converged),
                ("last sample Bellman residual (RMS)",
                 f"{d.bellman_residuals[-1]:.4g}" if d.bellman_residuals else "n/a")],
        rewards=ctx.rewards, coverage_rows=_coverage_rows(d))


def _policy_rows(ctx) -> list:
    """Section 2's table: mean log density against the action-only baseline, density checks."""
    d = ctx.model.diagnostics_
    base, base_name = baseline_log_density(ctx.model)
    return [("mean log density of the logged actions", f"{-d.policy_log_loss:.4f} ({d.policy_log_loss_kind})"),
            (f"same, action-only baseline ({base_name})", f"{base:.4f}"),
            ("policy model", str(ctx.config.get("policy_model"))),
            ("density integrals at checked states", "[{:.4f}, {:.4f}]".format(*d.density_integral_range)),
            ("share of rows whose log density hit the lower clip", f"{d.fraction_clipped:.2%}")]


def _coverage_rows(d) -> list:
    """Section 5's table: coverage constant and effective sample size (n/a for a point mass)."""
    ratio = "n/a (point mass)" if not np.isfinite(d.max_mu_over_pi) else f"{d.max_mu_over_pi:.4g}"
    ess = "n/a (point mass)" if not np.isfinite(d.support_ess) else f"{d.support_ess:.1f} of {d.n_transitions}"
    return [("max mu/pi_hat at the mu-nodes (coverage constant)", ratio),
            ("effective sample size of mu/pi_hat at the logged rows", ess),
            ("smallest log pi_hat at the mu-nodes", f"{d.min_log_density_on_mu:.4g}")]

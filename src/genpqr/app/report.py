"""The self-contained HTML report of ``genpqr fit``.

One file, no external resources: figures are PNGs embedded as base64 ``data:`` URIs; the page
is rendered from the Jinja2 templates of ``genpqr/app/templates`` (:mod:`genpqr.app.report_base`).
Continuous actions: :mod:`genpqr.app.report_continuous` (same base template, sections adapted).
Sections: data summary (episodes, steps, action frequencies, anchor support), policy fit
(held-out log loss against the action-frequency baseline, calibration curve over all
(row, action) pairs), Q-evaluation convergence (Bellman residual per FQE iteration, or the
exact solve's residual), the reward (state x action heat map and bootstrap intervals for
tabular data; partial dependence on each state column otherwise; projected parameters),
the coverage diagnostics of the theory (``max mu/pi_hat``, clipped mass, support) and every
warning raised during the fit or derived from a failed diagnostic
(:func:`genpqr.app.report_base.report_warnings`).

:func:`report_figures` returns the figures (matplotlib ``Figure`` objects, drawn without
pyplot, so no backend state is touched); :func:`render_html` renders the page;
:func:`write_report` writes it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data.validation import plain
from ..evaluation import RESIDUAL_FLOOR_NOTE, legend_outside, plain_text
from .report_base import (MAX_PD_COLUMNS, ReportContext, ReportFigure, data_summary, fig_convergence, new_figure,
                          render_page)
from .report_continuous import context_continuous, continuous_figures, render_continuous_html
from .structural import report_section

__all__ = ["ReportContext", "ReportFigure", "context_from_outputs", "report_figures", "render_html", "write_report",
           "describe_normalization", "transition_rows", "anchored"]


def context_from_outputs(outputs, n_rows: int | None = None) -> ReportContext:
    """A :class:`ReportContext` from :class:`genpqr.app.workflow.FitOutputs`."""
    if outputs.config.action_type == "continuous":
        return context_continuous(outputs, n_rows=n_rows)
    model, data, config = outputs.model, outputs.data, outputs.config
    types = None
    if hasattr(model, "type_models_"):  # latent types: sections 1-5 show type 0, the types section all of them
        from .latent_types import type_rows

        types, model = type_rows(model), model.type_models_[0]
    summary = data_summary(data, config, n_rows)
    summary["actions"] = data.n_actions
    never = getattr(model.diagnostics_, "n_never_taken", None)
    if never is not None:
        summary["actions of the table never taken (rewards predicted from their features)"] = never
    if n_rows is not None and n_rows > data.n:
        summary["rows without an observed next state (dropped)"] = n_rows - data.n
    if getattr(outputs, "first_stage", None) is not None:
        summary["first stage (policy model)"] = outputs.first_stage.describe()
    if getattr(outputs, "transition", None) is not None:
        summary["transition model"] = outputs.transition.describe()
    d = model.diagnostics_
    summary["probability clip"] = (f"({d.clip[0]:.3g}, {d.clip[1]:.3g}) [{d.clip_rule}]; observed actions at a bound: "
                                   f"{d.fraction_clipped:.2%}; rows with an action at the floor: "
                                   f"{d.fraction_floored:.2%}")
    if data.n_choice_only:
        summary["transitions used"] = data.n - data.n_choice_only
        summary["observed choices (stage 1, choice counts)"] = data.n
        summary["last choices without an observed next state (not in the kernel)"] = data.n_choice_only
    state_labels = None
    if outputs.tabular:
        index = outputs.state_index
        visits = outputs.rewards["visits"].to_numpy()[:index.n_states]  # (with types: type 0's rows first)
        summary["tabular states"] = index.n_states
        summary["states visited"] = int(np.sum(visits > 0))
        counts = model.stage2_.counts
        summary["(state, action) pairs never observed"] = f"{int(np.sum(counts == 0))} of {counts.size}"
        labels = index.labels()
        state_labels = [", ".join(str(labels.at[i, c]) for c in index.columns) for i in range(index.n_states)]
    return ReportContext(model=model, config=config.to_dict(), data_summary=summary, rewards=outputs.rewards,
                         parameters=outputs.parameters, projection_r2=outputs.projection_r2,
                         bootstrap=outputs.bootstrap, warnings=list(outputs.warnings), tabular=outputs.tabular,
                         state_names=list(config.state), state_labels=state_labels, level=config.level,
                         structural=getattr(outputs, "structural", None),
                         structural_warnings=list(getattr(outputs, "structural_warnings", None) or []),
                         types=types, sources=getattr(outputs, "sources", None))


# ============================================================================ pieces computed from the model
def _policy_rows(model, held_out: bool = False):
    """(states, action codes, clipped training probabilities of the fit (out-of-fold when
    cross-fitted); ``held_out``: out of fold also on the exact path, from ``policy_folds_``)."""
    from ..stage1 import clip_proba

    data = model.training_data_
    policy = (getattr(model, "policy_folds_", None) if held_out else None) or model.policy_
    proba = clip_proba(policy.training_raw_proba(data.states), model.policy_.clip)[0]
    return data.states, data.actions, proba


def _coverage_ratios(model):
    states, _, proba = _policy_rows(model)
    mu = model.normalization_.weights(states, model.n_actions_, proba)
    return np.max(mu / proba, axis=1)


def describe_normalization(model) -> str:
    """The fitted normalization in the user's action labels."""
    norm = model.normalization_
    if norm.name == "anchor":
        label = plain(model.encoder_.labels[int(norm.mu.action)])
        g = norm.g.describe() if hasattr(norm.g, "describe") else ""
        return f"anchor action {label!r}: r(s, {label}) = g(s) ({g})"
    return norm.describe()


def anchored(model) -> bool:
    """Whether the fitted normalization puts all weight on anchor actions (its registry entry says so)."""
    from ..registry import ANCHORED, NORMALIZATIONS

    entry = NORMALIZATIONS.find(model.normalization_.name)
    return entry is not None and entry.can(ANCHORED)


def _baseline_log_loss(model) -> float:
    data = model.training_data_
    freq = data.action_counts() / data.n
    return float(-np.mean(np.log(freq[data.actions])))




# ============================================================================ figures
def _fig_actions(ctx):
    model = ctx.model
    d = model.diagnostics_
    labels = [plain_text(a) for a in d.action_counts]
    counts = np.asarray(list(d.action_counts.values()), dtype=float)
    fig = new_figure(max(4.0, 0.5 * len(labels) + 2.5), 3.0)
    ax = fig.add_subplot()
    bars = ax.bar(range(len(labels)), counts, color="#4477aa")
    weight = model.normalization_.weights(model.training_data_.states, model.n_actions_,
                                          _policy_rows(model)[2]).sum(axis=0)
    for bar, w in zip(bars, weight):
        if w > 0 and anchored(model):
            bar.set_color("#cc6677")
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel("action")
    ax.set_ylabel("transitions")
    ax.set_title("action frequencies" + (" (anchor in red)" if anchored(model) else ""))
    return fig


def _fig_calibration(ctx):
    from sklearn.calibration import calibration_curve

    model = ctx.model
    _, actions, proba = _policy_rows(model, held_out=True)
    onehot = np.zeros_like(proba)
    onehot[np.arange(actions.size), actions] = 1.0
    frac, mean_pred = calibration_curve(onehot.ravel(), proba.ravel(), n_bins=10, strategy="quantile")
    fig = new_figure(4.6, 4.0)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], color="black", lw=1, ls="--", label="perfect calibration")
    ax.plot(mean_pred, frac, marker="o", color="#4477aa", label="policy model")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("predicted probability pi_hat(a|s)")
    ax.set_ylabel("observed frequency of a")
    ax.set_title(f"calibration ({model.diagnostics_.policy_log_loss_kind}, all (row, action) pairs)", fontsize=9)
    legend_outside(ax)
    return fig


def _fig_heatmap(ctx):
    from ..evaluation import plot_reward_table

    model = ctx.model
    table = np.asarray(model.stage2_.recovery.reward)
    S = table.shape[0]
    fig = new_figure(max(4.0, 0.7 * table.shape[1] + 3.0), min(12.0, max(3.0, 0.22 * S + 1.2)))
    ax = fig.add_subplot()
    bound = float(np.max(np.abs(table))) or 1.0
    plot_reward_table(table, model.encoder_.labels, ax=ax, title="recovered reward r(s, a)", vmin=-bound, vmax=bound)
    if ctx.state_labels is not None and S <= 40:
        ax.set_yticks(range(S), [plain_text(v) for v in ctx.state_labels], fontsize=7)
    ax.set_ylabel("state" if not ctx.state_names else plain_text(", ".join(ctx.state_names)))
    unvisited = _unvisited(model, S)
    if unvisited.size:
        from matplotlib.patches import Rectangle

        for i, s in enumerate(unvisited):
            ax.add_patch(Rectangle((-0.5, s - 0.5), table.shape[1], 1.0, fill=False, hatch="///", edgecolor="0.25",
                                   lw=0.0, label=None if i else "state with no observed choice (not identified)"))
        legend_outside(ax, ncols=1)
    return fig


def _fig_transition_support(ctx):
    """Observed transitions per (state, action) cell, on a log scale; cells under the
    thin-transitions threshold outlined."""
    from ..estimator import THIN_TRANSITIONS

    model = ctx.model
    moves = np.asarray(model.transition_counts_, dtype=np.float64)
    S, K = moves.shape
    fig = new_figure(max(4.0, 0.7 * K + 3.0), min(12.0, max(3.0, 0.22 * S + 1.2)))
    ax = fig.add_subplot()
    image = ax.imshow(np.log10(1.0 + moves), aspect="auto", cmap="viridis", interpolation="nearest")
    fig.colorbar(image, ax=ax, label="log10(1 + observed transitions)")
    visits = np.asarray(model.stage2_.counts)
    rows, cols = np.nonzero((moves < THIN_TRANSITIONS) & (visits > 0))
    if rows.size and rows.size <= 2000:
        ax.plot(cols, rows, "s", ms=3, mfc="none", mec="#cc6677", ls="none",
                label=f"logged cell with < {THIN_TRANSITIONS} transitions")
        legend_outside(ax, ncols=1)
    ax.set_xticks(range(K), [plain_text(a) for a in model.encoder_.labels], rotation=90 if K > 12 else 0)
    ax.set_xlabel("action")
    ax.set_ylabel("state_index")
    ax.set_title("observed transitions per (state, action)", fontsize=9)
    return fig


def transition_rows(model) -> list:
    """Section 4's transition-support table (exact tabular path): how many observed moves the
    kernel rests on, per (state, action) cell; empty without ``transition_counts_``."""
    from ..estimator import THIN_SHARE, THIN_TRANSITIONS

    moves = getattr(model, "transition_counts_", None)
    if moves is None:
        return []
    moves = np.asarray(moves, dtype=np.float64)
    visits = np.asarray(model.stage2_.counts, dtype=np.float64)
    logged = visits > 0
    thin = (moves < THIN_TRANSITIONS) & logged
    share = visits[thin].sum() / max(visits.sum(), 1.0)
    given = not np.isfinite(getattr(model.diagnostics_, "thin_transition_share", float("nan")))
    return [("kernel P", "given or structured (not estimated cell by cell)" if given
             else "estimated from the counts of each (state, action) cell"),
            ("logged (state, action) cells", int(logged.sum())),
            ("observed transitions per logged cell: median (min, max)",
             f"{np.median(moves[logged]):g} ({moves[logged].min():g}, {moves[logged].max():g})" if logged.any()
             else "n/a"),
            (f"logged cells with < {THIN_TRANSITIONS} transitions", int(thin.sum())),
            (f"share of the logged rows on them (a warning above {THIN_SHARE:.0%} when P is estimated)",
             f"{share:.1%}")]


def _source_lines(ctx) -> list:
    """The console's lines on where the reward's uncertainty comes from, for the report."""
    from .results import source_lines

    n_boot = ctx.bootstrap.replicates.shape[0] if ctx.bootstrap is not None else 0
    lines = [line.strip() for line in source_lines(ctx.sources, n_boot)]
    heading = "where the reward's uncertainty comes from"  # the report's heading of the list: not repeated
    if lines and lines[0].lower().startswith(heading):
        rest = lines[0][len(heading):].strip().rstrip(":").strip()
        lines[0] = rest[1:-1] if rest.startswith("(") and rest.endswith(")") else rest
    return [line for line in lines if line]


def _unvisited(model, n_states: int) -> np.ndarray:
    """State indices with no observed choice (their rewards are not identified by the data)."""
    visited = getattr(model, "visited_states_", None)
    if visited is None or np.shape(visited) != (n_states,):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(~np.asarray(visited, dtype=bool))


def _fig_intervals(ctx):
    model, boot = ctx.model, ctx.bootstrap
    table = np.asarray(model.stage2_.recovery.reward)
    S, K = table.shape
    lo, hi = (np.ravel(x)[:S * K].reshape(S, K) for x in boot.interval(ctx.level))
    fig = new_figure(max(5.0, 0.18 * S + 3.0), 3.8)
    ax = fig.add_subplot()
    x = np.arange(S)
    unvisited = _unvisited(model, S)
    seen = np.ones(S, dtype=bool)
    seen[unvisited] = False
    for i, s in enumerate(unvisited):  # their intervals only measure the extrapolation, not the data
        ax.axvspan(s - 0.5, s + 0.5, color="0.9", lw=0, zorder=0,
                   label=None if i else "no observed choice:\nnot identified (hollow)")
    for k, label in enumerate(model.encoder_.labels):
        shift = (k - (K - 1) / 2) * 0.8 / max(K, 1)
        color = f"C{k % 10}"
        ax.vlines(x + shift, lo[:, k], hi[:, k], lw=1.2, colors=color)  # percentile: need not contain the estimate
        ax.plot(x[seen] + shift, table[seen, k], "o", ms=3, color=color, label=plain_text(label))
        if unvisited.size:
            ax.plot(x[~seen] + shift, table[~seen, k], "o", ms=3, mfc="white", color=color)
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_xlabel("state_index")
    ax.set_ylabel("reward")
    ax.set_title(f"reward with {ctx.level:.0%} bootstrap intervals ({boot.replicates.shape[0]} replicates)",
                 fontsize=9)
    legend_outside(ax, "right", title="action", fontsize=7, ncols=1 if K <= 12 else 2, markerscale=2)
    return fig


def _fig_partial_dependence(ctx):
    model = ctx.model
    states = model.training_data_.states
    names = list(ctx.state_names) or [f"s{j}" for j in range(states.shape[1])]
    d = min(states.shape[1], MAX_PD_COLUMNS)
    ncols = min(d, 3)
    nrows = int(np.ceil(d / ncols))
    fig = new_figure(3.4 * ncols + 0.6, 2.8 * nrows + 0.4)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    medians = np.median(states, axis=0)
    for j in range(d):
        lo, hi = np.quantile(states[:, j], [0.01, 0.99])
        grid_values = np.unique(states[:, j]) if np.unique(states[:, j]).size <= 30 else np.linspace(lo, hi, 50)
        grid = np.tile(medians, (grid_values.size, 1))
        grid[:, j] = grid_values
        reward = model.reward(grid)
        ax = axes[j]
        for k, label in enumerate(model.encoder_.labels):
            ax.plot(grid_values, reward[:, k], label=plain_text(label), marker="." if grid_values.size <= 30 else None)
        ax.set_xlabel(plain_text(names[j]))
        ax.set_ylabel("reward")
    for ax in axes[d:]:
        ax.set_visible(False)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside right upper", title="action", fontsize=7)
    fig.suptitle("partial dependence: reward vs each state column (others at their medians)", fontsize=9)
    return fig


def _fig_coverage(ctx):
    ratios = _coverage_ratios(ctx.model)
    fig = new_figure(5.0, 3.4)
    ax = fig.add_subplot()
    logs = np.log10(ratios)
    if np.ptp(logs) < 1e-9:
        ax.bar([logs[0]], [ratios.size], width=0.1, color="#4477aa")
    else:
        ax.hist(logs, bins=40, color="#4477aa")
    ax.axvline(np.log10(ratios.max()), color="#cc6677", lw=1.5, label=f"max mu/pi_hat = {ratios.max():.3g}")
    ax.set_xlabel("log10 max_a mu(a|s) / pi_hat(a|s) at each logged state")
    ax.set_ylabel("transitions")
    legend_outside(ax)
    ax.set_title("coverage of the normalization by the behaviour", fontsize=9)
    return fig


def report_figures(ctx: ReportContext) -> list[ReportFigure]:
    """Every figure of the report, in order."""
    if ctx.continuous:
        return continuous_figures(ctx)
    figs = [ReportFigure("data", "Transitions per action.", _fig_actions(ctx)),
            ReportFigure("policy", "Calibration of the stage-1 policy: within each bin of predicted "
                                   "probability, the share of (row, action) pairs where the action was taken.",
                         _fig_calibration(ctx))]
    if ctx.model.diagnostics_.solver == "fqe":
        figs.append(ReportFigure("q", "Sample Bellman residual (RMS) and the largest change of the Bellman targets "
                                      "per fitted-Q-evaluation iteration. Convergence is the target change going to "
                                      f"zero; {RESIDUAL_FLOOR_NOTE}.", fig_convergence(ctx)))
    if ctx.tabular:
        figs.append(ReportFigure("reward", "Recovered (normalized) reward by state and action.", _fig_heatmap(ctx)))
        if getattr(ctx.model, "transition_counts_", None) is not None:
            figs.append(ReportFigure("transitions", "Observed transitions per (state, action) cell: the estimated "
                                                    "kernel P(.|s, a) of a cell is the frequency of these moves "
                                                    "(rewards.csv: transitions_<action>).",
                                     _fig_transition_support(ctx)))
        if ctx.bootstrap is not None:
            figs.append(ReportFigure("reward", "Point estimates with percentile bootstrap intervals (whole episodes "
                                               "resampled).", _fig_intervals(ctx)))
    else:
        figs.append(ReportFigure("reward", "Partial dependence of the reward on each state column, one line per "
                                           "action, the other columns held at their medians.",
                                 _fig_partial_dependence(ctx)))
    figs.append(ReportFigure("coverage", "Distribution over the logged states of max_a mu(a|s)/pi_hat(a|s), the "
                                         "quantity whose maximum (the coverage constant) enters the error bounds.",
                             _fig_coverage(ctx)))
    return figs




# ============================================================================ HTML
def render_html(ctx: ReportContext) -> str:
    """The report as one HTML string (``discrete.html``; continuous actions: ``continuous.html``)."""
    if ctx.continuous:
        return render_continuous_html(ctx)
    model = ctx.model
    d = model.diagnostics_
    n = d.n_transitions
    support = f"{d.support_count} of {n} transitions ({d.support_count / n:.1%})"
    return render_page(
        "discrete.html", ctx, report_figures(ctx),
        normalization=describe_normalization(model), gamma=f"{model.gamma_:g}",
        data_summary=list(ctx.data_summary.items()),
        action_rows=_action_rows(d, n),
        anchored=anchored(model), support=support,
        policy_rows=[("policy log loss", f"{d.policy_log_loss:.4f} ({d.policy_log_loss_kind})"),
                     ("log loss of the action frequencies alone", f"{_baseline_log_loss(model):.4f}"),
                     ("clip bounds", str(model.policy_.clip))],
        out_of_fold=d.policy_log_loss_kind == "out-of-fold", fqe=d.solver == "fqe", q_rows=_q_rows(d, model),
        structural=report_section(ctx) if ctx.structural is not None else None, parameters=ctx.parameters,
        projection_r2=None if ctx.projection_r2 is None else f"{ctx.projection_r2:.4f}",
        rewards=ctx.rewards if ctx.tabular else None, types=ctx.types,
        transition_rows=transition_rows(model) if ctx.tabular else [],
        source_lines=[] if ctx.sources is None else _source_lines(ctx),
        coverage_rows=[("max mu/pi_hat (coverage constant)", f"{d.max_mu_over_pi:.4g}"),
                       ("share of observed actions whose probability hit a clip bound", f"{d.fraction_clipped:.2%}"),
                       ("support of the normalization", support)])


def _action_rows(d, n: int) -> list:
    """Section 1's action frequencies; with an action table a taken flag per action (a never-taken
    action's reward is a prediction from its features)."""
    table = getattr(d, "n_never_taken", None) is not None
    return [(f"{lab}", f"{cnt} ({cnt / n:.1%})" + (("; taken" if cnt else "; never taken: its reward is a prediction "
                                                    "from its features") if table else ""))
            for lab, cnt in d.action_counts.items()]


def _q_rows(d, model) -> list:
    """Section 3's table: fitted Q evaluation (and what it regressed), or the exact solve."""
    if d.solver == "fqe":
        last = f"{d.bellman_residuals[-1]:.4g}" if d.bellman_residuals else "n/a"
        continuation = getattr(getattr(model.stage2_, "fqe", None), "continuation_", False)
        regressed = "the continuation P mu Q (Q = u - g + gamma P mu Q)" if continuation else "Q itself"
        return [("solver", "fitted Q evaluation"), ("regressed", regressed), ("iterations", d.n_iterations),
                ("converged", d.converged), ("last sample Bellman residual (RMS)", last)]
    res = f"{d.bellman_residuals[0]:.3g}" if d.bellman_residuals else "n/a"
    return [("solver", f"exact linear solve ({d.solver})"), ("iterations", d.n_iterations),
            ("residual of the linear system", res)]


def write_report(path, ctx: ReportContext) -> Path:
    """Write :func:`render_html` to ``path``; returns the path."""
    path = Path(path)
    path.write_text(render_html(ctx), encoding="utf-8")
    return path

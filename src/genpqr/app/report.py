"""The self-contained HTML report of ``genpqr fit``.

One file, no external resources: figures are inline SVG drawn from the data
(:mod:`genpqr.app.report_plot`, no matplotlib); the page is rendered from the Jinja2 templates of
``genpqr/app/templates`` (:mod:`genpqr.app.report_base`). Discrete actions: the figures are
:mod:`genpqr.app.report_discrete`'s; continuous actions: :mod:`genpqr.app.report_continuous` (same
base template, sections adapted). Sections: data summary (episodes, steps, action frequencies,
anchor support), policy fit (held-out log loss against the action-frequency baseline, calibration
curve over all (row, action) pairs), Q-evaluation convergence (Bellman residual per FQE
iteration, or the exact solve's residual), the reward (state x action heat map and bootstrap
intervals for tabular data; partial dependence on each state column otherwise; projected
parameters), the coverage diagnostics of the theory (``max mu/pi_hat``, clipped mass, support)
and every warning raised during the fit or derived from a failed diagnostic
(:func:`genpqr.app.report_base.report_warnings`).

With many actions the report stays bounded: per-action figures and the rewards table show the
:data:`~genpqr.app.report_discrete.TOP_ACTIONS` most visited actions and the action table the
:data:`~genpqr.app.report_base.MAX_TABLE_ROWS` most frequent, each saying where the rest are.

:func:`report_figures` returns the figures; :func:`render_html` renders the page;
:func:`write_report` writes it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data._validation import plain
from .report_base import MAX_TABLE_ROWS, ReportContext, ReportFigure, data_summary, render_page
from .report_continuous import context_continuous, render_continuous_html
from .report_discrete import TOP_ACTIONS, anchored, pieces_of, report_figures, shown_actions
from .report_inference import inference_section

__all__ = ["ReportContext", "ReportFigure", "context_from_outputs", "report_figures", "render_html", "write_report",
           "describe_normalization", "transition_rows", "rewards_view", "anchored"]


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
                         types=types, sources=getattr(outputs, "sources", None),
                         inference=getattr(outputs, "inference", None))


# ============================================================================ pieces computed from the model
def describe_normalization(model) -> str:
    """The fitted normalization in the user's action labels."""
    norm = model.normalization_
    if norm.name == "anchor":
        label = plain(model.encoder_.labels[int(norm.mu.action)])
        g = norm.g.describe() if hasattr(norm.g, "describe") else ""
        return f"anchor action {label!r}: r(s, {label}) = g(s) ({g})"
    return norm.describe()


def _baseline_log_loss(model) -> float:
    data = model.training_data_
    freq = data.action_counts() / data.n
    return float(-np.mean(np.log(freq[data.actions])))


def transition_rows(model) -> list:
    """Section 4's transition-support table (exact tabular path): how many observed moves the
    kernel rests on, per (state, action) cell; empty without ``transition_counts_``."""
    from ..estimator._diagnostic_checks import THIN_SHARE, THIN_TRANSITIONS

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


# ============================================================================ HTML
def _structural_section(ctx):
    """The structural-parameters section, or None without a structural fit (whose modules are
    then never imported)."""
    if ctx.structural is None:
        return None
    from .structural import report_section

    return report_section(ctx)


def render_html(ctx: ReportContext) -> str:
    """The report as one HTML string (``discrete.html``; continuous actions: ``continuous.html``)."""
    if ctx.continuous:
        return render_continuous_html(ctx)
    model = ctx.model
    d = model.diagnostics_
    n = d.n_transitions
    support = f"{d.support_count} of {n} transitions ({d.support_count / n:.1%})"
    action_rows, action_note = _action_rows(d, n)
    pieces = pieces_of(ctx)
    rewards, rewards_note = rewards_view(ctx, pieces.shown) if ctx.tabular else (None, "")
    return render_page(
        "discrete.html", ctx, report_figures(ctx, pieces),
        normalization=describe_normalization(model), gamma=f"{model.gamma_:g}",
        data_summary=list(ctx.data_summary.items()),
        action_rows=action_rows, action_note=action_note, rewards_note=rewards_note,
        anchored=anchored(model), support=support,
        policy_rows=[("policy log loss", f"{d.policy_log_loss:.4f} ({d.policy_log_loss_kind})"),
                     ("log loss of the action frequencies alone", f"{_baseline_log_loss(model):.4f}"),
                     ("clip bounds", str(model.policy_.clip))],
        out_of_fold=d.policy_log_loss_kind == "out-of-fold", fqe=d.solver == "fqe", q_rows=_q_rows(d, model),
        structural=_structural_section(ctx), parameters=ctx.parameters,
        projection_r2=None if ctx.projection_r2 is None else f"{ctx.projection_r2:.4f}",
        rewards=rewards, types=ctx.types,
        transition_rows=transition_rows(model) if ctx.tabular else [],
        source_lines=[] if ctx.sources is None else _source_lines(ctx),
        coverage_rows=[("max mu/pi_hat (coverage constant)", f"{d.max_mu_over_pi:.4g}"),
                       ("share of observed actions whose probability hit a clip bound", f"{d.fraction_clipped:.2%}"),
                       ("support of the normalization", support)],
        inference=None if ctx.inference is None else inference_section(ctx))


def _action_rows(d, n: int) -> tuple[list, str]:
    """Section 1's action frequencies (at most :data:`MAX_TABLE_ROWS` actions, the most frequent, in
    label order) and a note on those left out; with an action table a taken flag per action (a
    never-taken action's reward is a prediction from its features)."""
    table = getattr(d, "n_never_taken", None) is not None
    items = list(d.action_counts.items())
    counts = np.asarray([cnt for _, cnt in items], dtype=np.float64)
    shown = shown_actions(counts, limit=MAX_TABLE_ROWS)
    if shown.size < counts.size:  # the most frequent first
        shown = shown[np.argsort(-counts[shown], kind="stable")]
    rows = [(f"{lab}", f"{cnt} ({cnt / n:.1%})" + (("; taken" if cnt else "; never taken: its reward is a prediction "
                                                    "from its features") if table else ""))
            for lab, cnt in (items[k] for k in shown)]
    rest = np.ones(counts.size, dtype=bool)
    rest[shown] = False
    note = "" if not rest.any() else (
        f"The {shown.size} most frequent of {counts.size:,} actions; the other {int(rest.sum()):,} have "
        f"{int(counts[rest].sum()):,} transitions ({int(np.sum(counts[rest] == 0)):,} of them none). Every "
        "action's count: model.joblib (diagnostics_.action_counts); per state: rewards.csv's transitions_<action>.")
    return rows, note


def rewards_view(ctx, shown) -> tuple:
    """The rewards table as the report shows it: with more actions than ``TOP_ACTIONS``, the
    columns of the ``shown`` actions only (and the columns that are not per action); a note."""
    frame = ctx.rewards
    labels = [str(a) for a in ctx.model.encoder_.labels]
    if frame is None or len(labels) <= TOP_ACTIONS:
        return frame, ""
    keep = {labels[k] for k in shown}
    per_action = {f"{kind}_{lab}{end}": lab for lab in labels for kind in ("reward", "transitions")
                  for end in ("", "_se", "_lo", "_hi")}
    columns = [c for c in frame.columns if str(c) not in per_action or per_action[str(c)] in keep]
    return frame[columns], (f"Columns of the {len(keep)} most visited of {len(labels):,} actions; every action's "
                            "columns are in rewards.csv.")


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

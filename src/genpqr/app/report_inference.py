"""The report's "Inference" section (``genpqr fit --infer``): the debiased targets of
``inference.csv``, what their uncertainty comes from, their diagnostics and warnings, and a figure
of the estimates with their intervals (:mod:`genpqr.app.report_plot`).

The split of each standard error by the input it comes from (first stage, kernel, state law:
``InferenceResult.se_by_input``) is shown under "What the targets' uncertainty comes from".

The table is ``result.to_frame()``, the frame ``inference.csv`` is written from: each number is
shown as the console's summary prints it (:func:`number`, the same digits) and carried in full in
its cell's ``data-value`` (the column's name in ``inference.csv`` in ``data-column``), so the page,
the file and the console give one answer per question. A component whose interval the inference
warned about (:class:`~genpqr.exceptions.InferenceWarning`: thin overlap, one episode carrying the
variance, a large correction) is flagged in its row, drawn in red in the figure, and the warning is
printed in full under the table. Nothing here is computed again: the section reads the result.
"""

from __future__ import annotations

import textwrap

import numpy as np

from .report_base import MAX_TABLE_ROWS, ReportFigure
from .report_svg import BLUE, CHAR, FONT, RED

__all__ = ["inference_section", "number", "component_warnings", "ESTIMATE_COLUMNS", "MAX_FIGURE_COMPONENTS"]

#: The estimates table: (column of ``inference.csv``, heading, format); ``ci_low``/``ci_high`` get
#: the level in their heading.
ESTIMATE_COLUMNS = (("estimate", "estimate", "number"), ("std_error", "std. error", "number"),
                    ("ci_low", "interval low", "number"), ("ci_high", "interval high", "number"),
                    ("plug_in", "plug-in", "number"), ("z", "z", ".2f"), ("p_value", "P>|z|", ".3f"))
#: The diagnostics table: (column of ``inference.csv``, heading, format), as the console prints them.
DIAGNOSTIC_COLUMNS = (("correction_to_se", "correction / SE", ".2f"), ("weight_max", "weight max (x mean)", ".1f"),
                      ("weight_q99", "weight q99 (x mean)", ".1f"), ("effective_rows", "effective rows (Riesz)", ".0f"),
                      ("top_row_share", "top row share", ".3f"), ("top_episode_share", "top episode share", ".3f"),
                      ("J", "J (linear form)", ".2f"), ("J_dof", "J dof", ".0f"), ("J_p_value", "J p-value", ".3f"))
#: The figure shows at most this many components (the first; the table and inference.csv hold all).
MAX_FIGURE_COMPONENTS = 40
#: Targets with more components than this get a figure of their own (a projection on many features).
GRID_COMPONENTS = 4
FLAG = "interval may not be reliable (warning below)"
#: Components named in the line on the largest source of their uncertainty (all: the table).
MAX_SOURCE_NAMED = 8


def number(x) -> str:
    """A number as :meth:`genpqr.inference.InferenceResult.summary` prints it: four decimals, or four
    significant digits when it is very large or very small."""
    x = float(x)
    if not np.isfinite(x):
        return "nan"
    return f"{x:.4g}" if (abs(x) >= 1e5 or (0 < abs(x) < 1e-3)) else f"{x:.4f}"


def _cell(value, fmt: str) -> dict:
    text = (number(value) if fmt == "number" else f"{float(value):.0%}" if fmt == "share" and np.isfinite(value) else
            ("nan" if not np.isfinite(value) else format(float(value), fmt)))
    return {"text": text, "value": repr(float(value))}


def component_warnings(result) -> dict:
    """``{component: [warning, ...]}``: the result's warnings (each names its component and target)."""
    out = {}
    for name, target in zip(result.names, result.targets):
        head = f"{name} ({target}):"
        out[name] = [w for w in result.warnings if w.startswith(head)]
    return out


def inference_section(ctx) -> dict:
    """What ``templates/inference.html`` shows for ``ctx.inference`` (an
    :class:`~genpqr.inference.InferenceResult`)."""
    result = ctx.inference
    frame = result.to_frame()  # inference.csv
    warned = component_warnings(result)
    level = f"{result.level:.0%}"
    columns = [{"column": c, "heading": f"{heading} ({level})" if c.startswith("ci_") else heading}
               for c, heading, _ in ESTIMATE_COLUMNS]
    rows = [{"component": name, "target": row.target, "warned": bool(warned[name]),
             "cells": [_cell(row[c], fmt) for c, _, fmt in ESTIMATE_COLUMNS]}
            for name, row in frame.iloc[:MAX_TABLE_ROWS].iterrows()]
    diagnostics = [c for c in DIAGNOSTIC_COLUMNS if c[0] in frame.columns]
    diag_rows = [{"component": name, "warned": bool(warned[name]),
                  "cells": [_cell(row[c], fmt) for c, _, fmt in diagnostics]}
                 for name, row in frame.iloc[:MAX_TABLE_ROWS].iterrows()]
    return {"method": _method_rows(result, frame), "columns": columns, "rows": rows, "n_components": len(frame),
            "diagnostic_columns": [{"column": c, "heading": h} for c, h, _ in diagnostics],
            "diagnostic_rows": diag_rows,
            "warnings": list(result.warnings), "source": _source_lines(ctx, result),
            "by_input": _input_table(result, frame),
            "thresholds": _thresholds(), "folds": _fold_table(result),
            "figures": inference_figures(result, warned)}


def _method_rows(result, frame) -> list:
    """How the numbers were obtained, in ``inference.csv``'s words."""
    split = ("none: the full-sample fit's nuisances (the delta method of the fitted model, no refit)"
             if result.cross_fit is None else
             f"{result.cross_fit} episode folds: each row's correction at the model refitted without its fold")
    return [("estimator", "one-step (debiased) estimate: the plug-in plus the mean efficient influence function; "
                          "the plug-in (the target at the full-sample fit) beside it"),
            ("std. error", f"{frame['std_error_kind'].iloc[0]}, clustered by episode"),
            ("interval", frame["ci_kind"].iloc[0]),
            ("cross-fitting", split), ("route", result.route),
            ("rows, episodes", f"{result.n_rows}, {result.n_episodes}"),
            ("time", f"{result.seconds:.2f} s"), ("every number in full", "inference.csv")]


def _source_lines(ctx, result) -> list:
    """Where the targets' uncertainty comes from, as far as the result says."""
    lines = [f"Sampling of the {result.n_episodes} episodes: each standard error is that of the efficient influence "
             "function summed within episodes (an episode is the independent unit; rows within one are not).",
             "The influence function is a sum of one term per input the target is computed from: the first stage "
             "(the behaviour policy), the transition kernel (absent when the kernel was given) and the state "
             "distribution of the data. The table below gives the standard error each term gives alone and its "
             "share of the variance (the columns se_* and share_* of inference.csv); 'between inputs' is the share "
             "of the covariances between terms, zero in population for independent rows, kept within episodes."]
    from ..inference._result import INPUT_COLUMNS, INPUTS

    if result.cov_by_input is not None and len(result.names):
        frame = result.se_by_input
        lines.append("Largest source per component: " + "; ".join(
            f"{name}: {INPUTS[int(np.argmax(row))]}" for name, row in
            zip(frame.index[:MAX_SOURCE_NAMED], frame[[f"share_{k}" for k in INPUT_COLUMNS]].to_numpy()))
            + ("; ..." if len(frame) > MAX_SOURCE_NAMED else "") + ".")
    if ctx.sources is not None:
        lines.append("For the reward itself, section 4 splits the bootstrap's uncertainty between the policy and "
                     "the kernel.")
    top = result.diagnostics["top_episode_share"] if result.diagnostics is not None else None
    if top is not None and len(top):
        j = int(np.argmax(top.to_numpy()))
        lines.append(f"The largest share of a target's variance one episode carries: {top.iloc[j]:.1%} "
                     f"({top.index[j]}).")
    return lines


def _input_table(result, frame):
    """The split of each standard error by input (``se_by_input``, the ``se_*``/``share_*`` columns
    of ``inference.csv``), shares as the console prints them; None when the result has none."""
    from ..inference._result import INPUT_COLUMNS, INPUTS

    if result.cov_by_input is None:
        return None
    columns = [("std_error", "std. error", "number")]
    columns += [(f"share_{key}", f"{label} (share)", "share") for label, key in zip(INPUTS, INPUT_COLUMNS)]
    columns += [("share_cross", "between inputs (share)", "share")]
    columns += [(f"se_{key}", f"SE from {label} alone", "number") for label, key in zip(INPUTS, INPUT_COLUMNS)]
    rows = [(name, [_cell(row[c], fmt) for c, _, fmt in columns]) for name, row in frame.iloc[:MAX_TABLE_ROWS].iterrows()]
    return {"columns": [{"column": c, "heading": h} for c, h, _ in columns], "rows": rows}


def _thresholds() -> str:
    from ..inference._infer import CORRECTION_WARN, EPISODE_WARN, ESS_WARN, SPECIFICATION_WARN, WEIGHT_WARN

    return (f"A component is flagged when its Riesz weights rest on fewer than {ESS_WARN} effective rows or one row "
            f"holds more than {WEIGHT_WARN:.0%} of their square (thin overlap between the target and the behaviour), "
            f"when one episode carries more than {EPISODE_WARN:.0%} of its variance (with at least 20 episodes), or "
            f"when the correction exceeds {CORRECTION_WARN:g} standard errors. An efficient projection warns when its "
            f"specification test J rejects the linear form at {SPECIFICATION_WARN:g}.")


def _fold_table(result):
    """Cross-fitted: each component's estimate per fold (plug-in + correction on the held-out
    episodes), ``{"columns": [...], "rows": [(component, [cells])]}``; None without folds."""
    folds = result.folds
    if result.cross_fit is None or folds is None or folds.empty:
        return None
    wide = folds.pivot(index="component", columns="fold", values="estimate").reindex(result.names)
    return {"columns": [f"fold {k}" for k in wide.columns],
            "rows": [(name, [_cell(v, "number") for v in row]) for name, row in
                     zip(wide.index[:MAX_TABLE_ROWS], wide.to_numpy()[:MAX_TABLE_ROWS])]}


# ============================================================================ the figure
def _groups(result) -> list:
    """Consecutive components of one target (the same description): ``[(target, [j, ...]), ...]``."""
    groups = []
    for j, target in enumerate(result.targets[:MAX_FIGURE_COMPONENTS]):
        if groups and groups[-1][0] == target:
            groups[-1][1].append(j)
        else:
            groups.append((target, [j]))
    return groups


def _panel(result, lo, hi, idx, warned, title: str, shown_plug: bool):
    from .report_plot import Axes

    names = [result.names[j] for j in idx]
    x = np.arange(len(idx), dtype=np.float64)
    ax = Axes(title, ylabel="estimate", xlim=(-0.6, len(idx) - 0.4),
              xticks=[] if title else [(k, name) for k, name in enumerate(names)])
    bad = np.array([bool(warned[n]) for n in names])
    est, low, high = result.estimate[idx], lo[idx], hi[idx]
    if np.nanmin(low) < 0 < np.nanmax(high):
        ax.hline(0.0, "#999999", width=0.8, dash="3,3")
    for mask, color, label in ((~bad, BLUE, None), (bad, RED, FLAG)):
        if mask.any():
            ax.vlines(x[mask], low[mask], high[mask], color, width=2.0,
                      label=label or f"{result.level:.0%} interval (Wald)")
            ax.line(x[mask], est[mask], color, width=0, marker="o", size=3.5, label=label or "debiased estimate")
    if shown_plug:
        ax.line(x, result.plug_in[idx], "#333333", width=0, marker="s", size=3.0, hollow=True,
                label="plug-in (the full-sample fit)")
    return ax


def inference_figures(result, warned=None) -> list:
    """The estimates with their intervals: one panel per target (its components side by side);
    the targets of at most :data:`GRID_COMPONENTS` components in one grid, each larger target in a
    figure of its own. Components the inference warned about are red."""
    from .report_plot import Figure

    warned = component_warnings(result) if warned is None else warned
    interval = result.conf_int()
    lo, hi = interval["lower"].to_numpy(dtype=np.float64), interval["upper"].to_numpy(dtype=np.float64)
    # the plug-in only where it is told apart from the estimate (cross-fitted, or a visible correction)
    moved = np.abs(result.estimate - result.plug_in) > 0.01 * np.maximum(result.std_error, 1e-300)
    groups = _groups(result)
    small = [(t, idx) for t, idx in groups if len(idx) <= GRID_COMPONENTS]
    figures = []
    if small:
        ncols = min(4, len(small))
        width = max(180.0 * ncols + 40, 480.0)  # (room for the legend)
        panels = [_panel(result, lo, hi, idx, warned, _title(result, idx, width / ncols), bool(moved[idx].any()))
                  for _, idx in small]
        shown = np.concatenate([idx for _, idx in small])
        figures.append(ReportFigure("inference", _caption(result, [t for t, _ in small], bool(moved[shown].any())),
                                    Figure(panels, width=width, panel_height=200, ncols=ncols)))
    for target, idx in groups:
        if len(idx) > GRID_COMPONENTS:
            fig = Figure([_panel(result, lo, hi, idx, warned, "", bool(moved[idx].any()))],
                         width=min(900.0, max(160 + 36.0 * len(idx), 480.0)), panel_height=260)
            figures.append(ReportFigure("inference", _caption(result, [target], bool(moved[idx].any())), fig))
    return figures


def _title(result, idx, width: float) -> str:
    """A panel's title: its one component's name (several: their ticks name them), cut to fit."""
    if len(idx) > 1:
        return ""
    name = str(result.names[idx[0]])
    fit = max(int((width - 40) / (CHAR * FONT)), 4)
    return name if len(name) <= fit else name[:fit - 1] + "\u2026"


def _caption(result, targets, moved: bool) -> str:
    shown = "; ".join(dict.fromkeys(targets))
    more = (f" The first {MAX_FIGURE_COMPONENTS} of {len(result.names)} components (all of them: the table and "
            "inference.csv)." if len(result.names) > MAX_FIGURE_COMPONENTS else "")
    plug = (" Open squares: the plug-in (the target at the full-sample fit)." if moved else
            " The plug-in is within 1% of a standard error of the estimate for every component: it is not drawn.")
    return textwrap.shorten(f"Debiased estimates (points) and their {result.level:.0%} Wald intervals (bars): {shown}.",
                            600, placeholder="...") + plug + more

"""Building blocks of the ``genpqr fit`` report, shared by the discrete (:mod:`genpqr.app.report`)
and continuous (:mod:`genpqr.app.report_continuous`) reports and the structural section
(:mod:`genpqr.app.structural`).

The page is rendered from Jinja2 templates (``genpqr/app/templates``, autoescaped): ``base.html``
holds the page, its style sheet (``report.css``, inlined), the header and the sections that
both flavours share (6. warnings, 7. configuration); ``discrete.html`` and ``continuous.html``
extend it with sections 1-5; ``macros.html`` has the tables and figures; ``structural.html``
is the structural-parameters part of section 4. Figures are ``Figure``
objects written into the page as inline SVG (no matplotlib: a figure costs milliseconds and a few
kilobytes), so the report is one file with no external resources. Tables show at most
:data:`MAX_TABLE_ROWS` rows and :data:`MAX_TABLE_COLUMNS` columns (the CSV files hold them all).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import numpy as np

__all__ = ["ReportContext", "ReportFigure", "MAX_TABLE_ROWS", "MAX_TABLE_COLUMNS", "MAX_PD_COLUMNS", "data_summary",
           "report_warnings", "report_warning_groups", "warning_sections", "REWARD_SIDE", "INFERENCE_SIDE",
           "fig_convergence", "figure_svg", "format_value", "table_view", "render_page"]

MAX_TABLE_ROWS = 60
MAX_TABLE_COLUMNS = 80
MAX_PD_COLUMNS = 12


@dataclass
class ReportContext:
    """What the report shows.

    Attributes
    ----------
    model : fitted GenPQR
    config : dict
        The effective config (shown, and the rerun command).
    data_summary : dict label -> value
        Shown as a two-column table, in order.
    rewards : DataFrame
        The rewards table as written.
    parameters : DataFrame or None
    projection_r2 : float or None
    bootstrap : BootstrapResult or None
    warnings : list of str
    tabular : bool
    state_names : list of str
        State column names (continuous mode: the model's state columns).
    state_labels : list of str or None
        Tabular: a label per state index (heat-map rows).
    level : float
    title : str
    continuous : bool
        A continuous-action fit (:mod:`genpqr.app.report_continuous` renders it).
    action_names : list of str
        Continuous actions: the action column(s).
    structural : StructuralFit or None
        With features: the structural estimates (:func:`genpqr.app.structural.report_section`).
    structural_warnings : list of str
        The structural step's warnings (also in ``warnings``): listed apart, as concerning
        ``parameters.csv`` (:func:`warning_sections`).
    types : list of (label, value) or None
        ``--types M > 1``: the latent types' figures (:func:`genpqr.app.latent_types.type_rows`);
        ``model`` is then type 0's fit.
    sources : DataFrame or None
        Tabular mode with a bootstrap: the reward's SE by source per (state, action)
        (``reward_se_by_source.csv``).
    inference : InferenceResult or None
        ``--infer``: the debiased targets of ``inference.csv``, shown in their own section
        (:mod:`genpqr.app.report_inference`); None: no such section.
    """

    model: object
    config: dict
    data_summary: dict
    rewards: object
    parameters: object = None
    projection_r2: float | None = None
    bootstrap: object = None
    warnings: list = field(default_factory=list)
    tabular: bool = True
    state_names: list = field(default_factory=list)
    state_labels: list | None = None
    level: float = 0.95
    title: str = "genpqr fit report"
    continuous: bool = False
    action_names: list = field(default_factory=list)
    structural: object = None
    structural_warnings: list = field(default_factory=list)
    types: list | None = None
    sources: object = None
    inference: object = None


@dataclass
class ReportFigure:
    """A figure of the report: the section it belongs to, its caption and the figure
    (``Figure``)."""

    section: str
    caption: str
    figure: object


def data_summary(data, config, n_rows: int | None = None) -> dict:
    """The data section's common rows (file, rows, transitions, episodes, ends), for either
    action type."""
    summary = {"data file": config.data}
    if n_rows is not None:
        summary["rows in the file"] = n_rows
    summary.update({
        "transitions used": data.n,
        "episodes": data.n_episodes,
        "mean steps per episode": round(data.n / max(data.n_episodes, 1), 2),
        "terminated transitions": int(data.terminated.sum()),
        "truncated transitions": int(data.truncated.sum()),
    })
    return summary


#: What the fit's own warnings concern when the structural estimates are printed beside them, per
#: ``--estimator`` (the MLE does not use the normalization, the clip or the first stage; PML starts
#: from the first stage; the projection is fitted to the reward table).
REWARD_SIDE = {
    "npl": "rewards.csv, the nonparametric reward (not parameters.csv: the npl MLE does not use the normalization, "
           "the clip or the first stage)",
    "nfxp": "rewards.csv, the nonparametric reward (not parameters.csv: the nfxp MLE does not use the normalization, "
            "the clip or the first stage)",
    "pml": "rewards.csv, the nonparametric reward, and the first stage that pml's estimates in parameters.csv start "
           "from (warnings about the normalization alone do not concern them)",
    "projection": "rewards.csv, the nonparametric reward, and so the projection estimates in parameters.csv, "
                  "which are fitted to it",
}


#: The heading of the warnings of ``--infer`` (an :class:`~genpqr.exceptions.InferenceWarning` names
#: its target; they concern ``inference.csv``, not the reward or the parameters).
INFERENCE_SIDE = "inference.csv, the debiased targets of --infer"


def warning_sections(warnings_: list, structural_warnings=(), estimator: str | None = None) -> list:
    """``[(heading, lines), ...]``: a fit's warnings grouped by the output they concern. Without
    a structural step or ``--infer`` warnings one group with an empty heading; with a structural
    step (``estimator`` given), the fit's own warnings (about ``rewards.csv``; :data:`REWARD_SIDE`)
    apart from the structural step's (about ``parameters.csv``); the ``InferenceWarning`` lines apart
    (about ``inference.csv``, :data:`INFERENCE_SIDE`). Empty groups are left out."""
    inference = [w for w in warnings_ if str(w).startswith("InferenceWarning:") and w not in set(structural_warnings)]
    rest = [w for w in warnings_ if w not in set(inference)]
    if estimator is None and not inference:
        return [("", rest)] if rest else []
    own = [w for w in rest if w not in set(structural_warnings)]
    sections = [(f"about {REWARD_SIDE.get(estimator, 'rewards.csv, the nonparametric reward')}", own),
                (f"about parameters.csv, the structural estimates ({estimator})", list(structural_warnings)),
                (f"about {INFERENCE_SIDE}", inference)]
    return [(heading, lines) for heading, lines in sections if lines]


def report_warnings(ctx) -> list:
    """The warnings the report lists: those raised during the fit (``ctx.warnings``) and every
    failed diagnostic check of the model (``diagnostics_.warnings``, from
    ``genpqr.estimator._diagnostic_checks.failed_diagnostics``; the same lines when the fit's warnings
    were caught), without repeats."""
    derived = getattr(getattr(ctx.model, "diagnostics_", None), "warnings", None) or []
    return list(dict.fromkeys([*ctx.warnings, *derived]))


def report_warning_groups(ctx) -> list:
    """:func:`report_warnings` grouped by the output they concern: ``[(heading, lines), ...]``
    (one group with an empty heading unless the fit has structural estimates)."""
    estimator = getattr(ctx.structural, "estimator", None) if ctx.structural is not None else None
    return warning_sections(report_warnings(ctx), ctx.structural_warnings, estimator)


# ============================================================================ figures
def fig_convergence(ctx):
    """Bellman residual and target change per fitted-Q-evaluation iteration, log scale (both
    flavours; ``genpqr.evaluation._plotting.plot_bellman_residuals`` drawn as SVG)."""
    from .report_plot import Axes, Figure

    d = ctx.model.diagnostics_
    ax = Axes("fitted Q evaluation: residuals per iteration", "FQE iteration", "residual / change", ylog=True)
    change, res = np.asarray(d.target_changes, dtype=float), np.asarray(d.bellman_residuals, dtype=float)
    if change.size:
        ax.line(np.arange(1, change.size + 1), np.maximum(change, 1e-300), "#1f77b4",
                label="max target change (convergence)")
    if res.size:
        ax.line(np.arange(1, res.size + 1), np.maximum(res, 1e-300), "#ff7f0e",
                label="sample Bellman residual (RMS; floors at next-state noise)")
    return Figure([ax], width=540, panel_height=360)


def figure_svg(f: ReportFigure):
    """A report figure as inline SVG markup (its caption as the SVG's title)."""
    from markupsafe import Markup

    return Markup(f.figure.svg(f.caption))


# ============================================================================ tables
def format_value(x) -> str:
    """A table cell: floats to 4 significant digits, anything else as ``str``."""
    if isinstance(x, (float, np.floating)):
        return f"{x:.4g}"
    return str(x)


@dataclass
class TableView:
    """A DataFrame as the template shows it: the column names, the first rows (cells formatted
    by :func:`format_value`), the total number of rows and of columns."""

    columns: list
    rows: list
    n_rows: int
    n_columns: int = 0


def table_view(frame, max_rows: int = MAX_TABLE_ROWS, max_columns: int = MAX_TABLE_COLUMNS) -> TableView:
    """The first ``max_rows`` rows and ``max_columns`` columns of ``frame``, formatted (the CSV
    holds them all)."""
    head = frame.iloc[:max_rows, :max_columns]
    rows = [[format_value(v) for v in row] for row in head.itertuples(index=False, name=None)]
    return TableView([str(c) for c in head.columns], rows, len(frame), frame.shape[1])


# ============================================================================ the page
@lru_cache(maxsize=1)
def _environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(loader=PackageLoader("genpqr.app", "templates"), autoescape=True, trim_blocks=True,
                      lstrip_blocks=True, undefined=StrictUndefined)
    env.filters["fmt"] = format_value
    env.globals.update(table_view=table_view, figure_svg=figure_svg)
    return env


def render_page(template: str, ctx: ReportContext, figures: list, **values) -> str:
    """Render ``template`` (which extends ``base.html``) for ``ctx``: the header, the figures by
    section, the warnings and the configuration are filled in here; ``values`` are the
    template's own."""
    from .. import __version__

    by_section = {}
    for f in figures:
        by_section.setdefault(f.section, []).append(f)
    folder = ctx.config.get("out") if isinstance(ctx.config, dict) else None
    config_path = shlex.quote(str(Path(folder) / "config.json")) if folder else "config.json"
    values.setdefault("inference", None)  # --infer: its section (genpqr.app.report_inference), before the warnings
    return _environment().get_template(template).render(
        title=ctx.title, version=__version__, generated=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}",
        figures=by_section, warnings=report_warnings(ctx), warning_groups=report_warning_groups(ctx),
        config_path=config_path,
        config_is_absolute=bool(folder), config_json=json.dumps(ctx.config, indent=2, default=str), **values)

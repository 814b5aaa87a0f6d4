"""Building blocks of the ``genpqr fit`` report, shared by the discrete (:mod:`genpqr.app.report`)
and continuous (:mod:`genpqr.app.report_continuous`) reports and the structural section
(:mod:`genpqr.app.structural`).

The page is rendered from Jinja2 templates (``genpqr/app/templates``, autoescaped): ``base.html``
holds the page, its style sheet (``report.css``, inlined), the header and the sections that
both flavours share (6. warnings, 7. configuration); ``discrete.html`` and ``continuous.html``
extend it with sections 1-5; ``macros.html`` has the tables and figures; ``structural.html``
is the structural-parameters part of section 4. Figures are matplotlib ``Figure`` objects
(drawn without pyplot, so no backend state is touched) embedded as base64 PNG ``data:`` URIs,
so the report is one file with no external resources.
"""

from __future__ import annotations

import base64
import io
import json
import shlex
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import numpy as np

__all__ = ["ReportContext", "ReportFigure", "MAX_TABLE_ROWS", "MAX_PD_COLUMNS", "data_summary", "report_warnings",
           "report_warning_groups", "warning_sections", "REWARD_SIDE",
           "new_figure", "fig_convergence", "figure_png", "png_data_uri", "format_value", "table_view", "render_page"]

MAX_TABLE_ROWS = 60
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


@dataclass
class ReportFigure:
    """A figure of the report: the section it belongs to, its caption and the matplotlib figure."""

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


def warning_sections(warnings_: list, structural_warnings=(), estimator: str | None = None) -> list:
    """``[(heading, lines), ...]``: a fit's warnings grouped by the output they concern. Without
    a structural step one group with an empty heading; with one (``estimator`` given), the
    fit's own warnings (about ``rewards.csv``; :data:`REWARD_SIDE`) apart from the structural
    step's (about ``parameters.csv``). Empty groups are left out."""
    if estimator is None:
        return [("", list(warnings_))] if warnings_ else []
    own = [w for w in warnings_ if w not in set(structural_warnings)]
    sections = [(f"about {REWARD_SIDE.get(estimator, 'rewards.csv, the nonparametric reward')}", own),
                (f"about parameters.csv, the structural estimates ({estimator})", list(structural_warnings))]
    return [(heading, lines) for heading, lines in sections if lines]


def report_warnings(ctx) -> list:
    """The warnings the report lists: those raised during the fit (``ctx.warnings``) and every
    failed diagnostic check of the model (``diagnostics_.warnings``, from
    :func:`genpqr.estimator.failed_diagnostics`; the same lines when the fit's warnings
    were caught), without repeats."""
    derived = getattr(getattr(ctx.model, "diagnostics_", None), "warnings", None) or []
    return list(dict.fromkeys([*ctx.warnings, *derived]))


def report_warning_groups(ctx) -> list:
    """:func:`report_warnings` grouped by the output they concern: ``[(heading, lines), ...]``
    (one group with an empty heading unless the fit has structural estimates)."""
    estimator = getattr(ctx.structural, "estimator", None) if ctx.structural is not None else None
    return warning_sections(report_warnings(ctx), ctx.structural_warnings, estimator)


# ============================================================================ figures
def new_figure(width=5.5, height=3.6):
    """A matplotlib ``Figure`` (no pyplot) with constrained layout at 100 dpi."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def fig_convergence(ctx):
    """Bellman residual and target change per fitted-Q-evaluation iteration (both flavours)."""
    from ..evaluation import plot_bellman_residuals

    fig = new_figure(5.4, 4.4)
    ax = plot_bellman_residuals(ctx.model.diagnostics_, ax=fig.add_subplot())
    ax.set_title("fitted Q evaluation: residuals per iteration", fontsize=9)
    return fig


def figure_png(fig) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def png_data_uri(fig) -> str:
    """The figure as a ``data:image/png;base64,...`` URI."""
    return "data:image/png;base64," + base64.b64encode(figure_png(fig)).decode("ascii")


# ============================================================================ tables
def format_value(x) -> str:
    """A table cell: floats to 4 significant digits, anything else as ``str``."""
    if isinstance(x, (float, np.floating)):
        return f"{x:.4g}"
    return str(x)


@dataclass
class TableView:
    """A DataFrame as the template shows it: the column names, the first rows (cells formatted
    by :func:`format_value`) and the total number of rows."""

    columns: list
    rows: list
    n_rows: int


def table_view(frame, max_rows: int = MAX_TABLE_ROWS) -> TableView:
    """The first ``max_rows`` rows of ``frame``, formatted (the CSV holds them all)."""
    rows = [[format_value(v) for v in row.tolist()] for _, row in frame.head(max_rows).iterrows()]
    return TableView([str(c) for c in frame.columns], rows, len(frame))


# ============================================================================ the page
@lru_cache(maxsize=1)
def _environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(loader=PackageLoader("genpqr.app", "templates"), autoescape=True, trim_blocks=True,
                      lstrip_blocks=True, undefined=StrictUndefined)
    env.filters["fmt"] = format_value
    env.globals.update(table_view=table_view, png_data_uri=png_data_uri)
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
    return _environment().get_template(template).render(
        title=ctx.title, version=__version__, generated=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}",
        figures=by_section, warnings=report_warnings(ctx), warning_groups=report_warning_groups(ctx),
        config_path=config_path,
        config_is_absolute=bool(folder), config_json=json.dumps(ctx.config, indent=2, default=str), **values)

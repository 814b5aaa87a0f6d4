"""The figures of the discrete-action report (:mod:`genpqr.app.report`), drawn as SVG from the
data (:mod:`genpqr.app.report_plot`).

What they need from the fit is computed once (:func:`pieces_of`): the policy's clipped training
probabilities once per distinct (fold, state) row (``genpqr.stage1._policy.FittedPolicy.training_table``;
with tabular states one row per visited state, not one per logged choice: :class:`PolicyCells`),
from which the calibration curve (:func:`calibration_points`, sklearn's quantile bins on weighted
cells), the coverage ratios and the actions of the normalization follow. Per-action figures show at
most ``TOP_ACTIONS`` actions, the most visited (:func:`shown_actions`, the anchor among them),
and one series per action at most :data:`TOP_SERIES`; their captions say where the rest are.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from ..evaluation._plotting import RESIDUAL_FLOOR_NOTE
from .report_base import MAX_PD_COLUMNS, ReportContext, ReportFigure, fig_convergence
from .report_continuous import continuous_figures
from .report_plot import Axes, Figure
from .report_svg import BLUE, PALETTE, RED, colormap, histogram

__all__ = ["TOP_ACTIONS", "TOP_SERIES", "MAX_POLICY_CELLS", "PolicyCells", "anchored", "calibration_points",
           "shown_actions", "pieces_of", "report_figures"]


#: Per-action figures and tables show at most this many actions (the most visited; the rest are in
#: rewards.csv): a figure of 10,000 actions is neither readable nor cheap.
TOP_ACTIONS = 30
#: Figures with one series per action (intervals, partial dependence) show at most this many.
TOP_SERIES = 10
#: The policy's (row, action) probabilities the report evaluates at most (continuous states with many
#: actions: a seeded sample of rows beyond it).
MAX_POLICY_CELLS = 4_000_000


@dataclass
class PolicyCells:
    """The fit's clipped training probabilities once per distinct (fold, state) row
    (``genpqr.stage1._policy.FittedPolicy.training_table``): ``proba`` (m, K), ``rows`` (m,) the logged
    rows at each, ``taken`` the rows per (table row, action) as flat keys ``row * K + action``
    (``taken_keys``, ``taken_counts``), ``states`` (m, d) and ``sampled`` (rows drawn, or None)."""

    proba: np.ndarray
    rows: np.ndarray
    taken_keys: np.ndarray
    taken_counts: np.ndarray
    states: np.ndarray
    n_rows: int
    sampled: int | None = None


def _policy_cells(model, held_out: bool = False) -> PolicyCells:
    """:class:`PolicyCells` of the fit (out-of-fold when cross-fitted; ``held_out``: out of fold
    also on the exact path, from ``policy_folds_``). With tabular states one row per visited
    (fold, state), not one per logged choice; continuous states with more than
    :data:`MAX_POLICY_CELLS` (row, action) pairs: a seeded sample of the rows."""
    from ..stage1._policy import clip_proba
    from ..stage1._cells import repeated_rows

    data = model.training_data_
    policy = (getattr(model, "policy_folds_", None) if held_out else None) or model.policy_
    states, actions, K = data.states, np.asarray(data.actions, dtype=np.int64), model.n_actions_
    sampled = None
    if data.n * K > MAX_POLICY_CELLS and repeated_rows(states) is None:
        keep = np.sort(np.random.default_rng(0).choice(data.n, size=max(MAX_POLICY_CELLS // K, 1), replace=False))
        proba, states, actions, sampled = policy.training_raw_proba(states[keep], rows=keep), states[keep], \
            actions[keep], keep.size
        index = np.arange(keep.size)
    else:
        table = policy.training_table(states)
        proba, states = table.values, table.states
        index = np.arange(actions.size) if table.index is None else table.index
    rows = np.bincount(index, minlength=proba.shape[0]).astype(np.float64)
    keys, counts = np.unique(index * K + actions, return_counts=True)
    return PolicyCells(clip_proba(proba, model.policy_.clip)[0], rows, keys, counts.astype(np.float64), states,
                       data.n, sampled)


def calibration_points(cells: PolicyCells, n_bins: int = 10):
    """``(observed frequency, mean predicted probability)`` per quantile bin of the predicted
    probabilities over all (row, action) pairs: ``sklearn.calibration.calibration_curve(taken,
    proba, n_bins, strategy="quantile")`` of the rows, computed on the distinct rows with their
    weights (the same bins: weighted percentiles with numpy's linear interpolation)."""
    m, K = cells.proba.shape
    p = cells.proba.ravel()
    w = np.repeat(cells.rows, K)
    pos = np.zeros(m * K)
    pos[cells.taken_keys] = cells.taken_counts
    live = w > 0
    p, w, pos = p[live], w[live], pos[live]
    order = np.argsort(p, kind="stable")
    sorted_p, cum = p[order], np.cumsum(w[order])
    N = cum[-1]
    q = np.linspace(0, 1, n_bins + 1) * 100 / 100
    h = q * (N - 1)
    lo = np.floor(h)
    a = sorted_p[np.minimum(np.searchsorted(cum, lo, side="right"), p.size - 1)]
    b = sorted_p[np.minimum(np.searchsorted(cum, np.minimum(lo + 1, N - 1), side="right"), p.size - 1)]
    t = h - lo
    edges = np.where(t >= 0.5, b - (b - a) * (1 - t), a + (b - a) * t)
    ids = np.searchsorted(edges[1:-1], p)
    total = np.bincount(ids, weights=w, minlength=n_bins)
    sums = np.bincount(ids, weights=p * w, minlength=n_bins)
    true = np.bincount(ids, weights=pos, minlength=n_bins)
    nonzero = total != 0
    return true[nonzero] / total[nonzero], sums[nonzero] / total[nonzero]


def _coverage_ratios(model, cells: PolicyCells | None = None):
    """``(max_a mu(a|s)/pi_hat(a|s) per distinct row, rows at each)``."""
    cells = _policy_cells(model) if cells is None else cells
    mu = model.normalization_.weights(cells.states, model.n_actions_, cells.proba)
    return np.max(mu / cells.proba, axis=1), cells.rows


def anchored(model) -> bool:
    """Whether the fitted normalization puts all weight on anchor actions (its registry entry says so)."""
    from ..registry import ANCHORED, NORMALIZATIONS

    entry = NORMALIZATIONS.find(model.normalization_.name)
    return entry is not None and entry.can(ANCHORED)


def _anchor_codes(model, cells: PolicyCells) -> np.ndarray:
    """Action codes with positive weight under mu somewhere, for an anchor normalization (else empty)."""
    if not anchored(model):
        return np.zeros(0, dtype=np.int64)
    weight = model.normalization_.weights(cells.states, model.n_actions_, cells.proba).sum(axis=0)
    return np.flatnonzero(weight > 0)


def shown_actions(visits, keep=(), limit: int = TOP_ACTIONS) -> np.ndarray:
    """The action codes a per-action figure shows, in code order: all when there are at most
    ``limit``, else the ``limit`` most visited (``keep``, e.g. the anchor, always among them)."""
    visits = np.asarray(visits, dtype=np.float64)
    K = visits.size
    if K <= limit:
        return np.arange(K)
    keep = [int(k) for k in keep][:limit]
    rest = [int(k) for k in np.argsort(-visits, kind="stable") if int(k) not in set(keep)]
    return np.sort(np.asarray(keep + rest[:limit - len(keep)], dtype=np.int64))


def _shown_note(n_shown: int, K: int, where: str = "rewards.csv") -> str:
    return "" if n_shown >= K else f" The {n_shown} most visited of {K:,} actions are shown; all are in {where}."


def _cell_visits(model) -> np.ndarray:
    """Logged choices per action (the exact path's counts, else the data's)."""
    counts = getattr(getattr(model, "stage2_", None), "counts", None)
    if counts is not None:
        return np.asarray(counts, dtype=np.float64).sum(axis=0)
    return np.asarray(model.training_data_.action_counts(), dtype=np.float64)


def _labels(model, codes) -> list:
    return [str(model.encoder_.labels[k]) for k in codes]


def _unvisited(model, n_states: int) -> np.ndarray:
    """State indices with no observed choice (their rewards are not identified by the data)."""
    visited = getattr(model, "visited_states_", None)
    if visited is None or np.shape(visited) != (n_states,):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(~np.asarray(visited, dtype=bool))


# ============================================================================ figures
def _fig_actions(ctx, pieces=None):
    model, pieces = ctx.model, pieces or pieces_of(ctx)
    counts = np.asarray(list(model.diagnostics_.action_counts.values()), dtype=float)
    anchors = pieces.anchors
    shown = shown_actions(counts, anchors)
    ax = Axes("action frequencies" + (" (anchor in red)" if anchored(model) else ""), "action", "transitions",
              xticks=list(enumerate(_labels(model, shown))))
    ax.bars(np.arange(shown.size), counts[shown], [RED if k in set(anchors.tolist()) else BLUE for k in shown])
    return Figure([ax], width=min(940, max(400, 26 * shown.size + 160)), panel_height=300, legend=None)


def _fig_calibration(ctx, pieces=None):
    model = ctx.model
    frac, mean_pred = calibration_points((pieces or pieces_of(ctx)).held_out)
    ax = Axes(f"calibration ({model.diagnostics_.policy_log_loss_kind}, all (row, action) pairs)",
              "predicted probability pi_hat(a|s)", "observed frequency of a", xlim=(0, 1), ylim=(0, 1))
    ax.line([0, 1], [0, 1], "black", width=1, dash="4 3", label="perfect calibration")
    ax.line(mean_pred, frac, BLUE, marker="o", label="policy model", cls="calibration")
    return Figure([ax], width=460, panel_height=360)


def _state_axis(ctx, S: int) -> dict:
    """A heat map's state axis: the state labels as ticks for at most 40 states."""
    if ctx.state_labels is not None and S <= 40:
        return {"yticks": list(enumerate(str(v) for v in ctx.state_labels))}
    return {}


def _heat_size(S: int, n_cols: int) -> dict:
    return {"width": min(940, max(420, 30 * n_cols + 300)), "panel_height": min(720, max(260, 14 * S + 110))}


def _fig_heatmap(ctx, pieces=None):
    model = ctx.model
    table = np.asarray(model.stage2_.recovery.reward)
    S = table.shape[0]
    shown = (pieces or pieces_of(ctx)).shown
    table = table[:, shown]
    bound = float(np.max(np.abs(table))) or 1.0
    ylabel = "state" if not ctx.state_names else ", ".join(ctx.state_names)
    ax = Axes("recovered reward r(s, a)", "action", ylabel, xticks=list(enumerate(_labels(model, shown))), yinvert=True,
              **_state_axis(ctx, S))
    ax.image(colormap("coolwarm", (table + bound) / (2 * bound)), (-0.5, shown.size - 0.5, -0.5, S - 0.5))
    for s in _unvisited(model, S):
        ax.hatch(-0.5, shown.size - 0.5, s - 0.5, s + 0.5, label="state with no observed choice (not identified)",
                 cls="unvisited", data={"state": int(s)})
    return Figure([ax], colorbar=("coolwarm", -bound, bound, "reward r(s, a)"), **_heat_size(S, shown.size))


def _fig_transition_support(ctx, pieces=None):
    """Observed transitions per (state, action) cell, on a log scale; cells under the
    thin-transitions threshold outlined."""
    from ..estimator._diagnostic_checks import THIN_TRANSITIONS

    model = ctx.model
    moves = np.asarray(model.transition_counts_, dtype=np.float64)
    visits = np.asarray(model.stage2_.counts)
    S = moves.shape[0]
    shown = (pieces or pieces_of(ctx)).shown
    moves, visits = moves[:, shown], visits[:, shown]
    top = float(np.log10(1.0 + moves.max())) or 1.0
    ax = Axes("observed transitions per (state, action)", "action", "state_index",
              xticks=list(enumerate(_labels(model, shown))), yinvert=True)
    ax.image(colormap("viridis", np.log10(1.0 + moves) / top), (-0.5, shown.size - 0.5, -0.5, S - 0.5))
    rows, cols = np.nonzero((moves < THIN_TRANSITIONS) & (visits > 0))
    if rows.size and rows.size <= 2000:
        ax.line(cols, rows, RED, width=0, marker="s", size=3, hollow=True, cls="thin",
                label=f"logged cell with < {THIN_TRANSITIONS} transitions")
    return Figure([ax], colorbar=("viridis", 0.0, top, "log10(1 + observed transitions)"), **_heat_size(S, shown.size))


def _fig_intervals(ctx):
    model, boot = ctx.model, ctx.bootstrap
    table = np.asarray(model.stage2_.recovery.reward)
    S, K = table.shape
    lo, hi = (np.ravel(x)[:S * K].reshape(S, K) for x in boot.interval(ctx.level))
    shown = shown_actions(_cell_visits(model), limit=TOP_SERIES)
    ax = Axes(f"reward with {ctx.level:.0%} bootstrap intervals ({boot.replicates.shape[0]} replicates)",
              "state_index", "reward")
    x = np.arange(S, dtype=np.float64)
    unvisited = _unvisited(model, S)
    seen = np.ones(S, dtype=bool)
    seen[unvisited] = False
    for s in unvisited:  # their intervals only measure the extrapolation, not the data
        ax.vspan(s - 0.5, s + 0.5, label="no observed choice: not identified (hollow)", cls="unvisited",
                 data={"state": int(s)})
    for i, k in enumerate(shown):
        shift = (i - (shown.size - 1) / 2) * 0.8 / max(shown.size, 1)
        color = PALETTE[i % len(PALETTE)]
        ax.vlines(x + shift, lo[:, k], hi[:, k], color)  # percentile: need not contain the estimate
        ax.line(x[seen] + shift, table[seen, k], color, width=0, marker="o", size=2.5,
                label=str(model.encoder_.labels[k]))
        if unvisited.size:
            ax.line(x[~seen] + shift, table[~seen, k], color, width=0, marker="o", size=2.5, hollow=True)
    ax.hline(0.0)
    return Figure([ax], width=min(940, max(500, 18 * S + 300)), panel_height=340, legend="right",
                  legend_title="action")


def _fig_partial_dependence(ctx):
    model = ctx.model
    states = model.training_data_.states
    names = list(ctx.state_names) or [f"s{j}" for j in range(states.shape[1])]
    d = min(states.shape[1], MAX_PD_COLUMNS)
    shown = shown_actions(_cell_visits(model), limit=TOP_SERIES)
    medians = np.median(states, axis=0)
    panels = []
    for j in range(d):
        lo, hi = np.quantile(states[:, j], [0.01, 0.99])
        distinct = np.unique(states[:, j])
        grid_values = distinct if distinct.size <= 30 else np.linspace(lo, hi, 50)
        grid = np.tile(medians, (grid_values.size, 1))
        grid[:, j] = grid_values
        reward = model.reward(grid)
        ax = Axes("", names[j], "reward")
        for i, k in enumerate(shown):
            ax.line(grid_values, reward[:, k], PALETTE[i % len(PALETTE)], label=str(model.encoder_.labels[k]),
                    marker="o" if grid_values.size <= 30 else None, size=2)
        panels.append(ax)
    ncols = min(d, 3)
    return Figure(panels, ncols=ncols, width=min(940, 300 * ncols + 160), panel_height=260, legend="right",
                  legend_title="action",
                  title="partial dependence: reward vs each state column (others at their medians)")


def _fig_coverage(ctx, pieces=None):
    ratios, rows = _coverage_ratios(ctx.model, (pieces or pieces_of(ctx)).cells)
    logs = np.log10(ratios)
    ax = Axes("coverage of the normalization by the behaviour",
              "log10 max_a mu(a|s) / pi_hat(a|s) at each logged state", "transitions")
    if np.ptp(logs) < 1e-9:
        ax.bars([logs[0]], [rows.sum()], width=0.1)
    else:
        ax.hist(*histogram(logs, 40, weights=rows))
    ax.vline(float(np.log10(ratios.max())), RED, label=f"max mu/pi_hat = {ratios.max():.3g}")
    return Figure([ax], width=500, panel_height=300)


def pieces_of(ctx) -> SimpleNamespace:
    """What several figures and tables need, computed once: ``cells`` and ``held_out``
    (``_policy_cells``), ``anchors`` (``_anchor_codes``) and ``shown``, the actions of the
    per-action figures and tables (:func:`shown_actions`: the most visited, the anchor among them)."""
    model = ctx.model
    cells = _policy_cells(model)
    held_out = _policy_cells(model, held_out=True) if getattr(model, "policy_folds_", None) is not None else cells
    anchors = _anchor_codes(model, cells)
    return SimpleNamespace(cells=cells, held_out=held_out, anchors=anchors,
                           shown=shown_actions(_cell_visits(model), anchors))


def report_figures(ctx: ReportContext, pieces=None) -> list[ReportFigure]:
    """Every figure of the report, in order (``pieces``: :func:`pieces_of`, computed if None)."""
    if ctx.continuous:
        return continuous_figures(ctx)
    model = ctx.model
    pieces = pieces or pieces_of(ctx)
    cells = pieces.cells
    K = model.n_actions_
    few = _shown_note(min(K, TOP_ACTIONS), K, "model.joblib (diagnostics_.action_counts)")
    figs = [ReportFigure("data", "Transitions per action." + few, _fig_actions(ctx, pieces)),
            ReportFigure("policy", "Calibration of the stage-1 policy: within each bin of predicted "
                                   "probability, the share of (row, action) pairs where the action was taken.",
                         _fig_calibration(ctx, pieces))]
    if model.diagnostics_.solver == "fqe":
        figs.append(ReportFigure("q", "Sample Bellman residual (RMS) and the largest change of the Bellman targets "
                                      "per fitted-Q-evaluation iteration. Convergence is the target change going to "
                                      f"zero; {RESIDUAL_FLOOR_NOTE}.", fig_convergence(ctx)))
    cells_note = _shown_note(min(K, TOP_ACTIONS), K)
    series_note = _shown_note(min(K, TOP_SERIES), K)
    if ctx.tabular:
        figs.append(ReportFigure("reward", "Recovered (normalized) reward by state and action." + cells_note,
                                 _fig_heatmap(ctx, pieces)))
        if getattr(model, "transition_counts_", None) is not None:
            figs.append(ReportFigure("transitions", "Observed transitions per (state, action) cell: the estimated "
                                                    "kernel P(.|s, a) of a cell is the frequency of these moves "
                                                    "(rewards.csv: transitions_<action>)." + cells_note,
                                     _fig_transition_support(ctx, pieces)))
        if ctx.bootstrap is not None:
            figs.append(ReportFigure("reward", "Point estimates with percentile bootstrap intervals (whole episodes "
                                               "resampled)." + series_note, _fig_intervals(ctx)))
    else:
        figs.append(ReportFigure("reward", "Partial dependence of the reward on each state column, one line per "
                                           "action, the other columns held at their medians." + series_note,
                                 _fig_partial_dependence(ctx)))
    sample = "" if cells.sampled is None else f" (a random {cells.sampled:,} of the {cells.n_rows:,} rows)"
    figs.append(ReportFigure("coverage", "Distribution over the logged states of max_a mu(a|s)/pi_hat(a|s), the "
                                         "quantity whose maximum (the coverage constant) enters the error bounds"
                                         f"{sample}.", _fig_coverage(ctx, pieces)))
    return figs

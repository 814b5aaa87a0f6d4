r"""A counterfactual's answer in one compact table (:meth:`CounterfactualResult.summary`), and its
intervals (:meth:`CounterfactualResult.conf_int`).

One row per statistic (action rates and the mean state under each state distribution, the value
from the initial state) and, below them, the welfare (expected discounted utility at the
welfare distribution, and in money with a money parameter; each also per period): baseline,
counterfactual with its interval, change with its interval. The header says what changed, the
route, whether it is identified, the intervals' kind and the share of the counterfactual's
occupancy on thinly observed states. Every line fits 100 columns; the 18-column
``to_frame()`` stays for files.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..evaluation._tables import SummaryLayout, TableSummary, format_number

__all__ = ["CounterfactualSummary"]

_PARTS = ("baseline", "counterfactual", "change")


@dataclass(frozen=True, repr=False)
class CounterfactualSummary(TableSummary):
    """The compact table of a counterfactual: ``print`` it, ``as_text()``, ``as_html()``,
    ``as_latex()``, ``tables`` (``[header, table]``) or ``to_frame()`` (the table).

    Attributes
    ----------
    header : list of (str, str)
        What changed, the route, identification, the intervals' kind, thin support, welfare.
    table : DataFrame
        Index: the statistic; columns ``baseline``, ``counterfactual``, ``change`` and, with
        intervals, ``{counterfactual,change}_{lower,upper}``.
    level : float
    notes : list of str
    title : str
    """

    header: list
    table: object
    level: float
    notes: list
    title: str = "Counterfactual results"

    @property
    def tables(self) -> list:
        import pandas as pd

        return [pd.DataFrame(self.header, columns=["item", "value"]).set_index("item"), self.table]

    def to_frame(self):
        """The table (a copy)."""
        return self.table.copy()

    def layout(self) -> SummaryLayout:
        t = self.table
        lo, hi = f"[{0.5 - self.level / 2:.3g}", f"{0.5 + self.level / 2:.3g}]"
        columns = [("baseline", 11), ("counterfactual", 15)]
        keys = ["baseline", "counterfactual"]
        with_ci = "change_lower" in t.columns
        if with_ci:
            columns += [(lo, 10), (hi, 9)]
            keys += ["counterfactual_lower", "counterfactual_upper"]
        columns.append(("change", 11))
        keys.append("change")
        if with_ci:
            columns += [(lo, 10), (hi, 9)]
            keys += ["change_lower", "change_upper"]
        rows = [(str(name), [format_number(row[k], w) for k, (_, w) in zip(keys, columns)]) for name, row in t.iterrows()]
        return SummaryLayout(self.title, list(self.header), columns, rows, list(self.notes), width=78, name_width=20)


def _label(key) -> str:
    return f"{key[0]} {key[1]}"


def _statistic_bounds(result, kind, level):
    """``{part: (low, high)}`` of the summary statistics, ``part`` in baseline, counterfactual,
    change; bootstrap percentiles at ``level``, the delta method at the result's level."""
    m = len(result.summary_keys())
    if kind == "bootstrap":
        reps = {"baseline": result.bootstrap[:, 0], "counterfactual": result.bootstrap[:, 1],
                "change": result.bootstrap[:, 1] - result.bootstrap[:, 0]}
        alpha = (1 - level) / 2
        return {part: tuple(np.nanquantile(r, [alpha, 1 - alpha], axis=0)) for part, r in reps.items()}
    d = result.delta
    return {part: (d.low[i * m:(i + 1) * m], d.high[i * m:(i + 1) * m]) for i, part in enumerate(_PARTS)}


def _welfare_rows(welfare, kind, level):
    """``[(label, {column: value})]`` of the welfare rows."""
    rows = []
    bounds = welfare.intervals(kind, level) if kind in welfare.kinds() else {}
    for _, r in welfare.to_frame().iterrows():
        label = f"welfare ({r.unit})" if r.horizon == "lump sum" else f"  per period ({r.unit})"
        row = {"baseline": r.baseline, "counterfactual": r.counterfactual, "change": r.change}
        if bounds:
            _, low, high = bounds[(r.unit, r.horizon)]
            row.update(counterfactual_lower=low[1], counterfactual_upper=high[1], change_lower=low[2],
                       change_upper=high[2], baseline_lower=low[0], baseline_upper=high[0])
        rows.append((label, row))
    return rows


def compact_frame(result, level=None, kind=None):
    """The compact table of ``result`` (see :class:`CounterfactualSummary`): intervals of ``kind``
    (default the result's ``interval_kind``) at ``level`` (default the result's; another level
    only for bootstrap intervals)."""
    import pandas as pd

    kind = result.interval_kind if kind is None else kind
    level = result.level if level is None else float(level)
    if kind == "delta" and abs(level - result.level) > 1e-12:
        raise ValueError(f"the delta-method intervals were computed at level {result.level:g}; pass level= to "
                         f"counterfactual() for another (bootstrap intervals can be read at any level)")
    keys = result.summary_keys()
    b = result.baseline.summary(result.action_labels, result.state_values)
    c = result.counterfactual.summary(result.action_labels, result.state_values)
    table = pd.DataFrame({"baseline": [b[k] for k in keys], "counterfactual": [c[k] for k in keys]},
                         index=pd.Index([_label(k) for k in keys], name="statistic"))
    table["change"] = table["counterfactual"] - table["baseline"]
    if kind != "none":
        for part, (low, high) in _statistic_bounds(result, kind, level).items():
            table[f"{part}_lower"], table[f"{part}_upper"] = low, high
        corner = table.index.isin(corner_rates(result))  # a zero-width interval says nothing there
        for part in ("counterfactual", "change"):
            table.loc[corner, [f"{part}_lower", f"{part}_upper"]] = np.nan
    welfare = getattr(result, "welfare", None)
    if welfare is not None:
        extra = pd.DataFrame([row for _, row in _welfare_rows(welfare, kind, level)],
                             index=pd.Index([label for label, _ in _welfare_rows(welfare, kind, level)]))
        table = pd.concat([table, extra[[c for c in table.columns if c in extra.columns]]])
        table.index.name = "statistic"
    if kind != "none" and corner_rates(result):
        _drop_point_intervals(table)
    return table


def _drop_point_intervals(table) -> None:
    """At a corner, every interval that collapsed to a point (the counterfactual's mean state or
    welfare, fixed by the corner policy: width at most 1e-9 of the value) is dropped, as the
    rates' are: a zero-width interval claims a certainty the model only has at its corner."""
    for part in ("counterfactual", "change"):
        low, high = f"{part}_lower", f"{part}_upper"
        if low not in table:
            continue
        width = (table[high] - table[low]).abs()
        point = width <= 1e-9 * np.maximum(1.0, table[part].abs())
        table.loc[point, [low, high]] = np.nan


#: A counterfactual rate this close to 0 or 1 is at a corner of the model.
CORNER = 1e-6
#: The two routes disagree (a warning when the nonparametric route answers, and the summary's note)
#: when their rates or mean states differ by more than this (relative).
ROUTE_GAP_WARN = 0.10


def corner_rates(result) -> list:
    """The compact table's rows (``"stationary rate[a]"``...) whose counterfactual choice rate is
    within :data:`CORNER` of 0 or 1: the change pushed the model to a corner, where the delta
    method's interval collapses to a point."""
    c = result.counterfactual.summary(result.action_labels, result.state_values)
    return [_label(k) for k, v in c.items() if str(k[1]).startswith("rate[") and min(v, 1 - v) < CORNER]


def counterfactual_intervals(result, level=None, kind=None):
    """:meth:`CounterfactualResult.conf_int`: per row of the compact table, ``{baseline,
    counterfactual,change}_{lower,upper}`` and ``kind``."""
    kind = result.interval_kind if kind is None else kind
    if kind == "none":
        raise ValueError("this counterfactual has no intervals: a structural fit gives delta-method ones, n_boot=B "
                         "bootstrap ones")
    table = compact_frame(result, level, kind)
    cols = [f"{p}_{e}" for p in _PARTS for e in ("lower", "upper")]
    frame = table[cols].copy()
    frame["kind"] = "delta method" if kind == "delta" else "bootstrap percentile"
    return frame


def _intervals(result, kind, level) -> str:
    if kind == "delta":
        cov = (result.se_kind or "the fit's").split(":")[0]
        return (f"delta method ({level:.0%}) from the parameters' {cov} covariance, conditional on the kernel "
                f"(rates and the mean state on the logit scale of their range)")
    return result._interval_label(kind, level) if kind != "none" else "none"


def _header(result, kind, level) -> list:
    what = result.parameter_change if result.parameter_change != "none" else ", ".join(result.changes) or "none"
    route = ("structural: the estimated flow utility x @ theta" if result.route == "structural" else
             f"nonparametric: the recovered reward table ({result.normalization})")
    ident = ("by the model's functional form" if result.route == "structural" else
             "invariant to the normalization" if result.invariant else "NOT invariant to the normalization")
    header = [("Change", what), ("Route", route), ("Identified", ident), ("Intervals", _intervals(result, kind, level))]
    if result.support is not None:
        shares = ", ".join(f"{name} {v[0]:.1%}" for name, v in result.support.counterfactual.items())
        header.append(("Thin support", f"{shares} of the counterfactual's occupancy on states seen < "
                                       f"{result.support.min_visits} times"))
    welfare = getattr(result, "welfare", None)
    if welfare is not None:
        where = "baseline's stationary distribution" if welfare.distribution == "stationary" else \
            "initial distribution"
        money = "" if welfare.money_parameter is None else \
            f"; 1 {welfare.money_parameter} = {welfare.money_value:.4g} utility"
        header.append(("Welfare", f"log-sum at the {where}{money}"))
    return header


def _route_gap_note(result, other: str) -> str:
    """The other route's answer where it differs most from this one, and what that means."""
    c = result.counterfactual.summary(result.action_labels, result.state_values)
    o = result.alternative["counterfactual"]
    keys = [k for k in c if k in o and k[1] != "value"]
    if not keys:
        return f"the {other} route's answer is in to_frame() ({other}_counterfactual)"
    worst = max(keys, key=lambda k: abs(c[k] - o[k]) / max(abs(o[k]), 1e-12))
    name = f"{worst[0]} {worst[1]}" if isinstance(worst, tuple) else str(worst)
    if not result.route_gap() > ROUTE_GAP_WARN:
        return (f"the {other} route agrees (largest relative gap {result.route_gap():.3g}, at {name}: "
                f"{o[worst]:.4g} against {c[worst]:.4g} here; to_frame(): {other}_counterfactual)")
    return (f"the {other} route puts {name} at {o[worst]:.4g} against {c[worst]:.4g} here (largest relative gap, "
            f"route_gap {result.route_gap():.3g}): the reward table and the structural model disagree where the "
            f"counterfactual goes; this answer rests on the model's functional form there (see Thin support; "
            f"to_frame(): {other}_counterfactual)")


def _notes(result) -> list:
    notes = []
    corners = corner_rates(result)
    if corners:
        notes.append(f"the change pushes the model to a corner: {', '.join(corners)} within {CORNER:g} of 0 or 1; "
                     f"no interval is shown there, nor for any other statistic whose interval collapses to a point "
                     f"(the delta method's, at the corner), and the answer rests on the model's form far from the data")
    if result.route == "nonparametric" and not result.invariant:
        notes.append(f"not identified under every normalization: {result.rule}")
    if result.alternative is not None:
        other = result.alternative["route"]
        notes.append(_route_gap_note(result, other))
    welfare = getattr(result, "welfare", None)
    if welfare is not None:
        notes.append("welfare change: positive a gain, negative a loss" + (
            f" (in {welfare.money_parameter} units: the compensating variation, paid once at the start; per period: "
            "the same paid every period)" if welfare.money_parameter is not None else ""))
        if result.route == "structural":
            notes.append("welfare is that of the flow utility as written (x @ theta): features that add the same "
                         "utility to every action choose alike but move it; write the money where it is paid")
        if "gamma" in result.changes:
            notes.append("the discount changed: the welfare criterion itself changed (levels leave out Euler's "
                         "constant over 1 - gamma)")
    return notes


def counterfactual_summary(result, level=None, kind=None) -> CounterfactualSummary:
    """:meth:`CounterfactualResult.summary`."""
    kind = result.interval_kind if kind is None else kind
    level = result.level if level is None else float(level)
    return CounterfactualSummary(_header(result, kind, level), compact_frame(result, level, kind), level, _notes(result))

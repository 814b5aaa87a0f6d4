"""Tables and figures rebuilt from a results folder (``results.csv`` + ``config.json``).

``write_report(out)`` reads only files -- never a run's memory -- and writes
``out/results.md`` (the paper's layouts, every entry ``mean ± 95% CI`` over seeds with
``1.96 sd / sqrt(n)``) and PNG figures next to it:

* ``"matched"`` (Experiment 1): per setting, rows = methods; anchor count (fraction), MSE,
  correlation, time. Figure ``<name>_reward.png``: MSE and correlation bars with CI per setting.
* ``"methods"`` (Experiment 2): rows = methods; MSE, correlation, NLL, time. Figure
  ``<name>_methods.png``: per-method MSE and correlation with CI.
* ``"actions"`` (many actions): rows = ``|A|`` x method; anchor count, MSE, correlation, time.
  Figure ``<name>_actions.png``: MSE vs ``|A|`` with CI bands per method, anchor count on a
  second axis.

The layout, method order and notes come from ``config.json`` when present (else from the
registry by experiment name, else the ``"methods"`` layout in order of appearance).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..estimator._manifest import atomic_write_bytes, read_manifest, verify_folder
from ..evaluation._metrics import SeedSummary, summarize
from ._configs import EXPERIMENTS, ExperimentConfig
from ._folder import update_folder
from ._runner import CONFIG_FILE, RESULTS_FILE

__all__ = ["write_report", "load_results", "summary_table", "REPORT_FILE"]

REPORT_FILE = "results.md"
_METRICS = ("reward_mse", "reward_corr", "policy_nll", "fit_time", "anchor_count", "anchor_fraction")


@dataclass(frozen=True)
class _Layout:
    name: str
    methods: list
    notes: tuple
    description: str
    layout: str


def load_results(out) -> pd.DataFrame:
    """``out/results.csv`` as a DataFrame (one row per seed x setting x method)."""
    path = Path(out) / RESULTS_FILE
    if not path.exists():
        raise FileNotFoundError(f"no {RESULTS_FILE} in {out}; run `genpqr experiment NAME --out {out}` first")
    try:
        df = pd.read_csv(path, keep_default_na=True)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {' '.join(str(exc).split())} (an empty or damaged results file; "
                         f"rerun `genpqr experiment NAME --out {out}`)") from None
    if df.empty:
        raise ValueError(f"{path} has no rows")
    missing = [c for c in ("experiment", "setting", "method", "seed") if c not in df.columns]
    if missing:
        hint = (" (a `genpqr experiment continuous` folder: its table is already in results.md)"
                if {"problem", "normalization"} <= set(df.columns) else "")
        raise ValueError(f"{path} lacks the column(s) {missing} of a `genpqr experiment` results file{hint}")
    return df


def _layout(out: Path, experiment: str, df: pd.DataFrame) -> _Layout:
    seen = list(dict.fromkeys(df["method"]))
    path = out / CONFIG_FILE
    config = None
    if path.exists():
        stored = json.loads(path.read_text()).get("config", {})
        if stored.get("name") == experiment:
            config = ExperimentConfig.from_dict(stored)
    if config is None:
        base = experiment[:-5] if experiment.endswith("-tiny") else experiment
        config = EXPERIMENTS.get(base)
    if config is None:
        return _Layout(experiment, seen, (), experiment, "methods")
    order = [m for m in config.methods if m in seen] + [m for m in seen if m not in config.methods]
    return _Layout(experiment, order, config.notes, config.description or experiment, config.layout)


def summary_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per (setting, method): a ``genpqr.evaluation._metrics.SeedSummary`` per metric and the seed count."""
    rows = []
    for (setting, method), group in df.groupby(["setting", "method"], sort=False):
        row = {"setting": setting, "method": method, "n_seeds": int(group["seed"].nunique()),
               "n_train": int(group["n_train"].iloc[0]), "anchor_shift": float(group["anchor_shift"].iloc[0]),
               "n_actions": int(group["n_actions"].iloc[0]), "n_test": int(group["n_test"].iloc[0])}
        for m in _METRICS:
            row[m] = summarize(pd.to_numeric(group[m], errors="coerce").to_numpy(dtype=float))
        rows.append(row)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------ Markdown
def _count(s: SeedSummary, frac: SeedSummary) -> str:
    if s.n == 0:
        return "n/a"
    return f"{s.mean:.0f} ({frac.mean:.2f})"


_COLUMNS = {
    "matched": [("Anchor ct. (frac.)", lambda r: _count(r["anchor_count"], r["anchor_fraction"])),
                ("MSE ↓", lambda r: r["reward_mse"].format(2)), ("Corr. ↑", lambda r: r["reward_corr"].format(2)),
                ("Time (s) ↓", lambda r: r["fit_time"].format(2))],
    "methods": [("MSE ↓", lambda r: r["reward_mse"].format(2)), ("Corr. ↑", lambda r: r["reward_corr"].format(2)),
                ("NLL ↓", lambda r: r["policy_nll"].format(3)), ("Time (s) ↓", lambda r: r["fit_time"].format(2))],
    "actions": [("Anchor ct. (frac.)", lambda r: _count(r["anchor_count"], r["anchor_fraction"])),
                ("MSE ↓", lambda r: r["reward_mse"].format(2)), ("Corr. ↑", lambda r: r["reward_corr"].format(2)),
                ("Time (s) ↓", lambda r: r["fit_time"].format(2))],
}


def _setting_order(df: pd.DataFrame, layout: str) -> list:
    settings = df.drop_duplicates("setting")[["setting", "n_train", "anchor_shift", "n_actions"]]
    if layout == "actions":
        settings = settings.sort_values(["n_actions", "n_train"], kind="stable")
    return list(settings["setting"])


def _setting_label(row) -> str:
    return f"{row['n_train']} / shift {row['anchor_shift']:g}" + (f" / K={row['n_actions']}"
                                                                  if row["n_actions"] != 5 else "")


def _markdown(layout: _Layout, summary: pd.DataFrame, df: pd.DataFrame) -> str:
    seeds = sorted(df["seed"].unique())
    lines = [f"## {layout.description}", "",
             f"Experiment `{layout.name}`; entries are mean ± 95% CI (1.96 sd / sqrt(n)) over seeds "
             f"({len(seeds)} seed(s): {_seed_range(seeds)}); time is the wall-clock time of the method's fit "
             "(data simulation excluded), in seconds.", ""]
    lines += [f"- {note}" for note in layout.notes] + ([""] if layout.notes else [])
    cols = _COLUMNS[layout.layout]
    settings = _setting_order(df, layout.layout)
    first = {"matched": "Setting", "methods": "Setting", "actions": "|A|"}[layout.layout]
    with_first = layout.layout != "methods" or len(settings) > 1
    if not with_first:
        r0 = summary.iloc[0]
        lines += [f"Setting: {r0['n_train']} training trajectories, anchor shift {r0['anchor_shift']:g}, "
                  f"{r0['n_actions']} actions, {r0['n_test']} test trajectories.", ""]
    header = ([first] if with_first else []) + ["Method", *[c for c, _ in cols], "Seeds"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for setting in settings:
        block = summary[summary["setting"] == setting]
        for method in layout.methods:
            hit = block[block["method"] == method]
            if hit.empty:
                continue
            r = hit.iloc[0]
            label = str(r["n_actions"]) if layout.layout == "actions" else _setting_label(r)
            cells = ([label] if with_first else []) + [method, *[fn(r) for _, fn in cols], str(r["n_seeds"])]
            lines.append("| " + " | ".join(cells) + " |")
    warned = df[df["warnings"].map(lambda w: isinstance(w, str) and len(w) > 0)]
    if len(warned):
        lines += ["", f"{len(warned)} of {len(df)} fits raised warnings (see the `warnings` column of "
                      f"`{RESULTS_FILE}`)."]
    return "\n".join(lines) + "\n"


def _seed_range(seeds) -> str:
    seeds = [int(s) for s in seeds]
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}..{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
    return ", ".join(map(str, seeds))


# ------------------------------------------------------------------------------ figures
def _err(s: SeedSummary) -> float:
    return s.ci if np.isfinite(s.ci) else 0.0


def _plot_matched(layout, summary, df, path):
    from matplotlib.figure import Figure

    settings = _setting_order(df, "matched")
    labels = [_setting_label(summary[summary["setting"] == s].iloc[0]) for s in settings]
    fig = Figure(figsize=(11, 4))
    axes = fig.subplots(1, 2)
    width = 0.8 / max(len(layout.methods), 1)
    x = np.arange(len(settings))
    for ax, metric, title in zip(axes, ("reward_mse", "reward_corr"), ("Reward MSE (lower is better)",
                                                                       "Reward correlation (higher is better)")):
        for j, method in enumerate(layout.methods):
            vals = [_cell(summary, s, method, metric) for s in settings]
            ax.bar(x + (j - (len(layout.methods) - 1) / 2) * width, [v.mean for v in vals], width,
                   yerr=[_err(v) for v in vals], capsize=3, label=method)
        ax.set_xticks(x, labels)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{layout.name}: mean ± 95% CI over seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=110, format="png")


def _plot_methods(layout, summary, df, path):
    from matplotlib.figure import Figure

    setting = _setting_order(df, "methods")[0]
    methods = [m for m in layout.methods if not summary[(summary["setting"] == setting)
                                                        & (summary["method"] == m)].empty]
    fig = Figure(figsize=(11, 0.5 * len(methods) + 2))
    axes = fig.subplots(1, 2)
    y = np.arange(len(methods))[::-1]
    colors = [f"C{i}" for i in range(len(methods))]
    for ax, metric, title in zip(axes, ("reward_mse", "reward_corr"), ("Reward MSE (lower is better)",
                                                                       "Reward correlation (higher is better)")):
        vals = [_cell(summary, setting, m, metric) for m in methods]
        bars = ax.barh(y, [v.mean for v in vals], xerr=[_err(v) for v in vals], capsize=3, color=colors)
        for bar, method in zip(bars, methods):
            if "oracle" in method.lower():  # a supervised reference, not an IRL method
                bar.set_hatch("//")
                bar.set_alpha(0.6)
        ax.set_yticks(y, methods if ax is axes[0] else [""] * len(methods))
        ax.set_title(title)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(f"{layout.name} ({_setting_label(summary[summary['setting'] == setting].iloc[0])}): "
                 "mean ± 95% CI over seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=110, format="png")


def _plot_actions(layout, summary, df, path):
    from matplotlib.figure import Figure

    settings = _setting_order(df, "actions")
    ks = np.array([int(summary[summary["setting"] == s].iloc[0]["n_actions"]) for s in settings])
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    for method in layout.methods:
        vals = [_cell(summary, s, method, "reward_mse") for s in settings]
        m = np.array([v.mean for v in vals])
        e = np.array([_err(v) for v in vals])
        ok = np.isfinite(m)
        if not ok.any():
            continue
        (line,) = ax.plot(ks[ok], m[ok], marker="o", label=f"{method} MSE")
        ax.fill_between(ks[ok], (m - e)[ok], (m + e)[ok], color=line.get_color(), alpha=0.2)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_xlabel("|A| (number of actions)")
    ax.set_ylabel("reward MSE (mean ± 95% CI)")
    ax.grid(alpha=0.3)
    ax2 = ax.twinx()
    counts = [df[df["setting"] == s].drop_duplicates("seed")["anchor_count"].mean() for s in settings]
    ax2.plot(ks, counts, color="gray", linestyle="--", marker="s", label="anchor count")
    ax2.set_ylabel("anchor count (training rows with a = 0)")
    handles = ax.get_legend_handles_labels()
    handles2 = ax2.get_legend_handles_labels()
    ax.legend(handles[0] + handles2[0], handles[1] + handles2[1], fontsize=8)
    ax.set_title(f"{layout.name}: reward MSE vs |A| (fixed sample size)")
    fig.tight_layout()
    fig.savefig(path, dpi=110, format="png")


def _cell(summary, setting, method, metric) -> SeedSummary:
    hit = summary[(summary["setting"] == setting) & (summary["method"] == method)]
    return hit.iloc[0][metric] if len(hit) else SeedSummary(float("nan"), float("nan"), 0)


_FIGURES = {"matched": ("reward", _plot_matched), "methods": ("methods", _plot_methods),
            "actions": ("actions", _plot_actions)}


# ------------------------------------------------------------------------------ entry point
def write_report(out) -> list[Path]:
    """Write ``out/results.md`` and the figures from ``out/results.csv``; returns the paths.

    Each file is written to a temporary name and renamed. In a genpqr experiment folder (one
    with ``manifest.json``) the folder is checked first -- an
    :class:`~genpqr.exceptions.IntegrityError` names a file that does not match the manifest --
    and the files written are added to its manifest (``genpqr.experiments._folder.update_folder``).
    """
    out = Path(out)
    manifest = read_manifest(out)
    if manifest is not None and (out / RESULTS_FILE).exists():
        verify_folder(out)
    df = load_results(out)
    sections, figures = [], {}
    for experiment, part in df.groupby("experiment", sort=False):
        layout = _layout(out, str(experiment), part)
        summary = summary_table(part)
        sections.append(_markdown(layout, summary, part))
        suffix, plot = _FIGURES[layout.layout]
        name, buffer = f"{experiment}_{suffix}.png", io.BytesIO()
        plot(layout, summary, part, buffer)
        figures[name] = buffer.getvalue()
        sections[-1] += f"\n![{experiment}]({name})\n"
    contents = {REPORT_FILE: ("# Results\n\n" + "\n".join(sections)).encode("utf-8"), **figures}
    if manifest is not None:
        update_folder(out, contents, kind=manifest.get("kind"))
    else:
        for name, data in contents.items():
            atomic_write_bytes(out / name, data)
    return [out / name for name in contents]

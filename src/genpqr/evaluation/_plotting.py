"""Figures: recovered vs true reward, reward tables, FQE convergence. Each function draws
on a given matplotlib ``ax`` (or a new one) and returns it. Every colour bar is labelled and
legends sit outside the axes (below or to the right), so they never cover data."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_reward_recovery", "plot_reward_table", "plot_bellman_residuals", "legend_outside", "plain_text",
           "RESIDUAL_FLOOR_NOTE"]

#: Why the sample Bellman residual does not fall to zero (in the caption of the ``genpqr fit`` report's
#: convergence figure).
RESIDUAL_FLOOR_NOTE = ("the sample residual compares Q(s, a) with one sampled next state, so it levels off above "
                       "zero, at the noise of that sample (plus the Q model's approximation error), even when FQE "
                       "has converged")


def plain_text(value) -> str:
    """``str(value)`` shown by matplotlib as written: every ``$`` escaped, so a data label or a
    column name such as ``$\\frac$`` or ``cost ($)`` is never parsed as mathtext (which fails
    on it, or typesets it). Use it wherever a name or label from the data enters a figure
    (tick labels, legends, axis labels, titles)."""
    return str(value).replace("$", r"\$")


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(4.5, 4), layout="constrained")
    return ax


def legend_outside(ax, where: str = "below", **kwargs):
    """An axes legend outside the plotting area: ``"below"`` (centred under the tick labels
    and the x label: a fixed 0.55 inch under the axes, whatever the figure's size) or
    ``"right"``. With a constrained layout the figure makes room for it."""
    from matplotlib.transforms import ScaledTranslation

    kwargs.setdefault("fontsize", 8)
    if where == "right":
        return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kwargs)
    kwargs.setdefault("ncols", 2)
    below = ax.transAxes + ScaledTranslation(0.0, -0.55, ax.figure.dpi_scale_trans)
    return ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=below, borderaxespad=0.0,
                     **kwargs)


def plot_reward_recovery(true_reward, estimated_reward, ax=None, label=None, colorbar_label=None, **scatter_kw):
    """Scatter of estimated vs true reward with the identity line; MSE and correlation in the
    legend title. Arrays of any (equal) shape. ``c=`` colours the points (one value per
    point); ``colorbar_label`` then adds a labelled colour bar."""
    ax = _axes(ax)
    t, e = np.ravel(true_reward), np.ravel(estimated_reward)
    mse = float(np.mean((t - e) ** 2))
    corr = float(np.corrcoef(t, e)[0, 1]) if t.size > 1 and np.std(t) > 0 and np.std(e) > 0 else np.nan
    scatter_kw.setdefault("s", 12)
    scatter_kw.setdefault("alpha", 0.6)
    points = ax.scatter(t, e, label=label or "(state, action) pairs", **scatter_kw)
    lo, hi = float(min(t.min(), e.min())), float(max(t.max(), e.max()))
    ax.plot([lo, hi], [lo, hi], color="black", lw=1, ls="--", label="identity (exact recovery)")
    ax.set_xlabel("true normalized reward")
    ax.set_ylabel("recovered reward")
    if colorbar_label is not None and "c" in scatter_kw:
        ax.figure.colorbar(points, ax=ax, label=colorbar_label)
    legend_outside(ax, title=f"MSE {mse:.3g}, corr {corr:.3f}", title_fontsize=8)
    return ax


def plot_reward_table(reward, action_labels=None, ax=None, title=None, vmin=None, vmax=None,
                      colorbar_label="reward r(s, a)"):
    """Heat map of a tabular reward (S, K): states down, actions across, with a labelled
    colour bar."""
    ax = _axes(ax)
    reward = np.asarray(reward)
    im = ax.imshow(reward, aspect="auto", cmap="coolwarm", vmin=vmin, vmax=vmax, interpolation="nearest")
    ax.set_xlabel("action")
    ax.set_ylabel("state")
    labels = list(action_labels) if action_labels is not None else list(range(reward.shape[1]))
    ax.set_xticks(range(len(labels)), [plain_text(a) for a in labels])
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label=colorbar_label)
    if title:
        ax.set_title(title)
    return ax


def plot_bellman_residuals(diagnostics, ax=None, floor=None):
    """Per-iteration FQE diagnostics (log scale): sample Bellman residual and target change.

    The max target change measures convergence (it goes to zero at the fixed point). The
    sample Bellman residual (RMS of ``Q(s_i, a_i) - u_i + g_i - gamma mu Q(s'_i)``) does not:
    each target uses one sampled next state, so at the fixed point it levels off at the
    noise of that sample. ``floor`` (optional): that level, drawn as a dotted line.
    """
    ax = _axes(ax)
    res = np.asarray(diagnostics.bellman_residuals)
    change = np.asarray(diagnostics.target_changes)
    if change.size:
        ax.semilogy(np.arange(1, change.size + 1), np.maximum(change, 1e-300), label="max target change (convergence)")
    if res.size:
        ax.semilogy(np.arange(1, res.size + 1), np.maximum(res, 1e-300),
                    label="sample Bellman residual (RMS; floors at next-state noise)")
    if floor is not None and np.isfinite(floor) and floor > 0:
        ax.axhline(floor, color="grey", ls=":", lw=1.2, label=f"next-state sampling noise = {floor:.3g}")
    ax.set_xlabel("FQE iteration")
    ax.set_ylabel("residual / change")
    legend_outside(ax, ncols=1)
    return ax

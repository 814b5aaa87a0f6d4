"""Figures: recovered vs true reward, reward tables, FQE convergence. Each function draws
on a given matplotlib ``ax`` (or a new one) and returns it."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_reward_recovery", "plot_reward_table", "plot_bellman_residuals"]


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(4.5, 4))
    return ax


def plot_reward_recovery(true_reward, estimated_reward, ax=None, label=None, **scatter_kw):
    """Scatter of estimated vs true reward with the identity line; MSE and correlation in
    the legend. Arrays of any (equal) shape."""
    ax = _axes(ax)
    t, e = np.ravel(true_reward), np.ravel(estimated_reward)
    mse = float(np.mean((t - e) ** 2))
    corr = float(np.corrcoef(t, e)[0, 1]) if t.size > 1 and np.std(t) > 0 and np.std(e) > 0 else np.nan
    scatter_kw.setdefault("s", 12)
    scatter_kw.setdefault("alpha", 0.6)
    ax.scatter(t, e, label=f"{label + ': ' if label else ''}MSE {mse:.3g}, corr {corr:.3f}", **scatter_kw)
    lo, hi = float(min(t.min(), e.min())), float(max(t.max(), e.max()))
    ax.plot([lo, hi], [lo, hi], color="black", lw=1, ls="--")
    ax.set_xlabel("true normalized reward")
    ax.set_ylabel("recovered reward")
    ax.legend(loc="upper left", fontsize=8)
    return ax


def plot_reward_table(reward, action_labels=None, ax=None, title=None, vmin=None, vmax=None):
    """Heat map of a tabular reward (S, K): states down, actions across."""
    ax = _axes(ax)
    reward = np.asarray(reward)
    im = ax.imshow(reward, aspect="auto", cmap="coolwarm", vmin=vmin, vmax=vmax, interpolation="nearest")
    ax.set_xlabel("action")
    ax.set_ylabel("state")
    labels = list(action_labels) if action_labels is not None else list(range(reward.shape[1]))
    ax.set_xticks(range(len(labels)), [str(a) for a in labels])
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    if title:
        ax.set_title(title)
    return ax


def plot_bellman_residuals(diagnostics, ax=None):
    """Per-iteration FQE diagnostics (log scale): sample Bellman residual and target change."""
    ax = _axes(ax)
    res = np.asarray(diagnostics.bellman_residuals)
    change = np.asarray(diagnostics.target_changes)
    if change.size:
        ax.semilogy(np.arange(1, change.size + 1), np.maximum(change, 1e-300), label="max target change")
    if res.size:
        ax.semilogy(np.arange(1, res.size + 1), np.maximum(res, 1e-300), label="sample Bellman residual (RMS)")
    ax.set_xlabel("FQE iteration")
    ax.set_ylabel("residual")
    ax.legend(fontsize=8)
    return ax

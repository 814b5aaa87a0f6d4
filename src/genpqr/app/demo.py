"""The built-in example behind ``make demo`` / ``genpqr demo``.

A random sparse tabular MDP with a known reward; the behaviour is its MaxEnt-optimal
policy; logged trajectories are simulated; GenPQR recovers the anchor-normalized reward
(1) exactly from the true policy, (2) from data with the exact tabular solver and
frequency policy estimates, and (3) from data with fitted Q evaluation. Prints the errors
against the true normalized reward and writes a figure.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np

from .. import normalization as N, stage2 as T
from ..envs import random_mdp, simulate_tabular
from ..estimator import GenPQR
from ..stage1 import FrequencyClassifier
from ..stage2 import FQE, TabularQModel



def _print(*parts, **kwargs) -> None:
    """``print`` with lines wrapped at the console's width (:mod:`genpqr.app.console`)."""
    from .console import fit_width

    print(*(fit_width(str(p)) for p in parts), **kwargs)

def _errors(true, est):
    diff = est - true
    return float(np.mean(diff**2)), float(np.max(np.abs(diff))), float(np.corrcoef(true.ravel(), est.ravel())[0, 1])


def sampling_floor(model, data) -> float:
    """The level where FQE's sample Bellman residual settles for a tabular Q model.

    The residual is the RMS of ``Q(s_i, a_i) - y_i`` with targets
    ``y_i = u_i - g + gamma c_i (mu Q)(s'_i)`` built from one sampled next state each. A
    tabular Q is the mean target of its (s, a) cell, so at the fixed point the residual is
    the within-cell spread of the targets, ``gamma * sqrt(mean_i (c_i mu Q(s'_i) - cell mean)^2)``:
    the noise of the sampled transition, not an estimation error. It does not shrink with
    more iterations (nor with more data: it is the transition noise of the MDP).
    """
    stage2 = model.stage2_
    nxt = data.next_states
    w = np.sum(stage2.mu(nxt) * stage2.q(nxt), axis=1) * data.continues
    K = model.n_actions_
    cells = data.states[:, 0].astype(np.int64) * K + data.actions
    size = model.n_states_ * K if hasattr(model, "n_states_") else int(cells.max()) + 1
    counts = np.bincount(cells, minlength=size)
    means = np.bincount(cells, weights=w, minlength=size) / np.maximum(counts, 1)
    return float(model.gamma_ * np.sqrt(np.mean((w - means[cells]) ** 2)))


def run_demo(out: str | Path = "demo-output", *, n_states: int = 40, n_actions: int = 4, gamma: float = 0.9,
             n_episodes: int = 2000, horizon: int = 25, seed: int = 0, show: bool = False) -> dict:
    """Run the demo; returns the printed figures as a dict and writes ``out/demo.png`` (and
    ``out/manifest.json``: the folder is written aside and replaces an earlier demo folder as a
    whole, ``genpqr.estimator._manifest.output_folder``; a folder holding anything else is refused
    before the demo runs)."""
    import matplotlib

    from ..estimator._folder_ops import write_each
    from ..estimator._manifest import check_target, output_folder

    if not show:
        matplotlib.use("Agg")
    out = Path(out)
    check_target(out, kind="demo")
    mdp = random_mdp(n_states, n_actions, n_next=5, gamma=gamma, random_state=seed)
    norm = N.anchor_action(0)
    truth = T.normalized_reward(mdp.reward, mdp.kernel, gamma, norm)
    sol = T.soft_optimal_solution(mdp.reward, mdp.kernel, gamma)
    data = simulate_tabular(mdp, sol.policy, n_episodes, horizon, random_state=seed + 1)
    rows, exact, fqe, messages = _fit_all(mdp, sol, data, norm, truth, gamma)
    floor = sampling_floor(fqe, data)
    _print_results(rows, (n_states, n_actions, gamma), data, norm, exact, fqe, floor, messages)
    grid = np.arange(n_states, dtype=float)[:, None]
    split = coverage_split(exact, truth)
    if any(m.startswith("CoverageWarning") for m in messages):
        _print(f"  the CoverageWarning, checked against the truth: the reward's RMSE is {split['rmse_flagged']:.3g} "
              f"at the {split['n_flagged']} state(s) it means ({split['share_flagged']:.1%} of the rows) and "
              f"{split['rmse_other']:.3g} at the other {n_states - split['n_flagged']}")
    with output_folder(out, kind="demo") as staging:
        path = write_each(staging, out, {"demo.png": lambda p: _plot(p, truth, exact.reward(grid), data, fqe, floor,
                                                                    show=show)})["demo.png"]
    print(f"\nFigure written to {path}")  # a path is not wrapped
    return {"rows": rows, "figure": str(path), "residual_floor": floor,
            "last_residual": fqe.diagnostics_.bellman_residuals[-1], "warnings": messages, "coverage": split}


def coverage_split(model, truth) -> dict:
    """Where the coverage check looks, against the truth: the exact fit's reward RMSE at the
    states where the normalization weights an action with ``mu/pi_hat`` above the limit
    (``genpqr.estimator._diagnostic_checks.poorly_covered``, the states behind a ``CoverageWarning``)
    and at the others, with their number and share of the logged rows."""
    from ..estimator._diagnostic_checks import poorly_covered

    grid = np.arange(truth.shape[0], dtype=float)[:, None]
    proba = np.exp(model.stage2_.recovery.log_policy)
    flagged = poorly_covered(model.normalization_.weights(grid, truth.shape[1], proba), proba)
    err2 = (model.reward(grid) - truth) ** 2
    visits = np.asarray(model.stage2_.counts).sum(axis=1)
    rmse = [float(np.sqrt(np.mean(err2[rows]))) if rows.any() else float("nan") for rows in (flagged, ~flagged)]
    return {"n_flagged": int(flagged.sum()), "share_flagged": float(visits @ flagged / visits.sum()),
            "rmse_flagged": rmse[0], "rmse_other": rmse[1]}


def _fit_all(mdp, sol, data, norm, truth, gamma):
    """The demo's three recoveries, timed: ``(rows, exact fit, FQE fit, warning messages)``. The
    fits' warnings (failed diagnostics) are collected and printed after the summary, as
    ``genpqr fit`` does."""
    n_states = truth.shape[0]
    grid = np.arange(n_states, dtype=float)[:, None]
    rows = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        oracle = T.recover_reward(sol.log_policy, mdp.kernel, gamma, norm)
        rows.append(("exact solve, true policy and P", *_errors(truth, oracle.reward), time.perf_counter() - t0))
        t0 = time.perf_counter()
        exact = GenPQR(norm, gamma=gamma, q_model="exact", n_states=n_states,  # a random MDP: categorical states
                       policy_model=FrequencyClassifier(n_states=n_states)).fit(data)
        rows.append(("from data: frequencies + exact solve", *_errors(truth, exact.reward(grid)),
                     time.perf_counter() - t0))
        t0 = time.perf_counter()
        fqe = GenPQR(norm, gamma=gamma, q_model=FQE(TabularQModel(n_states), n_iterations=200, tol=1e-8),
                     policy_model=exact.policy_.models[0], progress=False).fit(data)
        rows.append(("from data: frequencies + FQE", *_errors(truth, fqe.reward(grid)), time.perf_counter() - t0))
    from .outputs import warning_messages

    messages = warning_messages(caught)
    return rows, exact, fqe, messages


def _print_results(rows, problem, data, norm, exact, fqe, floor, messages) -> None:
    """The demo's table of errors, the FQE note and the model summary; ``problem`` is
    ``(n_states, n_actions, gamma)``."""
    n_states, n_actions, gamma = problem
    _print(f"Random MDP: {n_states} states, {n_actions} actions, gamma={gamma}; "
          f"{data.n} logged transitions in {data.n_episodes} episodes")
    _print(f"Normalization: {norm.describe()}")
    _print()
    _print(f"{'method':<40} {'MSE':>10} {'max |err|':>10} {'corr':>7} {'seconds':>8}")
    for name, mse, mx, corr, sec in rows:
        _print(f"{name:<40} {mse:>10.3g} {mx:>10.3g} {corr:>7.4f} {sec:>8.3f}")
    _print(f"\nFQE: the max target change falls to {fqe.diagnostics_.target_changes[-1]:.2g} (converged); the sample "
          f"Bellman residual levels off at {fqe.diagnostics_.bellman_residuals[-1]:.3g}, the noise of the sampled next "
          f"states ({floor:.3g}), not an error")
    _print()
    _print(exact.summary())
    if messages:
        _print(f"{len(messages)} warning(s) from the fits (failed diagnostics; here, where the truth is known, the "
              f"errors show what they cost):")
        _print("\n".join(f"  {m}" for m in messages))


def _plot(path: Path, truth, recovered, data, fqe, floor, show: bool) -> Path:
    """The demo figure: true and recovered reward tables, recovered vs true, FQE convergence."""
    import matplotlib.pyplot as plt

    from ..evaluation import plot_reward_recovery, plot_reward_table
    from ..evaluation._plotting import plot_bellman_residuals

    n_states, n_actions = truth.shape
    fig, axes = plt.subplots(1, 4, figsize=(21, 5.2), layout="constrained")
    fig.get_layout_engine().set(wspace=0.06)
    lim = float(np.max(np.abs(truth)))
    plot_reward_table(truth, ax=axes[0], title="true normalized reward", vmin=-lim, vmax=lim,
                      colorbar_label="true r(s, a)")
    plot_reward_table(recovered, ax=axes[1], title="recovered (frequencies + exact)", vmin=-lim, vmax=lim,
                      colorbar_label="recovered r(s, a)")
    s, a = data.states[:, 0].astype(int), data.actions
    visits = np.bincount(s * n_actions + a, minlength=n_states * n_actions).reshape(n_states, n_actions)
    plot_reward_recovery(truth, recovered, ax=axes[2], label="(state, action) pairs, frequencies + exact",
                         c=np.log1p(visits).ravel(), cmap="viridis", colorbar_label="log(1 + visits) of (s, a)")
    axes[2].set_title("recovered vs true")
    plot_bellman_residuals(fqe.diagnostics_, ax=axes[3], floor=floor)
    axes[3].set_title("FQE convergence (frequencies + FQE)")
    fig.savefig(path, dpi=110, format="png")
    if show:
        plt.show()
    plt.close(fig)
    return path

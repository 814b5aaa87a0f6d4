r"""``genpqr fit --features``: the structural step of the command line.

:func:`structural_from_model` estimates the flow-utility parameters from a fitted exact-path
:class:`~genpqr.GenPQR` with the ``--estimator`` of the config (:mod:`genpqr.structural.estimation`):
the likelihood uses GenPQR's kernel and discount, the choice counts of the data
(:func:`genpqr.structural.ddc.choice_counts`) and, for NPL/PML, GenPQR's first-stage choice
probabilities as the start. :func:`parameters_table` is ``parameters.csv``;
:class:`StructuralStatistic` re-estimates per bootstrap replicate; :func:`choice_fit_table`,
:func:`fig_choice_fit` and :func:`report_section` are the report's section
(``templates/structural.html``).

``parameters.csv`` (one row per parameter; the run's metadata repeated on every row so
that the file stays one tidy table):

``parameter, estimate, std_error, ci_low, ci_high``
    estimate, its standard error and the ``--level`` interval;
``std_error_robust``
    sandwich (``H^-1 J H^-1``) standard error (NPL/NFXP; empty otherwise);
``std_error_kind, ci_kind``
    what ``std_error`` and ``ci_low``/``ci_high`` are (e.g. the MLE's OPG; Wald
    ``estimate -+ z std_error``, or the bootstrap percentile interval with ``--bootstrap``);
``bootstrap_std_error``
    with ``--bootstrap``: the standard deviation of the re-estimated parameter;
``estimator, loglik, n_choices, iterations, converged``
    the estimator, the full log-likelihood at the estimate, the number of observed choices,
    the estimator's iterations and whether it converged.
"""

from __future__ import annotations

import numpy as np

from ..structural.estimation import SE_KINDS, estimate_structural
from .report_base import ReportFigure, new_figure

__all__ = ["ESTIMATOR_LABELS", "MLE_ESTIMATORS", "MLE_NOTE", "structural_from_model", "StructuralStatistic",
           "parameters_table", "choice_fit_table", "fig_choice_fit", "report_section", "console_lines"]

ESTIMATOR_LABELS = {
    "npl": "NPL iterated to convergence (the maximum likelihood estimator)",
    "nfxp": "NFXP, nested fixed point (the maximum likelihood estimator)",
    "pml": "Hotz-Miller two-step pseudo-likelihood (PML)",
    "projection": "weighted least-squares projection of the reward table on the features",
}


#: The estimators whose answer is the MLE (the first stage is only their start).
MLE_ESTIMATORS = ("npl", "nfxp")
#: Printed and reported with them.
MLE_NOTE = ("the MLE depends only on the features, the choices, the kernel and the discount, not on "
            "--normalization, --clip or the first stage (NPL's start): warnings about those concern rewards.csv, not "
            "these estimates")


def structural_from_model(model, data, features, names, estimator: str):
    """:func:`genpqr.structural.estimation.fit_structural` on a fitted exact-path GenPQR (the
    choices of the likelihood are the model's choice counts, those of ``data``).

    Parameters
    ----------
    model : GenPQR
        Fitted with ``q_model="exact"``.
    data : Transitions
        The data it was fitted on (kept for the signature; the model's counts are its choices).
    features : ndarray (S, K, p)
    names : list of str
    estimator : {"npl", "nfxp", "pml", "projection"}
    """
    from ..structural.estimation import fit_structural

    return fit_structural(model, features, names=names, estimator=estimator)


class StructuralStatistic:
    """Bootstrap statistic: the reward table (raveled) followed by the structural estimates
    re-estimated on the replicate (same estimator, the replicate's first stage, kernel and
    choices)."""

    def __init__(self, features, names, estimator: str):
        self.features, self.names, self.estimator = features, names, estimator

    def __call__(self, model):
        table = np.asarray(model.stage2_.recovery.reward, dtype=np.float64)
        fit = structural_from_model(model, model.training_data_, self.features, self.names, self.estimator)
        return np.concatenate([table.ravel(), fit.theta])


def parameters_table(fit, level: float = 0.95, boot=None, projection=None):
    """``parameters.csv`` as a DataFrame (columns: see the module notes).

    Parameters
    ----------
    fit : StructuralFit
    level : float
    boot : BootstrapResult, optional
        Whose last ``p`` entries are the parameters (:class:`StructuralStatistic`, or the
        projection's statistic).
    projection : DataFrame, optional
        The projection's own table (``estimator="projection"``): its estimates are used.
    """
    import pandas as pd

    p = fit.theta.size
    table = pd.DataFrame({"parameter": list(fit.names),
                          "estimate": fit.theta if projection is None else projection["estimate"].to_numpy()})
    table["std_error"] = fit.std_error
    lo, hi = fit.wald_interval(level)
    ci_kind = f"Wald, estimate -+ z std_error ({level:.0%})"
    se_kind = SE_KINDS[fit.estimator]
    table["ci_low"], table["ci_high"] = lo, hi
    table["std_error_robust"] = fit.std_error_robust
    if boot is not None:
        b_lo, b_hi = boot.interval(level)
        table["ci_low"], table["ci_high"] = np.ravel(b_lo)[-p:], np.ravel(b_hi)[-p:]
        table["bootstrap_std_error"] = boot.std_error[-p:]
        n_boot = boot.replicates.shape[0]
        ci_kind = f"bootstrap percentile over episodes ({level:.0%}, {n_boot} replicates, re-estimated each)"
        if fit.estimator == "projection":
            table["std_error"] = boot.std_error[-p:]
            se_kind = f"bootstrap over episodes ({n_boot} replicates)"
    elif fit.estimator == "projection":
        ci_kind = "none (use --bootstrap)"
    table["std_error_kind"] = se_kind
    table["ci_kind"] = ci_kind
    table["estimator"] = fit.estimator
    table["loglik"] = fit.loglik
    table["n_choices"] = fit.n_choices
    table["iterations"] = fit.n_iter
    table["converged"] = fit.converged
    return table


def console_lines(fit, parameters) -> list:
    """What ``genpqr fit`` prints about the structural step."""
    lines = [f"  structural parameters, estimator {fit.estimator}: {ESTIMATOR_LABELS[fit.estimator]}",
             f"    log-likelihood {fit.loglik:.4f} over {fit.n_choices} choices; {fit.n_iter} iteration(s), "
             f"{'converged' if fit.converged else 'NOT CONVERGED'}",
             f"    std_error: {parameters['std_error_kind'].iloc[0]}; interval: {parameters['ci_kind'].iloc[0]}"]
    if fit.estimator in MLE_ESTIMATORS:
        lines.append(f"    {MLE_NOTE}")
    for _, row in parameters.iterrows():
        se = "" if not np.isfinite(row["std_error"]) else f" (SE {row['std_error']:.4g})"
        ci = "" if not np.isfinite(row["ci_low"]) else f"  [{row['ci_low']:.4g}, {row['ci_high']:.4g}]"
        lines.append(f"    {row['parameter']}: {row['estimate']:.4g}{se}{ci}")
    return lines


# ============================================================================ fit of the choice model
def _wilson(successes, trials, level):
    from scipy.stats import norm

    z = norm.ppf(0.5 + level / 2)
    n = np.maximum(trials, 1)
    phat = successes / n
    centre = (phat + z ** 2 / (2 * n)) / (1 + z ** 2 / n)
    half = z * np.sqrt(phat * (1 - phat) / n + z ** 2 / (4 * n ** 2)) / (1 + z ** 2 / n)
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)


def choice_fit_table(fit, labels, level: float = 0.95):
    """Observed vs fitted choice probabilities per state and action (long format): columns
    ``state_index, action, choices_in_state, observed, observed_low, observed_high, fitted``;
    ``observed`` is the frequency with its Wilson (binomial) interval, ``fitted`` the model's
    ``pi_theta_hat(a|s)``."""
    import pandas as pd

    n = fit.counts
    S, K = n.shape
    total = n.sum(axis=1)
    rows = []
    for k in range(K):
        lo, hi = _wilson(n[:, k], total, level)
        observed = np.where(total > 0, n[:, k] / np.maximum(total, 1), np.nan)
        rows.append(pd.DataFrame({"state_index": np.arange(S), "action": labels[k], "choices_in_state": total,
                                  "observed": observed, "observed_low": np.where(total > 0, lo, np.nan),
                                  "observed_high": np.where(total > 0, hi, np.nan), "fitted": fit.policy[:, k]}))
    return pd.concat(rows, ignore_index=True)


def fig_choice_fit(fit, labels, level: float = 0.95, state_name: str = "state_index"):
    """One panel per action (the most frequent one left out, at most 4 panels): observed
    frequency per state with Wilson intervals (points) and the model's fitted probability (line)."""
    table = choice_fit_table(fit, labels, level)
    order = np.argsort(fit.counts.sum(axis=0))
    shown = [int(k) for k in order[:-1][:4]] if len(labels) > 1 else [0]
    fig = new_figure(5.8, 2.6 * len(shown) + 0.6)
    axes = np.atleast_1d(fig.subplots(len(shown), 1, squeeze=False).ravel())
    for ax, k in zip(axes, shown):
        d = table[table.action == labels[k]]
        seen = d.choices_in_state > 0
        x = d.state_index.to_numpy()
        ax.vlines(x[seen], d.observed_low[seen], d.observed_high[seen], colors="#bbbbbb", lw=1,
                  label=f"{level:.0%} binomial interval")
        ax.plot(x[seen], d.observed[seen], "o", ms=3, color="#4477aa", label="observed frequency")
        ax.plot(x, d.fitted, "-", color="#cc6677", lw=1.5, label="fitted probability")
        ax.set_ylabel(f"P({labels[k]} | {'state' if state_name == 'state_index' else state_name})")
        top = float(np.nanmax([d.fitted.max(), np.nanmax(d.observed[seen]) if seen.any() else 0.0]))
        ax.set_ylim(0, min(1.0, 1.25 * top + 1e-3))
    axes[-1].set_xlabel(state_name)
    axes[0].legend(fontsize=7)
    axes[0].set_title(f"choice probabilities: observed vs fitted ({fit.estimator})", fontsize=9)
    return fig


def report_section(ctx) -> dict:
    """The report's structural-parameters section (``templates/structural.html``): ``heading``,
    ``table`` (the estimates), ``summary`` (label, value) rows and ``figure`` (observed vs fitted
    choice probabilities)."""
    fit = ctx.structural
    labels = [str(a) for a in ctx.model.encoder_.labels]
    columns = ["parameter", "estimate", "std_error", "ci_low", "ci_high", "std_error_robust"]
    table = ctx.parameters[[c for c in columns + ["bootstrap_std_error"] if c in ctx.parameters.columns]]
    summary = [("estimator", fit.estimator), ("log-likelihood", f"{fit.loglik:.4f}"),
               ("choices in the likelihood", fit.n_choices), ("iterations", fit.n_iter),
               ("converged", fit.converged),
               ("max |score| per choice at the estimate", f"{fit.gradient_norm:.2e}"),
               ("std_error", ctx.parameters["std_error_kind"].iloc[0]),
               ("std_error_robust", "sandwich H^-1 J H^-1 of the full likelihood"
                if fit.estimator in ("npl", "nfxp") else "n/a"),
               ("ci_low, ci_high", ctx.parameters["ci_kind"].iloc[0])]
    caption = ("Observed choice frequency per state (points; bars: binomial Wilson intervals) and the choice "
               "probability of the fitted structural model (line).")
    state_name = "state_index"
    if ctx.state_labels is not None and len(ctx.state_names) == 1 and \
            all(label == str(i) for i, label in enumerate(ctx.state_labels)):
        state_name = ctx.state_names[0]  # the state column is its own index (e.g. mileage_bin 0..89)
    return {"heading": ESTIMATOR_LABELS[fit.estimator], "table": table, "summary": summary,
            "mle_note": MLE_NOTE if fit.estimator in MLE_ESTIMATORS else None,
            "figure": ReportFigure("structural", caption, fig_choice_fit(fit, labels, ctx.level, state_name))}

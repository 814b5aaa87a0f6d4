r"""``genpqr fit --features``: the structural step of the command line.

:func:`structural_from_model` estimates the flow-utility parameters from a fitted exact-path
:class:`~genpqr.GenPQR` with the ``--estimator`` of the config (``genpqr.structural._estimation``):
the likelihood uses GenPQR's kernel and discount, the choice counts of the data
(:func:`genpqr.structural.choice_counts`) and, for NPL/PML, GenPQR's first-stage choice
probabilities as the start. :func:`parameters_table` is ``parameters.csv``;
:class:`StructuralStatistic` re-estimates per bootstrap replicate; :func:`choice_fit_table`,
:func:`fig_choice_fit` and :func:`report_section` are the report's section
(``templates/structural.html``).

``parameters.csv`` (one row per parameter; the run's metadata repeated on every row so
that the file stays one tidy table). The standard error and the interval of a row always
come from the same source, named in ``std_error_kind`` and ``ci_kind``:

``parameter, estimate, std_error, ci_low, ci_high``
    estimate, its standard error and the ``--level`` interval. Without ``--bootstrap``: the
    estimator's own standard error (NPL/NFXP: the MLE's OPG; PML: the pseudo-likelihood's
    inverse Hessian, conditional on the first stage; projection: none) and the Wald interval
    ``estimate -+ z std_error``. With ``--bootstrap B``: the standard deviation of the
    re-estimated parameter over the B replicates and their percentile interval;
``std_error_robust``
    sandwich (``H^-1 J H^-1``) standard error of the full likelihood (NPL/NFXP; empty otherwise);
``std_error_kind, ci_kind``
    what ``std_error`` and ``ci_low``/``ci_high`` are;
``z, p_value``
    ``estimate / std_error`` and its two-sided normal p-value;
``identified``
    False for a parameter the choices do not identify (collinear features): its estimate,
    standard error and interval are empty. Each identified combination of such parameters
    follows as a row of its own (``parameter`` e.g. ``bonus + bonus2``; NPL and NFXP stop at
    different points of the flat direction, but agree on these;
    ``genpqr.structural.identification``);
``std_error_analytic, std_error_analytic_kind``
    with ``--bootstrap`` only: the estimator's own standard error (OPG, inverse Hessian, or
    none) and its kind, kept beside the bootstrap one;
``estimator, loglik, n_choices, iterations, convergence, converged``
    the estimator, the full log-likelihood at the estimate, the number of observed choices,
    the estimator's iterations (all algorithms together), which algorithm converged (e.g.
    ``"BHHH 200 (hit the cap) + Newton 2, converged by Newton"``) and whether it converged.
"""

from __future__ import annotations

import numpy as np

from ..structural._estimation import SE_KINDS, estimate_structural
from .flags import cli_text
from ..structural._results import ESTIMATOR_LABELS, MLE_ESTIMATORS, SE_LABELS
from .report_base import ReportFigure

__all__ = ["ESTIMATOR_LABELS", "MLE_ESTIMATORS", "MLE_NOTE", "structural_from_model", "StructuralStatistic",
           "parameters_table", "typed_parameters_table", "choice_fit_table", "fig_choice_fit", "report_section",
           "console_lines", "TYPES_NOTE"]

#: Printed and reported with them.
MLE_NOTE = ("the MLE depends only on the features, the choices, the kernel and the discount, not on "
            "--normalization, --clip or the first stage (NPL's start): warnings about those concern rewards.csv, not "
            "these estimates")

#: With latent types: how types.csv, rewards.csv and parameters.csv relate (printed and reported).
TYPES_NOTE = ("one set of types: the mixture MLE's posteriors (types.csv) decide them, and rewards.csv holds GenPQR's "
              "per-type rewards fitted at those posteriors held fixed, types in the same order as parameters.csv")


def structural_from_model(model, data, features, names, estimator: str, n_types: int = 1):
    """:func:`genpqr.structural.fit_structural` on a fitted exact-path GenPQR (the
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
    n_types : int
        Latent types (``--types``): above 1, the mixture MLE over the model's episodes
        (:func:`genpqr.structural.estimate_types`, every parameter type-specific), a
        :class:`~genpqr.structural.TypedStructuralFit`.
    """
    from ..structural._estimation import fit_structural

    if int(n_types) == 1:
        return fit_structural(model, features, names=names, estimator=estimator)
    return fit_structural(model, features, names=names, estimator=estimator, n_types=int(n_types))


class StructuralStatistic:
    """Bootstrap statistic: the reward table (raveled) followed by the structural estimates
    re-estimated on the replicate (same estimator, the replicate's first stage, kernel and
    choices)."""

    reads_tables = True  # the fitted tables only: a count replicate serves it (genpqr.evaluation)

    def __init__(self, features, names, estimator: str):
        self.features, self.names, self.estimator = features, names, estimator

    def __call__(self, model):
        table = np.asarray(model.stage2_.recovery.reward, dtype=np.float64)
        fit = structural_from_model(model, getattr(model, "training_data_", None), self.features, self.names,
                                    self.estimator)  # no training data in a count replicate: unused here
        return np.concatenate([table.ravel(), fit.theta])


def _bootstrap_columns(table, fit, boot, level):
    """The bootstrap's ``std_error``, ``ci_low``, ``ci_high`` of the parameters (the last ``p``
    entries of the statistic; none for a parameter not identified) and of the identified
    combinations (each replicate's ``c' theta``)."""
    p = fit.theta.size
    reps = boot.replicates[:, -p:]
    combos = getattr(getattr(fit, "identification", None), "combinations", ())
    coefs = np.array([[c.coefficients.get(name, 0.0) for name in fit.names] for c in combos]).reshape(-1, p)
    values = np.concatenate([reps, reps @ coefs.T], axis=1)
    hidden = np.concatenate([np.where(fit.identified, 1.0, np.nan), np.ones(len(combos))])
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2], axis=0)
    table["std_error"] = values.std(axis=0, ddof=1) * hidden
    table["ci_low"], table["ci_high"] = lo * hidden, hi * hidden


def parameters_table(fit, level: float = 0.95, boot=None, projection=None):
    """``parameters.csv`` as a DataFrame (columns: see the module notes).

    A parameter the choices do not identify has no estimate, standard error or interval
    (``identified`` False); each identified combination of such parameters follows as a row
    (``parameter`` e.g. ``"bonus + bonus2"``, ``genpqr.structural.identification``).

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
    from ..data._distributions import normal_sf

    from ..structural._results import coefficient_frame

    if hasattr(fit, "posterior_frame"):
        return typed_parameters_table(fit, level)
    p = fit.theta.size
    frame = coefficient_frame(fit, level).reset_index()
    table = frame[["parameter", "estimate", "std_error", "ci_low", "ci_high", "std_error_robust"]].copy()
    if projection is not None:
        table.loc[:p - 1, "estimate"] = np.where(fit.identified, projection["estimate"].to_numpy(), np.nan)
    se_kind = cli_text(SE_KINDS[fit.estimator])
    ci_kind = (f"Wald, estimate -+ z std_error ({level:.0%})" if np.any(np.isfinite(table["std_error"]))
               else "none (use --bootstrap)")
    if boot is not None:
        n_boot = boot.replicates.shape[0]
        _bootstrap_columns(table, fit, boot, level)
        se_kind = f"bootstrap: standard deviation over {n_boot} replicates (episodes resampled, re-estimated each)"
        ci_kind = f"bootstrap percentile over episodes ({level:.0%}, {n_boot} replicates, re-estimated each)"
    table["std_error_kind"] = se_kind
    table["ci_kind"] = ci_kind
    z = table["estimate"].to_numpy() / table["std_error"].to_numpy()
    table["z"], table["p_value"] = z, 2.0 * normal_sf(np.abs(z))
    if boot is not None:
        table["std_error_analytic"] = frame["std_error"]
        table["std_error_analytic_kind"] = cli_text(SE_KINDS[fit.estimator])
    table["identified"] = frame["identified"]
    table["estimator"] = fit.estimator
    table["loglik"] = fit.loglik
    table["n_choices"] = fit.n_choices
    table["iterations"] = fit.n_iter
    table["convergence"] = fit.convergence
    table["converged"] = fit.converged
    return table


def proportion_interval(p, se, z):
    """The interval of a proportion ``p`` with delta-method SE ``se``: Wald on the logit scale
    (SE ``se / (p (1 - p))``) mapped back, so it stays inside [0, 1] (a Wald interval on the
    proportion itself leaves it near 0 or 1); NaN where ``p`` is 0 or 1 or ``se`` is not finite."""
    p, se = np.asarray(p, dtype=np.float64), np.asarray(se, dtype=np.float64)
    inside = (p > 0) & (p < 1) & np.isfinite(se)
    with np.errstate(divide="ignore", invalid="ignore"):
        logit = np.log(p) - np.log1p(-p)
        half = z * se / (p * (1.0 - p))
        low, high = 1.0 / (1.0 + np.exp(-(logit - half))), 1.0 / (1.0 + np.exp(-(logit + half)))
    return np.where(inside, low, np.nan), np.where(inside, high, np.nan)


def typed_parameters_table(fit, level: float = 0.95):
    """``parameters.csv`` of a fit with latent types: one row per type-specific or shared
    parameter, per mixing coefficient and per mixing proportion (``mixing proportion[type m]``,
    delta-method SE, interval on the logit scale: ``proportion_interval``); the columns of :func:`parameters_table` plus ``n_types, aic, bic``."""
    import pandas as pd
    from ..data._distributions import normal_ppf, normal_sf

    frame = fit.to_frame(level).reset_index()
    z = normal_ppf(0.5 + level / 2)
    props = pd.DataFrame({"parameter": [f"mixing proportion[type {m}]" for m in range(fit.n_types)],
                          "estimate": fit.mixing_proportions, "std_error": fit.mixing_proportions_se})
    props["ci_low"], props["ci_high"] = proportion_interval(props.estimate.to_numpy(), props.std_error.to_numpy(), z)
    props["identified"] = bool(np.all(fit.identified[fit.theta.size:]))  # else no delta-method SE
    props["z"] = props.estimate / props.std_error
    props["p_value"] = 2.0 * normal_sf(np.abs(props.z))
    table = pd.concat([frame.drop(columns="std_error_kind"), props], ignore_index=True)
    table["std_error_kind"] = ("OPG of the mixture likelihood's per-episode scores (all parameters, mixing ones "
                               "included; proportions by the delta method), conditional on the kernel")
    table["ci_kind"] = f"Wald, estimate -+ z std_error ({level:.0%})"
    table.loc[table.parameter.str.startswith("mixing proportion["), "ci_kind"] = \
        f"Wald on the logit scale, mapped back into [0, 1] ({level:.0%})"
    for column, value in (("estimator", f"{fit.estimator} (mixture MLE, {fit.n_types} types)"),
                          ("loglik", fit.loglik), ("n_choices", fit.n_choices),
                          ("iterations", sum(fit.iterations.values())), ("convergence", fit.convergence),
                          ("converged", fit.converged), ("n_types", fit.n_types), ("aic", fit.aic), ("bic", fit.bic)):
        table[column] = value
    return table


def console_lines(fit, parameters) -> list:
    """What ``genpqr fit`` prints about the structural step: every standard error with its kind,
    beside the interval computed from it."""
    if hasattr(fit, "posterior_frame"):
        return [f"  structural parameters with {fit.n_types} latent types, estimator {fit.estimator}: mixture MLE",
                f"    log-likelihood {fit.loglik:.4f} over {fit.n_episodes} episodes ({fit.n_choices} choices); "
                f"AIC {fit.aic:.3f}, BIC {fit.bic:.3f}; iterations: {fit.convergence}",
                f"    std_error: {parameters['std_error_kind'].iloc[0]}", f"    {TYPES_NOTE}"] + [
            f"    {row['parameter']}: not identified by the choices (no estimate or standard error; see the warning)"
            if not bool(row.get("identified", True))
            else f"    {row['parameter']}: {row['estimate']:.4g}"
            + (f" (SE {row['std_error']:.4g})" if np.isfinite(row["std_error"]) else " (no standard error)")
            for _, row in parameters.iterrows()]
    boot = "std_error_analytic" in parameters.columns
    kind = "bootstrap" if boot else fit.se_label
    mle = ("" if fit.estimator in MLE_ESTIMATORS else
           "; not the MLE: the log-likelihood is the full likelihood at its estimate" +
           (f" (at the MLE: {fit.mle_loglik:.4f})" if np.isfinite(fit.mle_loglik) else ""))
    lines = [f"  structural parameters, estimator {fit.estimator}: {ESTIMATOR_LABELS[fit.estimator]}",
             f"    log-likelihood {fit.loglik:.4f} over {fit.n_choices} choices{mle}",
             f"    iterations: {fit.convergence}",
             f"    std_error: {parameters['std_error_kind'].iloc[0]}; interval: {parameters['ci_kind'].iloc[0]}"]
    if boot and np.any(np.isfinite(fit.std_error)):
        lines.append(f"    also shown: the {SE_LABELS[fit.estimator]} SE ({cli_text(SE_KINDS[fit.estimator])})")
    if fit.estimator in MLE_ESTIMATORS:
        lines.append(f"    {MLE_NOTE}")
    for _, row in parameters.iterrows():
        if "identified" in row and not row["identified"]:
            lines.append(f"    {row['parameter']}: not identified by the choices (only a combination with other "
                         f"parameters is, below)")
            continue
        se = "" if not np.isfinite(row["std_error"]) else f" (SE {row['std_error']:.4g}, {kind})"
        ci = "" if not np.isfinite(row["ci_low"]) else f"  [{row['ci_low']:.4g}, {row['ci_high']:.4g}]"
        other = ("" if not boot or not np.isfinite(row["std_error_analytic"]) else
                 f"  ({SE_LABELS[fit.estimator]} SE {row['std_error_analytic']:.4g})")
        lines.append(f"    {row['parameter']}: {row['estimate']:.4g}{se}{ci}{other}")
    return lines


# ============================================================================ fit of the choice model
def _wilson(successes, trials, level):
    from statistics import NormalDist  # (not scipy.stats: its import costs a second)

    z = NormalDist().inv_cdf(0.5 + level / 2)
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
    from .report_plot import Axes, Figure
    from .report_svg import BLUE, LIGHT, RED

    table = choice_fit_table(fit, labels, level)
    order = np.argsort(fit.counts.sum(axis=0))
    shown = [int(k) for k in order[:-1][:4]] if len(labels) > 1 else [0]
    panels = []
    for i, k in enumerate(shown):
        d = table[table.action == labels[k]]
        seen = (d.choices_in_state > 0).to_numpy()
        x = d.state_index.to_numpy()
        observed, fitted = d.observed.to_numpy(), d.fitted.to_numpy()
        top = float(np.nanmax([fitted.max(), np.nanmax(observed[seen]) if seen.any() else 0.0]))
        ax = Axes(f"choice probabilities: observed vs fitted ({fit.estimator})" if i == 0 else "",
                  state_name if i == len(shown) - 1 else "",
                  f"P({labels[k]} | {'state' if state_name == 'state_index' else state_name})",
                  ylim=(0, min(1.0, 1.25 * top + 1e-3)))
        ax.vlines(x[seen], d.observed_low.to_numpy()[seen], d.observed_high.to_numpy()[seen], LIGHT, width=1,
                  label=f"{level:.0%} binomial interval")
        ax.line(x[seen], observed[seen], BLUE, width=0, marker="o", size=2.5, label="observed frequency")
        ax.line(x, fitted, RED, label="fitted probability")
        panels.append(ax)
    return Figure(panels, width=600, panel_height=250)


def report_section(ctx) -> dict:
    """The report's structural-parameters section (``templates/structural.html``): ``heading``,
    ``table`` (the estimates), ``summary`` (label, value) rows and ``figure`` (observed vs fitted
    choice probabilities)."""
    fit = ctx.structural
    labels = [str(a) for a in ctx.model.encoder_.labels]
    if hasattr(fit, "posterior_frame"):
        return _typed_report_section(ctx, fit, labels)
    columns = ["parameter", "estimate", "std_error", "ci_low", "ci_high", "z", "p_value", "std_error_robust",
               "std_error_analytic"]
    table = ctx.parameters[[c for c in columns if c in ctx.parameters.columns]]
    loglik = f"{fit.loglik:.4f}" + ("" if fit.estimator in MLE_ESTIMATORS else
                                    " (not the MLE: the full likelihood at its estimate" +
                                    (f"; at the MLE {fit.mle_loglik:.4f})" if np.isfinite(fit.mle_loglik) else ")"))
    summary = [("estimator", fit.estimator), ("log-likelihood", loglik),
               ("choices in the likelihood", fit.n_choices), ("iterations", fit.convergence),
               ("converged", fit.converged),
               ("max |score| per choice at the estimate", f"{fit.gradient_norm:.2e}"),
               ("std_error", ctx.parameters["std_error_kind"].iloc[0]),
               ("std_error_robust", "sandwich H^-1 J H^-1 of the full likelihood"
                if fit.estimator in ("npl", "nfxp") else "n/a"),
               ("ci_low, ci_high", ctx.parameters["ci_kind"].iloc[0])]
    if "std_error_analytic" in ctx.parameters.columns:
        summary.append(("std_error_analytic", ctx.parameters["std_error_analytic_kind"].iloc[0]))
    caption = ("Observed choice frequency per state (points; bars: binomial Wilson intervals) and the choice "
               "probability of the fitted structural model (line).")
    state_name = "state_index"
    if ctx.state_labels is not None and len(ctx.state_names) == 1 and \
            all(label == str(i) for i, label in enumerate(ctx.state_labels)):
        state_name = ctx.state_names[0]  # the state column is its own index (e.g. mileage_bin 0..89)
    return {"heading": ESTIMATOR_LABELS[fit.estimator], "table": table, "summary": summary,
            "mle_note": MLE_NOTE if fit.estimator in MLE_ESTIMATORS else None,
            "figure": ReportFigure("structural", caption, fig_choice_fit(fit, labels, ctx.level, state_name))}


def _typed_report_section(ctx, fit, labels) -> dict:
    """The section for a fit with latent types: parameters per type and mixing, the choice of M
    (log-likelihood, AIC, BIC), the separation of the types, and the observed vs fitted choice
    probabilities (fitted: each type's, weighted by the posterior share of the type at the state)."""
    from types import SimpleNamespace

    table = ctx.parameters[["parameter", "estimate", "std_error", "ci_low", "ci_high", "z", "p_value"]]
    summary = [("estimator", f"{fit.estimator}: {fit.n_types} latent types, mixture MLE"),
               ("log-likelihood", f"{fit.loglik:.4f}"), ("AIC", f"{fit.aic:.3f}"), ("BIC", f"{fit.bic:.3f}"),
               ("episodes", fit.n_episodes), ("choices in the likelihood", fit.n_choices),
               ("iterations", fit.convergence), ("converged", fit.converged),
               ("separation of the types (mean total-variation distance of posteriors from prior)",
                f"{fit.separation:.3f}"),
               ("std_error", ctx.parameters["std_error_kind"].iloc[0]),
               ("posterior type probabilities per episode", "types.csv"), ("types of rewards.csv", TYPES_NOTE)]
    S = fit.space.n_states
    typed_counts = fit.space.counts(fit.data, fit.posteriors).reshape(fit.n_types, S, -1)
    share = typed_counts.sum(axis=2, keepdims=True)
    share = share / np.maximum(share.sum(axis=0, keepdims=True), 1e-300)
    fitted = np.sum(share * fit.policy.reshape(fit.n_types, S, -1), axis=0)
    view = SimpleNamespace(counts=typed_counts.sum(axis=0), policy=fitted,
                           estimator=f"{fit.estimator}, {fit.n_types} types")
    caption = ("Observed choice frequency per state (points; bars: binomial Wilson intervals) and the fitted mixture's "
               "choice probability (line): each type's, weighted by the posterior share of the type at the state.")
    return {"heading": f"{fit.n_types} latent types: full-information mixture MLE ({fit.estimator})", "table": table,
            "summary": summary, "mle_note": MLE_NOTE,
            "figure": ReportFigure("structural", caption, fig_choice_fit(view, labels, ctx.level))}

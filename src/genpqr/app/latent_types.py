"""``genpqr fit --types M``: latent agent types on the nonparametric route
(:class:`genpqr.GenPQR` with ``n_types=M``; EM over episodes, ``genpqr.estimator._latent_types.TypesPath``).

What the fit folder then holds, beside ``model.joblib`` (the fitted mixture; its per-type models in
``type_models_``), ``config.json`` and ``report.html``:

``rewards.csv``
    one table for all types: a ``type`` column (0 .. M-1, types in decreasing order of their
    proportion), then the columns of a one-type fit (tabular: one row per state and type; continuous
    states: one row per data row and type), and in tabular mode ``expected_visits``, the rows at
    the state weighted as in the type's fit (their episode's probability of the type at EM's last
    M-step). One long table
    rather than a file per type: the same columns as a one-type fit, one file to read, and
    ``rewards[rewards.type == m]`` is type ``m``'s table;
``types.csv``
    one row per episode: ``episode`` (the episode id), ``posterior_type_<m>`` (the posterior
    probability of each type) and ``most_likely_type``;

and the console and the report state the log likelihood, AIC, BIC (with the parameter count),
the mixing proportions, the EM iterations and the separation of the types. Every number is the
API's: ``GenPQR(..., n_types=M)`` on the same data and settings gives the same tables.

With ``--features`` the structural mixture MLE decides the types instead (one fit, one
posterior): ``types.csv`` holds its posteriors and ``rewards.csv`` each type's GenPQR fit at those
posteriors held fixed (:func:`structural_type_models`), so both name the types of ``parameters.csv``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["check_types_config", "type_rewards", "structural_type_models", "types_table", "type_rows",
           "console_lines"]


def check_types_config(config) -> None:
    """``--types``: an int >= 1; M > 1 needs an in-memory discrete-action fit without
    ``--bootstrap`` (with ``--features`` the structural mixture MLE decides the types,
    :func:`structural_type_models`; its own checks are in ``genpqr.app.workflow.check_before_fit``)."""
    from .config import FIT_OPTIONS, TYPED

    M = config.types
    if isinstance(M, bool) or not isinstance(M, (int, np.integer)) or M < 1:
        raise ValueError(f"--types must be a number of latent types >= 1, got {M!r}")
    if M == 1:
        return
    refused = FIT_OPTIONS.refused(config, TYPED)
    if config.data and Path(config.data).is_dir():
        refused.append("a folder of Parquet files")
    if refused:
        raise ValueError(f"--types {M} (latent types, nonparametric) cannot be combined with {', '.join(refused)}: "
                         f"fit the per-type rewards in memory with discrete actions, without them")


def type_rewards(type_models, index, data, labels, frame, config):
    """``rewards.csv`` of a fit with types: each type's table (:func:`genpqr.app.results.tabular_rewards`
    or :func:`~genpqr.app.results.row_rewards`) with a ``type`` column in front, stacked.
    ``type_models``: the one-type GenPQR fit of each type (``model.type_models_``, or
    :func:`structural_type_models`)."""
    import pandas as pd

    from .results import row_rewards, tabular_rewards

    tables = []
    for m, typed in enumerate(type_models):
        if index is not None:
            table = tabular_rewards(typed, index, data, labels, None, config.level)
            weights = typed.training_data_.weights
            table["expected_visits"] = np.bincount(data.states[:, 0].astype(np.int64), weights=weights,
                                                   minlength=index.n_states)
        else:
            table = row_rewards(typed, frame, config, labels, None)
        table.insert(0, "type", m)
        tables.append(table)
    return pd.concat(tables, ignore_index=True)


def structural_type_models(model, data, structural) -> list:
    """``--features F --types M``: the per-type rewards at the structural mixture MLE's types.

    The mixture MLE (``structural``, a :class:`~genpqr.structural.TypedStructuralFit`)
    decides the types; each type's nonparametric fit is GenPQR's M-step at its posterior type
    probabilities held fixed (:func:`genpqr.estimator.fit_type_models`; the nonparametric EM is
    not run), so ``rewards.csv``, ``types.csv`` and ``parameters.csv`` speak of the same types in
    the same order.

    Parameters
    ----------
    model : GenPQR
        The one-type fit on ``data`` (its parameters define every type's fit).
    data : Transitions
    structural : TypedStructuralFit
        Fitted on ``data``'s episodes: ``posteriors`` (n_episodes, M), rows in the order of the
        sorted episode ids.
    """
    from ..estimator import fit_type_models
    from ..stage1._latent_types import episode_codes

    labels, _ = episode_codes(data.episode_ids)
    if not np.array_equal(data.episode_names(labels), np.asarray(structural.episode_labels)):
        raise ValueError("structural was fitted on other episodes than data: its posteriors cannot weigh data's rows")
    return fit_type_models(model, data, structural.posteriors)


def types_table(model):
    """``types.csv``: per episode the posterior type probabilities and the most likely type."""
    import pandas as pd

    q = model.type_weights_
    table = pd.DataFrame({"episode": model.type_episodes_})
    for m in range(q.shape[1]):
        table[f"posterior_type_{m}"] = q[:, m]
    table["most_likely_type"] = q.argmax(axis=1)
    return table


def type_rows(model) -> list:
    """``(label, value)`` rows of the fit's figures (the report's table, the console)."""
    q = model.type_weights_
    em = f"{model.n_em_iter_} iteration(s), {'converged' if model.em_converged_ else 'NOT converged'}; best of " \
         f"{len(model.em_start_logliks_)} start(s)"
    k = "not countable (a stage-1 learner without counted parameters)" if model.n_params_ is None \
        else str(model.n_params_)
    rows = [("latent types", q.shape[1]), ("log likelihood (choices" + (
        " and transitions)" if getattr(model.types, "specific_transitions", False) else ")"), f"{model.loglik_:.4f}"),
        ("parameters counted", k), ("AIC", f"{model.aic_:.4f}"), ("BIC (n = episodes)", f"{model.bic_:.4f}"),
        ("EM", em), ("separation share", f"{model.type_separation_:.3f}")]
    expected = q.sum(axis=0)
    rows += [(f"type {m}", f"proportion {model.type_proportions_[m]:.4f}; {expected[m]:.1f} episode(s) expected; "
                           f"most likely type of {int(np.sum(q.argmax(axis=1) == m))}") for m in range(q.shape[1])]
    return rows


def console_lines(model) -> list:
    """The lines ``genpqr fit --types M`` prints about the types."""
    return [f"  {label}: {value}" for label, value in type_rows(model)]

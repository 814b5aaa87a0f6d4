"""``genpqr fit --action-features FILE``: the action table of a discrete-action fit, and what
the outputs say about the actions it lists that the data never takes.

The file (CSV or Parquet) has one row per action: the label in the column named by
``--action`` (the same values as the data's action column; actions never taken included) and
one numeric column per feature (every other column). :func:`read_action_table` turns it into a
:class:`genpqr.data.ActionTable` whose rows are sorted by label, so the action codes are those
of a fit without a table (sorted labels), with the never-taken actions among them. Every fault
is a ``ValueError`` naming the file, the flag and the problem (``genpqr fit`` exits 2 with it).
"""

from __future__ import annotations

import numpy as np

from ..data._validation import plain, short_list
from .config import FitConfig

__all__ = ["FLAG", "read_action_table", "check_action_separation", "never_taken_line"]

FLAG = "--action-features"


def _fault(path, problem: str) -> ValueError:
    return ValueError(f"{FLAG} file {str(path)!r}: {problem}")


def read_action_table(config: FitConfig, data_labels: np.ndarray):
    """The :class:`~genpqr.data.ActionTable` of ``config.action_features``, rows sorted by label;
    ``data_labels`` (the data's distinct action labels) must all be listed."""
    from ..data import ActionTable
    from ..data._io import read_table
    from ..exceptions import ActionTableError

    path = config.action_features
    table = read_table(path, sep=config.sep, what=f"action features file ({FLAG})")
    label = config.action
    if label not in table.columns:
        raise _fault(path, f"no label column {label!r} (the --action column; one row per action label); its columns "
                           f"are {short_list(list(table.columns), 10)}")
    names = [c for c in table.columns if c != label]
    if not names:
        raise _fault(path, f"no feature columns besides the label column {label!r}")
    _check_columns(table, label, names, path)
    labels = table[label].to_numpy()
    if data_labels.dtype.kind not in "iufb" and labels.dtype.kind in "iufb":
        labels = labels.astype(str).astype(object)  # the data's text labels '1', '2' against numbers 1, 2
    order = np.argsort(labels, kind="stable")
    try:
        action_table = ActionTable(labels[order], table[names].to_numpy(dtype=np.float64)[order], tuple(names))
        action_table.check_covers(data_labels, f"the data (action column {label!r})")
    except ActionTableError as exc:  # duplicates, missing labels, NaN/inf features (named errors)
        raise _fault(path, str(exc)) from None
    return action_table


def check_action_separation(action_table, path) -> None:
    """Do the features tell the actions apart? ``ValueError`` when no column varies across the
    actions (every action would get the same reward); an
    :class:`~genpqr.exceptions.ActionFeaturesWarning` naming the constant columns, the actions
    sharing one feature row (their rewards in rewards.csv cannot differ) and linearly dependent
    columns (their coefficients are not identified). Linear in the number of actions (one sort,
    one SVD of the d x d cross-product)."""
    import warnings

    from ..exceptions import ActionFeaturesWarning

    X, labels = np.asarray(action_table.features, dtype=np.float64), np.asarray(action_table.labels)
    X = X.reshape(len(labels), -1)
    names = list(action_table.feature_names or [f"feature {j}" for j in range(X.shape[1])])
    spread = X.max(axis=0) - X.min(axis=0)
    constant = [n for n, s in zip(names, spread) if s == 0]
    if len(constant) == len(names):
        raise _fault(path, f"no feature column varies across the {len(labels)} actions ({short_list(constant, 10)} "
                           f"{'is' if len(constant) == 1 else 'are all'} constant): the features cannot tell the "
                           f"actions apart, so every action would get the same reward; add columns that differ "
                           f"between actions")
    said = []
    if constant:
        said.append(f"column(s) {short_list(constant, 10)} are constant across the actions and tell none apart")
    order = np.lexsort(X.T[::-1])
    same = np.r_[False, np.all(X[order][1:] == X[order][:-1], axis=1)]
    if same.any():
        group = np.cumsum(~same) - 1
        sizes = np.bincount(group)
        tied = [labels[order][group == g] for g in np.flatnonzero(sizes > 1)[:3]]
        n_tied = int(sizes[sizes > 1].sum())
        said.append(f"{n_tied} actions share their feature row with another action (e.g. "
                    f"{'; '.join(short_list(t, 5) for t in tied)}): the features cannot tell them apart, so their "
                    f"rewards in rewards.csv come out equal by construction, not from the data")
    varying = [j for j, s in enumerate(spread) if s > 0]
    Z = X[:, varying] - X[:, varying].mean(axis=0)
    Z = Z / np.linalg.norm(Z, axis=0)
    sv = np.linalg.svd(Z.T @ Z, compute_uv=False)
    rank = int(np.sum(sv > sv[0] * 1e-10))
    if rank < len(varying):
        said.append(f"the {len(varying)} varying column(s) {short_list([names[j] for j in varying], 10)} are "
                    f"linearly dependent across the actions (rank {rank}): their separate coefficients are not "
                    f"identified (the rewards use only {rank} direction(s) of them)")
    if said:
        warnings.warn(f"{FLAG} file {str(path)!r}: " + "; ".join(said), ActionFeaturesWarning, stacklevel=2)


def _check_columns(table, label: str, names: list, path) -> None:
    """No missing label; numeric, finite feature columns."""
    import pandas as pd

    missing = table[label].isna().to_numpy()
    if missing.any():
        raise _fault(path, f"label column {label!r} has {int(missing.sum())} missing value(s) (first in row "
                           f"{int(np.flatnonzero(missing)[0]) + 1})")
    for name in names:
        col = table[name]
        if not (pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col)):
            example = plain(col.dropna().iloc[0]) if col.notna().any() else None
            raise _fault(path, f"feature column {name!r} must be numeric, got text (e.g. {example!r}); encode "
                               f"categories as numbers (e.g. one indicator column per category)")
        bad = ~np.isfinite(col.to_numpy(dtype=np.float64))
        if bad.any():
            raise _fault(path, f"feature column {name!r} has {int(bad.sum())} missing or infinite value(s) (first "
                               f"for label {plain(table[label].iloc[int(np.flatnonzero(bad)[0])])!r})")


def never_taken_line(model) -> str | None:
    """The console line about the actions of the table that the data never takes (None when
    every action is taken, or without a table)."""
    n = getattr(model.diagnostics_, "n_never_taken", None)
    if not n:
        return None
    labels = model.encoder_.labels[~model.taken_actions_]
    return (f"{n} action(s) in the table were never taken: their rewards are predictions from their features "
            f"({short_list(labels, 10)})")


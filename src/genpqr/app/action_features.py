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

from ..data.validation import plain, short_list
from .config import FitConfig

__all__ = ["FLAG", "read_action_table", "never_taken_line"]

FLAG = "--action-features"


def _fault(path, problem: str) -> ValueError:
    return ValueError(f"{FLAG} file {str(path)!r}: {problem}")


def read_action_table(config: FitConfig, data_labels: np.ndarray):
    """The :class:`~genpqr.data.ActionTable` of ``config.action_features``, rows sorted by label;
    ``data_labels`` (the data's distinct action labels) must all be listed."""
    from ..data import ActionTable, read_table
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


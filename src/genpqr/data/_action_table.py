"""Action tables: a description of every action by a feature vector (labels -> ``x_a``).

With thousands of actions (items, routes, price points) a stage model that has one output
per action cannot borrow strength across actions, and cannot say anything about an action
never taken. An :class:`ActionTable` lists the K actions with a feature vector each
(embeddings, attributes); a :class:`~genpqr.data.FiniteActions` that carries one makes the
table's row order the action codes ``0..K-1`` (actions never taken in the data included), and
models that score (state, action) pairs (:class:`genpqr.stage1.ConditionalLogit`) read it.

Faults raise the named errors of :mod:`genpqr.exceptions` (all ``ValueError``):
:class:`~genpqr.exceptions.DuplicateActionLabelError`,
:class:`~genpqr.exceptions.MissingActionLabelError` (a label of the data not in the table),
:class:`~genpqr.exceptions.ActionFeatureError` (NaN/inf features, a dimension that disagrees).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..exceptions import ActionFeatureError, ActionTableError, DuplicateActionLabelError, MissingActionLabelError
from ._validation import short_list

__all__ = ["ActionTable", "as_action_table"]


def _members(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``values`` (n,) found among ``labels`` (K,), by hashing: O(n + K) (``np.isin`` compares
    object arrays, such as text labels, pair by pair: O(n K), minutes for 1e5 labels against
    themselves). Equality as ``==`` (1 and 1.0 match, '1' and 1 do not); a label that cannot be
    hashed falls back to comparisons."""
    try:
        table = set(labels.tolist())
        return np.fromiter((v in table for v in values.tolist()), dtype=bool, count=values.size)
    except TypeError:  # unhashable labels
        try:
            return np.isin(values, labels)
        except TypeError:  # labels that cannot be compared at all
            return np.zeros(values.size, dtype=bool)


@dataclass(frozen=True, eq=False)
class ActionTable:
    """K actions, each a label and a feature vector ``x_a`` in ``R^d``.

    Parameters
    ----------
    labels : array-like of shape (K,)
        Distinct labels (ints, strings, ...); their order is the order of the action codes.
    features : array-like of shape (K, d) or (K,)
        Finite real features, row ``k`` describing ``labels[k]`` (a 1-D array is one feature).
    feature_names : sequence of str, optional
        One name per feature column (default ``x0, x1, ...``).

    Raises
    ------
    DuplicateActionLabelError, ActionFeatureError, ActionTableError
    """

    labels: np.ndarray
    features: np.ndarray
    feature_names: tuple | None = None

    def __post_init__(self):
        labels = np.array(self.labels)
        if labels.ndim != 1 or labels.size == 0:
            raise ActionTableError(f"action table labels must be a non-empty 1-D sequence, got shape {labels.shape}")
        if labels.dtype == object and any(label is None for label in labels):
            raise ActionTableError("action table labels must not be missing (None)")
        uniq, counts = np.unique(labels, return_counts=True)
        if uniq.size != labels.size:
            raise DuplicateActionLabelError(f"action table lists label(s) {short_list(uniq[counts > 1], 10)} more "
                                            "than once; every action needs exactly one row")
        features = _feature_matrix(self.features, labels)
        names = self.feature_names
        names = tuple(f"x{j}" for j in range(features.shape[1])) if names is None else tuple(str(n) for n in names)
        if len(names) != features.shape[1]:
            raise ActionTableError(f"feature_names has {len(names)} name(s) but the features have "
                                   f"{features.shape[1]} column(s)")
        labels.setflags(write=False)
        features.setflags(write=False)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "features", features)
        object.__setattr__(self, "feature_names", names)

    def __eq__(self, other):
        return (isinstance(other, ActionTable) and np.array_equal(self.labels, other.labels)
                and np.array_equal(self.features, other.features) and self.feature_names == other.feature_names)

    __hash__ = None

    @property
    def n_actions(self) -> int:
        """K."""
        return int(self.labels.size)

    @property
    def n_features(self) -> int:
        """d."""
        return int(self.features.shape[1])

    def __len__(self) -> int:
        return self.n_actions

    def __repr__(self):
        return f"ActionTable({self.n_actions} actions {short_list(self.labels, 5)}, {self.n_features} feature(s))"

    def check_covers(self, actions, name: str = "actions") -> None:
        """:class:`~genpqr.exceptions.MissingActionLabelError` naming the labels of ``actions``
        that the table does not list."""
        observed = np.unique(np.asarray(actions))
        known = _members(observed, self.labels)
        if not known.all():
            raise MissingActionLabelError(
                f"{name} take(s) action label(s) {short_list(observed[~known], 10)} that the action table does not "
                f"list ({self.n_actions} labels: {short_list(self.labels, 10)}); add a row for each")

    def features_of(self, labels) -> np.ndarray:
        """Feature rows of ``labels``, shape (n, d)."""
        labels = np.asarray(labels)
        self.check_covers(labels, "labels")
        order = np.argsort(self.labels, kind="stable")
        return self.features[order[np.searchsorted(self.labels[order], labels)]]

    @classmethod
    def from_pandas(cls, frame, label: str | None = None, features=None) -> "ActionTable":
        """One row per action: the labels in column ``label`` (default: the index) and the
        features in the columns ``features`` (default: every other numeric column)."""
        import pandas as pd

        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"the action table must be a pandas DataFrame, got {type(frame).__name__}")
        if label is not None and label not in frame.columns:
            raise ActionTableError(f"the action table has no label column {label!r}; columns: {list(frame.columns)}")
        labels = frame.index.to_numpy() if label is None else frame[label].to_numpy()
        if features is None:
            features = [c for c in frame.columns if c != label and frame[c].dtype.kind in "iufb"]
        missing = [c for c in features if c not in frame.columns]
        if missing or not len(features):
            raise ActionTableError(f"the action table has no feature column(s) {missing or '(none numeric)'}; "
                                   f"columns: {list(frame.columns)}")
        return cls(labels, frame[list(features)].to_numpy(dtype=np.float64), tuple(features))

    def to_pandas(self, label: str = "action"):
        """The table as a frame: a ``label`` column and one column per feature
        (:meth:`from_pandas` with ``label=label`` reads it back)."""
        import pandas as pd

        frame = pd.DataFrame(np.asarray(self.features), columns=list(self.feature_names))
        frame.insert(0, label, self.labels)
        return frame


def _feature_matrix(features, labels) -> np.ndarray:
    try:
        arr = np.array(features, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ActionFeatureError(f"action features must be real numbers, got {np.asarray(features).dtype}") from exc
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] != labels.size or arr.shape[1] == 0:
        raise ActionTableError(f"action features must have shape (K, d) = ({labels.size}, d >= 1), one row per "
                               f"label, got {arr.shape}")
    bad = ~np.all(np.isfinite(arr), axis=1)
    if bad.any():
        raise ActionFeatureError(f"action features have NaN/inf in the row(s) of label(s) {short_list(labels[bad], 10)}")
    return arr


def as_action_table(table, name: str = "action_features") -> ActionTable:
    """An :class:`ActionTable` from an ActionTable, a pandas DataFrame (labels in the index,
    numeric feature columns) or a mapping ``label -> feature vector``."""
    if isinstance(table, ActionTable):
        return table
    if isinstance(table, Mapping):
        labels = list(table.keys())
        rows = [np.atleast_1d(np.asarray(table[k], dtype=np.float64)) for k in labels]
        if len({r.shape for r in rows}) > 1:
            raise ActionFeatureError(f"{name}: every action needs a feature vector of the same length, got lengths "
                                     f"{sorted({r.size for r in rows})}")
        return ActionTable(np.array(labels), np.vstack(rows) if rows else np.zeros((0, 1)))
    if hasattr(table, "columns") and hasattr(table, "index"):
        return ActionTable.from_pandas(table)
    raise TypeError(f"{name} must be a genpqr.data.ActionTable, a pandas DataFrame (index: labels) or a mapping "
                    f"label -> features, got {type(table).__name__}")

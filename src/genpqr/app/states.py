"""Tabular states of ``genpqr fit``: the state numbering (:class:`StateIndex`), when the
tabular mode is on, a transition model given before the states are numbered (``--transition``),
and what the normalization and transition factories receive: action labels typed as text
(:func:`label_matcher`) and per-row columns read per state or by nearest neighbour
(:func:`column_reader`, :class:`NearestStateLookup`). See :mod:`genpqr.app.workflow` for the rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..data._validation import data_row
from ..registry import GIVEN, ORDERED, SELECTED, TABULAR
from .config import FitConfig
from .data_file import match_column, match_labels

__all__ = ["StateIndex", "NearestStateLookup", "per_state", "decide_tabular", "tabular_states", "label_matcher",
           "column_reader"]



@dataclass
class StateIndex:
    """Map from (binned) state columns to tabular state indices.

    Attributes
    ----------
    columns : list of str
    bins : dict column -> ndarray of cut points
    keys : ndarray of shape (S, d)
        The (binned) column values of each state index.
    identity : bool
        True when the single (binned) column's value is its index.
    """

    columns: list
    bins: dict
    keys: np.ndarray
    identity: bool
    #: Text state columns -> their labels, sorted; a label's state value is its position.
    categories: dict = field(default_factory=dict)

    @property
    def n_states(self) -> int:
        return int(self.keys.shape[0])

    def binned(self, frame) -> np.ndarray:
        """(n, d) values with binned columns replaced by bin numbers."""
        import pandas as pd

        categories = getattr(self, "categories", {})  # (an index pickled before text labels has none)
        out = np.empty((len(frame), len(self.columns)))
        for j, col in enumerate(self.columns):
            if col in categories:  # a label not among the data's: -1, an unknown state
                out[:, j] = pd.Categorical(frame[col].astype(str), categories=categories[col]).codes
                continue
            values = frame[col].to_numpy(dtype=np.float64)
            out[:, j] = np.searchsorted(self.bins[col], values, side="right") if col in self.bins else values
        return out

    @classmethod
    def build(cls, frame, columns, bins, *, ordered: bool = False, n_states: int | None = None) -> "StateIndex":
        """Number the states of ``frame`` (see the module docstring); ``ordered``: the index
        must be the value (structured kernels); ``n_states``: the number of states required."""
        from .data_file import is_text

        edges = {c: np.asarray(e, dtype=np.float64) for c, e in bins.items()}
        categories = {c: np.sort(frame[c].astype(str).unique()) for c in columns
                      if c not in edges and is_text(frame[c])}
        if ordered and categories:
            raise ValueError(f"a structured or given transition model (--transition increment:/FILE.npy) needs "
                             f"ordered states, but state column(s) {sorted(categories)} hold text labels, which are "
                             f"unordered; encode them as integers in their order")
        probe = cls(list(columns), edges, np.empty((0, len(columns))), False, categories)
        values = probe.binned(frame)
        distinct = np.unique(values, axis=0)
        single_int = len(columns) == 1 and np.all(values >= 0) and np.all(values == np.round(values))
        if ordered and not single_int:
            raise ValueError("a structured or given transition model (--transition increment:/FILE.npy) needs one "
                             f"state column of non-negative integers (or one binned column), got {list(columns)}")
        if single_int:
            top = int(values.max()) + 1
            if columns[0] in edges:
                top = max(top, edges[columns[0]].size + 1)
            if n_states is not None:
                if n_states < top:
                    raise ValueError(f"{n_states} states were given (--n-states or the kernel) but the data has "
                                     f"state {top - 1}")
                top = n_states
            if ordered or n_states is not None or top <= 2 * distinct.shape[0]:
                return cls(list(columns), edges, np.arange(top, dtype=np.float64)[:, None], True, categories)
        if n_states is not None and n_states != distinct.shape[0]:
            raise ValueError(f"{n_states} states were given (--n-states or the kernel) but the data has "
                             f"{distinct.shape[0]} distinct states")
        return cls(list(columns), edges, distinct, False, categories)

    def transform(self, frame, what: str = "data") -> np.ndarray:
        """State index (n,) of every row; rows at unknown states raise ``ValueError``."""
        import pandas as pd

        values = self.binned(frame)
        if self.identity:
            idx = values[:, 0].astype(np.int64)
            bad = (values[:, 0] != idx) | (idx < 0) | (idx >= self.n_states)
        else:
            index = pd.MultiIndex.from_arrays(list(self.keys.T))
            idx = index.get_indexer(pd.MultiIndex.from_arrays(list(values.T)))
            bad = idx < 0
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            state = {c: (frame[c].iloc[row] if c in getattr(self, "categories", {}) else v)
                     for c, v in zip(self.columns, values[row].tolist())}
            raise ValueError(f"{what}: {data_row(row)} has a state {state} that does not occur in the data")
        return idx

    def labels(self):
        """DataFrame: ``state_index`` and each state column (bin labels ``[lo, hi)`` for binned ones)."""
        import pandas as pd

        table = pd.DataFrame({"state_index": np.arange(self.n_states)})
        for j, col in enumerate(self.columns):
            values = self.keys[:, j]
            if col in getattr(self, "categories", {}):
                table[col] = self.categories[col][values.astype(np.int64)]
            elif col in self.bins:
                e = np.concatenate([[-np.inf], self.bins[col], [np.inf]])
                table[col] = [f"[{e[int(b)]:g}, {e[int(b) + 1]:g})" for b in values]
            elif np.all(values == np.round(values)):
                table[col] = values.astype(np.int64)
            else:
                table[col] = values
        return table


class NearestStateLookup:
    """A per-row column read at new states by 1-nearest neighbour among logged rows (state
    columns scaled by their standard deviation). Callable ``states (n, d) -> (n,)``; picklable."""

    def __init__(self, states, values):
        self.states = np.asarray(states, dtype=np.float64)
        self.values = np.asarray(values)
        scale = self.states.std(axis=0)
        self.scale = np.where(scale > 0, scale, 1.0)
        self._tree = None

    def __call__(self, states):
        from scipy.spatial import cKDTree

        if self._tree is None:
            self._tree = cKDTree(self.states / self.scale)
        _, idx = self._tree.query(np.asarray(states, dtype=np.float64) / self.scale, k=1)
        return self.values[np.asarray(idx, dtype=np.int64)]

    def __getstate__(self):
        return {**self.__dict__, "_tree": None}


def per_state(frame, column: str, index: np.ndarray, n_states: int, what: str):
    """(S,) table of a per-row column; rows at one state must agree."""
    import pandas as pd

    ok = frame[column].notna().to_numpy()
    grouped = pd.DataFrame({"s": index[ok], "v": frame[column].to_numpy()[ok]}).groupby("s")["v"]
    counts = grouped.nunique()
    if (counts > 1).any():
        s = int(counts.index[counts.to_numpy() > 1][0])
        values = sorted(grouped.get_group(s).unique().tolist(), key=str)[:2]
        raise ValueError(f"column {column!r} gives different {what}s at one state (state_index {s}: {values[0]!r} and "
                         f"{values[1]!r}); it must hold one value per state")
    first = grouped.first()
    present = set(np.unique(index).tolist())
    lacking = sorted(present - set(first.index.tolist()))
    if lacking:
        raise ValueError(f"column {column!r} has no {what} for state_index {lacking[:5]} (every state in the data "
                         f"needs one)")
    fill = frame[column].dropna().mode().iloc[0]
    table = np.array([fill] * n_states, dtype=object)
    table[first.index.to_numpy()] = first.to_numpy()
    return table


def decide_tabular(config: FitConfig, frame) -> bool:
    """Tabular mode: ``--q-model exact``, ``--bins``, or no ``--q-model`` (or ``auto``) and integer
    (or text) state columns."""
    import pandas as pd

    from .data_file import is_text

    q = config.q_model
    if q is not None and q.can(SELECTED):  # auto, GenPQR()'s default: decided here as without --q-model
        q = None
    if q is not None and q.can(TABULAR):
        return True
    if config.bins:
        if q is not None:
            raise ValueError(f"--bins discretizes the states for the tabular mode (--q-model exact); it cannot be "
                             f"combined with --q-model {q}")
        return True
    if q is None:  # integer, boolean or text labels (each label one state)
        return all(pd.api.types.is_integer_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c])
                   or is_text(frame[c]) for c in config.state)
    return False


def tabular_states(config: FitConfig, frame, labels):
    """The state numbering of the tabular mode, and the transition model given before it (a
    :data:`~genpqr.registry.GIVEN` one of ``--transition``: a kernel file, whose states fix the
    count, or ``increment:``; None otherwise). An :data:`~genpqr.registry.ORDERED` model numbers
    the states by their value."""
    spec = config.transition
    n_states, transition_model = config.n_states, None
    if spec.can(GIVEN):
        transition_model = spec.build(n_actions=labels.size, label=label_matcher(config, labels), seed=config.seed)
        if hasattr(transition_model, "shape"):  # a kernel: its states are the fit's
            n_states = transition_model.shape[-1]
            if config.n_states is not None and config.n_states != n_states:
                raise ValueError(f"--n-states {config.n_states} differs from the {n_states} states of the transition "
                                 f"kernel {spec}")
    index = StateIndex.build(frame, config.state, config.bins, ordered=spec.can(ORDERED), n_states=n_states)
    return index, transition_model


def label_matcher(config: FitConfig, labels):
    """``label(text, what)``: the data's action label typed as ``text`` (what the normalization and
    transition factories receive); ``ValueError`` listing the labels when it is none."""
    return lambda text, what: match_labels([text], labels, what, config.action)[0]


def column_reader(config: FitConfig, frame, labels, index_rows, n_states):
    """``state_column(name, holds, what)`` for the normalization factories: the column's value per
    state (tabular: ``index_rows`` is the state index per row; rows at a state must agree), else
    a :class:`NearestStateLookup` at new states. ``holds``: ``"labels"`` (matched to the action
    labels) or ``"numbers"``."""
    label_dtype = labels.dtype if labels.dtype.kind in "iufb" else object

    def state_column(name, holds, what):
        column = frame[name]
        if holds == "labels":
            column = match_column(column, labels, f"state anchor in column {name!r}:", config.action)
        if index_rows is not None:
            table = per_state(frame.assign(**{name: column}), name, index_rows, n_states, what)
            return np.asarray(table.tolist(), dtype=label_dtype) if holds == "labels" else \
                np.asarray(table, dtype=np.float64)
        ok = column.notna().to_numpy()
        values = column.to_numpy()[ok]
        values = values.astype(np.float64) if holds == "numbers" else np.asarray(values.tolist(), dtype=label_dtype)
        return NearestStateLookup(frame.loc[ok, config.state].to_numpy(dtype=np.float64), values)
    return state_column

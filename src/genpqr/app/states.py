"""Tabular states of ``genpqr fit``: the state numbering (:class:`StateIndex`), when the
tabular mode is on, the transition model (``--transition``), per-row normalization columns
read per state or by nearest neighbour (:class:`NearestStateLookup`), and the normalization
of a parsed spec (:func:`make_normalization`). See :mod:`genpqr.app.workflow` for the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..data.validation import data_row
from .config import FitConfig, parse_transition
from .data_file import match_column, match_labels

__all__ = ["StateIndex", "NearestStateLookup", "per_state", "decide_tabular", "load_kernel", "tabular_states",
           "make_normalization", "SPARSE_FILE_BYTES"]

#: ``.npy`` kernel files larger than this are read memory-mapped and kept as CSR when sparse
#: (:func:`load_kernel`): 256 MiB, e.g. S = 1,000 states x K = 33 actions dense.
SPARSE_FILE_BYTES = 256 * 1024 ** 2
_BLOCK_BYTES = 64 * 1024 ** 2


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

    @property
    def n_states(self) -> int:
        return int(self.keys.shape[0])

    def binned(self, frame) -> np.ndarray:
        """(n, d) values with binned columns replaced by bin numbers."""
        out = np.empty((len(frame), len(self.columns)))
        for j, col in enumerate(self.columns):
            values = frame[col].to_numpy(dtype=np.float64)
            out[:, j] = np.searchsorted(self.bins[col], values, side="right") if col in self.bins else values
        return out

    @classmethod
    def build(cls, frame, columns, bins, *, ordered: bool = False, n_states: int | None = None) -> "StateIndex":
        """Number the states of ``frame`` (see the module docstring); ``ordered``: the index
        must be the value (structured kernels); ``n_states``: the number of states required."""
        edges = {c: np.asarray(e, dtype=np.float64) for c, e in bins.items()}
        probe = cls(list(columns), edges, np.empty((0, len(columns))), False)
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
                return cls(list(columns), edges, np.arange(top, dtype=np.float64)[:, None], True)
        if n_states is not None and n_states != distinct.shape[0]:
            raise ValueError(f"{n_states} states were given (--n-states or the kernel) but the data has "
                             f"{distinct.shape[0]} distinct states")
        return cls(list(columns), edges, distinct, False)

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
            raise ValueError(f"{what}: {data_row(row)} has a state {dict(zip(self.columns, values[row].tolist()))} "
                             f"that does not occur in the data")
        return idx

    def labels(self):
        """DataFrame: ``state_index`` and each state column (bin labels ``[lo, hi)`` for binned ones)."""
        import pandas as pd

        table = pd.DataFrame({"state_index": np.arange(self.n_states)})
        for j, col in enumerate(self.columns):
            values = self.keys[:, j]
            if col in self.bins:
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
    """Tabular mode: ``--q-model exact``, ``--bins``, or no ``--q-model`` and integer state columns."""
    import pandas as pd

    q = config.q_model
    if q == "exact":
        return True
    if config.bins:
        if q is not None:
            raise ValueError(f"--bins discretizes the states for the tabular mode (--q-model exact); it cannot be "
                             f"combined with --q-model {q}")
        return True
    if q is None:
        return all(pd.api.types.is_integer_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c])
                   for c in config.state)
    return False


def load_kernel(path: str, n_actions: int, what: str = "transition kernel", n_states: int | None = None):
    """The kernel file: shape (S, K, S) or (S*K, S) with K = ``n_actions`` (the data's actions)
    and, when given, S = ``n_states``. Errors name ``what`` (the flag) and the file.

    A ``.npz`` file holds a scipy sparse matrix (``scipy.sparse.save_npz``) of shape (S*K, S),
    row ``s*K + a``, and is kept sparse. A ``.npy`` file above :data:`SPARSE_FILE_BYTES` is read
    memory-mapped, block by block, into a CSR matrix when at most a third of its entries are
    non-zero (a kernel with a few next states per pair); smaller or fuller files stay dense."""
    kernel = _read_npz(path, what) if str(path).endswith(".npz") else _read_npy(path, what)
    K = n_actions
    shape = tuple(kernel.shape)
    ok = ((kernel.ndim == 3 and shape[1] == K and shape[0] == shape[2] > 0)
          or (kernel.ndim == 2 and shape[1] > 0 and shape[0] == shape[1] * K))
    if not ok:
        S = shape[-1] if kernel.ndim else "S"
        raise ValueError(f"the {what} {path!r} must have shape (S, K, S) = ({S}, {K}, {S}) or (S*K, S) = "
                         f"({S}*{K}, {S}) for S states and the data's K = {K} actions (in sorted label order), got "
                         f"{shape}")
    if n_states is not None and shape[-1] != n_states:
        raise ValueError(f"the {what} {path!r} has {shape[-1]} states (shape {shape}), but the fit has {n_states}")
    return _sparse_rows(kernel) if isinstance(kernel, np.memmap) else kernel


def _sparse_rows(kernel: np.memmap):
    """A memory-mapped (S, K, S) or (S*K, S) kernel as CSR (S*K, S), read in blocks of rows; the
    array itself (read into memory) when more than a third of its entries are non-zero."""
    S = kernel.shape[-1]
    rows = kernel.reshape(-1, S)
    block = max(1, _BLOCK_BYTES // (8 * S))
    parts, nnz = [], 0
    for start in range(0, rows.shape[0], block):
        parts.append(sp.csr_matrix(np.asarray(rows[start:start + block], dtype=np.float64)))
        nnz += parts[-1].nnz
        if 3 * nnz > rows.size:
            return np.array(kernel)  # a copy in memory, the file closed
    return sp.vstack(parts, format="csr")


def _read_npz(path: str, what: str):
    """A scipy sparse matrix from a ``.npz`` file written by ``scipy.sparse.save_npz``."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{what} file {path!r} does not exist")
    try:
        kernel = sp.load_npz(path)
    except (ValueError, OSError, KeyError) as exc:
        raise ValueError(f"cannot read the {what} {path!r}: {' '.join(str(exc).split())}; write a sparse (S*K, S) "
                         f"matrix with scipy.sparse.save_npz (or a dense array with numpy.save, .npy)") from None
    if not np.issubdtype(kernel.dtype, np.number):
        raise ValueError(f"the {what} {path!r} must hold numbers, got dtype {kernel.dtype}")
    return kernel.tocsr()


def _read_npy(path: str, what: str) -> np.ndarray:
    """A numeric array from a ``.npy`` file; ``ValueError`` naming ``what`` and the file otherwise."""
    if not Path(path).exists():
        raise FileNotFoundError(f"{what} file {path!r} does not exist")
    if Path(path).is_dir():
        raise ValueError(f"{what} file {path!r} is a folder; expected a .npy file written by numpy.save")
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic != b"\x93NUMPY":
        raise ValueError(f"cannot read the {what} {path!r}: it is not a NumPy .npy file (no .npy header); write the "
                         f"array with numpy.save")
    try:
        big = Path(path).stat().st_size > SPARSE_FILE_BYTES
        kernel = np.load(path, allow_pickle=False, mmap_mode="r" if big else None)
    except (ValueError, OSError) as exc:
        why = ("it holds Python objects, not numbers" if "pickle" in str(exc) or "Python objects" in str(exc)
               else " ".join(str(exc).split()))
        raise ValueError(f"cannot read the {what} {path!r}: {why}; write a numeric array with numpy.save") from None
    if not np.issubdtype(kernel.dtype, np.number):
        raise ValueError(f"the {what} {path!r} must hold numbers, got dtype {kernel.dtype}")
    return kernel


def tabular_states(config: FitConfig, frame, labels):
    """The state numbering and the transition model of the tabular mode."""
    tkind, targ = parse_transition(config.transition)
    n_states, transition_model = config.n_states, None
    if tkind == "file":
        transition_model = load_kernel(targ, n_actions=labels.size)
        n_states = transition_model.shape[-1]
        if config.n_states is not None and config.n_states != n_states:
            raise ValueError(f"--n-states {config.n_states} differs from the {n_states} states of the transition "
                             f"kernel {targ}")
    elif tkind == "increment":
        from ..structural.ddc import IncrementKernel

        reset = None if targ[1] is None else match_labels([targ[1]], labels, "reset action", config.action)[0]
        transition_model = IncrementKernel(targ[0], reset)
    index = StateIndex.build(frame, config.state, config.bins, ordered=tkind not in ("counts", "auto", "model"), n_states=n_states)
    return index, transition_model


def make_normalization(kind, arg, *, frame, config, labels, index_rows, n_states):
    """The Normalization of the spec; ``index_rows`` is the state index per row (tabular) or None."""
    from .. import normalization as N

    if kind == "mean-zero":
        return N.mean_zero()
    if kind == "anchor":
        return N.anchor_action(match_labels([arg], labels, "anchor action", config.action)[0])
    if kind == "behavior":
        return N.behavior()
    what = "anchor action" if kind == "state-anchor" else "value"
    column = frame[arg]
    if kind == "state-anchor":
        column = match_column(column, labels, f"state anchor in column {arg!r}:", config.action)
    if index_rows is not None:
        table = per_state(frame.assign(**{arg: column}), arg, index_rows, n_states, what)
        if kind == "state-anchor":
            return N.state_anchor(np.asarray(table.tolist(), dtype=labels.dtype if labels.dtype.kind in "iufb"
                                             else object))
        return N.value(np.asarray(table, dtype=np.float64))
    ok = column.notna().to_numpy()
    values = column.to_numpy()[ok]
    values = values.astype(np.float64) if kind == "value" else np.asarray(
        values.tolist(), dtype=labels.dtype if labels.dtype.kind in "iufb" else object)
    lookup = NearestStateLookup(frame.loc[ok, config.state].to_numpy(dtype=np.float64), values)
    return N.state_anchor(lookup) if kind == "state-anchor" else N.value(lookup)



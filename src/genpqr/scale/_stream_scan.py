r"""The checks of the out-of-core reader (:mod:`genpqr.scale`) that make it accept and refuse
what the in-memory reader (:func:`genpqr.data.from_pandas`) accepts and refuses.

* **One schema.** The files of a Parquet folder are read with one schema: each column's types in
  the files holding rows are unified (integer widths, integers with floats, string kinds; an empty
  file's null-typed columns are ignored); a column stored as numbers in one file and as text in
  another is refused naming both files (:func:`unified_schema`).
* **One validation pass** (:func:`scan_frames`, run by :meth:`genpqr.scale.ParquetSource.scan`):
  over chunks of whole episodes, the checks :func:`genpqr.data.from_pandas` runs on a frame
  (:func:`genpqr.data.check_long_frame`: numeric states, a finite time column, one action label
  type, no missing action), plus any caller's check (``genpqr fit`` passes the row checks of
  its in-memory reader, with the rows' positions in the dataset), and it gathers what the later
  passes must know of the *whole* dataset: the action labels, the time steps of the gap rule
  (:class:`genpqr.data.TimeSteps`: a chunk is judged by the whole data's modal step, as in
  memory, not by its own) and, for a tabular fit, the distinct state values (numbered as in
  memory, so large sparse ids are not used as indices).
* **Reading** errors name the file: a path that is no Parquet dataset, a damaged file
  (:func:`open_dataset`, :func:`read_footer`, :func:`checked_batches`), and rows not sorted by
  episode, the one requirement the in-memory reader does not have (:func:`check_sorted`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from ..data.validation import plain
from ..data import TimeSteps, check_long_frame, time_steps

__all__ = ["SourceScan", "scan_frames", "unified_schema", "open_dataset", "dataset_columns", "checked_batches",
           "read_footer", "check_sorted"]


@dataclass
class SourceScan:
    """What the validation pass learnt about some whole episodes (``+``: their union).

    Attributes
    ----------
    n_rows, n_episodes : int
    labels : ndarray of shape (K,) or None
        The sorted distinct action labels (None: no row).
    steps : TimeSteps
        The within-episode time steps; ``steps.expected`` is the gap rule's expected step.
    state_values : ndarray of shape (m,) or None
        The sorted distinct values of the (single) state column, when gathered.
    """

    n_rows: int = 0
    n_episodes: int = 0
    labels: np.ndarray | None = None
    steps: TimeSteps = field(default_factory=TimeSteps)
    state_values: np.ndarray | None = None

    def __add__(self, other: "SourceScan") -> "SourceScan":
        return SourceScan(self.n_rows + other.n_rows, self.n_episodes + other.n_episodes,
                          _union(self.labels, other.labels, "action"), self.steps + other.steps,
                          _union(self.state_values, other.state_values, "state"))


def scan_frames(frames: Iterable, *, episode: str, time: str, state: Sequence[str], action: str,
                check: Callable | None = None, states: bool = False, first_row: int = 0) -> SourceScan:
    """One :class:`SourceScan` of ``frames`` (pandas frames of whole episodes, in dataset order;
    ``first_row``: the dataset position of the first frame's first row). ``check(frame,
    first_row)`` runs first on every frame; ``states``: gather the distinct values of the single
    state column."""
    total = SourceScan()
    for frame in frames:
        if check is not None:
            check(frame, first_row)
        total = total + _scan_frame(frame, episode, time, list(state), action, states)
        first_row += len(frame)
    return total


def _scan_frame(frame, episode, time, state, action, states) -> SourceScan:
    """The :class:`SourceScan` of one frame of whole episodes."""
    check_long_frame(frame, episode, time, state, action)
    ordered = frame.sort_values([episode, time], kind="stable")
    values = np.unique(frame[state[0]].to_numpy()) if states else None
    return SourceScan(len(frame), int(frame[episode].nunique()), np.unique(frame[action].to_numpy()),
                      time_steps(ordered, episode, time), values)


def _union(a, b, what: str):
    if a is None or b is None:
        return b if a is None else a
    try:
        return np.union1d(a, b)
    except TypeError:  # numbers and text in different files of an untyped column
        raise ValueError(f"the {what} column mixes numbers and text (e.g. {a[0]!r} and {b[0]!r}); use one "
                         f"type") from None


# ============================================================================ one schema
def unified_schema(fragments, columns: Sequence[str], where: str):
    """The ``pyarrow`` schema of ``columns`` that every file of a dataset is read with.

    ``fragments``: the dataset's file fragments. A file with no row does not count (an empty
    part written with null-typed columns); in the others each column's types are unified
    permissively (``int32`` with ``int64``, integers with floats, ``string`` with
    ``large_string``). ``ValueError`` naming the column and two files when its types cannot be
    unified (numbers in one file, text in another), or when a file holding rows lacks it."""
    import pyarrow as pa

    parts = [(f.path, f.physical_schema) for f in fragments if _n_rows(f)]
    if not parts:
        return pa.schema([(c, pa.null()) for c in columns])
    fields = []
    for column in columns:
        lacking = [path for path, schema in parts if column not in schema.names]
        if lacking:
            raise ValueError(f"the Parquet file {lacking[0]!r} of {where!r} has no column {column!r}, which other "
                             f"files have; every file of the dataset needs the same columns")
        typed = [(path, schema.field(column).type) for path, schema in parts]
        fields.append(pa.field(column, _unify(column, typed)))
    return pa.schema(fields)


def _unify(column: str, typed: list):
    """One type for ``column`` from ``(path, type)`` of each file (nulls ignored)."""
    import pyarrow as pa

    known = [(path, t) for path, t in typed if not pa.types.is_null(t)]
    if not known:
        return pa.null()
    try:
        return pa.unify_schemas([pa.schema([(column, t)]) for _, t in known],
                                promote_options="permissive").field(column).type
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        (p1, t1) = known[0]
        (p2, t2) = next(pt for pt in known if pt[1] != t1)
        mixed = " mixes numbers and text" if {_kind(t1), _kind(t2)} == {"numbers", "text"} else " has two types"
        raise ValueError(f"column {column!r}{mixed} across the Parquet files: {_kind(t1)} ({t1}) in {p1!r} but "
                         f"{_kind(t2)} ({t2}) in {p2!r}; write it with one type in every file") from None


def _kind(t) -> str:
    import pyarrow as pa

    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "numbers"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text"
    return "booleans" if pa.types.is_boolean(t) else str(t)


def _n_rows(fragment) -> int:
    return int(fragment.metadata.num_rows)


# ============================================================================ reading
def open_dataset(path):
    """``pyarrow.dataset.dataset(path)`` of Parquet files, its errors as ``ValueError`` naming ``path``."""
    import pyarrow.dataset as ds

    try:
        raw = ds.dataset(str(path), format="parquet")
    except Exception as exc:  # pyarrow raises several types for unreadable files
        raise ValueError(f"cannot read {str(path)!r} as a Parquet dataset (a .parquet file or a folder of "
                         f"them): {_first_line(exc)}") from None
    if not raw.files:
        raise ValueError(f"data path {str(path)!r} is a folder with no Parquet file; expected a .csv or .parquet "
                         "file, or a folder of .parquet files")
    return raw


def dataset_columns(path, raw=None) -> list[str]:
    """Every column name of any file of the Parquet dataset at ``path`` (from the file footers;
    ``raw``: the dataset opened by :func:`open_dataset`)."""
    names = {}
    for fragment in (open_dataset(path) if raw is None else raw).get_fragments():
        names.update(dict.fromkeys(read_footer(lambda: fragment.physical_schema.names, fragment.path)))
    return list(names)


def checked_batches(batches, path):
    """``batches``, with pyarrow's read errors (a damaged file) as ``ValueError`` naming the file."""
    import pyarrow as pa

    try:
        yield from batches
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"cannot read the Parquet file {str(path)!r}: {_first_line(exc)}") from None


def read_footer(fn, path):
    """``fn()``; a pyarrow error (a damaged file) becomes ``ValueError`` naming ``path``."""
    import pyarrow as pa

    try:
        return fn()
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"cannot read the Parquet file {str(path)!r}: {_first_line(exc)}") from None


def _first_line(exc) -> str:
    return " ".join(str(exc).split())[:300]


def check_sorted(ids, previous, position: int, name: str):
    """Raise unless ``ids`` continue a non-decreasing sequence after ``previous``; return the last id."""
    if ids.size == 0:
        return previous
    whole = ids if previous is None else np.concatenate([np.asarray([previous], dtype=ids.dtype), ids])
    try:
        down = np.flatnonzero(whole[1:] < whole[:-1])
    except TypeError as exc:
        raise ValueError(f"episode column {name!r} mixes types that cannot be ordered: {exc}") from None
    if down.size:
        i = int(down[0])
        row = position + i + (2 if previous is None else 1)  # 1-based: ids[i + 1], or ids[i] after previous
        raise ValueError(
            f"the Parquet dataset must be sorted by the episode column {name!r} (files in path order, rows in file "
            f"order) so that each episode's rows are contiguous; episode id {plain(whole[i + 1])!r} at data row {row} "
            f"comes after {plain(whole[i])!r}. Sort it, e.g. frame.sort_values([{name!r}, time]).to_parquet(...)")
    return ids[-1]

r"""Out-of-core reading: a Parquet dataset (one file or a folder of files) in long format,
streamed in chunks of whole episodes, whole or one partition at a time.

Long format as in :func:`genpqr.data.from_pandas`: one row per (episode, time step); the next
state of a row is the state of the next time step of its episode.

**Requirement.** The rows of an episode are contiguous: the dataset is *sorted by episode id*
(non-decreasing in the order of the files, sorted by path, and of the rows in each file).
Time steps inside an episode may come in any order. The reader checks this in O(1) memory
(each id against the one before it) and raises ``ValueError`` naming the file position at
the first decrease. Write such a dataset with e.g.
``frame.sort_values([episode, time]).to_parquet(folder / "part-0.parquet")``.

**Chunks.** Record batches are read with :mod:`pyarrow.dataset` and gathered until a chunk
holds ``chunk_rows`` rows; the rows of the chunk's last episode are carried over to the next
chunk (it may continue there), so every chunk holds whole episodes and
:func:`genpqr.data.from_pandas` on a chunk pairs next states exactly as on the whole frame.
Memory: one chunk plus the longest episode.

**Partitions** (for a distributed fit, :mod:`genpqr.scale`). The Parquet row groups are
split into contiguous runs (:meth:`ParquetSource.group_row_groups`); a scan of the episode
and action columns of each run (``scan_row_groups``, one task each) gives the first and
last episode id of every row group, from which :meth:`ParquetSource.plan` makes
``Partition`` objects that are *episode-whole*: an episode belongs to the partition
holding its first row; that partition reads on into the row groups after it while the
episode goes on, and the next partition skips those leading rows. The plan also checks the
order across row groups. ``source.chunks(labels, partition=p)`` then streams the chunks of
``p`` alone, so the chunks of all partitions are the chunks of the dataset.

**Checks**. The files are read with one schema (an empty part's
null-typed columns ignored; a column typed as numbers in one file and text in another refused,
naming both). :meth:`ParquetSource.scan` is one validation pass over the chunks that runs the
in-memory reader's frame checks and learns what the later passes need of the *whole* data: the
action labels, the expected time step of the gap rule (``expected_step``: every chunk is then
judged by the whole data's modal step, so a gap is found whatever the chunk size) and, for a
tabular fit, the distinct state values (``state_values``: each chunk's states are replaced by
their positions among them, the in-memory numbering of sparse ids).
:func:`genpqr.scale.fit_parquet` and :func:`genpqr.scale.fit_dask` run it first.

The checks that make this reader accept and refuse what the in-memory reader
(:func:`genpqr.data.from_pandas`) accepts and refuses:

* **One schema.** The files of a Parquet folder are read with one schema: each column's types in
  the files holding rows are unified (integer widths, integers with floats, string kinds; an empty
  file's null-typed columns are ignored); a column stored as numbers in one file and as text in
  another is refused naming both files (``unified_schema``).
* **One validation pass** (``scan_frames``, run by :meth:`ParquetSource.scan`): over chunks of
  whole episodes, the checks :func:`genpqr.data.from_pandas` runs on a frame
  (``genpqr.data._long_format.check_long_frame``: numeric states, a finite time column, one action label
  type, no missing action), plus any caller's check (``genpqr fit`` passes the row checks of
  its in-memory reader, with the rows' positions in the dataset), and it gathers what the later
  passes must know of the *whole* dataset: the action labels, the time steps of the gap rule
  (``genpqr.data._long_format.TimeSteps``: a chunk is judged by the whole data's modal step, as in
  memory, not by its own) and, for a tabular fit, the distinct state values (numbered as in
  memory, so large sparse ids are not used as indices).
* **Reading** errors name the file: a path that is no Parquet dataset, a damaged file
  (``open_dataset``, ``read_footer``, ``checked_batches``), and rows not sorted by
  episode, the one requirement the in-memory reader does not have (``check_sorted``).

The per-chunk statistics and the passes over a source or a partition are in the statistics
module of :mod:`genpqr.scale`; the fits in its fit module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from ..data._progress import bar_width
from ..data import Transitions, from_arrays, from_pandas
from ..data._clock import StampSteps, is_timestamps, stamp_steps, timestamp_ns, timestamps_as_steps
from ..data._long_format import TimeSteps, check_long_frame, episode_segments, long_format_rows, time_steps
from ..data._validation import plain

__all__ = ["ParquetSource", "Partition", "RowGroup", "RowGroupScan", "SourceScan", "scan_row_groups", "as_source",
           "DEFAULT_CHUNK_ROWS", "scan_frames", "unified_schema", "open_dataset", "dataset_columns", "checked_batches",
           "read_footer", "check_sorted"]

#: Rows per chunk by default: on the 1e7-row closed-form benchmark (docs/benchmarks.md) 250,000
#: rows took 43 s and 0.9 GB peak against 57 s and 1.9 GB for 1,000,000.
DEFAULT_CHUNK_ROWS = 250_000


@dataclass(frozen=True)
class RowGroup:
    """One Parquet row group: ``path``, its ``index`` in the file, ``n_rows`` and ``first_row``
    (its position in the dataset, files in path order)."""

    path: str
    index: int
    n_rows: int
    first_row: int


@dataclass(frozen=True)
class RowGroupScan:
    """What a partition plan needs of a row group: rows, first and last episode id, and
    ``first_run``, the number of leading rows with the first id."""

    n_rows: int
    first: object
    last: object
    first_run: int


@dataclass(frozen=True)
class Partition:
    """A contiguous run of row groups owning the episodes whose first row lies in it.

    Attributes
    ----------
    index : int
    row_groups : tuple of RowGroup
        Its own row groups, in dataset order.
    tail : tuple of RowGroup
        The row groups after it that hold the rest of its last episode (read only while that
        episode goes on).
    skip : tuple
        ``()`` or ``(episode_id,)``: its leading rows of this episode belong to a partition before it.
    n_rows : int
        Rows it owns.
    offset : int
        Rows owned by the partitions before it (its first row's position in episode order).
    """

    index: int
    row_groups: tuple
    tail: tuple = ()
    skip: tuple = ()
    n_rows: int = 0
    offset: int = 0


@dataclass
class ParquetSource:
    """A long-format Parquet dataset read in chunks of whole episodes.

    Parameters
    ----------
    path : str or Path
        A ``.parquet`` file or a folder of them (read with ``pyarrow.dataset``).
    episode, time, state, action, terminated, truncated, outcome : column names
        As in :func:`genpqr.data.from_pandas`.
    chunk_rows : int
        Rows per chunk (at least; a chunk grows to hold an episode longer than this).
    keep_last, time_gaps : as in :func:`genpqr.data.from_pandas`.
    expected_step : float, "episode" or None
        The gap rule's expected step over the whole dataset (``SourceScan.steps.expected``);
        None until :meth:`scan` sets it (chunks are then judged by their own rows).
    state_values : ndarray of shape (S,), optional
        Sorted distinct values of the single state column: each chunk's state is replaced by its
        position among them (tabular state indices ``0..S-1``). None: the values are used as they are.
    clock : genpqr.data._clock.Clock, optional
        For a time column of timestamps (``datetime64``, dates, ISO 8601 text): the whole
        dataset's numbering (``SourceScan.stamps.clock()``, unit and origin), so that every chunk
        is numbered as the whole frame in memory; None until :meth:`scan` sets it (chunks are
        then numbered by their own rows).

    Notes
    -----
    A source pickles without its open dataset (a Dask worker reopens it).
    """

    path: object
    episode: str
    time: str
    state: str | Sequence[str]
    action: str
    terminated: str | None = None
    truncated: str | None = None
    outcome: str | None = None
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    keep_last: bool = True
    time_gaps: str = "error"
    expected_step: object = None
    state_values: object = field(default=None, repr=False, compare=False)
    clock: object = None
    _dataset: object = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        path = Path(self.path)
        if not path.exists():
            raise FileNotFoundError(f"data path {str(path)!r} does not exist")
        if not (isinstance(self.chunk_rows, (int, np.integer)) and self.chunk_rows > 0):
            raise ValueError(f"chunk_rows must be a positive int, got {self.chunk_rows!r}")
        self.state = [self.state] if isinstance(self.state, str) else list(self.state)
        names = set(self.column_names())
        missing = [c for c in self.columns if c not in names]
        if missing:
            raise ValueError(f"the Parquet dataset {str(path)!r} is missing column(s) {missing}; it has "
                             f"{sorted(names)}")

    def __getstate__(self):
        return {**self.__dict__, "_dataset": None}

    @property
    def dataset(self):
        """The ``pyarrow.dataset.Dataset`` of the columns read, with one schema for every file
        (``genpqr.scale._scan.unified_schema``; opened on first use)."""
        if self._dataset is None:
            import pyarrow.dataset as ds

            raw = self._open()
            names = set(self.column_names(raw))
            schema = unified_schema(raw.get_fragments(), [c for c in self.columns if c in names], str(self.path))
            self._dataset = ds.dataset(raw.files, schema=schema, format="parquet", filesystem=raw.filesystem)
        return self._dataset

    def _open(self):
        return open_dataset(self.path)

    def column_names(self, raw=None) -> list[str]:
        """Every column name of any file of the dataset (from the file footers)."""
        return dataset_columns(self.path, self._open() if raw is None else raw)

    @property
    def columns(self) -> list[str]:
        cols = [self.episode, self.time, self.action, *self.state, self.terminated, self.truncated, self.outcome]
        return list(dict.fromkeys(c for c in cols if c))  # a state column may be the time or the episode

    def count_rows(self) -> int:
        """Rows in the dataset (from the file metadata; no data read)."""
        return int(self.dataset.count_rows())

    def _fragments(self):
        return sorted(self.dataset.get_fragments(), key=lambda f: f.path)

    def _batch_size(self) -> int:
        return min(int(self.chunk_rows), 1 << 20)

    def _batches(self, columns):
        """Record batches in dataset order: files sorted by path, rows in file order (each file's
        columns cast to the dataset's schema)."""
        for fragment in self._fragments():
            batches = fragment.to_batches(schema=self.dataset.schema, columns=columns, batch_size=self._batch_size())
            yield from checked_batches(batches, fragment.path)

    def action_labels(self, progress=None) -> np.ndarray:
        """Sorted unique action labels (one pass over the action column only)."""
        labels = None
        with _bar(self.count_rows(), "reading actions", progress) as bar:
            for batch in self._batches([self.action]):
                labels = _union(labels, batch.column(0))
                bar.update(batch.num_rows)
        if labels is None or labels.size == 0:
            raise ValueError(f"the Parquet dataset {str(self.path)!r} has no rows")
        return labels

    # ------------------------------------------------------------------ partitions
    def row_groups(self) -> list[RowGroup]:
        """Every row group in dataset order (from the file metadata; no data read)."""
        out, position = [], 0
        for fragment in self._fragments():
            meta = fragment.metadata
            for i in range(meta.num_row_groups):
                n = int(meta.row_group(i).num_rows)
                out.append(RowGroup(fragment.path, i, n, position))
                position += n
        return out

    def group_row_groups(self, npartitions: int | None = None) -> list[tuple]:
        """The row groups split into at most ``npartitions`` contiguous runs of about equal rows
        (default: one per ``chunk_rows`` rows, at most one per row group)."""
        groups = [g for g in self.row_groups() if g.n_rows]
        if not groups:
            raise ValueError(f"the Parquet dataset {str(self.path)!r} has no rows")
        total = sum(g.n_rows for g in groups)
        if npartitions is None:
            npartitions = -(-total // int(self.chunk_rows))
        if not (isinstance(npartitions, (int, np.integer)) and not isinstance(npartitions, bool) and npartitions > 0):
            raise ValueError(f"npartitions must be a positive int or None, got {npartitions!r}")
        cum = np.cumsum([g.n_rows for g in groups])
        cuts = np.searchsorted(cum, total * np.arange(1, npartitions) / npartitions, side="left") + 1
        bounds = [0, *sorted({int(c) for c in cuts if 0 < c < len(groups)}), len(groups)]
        return [tuple(groups[i:j]) for i, j in zip(bounds[:-1], bounds[1:])]

    def plan(self, groups, scans) -> list[Partition]:
        """Episode-whole ``Partition`` objects from runs of row groups and their scans
        (``scan_row_groups``, one list of ``RowGroupScan`` per run); raises
        ``ValueError`` where the episode ids decrease from one row group to the next."""
        P = len(groups)
        owned, tails, skip, started = [0] * P, [[] for _ in range(P)], [()] * P, [False] * P
        owner, open_id = None, None
        for p, (group, group_scans) in enumerate(zip(groups, scans)):
            for rg, s in zip(group, group_scans):
                if s.n_rows == 0:
                    continue
                if open_id is not None:
                    check_sorted(np.asarray([s.first], dtype=object), open_id, rg.first_row, self.episode)
                continues = open_id is not None and s.first == open_id
                owned[p] += s.n_rows
                if continues and owner != p:  # its leading rows end an episode begun before p
                    owned[p] -= s.first_run
                    owned[owner] += s.first_run
                    tails[owner].append(rg)
                    if not started[p]:
                        skip[p] = (open_id,)
                    if s.first_run < s.n_rows:
                        owner, started[p] = p, True
                else:
                    owner, started[p] = p, True
                open_id = s.last
        offsets = np.concatenate([[0], np.cumsum(owned)[:-1]]).astype(int)
        return [Partition(p, tuple(groups[p]), tuple(tails[p]), skip[p], int(owned[p]), int(offsets[p]))
                for p in range(P)]

    def partitions(self, npartitions: int | None = None) -> list[Partition]:
        """:meth:`plan` with the scans run here, one run after the other (a distributed fit runs
        ``scan_row_groups`` on the workers instead)."""
        groups = self.group_row_groups(npartitions)
        return self.plan(groups, [scan_row_groups(self, g)[1] for g in groups])

    def _read_row_groups(self, row_groups, columns):
        import pyarrow as pa
        import pyarrow.parquet as pq

        target = pa.schema([self.dataset.schema.field(c) for c in columns])
        for rg in row_groups:
            with self.dataset.filesystem.open_input_file(rg.path) as fh:
                batches = pq.ParquetFile(fh).iter_batches(batch_size=self._batch_size(), row_groups=[rg.index],
                                                          columns=columns)
                for batch in checked_batches(batches, rg.path):
                    yield batch.cast(target)

    def _partition_batches(self, part: Partition, columns):
        """The batches of the rows ``part`` owns: its row groups less the leading rows of
        ``part.skip``, then the rows of its last episode in ``part.tail``."""
        skipping, last = bool(part.skip), None
        for batch in self._read_row_groups(part.row_groups, columns):
            ids = batch.column(self.episode).to_numpy(zero_copy_only=False)
            if skipping:
                n = _leading_run(ids, part.skip[0])
                if n == ids.size:
                    continue
                batch, ids, skipping = batch.slice(n), ids[n:], False
            if ids.size:
                last = ids[-1]
                yield batch
        if last is None:
            return
        for batch in self._read_row_groups(part.tail, columns):
            n = _leading_run(batch.column(self.episode).to_numpy(zero_copy_only=False), last)
            if n:
                yield batch.slice(0, n)
            if n < batch.num_rows:
                return

    # ------------------------------------------------------------------ chunks
    def frames(self, progress=None, desc: str = "reading", partition: Partition | None = None,
               columns: Sequence[str] | None = None) -> Iterator:
        """pandas frames of whole episodes, ``chunk_rows`` rows or more each (the last may be
        smaller), in dataset order (of ``partition`` only, if given), of ``columns`` (default:
        every column read); a tqdm bar in rows/s."""
        import pandas as pd
        import pyarrow as pa

        columns = self.columns if columns is None else list(columns)
        if partition is None:
            batches, total, position = self._batches(columns), self.count_rows(), 0
        else:
            batches, total = self._partition_batches(partition, columns), partition.n_rows
            position = partition.row_groups[0].first_row if partition.row_groups else 0
        pending, n_pending, carry, last = [], 0, None, None
        with _bar(total, desc, progress) as bar:
            for batch in batches:
                last = check_sorted(batch.column(self.episode).to_numpy(zero_copy_only=False), last, position,
                                    self.episode)
                position += batch.num_rows
                pending.append(batch)
                n_pending += batch.num_rows
                if n_pending < self.chunk_rows:
                    continue
                frame = pa.Table.from_batches(pending).to_pandas()
                pending, n_pending = [], 0
                frame = frame if carry is None else pd.concat([carry, frame], ignore_index=True)
                complete, carry = _split_last_episode(frame, self.episode)
                if len(complete):
                    yield complete
                bar.update(len(complete))
            rest = [carry] if carry is not None else []
            if pending:
                rest.append(pa.Table.from_batches(pending).to_pandas())
            if rest:
                frame = pd.concat(rest, ignore_index=True)
                yield frame
                bar.update(len(frame))

    def scan(self, progress=None, check=None, states: bool = False, partition: Partition | None = None) -> SourceScan:
        """The validation pass (``genpqr.scale._scan.scan_frames``) over the episode, time,
        action and state columns (of ``partition`` only, if given): ``check(frame, first_row)``
        on each chunk, the in-memory reader's frame checks, and the ``SourceScan`` of the
        whole data (``states``: with the distinct values of the single state column). Sets
        nothing: :meth:`adopt` does."""
        columns = list(dict.fromkeys([self.episode, self.time, self.action, *self.state]))
        frames = self.frames(progress, "checking", partition, columns=columns)
        return scan_frames(frames, episode=self.episode, time=self.time, state=self.state, action=self.action,
                           check=check, states=states, first_row=0 if partition is None else partition.offset)

    def adopt(self, scan: SourceScan, number_states: bool = False) -> "ParquetSource":
        """Take the whole data's gap rule from ``scan`` (and its numbering of a time column of
        timestamps; with ``number_states``, its state values as the state numbering); returns
        self. ``ValueError`` when ``scan`` saw no row, or naming the time column when its
        timestamps' steps are no whole multiples of the most common one."""
        if scan.n_rows == 0:
            raise ValueError(f"the Parquet dataset {str(self.path)!r} has no rows")
        self.expected_step = scan.steps.expected
        if scan.stamps is not None:
            self.clock = scan.stamps.clock(self.time)
            unit = self.clock.unit
            self.expected_step = TimeSteps(True, (scan.stamps.values // unit).astype(np.float64),
                                           scan.stamps.counts).expected
        if number_states:
            self.state_values = scan.state_values
        return self

    def _numbered(self, frame):
        """``frame`` with its state replaced by the position among ``state_values``."""
        if self.state_values is None:
            return frame
        col = self.state[0]
        values = frame[col].to_numpy()
        codes = np.clip(np.searchsorted(self.state_values, values), 0, len(self.state_values) - 1)
        unknown = self.state_values[codes] != values
        if unknown.any():
            raise ValueError(f"state {values[unknown][0]!r} (column {col!r}) is not among the state values found by "
                             f"the validation pass; did the dataset change during the fit?")
        return frame.assign(**{col: codes})

    def _has_transition(self, frame) -> bool:
        """Some episode of ``frame`` has two rows (after a time-gap split), or a row is terminated
        (else from_pandas refuses it)."""
        ids = frame[self.episode].to_numpy()
        if self.time_gaps == "split":
            stepped, _ = timestamps_as_steps(frame, self.episode, self.time, self.clock)
            ordered = stepped.sort_values([self.episode, self.time], kind="stable")
            ids = episode_segments(ordered, self.episode, self.time, "split", self.expected_step)
        return bool(np.any(ids[1:] == ids[:-1]) or (self.terminated and frame[self.terminated].to_numpy().any()))

    def _with_transitions(self, frames) -> Iterator:
        """Merge a frame of single-row episodes only into its neighbour (held back one step)."""
        import pandas as pd

        held = None
        for frame in frames:
            if held is None:
                held = frame
            elif not self._has_transition(frame):
                held = pd.concat([held, frame], ignore_index=True)
            elif not self._has_transition(held):
                held = pd.concat([held, frame], ignore_index=True)
            else:
                yield held
                held = frame
        if held is not None:
            yield held

    def chunks(self, action_labels, progress=None, desc: str = "reading",
               partition: Partition | None = None) -> Iterator[Transitions]:
        """:class:`~genpqr.data.Transitions` of whole episodes, chunk by chunk, with the action
        codes of ``action_labels`` (the full label set: every chunk has the same encoder).
        A chunk whose episodes all have a single row is merged into a neighbouring chunk.
        With ``partition``: the chunks of its episodes only (a partition with no transition at
        all gives its choices alone, where the whole dataset would be refused)."""
        kw = dict(episode=self.episode, time=self.time, state=self.state, terminated=self.terminated,
                  truncated=self.truncated, keep_last=self.keep_last, time_gaps=self.time_gaps,
                  expected_step=self.expected_step, clock=self.clock)
        for frame in self._with_transitions(self.frames(progress, desc, partition)):
            frame = self._numbered(frame)
            if partition is not None and not self._has_transition(frame):
                chunk = self._choices_only(frame, action_labels, kw)
                if chunk is not None:
                    yield chunk
                continue
            yield from_pandas(frame, action=self.action, outcome=self.outcome, action_labels=action_labels, **kw)

    def _choices_only(self, frame, action_labels, kw) -> Transitions | None:
        """``from_pandas`` of a frame without any transition (which it refuses): its choices."""
        rows = long_format_rows(frame, **kw)
        if rows.index.size == 0:
            return None
        df, idx = rows.frame, rows.index
        return from_arrays(rows.states, df[self.action].to_numpy()[idx], rows.next_states, terminated=rows.terminated,
                           truncated=rows.truncated, episode_ids=rows.episode_ids, timesteps=rows.timesteps,
                           outcomes=None if not self.outcome else df[self.outcome].to_numpy()[idx],
                           action_labels=action_labels, state_names=self.state, next_observed=rows.next_observed)


def as_source(path, **kwargs) -> ParquetSource:
    """``path`` if it is a :class:`ParquetSource`, else ``ParquetSource(path, **kwargs)`` (the
    episode, time, state and action columns required)."""
    if isinstance(path, ParquetSource):
        return path
    missing = [k for k in ("episode", "time", "state", "action") if kwargs.get(k) is None]
    if missing:
        raise ValueError(f"{', '.join(missing)} must be given (column names) unless path is a ParquetSource")
    return ParquetSource(path, **kwargs)


def scan_row_groups(source: ParquetSource, row_groups) -> tuple:
    """``(labels, scans)``: the sorted action labels of ``row_groups`` (None if no row) and one
    ``RowGroupScan`` per row group (the episode and action columns only are read). Checks
    the episode order inside each row group."""
    labels, scans = None, []
    for rg in row_groups:
        n, first, last, first_run, run_open = 0, None, None, 0, True
        for batch in source._read_row_groups([rg], [source.episode, source.action]):
            ids = batch.column(source.episode).to_numpy(zero_copy_only=False)
            if ids.size == 0:
                continue
            last = check_sorted(ids, last, rg.first_row + n, source.episode)
            first = ids[0] if first is None else first
            if run_open:
                k = _leading_run(ids, first)
                first_run, run_open = first_run + k, k == ids.size
            n += ids.size
            labels = _union(labels, batch.column(source.action))
        scans.append(RowGroupScan(n, first, last, first_run))
    return labels, scans


def _union(labels, column):
    values = np.unique(column.to_numpy(zero_copy_only=False))
    return values if labels is None else np.union1d(labels, values)


def _leading_run(ids, value) -> int:
    """Leading entries of ``ids`` equal to ``value``."""
    differ = ids != value
    return int(np.argmax(differ)) if differ.any() else int(ids.size)


def _bar(total, desc, progress):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="rows", unit_scale=True, leave=False, ncols=bar_width(),
                disable=None if progress is None else not progress)


def _split_last_episode(frame, episode: str):
    """``(complete, carry)``: the rows before the last episode, and the last episode's rows."""
    ids = frame[episode].to_numpy()
    start = int(np.searchsorted(ids, ids[-1], side="left"))
    return frame.iloc[:start], frame.iloc[start:].reset_index(drop=True)


# ============================================================================ the validation scan
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
    stamps : StampSteps or None
        For a time column of timestamps: their steps in nanoseconds (the whole data's
        ``genpqr.data._clock.Clock`` comes from them; ``steps`` is then empty).
    state_values : ndarray of shape (m,) or None
        The sorted distinct values of the (single) state column, when gathered.
    """

    n_rows: int = 0
    n_episodes: int = 0
    labels: np.ndarray | None = None
    steps: TimeSteps = field(default_factory=TimeSteps)
    state_values: np.ndarray | None = None
    stamps: StampSteps | None = None

    def __add__(self, other: "SourceScan") -> "SourceScan":
        stamps = (other.stamps if self.stamps is None else self.stamps if other.stamps is None
                  else self.stamps + other.stamps)
        return SourceScan(self.n_rows + other.n_rows, self.n_episodes + other.n_episodes,
                          _union_values(self.labels, other.labels, "action"), self.steps + other.steps,
                          _union_values(self.state_values, other.state_values, "state"), stamps)


def scan_frames(frames: Iterable, *, episode: str, time: str, state: Sequence[str], action: str,
                check: Callable | None = None, states: bool = False, first_row: int = 0) -> SourceScan:
    """One ``SourceScan`` of ``frames`` (pandas frames of whole episodes, in dataset order;
    ``first_row``: the dataset position of the first frame's first row). ``check(frame,
    first_row)`` runs first on every frame; ``states``: gather the distinct values of the single
    state column."""
    total = SourceScan()
    for frame in frames:
        if check is not None:
            check(frame, first_row)
        total = total + _scan_frame(frame, episode, time, list(state), action, states, first_row)
        first_row += len(frame)
    return total


def _scan_frame(frame, episode, time, state, action, states, first_row=0) -> SourceScan:
    """The ``SourceScan`` of one frame of whole episodes (``first_row``: its first row's
    position in the dataset, for messages)."""
    stamps = None
    if is_timestamps(frame[time]):  # steps in nanoseconds; the unit is the whole data's (adopt)
        ns, kind = timestamp_ns(frame[time], time, first_row)
        stamps = stamp_steps(frame[episode].to_numpy(), ns, kind)
        frame = frame.assign(**{time: ns})
    check_long_frame(frame, episode, time, state, action)
    values = np.unique(frame[state[0]].to_numpy()) if states else None
    steps = TimeSteps() if stamps is not None else time_steps(frame.sort_values([episode, time], kind="stable"),
                                                              episode, time)
    return SourceScan(len(frame), int(frame[episode].nunique()), np.unique(frame[action].to_numpy()),
                      steps, values, stamps)


def _union_values(a, b, what: str):
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
    ``raw``: the dataset opened by ``open_dataset``)."""
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

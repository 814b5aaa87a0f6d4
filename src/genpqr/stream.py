r"""Out-of-core reading: a Parquet dataset (one file or a folder of files) in long format,
streamed in chunks of whole episodes, and the per-chunk sufficient statistics of the two
statistics-based stage-2 paths.

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

Per-chunk statistics (pure functions of one :class:`~genpqr.data.Transitions` chunk; their
results add up, so a distributed reducer can call them per partition and sum):

* :func:`tabular_chunk_counts` -- choice counts ``n(s, a)`` and transition counts
  ``n(s, a, s')`` (sparse) for the exact tabular path (:class:`TabularCounts`, ``+``);
* :func:`bellman_chunk` -- the :class:`genpqr.lstd.BellmanProblem` of a chunk for a fitted
  policy and normalization, to feed ``LSTDQ.partial_fit`` (or
  ``BellmanStatistics.accumulate*`` / ``merge``);
* :func:`choice_summary` -- the sums behind GenPQR's diagnostics (:class:`ChoiceSummary`, ``+``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import scipy.sparse as sp

from .data import Transitions, from_pandas

__all__ = ["ParquetSource", "TabularCounts", "ChoiceSummary", "tabular_chunk_counts", "bellman_chunk",
           "choice_summary", "concatenate_chunks", "DEFAULT_CHUNK_ROWS"]

#: Rows per chunk by default: on the 1e7-row closed-form benchmark (docs/benchmarks.md) 250,000
#: rows took 43 s and 0.9 GB peak against 57 s and 1.9 GB for 1,000,000.
DEFAULT_CHUNK_ROWS = 250_000


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
    _dataset: object = field(default=None, init=False, repr=False)

    def __post_init__(self):
        import pyarrow.dataset as ds

        path = Path(self.path)
        if not path.exists():
            raise FileNotFoundError(f"data path {str(path)!r} does not exist")
        if not (isinstance(self.chunk_rows, (int, np.integer)) and self.chunk_rows > 0):
            raise ValueError(f"chunk_rows must be a positive int, got {self.chunk_rows!r}")
        self.state = [self.state] if isinstance(self.state, str) else list(self.state)
        try:
            self._dataset = ds.dataset(str(path), format="parquet")
        except Exception as exc:  # pyarrow raises several types for unreadable files
            raise ValueError(f"cannot read {str(path)!r} as a Parquet dataset: {exc}") from None
        if not self._dataset.files:
            raise ValueError(f"data path {str(path)!r} is a folder with no Parquet file; expected a .csv or .parquet "
                             "file, or a folder of .parquet files")
        names = set(self._dataset.schema.names)
        missing = [c for c in self.columns if c not in names]
        if missing:
            raise ValueError(f"the Parquet dataset {str(path)!r} is missing column(s) {missing}; it has "
                             f"{sorted(names)}")

    @property
    def columns(self) -> list[str]:
        cols = [self.episode, self.time, self.action, *self.state]
        return cols + [c for c in (self.terminated, self.truncated, self.outcome) if c]

    def count_rows(self) -> int:
        """Rows in the dataset (from the file metadata; no data read)."""
        return int(self._dataset.count_rows())

    def _batches(self, columns):
        """Record batches in dataset order: files sorted by path, rows in file order."""
        for fragment in sorted(self._dataset.get_fragments(), key=lambda f: f.path):
            yield from fragment.to_batches(columns=columns, batch_size=min(int(self.chunk_rows), 1 << 20))

    def action_labels(self, progress=None) -> np.ndarray:
        """Sorted unique action labels (one pass over the action column only)."""
        labels = None
        with _bar(self.count_rows(), "reading actions", progress) as bar:
            for batch in self._batches([self.action]):
                values = np.unique(batch.column(0).to_numpy(zero_copy_only=False))
                labels = values if labels is None else np.union1d(labels, values)
                bar.update(batch.num_rows)
        if labels is None or labels.size == 0:
            raise ValueError(f"the Parquet dataset {str(self.path)!r} has no rows")
        return labels

    def frames(self, progress=None, desc: str = "reading") -> Iterator:
        """pandas frames of whole episodes, ``chunk_rows`` rows or more each (the last may be
        smaller), in dataset order; a tqdm bar in rows/s."""
        import pandas as pd
        import pyarrow as pa

        pending, n_pending, carry, last = [], 0, None, None
        position = 0
        with _bar(self.count_rows(), desc, progress) as bar:
            for batch in self._batches(self.columns):
                last = _check_sorted(batch.column(0).to_numpy(zero_copy_only=False), last, position, self.episode)
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

    def _has_transition(self, frame) -> bool:
        """Some episode of ``frame`` has two rows, or a row is terminated (else from_pandas refuses it)."""
        ids = frame[self.episode].to_numpy()
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

    def chunks(self, action_labels, progress=None, desc: str = "reading") -> Iterator[Transitions]:
        """:class:`~genpqr.data.Transitions` of whole episodes, chunk by chunk, with the action
        codes of ``action_labels`` (the full label set: every chunk has the same encoder).
        A chunk whose episodes all have a single row is merged into a neighbouring chunk."""
        for frame in self._with_transitions(self.frames(progress, desc)):
            yield from_pandas(frame, episode=self.episode, time=self.time, state=self.state, action=self.action,
                              terminated=self.terminated, truncated=self.truncated, outcome=self.outcome,
                              action_labels=action_labels, keep_last=self.keep_last, time_gaps=self.time_gaps)


def _bar(total, desc, progress):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="rows", unit_scale=True, leave=False,
                disable=None if progress is None else not progress)


def _check_sorted(ids, previous, position: int, name: str):
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
        row = position + i - (0 if previous is None else 1) + 1
        raise ValueError(
            f"the Parquet dataset must be sorted by the episode column {name!r} (files in path order, rows in file "
            f"order) so that each episode's rows are contiguous; episode id {whole[i + 1]!r} at row {row} comes "
            f"after {whole[i]!r}. Sort it, e.g. frame.sort_values([{name!r}, time]).to_parquet(...)")
    return ids[-1]


def _split_last_episode(frame, episode: str):
    """``(complete, carry)``: the rows before the last episode, and the last episode's rows."""
    ids = frame[episode].to_numpy()
    start = int(np.searchsorted(ids, ids[-1], side="left"))
    return frame.iloc[:start], frame.iloc[start:].reset_index(drop=True)


# ============================================================================ tabular counts
@dataclass
class TabularCounts:
    """Sufficient statistics of the exact tabular path; ``a + b`` adds two partial sums.

    Attributes
    ----------
    choices : ndarray of shape (S*K,)
        ``n_choice(s, a)``: every observed choice (stage 1, the visited states).
    visits : ndarray of shape (S*K,)
        ``n(s, a)``: complete transitions (terminated included), the kernel's denominators.
    moves : scipy.sparse.csr_matrix of shape (S*K, S)
        ``n(s, a, s')``: non-terminated complete transitions.
    live_next : ndarray of shape (S,), bool
        States reached as a non-terminated next state (the auto clip reads the policy there).
    n_rows, n_episodes, n_choice_only : int
    """

    choices: np.ndarray
    visits: np.ndarray
    moves: sp.csr_matrix
    live_next: np.ndarray
    n_rows: int = 0
    n_episodes: int = 0
    n_choice_only: int = 0

    @property
    def n_states(self) -> int:
        return int(self.moves.shape[1])

    def resized(self, n_states: int) -> "TabularCounts":
        """The same counts on ``n_states >= S`` states (chunks may see fewer states)."""
        S, K = self.n_states, self.moves.shape[0] // max(self.n_states, 1)
        if n_states == S:
            return self
        grow = n_states - S
        moves = sp.csr_matrix((self.moves.data, self.moves.indices, self.moves.indptr), shape=(S * K, n_states))
        moves = sp.vstack([moves, sp.csr_matrix((grow * K, n_states))]).tocsr()
        pad = np.zeros(grow * K)
        return TabularCounts(np.concatenate([self.choices, pad]), np.concatenate([self.visits, pad]), moves,
                             np.concatenate([self.live_next, np.zeros(grow, dtype=bool)]), self.n_rows,
                             self.n_episodes, self.n_choice_only)

    def __add__(self, other: "TabularCounts") -> "TabularCounts":
        S = max(self.n_states, other.n_states)
        a, b = self.resized(S), other.resized(S)
        return TabularCounts(a.choices + b.choices, a.visits + b.visits, (a.moves + b.moves).tocsr(),
                             a.live_next | b.live_next, a.n_rows + b.n_rows, a.n_episodes + b.n_episodes,
                             a.n_choice_only + b.n_choice_only)


def tabular_chunk_counts(chunk: Transitions, n_states: int | None = None) -> TabularCounts:
    """The :class:`TabularCounts` of one chunk of whole episodes (states are indices in one
    column); ``n_states`` default: max index + 1 in the chunk. Sum chunks with ``+``."""
    from ._checks import check_state_indices
    from .tabular import transition_counts

    if chunk.state_dim != 1:
        raise ValueError(f"the tabular path needs tabular states (one index column), got {chunk.state_dim} columns")
    trans = chunk.subset(chunk.next_observed | chunk.terminated)
    next_states = trans.next_states  # a terminated row's (absorbing) next state is its own: a valid index
    if n_states is None:
        n_states = int(max(chunk.states.max(), next_states.max() if trans.n else 0)) + 1
    K = chunk.n_actions
    s = check_state_indices(chunk.states, n_states, "states")
    choices = np.bincount(s * K + chunk.actions, minlength=n_states * K).astype(np.float64)
    moves, visits = transition_counts(trans.states, trans.actions, next_states, n_states, K,
                                      terminated=trans.terminated)
    live = np.zeros(n_states, dtype=bool)
    live[check_state_indices(next_states[~trans.terminated], n_states, "next_states")] = True
    return TabularCounts(choices, visits, moves, live, chunk.n, chunk.n_episodes, chunk.n_choice_only)


# ============================================================================ closed-form chunks
def bellman_chunk(chunk: Transitions, policy, normalization, offset, gamma: float, raw=None):
    """The :class:`genpqr.lstd.BellmanProblem` of a chunk's complete transitions, as GenPQR's
    closed-form stage 2 builds it: ``reward = u(s, a) - g(s)`` with ``u = log pi_hat``
    (clipped), ``next_mu = mu(.|s')`` and ``next_reward = sum_a' mu(a'|s') (u(s', a') - g(s'))``.

    Parameters
    ----------
    chunk : Transitions
    policy : genpqr.policy.FittedPolicy
        Fitted stage 1 (clip resolved).
    normalization : genpqr.normalization.Normalization
        Bound to the action codes; ``offset`` is its ``g`` as a callable ``states -> (m,)``.
    gamma : float
    raw : ndarray of shape (n, K), optional
        ``policy.raw_proba(chunk.states)`` if already computed.

    Returns None when the chunk has no complete transition.
    """
    from .lstd import BellmanProblem
    from .policy import clip_proba

    if chunk.n_choice_only == chunk.n:
        return None
    keep = chunk.next_observed
    trans = chunk.with_next()
    K = chunk.n_actions
    raw = policy.raw_proba(trans.states) if raw is None else np.asarray(raw)[keep]
    proba = clip_proba(raw, policy.clip)[0]
    next_proba = clip_proba(policy.raw_proba(trans.next_states), policy.clip)[0]
    next_mu = normalization.weights(trans.next_states, K, next_proba)
    g_rows = np.asarray(offset(trans.states), dtype=np.float64)
    g_next = np.asarray(offset(trans.next_states), dtype=np.float64)
    u_rows = _safe_log(proba[np.arange(trans.n), trans.actions])
    next_reward = np.sum(next_mu * (_safe_log(next_proba) - g_next[:, None]), axis=1)
    return BellmanProblem(trans.states, trans.actions, trans.next_states, trans.continues, u_rows - g_rows, next_mu,
                          gamma, next_reward=next_reward, log_policy=policy.log_proba, offset=offset,
                          policy_models=list(policy.models))


def _safe_log(proba):
    with np.errstate(divide="ignore"):
        return np.log(proba)


# ============================================================================ diagnostics sums
@dataclass
class ChoiceSummary:
    """Sums over observed choices behind GenPQR's diagnostics (``+`` adds partial sums).

    Attributes
    ----------
    n, n_episodes, n_choice_only : int
    action_counts, trans_action_counts : ndarray of shape (K,)
        Choices per action; complete transitions per action.
    mu_max, trans_mu_max : ndarray of shape (K,)
        ``max_i mu(a|s_i)`` over the choices; over the complete transitions.
    support, log_loss, clipped, floored : float
        Rows with ``mu(a_i|s_i) > 0``; ``-sum log pi_hat(a_i|s_i)``; rows whose observed action
        hits a clip bound; rows where some action is below the lower bound.
    max_mu_over_pi : float
    """

    n: float
    n_episodes: int
    n_choice_only: int
    action_counts: np.ndarray
    trans_action_counts: np.ndarray
    mu_max: np.ndarray
    trans_mu_max: np.ndarray
    support: float
    log_loss: float
    clipped: float
    floored: float
    max_mu_over_pi: float

    def __add__(self, o: "ChoiceSummary") -> "ChoiceSummary":
        return ChoiceSummary(self.n + o.n, self.n_episodes + o.n_episodes, self.n_choice_only + o.n_choice_only,
                             self.action_counts + o.action_counts, self.trans_action_counts + o.trans_action_counts,
                             np.maximum(self.mu_max, o.mu_max), np.maximum(self.trans_mu_max, o.trans_mu_max),
                             self.support + o.support, self.log_loss + o.log_loss, self.clipped + o.clipped,
                             self.floored + o.floored, max(self.max_mu_over_pi, o.max_mu_over_pi))


def choice_summary(raw, actions, mu, clip, *, has_next, weights=None, n_episodes: int = 0) -> ChoiceSummary:
    """The :class:`ChoiceSummary` of rows with unclipped stage-1 probabilities ``raw`` (m, K),
    observed ``actions`` (m,), normalization weights ``mu`` (m, K), ``clip`` bounds,
    ``has_next`` (m,) bool (a complete transition) and optional row ``weights`` (m,) (counts,
    for the tabular path's one row per (s, a))."""
    from .policy import clip_proba

    raw = np.asarray(raw, dtype=np.float64)
    m, K = raw.shape
    w = np.ones(m) if weights is None else np.asarray(weights, dtype=np.float64)
    rows = np.arange(m)
    proba, clipped = clip_proba(raw, clip)
    low, high = clip
    hit = ((raw < low) | (raw > high))[rows, actions]
    floored = np.any(raw < low, axis=1)
    counts = np.bincount(actions, weights=w, minlength=K)
    trans_counts = np.bincount(actions[has_next], weights=w[has_next], minlength=K)
    zero = np.zeros(K)
    with np.errstate(divide="ignore"):
        log_p = np.log(proba[rows, actions])
    return ChoiceSummary(float(w.sum()), n_episodes, int(np.sum(w[~has_next])), counts, trans_counts,
                         mu.max(axis=0) if m else zero, mu[has_next].max(axis=0) if has_next.any() else zero,
                         float(np.sum(w[mu[rows, actions] > 0])), float(-np.sum(w * log_p)),
                         float(np.sum(w[hit])), float(np.sum(w[floored])),
                         float(np.max(mu / proba)) if m else 0.0)


def concatenate_chunks(parts: Sequence[Transitions]) -> Transitions:
    """One :class:`~genpqr.data.Transitions` from chunks of whole episodes sharing one encoder
    (episode ids renumbered so that chunks never share one)."""
    from dataclasses import replace

    if not parts:
        raise ValueError("no chunk to concatenate")
    first = parts[0]
    if any(p.encoder.labels.tolist() != first.encoder.labels.tolist() for p in parts):
        raise ValueError("chunks must share one action encoder (pass the full action_labels)")
    ids, offset = [], 0
    for p in parts:
        codes = np.unique(p.episode_ids, return_inverse=True)[1].reshape(-1)
        ids.append(codes + offset)
        offset += int(codes.max()) + 1 if codes.size else 0
    values = {}
    for name in Transitions._ROW_FIELDS:
        arrays = [getattr(p, name) for p in parts]
        values[name] = None if any(a is None for a in arrays) else np.concatenate(arrays)
    values["episode_ids"] = np.concatenate(ids).astype(np.int64)
    return replace(first, **values)

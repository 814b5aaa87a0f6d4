"""Long-format frames (one row per episode and time step) to transitions: :func:`from_pandas`
and the pairing rules it shares with the continuous-action reader of ``genpqr fit``
(``long_format_rows``, time gaps, terminal rows)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..messages import Mention, Message
from ._validation import plain
from ._builders import from_arrays, refuse_continuous_labels
from ._clock import duration, is_timestamps, timestamp_ns, timestamps_as_steps
from ._transitions import Transitions, as_flags

__all__ = ["from_pandas", "long_format_rows", "LongFormatRows", "episode_segments", "time_gap_rows", "TIME_GAPS",
           "TimeSteps", "time_steps", "check_time_column", "check_some_rows", "check_long_frame"]


def from_pandas(frame, *, episode: str, time: str, state: str | Sequence[str], action: str,
                terminated: str | None = None, truncated: str | None = None, outcome: str | None = None,
                reward: str | None = None, action_labels=None, next_state: str | Sequence[str] | None = None,
                keep_last: bool = True, time_gaps: str = "error", expected_step=None,
                action_features=None, clock=None) -> Transitions:
    """Transitions from a long-format frame: one row per (episode, time step).

    The next state of a row is the state of the following time step of the same episode.
    The last row of an episode has no observed next state. When its ``terminated`` flag is
    true it is a terminated transition (absorbing, no continuation). Otherwise its choice is
    still data: with ``keep_last=True`` (default) it is kept as a *choice-only* row
    (``next_observed`` False, ``truncated`` True, next state NaN), which enters stage 1 and
    the choice counts but no next-state consumer (:meth:`Transitions.with_next`); with
    ``keep_last=False`` it is dropped and the row before it is marked ``truncated`` (the
    behaviour before genpqr 0.2). Every row with a successor in its episode is a transition.

    Several groups pooled in one file (e.g. the four bus groups of an engine-replacement
    panel) work as long as their episode ids differ: episodes are identified by the
    ``episode`` column only.

    Parameters
    ----------
    frame : pandas.DataFrame
    episode, time, action : str
        Column names. Times are step numbers or timestamps (``datetime64``, dates, ISO 8601 text),
        numbered in the data's own unit (its most common step; ``genpqr.data._clock.Clock``).
    state : str or list of str
        State column name(s).
    terminated, truncated, outcome, reward : str, optional
        Column names. ``terminated`` marks a step after which the episode ends in an
        absorbing state; ``truncated`` a step after which logging stopped.
    action_labels : sequence, optional
        Full label set in code order.
    next_state : str or list of str, optional
        Next-state column name(s), one per ``state`` column (the frame written by
        :meth:`Transitions.to_pandas`, e.g. ``next_s0``). When given, every row is a complete
        transition: no row is dropped and the flags are taken as they are (a row whose
        next-state columns are all missing is a choice-only row).
    keep_last : bool
        Keep the last choice of an episode that did not terminate (see above).
    time_gaps : {"error", "split"}
        What to do when the time steps of an episode are not consecutive (a step is missing;
        the rule is in ``time_gap_rows``): ``"error"`` (default) raises ``ValueError``
        naming the first episode and step; ``"split"`` starts a new episode after each gap
        (the step before the gap is then the last choice of its episode).
    expected_step : float, "episode" or None
        The gap rule's expected step when ``frame`` holds only some episodes of a larger data
        set (``TimeSteps.expected`` of the whole data; the out-of-core reader passes it so
        that every chunk is judged as the whole data would be); None: ``frame``'s own.
    clock : Clock, optional
        Timestamps: the whole data's numbering (as ``expected_step``); None: ``frame``'s own.
    action_features : ActionTable, pandas.DataFrame or mapping, optional
        A feature vector per action label (see :func:`from_arrays`): the action set becomes the
        table's labels in its row order, actions never taken included.
    """
    state_cols, next_cols = check_long_frame(frame, episode, time, state, action, next_state,
                                             (terminated, truncated, outcome, reward))
    if action_labels is None and action_features is None:
        refuse_continuous_labels(frame[action].to_numpy(), f"action column {action!r}")
    rows = long_format_rows(frame, episode=episode, time=time, state=state_cols, terminated=terminated,
                            truncated=truncated, next_state=next_cols, keep_last=keep_last,
                            time_gaps=time_gaps, other=[c for c in (action, outcome, reward) if c],
                            expected_step=expected_step, clock=clock)
    check_some_rows(rows, episode)
    return _transitions_from_rows(rows, action, outcome, reward, action_labels, state_cols, action_features)


def _transitions_from_rows(rows, action, outcome, reward, action_labels, state_cols,
                           action_features=None) -> Transitions:
    """:func:`from_pandas`'s result from the selected rows (:class:`LongFormatRows`)."""
    df, idx = rows.frame, rows.index

    def col(name):
        return None if not name else df[name].to_numpy()[idx]

    return from_arrays(
        rows.states,
        df[action].to_numpy()[idx],
        rows.next_states,
        terminated=rows.terminated,
        truncated=rows.truncated,
        episode_ids=rows.episode_ids,
        outcomes=col(outcome),
        rewards=col(reward),
        timesteps=rows.timesteps,
        action_labels=action_labels if action_labels is not None or action_features is not None
        else np.unique(df[action].to_numpy()),
        state_names=state_cols,
        next_observed=rows.next_observed,
        action_features=action_features,
    )


def check_long_frame(frame, episode: str, time: str, state, action: str, next_state=None, flag_columns=()):
    """Check the columns :func:`from_pandas` reads (present; numeric states; one action label
    type, none missing; finite numeric times or timestamps); returns ``(state_cols, next_cols)``, lists of names."""
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    state_cols = [state] if isinstance(state, str) else list(state)
    next_cols = None if next_state is None else ([next_state] if isinstance(next_state, str) else list(next_state))
    if next_cols is not None and len(next_cols) != len(state_cols):
        raise ValueError(
            f"next_state must name one column per state column ({len(state_cols)}: {state_cols}), got {next_cols}"
        )
    wanted = [episode, time, action, *state_cols, *(next_cols or [])]
    wanted += [c for c in flag_columns if c]
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise ValueError(f"frame is missing column(s) {missing}; it has {list(frame.columns)}")
    for col in state_cols + (next_cols or []):
        if not pd.api.types.is_numeric_dtype(frame[col]):
            raise TypeError(f"state column {col!r} must be numeric, got dtype {frame[col].dtype}")
    _check_action_column(frame, action)
    check_time_column(frame, time)
    return state_cols, next_cols


def _check_action_column(frame, action):
    kinds = {type(v) for v in frame[action].dropna().tolist()}
    if len(kinds) > 1 and not all(issubclass(k, (int, float, np.number)) for k in kinds):
        raise ValueError(f"action column {action!r} mixes types {sorted(k.__name__ for k in kinds)}; use one label type")
    if frame[action].isna().any():
        raise ValueError(f"action column {action!r} has {int(frame[action].isna().sum())} missing value(s)")


@dataclass(frozen=True, eq=False)
class LongFormatRows:
    """The transitions of a long-format frame, before the actions are interpreted.

    Attributes
    ----------
    frame : DataFrame
        The input sorted by (episode, time).
    index : ndarray of shape (n,)
        Positions in ``frame`` of the rows kept (a row without an observed next state is dropped).
    states, next_states : ndarray of shape (n, d)
    terminated, truncated : ndarray of shape (n,), bool
    episode_ids : ndarray of shape (n,)
        The episode column's values.
    timesteps : ndarray of shape (n,)
    next_observed : ndarray of shape (n,), bool
        False on a kept last row whose next state is unobserved (its ``next_states`` row is NaN).
    """

    frame: Any
    index: np.ndarray
    states: np.ndarray
    next_states: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    episode_ids: np.ndarray
    timesteps: np.ndarray
    next_observed: np.ndarray = None


def long_format_rows(frame, *, episode: str, time: str, state: Sequence[str], terminated: str | None = None,
                     truncated: str | None = None, next_state: Sequence[str] | None = None,
                     keep_last: bool = False, time_gaps: str = "error",
                     other: Sequence[str] = (), expected_step=None, clock=None) -> LongFormatRows:
    """Pair each row of a long-format frame with its next state (the rules of :func:`from_pandas`,
    shared by discrete and continuous actions; the columns must exist and be numeric).
    ``keep_last``: keep an episode's last, non-terminated row as a choice-only row
    (``next_observed`` False) instead of dropping it. ``time_gaps``: see :func:`episode_segments`.
    ``other``: further per-step columns (actions, outcomes), never offered as a group column by
    the duplicate-(episode, time) error. ``expected_step``: see ``time_gap_rows``. A time
    column of timestamps is numbered by ``clock`` (default: the frame's own; see
    :func:`from_pandas`); ``frame`` of the result then holds the step numbers."""
    state_cols, next_cols = list(state), None if next_state is None else list(next_state)
    frame, clock = timestamps_as_steps(frame, episode, time, clock)
    df = frame.sort_values([episode, time], kind="stable")
    if df.duplicated([episode, time]).any():
        dup = df.loc[df.duplicated([episode, time]), [episode, time]].iloc[0].tolist()
        per_step = [*state_cols, *(next_cols or []), *other, *(c for c in (terminated, truncated) if c)]
        raise ValueError(f"({episode}, {time}) pairs must be unique; {dup} appears more than once"
                         f"{_pooled_groups_hint(df, episode, time, per_step)}")
    ep = (df[episode].to_numpy() if next_cols is not None
          else episode_segments(df, episode, time, time_gaps, expected_step, clock))
    states = df[state_cols].to_numpy(dtype=np.float64)
    same_next = np.zeros(len(df), dtype=bool)
    same_next[:-1] = ep[:-1] == ep[1:]
    is_last = ~same_next
    term = _frame_flags(df, terminated)
    trunc = _frame_flags(df, truncated)
    if np.any(term & same_next):
        raise ValueError(f"column {terminated!r} marks a step as terminal although its episode continues")
    if next_cols is not None:  # wide format: every row is a complete transition (or a choice without one)
        keep = np.ones(len(df), dtype=bool)
        next_states = df[next_cols].to_numpy(dtype=np.float64)
        observed = ~np.all(np.isnan(next_states), axis=1)
    elif keep_last:
        keep = np.ones(len(df), dtype=bool)
        next_states = np.empty_like(states)
        next_states[:-1] = states[1:]
        next_states[is_last] = states[is_last]  # terminated rows: placeholder, no continuation
        observed = same_next | term
        next_states[~observed] = np.nan
        trunc = trunc | ~observed  # logging stopped after an unobserved successor
    else:
        keep = same_next | term
        observed = keep
        next_states = np.empty_like(states)
        next_states[:-1] = states[1:]
        next_states[is_last] = states[is_last]  # placeholder, never used: terminated rows have no continuation
        # the row before a dropped episode end is where logging stopped
        before_drop = np.zeros(len(df), dtype=bool)
        before_drop[:-1] = is_last[1:] & ~term[1:] & same_next[:-1]
        trunc = (trunc | before_drop) & keep
    idx = np.flatnonzero(keep)
    return LongFormatRows(df, idx, states[idx], next_states[idx], term[idx], trunc[idx], ep[idx],
                          df[time].to_numpy(dtype=np.float64)[idx], observed[idx])


#: What a gap in an episode's time column does (``time_gaps=``): refuse the data, or split the
#: episode at the gap.
TIME_GAPS = ("error", "split")


def check_time_column(frame, time: str) -> None:
    """The time column must hold finite numbers or timestamps (dates, datetimes, ISO 8601 text;
    none missing) (``TypeError`` / ``ValueError`` naming it)."""
    import pandas as pd

    col = frame[time]
    if is_timestamps(col):
        if not col.isna().any():  # missing values: the ValueError below
            try:
                timestamp_ns(col, time)
            except ValueError as exc:  # text that is no date: a wrong type, as text that is no number
                raise TypeError(str(exc)) from None
            return
        timestamp_ns(col, time)
    if not pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
        raise TypeError(f"time column {time!r} must hold numbers (time steps), got dtype {col.dtype}")
    bad = ~np.isfinite(col.to_numpy(dtype=np.float64))
    if bad.any():
        raise ValueError(f"time column {time!r} has {int(bad.sum())} missing or infinite value(s)")


def _pooled_groups_hint(df, episode: str, time: str, skip: Sequence[str]) -> str:
    """For the duplicate-(episode, time) error: a column that tells the duplicates apart (a group
    of a pooled file whose episode ids repeat across groups), and how to make the ids distinct."""
    for col in df.columns:
        if col in (episode, time, *skip) or not isinstance(col, str) or df[col].nunique() > 100:
            continue
        if not df.duplicated([col, episode, time]).any():
            return (f". Column {col!r} tells the duplicates apart: if the file pools several groups whose "
                    f"{episode!r} ids repeat, give each episode its own id (e.g. {col} * 1000 + {episode}, or "
                    f"the two joined as a string); an episode is identified by the {episode!r} column alone")
    return ""


def check_some_rows(rows: "LongFormatRows", episode: str) -> None:
    """Refuse a frame with no transition (a row with an observed next state, or a terminal
    row) left, saying why; choice-only last rows alone do not identify a reward."""
    observed = rows.index.size if rows.next_observed is None else int(np.count_nonzero(rows.next_observed))
    if observed:
        return
    n_rows = len(rows.frame)
    if n_rows == 0:
        raise ValueError("frame has no rows: transitions must contain at least one row, got 0")
    n_eps = rows.frame[episode].nunique()
    raise ValueError(
        f"no transitions (at least one row with a next state is needed): each of the {n_eps:,} episode(s) "
        f"(column {episode!r}, {n_rows:,} row(s)) has a single row "
        f"(after any time-gap split), and a row's next state is the state of the following row of its episode, so "
        f"the last row of an episode has none (it enters the choice likelihood only). Check that {episode!r} "
        f"identifies episodes (sequences of steps), not rows")


@dataclass(frozen=True)
class TimeSteps:
    """The within-episode time steps of some whole episodes: what the gap rule of
    ``time_gap_rows`` needs to know of the whole data. Summable (``+``) over disjoint sets of
    whole episodes (the chunks of an out-of-core reader), the sum being the steps of their union.

    Attributes
    ----------
    integer : bool
        Every time value is an integer (a step counter).
    values, counts : ndarray of shape (m,)
        The distinct steps between consecutive rows of one episode (sorted) and how often each occurs.
    """

    integer: bool = True
    values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __add__(self, other: "TimeSteps") -> "TimeSteps":
        values = np.concatenate([self.values, other.values])
        counts = np.concatenate([self.counts, other.counts])
        merged, inverse = np.unique(values, return_inverse=True)
        return TimeSteps(self.integer and other.integer, merged, np.bincount(inverse, weights=counts,
                                                                             minlength=merged.size).astype(np.int64))

    @property
    def expected(self):
        """The expected step of the gap rule: the modal step (smallest on ties; 1 when no episode
        has two rows) for integer times, else ``"episode"`` (each episode's own modal step)."""
        if not self.integer:
            return "episode"
        return float(self.values[np.argmax(self.counts)]) if self.counts.size else 1.0


def time_steps(df, episode: str, time: str) -> TimeSteps:
    """:class:`TimeSteps` of a frame sorted by (episode, time)."""
    ep, t = df[episode].to_numpy(), df[time].to_numpy(dtype=np.float64)
    same = ep[:-1] == ep[1:]
    values, counts = np.unique(np.diff(t)[same], return_counts=True)
    return TimeSteps(bool(np.all(t == np.round(t))), values, counts.astype(np.int64))


def time_gap_rows(df, episode: str, time: str, expected_step=None) -> tuple[np.ndarray, np.ndarray]:
    """Where a time step is missing inside an episode, in a frame sorted by (episode, time).

    The rule: a step (the time difference between consecutive rows of one episode) is a gap
    when it exceeds the expected step by more than 1e-9 relative. With integer times (a step
    counter) the expected step is the data's modal step (the most frequent step over all
    episodes, the smallest on ties: 1 for a counter 0, 1, 2, ...); with non-integer times
    (clock readings, possibly sampled at different rates in different episodes) it is the
    episode's own modal step.

    ``expected_step``: the rule of the whole data when ``df`` holds only some of its episodes
    (``TimeSteps.expected`` of all of them: a number, or ``"episode"``); None: ``df``'s own.

    Returns ``(rows, expected)``: the positions ``i`` (int array, shape (n_gaps,)) whose next
    row is in the same episode after a gap, and the expected step at each of them."""
    ep, t = df[episode].to_numpy(), df[time].to_numpy(dtype=np.float64)
    same = ep[:-1] == ep[1:]
    if not same.any():
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    if expected_step is None:
        expected_step = time_steps(df, episode, time).expected
    step = np.diff(t)
    expected = np.full(step.size, np.inf)
    if expected_step == "episode":
        expected[same] = _episode_modal_steps(step, same)
    else:
        expected[same] = float(expected_step)
    rows = np.flatnonzero(same & (step > expected * (1 + 1e-9) + 1e-12))
    return rows, expected[rows]


def _episode_modal_steps(step: np.ndarray, same: np.ndarray) -> np.ndarray:
    """For each step inside an episode (``step[same]``), its episode's modal step (smallest on ties)."""
    import pandas as pd

    pairs = pd.DataFrame({"g": np.cumsum(np.r_[True, ~same])[:-1], "d": np.round(step, 9)})[same]
    counts = pairs.value_counts().rename("n").reset_index().sort_values(["g", "n", "d"],
                                                                       ascending=[True, False, True])
    modal = counts.drop_duplicates("g").set_index("g")["d"]
    return modal.reindex(pairs["g"]).to_numpy()


def episode_segments(df, episode: str, time: str, time_gaps: str = "error", expected_step=None,
                     clock=None) -> np.ndarray:
    """The episode key of every row of a frame sorted by (episode, time), after the time-gap
    rule of ``time_gap_rows``.

    ``time_gaps="error"`` (default) raises ``ValueError`` naming the first episode and step
    followed by a gap (pairing the step before a gap with the one after it would make a
    transition that was never observed). ``"split"`` starts a new episode after each gap: the
    step before the gap is then the end of an episode, handled like any episode end (no observed
    next state). Without gaps the episode column's values are returned; with a split, integer
    segment numbers ``0..``. ``expected_step``: as in ``time_gap_rows``. ``clock``: the
    ``genpqr.data._clock.Clock`` that numbered a time column of timestamps (the error then shows
    the timestamps and the steps in their unit)."""
    if time_gaps not in TIME_GAPS:
        raise ValueError(f"time_gaps must be one of {list(TIME_GAPS)}, got {time_gaps!r}")
    ep = df[episode].to_numpy()
    gaps, expected = time_gap_rows(df, episode, time, expected_step)
    if gaps.size == 0:
        return ep
    if time_gaps == "error":
        i = int(gaps[0])
        t = df[time].to_numpy()
        if clock is None:
            jump = (f"{plain(t[i])} to {plain(t[i + 1])}, a step of {plain(t[i + 1] - t[i]):g} where "
                    f"{plain(expected[0]):g} is expected")
        else:
            jump = (f"{clock.label(t[i])} to {clock.label(t[i + 1])}, a step of "
                    f"{duration(int(round(t[i + 1] - t[i])) * clock.unit)} where {duration(clock.unit)} (the data's "
                    f"most common step) is expected")
        raise ValueError(Message(
            f"time gap inside an episode: episode {plain(ep[i])!r} jumps from {time} {jump} "
            f"({gaps.size} gap(s) in {np.unique(ep[gaps]).size} episode(s)). Joining the steps around a gap would "
            f"make transitions that were never observed: fill in the missing rows, or start a new episode at each "
            f"gap with ", Mention("time_gaps", "split")))
    starts = np.r_[True, ep[1:] != ep[:-1]]
    starts[gaps + 1] = True
    return np.cumsum(starts) - 1


def _frame_flags(df, column: str | None) -> np.ndarray:
    """A boolean flag column (bool or 0/1; object columns of Python bools accepted)."""
    if not column:
        return np.zeros(len(df), dtype=bool)
    values = df[column].to_numpy()
    if values.dtype == object and all(isinstance(v, (bool, np.bool_)) for v in values):
        values = values.astype(bool)
    return as_flags(values, len(df), f"column {column!r}")



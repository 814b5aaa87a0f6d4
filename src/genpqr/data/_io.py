"""Reading logged data: CSV / Parquet files in long format, and the common RL dataset
containers (Minari, d3rlpy, imitation) as optional extras, imported only when used.

Long format: one row per (episode, time step) with the state columns and the action column
(optional ``terminated`` / ``truncated`` flags and an outcome column); see
:func:`genpqr.data.from_pandas` for how next states and episode ends are read.
*Terminated* means the episode ended in an absorbing state (no continuation value);
*truncated* means logging stopped (time limit) and the next state is bootstrapped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ..messages import Mention, Message
from ._transitions import Transitions
from ._builders import from_episodes
from ._long_format import from_pandas

__all__ = ["read_table", "read_transitions", "from_minari", "from_d3rlpy", "from_imitation"]


def read_table(path, *, format: str | None = None, sep: str | None = None, what: str = "data file"):
    """A pandas frame from a CSV or Parquet file (format from the suffix unless given).

    ``sep``: the CSV delimiter (default ``","``). Errors name the file (``what`` says which
    one): missing, a folder, empty, unreadable, or a CSV read as one column whose header holds
    another delimiter (``;``, tab, ``|``), with a hint to pass ``sep``."""
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{what} {str(path)!r} does not exist")
    if path.is_dir():
        raise ValueError(f"{what} {str(path)!r} is a folder; expected a .csv or .parquet file")
    fmt = (format or path.suffix.lstrip(".")).lower()
    if fmt not in ("csv", "txt", "parquet", "pq"):
        raise ValueError(f"unknown data format {fmt!r} for {path.name}; expected .csv or .parquet (or pass format=)")
    if path.stat().st_size == 0:
        raise ValueError(f"{what} {str(path)!r} is empty (0 bytes)")
    before = _file_state(path)
    try:
        frame = pd.read_csv(path, sep=sep or ",") if fmt in ("csv", "txt") else pd.read_parquet(path)
    # pyarrow's read errors (ArrowInvalid) are ValueErrors
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, OSError, ValueError) as exc:
        _check_unchanged(path, before, what)  # a read that failed on a file being rewritten: say that
        raise ValueError(f"cannot read {what} {str(path)!r}: {' '.join(str(exc).split())}") from None
    _check_unchanged(path, before, what)
    _check_delimiter(frame, path, sep, what)
    return frame


def _file_state(path: Path) -> tuple:
    """``(size, modification time in ns, inode)`` of ``path``: what changes when a file is rewritten."""
    st = path.stat()
    return st.st_size, st.st_mtime_ns, st.st_ino


def _check_unchanged(path: Path, before: tuple, what: str) -> None:
    """Refuse a file that changed while it was read (its size, modification time or inode
    differ after the read): the rows read may mix the old and the new content."""
    try:
        after = _file_state(path)
    except OSError:
        after = None
    if after != before:
        now = "was removed" if after is None else (f"went from {before[0]} to {after[0]} bytes" if after[0] != before[0]
                                                   else "was modified or replaced")
        raise ValueError(f"{what} {str(path)!r} changed while it was read (it {now}): the rows read may mix its old and "
                         f"new content, so nothing was computed from them; run again once the file is fully written")


def _check_delimiter(frame, path: Path, sep: str | None, what: str) -> None:
    """A CSV read as a single column whose name holds another delimiter: say which to pass."""
    if frame.shape[1] != 1:
        return
    header = str(frame.columns[0])
    for candidate, shown in ((";", "';'"), ("\t", "'\\t' (tab)"), ("|", "'|'")):
        if candidate != (sep or ",") and candidate in header:
            raise ValueError(Message(f"{what} {str(path)!r} was read as one column {header!r}: it looks "
                                     f"{shown}-delimited; pass ", Mention("sep", candidate)))


def _check_text_column(frame, column: str) -> None:
    """A CSV column read as text that holds both numbers and words is a mixed-type column."""
    import pandas as pd

    col = frame[column]
    if not (col.dtype == object or pd.api.types.is_string_dtype(col)):
        return
    numeric = pd.to_numeric(col.dropna(), errors="coerce").notna()
    if numeric.any() and not numeric.all():
        examples = col.dropna()[numeric].iloc[0], col.dropna()[~numeric].iloc[0]
        raise ValueError(f"column {column!r} mixes numbers and text (e.g. {examples[0]!r} and {examples[1]!r})")


def read_transitions(path, *, episode: str, time: str, state: str | Sequence[str], action: str,
                     terminated: str | None = None, truncated: str | None = None, outcome: str | None = None,
                     reward: str | None = None, action_labels=None, format: str | None = None,
                     sep: str | None = None, time_gaps: str = "error") -> Transitions:
    """Transitions from a long-format CSV / Parquet file (see :func:`genpqr.data.from_pandas`;
    ``sep``: the CSV delimiter; ``time_gaps``: ``"error"`` or ``"split"``)."""
    frame = read_table(path, format=format, sep=sep)
    if action in frame.columns:
        _check_text_column(frame, action)
    return from_pandas(frame, episode=episode, time=time, state=state, action=action, terminated=terminated,
                       truncated=truncated, outcome=outcome, reward=reward, action_labels=action_labels,
                       time_gaps=time_gaps)


def _flat(x) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    return arr.reshape(arr.shape[0], -1)


def from_minari(dataset, *, action_labels=None) -> Transitions:
    """Transitions from a Minari dataset (``minari.MinariDataset``, or anything whose
    ``iterate_episodes()`` yields episodes with ``observations`` (T+1, ...), ``actions`` (T,),
    ``rewards`` (T,) and ``terminations`` (T,)). Discrete actions only; observations are
    flattened.

    Episode ends: Minari records gymnasium's two flags per step. The last transition is
    *terminated* (absorbing, no continuation value) when ``terminations[-1]`` is true, and
    *truncated* (the next state is bootstrapped) otherwise: a time limit
    (``truncations[-1]``) or an episode the collector stopped before it ended. Minari stores
    the final observation, so every step has an observed next state.
    """
    episodes = []
    for ep in dataset.iterate_episodes():
        terms = np.asarray(ep.terminations, dtype=bool)
        episodes.append({"states": _flat(ep.observations), "actions": np.asarray(ep.actions).reshape(-1),
                         "terminated": bool(terms[-1]) if terms.size else False,
                         "rewards": np.asarray(ep.rewards, dtype=np.float64)})
    return from_episodes(episodes, action_labels=action_labels)


def from_d3rlpy(dataset, *, action_labels=None) -> Transitions:
    """Transitions from a d3rlpy ``MDPDataset`` (``dataset.episodes``, each with
    ``observations`` (T, d), ``actions`` (T,) or (T, 1), ``rewards`` (T,) or (T, 1) and
    ``terminated``). Discrete actions only.

    Episode ends: d3rlpy builds episodes from ``terminals`` and ``timeouts``. An episode cut by
    ``terminals`` has ``terminated`` true: its last transition is *terminated* (absorbing; its
    next state is never used). An episode cut by ``timeouts`` has ``terminated`` false:
    d3rlpy stores T observations for T actions, so its last step has no observed next state
    and is kept as a choice-only row (``next_observed`` False; it enters stage 1 and the choice
    counts, not stage 2; see :func:`genpqr.data.from_episodes`).
    """
    episodes = []
    for ep in dataset.episodes:
        episodes.append({"states": _flat(ep.observations), "actions": np.asarray(ep.actions).reshape(-1),
                         "terminated": bool(ep.terminated),
                         "rewards": np.asarray(ep.rewards, dtype=np.float64).reshape(-1)})
    return from_episodes(episodes, action_labels=action_labels)


TIME_LIMIT_KEY = "TimeLimit.truncated"


def _imitation_terminated(traj) -> bool | None:
    """An imitation trajectory ends in an absorbing state: ``terminal`` (the episode's end is in
    the trajectory) and not cut by a time limit (``infos[-1]["TimeLimit.truncated"]``, set by
    stable-baselines3's vectorized environments). ``None``: ``terminal`` but no ``infos`` to
    tell (taken as terminated, with a warning from :func:`from_imitation`)."""
    if not bool(traj.terminal):
        return False
    infos = getattr(traj, "infos", None)
    if infos is None or len(infos) == 0:
        return None
    last = infos[-1]
    return not bool(last.get(TIME_LIMIT_KEY, False)) if isinstance(last, dict) else None


def from_imitation(trajectories, *, action_labels=None) -> Transitions:
    """Transitions from a list of imitation ``Trajectory`` / ``TrajectoryWithRew`` objects
    (``obs`` (T+1, ...), ``acts`` (T,), ``terminal``, ``infos``; ``rews`` when present), e.g.
    from ``imitation.data.rollout.generate_trajectories``. Discrete actions only.

    Episode ends: imitation sets ``terminal=True`` on every complete episode, whether it
    ended in an absorbing state or at a time limit; the time limit is recorded as
    ``infos[-1]["TimeLimit.truncated"]``. The last transition is therefore *terminated* when
    ``terminal`` is true and that flag is false or absent, and *truncated* (the next state,
    ``obs[-1]``, is bootstrapped) when the flag is true or the trajectory is a fragment
    (``terminal=False``). Trajectories without ``infos`` cannot tell a time limit from an
    absorbing end: ``terminal`` is then taken as terminated, and a ``GenPQRWarning`` says how
    many ends were read that way.
    """
    episodes, unknown = [], 0
    for traj in trajectories:
        terminated = _imitation_terminated(traj)
        unknown += terminated is None
        ep = {"states": _flat(traj.obs), "actions": np.asarray(traj.acts).reshape(-1),
              "terminated": terminated is not False}
        if getattr(traj, "rews", None) is not None:
            ep["rewards"] = np.asarray(traj.rews, dtype=np.float64)
        episodes.append(ep)
    if unknown:
        import warnings

        from ..exceptions import GenPQRWarning

        warnings.warn(f"{unknown} of {len(episodes)} imitation trajectories end with terminal=True but carry no infos "
                      f"(infos[-1]['{TIME_LIMIT_KEY}'] is how imitation records a time limit): their ends are taken "
                      f"as terminated (absorbing, no continuation value); if a time limit cut them, build the data "
                      f"with genpqr.data.from_episodes and 'terminated': False for those episodes", GenPQRWarning,
                      stacklevel=2)
    return from_episodes(episodes, action_labels=action_labels)

"""Logged transitions: the one data type every stage reads.

A :class:`Transitions` holds ``n`` transitions ``(s_i, a_i, s'_i)`` with

* ``states``, ``next_states``: float arrays of shape ``(n, d)`` (a tabular state is an
  integer index stored as a single column);
* ``actions``: integer codes ``0..K-1``; ``action_labels[code]`` is the user's label;
* ``terminated``: the episode ended *in* ``s'`` (absorbing, zero continuation value);
* ``truncated``: the episode was cut after this step (time limit); ``s'`` is observed and
  bootstrapped like any other next state;
* ``episode_ids``: an integer per row, used to group rows for cross-fitting and bootstraps;
* ``next_observed``: False on a *choice-only* row, a choice whose next state was never
  observed (the last row of an episode whose logging stopped). Its choice is data for
  stage 1 and the choice likelihood (:func:`genpqr.ddc.choice_counts`); its ``next_states``
  entry is NaN, and every consumer of next states (kernels, FQE, the exact solve,
  baselines) reads :meth:`Transitions.with_next`, the complete transitions only;
* optional ``outcomes`` (realised outcomes ``y``, for the behaviour normalization) and
  ``rewards`` (logged rewards: never used by IRL, kept for supervised baselines).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ._checks import as_float_array, check_length, looks_continuous, plain, short_list

__all__ = ["Transitions", "EpisodeRows", "ActionEncoder", "from_arrays", "from_pandas", "from_episodes",
           "long_format_rows", "LongFormatRows", "episode_segments", "time_gap_rows", "TIME_GAPS"]


@dataclass(frozen=True)
class ActionEncoder:
    """Bijection between the user's action labels and integer codes ``0..K-1``.

    Parameters
    ----------
    labels : ndarray of shape (K,)
        The labels, in code order (``labels[code]``).
    """

    labels: np.ndarray

    def __post_init__(self):
        labels = np.array(self.labels)  # a private copy: later changes to the caller's array do not leak in
        if labels.ndim != 1 or labels.size == 0:
            raise ValueError(f"action labels must be a non-empty 1-D sequence, got shape {labels.shape}")
        if len(np.unique(labels)) != labels.size:
            raise ValueError(f"action labels must be distinct, got {short_list(labels, 20)}")
        labels.setflags(write=False)
        object.__setattr__(self, "labels", labels)

    @property
    def n_actions(self) -> int:
        return int(self.labels.size)

    @classmethod
    def from_observed(cls, actions) -> "ActionEncoder":
        """Sorted unique labels of ``actions``."""
        return cls(np.unique(np.asarray(actions)))

    def encode(self, actions, name: str = "actions") -> np.ndarray:
        """Codes ``(n,)`` int64 for labels ``actions``; unknown labels raise ``ValueError``."""
        actions = np.asarray(actions)
        if actions.ndim == 2 and actions.shape[1] == 1:
            actions = actions[:, 0]
        if actions.ndim != 1:
            raise ValueError(f"{name} must be a 1-D array of action labels, got shape {actions.shape}")
        if actions.dtype.kind == "f" and not np.all(np.isfinite(actions)):
            raise ValueError(f"{name} must not contain NaN/inf")
        order = np.argsort(self.labels, kind="stable")
        sorted_labels = self.labels[order]
        try:
            pos = np.searchsorted(sorted_labels, actions)
        except TypeError as exc:
            raise TypeError(
                f"{name} has labels of type {actions.dtype} that cannot be compared with the known "
                f"action labels {short_list(self.labels, 20)}"
            ) from exc
        pos = np.clip(pos, 0, len(sorted_labels) - 1)
        known = sorted_labels[pos] == actions
        if not np.all(known):
            unknown = np.unique(actions[~known])[:5].tolist()
            raise ValueError(
                f"{name} contains action label(s) {unknown} that the model never saw; "
                f"known labels are {short_list(self.labels, 20)}"
            )
        return order[pos].astype(np.int64)

    def encode_one(self, label, name: str = "action") -> int:
        return int(self.encode(np.asarray([label]), name=name)[0])

    def decode(self, codes) -> np.ndarray:
        """Labels for integer codes."""
        codes = np.asarray(codes, dtype=np.int64)
        if codes.size and (codes.min() < 0 or codes.max() >= self.n_actions):
            raise ValueError(f"action codes must be in [0, {self.n_actions}), got [{codes.min()}, {codes.max()}]")
        return self.labels[codes]


class EpisodeRows:
    """Row bookkeeping shared by the transition types (discrete :class:`Transitions` and
    continuous-action ``genpqr.continuous.ContinuousTransitions``): lengths, read-only
    arrays, subsets and episode-grouped splits. Subclasses list their per-row array fields
    in ``_ROW_FIELDS`` (``None`` allowed for optional ones)."""

    _ROW_FIELDS: tuple = ("states", "actions", "next_states", "terminated", "truncated", "episode_ids",
                          "outcomes", "rewards", "timesteps")

    def _check_rows(self) -> None:
        """Equal lengths (named errors) and read-only storage of every per-row array."""
        n = self.actions.shape[0]
        if self.states.ndim != 2 or self.next_states.shape != self.states.shape:
            raise ValueError(
                f"states and next_states must both have shape (n, d); got {self.states.shape} and "
                f"{self.next_states.shape}"
            )
        for name in self._ROW_FIELDS:
            value = getattr(self, name)
            if value is not None:
                check_length(value, n, name, "actions")
                value.setflags(write=False)

    @property
    def n(self) -> int:
        """Number of transitions."""
        return int(self.actions.shape[0])

    def __len__(self) -> int:
        return self.n

    @property
    def state_dim(self) -> int:
        return int(self.states.shape[1])

    @property
    def n_episodes(self) -> int:
        return int(np.unique(self.episode_ids).size)

    @property
    def continues(self) -> np.ndarray:
        """``1 - terminated`` as float, shape (n,): the weight of the continuation term."""
        return 1.0 - self.terminated.astype(np.float64)

    @property
    def shape(self) -> tuple[int]:
        """``(n,)``: the rows as one axis of samples, so that scikit-learn's model selection
        (``GridSearchCV``, ``cross_validate``, ``train_test_split``) counts and indexes them
        like an array (it reads ``shape[0]`` and takes ``data[indices, ...]``)."""
        return (self.n,)

    def __getitem__(self, index):
        """Rows ``index`` as the same type (:meth:`subset`): integer indices, a boolean mask of
        length ``n`` or a slice; ``data[index, ...]`` (how scikit-learn's splitters index) is the
        same. A single integer is refused with a TypeError, so iterating over the rows fails
        loudly (``data[[i]]`` is row ``i`` as one-row data)."""
        if isinstance(index, tuple):
            if len(index) == 2 and index[1] is Ellipsis:
                index = index[0]
            else:
                raise IndexError(f"{type(self).__name__} has one axis (rows); got the index {index!r}")
        if isinstance(index, slice):
            index = np.arange(self.n)[index]
        if np.ndim(index) == 0:  # TypeError, not IndexError: iteration (list(data)) fails loudly, not empty
            raise TypeError(f"index {type(self).__name__} rows with an array of integer indices, a boolean mask or "
                            f"a slice (data[[i]] for row i alone); got the scalar {index!r}")
        index = np.asarray(index)
        if index.ndim != 1 or not (index.dtype == bool or index.dtype.kind in "iu" or index.size == 0):
            raise IndexError(f"index {type(self).__name__} rows with a 1-d array of integer indices, a boolean mask "
                             f"or a slice (data[[i]] for row i alone); got {index!r:.80}")
        if index.dtype == bool and index.size != self.n:
            raise IndexError(f"boolean mask has {index.size} entries but the data has {self.n} rows")
        return self.subset(index if index.size else np.zeros(0, dtype=np.int64))

    def subset(self, index):
        """Rows ``index`` (a boolean mask or integer indices); everything else is kept."""
        index = np.asarray(index)
        return replace(self, **{name: None if getattr(self, name) is None else np.array(getattr(self, name)[index])
                                for name in self._ROW_FIELDS})

    def episode_folds(self, n_splits: int, random_state=None) -> list[tuple[np.ndarray, np.ndarray]]:
        """(train_index, test_index) pairs of a K-fold split that keeps episodes whole."""
        from sklearn.model_selection import GroupKFold

        if n_splits < 2:
            raise ValueError(f"n_splits must be at least 2, got {n_splits}")
        if self.n_episodes < n_splits:
            raise ValueError(f"cannot make {n_splits} episode folds from {self.n_episodes} episode(s)")
        splitter = GroupKFold(n_splits=n_splits, shuffle=True, random_state=random_state)
        return [(tr, te) for tr, te in splitter.split(self.states, groups=self.episode_ids)]

    def split_episodes(self, test_fraction: float, random_state=None):
        """Random train/test split by whole episodes."""
        from ._checks import check_random_state

        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
        episodes = np.unique(self.episode_ids)
        if episodes.size < 2:
            raise ValueError("need at least 2 episodes to split by episode")
        rng = check_random_state(random_state)
        n_test = min(max(1, int(round(test_fraction * episodes.size))), episodes.size - 1)
        test_eps = rng.choice(episodes, size=n_test, replace=False)
        is_test = np.isin(self.episode_ids, test_eps)
        return self.subset(~is_test), self.subset(is_test)


@dataclass(frozen=True, eq=False)
class Transitions(EpisodeRows):
    """Validated logged transitions. Build with :func:`from_arrays`, :func:`from_pandas` or
    :func:`from_episodes` rather than directly.

    Attributes
    ----------
    states, next_states : ndarray of shape (n, d), float64
    actions : ndarray of shape (n,), int64 codes in ``0..K-1``
    terminated, truncated : ndarray of shape (n,), bool
    episode_ids : ndarray of shape (n,), int64
    encoder : ActionEncoder
    outcomes, rewards : ndarray of shape (n,) or None
    timesteps : ndarray of shape (n,) or None
    """

    states: np.ndarray
    actions: np.ndarray
    next_states: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    episode_ids: np.ndarray
    encoder: ActionEncoder
    outcomes: np.ndarray | None = None
    rewards: np.ndarray | None = None
    timesteps: np.ndarray | None = None
    state_names: tuple[str, ...] | None = field(default=None)
    next_observed: np.ndarray | None = None

    _ROW_FIELDS = EpisodeRows._ROW_FIELDS + ("next_observed",)

    def __post_init__(self):
        if self.next_observed is None:
            object.__setattr__(self, "next_observed", np.ones(self.actions.shape[0], dtype=bool))
        self._check_rows()
        n = self.n
        if self.next_observed.dtype != bool:
            raise TypeError(f"next_observed must be boolean, got dtype {self.next_observed.dtype}")
        if np.any(~self.next_observed & self.terminated):
            raise ValueError("a terminated row has an (absorbing) next state: next_observed must be True there")
        bad = self.next_observed & ~np.all(np.isfinite(self.next_states), axis=1)
        if bad.any():
            raise ValueError(f"next_states has NaN/inf at row {int(np.flatnonzero(bad)[0])}, whose next state is "
                             f"marked observed")
        if n and (self.actions.min() < 0 or self.actions.max() >= self.encoder.n_actions):
            raise ValueError("actions must be codes in [0, K)")

    @property
    def n_actions(self) -> int:
        return self.encoder.n_actions

    @property
    def n_choice_only(self) -> int:
        """Rows whose next state is not observed (choices that are not transitions)."""
        return int(self.n - np.count_nonzero(self.next_observed))

    def with_next(self) -> "Transitions":
        """The complete transitions only (rows with an observed next state, or terminated):
        what every consumer of ``next_states`` reads. ``self`` when every row is one."""
        if self.n_choice_only == 0:
            return self
        if self.n_choice_only == self.n:
            raise ValueError("no row has an observed next state (every episode has a single row): transitions "
                             "cannot be estimated")
        return self.subset(self.next_observed)

    @property
    def action_labels(self) -> np.ndarray:
        return self.encoder.labels

    def action_counts(self) -> np.ndarray:
        """Number of rows per action code, shape (K,)."""
        return np.bincount(self.actions, minlength=self.n_actions)

    def labels_of(self, codes=None) -> np.ndarray:
        """The user's labels of ``codes`` (default: of every row's action)."""
        return self.encoder.decode(self.actions if codes is None else codes)

    def to_pandas(self, state_columns: Sequence[str] | None = None):
        """Long-format frame: one row per transition with state, action label, next state.

        Read it back with ``from_pandas(frame, ..., next_state=["next_s0", ...])`` (a
        choice-only row has NaN next-state columns and is read back as one).
        """
        import pandas as pd

        names = list(state_columns or self.state_names or [f"s{j}" for j in range(self.state_dim)])
        frame = pd.DataFrame(self.states, columns=names)
        frame.insert(0, "episode", self.episode_ids)
        if self.timesteps is not None:
            frame.insert(1, "time", self.timesteps)
        frame["action"] = self.labels_of()
        for j, name in enumerate(names):
            frame[f"next_{name}"] = self.next_states[:, j]
        frame["terminated"] = self.terminated
        frame["truncated"] = self.truncated
        if self.n_choice_only:
            frame["next_observed"] = self.next_observed
        if self.outcomes is not None:
            frame["outcome"] = self.outcomes
        if self.rewards is not None:
            frame["reward"] = self.rewards
        return frame


# ---------------------------------------------------------------------- builders
def refuse_continuous_labels(actions, name: str = "actions") -> None:
    """``ValueError`` when action labels look real-valued (:func:`genpqr._checks.looks_continuous`:
    floats, more than 50 distinct values making up more than 10% of the rows, some not integers)
    -- the rule ``genpqr fit`` applies too. The builders skip it when ``action_labels`` is given."""
    actions = np.asarray(actions)
    if looks_continuous(actions, actions.shape[0]):
        raise ValueError(
            f"{name} {'holds' if name.startswith('action column') else 'hold'} {np.unique(actions).size:,} distinct "
            f"real numbers: these look like continuous actions, and "
            "GenPQR would fit one discrete action per value. For continuous actions use genpqr.continuous "
            "(from_arrays, ContinuousGenPQR; genpqr fit: --action-type continuous); to treat them as labels anyway, "
            "pass action_labels=")


def _flags(x, n: int, name: str) -> np.ndarray:
    if x is None:
        return np.zeros(n, dtype=bool)
    arr = np.asarray(x)
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {arr.shape}")
    if arr.dtype != bool:
        if not np.issubdtype(arr.dtype, np.number) or not np.all(np.isin(arr, (0, 1))):
            raise TypeError(f"{name} must be boolean (or 0/1), got dtype {arr.dtype}")
        arr = arr.astype(bool)
    return arr.copy()


def _optional_vector(x, n: int, name: str) -> np.ndarray | None:
    if x is None:
        return None
    arr = as_float_array(x, name, ndim=1)
    check_length(arr, n, name, "actions")
    return arr.copy()


def from_arrays(
    states,
    actions,
    next_states,
    *,
    terminated=None,
    truncated=None,
    episode_ids=None,
    outcomes=None,
    rewards=None,
    timesteps=None,
    action_labels=None,
    state_names: Sequence[str] | None = None,
    next_observed=None,
) -> Transitions:
    """Transitions from arrays.

    Parameters
    ----------
    states, next_states : array-like of shape (n, d) or (n,)
        Numeric; a 1-D array is one state variable (e.g. a tabular index).
    actions : array-like of shape (n,)
        Any labels (ints, strings, ...); mapped to codes ``0..K-1``.
    terminated, truncated : array-like of bool, shape (n,), optional
    episode_ids : array-like of shape (n,), optional
        Default: every row is its own episode.
    outcomes, rewards, timesteps : array-like of shape (n,), optional
    action_labels : sequence, optional
        The full label set in code order. Default: the sorted observed labels. Give it when
        some actions are never observed or when codes must follow a fixed order.
    next_observed : array-like of bool, shape (n,), optional
        False marks a choice-only row: a choice whose next state was not observed (its
        ``next_states`` entry may be anything, NaN included, and is stored as NaN). Default:
        every row is a complete transition.
    """
    states_arr = as_float_array(states, "states", ndim=2, allow_1d_as_column=True).copy()
    n_rows = np.shape(states_arr)[0]
    observed = _flags(next_observed, n_rows, "next_observed") if next_observed is not None else None
    if observed is not None and not observed.all():
        next_raw = np.array(next_states, dtype=np.float64, copy=True)
        if next_raw.ndim == 1:
            next_raw = next_raw[:, None]
        if next_raw.shape[0] == n_rows:
            next_raw[~observed] = 0.0  # placeholder for the finiteness check; stored as NaN below
        next_arr = as_float_array(next_raw, "next_states", ndim=2, allow_1d_as_column=True).copy()
    else:
        next_arr = as_float_array(next_states, "next_states", ndim=2, allow_1d_as_column=True).copy()
    actions_raw = np.asarray(actions)
    if actions_raw.ndim == 2 and actions_raw.shape[1] == 1:
        actions_raw = actions_raw[:, 0]
    if actions_raw.ndim != 1:
        raise ValueError(f"actions must be 1-D with one label per row, got shape {actions_raw.shape}")
    n = actions_raw.shape[0]
    if n == 0:
        raise ValueError("transitions must contain at least one row, got 0")
    check_length(states_arr, n, "states", "actions")
    check_length(next_arr, n, "next_states", "actions")
    if next_arr.shape[1] != states_arr.shape[1]:
        raise ValueError(
            f"next_states must have the same number of columns as states ({states_arr.shape[1]}), "
            f"got {next_arr.shape[1]}"
        )
    if actions_raw.dtype == object and any(a is None for a in actions_raw):
        raise ValueError("actions must not contain missing values (None)")
    if action_labels is None:
        refuse_continuous_labels(actions_raw)
    encoder = ActionEncoder(np.asarray(action_labels)) if action_labels is not None else ActionEncoder.from_observed(actions_raw)
    codes = encoder.encode(actions_raw)
    if episode_ids is None:
        ep = np.arange(n, dtype=np.int64)
    else:
        ep_raw = np.asarray(episode_ids)
        if ep_raw.shape != (n,):
            raise ValueError(f"episode_ids must have shape ({n},), got {ep_raw.shape}")
        ep = np.unique(ep_raw, return_inverse=True)[1].astype(np.int64).reshape(-1)
    if observed is not None:
        next_arr[~observed] = np.nan
    return Transitions(
        states=states_arr,
        actions=codes,
        next_states=next_arr,
        terminated=_flags(terminated, n, "terminated"),
        truncated=_flags(truncated, n, "truncated"),
        episode_ids=ep,
        encoder=encoder,
        outcomes=_optional_vector(outcomes, n, "outcomes"),
        rewards=_optional_vector(rewards, n, "rewards"),
        timesteps=_optional_vector(timesteps, n, "timesteps"),
        state_names=tuple(state_names) if state_names is not None else None,
        next_observed=observed,
    )


def from_pandas(
    frame,
    *,
    episode: str,
    time: str,
    state: str | Sequence[str],
    action: str,
    terminated: str | None = None,
    truncated: str | None = None,
    outcome: str | None = None,
    reward: str | None = None,
    action_labels=None,
    next_state: str | Sequence[str] | None = None,
    keep_last: bool = True,
    time_gaps: str = "error",
) -> Transitions:
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
        Column names.
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
        the rule is in :func:`time_gap_rows`): ``"error"`` (default) raises ``ValueError``
        naming the first episode and step; ``"split"`` starts a new episode after each gap
        (the step before the gap is then the last choice of its episode).
    """
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
    wanted += [c for c in (terminated, truncated, outcome, reward) if c]
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise ValueError(f"frame is missing column(s) {missing}; it has {list(frame.columns)}")
    for col in state_cols + (next_cols or []):
        if not pd.api.types.is_numeric_dtype(frame[col]):
            raise TypeError(f"state column {col!r} must be numeric, got dtype {frame[col].dtype}")
    kinds = {type(v) for v in frame[action].dropna().tolist()}
    if len(kinds) > 1 and not all(issubclass(k, (int, float, np.number)) for k in kinds):
        raise ValueError(f"action column {action!r} mixes types {sorted(k.__name__ for k in kinds)}; use one label type")
    if frame[action].isna().any():
        raise ValueError(f"action column {action!r} has {int(frame[action].isna().sum())} missing value(s)")
    check_time_column(frame, time)
    if action_labels is None:
        refuse_continuous_labels(frame[action].to_numpy(), f"action column {action!r}")
    rows = long_format_rows(frame, episode=episode, time=time, state=state_cols, terminated=terminated,
                            truncated=truncated, next_state=next_cols, keep_last=keep_last,
                            time_gaps=time_gaps)
    df, idx = rows.frame, rows.index
    check_some_rows(rows, episode)

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
        action_labels=action_labels if action_labels is not None else np.unique(df[action].to_numpy()),
        state_names=state_cols,
        next_observed=rows.next_observed,
    )


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
                     keep_last: bool = False, time_gaps: str = "error") -> LongFormatRows:
    """Pair each row of a long-format frame with its next state (the rules of :func:`from_pandas`,
    shared by discrete and continuous actions; the columns must exist and be numeric).
    ``keep_last``: keep an episode's last, non-terminated row as a choice-only row
    (``next_observed`` False) instead of dropping it. ``time_gaps``: see :func:`episode_segments`."""
    state_cols, next_cols = list(state), None if next_state is None else list(next_state)
    df = frame.sort_values([episode, time], kind="stable")
    if df.duplicated([episode, time]).any():
        dup = df.loc[df.duplicated([episode, time]), [episode, time]].iloc[0].tolist()
        raise ValueError(f"({episode}, {time}) pairs must be unique; {dup} appears more than once")
    ep = df[episode].to_numpy() if next_cols is not None else episode_segments(df, episode, time, time_gaps)
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


TIME_GAPS = ("error", "split")


def check_time_column(frame, time: str) -> None:
    """The time column must hold finite numbers (``TypeError`` / ``ValueError`` naming it)."""
    import pandas as pd

    col = frame[time]
    if not pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
        raise TypeError(f"time column {time!r} must hold numbers (time steps), got dtype {col.dtype}")
    bad = ~np.isfinite(col.to_numpy(dtype=np.float64))
    if bad.any():
        raise ValueError(f"time column {time!r} has {int(bad.sum())} missing or infinite value(s)")


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


def time_gap_rows(df, episode: str, time: str) -> tuple[np.ndarray, np.ndarray]:
    """Where a time step is missing inside an episode, in a frame sorted by (episode, time).

    The rule: a step (the time difference between consecutive rows of one episode) is a gap
    when it exceeds the expected step by more than 1e-9 relative. With integer times (a step
    counter) the expected step is the data's modal step (the most frequent step over all
    episodes, the smallest on ties: 1 for a counter 0, 1, 2, ...); with non-integer times
    (clock readings, possibly sampled at different rates in different episodes) it is the
    episode's own modal step.

    Returns ``(rows, expected)``: the positions ``i`` (int array, shape (n_gaps,)) whose next
    row is in the same episode after a gap, and the expected step at each of them."""
    import pandas as pd

    ep, t = df[episode].to_numpy(), df[time].to_numpy(dtype=np.float64)
    same = ep[:-1] == ep[1:]
    if not same.any():
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    step = np.diff(t)
    expected = np.full(step.size, np.inf)
    if np.all(t == np.round(t)):
        values, counts = np.unique(step[same], return_counts=True)
        expected[same] = values[np.argmax(counts)]
    else:
        pairs = pd.DataFrame({"g": np.cumsum(np.r_[True, ~same])[:-1], "d": np.round(step, 9)})[same]
        counts = pairs.value_counts().rename("n").reset_index().sort_values(["g", "n", "d"],
                                                                           ascending=[True, False, True])
        modal = counts.drop_duplicates("g").set_index("g")["d"]
        expected[same] = modal.reindex(pairs["g"]).to_numpy()
    rows = np.flatnonzero(same & (step > expected * (1 + 1e-9) + 1e-12))
    return rows, expected[rows]


def episode_segments(df, episode: str, time: str, time_gaps: str = "error") -> np.ndarray:
    """The episode key of every row of a frame sorted by (episode, time), after the time-gap
    rule of :func:`time_gap_rows`.

    ``time_gaps="error"`` (default) raises ``ValueError`` naming the first episode and step
    followed by a gap (pairing the step before a gap with the one after it would make a
    transition that was never observed). ``"split"`` starts a new episode after each gap: the
    step before the gap is then the end of an episode, handled like any episode end (no observed
    next state). Without gaps the episode column's values are returned; with a split, integer
    segment numbers ``0..``."""
    if time_gaps not in TIME_GAPS:
        raise ValueError(f"time_gaps must be one of {list(TIME_GAPS)}, got {time_gaps!r}")
    ep = df[episode].to_numpy()
    gaps, expected = time_gap_rows(df, episode, time)
    if gaps.size == 0:
        return ep
    if time_gaps == "error":
        i = int(gaps[0])
        t = df[time].to_numpy()
        raise ValueError(
            f"time gap inside an episode: episode {plain(ep[i])!r} jumps from {time} {plain(t[i])} to "
            f"{plain(t[i + 1])}, a step of {plain(t[i + 1] - t[i]):g} where {plain(expected[0]):g} is expected "
            f"({gaps.size} gap(s) in {np.unique(ep[gaps]).size} episode(s)). Joining the steps around a gap would "
            f"make transitions that were never observed: fill in the missing rows, or start a new episode at each "
            f"gap with time_gaps='split' (genpqr fit: --time-gaps split)")
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
    return _flags(values, len(df), f"column {column!r}")


def from_episodes(episodes: Iterable[Mapping[str, Any]], *, action_labels=None, keep_last: bool = True) -> Transitions:
    """Transitions from a list of episodes.

    Each episode is a mapping with ``"states"`` of shape (T+1, d) (every visited state,
    including the last) or (T, d), ``"actions"`` of shape (T,), and optionally
    ``"terminated"`` (bool: the episode ended in an absorbing state), ``"outcomes"`` and
    ``"rewards"`` of shape (T,). With T+1 states the final transition is terminated or
    truncated according to ``"terminated"``. With T states the last step has no observed
    next state: if the episode terminated it is a terminated transition; otherwise, with
    ``keep_last=True`` (default) it is a choice-only row (``next_observed`` False, as in
    :func:`from_pandas`), with ``keep_last=False`` it is dropped.
    """
    episodes = list(episodes)
    cols: dict[str, list] = {k: [] for k in ("s", "a", "s2", "term", "trunc", "ep", "t", "y", "r", "obs")}
    has_y = has_r = None
    for e, episode in enumerate(episodes):
        if not isinstance(episode, Mapping) or "states" not in episode or "actions" not in episode:
            raise TypeError(f"episode {e} must be a mapping with 'states' and 'actions'")
        s = as_float_array(episode["states"], f"episodes[{e}]['states']", ndim=2, allow_1d_as_column=True)
        a = np.asarray(episode["actions"])
        if a.ndim != 1 or a.shape[0] == 0:
            raise ValueError(f"episodes[{e}]['actions'] must be a non-empty 1-D array, got shape {a.shape}")
        if a.dtype == object and any(x is None for x in a):
            raise ValueError(f"episodes[{e}]['actions'] must not contain missing values (None)")
        T = a.shape[0]
        done = bool(episode.get("terminated", False))
        if s.shape[0] == T + 1:
            s_now, s_next, m = s[:-1], s[1:], T
        elif s.shape[0] == T:
            m = T if (done or keep_last) else T - 1
            s_now, s_next = s[:m], np.vstack([s[1:], s[-1:]])[:m]
        else:
            raise ValueError(f"episodes[{e}]['states'] must have T+1={T + 1} or T={T} rows, got {s.shape[0]}")
        obs = np.ones(m, dtype=bool)
        if s.shape[0] == T and not done and keep_last:
            obs[-1] = False
        cols["obs"].append(obs)
        term = np.zeros(m, dtype=bool)
        trunc = np.zeros(m, dtype=bool)
        if m:
            term[-1] = done
            trunc[-1] = not done
        for key, flag_name in (("outcomes", "y"), ("rewards", "r")):
            present = key in episode
            if flag_name == "y":
                has_y = present if has_y is None else has_y
                if present != has_y:
                    raise ValueError("either every episode or none must have 'outcomes'")
            else:
                has_r = present if has_r is None else has_r
                if present != has_r:
                    raise ValueError("either every episode or none must have 'rewards'")
            if present:
                vals = as_float_array(episode[key], f"episodes[{e}]['{key}']", ndim=1)
                if vals.shape[0] != T:
                    raise ValueError(f"episodes[{e}]['{key}'] must have {T} entries, got {vals.shape[0]}")
                cols[flag_name].append(vals[:m])
        cols["s"].append(s_now)
        cols["s2"].append(s_next)
        cols["a"].append(a[:m])
        cols["term"].append(term)
        cols["trunc"].append(trunc)
        cols["ep"].append(np.full(m, e, dtype=np.int64))
        cols["t"].append(np.arange(m, dtype=np.float64))
    if not cols["s"]:
        raise ValueError("episodes must contain at least one episode")
    cat = {k: (np.concatenate(v) if v else None) for k, v in cols.items()}
    all_actions = np.concatenate([np.asarray(ep["actions"]) for ep in episodes]) if action_labels is None else None
    if action_labels is None:
        refuse_continuous_labels(all_actions, "the episodes' actions")
    return from_arrays(
        cat["s"],
        cat["a"],
        cat["s2"],
        terminated=cat["term"],
        truncated=cat["trunc"],
        episode_ids=cat["ep"],
        outcomes=cat["y"],
        rewards=cat["r"],
        timesteps=cat["t"],
        action_labels=action_labels if action_labels is not None else np.unique(all_actions),
        next_observed=cat["obs"],
    )

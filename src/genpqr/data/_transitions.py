"""Logged transitions: the one data type every stage reads.

A :class:`Transitions` holds ``n`` transitions ``(s_i, a_i, s'_i)`` with

* ``states``, ``next_states``: float arrays of shape ``(n, d)`` (a tabular state is an
  integer index stored as a single column);
* ``actions`` and ``action_space`` (:mod:`genpqr.data`): for a finite action set
  (:class:`~genpqr.data.FiniteActions`) integer codes ``0..K-1`` of shape ``(n,)``, with
  ``action_labels[code]`` the user's label; for a box in ``R^m``
  (:class:`~genpqr.data.BoxActions`) real actions of shape ``(n, m)``;
* ``terminated``: the episode ended *in* ``s'`` (absorbing, zero continuation value);
* ``truncated``: the episode was cut after this step (time limit); ``s'`` is observed and
  bootstrapped like any other next state;
* ``episode_ids``: an integer per row, used to group rows for cross-fitting and bootstraps;
* ``next_observed``: False on a *choice-only* row, a choice whose next state was never
  observed (the last row of an episode whose logging stopped). Its choice is data for
  stage 1 and the choice likelihood (:func:`genpqr.structural.choice_counts`); its ``next_states``
  entry is NaN, and every consumer of next states (kernels, FQE, the exact solve,
  baselines) reads :meth:`Transitions.with_next`, the complete transitions only;
* optional ``outcomes`` (realised outcomes ``y``, for the behaviour normalization) and
  ``rewards`` (logged rewards: never used by IRL, kept for supervised baselines);
* optional ``sample_weight``: non-negative row weights (both stages read them on the
  continuous-action path).

Build transitions with the builders of :mod:`genpqr.data` (``from_arrays``, ``from_pandas``,
``from_episodes``), not directly.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from ._validation import as_float_array, check_length
from ._spaces import ActionSpace, BoxActions, FiniteActions

__all__ = ["Transitions", "EpisodeRows", "as_flags", "optional_vector", "group_folds"]


def group_folds(groups, n_splits: int, random_state=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train_index, test_index) pairs of ``sklearn.model_selection.GroupKFold(n_splits,
    shuffle=True, random_state=random_state)`` over ``groups`` -- the same folds, without
    importing scikit-learn: the distinct groups permuted by ``random_state`` (None: numpy's
    global RandomState; an int seeds a RandomState; a RandomState is used as is), then cut into
    ``n_splits`` consecutive runs of sizes differing by at most one. Any other ``random_state``
    or ``groups`` (several columns, objects, non-finite numbers), or fewer groups than folds, go
    to scikit-learn's splitter (its checks and messages)."""
    groups = np.asarray(groups)
    if random_state is None:
        rng = np.random.mtrand._rand
    elif isinstance(random_state, (numbers.Integral, np.integer)):
        rng = np.random.RandomState(random_state)
    elif isinstance(random_state, np.random.RandomState):
        rng = random_state
    else:
        rng = None
    plain = groups.ndim == 1 and (groups.dtype.kind in "iubUS"
                                  or groups.dtype.kind == "f" and bool(np.all(np.isfinite(groups))))
    codes = np.unique(groups, return_inverse=True)[1].reshape(-1) if plain else None
    n_groups = int(codes.max()) + 1 if plain and codes.size else 0
    if rng is None or not plain or not 2 <= n_splits <= n_groups:
        from sklearn.model_selection import GroupKFold

        splitter = GroupKFold(n_splits=n_splits, shuffle=True, random_state=random_state)
        return list(splitter.split(np.zeros((groups.shape[0], 1)), groups=groups))
    fold_of = np.empty(n_groups, dtype=np.int64)
    for k, run in enumerate(np.array_split(rng.permutation(n_groups), n_splits)):
        fold_of[run] = k
    row_fold = fold_of[codes]
    return [(np.flatnonzero(row_fold != k), np.flatnonzero(row_fold == k)) for k in range(n_splits)]


def as_flags(x, n: int, name: str) -> np.ndarray:
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


def optional_vector(x, n: int, name: str) -> np.ndarray | None:
    if x is None:
        return None
    arr = as_float_array(x, name, ndim=1)
    check_length(arr, n, name, "actions")
    return arr.copy()



class EpisodeRows:
    """Row bookkeeping of :class:`Transitions`: lengths, read-only arrays, subsets and
    episode-grouped splits. Subclasses list their per-row array fields in ``_ROW_FIELDS``
    (``None`` allowed for optional ones)."""

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

    def fingerprint(self) -> str:
        """SHA-256 of the rows' content (every per-row array: values, dtype and shape, in row
        order), hex: equal for the same data read again, different after any change of a value
        or of the order of the rows (e.g. the time order inside an episode). The action labels
        count too."""
        import hashlib

        digest = hashlib.sha256()
        for name in self._ROW_FIELDS:
            value = getattr(self, name)
            digest.update(name.encode())
            if value is not None:
                value = np.ascontiguousarray(value)
                digest.update(f"{value.dtype.str}{value.shape}".encode())
                digest.update(value.tobytes() if value.dtype != object else repr(value.tolist()).encode())
        space = getattr(self, "action_space", None)
        digest.update(repr(getattr(space, "labels", None) if space is None or not space.is_finite
                           else np.asarray(space.labels).tolist()).encode())
        if getattr(space, "table", None) is not None:
            digest.update(np.ascontiguousarray(space.table.features).tobytes())
        return digest.hexdigest()

    @property
    def n_episodes(self) -> int:
        ids = np.asarray(self.episode_ids)
        if ids.dtype.kind in "biu" and ids.size:  # by sorting: numpy's hashed unique is ~20x slower on many ids
            ids = np.sort(ids)
            return int(np.count_nonzero(ids[1:] != ids[:-1])) + 1
        return int(np.unique(ids).size)

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
        """(train_index, test_index) pairs of a K-fold split that keeps episodes whole: the folds of
        scikit-learn's ``GroupKFold(n_splits, shuffle=True, random_state=random_state)`` (the
        shuffled episodes cut into ``n_splits`` consecutive runs), computed here (``group_folds``)
        without importing scikit-learn."""
        if n_splits < 2:
            raise ValueError(f"n_splits must be at least 2, got {n_splits}")
        if self.n_episodes < n_splits:
            raise ValueError(f"cannot make {n_splits} episode folds from {self.n_episodes} episode(s)")
        return group_folds(self.episode_ids, n_splits, random_state)

    def split_episodes(self, test_fraction: float, random_state=None):
        """Random train/test split by whole episodes."""
        from ._validation import check_random_state

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
    """Validated logged transitions, finite or continuous actions. Build with
    :func:`genpqr.data.from_arrays`, :func:`~genpqr.data.from_pandas` or
    :func:`~genpqr.data.from_episodes` rather than directly.

    Attributes
    ----------
    states, next_states : ndarray of shape (n, d), float64
    actions : ndarray of shape (n,), int64 codes in ``0..K-1`` (finite actions), or of shape
        (n, m), float64 (a box in ``R^m``)
    terminated, truncated : ndarray of shape (n,), bool
    episode_ids : ndarray of shape (n,), int64
    action_space : FiniteActions or BoxActions
        For finite actions also available as ``encoder`` (labels <-> codes).
    outcomes, rewards : ndarray of shape (n,) or None
    timesteps : ndarray of shape (n,) or None
    next_observed : ndarray of shape (n,), bool
    sample_weight : ndarray of shape (n,) or None
        Non-negative row weights (e.g. quadrature weights of an exact design).
    episode_labels : ndarray of shape (n_episodes,) or None
        The user's episode id of each code (``episode_labels[episode_ids]`` is every row's id, numbers
        or text, as given to :func:`from_arrays` / :func:`from_pandas`); None: the codes are the ids.
        A subset keeps the codes, hence the labels. :meth:`episode_names` maps codes to ids.

    Examples
    --------
    Two episodes in long format; the last row of each is a choice without an observed next state.

    >>> import pandas as pd
    >>> from genpqr import from_pandas
    >>> frame = pd.DataFrame({"id": [0, 0, 0, 1, 1], "t": [0, 1, 2, 0, 1], "state": [0, 1, 1, 0, 0],
    ...                       "action": ["go", "stay", "go", "go", "stay"]})
    >>> data = from_pandas(frame, episode="id", time="t", state="state", action="action")
    >>> data.n, data.n_episodes, data.n_actions
    (5, 2, 2)
    >>> data.next_observed
    array([ True,  True, False,  True, False])
    >>> data.action_space.labels
    array(['go', 'stay'], dtype=object)
    """

    states: np.ndarray
    actions: np.ndarray
    next_states: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    episode_ids: np.ndarray
    action_space: ActionSpace
    outcomes: np.ndarray | None = None
    rewards: np.ndarray | None = None
    timesteps: np.ndarray | None = None
    state_names: tuple[str, ...] | None = field(default=None)
    next_observed: np.ndarray | None = None
    sample_weight: np.ndarray | None = None
    episode_labels: np.ndarray | None = field(default=None, repr=False)

    _ROW_FIELDS = EpisodeRows._ROW_FIELDS + ("next_observed", "sample_weight")

    def episode_names(self, codes=None) -> np.ndarray:
        """The user's episode ids of episode ``codes`` (default: of every row): what an output
        listing episodes prints, so that it joins with the data."""
        codes = self.episode_ids if codes is None else np.asarray(codes)
        if self.episode_labels is None:
            return np.array(codes)
        return np.asarray(self.episode_labels)[np.asarray(codes, dtype=np.int64)]

    def __post_init__(self):
        if not isinstance(self.action_space, ActionSpace):
            raise TypeError(f"action_space must be a genpqr.data FiniteActions or BoxActions, got "
                            f"{type(self.action_space).__name__}")
        if self.next_observed is None:
            object.__setattr__(self, "next_observed", np.ones(self.actions.shape[0], dtype=bool))
        if not self.is_finite and (self.actions.ndim != 2 or self.actions.shape[1] != self.action_space.dim):
            raise ValueError(f"actions must have shape (n, {self.action_space.dim}), got {self.actions.shape}")
        self._check_rows()
        if self.next_observed.dtype != bool:
            raise TypeError(f"next_observed must be boolean, got dtype {self.next_observed.dtype}")
        if np.any(~self.next_observed & self.terminated):
            raise ValueError("a terminated row has an (absorbing) next state: next_observed must be True there")
        bad = self.next_observed & ~np.all(np.isfinite(self.next_states), axis=1)
        if bad.any():
            raise ValueError(f"next_states has NaN/inf at row {int(np.flatnonzero(bad)[0])}, whose next state is "
                             f"marked observed")
        self.action_space.check(self.actions)

    # ------------------------------------------------------------------ the action space
    @property
    def is_finite(self) -> bool:
        """Finite actions (codes and labels) rather than a box in ``R^m``."""
        return bool(self.action_space.is_finite)

    def _finite(self, what: str) -> FiniteActions:
        if not self.is_finite:
            raise TypeError(f"{what} is defined for finite actions; these transitions have continuous actions in "
                            f"{self.action_space.describe()}")
        return self.action_space

    @property
    def encoder(self) -> FiniteActions:
        """The finite action space (labels <-> codes); TypeError for continuous actions."""
        return self._finite("encoder")

    @property
    def n_actions(self) -> int:
        return self._finite("n_actions").n_actions

    @property
    def action_dim(self) -> int:
        """Number of action columns (1 for finite actions)."""
        return 1 if self.actions.ndim == 1 else int(self.actions.shape[1])

    @property
    def weights(self) -> np.ndarray:
        """``sample_weight`` or ones, shape (n,)."""
        return np.ones(self.n) if self.sample_weight is None else np.asarray(self.sample_weight)

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
        return self._finite("action_labels").labels

    @property
    def action_table(self):
        """The actions' :class:`~genpqr.data.ActionTable` (labels -> features), or None."""
        return getattr(self.action_space, "table", None)

    def taken_actions(self) -> np.ndarray:
        """Boolean (K,): the actions some row takes (False: in the action table only, never
        taken; anything estimated for them is a prediction from their features)."""
        return self.action_counts() > 0

    def action_counts(self) -> np.ndarray:
        """Number of rows per action code, shape (K,)."""
        return np.bincount(self.actions, minlength=self.n_actions)

    def labels_of(self, codes=None) -> np.ndarray:
        """The user's labels of ``codes`` (default: of every row's action)."""
        return self._finite("labels_of").decode(self.actions if codes is None else codes)

    # ------------------------------------------------------------------ export
    def to_pandas(self, state_columns: Sequence[str] | None = None):
        """Long-format frame: one row per transition with state, action, next state.

        Finite actions: one ``action`` column of labels; read it back with
        ``from_pandas(frame, ..., next_state=["next_s0", ...])`` (a choice-only row has NaN
        next-state columns and is read back as one). Continuous actions: columns ``a0..``.
        """
        import pandas as pd

        names = list(state_columns or self.state_names or [f"s{j}" for j in range(self.state_dim)])
        frame = pd.DataFrame(self.states, columns=names)
        frame.insert(0, "episode", self.episode_ids)
        if self.timesteps is not None and self.is_finite:
            frame.insert(1, "time", self.timesteps)
        if self.is_finite:
            frame["action"] = self.labels_of()
        else:
            for j in range(self.action_dim):
                frame[f"a{j}"] = self.actions[:, j]
        for j, name in enumerate(names):
            frame[f"next_{name}"] = self.next_states[:, j]
        frame["terminated"] = self.terminated
        frame["truncated"] = self.truncated
        if self.n_choice_only:
            frame["next_observed"] = self.next_observed
        extra = (("outcomes", "outcome"), ("rewards", "reward")) if self.is_finite else \
            (("sample_weight", "sample_weight"), ("outcomes", "outcomes"), ("rewards", "rewards"))
        for attr, column in extra:
            if getattr(self, attr) is not None:
                frame[column] = getattr(self, attr)
        return frame

"""Building :class:`~genpqr.data.Transitions` from arrays and from episodes.

:func:`from_arrays` builds both kinds: finite actions (any labels, mapped to codes) by
default, continuous actions in a box when ``action_space="box"`` (or a
:class:`~genpqr.data.BoxActions`, or ``action_low``/``action_high``) is given.
"""

from __future__ import annotations

import warnings
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..messages import Mention, Message
from ._validation import as_float_array, check_length, looks_continuous
from ._spaces import BoxActions, FiniteActions, as_actions
from ._transitions import Transitions, as_flags, optional_vector

__all__ = ["from_arrays", "from_episodes", "refuse_continuous_labels"]


def refuse_continuous_labels(actions, name: str = "actions") -> None:
    """``ValueError`` when action labels look real-valued (``genpqr.data._validation.looks_continuous``:
    floats, more than 50 distinct values making up more than 10% of the rows, some not integers)
    -- the rule ``genpqr fit`` applies too. The builders skip it when ``action_labels`` is given."""
    actions = np.asarray(actions)
    if looks_continuous(actions, actions.shape[0]):
        raise ValueError(Message(
            f"{name} {'holds' if name.startswith('action column') else 'hold'} {np.unique(actions).size:,} distinct "
            f"real numbers: these look like continuous actions, and "
            "GenPQR would fit one discrete action per value. For continuous actions use ",
            Mention("action_space", "box", python="from_arrays(..., action_space='box')"), "; to treat them as labels "
            "anyway, pass action_labels="))



def _next_array(next_states, observed):
    """``next_states`` as an (n, d) float copy; unobserved next states may be NaN."""
    if observed is not None and not observed.all():
        next_raw = np.array(next_states, dtype=np.float64, copy=True)
        if next_raw.ndim == 1:
            next_raw = next_raw[:, None]
        if next_raw.shape[0] == observed.shape[0]:
            next_raw[~observed] = 0.0  # placeholder for the finiteness check; stored as NaN later
        return as_float_array(next_raw, "next_states", ndim=2, allow_1d_as_column=True).copy()
    return as_float_array(next_states, "next_states", ndim=2, allow_1d_as_column=True).copy()


def _check_rows(states_arr, next_arr, n):
    if n == 0:
        raise ValueError("transitions must contain at least one row, got 0")
    check_length(states_arr, n, "states", "actions")
    check_length(next_arr, n, "next_states", "actions")
    if next_arr.shape[1] != states_arr.shape[1]:
        raise ValueError(f"next_states must have the same number of columns as states ({states_arr.shape[1]}), "
                         f"got {next_arr.shape[1]}")


def _episode_codes(episode_ids, n) -> tuple[np.ndarray, np.ndarray | None]:
    """``(codes, labels)``: each row's episode code ``0..E-1`` and the user's id of each code
    (None when no ids are given: row ``i`` is episode ``i``)."""
    if episode_ids is None:
        return np.arange(n, dtype=np.int64), None
    ep_raw = np.asarray(episode_ids)
    if ep_raw.shape != (n,):
        raise ValueError(f"episode_ids must have shape ({n},), got {ep_raw.shape}")
    labels, codes = np.unique(ep_raw, return_inverse=True)
    codes = codes.astype(np.int64).reshape(-1)
    if labels.dtype.kind in "iu" and np.array_equal(labels, np.arange(labels.size)):
        labels = None  # the ids are their codes
    elif labels.dtype.kind not in "iufb":
        labels = labels.astype(object)
    return codes, labels


def _sample_weight(sample_weight, n):
    weight = optional_vector(sample_weight, n, "sample_weight")
    if weight is not None and (weight.min() < 0 or weight.sum() <= 0):
        raise ValueError("sample_weight must be non-negative with a positive sum")
    return weight


def _label_array(actions):
    """Action labels as a 1-D array (one label per row)."""
    actions_raw = np.asarray(actions)
    if actions_raw.ndim == 2 and actions_raw.shape[1] == 1:
        actions_raw = actions_raw[:, 0]
    if actions_raw.ndim != 1:
        raise ValueError(f"actions must be 1-D with one label per row, got shape {actions_raw.shape}")
    if actions_raw.dtype == object and any(a is None for a in actions_raw):
        raise ValueError("actions must not contain missing values (None)")
    return actions_raw


def _box_actions(actions, action_space, action_low, action_high):
    """``(actions (n, m), BoxActions)`` of real actions."""
    acts = as_actions(actions).copy()
    if acts.shape[0]:
        _warn_if_discrete(np.asarray(actions), acts)
    if isinstance(action_space, BoxActions):
        if action_low is not None or action_high is not None:
            raise ValueError("give either action_space=BoxActions(...) or action_low/action_high, not both")
        if action_space.dim != acts.shape[1]:
            raise ValueError(f"actions must have {action_space.dim} column(s) like action_space, got {acts.shape[1]}")
        return acts, action_space
    return acts, BoxActions.create(acts.shape[1], action_low, action_high)


def _is_box(action_space, action_low, action_high) -> bool:
    if action_space is None:
        return action_low is not None or action_high is not None
    if isinstance(action_space, BoxActions) or action_space == "box":
        return True
    if isinstance(action_space, FiniteActions) or action_space == "finite":
        return False
    raise ValueError(f"action_space must be 'finite', 'box', a FiniteActions or a BoxActions, got {action_space!r}")


def from_arrays(states, actions, next_states, *, terminated=None, truncated=None, episode_ids=None, outcomes=None,
                rewards=None, timesteps=None, action_labels=None, state_names: Sequence[str] | None = None,
                next_observed=None, action_space=None, action_low=None, action_high=None,
                sample_weight=None, action_features=None) -> Transitions:
    """Transitions from arrays.

    Parameters
    ----------
    states, next_states : array-like of shape (n, d) or (n,)
        Numeric; a 1-D array is one state variable (e.g. a tabular index).
    actions : array-like of shape (n,), or (n, m) for continuous actions
        Finite actions: any labels (ints, strings, ...), mapped to codes ``0..K-1``.
        Continuous actions: real numbers.
    terminated, truncated : array-like of bool, shape (n,), optional
    episode_ids : array-like of shape (n,), optional
        Default: every row is its own episode.
    outcomes, rewards, timesteps : array-like of shape (n,), optional
    action_labels : sequence, optional
        Finite actions: the full label set in code order. Default: the sorted observed labels.
        Give it when some actions are never observed or when codes must follow a fixed order.
    next_observed : array-like of bool, shape (n,), optional
        False marks a choice-only row: a choice whose next state was not observed (its
        ``next_states`` entry may be anything, NaN included, and is stored as NaN). Default:
        every row is a complete transition.
    action_space : {"finite", "box"}, FiniteActions or BoxActions, optional
        Default ``"finite"``, or ``"box"`` when ``action_low``/``action_high`` is given.
    action_low, action_high : float or array-like of shape (m,), optional
        Continuous actions: the stated support (default unbounded, ``R^m``). Actions outside
        raise ValueError. The reference measure of the log-densities, hence the recovered
        reward, is Lebesgue measure on this box.
    sample_weight : array-like of shape (n,), optional
        Non-negative row weights (read by both stages on the continuous-action path).
    action_features : ActionTable, pandas.DataFrame or mapping, optional
        Finite actions: a feature vector per action label (:class:`~genpqr.data.ActionTable`; a
        DataFrame with the labels as index and numeric feature columns; or a mapping label ->
        vector). The action set is then the table's K labels, coded in the table's row order,
        actions never taken in the data included; a label of ``actions`` missing from the table
        raises :class:`~genpqr.exceptions.MissingActionLabelError`. Not with ``action_labels``.
    """
    box = _is_box(action_space, action_low, action_high)
    states_arr = as_float_array(states, "states", ndim=2, allow_1d_as_column=True).copy()
    observed = None if next_observed is None else as_flags(next_observed, states_arr.shape[0], "next_observed")
    next_arr = _next_array(next_states, observed)
    if box:
        acts, space = _box_actions(actions, action_space, action_low, action_high)
    else:
        acts = _label_array(actions)
    n = acts.shape[0]
    _check_rows(states_arr, next_arr, n)
    if not box:
        space = _finite_space(acts, action_space, action_labels, action_features)
        acts = space.encode(acts)
    if observed is not None:
        next_arr[~observed] = np.nan
    episode_codes, episode_labels = _episode_codes(episode_ids, n)
    return Transitions(
        states=states_arr, actions=acts, next_states=next_arr, terminated=as_flags(terminated, n, "terminated"),
        truncated=as_flags(truncated, n, "truncated"), episode_ids=episode_codes,
        action_space=space, outcomes=optional_vector(outcomes, n, "outcomes"),
        rewards=optional_vector(rewards, n, "rewards"), timesteps=optional_vector(timesteps, n, "timesteps"),
        state_names=tuple(state_names) if state_names is not None else None, next_observed=observed,
        sample_weight=_sample_weight(sample_weight, n), episode_labels=episode_labels)


def _finite_space(acts, action_space, action_labels, action_features) -> FiniteActions:
    """The finite action space of :func:`from_arrays`: an action table's labels, the given
    space or labels, else the sorted observed labels."""
    if action_features is not None:
        if action_labels is not None or isinstance(action_space, FiniteActions):
            raise ValueError("give either action_features (the table's labels are the action set) or "
                             "action_labels / a FiniteActions action_space, not both")
        space = FiniteActions.from_table(action_features)
        space.table.check_covers(acts)
        return space
    if isinstance(action_space, FiniteActions):
        return action_space
    if action_labels is None:
        refuse_continuous_labels(acts)
        return FiniteActions.from_observed(acts)
    return FiniteActions(np.asarray(action_labels))


def _warn_if_discrete(raw: np.ndarray, acts: np.ndarray) -> None:
    """Integer-coded actions with few distinct values are probably discrete choices."""
    if raw.dtype.kind in "iub" and acts.shape[0] >= 50:
        n_unique = np.unique(acts, axis=0).shape[0]
        if n_unique <= 20:
            warnings.warn(
                f"actions are integers with only {n_unique} distinct values; if they are discrete choices use "
                "genpqr.from_arrays and genpqr.GenPQR (a density over a handful of points is not a continuous "
                "policy)", UserWarning, stacklevel=4)


def from_episodes(episodes: Iterable[Mapping[str, Any]], *, action_labels=None, keep_last: bool = True,
                  action_features=None) -> Transitions:
    """Transitions from a list of episodes.

    Each episode is a mapping with ``"states"`` of shape (T+1, d) (every visited state,
    including the last) or (T, d), ``"actions"`` of shape (T,), and optionally
    ``"terminated"`` (bool: the episode ended in an absorbing state), ``"outcomes"`` and
    ``"rewards"`` of shape (T,). With T+1 states the final transition is terminated or
    truncated according to ``"terminated"``. With T states the last step has no observed
    next state: if the episode terminated it is a terminated transition; otherwise, with
    ``keep_last=True`` (default) it is a choice-only row (``next_observed`` False, as in
    :func:`from_pandas`), with ``keep_last=False`` it is dropped. ``action_features`` (an
    :class:`~genpqr.data.ActionTable`, a DataFrame indexed by label or a mapping label -> vector):
    the action set is the table's labels in its row order, actions never taken included (see
    :func:`from_arrays`).
    """
    episodes = list(episodes)
    cols: dict[str, list] = {k: [] for k in ("s", "a", "s2", "term", "trunc", "ep", "t", "y", "r", "obs")}
    present: dict[str, bool] = {}
    for e, episode in enumerate(episodes):
        for key, value in _episode_rows(e, episode, keep_last, present).items():
            cols[key].append(value)
    if not cols["s"]:
        raise ValueError("episodes must contain at least one episode")
    cat = {k: (np.concatenate(v) if v else None) for k, v in cols.items()}
    labelled = action_labels is not None or action_features is not None
    all_actions = None if labelled else np.concatenate([np.asarray(ep["actions"]) for ep in episodes])
    if not labelled:
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
        action_labels=action_labels if labelled else np.unique(all_actions),
        next_observed=cat["obs"],
        action_features=action_features,
    )


def _episode_rows(e: int, episode, keep_last: bool, present: dict) -> dict:
    """The columns of :func:`from_episodes` for episode ``e`` (``present``: whether the first
    episode had outcomes / rewards; every episode must agree)."""
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
    term = np.zeros(m, dtype=bool)
    trunc = np.zeros(m, dtype=bool)
    if m:
        term[-1] = done
        trunc[-1] = not done
    out = {"obs": obs, "s": s_now, "s2": s_next, "a": a[:m], "term": term, "trunc": trunc,
           "ep": np.full(m, e, dtype=np.int64), "t": np.arange(m, dtype=np.float64)}
    for key, name in (("outcomes", "y"), ("rewards", "r")):
        has = key in episode
        if present.setdefault(key, has) != has:
            raise ValueError(f"either every episode or none must have '{key}'")
        if has:
            vals = as_float_array(episode[key], f"episodes[{e}]['{key}']", ndim=1)
            if vals.shape[0] != T:
                raise ValueError(f"episodes[{e}]['{key}'] must have {T} entries, got {vals.shape[0]}")
            out[name] = vals[:m]
    return out

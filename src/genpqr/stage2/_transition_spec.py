r"""What ``GenPQR(transition_model=...)`` names, resolved on the data of one fit.

``"auto"`` (the default of :class:`genpqr.GenPQR` and of ``genpqr fit``): the transition model is
chosen by held-out next-state log-likelihood over episode folds
(:func:`select_transition_model`; counts stay unless beaten by 2 standard errors); ``"counts"``
or None: the count kernel (:func:`estimate_transitions`); anything else is a kernel or a model
the caller gave. Weighted rows (latent types, ``sample_weight``) and fewer than two episodes
keep the counts: the held-out comparison scores unweighted moves over episode folds.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ._transition_selection import TransitionSelection, select_transition_model

__all__ = ["TRANSITION_SPECS", "is_count_spec", "is_estimated_spec", "resolve_transition_model"]

TRANSITION_SPECS = ("auto", "counts")
"""The names ``GenPQR(transition_model=...)`` takes besides kernels and transition models."""


def _check_spec(spec) -> None:
    if isinstance(spec, str) and spec not in TRANSITION_SPECS:
        raise ValueError(f"transition_model must be 'auto', 'counts', None (counts), a kernel or a transition "
                         f"model, got {spec!r}")


def is_count_spec(spec) -> bool:
    """Whether ``spec`` names the count kernel outright (None or ``"counts"``)."""
    _check_spec(spec)
    return spec is None or (isinstance(spec, str) and spec == "counts")


def is_estimated_spec(spec) -> bool:
    """Whether ``spec`` leaves the kernel to be estimated from the data's moves by a rule of the
    library (None, ``"counts"`` or ``"auto"``), as opposed to a kernel or model the caller gave."""
    return is_count_spec(spec) or (isinstance(spec, str) and spec == "auto")


def _kept_counts(reason: str, n_moves: int, n_episodes: int) -> TransitionSelection:
    return TransitionSelection("counts", None, reason=reason, n_moves=n_moves, n_episodes=n_episodes)


def resolve_transition_model(spec, transitions, n_states: int, *, random_state=None, progress=None):
    """``(model or None, selection or None)`` for ``GenPQR(transition_model=spec)`` on the exact path.

    Parameters
    ----------
    spec : None, "auto", "counts", kernel, transition model or callable
    transitions : :class:`~genpqr.data.Transitions`
        Complete transitions (every row has its next state or terminates).
    n_states : int
    random_state : None or int
        The episode folds of the held-out comparison (and the low-rank model's start). None is
        seed 0, ``genpqr fit``'s default ``--seed``: the choice, and so the exact path's reward,
        do not change from run to run.
    progress : bool or None
        The comparison's progress bar (:func:`select_transition_model`; None: only on a terminal).

    Returns
    -------
    model : None or object
        None: the count kernel; else what the estimator turns into a kernel (the chosen
        transition model fitted on every move, or ``spec`` itself when it is not a name).
    selection : None or :class:`TransitionSelection`
        For ``"auto"``: the comparison and the reason for the choice (its ``model`` is ``model``;
        the other candidates' fits are not kept).
    """
    if is_count_spec(spec):
        return None, None
    if not isinstance(spec, str):
        return spec, None
    n_moves, n_episodes = int(transitions.n), int(np.unique(transitions.episode_ids).size)
    if n_episodes < 2:
        return None, _kept_counts("one episode: no held-out comparison", n_moves, n_episodes)
    weights = transitions.sample_weight
    if weights is not None and not np.all(weights == 1):
        return None, _kept_counts("weighted rows: the held-out comparison scores unweighted moves",
                                  n_moves, n_episodes)
    seed = 0 if random_state is None else random_state
    selection = select_transition_model(transitions, random_state=seed, n_states=n_states, progress=progress)
    model = None if selection.chosen == "counts" else selection.model
    return model, dataclasses.replace(selection, model=model, models={})  # the comparison, not every fit

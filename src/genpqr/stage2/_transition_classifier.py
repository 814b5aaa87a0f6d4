r"""A next-state classifier as a transition kernel: ``P(s'|s,a) = p(y | x(s), a)`` for any
scikit-learn classifier on the state's features and the action (one-hot), with target
``y`` the next state (multinomial over ``S+1`` outcomes, termination the last) or, for
states that are ordered integers, the increment ``s' - s`` (next states clipped to
``[0, S-1]``)."""

from __future__ import annotations

import numpy as np

from ..data._validation import as_float_array, clone_learner
from ._transition_models import KernelModel, TransitionMoves

__all__ = ["ClassifierKernel"]

TARGETS = ("next_state", "increment")


class ClassifierKernel(KernelModel):
    """Next-state classifier on state features and the action.

    Parameters
    ----------
    classifier : None or scikit-learn classifier with ``predict_proba``
        Cloned at fit; None: multinomial ``LogisticRegression(C=1.0)``.
    state_features : None or array of shape (S, d)
        Features of each state; None: the state index as one feature.
    target : {"next_state", "increment"}
        Classes: the next state, or the increment ``s' - s`` (ordered integer states).

    Attributes
    ----------
    classifier_ : the fitted clone
    """

    _param_names = ("classifier", "state_features", "target")

    def __init__(self, classifier=None, state_features=None, target="next_state"):
        self.classifier = classifier
        self.state_features = state_features
        self.target = target

    def _design(self, states, actions):
        x = np.zeros((states.size, self.features_.shape[1] + self.n_actions_))
        x[:, : self.features_.shape[1]] = self.features_[states]
        x[np.arange(states.size), self.features_.shape[1] + actions] = 1.0
        return x

    def _labels(self, moves: TransitionMoves):
        if self.target == "next_state":
            return moves.outcomes
        term = moves.outcomes == moves.n_states
        return np.where(term, -(2 * moves.n_states + 1), moves.outcomes - moves.states)

    def _fit(self, moves):
        from sklearn.linear_model import LogisticRegression

        if self.target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {self.target!r}")
        S = moves.n_states
        if self.state_features is None:
            self.features_ = np.arange(S, dtype=np.float64)[:, None]
        else:
            self.features_ = as_float_array(self.state_features, "state_features", ndim=2, allow_1d_as_column=True)
            if self.features_.shape[0] != S:
                raise ValueError(f"state_features must have one row per state, shape ({S}, d), got "
                                 f"{self.features_.shape}")
        model = LogisticRegression(C=1.0, max_iter=500) if self.classifier is None else clone_learner(self.classifier)
        if not hasattr(model, "predict_proba"):
            raise TypeError(f"classifier must have predict_proba, got {type(model).__name__}")
        labels = self._labels(moves)
        if np.unique(labels).size < 2:
            raise ValueError("the next-state classifier needs at least two distinct outcomes in the data")
        self.classifier_ = model.fit(self._design(moves.states, moves.actions), labels)

    def _columns(self, states):
        """Column of the (S+1)-outcome row per (cell, class), shape (m, n_classes)."""
        classes = np.asarray(self.classifier_.classes_)
        S = self.n_states_
        if self.target == "next_state":
            return np.broadcast_to(classes.astype(np.int64), (states.size, classes.size))
        term = classes == -(2 * S + 1)
        cols = np.clip(states[:, None] + classes[None, :].astype(np.int64), 0, S - 1)
        return np.where(term[None, :], S, cols)

    def _rows(self, flat_rows):
        s, a = np.divmod(flat_rows, self.n_actions_)
        proba = self.classifier_.predict_proba(self._design(s, a))
        cols = self._columns(s)
        out = np.zeros((flat_rows.size, self.n_states_ + 1))
        np.add.at(out, (np.repeat(np.arange(flat_rows.size), cols.shape[1]), cols.ravel()), proba.ravel())
        return out

    def _move_proba(self, moves):
        out = np.empty(moves.n)
        for start in range(0, moves.n, self._block):
            sl = slice(start, start + self._block)
            rows = self._rows(moves.rows[sl])
            out[sl] = rows[np.arange(rows.shape[0]), moves.outcomes[sl]]
        return out

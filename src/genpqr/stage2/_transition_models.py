r"""Tabular transition models: counts and hierarchical Dirichlet shrinkage.

Every model estimates ``P(s'|s,a)`` over ``S`` states and ``K`` actions from logged moves
and exposes the kernel protocol the tabular solvers read:

* ``n_states``, ``n_actions``;
* ``expect(values)``: ``values`` (S,) or (S, k) -> (S, K) or (S, K, k),
  ``sum_{s'} P(s'|s,a) values[s']`` (the ``P f`` of Eq. (Bellman) in the paper);
* ``push(weights)``: ``weights`` (S, K) -> (S,), ``sum_{s,a} weights[s,a] P(.|s,a)`` (the
  transpose, for occupancies);
* ``to_dense()`` -> (S, K, S); ``predict_proba(states, actions)`` -> (n, S) rows of the
  kernel; ``score(states, actions, next_states)``: mean log-likelihood of observed moves.

A *terminated* move reaches no state: it is modelled as one more outcome, column ``S`` of
the internal (S*K, S+1) count matrix, and that column is dropped from the kernel, so a row
sums to one minus its termination probability (as :func:`estimate_transitions` does).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize

from .. import exceptions
from ..data._validation import check_state_indices
from ._kernels import DENSE_KERNEL_MAX_BYTES
from ._tabular import TransitionKernel, estimate_transitions

__all__ = ["TransitionMoves", "CountKernel", "ShrinkageKernel"]


class TransitionMoves:
    """Observed moves ``(s, a, s')`` of a tabular problem, termination as outcome ``S``.

    Parameters
    ----------
    states, actions, next_states : int arrays of shape (n,)
    n_states, n_actions : int
    terminated : bool array of shape (n,), optional
    episodes : array of shape (n,), optional
        Episode ids (the folds of the cross-validation keep episodes whole).
    """

    def __init__(self, states, actions, next_states, n_states, n_actions, *, terminated=None, episodes=None):
        self.n_states, self.n_actions = int(n_states), int(n_actions)
        self.states = check_state_indices(states, self.n_states, "states")
        self.actions = check_state_indices(actions, self.n_actions, "actions")
        term = np.zeros(self.states.shape, bool) if terminated is None else np.asarray(terminated, bool).ravel()
        nxt = np.where(term, 0, np.asarray(next_states).reshape(self.states.shape[0], -1)[:, 0])
        nxt = check_state_indices(nxt, self.n_states, "next_states")
        self.outcomes = np.where(term, self.n_states, nxt)
        if not (self.states.shape == self.actions.shape == self.outcomes.shape == term.shape):
            raise ValueError(f"states, actions, next_states and terminated must have equal lengths, got "
                             f"{self.states.shape}, {self.actions.shape}, {self.outcomes.shape}, {term.shape}")
        self.episodes = np.zeros(self.n, np.int64) if episodes is None else np.asarray(episodes).ravel()

    @classmethod
    def from_transitions(cls, transitions, n_states=None):
        """The complete moves of a :class:`~genpqr.data.Transitions` with tabular states;
        ``n_states`` defaults to the largest state seen + 1."""
        data = transitions.with_next()
        s = np.asarray(data.states).reshape(data.n, -1)[:, 0]
        s2 = np.where(data.terminated, 0, np.asarray(data.next_states).reshape(data.n, -1)[:, 0])
        if n_states is None:
            n_states = int(max(s.max(initial=0), s2.max(initial=0))) + 1
        return cls(s, data.actions, s2, n_states, data.n_actions, terminated=data.terminated,
                   episodes=data.episode_ids)

    @property
    def n(self) -> int:
        return int(self.states.shape[0])

    @property
    def rows(self) -> np.ndarray:
        """Flat cell index ``s * K + a`` per move."""
        return self.states * self.n_actions + self.actions

    def subset(self, index) -> "TransitionMoves":
        out = object.__new__(TransitionMoves)
        out.n_states, out.n_actions = self.n_states, self.n_actions
        for name in ("states", "actions", "outcomes", "episodes"):
            setattr(out, name, getattr(self, name)[index])
        return out

    def counts(self) -> sp.csr_matrix:
        """``n(s, a, s')`` as a (S*K, S+1) sparse matrix, termination in the last column (built
        once per moves and handed out as copies: a selection's candidates all read it)."""
        cached = self.__dict__.get("_counts")
        if cached is None:
            S, K = self.n_states, self.n_actions
            cached = sp.csr_matrix((np.ones(self.n), (self.rows, self.outcomes)), shape=(S * K, S + 1))
            cached.sum_duplicates()
            self._counts = cached
        return cached.copy()

    def fold_counts(self, folds) -> list[sp.csr_matrix]:
        """Each fold's training counts: all the counts less the held-out moves' (no pass per
        fold). Computed once per folds (the same held-out indices) and handed out as copies:
        shrinkage and the low-rank model's race read the same folds' counts."""
        key = tuple((test.size, hash(np.asarray(test).tobytes())) for _, test in folds)
        cache = self.__dict__.setdefault("_fold_counts", {})
        if key not in cache:
            total = self.counts()
            cache[key] = [total - self.subset(test).counts() for _, test in folds]
        return [counts.copy() for counts in cache[key]]

    def folds(self, n_splits: int, random_state=None) -> list[tuple[np.ndarray, np.ndarray]]:
        """(train, test) index pairs of a K-fold split keeping episodes whole (at most one fold
        per episode); with an integer ``random_state`` drawn once per ``(n_splits, random_state)``
        and handed out as copies (the selection and its candidates split the same moves)."""
        from ..data._transitions import group_folds

        n_groups = self.__dict__.get("_n_episodes")
        if n_groups is None:
            n_groups = self._n_episodes = np.unique(self.episodes).size
        if n_splits < 2 or n_groups < 2:
            raise ValueError(f"cross-validation needs n_splits >= 2 and at least 2 episodes, got n_splits={n_splits} "
                             f"and {n_groups} episode(s)")
        n_splits = min(int(n_splits), n_groups)
        if not isinstance(random_state, (int, np.integer)) or isinstance(random_state, bool):
            return group_folds(self.episodes, n_splits, random_state)
        cache = self.__dict__.setdefault("_folds", {})
        key = (n_splits, int(random_state))
        if key not in cache:
            cache[key] = group_folds(self.episodes, n_splits, random_state)
        return [(train.copy(), test.copy()) for train, test in cache[key]]


def as_moves(X, n_states=None) -> TransitionMoves:
    """``X``: a ``TransitionMoves`` or a :class:`~genpqr.data.Transitions`."""
    if isinstance(X, TransitionMoves):
        if n_states is not None and n_states != X.n_states:
            raise ValueError(f"n_states={n_states} differs from the moves' {X.n_states} states")
        return X
    if not hasattr(X, "with_next"):
        raise TypeError(f"X must be genpqr Transitions (tabular states) or TransitionMoves, got {type(X).__name__}")
    return TransitionMoves.from_transitions(X, n_states)


def lookup(matrix: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``matrix[rows[i], cols[i]]`` for every i, shape (n,)."""
    if rows.size == 0:
        return np.zeros(0)
    return np.asarray(matrix[rows, cols]).ravel().astype(np.float64)


# ============================================================================ the protocol
class KernelModel:
    """Shared protocol of the fitted transition models (see the module docstring).

    Subclasses implement ``_fit(moves)``, ``_rows(flat_rows) -> (m, S+1)`` and
    ``_move_proba(moves) -> (n,)``; ``expect`` and ``push`` default to row blocks."""

    _block = 4096

    def get_params(self, deep=True):
        return {name: getattr(self, name) for name in self._param_names}

    def set_params(self, **params):
        for name, value in params.items():
            if name not in self._param_names:
                raise ValueError(f"{type(self).__name__} has no parameter {name!r}; it has {self._param_names}")
            setattr(self, name, value)
        return self

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_params().items())})"

    def fixed_copy(self):
        """An unfitted copy whose settings chosen by cross-validation (if any) are fixed to
        the fitted values (for refitting on resampled data without choosing again)."""
        return type(self)(**self.get_params())

    def fit(self, X, y=None, n_states=None):
        """Fit on the complete moves of ``X`` (:class:`~genpqr.data.Transitions` with tabular
        states, or ``TransitionMoves``); ``n_states`` defaults to the largest state + 1."""
        moves = as_moves(X, n_states)
        self.n_states_, self.n_actions_ = moves.n_states, moves.n_actions
        self.counts_ = moves.counts()
        self.visits_ = np.asarray(self.counts_.sum(axis=1)).ravel()
        self._fit(moves)
        return self

    def _fit_held_out(self, moves, folds):
        """Fit on every move; then :meth:`_refit_held_out` (settings fixed at this fit's)."""
        self.fit(moves)
        return self._refit_held_out(moves, folds)

    def _held_out_on(self, moves, folds):
        """Per move, its probability under fits on the training moves of its fold with this
        fitted model's settings fixed (the fold statistics where a model has them)."""
        return self._refit_held_out(moves, folds)

    def _refit_held_out(self, moves, folds):
        """Per move, its probability under :meth:`fixed_copy` fitted on the training moves of its fold, (n,)."""
        p = np.empty(moves.n)
        for train, test in folds:
            p[test] = self.fixed_copy().fit(moves.subset(train)).move_proba(moves.subset(test))
        return p

    def _check_fitted(self):
        if not hasattr(self, "n_states_"):
            raise exceptions.NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit(transitions) first")

    @property
    def n_states(self) -> int:
        self._check_fitted()
        return self.n_states_

    @property
    def n_actions(self) -> int:
        self._check_fitted()
        return self.n_actions_

    def __call__(self, transitions, n_states, n_actions):
        """The kernel for :class:`~genpqr.GenPQR` (``transition_model=``): a copy of this model
        fitted on ``transitions``, as a (S, K, S) array."""
        model = self._unfitted_copy().fit(transitions, n_states=n_states)
        if model.n_actions_ != n_actions:
            raise ValueError(f"the transitions have {model.n_actions_} actions but {n_actions} were expected")
        return model.kernel()

    def _unfitted_copy(self):  # what __call__ fits: the same parameters, unfitted
        return type(self)(**self.get_params())

    def kernel(self):
        """The fitted kernel in a form ``genpqr.stage2._kernels.as_kernel`` accepts: a dense (S, K, S)
        array up to ``genpqr.stage2._kernels.DENSE_KERNEL_MAX_BYTES``, else the model itself (its
        ``expect`` / ``push``: a matrix-free kernel, solved by Krylov iterations)."""
        self._check_fitted()
        S, K = self.n_states_, self.n_actions_
        return self.to_dense() if 8 * S * K * S <= DENSE_KERNEL_MAX_BYTES else self

    def rows(self, flat_rows) -> np.ndarray:
        """``P(.|s, a)`` for flat cells ``s * K + a``, shape (m, S) (termination dropped)."""
        self._check_fitted()
        return self._rows(np.asarray(flat_rows, dtype=np.int64))[:, : self.n_states_]

    def _blocks(self):
        total = self.n_states_ * self.n_actions_
        for start in range(0, total, self._block):
            yield np.arange(start, min(start + self._block, total))

    def expect(self, values) -> np.ndarray:
        """``sum_{s'} P(s'|s,a) values[s', ...]``: (S,) -> (S, K), (S, k) -> (S, K, k)."""
        v = self._values(values)
        out = np.concatenate([self._rows(b)[:, : self.n_states_] @ v for b in self._blocks()])
        return out.reshape((self.n_states_, self.n_actions_) + v.shape[1:])

    def push(self, weights) -> np.ndarray:
        """``sum_{s,a} weights[s,a] P(.|s,a)``, shape (S,)."""
        w = self._weights(weights)
        return sum(w[b] @ self._rows(b)[:, : self.n_states_] for b in self._blocks())

    def _values(self, values) -> np.ndarray:
        self._check_fitted()
        v = np.asarray(values, dtype=np.float64)
        if v.ndim not in (1, 2) or v.shape[0] != self.n_states_:
            raise ValueError(f"values must have shape (S,) or (S, k) with S = {self.n_states_}, got {v.shape}")
        return v

    def _weights(self, weights) -> np.ndarray:
        self._check_fitted()
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (self.n_states_, self.n_actions_):
            raise ValueError(f"weights must have shape (S, K) = ({self.n_states_}, {self.n_actions_}), got {w.shape}")
        return w.reshape(-1)

    def to_dense(self, max_bytes: int = DENSE_KERNEL_MAX_BYTES) -> np.ndarray:
        """The kernel as a (S, K, S) float array; a ValueError beyond ``max_bytes``."""
        S, K = self._dense_shape(max_bytes)
        return np.concatenate([self.rows(b) for b in self._blocks()]).reshape(S, K, S)

    def _dense_shape(self, max_bytes):
        """``(S, K)``, after checking that a dense (S, K, S) kernel fits in ``max_bytes``."""
        self._check_fitted()
        S, K = self.n_states_, self.n_actions_
        if (need := 8 * S * K * S) > max_bytes:
            raise ValueError(f"a dense ({S}, {K}, {S}) kernel needs {need / 2**20:.0f} MiB, over max_bytes = "
                             f"{max_bytes / 2**20:.0f} MiB: use expect/push/predict_proba instead")
        return S, K

    def predict_proba(self, states, actions) -> np.ndarray:
        """Rows ``P(.|states[i], actions[i])``, shape (n, S)."""
        self._check_fitted()
        s = check_state_indices(states, self.n_states_, "states")
        a = check_state_indices(actions, self.n_actions_, "actions")
        return self.rows(s * self.n_actions_ + a)

    def move_proba(self, moves: TransitionMoves) -> np.ndarray:
        """``P(s'_i | s_i, a_i)`` (termination probability for terminated moves), shape (n,)."""
        self._check_fitted()
        return self._move_proba(moves)

    def score(self, states, actions, next_states, terminated=None) -> float:
        """Mean log-likelihood of the observed moves (``-inf`` if one has probability 0)."""
        self._check_fitted()
        moves = TransitionMoves(states, actions, next_states, self.n_states_, self.n_actions_, terminated=terminated)
        with np.errstate(divide="ignore"):
            return float(np.mean(np.log(self._move_proba(moves))))


# ============================================================================ counts
class CountKernel(KernelModel):
    """Maximum-likelihood counts ``P_hat(s'|s,a) = n(s,a,s') / n(s,a)`` (what
    :func:`estimate_transitions` returns), stored sparsely; unvisited cells follow
    ``unvisited`` (``"self"``: stay put, ``"uniform"``, ``"error"``)."""

    _param_names = ("unvisited",)

    def __init__(self, unvisited="self"):
        self.unvisited = unvisited

    def _fit(self, moves):
        keep = moves.outcomes < moves.n_states
        s2 = np.where(keep, moves.outcomes, 0)
        self.kernel_, _ = estimate_transitions(moves.states, moves.actions, s2, moves.n_states, moves.n_actions,
                                               terminated=~keep, unvisited=self.unvisited)

    def kernel(self) -> TransitionKernel:
        """The sparse ``genpqr.stage2._kernels.TransitionKernel`` (as :func:`estimate_transitions`)."""
        self._check_fitted()
        return self.kernel_

    def _rows(self, flat_rows):
        out = np.zeros((flat_rows.size, self.n_states_ + 1))
        out[:, : self.n_states_] = self.kernel_.matrix[flat_rows].toarray()
        out[:, -1] = 1.0 - out.sum(axis=1)
        return out

    def expect(self, values):
        v = self._values(values)
        return np.asarray(self.kernel_.matrix @ v).reshape((self.n_states_, self.n_actions_) + v.shape[1:])

    def push(self, weights):
        return np.asarray(self.kernel_.matrix.T @ self._weights(weights)).ravel()

    def predict_proba(self, states, actions):
        """Rows ``P(.|states[i], actions[i])`` as a (n, S) scipy.sparse matrix."""
        self._check_fitted()
        s = check_state_indices(states, self.n_states_, "states")
        a = check_state_indices(actions, self.n_actions_, "actions")
        return self.kernel_.matrix[s * self.n_actions_ + a]

    def _move_proba(self, moves):
        return _count_proba(self.counts_, self.visits_, moves, self.unvisited)

    def _fit_held_out(self, moves, folds):
        self.fit(moves)
        return self._held_out_on(moves, folds)

    def _held_out_on(self, moves, folds):
        p = np.empty(moves.n)
        for (_, test), counts in zip(folds, moves.fold_counts(folds)):
            p[test] = _count_proba(counts, np.asarray(counts.sum(axis=1)).ravel(), moves.subset(test), self.unvisited)
        return p


def _count_proba(counts, visits, moves, unvisited):
    """``n(s,a,s') / n(s,a)`` at the moves from counts (S*K, S+1), visits (S*K,) and ``unvisited``."""
    rows = moves.rows
    visits = visits[rows]
    p = lookup(counts, rows, moves.outcomes) / np.where(visits > 0, visits, 1.0)
    if unvisited != "self" or not np.any(visits == 0):
        return np.where(visits > 0, p, 1.0 / moves.n_states if unvisited == "uniform" else p)
    return np.where(visits > 0, p, (moves.outcomes == moves.states).astype(float))


# ============================================================================ shrinkage
LEVELS = ("cell", "state", "action", "global")


class _Levels:
    """Count tables of the four levels of :class:`ShrinkageKernel` (termination = column S)."""

    def __init__(self, counts: sp.csr_matrix, S: int, K: int):
        self.S, self.K = S, K
        self.cell = counts
        self.state, self.action = _pooled(counts, S, K, 0), _pooled(counts, S, K, 1)
        self.total = np.asarray(counts.sum(axis=0)).ravel()
        self.n_cell = np.asarray(counts.sum(axis=1)).ravel()
        self.n_state = np.asarray(self.state.sum(axis=1)).ravel()
        self.n_action = np.asarray(self.action.sum(axis=1)).ravel()
        self.n_total = float(self.total.sum())

    def at(self, moves: TransitionMoves):
        """The counts each level holds at the moves: numerators and denominators."""
        o = moves.outcomes
        return (lookup(self.cell, moves.rows, o), self.n_cell[moves.rows], lookup(self.state, moves.states, o),
                self.n_state[moves.states], lookup(self.action, moves.actions, o), self.n_action[moves.actions],
                self.total[o], self.n_total)


def _pooled(counts: sp.csr_matrix, S: int, K: int, by: int) -> sp.csr_matrix:
    """The counts (S*K, S+1) pooled over actions (``by`` 0: (S, S+1), a state's row) or over
    states (``by`` 1: (K, S+1), an action's row), canonical CSR: each entry a sum of counts, the
    product with ``kron(eye(S), ones((1, K)))`` or ``kron(ones((1, S)), eye(K))`` (built
    directly in CSR, not by ``kron``)."""
    cells = np.arange(S * K)
    n = S if by == 0 else K
    pool = sp.csr_matrix((np.ones(S * K), cells if by == 0 else cells.reshape(S, K).T.ravel(),
                          np.arange(0, S * K + 1, S * K // n)), shape=(n, S * K))
    out = sp.csr_matrix(pool @ sp.csr_matrix(counts))
    out.sort_indices()
    return out


def _fold_tables(moves, folds):
    """Per fold: the held-out indices, the training levels at them (:meth:`_Levels.at`) and the
    training outcomes' count (``S+1`` if a training move terminates, else ``S``)."""
    S, K = moves.n_states, moves.n_actions
    for (_, test), counts in zip(folds, moves.fold_counts(folds)):
        levels = _Levels(counts, S, K)
        yield test, levels.at(moves.subset(test)), S + 1 if levels.total[S] > 0 else S


def _weight(n, c):
    """``n / (n + c)`` (0 where both are 0: the level passes everything to its parent)."""
    d = n + c
    return np.divide(n, d, out=np.zeros(np.shape(d)), where=d > 0)


def _frac(num, n):
    return np.divide(num, n, out=np.zeros(np.broadcast_shapes(np.shape(num), np.shape(n))), where=n > 0)


def shrunk_move_proba(at, c, n_outcomes: int, outcomes) -> np.ndarray:
    """``P(s'|s,a)`` at moves from :meth:`_Levels.at` and concentrations ``c`` (4,); the
    global level's pseudo-counts cover the first ``n_outcomes`` outcomes."""
    return _ShrunkMoves(at, n_outcomes, outcomes).proba(c)


class _ShrunkMoves:
    """:func:`shrunk_move_proba` at given moves for any concentrations: each level's share of the
    moves' counts (which no concentration changes) computed once, for the cross-validation's many
    evaluations (the same numbers as computed afresh, to the bit)."""

    def __init__(self, at, n_outcomes, outcomes):
        n1, d1, n2, d2, n3, d3, self.n4, self.d4 = at
        self.n_outcomes, self.covered = n_outcomes, outcomes < n_outcomes
        self.levels = [(_frac(num, den), den) for num, den in ((n3, d3), (n2, d2), (n1, d1))]

    def proba(self, c):
        p = (self.n4 + c[3] / self.n_outcomes * self.covered) / (self.d4 + c[3])
        for (share, den), conc in zip(self.levels, (c[2], c[1], c[0])):
            w = _weight(den, conc)
            p = w * share + (1.0 - w) * p
        return p

    def proba_and_gradient(self, c):
        """``proba(c)`` and its derivatives in the four concentrations, (4, n): at the global
        level ``(q - P_4) / (n + c_4)`` (``q`` its pseudo-count share), and at a level with weight
        ``w = n / (n + c)`` on its share ``f``, ``dw/dc (f - P_below) = -w / (n + c) (f - P_below)``
        for its own ``c``, ``(1 - w)`` times the level below's for the deeper ones."""
        q = self.covered / self.n_outcomes
        d4 = self.d4 + c[3]
        p = (self.n4 + c[3] / self.n_outcomes * self.covered) / d4  # as proba's, to the bit
        grad = np.zeros((4,) + np.shape(p))
        grad[3] = (q - p) / d4
        for (share, den), j in zip(self.levels, (2, 1, 0)):
            total = den + c[j]
            w = _weight(den, c[j])
            grad[j + 1:] *= 1.0 - w
            grad[j] = -np.divide(w, total, out=np.zeros(np.shape(total)), where=total > 0) * (share - p)
            p = w * share + (1.0 - w) * p
        return p, grad


class ShrinkageKernel(KernelModel):
    r"""Hierarchical Dirichlet shrinkage of the counts.

    .. math::

        P(s'|s,a) = \frac{n(s,a,s') + c_1 P_2(s'|s,a)}{n(s,a) + c_1},\quad
        P_2 = \frac{n(s,\cdot,s') + c_2 P_3(s'|a)}{n(s,\cdot) + c_2},\quad
        P_3 = \frac{n(\cdot,a,s') + c_3 P_4(s')}{n(\cdot,a) + c_3},\quad
        P_4 = \frac{n(\cdot,\cdot,s') + c_4/(S+1)}{n + c_4}

    (cell -> its state pooled over actions -> the action pooled over states -> global;
    termination is outcome ``S+1``, left out of the global pseudo-counts when no move in the
    data terminates). A cell seen often keeps its counts; a thin one borrows
    its state's row, tilted toward its action's. With every ``c`` 0 a visited cell's row is
    its counts'.

    Parameters
    ----------
    concentrations : None or sequence of 4 non-negative floats
        ``(c_1, c_2, c_3, c_4)``; None: chosen by maximizing the held-out next-state
        log-likelihood over ``n_splits`` episode folds.
    n_splits : int
    random_state : None, int or Generator
        The fold split.

    Attributes
    ----------
    concentrations_ : ndarray of shape (4,)
    cv_log_likelihood_ : float or None
        Mean held-out log-likelihood per move at ``concentrations_`` (None when given).
    """

    _param_names = ("concentrations", "n_splits", "random_state")

    def __init__(self, concentrations=None, n_splits=5, random_state=None):
        self.concentrations = concentrations
        self.n_splits = n_splits
        self.random_state = random_state

    def _fit(self, moves):
        S, K = moves.n_states, moves.n_actions
        self.n_outcomes_ = S + 1 if np.any(moves.outcomes == S) else S  # no termination seen: none predicted
        self.cv_log_likelihood_ = None
        if self.concentrations is None:
            self.concentrations_, self.cv_log_likelihood_ = self._cross_validate(moves)
        else:
            c = np.asarray(self.concentrations, dtype=np.float64)
            if c.shape != (4,) or not np.all(np.isfinite(c)) or np.any(c < 0):
                raise ValueError(f"concentrations must be 4 non-negative numbers (cell, state, action, global), "
                                 f"got {self.concentrations!r}")
            self.concentrations_ = c
        self.levels_ = _Levels(self.counts_, S, K)

    def fixed_copy(self):
        self._check_fitted()
        return type(self)(**{**self.get_params(), "concentrations": tuple(float(c) for c in self.concentrations_)})

    def _fit_held_out(self, moves, folds):
        self._keep_tables = True  # the cross-validation's fold tables, reused where its folds are these
        try:
            self.fit(moves)
        finally:
            del self._keep_tables
        return self._held_out_on(moves, folds, self.__dict__.pop("_cv_tables", None))

    def _held_out_on(self, moves, folds, cv_tables=None):
        """Per move, its probability under the training counts of its fold at ``concentrations_``;
        from the cross-validation's tables (``cv_tables``: its folds, their training outcomes'
        counts and tables) where they are of the same folds: the same numbers, to the bit."""
        p = np.empty(moves.n)
        if cv_tables is not None and len(cv_tables[0]) == len(folds) and all(
                n_out == self.n_outcomes_ and np.array_equal(a[1], b[1])
                for a, b, n_out in zip(cv_tables[0], folds, cv_tables[1])):
            for (_, test), table in zip(folds, cv_tables[2]):
                p[test] = table.proba(self.concentrations_)
            return p
        for test, table, n_out in _fold_tables(moves, folds):
            p[test] = shrunk_move_proba(table, self.concentrations_, n_out, moves.outcomes[test])
        return p

    def _cross_validate(self, moves):
        folds = moves.folds(self.n_splits, self.random_state)
        built = list(_fold_tables(moves, folds))
        tables = [_ShrunkMoves(t, self.n_outcomes_, moves.outcomes[test]) for test, t, _ in built]
        if getattr(self, "_keep_tables", False):  # for _fit_held_out; not kept on the model
            self._cv_tables = (folds, [n_out for _, _, n_out in built], tables)

        def loss(log_c):
            """The mean held-out negative log-likelihood per move and its gradient in ``log c``."""
            c = np.exp(log_c)
            value, grad = 0.0, np.zeros(4)
            for t in tables:
                p, dp = t.proba_and_gradient(c)
                positive = p > 1e-300
                value -= np.sum(np.log(np.where(positive, p, 1e-300)))
                grad -= dp @ np.divide(1.0, p, out=np.zeros_like(p), where=positive)
            return value / moves.n, grad * c / moves.n

        start = np.log([5.0, 5.0, 20.0, 1.0])
        res = minimize(loss, start, jac=True, method="L-BFGS-B", bounds=[(-7.0, 14.0)] * 4)
        return np.exp(res.x), float(-res.fun)

    def _parts(self):
        L, c = self.levels_, self.concentrations_
        w1, w2, w3 = _weight(L.n_cell, c[0]), _weight(L.n_state, c[1]), _weight(L.n_action, c[2])
        p4 = (L.total + c[3] / self.n_outcomes_ * (np.arange(L.S + 1) < self.n_outcomes_)) / (L.n_total + c[3])
        return w1, w2, w3, p4

    def _rows(self, flat_rows):
        L = self.levels_
        w1, w2, w3, p4 = self._parts()
        s, a = np.divmod(flat_rows, L.K)
        p3 = w3[:, None] * _frac(L.action.toarray(), L.n_action[:, None]) + (1 - w3[:, None]) * p4
        p2 = w2[s, None] * _frac(L.state[s].toarray(), L.n_state[s, None]) + (1 - w2[s, None]) * p3[a]
        return w1[flat_rows, None] * _frac(L.cell[flat_rows].toarray(), L.n_cell[flat_rows, None]) + \
            (1 - w1[flat_rows, None]) * p2

    def expect(self, values):
        v = self._values(values)
        L = self.levels_
        w1, w2, w3, p4 = self._parts()
        vv = np.concatenate([v, np.zeros((1,) + v.shape[1:])])  # termination has value 0
        col = (slice(None),) + (None,) * (v.ndim - 1)
        e4 = p4 @ vv
        e3 = w3[col] * _frac(L.action @ vv, L.n_action[col]) + (1 - w3[col]) * e4
        e2 = w2[col] * _frac(L.state @ vv, L.n_state[col])  # (S, ...)
        e2 = e2[:, None] + (1 - w2)[(slice(None), None) + (None,) * (v.ndim - 1)] * e3[None]
        e2 = e2.reshape((L.S * L.K,) + v.shape[1:])
        e1 = w1[col] * _frac(L.cell @ vv, L.n_cell[col]) + (1 - w1[col]) * e2
        return e1.reshape((L.S, L.K) + v.shape[1:])

    def push(self, weights):
        w = self._weights(weights)
        L = self.levels_
        w1, w2, w3, p4 = self._parts()
        out = L.cell.T @ _frac(w * w1, L.n_cell)
        b2 = (w * (1 - w1)).reshape(L.S, L.K)
        out += L.state.T @ _frac(b2.sum(axis=1) * w2, L.n_state)
        b3 = ((1 - w2)[:, None] * b2).sum(axis=0)
        out += L.action.T @ _frac(b3 * w3, L.n_action)
        out += float(np.sum(b3 * (1 - w3))) * p4
        return np.asarray(out).ravel()[: L.S]

    def _move_proba(self, moves):
        return shrunk_move_proba(self.levels_.at(moves), self.concentrations_, self.n_outcomes_, moves.outcomes)

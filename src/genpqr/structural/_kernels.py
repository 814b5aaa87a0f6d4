"""Transition kernels and choice counts of dynamic discrete choice panels.

``increment_kernel`` (and the callable :class:`IncrementKernel` for
``GenPQR(transition_model=...)``) estimates a kernel in which the state moves up by an
increment whose distribution does not depend on the state (Rust's mileage), pooling all rows;
:func:`choice_counts` is the sufficient statistic of the conditional-choice likelihood.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from ..stage2._kernels import TransitionKernel
from ..data._validation import as_float_array, check_state_indices, plain
from ..data import Transitions

__all__ = ["increment_probabilities", "increment_kernel", "kernel_from_increments", "IncrementKernel", "choice_counts"]


def _where(transitions: Transitions, i: int) -> str:
    """``", at time T of episode E"`` for transition ``i`` (episodes numbered 0.. in sorted order
    of their ids), so that a message points into the data rather than at a transition index."""
    if transitions.timesteps is None:
        return f", episode number {int(transitions.episode_ids[i])}"
    return (f": time {plain(transitions.timesteps[i]):g} of episode number {int(transitions.episode_ids[i])}, "
            f"episodes numbered 0.. in sorted order of their ids")


def _reset_code(transitions: Transitions, reset_action, n_actions: int):
    if reset_action is None:
        return None
    code = transitions.encoder.encode_one(reset_action, "reset_action")
    if not 0 <= code < n_actions:
        raise ValueError(f"reset_action {plain(reset_action)!r} has code {code}, outside [0, {n_actions})")
    return code


def increment_probabilities(transitions: Transitions, n_states: int, max_increment: int, reset_action=None):
    """Maximum-likelihood probabilities of the state increment ``s' - base``, pooled over
    every observed transition; ``base = 0`` after the reset action and ``base = s`` otherwise.

    Timing (Rust 1987): the reset action restarts the state at 0 *and that period's
    increment is added from 0*, so the increment of a reset row is ``s' - 0`` and
    ``P(.|x, reset) = P(.|0, keep)``.

    Every transition enters. Near the last state the increment is censored by the cap:
    from ``base`` with ``c = n_states - 1 - base < max_increment``, ``s' = n_states - 1``
    only says ``increment >= c``. Those rows enter the likelihood with
    ``P(increment >= c)``; with none of them the MLE is the pooled frequency, otherwise it
    is computed by EM (to 1e-13). Terminated rows and choices without an observed next
    state are left out (they have no next state).

    Parameters
    ----------
    transitions : Transitions
        Tabular states (one index column).
    n_states : int
    max_increment : int
        Largest possible increment ``J``; increments are ``0..J``.
    reset_action : action label, optional
        The action after which the state restarts from 0 (Rust: ``"replace"``).

    Returns
    -------
    probs : ndarray of shape (J + 1,)
    n_used : int
        Rows counted (exact and censored).
    """
    if not isinstance(transitions, Transitions):
        raise TypeError(f"transitions must be genpqr Transitions, got {type(transitions).__name__}")
    transitions = transitions.with_next()  # a last choice without an observed successor has no increment
    J = int(max_increment)
    if J < 0 or J != max_increment:
        raise ValueError(f"max_increment must be a non-negative integer, got {max_increment!r}")
    s = check_state_indices(transitions.states, n_states, "states")
    s2 = check_state_indices(transitions.next_states, n_states, "next_states")
    reset = _reset_code(transitions, reset_action, transitions.n_actions)
    base = np.where(transitions.actions == reset, 0, s) if reset is not None else s
    inc = s2 - base
    live = ~transitions.terminated
    censored = live & (base + J > n_states - 1) & (s2 == n_states - 1)
    exact = live & ~censored
    _check_increments(transitions, s, s2, base, exact, censored, J)
    n_used = int(exact.sum() + censored.sum())
    if n_used == 0:
        raise ValueError("no row has an observed next state to count an increment from")
    exact_counts = np.bincount(inc[exact], minlength=J + 1).astype(np.float64)
    censor_counts = np.bincount(inc[censored], minlength=J + 1).astype(np.float64)  # index c: increment >= c
    return _censored_increment_mle(exact_counts, censor_counts), n_used


def _check_increments(transitions, s, s2, base, exact, censored, J):
    """Every exact increment ``s2 - base`` lies in ``[0, J]`` and no censored one is negative;
    the error points at the first offending transition."""
    inc = s2 - base
    bad = exact & ((inc < 0) | (inc > J))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"a transition (number {i}{_where(transitions, i)}) moves from state {s[i]} (base {base[i]}, action "
            f"{plain(transitions.labels_of()[i])!r}) to {s2[i]}: an increment of {inc[i]}, outside "
            f"[0, max_increment={J}]"
        )
    if np.any(censored & (inc < 0)):
        i = int(np.flatnonzero(censored & (inc < 0))[0])
        raise ValueError(f"row {i} moves from state {s[i]} (base {base[i]}) down to {s2[i]}: a negative increment")


def _censored_increment_mle(exact, censor, tol: float = 1e-13, max_iter: int = 100_000) -> np.ndarray:
    """MLE of multinomial probabilities ``p_0..p_J`` from exact counts ``exact[j]`` and
    right-censored counts ``censor[c]`` (``increment >= c``), by EM: each censored
    observation is shared over ``j >= c`` in proportion to ``p_j``."""
    total = exact.sum() + censor.sum()
    if censor.sum() == 0:
        return exact / total
    p = (exact + censor) / total
    for _ in range(max_iter):
        tail = np.cumsum(p[::-1])[::-1]  # P(increment >= c)
        share = np.where(tail > 0, censor / np.where(tail > 0, tail, 1.0), 0.0)
        new = (exact + p * np.cumsum(share)) / total
        if np.max(np.abs(new - p)) < tol:
            return new
        p = new
    return p


def kernel_from_increments(probs, n_states: int, n_actions: int, reset=None) -> TransitionKernel:
    """The kernel "move up by ``j`` with probability ``probs[j]``, capped at the last state";
    action code ``reset`` first resets the state to 0. Returns a sparse ``(S*K, S)`` kernel."""
    probs = as_float_array(probs, "probs", ndim=1)
    S, K = int(n_states), int(n_actions)
    rows, cols, vals = [], [], []
    for a in range(K):
        base = np.zeros(S, dtype=np.int64) if reset is not None and a == reset else np.arange(S)
        for j, p in enumerate(probs):
            if p == 0:
                continue
            rows.append(np.arange(S) * K + a)
            cols.append(np.minimum(base + j, S - 1))
            vals.append(np.full(S, p))
    matrix = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(S * K, S))
    matrix.sum_duplicates()
    return TransitionKernel(matrix, S, K)


def increment_kernel(transitions: Transitions, n_states: int, n_actions: int, max_increment: int,
                     reset_action=None) -> TransitionKernel:
    """Structured transition estimator: the increment distribution does not depend on the
    state (Rust 1987). Pooled increment frequencies (:func:`increment_probabilities`) turned
    into a kernel (:func:`kernel_from_increments`). Usable as
    ``GenPQR(transition_model=IncrementKernel(max_increment, reset_action))``."""
    probs, _ = increment_probabilities(transitions, n_states, max_increment, reset_action)
    return kernel_from_increments(probs, n_states, n_actions, _reset_code(transitions, reset_action, n_actions))


@dataclass(frozen=True)
class IncrementKernel:
    """Callable ``(transitions, n_states, n_actions) -> kernel`` for ``GenPQR(transition_model=...)``,
    see ``increment_kernel``. ``orders_states``: the kernel presumes states numbered by their
    value, so the first-stage rule treats the state as ordered
    (``genpqr.stage1._first_stage.state_is_ordered``)."""

    orders_states: ClassVar[bool] = True
    max_increment: int
    reset_action: object = None

    def __call__(self, transitions, n_states, n_actions):
        return increment_kernel(transitions, n_states, n_actions, self.max_increment, self.reset_action)


# ============================================================================ choice counts
def choice_counts(transitions: Transitions, n_states: int) -> np.ndarray:
    """Visits per (state, action code), shape (S, K): the sufficient statistic of the
    conditional-choice likelihood. Every observed choice counts, including an episode's last
    choice whose next state is unobserved (``next_observed`` False)."""
    s = check_state_indices(transitions.states, n_states, "states")
    K = transitions.n_actions
    return np.bincount(s * K + transitions.actions, minlength=n_states * K).reshape(n_states, K).astype(np.float64)

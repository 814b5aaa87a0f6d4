r"""Exact ground truth of the synthetic benchmark (``genpqr.envs._synthetic``) under any
normalization: the lattice solve behind ``SyntheticEnv.true_reward(..., normalization=...)``.

For a normalization ``mu r = g`` (any :class:`~genpqr.normalization.Normalization` except the
outcome-data ``g`` of ``behavior()``), Theorem "IRL via a Bellman equation" (``thm:unique``)
gives the unique normalized reward

.. math:: r_\mu(s,a) = \log\pi(a|s) - W(s) + \gamma W(T(s,a)),\qquad
          W = \mu\log\pi - g + \gamma\,\mu P W ,

where ``W = mu Q^mu_{u-g}`` (``u = log pi``). Equivalently ``r_mu = r + c - gamma c(T)`` with the
shaping potential ``c = -W - V`` (Lemma ``lem:shaping``); ``SyntheticEnv.shaping_potential``
returns ``c``. The value normalization uses ``g = h - gamma sum_a mu(a|s) h(T(s, a))``, exact
because ``T`` is deterministic; ``mu = pi`` (``behavior(g=...)`` or ``value(h)`` without ``mu``)
uses the true policy.

``W`` is computed **exactly**, not by rollouts or Monte Carlo: since every move adds an
integer multiple of ``step`` to all coordinates, the states reachable from ``s`` are the
in-box points of the lattice line ``{s + j step 1 : j integer}`` and, after a reset, of the
line through 0. Each such line holds at most ``10 / step + 1`` points (87 for ``K = 5``, 544
for ``K = 40``), so ``W`` solves a finite linear system: one banded system per line
(bandwidth ``max |m|``; the reset enters as one scalar ``W(0)`` found by linearity), solved
by LAPACK's banded LU (``scipy.linalg.solve_banded``). The matrix ``I - gamma P_mu`` is
strictly diagonally dominant with margin ``1 - gamma``, and we check the Bellman residual of
the solution: the error satisfies ``|W - W*| <= residual / (1 - gamma)``, typically around
1e-13 and warned about above 1e-8. Query states on a common line (e.g. all states of one
trajectory before a reset) share one solve. At the query, ``W(s)`` is one exact Bellman
backup from the lattice values at ``T(s, a)``.
Caveats: lattice points are computed as ``base + j * step`` while trajectories accumulate
``s + Delta[a]`` step by step; the two agree to ~1e-15, so they can disagree about a reset
only for a successor within ~1e-12 of the box boundary. Query states closer than ~1e-10 to
each other along the same line are treated as one point. Cost: ``O(lines x 10/step x K)``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_banded

from ..normalization import Normalization
from ..normalization._normalization import FixedOffset, OutcomeOffset, ValueOffset

__all__ = ["normalized_w"]

_KEY_DECIMALS = 10  # query states equal to this many decimals share a lattice line
_MAX_BATCH = 2_000_000  # lattice points x actions per banded solve
_RESIDUAL_WARN = 1e-8


def normalized_w(states: np.ndarray, normalization: Normalization, *, log_policy, gamma: float, step: float,
                 moves: np.ndarray, box: float):
    """``W = mu Q^mu_{u-g}`` of ``normalization`` (module notes), exact on the lattice.

    Parameters
    ----------
    states : ndarray of shape (n, p)
        Query states.
    normalization : Normalization
        Action codes ``0..K-1``; not the outcome-data ``g`` of ``behavior()``.
    log_policy : callable
        ``log pi`` at states (m, p), shape (m, K).
    gamma : float
    step : float
        The lattice step: action ``a`` moves every coordinate by ``moves[a] * step``.
    moves : ndarray of int of shape (K,)
    box : float
        A move that leaves ``[-box, box]^p`` resets the state to zero.

    Returns
    -------
    w_s : ndarray of shape (n,)
        ``W`` at the query states.
    w_next : ndarray of shape (n, K)
        ``W`` at ``T(s, a)``.
    log_p : ndarray of shape (n, K)
        ``log pi`` at the query states.
    """
    solver = _LatticeSolver(normalization, log_policy, gamma, step, moves, states.shape[1])
    lines = _Lines.of(states, step, box)
    W, H, w_zero, worst = solver.solve_lines(lines)
    bound = worst / (1.0 - gamma)
    if bound > _RESIDUAL_WARN:
        warnings.warn(f"exact normalized-reward solve: error bound {bound:.2e} exceeds {_RESIDUAL_WARN:g}",
                      RuntimeWarning, stacklevel=4)
    return solver.backup(states, lines, W, H, w_zero)


@dataclass(frozen=True)
class _Lines:
    """The query states (zero vector first) grouped by lattice line ``base + j step 1``.

    ``line_of_q[i]`` and ``k[i]``: line and lattice index of query ``i`` (the zero vector's
    line is line 0); line ``l`` holds ``size[l]`` in-box points ``j_lo[l], j_lo[l] + 1, ...``,
    stored at ``offset[l]:offset[l + 1]`` of the flat point arrays."""

    base: np.ndarray
    line_of_q: np.ndarray
    k: np.ndarray
    j_lo: np.ndarray
    size: np.ndarray
    offset: np.ndarray

    @classmethod
    def of(cls, s, step, box) -> "_Lines":
        q = np.vstack([np.zeros((1, s.shape[1])), s])
        t = q.mean(axis=1)
        k = np.rint(t / step)
        t0 = t - k * step
        u = q - t[:, None]
        keys = np.round(np.column_stack([u, t0]), _KEY_DECIMALS) + 0.0  # + 0.0: no -0.0 keys
        _, first, line_of_q = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        line_of_q = line_of_q.reshape(-1)
        order = np.argsort(first, kind="stable")  # line of the zero vector comes first
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        line_of_q = rank[line_of_q]
        base = u[first[order]] + t0[first[order], None]
        j_lo, size = _in_box_range(base, step, box)
        offset = np.concatenate([[0], np.cumsum(size)])
        return cls(base, line_of_q, k.astype(np.int64), j_lo, size, offset)


def _in_box_range(base, step, box):
    """``(j_lo, size)``: the in-box index range of each line (formula, then exact fix-up with the
    box test)."""
    def inside(j):
        return np.all(np.abs(base + (j * step)[:, None]) <= box, axis=1)

    j_lo = np.ceil((-box - base.min(axis=1)) / step).astype(np.int64)
    j_hi = np.floor((box - base.max(axis=1)) / step).astype(np.int64)
    for _ in range(2):
        j_lo = np.where(inside(j_lo - 1), j_lo - 1, np.where(inside(j_lo), j_lo, j_lo + 1))
        j_hi = np.where(inside(j_hi + 1), j_hi + 1, np.where(inside(j_hi), j_hi, j_hi - 1))
    return j_lo, np.maximum(j_hi - j_lo + 1, 0)


class _LatticeSolver:
    """The banded solves of ``W = mu log pi - g + gamma mu P W`` line by line, and the backup at
    the query states."""

    def __init__(self, normalization, log_policy, gamma, step, moves, state_dim):
        if not isinstance(normalization, Normalization):
            raise TypeError(f"normalization must be a genpqr Normalization, got {type(normalization).__name__}")
        if isinstance(normalization.g, OutcomeOffset):
            raise ValueError(
                "normalization: behavior() without g estimates g from outcome data; the synthetic "
                "environment has no outcome column, so pass g explicitly (behavior(g=...)) or use value(h)"
            )
        self.normalization, self.log_policy, self.gamma, self.step, self.moves = (normalization, log_policy, gamma,
                                                                                  step, moves)
        self.n_actions = len(moves)
        self.is_value = isinstance(normalization.g, ValueOffset)
        self.h_zero = FixedOffset(normalization.g.h)(np.zeros((1, state_dim)))[0] if self.is_value else 0.0
        self.bw = int(np.abs(moves).max())

    def mu_and_offset_parts(self, X, log_p):
        """``mu (n, K)`` and ``g`` (``(n,)``) or ``h`` (``(n,)``, value normalization) at X."""
        mu = np.asarray(self.normalization.weights(X, self.n_actions, np.exp(log_p)), dtype=np.float64)
        if mu.shape != (len(X), self.n_actions):
            raise ValueError(f"normalization weights must have shape ({len(X)}, {self.n_actions}), got {mu.shape}")
        offset = self.normalization.g
        if isinstance(offset, ValueOffset):
            return mu, FixedOffset(offset.h)(X)
        return mu, np.asarray(offset(X), dtype=np.float64)

    def solve_lines(self, lines: _Lines):
        """``(W, H, w_zero, worst)``: ``W`` (and ``h`` for the value normalization) at every
        lattice point, ``W(0)`` and the largest Bellman residual. Lines are batched; the zero
        line is in the first batch."""
        size, offset = lines.size, lines.offset
        n_points = int(offset[-1])
        W = np.empty(n_points)
        H = np.empty(n_points) if self.is_value else None
        max_points = max(int(size.max(initial=1)), _MAX_BATCH // self.n_actions)
        w_zero, worst, start = None, 0.0, 0
        while start < len(size):
            stop = start + 1
            while stop < len(size) and offset[stop + 1] - offset[start] <= max_points:
                stop += 1
            if offset[stop] > offset[start]:
                w_zero, residual = self._solve_batch(lines, start, stop, W, H, w_zero)
                worst = max(worst, residual)
            start = stop
        return W, H, w_zero, worst

    def _solve_batch(self, lines: _Lines, start, stop, W, H, w_zero):
        """Lines ``start..stop-1`` into ``W`` (and ``H``); returns ``(w_zero, largest residual)``
        (the first batch finds ``W(0)`` by linearity in it)."""
        gamma, moves, bw = self.gamma, self.moves, self.bw
        lo, hi = int(lines.offset[start]), int(lines.offset[stop])
        line = np.repeat(np.arange(start, stop), lines.size[start:stop])
        pos = np.arange(lo, hi) - lines.offset[line]  # position within the line
        X = lines.base[line] + ((lines.j_lo[line] + pos) * self.step)[:, None]
        log_p = self.log_policy(X)
        mu, gh = self.mu_and_offset_parts(X, log_p)
        nxt_pos = pos[:, None] + moves[None, :]
        valid = (nxt_pos >= 0) & (nxt_pos < lines.size[line][:, None])
        local = np.arange(hi - lo)[:, None] + moves[None, :]
        if self.is_value:
            H[lo:hi] = gh
            h_next = np.where(valid, gh[np.clip(local, 0, hi - lo - 1)], self.h_zero)
            g = gh - gamma * np.sum(mu * h_next, axis=1)
        else:
            g = gh
        rhs = np.sum(mu * log_p, axis=1) - g
        reset_mass = np.sum(np.where(valid, 0.0, mu), axis=1)
        ab = np.zeros((2 * bw + 1, hi - lo))
        ab[bw] = 1.0
        for a in range(self.n_actions):
            rows = np.flatnonzero(valid[:, a])
            ab[bw - moves[a], rows + moves[a]] -= gamma * mu[rows, a]
        if w_zero is None:
            yz = solve_banded((bw, bw), ab, np.column_stack([rhs, gamma * reset_mass]))
            i0 = int(lines.offset[0] - lo + (0 - lines.j_lo[0]))  # the zero vector on line 0
            w_zero = yz[i0, 0] / (1.0 - yz[i0, 1])
            w = yz[:, 0] + w_zero * yz[:, 1]
        else:
            w = solve_banded((bw, bw), ab, rhs + gamma * reset_mass * w_zero)
        W[lo:hi] = w
        w_next = np.where(valid, w[np.clip(local, 0, hi - lo - 1)], w_zero)
        residual = w - rhs - gamma * np.sum(mu * w_next, axis=1)
        return w_zero, float(np.abs(residual).max())

    def backup(self, s, lines: _Lines, W, H, w_zero):
        """One exact Bellman backup at the query states: ``(w_s, w_next, log_p)``."""
        gamma = self.gamma
        line, jq = lines.line_of_q[1:], lines.k[1:]
        nxt_j = jq[:, None] + self.moves[None, :] - lines.j_lo[line][:, None]
        valid = (nxt_j >= 0) & (nxt_j < lines.size[line][:, None])
        idx = np.clip(lines.offset[line][:, None] + nxt_j, 0, max(int(lines.offset[-1]) - 1, 0))
        w_next = np.where(valid, W[idx], w_zero)
        log_p = self.log_policy(s)
        mu, gh = self.mu_and_offset_parts(s, log_p)
        if self.is_value:
            g = gh - gamma * np.sum(mu * np.where(valid, H[idx], self.h_zero), axis=1)
        else:
            g = gh
        w_s = np.sum(mu * log_p, axis=1) - g + gamma * np.sum(mu * w_next, axis=1)
        return w_s, w_next, log_p

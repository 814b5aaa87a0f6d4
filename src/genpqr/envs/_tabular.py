"""Random finite MDPs with known rewards, and simulation of logged data from them."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..data._validation import check_gamma, check_random_state
from ..data import Transitions, from_arrays
from ..stage2 import TabularMDP
from ..stage2._tabular import TransitionKernel, as_kernel

__all__ = ["random_mdp", "simulate_tabular"]


def random_mdp(n_states: int, n_actions: int, *, n_next: int | None = None, gamma: float = 0.9,
               reward_scale: float = 1.0, concentration: float = 1.0, random_state=None) -> TabularMDP:
    """A random finite MDP with a Gaussian reward.

    Parameters
    ----------
    n_states, n_actions : int
    n_next : int, optional
        Number of reachable next states per (s, a): a sparse kernel with ``n_next`` distinct
        random successors and Dirichlet(``concentration``) probabilities. ``None``: a dense
        kernel (every row Dirichlet over all states).
    gamma : float in [0, 1)
    reward_scale : float
        Standard deviation of the i.i.d. normal rewards.
    random_state : int or Generator
    """
    rng = check_random_state(random_state)
    if n_states < 1 or n_actions < 1:
        raise ValueError(f"n_states and n_actions must be positive, got {n_states}, {n_actions}")
    reward = reward_scale * rng.normal(size=(n_states, n_actions))
    n_rows = n_states * n_actions
    if n_next is None:
        P = rng.dirichlet(np.full(n_states, concentration), size=n_rows)
        kernel = as_kernel(P, n_actions)
    else:
        if not 1 <= n_next <= n_states:
            raise ValueError(f"n_next must be in [1, n_states={n_states}], got {n_next}")
        cols = _distinct_successors(rng, n_rows, n_states, n_next)
        probs = rng.gamma(concentration, size=(n_rows, n_next))
        probs /= probs.sum(axis=1, keepdims=True)
        indptr = np.arange(0, n_rows * n_next + 1, n_next)
        matrix = sp.csr_matrix((probs.ravel(), cols.ravel(), indptr), shape=(n_rows, n_states))
        matrix.sort_indices()
        kernel = TransitionKernel(matrix, n_states, n_actions)
    return TabularMDP(kernel, check_gamma(gamma), reward)


def _distinct_successors(rng, n_rows: int, n_states: int, n_next: int) -> np.ndarray:
    """(n_rows, n_next) distinct column indices per row, vectorized (redraw rows with clashes)."""
    cols = rng.integers(0, n_states, size=(n_rows, n_next))
    while True:
        srt = np.sort(cols, axis=1)
        clash = np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1)) if n_next > 1 else np.empty(0, int)
        if clash.size == 0:
            return cols
        if n_next * 2 > n_states:  # dense regime: permutations are cheaper than redraws
            cols[clash] = np.argsort(rng.random((clash.size, n_states)), axis=1)[:, :n_next]
        else:
            cols[clash] = rng.integers(0, n_states, size=(clash.size, n_next))


def simulate_tabular(mdp: TabularMDP, policy: np.ndarray, n_episodes: int, horizon: int, *,
                     initial=None, outcome_noise: float | None = None, random_state=None) -> Transitions:
    """Trajectories from a finite MDP under ``policy`` (S, K), vectorized over episodes.

    States are indices (one column). Substochastic rows terminate the episode with the
    missing probability (``terminated`` set, next state recorded as the current one).
    Rewards ``mdp.reward[s, a]`` are logged in ``Transitions.rewards``; with
    ``outcome_noise`` set, ``outcomes = reward + N(0, outcome_noise^2)``.
    """
    rng = check_random_state(random_state)
    kernel = mdp.kernel
    S, K = kernel.n_states, kernel.n_actions
    policy = np.asarray(policy, dtype=np.float64)
    if policy.shape != (S, K):
        raise ValueError(f"policy must have shape ({S}, {K}), got {policy.shape}")
    init = np.full(S, 1.0 / S) if initial is None else np.asarray(initial, dtype=np.float64)
    matrix = sp.csr_matrix(kernel.matrix)
    policy_cdf = np.cumsum(policy, axis=1)
    state = _sample_categorical(rng, np.broadcast_to(np.cumsum(init), (n_episodes, S)))
    alive = np.ones(n_episodes, dtype=bool)
    out = {k: [] for k in ("s", "a", "s2", "term", "ep", "t")}
    for t in range(horizon):
        idx = np.flatnonzero(alive)
        if idx.size == 0:
            break
        s = state[idx]
        a = _sample_categorical(rng, policy_cdf[s])
        s2, term = _sample_next(rng, matrix, s * K + a)
        out["s"].append(s)
        out["a"].append(a)
        out["s2"].append(np.where(term, s, s2))
        out["term"].append(term)
        out["ep"].append(idx)
        out["t"].append(np.full(idx.size, t))
        state[idx] = np.where(term, s, s2)
        alive[idx[term]] = False
    cat = {k: np.concatenate(v) for k, v in out.items()}
    order = np.lexsort((cat["t"], cat["ep"]))
    cat = {k: v[order] for k, v in cat.items()}
    last = np.r_[cat["ep"][1:] != cat["ep"][:-1], True]
    rewards = mdp.reward[cat["s"], cat["a"]] if mdp.reward is not None else None
    outcomes = None
    if outcome_noise is not None and rewards is not None:
        outcomes = rewards + outcome_noise * rng.normal(size=rewards.shape)
    return from_arrays(cat["s"], cat["a"], cat["s2"], terminated=cat["term"], truncated=last & ~cat["term"],
                       episode_ids=cat["ep"], rewards=rewards, outcomes=outcomes, timesteps=cat["t"],
                       action_labels=np.arange(K))


def _sample_categorical(rng, cdf: np.ndarray) -> np.ndarray:
    u = rng.random(cdf.shape[0]) * cdf[:, -1]
    return np.minimum((cdf < u[:, None]).sum(axis=1), cdf.shape[1] - 1)


def _sample_next(rng, matrix: sp.csr_matrix, rows: np.ndarray):
    """One next state per row of a CSR kernel; returns (next_states, terminated)."""
    starts, ends = matrix.indptr[rows], matrix.indptr[rows + 1]
    lengths = ends - starts
    u = rng.random(rows.size)
    next_state = np.zeros(rows.size, dtype=np.int64)
    terminated = np.ones(rows.size, dtype=bool)
    if lengths.max(initial=0) == 0:
        return next_state, terminated
    width = int(lengths.max())
    offs = starts[:, None] + np.arange(width)[None, :]
    valid = np.arange(width)[None, :] < lengths[:, None]
    offs = np.where(valid, offs, 0)
    probs = np.where(valid, matrix.data[offs], 0.0)
    cdf = np.cumsum(probs, axis=1)
    pick = (cdf < u[:, None]).sum(axis=1)
    hit = pick < lengths
    next_state[hit] = matrix.indices[offs[hit, pick[hit]]]
    terminated = ~hit
    return next_state, terminated

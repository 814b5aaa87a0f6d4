r"""One set of primitives solved exactly: the soft-optimal policy of ``(reward, P, gamma)`` on a
finite state space and its state distributions (stationary, from an initial state), and the
checked pieces of a counterfactual's primitives (a reward change, a new kernel, an initial
distribution). Used by :mod:`genpqr.counterfactuals` for both routes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .. import stage2
from ..stage2._kernels import TransitionKernel, as_kernel
from ..stage2._linear_bellman import solve_linear_bellman

__all__ = ["ScenarioSolution", "solve_scenario", "stationary_distribution", "state_occupancy", "reward_delta",
           "new_kernel", "initial_distribution"]


# ============================================================================ distributions
def _dense(P_pi) -> np.ndarray:
    if isinstance(P_pi, spla.LinearOperator):  # a kernel given only by products (stage2.KernelOperator)
        return P_pi.matmat(np.eye(P_pi.shape[0]))
    return P_pi.toarray() if sp.issparse(P_pi) else np.asarray(P_pi)


def _transpose(P_pi):
    """``P_pi^T``: CSR for a sparse, an operator for a product-only, an array for a dense ``P_pi``."""
    if isinstance(P_pi, spla.LinearOperator):
        return P_pi.T
    return P_pi.T.tocsr() if sp.issparse(P_pi) else np.asarray(P_pi).T


def stationary_distribution(P_pi) -> np.ndarray | None:
    r"""Long-run state distribution ``d = d P_pi``, ``sum d = 1`` (S,), of a state kernel (S, S).

    Solved directly (one balance equation replaced by ``sum d = 1``). Returns None when the
    chain terminates (rows summing to less than one: no stationary law). A chain with several
    recurrent classes has no unique one; the Cesaro average of ``d_0 P^t`` from the uniform
    ``d_0`` over 5,000 steps is returned instead.
    """
    M = _dense(P_pi)
    S = M.shape[0]
    if np.any(M.sum(axis=1) < 1.0 - 1e-9):
        return None
    A = np.eye(S) - M.T
    A[-1] = 1.0
    b = np.zeros(S)
    b[-1] = 1.0
    try:
        d = np.linalg.solve(A, b)
        if np.max(np.abs(d @ M - d)) < 1e-8 and d.min() > -1e-10:
            d = np.clip(d, 0.0, None)
            return d / d.sum()
    except np.linalg.LinAlgError:
        pass
    d, avg = np.full(S, 1.0 / S), np.zeros(S)
    for _ in range(5000):
        avg += d
        d = d @ M
    return avg / avg.sum()


def state_occupancy(P_pi, initial: np.ndarray, gamma: float, horizon: int | None = None) -> np.ndarray:
    r"""State distribution from ``initial`` (S,): over ``horizon`` steps the average
    ``(1/H) sum_{t<H} d_0 P_pi^t``, else the discounted occupancy
    ``(1 - gamma) d_0 (I - gamma P_pi)^{-1}``; normalized to sum to one (terminations remove
    mass)."""
    if horizon is not None:
        d, total = initial.copy(), np.zeros_like(initial)
        PT = _transpose(P_pi)
        for _ in range(int(horizon)):
            total += d
            d = PT @ d
    else:
        PT = _transpose(P_pi)
        total, _ = solve_linear_bellman(PT, (1.0 - gamma) * initial, gamma)
    total = np.clip(total, 0.0, None)
    return total / total.sum()


# ============================================================================ one scenario
@dataclass(frozen=True)
class ScenarioSolution:
    """The soft-optimal solution of one set of primitives and its distributions.

    Attributes
    ----------
    policy, log_policy, q : ndarray of shape (S, K)
    value : ndarray of shape (S,)
        ``V = logsumexp_a Q`` (in the units of the reward's normalization).
    gamma : float
    stationary : ndarray of shape (S,) or None
        Long-run state distribution (None when the chain terminates).
    occupancy : ndarray of shape (S,) or None
        From the given initial distribution (horizon average or discounted occupancy).
    initial_value : float or None
        ``sum_s d_0(s) V(s)``.
    """

    policy: np.ndarray
    log_policy: np.ndarray
    q: np.ndarray
    value: np.ndarray
    gamma: float
    stationary: np.ndarray | None
    occupancy: np.ndarray | None
    initial_value: float | None

    def summary(self, labels, state_values) -> dict:
        """Action rates ``sum_s d(s) pi(a|s)`` and mean state ``sum_s d(s) x(s)`` under each
        distribution; keys ``(distribution, statistic)``."""
        out = {}
        for name, d in (("stationary", self.stationary), ("initial", self.occupancy)):
            if d is None:
                continue
            rates = d @ self.policy
            for label, rate in zip(labels, rates):
                out[(name, f"rate[{label}]")] = float(rate)
            out[(name, "mean_state")] = float(d @ state_values)
        if self.initial_value is not None:
            out[("initial", "value")] = self.initial_value
        return out


def solve_scenario(reward, kernel, gamma, *, initial=None, horizon=None) -> ScenarioSolution:
    """Soft-optimal policy of ``(reward (S, K), kernel, gamma)`` and its state distributions."""
    sol = stage2.soft_optimal_solution(reward, kernel, gamma)
    P_pi = kernel.under(sol.policy)
    occ = value0 = None
    if initial is not None:
        occ = state_occupancy(P_pi, initial, gamma, horizon)
        value0 = float(initial @ sol.value)
    return ScenarioSolution(sol.policy, sol.log_policy, sol.q, sol.value, float(gamma),
                            stationary_distribution(P_pi), occ, value0)


def reward_delta(change, reward: np.ndarray, encoder) -> tuple[np.ndarray, bool]:
    """``delta`` (S, K) and whether it depends on the reward level (a callable of the reward)."""
    S, K = reward.shape
    if change is None:
        return np.zeros((S, K)), False
    if callable(change):
        delta = np.asarray(change(reward.copy()), dtype=np.float64)
        if delta.shape != (S, K):
            raise ValueError(f"reward_change(reward) must return shape (S, K) = ({S}, {K}), got {delta.shape}")
        level = True
    elif isinstance(change, dict):
        delta = np.zeros((S, K))
        codes = encoder.encode(np.asarray(list(change.keys())), "reward_change action")
        for (label, value), code in zip(change.items(), codes):
            col = _amount(value, f"reward_change[{label!r}]")
            if col.ndim > 1 or (col.ndim == 1 and col.shape != (S,)):
                raise ValueError(f"reward_change values must be scalars or (S,) = ({S},) arrays, got {col.shape}")
            delta[:, int(code)] += col
        level = False
    else:
        delta = _amount(change, "reward_change", "a dict {label: amount}, a (K,) or (S, K) array, or a callable "
                                                 "reward -> (S, K)")
        if delta.shape == (K,):
            delta = np.broadcast_to(delta, (S, K)).copy()
        if delta.shape != (S, K):
            raise ValueError(f"reward_change must be a dict label -> amount, a (K,) = ({K},) or (S, K) = ({S}, {K}) "
                             f"array, or a callable reward -> (S, K); got shape {delta.shape}")
        level = False
    if not np.all(np.isfinite(delta)):
        raise ValueError("reward_change must be finite, but holds NaN/inf")
    return delta, level


def _amount(value, name: str, expected: str = "a number or an (S,) array of numbers") -> np.ndarray:
    """``value`` as a float array, or a ``TypeError`` naming ``name``, what it got and what is expected."""
    if isinstance(value, (str, bytes, dict, set)) or value is None:
        raise TypeError(f"{name} must be {expected}, got {type(value).__name__} {value!r}")
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be {expected}, got {type(value).__name__} {value!r}") from None


def new_kernel(transitions, kernel: TransitionKernel) -> TransitionKernel:
    if transitions is None:
        return kernel
    given = transitions(kernel) if callable(transitions) and not isinstance(transitions, TransitionKernel) \
        else transitions
    new = as_kernel(given, kernel.n_actions)
    if (new.n_states, new.n_actions) != (kernel.n_states, kernel.n_actions):
        raise ValueError(f"transitions must have {kernel.n_states} states and {kernel.n_actions} actions like the "
                         f"fitted model, got {new.n_states} and {new.n_actions}")
    return new


def initial_distribution(initial, n_states: int) -> np.ndarray | None:
    if initial is None:
        return None
    arr = np.asarray(initial, dtype=np.float64)
    if arr.ndim == 0:
        if arr != np.round(arr) or not 0 <= int(arr) < n_states:
            raise ValueError(f"initial must be a state index in [0, {n_states}) or an (S,) distribution, got {initial!r}")
        d = np.zeros(n_states)
        d[int(arr)] = 1.0
        return d
    if arr.shape != (n_states,) or arr.min() < 0 or abs(arr.sum() - 1.0) > 1e-8:
        raise ValueError(f"initial must be a state index or a probability vector of shape ({n_states},) summing to 1, "
                         f"got shape {arr.shape}")
    return arr

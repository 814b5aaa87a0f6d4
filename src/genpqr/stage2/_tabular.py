r"""Finite MDPs solved exactly: the oracle of every test and the exact stage 2.

Conventions (temperature 1, paper Sec. 2): ``P`` is a kernel over ``S`` states and ``K``
actions stored as an ``(S*K, S)`` matrix whose row ``s*K + a`` is ``P(. | s, a)``
(dense ndarray or scipy sparse), or given by any object with the kernel protocol
(``expect``/``push``; ``as_kernel``, ``KernelOperator``). Rows may sum to less than one: the missing mass is
termination into an absorbing state of value zero. For a state function ``f`` of shape (S,)

* ``(P f)(s, a) = sum_{s'} P(s'|s,a) f(s')``, shape (S, K);
* ``(P_mu f)(s) = sum_a mu(a|s) (P f)(s, a)``, the state-to-state kernel under ``mu``.

Main results implemented here (the linear solve ``(I - gamma P_mu) x = b`` itself,
``solve_linear_bellman``, lives in :mod:`genpqr.stage2` and is re-exported)

* soft-optimal policy of a reward (soft policy iteration = Newton on
  ``V = logsumexp(r + gamma P V)``; soft value iteration as an alternative);
* :func:`normalized_reward`: the true reward in the normalization ``mu r = g`` by the
  shaping lemma: ``r_mu = r + c - gamma P c`` with ``(I - gamma P_mu) c = g - mu r``;
* :func:`recover_reward`: GenPQR's exact solve (Theorem "IRL via a Bellman equation").
  With ``W := mu Q`` the ``S*K`` system ``Q = u - g + gamma P mu Q`` collapses to the
  ``S``-dimensional ``(I - gamma P_mu) W = mu u - g``; then ``Q = u - g + gamma P W``,
  ``r = Q - W + g`` and ``v = -P W`` (= (u - g - Q) / gamma).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from ..data._validation import as_float_array, check_gamma, check_state_indices
from ..exceptions import ConvergenceWarning
from ._kernels import DENSE_KERNEL_MAX_BYTES, KernelOperator, TransitionKernel, as_kernel
from ._linear_bellman import DIRECT_MAX_STATES, LinearSolveInfo, solve_linear_bellman
from ..normalization import Normalization

__all__ = [
    "TransitionKernel",
    "KernelOperator",
    "TabularMDP",
    "LinearSolveInfo",
    "TabularRecovery",
    "SoftOptimalSolution",
    "as_kernel",
    "solve_linear_bellman",
    "soft_optimal_policy",
    "soft_optimal_solution",
    "policy_evaluation",
    "normalized_reward",
    "recover_reward",
    "value_difference",
    "estimate_transitions",
    "transition_counts",
    "kernel_from_counts",
    "DIRECT_MAX_STATES",
]

# ============================================================================ the MDP
@dataclass(frozen=True, eq=False)
class TabularMDP:
    """A finite MDP ``(P, gamma)`` with an optional reward (S, K)."""

    kernel: TransitionKernel
    gamma: float
    reward: np.ndarray | None = None

    @classmethod
    def create(cls, P, gamma, reward=None, n_actions=None) -> "TabularMDP":
        kernel = as_kernel(P, n_actions if reward is None else np.shape(reward)[1])
        if reward is not None:
            reward = _check_table(reward, kernel, "reward")
        return cls(kernel, check_gamma(gamma), reward)

    @property
    def n_states(self) -> int:
        return self.kernel.n_states

    @property
    def n_actions(self) -> int:
        return self.kernel.n_actions


def _check_table(x, kernel: TransitionKernel, name: str) -> np.ndarray:
    arr = as_float_array(x, name, ndim=2)
    if arr.shape != (kernel.n_states, kernel.n_actions):
        raise ValueError(f"{name} must have shape (S, K) = ({kernel.n_states}, {kernel.n_actions}), got {arr.shape}")
    return arr


# ============================================================================ soft optimality
@dataclass(frozen=True)
class SoftOptimalSolution:
    """Soft-optimal (MaxEnt) solution of a reward: policy (S, K), Q (S, K), V (S,)."""

    policy: np.ndarray
    log_policy: np.ndarray
    q: np.ndarray
    value: np.ndarray
    iterations: int
    residual: float


def soft_optimal_solution(reward, P, gamma, *, method: str = "policy_iteration", tol: float = 1e-12,
                          max_iter: int = 10_000, solver: str = "auto") -> SoftOptimalSolution:
    r"""Solve the soft Bellman equation ``V = logsumexp_a (r + gamma P V)``.

    ``method="policy_iteration"`` (default): soft policy iteration, i.e. evaluate the
    entropy-regularized value of the current softmax policy exactly,
    ``(I - gamma P_pi) V = pi (r - log pi)``, then improve ``pi = softmax(r + gamma P V)``;
    Newton's method on the soft Bellman equation, a handful of linear solves.
    ``method="value_iteration"``: iterate the soft Bellman operator (rate gamma).
    Stops when the soft Bellman residual ``max |V - logsumexp(r + gamma P V)|`` <= ``tol``.
    """
    gamma = check_gamma(gamma)
    reward = as_float_array(reward, "reward", ndim=2)
    kernel = as_kernel(P, reward.shape[1])
    reward = _check_table(reward, kernel, "reward")
    if method not in ("policy_iteration", "value_iteration"):
        raise ValueError(f"method must be 'policy_iteration' or 'value_iteration', got {method!r}")
    V = logsumexp(reward, axis=1)
    residual, best, stalled, polished = np.inf, np.inf, 0, False
    for it in range(1, max_iter + 1):
        Q = reward + gamma * kernel.expect(V)
        V_next = logsumexp(Q, axis=1)
        residual = float(np.max(np.abs(V_next - V)))
        scale = max(1.0, float(np.max(np.abs(V_next))))
        if residual <= tol * scale:
            # the tolerance is relative to |V| ~ max|r| / (1 - gamma); one more (quadratic)
            # Newton step takes the policy to the rounding floor unless it is there already
            if method == "value_iteration" or polished or residual <= 16 * np.finfo(float).eps * scale:
                break
            polished = True
        # Newton (policy iteration) converges quadratically; once the residual stops
        # shrinking it sits at the floating-point floor of a problem of this scale
        stalled = stalled + 1 if residual >= 0.5 * best else 0
        best = min(best, residual)
        if method == "policy_iteration" and stalled >= 3 and residual <= 1e3 * np.finfo(float).eps * scale / (1 - gamma):
            break
        if method == "value_iteration":
            V = V_next
        else:
            # Newton step in correction form: V + (I - gamma P_pi)^{-1} (T V - V) equals the
            # policy evaluation (I - gamma P_pi)^{-1} pi (r - log pi), but solving for the small
            # correction keeps V's precision near one rounding of |V| (values of order
            # 1 / (1 - gamma)); solving for V itself stalls orders of magnitude above it
            pi = np.exp(Q - V_next[:, None])
            step, _ = solve_linear_bellman(kernel.under(pi), V_next - V, gamma, solver=solver, tol=tol * 0.1)
            V = V + step
    else:
        warnings.warn(f"soft Bellman solve stopped after {max_iter} iterations at residual {residual:.3g}",
                      ConvergenceWarning, stacklevel=2)
    Q = reward + gamma * kernel.expect(V)
    V = logsumexp(Q, axis=1)
    log_pi = Q - V[:, None]
    return SoftOptimalSolution(np.exp(log_pi), log_pi, Q, V, it, residual)


def soft_optimal_policy(reward, P, gamma, **kwargs) -> np.ndarray:
    """The MaxEnt-optimal policy ``softmax(Q)`` of ``reward`` (S, K), shape (S, K)."""
    return soft_optimal_solution(reward, P, gamma, **kwargs).policy


def policy_evaluation(reward, policy, P, gamma, *, solver: str = "auto", tol: float = 1e-12):
    """``Q^pi_r`` (S, K) and ``V^pi_r = pi Q`` (S,) for a (non-regularized) reward and a policy."""
    gamma = check_gamma(gamma)
    reward = as_float_array(reward, "reward", ndim=2)
    kernel = as_kernel(P, reward.shape[1])
    policy = _check_table(policy, kernel, "policy")
    V, _ = solve_linear_bellman(kernel.under(policy), np.sum(policy * reward, axis=1), gamma, solver=solver, tol=tol)
    return reward + gamma * kernel.expect(V), V


# ============================================================================ truth and recovery
def _resolve(normalization: Normalization, policy, kernel, gamma):
    if not isinstance(normalization, Normalization):
        raise TypeError(
            "normalization must be a genpqr Normalization (e.g. genpqr.normalization.anchor_action(0)), "
            f"got {type(normalization).__name__}"
        )
    mu, g = normalization.resolve_tabular(policy, kernel.expect, gamma)
    return mu, g


def normalized_reward(reward, P, gamma, normalization: Normalization, *, solver: str = "auto",
                      tol: float = 1e-12) -> np.ndarray:
    r"""The true reward in the class of ``reward`` that satisfies ``mu r = g``.

    By the shaping lemma every reward with the same soft-optimal policy is
    ``r + c - gamma P c``; the normalization fixes ``c`` through
    ``(I - gamma P_mu) c = g - mu r`` (proof of Theorem "IRL via a Bellman equation").
    For ``mu = pi`` the soft-optimal policy of ``reward`` is used.

    Returns
    -------
    ndarray of shape (S, K)
    """
    gamma = check_gamma(gamma)
    reward = as_float_array(reward, "reward", ndim=2)
    kernel = as_kernel(P, reward.shape[1])
    reward = _check_table(reward, kernel, "reward")
    policy = soft_optimal_policy(reward, kernel, gamma) if normalization.mu.needs_policy else np.full(reward.shape, 1.0 / reward.shape[1])
    mu, g = _resolve(normalization, policy, kernel, gamma)
    c, _ = solve_linear_bellman(kernel.under(mu), g - np.sum(mu * reward, axis=1), gamma, solver=solver, tol=tol)
    return reward + c[:, None] - gamma * kernel.expect(c)


@dataclass(frozen=True)
class TabularRecovery:
    """GenPQR's exact recovery on a finite MDP; every table has shape (S, K).

    Attributes
    ----------
    reward : r* = Q - mu Q + g
    continuation : v* = -P mu Q
    q : Q^mu_{u-g}, the solution of Q = u - g + gamma P mu Q
    log_policy : u
    mu : (S, K) reference weights; g : (S,) anchor values
    solve : LinearSolveInfo
    """

    reward: np.ndarray
    continuation: np.ndarray
    q: np.ndarray
    log_policy: np.ndarray
    mu: np.ndarray
    g: np.ndarray
    gamma: float
    solve: LinearSolveInfo = field(repr=False)

    @property
    def mu_q(self) -> np.ndarray:
        """``(mu Q)(s)``, shape (S,)."""
        return np.sum(self.mu * self.q, axis=1)


def _check_log_policy(log_policy, kernel=None, atol: float = 1e-8) -> np.ndarray:
    u = as_float_array(log_policy, "log_policy", ndim=2)
    if kernel is not None:
        _check_table(u, kernel, "log_policy")
    lse = logsumexp(u, axis=1)
    bad = int(np.argmax(np.abs(lse)))
    if abs(lse[bad]) > atol:
        raise ValueError(
            f"log_policy must hold log-probabilities (each row's logsumexp is 0), but row {bad} has "
            f"logsumexp {lse[bad]:.6g}; subtract each row's logsumexp"
        )
    return u


def recovery_inputs(log_policy, P, gamma, normalization: Normalization):
    """The checked inputs of :func:`recover_reward` before its solve: ``(u, kernel, mu, g)``."""
    gamma = check_gamma(gamma)
    u = as_float_array(log_policy, "log_policy", ndim=2)
    kernel = as_kernel(P, u.shape[1])
    u = _check_log_policy(u, kernel)
    mu, g = _resolve(normalization, np.exp(u), kernel, gamma)
    return u, kernel, mu, g


def recover_reward(log_policy, P, gamma, normalization: Normalization, *, solver: str = "auto",
                   tol: float = 1e-10) -> TabularRecovery:
    r"""GenPQR by one linear solve (Theorem "IRL via a Bellman equation").

    Solves ``Q = u - g + gamma P mu Q`` through ``W = mu Q``:
    ``(I - gamma P_mu) W = mu u - g``, ``Q = u - g + gamma P W``; returns
    ``r = Q - mu Q + g`` (``mu Q = W`` up to the solver's residual; recomputed so that the
    normalization holds exactly where ``mu`` is a point mass) and ``v = -P W``.

    Parameters
    ----------
    log_policy : ndarray of shape (S, K)
        ``u = log pi``; rows must be normalized and finite (clip zeros first).
    P : transition kernel, see ``as_kernel``
    gamma : float in [0, 1)
    normalization : Normalization
    solver, tol : see ``solve_linear_bellman``
    """
    gamma = check_gamma(gamma)
    u, kernel, mu, g = recovery_inputs(log_policy, P, gamma, normalization)
    W, info = solve_linear_bellman(kernel.under(mu), np.sum(mu * u, axis=1) - g, gamma, solver=solver, tol=tol)
    PW = kernel.expect(W)
    q = u - g[:, None] + gamma * PW
    # r = Q - mu Q + g with mu Q recomputed from the returned Q (equal to W up to the solver's
    # residual): the normalization mu r = g then holds to rounding for every mu, and exactly for
    # a point-mass mu (an anchor: 1.0 * Q - Q = 0, so r(s, anchor) is g(s) bit for bit, not 1e-15)
    reward = q - np.sum(mu * q, axis=1)[:, None] + g[:, None]
    return TabularRecovery(reward, -PW, q, u, mu, g, gamma, info)


def value_difference(log_policy, policy_1, policy_2, P, gamma, **kwargs) -> np.ndarray:
    r"""``V^{pi_1}_u - V^{pi_2}_u`` (S,) with reward ``u = log pi`` (Theorem "Identification of
    policy value differences"): equal to the difference under any reward in the class,
    in particular under every normalized reward."""
    _, v1 = policy_evaluation(log_policy, policy_1, P, gamma, **kwargs)
    _, v2 = policy_evaluation(log_policy, policy_2, P, gamma, **kwargs)
    return v1 - v2


def estimate_transitions(states, actions, next_states, n_states: int, n_actions: int, *, terminated=None,
                         unvisited: str = "self", sample_weight=None) -> tuple[TransitionKernel, np.ndarray]:
    """Maximum-likelihood ``P_hat(s'|s,a)`` from counts, as a sparse kernel (with
    ``sample_weight`` (n,): weighted counts, ``sum_i w_i 1[s_i = s, a_i = a, s'_i = s']``).

    The kernel is always stored sparse (CSR, one entry per observed (s, a, s') plus one per
    unvisited pair under ``"self"``): its memory follows the data, not ``S * K * S`` (1e4
    states x 100 actions: tens of MB, where a dense array needs 80 GB). ``kernel.to_dense()``
    gives the (S, K, S) array where that fits. ``unvisited="uniform"`` stores a full row of S
    entries per unvisited pair (refused when that exceeds 2 GiB).

    A terminated transition counts in the denominator but reaches no state (its mass is
    termination). Pairs never visited get ``unvisited``: ``"self"`` (stay put),
    ``"uniform"`` (uniform next state) or ``"error"``.

    Returns
    -------
    kernel : TransitionKernel
    counts : ndarray of shape (S, K)
        Visits per state-action pair.
    """
    matrix, counts = transition_counts(states, actions, next_states, n_states, n_actions, terminated=terminated,
                                       sample_weight=sample_weight)
    return kernel_from_counts(matrix, counts, unvisited=unvisited)


def transition_counts(states, actions, next_states, n_states: int, n_actions: int, *,
                      terminated=None, sample_weight=None) -> tuple[sp.csr_matrix, np.ndarray]:
    """The counts behind :func:`estimate_transitions`: sums over transitions, so they add up
    chunk by chunk (out-of-core, :mod:`genpqr.scale`) or partition by partition (weighted
    sums with ``sample_weight`` (n,)).

    Returns
    -------
    matrix : scipy.sparse.csr_matrix of shape (S*K, S)
        ``n(s, a, s')``: non-terminated transitions from ``(s, a)`` into ``s'``.
    counts : ndarray of shape (S*K,)
        ``n(s, a)``: transitions from ``(s, a)``, terminated ones included.
    """
    s = check_state_indices(states, n_states, "states")
    s2 = check_state_indices(next_states, n_states, "next_states")
    a = check_state_indices(actions, n_actions, "actions")
    if not (s.shape == s2.shape == a.shape):
        raise ValueError(f"states, actions and next_states must have equal lengths, got {s.shape}, {a.shape}, {s2.shape}")
    term = np.zeros(s.shape, dtype=bool) if terminated is None else np.asarray(terminated, dtype=bool)
    rows = s * n_actions + a
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if w is not None and w.shape != s.shape:
        raise ValueError(f"sample_weight must have shape {s.shape} (one weight per transition), got {w.shape}")
    counts = np.bincount(rows, weights=w, minlength=n_states * n_actions).astype(np.float64)
    keep = ~term
    values = np.ones(int(keep.sum())) if w is None else w[keep]
    matrix = sp.csr_matrix((values, (rows[keep], s2[keep])), shape=(n_states * n_actions, n_states))
    matrix.sum_duplicates()
    return matrix, counts


def kernel_from_counts(matrix, counts, *, unvisited: str = "self") -> tuple[TransitionKernel, np.ndarray]:
    """``P_hat(s'|s,a) = n(s, a, s') / n(s, a)`` from :func:`transition_counts` (``matrix``
    (S*K, S) sparse, ``counts`` (S*K,)); unvisited pairs as in :func:`estimate_transitions`."""
    matrix = sp.csr_matrix(matrix, dtype=np.float64, copy=True)  # normalized in place below
    counts = np.asarray(counts, dtype=np.float64)
    n_states = matrix.shape[1]
    n_actions = matrix.shape[0] // n_states
    if counts.shape != (matrix.shape[0],) or n_actions * n_states != matrix.shape[0]:
        raise ValueError(f"counts must have shape (S*K,) = ({matrix.shape[0]},) and matrix (S*K, S), got "
                         f"{counts.shape} and {matrix.shape}")
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        if unvisited == "error":
            raise ValueError(f"{empty.size} state-action pair(s) are never visited, e.g. (s, a) = {divmod(int(empty[0]), n_actions)}")
        if unvisited == "self":
            fill = sp.csr_matrix((np.ones(empty.size), (empty, empty // n_actions)), shape=matrix.shape)
        elif unvisited == "uniform":
            if 16 * empty.size * n_states > DENSE_KERNEL_MAX_BYTES:
                raise ValueError(f"unvisited='uniform' would store {empty.size * n_states:,} entries ({empty.size:,} "
                                 f"unvisited pairs x {n_states:,} states); use unvisited='self' or give a transition model")
            r = np.repeat(empty, n_states)
            c = np.tile(np.arange(n_states), empty.size)
            fill = sp.csr_matrix((np.full(r.size, 1.0 / n_states), (r, c)), shape=matrix.shape)
        else:
            raise ValueError(f"unvisited must be 'self', 'uniform' or 'error', got {unvisited!r}")
    denom = np.where(counts > 0, counts, 1.0)
    matrix.sum_duplicates()  # each row's entries divided by its count (not times 1 / count, which
    matrix.data /= np.repeat(denom, np.diff(matrix.indptr))  # overflows for subnormal weighted counts)
    if empty.size:
        matrix = matrix + fill
    return TransitionKernel(sp.csr_matrix(matrix), int(n_states), int(n_actions)), counts.reshape(n_states, n_actions)

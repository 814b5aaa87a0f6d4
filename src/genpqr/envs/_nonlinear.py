r"""A non-linear benchmark with a bounded 1-D action, whose truth comes from fine discretization.

The ring problem
----------------
``S`` states on a ring (angles ``theta_s = 2 pi s / S``), an action ``a in [low, high]``
(default ``[-1, 1]``), reference measure Lebesgue on ``[low, high]`` (finite, as the
appendix assumes), temperature 1:

* reward (non-linear in ``a``, state-dependent)
  ``r(s, a) = 0.8 sin(theta_s) a + 0.5 cos(theta_s) - 1.2 a^2 + 0.4 sin(3 a)``;
* dynamics: the agent pushes itself along the ring by ``shift * a`` states and lands near
  there, ``P(s'|s, a) ∝ exp(kappa cos(2 pi (s' - s - shift a) / S))`` (a discretized von
  Mises kernel: smooth and periodic in ``a``);
* soft optimality: ``Q = r + gamma P V``, ``V(s) = log int exp Q(s, a) da``,
  ``pi(a|s) = exp(Q(s, a) - V(s))``.

Truth by fine discretization
----------------------------
The action integral in ``V`` is computed by Gauss-Legendre quadrature with ``n_quadrature``
nodes (default 256; the integrand is analytic, so this is accurate to rounding) and soft value
iteration runs to ``1e-14``. Given ``V``, ``Q(s, a)`` and the density ``pi(a|s)`` are exact at
*every* ``a``. The normalized reward ``r_mu = r + c - gamma P c`` solves the ``S``-dimensional
system ``(I - gamma P_mu) c = g - mu r`` with the same quadrature for ``mu``-integrals (or one
node for a point mass).

Cross-check with the tabular solver
-----------------------------------
``RingProblem.discretized`` gives the ``K``-point midpoint discretization of the action
(``a_k = low + (k + 1/2) Delta``) with ``pi_K(a_k|s) ∝ pi(a_k|s)``: its exact GenPQR reward from
:func:`genpqr.stage2.recover_reward` differs from the continuous one by ``O(Delta^2)`` (the
midpoint rule's error: the constant ``log Delta`` between the counting and the Lebesgue
reference measures is absorbed by the normalization, see ``RingProblem.discretized``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, TransformerMixin

from ..data._validation import as_float_array, check_gamma, check_random_state, check_state_indices
from .. import normalization as N
from ..data import BoxActions, Transitions, from_arrays
from ..actions import GaussLegendre, KnownDensity, PointMass
from ..normalization import Normalization

__all__ = ["RingProblem", "StateActionBasis"]


@dataclass(frozen=True, eq=False)
class RingProblem:
    """The ring benchmark (module docstring).

    Parameters
    ----------
    n_states : int
    gamma : float
    shift : float
        States moved per unit of action.
    kappa : float
        Concentration of the landing kernel.
    low, high : float
        Action bounds.
    n_quadrature : int
        Gauss-Legendre nodes of the truth.
    """

    n_states: int = 6
    gamma: float = 0.8
    shift: float = 1.5
    kappa: float = 3.0
    low: float = -1.0
    high: float = 1.0
    n_quadrature: int = 256

    def __post_init__(self):
        check_gamma(self.gamma)
        if self.n_states < 2 or self.low >= self.high:
            raise ValueError("RingProblem needs n_states >= 2 and low < high")

    # ------------------------------------------------------------------ model
    def _idx(self, states) -> np.ndarray:
        return check_state_indices(states, self.n_states)

    def reward(self, states, actions) -> np.ndarray:
        """True reward ``r(s, a)``, shape (n,)."""
        s = self._idx(states)
        a = as_float_array(actions, "actions").reshape(-1)
        theta = 2 * np.pi * s / self.n_states
        return 0.8 * np.sin(theta) * a + 0.5 * np.cos(theta) - 1.2 * a * a + 0.4 * np.sin(3 * a)

    def transition(self, states, actions) -> np.ndarray:
        """``P(.|s, a)``, shape (n, S)."""
        s = self._idx(states)
        a = as_float_array(actions, "actions").reshape(-1)
        S = self.n_states
        target = s + self.shift * a
        logits = self.kappa * np.cos(2 * np.pi * (np.arange(S)[None, :] - target[:, None]) / S)
        return np.exp(logits - logsumexp(logits, axis=1, keepdims=True))

    @cached_property
    def _quadrature(self):
        x, w = np.polynomial.legendre.leggauss(self.n_quadrature)
        half = 0.5 * (self.high - self.low)
        return self.low + (x + 1.0) * half, w * half

    def _grid_q(self, V, actions):
        """Q(s, a) for every state and the given actions: (S, J)."""
        S, J = self.n_states, actions.size
        s = np.repeat(np.arange(S), J)
        a = np.tile(actions, S)
        return (self.reward(s, a) + self.gamma * self.transition(s, a) @ V).reshape(S, J)

    @cached_property
    def value(self) -> np.ndarray:
        """Soft value ``V(s)`` (S,), by soft value iteration with Gauss-Legendre integrals."""
        nodes, weights = self._quadrature
        V = np.zeros(self.n_states)
        for _ in range(10_000):
            V_new = logsumexp(self._grid_q(V, nodes), b=weights[None, :], axis=1)
            if np.max(np.abs(V_new - V)) < 1e-14:
                return V_new
            V = V_new
        raise RuntimeError("soft value iteration did not converge")  # pragma: no cover

    def q(self, states, actions) -> np.ndarray:
        """Soft-optimal ``Q(s, a)``, shape (n,)."""
        return self.reward(states, actions) + self.gamma * self.transition(states, actions) @ self.value

    def log_policy(self, states, actions) -> np.ndarray:
        """``log pi(a|s)`` w.r.t. Lebesgue on ``[low, high]``; -inf outside."""
        a = as_float_array(actions, "actions").reshape(-1)
        out = self.q(states, a) - self.value[self._idx(states)]
        return np.where((a >= self.low) & (a <= self.high), out, -np.inf)

    @cached_property
    def _cdf_grid(self):
        grid = np.linspace(self.low, self.high, 4001)
        S = self.n_states
        logp = self.log_policy(np.repeat(np.arange(S), grid.size), np.tile(grid, S)).reshape(S, -1)
        p = np.exp(logp)
        cdf = np.concatenate([np.zeros((S, 1)), np.cumsum(0.5 * (p[:, 1:] + p[:, :-1]) * np.diff(grid), axis=1)], 1)
        return grid, cdf / cdf[:, -1:]

    def sample_actions(self, states, n_samples: int, rng) -> np.ndarray:
        """Draws from ``pi(.|s)`` by inverse CDF on a 4001-point grid, shape (n, n_samples)."""
        s = self._idx(states)
        grid, cdf = self._cdf_grid
        u = rng.random((s.size, n_samples))
        out = np.empty_like(u)
        for state in np.unique(s):  # a loop over the S states, not over samples
            rows = s == state
            out[rows] = np.interp(u[rows], cdf[state], grid)
        return out

    def policy_density(self) -> KnownDensity:
        """The true policy as a density on ``[low, high]``."""
        return KnownDensity(
            log_prob_fn=lambda X, A: self.log_policy(X[:, 0], A[:, 0]),
            sample_fn=lambda X, J, rng: self.sample_actions(X[:, 0], J, rng)[:, :, None],
            action_dim=1, state_dim=1, low=self.low, high=self.high)

    # ------------------------------------------------------------------ truth
    def _mu_nodes(self, normalization: Normalization):
        """``mu``-nodes per state: actions (S, J) and weights (S, J)."""
        kernel = normalization.mu.bind(BoxActions.create(1, self.low, self.high), self.policy_density())
        states = np.arange(self.n_states, dtype=np.float64)[:, None]
        if isinstance(kernel, PointMass):
            nodes = GaussLegendre(1).nodes(kernel, states)
        else:
            nodes = GaussLegendre(self.n_quadrature).nodes(kernel, states, support=BoxActions.create(1, self.low,
                                                                                                     self.high))
        return nodes.actions[:, :, 0], nodes.weights

    def normalized_reward(self, normalization: Normalization):
        """The true reward with ``mu r = g``, as a callable ``(states, actions) -> (n,)``."""
        S = self.n_states
        acts, w = self._mu_nodes(normalization)
        J = acts.shape[1]
        s_rep = np.repeat(np.arange(S), J)
        mu_r = np.sum(w * self.reward(s_rep, acts.ravel()).reshape(S, J), axis=1)
        P_mu = np.einsum("sj,sjt->st", w, self.transition(s_rep, acts.ravel()).reshape(S, J, S))
        g = normalization.g(np.arange(S, dtype=np.float64)[:, None])
        c = np.linalg.solve(np.eye(S) - self.gamma * P_mu, g - mu_r)

        def r_mu(states, actions):
            s = self._idx(states)
            return self.reward(s, actions) + c[s] - self.gamma * self.transition(s, actions) @ c

        return r_mu

    # ------------------------------------------------------------------ data
    def sample(self, n: int, random_state=None) -> Transitions:
        """``n`` i.i.d. transitions: ``s`` uniform over states, ``a ~ pi``, ``s' ~ P``."""
        rng = check_random_state(random_state)
        s = rng.integers(0, self.n_states, size=int(n))
        a = self.sample_actions(s, 1, rng)[:, 0]
        P = self.transition(s, a)
        s2 = (rng.random(s.size)[:, None] > np.cumsum(P, axis=1)).sum(axis=1)
        return from_arrays(s.astype(np.float64), a, np.minimum(s2, self.n_states - 1).astype(np.float64),
                           action_space="box", action_low=self.low, action_high=self.high, rewards=self.reward(s, a))

    def exact_design(self, n_action_nodes: int = 24) -> Transitions:
        """Every state x ``n_action_nodes`` Gauss-Legendre actions x every next state, with
        ``sample_weight = w_j P(s'|s, a_j)``: weighted regression on (s, a) then reproduces
        ``E[.|s, a]`` exactly at the design actions (its projection onto the regressor's class
        is the weighted L2 projection in ``a``)."""
        S = self.n_states
        x, w = np.polynomial.legendre.leggauss(int(n_action_nodes))
        acts = self.low + (x + 1.0) * 0.5 * (self.high - self.low)
        s = np.repeat(np.arange(S), acts.size)
        a = np.tile(acts, S)
        P = self.transition(s, a)  # (S*J, S)
        rows = np.repeat(np.arange(s.size), S)
        weight = (np.tile(w, S)[:, None] * P).ravel()
        return from_arrays(s[rows].astype(np.float64), a[rows], np.tile(np.arange(S), s.size).astype(np.float64),
                           action_space="box", action_low=self.low, action_high=self.high, sample_weight=weight)

    # ------------------------------------------------------------------ discretization
    def action_grid(self, n_actions: int) -> np.ndarray:
        """Midpoints ``a_k = low + (k + 1/2) Delta`` of ``n_actions`` equal cells."""
        delta = (self.high - self.low) / n_actions
        return self.low + (np.arange(n_actions) + 0.5) * delta

    def discretized(self, n_actions: int):
        """The K-action tabular problem: ``(log_policy (S, K), P (S, K, S), grid (K,))`` with
        ``pi_K(a_k|s) ∝ pi(a_k|s)``. (With the counting measure the log-policy is
        ``log pi(a_k|s) + log Delta + O(Delta^2)``: the constant ``log Delta`` is absorbed by any
        normalization, since a constant shift of ``u`` shifts ``c`` by ``-const/(1 - gamma)`` and
        leaves ``u + c - gamma P c`` unchanged.)"""
        S, grid = self.n_states, self.action_grid(n_actions)
        s = np.repeat(np.arange(S), grid.size)
        a = np.tile(grid, S)
        logp = self.log_policy(s, a).reshape(S, -1)
        logp -= logsumexp(logp, axis=1, keepdims=True)
        return logp, self.transition(s, a).reshape(S, grid.size, S), grid

    def tabular_normalization(self, normalization: Normalization, n_actions: int):
        """The discrete counterpart of a uniform or point-mass ``mu`` on the midpoint grid."""
        from ..actions import UniformKernel

        g = normalization.g.g
        mu = normalization.mu
        if isinstance(mu, UniformKernel) and mu.low is None:
            return N.mean_zero(g=g)
        if isinstance(mu, PointMass) and mu.gain is None and not callable(mu.action):
            grid = self.action_grid(n_actions)
            k = int(np.argmin(np.abs(grid - float(np.ravel(mu.action)[0]))))
            if not np.isclose(grid[k], float(np.ravel(mu.action)[0])):
                raise ValueError(f"the anchor {mu.action} is not a midpoint of the {n_actions}-point grid; use an odd "
                                 "n_actions for an anchor at the centre")
            return N.anchor_action(k, g=g)
        raise ValueError(f"no tabular counterpart for {normalization.describe()}")


class StateActionBasis(TransformerMixin, BaseEstimator):
    """Features ``onehot(s) (x) P_k(t(a))``, ``k = 0..degree``, with ``P_k`` Legendre
    polynomials and ``t`` mapping ``[low, high]`` to ``[-1, 1]``: a per-state polynomial in the
    action, for tabular states (input columns ``[s, a]``)."""

    def __init__(self, n_states=6, degree=12, low=-1.0, high=1.0):
        self.n_states = n_states
        self.degree = degree
        self.low = low
        self.high = high

    def fit(self, X, y=None):
        self.n_features_in_ = as_float_array(X, "X", ndim=2).shape[1]
        return self

    def transform(self, X):
        X = as_float_array(X, "X", ndim=2)
        s = check_state_indices(X[:, 0], self.n_states)
        t = 2.0 * (X[:, 1] - self.low) / (self.high - self.low) - 1.0
        leg = np.polynomial.legendre.legvander(t, int(self.degree))  # (n, degree + 1)
        out = np.zeros((X.shape[0], self.n_states * leg.shape[1]))
        cols = s[:, None] * leg.shape[1] + np.arange(leg.shape[1])[None, :]
        np.put_along_axis(out, cols, leg, axis=1)
        return out

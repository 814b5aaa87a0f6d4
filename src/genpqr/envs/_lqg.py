r"""Linear-quadratic-Gaussian MaxEnt control: a continuous-action benchmark with closed-form truth.

Model
-----
State ``s in R^d``, action ``a in R^m``, ``z = [s; a]``; temperature 1; reference measure
Lebesgue on ``R^m``.

* dynamics   ``s' = A s + B a + b + w``,  ``w ~ N(0, W)``  (write ``s' = F z + b + w``, ``F = [A B]``);
* reward     ``r(s, a) = z' H_r z + h_r' z + c_r``, concave in ``a`` (e.g.
  ``-(q s^2 + rho a^2 + 2 c s a) + q_s s + q_a a`` in 1-D: ``H_r = -[[q, c], [c, rho]]``);
* soft Bellman: ``Q = r + gamma P V``, ``V(s) = log int exp Q(s, a) da``, policy
  ``pi(a|s) = exp(Q(s, a) - V(s))``.

Soft Riccati recursion (solution of the forward problem)
--------------------------------------------------------
If ``V(s) = s'P s + p's + p0`` then, since ``E[V(F z + b + w)] = (Fz + b)'P(Fz + b) + p'(Fz + b) +
p0 + tr(P W)``, ``Q = r + gamma P V`` is quadratic in ``z``: ``Q(z) = z'Hz + h'z + h0`` with

.. code-block:: text

    H = H_r + gamma F'PF,   h = h_r + gamma F'(2 P b + p),   h0 = c_r + gamma (b'Pb + p'b + p0 + tr(PW)).

Split ``H`` into blocks ``H_ss, H_sa, H_as, H_aa`` and ``h = [h_s; h_a]``. As a function of ``a``,
``Q = a'H_aa a + (2 H_as s + h_a)'a + ...``; with ``H_aa`` negative definite, completing the
square gives the Gaussian policy and the log-partition:

.. code-block:: text

    Sigma = (-2 H_aa)^{-1},   a | s ~ N(K s + k, Sigma),   K = 2 Sigma H_as,   k = Sigma h_a,
    V(s) = s'(H_ss + 2 H_sa Sigma H_as) s + (h_s + 2 H_sa Sigma h_a)' s
           + h0 + h_a'Sigma h_a / 2 + (m/2) log(2 pi) + (1/2) log det Sigma.

Iterating ``V -> Q -> V`` is the discounted soft Riccati recursion; it converges (geometrically,
rate ``gamma`` for the constant) when the problem is stabilizable. ``LQGProblem.solve`` runs it
to machine precision. The log-policy ``u = Q - V`` is quadratic in ``z``.

Closed-form normalized reward
-----------------------------
Every reward with the same soft-optimal policy is ``r + c - gamma P c`` for a state potential
``c`` (Lemma "Potential-based shaping invariance"); the normalization ``mu r = g`` picks
``c`` through ``c - gamma P_mu c = g - mu r`` (proof of the continuous identification theorem).
For a reference kernel ``mu(.|s) = N(L s + l, T)`` (``T = 0``: point mass at the anchor
``a0(s) = L s + l``) and a quadratic ``g``:

* ``a = L s + l + xi``, ``xi ~ N(0, T)``, so ``z = F_mu s + f_mu + (0, xi)`` with ``F_mu = [I; L]``,
  ``f_mu = [0; l]``: ``(mu r)(s) = E r(F_mu s + f_mu + (0, xi))`` is a quadratic in ``s``
  (``Quadratic.push`` with covariance ``diag(0, T)``);
* under ``mu`` the state moves as ``s' = A_mu s + b_mu + e`` with ``A_mu = A + B L``,
  ``b_mu = b + B l``, ``e ~ N(0, W + B T B')``, so ``(P_mu c)(s) = E c(A_mu s + b_mu + e)``;
* in coefficients ``c = (C, c_1, c_0)`` the equation reads
  ``C - gamma A_mu' C A_mu = G_2`` (a discrete Stein/Lyapunov equation),
  ``(I - gamma A_mu') c_1 = G_1 + 2 gamma A_mu' C b_mu``,
  ``(1 - gamma) c_0 = G_0 + gamma (b_mu'C b_mu + c_1'b_mu + tr(C (W + B T B')))``,
  where ``(G_2, G_1, G_0)`` are the coefficients of ``g - mu r``; it has a unique solution when
  ``sqrt(gamma) rho(A_mu) < 1``. ``solve_stein`` solves it as one
  linear system in the coefficients;
* ``r_mu(z) = r(z) + c(s) - gamma E[c(F z + b + w)]``, again quadratic in ``z``.

This is ``LQGProblem.normalized_reward``. ``LQGProblem.genpqr_exact`` computes the same
object along GenPQR's route instead -- ``W = mu Q`` from ``W - gamma P_mu W = mu u - g``, then
``Q = u - g + gamma P W`` and ``r = Q - W + g`` -- using only ``u = log pi``; the two agree to
rounding error (Theorem "Continuous-action fixed-point identification"; the test suite checks it).

A Gaussian reference measure ``lambda = N(m0, diag(s0^2))`` instead of Lebesgue changes the
reward relative to ``lambda`` to ``r - log dlambda/da``, also quadratic
(``normalized_reward(..., reference=...)``).

Note on the theory's assumptions: Lebesgue measure on ``R^m`` is not finite and quadratic
rewards are unbounded, so the appendix's boundedness assumptions fail; the algebra holds
within the quadratic class under the stability condition above, which is what the closed
form uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..data._validation import as_float_array, check_gamma, check_random_state
from ..normalization import Normalization
from ..normalization._normalization import FixedOffset
from ..data import Transitions, from_arrays
from ..actions import FixedGaussianDensity, GaussianKernel, GaussianReference, Lebesgue, PointMass
from ._quadratic import Quadratic, solve_stein

__all__ = ["LQGProblem", "LQGSolution", "make_lqg"]


@dataclass(frozen=True)
class LQGSolution:
    """Soft-optimal solution: ``q`` (Quadratic in z), ``v`` (Quadratic in s), policy
    ``N(gain s + offset, cov)``, ``log_policy = q - v`` (Quadratic in z)."""

    q: Quadratic
    v: Quadratic
    gain: np.ndarray
    offset: np.ndarray
    cov: np.ndarray
    log_policy: Quadratic
    iterations: int


def _mat(x, shape, name):
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 0:
        arr = arr * np.eye(shape[0]) if shape[0] == shape[1] else np.full(shape, float(arr))
    arr = np.atleast_2d(arr) if len(shape) == 2 else np.atleast_1d(arr)
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
    return arr


@dataclass(frozen=True, eq=False)
class LQGProblem:
    """A MaxEnt LQG problem (see module docstring). Build it with :func:`make_lqg`.

    Attributes
    ----------
    A : (d, d); B : (d, m); drift : (d,); noise_cov : (d, d)
    reward : Quadratic over z = [s; a]
    gamma : float
    state_mean : (d,); state_cov : (d, d)
        The sampling distribution ``rho`` of logged states.
    """

    A: np.ndarray
    B: np.ndarray
    drift: np.ndarray
    noise_cov: np.ndarray
    reward: Quadratic
    gamma: float
    state_mean: np.ndarray
    state_cov: np.ndarray

    @property
    def state_dim(self) -> int:
        return int(self.A.shape[0])

    @property
    def action_dim(self) -> int:
        return int(self.B.shape[1])

    @property
    def F(self) -> np.ndarray:
        return np.hstack([self.A, self.B])

    # ------------------------------------------------------------------ forward problem
    @cached_property
    def solution(self) -> LQGSolution:
        return self.solve()

    def solve(self, tol: float = 1e-14, max_iter: int = 200_000) -> LQGSolution:
        """Soft Riccati recursion to convergence (module docstring)."""
        d, m = self.state_dim, self.action_dim
        V = Quadratic.zero(d)
        for it in range(1, max_iter + 1):
            Q = self.reward + self.gamma * V.push(self.F, self.drift, self.noise_cov)
            Hss, Hsa, Haa = Q.H[:d, :d], Q.H[:d, d:], Q.H[d:, d:]
            hs, ha = Q.h[:d], Q.h[d:]
            eig = np.linalg.eigvalsh(Haa)
            if eig.max() >= 0:
                raise ValueError(f"Q is not concave in the action (eigenvalues of H_aa: {eig.tolist()}); the soft-optimal "
                                 "policy is not a proper Gaussian: make the reward more concave in a")
            cov = np.linalg.inv(-2.0 * Haa)
            logdet = float(np.linalg.slogdet(cov)[1])
            V_new = Quadratic(Hss + 2.0 * Hsa @ cov @ Hsa.T, hs + 2.0 * Hsa @ cov @ ha,
                              Q.h0 + 0.5 * ha @ cov @ ha + 0.5 * m * np.log(2 * np.pi) + 0.5 * logdet)
            delta = V_new.max_abs_difference(V)
            V = V_new
            if not np.all(np.isfinite(V.to_vector())) or np.abs(V.to_vector()).max() > 1e12:
                raise ValueError("the soft Riccati recursion diverges: the system is not stabilizable at this gamma")
            if delta <= tol * (1.0 + np.abs(V.to_vector()).max()):
                break
        else:  # pragma: no cover - the defaults converge for any stabilizable problem
            raise RuntimeError(f"soft Riccati recursion did not converge in {max_iter} iterations")
        Q = self.reward + self.gamma * V.push(self.F, self.drift, self.noise_cov)
        cov = np.linalg.inv(-2.0 * Q.H[d:, d:])
        gain = 2.0 * cov @ Q.H[d:, :d]
        offset = cov @ Q.h[d:]
        log_policy = Q - V.embed(np.arange(d), d + m)
        return LQGSolution(Q, V, gain, offset, cov, log_policy, it)

    def policy_density(self) -> FixedGaussianDensity:
        """The soft-optimal policy as a (known) density w.r.t. Lebesgue measure."""
        sol = self.solution
        return FixedGaussianDensity(gain=sol.gain, offset=sol.offset, cov=sol.cov)

    # ------------------------------------------------------------------ normalized reward
    def _mu_parts(self, normalization: Normalization):
        d, m = self.state_dim, self.action_dim
        kernel = normalization.mu
        if isinstance(kernel, GaussianKernel):
            mean, scale = kernel.mean, kernel.scale
            if callable(mean) or callable(scale):
                raise ValueError("the closed form needs a Gaussian mu with constant mean/scale and a linear gain")
            T = np.diag(np.broadcast_to(np.asarray(scale, float), (m,)) ** 2)
            offset = mean
        elif isinstance(kernel, PointMass):
            if callable(kernel.action):
                raise ValueError("the closed form needs an anchor a0(s) = action + gain @ s with a constant action")
            T, offset = np.zeros((m, m)), kernel.action
        else:
            raise ValueError(f"the LQG closed form covers Gaussian and point-mass mu, got {kernel.describe()}")
        l = np.broadcast_to(np.asarray(offset, float), (m,)).copy()
        L = np.zeros((m, d)) if kernel.gain is None else _mat(kernel.gain, (m, d), "gain")
        return L, l, T

    def _g(self, normalization) -> Quadratic:
        g = normalization.g.g if isinstance(normalization.g, FixedOffset) else normalization.g
        if isinstance(g, Quadratic):
            if g.dim != self.state_dim:
                raise ValueError(f"g must be a Quadratic over the {self.state_dim}-dimensional state")
            return g
        if callable(g) or np.ndim(g) != 0:
            raise ValueError("the closed form needs g to be a scalar or a Quadratic over the state")
        return Quadratic.constant(float(g), self.state_dim)

    def _mu_maps(self, normalization):
        d, m = self.state_dim, self.action_dim
        L, l, T = self._mu_parts(normalization)
        F_mu = np.vstack([np.eye(d), L])
        f_mu = np.concatenate([np.zeros(d), l])
        cov_mu = np.zeros((d + m, d + m))
        cov_mu[d:, d:] = T
        A_mu, b_mu = self.A + self.B @ L, self.drift + self.B @ l
        noise_mu = self.noise_cov + self.B @ T @ self.B.T
        return (F_mu, f_mu, cov_mu), (A_mu, b_mu, noise_mu)

    def reference_log_density(self, reference) -> Quadratic:
        """``log dlambda/dLebesgue (a)`` as a Quadratic over z (zero for Lebesgue)."""
        d, m = self.state_dim, self.action_dim
        if reference is None or isinstance(reference, Lebesgue):
            return Quadratic.zero(d + m)
        if not isinstance(reference, GaussianReference):
            raise ValueError(f"the closed form covers Lebesgue and Gaussian reference measures, got {reference!r}")
        mean = np.broadcast_to(np.asarray(reference.mean, float), (m,))
        scale = np.broadcast_to(np.asarray(reference.scale, float), (m,))
        prec = 1.0 / scale ** 2
        H = np.zeros((d + m, d + m))
        H[d:, d:] = -0.5 * np.diag(prec)
        h = np.concatenate([np.zeros(d), prec * mean])
        h0 = float(-0.5 * np.sum(prec * mean ** 2) - np.sum(np.log(scale)) - 0.5 * m * np.log(2 * np.pi))
        return Quadratic(H, h, h0)

    def normalized_reward(self, normalization: Normalization, reference=None) -> Quadratic:
        """The true reward in the normalization ``mu r = g``, by the shaping potential (closed form),
        relative to ``reference`` (default Lebesgue)."""
        d, m = self.state_dim, self.action_dim
        reward = self.reward - self.reference_log_density(reference)
        (F_mu, f_mu, cov_mu), (A_mu, b_mu, noise_mu) = self._mu_maps(normalization)
        mu_r = reward.push(F_mu, f_mu, cov_mu)
        c = solve_stein(self._g(normalization) - mu_r, A_mu, b_mu, noise_mu, self.gamma)
        return reward + c.embed(np.arange(d), d + m) - self.gamma * c.push(self.F, self.drift, self.noise_cov)

    def genpqr_exact(self, normalization: Normalization, reference=None):
        """GenPQR's route in coefficient space from ``u = log dpi/dlambda`` alone: returns
        ``(reward, q, mu_q)`` as Quadratics (z, z, s)."""
        d, m = self.state_dim, self.action_dim
        u = self.solution.log_policy - self.reference_log_density(reference)
        g = self._g(normalization)
        (F_mu, f_mu, cov_mu), (A_mu, b_mu, noise_mu) = self._mu_maps(normalization)
        W = solve_stein(u.push(F_mu, f_mu, cov_mu) - g, A_mu, b_mu, noise_mu, self.gamma)
        g_z = g.embed(np.arange(d), d + m)
        Q = u - g_z + self.gamma * W.push(self.F, self.drift, self.noise_cov)
        return Q - W.embed(np.arange(d), d + m) + g_z, Q, W

    # ------------------------------------------------------------------ evaluation helpers
    def _z(self, states, actions):
        X = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
        A = as_float_array(actions, "actions", ndim=2, allow_1d_as_column=True)
        return np.hstack([X, A])

    def true_reward(self, states, actions) -> np.ndarray:
        return self.reward(self._z(states, actions))

    def evaluate(self, quadratic: Quadratic, states, actions) -> np.ndarray:
        """A Quadratic over z at (states, actions)."""
        return quadratic(self._z(states, actions))

    # ------------------------------------------------------------------ data
    def sample_states(self, n: int, rng) -> np.ndarray:
        chol = np.linalg.cholesky(self.state_cov)
        return self.state_mean + rng.standard_normal((n, self.state_dim)) @ chol.T

    def sample_actions(self, states, rng) -> np.ndarray:
        sol = self.solution
        chol = np.linalg.cholesky(sol.cov)
        return states @ sol.gain.T + sol.offset + rng.standard_normal((states.shape[0], self.action_dim)) @ chol.T

    def step(self, states, actions, rng) -> np.ndarray:
        noise = rng.multivariate_normal(np.zeros(self.state_dim), self.noise_cov, size=states.shape[0],
                                        method="cholesky") if np.any(self.noise_cov) else 0.0
        return states @ self.A.T + actions @ self.B.T + self.drift + noise

    def sample(self, n: int, random_state=None) -> Transitions:
        """``n`` i.i.d. transitions: ``s ~ rho``, ``a ~ pi(.|s)``, ``s' ~ P(.|s, a)``; logged true rewards."""
        rng = check_random_state(random_state)
        s = self.sample_states(int(n), rng)
        a = self.sample_actions(s, rng)
        return from_arrays(s, a, self.step(s, a, rng), action_space="box", rewards=self.true_reward(s, a))

    def evaluation_pairs(self, n: int, random_state=None):
        """(states, actions) with ``s ~ rho``, ``a ~ pi(.|s)``: where reward errors are measured."""
        rng = check_random_state(random_state)
        s = self.sample_states(int(n), rng)
        return s, self.sample_actions(s, rng)

    def exact_design(self, n_states: int = 40, n_noise_nodes: int = 3, random_state=0) -> Transitions:
        """Transitions whose weighted regression equals the conditional expectation exactly.

        ``n_states`` pairs ``(s, a)`` (``s ~ rho``, ``a ~ pi``), each repeated once per
        Gauss-Hermite node ``eta_j`` of the noise (tensor product in d dims) with next state
        ``F z + b + chol(W) eta_j`` and ``sample_weight`` = the node's weight. Gauss-Hermite with
        ``>= 2`` nodes is exact for quadratics, so a weighted least-squares fit of a quadratic
        target on (s, a) reproduces ``E[. | s, a]`` without sampling error.
        """
        rng = check_random_state(random_state)
        d = self.state_dim
        s = self.sample_states(int(n_states), rng)
        a = self.sample_actions(s, rng)
        mean_next = s @ self.A.T + a @ self.B.T + self.drift
        if not np.any(self.noise_cov):
            return from_arrays(s, a, mean_next, action_space="box", sample_weight=np.ones(len(s)))
        x, w = np.polynomial.hermite_e.hermegauss(int(n_noise_nodes))
        w = w / w.sum()
        grid = np.stack([g.ravel() for g in np.meshgrid(*([x] * d), indexing="ij")], axis=1)
        gw = np.prod(np.stack([g.ravel() for g in np.meshgrid(*([w] * d), indexing="ij")], axis=1), axis=1)
        noise = grid @ np.linalg.cholesky(self.noise_cov).T  # (J, d)
        J = grid.shape[0]
        next_states = (mean_next[:, None, :] + noise[None]).reshape(-1, d)
        return from_arrays(np.repeat(s, J, axis=0), np.repeat(a, J, axis=0), next_states,
                           action_space="box", sample_weight=np.tile(gw, len(s)),
                           episode_ids=np.repeat(np.arange(len(s)), J))


def make_lqg(A=0.8, B=0.5, noise_cov=0.09, drift=0.0, state_cost=0.5, action_cost=0.8, cross_cost=0.2,
             state_linear=0.3, action_linear=-0.2, reward_constant=0.0, gamma=0.9, state_mean=0.0,
             state_cov=1.0) -> LQGProblem:
    r"""An LQG problem; scalars give the 1-D problem, arrays any dimensions.

    Reward ``r(s, a) = -(s'Q_s s + a'R a + 2 s'N a) + q_s's + q_a'a + c`` with
    ``Q_s = state_cost``, ``R = action_cost``, ``N = cross_cost``, ``q_s = state_linear``,
    ``q_a = action_linear``, ``c = reward_constant``.
    """
    A_ = np.atleast_2d(np.asarray(A, dtype=np.float64))
    d = A_.shape[0]
    B_ = np.asarray(B, dtype=np.float64)
    B_ = B_.reshape(d, -1) if B_.ndim < 2 else B_
    m = B_.shape[1]
    Qs, R = _mat(state_cost, (d, d), "state_cost"), _mat(action_cost, (m, m), "action_cost")
    N = _mat(cross_cost, (d, m), "cross_cost")
    H = -np.block([[Qs, N], [N.T, R]])
    h = np.concatenate([np.broadcast_to(np.asarray(state_linear, float), (d,)),
                        np.broadcast_to(np.asarray(action_linear, float), (m,))])
    return LQGProblem(A=_mat(A_, (d, d), "A"), B=B_, drift=np.broadcast_to(np.asarray(drift, float), (d,)).copy(),
                      noise_cov=_mat(noise_cov, (d, d), "noise_cov"), reward=Quadratic(H, h, reward_constant),
                      gamma=check_gamma(gamma), state_mean=np.broadcast_to(np.asarray(state_mean, float), (d,)).copy(),
                      state_cov=_mat(state_cov, (d, d), "state_cov"))

r"""Exact tabular algebra of the targets: plug-in values, their gradients, and the efficient
influence function (EIF) they give.

The data are rows ``O = (S, A, S')`` of a finite MDP whose law factorizes as
``rho(s) pi(a|s) P(s'|s,a)`` (``P`` sub-stochastic: the missing mass is termination, a next
state of value zero). A target is a smooth function ``psi(rho, pi, P)`` (the behaviour
``pi`` enters through ``u = log pi``, and for some targets directly). Its gradient is kept in
the form every target shares (debiased-inference notes, Sec. 4, "each Bellman-type equation
contributes its representer times its residual"):

* ``grad_u`` (m, S, K): ``d psi / d u(s, a)``, the direct dependence on ``pi`` folded in as
  ``pi(a|s) d psi / d pi(a|s)`` (a perturbation of ``pi(a|s)`` is ``du = d pi / pi``);
* ``grad_rho`` (m, S): ``d psi / d rho(s)``;
* equations ``(omega, f, coef)``: ``d psi / d P(s'|s,a) = sum_k coef_k omega_k(s, a) f_k(s')``,
  one per linear or fixed-point equation the target solves with the kernel.

The EIF of a saturated discrete model is the derivative of ``psi`` along the point mass
(``chi(o) = d/de psi((1-e) P_0 + e delta_o)``); for the factorized law that is

.. math::

   \chi(s,a,s') = [g_\rho(s) - \rho g_\rho] + [\alpha(s,a) - \textstyle\sum_b \pi(b|s)\alpha(s,b)]
                 + \textstyle\sum_k c_k \lambda_k(s,a) [f_k(s') - (P f_k)(s,a)],

with the Riesz representers ``alpha = grad_u / (rho pi)`` and ``lambda_k = omega_k / (rho pi)``
(``f_k = 0`` at a terminal next state). This is the notes' Thm 4 form ``alpha° + beta + m - psi``;
each target's docstring in ``_targets`` names its closed form.
"""

from __future__ import annotations

import contextvars
import hashlib
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..data._validation import check_gamma
from ..stage2._kernels import TransitionKernel
from ..stage2._tabular import as_kernel

__all__ = []

#: Largest state count solved by dense LU (above: sparse LU).
DENSE_STATES = 2500
#: Kernels of at most this many entries (S * K * S) are made dense for a factorization.
SMALL_KERNEL = 2 ** 16
#: Newton iterations of the restricted soft fixed point before giving up.
MAX_NEWTON = 200
#: A Newton step of the soft fixed point reuses the last factorization (a chord step) while each
#: step shrinks the fixed-point residual by at least this factor; otherwise it factorizes again.
CHORD_RATE = 0.1
#: A ``RefinedResolvent`` solve: refinement steps at most, the least contraction per step, and the
#: relative size of the last step that ends it.
MAX_REFINE = 30
REFINE_RATE = 0.25
REFINE_TOL = 1e-13
#: Most bytes of factorizations a ``shared_resolvents`` scope keeps ...
SHARED_BYTES = 256 * 2 ** 20
#: ... and of those kept across scopes by content (``_KEPT``).
KEPT_BYTES = 64 * 2 ** 20


# ============================================================================ the law
@dataclass(frozen=True, eq=False)
class TabularLaw:
    """The nuisances of a finite MDP: the data law and the normalization.

    Attributes
    ----------
    rho : ndarray (S,)
        Law of the state of a row (the start law of every value target by default).
    policy : ndarray (S, K)
        Behaviour ``pi`` (strictly positive; ``u = log pi``).
    kernel : TransitionKernel
    gamma : float
        The agent's discount (the normalization's equation uses it).
    mu, g : ndarray (S, K) and (S,), optional
        The normalization ``sum_a mu(a|s) r(s,a) = g(s)``.
    observed : ndarray (S, K), optional
        Probability that a row at ``(s, a)`` has its next state (default 1; rows without one,
        the last choices of episodes, carry no kernel information).
    cells : ndarray (S, K), optional
        The law of ``(S, A)`` the Riesz representers divide by (default ``rho pi``); e.g. the
        smoothed cell frequencies of the rows (the saturated Riesz regression).
    project : callable, optional
        ``measure (m, S, K) -> representer (m, S, K)``: a Riesz regression on a sieve, used
        instead of the division (large state spaces; :class:`SieveProjector`).
    kernel_given : bool
        The kernel is known, not estimated from the rows: no Bellman-residual term varies (the
        efficient minimum distance weighs the cells by the rest of their covariance).
    """

    rho: np.ndarray
    policy: np.ndarray
    kernel: object
    gamma: float
    mu: np.ndarray | None = None
    g: np.ndarray | None = None
    observed: np.ndarray | None = None
    cells: np.ndarray | None = None
    project: object = None
    kernel_given: bool = False

    @classmethod
    def create(cls, rho, policy, P, gamma, mu=None, g=None, observed=None) -> "TabularLaw":
        policy = np.asarray(policy, dtype=np.float64)
        kernel = as_kernel(P, policy.shape[1])
        return cls(np.asarray(rho, dtype=np.float64), policy, kernel, check_gamma(gamma),
                   None if mu is None else np.asarray(mu, dtype=np.float64),
                   None if g is None else np.broadcast_to(np.asarray(g, dtype=np.float64), (policy.shape[0],)),
                   None if observed is None else np.asarray(observed, dtype=np.float64))

    @property
    def u(self) -> np.ndarray:
        return np.log(self.policy)

    @property
    def shape(self) -> tuple[int, int]:
        return self.policy.shape

    @property
    def density(self) -> np.ndarray:
        """``rho(s) pi(a|s)``, the law of ``(S, A)``, shape (S, K)."""
        return self.rho[:, None] * self.policy

    def expect(self, f) -> np.ndarray:
        """``(P f)(s, a)``, (S, K) for ``f`` (S,)."""
        return self.kernel.expect(f)


# ============================================================================ linear solves
class Resolvent:
    """``(I - gamma M_sigma)^{-1}`` and its transpose for the state kernel ``M_sigma`` of a
    policy ``sigma`` (S, K): one factorization, many right-hand sides."""

    def __init__(self, kernel, sigma, gamma: float):
        S = kernel.n_states
        self.gamma = float(gamma)
        if S <= DENSE_STATES:
            A = dense_state_kernel(kernel, sigma)
            A *= -self.gamma
            A.flat[::S + 1] += 1.0  # I - gamma M, in place
            self._lu = sla.lu_factor(A, overwrite_a=True, check_finite=False)
            self._sparse = None
        else:
            M = sp.csr_matrix(kernel.under(np.asarray(sigma, dtype=np.float64)))
            self._sparse = spla.splu(sp.csc_matrix(sp.identity(S) - self.gamma * M))
            self._lu = None

    def solve(self, b) -> np.ndarray:
        """``x = b + gamma M x``; ``b`` (S,) or (S, m)."""
        return self._apply(b, 0)

    def solve_t(self, b) -> np.ndarray:
        """``x = b + gamma M^T x`` (measures pushed forward); ``b`` (S,) or (S, m)."""
        return self._apply(b, 1)

    def _apply(self, b, trans: int) -> np.ndarray:
        b = np.asarray(b, dtype=np.float64)
        if self._lu is not None:
            return sla.lu_solve(self._lu, b, trans=trans)
        return self._sparse.solve(b, trans="T" if trans else "N")

    @property
    def nbytes(self) -> int:
        if self._lu is not None:
            return int(self._lu[0].nbytes)
        return int(12 * (self._sparse.L.nnz + self._sparse.U.nnz))


def dense_state_kernel(kernel, sigma) -> np.ndarray:
    """``M_sigma = sum_a sigma(a|s) P(.|s, a)`` (S, S) of a policy ``sigma`` (S, K) as a new dense array."""
    sigma = np.asarray(sigma, dtype=np.float64)
    if kernel.is_sparse and kernel.n_states ** 2 * kernel.n_actions <= SMALL_KERNEL:  # dense beats sparse set-up
        return np.einsum("sa,sat->st", sigma, kernel.to_dense())
    M = kernel.under(sigma)
    return M.toarray() if sp.issparse(M) else np.array(M, dtype=np.float64)


class RefinedResolvent(Resolvent):
    """``Resolvent`` of a policy ``sigma`` close to one already factorized (``base``, dense: a soft
    fixed point's last Newton factorization, at a policy near the fixed point's): each solve by
    iterative refinement on ``base``, ``x += base^{-1} (b - (I - gamma M_sigma) x)``, O(S^2) a
    step instead of a new O(S^3) factorization. A solve ends when a step contracts by
    ``REFINE_RATE`` and changes no column by more than ``REFINE_TOL`` of its largest entry (the
    error left is then at most a third of that); one that contracts slower makes the
    factorization after all and keeps it for the next solves."""

    def __init__(self, kernel, sigma, gamma: float, base: Resolvent):
        self.gamma = float(gamma)
        self._M = dense_state_kernel(kernel, sigma)
        self._args = (kernel, sigma)
        self._base, self._own = base, None
        self._lu = self._sparse = None  # no factorization of its own (not a base for another)

    def _apply(self, b, trans: int) -> np.ndarray:
        b = np.asarray(b, dtype=np.float64)
        if self._own is None:
            x = self._refine(b, trans)
            if x is not None:
                return x
            self._own = Resolvent(*self._args, self.gamma)
        return self._own._apply(b, trans)

    def _refine(self, b, trans: int):
        M = self._M.T if trans else self._M
        x = self._base._apply(b, trans)
        previous = np.inf
        for _ in range(MAX_REFINE):
            dx = self._base._apply(b - x + self.gamma * (M @ x), trans)
            x += dx
            size = float(np.max(np.max(np.abs(dx), axis=0) / np.maximum(np.max(np.abs(x), axis=0), 1e-300)))
            if size > REFINE_RATE * previous:
                return None
            if size <= REFINE_TOL and previous < np.inf:  # a contraction seen, not assumed
                return x
            previous = size
        return None

    @property
    def nbytes(self) -> int:
        return int(self._M.nbytes) + (0 if self._own is None else self._own.nbytes)


def refined_resolvent(kernel, sigma, gamma: float, base: Resolvent | None) -> Resolvent:
    """``RefinedResolvent`` on ``base`` when it is a dense factorization, else ``resolvent``."""
    if base is None or base._lu is None:
        return resolvent(kernel, sigma, gamma)
    return RefinedResolvent(kernel, sigma, gamma, base)


class _Shared:
    """The factorizations of one ``shared_resolvents`` scope: ``(kernel, sigma, gamma,
    Resolvent)`` (oldest first), the soft fixed points solved, ``(kernel, mask, tau, gamma,
    Phi, Resolvent at its policy)``, and the kernels' content digests, ``(kernel, digest)``."""

    def __init__(self):
        self.entries, self.fixed_points, self.digests, self.nbytes = [], [], [], 0

    def find(self, kernel, sigma, gamma):
        for k, s, g, res in self.entries:
            if k is kernel and g == gamma and s.shape == sigma.shape and np.array_equal(s, sigma):
                return res
        return None

    def keep(self, kernel, sigma, gamma, res) -> None:
        size = res.nbytes
        if size > SHARED_BYTES:
            return
        while self.entries and self.nbytes + size > SHARED_BYTES:
            self.nbytes -= self.entries.pop(0)[3].nbytes
        self.entries.append((kernel, sigma.copy(), gamma, res))
        self.nbytes += size

    def fixed_point(self, kernel, mask, tau, gamma):
        for k, m, t, g, Phi, res in self.fixed_points:
            if k is kernel and t == tau and g == gamma and np.array_equal(m, mask):
                return Phi.copy(), res
        return None

    def content_key(self, kernel, sigma, gamma):
        """The key of ``_KEPT`` (the kernel's digest made once per scope: its content cannot change
        within one call), or None for a kernel it does not keep."""
        for k, digest in self.digests:
            if k is kernel:
                break
        else:
            digest = kernel_digest(kernel)
            self.digests.append((kernel, digest))
        if digest is None:
            return None
        return digest, _sha1(np.ascontiguousarray(sigma), repr(sigma.shape)), gamma


def _sha1(*parts) -> bytes:
    h = hashlib.sha1(usedforsecurity=False)
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
    return h.digest()


def kernel_digest(kernel) -> bytes | None:
    """A digest of a stored kernel's content (its matrix's arrays, shapes and types), or None for
    one solved by sparse LU (above ``DENSE_STATES``) or held as a model (no matrix to read)."""
    if not isinstance(kernel, TransitionKernel) or kernel.n_states > DENSE_STATES:
        return None
    M = kernel.matrix
    head = repr((type(M).__name__, M.shape, kernel.n_states, kernel.n_actions))
    if sp.issparse(M):
        M = M.tocsr()
        return _sha1(head, repr((M.data.dtype.str, M.indices.dtype.str, M.indptr.dtype.str)),
                     np.ascontiguousarray(M.indptr), np.ascontiguousarray(M.indices), np.ascontiguousarray(M.data))
    M = np.ascontiguousarray(M)
    return _sha1(head, M.dtype.str, M)


class _Kept:
    """Factorizations kept across calls, found by content: ``(kernel digest, policy digest,
    gamma) -> Resolvent``, the least recently used dropped beyond ``KEPT_BYTES``."""

    def __init__(self):
        self.items, self.nbytes, self.lock = OrderedDict(), 0, threading.Lock()

    def get(self, key):
        with self.lock:
            res = self.items.get(key)
            if res is not None:
                self.items.move_to_end(key)
            return res

    def put(self, key, res) -> None:
        size = res.nbytes
        if size > KEPT_BYTES:
            return
        with self.lock:
            while self.items and self.nbytes + size > KEPT_BYTES:
                self.nbytes -= self.items.popitem(last=False)[1].nbytes
            self.items[key] = res
            self.nbytes += size

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.nbytes = 0


_SHARED = contextvars.ContextVar("genpqr_inference_resolvents", default=None)
_KEPT = _Kept()


def clear_kept_factorizations() -> None:
    """Drop the factorizations kept across scopes (a benchmark's cold call; tests)."""
    _KEPT.clear()


@contextmanager
def shared_resolvents():
    """Within this scope a ``resolvent`` of the same kernel object, policy and discount is
    factorized once (``infer``: the plug-in and every fold share a given kernel, and the fixed
    policies of the targets), and a restricted soft fixed point starts from the last one solved on
    the same kernel (its factorization as the Newton steps' Jacobian while it contracts fast).
    A factorization made in a scope is also kept for later scopes, found by the content of the
    kernel, the policy and the discount (``_KEPT``: a bootstrap's replicates, a Monte Carlo's
    replications, under a given kernel and a fixed policy)."""
    token = _SHARED.set(_Shared())
    try:
        yield
    finally:
        _SHARED.reset(token)


def resolvent(kernel, sigma, gamma: float) -> Resolvent:
    """``Resolvent(kernel, sigma, gamma)``, shared within a ``shared_resolvents`` scope and kept
    across scopes by content."""
    shared = _SHARED.get()
    if shared is None:
        return Resolvent(kernel, sigma, gamma)
    sigma, gamma = np.asarray(sigma, dtype=np.float64), float(gamma)
    res = shared.find(kernel, sigma, gamma)
    if res is None:
        key = shared.content_key(kernel, sigma, gamma)
        res = None if key is None else _KEPT.get(key)
        if res is None:
            res = Resolvent(kernel, sigma, gamma)
            if key is not None:
                _KEPT.put(key, res)
        shared.keep(kernel, sigma, gamma, res)
    return res


# ============================================================================ gradients
@dataclass
class Equation:
    """One kernel equation of a target: ``d psi / d P(s'|s,a) = coef * omega(s,a) * f(s')``."""

    omega: np.ndarray  # (m, S, K)
    f: np.ndarray      # (S,)
    coef: float


@dataclass
class Pieces:
    """A target's plug-in value and gradient (module docstring); ``m`` components."""

    value: np.ndarray                       # (m,)
    grad_u: np.ndarray                      # (m, S, K)
    grad_rho: np.ndarray                    # (m, S)
    equations: list = field(default_factory=list)
    extras: dict = field(default_factory=dict)

    @property
    def m(self) -> int:
        return self.value.shape[0]

    def combine(self, other: "Pieces", sign: float = 1.0) -> "Pieces":
        """Component-wise ``self + sign * other`` (same ``m``)."""
        eqs = list(self.equations) + [Equation(sign * e.omega, e.f, e.coef) for e in other.equations]
        return Pieces(self.value + sign * other.value, self.grad_u + sign * other.grad_u,
                      self.grad_rho + sign * other.grad_rho, eqs)

    @staticmethod
    def stack(parts) -> "Pieces":
        """Components of several pieces side by side (zero gradients elsewhere)."""
        parts = list(parts)
        m = [p.m for p in parts]
        offsets = np.concatenate([[0], np.cumsum(m)])
        total = int(offsets[-1])
        S, K = parts[0].grad_u.shape[1:]
        eqs = []
        for p, start in zip(parts, offsets[:-1]):
            for e in p.equations:
                omega = np.zeros((total, S, K))
                omega[start:start + p.m] = e.omega
                eqs.append(Equation(omega, e.f, e.coef))
        return Pieces(np.concatenate([p.value for p in parts]), np.concatenate([p.grad_u for p in parts]),
                      np.concatenate([p.grad_rho for p in parts]), eqs)


@dataclass
class RewardGradient:
    """A functional of a reward table ``r`` (S, K): value and gradient in ``r``, plus what
    depends on the law directly (``grad_pi``: ``pi d psi / d pi`` at fixed ``r``)."""

    value: np.ndarray
    grad_r: np.ndarray
    grad_rho: np.ndarray
    grad_pi: np.ndarray
    equations: list = field(default_factory=list)
    extras: dict = field(default_factory=dict)


def zeros_like_gradient(m: int, S: int, K: int):
    return np.zeros((m, S, K)), np.zeros((m, S))


# ============================================================================ reward maps
def log_policy_map(law: TabularLaw, functional) -> Pieces:
    """The functional evaluated at the pseudo-reward ``r = u = log pi`` (notes Sec. 2, Lemma 1)."""
    rg = functional(law, law.u, law.gamma)
    return Pieces(rg.value, rg.grad_r + rg.grad_pi, rg.grad_rho, list(rg.equations), dict(rg.extras))


@dataclass(frozen=True)
class NormalizedReward:
    """GenPQR's normalized reward (notes Thm 3): ``Q = u - g + gamma P mu Q``,
    ``rbar = Q - mu Q + g``; ``W = mu Q`` solves ``(I - gamma P_mu) W = mu u - g``."""

    reward: np.ndarray
    q: np.ndarray
    w: np.ndarray
    resolvent: Resolvent


def normalized_reward(law: TabularLaw) -> NormalizedReward:
    if law.mu is None or law.g is None:
        raise ValueError("the law has no normalization (mu, g): a normalized-reward target needs one")
    res = resolvent(law.kernel, law.mu, law.gamma)
    u = law.u
    W = res.solve(np.sum(law.mu * u, axis=1) - law.g)
    q = u - law.g[:, None] + law.gamma * law.expect(W)
    reward = q - np.sum(law.mu * q, axis=1)[:, None] + law.g[:, None]
    return NormalizedReward(reward, q, W, res)


def normalized_map(law: TabularLaw, functional, gamma_f: float) -> Pieces:
    r"""The functional evaluated at the normalized reward, its gradient carried back to ``u``
    (notes Sec. 5.5, corrected form): ``D = (I - mu)^T grad_r``,
    ``Omega = (I - gamma (P mu)^T)^{-1} D`` and the normalization equation's term
    ``Omega * (W(s') - (P W)(s, a))`` with ``W = mu Q``. The propagation through ``mu`` (the
    term the printed Thm 6 drops) is the ``gamma mu * push(Omega)`` part of ``Omega``."""
    nr = normalized_reward(law)
    rg = functional(law, nr.reward, gamma_f)
    D = rg.grad_r - law.mu[None] * rg.grad_r.sum(axis=2, keepdims=True)
    z = nr.resolvent.solve_t(law.kernel.push(np.moveaxis(D, 0, -1)))  # (S, m)
    omega = D + law.gamma * law.mu[None] * np.moveaxis(z, -1, 0)[:, :, None]
    eqs = list(rg.equations) + [Equation(omega, nr.w, law.gamma)]
    extras = dict(rg.extras, reward=nr.reward)
    return Pieces(rg.value, omega + rg.grad_pi, rg.grad_rho, eqs, extras)


# ============================================================================ functionals of a reward
def policy_value_functional(sigma=None, start=None):
    r"""``psi = sum_s rho0(s) V(s)``, ``V = sigma Q``, ``Q = r + gamma_f P V`` (notes Example 1a,
    Thm 9; Example 2 when ``r`` is the normalized reward). ``sigma=None``: the behaviour policy
    itself, which moves with the law (notes Sec. 5.2). ``start``: a fixed start law (S,); None:
    the rows' state law ``rho``. Gradient: the occupancy ``eta = (I - gamma_f M_sigma^T)^{-1} rho0``
    gives ``grad_r = eta sigma`` and the kernel equation ``(eta sigma, V, gamma_f)``."""

    def functional(law: TabularLaw, r, gamma_f) -> RewardGradient:
        S, K = law.shape
        pol = law.policy if sigma is None else sigma
        res = resolvent(law.kernel, pol, gamma_f)
        V = res.solve(np.sum(pol * r, axis=1))
        rho0 = law.rho if start is None else start
        eta = res.solve_t(rho0)
        grad_r = (eta[:, None] * pol)[None]
        grad_rho = (V if start is None else np.zeros(S))[None]
        grad_pi = np.zeros((1, S, K))
        if sigma is None:  # the policy evaluated is the behaviour: it moves too
            q = r + gamma_f * law.expect(V)
            grad_pi = (eta[:, None] * pol * q)[None]
        return RewardGradient(np.array([rho0 @ V]), grad_r, grad_rho, grad_pi, [Equation(grad_r, V, gamma_f)],
                              {"value": V})

    return functional


def soft_fixed_point(r, law: TabularLaw, gamma_f: float, mask, tau: float):
    r"""The restricted soft fixed point (notes Sec. 5.3): ``Phi(s) = tau log sum_{b in A*}
    exp((r(s,b) + gamma P Phi(s,b)) / tau)``, by Newton (soft policy iteration) to a residual of
    1e-13 relative. Returns ``(Phi (S,), pi* (S, K))``; ``pi*`` is zero off ``A*``. See
    ``soft_newton``."""
    Phi, pi, _ = soft_newton(r, law, gamma_f, mask, tau)
    return Phi, pi


def soft_newton(r, law: TabularLaw, gamma_f: float, mask, tau: float):
    r"""``soft_fixed_point`` and the last factorization its steps used: ``(Phi, pi*, Resolvent or
    None)``. Cold, Newton starts from ``Phi = 0`` (its first step evaluates the myopic softmax
    policy). A step keeps the last factorization while the residual shrinks by ``CHORD_RATE`` per
    step (the same fixed point, fewer factorizations); in a ``shared_resolvents`` scope it starts
    from the last fixed point solved on the kernel (the plug-in's for a fold)."""
    S, K = law.shape
    logits_mask = np.where(mask, 0.0, -np.inf)
    shared = _SHARED.get()
    warm = None if shared is None else shared.fixed_point(law.kernel, mask, tau, float(gamma_f))
    if warm is None:
        Phi, res, previous = np.zeros(S), None, None  # the first step is Newton's
    else:
        (Phi, res), previous = warm, np.inf  # the first step is a chord step at the last fixed point's policy
    for _ in range(MAX_NEWTON):
        z = (r + gamma_f * law.expect(Phi)) / tau + logits_mask
        top = np.max(z, axis=1, keepdims=True)
        lse = top[:, 0] + np.log(np.sum(np.exp(z - top), axis=1))
        step_b = tau * lse - Phi
        pi = np.exp(z - lse[:, None])
        size = float(np.max(np.abs(step_b)))
        if size <= 1e-13 * max(1.0, np.max(np.abs(Phi))):
            break
        if res is None or size > CHORD_RATE * previous:
            res = Resolvent(law.kernel, pi, gamma_f)
        Phi = Phi + res.solve(step_b)
        previous = size
    z = (r + gamma_f * law.expect(Phi)) / tau + logits_mask
    top = np.max(z, axis=1, keepdims=True)
    lse = top[:, 0] + np.log(np.sum(np.exp(z - top), axis=1))
    return tau * lse, np.exp(z - lse[:, None]), res


def softmax_value_functional(mask, tau: float, start=None):
    r"""``psi = sum_s rho0(s) V*(s)``, the hard value under ``r`` of the counterfactual softmax
    policy ``pi* = softmax_{A*}((r + gamma_f v*) / tau)``, ``v* = P Phi`` (notes Example 1b;
    corrected form of Thm 10, Sec. 5.3). With ``eta* = (I - gamma_f M*^T)^{-1} rho0``,
    ``A* = q* - V*``, ``B = (gamma_f / tau) eta* pi* A*`` and ``Lambda = (I - gamma_f (P pi*)^T)^{-1} B``
    (``zeta = push(Lambda)``): ``grad_r = eta* pi* (1 + A*/tau) + zeta pi*`` and two kernel equations,
    ``(eta* pi*, V*, gamma_f)`` and ``(Lambda, Phi, 1)``. The printed Thm 10 keeps only the
    ``t >= 1`` part of ``Lambda`` (the notes' ``d~`` for ``D~``)."""

    def functional(law: TabularLaw, r, gamma_f) -> RewardGradient:
        S, K = law.shape
        Phi, pi_star, jacobian = soft_newton(r, law, gamma_f, mask, tau)
        res = refined_resolvent(law.kernel, pi_star, gamma_f, jacobian)  # refined on Newton's last factorization
        shared = _SHARED.get()
        if shared is not None and shared.fixed_point(law.kernel, mask, tau, float(gamma_f)) is None:
            # the first one solved (infer: the plug-in's, the nearest to every fold's) starts the next ones
            shared.fixed_points.append((law.kernel, np.array(mask, copy=True), tau, float(gamma_f), Phi,
                                        res if jacobian is None else jacobian))
        V = res.solve(np.sum(pi_star * r, axis=1))
        q = r + gamma_f * law.expect(V)
        adv = np.where(mask, q - V[:, None], 0.0)
        rho0 = law.rho if start is None else start
        eta = res.solve_t(rho0)
        B = (gamma_f / tau) * eta[:, None] * pi_star * adv
        zeta = res.solve_t(law.kernel.push(B))
        lam = B + gamma_f * pi_star * zeta[:, None]
        grad_r = eta[:, None] * pi_star * (1.0 + adv / tau) + zeta[:, None] * pi_star
        grad_rho = (V if start is None else np.zeros(S))[None]
        eqs = [Equation((eta[:, None] * pi_star)[None], V, gamma_f), Equation(lam[None], Phi, 1.0)]
        return RewardGradient(np.array([rho0 @ V]), grad_r[None], grad_rho, np.zeros((1, S, K)), eqs,
                              {"value": V, "policy": pi_star})

    return functional


def weighted_sum_functional(weights):
    r"""``psi_j = sum_{s,a} W_j(s,a) r(s,a)`` for fixed measures ``W`` (m, S, K) (notes Sec. 5.8,
    "user-W"): no ``m - psi`` term, ``grad_r = W``."""
    W = np.asarray(weights, dtype=np.float64)

    def functional(law: TabularLaw, r, gamma_f) -> RewardGradient:
        m = W.shape[0]
        return RewardGradient(np.einsum("jsa,sa->j", W, r), W.copy(), np.zeros((m, law.shape[0])),
                              np.zeros_like(W))

    return functional


def data_mean_functional(weights):
    r"""``psi_j = E_0[w_j(S, A) r(S, A)] = sum rho pi w_j r`` (notes Sec. 5.8, ``b``): the law
    enters directly, ``grad_rho = sum_a pi w r`` and ``pi d psi / d pi = rho pi w r``."""
    w = np.asarray(weights, dtype=np.float64)

    def functional(law: TabularLaw, r, gamma_f) -> RewardGradient:
        dens = law.density
        wr = w * r[None]
        return RewardGradient(np.einsum("sa,jsa->j", dens, wr), dens[None] * w, np.sum(law.policy[None] * wr, axis=2),
                              dens[None] * wr)

    return functional


def projection_functional(features, offset=None, weights=None):
    r"""``theta = G^{-1} E_0[x (r - offset)]``, ``G = E_0[x x^T]`` (notes Example 3, Sec. 5.8):
    the least-squares projection of ``r`` on features ``x`` (S, K, p) under the law of ``(S, A)``
    (times fixed ``weights`` (S, K) if given: ``E_0[w x x^T]``, ``E_0[w x (r - offset)]``).
    With ``e = r - offset - x theta``: ``grad_r = rho pi G^{-1} x``, ``grad_rho = G^{-1} sum_a pi x e``,
    ``pi d theta / d pi = G^{-1} rho pi x e`` (the notes' ``G^{-1}[chi_b - (x x^T - G) theta]``)."""
    X = np.asarray(features, dtype=np.float64)
    w = 1.0 if weights is None else np.asarray(weights, dtype=np.float64)

    def functional(law: TabularLaw, r, gamma_f) -> RewardGradient:
        dens = law.density * w
        y = r - (0.0 if offset is None else offset)
        G = np.einsum("sa,sap,saq->pq", dens, X, X)
        Ginv = np.linalg.inv(G)
        theta = Ginv @ np.einsum("sa,sap,sa->p", dens, X, y)
        e = y - X @ theta
        Xg = np.einsum("pq,saq->psa", Ginv, X)  # G^{-1} x, (p, S, K)
        return RewardGradient(theta, dens[None] * Xg, np.sum(law.policy[None] * w * Xg * e[None], axis=2),
                              dens[None] * Xg * e[None], [], {"gram": G, "residual": e})

    return functional


class SieveProjector:
    r"""Riesz regression of a measure ``M`` (m, S, K) on the sieve ``phi(s, a) = e_a (x) psi(s)``:
    ``alpha = phi^T theta``, ``theta = argmin E_n[(phi^T theta)^2] - 2 sum M phi^T theta + ridge |theta|^2``,
    i.e. per action ``theta_a = (sum_s p_n(s, a) psi psi^T + ridge)^{-1} sum_s M(s, a) psi(s)`` with
    ``p_n`` the rows' cell frequencies (notes Sec. 5.1). The ridge (relative to the Gram matrix's
    mean diagonal) is chosen for each component ``M_j`` by its held-out Riesz loss over two halves
    of the rows (``halves`` given: where the data are thin the sieve must not extrapolate freely).
    The loss is a sum of one term per component, each with its own coefficients, so the choice is
    per component: a target's representer, hence its estimate, does not depend on the targets
    asked with it (a ridge shared by the stack follows the components of the largest loss and
    mis-smooths the others). ``chosen`` records each call's ridges, one per component. With
    indicator features and no ridge it is the division by the cell frequencies."""

    RIDGES = (1e-8, 1e-6, 1e-4, 1e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0)

    def __init__(self, psi, cell_freq, ridge: float | None = 1e-8, halves=None):
        self.psi = np.asarray(psi, dtype=np.float64)  # (S, m)
        self.ridge = ridge
        self.full = self._system(cell_freq)
        self.halves = None if halves is None else [self._system(f) for f in halves]
        self._inverse = {}  # the full sample's ridged inverses, made when a measure chooses their ridge
        self.chosen = []

    def _system(self, freq):
        """``(grams (K, m, m), scale)``: a sample's per-action Gram matrices ``sum_s p(s, a) psi psi^T``
        and the ridges' unit (their mean diagonal)."""
        freq = np.asarray(freq, dtype=np.float64)
        grams = np.stack([(freq[:, k, None] * self.psi).T @ self.psi for k in range(freq.shape[1])])
        m = self.psi.shape[1]
        scale = max(float(np.mean(np.trace(grams, axis1=1, axis2=2))) / m, 1e-300)
        return grams, scale

    def _inverses(self, system, ridges):
        grams, scale = system
        eye = np.eye(grams.shape[1])[None]
        return {r: np.linalg.inv(grams + r * scale * eye) for r in ridges}

    def _solve(self, inv, moments):
        theta = np.einsum("kmn,jkn->jkm", inv, moments)
        return np.einsum("sm,jkm->jsk", self.psi, theta)

    def held_out_loss(self, moments) -> dict:
        """The Riesz loss ``sum_{s,a} p_other (phi^T theta_r)^2 - 2 sum M phi^T theta_r`` of the
        ridge-``r`` fit on one half, on the other half, summed over both ways round, for every
        candidate ridge at once: one eigendecomposition of each half's Gram matrices gives every
        ridge's solution (``theta_r = V (V^T b) / (w + r)``), and the loss is read in the sieve's
        coordinates (``theta^T G_other theta - 2 b^T theta``: the same sums without a pass over the
        cells). ``moments`` (j, K, m): ``b = sum_s M(s, a) psi(s)``. Returns ``{ridge: (j,)
        losses}``: one per component (each component's regression has its own coefficients)."""
        if not hasattr(self, "_eigen"):
            self._eigen = [np.linalg.eigh(grams) for grams, _ in self.halves]
        ridges = np.asarray(self.RIDGES)
        loss = np.zeros((ridges.size, moments.shape[0]))
        for (w, V), (_, scale), (other, _) in zip(self._eigen, self.halves, self.halves[::-1]):
            c = np.einsum("kmn,jkm->jkn", V, moments)  # V^T b
            coef = c[None] / (w[None] + (ridges * scale)[:, None, None])[:, None]  # (r, j, K, m)
            theta = np.einsum("kmn,rjkn->rjkm", V, coef)
            loss += (np.einsum("rjkm,kmn,rjkn->rj", theta, other, theta, optimize=True)
                     - 2 * np.einsum("jkm,rjkm->rj", moments, theta))
        return dict(zip(self.RIDGES, loss))

    def __call__(self, measure):
        moments = np.einsum("jsk,sm->jkm", measure, self.psi)
        if self.ridge is None:
            loss = np.stack(list(self.held_out_loss(moments).values()))  # (ridges, j)
            chosen = [self.RIDGES[i] for i in np.argmin(loss, axis=0)]
        else:
            chosen = [self.ridge] * moments.shape[0]
        self.chosen.append(tuple(chosen))
        out = np.zeros((moments.shape[0], self.psi.shape[0], moments.shape[1]))
        nonzero = np.any(moments != 0, axis=(1, 2))  # a zero measure (a stack's other rows) has alpha = 0
        for ridge in dict.fromkeys(r for r, on in zip(chosen, nonzero) if on):  # each distinct ridge once
            if ridge not in self._inverse:
                self._inverse[ridge] = self._inverses(self.full, (ridge,))[ridge]
            rows = [j for j, r in enumerate(chosen) if r == ridge and nonzero[j]]
            out[rows] = self._solve(self._inverse[ridge], moments[rows])
        return out


# ============================================================================ the EIF
def representers(pieces: Pieces, law: TabularLaw):
    """``alpha = grad_u / (rho pi)`` and ``lambda_k = omega_k / (rho pi observed)`` (or their Riesz
    regressions on a sieve, ``law.project``)."""
    if law.project is not None:
        return law.project(pieces.grad_u), [law.project(e.omega) for e in pieces.equations]
    dens = law.density if law.cells is None else law.cells
    obs = dens if law.observed is None else dens * law.observed
    with np.errstate(divide="ignore", invalid="ignore"):  # a state no row visits: no row reads its cells
        alpha = pieces.grad_u / dens[None]
        lams = [e.omega / obs[None] for e in pieces.equations]
    return alpha, lams


def influence(pieces: Pieces, law: TabularLaw, s, a, s_next, cont, has_next=None) -> np.ndarray:
    r"""``chi(s_i, a_i, s'_i)`` at rows (module docstring), shape (n, m). ``cont``: 1 - terminated
    (``s_next`` is ignored where 0); ``has_next``: rows with an observed next state (default all)."""
    state, policy, kernel = influence_terms(pieces, law, s, a, s_next, cont, has_next)
    return state + policy + kernel


def influence_terms(pieces: Pieces, law: TabularLaw, s, a, s_next, cont, has_next=None, reps=None):
    r"""The three terms of ``chi`` at rows, one per factor of the law (module docstring), each
    (n, m): ``(state, policy, kernel)`` = ``g_rho(s) - rho g_rho``, ``alpha(s, a) - sum_b pi(b|s)
    alpha(s, b)`` and ``sum_k c_k lambda_k(s, a) [f_k(s') - (P f_k)(s, a)]`` (0 on a row without
    a next state). Under the law they are orthogonal: each has mean zero given what the one
    before it conditions on (nothing, ``s``, ``(s, a)``). ``reps``: ``representers`` of
    ``pieces`` at ``law`` when already computed."""
    s, a = np.asarray(s, dtype=np.int64), np.asarray(a, dtype=np.int64)
    cont = np.asarray(cont, dtype=np.float64)
    nxt = np.where(cont > 0, np.asarray(s_next, dtype=np.int64), 0)
    alpha, lams = representers(pieces, law) if reps is None else reps
    state = (pieces.grad_rho[:, s] - (pieces.grad_rho @ law.rho)[:, None]).T
    policy = (alpha[:, s, a] - np.einsum("jnb,nb->jn", alpha[:, s, :], law.policy[s])).T
    kernel = np.zeros_like(state)
    keep = np.ones(s.shape) if has_next is None else np.asarray(has_next, dtype=np.float64)
    for eq, lam in zip(pieces.equations, lams):
        resid = cont * eq.f[nxt] - law.expect(eq.f)[s, a]
        kernel += (eq.coef * lam[:, s, a] * (keep * resid)[None]).T
    return state, policy, kernel


def population_influence(pieces: Pieces, law: TabularLaw):
    r"""``chi`` on every outcome: ``(chi (S, K, S+1, m), prob (S, K, S+1))``, the last next-state
    slot being termination (for exact expectations in the tests and the orthogonality check)."""
    S, K = law.shape
    P = law.kernel.to_dense()
    term = np.clip(1.0 - P.sum(axis=2), 0.0, None)
    s, a, s2 = np.meshgrid(np.arange(S), np.arange(K), np.arange(S + 1), indexing="ij")
    cont = (s2 < S).astype(np.float64)
    chi = influence(pieces, law, s.ravel(), a.ravel(), np.minimum(s2, S - 1).ravel(), cont.ravel())
    prob = law.density[:, :, None] * np.concatenate([P, term[:, :, None]], axis=2)
    return chi.reshape(S, K, S + 1, -1), prob


# ============================================================================ efficient minimum distance
#: Most (state, action) cells the efficient minimum distance weights (its covariance is dense).
MAX_DISTANCE_CELLS = 4000
#: Eigenvalues of the cells' covariance below this share of the largest are treated as zero.
RANK_TOL = 1e-12


def influence_covariance(pieces: Pieces, law: TabularLaw) -> np.ndarray:
    r"""``E[chi chi^T]`` (m, m) over one row of the law (``rho pi P``, a row's next state observed
    with probability ``observed``), in closed form: the three parts of ``chi`` (module docstring)
    are uncorrelated (the policy score has mean zero given the state, the Bellman residuals given
    the state and action), so ``V = sum_s rho c c^T + sum_{s,a} rho pi alpha° alpha°^T +
    sum_{s,a} rho pi observed sum_{k,l} c_k c_l lambda_k lambda_l^T Cov_P(f_k, f_l)``. States the law
    never visits (``rho = 0``) carry no rows and are left out."""
    dens = law.density
    on = law.rho > 0
    alpha, lams = representers(pieces, law)  # infinite at unvisited states: left out below
    g = pieces.grad_rho - (pieces.grad_rho @ law.rho)[:, None]
    m = pieces.m
    gram = (lambda x, y, w: (x.reshape(m, -1) * w.reshape(-1)) @ y.reshape(m, -1).T)
    V = gram(g[:, on], g[:, on], law.rho[on])
    a = alpha[:, on] - np.einsum("jsb,sb->js", alpha[:, on], law.policy[on])[:, :, None]
    V += gram(a, a, dens[on])
    obs = dens if law.observed is None else dens * law.observed
    means = [law.expect(e.f) for e in pieces.equations]
    for k, (ek, lk) in enumerate(zip(pieces.equations, lams)):
        for l, (el, ll) in enumerate(zip(pieces.equations, lams)):
            cov = law.expect(ek.f * el.f) - means[k] * means[l]
            V += ek.coef * el.coef * gram(lk[:, on], ll[:, on], (obs * cov)[on])
    return 0.5 * (V + V.T)


@dataclass
class MinimumDistance:
    r"""The optimal minimum-distance projection of the normalized reward on features at a law
    (Chamberlain 1982): ``theta = argmin (z - Phi theta)^T V_z^+ (z - Phi theta)`` over the
    reward's identified contrasts ``z = B^T (rbar - offset)`` at the visited cells, ``V_z`` their
    influence-function covariance.

    Attributes
    ----------
    weights : ndarray (p, S, K)
        ``H``: ``theta = sum_{s,a} H(s, a) (rbar - offset)(s, a)`` (zero off the visited states).
    cells : Pieces
        The reward at each visited cell (point-mass measures), whose influence gives ``z``'s.
    basis : ndarray (C, Z)
        ``B``: orthonormal contrasts of the visited cells, complementing ``mu`` at each state.
    cov : ndarray (Z, Z)
        ``V_z = B^T V B`` per row.
    design : ndarray (Z, p)
        ``Phi_z = B^T Phi``.
    shift : ndarray (Z,)
        ``B^T offset`` at the cells.
    index : ndarray (C,)
        The cells, as flat indices ``s * K + a``.
    rank : int
        Of ``V_z`` (the contrasts the data inform).
    """

    weights: np.ndarray
    cells: Pieces
    basis: np.ndarray
    cov: np.ndarray
    design: np.ndarray
    shift: np.ndarray
    index: np.ndarray
    rank: int


def contrast_basis(mu: np.ndarray) -> np.ndarray:
    """Per state an orthonormal basis (S, K, K-1) of the action vectors orthogonal to ``mu(s, .)``:
    the directions of a state's reward the normalization ``sum_a mu r = g`` leaves free."""
    _, _, vt = np.linalg.svd(np.asarray(mu, dtype=np.float64)[:, None, :])
    return np.swapaxes(vt[:, 1:, :], 1, 2)


def pseudo_inverse(V: np.ndarray):
    """``(V^+, rank)`` of a symmetric positive semi-definite matrix (eigenvalues below ``RANK_TOL``
    times the largest dropped)."""
    vals, vecs = np.linalg.eigh(V)
    keep = vals > RANK_TOL * max(float(vals.max(initial=0.0)), 1e-300)
    return (vecs[:, keep] / vals[keep]) @ vecs[:, keep].T, int(keep.sum())


def minimum_distance(law: TabularLaw, features, offset=None, names=None) -> MinimumDistance:
    r"""The efficient weights ``H`` of the projection on ``features`` (S, K, p) at ``law``
    (``MinimumDistance``). ``V`` is :func:`influence_covariance` of the reward at the cells
    (without the kernel's terms when ``law.kernel_given``), ``V_z^+`` its pseudo-inverse on the contrasts; ``H = (Phi_z^T V_z^+ Phi_z)^{-1} Phi_z^T V_z^+ B^T``.
    ``ValueError`` when the features' contrasts do not identify ``theta``."""
    S, K = law.shape
    X = np.asarray(features, dtype=np.float64)
    p = X.shape[2]
    states = np.flatnonzero(law.rho > 0)
    C = states.size * K
    if C > MAX_DISTANCE_CELLS:
        raise ValueError(f"the efficient projection weights the {C} visited (state, action) cells with a dense "
                         f"{C} x {C} covariance, more than {MAX_DISTANCE_CELLS}: use the data's weights "
                         f"(weights=None) on a state space this large")
    index = (states[:, None] * K + np.arange(K)[None]).ravel()
    E = np.zeros((C, S * K))
    E[np.arange(C), index] = 1.0
    cells = normalized_map(law, weighted_sum_functional(E.reshape(C, S, K)), law.gamma)
    moving = Pieces(cells.value, cells.grad_u, cells.grad_rho, []) if law.kernel_given else cells
    V = influence_covariance(moving, law)
    per_state = contrast_basis(law.mu[states])  # (n, K, K-1)
    n, Km1 = states.size, K - 1
    basis = np.zeros((C, n * Km1))
    for i in range(n):
        basis[i * K:(i + 1) * K, i * Km1:(i + 1) * Km1] = per_state[i]
    Vz = basis.T @ V @ basis
    Vz = 0.5 * (Vz + Vz.T)
    Vinv, rank = pseudo_inverse(Vz)
    design = basis.T @ X.reshape(S * K, p)[index]
    info = design.T @ Vinv @ design
    ev = np.linalg.eigvalsh(info)
    if ev.min() <= 1e-10 * max(ev.max(), 1e-300):
        names = list(names) if names is not None else [f"theta[{j}]" for j in range(p)]
        raise ValueError(f"the efficient projection cannot identify {names}: within each state the normalization "
                         f"fixes the {'mu-weighted mean' if K > 1 else 'reward'}, so only the features' contrasts "
                         f"between actions at the visited states inform theta, and these are collinear (a feature "
                         f"that does not vary across actions, or features equal up to such a one); use the data's "
                         f"weights (weights=None)")
    Hz = np.linalg.solve(info, design.T @ Vinv)
    H = np.zeros((p, S * K))
    H[:, index] = Hz @ basis.T
    off = np.zeros(S * K) if offset is None else np.asarray(offset, dtype=np.float64).reshape(-1)
    return MinimumDistance(H.reshape(p, S, K), cells, basis, Vz, design, basis.T @ off[index], index, rank)


def distance_statistic(z, cov, design, n: int):
    r"""The overidentification statistic ``J = n min_theta (z - Phi theta)^T V^+ (z - Phi theta)``
    (Hansen's J for minimum distance; chi-square with ``rank(V) - p`` degrees of freedom when the
    linear form holds): ``(J, dof)``."""
    Vinv, rank = pseudo_inverse(cov)
    info = design.T @ Vinv @ design
    theta = np.linalg.solve(info, design.T @ Vinv @ z)
    e = z - design @ theta
    return float(n * e @ Vinv @ e), int(rank - design.shape[1])

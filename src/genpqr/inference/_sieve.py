r"""The targets on non-tabular states: Riesz representers by linear-sieve Riesz regression.

On a fold's training rows ``T`` the representer of each equation is the minimizer of the Riesz
loss ``E_T[alpha^2] - 2 D_T[alpha]`` over ``alpha(s, a) = phi(s, a)^T theta`` (debiased-inference
notes Sec. 5.9, "automatic route"), ``phi(s, a) = e_a (x) psi(s)`` for a state feature map
``psi`` (the ``riesz`` slot: any scikit-learn transformer). ``D_T`` is the derivative of the
target's pipeline solved on the same sieve (LSTD), so ``theta`` is one linear solve:

* a policy value ``E_rho[sigma Q]``, ``Q = r + gamma P sigma Q``: ``theta = A_sigma^{-T} e_sigma`` with
  ``G = E_T[phi phi^T]``, ``C_sigma = E_T[c phi (sigma phi)(S')^T]``, ``A_sigma = G - gamma C_sigma`` and
  ``e_sigma = E_T[(sigma phi)(S)]`` (the dual of LSTD: the representer ``d_sigma``);
* a functional ``F(rbar)`` of the normalized reward whose derivative in ``rbar`` is the measure
  ``R``: ``theta = A_mu^{-T} rho_R``, ``rho_R = sum R (I - mu) phi`` (notes Sec. 5.5 in sieve form,
  the propagation through ``mu`` included by ``A_mu``).

The target's own nuisances are the fold model's: ``pi_hat`` (stage 1), the normalized reward
``rbar`` and ``Q_mu`` with its Bellman residual ``Delta = u - g + gamma (mu Q)(S') - Q`` (stage 2,
whatever its Q model), and policy values by LSTD on the same features (continuation form,
``Q = r + gamma phi^T beta``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import QuantileTransformer, SplineTransformer

from ..data._validation import clone_learner as clone
from ..stage2._features import bind_policy, make_features

__all__ = []

#: Ridge added to the sieve's systems, relative to the mean diagonal of the Gram matrix.
RIDGE = 1e-8


def default_riesz_features(n_knots: int = 5, degree: int = 3):
    """The default state feature map of the Riesz regression: each coordinate mapped to [0, 1] by
    its empirical quantiles, then cubic B-splines (bounded: no extrapolation in the tails, where a
    ratio-type representer would otherwise blow up)."""
    return make_pipeline(QuantileTransformer(n_quantiles=200, output_distribution="uniform"),
                         SplineTransformer(n_knots=n_knots, degree=degree, extrapolation="constant"))


@dataclass
class Parts:
    """One target on one fold: the plug-in value (m,), the uncentred influence contributions at
    the held-out rows ``phi_i = psi(eta) + chi_i`` (n, m), the reward representer (n, m), and two
    of the three terms of ``chi`` (n, m): ``policy``, the first stage's (the reward representer
    centred under ``pi_hat``, with the target's direct dependence on the behaviour) and
    ``kernel``, the Bellman equations' (each representer times its TD residual). The state
    law's term is the rest of ``phi`` (``genpqr.inference._infer``)."""

    value: np.ndarray
    phi: np.ndarray
    alpha: np.ndarray
    policy: np.ndarray = None
    kernel: np.ndarray = None

    def minus(self, other: "Parts") -> "Parts":
        return Parts(self.value - other.value, self.phi - other.phi, self.alpha - other.alpha,
                     self.policy - other.policy, self.kernel - other.kernel)


class SieveFold:
    """A fold's nuisances on non-tabular states and its sieve statistics (module docstring)."""

    def __init__(self, fitted, rows, features):
        self.model = fitted
        self.K = int(fitted.n_actions_)
        self.gamma = float(fitted.gamma_)
        keep = rows.has_next
        self.s, self.a, self.s2, self.c = rows.s[keep], rows.a[keep], rows.s_next[keep], rows.cont[keep]
        self._features = features
        self._cache = {}

    @cached_property
    def features(self):
        fmap = default_riesz_features() if self._features is None else clone(make_features(self._features))
        fmap = bind_policy(fmap, list(self.model.policy_.models))  # "policy": the fold's stage-1 representation
        return fmap.fit(np.vstack([self.s, self.s2[self.c > 0]]))

    psi = cached_property(lambda self: self.state_features(self.s))
    psi2 = cached_property(lambda self: self.state_features(self.s2))
    pi = cached_property(lambda self: self.policy(self.s))
    pi2 = cached_property(lambda self: self.policy(self.s2))
    mu = cached_property(lambda self: self.weights(self.s))
    mu2 = cached_property(lambda self: self.weights(self.s2))

    @cached_property
    def G(self) -> np.ndarray:
        n, m = self.psi.shape
        G = np.zeros((self.K, m, m))
        for k in range(self.K):
            rows_k = self.psi[self.a == k]
            G[k] = rows_k.T @ rows_k / n
        return _block_diag(G)

    @cached_property
    def ridge(self) -> float:
        return RIDGE * max(float(np.trace(self.G)) / self.G.shape[0], 1e-12)

    # ------------------------------------------------------------------ the fold's functions
    def cached(self, name, states, fn):
        """``fn(states)``, computed once per fold and state array (the fold model's predictions
        are the expensive part of the route)."""
        key = (name, id(states))
        if key not in self._cache:
            self._cache[key] = (states, fn(states))  # the array is kept: its id stays unique
        return self._cache[key][1]

    def state_features(self, states) -> np.ndarray:
        def make(x):
            psi = np.asarray(self.features.transform(x), dtype=np.float64)
            return np.column_stack([np.ones(len(psi)), psi])
        return self.cached("psi", states, make)

    def policy(self, states) -> np.ndarray:
        return np.exp(self.log_policy(states))

    def log_policy(self, states) -> np.ndarray:
        return self.cached("u", states, self.model.log_policy)

    def q(self, states) -> np.ndarray:
        """The fold model's ``Q_mu`` (its stage 2), (n, K)."""
        return self.cached("q", states, self.model.q)

    def mu_q(self, states) -> np.ndarray:
        return np.sum(self.weights(states) * self.q(states), axis=1)

    def reward(self, states) -> np.ndarray:
        """``rbar = Q - mu Q + g`` of the fold model (as ``GenPQR.reward``), from the cached ``Q``."""
        def make(x):
            return self.q(x) - self.mu_q(x)[:, None] + self.model.stage2_.g(x)[:, None]
        return self.cached("rbar", states, make)

    def weights(self, states, pi=None) -> np.ndarray:
        """The normalization's (fixed) weights ``mu`` at ``states`` (n, K)."""
        return self.model.normalization_.weights(states, self.K, pi)

    def phi_at(self, psi, actions) -> np.ndarray:
        """``phi(s_i, a_i)`` rows (n, K m)."""
        out = np.zeros((psi.shape[0], self.K, psi.shape[1]))
        out[np.arange(psi.shape[0]), actions] = psi
        return out.reshape(psi.shape[0], -1)

    def averaged(self, psi, weights) -> np.ndarray:
        """``sum_b weights(b) phi(s, b)`` rows (n, K m)."""
        return (weights[:, :, None] * psi[:, None, :]).reshape(psi.shape[0], -1)

    def system(self, sigma_next, gamma) -> np.ndarray:
        """``A_sigma = G - gamma C_sigma`` (+ ridge)."""
        C = self.phi_at(self.psi, self.a).T @ (self.c[:, None] * self.averaged(self.psi2, sigma_next)) / len(self.s)
        return self.G - gamma * C + self.ridge * np.eye(self.G.shape[0])

    def representer(self, A, vector) -> np.ndarray:
        """``theta = A^{-T} v`` as (K, m) (``alpha(s, b) = psi(s) . theta[b]``); ``vector`` (p,) or (p, j)."""
        theta = np.linalg.solve(A.T, vector)
        return theta.reshape((self.K, -1) + theta.shape[1:])

    def lstd(self, reward, reward_next, sigma, sigma_next, gamma):
        """Continuation-form LSTD of ``Q = r + gamma P sigma Q``: returns ``(A, beta)``;
        ``Q(s, b) = r(s, b) + gamma psi(s) . beta[b]``."""
        A = self.system(sigma_next, gamma)
        target = self.c * np.sum(sigma_next * reward_next, axis=1)
        beta = np.linalg.solve(A, self.phi_at(self.psi, self.a).T @ target / len(self.s))
        return A, beta.reshape(self.K, -1)

    def normalization_residual(self, held):
        """``Delta_i = u - g + gamma c (mu Q)(S') - Q`` of the fold model at held-out rows."""
        model, rows = self.model, np.arange(len(held.s))
        q = self.q(held.s)
        u = self.log_policy(held.s)
        g = model.stage2_.g(held.s)
        cont = np.where(held.cont > 0, self.mu_q(held.s_next), 0.0)
        return np.where(held.has_next, u[rows, held.a] - g + self.gamma * held.cont * cont - q[rows, held.a], 0.0)


def _block_diag(blocks) -> np.ndarray:
    K, m, _ = blocks.shape
    out = np.zeros((K * m, K * m))
    for k in range(K):
        out[k * m:(k + 1) * m, k * m:(k + 1) * m] = blocks[k]
    return out


def centred(alpha_rows, pi_rows, a) -> np.ndarray:
    """``alpha(s_i, a_i) - sum_b pi(b|s_i) alpha(s_i, b)`` from (n, K[, j]) tables."""
    idx = np.arange(alpha_rows.shape[0])
    return alpha_rows[idx, a] - np.einsum("nb...,nb->n...", alpha_rows, pi_rows)


def table(psi, theta) -> np.ndarray:
    """``alpha(s_i, b)`` (n, K[, j]) from ``theta`` (K, m[, j])."""
    return np.einsum("nm,km...->nk...", psi, theta)


# ============================================================================ targets
def policy_value_parts(fold: SieveFold, held, sigma, reward: str, gamma: float) -> Parts:
    r"""``E_rho[V^sigma]`` under ``u`` (notes Example 1a) or ``rbar`` at ``gamma`` (Example 2):
    ``phi_i = V(s_i) + alpha°_i + lambda_i delta_i (+ alpha_mu Delta_i)``; ``sigma=None``: the
    behaviour (its direct term ``lambda q`` joins the reward representer, notes Sec. 5.2)."""
    sig_t, sig_n = (fold.pi, fold.pi2) if sigma is None else (sigma(fold.s), sigma(fold.s2))
    rew = fold.log_policy if reward == "log_policy" else fold.reward
    A, beta = fold.lstd(rew(fold.s), rew(fold.s2), sig_t, sig_n, gamma)
    v_t = np.sum(sig_t * (rew(fold.s) + gamma * table(fold.psi, beta)), axis=1)
    if held is None:
        return Parts(np.array([v_t.mean()]), None, None)
    lam = fold.representer(A, fold.averaged(fold.psi, sig_t).mean(axis=0))
    psi_h, pi_h = fold.state_features(held.s), fold.policy(held.s)
    sig_h = pi_h if sigma is None else sigma(held.s)
    q_h = rew(held.s) + gamma * table(psi_h, beta)
    lam_h = table(psi_h, lam)
    idx = np.arange(len(held.s))
    psi_n = fold.state_features(held.s_next)
    sig_next_h = fold.policy(held.s_next) if sigma is None else sigma(held.s_next)
    q_next = rew(held.s_next) + gamma * table(psi_n, beta)
    delta = np.where(held.has_next, rew(held.s)[idx, held.a] + gamma * held.cont * np.sum(sig_next_h * q_next, axis=1)
                     - q_h[idx, held.a], 0.0)
    kernel = lam_h[idx, held.a] * delta
    phi = np.sum(sig_h * q_h, axis=1) + kernel
    alpha_h = lam_h * (1.0 + q_h) if sigma is None else lam_h  # the behaviour's direct term: d_pi q
    if reward == "log_policy":
        policy = centred(alpha_h, pi_h, held.a)
        return Parts(np.array([v_t.mean()]), (phi + policy)[:, None], alpha_h[idx, held.a][:, None],
                     policy[:, None], kernel[:, None])
    # the downstream functional's measure on rbar, carried back through the normalization
    lam_t = table(fold.psi, lam)[np.arange(len(fold.s)), fold.a]
    centre_t = fold.averaged(fold.psi, sig_t - fold.mu)
    centre_n = fold.averaged(fold.psi2, sig_n - fold.mu2)
    rho_R = centre_t.mean(axis=0) + gamma * ((lam_t * fold.c)[:, None] * centre_n).mean(axis=0)
    return _through_normalization(fold, held, rho_R[:, None], np.array([v_t.mean()]), phi[:, None],
                                  (alpha_h - lam_h if sigma is None else 0.0), kernel=kernel[:, None])


def _through_normalization(fold, held, rho_R, value, phi, direct, policy=0.0, kernel=0.0) -> Parts:
    """Add the normalization equation's terms ``alpha° + alpha Delta`` with ``alpha = phi^T A_mu^{-T} rho_R``
    (``rho_R`` (p, j)) and any direct policy term ``direct`` (n, K) to the reward representer.
    ``policy``, ``kernel``: the first-stage and Bellman terms already in ``phi`` (n, j)."""
    A_mu = fold.system(fold.mu2, fold.gamma)
    theta = fold.representer(A_mu, rho_R)  # (K, m, j)
    psi_h, pi_h = fold.state_features(held.s), fold.policy(held.s)
    alpha = table(psi_h, theta)  # (n, K, j): the normalization equation's representer
    delta = fold.normalization_residual(held)
    idx = np.arange(len(held.s))
    bellman = alpha[idx, held.a] * delta[:, None]
    if not np.isscalar(direct):  # the policy's direct term joins the reward representer, not the equation's
        alpha = alpha + direct[:, :, None]
    first = centred(alpha, pi_h, held.a)
    return Parts(value, phi + bellman + first, alpha[idx, held.a], policy + first + np.zeros_like(first),
                 kernel + bellman)


def _reward_value(fold, kind, spec, r_t) -> np.ndarray:
    """The plug-in of a reward functional (no representer: the full-sample answer)."""
    idx = np.arange(len(fold.s))
    if kind == "data_mean":
        return np.array([np.mean(r_t if spec is None else spec(fold.s)[idx, fold.a] * r_t)])
    if kind == "measure":
        states, probs = spec
        return np.array([np.mean(np.sum(probs * fold.reward(states), axis=1))])
    features, offset, weights = spec
    x = features(fold.s)[idx, fold.a]
    w = np.ones(len(idx)) if weights is None else weights(fold.s)[idx, fold.a]
    y = r_t - (0.0 if offset is None else offset(fold.s)[idx, fold.a])
    return np.linalg.solve((w[:, None] * x).T @ x, x.T @ (w * y))


def reward_parts(fold: SieveFold, held, kind: str, spec) -> Parts:
    r"""Linear functionals of ``rbar`` (notes Sec. 5.8): ``data_mean`` (``spec``: weights callable
    or None), ``measure`` (``spec``: (states, action weights)), ``projection`` (``spec``:
    (features callable states -> (n, K, p), offset and weights callables or None))."""
    n = len(fold.s)
    idx_t = np.arange(n)
    r_t = fold.reward(fold.s)[idx_t, fold.a]
    if held is None:
        return Parts(_reward_value(fold, kind, spec, r_t), None, None)
    idx_h = np.arange(len(held.s))
    r_h = fold.reward(held.s)[idx_h, held.a]
    cell_t = fold.phi_at(fold.psi, fold.a) - fold.averaged(fold.psi, fold.mu)  # (e_a - mu) (x) psi at the rows
    if kind == "data_mean":
        w_t = np.ones(n) if spec is None else spec(fold.s)[idx_t, fold.a]
        w_h = np.ones(len(held.s)) if spec is None else spec(held.s)[idx_h, held.a]
        rho_R = (w_t[:, None] * cell_t).mean(axis=0)[:, None]
        # w r at the row: the state's mean under pi_hat (the state law's term) and the rest (the first stage's)
        w_all = np.ones((len(held.s), fold.K)) if spec is None else spec(held.s)
        direct = centred(w_all * fold.reward(held.s), fold.policy(held.s), held.a)[:, None]
        return _through_normalization(fold, held, rho_R, np.array([np.mean(w_t * r_t)]), (w_h * r_h)[:, None], 0.0,
                                      policy=direct)
    if kind == "measure":
        states, probs = spec
        mu_z = fold.weights(states)
        rbar_z = fold.reward(states)
        rho_R = fold.averaged(fold.state_features(states), probs - mu_z * probs.sum(axis=1, keepdims=True)).mean(axis=0)
        value = np.array([np.mean(np.sum(probs * rbar_z, axis=1))])
        return _through_normalization(fold, held, rho_R[:, None], value, np.repeat(value[None], len(held.s), 0), 0.0)
    features, offset, weights = spec
    x_t = features(fold.s)[idx_t, fold.a]  # (n, p)
    x_h = features(held.s)[idx_h, held.a]
    off_t = 0.0 if offset is None else offset(fold.s)[idx_t, fold.a]
    off_h = 0.0 if offset is None else offset(held.s)[idx_h, held.a]
    w_t = np.ones(n) if weights is None else weights(fold.s)[idx_t, fold.a]
    w_h = np.ones(len(held.s)) if weights is None else weights(held.s)[idx_h, held.a]
    Gx = (w_t[:, None] * x_t).T @ x_t / n
    Ginv = np.linalg.inv(Gx)
    theta = Ginv @ (x_t.T @ (w_t * (r_t - off_t))) / n
    e_h = r_h - off_h - x_h @ theta
    phi = theta[None] + (x_h @ Ginv.T) * (w_h * e_h)[:, None]
    rho_R = cell_t.T @ ((w_t[:, None] * x_t) @ Ginv.T) / n  # (p_sieve, p)
    # G^{-1} x w e at the row: its state's mean under pi_hat (the state law's term) and the rest
    x_all = features(held.s)  # (n, K, p)
    w_all = np.ones((len(held.s), fold.K)) if weights is None else weights(held.s)
    e_all = fold.reward(held.s) - (0.0 if offset is None else offset(held.s)) - x_all @ theta
    direct = centred((x_all @ Ginv.T) * (w_all * e_all)[:, :, None], fold.policy(held.s), held.a)
    return _through_normalization(fold, held, rho_R, theta, phi, 0.0, policy=direct)

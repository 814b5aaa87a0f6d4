r"""Econometric pieces on top of GenPQR for structural dynamic discrete choice (DDC).

GenPQR recovers, nonparametrically, the normalized reward ``r`` (S, K) and the continuation
value ``v = P V`` (S, K) of the normalized reward (paper Sec. 2-4: ``v = -P mu Q``, and the
soft-optimal policy is ``pi = softmax(r + gamma v)``). An economist usually wants a few
*structural parameters* ``theta`` of a reward that is linear in known features,
``r_theta(s, a) = features(s, a) @ theta + offset(s, a)``. This module turns GenPQR's output
into ``theta``:

* :func:`project_reward` -- weighted least squares of the recovered reward table on the
  features (a minimum-distance estimator);
* :func:`fit_structural` -- the conditional-choice-probability (CCP) step: hold GenPQR's
  ``v`` fixed and maximize the conditional-choice log-likelihood
  ``sum_i log softmax_a(r_theta(s_i, a) + gamma v(s_i, a))[a_i]`` (a concave logit
  problem, solved by Newton's method with the analytic Hessian);
* :func:`fit_npl` -- Hotz and Miller's (1993) pseudo-likelihood and its iteration, the
  nested pseudo-likelihood (NPL) of Aguirregabiria and Mira (2002). Its policy evaluation
  is GenPQR's exact stage 2 under the *behaviour* normalization ``mu = pi``,
  ``g = pi r_theta``, which makes ``v`` affine in ``theta``.

:class:`StructuralStep` wraps them around a fitted :class:`~genpqr.GenPQR`.

Why GenPQR's ``v`` is the right continuation value. For any reward ``r`` with soft-optimal
policy ``pi`` and soft value ``V = logsumexp(r + gamma P V)``, ``log pi = r + gamma P V - V``;
averaging with ``mu`` gives ``V = g - mu log pi + gamma P_mu V`` when ``mu r = g``. So
``-W = -(I - gamma P_mu)^{-1}(mu u - g)`` (GenPQR's exact stage 2) is the soft value of the
normalized reward and ``v = -P W = P V`` (for the anchor normalization this is Arcidiacono
and Miller's (2011) renewal representation; for Rust's model the anchor is the renewal
action "replace"). Consequently, with ``v`` held fixed the parametric reward must be
written in the same normalization, ``mu r_theta = g`` for every ``theta``;
:func:`normalize_features` maps any linear parametrization to it (the shaping potential is
affine in ``theta``), and :class:`StructuralStep` does so when needed. For a policy ``pi``
that is *not* soft-optimal (a first-stage estimate, an NPL iterate) the same solve with
``mu = pi`` and ``g = pi r`` returns ``P V^pi_r``, the entropy-regularized value of ``pi``
under ``r``: Hotz-Miller's inversion, and Aguirregabiria-Mira's policy-iteration map.

The normalization is a free choice for the fixed-``v`` step, and it matters in finite
samples. Under an anchor action, ``v`` is built from ``log pi_hat(anchor|s)`` alone (the
renewal estimator of Arcidiacono-Miller); under the fixed weights ``mu = pi_hat`` (``g = 0``)
it is built from ``sum_a pi_hat log pi_hat``, and the fixed-``v`` step is *exactly*
Hotz-Miller's pseudo-likelihood estimator (``method="pml"``; the ``mu``-weighted shaping
terms are state-only and cancel in the logit). On Rust's model, where replacement is almost
never observed at low mileage, the second is far more accurate (docs/engine_replacement.md).

Transitions with a structure: :func:`increment_kernel` (and the callable
:class:`IncrementKernel` for ``GenPQR(transition_model=...)``) estimates a kernel in which the
state moves up by an increment whose distribution does not depend on the state (Rust's
mileage), pooling all rows.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.special import log_softmax
from sklearn.base import BaseEstimator

from .. import tabular
from .._checks import as_float_array, check_gamma, check_state_indices, plain
from ..data import Transitions
from ..exceptions import ConvergenceWarning, NotFittedError
from ..normalization import Normalization

__all__ = [
    "increment_probabilities",
    "increment_kernel",
    "kernel_from_increments",
    "IncrementKernel",
    "choice_counts",
    "normalize_features",
    "ProjectionResult",
    "project_reward",
    "StructuralResult",
    "conditional_loglik",
    "fit_structural",
    "fit_npl",
    "StructuralStep",
]


# ============================================================================ transitions
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
    n_used = int(exact.sum() + censored.sum())
    if n_used == 0:
        raise ValueError("no row has an observed next state to count an increment from")
    exact_counts = np.bincount(inc[exact], minlength=J + 1).astype(np.float64)
    censor_counts = np.bincount(inc[censored], minlength=J + 1).astype(np.float64)  # index c: increment >= c
    return _censored_increment_mle(exact_counts, censor_counts), n_used


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


def kernel_from_increments(probs, n_states: int, n_actions: int, reset=None) -> tabular.TransitionKernel:
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
    return tabular.TransitionKernel(matrix, S, K)


def increment_kernel(transitions: Transitions, n_states: int, n_actions: int, max_increment: int,
                     reset_action=None) -> tabular.TransitionKernel:
    """Structured transition estimator: the increment distribution does not depend on the
    state (Rust 1987). Pooled increment frequencies (:func:`increment_probabilities`) turned
    into a kernel (:func:`kernel_from_increments`). Usable as
    ``GenPQR(transition_model=IncrementKernel(max_increment, reset_action))``."""
    probs, _ = increment_probabilities(transitions, n_states, max_increment, reset_action)
    return kernel_from_increments(probs, n_states, n_actions, _reset_code(transitions, reset_action, n_actions))


@dataclass(frozen=True)
class IncrementKernel:
    """Callable ``(transitions, n_states, n_actions) -> kernel`` for ``GenPQR(transition_model=...)``,
    see :func:`increment_kernel`."""

    max_increment: int
    reset_action: object = None

    def __call__(self, transitions, n_states, n_actions):
        return increment_kernel(transitions, n_states, n_actions, self.max_increment, self.reset_action)


# ============================================================================ shared checks
def choice_counts(transitions: Transitions, n_states: int) -> np.ndarray:
    """Visits per (state, action code), shape (S, K): the sufficient statistic of the
    conditional-choice likelihood. Every observed choice counts, including an episode's last
    choice whose next state is unobserved (``next_observed`` False)."""
    s = check_state_indices(transitions.states, n_states, "states")
    K = transitions.n_actions
    return np.bincount(s * K + transitions.actions, minlength=n_states * K).reshape(n_states, K).astype(np.float64)


def _check_features(features, shape=None) -> np.ndarray:
    X = as_float_array(features, "features")
    if X.ndim == 2:
        X = X[:, :, None]
    if X.ndim != 3:
        raise ValueError(f"features must have shape (S, K, p), got {X.shape}")
    if shape is not None and X.shape[:2] != tuple(shape):
        raise ValueError(f"features must have shape (S, K, p) = ({shape[0]}, {shape[1]}, p), got {X.shape}")
    return X


def _check_table(x, shape, name) -> np.ndarray:
    if hasattr(x, "to_numpy"):
        x = x.to_numpy()
    arr = as_float_array(x, name, ndim=2)
    if arr.shape != tuple(shape):
        raise ValueError(f"{name} must have shape (S, K) = {tuple(shape)}, got {arr.shape}")
    return arr


def _check_weights(weights, shape, name="weights") -> np.ndarray:
    w = _check_table(weights, shape, name)
    if w.min() < 0:
        raise ValueError(f"{name} must be non-negative, got a minimum of {w.min():.3g}")
    if w.sum() <= 0:
        raise ValueError(f"{name} must have a positive sum")
    return w


def _is_normalized(features, offset, mu, g, atol=1e-9) -> bool:
    """``mu r_theta = g`` for every theta: ``mu @ features = 0`` and ``mu @ offset = g``."""
    mu_x = np.einsum("sa,sap->sp", mu, features)
    gap = np.sum(mu * offset, axis=1) - g
    return (np.max(np.abs(mu_x), initial=0.0) <= atol
            and np.max(np.abs(gap), initial=0.0) <= atol * max(1.0, float(np.max(np.abs(g), initial=0.0))))


def _in_normalization(features, offset, mu, g, kernel, gamma, solver="auto"):
    """The features/offset themselves if they satisfy ``mu r = g``, else their normalized
    representative (:func:`normalize_features`)."""
    if _is_normalized(features, offset, mu, g):
        return features, offset
    return normalize_features(features, kernel, gamma, mu, g, offset=offset, solver=solver)


def normalize_features(features, kernel, gamma, mu, g=0.0, *, offset=None, solver: str = "auto"):
    r"""Features of the normalized representative of ``r_theta = features @ theta + offset``.

    By the shaping lemma the representative of ``r`` with ``mu r = g`` is
    ``r + c - gamma P c`` with ``(I - gamma P_mu) c = g - mu r`` (as
    :func:`genpqr.tabular.normalized_reward`); ``c`` is affine in ``theta``, so the
    normalized reward is ``features_mu @ theta + offset_mu`` with, per feature ``j``,
    ``c_j = -(I - gamma P_mu)^{-1} mu x_j`` and ``x_j + c_j - gamma P c_j``. Lets a
    structural model written in any parametrization (e.g. Rust's ``u(x, replace) = -RC``)
    be combined with GenPQR's ``v`` under any fixed-weights normalization.

    Parameters
    ----------
    features : ndarray of shape (S, K, p)
    kernel : transition kernel
    gamma : float
    mu : ndarray of shape (S, K)
        Normalization weights (e.g. ``GenPQR.stage2_.recovery.mu``).
    g : float or ndarray of shape (S,)
    offset : ndarray of shape (S, K), optional

    Returns
    -------
    features_mu : ndarray of shape (S, K, p)
        ``mu @ features_mu = 0``.
    offset_mu : ndarray of shape (S, K)
        ``mu @ offset_mu = g``.
    """
    gamma = check_gamma(gamma)
    X = _check_features(features)
    shape = X.shape[:2]
    kernel = tabular.as_kernel(kernel, shape[1])
    mu = _check_table(mu, shape, "mu")
    off = np.zeros(shape) if offset is None else _check_table(offset, shape, "offset")
    g = np.broadcast_to(np.asarray(g, dtype=np.float64), (shape[0],))
    P_mu = kernel.under(mu)

    def shape_by(b):
        c, _ = tabular.solve_linear_bellman(P_mu, b, gamma, solver=solver, tol=1e-12)
        return c[:, None] - gamma * kernel.expect(c)

    X_mu = np.stack([X[:, :, j] + shape_by(-np.sum(mu * X[:, :, j], axis=1)) for j in range(X.shape[2])], axis=2)
    off_mu = off + shape_by(g - np.sum(mu * off, axis=1))
    return X_mu, off_mu


# ============================================================================ projection
@dataclass(frozen=True)
class ProjectionResult:
    """Weighted least-squares projection of a reward table on features.

    Attributes
    ----------
    theta : ndarray of shape (p,)
    fitted : ndarray of shape (S, K)
        ``features @ theta``.
    weighted_r2 : float
        Share of the weighted variance (around zero) of the table that the features explain.
    """

    theta: np.ndarray
    fitted: np.ndarray
    weighted_r2: float


def project_reward(reward_table, features, weights=None, *, offset=None) -> ProjectionResult:
    r"""``theta = argmin sum_{s,a} w(s,a) (r(s,a) - offset(s,a) - features(s,a) @ theta)^2``.

    A minimum-distance reading of structural parameters off GenPQR's nonparametric reward.
    With the exact reward it returns the true ``theta`` (if the model is linear in the
    features); with an estimated one its efficiency depends on the weights: visit counts
    weigh the table where the data are, and ``n(s) pi(a|s) pi(a'|s)``-type weights (the
    inverse variance of a log-odds) down-weigh the noisy log-policy of rare actions.

    Parameters
    ----------
    reward_table : ndarray or DataFrame of shape (S, K)
        E.g. ``GenPQR.reward_table()`` or ``model.stage2_.recovery.reward``.
    features : ndarray of shape (S, K, p)
    weights : ndarray of shape (S, K), optional
        Default: equal weights.
    offset : ndarray of shape (S, K), optional
        Known part of the reward.
    """
    r = _check_table(reward_table, np.shape(reward_table)[:2], "reward_table")
    X = _check_features(features, r.shape)
    w = np.ones(r.shape) if weights is None else _check_weights(weights, r.shape)
    y = r - (0.0 if offset is None else _check_table(offset, r.shape, "offset"))
    sw = np.sqrt(w).reshape(-1)
    A = X.reshape(-1, X.shape[2]) * sw[:, None]
    b = y.reshape(-1) * sw
    theta, *_ = np.linalg.lstsq(A, b, rcond=None)
    fitted = X @ theta
    total = float(np.sum(w * y ** 2))
    r2 = 1.0 - float(np.sum(w * (y - fitted) ** 2)) / total if total > 0 else 1.0
    return ProjectionResult(theta, fitted, r2)


# ============================================================================ conditional likelihood
def conditional_loglik(theta, features, index, counts, *, hessian: bool = False):
    r"""Conditional-choice log-likelihood of the logit ``pi = softmax(features @ theta + index)``.

    ``L = sum_{s,a} n(s,a) log pi(a|s)``, gradient ``sum n(s,a) (x(s,a) - E_pi x(s,.))``
    and Hessian ``-sum_s n(s) Cov_pi(x(s,.))`` (negative semi-definite: L is concave).

    Parameters
    ----------
    theta : ndarray of shape (p,)
    features : ndarray of shape (S, K, p)
    index : ndarray of shape (S, K)
        The fixed part of the choice index, e.g. ``offset + gamma v``.
    counts : ndarray of shape (S, K)

    Returns
    -------
    loglik : float
    grad : ndarray of shape (p,)
    hess : ndarray of shape (p, p), only with ``hessian=True``
    """
    S, K, p = features.shape
    z = features @ theta + index
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    total = e.sum(axis=1, keepdims=True)
    log_pi = z - np.log(total)
    pi = e / total
    loglik = float(np.sum(counts * log_pi))
    n_s = counts.sum(axis=1)
    Xf = features.reshape(S * K, p)
    mean_x = (pi[:, :, None] * features).sum(axis=1)
    grad = counts.reshape(-1) @ Xf - n_s @ mean_x
    if not hessian:
        return loglik, grad
    second = (Xf * (n_s[:, None] * pi).reshape(-1, 1)).T @ Xf
    hess = -(second - (mean_x * n_s[:, None]).T @ mean_x)
    return loglik, grad, hess


@dataclass(frozen=True)
class StructuralResult:
    """Result of :func:`fit_structural` / :func:`fit_npl`.

    Attributes
    ----------
    theta : ndarray of shape (p,)
    cov : ndarray of shape (p, p)
        Inverse negative Hessian of the log-likelihood at ``theta``, **conditional on v**
        (it ignores the first-stage error in ``v``; a covariance only when the weights are
        counts). For NPL at convergence, see the notes of :func:`fit_npl`.
    loglik : float
    n_iter : int
        Newton iterations (:func:`fit_structural`) or NPL iterations (:func:`fit_npl`).
    converged : bool
    continuation : ndarray of shape (S, K)
        The ``v`` of the last likelihood maximization.
    policy : ndarray of shape (S, K)
        ``softmax(r_theta + gamma v)``.
    history : list of ndarray
        ``theta`` after each NPL iteration (one entry for :func:`fit_structural`).
    seconds : float
    """

    theta: np.ndarray
    cov: np.ndarray
    loglik: float
    n_iter: int
    converged: bool
    continuation: np.ndarray = field(repr=False)
    policy: np.ndarray = field(repr=False)
    history: list = field(default_factory=list, repr=False)
    seconds: float = 0.0

    @property
    def se(self) -> np.ndarray:
        """Standard errors ``sqrt(diag(cov))``, shape (p,)."""
        return np.sqrt(np.clip(np.diag(self.cov), 0.0, None))


def _inverse_information(hess):
    try:
        return np.linalg.inv(-hess)
    except np.linalg.LinAlgError:
        return np.full(hess.shape, np.nan)


def _maximize_logit(X, index, counts, theta0, tol, max_iter=100):
    """Newton's method with step halving on the concave conditional logit likelihood.

    The per-row log-likelihood is concave with an analytic Hessian, so damped Newton
    converges globally and quadratically near the optimum; stops when the Newton decrement
    ``g' (-H)^{-1} g`` per row is below ``tol**2`` or the Newton step is at rounding level
    (a scipy trust region would spend its time on safeguards a concave problem does not need).
    """
    scale = 1.0 / counts.sum()
    theta = np.array(theta0, dtype=np.float64)
    ll, g, H = conditional_loglik(theta, X, index, counts, hessian=True)
    converged, it = False, 0
    for it in range(1, max_iter + 1):
        direction = _solve_psd(-H, g)
        if (float(g @ direction) * scale <= tol ** 2
                or np.max(np.abs(direction)) <= 1e-13 * max(1.0, float(np.max(np.abs(theta))))):
            converged = True
            break
        step = 1.0
        for _ in range(50):
            trial = theta + step * direction
            ll_t, g_t, H_t = conditional_loglik(trial, X, index, counts, hessian=True)
            if ll_t >= ll - 1e-12 * abs(ll):
                break
            step *= 0.5
        theta, ll, g, H = trial, ll_t, g_t, H_t
    return theta, ll, H, it, converged


def _solve_psd(A, b):
    """``A^{-1} b`` for a positive semi-definite ``A`` (least squares if singular)."""
    try:
        return np.linalg.solve(A, b)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(A, b, rcond=None)[0]


def fit_structural(continuation, features, counts, gamma, *, offset=None, theta0=None,
                   tol: float = 1e-8) -> StructuralResult:
    r"""CCP step with ``v`` fixed: ``max_theta sum n(s,a) log softmax(r_theta + gamma v)(a|s)``.

    ``r_theta = features @ theta + offset``; ``v`` (GenPQR's continuation value) is held
    fixed. The problem is a concave conditional logit; Newton's method with the analytic
    Hessian and step halving solves it in a handful of iterations.

    Parameters
    ----------
    continuation : ndarray of shape (S, K)
        ``v = P V`` of the normalized reward (``GenPQR.continuation``).
    features : ndarray of shape (S, K, p)
        Together with ``offset``, must satisfy the normalization GenPQR used
        (``mu @ features = 0``, ``mu @ offset = g``; see the module notes); map any other
        parametrization with :func:`normalize_features` (:class:`StructuralStep` does).
    counts : ndarray of shape (S, K)
        Visits per (state, action) (:func:`choice_counts`), or any non-negative weights
        (e.g. population frequencies).
    gamma : float
    offset : ndarray of shape (S, K), optional
        Known part of the reward (default 0).
    theta0 : ndarray of shape (p,), optional
        Start (default 0).
    tol : float
        Stop when the per-row Newton decrement ``g' (-H)^{-1} g / sum(n)`` is below ``tol**2``.
    """
    start = time.perf_counter()
    gamma = check_gamma(gamma)
    v = as_float_array(continuation, "continuation", ndim=2)
    X = _check_features(features, v.shape)
    n = _check_weights(counts, v.shape, "counts")
    off = np.zeros(v.shape) if offset is None else _check_table(offset, v.shape, "offset")
    th0 = np.zeros(X.shape[2]) if theta0 is None else as_float_array(theta0, "theta0", ndim=1)
    index = off + gamma * v
    theta, ll, H, nit, converged = _maximize_logit(X, index, n, th0, tol)
    if not converged:
        warnings.warn(f"the structural step did not converge in {nit} Newton iterations (is the conditional "
                      "logit separable, e.g. an action never observed?)", ConvergenceWarning, stacklevel=2)
    policy = np.exp(log_softmax(X @ theta + index, axis=1))
    return StructuralResult(theta, _inverse_information(H), ll, nit, converged, v, policy, [theta.copy()],
                            time.perf_counter() - start)


def _evaluation_terms(policy, X, off, kernel, gamma, solver, relative=False):
    r"""AM's policy evaluation as GenPQR's solve: ``v(theta) = v_off + sum_j theta_j v_j``.

    With the behaviour normalization ``mu = pi`` and ``g = pi r``, GenPQR's exact stage 2
    (:func:`genpqr.tabular.recover_reward`, ``u = log pi``) solves
    ``(I - gamma P_pi) W = pi u - g`` and returns ``v = -P W = P V^pi_r``, the
    entropy-regularized value of ``pi`` under ``r`` -- affine in ``g``, hence in ``theta``.
    The ``p + 1`` right-hand sides (``g = pi offset`` and ``g = pi x_j``) share one matrix:
    for small ``S`` one dense solve in relative-value form
    (:func:`genpqr.structural.estimation.relative_solve`: the same ``W`` as ``recover_reward``, the tests
    check the two agree, with differences that stay accurate as ``gamma -> 1``), else one
    :func:`genpqr.tabular.solve_linear_bellman` per column.
    """
    if not np.all(policy > 0):
        s = int(np.argmin(policy.min(axis=1)))
        raise ValueError(f"the policy must be positive everywhere (log pi enters the evaluation), but row {s} has "
                         f"{policy[s].tolist()}; clip the first-stage probabilities (GenPQR's clip)")
    S, K, p = X.shape
    entropy_term = np.sum(policy * np.log(policy), axis=1)
    B = np.column_stack([entropy_term - np.sum(policy * off, axis=1)]
                        + [-np.sum(policy * X[:, :, j], axis=1) for j in range(p)])
    P_pi = kernel.under(policy)
    if S <= tabular.DIRECT_MAX_STATES:
        from .estimation import relative_solve

        # solved for the relative value and the gain: accurate differences as gamma -> 1 (a plain dense solve
        # loses them at gamma = 0.9999, which slowed NPL to linear convergence); relative=True drops the constant
        # k / (1 - gamma) per column, which cancels in every choice probability (and spoils the logit's precision)
        W = relative_solve(P_pi, B, gamma, add_constant=not relative)
    else:
        W = np.column_stack([tabular.solve_linear_bellman(P_pi, B[:, j], gamma, solver=solver)[0]
                             for j in range(p + 1)])
    PW = np.asarray(kernel.matrix @ W).reshape(S, K, p + 1)
    return -PW[:, :, 0], -PW[:, :, 1:]


def fit_npl(policy, features, counts, kernel, gamma, *, offset=None, theta0=None, max_iter: int = 50,
            tol: float = 1e-8, mapping: str = "policy-evaluation", normalization: Normalization | None = None,
            solver: str = "auto") -> StructuralResult:
    r"""Nested pseudo-likelihood (Aguirregabiria and Mira 2002) on GenPQR's exact solve.

    Start from first-stage choice probabilities ``pi_0`` (GenPQR's ``exp(u)``) and iterate,
    for ``k = 1, 2, ...``:

    1. policy evaluation of ``pi_{k-1}`` under ``r_theta``, affine in ``theta``:
       ``v_k(theta) = P V^{pi_{k-1}}_{r_theta}`` -- GenPQR's exact stage 2 with
       ``u = log pi_{k-1}`` and the behaviour normalization ``mu = pi_{k-1}``,
       ``g = pi_{k-1} r_theta`` (see :func:`_evaluation_terms`);
    2. ``theta_k = argmax sum n(s,a) log softmax(r_theta + gamma v_k(theta))(a|s)`` -- a
       concave logit in ``theta`` with features ``x + gamma P V^pi_x``;
    3. ``pi_k = softmax(r_theta_k + gamma v_k(theta_k))``;

    until ``max |theta_k - theta_{k-1}| <= tol * max(1, max |theta_k|)``. ``k = 1`` is the
    Hotz-Miller (1993) two-step pseudo-likelihood estimator. In single-agent models the
    policy-iteration map has a zero Jacobian at the fixed point, so the iterations converge
    fast and the fixed point is the maximum likelihood estimator for the given kernel (what
    NFXP computes); ``cov`` at convergence is then the MLE's: the inverse outer product of the
    full likelihood's scores (derivative through the fixed point, as NFXP's; see
    :mod:`genpqr.structural.estimation`), not the pseudo-likelihood's Hessian, which is 15-28% too small
    on Rust's data. For one step (PML) or ``mapping="normalized"`` it is the
    pseudo-likelihood's inverse Hessian, conditional on the first stage. The
    reward needs no normalization here (any parametrization of ``r_theta`` works).

    ``mapping="normalized"`` is the variant that holds GenPQR's *normalized* ``v`` fixed in
    step 2 (:func:`fit_structural`) and recomputes it from ``u = log pi_k`` under
    ``normalization``: its fixed points are also soft-optimal for ``r_theta``, but the map
    lacks the zero-Jacobian property -- it converges linearly and slowly (about 160
    iterations on Rust's model) to a consistent estimator that is not the MLE.

    Parameters
    ----------
    policy : ndarray of shape (S, K)
        ``pi_0``, strictly positive.
    features, counts, gamma, offset, theta0 : see :func:`fit_structural`
    kernel : transition kernel (see :func:`genpqr.tabular.as_kernel`)
    max_iter : int
        Maximum NPL iterations (``1``: the two-step PML estimator).
    tol : float
    mapping : {"policy-evaluation", "normalized"}
    normalization : Normalization, optional
        Needed by ``mapping="normalized"``: the one GenPQR used, actions as codes
        (``GenPQR.normalization_``); features that do not satisfy it are normalized
        (:func:`normalize_features`).
    solver : str
        Linear solver of :func:`genpqr.tabular.recover_reward`.
    """
    start = time.perf_counter()
    gamma = check_gamma(gamma)
    pi = as_float_array(policy, "policy", ndim=2)
    X = _check_features(features, pi.shape)
    n = _check_weights(counts, pi.shape, "counts")
    off = np.zeros(pi.shape) if offset is None else _check_table(offset, pi.shape, "offset")
    kernel = tabular.as_kernel(kernel, pi.shape[1])
    theta = np.zeros(X.shape[2]) if theta0 is None else as_float_array(theta0, "theta0", ndim=1)
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be a positive number of NPL iterations, got {max_iter!r}")
    if mapping == "normalized":
        if not isinstance(normalization, Normalization):
            raise TypeError("mapping='normalized' needs the normalization GenPQR used (a genpqr Normalization), got "
                            f"{type(normalization).__name__}")
        if normalization.mu.needs_policy:
            raise ValueError("mapping='normalized' needs a normalization whose mu does not depend on the policy")
        mu, g = normalization.resolve_tabular(pi, kernel.expect, gamma)
        X, off = _in_normalization(X, off, mu, g, kernel, gamma, solver)
        evaluate = (lambda p: (tabular.recover_reward(np.log(p), kernel, gamma, normalization,
                                                      solver=solver).continuation, np.zeros(X.shape)))
    elif mapping == "policy-evaluation":
        evaluate = (lambda p: _evaluation_terms(p, X, off, kernel, gamma, solver, relative=True))
    else:
        raise ValueError(f"mapping must be 'policy-evaluation' or 'normalized', got {mapping!r}")
    history, converged, step = [], False, np.inf
    for it in range(1, int(max_iter) + 1):
        evaluated = pi
        v_base, VX = evaluate(pi)
        Xt = X + gamma * VX
        index = off + gamma * v_base
        new, ll, H, _, _ = _maximize_logit(Xt, index, n, theta, tol * 1e-2)
        step = float(np.max(np.abs(new - theta)))
        theta = new
        history.append(theta.copy())
        pi = np.exp(log_softmax(Xt @ theta + index, axis=1))
        if it > 1 and step <= tol * max(1.0, float(np.max(np.abs(theta)))):
            converged = True
            break
    if not converged and max_iter > 1:
        warnings.warn(f"NPL did not converge in {max_iter} iterations (last change {step:.3g})", ConvergenceWarning,
                      stacklevel=2)
    if mapping == "policy-evaluation":  # v itself, not only up to a constant
        v_base, VX = _evaluation_terms(evaluated, X, off, kernel, gamma, solver)
    v = v_base + VX @ theta
    cov = _inverse_information(H)
    if converged and mapping == "policy-evaluation":
        cov = _mle_covariance(theta, X, n, kernel, gamma, off, pi)
    return StructuralResult(theta, cov, ll, it, converged or max_iter == 1, v, pi, history,
                            time.perf_counter() - start)


def _mle_covariance(theta, X, n, kernel, gamma, off, policy):
    """At NPL's fixed point (the MLE): the inverse outer product of the *full* likelihood's
    scores, differentiated through the fixed point (:func:`genpqr.structural.estimation.likelihood_derivatives`)
    -- the covariance NFXP reports, not the pseudo-likelihood's Hessian (which treats the
    continuation value as known and is too small)."""
    from .estimation import likelihood_derivatives

    opg = likelihood_derivatives(theta, X, n, kernel, gamma, offset=off, policy0=policy).opg
    try:
        return np.linalg.inv(opg)
    except np.linalg.LinAlgError:
        return np.full(opg.shape, np.nan)


# ============================================================================ estimator
class StructuralStep(BaseEstimator):
    """Structural parameters of a linear-in-features reward from a fitted exact-path GenPQR.

    Parameters
    ----------
    features : ndarray of shape (S, K, p)
        ``r_theta = features @ theta + offset`` by tabular state and action code, in any
        parametrization: for ``"fixed-v"`` features that do not satisfy GenPQR's
        normalization are mapped to it by :func:`normalize_features` (same ``theta``).
    offset : ndarray of shape (S, K), optional
        Known part of the reward (default 0).
    method : {"pml", "fixed-v", "npl", "npl-normalized"}
        ``"pml"`` (default): Hotz-Miller's two-step pseudo-likelihood -- one conditional
        logit step in which ``v`` is GenPQR's exact solve under the behaviour normalization
        ``mu = pi_hat``, ``g = pi_hat r_theta`` (affine in ``theta``; one NPL iteration). It
        inherits the first stage's error where actions are rare (issue 9: -1.5 / -2.6 SE on a
        pooled four-group engine panel) and its SEs ignore it; ``genpqr fit`` defaults to
        ``"npl"`` (the MLE, :mod:`genpqr.structural.estimation`), docs/structural_estimation.md.
        ``"fixed-v"``: one conditional-logit step with GenPQR's fitted continuation value
        ``v`` held fixed (:func:`fit_structural`), in whatever normalization GenPQR was fitted
        with: for an anchor action, Arcidiacono-Miller's renewal CCP estimator, which uses
        the log-CCP of the anchor directly and is noisy when that action is rare (Rust's
        model: docs/engine_replacement.md); for ``normalization.weighted(pi_hat)`` it equals
        ``"pml"``. ``"npl"``: NPL iterated to convergence
        (:func:`fit_npl`; converges to the MLE given GenPQR's kernel). ``"npl-normalized"``:
        NPL with the normalized ``v`` held fixed in each step (``fit_npl(mapping="normalized")``;
        slow, not the MLE).
    max_iter : int
        NPL iterations.
    tol : float
        Newton-decrement tolerance (``"fixed-v"``, see :func:`fit_structural`) / parameter
        change tolerance (NPL).
    feature_names : list of str, optional

    Attributes
    ----------
    theta_ : ndarray of shape (p,)
    cov_, se_ : covariance (p, p) and standard errors (p,): for ``"npl"`` at convergence the
        MLE's inverse OPG (as NFXP's); otherwise the (pseudo-)likelihood's inverse Hessian,
        conditional on GenPQR's first stage (see :class:`StructuralResult`)
    loglik_ : float
    n_iter_ : int
    converged_ : bool
    result_ : StructuralResult
    fit_time_ : float
        Seconds spent in :meth:`fit` (the structural step only, GenPQR excluded).
    """

    _methods = ("pml", "fixed-v", "npl", "npl-normalized")

    def __init__(self, features=None, offset=None, method="pml", max_iter=50, tol=1e-8, feature_names=None):
        self.features = features
        self.offset = offset
        self.method = method
        self.max_iter = max_iter
        self.tol = tol
        self.feature_names = feature_names

    def fit(self, model, weights=None):
        """Fit on a fitted ``GenPQR(q_model="exact")``.

        Parameters
        ----------
        model : GenPQR
            Fitted on the exact tabular path; its continuation value, first-stage policy,
            kernel, normalization and discount are used.
        weights : ndarray of shape (S, K), optional
            Likelihood weights; default the visit counts of ``model.training_data_``.
        """
        from ..estimator import GenPQR, _ExactStage2

        start = time.perf_counter()
        if not isinstance(model, GenPQR) or not hasattr(model, "stage2_"):
            raise TypeError(f"model must be a fitted genpqr.GenPQR, got {type(model).__name__}")
        if not isinstance(model.stage2_, _ExactStage2):
            raise ValueError("StructuralStep needs GenPQR fitted with q_model='exact' (tabular states)")
        if self.method not in self._methods:
            raise ValueError(f"method must be one of {self._methods}, got {self.method!r}")
        if self.features is None:
            raise ValueError("features must be given: an (S, K, p) array with r_theta = features @ theta")
        rec = model.stage2_.recovery
        shape = rec.reward.shape
        X = _check_features(self.features, shape)
        off = np.zeros(shape) if self.offset is None else _check_table(self.offset, shape, "offset")
        if weights is not None:
            counts = _check_weights(weights, shape)
        elif getattr(model.stage2_, "counts", None) is not None:  # kept by the exact path, also in a slim save
            counts = np.asarray(model.stage2_.counts, dtype=np.float64)
        else:
            from ..persistence import require_data

            require_data(model, "the default weights (visit counts) of the structural fit")
            counts = choice_counts(model.training_data_, shape[0])
        kernel, gamma = model.stage2_.kernel, model.gamma_
        if self.method == "fixed-v":
            Xn, offn = _in_normalization(X, off, rec.mu, rec.g, kernel, gamma, model.solver)
            result = fit_structural(rec.continuation, Xn, counts, gamma, offset=offn, tol=self.tol)
        else:
            max_iter = 1 if self.method == "pml" else self.max_iter
            mapping = "normalized" if self.method == "npl-normalized" else "policy-evaluation"
            result = fit_npl(np.exp(rec.log_policy), X, counts, kernel, gamma, offset=off, max_iter=max_iter,
                             tol=self.tol, mapping=mapping, normalization=model.normalization_, solver=model.solver)
        self.result_ = result
        self.theta_ = result.theta
        self.cov_ = result.cov
        self.se_ = result.se
        self.loglik_ = result.loglik
        self.n_iter_ = result.n_iter
        self.converged_ = result.converged
        self.offset_ = off
        self.features_ = X
        self.fit_time_ = time.perf_counter() - start
        return self

    def _check_fitted(self):
        if not hasattr(self, "theta_"):
            raise NotFittedError("this StructuralStep is not fitted yet; call fit(genpqr_model) first")

    def reward_table(self) -> np.ndarray:
        """``r_theta_hat = features @ theta_ + offset``, shape (S, K)."""
        self._check_fitted()
        return self.features_ @ self.theta_ + self.offset_

    def summary(self):
        """Estimates and standard errors as a DataFrame."""
        import pandas as pd

        self._check_fitted()
        names = self.feature_names or [f"theta[{j}]" for j in range(self.theta_.size)]
        return pd.DataFrame({"estimate": self.theta_, "se": self.se_}, index=list(names))

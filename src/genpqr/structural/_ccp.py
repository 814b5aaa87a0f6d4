r"""Conditional-choice-probability (CCP) estimators of structural parameters on GenPQR's solve.

* :func:`fit_structural` -- the CCP step: hold GenPQR's continuation value ``v`` fixed and
  maximize the conditional-choice log-likelihood
  ``sum_i log softmax_a(r_theta(s_i, a) + gamma v(s_i, a))[a_i]`` (a concave logit problem,
  solved by Newton's method with the analytic Hessian, ``conditional_loglik``);
* ``fit_npl`` -- Hotz and Miller's (1993) pseudo-likelihood and its iteration, the nested
  pseudo-likelihood (NPL) of Aguirregabiria and Mira (2002). Its policy evaluation
  (``policy_evaluation_terms``) is GenPQR's exact stage 2 under the *behaviour*
  normalization ``mu = pi``, ``g = pi r_theta``, which makes ``v`` affine in ``theta``.

Why these are the right continuation values, and which normalization to use:
``genpqr.structural._ddc``.

NPL's covariance. In single-agent models the policy-iteration map has a zero Jacobian at
the fixed point, so NPL converges fast and its fixed point is the maximum likelihood
estimator for the given kernel (what NFXP computes); ``cov`` at convergence is then the
MLE's: the inverse outer product of the full likelihood's scores (derivative through the
fixed point, as NFXP's; ``genpqr.structural._likelihood.likelihood_derivatives``), not the
pseudo-likelihood's Hessian, which is 15-28% too small on Rust's data. For one step (PML) or
``mapping="normalized"`` it is the pseudo-likelihood's inverse Hessian, conditional on the
first stage.

``fit_npl(mapping="normalized")`` is the variant that holds GenPQR's *normalized* ``v``
fixed in step 2 (:func:`fit_structural`) and recomputes it from ``u = log pi_k`` under the
normalization: its fixed points are also soft-optimal for ``r_theta``, but the map lacks the
zero-Jacobian property -- it converges linearly and slowly (about 160 iterations on Rust's
model) to a consistent estimator that is not the MLE.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.special import log_softmax

from .. import stage2
from ..stage2._kernels import as_kernel
from ..stage2._linear_bellman import DIRECT_MAX_STATES, solve_linear_bellman
from ..data._validation import as_float_array, check_gamma
from ..exceptions import ConvergenceWarning
from ..normalization import Normalization
from ._checks import check_features, check_table, check_weights
from ._identification import identified_basis
from ._likelihood import likelihood_derivatives, relative_solve
from ._projection import features_in_normalization

__all__ = ["conditional_loglik", "StructuralResult", "fit_structural", "policy_evaluation_terms", "fit_npl"]


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
    """Result of :func:`fit_structural` / ``fit_npl``.

    Attributes
    ----------
    theta : ndarray of shape (p,)
    cov : ndarray of shape (p, p)
        Inverse negative Hessian of the log-likelihood at ``theta``, **conditional on v**
        (it ignores the first-stage error in ``v``; a covariance only when the weights are
        counts). For NPL at convergence, see the module notes.
    loglik : float
    n_iter : int
        Newton iterations (:func:`fit_structural`) or NPL iterations (``fit_npl``).
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
    Directions along which the likelihood is flat (``identified_basis`` of ``-H`` at the start)
    are not stepped on: ``theta`` keeps its component there.
    """
    scale = 1.0 / counts.sum()
    theta = np.array(theta0, dtype=np.float64)
    ll, g, H = conditional_loglik(theta, X, index, counts, hessian=True)
    # directions with X v constant over the actions of every counted state (collinear features) change no
    # probability: -H is singular along them at every theta, a solve there runs off to 1e15, so the steps are
    # taken on the others (none flat, the plain solve)
    basis = identified_basis(-H)
    converged, it = False, 0
    for it in range(1, max_iter + 1):
        direction = _solve_psd(-H, g) if basis is None else basis @ _solve_psd(basis.T @ -H @ basis, basis.T @ g)
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
        (``mu @ features = 0``, ``mu @ offset = g``; see ``genpqr.structural._ddc``); map any other
        parametrization with ``normalize_features``
        (:class:`~genpqr.structural.StructuralStep` does).
    counts : ndarray of shape (S, K)
        Visits per (state, action) (:func:`~genpqr.structural.choice_counts`), or any non-negative weights
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
    X = check_features(features, v.shape)
    n = check_weights(counts, v.shape, "counts")
    off = np.zeros(v.shape) if offset is None else check_table(offset, v.shape, "offset")
    th0 = np.zeros(X.shape[2]) if theta0 is None else as_float_array(theta0, "theta0", ndim=1)
    index = off + gamma * v
    theta, ll, H, nit, converged = _maximize_logit(X, index, n, th0, tol)
    if not converged:
        warnings.warn(f"the structural step did not converge in {nit} Newton iterations (is the conditional "
                      "logit separable, e.g. an action never observed?)", ConvergenceWarning, stacklevel=2)
    policy = np.exp(log_softmax(X @ theta + index, axis=1))
    return StructuralResult(theta, _inverse_information(H), ll, nit, converged, v, policy, [theta.copy()],
                            time.perf_counter() - start)


def policy_evaluation_terms(policy, X, off, kernel, gamma, solver, relative=False):
    r"""AM's policy evaluation as GenPQR's solve: ``v(theta) = v_off + sum_j theta_j v_j``.

    With the behaviour normalization ``mu = pi`` and ``g = pi r``, GenPQR's exact stage 2
    (:func:`genpqr.stage2.recover_reward`, ``u = log pi``) solves
    ``(I - gamma P_pi) W = pi u - g`` and returns ``v = -P W = P V^pi_r``, the
    entropy-regularized value of ``pi`` under ``r`` -- affine in ``g``, hence in ``theta``.
    The ``p + 1`` right-hand sides (``g = pi offset`` and ``g = pi x_j``) share one matrix:
    for small ``S`` one dense solve in relative-value form
    (``genpqr.structural._likelihood.relative_solve``: the same ``W`` as ``recover_reward``, the tests
    check the two agree, with differences that stay accurate as ``gamma -> 1``), else one
    ``genpqr.stage2._linear_bellman.solve_linear_bellman`` per column.
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
    if S <= DIRECT_MAX_STATES:
        # solved for the relative value and the gain: accurate differences as gamma -> 1 (a plain dense solve
        # loses them at gamma = 0.9999, which slowed NPL to linear convergence); relative=True drops the constant
        # k / (1 - gamma) per column, which cancels in every choice probability (and spoils the logit's precision)
        W = relative_solve(P_pi, B, gamma, add_constant=not relative)
    else:
        W = np.column_stack([solve_linear_bellman(P_pi, B[:, j], gamma, solver=solver)[0]
                             for j in range(p + 1)])
    PW = kernel.expect(W)
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
       ``g = pi_{k-1} r_theta`` (see ``policy_evaluation_terms``);
    2. ``theta_k = argmax sum n(s,a) log softmax(r_theta + gamma v_k(theta))(a|s)`` -- a
       concave logit in ``theta`` with features ``x + gamma P V^pi_x``;
    3. ``pi_k = softmax(r_theta_k + gamma v_k(theta_k))``;

    until ``max |theta_k - theta_{k-1}| <= tol * max(1, max |theta_k|)``. ``k = 1`` is the
    Hotz-Miller (1993) two-step pseudo-likelihood estimator; the fixed point is the MLE for the
    given kernel, and ``cov`` there the MLE's inverse OPG (one step, or ``mapping="normalized"``:
    the pseudo-likelihood's inverse Hessian; module notes). Any parametrization of ``r_theta``.

    Parameters
    ----------
    policy : ndarray of shape (S, K)
        ``pi_0``, strictly positive.
    features, counts, gamma, offset, theta0 : see :func:`fit_structural`
    kernel : transition kernel (see ``genpqr.stage2._kernels.as_kernel``)
    max_iter : int
        Maximum NPL iterations (``1``: the two-step PML estimator).
    tol : float
    mapping : {"policy-evaluation", "normalized"}
    normalization : Normalization, optional
        Needed by ``mapping="normalized"``: the one GenPQR used, actions as codes
        (``GenPQR.normalization_``); features that do not satisfy it are normalized
        (``genpqr.structural._projection.normalize_features``).
    solver : str
        Linear solver of :func:`genpqr.stage2.recover_reward`.
    """
    start = time.perf_counter()
    gamma = check_gamma(gamma)
    pi = as_float_array(policy, "policy", ndim=2)
    X = check_features(features, pi.shape)
    n = check_weights(counts, pi.shape, "counts")
    off = np.zeros(pi.shape) if offset is None else check_table(offset, pi.shape, "offset")
    kernel = as_kernel(kernel, pi.shape[1])
    theta = np.zeros(X.shape[2]) if theta0 is None else as_float_array(theta0, "theta0", ndim=1)
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be a positive number of NPL iterations, got {max_iter!r}")
    X, off, evaluate = _npl_mapping(mapping, normalization, pi, X, off, kernel, gamma, solver)
    run = _npl_iterations(evaluate, X, off, n, pi, theta, gamma, tol, int(max_iter))
    if not run.converged and max_iter > 1:
        warnings.warn(f"NPL did not converge in {max_iter} iterations (last change {run.step:.3g})",
                      ConvergenceWarning, stacklevel=2)
    v_base, VX, cov = run.v_base, run.VX, _inverse_information(run.hessian)
    if mapping == "policy-evaluation":  # v itself, not only up to a constant
        v_base, VX = policy_evaluation_terms(run.evaluated, X, off, kernel, gamma, solver)
        if run.converged:
            cov = _mle_covariance(run.theta, X, n, kernel, gamma, off, run.policy)
    return StructuralResult(run.theta, cov, run.loglik, run.n_iter, run.converged or max_iter == 1,
                            v_base + VX @ run.theta, run.policy, run.history, time.perf_counter() - start)


def _npl_mapping(mapping, normalization, pi, X, off, kernel, gamma, solver):
    """``(X, off, evaluate)``: the features and offset NPL iterates with (normalized for
    ``mapping="normalized"``) and the policy evaluation ``pi -> (v_base, VX)``, ``v(theta) =
    v_base + VX @ theta``."""
    if mapping == "normalized":
        if not isinstance(normalization, Normalization):
            raise TypeError("mapping='normalized' needs the normalization GenPQR used (a genpqr Normalization), got "
                            f"{type(normalization).__name__}")
        if normalization.mu.needs_policy:
            raise ValueError("mapping='normalized' needs a normalization whose mu does not depend on the policy")
        mu, g = normalization.resolve_tabular(pi, kernel.expect, gamma)
        X, off = features_in_normalization(X, off, mu, g, kernel, gamma, solver)
        evaluate = (lambda p: (stage2.recover_reward(np.log(p), kernel, gamma, normalization,
                                                      solver=solver).continuation, np.zeros(X.shape)))
    elif mapping == "policy-evaluation":
        evaluate = (lambda p: policy_evaluation_terms(p, X, off, kernel, gamma, solver, relative=True))
    else:
        raise ValueError(f"mapping must be 'policy-evaluation' or 'normalized', got {mapping!r}")
    return X, off, evaluate


@dataclass
class _NPLRun:
    """Where NPL's iterations stopped: the last ``theta`` and policy, the policy evaluated last
    (``evaluated``) with its ``v_base``, ``VX``, the pseudo-likelihood and its Hessian."""

    theta: np.ndarray
    policy: np.ndarray
    evaluated: np.ndarray
    v_base: np.ndarray
    VX: np.ndarray
    loglik: float
    hessian: np.ndarray
    history: list
    n_iter: int
    converged: bool
    step: float


def _npl_iterations(evaluate, X, off, n, pi, theta, gamma, tol, max_iter) -> _NPLRun:
    """NPL's steps 1-3 until ``theta`` stops moving (``it > 1``) or ``max_iter`` steps."""
    history, converged, step = [], False, np.inf
    for it in range(1, max_iter + 1):
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
    return _NPLRun(theta, pi, evaluated, v_base, VX, ll, H, history, it, converged, step)


def _mle_covariance(theta, X, n, kernel, gamma, off, policy):
    """At NPL's fixed point (the MLE): the inverse outer product of the *full* likelihood's
    scores, differentiated through the fixed point (``genpqr.structural._likelihood.likelihood_derivatives``)
    -- the covariance NFXP reports, not the pseudo-likelihood's Hessian (which treats the
    continuation value as known and is too small)."""
    opg = likelihood_derivatives(theta, X, n, kernel, gamma, offset=off, policy0=policy).opg
    try:
        return np.linalg.inv(opg)
    except np.linalg.LinAlgError:
        return np.full(opg.shape, np.nan)

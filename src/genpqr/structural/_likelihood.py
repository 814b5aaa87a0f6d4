r"""The full (nested fixed-point) log-likelihood of a linear flow utility and its analytic
derivatives, and the relative-value linear solve they rest on.

``L(theta) = sum_{s,a} n(s,a) log pi_theta(a|s)`` with ``pi_theta`` the soft-optimal policy of
``u_theta = features @ theta + offset`` under the kernel ``P`` (temperature 1, discount
``gamma``). ``likelihood_derivatives`` returns ``L``, the score, the outer product of the
scores and the Hessian, the derivative taken through the fixed point (formulas in
``genpqr.structural._estimation``). Solves with ``A = I - gamma P_pi`` use
``relative_solve``, which stays well conditioned as ``gamma -> 1``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.special import log_softmax

from ..stage2._kernels import as_kernel
from ..data._validation import as_float_array, check_gamma
from ..exceptions import ConvergenceWarning

__all__ = ["LikelihoodDerivatives", "relative_solve", "likelihood_derivatives"]

#: Largest number of states solved with dense LU (sparse LU above).
_DENSE_MAX = 2000


def relative_solve(P_pi, B, gamma: float, *, add_constant: bool = False) -> np.ndarray:
    r"""A solution of ``(I - gamma P_pi) W = B`` up to a constant per column, shape of ``B``.

    Writes ``W = h + k / (1 - gamma)`` with ``h(0) = 0`` and solves ``[A_{:,1:}, 1] [h_{1:}; k] = B``
    (``A = I - gamma P_pi``; ``A 1 = (1 - gamma) 1``): well conditioned for ``gamma`` near or at 1,
    where ``A`` itself is not. Returns ``h`` (exact ``W`` minus the constant ``k / (1 - gamma)``):
    enough for every choice probability, since ``P`` rows sum to one. ``add_constant=True``
    (``gamma < 1``) adds ``k / (1 - gamma)`` back: the exact ``W``, whose differences keep the
    accuracy of ``h``. Kernels with terminating mass (rows summing below one) get the plain solve.
    """
    S = P_pi.shape[0]
    stochastic = np.allclose(np.asarray(P_pi.sum(axis=1)).ravel(), 1.0, atol=1e-10)
    if sp.issparse(P_pi) and S > _DENSE_MAX:
        A = (sp.identity(S, format="csc") - gamma * P_pi.tocsc()).tolil()
        if stochastic:
            A[:, 0] = np.ones((S, 1))
        Z = np.asarray(spla.spsolve(A.tocsc(), B)).reshape(B.shape)
    else:
        dense = P_pi.toarray() if sp.issparse(P_pi) else np.asarray(P_pi, dtype=np.float64)
        A = np.eye(S) - gamma * dense
        if stochastic:
            A[:, 0] = 1.0
        Z = np.linalg.solve(A, B)  # LAPACK gesv; scipy.linalg.solve costs 5-20x more per call on small systems
    if stochastic:
        k = Z[0].copy()
        Z[0] = 0.0
        if add_constant:
            Z = Z + k / (1.0 - gamma)
    return Z


@dataclass(frozen=True)
class LikelihoodDerivatives:
    """The full log-likelihood at ``theta`` and its analytic derivatives.

    Attributes
    ----------
    loglik : float
    grad : ndarray (p,)
    opg : ndarray (p, p)
        ``sum n(s,a) score score'``.
    hessian : ndarray (p, p)
    policy : ndarray (S, K)
        ``pi_theta``.
    scores : ndarray (S, K, p)
        ``d log pi_theta(a|s) / d theta``.
    """

    loglik: float
    grad: np.ndarray
    opg: np.ndarray
    hessian: np.ndarray
    policy: np.ndarray = field(repr=False)
    scores: np.ndarray = field(repr=False)


def _soft_policy(u, kernel, gamma, policy0=None, tol=1e-13, max_iter=200):
    """Soft policy iteration in relative values: ``pi <- softmax(u + gamma P h_pi)`` with
    ``h_pi`` the relative entropy-regularized value of ``pi`` (``relative_solve``).
    Returns ``log pi`` (S, K). Converges quadratically (Newton on the soft Bellman equation)."""
    log_pi = log_softmax(u if policy0 is None else np.log(np.clip(policy0, 1e-300, None)), axis=1)
    best = np.inf
    for _ in range(max_iter):
        pi = np.exp(log_pi)
        h = relative_solve(kernel.under(pi), np.sum(pi * (u - log_pi), axis=1), gamma)
        new = log_softmax(u + gamma * kernel.expect(h), axis=1)
        # the change in probability terms: log-probabilities of near-impossible actions carry rounding noise
        change = float(np.max(np.abs(new - log_pi) * np.maximum(np.exp(new), np.exp(log_pi))))
        log_pi = new
        if change <= tol or (change >= 0.5 * best and change <= 1e-9):  # converged, or stalled at rounding level
            break
        best = min(best, change)
    else:
        warnings.warn(f"soft policy iteration stopped after {max_iter} steps (last change {change:.3g})",
                      ConvergenceWarning, stacklevel=3)
    return log_pi


def likelihood_derivatives(theta, features, counts, kernel, gamma, *, offset=None,
                           policy0=None, second_order: bool = True) -> LikelihoodDerivatives:
    r"""Log-likelihood, score, OPG and Hessian of the full (nested fixed-point) likelihood.

    Parameters
    ----------
    theta : ndarray (p,)
    features : ndarray (S, K, p)
    counts : ndarray (S, K)
        Choices per (state, action).
    kernel : transition kernel (``genpqr.stage2._kernels.as_kernel``)
    gamma : float
    offset : ndarray (S, K), optional
    policy0 : ndarray (S, K), optional
        Warm start of the inner solve (strictly positive).
    second_order : bool
        False: no Hessian (NaN; it costs ``p * p`` more solves than the scores).

    Notes
    -----
    The formulas: ``genpqr.structural._likelihood``.
    """
    gamma = check_gamma(gamma)
    theta = as_float_array(theta, "theta", ndim=1)
    X = np.asarray(features, dtype=np.float64)
    S, K, p = X.shape
    kernel = as_kernel(kernel, K)
    u = X @ theta + (0.0 if offset is None else offset)
    log_pi = _soft_policy(u, kernel, gamma, policy0)
    pi = np.exp(log_pi)
    P_pi = kernel.under(pi)
    dV = relative_solve(P_pi, np.einsum("sa,sap->sp", pi, X), gamma)
    dQ = X + gamma * kernel.expect(dV)
    mean = np.einsum("sa,sap->sp", pi, dQ)
    scores = dQ - mean[:, None, :]
    n = np.asarray(counts, dtype=np.float64)
    mask = n > 0
    loglik = float(np.sum(n[mask] * log_pi[mask]))
    grad = np.einsum("sa,sap->p", n, scores)
    opg = np.einsum("sa,sap,saq->pq", n, scores, scores)
    if not second_order:
        return LikelihoodDerivatives(loglik, grad, opg, np.full((p, p), np.nan), pi, scores)
    cov = np.einsum("sa,sap,saq->spq", pi, scores, scores)
    d2V = relative_solve(P_pi, cov.reshape(S, p * p), gamma)
    d2Q = gamma * kernel.expect(d2V).reshape(S, K, p, p)
    d2 = d2Q - np.einsum("sa,sapq->spq", pi, d2Q)[:, None] - cov[:, None]
    hessian = np.einsum("sa,sapq->pq", n, d2)
    return LikelihoodDerivatives(loglik, grad, opg, 0.5 * (hessian + hessian.T), pi, scores)

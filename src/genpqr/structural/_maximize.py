"""The maximizers of the full likelihood behind :func:`genpqr.structural.estimate_structural`:
NPL iterated to convergence with its safeguard (``safeguarded_npl``), NFXP finished by Newton
steps (``finished_nfxp``) and damped Newton on the full likelihood (``maximize_full``).
Each returns the iterations of every algorithm it ran, ``(algorithm, iterations, note)``, for
``genpqr.structural._results.describe_iterations``.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np

from ..exceptions import ConvergenceWarning
from ._ccp import fit_npl
from ._likelihood import LikelihoodDerivatives, likelihood_derivatives
from ._identification import IDENTIFICATION_RTOL
from ._nfxp import fit_nfxp

__all__ = ["start_policy_of", "at_maximum", "at_ridge_maximum", "RIDGE_NOTE", "safeguarded_npl", "maximize_full",
           "finished_nfxp"]

#: The iteration note of a maximum reached on a flat ridge (some parameters not identified).
RIDGE_NOTE = "at a maximum on a flat ridge: some parameters not identified"


def start_policy_of(start_policy, shape):
    """A strictly positive start for NPL: the first stage mixed with 1e-6 of the uniform
    (a clipped or unclipped first stage, even one with exact zeros, works)."""
    if start_policy is None:
        return np.full(shape, 1.0 / shape[1])
    pi = np.clip(np.asarray(start_policy, dtype=np.float64), 0.0, None)
    total = pi.sum(axis=1, keepdims=True)
    pi = np.where(total > 0, pi / np.where(total > 0, total, 1.0), 1.0 / shape[1])
    return (1.0 - 1e-6) * pi + 1e-6 / shape[1]


def at_maximum(d: LikelihoodDerivatives, n_choices: float) -> bool:
    """A local maximum of the full likelihood to rounding: the Newton decrement per choice
    ``g' (-H)^{-1} g / n`` is below 1e-14 and the Hessian is negative definite."""
    if not np.all(np.linalg.eigvalsh(d.hessian) < 0):
        return False
    return float(d.grad @ np.linalg.solve(-d.hessian, d.grad)) / n_choices <= 1e-14


def at_ridge_maximum(d: LikelihoodDerivatives, n_choices: float) -> bool:
    """A maximum of the full likelihood on a flat ridge (parameters not identified,
    ``genpqr.structural.identification``): ``-H`` is positive semi-definite with some
    eigenvalues zero to ``IDENTIFICATION_RTOL``, the
    score along those directions vanishes and the Newton decrement on the others is below 1e-14
    per choice."""
    vals, vecs = np.linalg.eigh(-np.asarray(d.hessian, dtype=np.float64))
    if not vals.size or not np.all(np.isfinite(vals)):
        return False
    top = max(float(vals[-1]), 1e-300)
    flat = np.abs(vals) <= IDENTIFICATION_RTOL * top
    if not flat.any() or np.any(vals[~flat] <= 0):
        return False
    g = vecs.T @ d.grad
    return (float(np.sum(g[~flat] ** 2 / vals[~flat])) / n_choices <= 1e-14
            and float(np.max(np.abs(g[flat]))) / n_choices <= 1e-8)


def safeguarded_npl(policy0, X, n, kernel, gamma, off, tol, max_iter):
    """NPL iterated to convergence, checked to be the MLE.

    Every NPL fixed point is a stationary point of the full likelihood, but from a poor start
    NPL can settle on a spurious one (it did from uniform probabilities at gamma = 0.9999 before
    the policy evaluation used ``relative_solve``), or stop early. The result is accepted when
    NPL converged, the full Hessian there is negative definite and the likelihood is at least that
    of the first (PML) iterate -- a consistent estimate the MLE cannot be worse than. Otherwise
    damped Newton on the full likelihood with the analytic Hessian (``maximize_full``,
    monotone in the likelihood) continues from the better of the two, with a
    ``ConvergenceWarning``.
    Returns ``(theta, policy, parts, converged)``, ``parts`` the ``(algorithm, iterations, note)``
    of ``describe_iterations``."""
    underflow = False
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always", ConvergenceWarning)
        try:
            res = fit_npl(policy0, X, n, kernel, gamma, offset=off, max_iter=max_iter, tol=tol)
        except ValueError:  # an iterate's policy underflowed to 0/1: a spurious, degenerate fixed point
            res = fit_npl(policy0, X, n, kernel, gamma, offset=off, max_iter=1, tol=tol)
            res, underflow = replace(res, theta=np.full_like(res.theta, np.nan), converged=False), True
    first = likelihood_derivatives(res.history[0], X, n, kernel, gamma, offset=off)
    final_ll, negative_definite = -np.inf, False
    if np.all(np.isfinite(res.theta)):
        final = likelihood_derivatives(res.theta, X, n, kernel, gamma, offset=off, policy0=res.policy)
        final_ll = final.loglik
        negative_definite = bool(np.all(np.linalg.eigvalsh(final.hessian) < 0))
    scale = 1e-9 * max(1.0, abs(first.loglik))
    if res.converged and negative_definite and final_ll >= first.loglik - scale:
        return res.theta, res.policy, [("NPL", res.n_iter, "")], True
    if res.converged and final_ll >= first.loglik - scale and at_ridge_maximum(final, n.sum()):
        return res.theta, res.policy, [("NPL", res.n_iter, RIDGE_NOTE)], True
    better = res.theta if final_ll >= first.loglik else res.history[0]  # NaN compares False
    note = ("a choice probability underflowed" if underflow else "not a maximum" if res.converged
            else "hit the cap")
    why = (f"NPL {'converged' if res.converged else 'did not converge'} in {res.n_iter} iterations to a point "
           f"with log-likelihood {final_ll:.6g} (first step: {first.loglik:.6g}"
           f"{'' if negative_definite else '; not a local maximum'})")
    warnings.warn(f"{why}; continued with Newton's method on the full likelihood from the better point",
                  ConvergenceWarning, stacklevel=3)
    theta, policy, newton, converged = maximize_full(better, X, n, kernel, gamma, off, max_iter)
    return theta, policy, [("NPL", res.n_iter, note), newton], converged


def maximize_full(theta, X, n, kernel, gamma, off, max_iter):
    """Damped Newton on the full likelihood with the analytic Hessian (BHHH's OPG direction
    where the Hessian is not negative definite), step halving until the likelihood does not
    fall. Returns ``(theta, policy, ("Newton", iterations, note), converged)``."""
    d = likelihood_derivatives(theta, X, n, kernel, gamma, offset=off)
    converged, it, note = False, 0, "hit the cap"
    for it in range(1, max_iter + 1):
        newton = bool(np.all(np.linalg.eigvalsh(d.hessian) < 0))
        try:
            direction = np.linalg.solve(-d.hessian if newton else d.opg, d.grad)
        except np.linalg.LinAlgError:  # singular OPG: no direction (e.g. scores vanish on separated data)
            if at_ridge_maximum(d, n.sum()):  # collinear features: a maximum, along a flat direction
                return theta, d.policy, ("Newton", it, RIDGE_NOTE), True
            note = "no ascent direction"
            break
        if newton and float(d.grad @ direction) / n.sum() <= 1e-14:
            # at rounding level the likelihood cannot rank steps any more: take the last full Newton step
            theta = theta + direction
            d = likelihood_derivatives(theta, X, n, kernel, gamma, offset=off, policy0=d.policy)
            converged = True
            break
        step = 1.0
        for _ in range(40):
            trial = likelihood_derivatives(theta + step * direction, X, n, kernel, gamma, offset=off,
                                           policy0=d.policy)
            if trial.loglik >= d.loglik - 1e-12 * abs(d.loglik):
                break
            step *= 0.5
        else:
            converged = at_maximum(d, n.sum())
            note = "stalled"
            break
        theta, d = theta + step * direction, trial
    return theta, d.policy, ("Newton", it, "" if converged else note), converged


def finished_nfxp(X, n, kernel, gamma, off, tol, max_iter):
    """NFXP (BHHH) finished by Newton's method on the full likelihood: BHHH stalls at the rounding
    floor of NFXP's absolute values near beta = 1 (a few 1e-6 off the MLE at beta = 0.9999), and
    Newton steps with the analytic Hessian in relative values finish it. NFXP's convergence
    warnings are passed on only when the finish does not converge.
    Returns ``(theta, policy, parts, converged)``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        res = fit_nfxp(n, X, kernel, gamma, offset=off, tol=tol, max_iter=max_iter)
    theta, policy, newton, converged = maximize_full(res.theta, X, n, kernel, gamma, off, max_iter)
    if converged:
        caught.clear()
    for w in caught:
        warnings.warn(w.message, w.category, stacklevel=3)
    note = "" if res.converged else "hit the cap" if res.n_iter >= max_iter else "stalled"
    return theta, policy, [("BHHH", res.n_iter, note), newton], converged

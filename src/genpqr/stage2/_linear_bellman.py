r"""The linear Bellman solve ``(I - gamma P_mu) x = b`` behind every exact evaluation.

``P_mu`` (S, S) is a (sub)stochastic state-to-state kernel (dense or scipy sparse; rows
summing below one terminate). ``solve_linear_bellman`` picks a direct LU for small ``S``
and a Krylov method above (``DIRECT_MAX_STATES``), reports how the solve went
(``LinearSolveInfo``) and refines a Krylov result by fixed-point steps when its residual
is above the target. Re-exported by :mod:`genpqr.stage2`.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..exceptions import ConvergenceWarning

__all__ = ["DIRECT_MAX_STATES", "LinearSolveInfo", "solve_linear_bellman"]

#: Largest S for which ``solver="auto"`` uses a direct (dense LU) solve. Measured on the
#: 2-core reference machine (docs/benchmarks.md): dense LU takes 0.43 s at S = 2,000 where
#: BiCGSTAB takes 0.003 s; SuperLU takes 8.6 s at S = 5,000 (fill-in on random graphs).
DIRECT_MAX_STATES = 500
#: Largest S for which ``solver="direct"`` uses dense LU on a sparse ``P_mu`` (SuperLU above).
_DENSE_DIRECT_MAX = 2500


@dataclass(frozen=True)
class LinearSolveInfo:
    """How ``(I - gamma P_mu) x = b`` was solved: solver, iterations, sup-norm residual, seconds."""

    solver: str
    iterations: int
    residual: float
    seconds: float


def solve_linear_bellman(P_mu, b: np.ndarray, gamma: float, *, solver: str = "auto", tol: float = 1e-10,
                         max_iter: int = 10_000, _warn: bool = True) -> tuple[np.ndarray, LinearSolveInfo]:
    r"""Solve ``(I - gamma P_mu) x = b`` for a (sub)stochastic ``P_mu`` (S, S).

    Parameters
    ----------
    P_mu : ndarray, sparse matrix or scipy.sparse.linalg.LinearOperator of shape (S, S)
        A ``LinearOperator`` (a kernel given only by products) needs a Krylov or fixed-point solver.
    b : ndarray of shape (S,)
    solver : {"auto", "direct", "gmres", "bicgstab", "iteration"}
        ``"direct"``: LU (dense for dense input or S <= 2,500, SuperLU otherwise); ``"gmres"``/``"bicgstab"``: Krylov with the sup-norm residual target
        ``tol``; ``"iteration"``: fixed-point iteration ``x <- b + gamma P_mu x``
        (contraction at rate gamma). ``"auto"`` picks dense LU for S <= DIRECT_MAX_STATES
        and BiCGSTAB (falling back to GMRES if it breaks down) above: the fastest by
        measurement (``benchmarks/tabular_solver.py``, docs/benchmarks.md).
    tol : float
        Target for ``max |(I - gamma P_mu) x - b|`` relative to ``max(1, max|b|)``; Krylov
        results above it are refined by fixed-point steps and a :class:`ConvergenceWarning`
        is raised if still above (direct solves are exact to rounding and never warn).
    """
    start = time.perf_counter()
    S = b.shape[0]
    tol = tol * max(1.0, float(np.max(np.abs(b)))) if S else tol
    if solver == "auto":
        if S <= DIRECT_MAX_STATES and not isinstance(P_mu, spla.LinearOperator):
            solver = "direct"
        else:
            x, info = solve_linear_bellman(P_mu, b, gamma, solver="bicgstab", tol=tol / max(1.0, float(np.max(np.abs(b)))),
                                           max_iter=max_iter, _warn=False)
            if info.residual <= tol:
                return x, replace(info, solver="auto:bicgstab", seconds=time.perf_counter() - start)
            solver = "gmres"
    x, iterations = _solve(P_mu, b, gamma, solver, tol, max_iter)
    residual = float(np.max(np.abs(_apply(P_mu, gamma, x) - b))) if S else 0.0
    refine = 0
    while _warn and residual > tol and refine < max_iter and solver != "direct":
        # a fixed-point step contracts the error at rate gamma
        x = b + gamma * (P_mu @ x)
        residual = float(np.max(np.abs(_apply(P_mu, gamma, x) - b)))
        refine += 1
    if _warn and residual > tol and solver != "direct":
        warnings.warn(f"linear Bellman solve ({solver}) stopped at residual {residual:.3g} > tol {tol:.3g}",
                      ConvergenceWarning, stacklevel=2)
    return x, LinearSolveInfo(solver, iterations + refine, residual, time.perf_counter() - start)


def _apply(P_mu, gamma, x):
    """``(I - gamma P_mu) x``."""
    return x - gamma * (P_mu @ x)


def _solve(P_mu, b, gamma, solver, tol, max_iter):
    """``(x, iterations)`` by one named solver (absolute residual target ``tol``)."""
    S = b.shape[0]
    iterations = 0
    if solver == "direct":
        if isinstance(P_mu, spla.LinearOperator):
            raise ValueError("solver='direct' needs the entries of P_mu, but the kernel is given only by products "
                             "(a transition model's expect/push); use solver='auto', 'bicgstab' or 'gmres'")
        if sp.issparse(P_mu) and S > _DENSE_DIRECT_MAX:
            A = (sp.identity(S, format="csc") - gamma * sp.csc_matrix(P_mu))
            x = spla.spsolve(A, b)
        else:
            dense = P_mu.toarray() if sp.issparse(P_mu) else np.asarray(P_mu)
            x = np.linalg.solve(np.eye(S) - gamma * dense, b)
    elif solver in ("gmres", "bicgstab"):
        x, iterations = _krylov(P_mu, b, gamma, solver, tol, max_iter)
    elif solver == "iteration":
        x = b.copy()
        for iterations in range(1, max_iter + 1):
            x_new = b + gamma * (P_mu @ x)
            if np.max(np.abs(x_new - x)) * gamma / max(1.0 - gamma, 1e-300) <= tol:
                x = x_new
                break
            x = x_new
    else:
        raise ValueError(f"solver must be one of 'auto', 'direct', 'gmres', 'bicgstab', 'iteration'; got {solver!r}")
    return np.asarray(x, dtype=np.float64), iterations


def _krylov(P_mu, b, gamma, solver, tol, max_iter):
    """GMRES (restarted every 50) or BiCGSTAB from ``x0 = b``; ``(x, iterations)``."""
    S = b.shape[0]
    op = spla.LinearOperator((S, S), matvec=lambda x: _apply(P_mu, gamma, x), dtype=np.float64)
    counter = {"n": 0}

    def count(_):
        counter["n"] += 1

    method = spla.gmres if solver == "gmres" else spla.bicgstab
    kwargs = dict(rtol=0.0, atol=0.1 * tol, maxiter=max_iter, callback=count)
    if solver == "gmres":
        kwargs.update(restart=min(S, 50), callback_type="pr_norm")
    x, _ = method(op, b, x0=b.copy(), **kwargs)
    return x, counter["n"]

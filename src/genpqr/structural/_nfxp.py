r"""NFXP: Rust's (1987) nested fixed-point maximum likelihood for dynamic logit models.

For a flow utility linear in parameters, ``u_theta(s, a) = features(s, a) @ theta + offset(s, a)``,
Gumbel shocks (temperature 1) and a known (or first-stage estimated) kernel ``P``:

* **inner loop** -- the integrated Bellman equation
  ``V = Gamma(V) := logsumexp_a(u_theta + beta P V)`` (paper Sec. 2, the soft Bellman
  equation; ``EV = P V`` in Rust's notation), solved by Rust's poly-algorithm:
  contraction steps ``V <- Gamma(V)`` while far from the solution, then Newton-Kantorovich
  steps ``V <- V - (I - beta P_pi)^{-1} (V - Gamma(V))``, where ``beta P_pi`` with
  ``pi = softmax(u_theta + beta P V)`` is the Frechet derivative of ``Gamma``; Newton
  converges quadratically to machine precision. ``V`` is warm-started from the previous
  outer evaluation.
* **outer loop** -- maximize the conditional-choice log-likelihood
  ``L(theta) = sum_{s,a} n(s,a) log pi_theta(a|s)``, ``pi_theta = softmax(Q_theta)``,
  ``Q_theta = u_theta + beta P V_theta``, by BHHH (default; Berndt-Hall-Hall-Hausman with
  step halving, as in Rust's NFXP code) or scipy's BFGS.
* **gradient** by implicit differentiation of the fixed point:
  ``dV/dtheta = (I - beta P_pi)^{-1} sum_a pi(a|.) x(., a)`` (one factorization, ``p``
  right-hand sides), ``dQ/dtheta = x + beta P dV/dtheta`` and the score
  ``d log pi(a|s) = dQ(s,a) - sum_a' pi(a'|s) dQ(s,a')``.

Transition parameters are not part of ``theta``: pass the true kernel, or estimate it in a
first stage (``transition_model``; e.g. :class:`genpqr.structural.IncrementKernel`) -- Rust's
two-step partial likelihood, consistent but not fully efficient. Standard errors are the
inverse of the BHHH outer product of scores (a covariance when the weights are counts),
conditional on the kernel.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import log_softmax

from .. import exceptions, stage2
from ..stage2._kernels import TransitionKernel, as_kernel
from ..stage2._linear_bellman import solve_linear_bellman
from ..data._estimator_base import LightEstimator
from ..data._validation import as_float_array, check_gamma, check_state_indices
from ..data import Transitions
from ..exceptions import ConvergenceWarning
from ._checks import check_features, check_table, check_weights
from ._kernels import choice_counts

__all__ = ["NFXP", "NFXPResult", "BellmanSolveInfo", "solve_integrated_bellman", "nfxp_loglik", "fit_nfxp"]

#: Largest S for which dense LU factorizations are used (sparse LU above).
_DENSE_MAX = 2000
#: Largest S*K*S for which a sparse kernel is copied to a dense array (16 MB).
_DENSE_KERNEL_MAX = 2_000_000


# ============================================================================ inner loop
@dataclass(frozen=True)
class BellmanSolveInfo:
    """How the inner fixed point was solved.

    Attributes
    ----------
    contraction_steps, newton_steps : int
    residual : float
        ``max |V - Gamma(V)|`` at the returned ``V``.
    seconds : float
    """

    contraction_steps: int
    newton_steps: int
    residual: float
    seconds: float


class _Factor:
    """Solves with ``I - beta P_pi``: one dense LU for small S, else Krylov solves per
    right-hand side (``genpqr.stage2._linear_bellman.solve_linear_bellman``; sparse LU fills in badly
    on transition graphs, docs/benchmarks.md)."""

    def __init__(self, P_pi, gamma):
        self.P_pi, self.gamma = P_pi, gamma
        S = P_pi.shape[0]
        self._lu = None
        if S <= _DENSE_MAX:
            dense = P_pi.toarray() if sp.issparse(P_pi) else np.asarray(P_pi)
            self._lu = sla.lu_factor(np.eye(S) - gamma * dense, check_finite=False)

    def solve(self, b):
        if self._lu is not None:
            return sla.lu_solve(self._lu, b, check_finite=False)
        if b.ndim == 1:
            return solve_linear_bellman(self.P_pi, b, self.gamma, tol=1e-13)[0]
        return np.column_stack([self.solve(b[:, j]) for j in range(b.shape[1])])


def _fast_kernel(kernel):
    """A dense copy of a small kernel: matrix-vector products and ``P_pi`` without sparse
    overhead (at S = 175 a dense ``P_pi`` costs microseconds, a sparse one a millisecond)."""
    if kernel.is_sparse and kernel.n_states ** 2 * kernel.n_actions <= _DENSE_KERNEL_MAX:
        return TransitionKernel(kernel.matrix.toarray(), kernel.n_states, kernel.n_actions)
    return kernel


def _lse(Q):
    """Row-wise logsumexp (a lean version of scipy's, which costs ~10x more per call here)."""
    m = Q.max(axis=1)
    return m + np.log(np.exp(Q - m[:, None]).sum(axis=1))


def _bellman(u, kernel, gamma, V):
    Q = u + gamma * kernel.expect(V)
    return Q, _lse(Q)


def solve_integrated_bellman(u, kernel, gamma, *, V0=None, tol: float = 1e-12, switch_tol: float = 1e-2,
                             max_contraction: int = 20, max_newton: int = 100):
    r"""Solve ``V = logsumexp_a(u + beta P V)`` (Rust's poly-algorithm).

    Contraction steps until the residual ``max |V - Gamma(V)|`` falls below ``switch_tol``
    (or ``max_contraction`` steps: contraction gains only a factor ``beta`` per step, and
    Newton-Kantorovich -- soft policy iteration -- converges from any start here, so the
    contraction phase only has to bring Newton near its quadratic regime), then
    Newton-Kantorovich steps
    ``V <- V - (I - beta P_pi)^{-1}(V - Gamma(V))`` until the residual is below ``tol``
    (or stops shrinking: the floating-point floor of the problem's scale). Since
    ``Gamma(V) = pi (u + beta P V - log pi)``, the Newton step lands on
    ``(I - beta P_pi)^{-1} pi (u - log pi)``, the entropy-regularized value of ``pi``: it is
    soft policy iteration (as :func:`genpqr.stage2.soft_optimal_solution`), monotone and
    globally convergent.

    Parameters
    ----------
    u : ndarray of shape (S, K)
        Flow utility.
    kernel : transition kernel (``genpqr.stage2._kernels.as_kernel``)
    gamma : float
        Discount factor ``beta``.
    V0 : ndarray of shape (S,), optional
        Warm start.

    Returns
    -------
    V : ndarray of shape (S,)
    info : BellmanSolveInfo
    """
    start = time.perf_counter()
    gamma = check_gamma(gamma)
    u = as_float_array(u, "u", ndim=2)
    kernel = _fast_kernel(as_kernel(kernel, u.shape[1]))
    V = _lse(u) / (1.0 - gamma) if V0 is None else np.array(V0, dtype=np.float64)
    Q, TV = _bellman(u, kernel, gamma, V)
    residual = float(np.max(np.abs(TV - V)))
    n_contraction = n_newton = 0
    while residual > max(switch_tol, tol) and n_contraction < max_contraction:
        V = TV
        Q, TV = _bellman(u, kernel, gamma, V)
        residual = float(np.max(np.abs(TV - V)))
        n_contraction += 1
    best = residual
    while residual > tol and n_newton < max_newton:
        pi = np.exp(Q - TV[:, None])
        V = V - _Factor(kernel.under(pi), gamma).solve(V - TV)
        Q, TV = _bellman(u, kernel, gamma, V)
        residual = float(np.max(np.abs(TV - V)))
        n_newton += 1
        if residual >= 0.5 * best and residual <= 1e3 * np.finfo(float).eps * max(1.0, float(np.max(np.abs(V)))):
            break  # stalled at the rounding floor
        best = min(best, residual)
    if residual > tol and residual > 1e3 * np.finfo(float).eps * max(1.0, float(np.max(np.abs(V)))):
        warnings.warn(f"NFXP inner solve stopped at residual {residual:.3g} > tol {tol:.3g}", ConvergenceWarning,
                      stacklevel=2)
    return V, BellmanSolveInfo(n_contraction, n_newton, residual, time.perf_counter() - start)


# ============================================================================ likelihood
@dataclass
class _Evaluation:
    loglik: float
    grad: np.ndarray
    opg: np.ndarray
    V: np.ndarray
    policy: np.ndarray
    info: BellmanSolveInfo


def _evaluate(theta, X, offset, counts, kernel, gamma, V0, inner):
    u = X @ theta + offset
    V, info = solve_integrated_bellman(u, kernel, gamma, V0=V0, **inner)
    Q = u + gamma * kernel.expect(V)
    log_pi = log_softmax(Q, axis=1)
    pi = np.exp(log_pi)
    S, K, p = X.shape
    # implicit differentiation: (I - beta P_pi) dV = sum_a pi x
    b = np.einsum("sa,sap->sp", pi, X)
    dV = _Factor(kernel.under(pi), gamma).solve(b)
    PdV = kernel.expect(dV)
    dQ = X + gamma * PdV
    score = dQ - np.einsum("sa,sap->sp", pi, dQ)[:, None, :]
    mask = counts > 0
    loglik = float(np.sum(counts[mask] * log_pi[mask]))
    grad = np.einsum("sa,sap->p", counts, score)
    opg = np.einsum("sa,sap,saq->pq", counts, score, score)
    return _Evaluation(loglik, grad, opg, V, pi, info)


def nfxp_loglik(theta, features, counts, kernel, gamma, *, offset=None, V0=None, tol: float = 1e-12):
    """Log-likelihood ``sum n(s,a) log pi_theta(a|s)`` (full solution of the model) and its
    analytic gradient (implicit differentiation).

    Returns
    -------
    loglik : float
    grad : ndarray of shape (p,)
    V : ndarray of shape (S,)
        The inner fixed point (to warm-start the next call).
    """
    gamma, X, counts, off, kernel = _nfxp_inputs(features, counts, offset, kernel, gamma)
    ev = _evaluate(as_float_array(theta, "theta", ndim=1), X, off, counts, kernel, gamma, V0, dict(tol=tol))
    return ev.loglik, ev.grad, ev.V


@dataclass(frozen=True)
class NFXPResult:
    """Result of ``fit_nfxp``.

    Attributes
    ----------
    theta : ndarray of shape (p,)
    cov : ndarray of shape (p, p)
        Inverse BHHH outer product of the scores (conditional on the kernel).
    loglik : float
    grad : ndarray of shape (p,)
    n_iter, n_evaluations : int
        Outer iterations and likelihood evaluations (= inner solves).
    converged : bool
    value : ndarray of shape (S,)
        ``V_theta``.
    policy : ndarray of shape (S, K)
    inner : BellmanSolveInfo
        The last inner solve.
    seconds : float
    """

    theta: np.ndarray
    cov: np.ndarray
    loglik: float
    grad: np.ndarray
    n_iter: int
    n_evaluations: int
    converged: bool
    value: np.ndarray = field(repr=False)
    policy: np.ndarray = field(repr=False)
    inner: BellmanSolveInfo = None
    seconds: float = 0.0

    @property
    def se(self) -> np.ndarray:
        return np.sqrt(np.clip(np.diag(self.cov), 0.0, None))


def fit_nfxp(counts, features, kernel, gamma, *, offset=None, theta0=None, method: str = "bhhh",
             tol: float = 1e-8, max_iter: int = 200, inner_tol: float = 1e-12) -> NFXPResult:
    r"""Maximum likelihood by the nested fixed point.

    Parameters
    ----------
    counts : ndarray of shape (S, K)
        Visits per (state, action), or any non-negative weights (population frequencies).
    features : ndarray of shape (S, K, p)
        ``u_theta = features @ theta + offset``; any normalization (e.g. Rust's
        ``u(x, replace) = -RC``).
    kernel : transition kernel
    gamma : float
        Discount factor ``beta``.
    offset : ndarray of shape (S, K), optional
    theta0 : ndarray of shape (p,), optional
        Start (default 0).
    method : {"bhhh", "bfgs"}
        ``"bhhh"``: ``theta <- theta + lambda (OPG)^{-1} grad`` with step halving until the
        likelihood increases; stops when the per-observation decrement
        ``grad' OPG^{-1} grad / sum(n)`` is below ``tol**2`` or the step is below
        ``tol * max(1, |theta|)``. ``"bfgs"``: scipy's BFGS with the
        analytic gradient (``gtol = tol`` on the per-observation gradient).
    tol : float
    max_iter : int
    inner_tol : float
        Inner fixed-point residual target.
    """
    start = time.perf_counter()
    gamma, X, counts, off, kernel = _nfxp_inputs(features, counts, offset, kernel, gamma)
    theta = np.zeros(X.shape[2]) if theta0 is None else as_float_array(theta0, "theta0", ndim=1).copy()
    evaluate = _Evaluator(X, off, counts, kernel, gamma, dict(tol=inner_tol))
    if method == "bhhh":
        theta, ev, n_iter, converged = _bhhh(evaluate, theta, counts.sum(), tol, max_iter)
    elif method == "bfgs":
        theta, ev, n_iter, converged = _bfgs(evaluate, theta, counts.sum(), tol, max_iter)
    else:
        raise ValueError(f"method must be 'bhhh' or 'bfgs', got {method!r}")
    if not converged:
        warnings.warn(f"NFXP ({method}) did not converge in {max_iter} iterations", ConvergenceWarning, stacklevel=2)
    try:
        cov = np.linalg.inv(ev.opg)
    except np.linalg.LinAlgError:
        cov = np.full(ev.opg.shape, np.nan)
    return NFXPResult(theta, cov, ev.loglik, ev.grad, n_iter, evaluate.evals, converged, ev.V, ev.policy, ev.info,
                      time.perf_counter() - start)


def _nfxp_inputs(features, counts, offset, kernel, gamma) -> tuple:
    """``(gamma, X, counts, offset, kernel)`` checked: features (S, K, p), counts and offset
    (S, K), a kernel on the same S states."""
    gamma = check_gamma(gamma)
    X = check_features(features)
    shape = X.shape[:2]
    counts = check_weights(counts, shape, "counts")
    off = np.zeros(shape) if offset is None else check_table(offset, shape, "offset")
    kernel = _fast_kernel(as_kernel(kernel, shape[1]))
    if kernel.n_states != shape[0]:
        raise ValueError(f"kernel has {kernel.n_states} states but features have {shape[0]}")
    return gamma, X, counts, off, kernel


class _Evaluator:
    """The likelihood at ``theta`` (:func:`_evaluate`), each inner solve warm-started from the
    last one's ``V``; counts the evaluations."""

    def __init__(self, X, offset, counts, kernel, gamma, inner):
        self.X, self.offset, self.counts, self.kernel, self.gamma, self.inner = X, offset, counts, kernel, gamma, inner
        self.V, self.evals = None, 0

    def __call__(self, theta) -> _Evaluation:
        ev = _evaluate(theta, self.X, self.offset, self.counts, self.kernel, self.gamma, self.V, self.inner)
        self.V = ev.V
        self.evals += 1
        return ev


def _bhhh(evaluate: _Evaluator, theta, N, tol, max_iter):
    """BHHH with step halving (see ``fit_nfxp``). Returns ``(theta, evaluation, iterations,
    converged)``."""
    ev = evaluate(theta)
    converged, it = False, 0
    for it in range(1, max_iter + 1):
        direction = _solve_psd(ev.opg, ev.grad)
        decrement = float(ev.grad @ direction) / N
        if decrement <= tol ** 2 or np.max(np.abs(direction)) <= tol * max(1.0, float(np.max(np.abs(theta)))):
            converged = True
            break
        step, improved = 1.0, False
        for _ in range(40):
            trial = evaluate(theta + step * direction)
            if trial.loglik >= ev.loglik - 1e-12 * abs(ev.loglik):
                theta, ev, improved = theta + step * direction, trial, True
                break
            step *= 0.5
        if not improved:
            evaluate.V = ev.V
            break
    return theta, ev, it, converged


def _bfgs(evaluate: _Evaluator, theta, N, tol, max_iter):
    """scipy's BFGS on the per-observation likelihood with the analytic gradient. Returns
    ``(theta, evaluation, iterations, converged)``."""
    cache = {}

    def fun(th):
        ev = evaluate(th)
        cache["ev"], cache["theta"] = ev, th.copy()
        return -ev.loglik / N, -ev.grad / N

    res = minimize(fun, theta, jac=True, method="BFGS", options=dict(gtol=tol, maxiter=max_iter))
    theta = res.x
    ev = cache["ev"] if np.array_equal(cache["theta"], theta) else evaluate(theta)
    converged = bool(res.success) or bool(np.max(np.abs(ev.grad / N)) <= 10 * tol)
    return theta, ev, int(res.nit), converged


def _solve_psd(A, b):
    try:
        return sla.solve(A, b, assume_a="pos")
    except (np.linalg.LinAlgError, ValueError):
        return np.linalg.lstsq(A, b, rcond=None)[0]


# ============================================================================ estimator
class NFXP(LightEstimator):
    """Rust's nested fixed-point maximum likelihood behind the baselines' interface.

    Parameters
    ----------
    features : ndarray of shape (S, K, p)
        Flow utility ``u_theta = features @ theta + offset`` by tabular state and action code.
    gamma : float
        Discount factor ``beta``.
    transition_model : None, kernel, or callable, optional
        None: maximum likelihood from counts (:func:`genpqr.stage2.estimate_transitions`);
        a kernel: known transitions; a callable ``(transitions, n_states, n_actions) -> kernel``
        (e.g. :class:`genpqr.structural.IncrementKernel`).
    offset : ndarray of shape (S, K), optional
    theta0 : ndarray of shape (p,), optional
    method : {"bhhh", "bfgs"}
    tol, max_iter, inner_tol : see ``fit_nfxp``
    feature_names : list of str, optional

    Attributes
    ----------
    theta_, cov_, se_ : estimates, inverse-OPG covariance, standard errors
    loglik_ : float
    kernel_ : TransitionKernel
    result_ : NFXPResult
    fit_time_ : float
        Seconds of :meth:`fit` (kernel estimation included).
    """

    name = "NFXP"

    def __init__(self, features=None, gamma=0.9, transition_model=None, offset=None, theta0=None, method="bhhh",
                 tol=1e-8, max_iter=200, inner_tol=1e-12, feature_names=None):
        self.features = features
        self.gamma = gamma
        self.transition_model = transition_model
        self.offset = offset
        self.theta0 = theta0
        self.method = method
        self.tol = tol
        self.max_iter = max_iter
        self.inner_tol = inner_tol
        self.feature_names = feature_names

    def fit(self, data: Transitions, y=None, sample_weight=None):
        """Fit on transitions with tabular states; ``sample_weight`` (n,) weighs rows."""
        start = time.perf_counter()
        if not isinstance(data, Transitions):
            raise TypeError(f"data must be genpqr.data.Transitions, got {type(data).__name__}")
        if self.features is None:
            raise ValueError("features must be given: an (S, K, p) array with u_theta = features @ theta")
        X = check_features(self.features)
        S, K = X.shape[:2]
        if K != data.n_actions:
            raise ValueError(f"features have {K} action columns but the data has {data.n_actions} actions")
        if sample_weight is None:
            counts = choice_counts(data, S)
        else:
            w = as_float_array(sample_weight, "sample_weight", ndim=1)
            s = check_state_indices(data.states, S, "states")
            counts = np.bincount(s * K + data.actions, weights=w, minlength=S * K).reshape(S, K)
        trans = data.with_next()  # the kernel from complete transitions; the counts from every choice
        if self.transition_model is None:
            kernel, _ = stage2.estimate_transitions(trans.states, trans.actions, trans.next_states, S, K,
                                                     terminated=trans.terminated)
        elif callable(self.transition_model):
            kernel = as_kernel(self.transition_model(trans, S, K), K)
        else:
            kernel = as_kernel(self.transition_model, K)
        self.kernel_ = kernel
        self.encoder_ = data.encoder
        self.n_states_, self.n_actions_ = S, K
        self.gamma_ = check_gamma(self.gamma)
        result = fit_nfxp(counts, X, kernel, self.gamma_, offset=self.offset, theta0=self.theta0, method=self.method,
                          tol=self.tol, max_iter=self.max_iter, inner_tol=self.inner_tol)
        self.result_ = result
        self.theta_, self.cov_, self.se_, self.loglik_ = result.theta, result.cov, result.se, result.loglik
        self.converged_ = result.converged
        self.features_ = X
        self.offset_ = np.zeros((S, K)) if self.offset is None else check_table(self.offset, (S, K), "offset")
        self.fit_time_ = time.perf_counter() - start
        return self

    def _check_fitted(self):
        if not hasattr(self, "theta_"):
            raise exceptions.NotFittedError("this NFXP is not fitted yet; call fit(transitions) first")

    def _rows(self, states):
        self._check_fitted()
        return check_state_indices(as_float_array(states, "states", ndim=2, allow_1d_as_column=True), self.n_states_)

    def _select(self, table, actions):
        if actions is None:
            return table
        codes = self.encoder_.encode(actions)
        return table[np.arange(table.shape[0]), codes]

    def reward(self, states, actions=None) -> np.ndarray:
        """The estimated flow utility ``u_theta_hat``: (n, K), or (n,) at action labels."""
        s = self._rows(states)
        return self._select((self.features_ @ self.theta_ + self.offset_)[s], actions)

    def log_policy(self, states) -> np.ndarray:
        """``log pi_theta_hat(.|s)``, shape (n, K)."""
        return np.log(self.result_.policy[self._rows(states)])

    def summary(self):
        """Estimates, standard errors and their kind (``"OPG"``: the inverse BHHH outer product of
        the scores, conditional on the kernel) as a DataFrame."""
        import pandas as pd

        self._check_fitted()
        names = self.feature_names or [f"theta[{j}]" for j in range(self.theta_.size)]
        return pd.DataFrame({"estimate": self.theta_, "se": self.se_, "se_kind": "OPG"}, index=list(names))

r"""Structural parameters of a linear flow utility by maximum likelihood, with the MLE's
standard errors: what ``genpqr fit --features`` estimates (``--estimator``).

The model (paper Sec. 2; Rust 1987): flow utility ``u_theta(s, a) = features(s, a) @ theta
+ offset(s, a)`` with ``p`` parameters, Gumbel shocks of temperature 1, discount ``gamma``
and a kernel ``P`` (GenPQR's first-stage kernel, held fixed: Rust's two-step partial
likelihood). The choice probabilities are the soft-optimal policy
``pi_theta = softmax(Q_theta)``, ``Q_theta = u_theta + gamma P V_theta``,
``V_theta = logsumexp_a Q_theta``, and the log-likelihood of the observed choices is
``L(theta) = sum_{s,a} n(s,a) log pi_theta(a|s)`` (``n``: :func:`genpqr.structural.ddc.choice_counts`).

Estimators (:func:`estimate_structural`):

* ``"npl"`` (default): Aguirregabiria-Mira's nested pseudo-likelihood iterated to
  convergence, each policy evaluation being GenPQR's exact solve at the current policy
  (:func:`genpqr.structural.ddc.fit_npl`); its fixed point is the MLE.
* ``"nfxp"``: Rust's nested fixed point (:func:`genpqr.structural.nfxp.fit_nfxp`, BHHH), the
  MLE, finished by Newton steps with the analytic Hessian (BHHH stalls a few 1e-6 off the
  maximum at beta = 0.9999, where NFXP's absolute values of order ``1 / (1 - beta)`` leave
  the likelihood too little precision to rank its steps).
* ``"pml"``: Hotz-Miller's two-step pseudo-likelihood (one NPL step from the first stage):
  consistent but sensitive to the first stage when actions are rare.
* ``"projection"``: weighted least squares of GenPQR's reward table on the features
  (:func:`genpqr.structural.ddc.project_reward`): a minimum-distance reading, no likelihood.

Standard errors (:func:`likelihood_derivatives`) are those of the *full* likelihood, the
derivative taken through the fixed point, identical for NPL and NFXP. With
``A = I - gamma P_pi`` (``P_pi`` the state kernel under ``pi_theta``):

* ``dV = A^{-1} sum_a pi x``, ``dQ = x + gamma P dV``, score
  ``d log pi(a|s) = dQ(s,a) - sum_a' pi(a'|s) dQ(s,a')``;
* ``c(s) = Cov_{pi(.|s)}(dQ)`` (p x p), ``d2V = A^{-1} c``, ``d2Q = gamma P d2V`` and
  ``d2 log pi(a|s) = d2Q(s,a) - sum_a' pi d2Q(s,a') - c(s)``;
* OPG (BHHH) ``J = sum n(s,a) score score'``, Hessian ``H = sum n(s,a) d2 log pi``;
  covariances ``J^{-1}`` (``"opg"``, the ``std_error`` column, as Rust's NFXP) and the
  sandwich ``H^{-1} J H^{-1}`` (``"sandwich"``, robust to misspecification of the choice
  model; ``std_error_robust``). Both are conditional on the kernel.

Solves with ``A`` use the *relative-value* form (:func:`relative_solve`): ``A`` has the
eigenvalue ``1 - gamma`` along the constant vector, which makes ``A`` ill-conditioned as
``gamma -> 1`` (``gamma = 0.9999`` in Rust's data); constants cancel in every choice
probability, so the solve pins one state's value and solves for the gain, a system that stays
well conditioned up to ``gamma = 1``.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from .. import tabular
from .._checks import check_gamma, plain
from ..exceptions import ConvergenceWarning, GenPQRWarning, WeakSupportWarning
from .ccp import fit_npl
from .checks import check_features, check_table, check_weights
from .likelihood import LikelihoodDerivatives, likelihood_derivatives, relative_solve
from .nfxp import fit_nfxp
from .projection import project_reward

__all__ = ["ESTIMATORS", "LikelihoodDerivatives", "StructuralFit", "relative_solve", "likelihood_derivatives",
           "estimate_structural", "fit_structural", "MIN_CHOICES_PER_PARAMETER"]

#: Warn when the least chosen action has fewer choices than this per parameter (the logit rule of
#: thumb of 10 events per variable, Peduzzi et al. 1996).
MIN_CHOICES_PER_PARAMETER = 10
ESTIMATORS = ("npl", "nfxp", "pml", "projection")
#: What each estimator's ``std_error`` is (written to parameters.csv and the report).
SE_KINDS = {
    "npl": "MLE, inverse outer product of the scores (OPG/BHHH), conditional on the kernel",
    "nfxp": "MLE, inverse outer product of the scores (OPG/BHHH), conditional on the kernel",
    "pml": "pseudo-likelihood inverse Hessian, conditional on the first stage (ignores its estimation error)",
    "projection": "none (use --bootstrap)",
}


# ============================================================================ estimation
def _inverse(matrix):
    try:
        return np.linalg.inv(matrix)
    except np.linalg.LinAlgError:
        return np.full(matrix.shape, np.nan)


@dataclass(frozen=True)
class StructuralFit:
    """Structural estimates, their standard errors and the fit of the choice model.

    Attributes
    ----------
    estimator : str
        One of :data:`ESTIMATORS`.
    names : list of str
    theta, std_error, std_error_robust : ndarray (p,)
        Estimates, the standard errors of ``se_kind`` and the sandwich (robust) ones (NaN
        where not defined: ``pml`` and ``projection``).
    se_kind : str
    cov, cov_robust : ndarray (p, p)
    loglik : float
        Full log-likelihood ``sum n log pi_theta`` at ``theta`` (every estimator).
    n_choices : int
        Observed choices in the likelihood (``counts.sum()``).
    n_iter : int
        NPL iterations, NFXP outer iterations, 1 for ``pml`` and ``projection``.
    converged : bool
    gradient_norm : float
        ``max |d L / d theta|`` of the full likelihood per choice at ``theta`` (0 at the MLE).
    policy : ndarray (S, K)
        Fitted choice probabilities ``pi_theta``.
    counts : ndarray (S, K)
    seconds : float
    features : ndarray (S, K, p)
        The features ``x`` of ``u_theta = x @ theta + offset`` (what a counterfactual re-solves).
    offset : ndarray (S, K)
    kernel : TransitionKernel
        The transition kernel the likelihood held fixed.
    gamma : float
        The discount.
    action_labels : ndarray (K,) or None
    """

    estimator: str
    names: list
    theta: np.ndarray
    std_error: np.ndarray
    std_error_robust: np.ndarray
    se_kind: str
    cov: np.ndarray = field(repr=False)
    cov_robust: np.ndarray = field(repr=False)
    loglik: float = np.nan
    n_choices: int = 0
    n_iter: int = 0
    converged: bool = True
    gradient_norm: float = np.nan
    policy: np.ndarray = field(default=None, repr=False)
    counts: np.ndarray = field(default=None, repr=False)
    seconds: float = 0.0
    features: np.ndarray = field(default=None, repr=False)
    offset: np.ndarray = field(default=None, repr=False)
    kernel: object = field(default=None, repr=False)
    gamma: float = np.nan
    action_labels: object = field(default=None, repr=False)

    def flow_utility(self, theta=None) -> np.ndarray:
        """``u_theta = features @ theta + offset``, shape (S, K) (default: the estimate)."""
        theta = self.theta if theta is None else np.asarray(theta, dtype=np.float64)
        if theta.shape != self.theta.shape:
            raise ValueError(f"theta must have shape {self.theta.shape}, got {theta.shape}")
        return self.features @ theta + self.offset

    def refit(self, model) -> "StructuralFit":
        """The same specification (estimator, features, offset, names) re-estimated on another
        fitted exact-path GenPQR (e.g. a bootstrap replicate): its choices, kernel, discount and
        first stage. The replicate's warnings are not repeated."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GenPQRWarning)
            return fit_structural(model, self.features, names=self.names, estimator=self.estimator,
                                  offset=self.offset)

    def counterfactual(self, parameter_change=None, reward_change=None, transitions=None, gamma=None, *, model=None,
                       **kwargs):
        """The structural route's counterfactual on this fit (:func:`genpqr.counterfactual.counterfactual`):
        the soft-optimal policy of ``x @ theta' + delta`` under ``(P', gamma')`` against the fitted
        model, with delta-method intervals. ``parameter_change``: ``{name: number or "*F", "+D",
        "-D", "=V"}`` (e.g. ``{"RC": "*2"}``). With ``model`` (the fitted GenPQR) the nonparametric
        answer and the gap are reported too, and ``n_boot`` bootstraps over episodes.
        Other keyword arguments as in :meth:`genpqr.GenPQR.counterfactual`."""
        from ..counterfactual import counterfactual

        kwargs.setdefault("route", "structural")
        return counterfactual(model, reward_change, transitions, gamma, parameter_change=parameter_change,
                              structural=self, **kwargs)

    def wald_interval(self, level: float = 0.95):
        """``theta -+ z std_error`` (NaN where there is no standard error)."""
        from scipy.stats import norm

        z = norm.ppf(0.5 + level / 2)
        return self.theta - z * self.std_error, self.theta + z * self.std_error


def _start_policy(start_policy, shape):
    """A strictly positive start for NPL: the first stage mixed with 1e-6 of the uniform
    (a clipped or unclipped first stage, even one with exact zeros, works)."""
    if start_policy is None:
        return np.full(shape, 1.0 / shape[1])
    pi = np.clip(np.asarray(start_policy, dtype=np.float64), 0.0, None)
    total = pi.sum(axis=1, keepdims=True)
    pi = np.where(total > 0, pi / np.where(total > 0, total, 1.0), 1.0 / shape[1])
    return (1.0 - 1e-6) * pi + 1e-6 / shape[1]


def _at_maximum(d: LikelihoodDerivatives, n_choices: float) -> bool:
    """A local maximum of the full likelihood to rounding: the Newton decrement per choice
    ``g' (-H)^{-1} g / n`` is below 1e-14 and the Hessian is negative definite."""
    if not np.all(np.linalg.eigvalsh(d.hessian) < 0):
        return False
    return float(d.grad @ np.linalg.solve(-d.hessian, d.grad)) / n_choices <= 1e-14


def _check_identified(opg, names):
    """Warn (``GenPQRWarning``) when the information matrix is (nearly) singular: some
    combination of the features does not move any choice probability (e.g. a feature equal on
    every action, or two collinear features), so the parameters are not identified."""
    eigvals, eigvecs = np.linalg.eigh(opg)
    if eigvals.size and eigvals[0] > 1e-10 * max(eigvals[-1], 1e-300):
        return
    direction = eigvecs[:, 0]
    involved = [names[j] for j in np.flatnonzero(np.abs(direction) > 0.1)]
    warnings.warn(f"the structural parameters are not identified by the choices: the combination of {involved} "
                  "does not change any choice probability (a feature equal on every action at each state, or "
                  "collinear features); their standard errors are meaningless", GenPQRWarning, stacklevel=3)


def _safeguarded_npl(policy0, X, n, kernel, gamma, off, tol, max_iter):
    """NPL iterated to convergence, checked to be the MLE.

    Every NPL fixed point is a stationary point of the full likelihood, but from a poor start
    NPL can settle on a spurious one (it did from uniform probabilities at gamma = 0.9999 before
    the policy evaluation used :func:`relative_solve`), or stop early. The result is accepted when
    NPL converged, the full Hessian there is negative definite and the likelihood is at least that
    of the first (PML) iterate -- a consistent estimate the MLE cannot be worse than. Otherwise
    damped Newton on the full likelihood with the analytic Hessian (:func:`_maximize_full`,
    monotone in the likelihood) continues from the better of the two, with a
    ``ConvergenceWarning``.
    Returns ``(theta, policy, iterations, converged)``."""
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always", ConvergenceWarning)
        try:
            res = fit_npl(policy0, X, n, kernel, gamma, offset=off, max_iter=max_iter, tol=tol)
        except ValueError:  # an iterate's policy underflowed to 0/1: a spurious, degenerate fixed point
            res = fit_npl(policy0, X, n, kernel, gamma, offset=off, max_iter=1, tol=tol)
            res = replace(res, theta=np.full_like(res.theta, np.nan), converged=False)
    first = likelihood_derivatives(res.history[0], X, n, kernel, gamma, offset=off)
    final_ll, negative_definite = -np.inf, False
    if np.all(np.isfinite(res.theta)):
        final = likelihood_derivatives(res.theta, X, n, kernel, gamma, offset=off, policy0=res.policy)
        final_ll = final.loglik
        negative_definite = bool(np.all(np.linalg.eigvalsh(final.hessian) < 0))
    scale = 1e-9 * max(1.0, abs(first.loglik))
    if res.converged and negative_definite and final_ll >= first.loglik - scale:
        return res.theta, res.policy, res.n_iter, True
    better = res.theta if final_ll >= first.loglik else res.history[0]  # NaN compares False
    why = (f"NPL {'converged' if res.converged else 'did not converge'} in {res.n_iter} iterations to a point "
           f"with log-likelihood {final_ll:.6g} (first step: {first.loglik:.6g}"
           f"{'' if negative_definite else '; not a local maximum'})")
    warnings.warn(f"{why}; continued with Newton's method on the full likelihood from the better point",
                  ConvergenceWarning, stacklevel=3)
    theta, policy, n_newton, converged = _maximize_full(better, X, n, kernel, gamma, off, max_iter)
    return theta, policy, res.n_iter + n_newton, converged


def _maximize_full(theta, X, n, kernel, gamma, off, max_iter):
    """Damped Newton on the full likelihood with the analytic Hessian (BHHH's OPG direction
    where the Hessian is not negative definite), step halving until the likelihood does not
    fall. Returns ``(theta, policy, iterations, converged)``."""
    d = likelihood_derivatives(theta, X, n, kernel, gamma, offset=off)
    converged, it = False, 0
    for it in range(1, max_iter + 1):
        newton = bool(np.all(np.linalg.eigvalsh(d.hessian) < 0))
        try:
            direction = np.linalg.solve(-d.hessian if newton else d.opg, d.grad)
        except np.linalg.LinAlgError:  # singular OPG: no direction (e.g. scores vanish on separated data)
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
            converged = _at_maximum(d, n.sum())
            break
        theta, d = theta + step * direction, trial
    return theta, d.policy, it, converged


def estimate_structural(estimator: str, features, counts, kernel, gamma, *, offset=None, start_policy=None,
                        reward_table=None, names=None, tol: float = 1e-10, max_iter: int = 200,
                        action_labels=None) -> StructuralFit:
    r"""Estimate ``theta`` of ``u_theta = features @ theta + offset`` by ``estimator``.

    Parameters
    ----------
    estimator : {"npl", "nfxp", "pml", "projection"}
        See the module notes.
    features : ndarray (S, K, p)
        Any parametrization of the flow utility (the likelihood depends on behaviour only);
        ``projection`` needs the normalization of ``reward_table``.
    counts : ndarray (S, K)
        Choices per (state, action) (:func:`genpqr.structural.ddc.choice_counts`).
    kernel : transition kernel
    gamma : float
    offset : ndarray (S, K), optional
    start_policy : ndarray (S, K), optional
        First-stage choice probabilities: NPL's start and PML's plug-in (default uniform).
    reward_table : ndarray (S, K)
        ``projection`` only: GenPQR's reward table; the projection weights are ``counts``.
    names : list of str, optional
    tol : float
        NPL: parameter-change tolerance; NFXP: Newton-decrement tolerance.
    max_iter : int
    action_labels : sequence, optional
        The actions' labels (for messages).

    Warns (:func:`_check_fit`): ``WeakSupportWarning`` (rarest action below
    :data:`MIN_CHOICES_PER_PARAMETER` choices per parameter), ``ConvergenceWarning``,
    ``GenPQRWarning`` (parameters not identified, or separated choices: no MLE).
    """
    start = time.perf_counter()
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {list(ESTIMATORS)}, got {estimator!r}")
    gamma = check_gamma(gamma)
    X = check_features(features)
    shape = X.shape[:2]
    n = check_weights(counts, shape, "counts")
    off = np.zeros(shape) if offset is None else check_table(offset, shape, "offset")
    kernel = tabular.as_kernel(kernel, shape[1])
    names = list(names) if names is not None else [f"theta[{j}]" for j in range(X.shape[2])]
    policy0, n_iter, converged, pml_cov = None, 1, True, None
    if estimator == "npl":
        theta, policy0, n_iter, converged = _safeguarded_npl(_start_policy(start_policy, shape), X, n, kernel,
                                                             gamma, off, tol, max_iter)
    elif estimator == "pml":
        res = fit_npl(_start_policy(start_policy, shape), X, n, kernel, gamma, offset=off, max_iter=1, tol=tol)
        theta, policy0, pml_cov = res.theta, res.policy, res.cov
    elif estimator == "nfxp":
        theta, policy0, n_iter, converged = _finished_nfxp(X, n, kernel, gamma, off, tol, max_iter)
    else:
        if reward_table is None:
            raise ValueError("estimator 'projection' needs the reward table")
        theta = project_reward(reward_table, X, n, offset=off).theta
    d = likelihood_derivatives(theta, X, n, kernel, gamma, offset=off,
                               policy0=None if policy0 is None or np.min(policy0) <= 0 else policy0)
    cov, cov_robust = _covariances(estimator, d, pml_cov, X.shape[2])
    _check_fit(estimator, d, n, names, policy0, converged, n_iter, action_labels)
    return StructuralFit(estimator, names, np.asarray(theta, dtype=np.float64), _std_errors(cov),
                         _std_errors(cov_robust), SE_KINDS[estimator], cov, cov_robust, d.loglik,
                         int(round(n.sum())), int(n_iter), bool(converged), float(np.max(np.abs(d.grad)) / n.sum()),
                         d.policy, n, time.perf_counter() - start, X, off, kernel, float(gamma),
                         None if action_labels is None else np.asarray(action_labels))


def fit_structural(model, features, *, names=None, estimator: str = "npl", offset=None, **kwargs) -> StructuralFit:
    """:func:`estimate_structural` on a fitted exact-path :class:`~genpqr.GenPQR`: its choice
    counts (every observed choice; kept in a model saved without its data), kernel, discount and
    action labels; its first-stage choice probabilities start NPL and plug into PML; its reward
    table is what ``projection`` projects.

    Parameters
    ----------
    model : GenPQR
        Fitted with ``q_model="exact"``.
    features : ndarray (S, K, p)
    names : list of str, optional
    estimator : {"npl", "nfxp", "pml", "projection"}
    offset : ndarray (S, K), optional
    **kwargs
        ``tol``, ``max_iter`` of :func:`estimate_structural`.

    Returns
    -------
    StructuralFit
        Ready for :meth:`StructuralFit.counterfactual` and ``model.counterfactual(structural=...)``.
    """
    stage2 = getattr(model, "stage2_", None)
    if stage2 is None or not hasattr(stage2, "recovery") or not hasattr(stage2, "counts"):
        raise ValueError("fit_structural needs a GenPQR fitted on the exact tabular path (q_model='exact'), got "
                         f"{type(model).__name__}{'' if stage2 is None else ' fitted on another path'}")
    rec = stage2.recovery
    labels = getattr(getattr(model, "encoder_", None), "labels", None)
    return estimate_structural(estimator, features, np.asarray(stage2.counts), stage2.kernel, model.gamma_,
                               offset=offset, start_policy=np.exp(rec.log_policy), reward_table=rec.reward,
                               names=names, action_labels=labels, **kwargs)


def _check_fit(estimator, d, n, names, policy0, converged, n_iter, action_labels):
    """The warnings of a structural fit: parameters not identified, a rare action, separated
    choices (no MLE), no convergence."""
    _check_identified(d.opg, names)
    _check_rare_action(n, names, action_labels)
    if estimator != "projection":  # PML: its own (pseudo-likelihood) choice probabilities
        _check_separation(policy0 if estimator == "pml" else d.policy, n)
    if not converged:
        warnings.warn(f"the {estimator} estimator did not converge in {n_iter} iterations (max |score| per choice "
                      f"{float(np.max(np.abs(d.grad)) / n.sum()):.2e}): the estimates and standard errors are not "
                      f"those of a maximum; try another --estimator or check the features", ConvergenceWarning,
                      stacklevel=3)


def _check_rare_action(counts, names, action_labels=None):
    """Warn (``WeakSupportWarning``) when the least chosen action has fewer than
    :data:`MIN_CHOICES_PER_PARAMETER` choices per parameter: the likelihood then rests on a handful of
    events, its small-sample bias is noticeable and it can be unstable (on 100 simulated panels of
    issue 9's bus design cut to 16 months, 2-12 replacements each, three estimates of RC were 3.5,
    24 and 124 times the truth, with standard errors to match)."""
    per_action = np.asarray(counts, dtype=np.float64).sum(axis=0)
    k = int(np.argmin(per_action))
    rare, p = float(per_action[k]), len(names)
    if rare >= MIN_CHOICES_PER_PARAMETER * p:
        return
    action = f"code {k}" if action_labels is None else repr(plain(action_labels[k]))
    warnings.warn(f"the structural estimates rest on {rare:.0f} choice(s) of the rarest action ({action}) for {p} "
                  f"parameter(s), fewer than {MIN_CHOICES_PER_PARAMETER} per parameter: with so few events the MLE "
                  "has a noticeable small-sample bias and can be unstable (it runs off to very large values, with "
                  "standard errors to match, when the rare choices sit at a few states), and its standard errors and "
                  "Wald intervals rest on asymptotics; read them as rough, check them with --bootstrap, or use fewer "
                  "parameters or more data", WeakSupportWarning, stacklevel=4)


def _check_separation(policy, counts):
    """Warn (``GenPQRWarning``) when the fitted model gives every observed choice a probability
    above ``1 - 1e-6``: the choices are (almost) perfectly predicted, the likelihood keeps rising
    toward parameters at infinity and the MLE does not exist (e.g. one replacement in the data)."""
    n = np.asarray(counts, dtype=np.float64)
    worst = float(np.min(policy[n > 0])) if np.any(n > 0) else 1.0
    if worst > 1.0 - 1e-6:
        warnings.warn(f"the fitted model predicts every observed choice with probability above {worst:.6f}: the "
                      "choices are perfectly separated by the features (e.g. the rare action occurs only where the "
                      "model can give it probability 1), the likelihood rises toward parameters at infinity and the "
                      "maximum likelihood estimate does not exist; the estimates and standard errors printed are "
                      "where the optimizer stopped, not estimates", GenPQRWarning, stacklevel=4)


def _finished_nfxp(X, n, kernel, gamma, off, tol, max_iter):
    """NFXP (BHHH) finished by Newton's method on the full likelihood: BHHH stalls at the rounding
    floor of NFXP's absolute values near beta = 1 (a few 1e-6 off the MLE at beta = 0.9999), and
    Newton steps with the analytic Hessian in relative values finish it. NFXP's convergence
    warnings are passed on only when the finish does not converge.
    Returns ``(theta, policy, iterations, converged)``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        res = fit_nfxp(n, X, kernel, gamma, offset=off, tol=tol, max_iter=max_iter)
    theta, policy, n_newton, converged = _maximize_full(res.theta, X, n, kernel, gamma, off, max_iter)
    if converged:
        caught.clear()
    for w in caught:
        warnings.warn(w.message, w.category, stacklevel=3)
    return theta, policy, res.n_iter + n_newton, converged


def _covariances(estimator, d: LikelihoodDerivatives, pml_cov, p):
    """``(cov, cov_robust)`` of ``estimator``: the MLE's inverse OPG and sandwich (NPL, NFXP), the
    pseudo-likelihood's inverse Hessian (PML; no sandwich), none (projection)."""
    if estimator in ("npl", "nfxp"):
        h_inv = _inverse(-d.hessian)
        return _inverse(d.opg), h_inv @ d.opg @ h_inv
    if estimator == "pml":
        return pml_cov, np.full_like(pml_cov, np.nan)
    nan = np.full((p, p), np.nan)
    return nan, nan


def _std_errors(cov):
    """Square roots of the covariance's diagonal; NaN where it is not finite or negative (an
    inverse of a matrix that is not positive definite: no standard error, rather than 0)."""
    diag = np.diag(cov) if np.all(np.isfinite(cov)) else np.full(cov.shape[0], np.nan)
    return np.sqrt(np.where(diag >= 0, diag, np.nan))

r"""Structural estimation with latent types (finite mixtures over episodes): the full-information
mixture MLE and the sequential CCP-EM of Arcidiacono and Miller (2011), with the mixture
likelihood's standard errors, AIC/BIC and the posterior type probabilities per episode.

The model and the augmented space on which every type is one dynamic logit:
``genpqr.structural._type_model``. Estimators (:func:`estimate_types`, also
``estimate_structural(..., n_types=M, episodes=...)``):

* ``"npl"`` / ``"nfxp"``: the **full-information MLE**. EM: the E-step gives each episode its
  posterior type probabilities ``q_{e m}`` (``genpqr.stage1._latent_types.type_posteriors``); the M-step
  maximizes ``sum_m sum_{s,a} n_m(s,a) log pi_m(a|s)`` with the weighted counts ``n_m`` -- the
  single-type estimator (NPL or NFXP, iterated to convergence) on the augmented space -- and
  the mixing proportions (``genpqr.stage1._latent_types.mixing_log_prior``, a multinomial logit with
  covariates). EM stops when the log-likelihood gains less than ``em_tol`` per episode (or
  before a step that would lower it: a numerical failure of the M-step); Newton steps on the
  mixture likelihood (analytic per-episode scores, Hessian by differences of the gradient; the
  OPG where it is not negative definite) finish it to the maximum, converged when the Newton
  decrement per episode is at rounding level. Both step on the directions that move some choice
  probability (``_identified_basis``): along a flat one (exactly collinear features) the logit's
  and the Hessian's solves are singular, and a step there ran off to 1e15, cancelling every digit
  of the identified combinations.
  Standard errors: the inverse OPG of the per-episode scores of *all* parameters, mixing ones
  included (``std_error``), and the sandwich ``H^-1 J H^-1`` (``std_error_robust``); the
  bootstrap over episodes by :meth:`TypedStructuralFit.bootstrap`. All conditional on the kernel.
* ``"ccp-em"``: the **sequential CCP-EM** (Arcidiacono-Miller's estimator with CCP updating).
  Each iteration: M-step = Hotz-Miller's pseudo-likelihood (one NPL step,
  ``genpqr.structural._ccp.fit_npl`` with ``max_iter=1``) on the augmented space at the
  current type-specific CCPs; the mixing step; the CCPs updated from the model
  (``ccp_update="model"``: ``pi_m <- Lambda(theta, pi_m)``) or by weighted frequencies
  (``"frequency"``: ``(n_m(s,a) + Lambda(theta, pi_m)(a|s)) / (n_m(s) + 1)``, one pseudo-choice
  from the model so unvisited states keep a probability); the E-step with the pseudo-likelihood's
  choice probabilities. It stops when ``theta`` changes by less than ``em_tol``. No analytic
  standard error (use :meth:`TypedStructuralFit.bootstrap`).

Types are labelled by their first type-specific parameter, ascending. With ``n_types=1`` the
estimates are those of :func:`genpqr.structural.estimate_structural` on the counts
(the standard errors then are the per-episode OPG, clustered by episode). Choosing ``M``:
``loglik``, ``aic`` (``2 k - 2 L``), ``bic`` (``k log(n_episodes) - 2 L``, ``k`` all parameters);
a :class:`~genpqr.exceptions.LatentTypeWarning` by the rule the nonparametric types share
(``genpqr.stage1._latent_types.latent_type_warnings``): the types are not separated (the posteriors moved
less than ``MIN_SEPARATION``, a quarter, of the way from the prior to certain types) or a
type is empty (its posteriors sum to less than one episode).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..data._progress import bar_width
from ..exceptions import ConvergenceWarning, GenPQRWarning, LatentTypeWarning
from ..messages import Mention, Message
from ..stage1._latent_types import (SEPARATION_WARN, latent_type_warnings, mixing_log_prior, separation_share,
                                    type_posteriors)
from ._ccp import fit_npl
from ._identification import generalized_inverse, identification, identified_basis
from ._likelihood import likelihood_derivatives
from ._maximize import finished_nfxp, safeguarded_npl, start_policy_of
from ._results import LikelihoodResults, StructuralSummary, check_level, std_errors
from ..stage1._stage1 import progress_bar
from ._type_model import (EpisodeChoices, Mixing, as_episode_choices, build_type_space, evaluate_mixture,
                          mixture_hessian)

__all__ = ["LatentTypeWarning", "TYPE_ESTIMATORS", "MIN_SEPARATION", "TypedStructuralFit", "TypeBootstrap",
           "estimate_types", "m_step", "check_types", "standard_error_message", "separation_message"]

TYPE_ESTIMATORS = {  # the estimators with latent types and what each is
    "npl": "full-information mixture MLE: EM with an NPL M-step, finished by Newton steps",
    "nfxp": "full-information mixture MLE: EM with an NFXP M-step, finished by Newton steps",
    "ccp-em": "sequential CCP-EM (Arcidiacono-Miller 2011): pseudo-likelihood M-steps with updated type CCPs",
}
MIN_SEPARATION = SEPARATION_WARN  # the shared threshold (genpqr.stage1.latent_type_warnings)
NEWTON_MAX_ITER = 50  # Newton steps on the mixture likelihood at most (a parameter running off: no maximum)


@dataclass(frozen=True)
class TypeBootstrap:
    """Bootstrap over episodes of a typed fit: ``replicates`` (B, P + A) in the order of ``names``
    (structural, then mixing parameters), their ``std_error``; ``failed``: replicates dropped."""

    names: list
    replicates: np.ndarray
    failed: int = 0

    @property
    def std_error(self) -> np.ndarray:
        return self.replicates.std(axis=0, ddof=1)


@dataclass(frozen=True, eq=False)
class TypedStructuralFit(LikelihoodResults):
    """A structural fit with latent types (:func:`estimate_types`); statsmodels' names over every
    parameter, mixing ones included (``LikelihoodResults``;
    ``nobs``: the episodes).

    Attributes
    ----------
    estimator : str
    names : list of str
        The ``P`` structural parameters (``"RC[type 1]"``, shared ``"theta11"``).
    theta, std_error, std_error_robust : ndarray (P,)
    mixing_names : list of str
    mixing_params, mixing_std_error : ndarray (A,)
        Multinomial-logit coefficients of the mixing proportions (type 0 the base).
    mixing_proportions, mixing_proportions_se : ndarray (M,)
        Mean proportions over episodes, with delta-method standard errors.
    posteriors : ndarray (n_episodes, M)
        Posterior type probabilities per episode, rows in the order of ``episode_labels``.
    episode_labels : ndarray (n_episodes,)
    cov, cov_robust : ndarray (P + A, P + A)
        Inverse OPG of the per-episode scores and the sandwich (NaN for ``"ccp-em"``); where the
        OPG is singular (``identification``), the generalized inverses on the identified directions.
    loglik : float
        The mixture log-likelihood at the estimate.
    n_types, n_choices, n_episodes : int
    converged : bool
    iterations : dict
    convergence : str
    separation : float
        ``genpqr.stage1._latent_types.separation_share`` of the posteriors.
    seconds : float
    log_prior : ndarray (M,) or (n_episodes, M)
        Log mixing proportions at the estimate (per episode with mixing covariates).
    identification : genpqr.structural.identification.Identification or None
        Which of the ``P + A`` parameters (structural, then mixing) the choices identify: the
        OPG's null space (a direction that changes no episode's likelihood: too many types for the
        data, a feature that moves no choice) and the identified combinations of the others, as
        for a single-type fit; a parameter not identified has no estimate or standard error in
        :meth:`to_frame` (``identified`` False). None for ``"ccp-em"`` (no covariance).
    mixing_separated : tuple of str
        The mixing coefficients whose maximum likelihood estimate is at infinity: covariates that
        separate the types perfectly (``_separated_mixing``); ``mixing_params`` holds where the
        optimizer stopped, :meth:`to_frame` shows them as ``+-inf`` with no standard error.
    """

    estimator: str
    names: list
    theta: np.ndarray
    std_error: np.ndarray
    std_error_robust: np.ndarray
    mixing_names: list
    mixing_params: np.ndarray
    mixing_std_error: np.ndarray
    mixing_proportions: np.ndarray
    mixing_proportions_se: np.ndarray
    posteriors: np.ndarray = field(repr=False)
    episode_labels: np.ndarray = field(repr=False)
    cov: np.ndarray = field(repr=False)
    cov_robust: np.ndarray = field(repr=False)
    loglik: float
    n_types: int
    n_choices: int
    n_episodes: int
    converged: bool
    iterations: dict
    convergence: str
    separation: float
    seconds: float
    space: object = field(default=None, repr=False)
    data: EpisodeChoices = field(default=None, repr=False)
    policy: np.ndarray = field(default=None, repr=False)
    spec: dict = field(default_factory=dict, repr=False)
    log_prior: np.ndarray | None = field(default=None, repr=False)
    identification: object = field(default=None, repr=False)
    mixing_separated: tuple = ()

    @property
    def identified(self) -> np.ndarray:
        """Per parameter, structural then mixing: the choices identify it (see ``identification``)."""
        ident = self.identification
        return np.ones(self.n_params, dtype=bool) if ident is None else np.asarray(ident.identified)

    def _maximizes(self) -> bool:
        return True  # every estimator of a mixture reports its likelihood's AIC and BIC

    @property
    def n_params(self) -> int:
        """All estimated parameters, mixing ones included."""
        return int(self.theta.size + self.mixing_params.size)

    se_label = property(lambda self: "OPG" if np.any(np.isfinite(self.std_error)) else "none")

    @property
    def params_(self) -> pd.Series:
        """The structural estimates, indexed by parameter name."""
        return pd.Series(self.theta, index=pd.Index(list(self.names), name="parameter"), name="estimate")

    def type_params(self) -> pd.DataFrame:
        """Each type's parameters (rows ``type 0..M-1``, columns the base parameter names; shared
        parameters repeat), with ``mixing_proportion``."""
        table = pd.DataFrame(self.space.type_params(self.theta), columns=list(self.space.base_names),
                             index=pd.Index(range(self.n_types), name="type"))
        table["mixing_proportion"] = self.mixing_proportions
        return table

    def type_policy(self, m: int) -> np.ndarray:
        """Type ``m``'s fitted choice probabilities, shape (S, K)."""
        S = self.space.n_states
        return self.policy[m * S:(m + 1) * S]

    def posterior_frame(self) -> pd.DataFrame:
        """One row per episode: ``episode`` and ``posterior_type_m`` for each type (``types.csv``)."""
        frame = pd.DataFrame(self.posteriors, columns=[f"posterior_type_{m}" for m in range(self.n_types)])
        frame.insert(0, "episode", self.episode_labels)
        return frame

    def to_frame(self, level: float = 0.95) -> pd.DataFrame:
        """One row per parameter, structural then mixing: ``estimate, std_error, std_error_kind, z,
        p_value, ci_low, ci_high, std_error_robust`` (as :meth:`StructuralFit.to_frame`)."""
        from scipy.stats import norm

        level = check_level(level)
        hidden = np.where(self.identified, 1.0, np.nan)  # not identified: no estimate or standard error
        combos = [c for c in getattr(self.identification, "combinations", ())
                  if not set(c.coefficients) & set(self.mixing_separated)]
        params = np.concatenate([self.theta, self.mixing_params])
        at_infinity = np.isin(list(self.names) + list(self.mixing_names), list(self.mixing_separated))
        est = np.concatenate([np.where(at_infinity, np.sign(params) * np.inf, params * hidden),
                              [c.estimate for c in combos]])
        se = np.concatenate([np.concatenate([self.std_error, self.mixing_std_error]) * hidden,
                             [c.std_error for c in combos]])
        se[:at_infinity.size][at_infinity] = np.nan  # the MLE is at infinity: no standard error
        robust = np.concatenate([np.where(at_infinity, np.nan, std_errors(self.cov_robust) * hidden),
                                 np.full(len(combos), np.nan)])
        z = est / se
        half = norm.ppf(0.5 + level / 2) * se
        names = list(self.names) + list(self.mixing_names) + [c.describe() for c in combos]
        return pd.DataFrame({"estimate": est, "std_error": se, "std_error_kind": self.se_label, "z": z,
                             "p_value": 2.0 * norm.sf(np.abs(z)), "ci_low": est - half, "ci_high": est + half,
                             "std_error_robust": robust,
                             "identified": np.concatenate([self.identified | at_infinity,
                                                           np.ones(len(combos), dtype=bool)])},
                            index=pd.Index(names, name="parameter"))

    def _summary(self, level: float = 0.95) -> StructuralSummary:
        """A statsmodels-style summary with the per-type parameters, the mixing parameters, the
        mixing proportions, AIC/BIC and the separation of the types."""
        header = [("Estimator", f"{self.estimator}: {TYPE_ESTIMATORS[self.estimator]}"),
                  ("Log-likelihood", f"{self.loglik:.4f}"), ("Types", f"{self.n_types}"),
                  ("Episodes", f"{self.n_episodes}"), ("Choices", f"{self.n_choices}"),
                  ("Parameters", f"{self.n_params}"), ("AIC", f"{self.aic:.3f}"), ("BIC", f"{self.bic:.3f}"),
                  ("Iterations", self.convergence),
                  ("Std. errors", "OPG of the per-episode mixture scores, conditional on the kernel"
                   if self.se_label == "OPG" else "none (use bootstrap over episodes)")]
        props = ", ".join(f"type {m} {p:.4f}" + (f" (SE {s:.4f})" if np.isfinite(s) else "")
                          for m, (p, s) in enumerate(zip(self.mixing_proportions, self.mixing_proportions_se)))
        notes = [f"mixing proportions (mean over episodes): {props}",
                 f"separation of the types (mean total-variation distance of posteriors from prior): "
                 f"{self.separation:.3f}"]
        return StructuralSummary(header, self.to_frame(level), check_level(level), notes)

    def bootstrap(self, n_boot: int = 100, *, random_state=None, progress: bool = False) -> TypeBootstrap:
        """Re-estimate on ``n_boot`` resamples of the episodes (with replacement), each started at
        this estimate; the replicates of the structural and mixing parameters."""
        from ..data._validation import check_random_state

        rng = check_random_state(random_state)
        start = np.concatenate([self.theta, self.mixing_params])
        rows, failed = [], 0
        iterator = range(int(n_boot))
        if progress:
            from tqdm.auto import tqdm

            iterator = tqdm(iterator, desc="bootstrap over episodes", ncols=bar_width())
        covariates = self.spec.get("mixing_covariates")
        for _ in iterator:
            draw = rng.integers(0, self.n_episodes, self.n_episodes)
            spec = dict(self.spec, theta0=start, warn=False,
                        mixing_covariates=None if covariates is None else np.asarray(covariates)[draw])
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", GenPQRWarning)
                    fit = estimate_types(self.estimator, episodes=self.data.subset(draw), **spec, progress=False)
            except (ValueError, np.linalg.LinAlgError):
                failed += 1
                continue
            rows.append(np.concatenate([fit.theta, fit.mixing_params]))
        return TypeBootstrap(list(self.names) + list(self.mixing_names), np.array(rows), failed)


def _inverse(A) -> np.ndarray:
    try:
        return np.linalg.inv(A)
    except np.linalg.LinAlgError:
        return np.full(A.shape, np.nan)


def _inner(estimator, X, n, kernel, gamma, off, policy, tol, max_iter):
    """The single-type MLE on (augmented) counts: ``(theta, policy)``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if estimator == "nfxp":
            theta, policy, _, _ = finished_nfxp(X, n, kernel, gamma, off, tol, max_iter)
        else:
            theta, policy, _, _ = safeguarded_npl(policy, X, n, kernel, gamma, off, tol, max_iter)
    return np.asarray(theta, dtype=np.float64), policy


def m_step(space, data: EpisodeChoices, weights, *, estimator: str = "npl", start_policy=None, tol: float = 1e-10,
           max_iter: int = 200) -> np.ndarray:
    """The M-step for the structural parameters at fixed posterior weights (n_episodes, M): the
    single-type MLE (``"npl"`` or ``"nfxp"``) on the augmented space with the weighted counts
    (``TypeSpace.counts``). Returns ``theta`` (P,)."""
    n = space.counts(data, weights)
    policy = start_policy_of(start_policy, n.shape)
    return _inner(estimator, space.features, n, space.kernel, space.gamma, space.offset, policy, tol, max_iter)[0]


def _relabel(space, data, mixing, covariates, params, q, policy):
    """Types in canonical order (:meth:`TypeSpace.canonical_order`), mixing refitted to the
    relabelled posteriors; returns ``(params, policy)``."""
    P = len(space.names)
    order = space.canonical_order(params[:P])
    theta = space.permute(params[:P], order)
    policy = policy.reshape(space.n_types, space.n_states, -1)[order].reshape(policy.shape)
    lp, coef = mixing_log_prior(q[:, order], covariates)
    return np.concatenate([theta, mixing.alpha_of(lp, coef)]), policy


def _permuted(space, mixing, params, order) -> np.ndarray:
    """``params`` with type ``order[m]`` relabelled ``m``: the type-specific parameters permuted, the
    mixing logit's rows permuted and re-based on the new type 0 (the same proportions)."""
    P = len(space.names)
    coef = np.zeros((space.n_types, mixing.design.shape[1]))
    coef[1:] = np.reshape(params[P:], coef[1:].shape)
    coef = coef[np.asarray(order)] - coef[order[0]]
    return np.concatenate([space.permute(params[:P], order), coef[1:].ravel()])


def _step(bar, text: str) -> None:
    """One iteration on the fit's bar, ``text`` its postfix (the log likelihood and its gain)."""
    bar.set_postfix_str(text, refresh=False)
    bar.update()


def _identified_basis(space, params, policy) -> np.ndarray | None:
    """An orthonormal basis (P, r) of the structural directions that move some choice probability,
    or None when every direction does. A direction ``v`` with ``d log pi_m(a|s) / d theta . v = 0``
    at every type, state and action (exactly collinear type-specific features: ``RC`` and a copy
    of its column) changes no likelihood, of any weights: the M-step's logit and the Newton
    step are singular along it, and a solve there runs off to ``1e15`` along ``v`` (cancelling
    every digit of the identified combinations). The null space of the Gram matrix of those
    scores (eigenvalues at most ``IDENTIFICATION_RTOL`` times the largest, as for the
    covariance) is the set of such directions; the steps are taken on its complement."""
    P = len(space.names)
    zero = np.zeros((space.n_types * space.n_states, space.n_actions))
    try:
        d = likelihood_derivatives(params[:P], space.features, zero, space.kernel, space.gamma, offset=space.offset,
                                   policy0=policy)
    except (ValueError, np.linalg.LinAlgError):  # a degenerate start: no reduction (the steps say what they can)
        return None
    return identified_basis(np.einsum("sap,saq->pq", d.scores, d.scores))


def _em(estimator, space, data, mixing, covariates, params, policy, tol, max_iter, em_tol, em_max_iter, bar,
        basis=None):
    """EM to a small gain per episode. The M-step on the identified directions ``basis``
    (:func:`_identified_basis`; None: all), ``theta = basis @ phi``. EM never lowers the
    likelihood: a step that does is a numerical failure of the M-step, and EM stops before it
    (Newton finishes from the last good point). Returns ``(params, policy, iterations)``."""
    ev = evaluate_mixture(space, data, mixing, params, policy0=policy)
    X = space.features if basis is None else space.features @ basis
    it = 0
    for it in range(1, em_max_iter + 1):
        q = ev.posterior.weights
        lp, coef = mixing_log_prior(q, covariates)
        try:
            theta, new_policy = _inner(estimator, X, space.counts(data, q), space.kernel, space.gamma, space.offset,
                                       policy, tol, max_iter)
            trial = np.concatenate([theta if basis is None else basis @ theta, mixing.alpha_of(lp, coef)])
            new = evaluate_mixture(space, data, mixing, trial, policy0=new_policy) \
                if np.all(np.isfinite(trial)) else None
        except (ValueError, np.linalg.LinAlgError):  # the M-step's solve failed (e.g. a probability underflowed)
            new = None
        if new is None or not np.isfinite(new.loglik) or new.loglik < ev.loglik - 1e-12 * abs(ev.loglik):
            _step(bar, f"loglik {ev.loglik:.6g}, M-step failed: Newton continues")
            break  # keep the last good point
        gain, ev, params, policy = new.loglik - ev.loglik, new, trial, new_policy
        _step(bar, f"loglik {ev.loglik:.6g}, gain {gain:.1e}")
        if gain <= em_tol * data.n_episodes:
            break
    params, policy = _relabel(space, data, mixing, covariates, params, ev.posterior.weights, policy)
    return params, policy, it


def _newton_direction(H, ev, basis):
    """The Newton direction ``(-H)^{-1} g`` (the OPG's where ``-H`` is not positive definite) and
    its decrement ``g' d``, the gain a quadratic model predicts (twice). With ``basis`` (the
    identified directions, all of the mixing ones included) both on its span: ``d = B (B' A B)^{-1}
    B' g``, nothing along the directions that change no likelihood."""
    g = ev.grad if basis is None else basis.T @ ev.grad
    H = H if basis is None else basis.T @ H @ basis
    A = -H if np.all(np.linalg.eigvalsh(H) < 0) else (ev.opg if basis is None else basis.T @ ev.opg @ basis)
    try:
        direction = np.linalg.solve(A, g)
    except np.linalg.LinAlgError:
        direction = np.linalg.lstsq(A, g, rcond=None)[0]
    return (direction if basis is None else basis @ direction), float(g @ direction)


def _newton(space, data, mixing, params, policy, max_iter, bar):
    """Newton steps on the mixture log-likelihood (the OPG direction where the Hessian is not
    negative definite), step halving, on the directions that change some choice probability
    (:func:`_identified_basis`: a flat direction's Hessian is finite-difference noise of either
    sign). Converged when the Newton decrement per episode (the predicted gain) is at most 1e-16,
    or a step too small to count (1e-11 of the parameters, without flat directions) predicts at
    most 1e-10, or no step raises the likelihood and the decrement is at most 1e-10. Stops
    unconverged when a type empties or after :data:`NEWTON_MAX_ITER` steps.
    Returns ``(params, evaluation, hessian, iterations, converged)``."""
    ev = evaluate_mixture(space, data, mixing, params, policy0=policy)
    P = len(space.names)
    theta_basis = _identified_basis(space, params, ev.policy)
    basis = None if theta_basis is None else np.block([
        [theta_basis, np.zeros((P, params.size - P))],
        [np.zeros((params.size - P, theta_basis.shape[1])), np.eye(params.size - P)]])
    converged, it = False, 0
    if not bar.disable:  # the same bar counts Newton's steps (drawn with the first: no reset's redraw)
        bar.set_description_str(bar.desc.replace(": EM", ": Newton"), refresh=False)
        bar.n = bar.last_print_n = 0
    for it in range(1, min(max_iter, NEWTON_MAX_ITER) + 1):
        if np.exp(ev.log_prior).sum(axis=0).min() < 0.1:  # a type emptied (< 0.1 episode): a boundary maximum
            break
        H = mixture_hessian(space, data, mixing, params, policy0=ev.policy)
        direction, decrement = _newton_direction(H, ev, basis)
        decrement /= data.n_episodes
        if decrement <= 1e-16 or (basis is None and decrement <= 1e-10 and np.max(np.abs(direction))
                                  <= 1e-11 * max(1.0, float(np.max(np.abs(params))))):
            converged = True
            break
        step, improved = 1.0, False
        for _ in range(30):
            try:
                trial = evaluate_mixture(space, data, mixing, params + step * direction, policy0=ev.policy)
            except ValueError:  # a step so long that some episode's likelihood underflows under every type
                step *= 0.5
                continue
            if trial.loglik >= ev.loglik - 1e-12 * abs(ev.loglik):
                _step(bar, f"loglik {trial.loglik:.6g}, gain {trial.loglik - ev.loglik:.1e}")
                params, ev, improved = params + step * direction, trial, True
                break
            step *= 0.5
        if not improved:
            converged = decrement <= 1e-10
            break
    return params, ev, mixture_hessian(space, data, mixing, params, policy0=ev.policy), it, converged


def _ccp_em(space, data, mixing, covariates, params, policy, ccp_update, tol, em_tol, em_max_iter, bar):
    """The sequential CCP-EM (module notes). Returns ``(params, iterations, converged)``."""
    P = len(space.names)
    q = evaluate_mixture(space, data, mixing, params, policy0=policy).posterior.weights
    theta, pi, converged, it = params[:P], policy, False, 0
    for it in range(1, em_max_iter + 1):
        n = space.counts(data, q)
        res = fit_npl(pi, space.features, n, space.kernel, space.gamma, offset=space.offset, theta0=theta,
                      max_iter=1, tol=tol)
        lp, coef = mixing_log_prior(q, covariates)
        alpha = mixing.alpha_of(lp, coef)
        psi = res.policy
        pi = psi if ccp_update == "model" else (n + psi) / (n.sum(axis=1, keepdims=True) + 1.0)
        q = type_posteriors(space.row_loglik(np.log(psi), data), data.episode, mixing.log_prior(alpha)).weights
        change = float(np.max(np.abs(res.theta - theta)))
        theta = res.theta
        _step(bar, f"theta change {change:.1e}")
        if change <= em_tol * max(1.0, float(np.max(np.abs(theta)))):
            converged = True
            break
    params, _ = _relabel(space, data, mixing, covariates, np.concatenate([theta, alpha]), q, pi)
    return params, it, converged


def estimate_types(estimator: str, features, episodes, kernel, gamma, *, n_types: int = 2, type_specific="all",
                   offset=None, names=None, mixing_covariates=None, covariate_names=None, start_policy=None,
                   theta0=None, ccp_update: str = "model", tol: float = 1e-10, max_iter: int = 200,
                   em_tol: float | None = None, em_max_iter: int = 500, warn: bool = True,
                   progress=None) -> TypedStructuralFit:
    r"""Estimate a dynamic logit with ``n_types`` latent types (module notes).

    Parameters
    ----------
    estimator : {"npl", "nfxp", "ccp-em"}
    features : ndarray (S, K, p)
        ``u_m = features @ theta_m + offset``.
    episodes : Transitions, mapping or tuple ``(episode_ids, states, actions[, next_states])``
        The choices with their episodes, actions as codes (``as_episode_choices``).
    kernel : transition kernel, or a list of ``n_types`` known type-specific kernels (whose
        transitions then enter each type's likelihood)
    gamma : float
    n_types : int
    type_specific : "all" or list of str
        Parameters with one value per type (e.g. ``["RC"]``); the others are shared.
    offset, names : as in :func:`genpqr.structural.estimate_structural`
    mixing_covariates, covariate_names : ndarray (n_episodes,) or (n_episodes, d), list of str, optional
        Covariates of the mixing proportions (e.g. the initial state), episodes in sorted id order.
    start_policy : ndarray (S, K), optional
        Start of the pooled one-type fit.
    theta0 : ndarray (P + A,), optional
        Start (default: the pooled one-type MLE, type-specific parameters spread around it, equal mixing).
    ccp_update : {"model", "frequency"}
        ``"ccp-em"``: how the type-specific CCPs are updated.
    tol, max_iter : of the inner single-type estimator and of the Newton finish
    em_tol, em_max_iter : EM's stop: gain per episode below ``em_tol`` (MLE, default 1e-3, Newton
        finishes) or relative change of ``theta`` below it (CCP-EM, default 1e-6)
    warn : bool
        Issue the :class:`LatentTypeWarning` and convergence warnings.
    progress : bool or None
        A bar over the EM's (then Newton's) iterations on stderr, with the log likelihood and its
        gain, shown once the fit has run 2 seconds (None: only on a terminal; False: never).
    """
    start = time.perf_counter()
    em_tol = (1e-6 if estimator == "ccp-em" else 1e-3) if em_tol is None else float(em_tol)
    _check_options(estimator, ccp_update)
    spec = dict(features=features, kernel=kernel, gamma=gamma, n_types=n_types, type_specific=type_specific,
                offset=offset, names=names, mixing_covariates=mixing_covariates, covariate_names=covariate_names,
                start_policy=start_policy, ccp_update=ccp_update, tol=tol, max_iter=max_iter, em_tol=em_tol,
                em_max_iter=em_max_iter)
    space = build_type_space(features, kernel, gamma, n_types, type_specific=type_specific, offset=offset,
                             names=names)
    data = as_episode_choices(episodes, space.n_states, space.n_actions)
    mixing = Mixing.of(data.n_episodes, space.n_types, mixing_covariates, covariate_names)
    covariates = None if mixing.design.shape[1] == 1 else mixing.design[:, 1:]
    params, policy = _start(estimator, space, data, mixing, spec, theta0)
    with progress_bar(progress, desc=f"latent types ({estimator}, {space.n_types} types): EM", unit="it") as bar:
        if estimator == "ccp-em":
            (params, ev, cov, cov_robust, iterations, converged, convergence), ident = _sequential(
                space, data, mixing, covariates, params, policy, ccp_update, tol, em_tol, em_max_iter, bar), None
            separated = ()
        else:
            params, ev, cov, cov_robust, iterations, converged, ident, separated = _full_mle(
                estimator, space, data, mixing, covariates, params, policy, tol, max_iter, em_tol, em_max_iter, bar)
            convergence = _convergence_text(iterations, converged, separated)
    fit = _assemble(estimator, space, data, mixing, params, ev, cov, cov_robust, bool(converged), iterations,
                    convergence, time.perf_counter() - start, spec, ident, separated)
    if warn:
        check_types(fit)
    return fit


def _convergence_text(iterations, converged, separated) -> str:
    """``"EM 8 + Newton 3, converged by Newton"``, or why it did not converge."""
    return f"EM {iterations['EM']} + Newton {iterations['Newton']}, " + (
        "converged by Newton" if converged else "NOT CONVERGED" if not separated else
        "stopped: the MLE is at infinity (the mixing covariates separate the types)")


def _check_options(estimator, ccp_update) -> None:
    if estimator not in TYPE_ESTIMATORS:
        raise ValueError(f"estimator must be one of {list(TYPE_ESTIMATORS)} with latent types, got {estimator!r}")
    if ccp_update not in ("model", "frequency"):
        raise ValueError(f"ccp_update must be 'model' or 'frequency', got {ccp_update!r}")


def _sequential(space, data, mixing, covariates, params, policy, ccp_update, tol, em_tol, em_max_iter, bar):
    """The CCP-EM and its evaluation (no analytic covariance). Returns ``(params, evaluation, cov,
    cov_robust, iterations, converged, convergence)``."""
    params, n_em, converged = _ccp_em(space, data, mixing, covariates, params, policy, ccp_update, tol, em_tol,
                                      em_max_iter, bar)
    ev = evaluate_mixture(space, data, mixing, params)
    cov = np.full((params.size, params.size), np.nan)
    convergence = f"CCP-EM {n_em} ({ccp_update} CCP updates), " + ("converged" if converged else "NOT CONVERGED")
    return params, ev, cov, cov, {"CCP-EM": n_em}, converged, convergence


def _full_mle(estimator, space, data, mixing, covariates, params, policy, tol, max_iter, em_tol, em_max_iter, bar):
    """EM, then Newton; the inverse OPG and the sandwich (the generalized inverses on the identified
    directions where the OPG is singular). Returns ``(params, evaluation, cov, cov_robust,
    iterations, converged, identification)``."""
    params, policy, n_em = _em(estimator, space, data, mixing, covariates, params, policy, tol, max_iter, em_tol,
                               em_max_iter, bar, _identified_basis(space, params, policy))
    params, ev, H, n_newton, converged = _newton(space, data, mixing, params, policy, max_iter, bar)
    order = space.canonical_order(params[:len(space.names)])
    if np.any(order != np.arange(space.n_types)):  # Newton crossed the labels: relabel, exactly
        params = _permuted(space, mixing, params, order)
        ev = evaluate_mixture(space, data, mixing, params, policy0=None)
        H = mixture_hessian(space, data, mixing, params, policy0=ev.policy)
    ident = identification(ev.opg, params, list(space.names) + list(mixing.names))  # as for one type
    separated = _separated_mixing(space, data, mixing, params, ev)
    if separated:
        converged = False
    if ident.all_identified:
        cov, h_inv = _inverse(ev.opg), _inverse(-H)
    else:  # the inverses on the identified directions (the combinations' SEs: the same generalized inverse)
        cov, h_inv = generalized_inverse(ev.opg, ident.null_space), generalized_inverse(-H, ident.null_space)
    return params, ev, cov, h_inv @ ev.opg @ h_inv, {"EM": n_em, "Newton": n_newton}, converged, ident, separated


#: A mixing coefficient whose term reaches this on some episode (prior odds ``e^-25``, 1e-11) is
#: checked for separation: a finite maximum so far out is implausible, and the check says which.
SEPARATED_SCORE = 25.0


def _separated_mixing(space, data, mixing, params, ev) -> tuple:
    """The names of the mixing coefficients whose maximum likelihood estimate is at infinity, or ().

    Covariates that separate the types perfectly -- every episode of a covariate group certain to be
    of one type -- make the mixture likelihood rise forever along some coefficients (as a logit's
    under separation): the optimizer stops where the priors are 0 or 1 to rounding, with
    coefficients of ``1e6`` or ``1e16``, a singular information matrix, and Newton's decrement at
    rounding level ("converged"). Such a coefficient's term ``|alpha_j z_ej|`` exceeds
    :data:`SEPARATED_SCORE` on some episode; it is at infinity when doubling those coefficients
    does not lower the likelihood (a finite maximum so far out would fall off steeply)."""
    P, D = len(space.names), mixing.design.shape[1]
    alpha = params[P:]
    if mixing.n_types < 2 or D < 2 or not np.all(np.isfinite(alpha)):
        return ()
    big = (np.abs(alpha.reshape(mixing.n_types - 1, D)) * np.max(np.abs(mixing.design), axis=0)).ravel() \
        > SEPARATED_SCORE
    if not big.any():
        return ()
    trial = params.copy()
    trial[P:][big] *= 2.0
    try:
        far = evaluate_mixture(space, data, mixing, trial, policy0=ev.policy).loglik
    except (ValueError, np.linalg.LinAlgError):
        return ()
    if not far >= ev.loglik - 1e-9 * max(1.0, abs(ev.loglik)):
        return ()
    return tuple(name for name, b in zip(mixing.names, big) if b)


def _start(estimator, space, data, mixing, spec, theta0):
    """The start: the pooled one-type MLE with the type-specific parameters spread around it
    (:meth:`TypeSpace.expand`) and equal mixing, or ``theta0``; and its policy per type."""
    kernel = spec["kernel"]
    one = build_type_space(spec["features"], kernel[0] if isinstance(kernel, (list, tuple)) else kernel,
                           spec["gamma"], 1, offset=spec["offset"], names=spec["names"])
    pooled = one.counts(data, np.ones((data.n_episodes, 1)))
    theta_one, policy_one = _inner("nfxp" if estimator == "nfxp" else "npl", one.features, pooled, one.kernel,
                                   space.gamma, one.offset, start_policy_of(spec["start_policy"], pooled.shape),
                                   spec["tol"], spec["max_iter"])
    P = len(space.names)
    if theta0 is None:
        return np.concatenate([space.expand(theta_one), np.zeros(mixing.size)]), np.tile(policy_one, (space.n_types, 1))
    params = np.asarray(theta0, dtype=np.float64).copy()
    if params.shape != (P + mixing.size,):
        raise ValueError(f"theta0 must have the {P + mixing.size} parameters {space.names + mixing.names}, got "
                         f"shape {params.shape}")
    return params, np.tile(policy_one, (space.n_types, 1))


def _assemble(estimator, space, data, mixing, params, ev, cov, cov_robust, converged, iterations, convergence,
              seconds, spec, ident=None, separated=()) -> TypedStructuralFit:
    """The result object, with the mixing proportions' delta-method standard errors (none where a
    mixing parameter is not identified)."""
    P = len(space.names)
    hidden = np.ones(params.size) if ident is None else np.where(ident.identified, 1.0, np.nan)
    se = std_errors(cov) * hidden
    props, jac = mixing.proportions(params[P:])
    cov_alpha = cov[P:, P:]
    props_se = np.sqrt(np.clip(np.einsum("ma,ab,mb->m", jac, cov_alpha, jac), 0, None)) \
        if np.all(np.isfinite(cov_alpha)) and np.all(np.isfinite(hidden[P:])) and not separated \
        else np.full(space.n_types, np.nan)
    q = ev.posterior.weights
    return TypedStructuralFit(
        estimator, list(space.names), params[:P], se[:P], std_errors(cov_robust)[:P], list(mixing.names),
        params[P:], se[P:], props, props_se, q, data.labels, cov, cov_robust, ev.loglik, space.n_types, data.n,
        data.n_episodes, converged, iterations, convergence, separation_share(q, ev.log_prior), seconds, space, data,
        ev.policy, spec, ev.log_prior, ident, tuple(separated))


#: What a structural mixture's warnings say is in doubt.
PARAMETERS_IN_DOUBT = ("the per-type parameters, the mixing proportions and the posterior type probabilities "
                       "(genpqr fit: parameters.csv, types.csv)")


def check_types(fit: TypedStructuralFit) -> None:
    """The warnings of a typed fit: not converged, parameters without a standard error (not
    identified: :func:`standard_error_message`), types not separated, an empty type."""
    if fit.mixing_separated:  # says why the fit stopped: no convergence warning beside it
        warnings.warn(separation_message(fit), LatentTypeWarning, stacklevel=3)
    elif not fit.converged:
        warnings.warn(f"the {fit.estimator} fit with {fit.n_types} types did not converge ({fit.convergence})",
                      ConvergenceWarning, stacklevel=3)
    message = standard_error_message(fit)
    if message is not None:
        warnings.warn(message, LatentTypeWarning, stacklevel=3)
    if fit.n_types < 2 or fit.mixing_separated:  # priors of 0 or 1: posteriors equal to them are certain types
        return
    log_prior = fit.log_prior if fit.log_prior is not None else np.log(fit.mixing_proportions)
    for message in latent_type_warnings(fit.posteriors, log_prior, PARAMETERS_IN_DOUBT):
        warnings.warn(message, LatentTypeWarning, stacklevel=3)


def separation_message(fit: TypedStructuralFit) -> Message:
    """The warning of a mixture MLE whose mixing logit is separated (``fit.mixing_separated``)."""
    covariates = sorted({name.split(": ", 1)[1] for name in fit.mixing_separated} - {"const"}) or ["const"]
    return Message(
        f"the mixing covariate{'s' if len(covariates) > 1 else ''} {', '.join(covariates)} separate"
        f"{'' if len(covariates) > 1 else 's'} the latent types perfectly (every episode's prior type probability is 0 "
        f"or 1 to rounding): the likelihood keeps rising as {', '.join(fit.mixing_separated)} go to infinity, so "
        f"their maximum likelihood estimates are not finite (shown as +-inf with no standard error: parameters.csv) "
        f"and the {fit.estimator} fit did not converge; the types' posteriors are read off the covariate, not the "
        "choices. Drop or coarsen the covariate (", Mention("mixing_covariates"), ") or fit fewer types (",
        Mention("n_types"), ")")


def standard_error_message(fit: TypedStructuralFit):
    """The warning of a mixture MLE whose parameters lack a standard error, or None: which ones,
    why (the information matrix, the OPG of the per-episode scores, is singular in their
    directions: a change of them moves no episode's likelihood, so the data cannot tell their
    values apart), the combinations the data do identify, and what to do. ``"ccp-em"`` has no
    covariance by design: None."""
    if fit.estimator not in ("npl", "nfxp"):
        return None
    names = list(fit.names) + list(fit.mixing_names)
    se = np.concatenate([fit.std_error, fit.mixing_std_error])
    missing = [n for n, ok, s in zip(names, fit.identified, se)
               if (not ok or not np.isfinite(s)) and n not in fit.mixing_separated]  # those: separation_message
    if not missing:
        return None
    combos = [c for c in getattr(fit.identification, "combinations", ())
              if not set(c.coefficients) & set(fit.mixing_separated)]
    known = ("; the data identify " + ", ".join(f"{c.describe()} = {c.estimate:.4g}" for c in combos[:3])
             if combos else "")
    shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
    return Message(
        f"{len(missing)} of {len(names)} parameters of the {fit.estimator} fit with {fit.n_types} latent types have "
        f"no standard error: {shown} (the information matrix, the OPG of the per-episode scores, is singular in their "
        f"directions: changing them together moves no episode's likelihood, so the {fit.n_episodes} episodes cannot "
        f"tell their values apart; reported as not identified, with no estimate or standard error: parameters.csv "
        f"identified=False){known}. Fit fewer types (", Mention("n_types"), "), more episodes, or fewer per-type "
        "parameters (drop a feature, or share a parameter across the types: ",
        Mention("type_specific", python="type_specific=[...]"), ")")

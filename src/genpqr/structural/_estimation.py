r"""Structural parameters of a linear flow utility by maximum likelihood, with the MLE's
standard errors: what ``genpqr fit --features`` estimates (``--estimator``).

The model (paper Sec. 2; Rust 1987): flow utility ``u_theta(s, a) = features(s, a) @ theta
+ offset(s, a)`` with ``p`` parameters, Gumbel shocks of temperature 1, discount ``gamma``
and a kernel ``P`` (GenPQR's first-stage kernel, held fixed: Rust's two-step partial
likelihood). The choice probabilities are the soft-optimal policy
``pi_theta = softmax(Q_theta)``, ``Q_theta = u_theta + gamma P V_theta``,
``V_theta = logsumexp_a Q_theta``, and the log-likelihood of the observed choices is
``L(theta) = sum_{s,a} n(s,a) log pi_theta(a|s)`` (``n``: :func:`genpqr.structural.choice_counts`).

Estimators (:func:`estimate_structural`):

* ``"npl"`` (default): Aguirregabiria-Mira's nested pseudo-likelihood iterated to
  convergence, each policy evaluation being GenPQR's exact solve at the current policy
  (``genpqr.structural._ddc.fit_npl``); its fixed point is the MLE.
* ``"nfxp"``: Rust's nested fixed point (``genpqr.structural._nfxp.fit_nfxp``, BHHH), the
  MLE, finished by Newton steps with the analytic Hessian (BHHH stalls a few 1e-6 off the
  maximum at beta = 0.9999, where NFXP's absolute values of order ``1 / (1 - beta)`` leave
  the likelihood too little precision to rank its steps).
* ``"pml"``: Hotz-Miller's two-step pseudo-likelihood (one NPL step from the first stage):
  consistent but sensitive to the first stage when actions are rare; not the MLE (at
  ``gamma = 0`` it is, with the inverse Hessian instead of the OPG as standard error).
* ``"projection"``: weighted least squares of GenPQR's reward table on the features
  (:func:`genpqr.structural.project_reward`): a minimum-distance reading, no likelihood and
  not the MLE. The MLE is computed alongside, and a :class:`~genpqr.structural.ProjectionWarning`
  says when the choices reject the projection (``2 (L_MLE - L_projection)`` above the
  chi-square(p) 0.99 quantile) or a parameter's sign differs from the MLE's.

Before estimating, :func:`~genpqr.structural.find_separation` asks the data whether
the MLE exists (choices separated by the features: the likelihood rises toward parameters at
infinity). When it does not, the estimator still runs, its convergence warnings are replaced by
one that says so, and no standard error is given.

``StructuralFit.iterations`` records each algorithm's iterations (``{"BHHH": 200, "Newton":
2}``) and ``convergence`` says which one converged (``"BHHH 200 (hit the cap) + Newton 2,
converged by Newton"``). Results as objects in statsmodels' words (``params``, ``bse``,
``tvalues``, ``pvalues``, ``llf``, ``nobs``, ``aic``, ``bic``, ``cov_params()``, ``conf_int(alpha)``,
``summary()``; ``genpqr.structural._results``), ``to_frame``, ``compare_lr`` and another
covariance kind by ``with_cov_type`` or ``bootstrap`` (``genpqr.structural._covariance``).

Standard errors (``likelihood_derivatives``) are those of the *full* likelihood, the
derivative taken through the fixed point, identical for NPL and NFXP. With
``A = I - gamma P_pi`` (``P_pi`` the state kernel under ``pi_theta``):

* ``dV = A^{-1} sum_a pi x``, ``dQ = x + gamma P dV``, score
  ``d log pi(a|s) = dQ(s,a) - sum_a' pi(a'|s) dQ(s,a')``;
* ``c(s) = Cov_{pi(.|s)}(dQ)`` (p x p), ``d2V = A^{-1} c``, ``d2Q = gamma P d2V`` and
  ``d2 log pi(a|s) = d2Q(s,a) - sum_a' pi d2Q(s,a') - c(s)``;
* OPG (BHHH) ``J = sum n(s,a) score score'``, Hessian ``H = sum n(s,a) d2 log pi``;
  covariances ``J^{-1}`` (OPG, the ``std_error`` column, as Rust's NFXP) and the
  sandwich ``H^{-1} J H^{-1}`` (robust to misspecification of the choice
  model; ``std_error_robust``). Both are conditional on the kernel.

Solves with ``A`` use the *relative-value* form (``relative_solve``): ``A`` has the
eigenvalue ``1 - gamma`` along the constant vector, which makes ``A`` ill-conditioned as
``gamma -> 1`` (``gamma = 0.9999`` in Rust's data); constants cancel in every choice
probability, so the solve pins one state's value and solves for the gain, a system that stays
well conditioned up to ``gamma = 1``.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..stage2._kernels import as_kernel
from ..data._validation import check_gamma
from ..exceptions import ConvergenceWarning, GenPQRWarning
from ._ccp import fit_npl
from ._covariance import CovarianceChoices
from ._checks import check_features, check_table, check_weights
from ._fit_checks import (MIN_CHOICES_PER_PARAMETER, ProjectionWarning, check_convergence, check_identified,
                         check_projection, check_rare_action, check_separation)
from ._likelihood import LikelihoodDerivatives, likelihood_derivatives, relative_solve
from ._maximize import RIDGE_NOTE, finished_nfxp, safeguarded_npl, start_policy_of
from ._projection import project_reward, projection_std_errors
from ._results import (SE_KINDS, SE_LABELS, LikelihoodResults, coefficient_frame, describe_iterations, lr_test,
                      std_errors, summary_of)
from ._identification import Identification, generalized_inverse, identification, identified_basis
from ._separation import Separation, find_separation

__all__ = ["ESTIMATORS", "LikelihoodDerivatives", "StructuralFit", "relative_solve", "likelihood_derivatives",
           "estimate_structural", "fit_structural", "std_errors", "MIN_CHOICES_PER_PARAMETER", "SE_KINDS", "ProjectionWarning"]

#: The structural estimators of :func:`estimate_structural` (``genpqr.structural._estimation``).
ESTIMATORS = ("npl", "nfxp", "pml", "projection")


# ============================================================================ estimation
def _inverse(matrix):
    try:
        return np.linalg.inv(matrix)
    except np.linalg.LinAlgError:
        return np.full(matrix.shape, np.nan)


@dataclass(frozen=True)
class StructuralFit(LikelihoodResults, CovarianceChoices):
    """Structural estimates, their standard errors and the fit of the choice model.

    In statsmodels' words (``LikelihoodResults``): ``params``,
    ``bse``, ``tvalues``, ``pvalues``, ``llf``, ``nobs`` (the choices), ``df_model``,
    ``df_resid``, ``aic``, ``bic``, ``cov_type``, ``cov_params()``, ``conf_int(alpha)`` and
    ``summary(alpha)``; ``with_cov_type`` (``"opg"``, ``"hessian"``, ``"sandwich"``) and
    ``bootstrap()`` give the same fit with another covariance.

    Attributes
    ----------
    estimator : str
        One of ``ESTIMATORS``.
    names : list of str
    theta, std_error, std_error_robust : ndarray (p,)
        Estimates, the standard errors of ``se_kind`` and the sandwich (robust) ones (NaN
        where not defined: the robust ones of ``pml`` and ``projection``, and separated choices).
        ``projection`` (from :func:`fit_structural`): the projection's efficient influence
        function (:func:`genpqr.inference.projection_inference`), NaN for a model without its rows.
    se_kind : str
        What ``std_error`` is, in full (``se_label``: in short, e.g. ``"OPG"``).
    cov, cov_robust : ndarray (p, p)
    loglik : float
        Full log-likelihood ``sum n log pi_theta`` at ``theta`` (every estimator).
    n_choices : int
        Observed choices in the likelihood (``counts.sum()``).
    n_iter : int
        All iterations (the sum of ``iterations``).
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
    iterations : dict
        Iterations per algorithm, in the order they ran (e.g. ``{"BHHH": 200, "Newton": 2}``).
    convergence : str
        Which algorithm converged (``"BHHH 200 (hit the cap) + Newton 2, converged by Newton"``).
    separation : Separation or None
        What the data check found (:func:`~genpqr.structural.find_separation`).
    mle_theta : ndarray (p,) or None
        ``projection`` only: the MLE computed alongside (None when it does not exist).
    mle_loglik : float
        ``projection`` only: its log-likelihood (NaN otherwise).
    identification : Identification or None
        Which parameters the choices identify, and the identified combinations of the others
        (:func:`~genpqr.structural.identification`). Where a parameter is not
        identified, ``theta`` holds where the optimizer stopped along a flat direction (it
        still gives the fitted flow utility, for counterfactuals), ``std_error`` is NaN, and
        the tables (``to_frame``, ``params_``, ``summary``, ``parameters.csv``) show no number;
        ``cov`` is then the generalized inverse on the identified directions.
    covariances : dict or None
        Every covariance the fit holds, by kind (``"OPG"``, ``"inverse Hessian"``,
        ``"sandwich"``): what ``with_cov_type`` chooses from.
    cov_kind : str or None
        The kind of ``cov`` when another than the estimator's own (``with_cov_type``).
    bootstrap_replicates : ndarray (B, p) or None
        A bootstrap fit's replicates (``bootstrap()``): its intervals are their percentiles.
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
    iterations: dict = field(default_factory=dict)
    convergence: str = ""
    separation: Separation | None = field(default=None, repr=False)
    mle_theta: np.ndarray | None = field(default=None, repr=False)
    mle_loglik: float = np.nan
    identification: Identification | None = field(default=None, repr=False)
    covariances: dict | None = field(default=None, repr=False)
    cov_kind: str | None = None
    bootstrap_replicates: np.ndarray | None = field(default=None, repr=False)

    @property
    def identified(self) -> np.ndarray:
        """``(p,)`` bool: whether the choices identify each parameter (all True when unknown)."""
        ident = self.identification
        return np.ones(self.theta.size, dtype=bool) if ident is None else np.asarray(ident.identified)

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
        """The structural route's counterfactual on this fit (:func:`genpqr.counterfactuals.counterfactual`):
        the soft-optimal policy of ``x @ theta' + delta`` under ``(P', gamma')`` against the fitted
        model, with delta-method intervals. ``parameter_change``: ``{name: number or "*F", "+D",
        "-D", "=V"}`` (e.g. ``{"RC": "*2"}``). With ``model`` (the fitted GenPQR) the nonparametric
        answer and the gap are reported too, and ``n_boot`` bootstraps over episodes.
        Other keyword arguments as in :meth:`genpqr.GenPQR.counterfactual`."""
        from ..counterfactuals import counterfactual

        kwargs.setdefault("route", "structural")
        return counterfactual(model, reward_change, transitions, gamma, parameter_change=parameter_change,
                              structural=self, **kwargs)

    def wald_interval(self, level: float = 0.95):
        """``theta -+ z std_error`` (NaN where there is no standard error)."""
        from ..data._distributions import normal_ppf

        z = normal_ppf(0.5 + level / 2)
        return self.theta - z * self.std_error, self.theta + z * self.std_error

    @property
    def se_label(self) -> str:
        """The kind of ``std_error`` in short: ``"OPG"``, ``"inverse Hessian"``, ``"sandwich"``,
        ``"bootstrap"`` or ``"none"``."""
        if not np.any(np.isfinite(self.std_error)):
            return "none"
        return self.cov_kind or SE_LABELS[self.estimator]

    @property
    def params_(self) -> pd.Series:
        """The estimates, indexed by parameter name (NaN for a parameter not identified)."""
        return pd.Series(np.where(self.identified, self.theta, np.nan), index=pd.Index(list(self.names), name="parameter"), name="estimate")

    @property
    def bse_(self) -> pd.Series:
        """The standard errors (of kind ``se_label``), indexed by parameter name."""
        return pd.Series(self.std_error, index=pd.Index(list(self.names), name="parameter"),
                         name=f"std_error ({self.se_label})")

    def to_frame(self, level: float = 0.95) -> pd.DataFrame:
        """Estimates, SE and kind, z, p-value, interval, robust SE: ``coefficient_frame``."""
        return coefficient_frame(self, level)

    def _summary(self, level):
        return summary_of(self, level)

    def compare_lr(self, restricted):
        """Likelihood-ratio test of ``restricted`` (nested, fewer parameters) against this fit:
        :func:`~genpqr.structural.lr_test`."""
        return lr_test(restricted, self)


@dataclass
class _Run:
    """What an estimator returned: the estimate, its policy (or None), its iterations and whether
    it converged (None: a one-step estimator), PML's covariance."""

    theta: np.ndarray
    policy: np.ndarray | None
    parts: list
    converged: bool | None
    pml_cov: np.ndarray | None = None


def _run_estimator(estimator, X, n, kernel, gamma, off, start_policy, reward_table, tol, max_iter) -> _Run:
    shape = X.shape[:2]
    if estimator == "npl":
        return _Run(*safeguarded_npl(start_policy_of(start_policy, shape), X, n, kernel, gamma, off, tol, max_iter))
    if estimator == "nfxp":
        return _Run(*finished_nfxp(X, n, kernel, gamma, off, tol, max_iter))
    if estimator == "pml":
        res = fit_npl(start_policy_of(start_policy, shape), X, n, kernel, gamma, offset=off, max_iter=1, tol=tol)
        return _Run(res.theta, res.policy, [("PML", 1, "one pseudo-likelihood step; not iterated to the MLE")],
                    None, res.cov)
    if reward_table is None:
        raise ValueError("estimator 'projection' needs the reward table")
    return _Run(project_reward(reward_table, X, n, offset=off).theta, None,
                [("weighted least squares, closed form; not the MLE", None, "")], None)


def _converged(run) -> bool:
    """Whether ``run`` converged (a one-step estimator, ``converged`` None, does); a numpy bool
    read as one (``np.False_ is not False``: a stalled Newton once read as converged)."""
    return run.converged is None or bool(run.converged)


def _identified_directions(X, n, kernel, gamma, off):
    """The basis (p, r) of the directions the choices identify (``identified_basis`` of the
    information matrix at ``theta = 0``), or None when they identify every direction. Which
    directions change no choice probability is a property of the features, kernel and data, not
    of ``theta`` (a direction ``v`` is flat where ``features @ v`` shapes no choice: a constant,
    a copy of another column's difference, a feature only at states never visited)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        try:
            d = likelihood_derivatives(np.zeros(X.shape[2]), X, n, kernel, gamma, offset=off, second_order=False)
        except (ValueError, np.linalg.LinAlgError):  # no reduction: the estimators say what they can
            return None
    return identified_basis(d.opg)


def _on_identified_directions(estimator, X, n, kernel, gamma, off, start_policy, reward_table, tol, max_iter) -> _Run:
    """``_run_estimator`` on the directions the choices identify: with exactly collinear features
    (or one that shapes no choice) the maximizers' solves are singular along the flat directions
    and their steps ran off there (NPL to 1e15, NFXP's inner solve failing), so the likelihood is
    maximized over ``phi`` with the features ``X @ B`` (``B``: ``_identified_directions``, an
    orthonormal basis) and ``theta = B phi``: the maximum, with no component along the flat
    directions (a duplicated column's two parameters equal, a column of zeros' parameter 0).
    Without flat directions the estimator runs on ``X`` itself (the same numbers to the bit)."""
    basis = _identified_directions(X, n, kernel, gamma, off) if estimator in ("npl", "nfxp", "pml") else None
    if basis is None:
        return _run_estimator(estimator, X, n, kernel, gamma, off, start_policy, reward_table, tol, max_iter)
    run = _run_estimator(estimator, X @ basis, n, kernel, gamma, off, start_policy, reward_table, tol, max_iter)
    parts = list(run.parts)
    if _converged(run) and run.converged is not None and not parts[-1][2]:
        parts[-1] = (parts[-1][0], parts[-1][1], RIDGE_NOTE)
    return _Run(basis @ run.theta, run.policy, parts, run.converged,
                None if run.pml_cov is None else basis @ run.pml_cov @ basis.T)


def estimate_structural(estimator: str, features, counts, kernel, gamma, *, offset=None, start_policy=None,
                        reward_table=None, names=None, tol: float = 1e-10, max_iter: int = 200,
                        action_labels=None, n_types: int = 1, episodes=None, **type_options):
    r"""Estimate ``theta`` of ``u_theta = features @ theta + offset`` by ``estimator``.

    With ``episodes`` (``counts`` may be None) and ``n_types`` latent types: a ``TypedStructuralFit``
    of :func:`genpqr.structural.estimate_types` (``type_options``: its keywords).

    Parameters
    ----------
    estimator : {"npl", "nfxp", "pml", "projection"}
        See ``genpqr.structural._estimation``.
    features : ndarray (S, K, p)
        Any parametrization of the flow utility (the likelihood depends on behaviour only);
        ``projection`` needs the normalization of ``reward_table``.
    counts : ndarray (S, K)
        Choices per (state, action) (:func:`genpqr.structural.choice_counts`).
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

    Warns
    -----
    WeakSupportWarning, ConvergenceWarning, GenPQRWarning, ProjectionWarning
        From ``genpqr.structural._fit_checks``, in this order: the rarest action below
        ``MIN_CHOICES_PER_PARAMETER`` choices per parameter; no convergence; parameters not
        identified, or separated choices (no MLE); the projection far from the MLE.
    """
    if episodes is not None or int(n_types) != 1 or type_options:
        return _typed(estimator, features, kernel, gamma, n_types, episodes, offset=offset, start_policy=start_policy,
                      names=names, tol=tol, max_iter=max_iter, **type_options)
    return _estimate_one(estimator, features, counts, kernel, gamma, offset, start_policy, reward_table, names, tol,
                         max_iter, action_labels)


def _estimate_one(estimator, features, counts, kernel, gamma, offset, start_policy, reward_table, names, tol, max_iter,
                  action_labels) -> StructuralFit:
    """:func:`estimate_structural` without latent types."""
    start = time.perf_counter()
    X, n, off, kernel, gamma, names = _inputs(estimator, features, counts, offset, kernel, gamma, names)
    work = _working_kernel(kernel)
    separation = find_separation(X, n, work, gamma)
    no_mle = separation.mle_exists is False
    with warnings.catch_warnings():
        if no_mle:  # the optimizer runs toward infinity: the separation warning says why, once
            warnings.simplefilter("ignore", ConvergenceWarning)
        run = _on_identified_directions(estimator, X, n, work, gamma, off, start_policy, reward_table, tol, max_iter)
    d = likelihood_derivatives(run.theta, X, n, work, gamma, offset=off,
                               policy0=None if run.policy is None or np.min(run.policy) <= 0 else run.policy)
    ident = _identification(estimator, d, run.theta, names, no_mle)
    cov, cov_robust, held = _covariances(estimator, d, run.pml_cov, X.shape[2], no_mle, ident.null_space)
    convergence = describe_iterations(run.parts, run.converged)
    if no_mle:
        convergence += "; stopped: the MLE does not exist (separated choices)"
    mle_theta, mle_loglik, mle_identified = (None, np.nan, False) if estimator != "projection" or no_mle else \
        _mle_alongside(X, n, work, gamma, off, start_policy, tol, max_iter)
    gradient_norm = float(np.max(np.abs(d.grad)) / n.sum())
    _check_fit(estimator, d, n, names, separation, run, action_labels, convergence, gradient_norm)
    if mle_theta is not None:
        check_projection(run.theta, d.loglik, mle_theta, mle_loglik, names, compare_signs=mle_identified)
    hidden = np.where(ident.identified, 1.0, np.nan)  # no standard error for a parameter not identified
    return StructuralFit(
        estimator, names, np.asarray(run.theta, dtype=np.float64), *(std_errors(c) * hidden for c in (cov, cov_robust)),
        SE_KINDS[estimator], cov, cov_robust, d.loglik, int(round(n.sum())),
        int(sum(count or 0 for _, count, _ in run.parts)), _converged(run) and not no_mle, gradient_norm,
        d.policy, n, time.perf_counter() - start, X, off, kernel, float(gamma),
        None if action_labels is None else np.asarray(action_labels),
        iterations={name: count or 0 for name, count, _ in run.parts}, convergence=convergence, separation=separation,
        mle_theta=mle_theta, mle_loglik=mle_loglik, identification=ident, covariances=held)


#: Largest ``S * K * S`` of a sparse kernel the estimators work on as a dense array (8 MB): each
#: NPL or Newton step forms ``P_pi`` several times, and below this size a dense product costs a
#: fraction of building a sparse one (the result keeps the kernel as given).
DENSE_WORK_ENTRIES = 1_000_000


def _working_kernel(kernel):
    """``kernel`` as the estimators use it: dense when sparse and small (``DENSE_WORK_ENTRIES``)."""
    S, K = kernel.n_states, kernel.n_actions
    if getattr(kernel, "is_sparse", False) and S * K * S <= DENSE_WORK_ENTRIES:
        return as_kernel(kernel.to_dense(), K)
    return kernel


def _typed(estimator, features, kernel, gamma, n_types, episodes, **kwargs):
    """The latent-type route of :func:`estimate_structural` (``genpqr.structural._types``)."""
    from ._types import estimate_types

    if episodes is None:
        raise ValueError(f"n_types={n_types} needs episodes: the choices with their episode ids, e.g. "
                         "(episode_ids, states, actions) or the Transitions (counts do not say which choices "
                         "belong to one agent)")
    return estimate_types(estimator, features, episodes, kernel, gamma, n_types=int(n_types), **kwargs)


def _inputs(estimator, features, counts, offset, kernel, gamma, names):
    """``(X, counts, offset, kernel, gamma, names)`` checked (each error names its argument)."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {list(ESTIMATORS)}, got {estimator!r}")
    gamma = check_gamma(gamma)
    X = check_features(features)
    shape = X.shape[:2]
    n = check_weights(counts, shape, "counts")
    off = np.zeros(shape) if offset is None else check_table(offset, shape, "offset")
    kernel = as_kernel(kernel, shape[1])
    names = list(names) if names is not None else [f"theta[{j}]" for j in range(X.shape[2])]
    if len(names) != X.shape[2]:
        raise ValueError(f"names must name the {X.shape[2]} features, got {len(names)} names")
    return X, n, off, kernel, gamma, names


def fit_structural(model, features, *, names=None, estimator: str = "npl", offset=None, n_types: int = 1,
                   **kwargs) -> StructuralFit:
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
    n_types : int
        Latent types (``genpqr.structural._types``): above 1, the episodes of the model's
        training data (``model.training_data_``) enter the mixture likelihood.
    **kwargs
        ``tol``, ``max_iter`` of :func:`estimate_structural` (with types also ``type_specific``,
        ``mixing_covariates``, ``progress`` (default: the model's), ...).

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
    if int(n_types) != 1:
        from ..estimator._persistence import require_data

        require_data(model, "the episodes of a fit with latent types")
        kwargs["episodes"] = model.training_data_
        kwargs["n_types"] = n_types
        kwargs.setdefault("progress", getattr(model, "progress", None))  # the EM's bar follows the model's
        labels = None
    fit = estimate_structural(estimator, features, np.asarray(stage2.counts), stage2.kernel, model.gamma_,
                              offset=offset, start_policy=np.exp(rec.log_policy), reward_table=rec.reward,
                              names=names, action_labels=labels, **kwargs)
    if estimator == "projection" and int(n_types) == 1:
        fit = projection_std_errors(fit, model, offset)
    return fit


def _mle_alongside(X, n, kernel, gamma, off, start_policy, tol, max_iter):
    """The MLE (NPL with its safeguard, quietly) beside a projection: ``(theta, loglik, identified)``
    (``identified``: its information matrix is not singular, so its signs mean something), or
    ``(None, nan, False)`` when it did not converge."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        theta, policy, _, converged = safeguarded_npl(start_policy_of(start_policy, X.shape[:2]), X, n, kernel,
                                                       gamma, off, tol, max_iter)
        if not converged:
            return None, np.nan, False
        d = likelihood_derivatives(theta, X, n, kernel, gamma, offset=off, policy0=policy)
    eigvals = np.linalg.eigvalsh(d.opg)
    identified = bool(eigvals.size and eigvals[0] > 1e-10 * max(eigvals[-1], 1e-300))
    return np.asarray(theta, dtype=np.float64), d.loglik, identified


def _identification(estimator, d, theta, names, no_mle) -> Identification:
    """Which parameters the choices identify (none asked when the MLE does not exist); the
    combinations' standard errors from the generalized inverse of the OPG for the MLE, none else."""
    p = len(names)
    if no_mle:
        return Identification(np.ones(p, dtype=bool), np.zeros((p, 0)))
    return identification(d.opg, theta, names, cov=None if estimator in ("npl", "nfxp") else np.full((p, p), np.nan))


def _check_fit(estimator, d, n, names, separation, run, action_labels, convergence, gradient_norm):
    """The warnings of a structural fit (``genpqr.structural._fit_checks``): parameters not
    identified, a rare action, separated choices (no MLE), no convergence."""
    no_mle = separation.mle_exists is False
    if not no_mle:  # at infinity the scores vanish: no identification question to ask
        check_identified(d.opg, names)
    check_rare_action(n, names, action_labels)
    policy = run.policy if estimator == "pml" else d.policy  # PML: its own (pseudo-likelihood) probabilities
    check_separation(separation, names, estimator, None if estimator == "projection" else policy, n)
    if not no_mle:
        check_convergence(estimator, _converged(run), convergence, gradient_norm)


def _covariances(estimator, d: LikelihoodDerivatives, pml_cov, p, no_mle=False, null_space=None):
    """``(cov, cov_robust, held)`` of ``estimator``: the MLE's inverse OPG and sandwich (NPL, NFXP),
    the pseudo-likelihood's inverse Hessian (PML; no sandwich), none (projection, or no MLE);
    ``held``: every covariance by kind (the MLE's inverse Hessian too). With directions that
    change no choice (``null_space``, m > 0 columns) the MLE's inverses are the generalized ones
    on the identified directions."""
    nan = np.full((p, p), np.nan)
    if no_mle:
        return nan, nan, {}
    if estimator in ("npl", "nfxp"):
        if null_space is not None and null_space.shape[1]:
            h_inv, opg_inv = generalized_inverse(-d.hessian, null_space), generalized_inverse(d.opg, null_space)
        else:
            h_inv, opg_inv = _inverse(-d.hessian), _inverse(d.opg)
        sandwich = h_inv @ d.opg @ h_inv
        return opg_inv, sandwich, {"OPG": opg_inv, "inverse Hessian": h_inv, "sandwich": sandwich}
    if estimator == "pml":
        return pml_cov, nan, {"inverse Hessian": pml_cov}
    return nan, nan, {}

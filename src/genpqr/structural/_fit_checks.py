"""The warnings of a structural fit (:func:`genpqr.structural.estimate_structural`),
each naming the estimate it concerns: parameters not identified, a rare action, separated
choices (no MLE, decided on the data by ``genpqr.structural._separation``), no convergence,
and a projection estimate that the choices reject (:class:`ProjectionWarning`).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..data._validation import plain
from ..exceptions import ConvergenceWarning, GenPQRWarning, WeakSupportWarning
from ..messages import Mention, Message

__all__ = ["MIN_CHOICES_PER_PARAMETER", "PROJECTION_LR_QUANTILE", "ProjectionWarning", "check_identified",
           "check_rare_action", "check_separation", "check_convergence", "check_projection"]

#: Warn when the least chosen action has fewer choices than this per parameter (the logit rule of
#: thumb of 10 events per variable, Peduzzi et al. 1996).
MIN_CHOICES_PER_PARAMETER = 10
#: The projection warns when ``2 (loglik_MLE - loglik_projection)`` exceeds this chi-square(p) quantile.
PROJECTION_LR_QUANTILE = 0.99


class ProjectionWarning(GenPQRWarning):
    """The projection estimate (a minimum-distance reading of the reward table, not an MLE) is far
    from the maximum likelihood estimate of the same choice model: its log-likelihood is rejected
    by a likelihood-ratio comparison, or a parameter has the opposite sign."""


def check_identified(opg, names):
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
                  "collinear features), so where the optimizer stops along it is arbitrary: these parameters are reported as "
                  "not identified (no estimate or standard error; parameters.csv: identified=False), beside the "
                  "combinations of them that the choices do identify, with their standard errors", GenPQRWarning,
                  stacklevel=4)


def check_rare_action(counts, names, action_labels=None):
    """Warn (``WeakSupportWarning``) when the least chosen action has fewer than
    ``MIN_CHOICES_PER_PARAMETER`` choices per parameter: the likelihood then rests on a handful of
    events, its small-sample bias is noticeable and it can be unstable (on 100 simulated panels of
    the bus design of docs/structural_estimation.md cut to 16 months, 2-12 replacements each, three estimates of RC were 3.5,
    24 and 124 times the truth, with standard errors to match)."""
    per_action = np.asarray(counts, dtype=np.float64).sum(axis=0)
    k = int(np.argmin(per_action))
    rare, p = float(per_action[k]), len(names)
    if rare >= MIN_CHOICES_PER_PARAMETER * p:
        return
    action = f"code {k}" if action_labels is None else repr(plain(action_labels[k]))
    warnings.warn(Message(f"the structural estimates rest on {rare:.0f} choice(s) of the rarest action ({action}) "
                          f"for {p} parameter(s), fewer than {MIN_CHOICES_PER_PARAMETER} per parameter: with so few "
                          "events the MLE has a noticeable small-sample bias and can be unstable (it runs off to very "
                          "large values, with standard errors to match, when the rare choices sit at a few states), "
                          "and its standard errors and Wald intervals rest on asymptotics; read them as rough, check "
                          "them with ", Mention("n_boot", python="the bootstrap"), ", or use fewer parameters or more "
                          "data"), WeakSupportWarning, stacklevel=4)


def check_separation(separation, names, estimator, policy=None, counts=None):
    """Warn (``GenPQRWarning``) when the choices are separated by the features
    (:func:`genpqr.structural.find_separation`): complete separation, or quasi-complete
    separation of a static logit, proves that the MLE does not exist ("the maximum likelihood
    estimate does not exist"); quasi-complete separation of the value differences says it may not.
    When the data check could not decide (states without choices), the fitted model's end point is
    the fallback: every observed choice predicted with probability above ``1 - 1e-6``."""
    where = f"along the direction ({separation.describe(names)}) of the parameters"
    if separation.mle_exists is False:
        what = ("the value differences of the dynamic model" if separation.dynamic
                else "the flow-utility differences")
        warnings.warn(f"the choices are {separation.kind}ly separated by the features: {where}, {what} make every "
                      f"observed choice {'certain' if separation.kind == 'complete' else 'at least as likely'} (e.g. "
                      "the rare action occurs only where the model can give it probability 1), the likelihood keeps "
                      "rising toward parameters at infinity and the maximum likelihood estimate does not exist; the "
                      f"{estimator} estimates printed are where the optimizer stopped, not estimates, and no standard "
                      "error is given", GenPQRWarning, stacklevel=4)
    elif separation.kind == "quasi-complete":
        warnings.warn(f"the choices are quasi-completely separated by the features: {where}, every observed choice "
                      f"stays optimal and {separation.n_strict} of {separation.n_rows} become certain, while the "
                      "others tie; the maximum likelihood estimate may not exist (in a dynamic model the tied choices "
                      f"decide it); read the {estimator} estimates and standard errors with care", GenPQRWarning,
                      stacklevel=4)
    elif not separation.exact and policy is not None:
        n = np.asarray(counts, dtype=np.float64)
        worst = float(np.min(policy[n > 0])) if np.any(n > 0) else 1.0
        if worst > 1.0 - 1e-6:
            warnings.warn(f"the fitted model predicts every observed choice with probability above {worst:.6f}: the "
                          "choices look perfectly separated by the features and the maximum likelihood estimate may "
                          f"not exist (states without choices kept the data check from deciding); the {estimator} "
                          "estimates may be where the optimizer stopped", GenPQRWarning, stacklevel=4)


def check_convergence(estimator, converged, convergence, gradient_norm):
    """Warn (``ConvergenceWarning``) when the estimator did not converge, with its iterations."""
    if converged:
        return
    warnings.warn(Message(f"the {estimator} estimator did not converge ({convergence}; max |score| per choice "
                          f"{gradient_norm:.2e}): the estimates and standard errors are not those of a maximum; try "
                          "another ", Mention("estimator"), " or check the features"), ConvergenceWarning, stacklevel=4)


def check_projection(theta, loglik, mle_theta, mle_loglik, names, compare_signs=True):
    """Warn (:class:`ProjectionWarning`) when the projection estimate is far from the MLE of the
    same choice model: ``2 (loglik_MLE - loglik_projection)`` above the chi-square(p)
    :data:`PROJECTION_LR_QUANTILE` quantile (the choices reject the projection as a value of the
    parameters), or a parameter whose sign differs from the MLE's (``compare_signs=False`` when
    the MLE's parameters are not identified). Returns the two findings ``(lr_statistic,
    flipped_names)``."""
    from ..data._distributions import chi2_ppf

    theta, mle_theta = np.asarray(theta, dtype=np.float64), np.asarray(mle_theta, dtype=np.float64)
    statistic = 2.0 * (mle_loglik - loglik)
    critical = float(chi2_ppf(PROJECTION_LR_QUANTILE, theta.size))
    flipped = [names[j] for j in range(theta.size) if compare_signs and theta[j] * mle_theta[j] < 0]
    shown = ", ".join(f"{name} {value:.4g}" for name, value in zip(names, theta))
    mle = ", ".join(f"{name} {value:.4g}" for name, value in zip(names, mle_theta))
    problems = []
    if not statistic <= critical:  # NaN/inf loglik too
        problems.append(f"its log-likelihood {loglik:.6g} is far below the MLE's {mle_loglik:.6g} (likelihood-ratio "
                        f"statistic {statistic:.4g} > {critical:.4g}, the chi-square({theta.size}) "
                        f"{PROJECTION_LR_QUANTILE:g} quantile: the choices reject these values)")
    if flipped:
        problems.append(f"{', '.join(flipped)} ha{'s' if len(flipped) == 1 else 've'} the opposite sign of the "
                        "MLE's")
    if problems:
        warnings.warn(Message(f"the projection estimate ({shown}) is not the maximum likelihood estimate ({mle}) and "
                              f"is far from it: {'; '.join(problems)}. The projection is a minimum-distance reading of "
                              "the nonparametric reward table, not an estimate of the choice model; use ",
                              Mention("estimator", "npl"), " (the MLE)"), ProjectionWarning, stacklevel=3)
    return statistic, flipped

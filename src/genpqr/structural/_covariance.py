r"""The covariance kinds of a structural fit, and a fit with another kind.

A maximum likelihood fit (``npl``, ``nfxp``) carries three covariances of the full likelihood,
all conditional on the kernel: the inverse OPG (BHHH; the default, as Rust's NFXP reports), the
inverse of minus the Hessian (the observed information; statsmodels' default for a
``GenericLikelihoodModel``) and the sandwich ``H^-1 J H^-1`` (robust to misspecification of
the choice model). ``pml`` has its pseudo-likelihood's inverse Hessian, ``projection`` none. The
bootstrap over episodes (``bootstrap_fit``, or ``with_bootstrap`` on replicates the
caller drew) gives a fourth, whose intervals are percentile intervals.

``with_cov_type`` returns the same fit with ``cov``, ``std_error`` and ``se_kind`` of the
kind asked for, so every table, interval and test of the fit (``bse``, ``conf_int``,
``summary``, a counterfactual's delta method) uses it and says so.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np

from ..exceptions import GenPQRWarning
from ..messages import Mention, Message
from ._identification import IdentifiedCombination
from ._results import SE_KINDS, SE_LABELS, std_errors

__all__ = ["CovarianceChoices", "COV_TYPES", "COV_KINDS", "check_cov_type", "covariances_of", "with_cov_type", "with_bootstrap",
           "bootstrap_fit", "RefitStatistic"]

#: The names ``with_cov_type`` accepts (statsmodels' and ours) -> the kind's short label.
COV_TYPES = {"opg": "OPG", "bhhh": "OPG", "hessian": "inverse Hessian", "oim": "inverse Hessian",
             "inverse hessian": "inverse Hessian", "sandwich": "sandwich", "robust": "sandwich"}
#: Each kind of an MLE's covariance in full (``se_kind``).
COV_KINDS = {
    "OPG": SE_KINDS["npl"],
    "inverse Hessian": "inverse Hessian: MLE, inverse of minus the Hessian of the full likelihood (the observed "
                       "information), conditional on the kernel",
    "sandwich": "sandwich: MLE, H^-1 J H^-1 of the full likelihood (robust to misspecification of the choice "
                "model), conditional on the kernel",
}


def check_cov_type(cov_type) -> str:
    """The short label of ``cov_type`` (``"opg"``, ``"hessian"``/``"oim"``, ``"sandwich"``/``"robust"``,
    case-insensitive, or a label itself), else a ``ValueError`` naming the choices."""
    key = str(cov_type).strip().lower()
    if key in COV_TYPES:
        return COV_TYPES[key]
    if cov_type in COV_KINDS:
        return cov_type
    raise ValueError(f"cov_type must be one of {sorted(set(COV_TYPES))} (bootstrap: with_bootstrap / bootstrap), "
                     f"got {cov_type!r}")


def covariances_of(fit) -> dict:
    """``{label: covariance}`` of the kinds ``fit`` holds (a fit saved before they were kept:
    its own covariance and the sandwich)."""
    if getattr(fit, "covariances", None) is not None:
        return dict(fit.covariances)
    own = {SE_LABELS[fit.estimator]: fit.cov} if fit.estimator != "projection" else {}
    if np.all(np.isfinite(fit.cov_robust)):
        own["sandwich"] = fit.cov_robust
    return own


def _combinations(fit, cov):
    """The identified combinations with standard errors from ``cov``."""
    ident = getattr(fit, "identification", None)
    if ident is None or not ident.combinations:
        return ident
    out = []
    for combo in ident.combinations:
        c = np.array([combo.coefficients.get(name, 0.0) for name in fit.names])
        variance = float(c @ cov @ c) if np.all(np.isfinite(cov)) else np.nan
        out.append(IdentifiedCombination(combo.coefficients, combo.estimate,
                                         float(np.sqrt(variance)) if variance >= 0 else float("nan")))
    return replace(ident, combinations=tuple(out))


def with_cov_type(fit, cov_type):
    """``fit`` with the covariance ``cov_type`` (see :func:`check_cov_type`) as its ``cov``,
    ``std_error``, ``se_kind`` and ``cov_type``; a ``ValueError`` when the fit has no such
    covariance (``pml``: the inverse Hessian only; ``projection``: none, bootstrap it)."""
    label = check_cov_type(cov_type)
    held = covariances_of(fit)
    if label not in held:
        have = ", ".join(held) or "none"
        raise ValueError(f"a {fit.estimator} fit has no {label} covariance (it has: {have}); "
                         + ("bootstrap it (fit.bootstrap(model, n_boot))" if fit.estimator == "projection" else
                            "the OPG and the sandwich are those of the maximum likelihood estimators npl and nfxp"))
    cov = np.asarray(held[label], dtype=np.float64)
    hidden = np.where(fit.identified, 1.0, np.nan)
    kind = SE_KINDS[fit.estimator] if fit.estimator == "pml" else COV_KINDS[label]
    return replace(fit, cov=cov, std_error=std_errors(cov) * hidden, se_kind=kind, cov_kind=label,
                   bootstrap_replicates=None, identification=_combinations(fit, cov))


def with_bootstrap(fit, replicates, *, source: str = "episodes resampled, re-estimated each"):
    """``fit`` with the bootstrap covariance of ``replicates`` (B, p): the replicates'
    covariance as ``cov``, their standard deviation as ``std_error``, percentile intervals
    (``conf_int``, ``to_frame``, ``summary``), ``cov_type`` ``"bootstrap"``; ``source`` says
    how they were drawn."""
    reps = np.asarray(replicates, dtype=np.float64)
    if reps.ndim != 2 or reps.shape[1] != fit.theta.size or reps.shape[0] < 2:
        raise ValueError(f"replicates must have shape (B, {fit.theta.size}) with B >= 2, got {reps.shape}")
    kept = reps[np.all(np.isfinite(reps), axis=1)]
    if kept.shape[0] < 2:
        raise ValueError("fewer than two bootstrap replicates are finite: no bootstrap covariance")
    cov = np.atleast_2d(np.cov(kept, rowvar=False, ddof=1))
    hidden = np.where(fit.identified, 1.0, np.nan)
    kind = f"bootstrap: covariance over {kept.shape[0]} replicates ({source}); percentile intervals"
    return replace(fit, cov=cov, std_error=std_errors(cov) * hidden, se_kind=kind, cov_kind="bootstrap",
                   bootstrap_replicates=kept, identification=_combinations(fit, cov))


class RefitStatistic:
    """Bootstrap statistic (picklable): the structural estimates re-estimated on a replicate."""

    def __init__(self, fit):
        self.fit = fit

    def __call__(self, model):
        return self.fit.refit(model).theta


def bootstrap_fit(fit, model, n_boot: int = 200, *, random_state=None, n_jobs: int = 1, progress=None):
    """``fit`` re-estimated on ``n_boot`` resamples of ``model``'s episodes (each refits GenPQR,
    its kernel and choices, then the structural parameters; :func:`genpqr.evaluation.bootstrap`):
    ``with_bootstrap`` of the replicates. ``model`` must hold its training data."""
    from ..evaluation import bootstrap

    if getattr(model, "training_data_", None) is None:
        raise ValueError(Message("the bootstrap refits the model on resampled episodes: it needs the fitted GenPQR "
                                 "with its training data (", Mention("include_data", True,
                                                                     python="save(path, include_data=True)"), ")"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GenPQRWarning)
        boot = bootstrap(model, model.training_data_, n_boot=int(n_boot), statistic=RefitStatistic(fit),
                         n_jobs=n_jobs, random_state=random_state, progress=progress, fitted=model)
    return with_bootstrap(fit, boot.replicates)


class CovarianceChoices:
    """The covariance choices of a ``StructuralFit`` (a mixin): ``with_cov_type``,
    ``with_bootstrap()``, ``bootstrap()``."""

    def with_cov_type(self, cov_type):
        """This fit with another covariance (``"opg"``, ``"hessian"``/``"oim"``,
        ``"sandwich"``/``"robust"``): its ``cov``, ``std_error``, intervals, summary and the
        delta method of its counterfactuals (``with_cov_type``)."""
        return with_cov_type(self, cov_type)

    def with_bootstrap(self, replicates, *, source: str = "episodes resampled, re-estimated each"):
        """This fit with the bootstrap covariance of ``replicates`` (B, p) and percentile
        intervals (``with_bootstrap``)."""
        return with_bootstrap(self, replicates, source=source)

    def bootstrap(self, model, n_boot: int = 200, *, random_state=None, n_jobs: int = 1, progress=None):
        """This fit re-estimated on ``n_boot`` resamples of ``model``'s episodes (GenPQR, its
        kernel and choices refitted each time; ``model`` must hold its training data): the fit
        with the bootstrap covariance and percentile intervals (``cov_type == "bootstrap"``,
        ``bootstrap_fit``)."""
        return bootstrap_fit(self, model, n_boot, random_state=random_state, n_jobs=n_jobs, progress=progress)

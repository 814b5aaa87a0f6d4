r"""Structural results as objects, in the style of statsmodels: the coefficient table
(``coefficient_frame``, ``StructuralFit.to_frame``), Wald intervals (``conf_int``), a
printable summary (``StructuralSummary``), and the likelihood-ratio test between nested
specifications (:func:`lr_test`, ``StructuralFit.compare_lr``).

Every standard error carries its kind (``SE_LABELS``: OPG, inverse Hessian, sandwich,
bootstrap), and every interval shown beside a standard error is computed from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..messages import Mention, Message
from ._summary import StructuralSummary

__all__ = ["ESTIMATOR_LABELS", "SE_KINDS", "SE_LABELS", "MLE_ESTIMATORS", "describe_iterations", "check_level",
           "level_of", "LikelihoodResults", "conf_int", "coefficient_frame", "StructuralSummary", "summary_of", "LRTestResult", "lr_test",
           "std_errors"]

#: The estimators whose answer is the maximum likelihood estimator.
MLE_ESTIMATORS = ("npl", "nfxp")
#: What each estimator is (console, report and summary).
ESTIMATOR_LABELS = {
    "npl": "NPL iterated to convergence (the maximum likelihood estimator)",
    "nfxp": "NFXP, nested fixed point (the maximum likelihood estimator)",
    "pml": "Hotz-Miller two-step pseudo-likelihood (PML; not iterated to the maximum likelihood estimator)",
    "projection": "weighted least-squares projection of the reward table on the features (a minimum-distance "
                  "estimator, not the maximum likelihood estimator)",
}
#: The kind of each estimator's ``std_error``, short (column headers, console).
SE_LABELS = {"npl": "OPG", "nfxp": "OPG", "pml": "inverse Hessian", "projection": "influence function"}
#: ... and in full (parameters.csv's ``std_error_kind``, the report).
SE_KINDS = {
    "npl": "OPG: MLE, inverse outer product of the scores (BHHH), conditional on the kernel",
    "nfxp": "OPG: MLE, inverse outer product of the scores (BHHH), conditional on the kernel",
    "pml": "inverse Hessian of the pseudo-likelihood, conditional on the first stage (ignores its estimation error)",
    "projection": Message("efficient influence function of the projection (no linear form assumed; genpqr.inference), "
                          "clustered by episode, at the fitted first stage and kernel; none for a model without its "
                          "rows (saved without ", Mention("include_data", True, python="save(path, include_data=True)"),
                          ") or a normalization the influence functions do not carry: the projection is not an MLE "
                          "and has no likelihood standard error (use ", Mention("n_boot", python="the bootstrap"), ")"),
}


def describe_iterations(parts, converged) -> str:
    """``"BHHH 200 (hit the cap) + Newton 2, converged by Newton"`` from ``parts``, a list of
    ``(algorithm, iterations, note)`` (iterations None: a closed form); ``converged`` None for
    one-step estimators (no suffix)."""
    text = " + ".join(name + ("" if count is None else f" {count}") + (f" ({note})" if note else "")
                      for name, count, note in parts)
    if converged is None:
        return text
    if not converged:
        return f"{text}, NOT CONVERGED"
    return f"{text}, converged by {parts[-1][0]}" if len(parts) > 1 else f"{text}, converged"


def check_level(level) -> float:
    """``level`` as a float in (0, 1), else a ``ValueError`` naming it."""
    try:
        value = float(level)
    except (TypeError, ValueError):
        raise TypeError(f"level must be a number in (0, 1), got {level!r}") from None
    if not 0.0 < value < 1.0:
        raise ValueError(f"level must be in (0, 1) (e.g. 0.95), got {level!r}")
    return value


def level_of(alpha=0.05, level=None) -> float:
    """The confidence level of statsmodels' ``alpha`` (``1 - alpha``) or of our ``level``.

    ``alpha`` above 0.5 (an interval narrower than 50%) is refused with a ``ValueError`` that
    says which call was meant (``conf_int(0.9)`` read as a level is ``level=0.9``)."""
    if level is not None:
        if alpha is not None and alpha != 0.05 and abs(1.0 - float(alpha) - float(level)) > 1e-12:
            raise ValueError(f"give alpha or level, not both (alpha={alpha!r}, level={level!r})")
        return check_level(level)
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise TypeError(f"alpha must be a number in (0, 0.5] (0.05 for a 95% interval), got {alpha!r}") from None
    if not 0.0 < a < 1.0:
        raise ValueError(f"alpha must be in (0, 0.5] (0.05 for a 95% interval), got {alpha!r}")
    if a > 0.5:
        raise ValueError(f"alpha={alpha!r} asks for a {1 - a:.0%} interval: alpha is statsmodels' significance level "
                         f"(0.05 for 95%); for a {a:.0%} interval pass alpha={1 - a:.3g} or level={a:.3g}")
    return 1.0 - a


def _percentile(replicates, level):
    lo, hi = np.nanquantile(replicates, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return lo, hi


def _rows(fit):
    """``(names, estimates, std errors, robust std errors, identified, coefficients)`` of the
    coefficient table: the parameters (no number where not identified), then the identified
    combinations of those (``coefficients`` (rows, p): each row's weights on the parameters)."""
    identified = np.asarray(getattr(fit, "identified", np.ones(fit.theta.size, dtype=bool)))
    hidden = np.where(identified, 1.0, np.nan)
    combos = getattr(getattr(fit, "identification", None), "combinations", ())
    names = list(fit.names) + [c.describe() for c in combos]
    estimate = np.concatenate([fit.theta * hidden, [c.estimate for c in combos]])
    se = np.concatenate([fit.std_error * hidden, [c.std_error for c in combos]])
    robust = np.concatenate([fit.std_error_robust * hidden, np.full(len(combos), np.nan)])
    weights = np.vstack([np.eye(fit.theta.size)] + [[c.coefficients.get(n, 0.0) for n in fit.names] for c in combos])
    return names, estimate, se, robust, np.concatenate([identified, np.ones(len(combos), dtype=bool)]), weights


def _intervals(fit, estimate, se, weights, level):
    """Wald ``estimate -+ z se``, or with bootstrap replicates their percentile interval."""
    from ..data._distributions import normal_ppf

    reps = getattr(fit, "bootstrap_replicates", None)
    if reps is not None:
        lo, hi = _percentile(reps @ weights.T, level)
        hidden = np.where(np.isfinite(estimate), 1.0, np.nan)
        return lo * hidden, hi * hidden
    half = normal_ppf(0.5 + level / 2) * se
    return estimate - half, estimate + half


def conf_int(fit, level: float = 0.95):
    """Intervals as a DataFrame (columns ``lower``, ``upper``, index the parameter names): Wald
    ``estimate -+ z std_error``, or percentile intervals for a bootstrap fit
    (``with_bootstrap``); NaN where there is no standard error
    (projection, separation)."""
    import pandas as pd

    names, estimate, se, _, _, weights = _rows(fit)
    p = fit.theta.size
    lo, hi = _intervals(fit, estimate[:p], se[:p], weights[:p], check_level(level))
    return pd.DataFrame({"lower": lo, "upper": hi}, index=pd.Index(names[:p], name="parameter"))


def coefficient_frame(fit, level: float = 0.95):
    """One row per parameter: ``estimate, std_error, std_error_kind, z, p_value, ci_low, ci_high,
    std_error_robust, identified`` (``z = estimate / std_error``, two-sided normal p-value, the
    Wald interval of the same standard error, or the percentile interval of a bootstrap fit; the
    robust one is the sandwich, NaN where not defined). A parameter the choices do not identify
    has no number (NaN, ``identified`` False); each identified combination of such parameters
    follows as a row of its own (``genpqr.structural.identification``)."""
    import pandas as pd
    from ..data._distributions import normal_sf

    level = check_level(level)
    names, estimate, se, robust, identified, weights = _rows(fit)
    z = estimate / se
    lo, hi = _intervals(fit, estimate, se, weights, level)
    return pd.DataFrame({"estimate": estimate, "std_error": se, "std_error_kind": fit.se_label,
                         "z": z, "p_value": 2.0 * normal_sf(np.abs(z)), "ci_low": lo,
                         "ci_high": hi, "std_error_robust": robust, "identified": identified},
                        index=pd.Index(names, name="parameter"))


def _se_header(fit) -> str:
    if fit.se_label != "none" or fit.estimator == "projection":
        return fit.se_kind
    if fit.separation is not None and fit.separation.mle_exists is False:
        return "none: the maximum likelihood estimate does not exist"
    return f"none ({fit.se_kind}; the matrix to invert is singular or not definite)"


def summary_of(fit, level: float = 0.95) -> StructuralSummary:
    """``StructuralSummary`` of a ``StructuralFit``."""
    level = check_level(level)
    header = [("Estimator", f"{fit.estimator}: {ESTIMATOR_LABELS[fit.estimator]}"),
              ("Log-likelihood", f"{fit.loglik:.4f}" + (f" (MLE: {fit.mle_loglik:.4f})"
                                                        if np.isfinite(fit.mle_loglik) else "")),
              ("Choices", f"{fit.n_choices}"), ("Parameters", f"{fit.theta.size}"), ("Discount", f"{fit.gamma:g}")]
    if fit.estimator in MLE_ESTIMATORS:
        header += [("AIC", f"{fit.aic:.3f}"), ("BIC", f"{fit.bic:.3f}")]
    header += [("Iterations", fit.convergence), ("Std. errors", _se_header(fit))]
    notes = []
    if fit.estimator not in MLE_ESTIMATORS:
        notes.append(f"{fit.estimator} is not the maximum likelihood estimator; the log-likelihood is the full "
                     "likelihood evaluated at its estimate" + (" (the MLE's beside it)"
                                                               if np.isfinite(fit.mle_loglik) else ""))
    if fit.separation is not None and fit.separation.mle_exists is False:
        notes.append("the choices are separated by the features: the maximum likelihood estimate does not exist; "
                     "the estimates are where the optimizer stopped")
    ident = getattr(fit, "identification", None)
    if ident is not None and not ident.all_identified:
        missing = ", ".join(n for n, ok in zip(fit.names, ident.identified) if not ok)
        combos = "; ".join(c.describe() for c in ident.combinations) or "none"
        notes.append(f"not identified by the choices (no estimate shown): {missing}; identified combination(s) of "
                     f"them, in the rows below the parameters: {combos}")
    if np.any(np.isfinite(fit.std_error_robust)) and fit.se_label != "sandwich":
        robust = ", ".join(f"{n} {s:.4g}" for n, s in zip(fit.names, fit.std_error_robust))
        notes.append(f"sandwich (robust) standard errors H^-1 J H^-1: {robust}")
    return StructuralSummary(header, coefficient_frame(fit, level), level, notes)


class LikelihoodResults:
    """statsmodels' names for a structural fit (a mixin of ``StructuralFit`` and
    ``TypedStructuralFit``): ``params``, ``bse``, ``tvalues``, ``pvalues``, ``llf``, ``nobs``,
    ``df_model``, ``df_resid``, ``aic``, ``bic``, ``cov_type``, ``cov_params()``,
    ``conf_int(alpha)`` and ``summary(alpha)``. Every parameter estimated is in them (with latent
    types the mixing coefficients too), indexed by name; a parameter the choices do not identify
    has NaN. ``bse`` and every interval are of the kind ``cov_type`` (OPG, inverse Hessian,
    sandwich, bootstrap or none); ``with_cov_type`` gives the fit with another kind.

    Conventions (as statsmodels' ``GenericLikelihoodModel`` with ``k_constant = 0``):
    ``tvalues`` are z statistics, ``pvalues`` two-sided normal; ``nobs`` the independent
    observations of the likelihood (choices; with latent types, episodes); ``df_model`` the free
    parameters (those the choices identify; no one of them is "the constant"), ``df_resid =
    nobs - df_model``; ``aic = -2 llf + 2 df_model``, ``bic = -2 llf + log(nobs) df_model``, NaN
    for an estimator that does not maximize the likelihood (``pml``, ``projection``).
    """

    def _stacked(self):
        """``(names, estimates, identified)`` of every parameter (mixing ones last)."""
        names = list(self.names) + list(getattr(self, "mixing_names", ()))
        est = np.concatenate([self.theta, getattr(self, "mixing_params", np.zeros(0))])
        ident = np.asarray(getattr(self, "identified", np.ones(self.theta.size, dtype=bool)))  # (p,) or all
        ident = np.concatenate([ident, np.ones(est.size - ident.size, dtype=bool)])
        return names, np.where(ident, est, np.nan), ident

    def _series(self, values, name):
        import pandas as pd

        return pd.Series(values, index=pd.Index(self._stacked()[0], name="parameter"), name=name)

    @property
    def params(self):
        """All estimates (Series indexed by parameter name; NaN where not identified)."""
        return self._series(self._stacked()[1], "estimate")

    @property
    def bse(self):
        """Standard errors of the kind ``cov_type`` (Series, named by it)."""
        se = np.concatenate([self.std_error, getattr(self, "mixing_std_error", np.zeros(0))])
        return self._series(se, f"std_error ({self.se_label})")

    @property
    def tvalues(self):
        """``params / bse``: z statistics."""
        return self._series(self.params.to_numpy() / self.bse.to_numpy(), "z")

    @property
    def pvalues(self):
        """Two-sided normal p-values of ``tvalues``."""
        from ..data._distributions import normal_sf

        return self._series(2.0 * normal_sf(np.abs(self.tvalues.to_numpy())), "P>|z|")

    @property
    def cov_type(self) -> str:
        """The kind of ``bse``, ``cov_params()`` and the intervals, e.g. ``"OPG"``."""
        return self.se_label

    @property
    def llf(self) -> float:
        """The log-likelihood at the estimate (``loglik``)."""
        return float(self.loglik)

    @property
    def nobs(self) -> int:
        """Independent observations of the likelihood: choices (with latent types: episodes)."""
        return int(getattr(self, "n_episodes", self.n_choices))

    @property
    def df_model(self) -> int:
        """Free parameters: all estimated ones, less the directions the choices do not identify."""
        ident = getattr(self, "identification", None)
        lost = 0 if ident is None else int(np.asarray(ident.null_space).shape[1])
        return int(self._stacked()[1].size - lost)

    @property
    def df_resid(self) -> int:
        return self.nobs - self.df_model

    def _maximizes(self) -> bool:
        return not hasattr(self, "identified") or self.estimator in MLE_ESTIMATORS

    @property
    def aic(self) -> float:
        """``-2 llf + 2 df_model`` (NaN for ``pml`` and ``projection``: not the likelihood's maximum)."""
        return -2.0 * self.llf + 2.0 * self.df_model if self._maximizes() else float("nan")

    @property
    def bic(self) -> float:
        """``-2 llf + log(nobs) df_model`` (NaN for ``pml`` and ``projection``)."""
        return -2.0 * self.llf + np.log(self.nobs) * self.df_model if self._maximizes() else float("nan")

    def cov_params(self):
        """The covariance of ``params`` of the kind ``cov_type`` (DataFrame, rows and columns
        named; NaN for a parameter not identified)."""
        import pandas as pd

        names, _, ident = self._stacked()
        mask = np.where(ident, 1.0, np.nan)
        cov = np.asarray(self.cov, dtype=np.float64) * mask[:, None] * mask[None, :]
        index = pd.Index(names, name="parameter")
        return pd.DataFrame(cov, index=index, columns=pd.Index(names))

    def conf_int(self, alpha=0.05, cols=None, *, level=None):
        """Intervals at level ``1 - alpha`` (or ``level``), columns ``lower`` and ``upper``: Wald
        from ``bse`` (percentile for a bootstrap fit). ``cols``: positions or names of the
        parameters to keep (default all). ``alpha`` above 0.5 is refused: ``conf_int(0.9)``
        meaning a 90% interval is ``conf_int(level=0.9)``."""
        frame = self._conf_int(level_of(alpha, level))
        if cols is None:
            return frame
        cols = [cols] if isinstance(cols, (int, str, np.integer)) else list(cols)
        return frame.iloc[cols] if all(isinstance(c, (int, np.integer)) for c in cols) else frame.loc[cols]

    def _conf_int(self, level):
        frame = self.to_frame(level)
        frame = frame.iloc[:len(self._stacked()[0])]
        return frame[["ci_low", "ci_high"]].rename(columns={"ci_low": "lower", "ci_high": "upper"})

    def summary(self, alpha=0.05, *, level=None):
        """A statsmodels-style summary (``genpqr.structural._summary.StructuralSummary``) with
        ``1 - alpha`` (or ``level``) intervals: ``print`` it, ``tables``, ``as_text()``,
        ``as_html()``, ``as_latex()``."""
        return self._summary(level_of(alpha, level))


@dataclass(frozen=True)
class LRTestResult:
    """A likelihood-ratio test of a restricted specification against an unrestricted one.

    Attributes
    ----------
    statistic : float
        ``2 (loglik_unrestricted - loglik_restricted)``.
    df : int
        Parameters of the unrestricted model minus those of the restricted one.
    p_value : float
        ``P(chi-square(df) > statistic)``.
    loglik_restricted, loglik_unrestricted : float
    """

    statistic: float
    df: int
    p_value: float
    loglik_restricted: float
    loglik_unrestricted: float

    def __str__(self) -> str:
        return (f"likelihood-ratio test: statistic {self.statistic:.4f} on {self.df} df, p-value {self.p_value:.4g} "
                f"(log-likelihoods {self.loglik_restricted:.4f} restricted, {self.loglik_unrestricted:.4f} "
                "unrestricted)")


def _same_kernel(a, b) -> bool:
    import scipy.sparse as sp

    if a is b:
        return True
    if a is None or b is None or a.matrix.shape != b.matrix.shape:
        return False
    diff = (sp.csr_matrix(a.matrix) - sp.csr_matrix(b.matrix))
    return diff.nnz == 0 or float(np.max(np.abs(diff.data))) == 0.0


def _check_lr_pair(restricted, unrestricted) -> None:
    for role, fit in (("restricted", restricted), ("unrestricted", unrestricted)):
        if fit.estimator not in MLE_ESTIMATORS:
            raise ValueError(f"{role} is a {fit.estimator} fit, not a maximum likelihood estimate: the "
                             f"likelihood-ratio test needs {' or '.join(MLE_ESTIMATORS)} fits")
        if not fit.converged:
            raise ValueError(f"{role} ({fit.estimator}) did not converge ({fit.convergence}): its log-likelihood is "
                             "not a maximum")
    if (restricted.counts is None or unrestricted.counts is None or restricted.counts.shape != unrestricted.counts.shape
            or not np.array_equal(restricted.counts, unrestricted.counts)):
        raise ValueError(f"the two fits are on different choices ({restricted.n_choices} and "
                         f"{unrestricted.n_choices} choices, or other counts per state and action): a likelihood-ratio "
                         "test compares two models of the same data")
    if restricted.gamma != unrestricted.gamma:
        raise ValueError(f"the two fits have different discounts ({restricted.gamma:g} and {unrestricted.gamma:g})")
    if not _same_kernel(restricted.kernel, unrestricted.kernel):
        raise ValueError("the two fits hold different transition kernels fixed: their likelihoods are not nested")


def lr_test(restricted, unrestricted) -> LRTestResult:
    """Likelihood-ratio test of ``restricted`` (fewer parameters, nested in ``unrestricted``).

    Both must be converged MLEs (``npl`` or ``nfxp``) on the same choice counts, kernel and
    discount (else ``ValueError``). Nesting itself (every restricted flow utility is also an
    unrestricted one) is the caller's to ensure: a restricted fit whose log-likelihood is higher by
    more than rounding (``1e-6 + 1e-9 |loglik|``) is refused as not nested; within rounding the
    statistic is 0.

    Parameters
    ----------
    restricted, unrestricted : StructuralFit

    Returns
    -------
    LRTestResult
    """
    from ..data._distributions import chi2_sf

    _check_lr_pair(restricted, unrestricted)
    df = int(unrestricted.theta.size - restricted.theta.size)
    if df < 1:
        raise ValueError(f"the restricted fit must have fewer parameters than the unrestricted one, got "
                         f"{restricted.theta.size} and {unrestricted.theta.size}")
    gap = unrestricted.loglik - restricted.loglik
    if gap < -(1e-6 + 1e-9 * abs(unrestricted.loglik)):
        raise ValueError(f"the restricted fit has the higher log-likelihood ({restricted.loglik:.6f} > "
                         f"{unrestricted.loglik:.6f}): the specifications are not nested (or a fit is not at its "
                         "maximum); pass the model with fewer parameters as restricted")
    statistic = max(0.0, 2.0 * gap)
    return LRTestResult(statistic, df, float(chi2_sf(statistic, df)), float(restricted.loglik),
                        float(unrestricted.loglik))


def std_errors(cov):
    """Square roots of the covariance's diagonal; NaN where it is not finite or negative (an
    inverse of a matrix that is not positive definite: no standard error, rather than 0). Also
    ``genpqr.structural._estimation.std_errors`` (one function for every structural fit,
    latent types included)."""
    diag = np.diag(cov) if np.all(np.isfinite(cov)) else np.full(cov.shape[0], np.nan)
    return np.sqrt(np.where(diag >= 0, diag, np.nan))

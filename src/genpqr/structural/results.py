r"""Structural results as objects, in the style of statsmodels: the coefficient table
(:func:`coefficient_frame`, ``StructuralFit.to_frame``), Wald intervals (:func:`conf_int`), a
printable summary (:class:`StructuralSummary`), and the likelihood-ratio test between nested
specifications (:func:`lr_test`, ``StructuralFit.compare_lr``).

Every standard error carries its kind (:data:`SE_LABELS`: OPG, inverse Hessian, sandwich,
bootstrap), and every interval shown beside a standard error is computed from it.
"""

from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass

import numpy as np

__all__ = ["ESTIMATOR_LABELS", "SE_KINDS", "SE_LABELS", "MLE_ESTIMATORS", "describe_iterations", "check_level",
           "conf_int", "coefficient_frame", "StructuralSummary", "summary_of", "LRTestResult", "lr_test",
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
    "projection": "efficient influence function of the projection (no linear form assumed; genpqr.inference), "
                  "clustered by episode, at the fitted first stage and kernel; none without the rows (the projection "
                  "is not an MLE and has no likelihood standard error)",
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


def conf_int(fit, level: float = 0.95):
    """Wald intervals ``estimate -+ z std_error`` as a DataFrame (columns ``lower``, ``upper``,
    index the parameter names); NaN where there is no standard error (projection, separation)."""
    import pandas as pd

    lo, hi = fit.wald_interval(check_level(level))
    return pd.DataFrame({"lower": lo, "upper": hi}, index=pd.Index(list(fit.names), name="parameter"))


def _rows(fit):
    """``(names, estimates, std errors, robust std errors, identified)`` of the coefficient table:
    the parameters (no number where not identified), then the identified combinations of those."""
    identified = np.asarray(getattr(fit, "identified", np.ones(fit.theta.size, dtype=bool)))
    hidden = np.where(identified, 1.0, np.nan)
    combos = getattr(getattr(fit, "identification", None), "combinations", ())
    names = list(fit.names) + [c.describe() for c in combos]
    estimate = np.concatenate([fit.theta * hidden, [c.estimate for c in combos]])
    se = np.concatenate([fit.std_error * hidden, [c.std_error for c in combos]])
    robust = np.concatenate([fit.std_error_robust * hidden, np.full(len(combos), np.nan)])
    return names, estimate, se, robust, np.concatenate([identified, np.ones(len(combos), dtype=bool)])


def coefficient_frame(fit, level: float = 0.95):
    """One row per parameter: ``estimate, std_error, std_error_kind, z, p_value, ci_low, ci_high,
    std_error_robust, identified`` (``z = estimate / std_error``, two-sided normal p-value, the
    Wald interval of the same standard error; the robust one is the sandwich, NaN where not
    defined). A parameter the choices do not identify has no number (NaN, ``identified``
    False); each identified combination of such parameters follows as a row of its own
    (:mod:`genpqr.structural.identification`)."""
    import pandas as pd
    from scipy.stats import norm

    level = check_level(level)
    names, estimate, se, robust, identified = _rows(fit)
    z = estimate / se
    half = norm.ppf(0.5 + level / 2) * se
    return pd.DataFrame({"estimate": estimate, "std_error": se, "std_error_kind": fit.se_label,
                         "z": z, "p_value": 2.0 * norm.sf(np.abs(z)), "ci_low": estimate - half,
                         "ci_high": estimate + half, "std_error_robust": robust, "identified": identified},
                        index=pd.Index(names, name="parameter"))


def _num(x, width=10) -> str:
    if not np.isfinite(x):
        return f"{'-':>{width}}" if np.isnan(x) else f"{x:>{width}}"
    text = f"{x:.4f}" if 1e-3 <= abs(x) < 1e6 or x == 0 else f"{x:.3e}"
    return f"{text:>{width}}"


def _header_lines(header, width) -> list:
    """``label: value`` lines; two short items share a line (statsmodels' two columns)."""
    half, lines, i = width // 2, [], 0
    while i < len(header):
        label, value = header[i]
        left = f"{label + ':':<18}{value}"
        if i + 1 < len(header) and len(left) < half and len(f"{header[i + 1][0]}: {header[i + 1][1]}") < half - 1:
            label2, value2 = header[i + 1]
            lines.append(f"{left:<{half}}{label2 + ':':<{half - 12}}{value2:>12}".rstrip())
            i += 2
            continue
        lines += textwrap.wrap(str(value), width, initial_indent=f"{label + ':':<18}", subsequent_indent=" " * 18)
        i += 1
    return lines


@dataclass(frozen=True)
class StructuralSummary:
    """The summary of a structural fit (:meth:`StructuralFit.summary`): ``print`` it, or read its
    ``tables`` (``[header, coefficients]``, DataFrames), ``to_frame()`` (the coefficients) and
    ``notes``; in a notebook it renders as HTML.

    Attributes
    ----------
    header : list of (str, str)
        Estimator, log-likelihood, choices, parameters, discount, iterations, standard errors.
    coefficients : DataFrame
        :func:`coefficient_frame`.
    level : float
    notes : list of str
    """

    header: list
    coefficients: object
    level: float
    notes: list

    @property
    def tables(self) -> list:
        import pandas as pd

        head = pd.DataFrame(self.header, columns=["item", "value"]).set_index("item")
        return [head, self.coefficients]

    def to_frame(self):
        """The coefficient table (a copy)."""
        return self.coefficients.copy()

    def as_text(self, width: int = 78) -> str:
        """The summary as a fixed-width table (statsmodels' layout)."""
        c = self.coefficients
        name_w = max(12, *(len(str(n)) + 1 for n in c.index))
        kind = c["std_error_kind"].iloc[0] if len(c) else "none"
        kind = {"inverse Hessian": "inv. Hessian"}.get(kind, kind)
        lo, hi = (0.5 - self.level / 2), (0.5 + self.level / 2)
        lines = ["Structural estimation results".center(width), "=" * width]
        lines += _header_lines(self.header, width)
        lines.append("=" * width)
        se_head = f"SE ({kind})" if kind != "none" else "SE"
        lines.append(f"{'':<{name_w}}{'estimate':>10}{se_head:>18}{'z':>9}{'P>|z|':>8}{f'[{lo:.3g}':>11}"
                     f"{f'{hi:.3g}]':>10}")
        lines.append("-" * width)
        for name, row in c.iterrows():
            p = "-" if np.isnan(row.p_value) else f"{row.p_value:.3f}"
            z = "-" if np.isnan(row.z) else f"{row.z:.3f}"
            lines.append(f"{str(name):<{name_w}}{_num(row.estimate)}{_num(row.std_error, 18)}{z:>9}{p:>8}"
                         f"{_num(row.ci_low, 11)}{_num(row.ci_high)}")
        lines.append("=" * width)
        for note in self.notes:
            lines += textwrap.wrap(note, width, initial_indent="Note: ", subsequent_indent="      ")
        return "\n".join(line.rstrip() for line in lines)

    def __str__(self) -> str:
        return self.as_text()

    def __repr__(self) -> str:
        return self.as_text()

    def _repr_html_(self) -> str:
        head = "".join(f"<tr><th style='text-align:left'>{html.escape(str(k))}</th>"
                       f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>" for k, v in self.header)
        notes = "".join(f"<p>Note: {html.escape(n)}</p>" for n in self.notes)
        return (f"<div><b>Structural estimation results</b><table>{head}</table>"
                f"{self.coefficients.to_html(float_format=lambda x: f'{x:.4g}')}{notes}</div>")


def _se_header(fit) -> str:
    if fit.se_label != "none" or fit.estimator == "projection":
        return fit.se_kind
    if fit.separation is not None and fit.separation.mle_exists is False:
        return "none: the maximum likelihood estimate does not exist"
    return f"none ({fit.se_kind}; the matrix to invert is singular or not definite)"


def summary_of(fit, level: float = 0.95) -> StructuralSummary:
    """:class:`StructuralSummary` of a ``StructuralFit``."""
    level = check_level(level)
    header = [("Estimator", f"{fit.estimator}: {ESTIMATOR_LABELS[fit.estimator]}"),
              ("Log-likelihood", f"{fit.loglik:.4f}" + (f" (MLE: {fit.mle_loglik:.4f})"
                                                        if np.isfinite(fit.mle_loglik) else "")),
              ("Choices", f"{fit.n_choices}"), ("Parameters", f"{fit.theta.size}"), ("Discount", f"{fit.gamma:g}"),
              ("Iterations", fit.convergence), ("Std. errors", _se_header(fit))]
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
    if np.any(np.isfinite(fit.std_error_robust)):
        robust = ", ".join(f"{n} {s:.4g}" for n, s in zip(fit.names, fit.std_error_robust))
        notes.append(f"sandwich (robust) standard errors H^-1 J H^-1: {robust}")
    return StructuralSummary(header, coefficient_frame(fit, level), level, notes)


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
    from scipy.stats import chi2

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
    return LRTestResult(statistic, df, float(chi2.sf(statistic, df)), float(restricted.loglik),
                        float(unrestricted.loglik))


def std_errors(cov):
    """Square roots of the covariance's diagonal; NaN where it is not finite or negative (an
    inverse of a matrix that is not positive definite: no standard error, rather than 0). Also
    :func:`genpqr.structural.estimation.std_errors` (one function for every structural fit,
    latent types included)."""
    diag = np.diag(cov) if np.all(np.isfinite(cov)) else np.full(cov.shape[0], np.nan)
    return np.sqrt(np.where(diag >= 0, diag, np.nan))

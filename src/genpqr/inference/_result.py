"""The result of :func:`genpqr.inference.infer`: estimates, influence-function standard errors,
Wald intervals, the plug-in beside them, per-fold figures and diagnostics, in statsmodels'
names (``params``, ``bse``, ``conf_int()``, ``cov_params()``, ``summary()``, ``to_frame()``)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import norm

__all__ = ["InferenceResult", "InferenceSummary", "SE_KIND", "INPUTS", "INPUT_COLUMNS", "CROSS_SHOWN"]

#: The kind of every standard error of :class:`InferenceResult`.
SE_KIND = "efficient influence function"
WIDTH = 100
#: The inputs of the data's law a target's uncertainty comes from, one term of the influence
#: function each (``InferenceResult.se_by_input``).
INPUTS = ("first stage", "kernel", "state law")
#: Their names in the columns of ``se_by_input`` and ``inference.csv`` (``se_<key>``, ``share_<key>``).
INPUT_COLUMNS = ("first_stage", "kernel", "state_law")
#: The share of the variance between inputs (their terms' covariances) is shown in the summary
#: when its size reaches this.
CROSS_SHOWN = 0.01


@dataclass(frozen=True)
class InferenceResult:
    """Debiased estimates of one or more targets with their influence-function inference.

    Attributes
    ----------
    names : list of str
        The components (one per scalar target; a projection has one per feature).
    targets : list of str
        Each component's target, in words.
    estimate : ndarray (m,)
        The one-step (debiased) estimate: the cross-fitted plug-in plus the mean of the
        efficient influence function at the fold's nuisances.
    std_error : ndarray (m,)
        Of kind ``se_kind`` (``SE_KIND``): ``sqrt(sum_e (sum_{i in e} chi_i)^2) / n``,
        the influence function summed within episodes ``e`` (clustered), ``chi_i`` centred.
    cov : ndarray (m, m)
        The same, for every pair of components (``cov_params()``).
    plug_in : ndarray (m,)
        The plug-in: the target at the full-sample fit (what the fitted model alone says).
    level : float
        Default level of the intervals.
    n_rows, n_episodes : int
    cross_fit : int or None
        Episode folds of the nuisances (None: the full-sample nuisances, no splitting).
    route : str
        How the nuisances and representers were computed.
    folds : DataFrame
        Per fold and component: ``n_rows``, ``plug_in`` (at the fold's nuisances), ``correction``
        (mean influence on the held-out rows), ``estimate`` (their sum).
    diagnostics : DataFrame
        Per component: ``correction_to_se`` (``|estimate - mean fold plug-in| / SE``),
        ``weight_max`` and ``weight_q99`` (of ``|alpha|``, the Riesz representer of the reward at
        the rows, relative to its mean), ``effective_rows`` (``(sum|alpha|)^2 / sum alpha^2``: how many
        rows the weights rest on), ``top_row_share`` (the largest row's share of ``sum alpha^2``) and
        ``top_episode_share`` (the largest share of the variance one episode carries). With an
        efficient projection (``reward_projection(x, weights="efficient")``) also ``J``,
        ``J_dof`` and ``J_p_value``: its overidentification test of the linear form (NaN for the
        other components).
    influence : ndarray (n, m)
        The centred influence function at each row (for new contrasts: ``influence @ c``).
    episode_ids : ndarray (n,)
    warnings : list of str
        The :class:`~genpqr.exceptions.InferenceWarning` messages raised.
    seconds : float
    influence_by_input : ndarray (n, m, 3)
        ``influence`` split by the input it comes from, in the order of ``INPUTS`` (the last axis
        adds up to ``influence``): see :attr:`se_by_input`.
    cov_by_input : ndarray (m, 3, 3)
        The episode-clustered covariance of those terms, per component (each block adds up to the
        component's variance).
    """

    names: list
    targets: list
    estimate: np.ndarray
    std_error: np.ndarray
    cov: np.ndarray = field(repr=False)
    plug_in: np.ndarray
    level: float = 0.95
    n_rows: int = 0
    n_episodes: int = 0
    cross_fit: int | None = None
    route: str = ""
    folds: pd.DataFrame = field(default=None, repr=False)
    diagnostics: pd.DataFrame = field(default=None, repr=False)
    influence: np.ndarray = field(default=None, repr=False)
    episode_ids: np.ndarray = field(default=None, repr=False)
    warnings: list = field(default_factory=list)
    seconds: float = 0.0
    se_kind: str = SE_KIND
    influence_by_input: np.ndarray = field(default=None, repr=False)
    cov_by_input: np.ndarray = field(default=None, repr=False)

    # ------------------------------------------------------------------ statsmodels' names
    def _index(self):
        return pd.Index(list(self.names), name="component")

    @property
    def params(self) -> pd.Series:
        """The debiased estimates, by component."""
        return pd.Series(self.estimate, index=self._index(), name="estimate")

    @property
    def bse(self) -> pd.Series:
        """The influence-function standard errors, by component."""
        return pd.Series(self.std_error, index=self._index(), name=f"std_error ({self.se_kind})")

    @property
    def zvalues(self) -> pd.Series:
        return pd.Series(self.estimate / self.std_error, index=self._index(), name="z")

    @property
    def pvalues(self) -> pd.Series:
        """Two-sided p-values of ``estimate = 0`` (Wald, normal)."""
        return pd.Series(2.0 * norm.sf(np.abs(self.estimate / self.std_error)), index=self._index(), name="p_value")

    @property
    def se_by_input(self) -> pd.DataFrame:
        r"""Where each component's uncertainty comes from: one row per component, the standard
        error each input of the data's law would give alone and its share of the variance.

        The efficient influence function is a sum of three terms, one per factor of the law of a
        row ``rho(s) pi(a|s) P(s'|s, a)`` (``genpqr.inference._algebra``): the **first stage**
        ``alpha(s, a) - sum_b pi(b|s) alpha(s, b)`` (the behaviour policy, estimated by stage 1),
        the **kernel** ``sum_k c_k lambda_k(s, a) [f_k(s') - (P f_k)(s, a)]`` (the transitions:
        each Bellman equation's representer times its TD residual; absent when the kernel was
        given) and the **state law** ``g_rho(s) - rho g_rho`` (which states the data visit). Each
        variance is the total's episode-clustered estimator applied to that term alone, so
        ``se_first_stage**2 + se_kernel**2 + se_state_law**2`` plus twice the covariances between
        terms is ``std_error**2`` exactly, and the shares add up to one.

        ``share_cross`` is the share of those covariances. In population, with independent rows
        from the factorized law, the three terms are orthogonal (each has mean zero given what the
        one before conditions on) and it is zero. Within an episode they need not be: a row's next
        state is the next row's state, so one row's kernel residual and the next row's state-law
        and first-stage terms move together, and the clustered estimator, which sums the terms within
        episodes, keeps those covariances (as well as the sample's own). Under cross-fitting the
        state-law term also carries the spread of the folds' plug-ins (of second order).

        Columns: ``std_error``; ``se_first_stage``, ``se_kernel``, ``se_state_law``;
        ``share_first_stage``, ``share_kernel``, ``share_state_law`` (variance shares) and
        ``share_cross``.
        """
        C = self.cov_by_input
        var = np.einsum("jtu->j", C)
        own = np.diagonal(C, axis1=1, axis2=2)  # (m, 3)
        with np.errstate(invalid="ignore", divide="ignore"):
            shares = own / var[:, None]
            cross = (var - own.sum(axis=1)) / var
        data = {"std_error": self.std_error}
        data.update({f"se_{key}": np.sqrt(own[:, k]) for k, key in enumerate(INPUT_COLUMNS)})
        data.update({f"share_{key}": shares[:, k] for k, key in enumerate(INPUT_COLUMNS)})
        data["share_cross"] = cross
        return pd.DataFrame(data, index=self._index())

    def cov_params(self) -> pd.DataFrame:
        return pd.DataFrame(self.cov, index=self._index(), columns=self._index())

    def conf_int(self, level: float | None = None) -> pd.DataFrame:
        """Wald intervals ``estimate -+ z SE`` (columns ``lower``, ``upper``)."""
        lo, hi = self._interval(level)
        return pd.DataFrame({"lower": lo, "upper": hi}, index=self._index())

    def _interval(self, level):
        level = self.level if level is None else float(level)
        if not 0.0 < level < 1.0:
            raise ValueError(f"level must be in (0, 1), got {level!r}")
        z = norm.ppf(0.5 + level / 2)
        return self.estimate - z * self.std_error, self.estimate + z * self.std_error

    def to_frame(self, level: float | None = None) -> pd.DataFrame:
        """One row per component: estimate, std_error and its kind, z, p-value, interval and its
        kind, plug-in, and the diagnostics (what ``inference.csv`` holds)."""
        level = self.level if level is None else float(level)
        lo, hi = self._interval(level)
        frame = pd.DataFrame({"target": self.targets, "estimate": self.estimate, "std_error": self.std_error,
                              "std_error_kind": self.se_kind, "z": self.zvalues.to_numpy(),
                              "p_value": self.pvalues.to_numpy(), "ci_low": lo, "ci_high": hi,
                              "ci_kind": f"Wald, estimate -+ z std_error ({level:.0%})", "plug_in": self.plug_in,
                              "n_rows": self.n_rows, "n_episodes": self.n_episodes,
                              "cross_fit": np.nan if self.cross_fit is None else self.cross_fit},
                             index=self._index())
        if self.cov_by_input is not None:
            frame = frame.join(self.se_by_input.drop(columns="std_error"))
        if self.diagnostics is not None:
            frame = frame.join(self.diagnostics)
        return frame

    def summary(self, level: float | None = None) -> "InferenceSummary":
        """A statsmodels-style table (``print(result.summary())``), lines of at most 100 characters."""
        return InferenceSummary(self, self.level if level is None else float(level))

    def __str__(self):
        return str(self.summary())


@dataclass(frozen=True)
class InferenceSummary:
    """The text (``str``) and HTML (notebooks) of an :class:`InferenceResult`."""

    result: InferenceResult
    level: float

    def lines(self) -> list:
        r, bar = self.result, "=" * WIDTH
        split = "none (full-sample nuisances)" if r.cross_fit is None else f"{r.cross_fit} episode folds"
        head = ["Debiased inference: one-step estimator, efficient influence function", bar]
        head += textwrap.wrap("targets: " + "; ".join(dict.fromkeys(r.targets)), WIDTH, subsequent_indent="  ")
        head += [_pair("rows", f"{r.n_rows}", "episodes", f"{r.n_episodes}"),
                 _pair("cross-fitting", split, "time", f"{r.seconds:.2f} s")]
        head += textwrap.wrap(f"route: {r.route}", WIDTH, subsequent_indent="  ")
        head += textwrap.wrap(f"std. errors: {r.se_kind}, clustered by episode; intervals: Wald ({self.level:.0%})",
                              WIDTH, subsequent_indent="  ")
        head.append("-" * WIDTH)
        lo, hi = r._interval(self.level)
        q = (1 - self.level) / 2
        cols = f"{'component':<27}{'estimate':>10}{'std err':>10}{'z':>8}{'P>|z|':>7}"
        cols += f"{f'[{q:.3f}':>10}{f'{1 - q:.3f}]':>10}{'plug-in':>10}"
        body = [cols]
        for j, name in enumerate(r.names):
            z = r.estimate[j] / r.std_error[j]
            p = 2.0 * norm.sf(abs(z))
            body.append(f"{_short(name, 26):<27}{_num(r.estimate[j]):>10}{_num(r.std_error[j]):>10}{z:>8.2f}"
                        f"{p:>7.3f}{_num(lo[j]):>10}{_num(hi[j]):>10}{_num(r.plug_in[j]):>10}")
        tail = ["-" * WIDTH] + self._input_lines() + self._diagnostic_lines() + [bar]
        return head + body + tail

    def _input_lines(self) -> list:
        """``component   SE 0.0480: first stage 71%, kernel 27%, state law 2%`` per component."""
        r = self.result
        if r.cov_by_input is None:
            return []
        out = [_fit("std. error by input: each input's share of the variance (se_by_input)")]
        for name, row in r.se_by_input.iterrows():
            out.append(_fit(f"{_short(name, 26):<27}" + input_split(row)))
        return out + ["-" * WIDTH]

    def _diagnostic_lines(self) -> list:
        r = self.result
        if r.diagnostics is None:
            return []
        out = [f"{'diagnostics':<27}{'correction/SE':>14}{'weight max':>11}{'weight q99':>11}{'effective rows':>15}"
               f"{'top row':>10}{'top episode':>12}",
               f"{'':<27}{'':>14}{'(x mean)':>11}{'(x mean)':>11}{'(Riesz)':>15}{'share':>10}{'share':>12}"]
        for name, row in r.diagnostics.iterrows():
            out.append(f"{_short(name, 26):<27}{row.correction_to_se:>14.2f}{row.weight_max:>11.1f}"
                       f"{row.weight_q99:>11.1f}{row.effective_rows:>15.0f}{row.top_row_share:>10.3f}"
                       f"{row.top_episode_share:>12.3f}")
        if "J" in r.diagnostics:
            for J, f in r.diagnostics.dropna(subset=["J"]).groupby("J", sort=False):
                row = f.iloc[0]
                out.extend(textwrap.wrap(
                    f"specification test of the linear form ({', '.join(f.index)}; efficient projection): "
                    f"J = {J:.2f} on {row.J_dof:.0f} degrees of freedom, p = {row.J_p_value:.3f}", WIDTH,
                    subsequent_indent="  "))
        for message in r.warnings:
            out.extend(textwrap.wrap("warning: " + message, WIDTH, subsequent_indent="  "))
        return out

    def __str__(self):
        return "\n".join(self.lines())

    def _repr_html_(self):
        import html

        return "<pre>" + html.escape(str(self)) + "</pre>"


def input_split(row) -> str:
    """``"SE 0.0480: first stage 71%, kernel 27%, state law 2%"`` from a row of ``se_by_input``
    (the covariance between inputs' terms too when its share reaches ``CROSS_SHOWN``)."""
    parts = [f"{label} {share_text(row[f'share_{key}'])}" for label, key in zip(INPUTS, INPUT_COLUMNS)]
    if abs(row.share_cross) >= CROSS_SHOWN:
        parts.append(f"between inputs {share_text(row.share_cross)}")
    return f"SE {_num(row.std_error)}: " + ", ".join(parts)


def share_text(x) -> str:
    """A share as the summary prints it (a whole percent)."""
    x = float(x)
    return "nan" if not np.isfinite(x) else f"{x:.0%}"


def _num(x) -> str:
    x = float(x)
    if not np.isfinite(x):
        return "nan"
    return f"{x:.4g}" if (abs(x) >= 1e5 or (0 < abs(x) < 1e-3)) else f"{x:.4f}"


def _short(text: str, n: int) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "~"


def _fit(text: str) -> str:
    return _short(text, WIDTH)


def _pair(k1, v1, k2, v2) -> str:
    left = f"{k1 + ':':<16}{v1}"
    return _fit(f"{left:<50}{k2 + ':':<16}{v2}")

"""The normal and chi-squared tail probabilities and quantiles the package reports (p-values,
interval half-widths, likelihood-ratio tests), from ``scipy.special``: the same numbers as
``scipy.stats.norm`` / ``scipy.stats.chi2`` (which compute them by these functions), without
importing ``scipy.stats`` (about a second at import, longer than a tabular fit)."""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["normal_sf", "normal_ppf", "chi2_sf", "chi2_ppf"]


def normal_sf(x):
    """``scipy.stats.norm.sf(x)``: the standard normal upper tail."""
    return special.ndtr(-np.asarray(x, dtype=np.float64))


def normal_ppf(q):
    """``scipy.stats.norm.ppf(q)``: the standard normal quantile."""
    return special.ndtri(np.asarray(q, dtype=np.float64))


def chi2_sf(x, df):
    """``scipy.stats.chi2.sf(x, df)``: the chi-squared upper tail (1 below the support)."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(x < 0, 1.0, special.chdtrc(df, x))[()]


def chi2_ppf(q, df):
    """``scipy.stats.chi2.ppf(q, df)``: the chi-squared quantile."""
    return 2.0 * special.gammaincinv(df / 2, np.asarray(q, dtype=np.float64))

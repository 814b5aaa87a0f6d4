"""``genpqr.data._distributions`` gives ``scipy.stats``' numbers to the last digit (the p-values,
interval widths and likelihood-ratio tests the reports print did not change when the package
stopped importing ``scipy.stats``)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2, norm

from genpqr.data._distributions import chi2_ppf, chi2_sf, normal_ppf, normal_sf

X = np.concatenate([np.linspace(-40.0, 40.0, 20001), [np.inf, -np.inf, np.nan, -0.0]])
Q = np.concatenate([np.linspace(0.0, 1.0, 10001), [0.975, 0.995, np.nan, -0.5, 1.5]])


def test_normal_tail_and_quantile_are_scipy_stats():
    assert np.array_equal(normal_sf(X), norm.sf(X), equal_nan=True)
    assert np.array_equal(normal_ppf(Q), norm.ppf(Q), equal_nan=True)
    assert normal_ppf(0.975) == norm.ppf(0.975) and isinstance(normal_ppf(0.975), np.float64)


@pytest.mark.parametrize("df", [1, 2, 3, 7, 30])
def test_chi2_tail_and_quantile_are_scipy_stats(df):
    x = np.concatenate([np.linspace(-5.0, 200.0, 20001), [np.inf, np.nan, -1e-12]])
    assert np.array_equal(chi2_sf(x, df), chi2.sf(x, df), equal_nan=True)
    assert np.array_equal(chi2_ppf(Q[Q == Q], df), chi2.ppf(Q[Q == Q], df), equal_nan=True)
    assert chi2_sf(3.2, df) == chi2.sf(3.2, df) and isinstance(chi2_sf(3.2, df), np.float64)

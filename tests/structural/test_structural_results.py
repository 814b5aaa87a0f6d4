"""Structural results as objects (genpqr.structural._results): the coefficient table, Wald
intervals, the summary, the likelihood-ratio test; the honest labels of the estimators
(iterations per algorithm, the projection compared with the MLE)."""

import re
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2, norm

import genpqr
from genpqr.structural import ProjectionWarning, _estimation as structural, lr_test
from genpqr.stage2._kernels import as_kernel

from .test_structural import rust9999_case

NAMES = ["RC", "theta11"]


@pytest.fixture(scope="module")
def bus():
    model, kernel, counts = rust9999_case()
    fit = structural.estimate_structural("npl", model.features("anchor"), counts, kernel, model.beta, names=NAMES)
    return model, kernel, counts, fit


def test_to_frame_conf_int_params_and_bse_are_exact(bus):
    _, _, _, fit = bus
    frame = fit.to_frame(level=0.9)
    assert list(frame.columns) == ["estimate", "std_error", "std_error_kind", "z", "p_value", "ci_low", "ci_high",
                                   "std_error_robust", "identified"]
    assert list(frame.index) == NAMES and frame.index.name == "parameter"
    assert set(frame.std_error_kind) == {"OPG"} and fit.se_label == "OPG"
    np.testing.assert_array_equal(frame.estimate, fit.theta)
    np.testing.assert_array_equal(frame.std_error, fit.std_error)
    np.testing.assert_allclose(frame.z, fit.theta / fit.std_error, rtol=1e-15)
    np.testing.assert_allclose(frame.p_value, 2 * norm.sf(np.abs(fit.theta / fit.std_error)), rtol=1e-12)
    lo, hi = fit.wald_interval(0.9)
    np.testing.assert_array_equal(frame.ci_low, lo)
    np.testing.assert_array_equal(frame.ci_high, hi)
    np.testing.assert_allclose(hi - fit.theta, norm.ppf(0.95) * fit.std_error, rtol=1e-12)
    ci = fit.conf_int(level=0.9)
    assert list(ci.columns) == ["lower", "upper"] and list(ci.index) == NAMES
    np.testing.assert_array_equal(ci.lower, lo)
    np.testing.assert_array_equal(ci.upper, hi)
    pd.testing.assert_series_equal(fit.params_, pd.Series(fit.theta, index=pd.Index(NAMES, name="parameter"),
                                                          name="estimate"))
    np.testing.assert_array_equal(fit.bse_.to_numpy(), fit.std_error)
    assert fit.bse_.name == "std_error (OPG)" and list(fit.bse_.index) == NAMES
    for bad in (0, 1, 1.5, -0.1):
        with pytest.raises(ValueError, match=r"level must be in \(0, 1\)"):
            fit.conf_int(level=bad)
    with pytest.raises(TypeError, match="level must be a number"):
        fit.to_frame("high")


def test_summary_is_a_statsmodels_style_table(bus):
    _, _, counts, fit = bus
    summary = fit.summary()
    text = str(summary)
    assert text == summary.as_text() == repr(summary)
    assert max(len(line) for line in text.splitlines()) <= 78
    assert "npl: NPL iterated to convergence (the maximum likelihood estimator)" in " ".join(text.split())
    assert re.search(rf"Log-likelihood:   {fit.loglik:.4f} +Choices: +{int(counts.sum())}\n", text)
    assert re.search(r"Parameters:       2 +Discount: +0.9999\n", text)
    assert f"Iterations:       NPL {fit.n_iter}, converged" in text
    assert "SE (OPG)" in text and "P>|z|" in text and "[0.025" in text and "0.975]" in text
    for name, row in fit.to_frame().iterrows():
        assert (f"{name:<12}{row.estimate:>10.4f}{row.std_error:>18.4f}{row.z:>9.3f}{row.p_value:>8.3f}"
                f"{row.ci_low:>11.4f}{row.ci_high:>10.4f}") in text
    assert "sandwich (robust) standard errors" in text
    head, coefficients = summary.tables
    assert head.loc["Iterations", "value"] == fit.convergence
    pd.testing.assert_frame_equal(coefficients, fit.to_frame())
    pd.testing.assert_frame_equal(summary.to_frame(), fit.to_frame())
    html = summary._repr_html_()
    assert html.count("<table") == 2 and "OPG" in html


def test_likelihood_ratio_test_rejects_theta11_zero_on_a_bus_panel(bus):
    model, kernel, counts, fit = bus
    X = model.features("anchor")
    restricted = structural.estimate_structural("npl", X[:, :, :1], counts, kernel, model.beta, names=["RC"])
    result = fit.compare_lr(restricted)
    assert result == lr_test(restricted, fit)
    assert result.statistic == 2 * (fit.loglik - restricted.loglik) and result.df == 1
    assert result.p_value == chi2.sf(result.statistic, 1) and result.p_value < 1e-10
    assert result.loglik_restricted == restricted.loglik and "on 1 df" in str(result)
    # within rounding the statistic is 0; beyond it, a "restricted" model with the higher likelihood is refused
    assert lr_test(replace(restricted, loglik=fit.loglik + 1e-8), fit).statistic == 0.0
    with pytest.raises(ValueError, match="restricted fit has the higher log-likelihood"):
        lr_test(replace(restricted, loglik=fit.loglik + 1e-3), fit)
    with pytest.raises(ValueError, match="fewer parameters"):
        lr_test(fit, restricted)


def test_likelihood_ratio_test_refuses_what_it_cannot_compare(bus):
    model, kernel, counts, fit = bus
    X = model.features("anchor")
    restricted = structural.estimate_structural("npl", X[:, :, :1], counts, kernel, model.beta, names=["RC"])
    projection = structural.estimate_structural("projection", X, counts, kernel, model.beta,
                                                reward_table=model.normalized_reward())
    with pytest.raises(ValueError, match="unrestricted is a projection fit, not a maximum likelihood estimate"):
        lr_test(restricted, projection)
    pml = structural.estimate_structural("pml", X[:, :, :1], counts, kernel, model.beta)
    with pytest.raises(ValueError, match="restricted is a pml fit"):
        lr_test(pml, fit)
    with pytest.raises(ValueError, match="did not converge"):
        lr_test(replace(restricted, converged=False), fit)
    other = counts.copy()
    other[0, 0] += 1
    with pytest.raises(ValueError, match="different choices"):
        lr_test(replace(restricted, counts=other), fit)
    with pytest.raises(ValueError, match="different discounts"):
        lr_test(replace(restricted, gamma=0.99), fit)
    shifted = as_kernel(model.kernel, 2)  # the true kernel, not the estimated one
    with pytest.raises(ValueError, match="different transition kernels"):
        lr_test(replace(restricted, kernel=shifted), fit)


def test_iterations_say_which_algorithm_converged(bus):
    """NFXP whose BHHH hits its cap and a Newton finish converges: the parts are recorded and
    printed, not a sum that reads as BHHH converging."""
    model, kernel, counts, _ = bus
    X = model.features("anchor")
    nfxp = structural.estimate_structural("nfxp", X, counts, kernel, 0.0, max_iter=5)
    newton = nfxp.iterations["Newton"]
    assert list(nfxp.iterations) == ["BHHH", "Newton"] and nfxp.iterations["BHHH"] == 5 and nfxp.converged
    assert nfxp.convergence == f"BHHH 5 (hit the cap) + Newton {newton}, converged by Newton"
    assert nfxp.n_iter == 5 + newton
    with pytest.warns(genpqr.ConvergenceWarning, match="continued with Newton"):
        npl = structural.estimate_structural("npl", X, counts, kernel, model.beta, max_iter=5)
    assert npl.convergence == f"NPL 5 (hit the cap) + Newton {npl.iterations['Newton']}, converged by Newton"
    with pytest.warns(genpqr.ConvergenceWarning, match=r"did not converge \(BHHH 1 \(hit the cap\) \+ Newton 1 "
                                                        r"\(hit the cap\), NOT CONVERGED"):
        capped = structural.estimate_structural("nfxp", X, counts, kernel, model.beta, max_iter=1)
    assert not capped.converged
    pml = structural.estimate_structural("pml", X, counts, kernel, model.beta)
    assert pml.convergence == "PML 1 (one pseudo-likelihood step; not iterated to the MLE)"
    assert pml.se_label == "inverse Hessian" and "not iterated to the maximum likelihood" in " ".join(
        str(pml.summary()).split())


def _projection(model, kernel, counts, table):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = structural.estimate_structural("projection", model.features("anchor"), counts, kernel, model.beta,
                                             reward_table=table, names=NAMES)
    return fit, [w for w in caught if issubclass(w.category, ProjectionWarning)]


def test_projection_says_it_is_not_the_mle_and_warns_when_far_from_it(bus):
    model, kernel, counts, fit = bus
    # the true normalized reward: the projection is the truth, close to the MLE (LR 0.09): no warning
    close, caught = _projection(model, kernel, counts, model.normalized_reward())
    assert caught == []
    np.testing.assert_allclose(close.theta, model.theta, rtol=1e-10)
    np.testing.assert_allclose(close.mle_theta, fit.theta, atol=1e-6)
    assert close.mle_loglik == pytest.approx(fit.loglik, abs=1e-8)
    assert 0 < 2 * (close.mle_loglik - close.loglik) < chi2.ppf(0.99, 2)
    assert close.se_label == "none" and "not an MLE" in close.se_kind and np.all(np.isnan(close.std_error))
    text = " ".join(str(close.summary()).split())
    assert "not the maximum likelihood estimator" in text and f"(MLE: {fit.loglik:.4f})" in text
    # Rust's flow utility is not in the anchor normalization: RC comes out near 0, the choices reject it
    far, caught = _projection(model, kernel, counts, model.features("rust") @ model.theta)
    assert len(caught) == 1
    message = str(caught[0].message)
    statistic = 2 * (far.mle_loglik - far.loglik)
    assert statistic > chi2.ppf(0.99, 2)
    assert f"the projection estimate (RC {far.theta[0]:.4g}, theta11 {far.theta[1]:.4g})" in message
    assert f"likelihood-ratio statistic {statistic:.4g} > {chi2.ppf(0.99, 2):.4g}" in message
    # a wrong-signed mileage cost is named
    flipped, caught = _projection(model, kernel, counts, model.features("anchor") @ [10.0, -0.5])
    np.testing.assert_allclose(flipped.theta, [10.0, -0.5], rtol=1e-10)
    assert flipped.mle_theta[1] > 0
    assert len(caught) == 1 and "theta11 has the opposite sign of the MLE's" in str(caught[0].message)

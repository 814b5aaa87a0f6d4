"""StructuralFit in statsmodels' words (issue 32): every name statsmodels gives a likelihood fit,
checked against a statsmodels ``GenericLikelihoodModel`` fit of the same likelihood.

The reference is written here, independently of genpqr's solvers: the bus engine's choice
probabilities with the kernel held fixed (Rust's two-step partial likelihood), solved in plain
numpy by policy iteration on dense matrices, one observation per observed choice. statsmodels
maximizes it by Newton with numerical derivatives; its ``bse`` is the inverse Hessian, ``bsejac``
the inverse OPG of the per-choice scores and ``bsejhj`` the sandwich. Each is compared with the
same kind of genpqr's analytic covariance (``with_cov_type``): params and llf to 1e-6, standard
errors to 1e-6 relative.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.base.model import GenericLikelihoodModel

from genpqr.envs._rust import bus_engine, simulate_buses
from genpqr.structural import _ddc as ddc, _estimation as structural

NAMES = ["RC", "theta11"]


class BusChoices(GenericLikelihoodModel):
    """The bus engine's log-likelihood per choice, for statsmodels (plain numpy)."""

    def __init__(self, actions, states, features, P, beta):
        chosen = pd.DataFrame(features[states, actions], columns=NAMES)  # names the parameters
        super().__init__(pd.Series(actions.astype(float), name="action"), chosen)
        self.states, self.features, self.P, self.beta = states, features, P, beta
        self._V = np.zeros(features.shape[0])
        # no constant among the parameters: df_model counts them all (aic = -2 llf + 2 p)
        self.k_constant, self.df_model, self.df_resid = 0, features.shape[2], len(actions) - features.shape[2]

    def log_policy(self, params):
        u = self.features @ np.asarray(params, dtype=np.float64)
        S, V = u.shape[0], self._V
        for _ in range(200):  # policy iteration: evaluate the soft policy exactly, improve it
            Q = u + self.beta * np.einsum("ast,t->sa", self.P, V)
            log_pi = Q - np.logaddexp(Q[:, :1], Q[:, 1:])
            pi = np.exp(log_pi)
            P_pi = np.einsum("sa,ast->st", pi, self.P)
            V_new = np.linalg.solve(np.eye(S) - self.beta * P_pi, np.sum(pi * (u - log_pi), axis=1))
            done = np.max(np.abs(V_new - V)) <= 1e-12 * max(1.0, np.max(np.abs(V_new)))
            V = V_new
            if done:
                break
        self._V = V
        Q = u + self.beta * np.einsum("ast,t->sa", self.P, V)
        return Q - np.logaddexp(Q[:, :1], Q[:, 1:])

    def loglikeobs(self, params):
        return self.log_policy(params)[self.states, np.asarray(self.endog, dtype=int)]


@pytest.fixture(scope="module")
def pair():
    """genpqr's NPL fit and statsmodels' fit of the same likelihood (Su-Judd's bus design,
    beta = 0.975, 50 buses x 120 months)."""
    truth = bus_engine()
    panel = simulate_buses(truth, n_buses=50, n_periods=120, random_state=0).transitions
    kernel = ddc.increment_kernel(panel, truth.n_states, 2, 4, "replace")
    counts = ddc.choice_counts(panel, truth.n_states)
    X = truth.features("rust")
    fit = structural.estimate_structural("npl", X, counts, kernel, truth.beta, names=NAMES)
    s, a = np.nonzero(counts)
    states, actions = np.repeat(s, counts[s, a].astype(int)), np.repeat(a, counts[s, a].astype(int))
    P = kernel.matrix.toarray().reshape(truth.n_states, 2, truth.n_states).transpose(1, 0, 2)
    model = BusChoices(actions, states, X, P, truth.beta)
    res = model.fit(start_params=np.array([5.0, 1.0]), method="newton", maxiter=50, tol=1e-9, disp=0)
    assert res.mle_retvals["converged"]
    return fit, res


def test_every_statsmodels_name_matches_generic_likelihood_model(pair):
    fit, res = pair
    # params and llf: the same maximum
    assert isinstance(fit.params, pd.Series) and list(fit.params.index) == res.model.exog_names == NAMES
    np.testing.assert_allclose(fit.params, res.params, rtol=0, atol=1e-6)
    assert fit.llf == pytest.approx(res.llf, abs=1e-6)
    assert (fit.nobs, fit.df_model, fit.df_resid) == (res.nobs, res.df_model, res.df_resid) == (6000, 2, 5998)
    assert fit.aic == pytest.approx(res.aic, abs=1e-6) and fit.bic == pytest.approx(res.bic, abs=1e-6)
    # statsmodels' default covariance is the inverse Hessian: ours of that kind
    hess = fit.with_cov_type("hessian")
    assert hess.cov_type == "inverse Hessian" and hess.bse.name == "std_error (inverse Hessian)"
    np.testing.assert_allclose(hess.bse, res.bse, rtol=1e-6)
    np.testing.assert_allclose(hess.cov_params(), res.cov_params(), rtol=1e-6)
    np.testing.assert_allclose(hess.tvalues, res.tvalues, rtol=1e-6)
    np.testing.assert_allclose(hess.pvalues, res.pvalues, rtol=1e-4)
    for alpha in (0.05, 0.1):
        np.testing.assert_allclose(hess.conf_int(alpha=alpha), res.conf_int(alpha=alpha), rtol=0, atol=1e-6)
    # the default, OPG, is statsmodels' covjac (per-choice scores); the sandwich its covjhj
    assert fit.cov_type == "OPG" and list(fit.cov_params().index) == NAMES
    np.testing.assert_allclose(fit.bse, res.bsejac, rtol=1e-6)
    np.testing.assert_allclose(fit.cov_params(), res.covjac, rtol=1e-6)
    robust = fit.with_cov_type("robust")
    assert robust.cov_type == "sandwich"
    np.testing.assert_allclose(robust.bse, res.bsejhj, rtol=1e-6)
    np.testing.assert_allclose(robust.cov_params(), res.covjhj, rtol=1e-6)
    np.testing.assert_allclose(robust.bse, fit.std_error_robust, rtol=1e-12)
    # the summary: statsmodels' parts, our numbers, every line within 100 characters
    summary = hess.summary(alpha=0.1)
    head, coefficients = summary.tables
    pd.testing.assert_frame_equal(coefficients, hess.to_frame(level=0.9))
    text = summary.as_text()
    assert max(len(line) for line in text.splitlines()) <= 100 and str(summary) == text
    for name in NAMES:
        row = coefficients.loc[name]
        line = next(line for line in text.splitlines() if line.startswith(name + " "))
        assert line.split()[1:3] == [f"{row.estimate:.4f}", f"{row.std_error:.4f}"]
        assert f"{res.params[NAMES.index(name)]:.4f}" == f"{row.estimate:.4f}"
    assert "SE (inv. Hessian)" in text and "[0.05" in text and "0.95]" in text and "AIC:" in text
    html = summary.as_html()
    assert html.count("<table") == 2 and f"{coefficients.estimate.iloc[0]:.4f}" in html and summary._repr_html_() == html
    latex = summary.as_latex(label="tab:bus")
    assert latex.startswith("\\begin{table}") and "\\label{tab:bus}" in latex and latex.rstrip().endswith("\\end{table}")
    assert f"RC & {coefficients.estimate.iloc[0]:.4f} & {coefficients.std_error.iloc[0]:.4f}" in latex


def test_the_existing_names_agree_with_statsmodels_names(pair):
    fit, _ = pair
    np.testing.assert_array_equal(fit.params, fit.theta)
    pd.testing.assert_series_equal(fit.params, fit.params_)
    pd.testing.assert_series_equal(fit.bse, fit.bse_)
    np.testing.assert_array_equal(fit.bse, fit.std_error)
    np.testing.assert_array_equal(fit.cov_params(), fit.cov)
    assert fit.llf == fit.loglik and fit.nobs == fit.n_choices and fit.cov_type == fit.se_label == "OPG"
    np.testing.assert_array_equal(fit.tvalues, fit.to_frame().z)
    np.testing.assert_array_equal(fit.pvalues, fit.to_frame().p_value)
    lo, hi = fit.wald_interval(0.95)
    np.testing.assert_array_equal(fit.conf_int().lower, lo)
    np.testing.assert_array_equal(fit.conf_int().upper, hi)
    # a change of covariance changes every table, and can be undone
    again = fit.with_cov_type("sandwich").with_cov_type("opg")
    np.testing.assert_array_equal(again.cov, fit.cov)
    assert again.se_kind == fit.se_kind


def test_alpha_and_level(pair):
    fit, _ = pair
    pd.testing.assert_frame_equal(fit.conf_int(alpha=0.1), fit.conf_int(level=0.9))
    pd.testing.assert_frame_equal(fit.conf_int(0.1), fit.conf_int(level=0.9))
    pd.testing.assert_frame_equal(fit.conf_int(cols=["theta11"]), fit.conf_int().loc[["theta11"]])
    pd.testing.assert_frame_equal(fit.conf_int(cols=[0]), fit.conf_int().iloc[[0]])
    with pytest.raises(ValueError, match=r"alpha=0.9 asks for a 10% interval.*level=0.9"):
        fit.conf_int(0.9)
    with pytest.raises(ValueError, match="alpha must be in"):
        fit.conf_int(alpha=0)
    with pytest.raises(ValueError, match="give alpha or level, not both"):
        fit.conf_int(alpha=0.1, level=0.95)
    with pytest.raises(TypeError, match="alpha must be a number"):
        fit.summary("wide")
    with pytest.raises(ValueError, match="cov_type must be one of"):
        fit.with_cov_type("HC0")


def test_bootstrap_covariance_gives_percentile_intervals(pair):
    fit, _ = pair
    rng = np.random.default_rng(0)
    reps = fit.theta + rng.normal(size=(400, 2)) @ np.linalg.cholesky(fit.cov).T
    boot = fit.with_bootstrap(reps)
    assert boot.cov_type == "bootstrap" and boot.se_kind.startswith("bootstrap: covariance over 400 replicates")
    np.testing.assert_allclose(boot.cov_params(), np.cov(reps, rowvar=False), rtol=1e-12)
    np.testing.assert_allclose(boot.bse, reps.std(axis=0, ddof=1), rtol=1e-12)
    ci = boot.conf_int(alpha=0.1)
    np.testing.assert_allclose(ci.lower, np.quantile(reps, 0.05, axis=0), rtol=1e-12)
    np.testing.assert_allclose(ci.upper, np.quantile(reps, 0.95, axis=0), rtol=1e-12)
    assert "SE (bootstrap)" in str(boot.summary()) and "percentile intervals" in " ".join(str(boot.summary()).split())
    with pytest.raises(ValueError, match=r"shape \(B, 2\)"):
        fit.with_bootstrap(reps[:, :1])


def test_kinds_an_estimator_does_not_have_are_refused():
    truth = bus_engine(n_states=40, rc=4.0, theta11=40.0)
    panel = simulate_buses(truth, n_buses=30, n_periods=60, random_state=0).transitions
    kernel = ddc.increment_kernel(panel, truth.n_states, 2, 4, "replace")
    counts = ddc.choice_counts(panel, truth.n_states)
    X = truth.features("anchor")
    pml = structural.estimate_structural("pml", X, counts, kernel, truth.beta, names=NAMES)
    assert pml.cov_type == "inverse Hessian" and np.isnan(pml.aic) and np.isnan(pml.bic)
    assert pml.with_cov_type("hessian").se_kind == pml.se_kind
    with pytest.raises(ValueError, match="a pml fit has no OPG covariance"):
        pml.with_cov_type("opg")
    projection = structural.estimate_structural("projection", X, counts, kernel, truth.beta, names=NAMES,
                                                reward_table=truth.normalized_reward())
    assert projection.cov_type == "none" and projection.bse.isna().all() and projection.conf_int().isna().all().all()
    with pytest.raises(ValueError, match="bootstrap it"):
        projection.with_cov_type("sandwich")


def test_summary_after_another_summary(pair):
    from genpqr.estimator._diagnostics import FitSummary

    fit, _ = pair
    first = FitSummary("GenPQR fit", (("normalization", "anchor"),), {"n_choices": 6000})
    both = fit.summary().after(first)
    assert both.as_text() == first.as_text() + "\n\n" + fit.summary().as_text()
    assert both.lines == first.lines and both.to_frame().equals(first.to_frame())
    assert len(both.tables) == 3 and both.as_html().count("<table") == 3
    assert "\\begin{verbatim}" in both.as_latex() and "\\begin{tabular}" in both.as_latex()


def test_bootstrap_over_episodes_re_estimates_each_replicate():
    """``fit.bootstrap(model, B)``: the parameters re-estimated on B resamples of the buses (the
    library's bootstrap, the same draws for the same seed), their covariance and percentiles."""
    import warnings

    from genpqr import GenPQR, normalization as N
    from genpqr.evaluation import bootstrap
    from genpqr.stage1 import FrequencyClassifier
    from genpqr.structural import fit_structural
    from genpqr.structural._kernels import IncrementKernel

    truth = bus_engine(n_states=40, rc=4.0, theta11=40.0)
    panel = simulate_buses(truth, n_buses=30, n_periods=60, random_state=0).transitions
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = GenPQR(N.anchor_action("replace"), gamma=truth.beta, q_model="exact", n_states=40,
                       policy_model=FrequencyClassifier(40, smoothing=0.5),
                       transition_model=IncrementKernel(4, "replace")).fit(panel)
        fit = fit_structural(model, truth.features("rust"), names=NAMES)
        boot = fit.bootstrap(model, n_boot=5, random_state=3)
        reps = bootstrap(model, model.training_data_, n_boot=5, statistic=lambda m: fit.refit(m).theta,
                         random_state=3, fitted=model).replicates
    assert boot.cov_type == "bootstrap" and "5 replicates (episodes resampled, re-estimated each)" in boot.se_kind
    np.testing.assert_allclose(boot.bootstrap_replicates, reps, rtol=1e-12)
    np.testing.assert_allclose(boot.bse, reps.std(axis=0, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(boot.conf_int().lower, np.quantile(reps, 0.025, axis=0), rtol=1e-12)
    np.testing.assert_array_equal(boot.params, fit.params)

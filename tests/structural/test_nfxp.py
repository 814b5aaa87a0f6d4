"""NFXP (Rust's nested fixed point): inner solve, gradient, MLE on population weights, data."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone

from genpqr import GenPQR

from genpqr.structural import _ddc as ddc
from genpqr import normalization as N
from genpqr.structural._nfxp import NFXP, fit_nfxp, nfxp_loglik, solve_integrated_bellman
from genpqr.envs._rust import bus_engine, simulate_buses
from genpqr.exceptions import NotFittedError


@pytest.fixture(scope="module")
def model():
    return bus_engine()


def test_inner_newton_kantorovich_reaches_machine_precision(model):
    V, info = solve_integrated_bellman(model.flow_utility, model.kernel, model.beta, tol=1e-13)
    assert info.residual < 1e-12
    assert info.newton_steps >= 1 and info.contraction_steps <= 20
    Q = model.flow_utility + model.beta * model.kernel.expect(V)
    assert np.max(np.abs(V - np.log(np.exp(Q).sum(axis=1)))) < 1e-12
    np.testing.assert_allclose(V, model.solution.value, atol=1e-10, rtol=0)
    # the anchor-normalized utility has values ~ RC / (1 - beta) = 469 and converges as well
    V2, info2 = solve_integrated_bellman(model.normalized_reward(), model.kernel, model.beta)
    assert info2.residual < 1e-12
    np.testing.assert_allclose(V2, model.solution.value + model.rc / (1 - model.beta), atol=1e-9)
    # warm start at the solution: no contraction step needed
    _, warm = solve_integrated_bellman(model.flow_utility, model.kernel, model.beta, V0=V)
    assert warm.contraction_steps == 0 and warm.residual < 1e-12


def test_gradient_matches_finite_differences(model):
    counts = 6000 * model.state_action_frequencies()
    X = model.features("rust")
    theta = np.array([9.0, 3.5])
    ll, g, _ = nfxp_loglik(theta, X, counts, model.kernel, model.beta)
    eps = 1e-5
    for j in range(2):
        e = np.eye(2)[j] * eps
        fd = (nfxp_loglik(theta + e, X, counts, model.kernel, model.beta)[0]
              - nfxp_loglik(theta - e, X, counts, model.kernel, model.beta)[0]) / (2 * eps)
        assert g[j] == pytest.approx(fd, rel=1e-6)


@pytest.mark.parametrize("method", ["bhhh", "bfgs"])
@pytest.mark.parametrize("parametrization", ["rust", "anchor"])
def test_population_likelihood_is_maximized_at_the_truth(model, method, parametrization):
    w = model.state_action_frequencies()  # stationary frequency x true probability
    res = fit_nfxp(w, model.features(parametrization), model.kernel, model.beta, method=method, tol=1e-10)
    np.testing.assert_allclose(res.theta, model.theta, atol=1e-5, rtol=0)
    assert res.converged and res.inner.residual < 1e-12
    np.testing.assert_allclose(res.policy, model.policy, atol=1e-7)


def test_nfxp_estimator_on_a_panel_matches_npl(model):
    panel = simulate_buses(model, n_buses=50, n_periods=120, random_state=0).transitions
    kernel = ddc.IncrementKernel(4, "replace")
    est = NFXP(model.features("rust"), gamma=model.beta, transition_model=kernel,
               feature_names=["RC", "theta11"]).fit(panel)
    assert est.converged_ and est.fit_time_ > 0 and est.name == "NFXP"
    assert np.all(np.isfinite(est.se_)) and np.all(est.se_ > 0)
    states = np.arange(5)[:, None]
    assert est.reward(states).shape == (5, 2)
    np.testing.assert_allclose(est.reward(states, ["replace"] * 5), -est.theta_[0])
    np.testing.assert_allclose(np.exp(est.log_policy(states)).sum(axis=1), 1.0)
    assert list(est.summary().index) == ["RC", "theta11"] and set(est.summary().se_kind) == {"OPG"}
    # NPL on GenPQR's exact solve converges to the same maximum likelihood estimate
    fit = GenPQR(normalization=N.anchor_action("replace"), gamma=model.beta, q_model="exact", n_states=175,
                 clip=(1e-3, 1 - 1e-3), transition_model=kernel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit.fit(panel)
    npl = ddc.StructuralStep(model.features("anchor"), method="npl", tol=1e-10).fit(fit)
    np.testing.assert_allclose(npl.theta_, est.theta_, atol=1e-5, rtol=0)
    # ... and, at convergence, NPL's standard errors are the MLE's (inverse OPG of the full likelihood), as NFXP's
    np.testing.assert_allclose(npl.se_, est.se_, rtol=1e-3)
    # BFGS finds the same optimum
    bfgs = NFXP(model.features("rust"), gamma=model.beta, transition_model=kernel, method="bfgs").fit(panel)
    np.testing.assert_allclose(bfgs.theta_, est.theta_, atol=1e-4)


def test_nfxp_kernel_options_and_errors(model):
    panel = simulate_buses(model, n_buses=10, n_periods=40, random_state=2).transitions
    known = NFXP(model.features("rust"), gamma=model.beta, transition_model=model.kernel).fit(panel)
    counts = NFXP(model.features("rust"), gamma=model.beta).fit(panel)  # kernel from counts
    assert known.kernel_.n_states == counts.kernel_.n_states == 175
    weighted = NFXP(model.features("rust"), gamma=model.beta, transition_model=model.kernel).fit(
        panel, sample_weight=np.full(panel.n, 2.0))
    np.testing.assert_allclose(weighted.theta_, known.theta_, atol=1e-5)
    assert clone(known).get_params()["method"] == "bhhh"
    with pytest.raises(NotFittedError):
        NFXP(model.features("rust")).reward(np.zeros((1, 1)))
    with pytest.raises(ValueError, match="features"):
        NFXP().fit(panel)
    with pytest.raises(ValueError, match="method"):
        NFXP(model.features("rust"), gamma=model.beta, transition_model=model.kernel, method="newton").fit(panel)
    with pytest.raises(TypeError, match="Transitions"):
        NFXP(model.features("rust")).fit(np.zeros(3))


@pytest.mark.slow
def test_estimators_are_close_to_the_truth_on_average(model):
    """Statistical check over 12 panels of 50 buses x 120 months (seeds 100..111).

    Stated tolerances on the mean over panels: 10% (the issue's target) for NFXP, NPL and PML
    -- the MLE's per-panel sd is ~11% for RC and ~15% for theta11, so the mean's se is
    3-4%, and over 50 panels their biases are within +2% (docs/engine_replacement.md); 20%
    for the fixed-v step under the anchor normalization (over 50 panels -7.5% / -12%, with
    a per-panel sd of 30% for theta11).
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, PolynomialFeatures

    kernel = ddc.IncrementKernel(4, "replace")
    est = {k: [] for k in ("fixed-v", "pml", "npl", "nfxp")}
    for seed in range(100, 112):
        panel = simulate_buses(model, random_state=seed).transitions
        logit = make_pipeline(FunctionTransformer(_scale_mileage), PolynomialFeatures(3),
                              LogisticRegression(C=1e6, max_iter=2000))
        fit = GenPQR(normalization=N.anchor_action("replace"), gamma=model.beta, q_model="exact", n_states=175,
                     policy_model=logit, clip=None, transition_model=kernel).fit(panel)
        for method in ("fixed-v", "pml", "npl"):
            est[method].append(ddc.StructuralStep(model.features("anchor"), method=method).fit(fit).theta_)
        est["nfxp"].append(NFXP(model.features("rust"), gamma=model.beta, transition_model=kernel).fit(panel).theta_)
    for method, tol in (("nfxp", 0.10), ("npl", 0.10), ("pml", 0.10), ("fixed-v", 0.2)):
        mean = np.mean(est[method], axis=0)
        np.testing.assert_allclose(mean, model.theta, rtol=tol, err_msg=method)


def _scale_mileage(x):
    return np.asarray(x, dtype=float) / 175.0

"""Econometric pieces on GenPQR (genpqr.structural._ddc): increment kernel, projection, CCP step, NPL."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone

from genpqr import GenPQR, from_arrays, normalization as N, stage2

from genpqr.structural import _ddc as ddc
from genpqr.envs._rust import bus_engine, simulate_buses
from genpqr.exceptions import NotFittedError


@pytest.fixture(scope="module")
def model():
    return bus_engine()


@pytest.fixture(scope="module")
def panel(model):
    return simulate_buses(model, n_buses=50, n_periods=120, random_state=0).transitions


class TruePolicy:
    """A 'fitted classifier' returning the true choice probabilities by state index."""

    def __init__(self, policy):
        self.policy = policy
        self.classes_ = np.arange(policy.shape[1])

    def predict_proba(self, X):
        return self.policy[np.asarray(X)[:, 0].astype(int)]


@pytest.fixture(scope="module")
def oracle_fit(model, panel):
    """GenPQR with the TRUE policy and the TRUE kernel plugged in."""
    return GenPQR(normalization=N.anchor_action("replace"), gamma=model.beta, q_model="exact", n_states=175,
                  policy_model=TruePolicy(model.policy), policy_prefit=True, clip=None,
                  transition_model=model.kernel).fit(panel)


# ---------------------------------------------------------------- increment kernel
def test_increment_probabilities_hand_counts():
    # 6 states; rows (s, a, s'): increments 1, 0, 2, 1 after keep; replace from 4 -> 1 (increment 1 from 0);
    # the row 4 -> 5 with keep is censored by the cap (it says: increment >= 1)
    tr = from_arrays([0, 1, 1, 3, 4, 4], ["k", "k", "k", "k", "r", "k"], [1, 1, 3, 4, 1, 5])
    probs, n_used = ddc.increment_probabilities(tr, 6, 2, reset_action="r")
    assert n_used == 6
    # MLE by hand: log p0 + 3 log p1 + log p2 + log(p1 + p2): p1 : p2 = 3 : 1 and p0 = 1/6
    np.testing.assert_allclose(probs, [1 / 6, 5 / 8, 5 / 24], atol=1e-12)
    # without the censored row: the plain frequencies
    probs5, n5 = ddc.increment_probabilities(tr.subset(np.arange(5)), 6, 2, reset_action="r")
    assert n5 == 5
    np.testing.assert_allclose(probs5, [1 / 5, 3 / 5, 1 / 5])
    K = ddc.increment_kernel(tr, 6, 2, 2, reset_action="r").dense()
    np.testing.assert_allclose(K[2, 0, 2:5], probs)  # keep: from 2
    np.testing.assert_allclose(K[5, 1, 0:3], probs)  # reset: from 0
    np.testing.assert_allclose(K[4, 0, 4:6], [probs[0], probs[1] + probs[2]])  # capped at the last state
    np.testing.assert_allclose(K.sum(axis=2), 1.0)
    # the callable form, as GenPQR(transition_model=...) calls it
    K2 = ddc.IncrementKernel(2, "r")(tr, 6, 2).dense()
    np.testing.assert_array_equal(K, K2)


def test_increment_kernel_matches_the_true_kernel(model):
    exact = ddc.kernel_from_increments(model.theta3, 175, 2, reset=1).dense()
    np.testing.assert_allclose(exact, model.kernel.dense(), atol=1e-15)
    big = simulate_buses(model, n_buses=200, n_periods=120, random_state=5).transitions  # 24,000 rows
    probs, _ = ddc.increment_probabilities(big, 175, 4, reset_action="replace")
    np.testing.assert_allclose(probs, model.theta3, atol=0.012)
    est = ddc.increment_kernel(big, 175, 2, 4, reset_action="replace").dense()
    assert np.max(np.abs(est - model.kernel.dense())) < 0.012


def test_increment_errors():
    tr = from_arrays([0, 3], ["k", "k"], [1, 0])
    with pytest.raises(ValueError, match="increment of -3"):
        ddc.increment_probabilities(tr, 10, 2)
    with pytest.raises(ValueError, match="max_increment"):
        ddc.increment_probabilities(tr, 10, -1)
    with pytest.raises(ValueError, match="reset_action"):
        ddc.increment_probabilities(tr, 10, 3, reset_action="nope")


# ---------------------------------------------------------------- exact inputs
def test_genpqr_with_true_policy_and_kernel_recovers_the_truth(model, oracle_fit):
    np.testing.assert_allclose(oracle_fit.reward_table().to_numpy(), model.normalized_reward(), atol=1e-8, rtol=0)
    # v = P V of the normalized reward, whose soft value is V_true + RC / (1 - beta)
    V_norm = model.solution.value + model.rc / (1 - model.beta)
    cont = oracle_fit.continuation(np.arange(175)[:, None])
    np.testing.assert_allclose(cont, model.kernel.expect(V_norm), atol=1e-8, rtol=0)


def test_projection_with_exact_inputs(model, oracle_fit):
    w = model.state_action_frequencies()
    res = ddc.project_reward(oracle_fit.reward_table(), model.features("anchor"), w)
    np.testing.assert_allclose(res.theta, model.theta, atol=1e-8, rtol=0)
    assert res.weighted_r2 == pytest.approx(1.0)
    res2 = ddc.project_reward(oracle_fit.reward_table().to_numpy(), model.features("anchor"))  # equal weights
    np.testing.assert_allclose(res2.theta, model.theta, atol=1e-8, rtol=0)


@pytest.mark.parametrize("method", ["fixed-v", "pml", "npl", "npl-normalized"])
def test_structural_steps_return_the_truth_with_exact_inputs(model, oracle_fit, method):
    # population weights: the expected log-likelihood under the true model is maximized at the truth
    w = model.state_action_frequencies()
    step = ddc.StructuralStep(model.features("anchor"), method=method, max_iter=400, tol=1e-12)
    step.fit(oracle_fit, weights=w)
    np.testing.assert_allclose(step.theta_, model.theta, atol=1e-6, rtol=0)
    assert step.converged_
    np.testing.assert_allclose(step.result_.policy, model.policy, atol=1e-8)
    np.testing.assert_allclose(step.reward_table(), model.normalized_reward(), atol=1e-5)


@pytest.mark.parametrize("method", ["fixed-v", "pml", "npl", "npl-normalized"])
def test_any_parametrization_is_accepted(model, oracle_fit, method):
    # Rust's u(x, replace) = -RC does not satisfy the anchor normalization; fixed-v normalizes it
    w = model.state_action_frequencies()
    step = ddc.StructuralStep(model.features("rust"), method=method).fit(oracle_fit, weights=w)
    np.testing.assert_allclose(step.theta_, model.theta, atol=1e-6, rtol=0)
    np.testing.assert_allclose(step.reward_table(), model.flow_utility, atol=1e-5)


def test_normalize_features_is_the_shaping_lemma(model, rng):
    X = model.features("rust")
    mu = rng.dirichlet(np.ones(2), size=175)
    g = rng.normal(size=175)
    offset = rng.normal(size=(175, 2))
    X_mu, off_mu = ddc.normalize_features(X, model.kernel, model.beta, mu, g, offset=offset)
    np.testing.assert_allclose(np.einsum("sa,sap->sp", mu, X_mu), 0.0, atol=1e-10)
    np.testing.assert_allclose(np.sum(mu * off_mu, axis=1), g, atol=1e-10)
    theta = np.array([3.0, -1.5])
    truth = stage2.normalized_reward(X @ theta + offset, model.kernel, model.beta, N.weighted(mu, g=g))
    np.testing.assert_allclose(X_mu @ theta + off_mu, truth, atol=1e-9)


def test_conditional_loglik_derivatives(model, rng):
    X = model.features("anchor")
    index = rng.normal(size=(175, 2))
    counts = rng.integers(0, 5, size=(175, 2)).astype(float)
    theta = np.array([3.0, 1.0])
    ll, g, H = ddc.conditional_loglik(theta, X, index, counts, hessian=True)
    eps = 1e-6
    for j in range(2):
        e = np.eye(2)[j] * eps
        lp, gp = ddc.conditional_loglik(theta + e, X, index, counts)
        lm, gm = ddc.conditional_loglik(theta - e, X, index, counts)
        assert g[j] == pytest.approx((lp - lm) / (2 * eps), rel=1e-6, abs=1e-6)
        np.testing.assert_allclose(H[:, j], (gp - gm) / (2 * eps), rtol=1e-5, atol=1e-6)
    assert np.all(np.linalg.eigvalsh(H) <= 1e-12)


# ---------------------------------------------------------------- on data
def test_npl_equals_its_fixed_point_and_pml_is_first_iterate(model, panel):
    fit = GenPQR(normalization=N.anchor_action("replace"), gamma=model.beta, q_model="exact", n_states=175,
                 clip=(1e-3, 1 - 1e-3), transition_model=ddc.IncrementKernel(4, "replace"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit.fit(panel)
    X = model.features("anchor")
    npl = ddc.StructuralStep(X, method="npl").fit(fit)
    assert set(npl.summary().se_kind) == {"OPG"}  # at convergence the MLE's
    pml = ddc.StructuralStep(X, method="pml").fit(fit)
    np.testing.assert_allclose(pml.theta_, npl.result_.history[0], atol=1e-10)
    assert npl.converged_ and npl.n_iter_ < 20
    # at the fixed point, pi is the soft-optimal policy of r_theta under the estimated kernel
    pi_star = stage2.soft_optimal_policy(npl.reward_table(), fit.stage2_.kernel, model.beta)
    np.testing.assert_allclose(npl.result_.policy, pi_star, atol=1e-6)
    # the fixed-v step under the weights mu = pi_hat (g = 0) is Hotz-Miller's PML exactly
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        weighted = fit.renormalize(N.weighted(np.exp(fit.stage2_.recovery.log_policy)))
    for features in (X, model.features("rust")):
        same = ddc.StructuralStep(features, method="fixed-v", tol=1e-12).fit(weighted)
        np.testing.assert_allclose(same.theta_, pml.theta_, atol=1e-6)
    fixed_v = ddc.StructuralStep(X, method="fixed-v", feature_names=["RC", "theta11"]).fit(fit)
    assert fixed_v.fit_time_ > 0 and np.all(np.isfinite(fixed_v.se_))
    table = fixed_v.summary()
    assert list(table.index) == ["RC", "theta11"] and list(table.columns) == ["estimate", "se", "se_kind"]
    assert set(table.se_kind) == {"inverse Hessian (conditional on the first stage)"}
    assert ddc.StructuralStep(X).method == "pml"


def test_structural_step_contract_and_errors(model, oracle_fit):
    step = ddc.StructuralStep(model.features("anchor"), method="npl")
    assert clone(step).get_params()["method"] == "npl"
    with pytest.raises(NotFittedError):
        step.reward_table()
    with pytest.raises(ValueError, match="method"):
        ddc.StructuralStep(model.features("anchor"), method="nope").fit(oracle_fit)
    with pytest.raises(ValueError, match="features"):
        ddc.StructuralStep().fit(oracle_fit)
    with pytest.raises(ValueError, match=r"\(S, K, p\)"):
        ddc.StructuralStep(np.zeros((10, 2, 2))).fit(oracle_fit)
    with pytest.raises(TypeError, match="GenPQR"):
        ddc.StructuralStep(model.features("anchor")).fit(object())
    with pytest.raises(ValueError, match="positive everywhere"):
        p = model.policy.copy()
        p[3] = [1.0, 0.0]
        ddc.fit_npl(p, model.features("anchor"), np.ones((175, 2)), model.kernel, model.beta)


def test_policy_evaluation_terms_are_genpqr_solves(model, rng):
    """The affine map v(theta) of NPL equals GenPQR's exact solve with mu = pi, g = pi r_theta."""
    pi = rng.dirichlet(np.ones(2), size=175)
    X = model.features("rust")
    off = rng.normal(size=(175, 2))
    base, VX = ddc.policy_evaluation_terms(pi, X, off, model.kernel, model.beta, "auto")
    theta = np.array([2.0, -0.7])
    r = X @ theta + off
    rec = stage2.recover_reward(np.log(pi), model.kernel, model.beta, N.behavior(g=np.sum(pi * r, axis=1)))
    np.testing.assert_allclose(base + VX @ theta, rec.continuation, atol=1e-9)
    # = P V^pi_r, the entropy-regularized value of pi under r
    _, V = stage2.policy_evaluation(r - np.log(pi), pi, model.kernel, model.beta)
    np.testing.assert_allclose(rec.continuation, model.kernel.expect(V), atol=1e-8)

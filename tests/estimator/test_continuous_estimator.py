"""GenPQR: estimator contract, errors, normalization identity, re-use of stage 1."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures

import genpqr
from genpqr.data import BoxActions
from genpqr import GenPQR, normalization as N
from genpqr.actions import GaussHermite, GaussLegendre, KnownDensity, LinearGaussianDensity, MonteCarlo, SquashedDensity
from genpqr.models._neural_densities import MixtureDensityNetwork
from genpqr.envs._lqg import make_lqg
from genpqr.exceptions import ConvergenceWarning, NotFittedError, WeakSupportWarning
from genpqr.stage2 import FQE
from genpqr.estimator import ContinuousOptions


def from_arrays(states, actions, next_states, **kwargs):
    """Transitions with continuous actions (a box action space)."""
    return genpqr.from_arrays(states, actions, next_states, action_space="box", **kwargs)


P = make_lqg()


def _poly():
    return make_pipeline(PolynomialFeatures(2), LinearRegression())


def _bounded_data(rng, n=800):
    s = rng.normal(size=(n, 1))
    a = np.tanh(0.5 * s + 0.4 * rng.normal(size=(n, 1)))
    s2 = 0.8 * s + 0.5 * a + 0.3 * rng.normal(size=(n, 1))
    return from_arrays(s, a, s2, action_low=-1.0, action_high=1.0, episode_ids=np.arange(n) // 10)


def test_estimator_contract():
    est = GenPQR(gamma=0.8, continuous=ContinuousOptions(integration=MonteCarlo(4)))
    assert clone(est).get_params() == est.get_params()
    assert not [k for k in vars(est) if k.endswith("_")]
    with pytest.raises(NotFittedError, match="not fitted"):
        est.reward(np.zeros((2, 1)), np.zeros((2, 1)))
    data = P.sample(300, random_state=0)
    fitted = est.set_params(q_model=FQE(_poly(), n_iterations=200)).fit(data)
    assert fitted is est and hasattr(est, "diagnostics_")
    assert est.normalization_.name == "behavior"  # default on an unbounded action space


def test_default_on_a_bounded_space_is_uniform_mu_and_a_squashed_policy(rng):
    est = GenPQR(q_model=FQE(_poly(), n_iterations=200), random_state=0,
                 continuous=ContinuousOptions(integration=GaussLegendre(16))).fit(_bounded_data(rng))
    assert est.normalization_.name == "uniform"
    assert isinstance(est.policy_.models[0], SquashedDensity)
    assert est.reference_measure_ == "Lebesgue measure on [-1, 1]"
    assert "Lebesgue measure on [-1, 1]" in str(est.summary())
    r = est.reward(np.zeros((3, 1)), [[-0.5], [0.0], [0.9]])
    assert r.shape == (3,) and np.all(np.isfinite(r))
    with pytest.raises(ValueError, match="outside the stated support"):
        est.reward(np.zeros((1, 1)), [[1.2]])


@pytest.mark.parametrize("rule", [GaussHermite(6), GaussHermite(3)])
def test_recovered_reward_satisfies_the_normalization_by_its_own_rule(rule):
    """mu r_hat = g holds by construction when mu r_hat uses the read-off's (deterministic) nodes."""
    data = P.sample(500, random_state=1)
    g = lambda s: 0.3 * s[:, 0] - 1.0  # noqa: E731
    est = GenPQR(normalization=N.gaussian(0.2, 0.8, g=g), gamma=P.gamma, q_model=FQE(_poly(), n_iterations=200),
                 policy_model=LinearGaussianDensity(), random_state=0,
                 continuous=ContinuousOptions(integration=rule)).fit(data)
    S = np.linspace(-2, 2, 9)[:, None]
    nodes = est.integration_.nodes(est.kernel_, S, np.random.default_rng(est.mc_seeds_[1]), readoff=True)
    r_nodes = est.reward(nodes.repeat_states(S), nodes.flat_actions)
    np.testing.assert_allclose(nodes.integrate(r_nodes), g(S), atol=1e-9)


def test_renormalize_equals_a_fresh_fit_and_reuses_stage_1():
    data = P.exact_design(20, 3)
    kw = dict(gamma=P.gamma, policy_model=LinearGaussianDensity(), q_model=FQE(_poly(), tol=1e-10, n_iterations=1000),
              continuous=ContinuousOptions(integration=GaussHermite(4)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakSupportWarning)
        base = GenPQR(normalization=N.gaussian(0.0, 1.0), **kw).fit(data)
        other = base.renormalize(N.point_anchor(0.1, g=2.0))
        fresh = GenPQR(normalization=N.point_anchor(0.1, g=2.0), **kw).fit(data)
    S, A = P.evaluation_pairs(50, random_state=0)
    assert other.policy_ is base.policy_ and base.normalization_.name == "gaussian"
    np.testing.assert_allclose(other.reward(S, A), fresh.reward(S, A), atol=1e-9)
    np.testing.assert_allclose(other.reward(S[:5], np.full((5, 1), 0.1)), 2.0, atol=1e-9)  # r(s, a0) = g


def test_sample_weights_equal_repeated_rows(rng):
    data = P.sample(200, random_state=2)
    w = rng.integers(1, 4, size=200)
    weighted = from_arrays(data.states, data.actions, data.next_states, sample_weight=w)
    repeated = from_arrays(np.repeat(data.states, w, 0), np.repeat(data.actions, w, 0),
                           np.repeat(data.next_states, w, 0))
    kw = dict(normalization=N.point_anchor(0.0), gamma=P.gamma, policy_model=LinearGaussianDensity(),
              q_model=FQE(_poly(), tol=1e-10, n_iterations=1000))
    S, A = P.evaluation_pairs(30, random_state=0)
    a = GenPQR(**kw).fit(weighted).reward(S, A)
    b = GenPQR(**kw).fit(repeated).reward(S, A)
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_random_state_makes_monte_carlo_fits_reproducible():
    data = P.sample(300, random_state=3)
    kw = dict(normalization=N.gaussian(0.0, 1.0), gamma=P.gamma, q_model=FQE(_poly(), n_iterations=200),
              continuous=ContinuousOptions(integration=MonteCarlo(4, readoff_samples=32)))
    S, A = P.evaluation_pairs(20, random_state=0)
    r1 = GenPQR(random_state=7, **kw).fit(data).reward(S, A)
    r2 = GenPQR(random_state=7, **kw).fit(data).reward(S, A)
    r3 = GenPQR(random_state=8, **kw).fit(data).reward(S, A)
    np.testing.assert_array_equal(r1, r2)
    assert np.max(np.abs(r1 - r3)) > 0


def test_cross_fitting_and_diagnostics():
    data = from_arrays(*(getattr(P.sample(600, random_state=4), k) for k in ("states", "actions", "next_states")),
                       episode_ids=np.arange(600) // 20)
    est = GenPQR(normalization=N.gaussian(0.0, 1.0), gamma=P.gamma, policy_model=LinearGaussianDensity(),
                 q_model=FQE(_poly(), n_iterations=200), cross_fit=3, random_state=0,
                 continuous=ContinuousOptions(integration=GaussHermite(5))).fit(data)
    d = est.diagnostics_
    assert len(est.policy_.models) == 3 and d.policy_log_loss_kind == "out-of-fold"
    assert d.n_mu_nodes == 5 and d.converged and d.solver == "fqe-continuation"
    assert 0.99 < d.density_integral_range[0] <= d.density_integral_range[1] < 1.01
    assert np.isfinite(d.max_mu_over_pi) and 0 < d.support_ess <= 600
    assert set(d.to_dict()) >= {"reference_measure", "integration", "bellman_residuals"}


def test_weak_support_warns():
    data = P.sample(400, random_state=5)
    with pytest.warns(WeakSupportWarning, match="effective sample size"), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # far off-support, linear FQE may also diverge
        GenPQR(normalization=N.gaussian(4.0, 0.3), gamma=P.gamma, q_model=FQE(_poly(), n_iterations=200),
               continuous=ContinuousOptions(integration=GaussHermite(3))).fit(data)


def test_clear_errors(rng):
    data = P.sample(200, random_state=6)
    bounded = _bounded_data(rng, 300)
    with pytest.raises(TypeError, match="looks like a classifier"):
        GenPQR(policy_model=LogisticRegression(), q_model=FQE(n_iterations=200)).fit(data)
    with pytest.raises(ValueError, match=r"support R\^1 differs from the data's action space \[-1, 1\]"):
        GenPQR(policy_model=LinearGaussianDensity(), q_model=FQE(n_iterations=200)).fit(bounded)
    with pytest.raises(ValueError, match="not dominated by the reference measure"):
        GenPQR(normalization=N.gaussian(), q_model=FQE(_poly(), n_iterations=200)).fit(bounded)
    with pytest.raises(ValueError, match="puts mass outside the action space"):
        GenPQR(normalization=N.point_anchor(1.5), q_model=FQE(_poly(), n_iterations=200)).fit(bounded)
    unnormalized = KnownDensity(log_prob_fn=lambda s, a: -0.5 * (a[:, 0] - 0.5 * s[:, 0]) ** 2,
                                sample_fn=lambda s, J, r: 0.5 * s[:, :, None] + r.normal(size=(len(s), J, 1)))
    with pytest.raises(ValueError, match="not a normalized density"):
        GenPQR(policy_model=unnormalized, q_model=FQE(_poly(), n_iterations=200)).fit(data)
    with pytest.raises(NotFittedError):
        GenPQR(policy_model=MixtureDensityNetwork(), policy_prefit=True, q_model=FQE(n_iterations=200)).fit(data)
    with pytest.raises(TypeError, match="genpqr Normalization"):
        GenPQR(normalization="anchor", q_model=FQE(n_iterations=200)).fit(data)
    with pytest.raises(TypeError, match="IntegrationRule"):
        GenPQR(q_model=FQE(_poly(), n_iterations=200), continuous=ContinuousOptions(integration="mc")).fit(data)
    with pytest.raises(ValueError, match="GaussLegendre needs a bounded support"):
        GenPQR(normalization=N.gaussian(), q_model=FQE(_poly(), n_iterations=200),
               continuous=ContinuousOptions(integration=GaussLegendre(8))).fit(data)


def test_min_log_density_clips_and_reports():
    data = P.sample(400, random_state=7)
    from genpqr.exceptions import ClippingWarning

    with pytest.warns(ClippingWarning, match="hit the floor min_log_density=-1"):
        est = GenPQR(normalization=N.point_anchor(0.0), gamma=P.gamma, policy_model=LinearGaussianDensity(),
                     q_model=FQE(_poly(), n_iterations=200),
                     continuous=ContinuousOptions(min_log_density=-1.0)).fit(data)
    assert 0.05 < est.diagnostics_.fraction_clipped < 1
    assert est.log_policy(data.states, data.actions).min() == -1.0


def test_default_q_model_and_persistence(tmp_path):
    data = P.sample(300, random_state=8)
    est = GenPQR(normalization=N.point_anchor(0.0), gamma=0.5, random_state=0,
                 q_model=FQE(n_iterations=5, tol=None)).fit(data)
    path = tmp_path / "model.joblib"
    est.save(path)
    S, A = P.evaluation_pairs(10, random_state=0)
    np.testing.assert_array_equal(genpqr.load(path).reward(S, A), est.reward(S, A))
    assert BoxActions.create(1).same_as(est.action_space_)


@pytest.mark.parametrize("make", [GenPQR, LinearGaussianDensity, MixtureDensityNetwork,
                                  lambda: SquashedDensity(LinearGaussianDensity())])
def test_sklearn_contract_checks(make):
    from sklearn.utils import estimator_checks as ec

    est = make()
    for check in (ec.check_estimator_cloneable, ec.check_no_attributes_set_in_init, ec.check_get_params_invariance,
                  ec.check_parameters_default_constructible, ec.check_set_params):
        check(type(est).__name__, est)

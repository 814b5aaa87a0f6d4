"""LQG benchmark: the closed form, GenPQR's route in coefficient space, and the sample
pipeline with the true policy and exact integrals (1e-6), then with estimated policies."""

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures

from genpqr import GenPQR, normalization as N
from genpqr.actions import BehaviorKernel, GaussHermite, GaussianReference, LinearGaussianDensity, MonteCarlo
from genpqr.envs._quadratic import Quadratic
from genpqr.data import BoxActions
from genpqr.envs._lqg import make_lqg
from genpqr.exceptions import WeakSupportWarning
from genpqr.stage2 import FQE
from genpqr.estimator import ContinuousOptions

PROBLEM = make_lqg()
PROBLEM_2D = make_lqg(A=[[0.7, 0.2], [-0.1, 0.6]], B=[[0.5, 0.0], [0.1, 0.4]], noise_cov=[[0.05, 0.01], [0.01, 0.04]],
                      drift=[0.1, -0.2], state_cost=[[0.4, 0.1], [0.1, 0.3]], action_cost=[[0.9, 0.2], [0.2, 0.7]],
                      cross_cost=[[0.1, -0.2], [0.0, 0.15]], state_linear=[0.2, -0.1], action_linear=[0.3, 0.1],
                      gamma=0.85, state_cov=np.eye(2))


def _normalizations(d):
    g_quad = Quadratic(0.1 * np.eye(d), 0.2 * np.ones(d), -0.3)
    return {
        "gaussian": N.gaussian(0.0, 1.0),
        "gaussian-gain-g": N.gaussian(0.3, 0.6, gain=0.4 * np.ones((1, d)) if d == 1 else 0.3 * np.eye(d), g=1.5),
        "anchor": N.point_anchor(0.0),
        "anchor-gain-quadratic-g": N.point_anchor(0.2, gain=-0.3 * np.ones((1, d)) if d == 1 else -0.2 * np.eye(d),
                                             g=g_quad),
    }


def _behavior_as_gaussian(problem):
    sol = problem.solution
    return N.gaussian(sol.offset, np.sqrt(np.diag(sol.cov)), gain=sol.gain)


def test_soft_riccati_solution_solves_the_soft_bellman_equation():
    p, sol = PROBLEM, PROBLEM.solution
    s = np.array([-1.5, 0.0, 0.7])
    a = np.linspace(-12, 12, 48001)
    Q = p.evaluate(sol.q, np.repeat(s, a.size), np.tile(a, s.size)).reshape(s.size, -1)
    logint = np.log(np.trapezoid(np.exp(Q), a, axis=1) if hasattr(np, "trapezoid") else np.trapz(np.exp(Q), a, axis=1))
    np.testing.assert_allclose(logint, sol.v(s[:, None]), atol=1e-9)  # V = log int exp Q da (Lebesgue)
    # Q = r + gamma E[V(s')]: Gauss-Hermite over the noise is exact for quadratics
    x, w = np.polynomial.hermite_e.hermegauss(3)
    rng = np.random.default_rng(0)
    S, A = rng.normal(size=(5, 1)), rng.normal(size=(5, 1))
    mean_next = S @ p.A.T + A @ p.B.T + p.drift
    EV = sum(wj * sol.v(mean_next + np.sqrt(p.noise_cov[0, 0]) * xj) for xj, wj in zip(x, w / w.sum()))
    np.testing.assert_allclose(p.evaluate(sol.q, S, A), p.true_reward(S, A) + p.gamma * EV, atol=1e-10)
    # the policy is N(K s + k, Sigma) = exp(Q - V)
    np.testing.assert_allclose(p.evaluate(sol.log_policy, S, A), p.policy_density().log_prob(S, A), atol=1e-10)


@pytest.mark.parametrize("problem", [PROBLEM, PROBLEM_2D], ids=["1d", "2d"])
def test_closed_form_equals_genpqr_route_and_satisfies_the_normalization(problem):
    d, m = problem.state_dim, problem.action_dim
    norms = dict(_normalizations(d), behavior=_behavior_as_gaussian(problem))
    rng = np.random.default_rng(1)
    S = rng.normal(size=(6, d))
    for name, norm in norms.items():
        if m > 1 and name.startswith(("gaussian-gain", "anchor-gain")):
            continue
        closed = problem.normalized_reward(norm)
        reward, q, w = problem.genpqr_exact(norm)
        assert closed.max_abs_difference(reward) < 1e-9, name
        # mu r = g, by Gauss-Hermite in the action (exact for quadratics)
        bound = norm.mu.bind(BoxActions.create(m))
        nodes = GaussHermite(3).nodes(bound, S)
        values = problem.evaluate(closed, nodes.repeat_states(S), nodes.flat_actions)
        np.testing.assert_allclose(nodes.integrate(values), norm.g(S), atol=1e-9, err_msg=name)


def test_closed_form_rejects_what_it_cannot_represent():
    with pytest.raises(ValueError, match="Gaussian and point-mass"):
        PROBLEM.normalized_reward(N.kernel(BehaviorKernel(), name="behavior"))
    with pytest.raises(ValueError, match="scalar or a Quadratic"):
        PROBLEM.normalized_reward(N.point_anchor(0.0, g=lambda s: s[:, 0]))
    with pytest.raises(ValueError, match="sqrt\\(gamma\\) rho < 1"):
        make_lqg(A=1.2, gamma=0.9).normalized_reward(N.point_anchor(0.0))


def _exact_fit(problem, norm, structure="continuation", reference=None):
    data = problem.exact_design(n_states=30, n_noise_nodes=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakSupportWarning)
        return GenPQR(normalization=norm, gamma=problem.gamma, policy_model=problem.policy_density(),
                      policy_prefit=True,
                      q_model=FQE(make_pipeline(PolynomialFeatures(2), LinearRegression()), n_iterations=2000,
                                  tol=1e-11, structure=structure),
                      continuous=ContinuousOptions(integration=GaussHermite(4), reference=reference)).fit(data)


@pytest.mark.parametrize("structure", ["continuation", "direct"])
@pytest.mark.parametrize("name", ["gaussian", "gaussian-gain-g", "anchor", "anchor-gain-quadratic-g", "behavior"])
def test_true_policy_and_exact_integrals_recover_the_closed_form(name, structure):
    """With the true Gaussian policy, Gauss-Hermite mu-integrals and an exact noise design, the
    continuous pipeline reproduces the closed-form normalized reward to 1e-6."""
    p = PROBLEM
    norm = N.kernel(BehaviorKernel(), name="behavior", g=0.5) if name == "behavior" else _normalizations(1)[name]
    est = _exact_fit(p, norm, structure)
    assert est.diagnostics_.converged
    S, A = p.evaluation_pairs(400, random_state=3)
    target = _behavior_as_gaussian(p) if name == "behavior" else norm
    if name == "behavior":
        target = N.gaussian(target.mu.mean, target.mu.scale, gain=target.mu.gain, g=0.5)
    closed = p.normalized_reward(target)
    np.testing.assert_allclose(est.reward(S, A), p.evaluate(closed, S, A), atol=1e-6, rtol=0)
    _, q, w = p.genpqr_exact(target)
    np.testing.assert_allclose(est.q(S, A), p.evaluate(q, S, A), atol=1e-6)
    Pw = w.push(p.F, p.drift, p.noise_cov)
    np.testing.assert_allclose(est.continuation(S, A), -p.evaluate(Pw, S, A), atol=1e-6)


def test_two_dimensional_lqg_is_recovered_exactly():
    p = PROBLEM_2D
    norm = N.gaussian([0.1, -0.2], [0.8, 1.1])
    est = _exact_fit(p, norm)
    S, A = p.evaluation_pairs(200, random_state=4)
    np.testing.assert_allclose(est.reward(S, A), p.evaluate(p.normalized_reward(norm), S, A), atol=1e-6)


def test_reference_measure_changes_the_reward_as_derived():
    p, norm = PROBLEM, N.gaussian(0.0, 1.0)
    ref = GaussianReference(mean=0.5, scale=0.8)
    est = _exact_fit(p, norm, reference=ref)
    S, A = p.evaluation_pairs(200, random_state=5)
    np.testing.assert_allclose(est.reward(S, A), p.evaluate(p.normalized_reward(norm, reference=ref), S, A),
                               atol=1e-6)
    lebesgue = p.evaluate(p.normalized_reward(norm), S, A)
    assert np.max(np.abs(est.reward(S, A) - lebesgue)) > 0.1  # a different measure, a different reward
    assert "Gaussian reference" in est.reference_measure_


@pytest.mark.slow
def test_estimated_policy_with_monte_carlo_mse_falls_with_n():
    """Estimated linear-Gaussian policy, Monte Carlo mu-integrals (mu = N(0, 1)): the reward MSE
    falls from n = 1e3 to 1e4 to 1e5 and is below 2e-3 at 1e5 (true reward variance ~0.9; measured
    ~1e-4, against ~2e-2 at n = 1e3)."""
    p, norm = PROBLEM, N.gaussian(0.0, 1.0)
    S, A = p.evaluation_pairs(1000, random_state=99)
    truth = p.evaluate(p.normalized_reward(norm), S, A)
    mse = {}
    for n in (1_000, 10_000, 100_000):
        values = []
        for seed in (0, 1):
            est = GenPQR(normalization=norm, gamma=p.gamma, policy_model=LinearGaussianDensity(),
                         q_model=FQE(make_pipeline(PolynomialFeatures(2), LinearRegression()), n_iterations=200,
                                     tol=1e-5),
                         random_state=seed,
                         continuous=ContinuousOptions(integration=MonteCarlo(8, readoff_samples=1024))).fit(p.sample(n, random_state=seed))
            values.append(np.mean((est.reward(S, A) - truth) ** 2))
        mse[n] = float(np.mean(values))
    assert mse[1_000] > mse[10_000] > mse[100_000], mse
    assert mse[100_000] < 2e-3, mse
    assert np.corrcoef(est.reward(S, A), truth)[0, 1] > 0.998


# ----------------------------------------------------------------------------- properties
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(a=st.floats(-0.9, 0.9), b=st.floats(-1.5, 1.5), q=st.floats(0.0, 2.0), rho=st.floats(0.2, 3.0),
       c=st.floats(-0.3, 0.3), qs=st.floats(-1, 1), qa=st.floats(-1, 1), noise=st.floats(0.0, 0.5),
       gamma=st.floats(0.0, 0.95), mean=st.floats(-1, 1), scale=st.floats(0.1, 2.0), gain=st.floats(-0.5, 0.5),
       anchor=st.booleans(), g0=st.floats(-2, 2))
def test_identification_theorem_holds_on_random_lqg_problems(a, b, q, rho, c, qs, qa, noise, gamma, mean, scale, gain,
                                                             anchor, g0):
    """Closed form (shaping potential from the true reward) == GenPQR's route (from u = log pi
    only), and it satisfies mu r = g: the continuous identification theorem in the quadratic class."""
    p = make_lqg(A=a, B=b, noise_cov=noise ** 2, state_cost=q + c * c / rho + 0.01, action_cost=rho, cross_cost=c,
                 state_linear=qs, action_linear=qa, gamma=gamma)
    norm = N.point_anchor(mean, gain=[[gain]], g=g0) if anchor else N.gaussian(mean, scale, gain=[[gain]], g=g0)
    if gamma * (a + b * gain) ** 2 >= 0.99:
        return
    closed = p.normalized_reward(norm)
    reward, _, _ = p.genpqr_exact(norm)
    scale_ = 1.0 + np.abs(closed.to_vector()).max()
    assert closed.max_abs_difference(reward) < 1e-8 * scale_
    s = np.linspace(-2, 2, 5)[:, None]
    mu = norm.mu.bind(BoxActions.create(1))
    nodes = GaussHermite(3).nodes(mu, s)
    np.testing.assert_allclose(nodes.integrate(p.evaluate(closed, nodes.repeat_states(s), nodes.flat_actions)), g0,
                               atol=1e-8 * scale_)


@settings(max_examples=30, deadline=None)
@given(H=st.lists(st.floats(-2, 2), min_size=4, max_size=4), h=st.lists(st.floats(-2, 2), min_size=2, max_size=2),
       F=st.lists(st.floats(-2, 2), min_size=2, max_size=2), f0=st.floats(-1, 1), var=st.floats(0, 2))
def test_quadratic_push_is_the_gaussian_expectation(H, h, F, f0, var):
    quad = Quadratic(np.reshape(H, (2, 2)), h, 0.7)
    Fm = np.array([[F[0]], [F[1]]])
    pushed = quad.push(Fm, [f0, 0.0], np.diag([var, 0.0]))
    y = np.array([[-1.0], [0.5], [2.0]])
    x, w = np.polynomial.hermite_e.hermegauss(3)
    w = w / w.sum()
    expected = sum(wj * quad(y @ Fm.T + np.array([f0 + np.sqrt(var) * xj, 0.0])) for xj, wj in zip(x, w))
    np.testing.assert_allclose(pushed(y), expected, atol=1e-9)


def test_the_lqg_benchmark_through_genpqr_raises_no_deprecation_warning():
    """The library itself uses the unified API: sampling the LQG benchmark, its exact design and
    closed form, and fitting it with genpqr.GenPQR emit no DeprecationWarning."""
    import genpqr
    from genpqr import normalization as N

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        problem = make_lqg()
        data = problem.sample(400, random_state=0)
        design = problem.exact_design(n_states=10, n_noise_nodes=2, random_state=0)
        norm = N.point_anchor(0.0)
        truth = problem.normalized_reward(norm)
        est = genpqr.GenPQR(normalization=norm, gamma=problem.gamma, policy_model=LinearGaussianDensity(),
                            q_model=FQE(make_pipeline(PolynomialFeatures(2), LinearRegression()), n_iterations=200),
                            random_state=0, continuous=ContinuousOptions(integration=GaussHermite(4)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", WeakSupportWarning)
            est.fit(data)
        s, a = problem.evaluation_pairs(200, random_state=1)
        r = est.reward(s, a)
        summary = str(est.summary())
    assert not data.is_finite and not design.is_finite and type(est) is genpqr.GenPQR
    assert summary.startswith("GenPQR fit:")
    assert np.corrcoef(r, problem.evaluate(truth, s, a))[0, 1] > 0.9

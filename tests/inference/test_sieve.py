"""The continuous-state route (linear-sieve Riesz regression, :mod:`genpqr.inference._sieve`)
reproduces the exact tabular route when its sieve is saturated: one-hot state features, LSTD on
the same features (the count kernel), cell frequencies. Then every plug-in, estimate and
standard error agree."""

import warnings

import numpy as np
import pytest

import genpqr
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.inference import infer, policy_value, reward_mean, reward_projection, value_difference
from genpqr.normalization import anchor_action
from genpqr.stage1 import FrequencyClassifier
from genpqr.stage2 import LSTDQ, onehot_features, soft_optimal_solution

S, K = 6, 3
PI_FIX = np.random.default_rng(3).dirichlet(np.ones(K), size=S)
X = np.random.default_rng(0).normal(size=(S, K, 2))
W = np.random.default_rng(1).uniform(0.5, 1.5, size=(S, K))


def idx(states):
    return states[:, 0].astype(int)


def targets(tabular: bool):
    pi = PI_FIX if tabular else (lambda st: PI_FIX[idx(st)])
    x = X if tabular else (lambda st: X[idx(st)])
    w = W if tabular else (lambda st: W[idx(st)])
    return [policy_value(pi, reward="log_policy", name="V_u"), policy_value("behavior", reward="log_policy", name="B_u"),
            policy_value(pi, gamma=0.7, name="V_rbar"), policy_value("behavior", gamma=0.7, name="B_rbar"),
            value_difference(pi, "behavior", name="diff"), reward_mean(w, name="mean"),
            reward_projection(x, names=["x1", "x2"]), reward_projection(x, names=["w1", "w2"], weights=w)]


@pytest.fixture(scope="module")
def fits():
    mdp = random_mdp(S, K, gamma=0.9, random_state=0)
    policy = soft_optimal_solution(mdp.reward, mdp.kernel, mdp.gamma).policy
    panel = simulate_tabular(mdp, policy, n_episodes=150, horizon=15, random_state=1)
    common = dict(normalization=anchor_action(0), gamma=0.9, clip=None, policy_model=FrequencyClassifier(n_states=S))
    exact = genpqr.GenPQR(q_model="exact", n_states=S, transition_model="counts", **common)
    sieve = genpqr.GenPQR(q_model=LSTDQ(features=onehot_features(S), fit_intercept=False, alpha=0.0), **common)
    return panel, exact, sieve


@pytest.mark.parametrize("cross_fit", [None, 3])
def test_saturated_sieve_is_the_exact_route(fits, cross_fit):
    panel, exact, sieve = fits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r1 = infer(exact, targets(True), panel, cross_fit=cross_fit, random_state=0,
                   riesz=None if cross_fit is None else "cells")
        r2 = infer(sieve, targets(False), panel, cross_fit=cross_fit, random_state=0, riesz=onehot_features(S))
    # the sieve's systems carry a ridge of 1e-8 relative: agreement to 1e-6
    np.testing.assert_allclose(r2.plug_in, r1.plug_in, rtol=1e-6)
    if cross_fit is None:  # both exact
        np.testing.assert_allclose(r2.estimate, r1.estimate, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(r2.std_error, r1.std_error, rtol=1e-6)
    else:  # cross-fitted, the tabular route's state law is the whole sample's, the sieve's the fold's
        np.testing.assert_allclose(r2.estimate, r1.estimate, atol=0.2 * r1.std_error.min())
        np.testing.assert_allclose(r2.std_error, r1.std_error, rtol=0.02)
    assert "linear-sieve" in r2.route and "exact tabular" in r1.route
    # the continuous route splits its standard errors by input as the tabular one does
    from .test_by_input import assert_adds_up

    assert_adds_up(r2)
    columns = ["se_first_stage", "se_kernel", "se_state_law", "share_cross"]
    if cross_fit is None:
        np.testing.assert_allclose(r2.se_by_input[columns[:3]], r1.se_by_input[columns[:3]], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(r2.se_by_input["share_cross"], r1.se_by_input["share_cross"], atol=1e-6)
    else:
        np.testing.assert_allclose(r2.se_by_input[columns[:3]], r1.se_by_input[columns[:3]], rtol=0.05,
                                   atol=0.02 * r1.std_error.max())


def test_continuous_route_refusals(fits):
    panel, _, sieve = fits
    from genpqr.inference import reward_at, softmax_value

    for target, match in [(reward_at([(0, 1)]), "root-n estimable only for tabular"),
                          (softmax_value([0, 1]), "implemented for tabular states"),
                          (reward_projection(X), "callable"),
                          (reward_mean(distribution=np.full((S, K), 1 / (S * K))), "points"),
                          (policy_value(PI_FIX), "policy must be")]:
        with pytest.raises(ValueError, match=match):
            infer(sieve, target, panel, cross_fit=None)
    with pytest.raises(ValueError, match="needs tabular states"):
        infer(sieve, reward_mean(), panel, riesz="exact")


def test_riesz_regression_on_indicators_divides_by_the_cell_frequencies():
    """The sieve projector's identity: indicator features, no ridge -> measure / cell frequency."""
    from genpqr.inference._algebra import SieveProjector

    rng = np.random.default_rng(0)
    freq = rng.dirichlet(np.ones(S * K)).reshape(S, K)
    measure = rng.normal(size=(2, S, K))
    alpha = SieveProjector(np.eye(S), freq, ridge=1e-14)(measure)
    np.testing.assert_allclose(alpha, measure / freq[None], rtol=1e-9)


def test_riesz_ridge_is_chosen_by_the_held_out_loss():
    """Where one half of the rows never visits a state, the held-out Riesz loss rejects the free
    extrapolation there: a ridge above the smallest is chosen."""
    from genpqr.inference._algebra import SieveProjector

    rng = np.random.default_rng(1)
    freq = rng.dirichlet(np.ones(S * K)).reshape(S, K)
    half_a, half_b = freq.copy(), freq.copy()
    half_a[0], half_b[1] = 0.0, 0.0
    psi = np.column_stack([np.ones(S), np.arange(S), np.arange(S) ** 2])
    measure = rng.uniform(size=(1, S, K))
    projector = SieveProjector(psi, freq, ridge=None, halves=[half_a / half_a.sum(), half_b / half_b.sum()])
    projector(measure)
    assert projector.chosen[0][0] in SieveProjector.RIDGES


def test_tabular_riesz_regression_route_runs(fits):
    panel, exact, _ = fits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r1 = infer(exact, targets(True), panel, cross_fit=2, random_state=0)
        r2 = infer(exact, targets(True), panel, cross_fit=2, random_state=0, riesz=onehot_features(S))
    assert "sieve of state features" in r2.route
    np.testing.assert_allclose(r2.estimate, r1.estimate, rtol=0.1, atol=0.5 * r1.std_error.max())


def test_continuous_states_split_their_standard_errors_by_input(fits):
    """On continuous states (the default quantile-spline Riesz features, a spline LSTD Q) every
    component's standard error splits into the three inputs and adds up to the total."""
    panel, _, _ = fits
    jitter = np.random.default_rng(4).uniform(0.0, 0.5, size=panel.n)
    states = panel.states[:, 0] + jitter
    nxt = np.where(panel.next_observed, np.nan_to_num(panel.next_states[:, 0]) + 0.25, np.nan)
    data = genpqr.from_arrays(states, panel.actions, nxt, terminated=panel.terminated, episode_ids=panel.episode_ids)
    model = genpqr.GenPQR(normalization=anchor_action(0), gamma=0.9, q_model="lstd")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = infer(model, [policy_value("behavior", gamma=0.7, name="B"), reward_mean(name="mean"),
                            reward_projection(lambda st: np.stack([np.ones((len(st), K)), np.repeat(st, K, 1)], -1),
                                              names=["c", "slope"])], data, cross_fit=2, random_state=0)
    from .test_by_input import assert_adds_up

    assert_adds_up(res)
    split = res.se_by_input
    assert np.all(np.isfinite(split.to_numpy()))
    assert np.all(split["se_first_stage"] > 0) and np.all(split["se_kernel"] > 0)
    assert "first stage" in str(res.summary())

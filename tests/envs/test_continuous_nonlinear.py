"""Ring problem (bounded 1-D action): the discretized truth, the continuous pipeline, and the
cross-check with the tabular solver on a K-point action grid."""

import numpy as np
import pytest
from scipy.special import logsumexp
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline

from genpqr import GenPQR, normalization as N, stage2
from genpqr.actions import GaussLegendre
from genpqr.actions._densities import check_normalized
from genpqr.envs._nonlinear import RingProblem, StateActionBasis
from genpqr.stage2 import FQE
from genpqr.estimator import ContinuousOptions

P = RingProblem()
NORMS = {"uniform": N.uniform(g=0.25), "anchor": N.point_anchor(0.0)}


def test_truth_is_converged_in_the_discretization():
    coarse = RingProblem(n_quadrature=48)
    np.testing.assert_allclose(coarse.value, P.value, atol=1e-12)
    # a 4001-point midpoint grid agrees to its O(Delta^2) error
    grid = P.action_grid(4001)
    S = P.n_states
    Q = P.q(np.repeat(np.arange(S), grid.size), np.tile(grid, S)).reshape(S, -1)
    np.testing.assert_allclose(logsumexp(Q, axis=1) + np.log(2.0 / 4001), P.value, atol=1e-6)
    density = P.policy_density()
    np.testing.assert_allclose(check_normalized(density, np.arange(S, dtype=float)[:, None]), 1.0, atol=1e-6)


@pytest.mark.parametrize("name", list(NORMS))
def test_true_normalized_reward_satisfies_the_normalization(name):
    norm = NORMS[name]
    r = P.normalized_reward(norm)
    s = np.arange(P.n_states)
    if name == "anchor":
        np.testing.assert_allclose(r(s, np.zeros(s.size)), 0.0, atol=1e-12)
    else:
        x, w = np.polynomial.legendre.leggauss(64)
        means = [np.sum(w * r(np.full(64, k), x)) / 2.0 for k in s]
        np.testing.assert_allclose(means, 0.25, atol=1e-12)


@pytest.fixture(scope="module")
def continuous_fits():
    data = P.exact_design(24)
    fits = {}
    for name, norm in NORMS.items():
        fits[name] = GenPQR(normalization=norm, gamma=P.gamma, policy_model=P.policy_density(), policy_prefit=True,
                            q_model=FQE(make_pipeline(StateActionBasis(P.n_states, 20),
                                                      LinearRegression(fit_intercept=False)), n_iterations=1000,
                                        tol=1e-13),
                            continuous=ContinuousOptions(integration=GaussLegendre(48))).fit(data)
    return fits


@pytest.mark.parametrize("name", list(NORMS))
def test_continuous_pipeline_matches_the_truth(continuous_fits, name):
    s = np.repeat(np.arange(P.n_states), 41)
    a = np.tile(np.linspace(-1, 1, 41), P.n_states)
    err = np.abs(continuous_fits[name].reward(s.astype(float), a) - P.normalized_reward(NORMS[name])(s, a)).max()
    assert err < 2e-5


@pytest.mark.parametrize("name", list(NORMS))
def test_tabular_solver_on_a_discretized_action_agrees_within_the_discretization_error(continuous_fits, name):
    """The core tabular solver on a K-point action grid agrees with the continuous pipeline up to
    the grid's own discretization error (its distance to the truth), which shrinks as Delta^2."""
    truth = P.normalized_reward(NORMS[name])
    gaps, disc = {}, {}
    for K in (11, 41):
        log_policy, kernel, grid = P.discretized(K)
        rec = stage2.recover_reward(log_policy, kernel, P.gamma, P.tabular_normalization(NORMS[name], K))
        s = np.repeat(np.arange(P.n_states), K)
        a = np.tile(grid, P.n_states)
        r_cont = continuous_fits[name].reward(s.astype(float), a).reshape(P.n_states, K)
        r_true = truth(s, a).reshape(P.n_states, K)
        gaps[K] = np.abs(rec.reward - r_cont).max()
        disc[K] = np.abs(rec.reward - r_true).max()
        cont_err = np.abs(r_cont - r_true).max()
        assert gaps[K] <= disc[K] + cont_err + 1e-12  # within the discretization error
    assert disc[11] / disc[41] > 8  # O(Delta^2): (41/11)^2 = 13.9
    assert gaps[41] < 1e-3


def test_tabular_normalization_needs_a_grid_anchor():
    with pytest.raises(ValueError, match="odd n_actions"):
        P.tabular_normalization(N.point_anchor(0.0), 10)


def test_sampled_ring_data_fit(rng):
    data = P.sample(3000, random_state=0)
    assert data.action_space.describe() == "[-1, 1]" and data.actions.min() >= -1
    est = GenPQR(normalization=N.uniform(), gamma=P.gamma, policy_model=P.policy_density(), policy_prefit=True,
                 q_model=FQE(make_pipeline(StateActionBasis(P.n_states, 6), LinearRegression(fit_intercept=False)),
                             n_iterations=200),
                 continuous=ContinuousOptions(integration=GaussLegendre(24))).fit(data)
    s = np.repeat(np.arange(P.n_states), 21)
    a = np.tile(np.linspace(-0.9, 0.9, 21), P.n_states)
    truth = P.normalized_reward(N.uniform())(s, a)
    assert np.corrcoef(est.reward(s.astype(float), a), truth)[0, 1] > 0.99

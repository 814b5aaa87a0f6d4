"""Soft fitted Q iteration against exact soft policy iteration on one-hot tabular problems."""

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

from genpqr import GenPQR, normalization as N, stage2 as T
from genpqr.counterfactuals import IdentificationWarning, SoftFQI, soft_counterfactual
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.stage1 import FrequencyClassifier
from genpqr.exceptions import ConvergenceWarning, NotFittedError
from genpqr.stage2 import FQE, TabularQModel

S, K, GAMMA = 10, 3, 0.9


@pytest.fixture(scope="module")
def case():
    mdp = random_mdp(S, K, n_next=4, gamma=GAMMA, random_state=3)
    policy = T.soft_optimal_policy(mdp.reward, mdp.kernel, GAMMA)
    data = simulate_tabular(mdp, policy, n_episodes=120, horizon=20, random_state=4)
    kernel, counts = T.estimate_transitions(data.states, data.actions, data.next_states, S, K,
                                            terminated=data.terminated)
    assert counts.min() > 0  # every (s, a) seen: the empirical kernel is the regression's
    return mdp, data, kernel


def test_equals_exact_soft_policy_iteration_on_one_hot_states(case):
    """States embedded as one-hot vectors, a linear regressor per action: exact to 1e-6."""
    mdp, data, kernel = case
    s, s2 = data.states[:, 0].astype(int), data.next_states[:, 0].astype(int)
    embed = np.eye(S)
    fqi = SoftFQI(LinearRegression(fit_intercept=False), encoding="per_action", n_iterations=1000, tol=1e-11).fit(
        embed[s], data.actions, mdp.reward[s, data.actions], embed[s2], GAMMA, terminated=data.terminated,
        n_actions=K)
    exact = T.soft_optimal_solution(mdp.reward, kernel, GAMMA)
    assert fqi.converged_
    assert np.max(np.abs(fqi.policy(embed) - exact.policy)) < 1e-6
    assert np.max(np.abs(fqi.predict_q(embed) - exact.q)) < 1e-6
    assert np.max(np.abs(fqi.value(embed) - exact.value)) < 1e-6
    np.testing.assert_allclose(np.exp(fqi.log_policy(embed)), fqi.policy(embed), atol=1e-12)


def test_native_tabular_model_equals_exact(case):
    mdp, data, kernel = case
    s = data.states[:, 0].astype(int)
    fqi = SoftFQI(TabularQModel(S), n_iterations=1000, tol=1e-11).fit(
        data.states, data.actions, mdp.reward[s, data.actions], data.next_states, GAMMA, n_actions=K)
    grid = np.arange(S, dtype=float)[:, None]
    exact = T.soft_optimal_solution(mdp.reward, kernel, GAMMA)
    assert np.max(np.abs(fqi.policy(grid) - exact.policy)) < 1e-6


def test_sample_counterfactual_matches_the_exact_path(case):
    """GenPQR's FQE path (cell means) + soft FQI == exact path + exact counterfactual."""
    mdp, data, _ = case
    common = dict(gamma=GAMMA, clip=None, policy_model=FrequencyClassifier(S), n_states=S)
    exact = GenPQR(N.anchor_action(0), q_model="exact", **common).fit(data)
    sample = GenPQR(N.anchor_action(0), q_model=FQE(TabularQModel(S), n_iterations=1000, tol=1e-12),
                    **{k: v for k, v in common.items() if k != "n_states"}).fit(data)
    delta = np.array([0.0, -0.5, 0.3])
    for gamma in (None, 0.7):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IdentificationWarning)
            ref = exact.counterfactual(reward_change=delta, gamma=gamma)
            fqi = soft_counterfactual(sample, reward_change=delta, gamma=gamma,
                                      fqi=SoftFQI(TabularQModel(S), n_iterations=1000, tol=1e-11))
        grid = np.arange(S, dtype=float)[:, None]
        assert np.max(np.abs(fqi.policy(grid) - ref.counterfactual.policy)) < 1e-6
        assert fqi.invariant_ == (gamma is None) == ref.invariant


def test_identification_warnings(case):
    _, data, _ = case
    model = GenPQR(N.mean_zero(), gamma=GAMMA, q_model=FQE(TabularQModel(S), n_iterations=200), clip=None).fit(data)
    fqi = SoftFQI(TabularQModel(S), n_iterations=5, tol=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdentificationWarning)
        soft_counterfactual(model, data, reward_change=np.ones(K), fqi=fqi)  # same environment, more draws
    with pytest.warns(IdentificationWarning, match="transitions"):
        soft_counterfactual(model, data, environment_changed=True, fqi=fqi)
    with pytest.raises(ValueError, match="environment_changed=True needs"):
        soft_counterfactual(model, environment_changed=True, fqi=fqi)


def test_errors_and_warnings(case):
    mdp, data, _ = case
    r = np.zeros(data.n)
    with pytest.raises(NotFittedError):
        SoftFQI().predict_q(data.states)
    with pytest.raises(ValueError, match="must have n ="):
        SoftFQI().fit(data.states, data.actions, r[:-1], data.next_states, GAMMA)
    with pytest.raises(ValueError, match="integer codes"):
        SoftFQI().fit(data.states, data.actions.astype(float), r, data.next_states, GAMMA)
    with pytest.raises(ValueError, match="gamma"):
        SoftFQI().fit(data.states, data.actions, r, data.next_states, 1.0)
    with pytest.warns(ConvergenceWarning, match="soft FQI did not reach"):
        SoftFQI(TabularQModel(S), n_iterations=2, tol=1e-12).fit(data.states, data.actions, r + 1.0,
                                                               data.next_states, GAMMA)


@pytest.mark.slow
def test_synthetic_benchmark_recovered_reward_is_as_good_as_the_true_one():
    """benchmarks/soft_fqi_synthetic.py on a small budget (one seed, 150 logged trajectories,
    every action simulated at 250 states, 20 soft-FQI iterations): the soft-optimal policy of
    GenPQR's recovered reward is as close to the truth, by KL and by soft value under the true
    reward, as that of the true reward through the same soft FQI."""
    import argparse
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "soft_fqi_synthetic.py"
    spec = importlib.util.spec_from_file_location("soft_fqi_synthetic", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    args = argparse.Namespace(n_train=150, n_test=40, n_states=250, n_iterations=20, n_value_starts=30,
                              n_rollouts=5, horizon=25)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = bench.run_seed(0, args)
    assert abs(row["v_star_mc"] - row["v_star"]) < 1e-6 * abs(row["v_star"])  # the value check is exact
    assert row["kl_recovered"] < 1.5 * row["kl_true_reward"] + 0.01 and row["kl_recovered"] < 0.1
    assert abs(row["v_recovered"] - row["v_true_reward"]) < 0.03 * row["v_star"]
    assert row["v_star"] - row["v_recovered"] < 0.1 * row["v_star"]  # regret under 10% of the optimal value

"""Rust's bus-engine model (Su-Judd design): policy, kernel, normalized truth, panels."""

import numpy as np
import pytest

from genpqr import from_pandas, normalization as N, stage2
from genpqr.envs._rust import SU_JUDD, bus_engine, simulate_buses


@pytest.fixture(scope="module")
def model():
    return bus_engine()


def test_design_matches_su_judd(model):
    assert model.n_states == 175 and model.beta == 0.975
    assert model.theta == pytest.approx([11.7257, 2.4569])
    np.testing.assert_allclose(model.theta3, SU_JUDD["theta3"], atol=1e-15)
    assert model.kernel.n_actions == 2 and model.action_labels == ("keep", "replace")


def test_policy_is_the_soft_optimal_policy(model):
    # an independent solve: soft value iteration instead of soft policy iteration
    vi = stage2.soft_optimal_solution(model.flow_utility, model.kernel, model.beta, method="value_iteration",
                                       tol=1e-13, max_iter=5000)
    np.testing.assert_allclose(model.policy, vi.policy, atol=1e-8, rtol=0)
    np.testing.assert_allclose(model.solution.value, vi.value, atol=1e-8, rtol=0)
    # the normalized truth has the same soft-optimal policy (shaping invariance)
    pi_norm = stage2.soft_optimal_policy(model.normalized_reward(), model.kernel, model.beta)
    np.testing.assert_allclose(pi_norm, model.policy, atol=1e-8, rtol=0)
    # replacement becomes likelier with mileage
    assert np.all(np.diff(model.policy[:, 1]) > 0)


def test_kernel_rows_sum_to_one_and_match_theta3(model):
    P = model.kernel.dense()
    np.testing.assert_allclose(P.sum(axis=2), 1.0, atol=1e-14)
    th = model.theta3
    for x in (0, 17, 100, 170):
        np.testing.assert_allclose(P[x, 0, x:x + 5], th, atol=1e-15)  # keep: x + j
        assert P[x, 0].sum() - P[x, 0, x:x + 5].sum() == pytest.approx(0.0, abs=1e-15)
    for x in (0, 50, 174):
        np.testing.assert_allclose(P[x, 1, :5], th, atol=1e-15)  # replace: 0 + j
    # capped at the last bin
    assert P[172, 0, 174] == pytest.approx(th[2:].sum(), abs=1e-15)
    assert P[174, 0, 174] == pytest.approx(1.0, abs=1e-15)


def test_anchor_normalized_truth_is_closed_form(model):
    x = np.arange(175)
    r = stage2.normalized_reward(model.flow_utility, model.kernel, model.beta, N.anchor_action(1))
    np.testing.assert_allclose(r[:, 0], 11.7257 - 0.001 * 2.4569 * x, atol=1e-8, rtol=0)
    np.testing.assert_allclose(r[:, 1], 0.0, atol=1e-8)
    np.testing.assert_allclose(model.normalized_reward(), r, atol=1e-8, rtol=0)
    # r_mu = u + c - beta P c with the constant potential c = RC / (1 - beta)
    np.testing.assert_allclose(r - model.flow_utility, 11.7257, atol=1e-8)


def test_features_reproduce_both_parametrizations(model):
    np.testing.assert_allclose(model.features("anchor") @ model.theta, model.normalized_reward(), atol=1e-14)
    np.testing.assert_allclose(model.features("rust") @ model.theta, model.flow_utility, atol=1e-14)
    with pytest.raises(ValueError, match="parametrization"):
        model.features("other")


def test_stationary_distribution_is_invariant(model):
    d = model.stationary_distribution()
    P_pi = model.kernel.under(model.policy)
    np.testing.assert_allclose(P_pi.T @ d, d, atol=1e-12)
    assert d.min() >= 0 and d.sum() == pytest.approx(1.0)
    w = model.state_action_frequencies()
    assert w.shape == (175, 2) and w.sum() == pytest.approx(1.0)


def test_panel_shape_labels_and_dynamics(model):
    panel = simulate_buses(model, n_buses=50, n_periods=120, random_state=0)
    tr, frame = panel.transitions, panel.frame
    assert tr.n == 6000 and tr.n_episodes == 50 and tr.state_dim == 1
    assert list(tr.action_labels) == ["keep", "replace"]
    assert set(tr.labels_of()) <= {"keep", "replace"}
    assert tr.truncated.sum() == 50 and not tr.terminated.any()
    s, s2 = tr.states[:, 0].astype(int), tr.next_states[:, 0].astype(int)
    base = np.where(tr.actions == 1, 0, s)
    inc = s2 - base
    assert inc.min() >= 0 and inc.max() <= 4
    # next state of month t is the state of month t + 1 of the same bus
    same_bus = tr.episode_ids[1:] == tr.episode_ids[:-1]
    np.testing.assert_array_equal(s2[:-1][same_bus], s[1:][same_bus])
    np.testing.assert_allclose(tr.rewards, model.flow_utility[s, tr.actions])
    assert list(frame.columns) == ["bus", "month", "mileage", "action", "next_mileage"]
    assert len(frame) == 6000
    back = from_pandas(frame, episode="bus", time="month", state="mileage", action="action",
                       next_state="next_mileage", action_labels=["keep", "replace"])
    np.testing.assert_array_equal(back.states, tr.states)
    np.testing.assert_array_equal(back.actions, tr.actions)
    np.testing.assert_array_equal(back.next_states, tr.next_states)


def test_panel_is_reproducible_and_initial_states(model):
    a = simulate_buses(model, n_buses=5, n_periods=10, random_state=3).transitions
    b = simulate_buses(model, n_buses=5, n_periods=10, random_state=3).transitions
    np.testing.assert_array_equal(a.states, b.states)
    np.testing.assert_array_equal(a.actions, b.actions)
    z = simulate_buses(model, n_buses=7, n_periods=3, initial="zero", random_state=0).transitions
    assert np.all(z.states[z.timesteps == 0] == 0)
    with pytest.raises(ValueError, match="initial"):
        simulate_buses(model, initial="uniform")
    with pytest.raises(ValueError, match="n_buses"):
        simulate_buses(model, n_buses=0)


def test_simulated_choices_follow_the_policy(model):
    # long-run replacement frequency = stationary P(replace) (~1.0%); 200 x 120 rows
    tr = simulate_buses(model, n_buses=200, n_periods=120, random_state=1).transitions
    expected = float(model.state_action_frequencies()[:, 1].sum())
    se = np.sqrt(expected * (1 - expected) / tr.n)
    assert abs(tr.actions.mean() - expected) < 4 * se + 1e-3


def test_bad_increment_probabilities():
    with pytest.raises(ValueError, match="theta3"):
        bus_engine(theta3=(0.5, 0.6))

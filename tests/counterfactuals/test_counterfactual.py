"""Counterfactuals on the exact tabular path and their identification rules.

Exact cases: the fit gets the TRUE policy (prefit) and the TRUE kernel, so GenPQR's reward is
the true reward in the fitted normalization to rounding. Then the counterfactual policy from
the recovered reward equals the one from the true reward to 1e-8 when the normalization is
true of the real reward, and the normalization gap is zero exactly where the theory says.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.base import BaseEstimator, ClassifierMixin

from genpqr import GenPQR, normalization as N, stage2 as T
from genpqr.stage2._kernels import as_kernel
from genpqr.counterfactuals import (IdentificationWarning, load_counterfactual, shaping_preserved,
                                    stationary_distribution)
from genpqr.counterfactuals._identification import identification_rule
from genpqr.counterfactuals._scenarios import state_occupancy
from genpqr.envs import bus_engine, random_mdp, simulate_buses, simulate_tabular
from genpqr.envs._rust import increment_matrix


class TablePolicy(ClassifierMixin, BaseEstimator):
    """A prefit classifier returning a known policy table at tabular state indices."""

    def __init__(self, table=None):
        self.table = table

    def fit(self, X, y):
        return self

    @property
    def classes_(self):
        return np.arange(np.shape(self.table)[1])

    def predict_proba(self, X):
        return np.asarray(self.table)[np.asarray(X, dtype=np.int64)[:, 0]]


def exact_fit(data, policy, kernel, gamma, norm):
    return GenPQR(norm, gamma=gamma, q_model="exact", policy_model=TablePolicy(policy), policy_prefit=True,
                  clip=None, transition_model=kernel, n_states=policy.shape[0], min_support=1).fit(data)


# ============================================================================ Rust's bus engine
@pytest.fixture(scope="module")
def bus():
    model = bus_engine()
    panel = simulate_buses(model, n_buses=20, n_periods=60, random_state=0)
    return model, panel.transitions


@pytest.fixture(scope="module")
def bus_fit(bus):
    model, data = bus
    return exact_fit(data, model.policy, model.kernel, model.beta, N.anchor_action("replace"))


def test_recovery_is_exact_on_the_bus(bus, bus_fit):
    model, _ = bus
    assert np.max(np.abs(bus_fit.stage2_.recovery.reward - model.normalized_reward())) < 1e-8


def faster_mileage(model):
    return increment_matrix([0.05, 0.3, 0.5, 0.1, 0.05], model.n_states)


@pytest.mark.parametrize("change", ["reward", "transitions", "gamma", "all"])
def test_bus_counterfactual_equals_truth_under_rusts_anchor(bus, bus_fit, change):
    model, _ = bus
    delta = np.zeros((model.n_states, 2))
    delta[:, 1] = -2.0  # replacement costs 2 more
    kw = dict(reward_change={"replace": -2.0} if change in ("reward", "all") else None,
              transitions=faster_mileage(model) if change in ("transitions", "all") else None,
              gamma=0.95 if change in ("gamma", "all") else None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdentificationWarning)
        res = bus_fit.counterfactual(**kw)
    P = model.kernel if kw["transitions"] is None else as_kernel(kw["transitions"], 2)
    gamma = model.beta if kw["gamma"] is None else kw["gamma"]
    truth = T.soft_optimal_policy(model.flow_utility + (delta if kw["reward_change"] else 0.0), P, gamma)
    assert np.max(np.abs(res.counterfactual.policy - truth)) < 1e-8
    assert np.max(np.abs(res.baseline.policy - model.policy)) < 1e-8
    assert res.invariant == (change == "reward")
    if change == "reward":
        assert res.normalization_gap < 1e-9
    else:
        assert res.normalization_gap > 1e-4  # mean-zero is wrong for the bus engine


def test_bus_stationary_rates_match_the_model(bus, bus_fit):
    model, _ = bus
    res = bus_fit.counterfactual(reward_change={"replace": 0.0})
    frame = res.to_frame().set_index(["distribution", "statistic"])
    d = model.stationary_distribution()
    assert abs(frame.loc[("stationary", "rate[replace]"), "baseline"] - d @ model.policy[:, 1]) < 1e-10
    assert abs(frame.loc[("stationary", "mean_state"), "baseline"] - d @ model.mileage) < 1e-8
    assert np.max(np.abs(frame["difference"])) < 1e-10


def test_higher_replacement_cost_lowers_the_replacement_rate(bus_fit):
    res = bus_fit.counterfactual(reward_change={"replace": -3.0}, initial=0, horizon=120)
    frame = res.to_frame().set_index(["distribution", "statistic"])
    for dist in ("stationary", "initial"):
        assert frame.loc[(dist, "rate[replace]"), "difference"] < 0
        assert frame.loc[(dist, "mean_state"), "difference"] > 0


# ============================================================================ random MDPs
@pytest.fixture(scope="module", params=[0, 1, 2])
def mdp_case(request):
    seed = request.param
    mdp = random_mdp(12, 3, n_next=4, gamma=0.9, random_state=seed)
    policy = T.soft_optimal_policy(mdp.reward, mdp.kernel, mdp.gamma)
    data = simulate_tabular(mdp, policy, n_episodes=60, horizon=15, random_state=seed + 10)
    rng = np.random.default_rng(seed + 100)
    new_P = random_mdp(12, 3, n_next=4, random_state=seed + 200).kernel
    delta = rng.normal(size=(12, 3))
    return mdp, policy, data, new_P, delta


@pytest.mark.parametrize("change", ["reward", "transitions", "gamma"])
def test_random_mdp_counterfactuals(mdp_case, change):
    mdp, policy, data, new_P, delta = mdp_case
    kw = dict(reward_change=delta if change == "reward" else None,
              transitions=new_P if change == "transitions" else None,
              gamma=0.6 if change == "gamma" else None)
    P = new_P if change == "transitions" else mdp.kernel
    gamma = 0.6 if change == "gamma" else mdp.gamma
    truth = T.soft_optimal_policy(mdp.reward + kw["reward_change"] if change == "reward" else mdp.reward, P, gamma)
    true_norm = N.anchor_action(0, g=mdp.reward[:, 0])  # true of the real reward
    wrong_norm = N.mean_zero()  # not true of the real (Gaussian) reward
    right = exact_fit(data, policy, mdp.kernel, mdp.gamma, true_norm)
    assert np.max(np.abs(right.stage2_.recovery.reward - mdp.reward)) < 1e-8
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = right.counterfactual(**kw, check_normalization=wrong_norm)
    assert np.max(np.abs(res.counterfactual.policy - truth)) < 1e-8
    assert any(issubclass(w.category, IdentificationWarning) for w in caught) == (change != "reward")
    wrong = right.renormalize(wrong_norm)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdentificationWarning)
        res_wrong = wrong.counterfactual(**kw, check_normalization=N.anchor_action(1))
    err_wrong = np.max(np.abs(res_wrong.counterfactual.policy - truth))
    if change == "reward":
        assert res.invariant and res.normalization_gap < 1e-9 and res_wrong.normalization_gap < 1e-9
        assert err_wrong < 1e-8  # identified under the wrong normalization too
    else:
        assert not res.invariant and res.normalization_gap > 1e-3 and res_wrong.normalization_gap > 1e-3
        assert err_wrong > 1e-3  # the wrong normalization gives a wrong counterfactual


def test_value_change_of_a_reward_counterfactual_is_identified(mdp_case):
    mdp, policy, data, _, delta = mdp_case
    fit = exact_fit(data, policy, mdp.kernel, mdp.gamma, N.mean_zero())
    other = fit.renormalize(N.anchor_action(2))
    a, b = (m.counterfactual(reward_change=delta, initial=3) for m in (fit, other))
    diff = a.to_frame().set_index(["distribution", "statistic"])["difference"]
    diff_b = b.to_frame().set_index(["distribution", "statistic"])["difference"]
    assert abs(diff[("initial", "value")] - diff_b[("initial", "value")]) < 1e-8
    assert abs(a.baseline.initial_value - b.baseline.initial_value) > 1e-3  # levels are not identified


def test_reward_dependent_change_is_flagged(mdp_case):
    mdp, policy, data, _, _ = mdp_case
    fit = exact_fit(data, policy, mdp.kernel, mdp.gamma, N.anchor_action(0, g=mdp.reward[:, 0]))
    with pytest.warns(IdentificationWarning, match="level of the recovered reward"):
        res = fit.counterfactual(reward_change=lambda r: np.column_stack([0 * r[:, 0], 0.5 * r[:, 1], 0 * r[:, 2]]))
    truth = T.soft_optimal_policy(mdp.reward * [1.0, 1.5, 1.0], mdp.kernel, mdp.gamma)
    assert np.max(np.abs(res.counterfactual.policy - truth)) < 1e-8
    assert res.normalization_gap > 1e-3


# ============================================================================ the exact rule
def shaping_world(seed, kind):
    """A random MDP and a transition / discount change of the given kind: "same" (P' = P),
    "action_free" (no action affects the transitions, before or after; any gamma'),
    "termination" (gamma' P' = gamma P: patience traded for a termination hazard) keep every
    shaping term one (identified under every normalization); "transitions" and "gamma" (generic
    changes) do not."""
    rng = np.random.default_rng(seed)
    S, K, gamma = 6, 3, 0.85
    base = random_mdp(S, K, n_next=3, gamma=gamma, random_state=seed)
    P = base.kernel.dense()
    other = random_mdp(S, K, n_next=3, random_state=seed + 1).kernel.dense()
    if kind == "same":
        new_P, new_gamma = P, gamma
    elif kind == "action_free":
        P, new_P = np.repeat(P[:, :1], K, axis=1), np.repeat(other[:, :1], K, axis=1)
        new_gamma = float(rng.uniform(0.1, 0.95))
    elif kind == "termination":
        new_gamma = float(rng.uniform(0.86, 0.99))
        new_P = P * gamma / new_gamma
    elif kind == "transitions":
        new_P, new_gamma = other, gamma
    else:
        new_P, new_gamma = P, float(rng.uniform(0.1, 0.7))
    return T.TabularMDP(as_kernel(P), gamma, base.reward), new_P, new_gamma


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), kind=st.sampled_from(["same", "action_free", "termination", "transitions",
                                                          "gamma"]))
def test_property_normalization_gap_is_zero_exactly_where_the_shaping_condition_holds(seed, kind):
    """The reported gap (re-solved under a random second normalization) is zero to rounding
    exactly when every shaping term of (P, gamma) is one of (P', gamma'), and the flag and the
    warning follow it; the counterfactual under the true normalization is the truth to 1e-8,
    and under a wrong one only where the gap is zero."""
    mdp, new_P, new_gamma = shaping_world(seed, kind)
    identified = kind in ("same", "action_free", "termination")
    policy = T.soft_optimal_policy(mdp.reward, mdp.kernel, mdp.gamma)
    data = simulate_tabular(mdp, policy, n_episodes=10, horizon=6, random_state=seed)
    fit = exact_fit(data, policy, mdp.kernel, mdp.gamma, N.anchor_action(0, g=mdp.reward[:, 0]))
    weights = np.random.default_rng(seed).dirichlet(np.ones(3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit.counterfactual(transitions=new_P, gamma=new_gamma, check_normalization=N.weighted(weights))
    truth = T.soft_optimal_policy(mdp.reward, as_kernel(new_P, 3), new_gamma)
    assert np.max(np.abs(res.counterfactual.policy - truth)) < 1e-8
    assert res.invariant == identified
    assert any(issubclass(w.category, IdentificationWarning) for w in caught) == (not identified)
    assert shaping_preserved(mdp.kernel, mdp.gamma, new_P, new_gamma)[0] == identified
    if identified:
        assert res.normalization_gap < 1e-9 and res.summary_gap < 1e-9
        wrong = fit.renormalize(N.mean_zero()).counterfactual(transitions=new_P, gamma=new_gamma)
        assert np.max(np.abs(wrong.counterfactual.policy - truth)) < 1e-8
    else:
        assert res.normalization_gap > 1e-4


def test_unchanged_transitions_are_not_flagged(bus, bus_fit):
    """Passing the fitted kernel (or the fitted discount) back is no transition change."""
    model, _ = bus
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdentificationWarning)
        res = bus_fit.counterfactual(reward_change={"replace": -1.0}, transitions=model.kernel, gamma=model.beta)
    assert res.invariant and res.changes == ("reward", "transitions", "gamma") and res.normalization_gap < 1e-9
    assert "every shaping term" in res.rule


def test_shaping_preserved_measures_the_discrepancy():
    mdp = random_mdp(12, 3, n_next=4, gamma=0.9, random_state=0)
    ok, gap = shaping_preserved(mdp.kernel, 0.9, mdp.kernel, 0.9)
    assert ok and gap < 1e-12
    ok, gap = shaping_preserved(mdp.kernel, 0.9, mdp.kernel, 0.8)
    assert not ok and gap > 1e-2
    sparse_ok, _ = shaping_preserved(mdp.kernel, 0.9, as_kernel(mdp.kernel.dense() * 0.9 / 0.95), 0.95)
    assert sparse_ok
    with pytest.raises(ValueError, match="new_kernel must have 12 states"):
        shaping_preserved(mdp.kernel, 0.9, np.full((4, 3, 4), 0.25), 0.9)


# ============================================================================ pieces
def test_identification_rule():
    assert identification_rule(("reward",), False)[0]
    assert not identification_rule(("reward",), True)[0]
    assert not identification_rule(("transitions",), False)[0]
    assert not identification_rule(("reward", "gamma"), False)[0]
    assert identification_rule(("reward", "gamma"), False, shaping_preserved=True)[0]
    assert not identification_rule(("gamma",), False, shaping_preserved=False)[0]
    assert not identification_rule(("gamma",), True, shaping_preserved=True)[0]  # level-dependent change


def test_distributions_against_brute_force():
    rng = np.random.default_rng(0)
    M = rng.dirichlet(np.ones(6), size=6)
    d = stationary_distribution(M)
    assert np.max(np.abs(d - np.linalg.matrix_power(M, 500)[0])) < 1e-10
    d0 = np.eye(6)[2]
    occ = state_occupancy(M, d0, 0.8)
    brute = (1 - 0.8) * sum(0.8**t * d0 @ np.linalg.matrix_power(M, t) for t in range(400))
    assert np.max(np.abs(occ - brute)) < 1e-10
    horizon = state_occupancy(M, d0, 0.8, horizon=5)
    assert np.max(np.abs(horizon - np.mean([d0 @ np.linalg.matrix_power(M, t) for t in range(5)], axis=0))) < 1e-12
    assert stationary_distribution(0.9 * M) is None  # terminating chain


def test_bootstrap_intervals_save_and_frames(tmp_path, mdp_case):
    mdp, _, data, _, _ = mdp_case
    fit = GenPQR(N.anchor_action(0), gamma=mdp.gamma, q_model="exact", clip=(0.01, 0.99), min_support=1,
                 random_state=0).fit(data)
    delta = {fit.encoder_.labels[1]: -1.0}
    res = fit.counterfactual(reward_change=delta, n_boot=5, random_state=1)
    again = fit.counterfactual(reward_change=delta, n_boot=5, random_state=1)
    frame = res.to_frame()
    assert res.bootstrap.shape == (5, 2, len(frame))
    np.testing.assert_array_equal(res.bootstrap, again.bootstrap)
    assert {"counterfactual_lo", "counterfactual_hi", "difference_se"} <= set(frame.columns)
    assert np.all(frame["difference_lo"] <= frame["difference_hi"])
    res.save(tmp_path / "cf.joblib")
    back = load_counterfactual(tmp_path / "cf.joblib")
    assert back.to_frame().equals(frame)
    states = res.policy_frame()
    assert len(states) == 12 and "counterfactual_policy[1]" in states.columns


def test_errors(bus_fit, mdp_case):
    with pytest.raises(ValueError, match=r"reward_change must be"):
        bus_fit.counterfactual(reward_change=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="transitions must have 175 states"):
        bus_fit.counterfactual(transitions=np.full((4, 2, 4), 0.25))
    with pytest.raises(ValueError, match="initial must be"):
        bus_fit.counterfactual(reward_change={"replace": -1.0}, initial=500)
    with pytest.raises(ValueError, match="horizon needs an initial"):
        bus_fit.counterfactual(reward_change={"replace": -1.0}, horizon=10)
    with pytest.raises(ValueError, match="gamma"):
        bus_fit.counterfactual(gamma=1.5)
    with pytest.raises(ValueError, match="not in the data|unknown|reward_change action"):
        bus_fit.counterfactual(reward_change={"fly": -1.0})


def test_a_check_normalization_equal_to_the_fitted_one_up_to_a_constant_is_called_out(mdp_case):
    mdp, policy, data, _, _ = mdp_case
    fit = exact_fit(data, policy, mdp.kernel, mdp.gamma, N.anchor_action(0))
    for check in (N.anchor_action(0), N.anchor_action(0, g=1.5)):
        with pytest.warns(IdentificationWarning, match="only by a constant"):
            res = fit.counterfactual(gamma=0.6, check_normalization=check)
        assert not res.invariant and res.normalization_gap < 1e-9  # the check shows nothing
    res = fit.counterfactual(gamma=0.6, check_normalization=N.anchor_action(1), warn=False)
    assert "constant" not in res.check_normalization and res.normalization_gap > 1e-3


def test_check_can_be_skipped(bus_fit):
    res = bus_fit.counterfactual(reward_change={"replace": -1.0}, check_normalization=False)
    assert np.isnan(res.normalization_gap) and res.check_normalization == "not checked"


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), anchor=st.integers(0, 2), scale=st.floats(0.1, 5.0))
def test_property_known_reward_changes_are_normalization_free(seed, anchor, scale):
    """For any MDP, any known delta and any two normalizations, the counterfactual policy is the same."""
    mdp = random_mdp(6, 3, n_next=3, gamma=0.85, random_state=seed)
    policy = T.soft_optimal_policy(mdp.reward, mdp.kernel, mdp.gamma)
    data = simulate_tabular(mdp, policy, n_episodes=10, horizon=6, random_state=seed)
    fit = exact_fit(data, policy, mdp.kernel, mdp.gamma, N.anchor_action(anchor, g=scale))
    delta = scale * np.random.default_rng(seed).normal(size=(6, 3))
    res = fit.counterfactual(reward_change=delta, check_normalization=N.weighted(np.array([0.2, 0.5, 0.3])))
    assert res.invariant and res.normalization_gap < 1e-9 and res.summary_gap < 1e-9
    truth = T.soft_optimal_policy(mdp.reward + delta, mdp.kernel, mdp.gamma)
    assert np.max(np.abs(res.counterfactual.policy - truth)) < 1e-8

"""Stage 2 that shares across actions (:mod:`genpqr.stage2._feature_q`): FQE with one regressor
on ``[s, x_a]`` (``encoding="action_features"``), blocked mu-sums, never-taken actions."""

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

import genpqr
from genpqr import normalization as N, stage2 as T
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.exceptions import ActionTableError
from genpqr.stage2 import FQE
from genpqr.stage2._feature_q import FeatureQ, action_blocks
from genpqr.stage2._qmodels import make_q_model, mu_sum

S, K, GAMMA = 6, 3, 0.9


@pytest.fixture(scope="module")
def problem():
    mdp = random_mdp(S, K, n_next=3, gamma=GAMMA, random_state=5)
    sol = T.soft_optimal_solution(mdp.reward, mdp.kernel, GAMMA)
    data = simulate_tabular(mdp, sol.policy, n_episodes=80, horizon=20, random_state=6)
    kernel, counts = T.estimate_transitions(data.states, data.actions, data.next_states, S, K)
    assert counts.min() > 0  # every cell visited: both encodings below are saturated
    rec = T.recover_reward(sol.log_policy, kernel, GAMMA, N.mean_zero(g=0.2))
    s, s2 = data.states[:, 0].astype(int), data.next_states[:, 0].astype(int)
    base = rec.log_policy - rec.g[:, None]
    return dict(data=data, rec=rec, onehot=np.eye(S)[s], next_onehot=np.eye(S)[s2], reward=base[s, data.actions],
                next_mu=rec.mu[s2], next_reward=np.sum(rec.mu[s2] * base[s2], axis=1), base=base)


def _fit(p, structure, **kwargs):
    d = p["data"]
    fqe = FQE(LinearRegression(fit_intercept=False), n_iterations=150, tol=None, structure=structure, **kwargs)
    return fqe.fit(p["onehot"], d.actions, p["next_onehot"], d.continues, p["reward"], p["next_mu"], GAMMA,
                   next_reward=p["next_reward"], action_features=np.eye(K))


@pytest.mark.parametrize("structure", ["continuation", "direct"])
def test_joint_features_reproduce_per_action_on_a_saturated_tabular_model(problem, structure):
    """One-hot states x one-hot action features (with products) under a linear regressor is
    saturated, as is one linear model per action on one-hot states: both fit the cell means of
    the same targets every iteration, so FQE agrees to rounding (1e-8) and reaches the exact solve."""
    grid = np.eye(S)
    base = problem["base"] if structure == "continuation" else None
    joint = _fit(problem, structure, encoding="action_features", action_interactions=True, block_size=64)
    per = _fit(problem, structure, encoding="per_action")
    q_joint, q_per = joint.predict_q(grid, base=base), per.predict_q(grid, base=base)
    np.testing.assert_allclose(q_joint, q_per, atol=1e-8, rtol=0)
    np.testing.assert_allclose(joint.history_.target_change, per.history_.target_change, atol=1e-8, rtol=0)
    # 150 iterations from 0: the gap to the fixed point is about 0.9^150 max|Q| / (1 - 0.9) ~ 2e-6
    np.testing.assert_allclose(q_joint, problem["rec"].q, atol=1e-5, rtol=0)


def test_action_blocks_cover_each_pair_once():
    for n, cols, b in [(7, np.arange(5), 3), (2, np.array([0, 4, 9]), 100), (10, np.arange(4), 1), (3, [], 4)]:
        seen = np.zeros((n, 10), dtype=int)
        for rows, codes in action_blocks(n, cols, b):
            assert (rows.stop - rows.start) * codes.size <= max(b, 1)
            seen[rows, codes] += 1
        expected = np.zeros((n, 10), dtype=int)
        expected[:, np.asarray(cols, dtype=int)] = 1
        np.testing.assert_array_equal(seen, expected)


def test_blocked_mu_sums_equal_the_dense_sum():
    rng = np.random.default_rng(0)
    n, k, ds, dx = 40, 23, 3, 4
    states, feats = rng.normal(size=(n, ds)), rng.normal(size=(k, dx))
    actions = rng.integers(0, k - 1, size=n)  # the last action never taken
    weights = rng.dirichlet(np.ones(k), size=n)
    weights[:, 5] = 0.0
    model = FeatureQ(LinearRegression(), feats, warm_start=False, interactions=True, block_size=10 ** 9)
    model.fit_q(states, actions, rng.normal(size=n), k)
    dense = np.sum(weights * model.predict_q(states), axis=1)
    assert np.all(np.isfinite(model.predict_q(states)[:, k - 1]))
    for block in (1, 7, n, n * k, 10 ** 9):
        model.block_size = block
        np.testing.assert_allclose(model.mu_sum(states, weights), dense, atol=1e-12, rtol=0)
        support = np.flatnonzero(weights.any(axis=0))
        np.testing.assert_allclose(mu_sum(model, states, weights, support), dense, atol=1e-12, rtol=0)
        np.testing.assert_allclose(model.predict_q_at(states, actions),
                                   model.predict_q(states)[np.arange(n), actions], atol=1e-12, rtol=0)


def _mixture_mdp():
    """Q linear in the action feature ``lam``: P(.|s, a) = lam_a P1(.|s) + (1 - lam_a) P2(.|s) and
    r = r0(s) + lam_a r1(s); the actions' lam are 0, 1 (taken) and 0.5 (never taken). P1 and P2
    are quarters, so four logged rows per taken cell reproduce them exactly."""
    rng = np.random.default_rng(7)
    s_n, lam = 5, np.array([0.0, 1.0, 0.5])
    nxt1, nxt2 = rng.integers(0, s_n, size=(s_n, 4)), rng.integers(0, s_n, size=(s_n, 4))
    P1 = np.stack([np.bincount(r, minlength=s_n) / 4 for r in nxt1])
    P2 = np.stack([np.bincount(r, minlength=s_n) / 4 for r in nxt2])
    P = lam[None, :, None] * P1[:, None, :] + (1 - lam)[None, :, None] * P2[:, None, :]
    reward = rng.normal(size=(s_n, 1)) + lam[None, :] * rng.normal(size=(s_n, 1))
    states = np.repeat(np.arange(s_n), 8)
    actions = np.tile(np.repeat([0, 1], 4), s_n)
    nexts = np.where(actions == 1, nxt1[states, np.tile(np.arange(4), 2 * s_n)],
                     nxt2[states, np.tile(np.arange(4), 2 * s_n)])
    return s_n, lam, P, reward, states, actions, nexts


@pytest.mark.parametrize("norm", [N.mean_zero(g=0.1), N.anchor_action(0)])
def test_never_taken_action_gets_an_accurate_reward(norm):
    s_n, lam, P, reward, states, actions, nexts = _mixture_mdp()
    sol = T.soft_optimal_solution(reward, P, GAMMA)
    rec = T.recover_reward(sol.log_policy, P, GAMMA, norm)  # exact: true policy and kernel
    base = rec.log_policy - rec.g[:, None]
    eye = np.eye(s_n)
    fits = {}
    for enc in ("action_features", "per_action"):
        fqe = FQE(LinearRegression(fit_intercept=False), encoding=enc, n_iterations=400, tol=1e-13,
                  action_interactions=True)
        fqe.fit(eye[states], actions, eye[nexts], np.ones(states.size), base[states, actions], rec.mu[nexts], GAMMA,
                next_reward=np.sum(rec.mu[nexts] * base[nexts], axis=1), action_features=lam[:, None])
        q = fqe.predict_q(eye, base=base)
        fits[enc] = q - np.sum(rec.mu * q, axis=1, keepdims=True) + rec.g[:, None]
    assert np.all(np.isfinite(fits["action_features"]))
    np.testing.assert_allclose(fits["action_features"], rec.reward, atol=1e-9, rtol=0)
    assert np.max(np.abs(fits["per_action"][:, 2] - rec.reward[:, 2])) > 0.1  # no Q for it: f = 0


def test_action_features_encoding_needs_an_action_table():
    mdp = random_mdp(4, 2, gamma=GAMMA, random_state=1)
    sol = T.soft_optimal_solution(mdp.reward, mdp.kernel, GAMMA)
    logged = simulate_tabular(mdp, sol.policy, n_episodes=20, horizon=10, random_state=2)
    data = genpqr.from_arrays(logged.states, logged.actions, logged.next_states, episode_ids=logged.episode_ids,
                              terminated=logged.terminated, truncated=logged.truncated)
    model = genpqr.GenPQR(N.anchor_action(0), gamma=GAMMA, q_model=FQE(LinearRegression(), encoding="action_features"))
    with pytest.raises(ActionTableError, match="action table"):
        model.fit(data)
    with pytest.raises(ActionTableError, match="action_features"):
        make_q_model(LinearRegression(), "action_features", 2)
    with pytest.raises(ValueError, match="block_size"):
        make_q_model(LinearRegression(), "action_features", 2, action_features=np.eye(2), block_size=0)
    with pytest.raises(ValueError, match="action_features"):
        make_q_model(LinearRegression(), "features", 2)


@pytest.mark.parametrize("bad, message", [(np.full((K, 2), np.nan), "action_features must be finite"),
                                          (np.ones((K + 1, 2)), r"action_features must have shape \(n_actions=")])
def test_bad_action_features_are_named(problem, bad, message):
    d = problem["data"]
    fqe = FQE(LinearRegression(fit_intercept=False), n_iterations=2, tol=None, encoding="action_features")
    with pytest.raises(ValueError, match=message):
        fqe.fit(problem["onehot"], d.actions, problem["next_onehot"], d.continues, problem["reward"],
                problem["next_mu"], GAMMA, next_reward=problem["next_reward"], action_features=bad)

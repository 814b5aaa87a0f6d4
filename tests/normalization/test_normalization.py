"""Normalizations, and property tests of the shaping invariance (Lemma "Potential-based
shaping invariance")."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.special import logsumexp

from genpqr import normalization as N, stage2 as T
from genpqr.data._spaces import FiniteActions
from genpqr.envs import random_mdp

from ..conftest import all_normalizations

mdp_params = st.tuples(
    st.integers(2, 12),  # S
    st.integers(2, 5),  # K
    st.floats(0.0, 0.97),  # gamma
    st.integers(0, 2**31 - 1),  # seed
    st.booleans(),  # sparse kernel
)


def make(params):
    S, K, gamma, seed, sparse = params
    rng = np.random.default_rng(seed)
    mdp = random_mdp(S, K, n_next=(min(2, S) if sparse else None), gamma=gamma, random_state=rng, reward_scale=2.0)
    return mdp, rng


@settings(max_examples=60, deadline=None)
@given(mdp_params, st.floats(0.1, 20.0))
def test_shaping_leaves_policy_and_likelihood_unchanged(params, scale):
    """r + c - gamma P c has the same soft-optimal policy; (r~, v~) = (r + c - gamma Pc, v + Pc)
    stays feasible for the soft Bellman equation with the same log-policy."""
    mdp, rng = make(params)
    gamma = mdp.gamma
    c = scale * rng.normal(size=mdp.n_states)
    shaped = mdp.reward + c[:, None] - gamma * mdp.kernel.expect(c)
    sol, sol_shaped = (T.soft_optimal_solution(r, mdp.kernel, gamma) for r in (mdp.reward, shaped))
    assert np.max(np.abs(sol.policy - sol_shaped.policy)) < 1e-8
    v = mdp.kernel.expect(sol.value)  # continuation of the original pair
    v_shaped = v + mdp.kernel.expect(c)
    q_shaped = shaped + gamma * v_shaped
    assert np.max(np.abs(v_shaped - mdp.kernel.expect(logsumexp(q_shaped, axis=1)))) < 1e-7 * max(1, np.abs(v).max())
    log_pi = q_shaped - logsumexp(q_shaped, axis=1, keepdims=True)
    assert np.max(np.abs(log_pi - sol.log_policy)) < 1e-8


@settings(max_examples=40, deadline=None)
@given(mdp_params, st.floats(0.1, 20.0))
def test_normalized_reward_is_a_class_invariant(params, scale):
    """Every reward in a shaping class has the same normalized representative, and GenPQR
    recovers it from the log-policy alone."""
    mdp, rng = make(params)
    gamma = mdp.gamma
    c = scale * rng.normal(size=mdp.n_states)
    shaped = mdp.reward + c[:, None] - gamma * mdp.kernel.expect(c)
    u = T.soft_optimal_solution(mdp.reward, mdp.kernel, gamma).log_policy
    for name, norm in all_normalizations(mdp.n_states, mdp.n_actions, rng).items():
        a = T.normalized_reward(mdp.reward, mdp.kernel, gamma, norm)
        b = T.normalized_reward(shaped, mdp.kernel, gamma, norm)
        rec = T.recover_reward(u, mdp.kernel, gamma, norm).reward
        tol = 1e-8 * max(1.0, np.abs(a).max())
        assert np.max(np.abs(a - b)) < tol, name
        assert np.max(np.abs(a - rec)) < tol, name


@settings(max_examples=40, deadline=None)
@given(mdp_params)
def test_log_policy_is_the_trivial_relaxed_optimum(params):
    """Lemma "Trivial optimum": (u, 0) satisfies the soft Bellman equation."""
    mdp, _ = make(params)
    u = T.soft_optimal_solution(mdp.reward, mdp.kernel, mdp.gamma).log_policy
    assert np.max(np.abs(mdp.kernel.expect(logsumexp(u, axis=1)))) < 1e-10


def test_constructors_and_weights():
    states = np.arange(4, dtype=float)[:, None]
    assert np.array_equal(N.anchor_action(2).weights(states, 3), np.tile([0, 0, 1.0], (4, 1)))
    assert np.allclose(N.mean_zero().weights(states, 4), 0.25)
    mu = N.state_anchor(np.array([0, 1, 2, 0])).weights(states, 3)
    assert np.array_equal(mu.argmax(axis=1), [0, 1, 2, 0])
    proba = np.full((4, 3), 1 / 3)
    assert np.array_equal(N.behavior(g=0.0).weights(states, 3, proba), proba)
    with pytest.raises(ValueError, match="needs the policy"):
        N.behavior(g=0.0).weights(states, 3)
    assert np.allclose(N.anchor_action(0, g=np.arange(4.0)).g(states), np.arange(4.0))
    assert np.allclose(N.anchor_action(0, g=lambda s: 2 * s[:, 0]).g(states), 2 * np.arange(4.0))
    assert "anchor action" in N.anchor_action(0).describe()


def test_labels_bind_to_codes():
    enc = FiniteActions(np.array(["keep", "replace"]))
    bound = N.anchor_action("replace").bind(enc.encode)
    assert bound.mu.action == 1
    sa = N.state_anchor(np.array(["keep", "replace", "keep"])).bind(enc.encode)
    assert np.array_equal(sa.weights(np.arange(3.0)[:, None], 2).argmax(1), [0, 1, 0])
    fn = N.state_anchor(lambda s: np.where(s[:, 0] > 0, "replace", "keep")).bind(enc.encode)
    assert np.array_equal(fn.weights(np.array([[-1.0], [1.0]]), 2).argmax(1), [0, 1])
    with pytest.raises(ValueError, match="never saw"):
        N.anchor_action("fly").bind(enc.encode)


def test_bad_normalizations():
    with pytest.raises(ValueError, match="mu must be a distribution"):
        N.weighted([0.2, 0.2])
    with pytest.raises(ValueError, match="must be given"):
        N.weighted(None)
    with pytest.raises(ValueError, match="g must be a scalar"):
        N.mean_zero(g=np.ones((2, 2)))
    with pytest.raises(ValueError, match="g must be finite"):
        N.mean_zero(g=np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match="action columns"):
        N.weighted([0.5, 0.5]).weights(np.zeros((3, 1)), 3)
    with pytest.raises(ValueError, match=r"g callable must return shape"):
        N.mean_zero(g=lambda s: np.zeros(2)).g(np.zeros((3, 1)))
    with pytest.raises(ValueError, match="indices in"):
        N.mean_zero(g=np.zeros(3)).g(np.array([[5.0]]))

"""Stage 1 at given (state, action) pairs in blocks of bounded memory (many actions)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from genpqr.stage1 import ConditionalLogit
from genpqr.stage1._bilinear import bilinear_log_partition, bilinear_log_proba_at, block_rows
from genpqr.stage1._policy import fit_policy, prefit_policy
from genpqr.stage1._blocked import log_policy_at
from genpqr import ActionTable, from_arrays


def _case(n=60, K=37, e=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, e)) * 2, rng.normal(size=(K, e)) * 2


def _dense_log_softmax(F, H):
    z = F @ H.T
    top = z.max(axis=1, keepdims=True)
    return z - top - np.log(np.exp(z - top).sum(axis=1, keepdims=True))


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.integers(2, 50), st.integers(8, 4000), st.integers(0, 10 ** 6))
def test_blocked_log_partition_equals_dense(n, K, max_bytes, seed):
    F, H = _case(n, K, seed=seed)
    dense = _dense_log_softmax(F, H)
    assert np.allclose(bilinear_log_partition(F, H, max_bytes), (F @ H.T - dense)[:, 0], atol=1e-10, rtol=0)
    codes = np.random.default_rng(seed).integers(0, K, size=(n, 3))
    got = bilinear_log_proba_at(F, H, codes, max_bytes)
    assert np.allclose(got, np.take_along_axis(dense, codes, axis=1), atol=1e-10, rtol=0)


def test_block_rows_respects_the_limit_and_refuses_nonsense():
    assert block_rows(1000, 8 * 1000 * 7) == 7
    assert block_rows(10 ** 6, 64) == 1
    with pytest.raises(ValueError, match="max_bytes"):
        block_rows(10, 4)


def _policy_data(n=400, K=25, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(K, 2))
    s = rng.normal(size=(n, 2))
    z = (np.hstack([np.ones((n, 1)), s]) @ np.array([[1.0, 0.5], [0.5, -1.0], [0.0, 0.7]])) @ x.T
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    a = (p.cumsum(1) > rng.random(n)[:, None]).argmax(1)
    data = from_arrays(s, a, np.roll(s, -1, axis=0), action_features=ActionTable(np.arange(K), x))
    return data, x


@pytest.mark.parametrize("clip", [None, (0.02, 0.9)])
def test_log_policy_at_equals_the_dense_u_with_n_x_K_over_the_limit(clip):
    """n x K x 8 bytes (400 x 25 x 8 = 80 kB) far above the 2 kB limit passed in: the same u as dense."""
    data, x = _policy_data()
    model = ConditionalLogit(x, state_basis="linear", C=np.inf).fit(data.states, data.actions)
    policy = prefit_policy(model, data, clip=clip)
    codes = np.column_stack([data.actions, np.zeros(data.n, dtype=int)])
    dense, dense_clipped = policy.log_policy(data.states, return_clipped=True)
    u, hit = log_policy_at(policy, data.states, codes, max_bytes=2048, return_clipped=True)
    assert 8 * data.n * data.n_actions > 2048 * 30
    assert np.allclose(u, np.take_along_axis(dense, codes, axis=1), atol=1e-10, rtol=0)
    assert np.array_equal(hit, np.take_along_axis(dense_clipped, codes, axis=1))
    u1 = log_policy_at(policy, data.states, data.actions, max_bytes=2048)
    assert np.allclose(u1, dense[np.arange(data.n), data.actions], atol=1e-10, rtol=0)


def test_conditional_logit_predict_log_proba_at_matches_predict_log_proba():
    data, x = _policy_data()
    model = ConditionalLogit(x, state_basis="linear").fit(data.states, data.actions)
    codes = np.random.default_rng(1).integers(0, len(x), size=(data.n, 4))
    full = model.predict_log_proba(data.states)
    assert np.allclose(model.predict_log_proba_at(data.states, codes, max_bytes=512),
                       np.take_along_axis(full, codes, axis=1), atol=1e-10, rtol=0)


def test_log_policy_at_refuses_cross_fitted_policies_and_bad_codes():
    data, x = _policy_data()
    policy = fit_policy(ConditionalLogit(x), data, clip=None, cross_fit=2, random_state=0)
    with pytest.raises(ValueError, match="no cross-fitting"):
        log_policy_at(policy, data.states, data.actions)
    single = fit_policy(ConditionalLogit(x), data, clip=None)
    with pytest.raises(ValueError, match="codes must have shape"):
        log_policy_at(single, data.states, data.actions[:3])

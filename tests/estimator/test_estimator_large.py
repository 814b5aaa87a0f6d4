"""The finite path without (n, K) arrays (many actions, ``encoding="action_features"``): the same
reward as the dense path where both run, sampled mu-sums with their error, named refusals."""

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

import genpqr.estimator._estimator_large as large
from genpqr import ActionTable, GenPQR, from_arrays
from genpqr import normalization as N
from genpqr.estimator._estimator_large import LargeStage2
from genpqr.stage1 import ConditionalLogit
from genpqr.stage2 import FQE

K = 30


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.normal(size=(K, 2)), -np.log1p(np.arange(K))])
    n = 3000
    s = rng.normal(size=(n + 1, 2))
    z = np.hstack([np.ones((n + 1, 1)), s]) @ np.array([[1.0, 0.3, 1.0], [0.5, 0.0, 0.0], [0.0, 0.4, 0.0]]) @ x.T
    p = np.exp(z - z.max(1, keepdims=True))
    a = (p.cumsum(1) > rng.random(n + 1)[:, None] * p.sum(1, keepdims=True)).argmax(1)[:n]
    data = from_arrays(s[:n], a, s[1:], episode_ids=np.repeat(np.arange(n // 10), 10),
                       action_features=ActionTable(np.arange(K), x))
    policy = ConditionalLogit(x, state_basis="linear", C=np.inf).fit(data.states, data.actions)
    return data, policy


def _fit(setup, norm, q_model=None):
    data, policy = setup
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GenPQR(normalization=norm, gamma=0.9, policy_model=policy, policy_prefit=True, clip=None, random_state=0,
                      progress=False,
                      q_model=FQE(q_model or LinearRegression(), encoding="action_features", n_iterations=6, tol=None,
                                  structure="continuation")).fit(data)


def _both(setup, norm, monkeypatch):
    dense = _fit(setup, norm)
    monkeypatch.setattr(large, "DENSE_LIMIT_BYTES", 4096)  # n x K x 8 = 720 kB: far over
    return dense, _fit(setup, norm)


@pytest.mark.parametrize("norm", [N.anchor_action(0, g=0.3), N.state_anchor(lambda s: (s[:, 0] > 0).astype(int))])
def test_anchored_fit_without_dense_arrays_equals_the_dense_fit(setup, norm, monkeypatch):
    dense, blocked = _both(setup, norm, monkeypatch)
    assert not isinstance(dense.stage2_, LargeStage2) and isinstance(blocked.stage2_, LargeStage2)
    data = setup[0]
    S, A = data.states[:200], data.actions[:200]
    assert np.allclose(blocked.reward(S, A), dense.reward(S, A), atol=1e-10, rtol=0)
    d1, d2 = dense.diagnostics_, blocked.diagnostics_
    for name in ("policy_log_loss", "max_mu_over_pi", "coverage_share", "fraction_clipped"):
        assert getattr(d2, name) == pytest.approx(getattr(d1, name), abs=1e-10)
    assert d2.support_count == d1.support_count and np.isnan(d2.mu_sum_standard_error)
    assert np.allclose(d2.bellman_residuals, d1.bellman_residuals, atol=1e-10)


@pytest.mark.parametrize("norm", [N.mean_zero(), N.behavior(g=0.0)])
def test_sampled_normalizations_are_close_to_the_dense_fit_and_state_their_error(setup, norm, monkeypatch):
    dense, blocked = _both(setup, norm, monkeypatch)
    monkeypatch.setattr(large, "MU_SAMPLES", 400)
    many = _fit(setup, norm)
    data = setup[0]
    S, A = data.states[:200], data.actions[:200]
    se = blocked.diagnostics_.mu_sum_standard_error
    assert np.isfinite(se) and se > 0
    assert 0 < many.diagnostics_.mu_sum_standard_error < se  # error shrinks with the draws
    err = [np.sqrt(np.mean((m.reward(S, A) - dense.reward(S, A)) ** 2)) for m in (blocked, many)]
    assert err[1] < err[0] and err[1] < 0.1 * np.std(dense.reward(S, A))


def test_anchor_never_taken_is_refused_by_name(setup, monkeypatch):
    data, policy = setup
    keep = data.actions != K - 1  # the last item never taken
    x = np.asarray(data.action_table.features)
    sub = from_arrays(data.states[keep], data.actions[keep], data.next_states[keep],
                      action_features=ActionTable(np.arange(K), x))
    monkeypatch.setattr(large, "DENSE_LIMIT_BYTES", 4096)
    with pytest.raises(ValueError, match=r"anchor action\(s\) \[29\] that never occur"):
        _fit((sub, policy), N.anchor_action(K - 1))
    with pytest.raises(ValueError, match="never occur in the data"):
        _fit((sub, policy), N.mean_zero())


def test_small_problems_and_other_normalizations_keep_the_dense_path(setup, monkeypatch):
    assert not isinstance(_fit(setup, N.anchor_action(0)).stage2_, LargeStage2)
    monkeypatch.setattr(large, "DENSE_LIMIT_BYTES", 4096)
    weights = np.full(K, 1.0 / K)
    assert not isinstance(_fit(setup, N.weighted(weights)).stage2_, LargeStage2)

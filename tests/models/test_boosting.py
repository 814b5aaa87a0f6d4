"""Tests of genpqr.models._boosting.BoostedQModel (LightGBM native Q-model)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.base import clone

pytest.importorskip("lightgbm")

from genpqr.models._boosting import BoostedQModel  # noqa: E402
from genpqr.exceptions import NotFittedError  # noqa: E402


def q_target_data(n, seed, d=3, K=4):
    rng = np.random.default_rng(seed)
    S = rng.normal(size=(n, d))
    a = rng.integers(0, K, n)
    y = np.sin(S[:, 0]) + 0.5 * S[:, 1] * (a - 1.5) + 0.3 * a + 0.2 * S[:, 2] ** 2
    return S, a, y, K


def _train_mse(model, S, a, y):
    return np.mean((model.predict_q(S)[np.arange(len(a)), a] - y) ** 2)


def _manual_predict(model, S, K):
    """Q(s, a) by one booster.predict per action on [s, onehot(a)]."""
    cols = []
    for action in range(K):
        onehot = np.zeros((len(S), K))
        onehot[:, action] = 1.0
        cols.append(model.booster_.predict(np.hstack([S, onehot]), num_threads=1))
    return np.column_stack(cols)


@pytest.mark.parametrize("trees_per_iteration", [1, 3])
def test_n_trees_grows_per_call(trees_per_iteration):
    S, a, y, K = q_target_data(800, seed=0)
    model = BoostedQModel(trees_per_iteration=trees_per_iteration, random_state=0)
    for call in range(1, 5):
        model.fit_q(S, a, y + call, K)  # fresh targets every call
        assert model.n_trees_ == call * trees_per_iteration
        assert model.n_iter_ == call


def test_training_mse_falls_with_calls():
    S, a, y, K = q_target_data(1000, seed=1)
    model = BoostedQModel(learning_rate=0.1, random_state=0)
    mse = []
    for _ in range(30):
        model.fit_q(S, a, y, K)
        mse.append(_train_mse(model, S, a, y))
    assert all(later < earlier for earlier, later in zip(mse, mse[1:]))
    assert mse[-1] < 0.2 * y.var()


def test_predict_q_matches_manual_per_action_predict():
    S, a, y, K = q_target_data(600, seed=2)
    S_new = np.random.default_rng(9).normal(size=(50, S.shape[1]))
    model = BoostedQModel(random_state=0)
    for call in range(6):
        model.fit_q(S, a, y * (1 + 0.1 * call), K)
        Q = model.predict_q(S_new)  # from the second call on, served incrementally
        assert Q.shape == (50, K) and Q.dtype == np.float64
        np.testing.assert_allclose(Q, _manual_predict(model, S_new, K), rtol=0, atol=1e-12)
        np.testing.assert_allclose(model.predict_q(S), _manual_predict(model, S, K), rtol=0, atol=1e-12)
    # a returned array is the caller's: mutating it does not corrupt later predictions
    Q[:] = 0.0
    np.testing.assert_allclose(model.predict_q(S_new), _manual_predict(model, S_new, K), atol=1e-12)


def test_in_place_boosting_equals_rebuilding_from_init_model():
    """Continuing on the same rows (custom L2 gradient) equals lightgbm.train(init_model=...)."""
    S, a, y, K = q_target_data(700, seed=3)
    fast = BoostedQModel(random_state=0)
    slow = BoostedQModel(random_state=0)
    for call in range(5):
        targets = y + 0.5 * call
        fast.fit_q(S, a, targets, K)
        slow = pickle.loads(pickle.dumps(slow))  # drops the training set: forces the rebuild path
        slow.fit_q(S, a, targets, K)
    np.testing.assert_allclose(fast.predict_q(S), slow.predict_q(S), rtol=0, atol=1e-10)


def test_new_rows_continue_from_current_ensemble():
    S, a, y, K = q_target_data(1200, seed=4)
    model = BoostedQModel(random_state=0)
    model.fit_q(S[:800], a[:800], y[:800], K)
    before = model.predict_q(S)
    model.fit_q(S[400:], a[400:], y[400:], K)
    assert model.n_trees_ == 2
    assert _train_mse(model, S, a, y) < np.mean((before[np.arange(1200), a] - y) ** 2)


def test_reproducible_and_clone():
    S, a, y, K = q_target_data(500, seed=5)
    m1 = BoostedQModel(num_leaves=8, random_state=3)
    m2 = clone(m1)
    assert m2.get_params() == m1.get_params()
    for _ in range(4):
        m1.fit_q(S, a, y, K)
        m2.fit_q(S, a, y, K)
    np.testing.assert_array_equal(m1.predict_q(S), m2.predict_q(S))
    assert not hasattr(clone(m1), "booster_")


def test_sklearn_fit_free_checks():
    from sklearn.utils.estimator_checks import (
        check_get_params_invariance,
        check_no_attributes_set_in_init,
        check_parameters_default_constructible,
    )

    est = BoostedQModel()
    check_no_attributes_set_in_init("BoostedQModel", est)
    check_get_params_invariance("BoostedQModel", est)
    check_parameters_default_constructible("BoostedQModel", est)


def test_input_errors():
    S, a, y, K = q_target_data(200, seed=6)
    model = BoostedQModel(random_state=0)
    with pytest.raises(NotFittedError):
        model.predict_q(S)
    with pytest.raises(ValueError, match="actions has 199 rows but states has 200"):
        model.fit_q(S, a[:-1], y, K)
    with pytest.raises(ValueError, match="actions"):
        model.fit_q(S, a - 1, y, K)
    with pytest.raises(ValueError, match="trees_per_iteration"):
        BoostedQModel(trees_per_iteration=0).fit_q(S, a, y, K)
    with pytest.raises(ValueError, match="num_leaves"):
        BoostedQModel(num_leaves=1).fit_q(S, a, y, K)
    S0 = S.copy()
    model.fit_q(S, a, y, K)
    np.testing.assert_array_equal(S, S0)
    with pytest.raises(ValueError, match="n_actions"):
        model.fit_q(S, a, y, K + 2)
    with pytest.raises(ValueError, match="states has 2 features"):
        model.predict_q(S[:, :2])


def test_fqe_like_loop_with_boosted_model():
    """Ten Bellman iterations y = u + gamma * mean_a' Q(s', a') on a small random data set."""
    rng = np.random.default_rng(0)
    n, d, K, gamma = 400, 3, 4, 0.9
    S = rng.normal(size=(n, d))
    a = rng.integers(0, K, n)
    S_next = S + 0.1 * rng.normal(size=(n, d))
    u = -np.abs(S[:, 0]) - 0.2 * a
    model = clone(BoostedQModel(random_state=0))
    Q_next = np.zeros((n, K))
    for _ in range(10):
        model.fit_q(S, a, u + gamma * Q_next.mean(axis=1), K)
        Q_next = model.predict_q(S_next)
    assert model.n_trees_ == 10
    assert Q_next.shape == (n, K) and np.all(np.isfinite(Q_next))
    assert np.all(np.abs(Q_next) < np.abs(u).max() / (1 - gamma))
    assert Q_next.mean() < u.mean()


def test_partial_and_pairwise_predictions_match_the_full_table():
    pytest.importorskip("lightgbm")
    from genpqr.models._boosting import BoostedQModel

    rng = np.random.default_rng(0)
    X, a = rng.normal(size=(300, 3)), rng.integers(0, 4, 300)
    model = BoostedQModel(random_state=0)
    for _ in range(3):
        model.fit_q(X, a, rng.normal(size=300), 4)
        full = model.predict_q(X)
        np.testing.assert_allclose(model.predict_q_at(X, a), full[np.arange(300), a], rtol=0, atol=1e-12)
        part = model.predict_q(X, columns=[2, 0])
        np.testing.assert_allclose(part[:, [0, 2]], full[:, [0, 2]], rtol=0, atol=1e-12)
        assert not part[:, [1, 3]].any()
    with pytest.raises(ValueError, match="columns"):
        model.predict_q(X, columns=[4])
    with pytest.raises(ValueError, match="actions"):
        model.predict_q_at(X, a[:5])

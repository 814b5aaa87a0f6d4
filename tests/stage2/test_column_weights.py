"""mu-sums on a few or sampled columns (:class:`genpqr.stage2.ColumnWeights`): exact on an
anchor, unbiased when sampled, FQE with them equal to FQE with the dense weights."""

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

from genpqr.stage2 import FQE
from genpqr.stage2._column_weights import ColumnWeights, column_mu_sum, sample_columns
from genpqr.stage2._feature_q import FeatureQ

K = 40


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(K, 3))
    s, a = rng.normal(size=(300, 2)), rng.integers(0, K, 300)
    y = np.sin(s[:, 0]) + x[a] @ np.array([1.0, -0.5, 0.3]) * (1 + s[:, 1]) + rng.normal(size=300) * 0.1
    return FeatureQ(LinearRegression(), x, warm_start=False, interactions=True, block_size=7).fit_q(s, a, y, K), s


def test_column_weights_validate_and_stand_for_dense_weights():
    w = ColumnWeights([3, 3, 1], np.array([[0.2, 0.3, 0.5]]), 5)
    assert w.shape == (1, 5)
    assert np.allclose(w.dense(), [[0, 0.5, 0, 0.5, 0]])
    assert w[np.array([0, 0])].values.shape == (2, 3)
    with pytest.raises(ValueError, match="one column per code"):
        ColumnWeights([0, 1], np.ones((2, 3)), 4)
    with pytest.raises(ValueError, match="action codes"):
        ColumnWeights([0, 9], np.ones((2, 2)), 4)


def test_exact_column_sum_equals_the_dense_blocked_sum(model):
    q, s = model
    rng = np.random.default_rng(1)
    columns = np.array([0, 5, 17])
    w = ColumnWeights(columns, rng.dirichlet(np.ones(3), size=len(s)), K)
    total, se = column_mu_sum(q, s, w, block_size=11, return_se=True)
    assert np.allclose(total, q.mu_sum(s, w.dense()), atol=1e-10, rtol=0)
    assert np.allclose(total, np.sum(w.dense() * q.predict_q(s), axis=1), atol=1e-10, rtol=0)
    assert np.all(se == 0)


def test_sampled_mu_sum_is_unbiased_with_its_stated_error(model):
    """Mean over 400 seeds within 3 standard errors of the exact sum (every row), and the
    reported standard error close to the spread over seeds (within 35%)."""
    q, s = model
    s = s[:20]
    rng = np.random.default_rng(2)
    mu = rng.dirichlet(np.ones(K) * 0.5, size=len(s))
    exact = np.sum(mu * q.predict_q(s), axis=1)
    proposal = np.linspace(1.0, 3.0, K)
    draws, errors = [], []
    for seed in range(400):
        w = sample_columns(lambda c: mu[:, c], len(s), K, 16, proposal=proposal, random_state=seed)
        total, se = column_mu_sum(q, s, w, return_se=True)
        draws.append(total)
        errors.append(se)
    draws = np.array(draws)
    sem = draws.std(axis=0, ddof=1) / np.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - exact) < 3 * sem)
    ratio = np.sqrt(np.mean(np.array(errors) ** 2, axis=0)) / draws.std(axis=0, ddof=1)
    assert np.all(np.abs(ratio - 1) < 0.35)


def test_sample_columns_checks_its_arguments():
    with pytest.raises(ValueError, match="n_samples"):
        sample_columns(lambda c: np.ones((2, c.size)), 2, 4, 0)
    with pytest.raises(ValueError, match="proposal"):
        sample_columns(lambda c: np.ones((2, c.size)), 2, 4, 3, proposal=np.ones(3))
    with pytest.raises(ValueError, match="weight_fn returned"):
        sample_columns(lambda c: np.ones((3, c.size)), 2, 4, 3)


@pytest.mark.parametrize("structure", ["continuation", "direct"])
def test_fqe_with_anchor_columns_equals_fqe_with_dense_anchor_weights(model, structure):
    _, s = model
    rng = np.random.default_rng(3)
    x = rng.normal(size=(K, 3))
    a, s2 = rng.integers(0, K, len(s)), np.roll(s, -1, axis=0)
    reward, cont = rng.normal(size=len(s)), (rng.random(len(s)) > 0.1).astype(float)
    cw = ColumnWeights([4], np.ones((len(s), 1)), K)
    nr = rng.normal(size=len(s))
    fits = [FQE(LinearRegression(), encoding="action_features", n_iterations=5, tol=None, structure=structure)
            .fit(s, a, s2, cont, reward, w, 0.9, next_reward=nr, action_features=x) for w in (cw, cw.dense())]
    assert fits[0].n_actions_ == K
    qs = [f.model_.predict_q_at(s, a) for f in fits]
    assert np.allclose(qs[0], qs[1], atol=1e-10, rtol=0)

"""The E-step and mixing step of latent agent types against direct computations."""

import numpy as np
import pytest
from scipy.special import logsumexp

from genpqr.stage1._latent_types import (episode_codes, mixing_log_prior, separation_share, type_posteriors,
                                         type_row_weights)


def _panel(seed=0, n_episodes=30, length=5, n_types=3):
    rng = np.random.default_rng(seed)
    episodes = np.repeat(rng.permutation(n_episodes) * 7 + 100, length)
    ell = rng.normal(-1.0, 0.5, size=(episodes.size, n_types))
    return episodes, ell


def test_posteriors_match_bayes_rule_episode_by_episode():
    episodes, ell = _panel()
    labels, codes = episode_codes(episodes)
    log_prior = np.log([0.2, 0.3, 0.5])
    post = type_posteriors(ell, codes, log_prior)
    for e, label in enumerate(labels):
        joint = log_prior + ell[episodes == label].sum(axis=0)
        np.testing.assert_allclose(post.weights[e], np.exp(joint - logsumexp(joint)), rtol=0, atol=1e-12)
        assert post.episode_loglik[e] == pytest.approx(logsumexp(joint), abs=1e-12)
    assert post.loglik == pytest.approx(post.episode_loglik.sum())


def test_one_type_gives_weight_one_and_the_plain_loglik():
    episodes, ell = _panel(n_types=1)
    _, codes = episode_codes(episodes)
    post = type_posteriors(ell, codes, np.zeros(1))
    np.testing.assert_array_equal(post.weights, 1.0)
    assert post.loglik == pytest.approx(ell.sum(), abs=1e-10)
    assert separation_share(post.weights, np.zeros(1)) == 0.0


def test_mixing_without_covariates_is_the_mean_posterior():
    q = np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    log_prior, coef = mixing_log_prior(q)
    assert coef is None
    np.testing.assert_allclose(np.exp(log_prior), q.mean(axis=0), atol=1e-15)


def test_mixing_with_covariates_recovers_a_known_logit():
    rng = np.random.default_rng(1)
    z = rng.normal(size=4000)
    true = np.column_stack([np.zeros_like(z), 0.5 + 1.5 * z])
    prob = np.exp(true - logsumexp(true, axis=1, keepdims=True))
    log_prior, coef = mixing_log_prior(prob, z)   # posteriors equal to the truth: an exact fit
    np.testing.assert_allclose(coef[1], [0.5, 1.5], atol=1e-5)
    np.testing.assert_allclose(np.exp(log_prior), prob, atol=1e-6)


def test_row_weights_and_errors():
    q = np.array([[0.25, 0.75], [1.0, 0.0]])
    np.testing.assert_array_equal(type_row_weights(q, np.array([1, 0, 1])), q[[1, 0, 1]])
    with pytest.raises(ValueError, match="zero likelihood under every type"):
        type_posteriors(np.array([[-np.inf, -np.inf]]), np.array([0]), np.log([0.5, 0.5]))
    with pytest.raises(ValueError, match="episode_code has 1 rows"):
        type_posteriors(np.zeros((2, 2)), np.array([0]), np.zeros(2))


@pytest.mark.parametrize("prior", [[0.5, 0.5], [0.9, 0.1], [0.5, 0.3, 0.2]])
@pytest.mark.parametrize("t", [0.1, 0.2, 0.3, 0.6, 1.0])
def test_one_separation_rule_is_the_share_of_the_way_to_certain_types(prior, t):
    """Posteriors t of the way from the prior to each episode's true type (types drawn in the
    prior's proportions): the normalized share is t whatever M and the prior, and the rule warns
    exactly when t < SEPARATION_WARN."""
    from genpqr.stage1._latent_types import SEPARATION_WARN, latent_type_warnings

    p = np.array(prior)
    n = 100
    types = np.repeat(np.arange(p.size), np.round(p * n).astype(int))
    q = (1 - t) * p + t * np.eye(p.size)[types]
    ceiling = 1.0 - np.sum(p ** 2)
    assert separation_share(q, np.log(p)) / ceiling == pytest.approx(t, abs=1e-12)
    messages = latent_type_warnings(q, np.log(p), "the per-type outputs")
    assert any("barely separate" in m and "the per-type outputs are in doubt" in m for m in messages) == \
        (t < SEPARATION_WARN)
    assert not any("empty" in m for m in messages)


def test_empty_type_rule_counts_posterior_episodes():
    from genpqr.stage1._latent_types import latent_type_warnings

    q = np.eye(2)[np.zeros(20, dtype=int)]
    q[0] = [0.2, 0.8]  # type 1: 0.8 of an episode
    messages = latent_type_warnings(q, np.log(q.mean(axis=0)), "the per-type outputs")
    assert any(m.startswith("latent type 1 is empty: its posterior weights sum to 0.8 episode(s)") for m in messages)
    q[1] = [0.6, 0.4]  # 1.2 episodes: not empty
    assert not any("empty" in m for m in latent_type_warnings(q, np.log(q.mean(axis=0)), "x"))

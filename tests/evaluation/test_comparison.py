"""Reward comparison: shared-normalization metrics and EPIC."""

import numpy as np
import pytest

from genpqr import normalization as N
from genpqr.evaluation import compare_normalized, epic_distance, epic_distance_tabular
from genpqr.envs import random_mdp


@pytest.fixture
def mdp():
    return random_mdp(12, 3, n_next=3, gamma=0.9, random_state=4)


def test_shared_normalization_removes_shaping_exactly(mdp):
    c = np.random.default_rng(0).normal(size=12) * 5
    shaped = mdp.reward + c[:, None] - 0.9 * mdp.kernel.expect(c)
    out = compare_normalized(mdp.reward, shaped, mdp.kernel, 0.9, N.mean_zero())
    assert out["mse"] < 1e-20 and out["corr"] > 1 - 1e-12
    raw = np.mean((mdp.reward - shaped) ** 2)
    assert raw > 1.0
    other = compare_normalized(mdp.reward, mdp.reward[::-1], mdp.kernel, 0.9, N.anchor_action(0))
    assert other["mse"] > 0.1
    with pytest.raises(ValueError, match="same shape"):
        compare_normalized(mdp.reward, mdp.reward[:3], mdp.kernel, 0.9, N.mean_zero())


def test_epic_tabular_invariant_to_shaping_and_scale(mdp):
    """EPIC is 0 for R and 3 (R + phi(s) - gamma phi(s')), as transition rewards (S, K, S)."""
    rng = np.random.default_rng(1)
    r = rng.normal(size=(12, 3))
    phi = rng.normal(size=12)
    shaped = 3.0 * (r[:, :, None] + phi[:, None, None] - 0.9 * phi[None, None, :])
    assert epic_distance_tabular(r, shaped, mdp.kernel, 0.9) < 1e-7
    assert epic_distance_tabular(r, -r, mdp.kernel, 0.9) > 0.99
    unrelated = rng.normal(size=(12, 3))
    assert 0.3 < epic_distance_tabular(r, unrelated, mdp.kernel, 0.9) < 0.9
    with pytest.raises(ValueError, match="same shape"):
        epic_distance_tabular(r, r[:3], mdp.kernel, 0.9)


def test_epic_sample_matches_tabular_on_many_samples(mdp):
    rng = np.random.default_rng(2)
    S, K = 12, 3
    other = rng.normal(size=(S, K))
    exact = epic_distance_tabular(mdp.reward, other, mdp.kernel, 0.9)
    n = 200_000
    s = rng.integers(0, S, size=n)
    a = rng.integers(0, K, size=n)
    P = mdp.kernel.dense()
    cdf = P[s, a].cumsum(axis=1)
    s2 = (cdf < rng.random((n, 1))).sum(axis=1)
    table = lambda R: (lambda x: R[np.asarray(x)[:, 0].astype(int)])  # noqa: E731
    grid = np.arange(S, dtype=float)[:, None]
    est = epic_distance(table(mdp.reward), table(other), s[:, None].astype(float), a, s2[:, None].astype(float), 0.9,
                        state_samples=grid)
    assert abs(est - exact) < 0.01

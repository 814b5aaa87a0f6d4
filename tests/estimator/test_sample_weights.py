"""Row weights (``Transitions.sample_weight``) through every learner slot of the finite path:
weights of one are the unweighted fit, integer weights are repeated rows, a learner without
``sample_weight`` is named."""

import dataclasses

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

from genpqr import GenPQR, normalization as N, stage2 as T
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.stage1 import FrequencyClassifier
from genpqr.stage1._policy import fit_policy
from genpqr.stage2 import FQE, LSTDQ, TabularQModel

pytestmark = pytest.mark.filterwarnings("ignore::genpqr.exceptions.CoverageWarning")

S, K, GAMMA = 8, 3, 0.9
GRID = np.arange(S, dtype=float)[:, None]


@pytest.fixture(scope="module")
def logged():
    mdp = random_mdp(S, K, n_next=3, gamma=GAMMA, random_state=3)
    sol = T.soft_optimal_solution(mdp.reward, mdp.kernel, GAMMA)
    return simulate_tabular(mdp, sol.policy, n_episodes=120, horizon=12, random_state=4, outcome_noise=0.1)


def onehot_regressor():
    return make_pipeline(OneHotEncoder(categories=[np.arange(S, dtype=float)], sparse_output=False),
                         LinearRegression(fit_intercept=False))


def weighted(data, w):
    return dataclasses.replace(data, sample_weight=np.asarray(w, dtype=float))


def repeated(data, counts):
    return data.subset(np.repeat(np.arange(data.n), counts))


MODELS = {
    "exact": lambda: GenPQR(N.anchor_action(0), gamma=GAMMA, q_model="exact", policy_model=FrequencyClassifier(S),
                            n_states=S),
    "exact-behavior": lambda: GenPQR(N.behavior(), gamma=GAMMA, q_model="exact", policy_model=FrequencyClassifier(S),
                                     n_states=S),
    "fqe-tabular": lambda: GenPQR(N.mean_zero(), gamma=GAMMA,
                                  q_model=FQE(TabularQModel(S), encoding="native", n_iterations=400, tol=1e-11),
                                  policy_model=FrequencyClassifier(S)),
    "fqe-regressor": lambda: GenPQR(N.anchor_action(1), gamma=GAMMA,
                                    q_model=FQE(onehot_regressor(), encoding="per_action", n_iterations=40, tol=None),
                                    policy_model=FrequencyClassifier(S)),
    "lstd": lambda: GenPQR(N.mean_zero(), gamma=GAMMA, q_model=LSTDQ(alpha=0.0), policy_model=FrequencyClassifier(S)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_unit_weights_are_the_unweighted_fit(logged, name):
    plain = MODELS[name]().fit(logged)
    ones = MODELS[name]().fit(weighted(logged, np.ones(logged.n)))
    np.testing.assert_allclose(ones.reward(GRID), plain.reward(GRID), atol=1e-10, rtol=0)
    np.testing.assert_allclose(ones.log_policy(GRID), plain.log_policy(GRID), atol=1e-10, rtol=0)


@pytest.mark.parametrize("name", ["exact", "exact-behavior", "fqe-tabular", "fqe-regressor"])
def test_integer_weights_are_repeated_rows(logged, name):
    counts = np.random.default_rng(0).integers(0, 4, size=logged.n)
    counts[:5] = 1  # keep every episode's start
    a = MODELS[name]().fit(weighted(logged, counts))
    b = MODELS[name]().fit(repeated(logged, counts))
    np.testing.assert_allclose(a.reward(GRID), b.reward(GRID), atol=1e-8, rtol=0)
    if name.startswith("exact"):
        np.testing.assert_allclose(a.stage2_.counts, b.stage2_.counts, atol=1e-12)
        np.testing.assert_allclose(a.stage2_.kernel.dense(), b.stage2_.kernel.dense(), atol=1e-12)


def test_weights_change_the_fit(logged):
    w = np.random.default_rng(5).uniform(0.1, 3.0, size=logged.n)
    a = MODELS["exact"]().fit(weighted(logged, w))
    b = MODELS["exact"]().fit(logged)
    assert np.max(np.abs(a.reward(GRID) - b.reward(GRID))) > 1e-3


def test_lstd_integer_weights_are_repeated_rows(logged):
    counts = np.random.default_rng(1).integers(1, 4, size=logged.n)  # every state keeps its rows: same knots
    model = lambda: GenPQR(N.mean_zero(), gamma=GAMMA, q_model=LSTDQ(features="onehot", n_states=S, alpha=0.0),
                           policy_model=FrequencyClassifier(S))
    a = model().fit(weighted(logged, counts))
    b = model().fit(repeated(logged, counts))
    np.testing.assert_allclose(a.reward(GRID), b.reward(GRID), atol=1e-8, rtol=0)


def test_stage1_weights_reach_the_classifier(logged):
    counts = np.random.default_rng(2).integers(0, 3, size=logged.n)
    a = fit_policy(LogisticRegression(C=10.0, max_iter=5000, tol=1e-12), weighted(logged, counts), clip=None)
    b = fit_policy(LogisticRegression(C=10.0, max_iter=5000, tol=1e-12), repeated(logged, counts), clip=None)
    np.testing.assert_allclose(a.proba(GRID), b.proba(GRID), atol=1e-6)
    c = fit_policy(FrequencyClassifier(S), weighted(logged, counts), clip=None, cross_fit=3, random_state=0)
    assert c.cross_fitted


def test_learner_without_weights_is_named(logged):
    w = np.linspace(0.5, 2.0, logged.n)
    with pytest.raises(TypeError, match="policy_model KNeighborsClassifier does not accept sample_weight"):
        GenPQR(N.mean_zero(), gamma=GAMMA, q_model="exact", policy_model=KNeighborsClassifier()).fit(weighted(logged, w))
    with pytest.raises(TypeError, match="q_model KNeighborsRegressor does not accept sample_weight"):
        GenPQR(N.mean_zero(), gamma=GAMMA, q_model=FQE(KNeighborsRegressor(), n_iterations=3),
               policy_model=FrequencyClassifier(S)).fit(weighted(logged, w))
    # equal weights are a rescaling: learners without weights fit as unweighted
    GenPQR(N.mean_zero(), gamma=GAMMA, q_model="exact", policy_model=KNeighborsClassifier()).fit(
        weighted(logged, np.full(logged.n, 2.0)))


def test_offset_model_without_weights_is_named(logged):
    w = np.linspace(0.5, 2.0, logged.n)
    with pytest.raises(TypeError, match="offset_model KNeighborsRegressor does not accept sample_weight"):
        GenPQR(N.behavior(), gamma=GAMMA, q_model=LSTDQ(), policy_model=FrequencyClassifier(S),
               offset_model=KNeighborsRegressor()).fit(weighted(logged, w))

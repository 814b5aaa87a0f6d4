"""GenPQR's defaults on finite actions when the states are not tabular indices
(genpqr.estimator.default_policy_model / default_q_model): the basis logit and the LSTD fixed point
on its basis; FQE's regressor where per-action LSTD does not apply; the exact path unchanged."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from genpqr import GenPQR
from genpqr import normalization as N
from genpqr.envs import make_synthetic_data
from genpqr.estimator._defaults import MAX_DEFAULT_LSTD_FEATURES, default_q_model
from genpqr.stage1 import BasisLogit, StateBasis
from genpqr.stage2 import FQE, LSTDQ


@pytest.fixture(scope="module")
def exp2_seed():
    return make_synthetic_data(0, 1000, n_test=300)


def test_defaults_are_the_basis_logit_and_lstd_on_its_basis(exp2_seed):
    data = exp2_seed
    default = GenPQR(N.anchor_action(0), gamma=0.9, random_state=0).fit(data.train)
    assert default.first_stage_.name == "basis-logit" and "BasisLogit" in default.first_stage_.reason
    assert isinstance(default.policy_.models[0], BasisLogit)
    assert isinstance(default.q_model_, LSTDQ) and isinstance(default.q_model_.features, StateBasis)
    assert default.diagnostics_.solver == "lstd" and default.q_model is None  # the parameter is untouched
    explicit = GenPQR(N.anchor_action(0), gamma=0.9, random_state=0, policy_model=BasisLogit(),
                      q_model=LSTDQ(features=StateBasis(), alpha=1e-5, random_state=0)).fit(data.train)
    states = data.test.states
    np.testing.assert_array_equal(default.reward(states), explicit.reward(states))
    assert "stage 2: lstd" in str(default.summary()) and "basis-logit" in str(default.summary())


def test_default_recovers_the_experiment2_reward(exp2_seed):
    """Statistical check on one seed of the paper's Experiment 2 (1000 trajectories): the default
    fit's reward MSE at the test pairs is 0.18 and its correlation 0.83 (docs/benchmarks.md: 20
    seeds in 'The default path of Experiment 2'); the bounds leave a wide margin for BLAS and
    platform differences, and the MSE bound fails for the log-policy pseudo-reward (no stage 2)."""
    data = exp2_seed
    model = GenPQR(N.anchor_action(0), gamma=0.9, random_state=0).fit(data.train)
    row = data.evaluate(model.reward(data.test.states, data.test.actions), model.log_policy(data.test.states))
    assert row["reward_mse"] < 0.3 and row["reward_corr"] > 0.75, row
    pseudo = np.take_along_axis(model.log_policy(data.test.states), data.test.actions[:, None], 1)[:, 0] \
        - model.log_policy(data.test.states)[:, 0]
    assert data.evaluate(pseudo)["reward_mse"] > 0.3


def test_fqe_regressor_where_per_action_lstd_does_not_apply():
    many = SimpleNamespace(n_actions=MAX_DEFAULT_LSTD_FEATURES, state_dim=5)
    assert default_q_model(many) is None  # too many features over all actions: FQE
    few = SimpleNamespace(n_actions=5, state_dim=5)
    assert isinstance(default_q_model(few, random_state=3), LSTDQ)
    assert default_q_model(few, random_state=3).random_state == 3
    for encoding in ("joint", "action_features", "native"):
        assert default_q_model(few, encoding=encoding) is None
    data = make_synthetic_data(1, 60, n_test=20).train
    joint = GenPQR(N.anchor_action(0), gamma=0.9, q_model=FQE(encoding="joint", n_iterations=3),
                   random_state=0).fit(data)  # a given FQE: the user's stage 2, no default picked
    assert joint.q_model_ is joint.q_model and joint.diagnostics_.solver == "fqe"


def test_exact_path_and_given_models_are_unchanged():
    rng = np.random.default_rng(0)
    from genpqr.data import from_arrays

    s = rng.integers(0, 4, 400).astype(float)
    data = from_arrays(s, rng.integers(0, 2, 400), rng.integers(0, 4, 400).astype(float),
                       episode_ids=np.repeat(np.arange(40), 10))
    exact = GenPQR(gamma=0.8, q_model="exact").fit(data)
    assert exact.q_model_ == "exact" and exact.first_stage_.name in ("frequency", "spline")
    given = Ridge = pytest.importorskip("sklearn.linear_model").Ridge
    fitted = GenPQR(gamma=0.8, q_model=given()).fit(data)
    assert isinstance(fitted.q_model_, Ridge) and fitted.diagnostics_.solver == "fqe"

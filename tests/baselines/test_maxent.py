"""Tests of genpqr.baselines._maxent: neural MaxEnt-IRL (softmax-Q model)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

torch = pytest.importorskip("torch")

from genpqr import GenPQR  # noqa: E402
from genpqr.baselines._maxent import MaxEntIRL  # noqa: E402
from genpqr.data import from_arrays  # noqa: E402
from genpqr.envs._synthetic import make_synthetic_data  # noqa: E402
from genpqr.exceptions import NotFittedError  # noqa: E402
from genpqr.models._nn import DuelingQNetwork  # noqa: E402
from genpqr.normalization import anchor_action  # noqa: E402
from genpqr.stage2 import FQE

TINY = dict(hidden_layer_sizes=(16, 16), max_epochs=3, batch_size=64)


@pytest.fixture(scope="module")
def bench():
    return make_synthetic_data(1, 30, n_test=10)


def check_proba(p, n, K):
    assert p.shape == (n, K)
    assert np.all(np.isfinite(p)) and np.all(p >= 0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)


def test_valid_probabilities_and_reward(bench):
    model = MaxEntIRL(random_state=0, **TINY).fit(bench.train)
    X = bench.test.states
    np.testing.assert_array_equal(model.classes_, np.arange(5))
    check_proba(model.predict_proba(X), bench.test.n, 5)
    q = model.reward(X)
    assert q.shape == (bench.test.n, 5) and np.all(np.isfinite(q))
    # the reward is the softmax-Q logits: its log-softmax is the policy
    lq = q - q.max(axis=1, keepdims=True)
    lq -= np.log(np.exp(lq).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(lq, model.predict_log_proba(X), atol=1e-10)
    np.testing.assert_allclose(model.reward(X, bench.test.actions), q[np.arange(bench.test.n), bench.test.actions])
    np.testing.assert_allclose(model.q(X), q)
    p = np.exp(model.log_policy(X))
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    assert len(model.nll_) == 3 and model.fit_time_ > 0


def test_nll_falls(bench):
    model = MaxEntIRL(hidden_layer_sizes=(32, 32), max_epochs=20, random_state=0).fit(bench.train)
    assert model.nll_[-1] < model.nll_[0] - 0.02
    assert np.all(np.diff(model.nll_[:5]) < 0.05)


def test_full_batch(bench):
    model = MaxEntIRL(hidden_layer_sizes=(16,), max_epochs=10, batch_size=None, random_state=0).fit(bench.train)
    assert len(model.nll_) == 10
    assert model.nll_[-1] < model.nll_[0]
    check_proba(model.predict_proba(bench.test.states), bench.test.n, 5)


def test_reproducible(bench):
    a = MaxEntIRL(random_state=5, **TINY).fit(bench.train)
    b = MaxEntIRL(random_state=5, **TINY).fit(bench.train)
    c = MaxEntIRL(random_state=6, **TINY).fit(bench.train)
    X = bench.test.states
    np.testing.assert_array_equal(a.reward(X), b.reward(X))
    assert a.nll_ == b.nll_
    assert not np.allclose(a.reward(X), c.reward(X))


def test_fit_arrays_with_labels(bench):
    names = np.array(["a", "b", "c", "d", "e"])
    X, y = bench.train.states, names[bench.train.actions]
    model = MaxEntIRL(random_state=0, **TINY).fit(X, y)
    np.testing.assert_array_equal(model.classes_, names)
    check_proba(model.predict_proba(X[:7]), 7, 5)
    assert set(model.predict(X[:20])) <= set(names)
    assert model.reward(X[:3], ["a", "e", "c"]).shape == (3,)
    assert 0.0 <= model.score(X, y) <= 1.0


def test_unseen_action_gets_a_column(bench):
    d = bench.train
    keep = d.actions != 4
    data = from_arrays(d.states[keep], d.actions[keep], d.next_states[keep], action_labels=np.arange(5))
    model = MaxEntIRL(random_state=0, **TINY).fit(data)
    p = model.predict_proba(bench.test.states)
    check_proba(p, bench.test.n, 5)
    assert p[:, 4].mean() < p[:, :4].mean(axis=0).min()


def test_prefit_into_genpqr(bench):
    model = MaxEntIRL(random_state=0, **TINY).fit(bench.train)
    est = GenPQR(policy_model=model, policy_prefit=True,
                 q_model=FQE(DuelingQNetwork(hidden_layer_sizes=(8,), epochs_per_iteration=1, random_state=0),
                             n_iterations=2, tol=None),
                 normalization=anchor_action(0)).fit(bench.train)
    assert np.all(np.isfinite(est.reward(bench.test.states)))


def test_clone_and_threads(bench):
    model = MaxEntIRL(weight_decay=0.0, **TINY)
    twin = clone(model)
    before = torch.get_num_threads()
    twin.fit(bench.train)
    assert torch.get_num_threads() == before
    assert twin.get_params()["weight_decay"] == 0.0 and not hasattr(model, "nll_")


def test_sklearn_contract_checks():
    from sklearn.utils import estimator_checks as ec

    for check in (ec.check_estimator_cloneable, ec.check_no_attributes_set_in_init, ec.check_get_params_invariance,
                  ec.check_parameters_default_constructible, ec.check_estimators_unfitted, ec.check_set_params):
        check("MaxEntIRL", MaxEntIRL())


def test_errors(bench):
    with pytest.raises(NotFittedError):
        MaxEntIRL().predict_proba(bench.test.states)
    with pytest.raises(NotFittedError):
        MaxEntIRL().predict(bench.test.states)
    with pytest.raises(NotFittedError):
        MaxEntIRL().reward(bench.test.states)
    for params, match in [(dict(learning_rate=0.0), "learning_rate"), (dict(max_epochs=0), "max_epochs"),
                          (dict(weight_decay=-1e-4), "weight_decay"), (dict(batch_size=-2), "batch_size"),
                          (dict(hidden_layer_sizes="wide"), "hidden_layer_sizes")]:
        with pytest.raises((ValueError, TypeError), match=match):
            MaxEntIRL(**{**TINY, **params}).fit(bench.train)
    with pytest.raises(TypeError, match="Transitions"):
        MaxEntIRL(**TINY).fit(bench.train.states)
    with pytest.raises(ValueError, match="rows"):
        MaxEntIRL(**TINY).fit(bench.train.states, bench.train.actions[:-1])
    with pytest.raises(ValueError, match="two"):
        MaxEntIRL(**TINY).fit(bench.train.states, np.zeros(bench.train.n))
    model = MaxEntIRL(**TINY).fit(bench.train)
    with pytest.raises(ValueError, match="column"):
        model.reward(bench.test.states[:, :2])
    with pytest.raises(ValueError, match="never saw"):
        model.reward(bench.test.states[:2], [0, 9])


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_cuda_says_so(bench):
    with pytest.raises(ValueError, match="CUDA is not available"):
        MaxEntIRL(device="cuda", random_state=0, **TINY).fit(bench.train)


def test_device_round_trips_and_network_ends_on_cpu(bench):
    model = MaxEntIRL(device="auto", random_state=0, **TINY)
    assert clone(model).get_params()["device"] == "auto"
    model.fit(bench.train)
    assert next(model.network_.parameters()).device.type == "cpu"
    same = MaxEntIRL(random_state=0, **TINY).fit(bench.train)
    if not torch.cuda.is_available():  # auto is cpu here: the very same fit
        np.testing.assert_array_equal(model.reward(bench.test.states), same.reward(bench.test.states))

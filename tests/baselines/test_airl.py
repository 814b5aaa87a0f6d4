"""Tests of genpqr.baselines._airl: offline AIRL (policy estimator and state-reward baseline)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LinearRegression

torch = pytest.importorskip("torch")

from genpqr import GenPQR  # noqa: E402
from genpqr.baselines._airl import AIRL, _adversarial_update  # noqa: E402
from genpqr.data import from_arrays  # noqa: E402
from genpqr.envs._synthetic import make_synthetic_data  # noqa: E402
from genpqr.exceptions import NotFittedError  # noqa: E402
from genpqr.models._nn import DuelingQNetwork  # noqa: E402
from genpqr.normalization import anchor_action  # noqa: E402
from genpqr.stage2 import FQE

TINY = dict(bc_epochs=2, adversarial_epochs=2, batch_size=64, policy_hidden_layer_sizes=(16,),
            reward_hidden_layer_sizes=(16,), potential_hidden_layer_sizes=(16,))


@pytest.fixture(scope="module")
def bench():
    return make_synthetic_data(0, 30, n_test=10)  # 300 training rows, 5 actions, 5-dim states


def check_proba(p, n, K):
    assert p.shape == (n, K)
    assert np.all(np.isfinite(p))
    assert np.all(p >= 0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)


# ------------------------------------------------------------------ one adversarial update
def _np_forward(net, x):
    """float64 numpy forward of an MLP (independent of the training code)."""
    W = [w.double().numpy() for w in net.weights]
    b = [v.double().numpy() for v in net.biases]
    for Wi, bi in zip(W[:-1], b[:-1]):
        x = np.maximum(x @ Wi.T + bi, 0.0)
    return x @ W[-1].T + b[-1]


def test_adversarial_update_losses_and_gradients_follow_the_formulas():
    """One update (module docstring, steps a-c) on fixed tensors: L_D and L_pi equal the formulas
    evaluated independently (float64 numpy, same uniforms), the policy loss with the *updated*
    discriminator; each network took one Adam step (its first step moves a parameter by lr)."""
    import copy

    from genpqr.models._torch_modules import MLP

    rng = np.random.default_rng(0)
    n, d, K, B = 12, 3, 4, 12
    gen = torch.Generator().manual_seed(0)
    nets = (MLP((d, 5, K), gen), MLP((d, 5, 1), gen), MLP((d, 5, 1), gen))
    before = copy.deepcopy(nets)
    opts = tuple(torch.optim.Adam(net.parameters(), lr=1e-3) for net in nets)
    X, NS = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    TAB, A = rng.normal(size=(n, K, d)), rng.integers(0, K, n)
    C = (rng.random(n) > 0.3).astype(float)
    T = dict(X=torch.tensor(X, dtype=torch.float32), A=torch.tensor(A), NS=torch.tensor(NS, dtype=torch.float32),
             TAB=torch.tensor(TAB, dtype=torch.float32), C=torch.tensor(C, dtype=torch.float32))
    p = dict(gamma=0.9, bc_weight=0.5, entropy_weight=0.01)
    idx = torch.arange(B)
    u = torch.rand(B, generator=torch.Generator().manual_seed(7)).double().numpy()
    d_loss, pi_loss = _adversarial_update(nets, opts, T, idx, p, torch.Generator().manual_seed(7))

    logits = _np_forward(before[0], X)
    logp = logits - logits.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    a_s = np.minimum((np.exp(logp).cumsum(1) < u[:, None]).sum(1), K - 1)
    rows = np.arange(B)
    lp_e, lp_s = logp[rows, A], logp[rows, a_s]
    xn_s = TAB[rows, a_s]

    def logits_d(gnet, hnet):
        g, h = _np_forward(gnet, X)[:, 0], _np_forward(hnet, np.vstack([X, NS, xn_s]))[:, 0]
        base = g - h[:B]
        return base + 0.9 * C * h[B:2 * B] - lp_e, base + 0.9 * C * h[2 * B:] - lp_s

    l_e, l_s = logits_d(before[1], before[2])
    expected_d = (np.logaddexp(0, -l_e).sum() + np.logaddexp(0, l_s).sum()) / (2 * B)
    assert float(d_loss) == pytest.approx(expected_d, rel=1e-5)
    # the policy step's advantage uses the updated discriminator
    _, adv = logits_d(nets[1], nets[2])
    entropy = -(np.exp(logp) * logp).sum(1)
    expected_pi = -(adv * lp_s).mean() - 0.5 * lp_e.mean() - 0.01 * entropy.mean()
    assert float(pi_loss) == pytest.approx(expected_pi, rel=1e-4, abs=1e-6)
    # each step moved its own networks (by lr per coordinate with a non-zero gradient), nothing else
    for net, old in zip(nets, before):
        moves = [np.abs(a.numpy() - b.numpy()).max() for a, b in zip(net.weights, old.weights)]
        assert max(moves) == pytest.approx(1e-3, rel=1e-3)


# ------------------------------------------------------------------ device
@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_cuda_says_so(bench):
    with pytest.raises(ValueError, match="CUDA is not available"):
        AIRL(transition=bench.env.transition, device="cuda", random_state=0, **TINY).fit(bench.train)


def test_device_round_trips_and_networks_end_on_cpu(bench):
    model = AIRL(transition=bench.env.transition, device="auto", random_state=0, **TINY)
    assert clone(model).get_params()["device"] == "auto"
    model.fit(bench.train)
    for net in (model.policy_network_, model.reward_network_, model.potential_network_):
        assert next(net.parameters()).device.type == "cpu"


# ------------------------------------------------------------------ end to end
def test_fit_with_transition_valid_probabilities(bench):
    data = bench.train
    model = AIRL(transition=bench.env.transition, random_state=0, **TINY).fit(data)
    np.testing.assert_array_equal(model.classes_, np.arange(5))
    check_proba(model.predict_proba(bench.test.states), bench.test.n, 5)
    lp = model.log_policy(bench.test.states)
    assert lp.shape == (bench.test.n, 5)
    p = np.exp(lp)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    assert p.min() >= 0.01 / 1.04 - 1e-12  # clipped at 0.01, then renormalized
    assert model.dynamics_models_ is None
    assert model.fit_time_ > 0
    assert len(model.bc_loss_) == 2
    assert model.n_updates_ == len(model.discriminator_loss_) == len(model.policy_loss_) == 2 * 5  # ceil(300/64)
    assert np.all(np.isfinite(model.discriminator_loss_)) and np.all(np.isfinite(model.policy_loss_))
    assert set(model.predict(bench.test.states[:20])) <= set(range(5))


def test_reward_is_state_only(bench):
    model = AIRL(transition=bench.env.transition, random_state=0, **TINY).fit(bench.train)
    X = bench.test.states
    table = model.reward(X)
    assert table.shape == (bench.test.n, 5) and np.all(np.isfinite(table))
    np.testing.assert_allclose(table, table[:, :1].repeat(5, axis=1))
    at = model.reward(X, bench.test.actions)
    assert at.shape == (bench.test.n,)
    np.testing.assert_allclose(at, table[:, 0])
    assert model.potential(X).shape == (bench.test.n,)
    logit = model.discriminator_logit(X, bench.test.actions, bench.test.next_states)
    assert logit.shape == (bench.test.n,) and np.all(np.isfinite(logit))


def test_discriminator_loss_falls(bench):
    model = AIRL(transition=bench.env.transition, bc_epochs=5, adversarial_epochs=30, batch_size=100,
                 random_state=0).fit(bench.train)
    losses = np.asarray(model.discriminator_loss_)
    assert losses.size == 90
    assert losses[-15:].mean() < losses[:15].mean() - 0.02
    assert model.bc_loss_[-1] < model.bc_loss_[0]


def test_reproducible_with_random_state(bench):
    kw = dict(transition=bench.env.transition, **TINY)
    a = AIRL(random_state=3, **kw).fit(bench.train)
    b = AIRL(random_state=3, **kw).fit(bench.train)
    c = AIRL(random_state=4, **kw).fit(bench.train)
    X = bench.test.states
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    np.testing.assert_array_equal(a.reward(X), b.reward(X))
    assert a.discriminator_loss_ == b.discriminator_loss_
    assert not np.allclose(a.predict_proba(X), c.predict_proba(X))


def test_learned_dynamics(bench):
    model = AIRL(random_state=0, **TINY).fit(bench.train)  # transition=None: per-action Ridge
    assert len(model.dynamics_models_) == 5
    # the synthetic moves are s' = s + Delta[a]: the ridge intercepts recover Delta
    for a, m in enumerate(model.dynamics_models_):
        np.testing.assert_allclose(m.intercept_, bench.env.delta[a], atol=0.02)
    check_proba(model.predict_proba(bench.test.states), bench.test.n, 5)
    custom = AIRL(dynamics_model=LinearRegression(), random_state=0, **TINY).fit(bench.train)
    assert all(isinstance(m, LinearRegression) for m in custom.dynamics_models_)
    assert custom.dynamics_models_[0] is not custom.dynamics_models_[1]


def test_fit_arrays_needs_transition(bench):
    X, y = bench.train.states, bench.train.actions
    model = AIRL(transition=bench.env.transition, random_state=0, **TINY).fit(X, y)
    np.testing.assert_array_equal(model.classes_, np.arange(5))
    check_proba(model.predict_proba(X[:10]), 10, 5)
    with pytest.raises(ValueError, match="transition"):
        AIRL(**TINY).fit(X, y)
    # an unfitted AIRL as GenPQR's (cloned, refitted) policy model
    est = GenPQR(policy_model=AIRL(transition=bench.env.transition, random_state=0, **TINY),
                 q_model=FQE(DuelingQNetwork(hidden_layer_sizes=(8,), epochs_per_iteration=1, random_state=0),
                             n_iterations=2, tol=None),
                 normalization=anchor_action(0)).fit(bench.train)
    assert np.all(np.isfinite(est.reward(bench.test.states)))


def test_string_labels(bench):
    d = bench.train
    names = np.array(["stay", "m1", "m2", "m3", "m4"])
    data = from_arrays(d.states, names[d.actions], d.next_states, episode_ids=d.episode_ids)
    model = AIRL(random_state=0, **TINY).fit(data)
    np.testing.assert_array_equal(model.classes_, np.arange(5))  # action codes
    r = model.reward(bench.test.states[:4], data.encoder.labels[[0, 1, 2, 3]])
    assert r.shape == (4,)


def test_prefit_into_genpqr(bench):
    airl = AIRL(transition=bench.env.transition, random_state=0, **TINY).fit(bench.train)
    est = GenPQR(policy_model=airl, policy_prefit=True,
                 q_model=FQE(DuelingQNetwork(hidden_layer_sizes=(8,), epochs_per_iteration=1, random_state=0),
                             n_iterations=2, tol=None),
                 normalization=anchor_action(0), random_state=0).fit(bench.train)
    r = est.reward(bench.test.states, bench.test.actions)
    assert r.shape == (bench.test.n,) and np.all(np.isfinite(r))
    np.testing.assert_allclose(est.log_policy(bench.test.states), airl.log_policy(bench.test.states))


def test_clone_and_threads_restored(bench):
    model = AIRL(transition=bench.env.transition, learning_rate=2e-3, **TINY)
    twin = clone(model)
    assert twin.get_params()["learning_rate"] == 2e-3
    before = torch.get_num_threads()
    twin.fit(bench.train)
    assert torch.get_num_threads() == before
    assert not hasattr(model, "fit_time_")


def test_sklearn_contract_checks():
    from sklearn.utils import estimator_checks as ec

    for check in (ec.check_estimator_cloneable, ec.check_no_attributes_set_in_init, ec.check_get_params_invariance,
                  ec.check_parameters_default_constructible, ec.check_estimators_unfitted, ec.check_set_params):
        check("AIRL", AIRL())


# ------------------------------------------------------------------ errors
def test_unfitted_use_raises(bench):
    model = AIRL()
    for call in (lambda: model.predict_proba(bench.test.states), lambda: model.reward(bench.test.states),
                 lambda: model.log_policy(bench.test.states), lambda: model.predict(bench.test.states),
                 lambda: model.potential(bench.test.states)):
        with pytest.raises(NotFittedError):
            call()


@pytest.mark.parametrize("params, exc, match", [
    (dict(learning_rate=-1.0), ValueError, "learning_rate"),
    (dict(bc_epochs=-1), ValueError, "bc_epochs"),
    (dict(adversarial_epochs=1.5), ValueError, "adversarial_epochs"),
    (dict(batch_size=0), ValueError, "batch_size"),
    (dict(gamma=1.0), ValueError, "gamma"),
    (dict(bc_weight=-0.5), ValueError, "bc_weight"),
    (dict(entropy_weight=float("nan")), ValueError, "entropy_weight"),
    (dict(policy_hidden_layer_sizes=(0,)), ValueError, "hidden_layer_sizes"),
    (dict(transition="env"), TypeError, "transition"),
    (dict(dynamics_model=LinearRegression), TypeError, "dynamics_model"),
    (dict(clip=(0.5, 0.1)), ValueError, "clip"),
])
def test_bad_params(bench, params, exc, match):
    with pytest.raises(exc, match=match):
        AIRL(**{**TINY, **params}).fit(bench.train)


def test_bad_data(bench):
    with pytest.raises(TypeError, match="Transitions"):
        AIRL(**TINY).fit(bench.train.states)
    with pytest.raises(ValueError, match="y must be None"):
        AIRL(**TINY).fit(bench.train, bench.train.actions)
    with pytest.raises(ValueError, match="shape"):
        AIRL(transition=lambda s, a: s[:, :2], **TINY).fit(bench.train)
    with pytest.raises(ValueError, match="finite"):
        AIRL(transition=lambda s, a: s * np.nan, **TINY).fit(bench.train)
    model = AIRL(transition=bench.env.transition, **TINY).fit(bench.train)
    with pytest.raises(ValueError, match="column"):
        model.predict_proba(bench.test.states[:, :3])


def test_pickle_roundtrip(bench):
    import pickle

    model = AIRL(transition=bench.env.transition, random_state=0, **TINY).fit(bench.train)
    twin = pickle.loads(pickle.dumps(model))
    X = bench.test.states
    np.testing.assert_array_equal(twin.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(twin.reward(X), model.reward(X))


def test_learned_dynamics_unseen_action_warns(bench):
    d = bench.train
    keep = d.actions != 3
    data = from_arrays(d.states[keep], d.actions[keep], d.next_states[keep], action_labels=np.arange(5))
    with pytest.warns(UserWarning, match="never occurs"):
        model = AIRL(random_state=0, **TINY).fit(data)
    assert len(model.dynamics_models_) == 5
    check_proba(model.predict_proba(bench.test.states), bench.test.n, 5)

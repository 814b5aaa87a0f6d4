"""Baselines: DeepPQR, the log-policy pseudo-reward and the linear reward oracle."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.utils.estimator_checks import check_get_params_invariance, check_no_attributes_set_in_init

from genpqr import from_arrays, normalization as N
from genpqr.baselines import DeepPQR
from genpqr.baselines._simple import LinearRewardOracle, LogPolicyReward
from genpqr.envs._synthetic import make_synthetic_data
from genpqr.exceptions import NotFittedError, WeakSupportWarning
from genpqr.stage1._policy import FittedPolicy, clip_proba

torch = pytest.importorskip("torch")

from genpqr.baselines._deeppqr import _train_mse  # noqa: E402
from genpqr.models._nn import MLPClassifier  # noqa: E402
from genpqr.models._torch_modules import MLP  # noqa: E402

TINY_NET = dict(anchor_hidden_layer_sizes=(16,), aux_hidden_layer_sizes=(16,), n_iterations=3,
                epochs_per_iteration=1, aux_epochs=3, batch_size=64)


def tiny_policy():
    return MLPClassifier(hidden_layer_sizes=(8,), max_epochs=3, random_state=0)


class TruePolicy:
    """A 'prefit classifier' returning the synthetic environment's true probabilities."""

    def __init__(self, env):
        self.env = env
        self.classes_ = np.arange(env.n_actions)

    def predict_proba(self, X):
        return self.env.policy_proba(X)


@pytest.fixture(scope="module")
def tiny():
    return make_synthetic_data(seed=0, n_train=30, n_test=10)


def all_baselines():
    return {
        "deeppqr": DeepPQR(policy_model=tiny_policy(), random_state=0, **TINY_NET),
        "logpolicy": LogPolicyReward(policy_model=tiny_policy(), random_state=0),
        "oracle": LinearRewardOracle(),
    }


# ------------------------------------------------------------------ contract and end to end
@pytest.mark.parametrize("name", list(all_baselines()))
def test_sklearn_fit_free_contract(name):
    est = all_baselines()[name]
    check_no_attributes_set_in_init(name, est)
    check_get_params_invariance(name, est)
    clone(est)


@pytest.mark.parametrize("name", list(all_baselines()))
def test_end_to_end_shapes_and_label_selection(tiny, name):
    est = all_baselines()[name]
    states = np.array(tiny.test.states)
    before = states.copy()
    assert est.fit(tiny.train) is est
    K = tiny.env.n_actions
    table = est.reward(states)
    assert table.shape == (tiny.test.n, K) and np.all(np.isfinite(table))
    labels = tiny.test.labels_of()
    at = est.reward(states, labels)
    assert at.shape == (tiny.test.n,)
    np.testing.assert_array_equal(at, table[np.arange(tiny.test.n), tiny.test.actions])
    np.testing.assert_array_equal(states, before)  # inputs untouched
    assert est.fit_time_ > 0 and isinstance(est.name, str)
    lp = est.log_policy(states)
    if name == "oracle":
        assert lp is None
    else:
        assert lp.shape == (tiny.test.n, K)
        np.testing.assert_allclose(np.exp(lp).sum(axis=1), 1.0, atol=1e-12)
        assert np.exp(lp).min() >= 0.01 / (1 + 0.01 * K) - 1e-12  # clipped then renormalized
    metrics = tiny.evaluate(at, lp)
    assert np.isfinite(metrics["reward_mse"])


def test_random_state_reproducible(tiny):
    a = DeepPQR(policy_model=tiny_policy(), random_state=3, **TINY_NET).fit(tiny.train)
    b = DeepPQR(policy_model=tiny_policy(), random_state=3, **TINY_NET).fit(tiny.train)
    np.testing.assert_array_equal(a.reward(tiny.test.states), b.reward(tiny.test.states))


def test_deeppqr_records_anchor_and_diagnostics(tiny):
    est = DeepPQR(policy_model=tiny_policy(), random_state=0, **TINY_NET).fit(tiny.train)
    assert est.anchor_count_ == tiny.anchor_count == int(np.sum(tiny.train.actions == 0))
    assert est.anchor_ == 0 and est.anchor_label_ == 0
    assert len(est.anchor_loss_curve_) == len(est.target_changes_) == TINY_NET["n_iterations"]
    assert len(est.aux_loss_curve_) == TINY_NET["aux_epochs"]
    assert 0.0 <= est.clamped_fraction_ <= 1.0


# ------------------------------------------------------------------ DeepPQR algebra
def test_deeppqr_reward_is_q_minus_gamma_h(tiny):
    """r_hat = Q_hat - gamma h with Q_hat = W + alpha (log pi(a|s) - log pi(a+|s)), to rounding."""
    est = DeepPQR(policy_model=tiny_policy(), gamma=0.8, alpha=1.5, random_state=0, **TINY_NET).fit(tiny.train)
    X = tiny.test.states
    u = est.log_policy(X)
    q = est.anchor_value(X)[:, None] + 1.5 * (u - u[:, [0]])
    np.testing.assert_allclose(est.q(X), q, atol=1e-10)
    np.testing.assert_allclose(est.reward(X), q - 0.8 * est.continuation(X), atol=1e-10)


def test_deeppqr_anchor_reward_near_zero_with_true_policy():
    """Exact case: true policy (prefit), deterministic transitions, long training. At the fixed
    point r_hat(s, a+) = W(s) - gamma h(s, a+) = g(s) = 0. What remains is optimization error of
    the two networks on the anchor rows (Adagrad, stochastic batches): RMS r_hat(s, 0) over the
    anchor rows is 0.035-0.066 x the standard deviation of the true reward over 4 data seeds x 3
    network seeds (0.058 here); we require < 0.1 x. W's relative RMS error is 0.01-0.05 there
    (0.016 here); we require < 0.1."""
    data = make_synthetic_data(seed=0, n_train=30, n_test=10)
    est = DeepPQR(policy_model=TruePolicy(data.env), policy_prefit=True, clip=None,
                  anchor_hidden_layer_sizes=(64, 64), aux_hidden_layer_sizes=(64, 64), n_iterations=60,
                  epochs_per_iteration=20, anchor_learning_rate=0.05, aux_epochs=1500, aux_learning_rate=0.05,
                  batch_size=64, random_state=0).fit(data.train)
    X, A = data.train.states, data.train.actions
    anchor_rows = A == 0
    truth = data.env.true_reward(X, A)
    r0 = est.reward(X[anchor_rows], np.zeros(anchor_rows.sum(), dtype=int))
    assert np.sqrt(np.mean(r0**2)) < 0.1 * truth.std()
    # W is the soft Q of the anchor: -(gamma / (1 - gamma)) log pi(0|s) in the box
    w_true = -9.0 * np.log(data.env.policy_proba(X[anchor_rows])[:, 0])
    w_err = np.sqrt(np.mean((est.anchor_value(X[anchor_rows]) - w_true) ** 2))
    assert w_err < 0.1 * np.sqrt(np.mean(w_true**2))


class _TabularTruePolicy:
    """Prefit classifier on one-hot states returning a given (S, K) policy table."""

    def __init__(self, pi):
        self.pi, self.classes_ = pi, np.arange(pi.shape[1])

    def predict_proba(self, X):
        return self.pi[np.argmax(X, axis=1)]


def _tabular_case(n_states=5, n_actions=3, n_next=4, gamma=0.8, alpha=1.5, seed=0):
    """A random tabular MDP whose data set IS its population: every (s, a) appears with its
    ``n_next`` next-state draws, and ``P(.|s, a)`` is defined as their empirical distribution.
    The reward satisfies ``r(s, 0) = g(s)``; ``pi`` is its soft-optimal policy (soft value
    iteration); DeepPQR's ``W`` solves ``(I - gamma P_0) W = g + gamma P_0 (-alpha log pi(0|.))``."""
    rng = np.random.default_rng(seed)
    g = rng.normal(0.0, 0.5, n_states)
    r = rng.normal(0.0, 1.0, (n_states, n_actions))
    r[:, 0] = g
    nxt = rng.integers(0, n_states, (n_states, n_actions, n_next))
    P = np.zeros((n_states, n_actions, n_states))
    for s in range(n_states):
        for a in range(n_actions):
            np.add.at(P[s, a], nxt[s, a], 1.0 / n_next)
    V = np.zeros(n_states)
    for _ in range(2000):  # contraction 0.8: converged far below 1e-12
        Q = r + gamma * P @ V
        m = Q.max(axis=1)
        V = m + alpha * np.log(np.exp((Q - m[:, None]) / alpha).sum(axis=1))
    Q = r + gamma * P @ V
    pi = np.exp((Q - V[:, None]) / alpha)
    P0 = P[:, 0]
    W = np.linalg.solve(np.eye(n_states) - gamma * P0, g + gamma * P0 @ (-alpha * np.log(pi[:, 0])))
    eye = np.eye(n_states)
    s_idx = np.repeat(np.arange(n_states), n_actions * n_next)
    a_idx = np.tile(np.repeat(np.arange(n_actions), n_next), n_states)
    data = from_arrays(eye[s_idx], a_idx, eye[nxt.reshape(-1)])
    return dict(data=data, r=r, W=W, Q=Q, pi=pi, g=g, gamma=gamma, alpha=alpha, eye=eye)


def test_tabular_case_closed_forms():
    """The test case's own algebra: pi sums to one, DeepPQR's W is the soft Q of the anchor."""
    c = _tabular_case()
    np.testing.assert_allclose(c["pi"].sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(c["W"], c["Q"][:, 0], atol=1e-10)


def test_deeppqr_reaches_tabular_fixed_point():
    """Population case with stochastic transitions, general g and alpha != 1: with the true
    policy, full-batch regression and enough iterations, DeepPQR's W reaches the closed-form
    fixed point and r_hat the true anchor-normalized reward. Measured max errors: 2.6e-5 (float32
    networks); we require 1e-3 (|r| up to 2.3). Fails if any target, the temperature, the
    discount or the Q reconstruction is wrong."""
    c = _tabular_case()
    g = c["g"]
    est = DeepPQR(normalization=N.anchor_action(0, g=lambda X: X @ g), gamma=c["gamma"], alpha=c["alpha"],
                  policy_model=_TabularTruePolicy(c["pi"]), policy_prefit=True, clip=None,
                  anchor_hidden_layer_sizes=(32,), aux_hidden_layer_sizes=(32,), n_iterations=100,
                  epochs_per_iteration=30, anchor_learning_rate=0.1, aux_epochs=1000, aux_learning_rate=0.1,
                  batch_size=1000, min_support=0, random_state=0).fit(c["data"])
    np.testing.assert_allclose(est.anchor_value(c["eye"]), c["W"], atol=1e-3)
    np.testing.assert_allclose(est.reward(c["eye"]), c["r"], atol=1e-3)
    np.testing.assert_allclose(est.reward(c["eye"], np.zeros(5, dtype=int)), g, atol=1e-3)


def test_deeppqr_general_g_and_label_anchor():
    """A string-labelled anchor that is not the first label, and a callable g (targets shift by g)."""
    data = make_synthetic_data(seed=1, n_train=20, n_test=5).train
    names = np.array(["a", "b", "c", "d", "e"])
    relabelled = from_arrays(data.states, names[data.actions], data.next_states, episode_ids=data.episode_ids,
                             truncated=data.truncated)
    norm = N.anchor_action("c", g=lambda s: 0.5 * s[:, 0])
    est = DeepPQR(normalization=norm, policy_model=tiny_policy(), random_state=0, **TINY_NET).fit(relabelled)
    assert est.anchor_ == 2 and est.anchor_label_ == "c"
    assert est.reward(data.states[:4], ["a", "c", "e", "c"]).shape == (4,)


# ------------------------------------------------------------------ the MSE loop (autograd + Adagrad)
def test_train_mse_equals_torch_reference():
    """Full-batch epochs of DeepPQR's regression loop are torch.optim.Adagrad steps on the mean
    squared error of an nn.Linear network with the same initial weights."""
    gen = torch.Generator().manual_seed(1)
    net = MLP((3, 8, 1), gen)
    layers = []
    for W, b in zip(net.weights, net.biases):
        linear = torch.nn.Linear(W.shape[1], W.shape[0])
        with torch.no_grad():
            linear.weight.copy_(W)
            linear.bias.copy_(b)
        layers.append(linear)
    X, y = torch.randn(20, 3, generator=gen), torch.randn(20, generator=gen)
    opt_ref = torch.optim.Adagrad([p for layer in layers for p in layer.parameters()], lr=0.05)
    ref_losses = []
    for _ in range(3):
        loss = torch.mean((layers[1](torch.relu(layers[0](X)))[:, 0] - y) ** 2)
        opt_ref.zero_grad()
        loss.backward()
        opt_ref.step()
        ref_losses.append(loss.item())
    opt = torch.optim.Adagrad(net.parameters(), lr=0.05)
    losses = _train_mse(net, opt, X, y, 3, 20, gen)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for mine, ref in zip(net.weights + net.biases, [l.weight for l in layers] + [l.bias for l in layers]):  # noqa: E741
        torch.testing.assert_close(mine, ref.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_deeppqr_cuda_without_cuda_says_so(tiny):
    with pytest.raises(ValueError, match="CUDA is not available"):
        DeepPQR(policy_model=tiny_policy(), device="cuda", random_state=0, **TINY_NET).fit(tiny.train)


def test_deeppqr_device_round_trips(tiny):
    est = DeepPQR(policy_model=tiny_policy(), device="auto", random_state=0, **TINY_NET)
    assert clone(est).get_params()["device"] == "auto"
    est.fit(tiny.train)
    assert next(est.anchor_network_.parameters()).device.type == "cpu"
    assert np.all(np.isfinite(est.reward(tiny.test.states)))


# ------------------------------------------------------------------ log-policy pseudo-reward
def test_log_policy_reward_is_log_pi_minus_g(tiny):
    g = lambda s: np.sin(s[:, 1])  # noqa: E731
    est = LogPolicyReward(policy_model=TruePolicy(tiny.env), policy_prefit=True,
                          normalization=N.anchor_action(0, g=g)).fit(tiny.train)
    X = tiny.test.states
    expected = np.log(clip_proba(tiny.env.policy_proba(X), (0.01, 0.99))[0]) - g(X)[:, None]
    np.testing.assert_allclose(est.reward(X), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(est.log_policy(X), expected + g(X)[:, None], rtol=0, atol=1e-12)


def test_log_policy_reward_rejects_data_estimated_offset(tiny):
    with pytest.raises(ValueError, match="given g"):
        LogPolicyReward(policy_model=tiny_policy(), normalization=N.behavior()).fit(tiny.train)


# ------------------------------------------------------------------ linear oracle
def test_linear_oracle_recovers_exactly_linear_reward():
    rng = np.random.default_rng(0)
    n, d, K = 400, 3, 4
    S = rng.normal(size=(n, d))
    A = rng.integers(0, K, size=n)
    intercepts, slopes = rng.normal(size=K), rng.normal(size=(K, d))
    rewards = intercepts[A] + np.sum(S * slopes[A], axis=1)
    data = from_arrays(S, A, rng.normal(size=(n, d)), rewards=rewards)
    est = LinearRewardOracle(alpha=1e-10).fit(data)
    Xq = rng.normal(size=(50, d))
    np.testing.assert_allclose(est.reward(Xq), Xq @ slopes.T + intercepts, atol=1e-6)
    np.testing.assert_allclose(est.intercepts_, intercepts, atol=1e-6)
    assert "oracle" in est.name and "not IRL" in est.name
    assert "Not an IRL method" in LinearRewardOracle.__doc__


# ------------------------------------------------------------------ shared policy
@pytest.mark.parametrize("cls", [DeepPQR, LogPolicyReward])
def test_policy_prefit_used_as_is(tiny, cls):
    model = MLPClassifier(hidden_layer_sizes=(8,), max_epochs=2, random_state=0).fit(tiny.train.states,
                                                                                   tiny.train.actions)
    X = tiny.test.states
    before = model.predict_proba(X)
    kw = TINY_NET if cls is DeepPQR else {}
    est = cls(policy_model=model, policy_prefit=True, random_state=0, **kw).fit(tiny.train)
    assert est.policy_.models[0] is model
    np.testing.assert_array_equal(model.predict_proba(X), before)  # not refitted
    np.testing.assert_allclose(est.log_policy(X), np.log(clip_proba(before, (0.01, 0.99))[0]), atol=1e-12)


def test_policy_prefit_accepts_fitted_policy_and_default_refits_a_clone(tiny):
    model = LogisticRegression(max_iter=200)
    est = LogPolicyReward(policy_model=model).fit(tiny.train)
    assert est.policy_.models[0] is not model and not hasattr(model, "coef_")
    shared = est.policy_
    other = LogPolicyReward(policy_model=shared, policy_prefit=True, clip=(0.05, 0.95)).fit(tiny.train)
    assert isinstance(other.policy_, FittedPolicy) and other.policy_.models[0] is shared.models[0]
    assert other.policy_.clip == (0.05, 0.95) and shared.clip == (0.01, 0.99)
    with pytest.raises(TypeError, match="policy_prefit=True"):
        LogPolicyReward(policy_model=shared).fit(tiny.train)


# ------------------------------------------------------------------ errors
def test_deeppqr_rejects_other_normalizations(tiny):
    for norm in (N.mean_zero(), N.state_anchor(lambda s: np.zeros(len(s), dtype=int)), N.behavior(g=0.0)):
        with pytest.raises(ValueError, match="DeepPQR supports only a fixed anchor action"):
            DeepPQR(normalization=norm, **TINY_NET).fit(tiny.train)


def test_deeppqr_anchor_absent_or_rare(tiny):
    train = tiny.train
    no_anchor = train.subset(train.actions != 0)  # label 0 still in the encoder, no rows
    with pytest.raises(ValueError, match=r"anchor action 0 never occurs"):
        DeepPQR(policy_model=tiny_policy(), **TINY_NET).fit(no_anchor)
    with pytest.raises(ValueError, match=r"anchor action 9 .*never occurs"):
        DeepPQR(normalization=N.anchor_action(9), **TINY_NET).fit(train)
    rows = np.flatnonzero(train.actions == 0)
    rare = train.subset(np.setdiff1d(np.arange(train.n), rows[10:]))
    with pytest.warns(WeakSupportWarning, match="only 10 of"):
        est = DeepPQR(policy_model=tiny_policy(), random_state=0, **TINY_NET).fit(rare)
    assert est.anchor_count_ == 10


def test_oracle_needs_rewards(tiny):
    t = tiny.train
    no_rewards = from_arrays(t.states, t.actions, t.next_states)
    with pytest.raises(ValueError, match="data.rewards is None"):
        LinearRewardOracle().fit(no_rewards)
    with pytest.raises(ValueError, match="alpha"):
        LinearRewardOracle(alpha=-1.0).fit(t)


def test_classifier_without_predict_proba(tiny):
    for cls, kw in ((DeepPQR, TINY_NET), (LogPolicyReward, {})):
        with pytest.raises(TypeError, match="policy_model"):
            cls(policy_model=LinearRegression(), **kw).fit(tiny.train)
        with pytest.raises(TypeError, match="policy_model"):
            cls(policy_model=LinearRegression().fit([[0.0], [1.0]], [0, 1]), policy_prefit=True, **kw).fit(tiny.train)
    with pytest.raises(ValueError, match="policy_prefit=True needs"):
        LogPolicyReward(policy_prefit=True).fit(tiny.train)


def test_unknown_label_and_bad_states(tiny):
    for est in all_baselines().values():
        est.fit(tiny.train)
        with pytest.raises(ValueError, match=r"action label\(s\) \[7\]"):
            est.reward(tiny.test.states[:2], [0, 7])
        with pytest.raises(ValueError, match="entries but states has"):
            est.reward(tiny.test.states[:2], [0, 1, 2])
        with pytest.raises(ValueError, match="column"):
            est.reward(tiny.test.states[:, :3])


@pytest.mark.parametrize("name", list(all_baselines()))
def test_unfitted_use(name):
    est = all_baselines()[name]
    with pytest.raises(NotFittedError, match="not fitted"):
        est.reward(np.zeros((2, 5)))
    with pytest.raises(NotFittedError, match="not fitted"):
        est.log_policy(np.zeros((2, 5)))


def test_bad_inputs(tiny):
    with pytest.raises(TypeError, match="Transitions"):
        DeepPQR().fit(tiny.train.states)
    with pytest.raises(ValueError, match="n_iterations"):
        DeepPQR(n_iterations=0).fit(tiny.train)
    with pytest.raises(ValueError, match="gamma"):
        DeepPQR(gamma=1.0).fit(tiny.train)
    with pytest.raises(ValueError, match="target_clamp"):
        DeepPQR(target_clamp=-1.0).fit(tiny.train)
    with pytest.raises(ValueError, match="clip"):
        LogPolicyReward(clip=(0.5, 0.1)).fit(tiny.train)

"""Tests of genpqr.models.nn: the flat MLP engine against autograd, MLPClassifier (behaviour cloning)
and DuelingQNetwork (native Q-model for fitted Q evaluation)."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import log_softmax
from sklearn.base import clone

torch = pytest.importorskip("torch")

from genpqr.exceptions import NotFittedError  # noqa: E402
from genpqr.models.nn import (  # noqa: E402
    DuelingQNetwork,
    MLPClassifier,
    _cross_entropy_grad,
    _dueling_mse_grad,
    _FlatAdam,
    _FlatMLP,
)


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------
def softmax_policy_data(n, seed, d=4, K=3):
    """States ~ N(0, I_d), actions ~ softmax(s @ B + c) with a fixed B, c; returns the true
    log-probabilities too."""
    coef = np.random.default_rng(12345).normal(scale=1.0, size=(d, K))
    bias = np.linspace(0.4, -0.4, K)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    log_pi = log_softmax(X @ coef + bias, axis=1)
    u = rng.random(n)[:, None]
    y = (np.exp(log_pi).cumsum(axis=1) < u).sum(axis=1)
    return X, np.minimum(y, K - 1), log_pi


def q_target_data(n, seed, d=3, K=4):
    """Smooth known Q-function targets y = f(s, a)."""
    rng = np.random.default_rng(seed)
    S = rng.normal(size=(n, d))
    a = rng.integers(0, K, n)
    y = np.sin(S[:, 0]) + 0.5 * S[:, 1] * (a - 1.5) + 0.3 * a + 0.2 * S[:, 2] ** 2
    return S, a, y, K


# --------------------------------------------------------------------------------------------
# the engine: hand-written backward and Adam against PyTorch
# --------------------------------------------------------------------------------------------
def _autograd_copy(net):
    """(weights, biases) as leaf tensors with requires_grad, nn.Linear layout (out, in)."""
    Ws = [W.detach().clone().requires_grad_(True) for W in net.linear_weights()]
    bs = [b.detach().clone().requires_grad_(True) for b in net.biases]
    return Ws, bs


def _autograd_forward(Ws, bs, x):
    h = x
    for i, (W, b) in enumerate(zip(Ws, bs)):
        h = torch.nn.functional.linear(h, W, b)
        if i < len(Ws) - 1:
            h = torch.relu(h)
    return h  # (B, n_out)


@pytest.mark.parametrize("hidden", [(), (7,), (16, 8)])
def test_flat_mlp_gradients_match_autograd(hidden):
    gen = torch.Generator().manual_seed(0)
    net = _FlatMLP((5, *hidden, 3), gen)
    x = torch.randn(11, 5, generator=gen)
    upstream = torch.randn(3, 11, generator=gen)  # d loss / d out_t
    ws = net.workspace(11)
    out_t = net.forward(x, ws)
    ws["grad_out_t"].copy_(upstream)
    net.backward(x, ws)

    Ws, bs = _autograd_copy(net)
    out = _autograd_forward(Ws, bs, x)
    torch.testing.assert_close(out_t, out.t().detach(), rtol=1e-6, atol=1e-6)
    (out.t() * upstream).sum().backward()
    for mine, ref in zip([W.t() for W in net.grad_weights[:-1]] + [net.grad_weights[-1]], Ws):
        torch.testing.assert_close(mine, ref.grad, rtol=1e-5, atol=1e-6)
    for mine, ref in zip(net.grad_biases, bs):
        torch.testing.assert_close(mine, ref.grad, rtol=1e-5, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(
    n_in=st.integers(1, 6),
    hidden=st.lists(st.integers(1, 9), max_size=2),
    n_out=st.integers(1, 5),
    batch=st.integers(1, 7),
    seed=st.integers(0, 2**31 - 1),
)
def test_flat_mlp_forward_backward_property(n_in, hidden, n_out, batch, seed):
    """Any shape: forward equals nn.Linear/ReLU, and grads equal autograd's."""
    gen = torch.Generator().manual_seed(seed)
    net = _FlatMLP((n_in, *hidden, n_out), gen)
    x = torch.randn(batch, n_in, generator=gen)
    upstream = torch.randn(n_out, batch, generator=gen)
    ws = net.workspace(batch)
    out_t = net.forward(x, ws)
    ws["grad_out_t"].copy_(upstream)
    net.backward(x, ws)
    Ws, bs = _autograd_copy(net)
    out = _autograd_forward(Ws, bs, x)
    torch.testing.assert_close(out_t, out.t().detach(), rtol=1e-5, atol=1e-5)
    (out.t() * upstream).sum().backward()
    mine = [W.t() for W in net.grad_weights[:-1]] + [net.grad_weights[-1]]
    for g_mine, W in zip(mine, Ws):
        torch.testing.assert_close(g_mine, W.grad, rtol=1e-4, atol=1e-5)
    for g_mine, b in zip(net.grad_biases, bs):
        torch.testing.assert_close(g_mine, b.grad, rtol=1e-4, atol=1e-5)


def test_cross_entropy_grad_matches_autograd():
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(4, 9, generator=gen)
    labels = torch.randint(0, 4, (9,), generator=gen)
    onehot_t = torch.nn.functional.one_hot(labels, 4).t().float()
    weights = torch.rand(9, generator=gen) * 2
    for w in (None, weights):
        grad = torch.empty(4, 9)
        loss_sum = _cross_entropy_grad(logits, onehot_t, w, grad)
        leaf = logits.clone().requires_grad_(True)
        per_row = torch.nn.functional.cross_entropy(leaf.t(), labels, reduction="none")
        w_ref = torch.ones(9) if w is None else w
        (per_row * w_ref).mean().backward()
        assert loss_sum == pytest.approx(float((per_row * w_ref).sum().detach()), rel=1e-5)
        torch.testing.assert_close(grad, leaf.grad, rtol=1e-5, atol=1e-7)


def test_dueling_mse_grad_matches_autograd():
    gen = torch.Generator().manual_seed(2)
    K, B = 5, 13
    out_t = torch.randn(K + 1, B, generator=gen)
    actions = torch.randint(0, K, (B,), generator=gen)
    targets = torch.randn(B, generator=gen)
    centred = torch.nn.functional.one_hot(actions, K).t().float() - 1.0 / K
    grad = torch.empty(K + 1, B)
    loss_sum = _dueling_mse_grad(out_t, centred, targets, grad)

    leaf = out_t.clone().requires_grad_(True)
    V, A = leaf[0], leaf[1:]
    Q = V[None, :] + A - A.mean(dim=0, keepdim=True)  # (K, B)
    q_sa = Q.gather(0, actions[None, :])[0]
    ((q_sa - targets) ** 2).mean().backward()
    assert loss_sum == pytest.approx(float(((q_sa - targets) ** 2).sum().detach()), rel=1e-5)
    torch.testing.assert_close(grad, leaf.grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_flat_adam_matches_torch_adam(weight_decay, fused):
    if fused and not hasattr(torch, "_fused_adam_"):
        pytest.skip("this torch has no fused Adam kernel")
    gen = torch.Generator().manual_seed(3)
    p0 = torch.randn(20, generator=gen)
    grads = [torch.randn(20, generator=gen) for _ in range(6)]
    mine = p0.clone()
    adam = _FlatAdam(20, 0.01, weight_decay=weight_decay, fused=fused)
    ref = p0.clone().requires_grad_(True)
    opt = torch.optim.Adam([ref], lr=0.01, weight_decay=weight_decay, foreach=False)
    for g in grads:
        adam.step(mine, g.clone())
        ref.grad = g.clone()
        opt.step()
    torch.testing.assert_close(mine, ref.detach(), rtol=1e-6, atol=1e-7)
    assert adam.fused == fused


# --------------------------------------------------------------------------------------------
# MLPClassifier
# --------------------------------------------------------------------------------------------
def test_mlp_learns_known_softmax_policy():
    X, y, _ = softmax_policy_data(4000, seed=0)
    X_test, y_test, log_pi_test = softmax_policy_data(4000, seed=1)
    clf = MLPClassifier(hidden_layer_sizes=(32, 32), max_epochs=30, random_state=0).fit(X, y)
    rows = np.arange(len(y_test))
    model_nll = -clf.predict_log_proba(X_test)[rows, y_test].mean()
    true_nll = -log_pi_test[rows, y_test].mean()
    # the true policy's NLL is ~0.8; a 4000-row fit should be within 0.05 nats of it
    assert true_nll - 0.02 < model_nll < true_nll + 0.05
    assert len(clf.loss_curve_) == 30 == clf.n_iter_
    assert clf.loss_curve_[-1] < clf.loss_curve_[0]


def test_mlp_probabilities_valid_and_consistent():
    X, y, _ = softmax_policy_data(600, seed=2)
    clf = MLPClassifier(max_epochs=5, random_state=0).fit(X, y)
    proba = clf.predict_proba(X)
    assert proba.shape == (600, 3) and proba.dtype == np.float64
    assert np.all(np.isfinite(proba)) and np.all(proba >= 0) and np.all(proba <= 1)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.log(proba), clf.predict_log_proba(X), atol=1e-10)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[proba.argmax(axis=1)])
    module = clf.to_torch()
    logits = module(torch.as_tensor(X, dtype=torch.float32)).detach().numpy()
    np.testing.assert_allclose(log_softmax(logits, axis=1), clf.predict_log_proba(X), atol=1e-5)


def test_mlp_string_labels_round_trip():
    X, codes, _ = softmax_policy_data(500, seed=3)
    names = np.array(["left", "right", "stay"])
    clf = MLPClassifier(max_epochs=3, random_state=0).fit(X, names[codes])
    np.testing.assert_array_equal(clf.classes_, names)
    assert set(clf.predict(X)) <= set(names)
    assert clf.predict_proba(X).shape == (500, 3)


def test_mlp_clone_and_get_params():
    clf = MLPClassifier(hidden_layer_sizes=(8,), max_epochs=2, random_state=7)
    params = clf.get_params()
    assert params["hidden_layer_sizes"] == (8,) and params["random_state"] == 7
    assert set(params) == {
        "hidden_layer_sizes", "learning_rate", "batch_size", "max_epochs",
        "weight_decay", "standardize", "random_state", "verbose",
    }  # fmt: skip
    X, y, _ = softmax_policy_data(200, seed=4)
    clf.fit(X, y)
    fresh = clone(clf)
    assert fresh.get_params() == params
    assert not hasattr(fresh, "classes_")
    with pytest.raises(NotFittedError):
        fresh.predict_proba(X)


def test_mlp_sklearn_fit_free_checks():
    from sklearn.utils.estimator_checks import (
        check_get_params_invariance,
        check_no_attributes_set_in_init,
        check_parameters_default_constructible,
    )

    for est in (MLPClassifier(), DuelingQNetwork()):
        name = type(est).__name__
        check_no_attributes_set_in_init(name, est)
        check_get_params_invariance(name, est)
        check_parameters_default_constructible(name, est)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")
def test_mlp_passes_sklearn_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator

    expected = {
        # mini-batch SGD: weight 2 is not the same as a duplicated row
        "check_sample_weight_equivalence_on_dense_data": "stochastic mini-batch training",
    }
    results = check_estimator(
        MLPClassifier(max_epochs=20, random_state=0), expected_failed_checks=expected, on_fail=None
    )
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"]
    assert not failed


def test_mlp_same_random_state_same_probabilities():
    X, y, _ = softmax_policy_data(700, seed=5)
    p1 = MLPClassifier(max_epochs=4, random_state=3).fit(X, y).predict_proba(X)
    p2 = MLPClassifier(max_epochs=4, random_state=3).fit(X, y).predict_proba(X)
    p3 = MLPClassifier(max_epochs=4, random_state=4).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(p1, p2)
    assert not np.allclose(p1, p3)


def test_mlp_does_not_modify_inputs_and_restores_threads():
    X, y, _ = softmax_policy_data(300, seed=6)
    w = np.random.default_rng(0).random(300)
    X0, y0, w0 = X.copy(), y.copy(), w.copy()
    threads = torch.get_num_threads()
    clf = MLPClassifier(max_epochs=2, random_state=0).fit(X, y, sample_weight=w)
    clf.predict_proba(X)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(w, w0)
    assert torch.get_num_threads() == threads


def test_mlp_sample_weight_shifts_probabilities():
    X, y, _ = softmax_policy_data(1500, seed=7)
    w = np.where(y == 0, 5.0, 1.0)
    plain = MLPClassifier(max_epochs=10, random_state=0).fit(X, y).predict_proba(X)[:, 0].mean()
    weighted = MLPClassifier(max_epochs=10, random_state=0).fit(X, y, sample_weight=w).predict_proba(X)[:, 0].mean()
    assert weighted > plain + 0.1


def test_mlp_input_errors_name_the_argument():
    X, y, _ = softmax_policy_data(50, seed=8)
    clf = MLPClassifier(max_epochs=1, random_state=0)
    X_nan = X.copy()
    X_nan[3, 1] = np.nan
    with pytest.raises(ValueError, match="X"):
        clf.fit(X_nan, y)
    with pytest.raises(ValueError, match="y has 49 rows but X has 50"):
        clf.fit(X, y[:-1])
    with pytest.raises(ValueError, match="sample_weight"):
        clf.fit(X, y, sample_weight=np.ones(10))
    with pytest.raises(ValueError, match="sample_weight"):
        clf.fit(X, y, sample_weight=-np.ones(50))
    with pytest.raises(ValueError, match="two classes"):
        clf.fit(X, np.zeros(50))
    with pytest.raises(ValueError, match="hidden_layer_sizes"):
        MLPClassifier(hidden_layer_sizes=(0,)).fit(X, y)
    with pytest.raises(ValueError, match="learning_rate"):
        MLPClassifier(learning_rate=-1).fit(X, y)
    clf.fit(X, y)
    with pytest.raises(ValueError, match="X has 2 features"):
        clf.predict_proba(X[:, :2])
    with pytest.raises(ValueError, match="X"):
        clf.predict_proba(X_nan)


def test_mlp_pickle_round_trip():
    X, y, _ = softmax_policy_data(300, seed=9)
    clf = MLPClassifier(max_epochs=2, random_state=0).fit(X, y)
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict_proba(X), clf.predict_proba(X))


# --------------------------------------------------------------------------------------------
# DuelingQNetwork
# --------------------------------------------------------------------------------------------
def _train_mse(model, S, a, y):
    return np.mean((model.predict_q(S)[np.arange(len(a)), a] - y) ** 2)


def test_dueling_repeated_fit_q_drives_mse_down():
    S, a, y, K = q_target_data(2000, seed=0)
    model = DuelingQNetwork(hidden_layer_sizes=(64, 64), epochs_per_iteration=2, random_state=0)
    mse = []
    for _ in range(8):
        model.fit_q(S, a, y, K)
        mse.append(_train_mse(model, S, a, y))
    assert mse[7] < mse[3] < mse[0]
    assert mse[-1] < 0.05 * y.var()
    assert model.n_iter_ == 8 and len(model.loss_curve_) == 16


def test_dueling_predict_q_shape_and_identity():
    S, a, y, K = q_target_data(500, seed=1)
    model = DuelingQNetwork(hidden_layer_sizes=(16,), random_state=0).fit_q(S, a, y, K)
    S_new = np.random.default_rng(5).normal(size=(37, S.shape[1]))
    Q = model.predict_q(S_new)
    assert Q.shape == (37, K) and Q.dtype == np.float64 and np.all(np.isfinite(Q))
    V, A = model.predict_components(S_new)
    assert V.shape == (37,) and A.shape == (37, K)
    # Q = V + A - mean_a A, hence mean_a Q = V
    np.testing.assert_allclose(Q.mean(axis=1), V, atol=1e-8)
    np.testing.assert_allclose(Q - V[:, None], A - A.mean(axis=1, keepdims=True), atol=1e-8)
    module = model.to_torch()
    np.testing.assert_allclose(
        module(torch.as_tensor(S_new, dtype=torch.float32)).detach().numpy(), Q, atol=1e-5
    )


def test_dueling_warm_start_continues():
    S, a, y, K = q_target_data(1000, seed=2)
    model = DuelingQNetwork(hidden_layer_sizes=(32, 32), epochs_per_iteration=1, random_state=0)
    model.fit_q(S, a, y, K)
    mse1 = _train_mse(model, S, a, y)
    steps1 = model._adam.step_count
    model.fit_q(S, a, y, K)
    mse2 = _train_mse(model, S, a, y)
    assert mse2 < mse1
    assert model._adam.step_count == 2 * steps1  # same optimizer, continued
    # a fresh clone run once reproduces the first state, not the second
    fresh = clone(model).fit_q(S, a, y, K)
    assert _train_mse(fresh, S, a, y) == pytest.approx(mse1, rel=1e-12)


def test_dueling_reproducible_and_pickle_resumes():
    S, a, y, K = q_target_data(600, seed=3)
    m1 = DuelingQNetwork(hidden_layer_sizes=(16, 16), random_state=11)
    m2 = clone(m1)
    for _ in range(2):
        m1.fit_q(S, a, y, K)
        m2.fit_q(S, a, y, K)
    np.testing.assert_array_equal(m1.predict_q(S), m2.predict_q(S))
    m3 = pickle.loads(pickle.dumps(m1))
    m1.fit_q(S, a, y + 1.0, K)
    m3.fit_q(S, a, y + 1.0, K)
    np.testing.assert_array_equal(m1.predict_q(S), m3.predict_q(S))
    m5 = copy.deepcopy(m1)  # e.g. an FQE loop keeping the best iterate
    m1.fit_q(S, a, y, K)
    m5.fit_q(S, a, y, K)
    np.testing.assert_array_equal(m1.predict_q(S), m5.predict_q(S))
    m4 = DuelingQNetwork(hidden_layer_sizes=(16, 16), random_state=12).fit_q(S, a, y, K)
    assert not np.allclose(m4.predict_q(S), m2.predict_q(S))


def test_dueling_input_errors():
    S, a, y, K = q_target_data(100, seed=4)
    model = DuelingQNetwork(hidden_layer_sizes=(8,), random_state=0)
    with pytest.raises(NotFittedError):
        model.predict_q(S)
    with pytest.raises(ValueError, match="targets has 99 rows but states has 100"):
        model.fit_q(S, a, y[:-1], K)
    with pytest.raises(ValueError, match="actions"):
        model.fit_q(S, a + K, y, K)
    y_nan = y.copy()
    y_nan[0] = np.nan
    with pytest.raises(ValueError, match="targets"):
        model.fit_q(S, a, y_nan, K)
    with pytest.raises(ValueError, match="n_actions"):
        model.fit_q(S, a, y, 0)
    model.fit_q(S, a, y, K)
    with pytest.raises(ValueError, match="n_actions"):
        model.fit_q(S, a, y, K + 1)
    with pytest.raises(ValueError, match="states has 2 features"):
        model.fit_q(S[:, :2], a, y, K)
    with pytest.raises(ValueError, match="states has 2 features"):
        model.predict_q(S[:, :2])


def test_fqe_like_loop_with_dueling_network():
    """Ten Bellman iterations y = u + gamma * mean_a' Q(s', a') on a small random data set."""
    rng = np.random.default_rng(0)
    n, d, K, gamma = 400, 3, 4, 0.9
    S = rng.normal(size=(n, d))
    a = rng.integers(0, K, n)
    S_next = S + 0.1 * rng.normal(size=(n, d))
    u = -np.abs(S[:, 0]) - 0.2 * a
    model = clone(DuelingQNetwork(hidden_layer_sizes=(32, 32), epochs_per_iteration=2, random_state=0))
    Q_next = np.zeros((n, K))
    for _ in range(10):
        model.fit_q(S, a, u + gamma * Q_next.mean(axis=1), K)
        Q_next = model.predict_q(S_next)
    assert Q_next.shape == (n, K) and np.all(np.isfinite(Q_next))
    bound = np.abs(u).max() / (1 - gamma)
    assert np.all(np.abs(Q_next) < bound)
    assert Q_next.mean() < u.mean()  # values accumulate the (negative) rewards


def test_import_genpqr_does_not_import_torch():
    code = (
        "import sys, genpqr, genpqr.models.nn, genpqr.models.boosting; "
        "assert 'torch' not in sys.modules and 'lightgbm' not in sys.modules, "
        "[m for m in ('torch', 'lightgbm') if m in sys.modules]"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

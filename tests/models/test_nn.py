"""Tests of genpqr.models._nn: MLPClassifier (behaviour cloning) and DuelingQNetwork (native Q-model
for fitted Q evaluation), trained by autograd and torch.optim; the ``device`` parameter."""

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
from genpqr.models._nn import DuelingQNetwork, MLPClassifier  # noqa: E402
from genpqr.models._torch_modules import MLP  # noqa: E402


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
# training equals a plain torch reference (nn.Linear + autograd + torch.optim.Adam)
# --------------------------------------------------------------------------------------------
def _reference_layers(network):
    """nn.Linear copies of a fitted network's layers (float64)."""
    layers = []
    for W, b in zip(network.weights, network.biases):
        linear = torch.nn.Linear(W.shape[1], W.shape[0]).double()
        with torch.no_grad():
            linear.weight.copy_(W)
            linear.bias.copy_(b)
        layers.append(linear)
    return layers


def _reference_forward(layers, x):
    for layer in layers[:-1]:
        x = torch.relu(layer(x))
    return layers[-1](x)


def _initial_network(sizes, seed):
    """The network a model with ``random_state=seed`` starts from (its generator's first draws)."""
    return MLP(sizes, torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("weighted", [False, True])
def test_mlp_full_batch_epochs_equal_torch_reference(weighted):
    """Full-batch epochs of MLPClassifier are Adam steps on the (weighted) mean cross-entropy."""
    X, y, _ = softmax_policy_data(60, seed=10)
    w = np.random.default_rng(1).uniform(0.2, 3.0, 60) if weighted else None
    params = dict(hidden_layer_sizes=(6, 5), batch_size=60, weight_decay=0.01, random_state=3)
    layers = _reference_layers(_initial_network((4, 6, 5, 3), 3))
    clf = MLPClassifier(max_epochs=3, learning_rate=0.05, **params).fit(X, y, sample_weight=w)
    Z = torch.as_tensor((X - clf.mean_) / clf.scale_)
    weights = torch.ones(60, dtype=torch.float64) if w is None else torch.as_tensor(w / w.mean())
    opt = torch.optim.Adam([p for layer in layers for p in layer.parameters()], lr=0.05, weight_decay=0.01)
    losses = []
    for _ in range(3):
        loss = (torch.nn.functional.cross_entropy(_reference_forward(layers, Z), torch.as_tensor(y),
                                                  reduction="none") * weights).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    np.testing.assert_allclose(clf.loss_curve_, losses, rtol=1e-5)
    for mine, ref in zip(clf.network_.weights + clf.network_.biases,
                         [layer.weight for layer in layers] + [layer.bias for layer in layers]):
        np.testing.assert_allclose(mine.numpy(), ref.detach().numpy(), atol=2e-5)


def test_dueling_full_batch_epochs_equal_torch_reference():
    """Full-batch epochs of DuelingQNetwork are Adam steps on mean (V + A - mean A - y)^2 at the taken actions."""
    S, a, y, K = q_target_data(50, seed=11)
    params = dict(hidden_layer_sizes=(7,), batch_size=50, random_state=4)
    layers = _reference_layers(_initial_network((3, 7, K + 1), 4))
    model = DuelingQNetwork(epochs_per_iteration=2, learning_rate=0.05, **params)
    model.fit_q(S, a, y, K).fit_q(S, a, y + 1.0, K)
    Z = torch.as_tensor((S - model.mean_) / model.scale_)
    opt = torch.optim.Adam([p for layer in layers for p in layer.parameters()], lr=0.05)
    losses = []
    for target in (y, y, y + 1.0, y + 1.0):
        out = _reference_forward(layers, Z)
        q = out[:, :1] + out[:, 1:] - out[:, 1:].mean(dim=1, keepdim=True)
        loss = ((q[torch.arange(50), torch.as_tensor(a)] - torch.as_tensor(target)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    np.testing.assert_allclose(model.loss_curve_, losses, rtol=1e-5)
    for mine, ref in zip(model.network_.weights, [layer.weight for layer in layers]):
        np.testing.assert_allclose(mine.numpy(), ref.detach().numpy(), atol=2e-5)


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
        "weight_decay", "standardize", "random_state", "verbose", "device",
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
    steps1 = model._optimizer.step_count
    model.fit_q(S, a, y, K)
    mse2 = _train_mse(model, S, a, y)
    assert mse2 < mse1
    assert steps1 == 4  # ceil(1000 / 256) updates per epoch
    assert model._optimizer.step_count == 2 * steps1  # same optimizer, continued
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


def test_dueling_fqe_reaches_the_exact_tabular_q():
    """FQE with the dueling network on one-hot states of a small deterministic MDP whose every
    (state, action) is logged reaches the exact Q^mu = (I - gamma P_mu)^-1 u (to 1e-4)."""
    S, K, gamma = 4, 3, 0.5
    rng = np.random.default_rng(0)
    nxt = rng.integers(0, S, size=(S, K))
    u = rng.normal(size=(S, K))
    mu = rng.dirichlet(np.ones(K), size=S)
    P = np.zeros((S * K, S))
    P[np.arange(S * K), nxt.ravel()] = 1.0
    M = np.zeros((S, S * K))
    for s in range(S):
        M[s, s * K:(s + 1) * K] = mu[s]
    Q_exact = np.linalg.solve(np.eye(S * K) - gamma * P @ M, u.ravel()).reshape(S, K)
    reps = 16
    s_idx, a_idx = np.repeat(np.arange(S), K * reps), np.tile(np.repeat(np.arange(K), reps), S)
    s_next = nxt[s_idx, a_idx]
    model = DuelingQNetwork(hidden_layer_sizes=(32,), batch_size=64, epochs_per_iteration=10, learning_rate=1e-2,
                            standardize=False, random_state=0)
    Q_next = np.zeros((s_idx.size, K))
    for _ in range(25):  # gamma^25 ~ 3e-8
        model.fit_q(np.eye(S)[s_idx], a_idx, u[s_idx, a_idx] + gamma * (Q_next * mu[s_next]).sum(axis=1), K)
        Q_next = model.predict_q(np.eye(S)[s_next])
    np.testing.assert_allclose(model.predict_q(np.eye(S)), Q_exact, atol=1e-4)


def test_mlp_without_hidden_layers_recovers_the_logistic_policy():
    """hidden_layer_sizes=() is multinomial logistic regression: on data from a softmax-linear
    policy its test log loss is within 0.02 nats of the true policy's."""
    X, y, _ = softmax_policy_data(6000, seed=12)
    X_test, y_test, log_pi_test = softmax_policy_data(4000, seed=13)
    clf = MLPClassifier(hidden_layer_sizes=(), max_epochs=30, random_state=0).fit(X, y)
    rows = np.arange(len(y_test))
    model_nll = -clf.predict_log_proba(X_test)[rows, y_test].mean()
    true_nll = -log_pi_test[rows, y_test].mean()
    assert abs(model_nll - true_nll) < 0.02


# --------------------------------------------------------------------------------------------
# device
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [lambda **kw: MLPClassifier(max_epochs=1, **kw),
                                  lambda **kw: DuelingQNetwork(epochs_per_iteration=1, **kw)])
def test_device_round_trips_and_auto_resolves(make):
    model = make(device="auto", random_state=0)
    assert model.get_params()["device"] == "auto" and clone(model).get_params()["device"] == "auto"
    assert make().get_params()["device"] == "cpu"
    S, a, y, K = q_target_data(64, seed=5)
    fitted = model.fit(S, a) if isinstance(model, MLPClassifier) else model.fit_q(S, a, y, K)
    assert fitted.device_ == ("cuda" if torch.cuda.is_available() else "cpu")
    again = pickle.loads(pickle.dumps(fitted))
    assert next(again.network_.parameters()).device.type == "cpu"


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "", 0, None])
def test_invalid_device_is_named(device):
    X, y, _ = softmax_policy_data(40, seed=14)
    with pytest.raises(ValueError, match="device must be 'cpu', 'cuda', 'cuda:N' or 'auto'"):
        MLPClassifier(max_epochs=1, device=device).fit(X, y)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_cuda_says_so():
    X, y, _ = softmax_policy_data(40, seed=15)
    S, a, t, K = q_target_data(40, seed=15)
    for device in ("cuda", "cuda:0"):
        with pytest.raises(ValueError, match="CUDA is not available"):
            MLPClassifier(max_epochs=1, device=device).fit(X, y)
        with pytest.raises(ValueError, match="CUDA is not available"):
            DuelingQNetwork(device=device).fit_q(S, a, t, K)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fit_matches_cpu_and_pickles_to_cpu():
    S, a, y, K = q_target_data(300, seed=16)
    cpu = DuelingQNetwork(hidden_layer_sizes=(16,), random_state=0).fit_q(S, a, y, K)
    gpu = DuelingQNetwork(hidden_layer_sizes=(16,), random_state=0, device="cuda").fit_q(S, a, y, K)
    np.testing.assert_allclose(gpu.predict_q(S), cpu.predict_q(S), atol=1e-3)  # same draws, other kernels
    loaded = pickle.loads(pickle.dumps(gpu))
    assert next(loaded.network_.parameters()).device.type == "cpu"
    np.testing.assert_allclose(loaded.predict_q(S), gpu.predict_q(S), atol=1e-5)
    loaded.fit_q(S, a, y, K)  # moves back to the GPU and continues
    assert next(loaded.network_.parameters()).device.type == "cuda"
    X, codes, _ = softmax_policy_data(300, seed=17)
    clf = MLPClassifier(max_epochs=3, random_state=0, device="cuda").fit(X, codes)
    assert clf.device_ == "cuda" and next(clf.network_.parameters()).device.type == "cpu"
    ref = MLPClassifier(max_epochs=3, random_state=0).fit(X, codes)
    np.testing.assert_allclose(clf.predict_proba(X), ref.predict_proba(X), atol=1e-3)


def test_import_genpqr_does_not_import_torch():
    code = (
        "import sys, genpqr, genpqr.models._nn, genpqr.models._qnetwork, genpqr.models._torch_training, "
        "genpqr.models._boosting; "
        "assert 'torch' not in sys.modules and 'lightgbm' not in sys.modules, "
        "[m for m in ('torch', 'lightgbm') if m in sys.modules]"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

"""Tests of genpqr.models._torch_training (device argument, optimizers, state on CPU) and of the
neural densities' training on it (genpqr.models._neural_densities)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from genpqr.models._neural_densities import MixtureDensityNetwork, MLPGaussianDensity  # noqa: E402
from genpqr.models._torch_training import make_optimizer, resolve_device  # noqa: E402


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(" CPU ") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    for bad in ("gpu", "cuda:", "cuda:-1", "mps", 3, None):
        with pytest.raises(ValueError, match="my_device must be 'cpu', 'cuda', 'cuda:N' or 'auto'"):
            resolve_device(bad, name="my_device")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_resolve_device_without_cuda():
    with pytest.raises(ValueError, match=r"device='cuda:1' asks for a GPU but CUDA is not available"):
        resolve_device("cuda:1")


@pytest.mark.parametrize("kind, weight_decay", [("adam", 0.0), ("adam", 0.05), ("adagrad", 0.0), ("adagrad", 0.05)])
def test_optimizer_equals_torch_optim(kind, weight_decay):
    """The functional-API optimizer makes exactly torch.optim.Adam's / Adagrad's updates."""
    gen = torch.Generator().manual_seed(0)
    shapes = [(4, 3), (3,), (2, 4)]
    start = [torch.randn(s, generator=gen) for s in shapes]
    grads = [[torch.randn(s, generator=gen) for s in shapes] for _ in range(5)]
    mine = [t.clone().requires_grad_(True) for t in start]
    ref = [t.clone().requires_grad_(True) for t in start]
    opt = make_optimizer(kind, mine, lr=0.03, weight_decay=weight_decay)
    cls = torch.optim.Adam if kind == "adam" else torch.optim.Adagrad
    opt_ref = cls(ref, lr=0.03, weight_decay=weight_decay, foreach=False)
    for step in grads:
        opt.zero_grad()
        for p, q, g in zip(mine, ref, step):
            p.grad, q.grad = g.clone(), g.clone()
        opt.step()
        opt_ref.step()
    assert opt.step_count == 5 and opt.fused
    for p, q in zip(mine, ref):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="kind must be 'adam' or 'adagrad'"):
        make_optimizer("sgd", mine, lr=0.1)


def test_fitting_does_not_import_dynamo():
    """A fit imports neither torch._dynamo (1-2 s) nor anything beyond torch itself for its optimizer."""
    import subprocess
    import sys

    code = ("import sys, numpy as np, torch; from genpqr.models._nn import MLPClassifier, DuelingQNetwork; "
            "X = np.random.default_rng(0).normal(size=(50, 2)); y = (X[:, 0] > 0).astype(int); "
            "MLPClassifier(max_epochs=1).fit(X, y); DuelingQNetwork(epochs_per_iteration=1).fit_q(X, y, X[:, 1], 2); "
            "assert 'torch._dynamo' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def _mdn_data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 1))
    A = (np.where(rng.random(n) < 0.5, -1.0, 1.0) + 0.3 * X[:, 0] + 0.2 * rng.normal(size=n))[:, None]
    return X, A


def test_mdn_nll_is_the_mixture_density():
    """The training loss (torch.distributions) equals the mixture formula written out in numpy."""
    X, A = _mdn_data()
    mdn = MixtureDensityNetwork(n_components=3, hidden_layer_sizes=(8,), max_epochs=2, random_state=0).fit(X, A)
    Xs = torch.as_tensor((X - mdn.state_mean_) / mdn.state_scale_)
    As = torch.as_tensor((A - mdn.action_mean_) / mdn.action_scale_)
    with torch.no_grad():
        nll = mdn._nll(Xs, As).numpy()
        log_w, means, log_sd = (t.numpy() for t in mdn._params(Xs))
    z = (As.numpy()[:, None, :] - means) / np.exp(log_sd)
    comp = (-0.5 * z**2 - log_sd - 0.5 * np.log(2 * np.pi)).sum(axis=2)
    expected = -np.log(np.exp(log_w + comp).sum(axis=1))
    np.testing.assert_allclose(nll, expected, rtol=1e-10, atol=1e-10)


def test_density_fit_leaves_global_rng_alone_and_is_seeded():
    X, A = _mdn_data()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    first = MLPGaussianDensity(hidden_layer_sizes=(8,), max_epochs=3, random_state=5).fit(X, A)
    assert torch.equal(torch.rand(3), expected)
    second = MLPGaussianDensity(hidden_layer_sizes=(8,), max_epochs=3, random_state=5).fit(X, A)
    np.testing.assert_array_equal(first.log_prob(X, A), second.log_prob(X, A))


def test_density_device_round_trips_and_pickles():
    X, A = _mdn_data()
    mdn = MixtureDensityNetwork(n_components=2, hidden_layer_sizes=(8,), max_epochs=2, random_state=0, device="auto")
    assert mdn.get_params()["device"] == "auto"
    mdn.fit(X, A)
    assert next(mdn.module_.parameters()).device.type == "cpu"
    again = pickle.loads(pickle.dumps(mdn))
    np.testing.assert_array_equal(again.log_prob(X, A), mdn.log_prob(X, A))


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_density_cuda_without_cuda_says_so():
    X, A = _mdn_data(50)
    with pytest.raises(ValueError, match="CUDA is not available"):
        MixtureDensityNetwork(max_epochs=1, device="cuda").fit(X, A)

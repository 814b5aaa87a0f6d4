"""Shared machinery of the PyTorch models: argument checks, the ``device`` argument, thread and
determinism settings, standardization, mini-batches, optimizers, and evaluation of fitted networks.

PyTorch is an optional dependency: this module imports it only inside its functions, so that
importing ``genpqr`` (or ``genpqr.models._nn``) never imports torch.

Conventions shared by every torch model of the library (:class:`~genpqr.models.MLPClassifier`,
:class:`~genpqr.models.DuelingQNetwork`, the neural densities, the AIRL, MaxEnt-IRL and
DeepPQR baselines):

* gradients come from ``torch.autograd`` and updates from ``torch.optim``'s Adam / Adagrad (its
  functional API, with the fused kernel where the device has one: ``FusedOptimizer``);
* every random draw (initial weights, shuffles, samples) comes from one CPU ``torch.Generator``
  seeded from ``random_state``, so a seed gives the same draws on every device; on CPU, training
  runs on one torch thread (``MAX_TRAIN_THREADS``) and is bit-for-bit reproducible; on CUDA,
  ``torch.use_deterministic_algorithms`` is switched on while a model trains;
* ``device`` is ``"cpu"`` (default), ``"cuda"``, ``"cuda:N"`` or ``"auto"`` (CUDA when available);
* fitted parameters that are kept between calls live on CPU in a pickle or a copy, so a model
  fitted on a GPU loads on a machine without one.
"""

from __future__ import annotations

import copy
import math
import numbers
import os
from contextlib import contextmanager

import numpy as np

from ..data._validation import as_float_array, seed_from

#: Rows per chunk when predicting (bounds memory for large inputs).
PREDICT_CHUNK = 16384
#: Upper bound on torch's threads while a model trains or predicts (restored afterwards). At
#: these sizes a second OpenMP thread costs more than it gains (behaviour cloning on 10,000 rows:
#: 0.31 s on one thread, 0.60 s on two, idle two-core machine), it is far worse when another
#: process shares the cores (seeds run in parallel, pytest -n 2), and one thread also makes
#: results independent of the machine's core count.
MAX_TRAIN_THREADS = 1


# --------------------------------------------------------------------------------------------
# torch, threads, devices
# --------------------------------------------------------------------------------------------
def import_torch():
    """``torch``, with an install hint when it is missing."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised only without torch
        raise ImportError(
            "genpqr's neural models need PyTorch, which is an optional dependency: "
            "install it with `pip install 'genpqr[torch]'`"
        ) from exc
    return torch


@contextmanager
def torch_threads(n_threads: int):
    """Run the block with ``torch.get_num_threads() <= n_threads``, restoring it afterwards."""
    torch = import_torch()
    before = torch.get_num_threads()
    target = max(1, min(before, n_threads))
    if target != before:
        torch.set_num_threads(target)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def resolve_device(device, name: str = "device"):
    """The ``torch.device`` named by a model's ``device`` parameter.

    Parameters
    ----------
    device : {"cpu", "cuda", "cuda:N", "auto"} or torch.device
        ``"auto"`` is CUDA when ``torch.cuda.is_available()``, else CPU.
    name : str
        Parameter name used in error messages.

    Raises
    ------
    ValueError
        For anything else, and for a CUDA device when CUDA is not available or the index is
        out of range.
    """
    torch = import_torch()
    if isinstance(device, torch.device):
        device = str(device)
    if not isinstance(device, str):
        raise ValueError(f"{name} must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {device!r}")
    text = device.strip().lower()
    if text == "auto":
        text = "cuda" if torch.cuda.is_available() else "cpu"
    if text == "cpu":
        return torch.device("cpu")
    index = text[5:] if text.startswith("cuda:") else None
    if text != "cuda" and not (index is not None and index.isdigit()):
        raise ValueError(f"{name} must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {device!r}")
    if not torch.cuda.is_available():
        raise ValueError(
            f"{name}={device!r} asks for a GPU but CUDA is not available (torch.cuda.is_available() is False); "
            f"use {name}='cpu', or {name}='auto' to take a GPU only when there is one"
        )
    if index is not None and int(index) >= torch.cuda.device_count():
        raise ValueError(f"{name}={device!r}: only {torch.cuda.device_count()} CUDA device(s) are visible")
    # deterministic cuBLAS needs this before the first CUDA matrix product (PyTorch's advice)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    return torch.device(text)


@contextmanager
def training_session(device):
    """One torch thread (CPU work) and, on CUDA, deterministic algorithms; restored afterwards."""
    torch = import_torch()
    with torch_threads(MAX_TRAIN_THREADS):
        if device.type != "cuda":
            yield
            return
        enabled = torch.are_deterministic_algorithms_enabled()
        warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            yield
        finally:
            torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


def fresh_seed(random_state) -> int:
    """An int seed for a torch.Generator: from ``random_state``, or fresh entropy if None."""
    seed = seed_from(random_state)
    if seed is None:
        seed = int(np.random.default_rng().integers(0, 2**63 - 1))
    return seed


def seeded_generator(random_state):
    """A CPU ``torch.Generator`` seeded from ``random_state`` (the source of every random draw)."""
    return import_torch().Generator().manual_seed(fresh_seed(random_state))


# --------------------------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------------------------
def check_hidden_layer_sizes(hidden_layer_sizes) -> tuple[int, ...]:
    """A tuple of positive ints (an int means one layer; ``()`` means none)."""
    if isinstance(hidden_layer_sizes, numbers.Integral) and not isinstance(hidden_layer_sizes, bool):
        hidden_layer_sizes = (hidden_layer_sizes,)
    try:
        sizes = tuple(hidden_layer_sizes)
    except TypeError:
        raise TypeError(
            f"hidden_layer_sizes must be a tuple of positive ints, got {hidden_layer_sizes!r}"
        ) from None
    if not all(isinstance(h, numbers.Integral) and not isinstance(h, bool) and h > 0 for h in sizes):
        raise ValueError(f"hidden_layer_sizes must be a tuple of positive ints, got {hidden_layer_sizes!r}")
    return tuple(int(h) for h in sizes)


def check_positive(value, name: str, *, integer: bool = False, allow_zero: bool = False):
    """A finite number (or int) ``> 0`` (``>= 0`` with ``allow_zero``), else ValueError naming it."""
    kind = numbers.Integral if integer else numbers.Real
    ok = isinstance(value, kind) and not isinstance(value, bool)
    if ok:
        ok = value >= 0 if allow_zero else value > 0
        ok = ok and math.isfinite(value)
    if not ok:
        what = "an integer" if integer else "a number"
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {what} {bound}, got {value!r}")
    return int(value) if integer else float(value)


def n_rows(a) -> int | None:
    """Leading dimension of an array-like (None for a scalar)."""
    shape = getattr(a, "shape", None)
    if shape is None:
        shape = np.asarray(a).shape
    return int(shape[0]) if len(shape) else None


def check_features(X, n_features: int, name: str) -> np.ndarray:
    """A finite float (m, n_features) array, else ValueError naming ``name``."""
    X = as_float_array(X, name, ndim=2)
    if X.shape[1] != n_features:
        raise ValueError(f"{name} has {X.shape[1]} features (columns) but the model was fitted with {n_features}")
    return X


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------
def standardization(X: np.ndarray, standardize: bool) -> tuple[np.ndarray, np.ndarray]:
    """Training mean and scale (std, with constant columns given scale 1)."""
    if not standardize:
        return np.zeros(X.shape[1]), np.ones(X.shape[1])
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    scale[~(scale > 1e-12 * np.maximum(1.0, np.abs(mean)))] = 1.0
    return mean, scale


def to_tensor(X: np.ndarray, mean: np.ndarray, scale: np.ndarray, device=None):
    """Standardized float32 tensor of ``X`` on ``device`` (the input is never modified)."""
    torch = import_torch()
    Z = ((X - mean) / scale).astype(np.float32)
    out = torch.from_numpy(np.ascontiguousarray(Z))
    return out if device is None else out.to(device)


def batches(n: int, batch_size: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` slices of ``range(n)`` of ``batch_size`` rows (the last may be shorter)."""
    return [(start, min(start + batch_size, n)) for start in range(0, n, batch_size)]


def batch_mean(losses: list, n: int, batch_size: int) -> float:
    """The mean over ``n`` rows of per-batch mean losses (tensors) of :func:`batches`' slices
    (one synchronisation per epoch on a GPU)."""
    torch = import_torch()
    sizes = torch.tensor([stop - start for start, stop in batches(n, batch_size)], dtype=torch.float64)
    return float(torch.stack(losses).double().cpu() @ sizes) / n


def permutation(n: int, generator, device):
    """A random permutation of ``range(n)`` drawn on CPU from ``generator``, on ``device``."""
    perm = import_torch().randperm(n, generator=generator)
    return perm if device.type == "cpu" else perm.to(device)


# --------------------------------------------------------------------------------------------
# optimizers
# --------------------------------------------------------------------------------------------
class FusedOptimizer:
    """Adam or Adagrad on a fixed list of parameters, updated by ``torch.optim``'s functional API.

    The update is ``torch.optim.adam.adam`` / ``torch.optim.adagrad.adagrad`` -- the arithmetic of
    ``torch.optim.Adam`` / ``torch.optim.Adagrad`` with their defaults (betas (0.9, 0.999), eps
    1e-8 for Adam; no lr decay, eps 1e-10 for Adagrad; ``weight_decay`` added to the gradient),
    with the fused kernel (one pass over all parameters) where the device has one. This thin
    state holder stands in for the ``torch.optim.Optimizer`` object for two measured reasons:
    constructing one imports ``torch._dynamo`` (0.9-1.7 s once per process, added to the first
    fit), and its ``step`` bookkeeping (hooks, parameter groups, profiling) adds about 15 us per
    update (39 us against 24 us for the six tensors of a (64, 64) MLP), paid 1,600 times by one
    behaviour-cloning fit (docs/benchmarks.md, "Autograd networks"). The tests check it against
    ``torch.optim.Adam`` / ``Adagrad``.

    Parameters
    ----------
    kind : {"adam", "adagrad"}
    params : iterable of Tensor
        Leaf tensors with ``requires_grad``, all on one device.
    lr, weight_decay : float
    """

    def __init__(self, kind: str, params, *, lr: float, weight_decay: float = 0.0):
        torch = import_torch()
        if kind not in ("adam", "adagrad"):
            raise ValueError(f"kind must be 'adam' or 'adagrad', got {kind!r}")
        self.kind, self.lr, self.weight_decay = kind, float(lr), float(weight_decay)
        self.params = list(params)
        self.steps = [torch.zeros((), dtype=torch.float32, device=p.device) for p in self.params]
        n_buffers = 2 if kind == "adam" else 1
        self.buffers = [[torch.zeros_like(p) for p in self.params] for _ in range(n_buffers)]
        self.fused = True

    @property
    def step_count(self) -> int:
        """Updates made so far."""
        return int(self.steps[0]) if self.steps else 0

    def zero_grad(self) -> None:
        """Reset the gradients (to None, as ``Optimizer.zero_grad(set_to_none=True)``)."""
        for param in self.params:
            param.grad = None

    def step(self) -> None:
        """One update of every parameter from its ``.grad`` (a missing gradient counts as zero)."""
        torch = import_torch()
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        with torch.no_grad():
            if self.fused:
                try:
                    self._update(grads, fused=True)
                    return
                except (RuntimeError, TypeError):  # pragma: no cover - a torch without the kernel here
                    self.fused = False
            self._update(grads, fused=False)

    def _update(self, grads, *, fused: bool) -> None:
        from torch.optim.adagrad import adagrad
        from torch.optim.adam import adam

        options = {"fused": True} if fused else {"foreach": False}
        if self.kind == "adam":
            adam(self.params, grads, self.buffers[0], self.buffers[1], [], self.steps, amsgrad=False, beta1=0.9,
                 beta2=0.999, lr=self.lr, weight_decay=self.weight_decay, eps=1e-8, maximize=False, **options)
        else:
            adagrad(self.params, grads, self.buffers[0], self.steps, lr=self.lr, weight_decay=self.weight_decay,
                    lr_decay=0.0, eps=1e-10, maximize=False, **options)

    def to(self, device) -> "FusedOptimizer":
        """Move the state to ``device`` (the parameters are moved by their module, in place)."""
        self.steps = [t.to(device) for t in self.steps]
        self.buffers = [[t.to(device) for t in group] for group in self.buffers]
        return self


def make_optimizer(kind: str, params, *, lr: float, weight_decay: float = 0.0) -> FusedOptimizer:
    """Adam (``kind="adam"``) or Adagrad (``"adagrad"``) on ``params``: a ``FusedOptimizer``."""
    return FusedOptimizer(kind, params, lr=lr, weight_decay=weight_decay)


def optimization_step(loss, optimizer) -> None:
    """``zero_grad``, ``loss.backward()``, ``step``: one update by autograd and torch.optim."""
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def module_device(module):
    """The device of a module's first parameter."""
    return next(module.parameters()).device


def cpu_state(state: dict, network_key: str, optimizer_key: str | None = None) -> dict:
    """``state`` (an estimator's ``__dict__`` copy) with its network (and optimizer) on CPU.

    Pickles and copies of a model fitted on a GPU then load on a machine without one; the next
    training call moves them back to the model's ``device``. Models already on CPU are not copied.
    """
    net = state.get(network_key)
    if net is None or module_device(net).type == "cpu":
        return state
    opt = state.get(optimizer_key) if optimizer_key else None
    net, opt = copy.deepcopy((net, opt))
    net.to("cpu")
    if opt is not None:
        state[optimizer_key] = opt.to("cpu")
    state[network_key] = net
    return state


# --------------------------------------------------------------------------------------------
# training loops and evaluation
# --------------------------------------------------------------------------------------------
def cross_entropy_epochs(net, optimizer, X, codes, epochs: int, batch_size: int, generator, *,
                         weights=None, on_epoch=None) -> list[float]:
    """``epochs`` shuffled passes of mini-batch cross-entropy of ``softmax(net(x))`` against ``codes``.

    The batch loss is ``-mean_i w_i log softmax(z_i)[y_i]``, written with a one-hot mask over the
    transposed logits (``MLP.forward_t``): as fast as
    ``F.cross_entropy`` on CPU, and deterministic on CUDA (no atomic reductions).

    Parameters
    ----------
    net : genpqr.models._torch_modules.MLP
    optimizer : FusedOptimizer
    X : Tensor (n, d), codes : ndarray (n,) of int in ``[0, net.sizes[-1])``
        ``X`` on the network's device.
    weights : Tensor (n,) or None
        Row weights with mean 1 over the data set, on the device.
    on_epoch : callable or None
        Called with (epoch index, mean loss) after every epoch.

    Returns
    -------
    list of float
        The mean (weighted) training cross-entropy of every epoch, measured during the epoch.
    """
    torch = import_torch()
    n, K = X.shape[0], net.sizes[-1]
    onehot = torch.zeros(K, n)
    onehot[torch.as_tensor(codes, dtype=torch.int64), torch.arange(n)] = 1.0
    onehot = onehot.to(X.device)
    curve = []
    for epoch in range(epochs):
        perm = permutation(n, generator, X.device)
        X_p, Y_p = X.index_select(0, perm), onehot.index_select(1, perm)
        w_p = None if weights is None else weights.index_select(0, perm)
        losses = []
        for start, stop in batches(n, batch_size):
            picked = torch.log_softmax(net.forward_t(X_p[start:stop]), dim=0).mul(Y_p[:, start:stop])  # (K, B)
            if w_p is None:
                loss = picked.sum().div(-(stop - start))
            else:
                loss = picked.sum(dim=0).dot(w_p[start:stop]).div(-(stop - start))
            optimization_step(loss, optimizer)
            losses.append(loss.detach())
        curve.append(batch_mean(losses, n, batch_size))
        if on_epoch is not None:
            on_epoch(epoch, curve[-1])
    return curve


def evaluate(net, X: np.ndarray, mean: np.ndarray, scale: np.ndarray, *, exact: bool,
             hidden: bool = False) -> np.ndarray:
    """Network output (m, n_out) -- or its last hidden layer with ``hidden`` -- as float64.

    ``exact=True`` evaluates in float64 on CPU, so that a row's output does not depend on which
    other rows are predicted with it (float32 matrix products round differently for different
    batch shapes, at the 1e-7 level), as scikit-learn's estimator checks require of a
    classifier; ``exact=False`` evaluates in float32 on the network's device, 4x faster for the
    (128, 128) Q-network that FQE queries at every Bellman iteration.
    """
    torch = import_torch()
    width = net.sizes[-2] if hidden else net.sizes[-1]
    out = np.empty((X.shape[0], width))
    with torch_threads(MAX_TRAIN_THREADS), torch.inference_mode():
        if exact:
            layers = [(W.to("cpu", torch.float64), b.to("cpu", torch.float64)) for W, b in zip(net.weights, net.biases)]
        device = module_device(net)
        for start, stop in batches(X.shape[0], PREDICT_CHUNK):
            if exact:
                h = torch.from_numpy((X[start:stop] - mean) / scale)
                out[start:stop] = net.apply_layers(h, layers, hidden=hidden).numpy()
            else:
                h = to_tensor(X[start:stop], mean, scale, device)
                res = net.hidden(h) if hidden else net(h)
                out[start:stop] = res.cpu().numpy()
    return out

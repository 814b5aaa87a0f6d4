"""Small PyTorch models with the scikit-learn interface.

Two models plug into GenPQR's two stages:

* :class:`MLPClassifier` -- a ReLU multilayer perceptron trained with cross-entropy and Adam;
  the behaviour-cloning model of stage 1 (any slot that takes a classifier with
  ``predict_proba``).
* :class:`DuelingQNetwork` -- a *native Q-model* for stage 2 (fitted Q evaluation): a dueling
  network ``Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a')`` that is warm-started across Bellman
  iterations through ``fit_q`` / ``predict_q``.

PyTorch is an optional dependency: it is imported when a model is fitted or used, never when
``genpqr`` or this module is imported.

Implementation note
-------------------
The networks are small (hidden widths 64-128) and trained with mini-batches of a few hundred
rows, a regime in which PyTorch's per-operation overhead (autograd graph, ``nn.Module`` calls,
the optimizer's per-parameter loops, fresh buffers every step, slow softmax kernels over a small
last dimension) costs as much as the arithmetic. Both models therefore share :class:`_FlatMLP`,
a ReLU MLP whose parameters live in one contiguous float32 buffer, whose backward pass is
written out by hand (a handful of matrix products into preallocated workspaces), and
:class:`_FlatAdam`, Adam on that single buffer with the update rule of ``torch.optim.Adam``
(L2 ``weight_decay`` added to the gradient). The tests check both against autograd and
``torch.optim.Adam``. Training is float32; the classifier predicts in float64 (so a row's
probabilities do not depend on the batch it is predicted in), the Q-network in float32 (speed). Training and prediction run on one torch thread (see
``_MAX_TRAIN_THREADS``), restoring the caller's setting afterwards. ``to_torch()`` exports an
equivalent ``torch.nn.Module``.
"""

from __future__ import annotations

import math
import numbers
from contextlib import contextmanager

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets

try:
    from sklearn.utils.validation import validate_data
except ImportError:  # scikit-learn < 1.6

    def validate_data(estimator, /, X="no_validation", y="no_validation", **kwargs):
        if "ensure_all_finite" in kwargs:
            kwargs["force_all_finite"] = kwargs.pop("ensure_all_finite")
        return estimator._validate_data(X, y, **kwargs)


from .._checks import as_float_array, check_length, seed_from
from ..exceptions import NotFittedError

__all__ = ["MLPClassifier", "DuelingQNetwork"]

#: Rows per chunk when predicting (bounds memory for large inputs).
_PREDICT_CHUNK = 16384
#: Upper bound on torch's threads while a model trains or predicts (restored afterwards). At
#: these sizes a second OpenMP thread costs more than it gains (behaviour cloning on 10,000 rows:
#: 0.31 s on one thread, 0.60 s on two, idle two-core machine), it is far worse when another
#: process shares the cores (seeds run in parallel, pytest -n 2), and one thread also makes
#: results independent of the machine's core count.
_MAX_TRAIN_THREADS = 1


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def _import_torch():
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised only without torch
        raise ImportError(
            "genpqr.models.nn needs PyTorch, which is an optional dependency: "
            "install it with `pip install 'genpqr[torch]'`"
        ) from exc
    return torch


@contextmanager
def _torch_threads(n_threads: int):
    """Run the block with ``torch.get_num_threads() <= n_threads``, restoring it afterwards."""
    torch = _import_torch()
    before = torch.get_num_threads()
    target = max(1, min(before, n_threads))
    if target != before:
        torch.set_num_threads(target)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def _fresh_seed(random_state) -> int:
    """An int seed for a torch.Generator: from ``random_state``, or fresh entropy if None."""
    seed = seed_from(random_state)
    if seed is None:
        seed = int(np.random.default_rng().integers(0, 2**63 - 1))
    return seed


def _check_hidden_layer_sizes(hidden_layer_sizes) -> tuple[int, ...]:
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


def _check_positive(value, name: str, *, integer: bool = False, allow_zero: bool = False):
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


def _standardization(X: np.ndarray, standardize: bool) -> tuple[np.ndarray, np.ndarray]:
    """Training mean and scale (std, with constant columns given scale 1)."""
    if not standardize:
        return np.zeros(X.shape[1]), np.ones(X.shape[1])
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    scale[~(scale > 1e-12 * np.maximum(1.0, np.abs(mean)))] = 1.0
    return mean, scale


def _to_tensor(X: np.ndarray, mean: np.ndarray, scale: np.ndarray):
    """Standardized float32 tensor of ``X`` (a new array: the input is never modified)."""
    torch = _import_torch()
    Z = ((X - mean) / scale).astype(np.float32)
    return torch.from_numpy(np.ascontiguousarray(Z))


def _n_rows(a) -> int | None:
    """Leading dimension of an array-like (None for a scalar)."""
    shape = getattr(a, "shape", None)
    if shape is None:
        shape = np.asarray(a).shape
    return int(shape[0]) if len(shape) else None


def _check_features(X, n_features: int, name: str) -> np.ndarray:
    X = as_float_array(X, name, ndim=2)
    if X.shape[1] != n_features:
        raise ValueError(f"{name} has {X.shape[1]} features (columns) but the model was fitted with {n_features}")
    return X


def _validate_q_inputs(states, actions, targets, n_actions):
    """Validate the arguments of the native Q-model protocol's ``fit_q``.

    Returns
    -------
    states : ndarray of shape (n, d), float64
    actions : ndarray of shape (n,), int64 codes in ``[0, n_actions)``
    targets : ndarray of shape (n,), float64
    n_actions : int
    """
    if isinstance(n_actions, bool) or not isinstance(n_actions, numbers.Integral) or n_actions < 1:
        raise ValueError(f"n_actions must be a positive integer, got {n_actions!r}")
    n_actions = int(n_actions)
    states = as_float_array(states, "states", ndim=2)
    n = states.shape[0]
    if n == 0:
        raise ValueError("states must have at least one row, got shape (0, d)")
    actions_raw = np.asarray(actions)
    if actions_raw.ndim != 1:
        raise ValueError(f"actions must be a 1-D array of integer codes, got shape {actions_raw.shape}")
    check_length(actions_raw, n, "actions", "states")
    if not np.issubdtype(actions_raw.dtype, np.integer):
        as_float = as_float_array(actions_raw, "actions", ndim=1)
        if not np.all(as_float == np.round(as_float)):
            raise ValueError("actions must be integer codes 0..n_actions-1, got non-integer values")
    acts = actions_raw.astype(np.int64)
    if acts.min() < 0 or acts.max() >= n_actions:
        raise ValueError(
            f"actions must be integer codes in [0, {n_actions}) (n_actions={n_actions}), "
            f"got values in [{acts.min()}, {acts.max()}]"
        )
    targets = as_float_array(targets, "targets", ndim=1)
    check_length(targets, n, "targets", "states")
    return states, acts, targets, n_actions


# --------------------------------------------------------------------------------------------
# the shared engine
# --------------------------------------------------------------------------------------------
class _FlatMLP:
    """ReLU MLP with all parameters in one flat float32 buffer and a hand-written backward.

    Layer ``l`` computes ``h_{l+1} = relu(h_l @ W_l + b_l)``. Hidden-layer weights are stored
    input-major, shape (in, out) (the transpose of ``nn.Linear.weight``): the weight gradient
    ``h_l.T @ delta`` then lands in place without a transpose, which matters for the thin first
    layer. The last layer is stored (out, in) and produces its output *transposed*, shape
    (n_out, batch): softmax and per-action reductions over a small first dimension are several
    times faster in PyTorch than over a small last dimension. Initialisation is PyTorch's
    ``nn.Linear`` default, ``U(-1/sqrt(in), 1/sqrt(in))`` for weights and biases.

    Training steps run in preallocated per-batch-size workspaces (see :meth:`workspace`), so a
    step allocates almost nothing: fresh 100-KiB buffers per step are served by ``mmap`` and
    page-faulted anew, which roughly doubles the cost of the matrix products.

    Parameters
    ----------
    sizes : sequence of int
        ``[n_in, *hidden, n_out]``.
    generator : torch.Generator
        Source of the initial weights.
    """

    def __init__(self, sizes, generator):
        torch = _import_torch()
        self.sizes = tuple(int(s) for s in sizes)
        n_layers = len(self.sizes) - 1
        shapes = []
        for layer, (fan_in, fan_out) in enumerate(zip(self.sizes[:-1], self.sizes[1:])):
            shapes += [(fan_out, fan_in) if layer == n_layers - 1 else (fan_in, fan_out), (fan_out,)]
        self._shapes = shapes
        total = sum(math.prod(s) for s in shapes)
        self.flat = torch.empty(total, dtype=torch.float32)
        self.grad = torch.zeros(total, dtype=torch.float32)
        self._bind_views()
        for fan_in, W, b in zip(self.sizes[:-1], self.weights, self.biases):
            bound = 1.0 / math.sqrt(fan_in)
            W.uniform_(-bound, bound, generator=generator)
            b.uniform_(-bound, bound, generator=generator)

    def _bind_views(self) -> None:
        """(Re)create the per-layer views into :attr:`flat` and :attr:`grad`."""
        self.weights, self.biases, self.grad_weights, self.grad_biases = [], [], [], []
        offset = 0
        for i, shape in enumerate(self._shapes):
            size = math.prod(shape)
            param = self.flat[offset : offset + size].view(shape)
            grad = self.grad[offset : offset + size].view(shape)
            offset += size
            (self.weights if i % 2 == 0 else self.biases).append(param)
            (self.grad_weights if i % 2 == 0 else self.grad_biases).append(grad)
        self._workspaces = {}

    @property
    def n_layers(self) -> int:
        return len(self.weights)

    def linear_weights(self):
        """Weights in ``nn.Linear`` layout, (out, in), as views."""
        return [W.t() for W in self.weights[:-1]] + [self.weights[-1]]

    def workspace(self, batch: int) -> dict:
        """Preallocated buffers for a training step on ``batch`` rows (cached per size).

        ``acts[l]`` (batch, width_l) hold the hidden activations, ``deltas[l]`` their
        gradients, ``out_t`` (n_out, batch) the transposed output and ``grad_out_t``
        (n_out, batch) is for the caller to fill with d loss / d ``out_t``.
        """
        ws = self._workspaces.get(batch)
        if ws is None:
            torch = _import_torch()
            widths = self.sizes[1:-1]
            ws = {
                "acts": [torch.empty(batch, w) for w in widths],
                "deltas": [torch.empty(batch, w) for w in widths],
                "out_t": torch.empty(self.sizes[-1], batch),
                "grad_out_t": torch.empty(self.sizes[-1], batch),
            }
            self._workspaces[batch] = ws
        return ws

    def forward(self, x, ws=None):
        """Forward pass.

        Parameters
        ----------
        x : Tensor of shape (batch, n_in)
        ws : dict, optional
            A :meth:`workspace` for ``batch`` rows: activations are kept there for
            :meth:`backward`. Without it (inference) fresh tensors are used.

        Returns
        -------
        out_t : Tensor of shape (n_out, batch)
            The last layer's output, transposed.
        """
        torch = _import_torch()
        h = x
        for layer, (W, b) in enumerate(zip(self.weights[:-1], self.biases[:-1])):
            if ws is None:
                h = torch.addmm(b, h, W)
            else:
                h = torch.addmm(b, h, W, out=ws["acts"][layer])
            h.clamp_(min=0.0)
        bias = self.biases[-1].unsqueeze(1)
        if ws is None:
            return torch.addmm(bias, self.weights[-1], h.t())
        return torch.addmm(bias, self.weights[-1], h.t(), out=ws["out_t"])

    def backward(self, x, ws) -> None:
        """Write d loss / d parameters into :attr:`grad` (overwriting it).

        Parameters
        ----------
        x : Tensor of shape (batch, n_in)
            The input of the preceding :meth:`forward`.
        ws : dict
            The workspace of that forward pass, with ``ws["grad_out_t"]`` filled.
        """
        torch = _import_torch()
        relu_backward = torch.ops.aten.threshold_backward.grad_input
        grad_out_t = ws["grad_out_t"]
        acts = [x, *ws["acts"]]
        last = self.n_layers - 1
        torch.mm(grad_out_t, acts[last], out=self.grad_weights[last])
        torch.sum(grad_out_t, dim=1, out=self.grad_biases[last])
        if last == 0:
            return
        delta = torch.mm(grad_out_t.t(), self.weights[last], out=ws["deltas"][last - 1])
        for layer in range(last - 1, -1, -1):
            relu_backward(delta, acts[layer + 1], 0.0, grad_input=delta)
            torch.mm(acts[layer].t(), delta, out=self.grad_weights[layer])
            torch.sum(delta, dim=0, out=self.grad_biases[layer])
            if layer > 0:
                delta = torch.mm(delta, self.weights[layer].t(), out=ws["deltas"][layer - 1])

    # Pickle only the flat buffers: pickling the views would store independent copies.
    def __getstate__(self):
        return {"sizes": self.sizes, "_shapes": self._shapes, "flat": self.flat, "grad": self.grad}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._bind_views()


class _FlatAdam:
    """Adam on one flat parameter buffer; the update rule of ``torch.optim.Adam``.

    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``,
    ``p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``, with ``g += wd * p`` first
    when ``weight_decay`` is positive (L2 penalty, not AdamW).

    Uses PyTorch's fused kernel (``torch._fused_adam_``, the one behind
    ``torch.optim.Adam(fused=True)``: one pass instead of seven, 2.5x faster on a 17k-parameter
    buffer) when available, else the same update in plain tensor operations.
    """

    def __init__(self, n_params: int, lr: float, *, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, fused=None):
        torch = _import_torch()
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.exp_avg = torch.zeros(n_params, dtype=torch.float32)
        self.exp_avg_sq = torch.zeros(n_params, dtype=torch.float32)
        self.step_tensor = torch.zeros((), dtype=torch.float32)
        self.fused = hasattr(torch, "_fused_adam_") if fused is None else bool(fused)
        self.step_count = 0

    def step(self, params, grad) -> None:
        """One update of ``params`` (flat, in place) given ``grad`` (may be overwritten)."""
        torch = _import_torch()
        beta1, beta2 = self.betas
        self.step_count += 1
        self.step_tensor.fill_(self.step_count)
        if self.fused:
            try:
                torch._fused_adam_(
                    [params], [grad], [self.exp_avg], [self.exp_avg_sq], [], [self.step_tensor],
                    lr=self.lr, beta1=beta1, beta2=beta2, weight_decay=self.weight_decay,
                    eps=self.eps, amsgrad=False, maximize=False,
                )  # fmt: skip
                return
            except (RuntimeError, TypeError):  # pragma: no cover - a torch without the CPU kernel
                self.fused = False
        if self.weight_decay:
            grad.add_(params, alpha=self.weight_decay)
        self.exp_avg.lerp_(grad, 1.0 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
        bias_correction1 = 1.0 - beta1**self.step_count
        bias_correction2_sqrt = math.sqrt(1.0 - beta2**self.step_count)
        denom = self.exp_avg_sq.sqrt().div_(bias_correction2_sqrt).add_(self.eps)
        params.addcdiv_(self.exp_avg, denom, value=-self.lr / bias_correction1)


def _batches(n: int, batch_size: int):
    return [(start, min(start + batch_size, n)) for start in range(0, n, batch_size)]


def _predict(net: "_FlatMLP", X: np.ndarray, mean: np.ndarray, scale: np.ndarray, *, exact: bool) -> np.ndarray:
    """Network output (m, n_out), float64, for raw inputs ``X`` (m, d).

    ``exact=True`` evaluates in float64, so that a row's output does not depend on which other
    rows are predicted with it (float32 matrix products round differently for different batch
    shapes, at the 1e-7 level), as scikit-learn's estimator checks require of a classifier;
    ``exact=False`` evaluates in float32, 4x faster for the (128, 128) Q-network that FQE
    queries at every Bellman iteration.
    """
    torch = _import_torch()
    out = np.empty((X.shape[0], net.sizes[-1]))
    with _torch_threads(_MAX_TRAIN_THREADS), torch.no_grad():
        if exact:
            weights = [W.double() for W in net.weights]
            biases = [b.double() for b in net.biases]
        for start, stop in _batches(X.shape[0], _PREDICT_CHUNK):
            if not exact:
                out[start:stop] = net.forward(_to_tensor(X[start:stop], mean, scale)).t().numpy()
                continue
            h = torch.from_numpy((X[start:stop] - mean) / scale)
            for W, b in zip(weights[:-1], biases[:-1]):
                h = torch.addmm(b, h, W).clamp_(min=0.0)
            out[start:stop] = torch.addmm(biases[-1], h, weights[-1].t()).numpy()
    return out


def _hidden(net: "_FlatMLP", X: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Last hidden layer (m, width), float64, for raw inputs ``X`` (m, d); the inputs when there
    is no hidden layer."""
    torch = _import_torch()
    width = net.sizes[-2]
    out = np.empty((X.shape[0], width))
    with _torch_threads(_MAX_TRAIN_THREADS), torch.no_grad():
        weights = [W.double() for W in net.weights[:-1]]
        biases = [b.double() for b in net.biases[:-1]]
        for start, stop in _batches(X.shape[0], _PREDICT_CHUNK):
            h = torch.from_numpy((X[start:stop] - mean) / scale)
            for W, b in zip(weights, biases):
                h = torch.addmm(b, h, W).clamp_(min=0.0)
            out[start:stop] = h.numpy()
    return out


def _cross_entropy_grad(logits_t, onehot_t, weights, grad_out_t) -> float:
    """Cross-entropy of a batch and its gradient with respect to the logits.

    Parameters
    ----------
    logits_t : Tensor of shape (K, B)
        Transposed logits.
    onehot_t : Tensor of shape (K, B)
        Transposed one-hot labels.
    weights : Tensor of shape (B,) or None
        Row weights (normalized to mean 1 over the data set), or None for unit weights.
    grad_out_t : Tensor of shape (K, B)
        Receives d loss / d logits for the batch loss ``mean_i w_i CE_i``.

    Returns
    -------
    loss_sum : float
        ``sum_i w_i CE_i`` over the batch (for the epoch's mean loss).
    """
    torch = _import_torch()
    batch = logits_t.shape[1]
    log_p = torch.log_softmax(logits_t, dim=0)
    torch.exp(log_p, out=grad_out_t).sub_(onehot_t)  # softmax - onehot
    log_p_y = log_p.mul_(onehot_t)
    if weights is None:
        grad_out_t.div_(batch)
        return -float(log_p_y.sum())
    grad_out_t.mul_(weights.div(batch))
    return -float(torch.mv(log_p_y, weights).sum())


def _dueling_mse_grad(out_t, centred_onehot_t, targets, grad_out_t) -> float:
    """Squared error of ``Q(s_i, a_i)`` for a dueling head and its gradient.

    With ``out_t[0] = V`` and ``out_t[1:] = A`` (K, B), ``Q(s_i, a_i) = V_i + sum_k C_ki A_ki``
    where ``C = onehot(a) - 1/K`` (so ``Q = V + A - mean_a A``, eq. of the dueling head).

    Parameters
    ----------
    out_t : Tensor of shape (K + 1, B)
    centred_onehot_t : Tensor of shape (K, B)
        ``onehot(a_i) - 1/K``, transposed.
    targets : Tensor of shape (B,)
    grad_out_t : Tensor of shape (K + 1, B)
        Receives d loss / d ``out_t`` for the batch loss ``mean_i (Q(s_i, a_i) - y_i)^2``.

    Returns
    -------
    loss_sum : float
        ``sum_i (Q(s_i, a_i) - y_i)^2`` over the batch.
    """
    torch = _import_torch()
    q = out_t[1:].mul(centred_onehot_t).sum(dim=0).add_(out_t[0])  # Q(s_i, a_i)
    resid = q.sub_(targets)
    loss_sum = float(torch.dot(resid, resid))
    grad_q = resid.mul_(2.0 / out_t.shape[1])
    grad_out_t[0] = grad_q
    torch.mul(centred_onehot_t, grad_q, out=grad_out_t[1:])
    return loss_sum


# --------------------------------------------------------------------------------------------
# stage 1: behaviour cloning
# --------------------------------------------------------------------------------------------
class MLPClassifier(ClassifierMixin, BaseEstimator):
    """ReLU multilayer perceptron classifier (cross-entropy, Adam), scikit-learn style.

    The paper's behaviour-cloning model: hidden layers (64, 64), ReLU, standardized inputs,
    Adam with learning rate 5e-3, mini-batches of 256, 40 epochs. Training is deterministic
    given ``random_state`` (initial weights and the per-epoch shuffles come from one
    ``torch.Generator`` seeded from it).

    Parameters
    ----------
    hidden_layer_sizes : tuple of int, default=(64, 64)
        Widths of the hidden layers; ``()`` gives multinomial logistic regression.
    learning_rate : float, default=5e-3
        Adam step size.
    batch_size : int, default=256
        Rows per mini-batch (the last batch of an epoch may be smaller).
    max_epochs : int, default=40
        Passes over the data (there is no early stopping, so every fit runs this many).
    weight_decay : float, default=0.0
        L2 penalty added to the gradient, as in ``torch.optim.Adam`` (biases included).
    standardize : bool, default=True
        Standardize the inputs with the training mean and standard deviation.
    random_state : int, numpy Generator/RandomState or None, default=None
        Seed for the initial weights and the shuffles; None draws fresh entropy.
    verbose : bool, default=False
        Print the mean training loss after every epoch.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The labels seen in ``fit``, sorted; column ``k`` of :meth:`predict_proba` is
        ``classes_[k]``.
    n_features_in_ : int
        Number of input features d.
    mean_, scale_ : ndarray of shape (d,)
        Standardization statistics (0 and 1 when ``standardize=False``).
    loss_curve_ : list of float
        Mean (sample-weighted) training cross-entropy of each epoch, length ``max_epochs``.
    n_iter_ : int
        Number of epochs run.

    Examples
    --------
    >>> import numpy as np
    >>> from genpqr.models.nn import MLPClassifier
    >>> X = np.random.default_rng(0).normal(size=(500, 3)); y = (X[:, 0] > 0).astype(int)
    >>> clf = MLPClassifier(max_epochs=5, random_state=0).fit(X, y)
    >>> clf.predict_proba(X).shape
    (500, 2)
    """

    def __init__(
        self,
        hidden_layer_sizes=(64, 64),
        learning_rate=5e-3,
        batch_size=256,
        max_epochs=40,
        weight_decay=0.0,
        standardize=True,
        random_state=None,
        verbose=False,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.weight_decay = weight_decay
        self.standardize = standardize
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, X, y, sample_weight=None):
        """Fit the network to labels ``y``.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Finite numeric features. Not modified.
        y : array-like of shape (n,)
            Class labels of any type sortable by ``LabelEncoder``; at least two distinct.
        sample_weight : array-like of shape (n,), optional
            Non-negative row weights (the loss is the weighted mean cross-entropy).

        Returns
        -------
        self : MLPClassifier
        """
        torch = _import_torch()
        hidden = _check_hidden_layer_sizes(self.hidden_layer_sizes)
        lr = _check_positive(self.learning_rate, "learning_rate")
        batch_size = _check_positive(self.batch_size, "batch_size", integer=True)
        max_epochs = _check_positive(self.max_epochs, "max_epochs", integer=True)
        weight_decay = _check_positive(self.weight_decay, "weight_decay", allow_zero=True)

        X, codes, classes, sw = self._validate_training_data(X, y, sample_weight)
        n, d = X.shape
        n_classes = len(classes)
        weights = None if sw is None else torch.from_numpy((sw / sw.mean()).astype(np.float32))

        mean, scale = _standardization(X, bool(self.standardize))
        generator = torch.Generator().manual_seed(_fresh_seed(self.random_state))
        with _torch_threads(_MAX_TRAIN_THREADS), torch.no_grad():
            X_t = _to_tensor(X, mean, scale)
            onehot_t = torch.zeros(n_classes, n, dtype=torch.float32)
            onehot_t[torch.from_numpy(codes.astype(np.int64)), torch.arange(n)] = 1.0
            net = _FlatMLP((d, *hidden, n_classes), generator)
            adam = _FlatAdam(net.flat.numel(), lr, weight_decay=weight_decay)
            loss_curve = []
            slices = _batches(n, batch_size)
            for epoch in range(max_epochs):
                perm = torch.randperm(n, generator=generator)
                X_p = X_t.index_select(0, perm)
                Y_p = onehot_t.index_select(1, perm)
                W_p = weights.index_select(0, perm) if weights is not None else None
                loss_sum = 0.0
                for start, stop in slices:
                    x_b = X_p[start:stop]
                    ws = net.workspace(stop - start)
                    logits_t = net.forward(x_b, ws)
                    w_b = W_p[start:stop] if W_p is not None else None
                    loss_sum += _cross_entropy_grad(logits_t, Y_p[:, start:stop], w_b, ws["grad_out_t"])
                    net.backward(x_b, ws)
                    adam.step(net.flat, net.grad)
                loss_curve.append(loss_sum / n)
                if self.verbose:
                    print(f"[MLPClassifier] epoch {epoch + 1}/{max_epochs}  loss {loss_curve[-1]:.5f}")

        self.classes_ = classes
        self.n_features_in_ = d
        self.mean_, self.scale_ = mean, scale
        self.network_ = net
        self.loss_curve_ = loss_curve
        self.n_iter_ = max_epochs
        return self

    def _validate_training_data(self, X, y, sample_weight):
        """sklearn-standard validation, with our own messages for mismatched lengths."""
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        n_X, n_y = _n_rows(X), _n_rows(y)
        if n_X is not None and n_y is not None and n_y != n_X:
            raise ValueError(f"y has {n_y} rows but X has {n_X}; they must match")
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_all_finite=True, order="C")
        check_classification_targets(y)
        encoder = LabelEncoder()
        codes = encoder.fit_transform(y)
        classes = encoder.classes_
        if len(classes) < 2:
            raise ValueError(
                f"y must contain at least two classes, got 1 class ({classes[0]!r}); "
                "a policy over a single action needs no classifier"
            )
        sw = None
        if sample_weight is not None:
            sw = np.asarray(sample_weight)
            if sw.ndim != 1:
                raise ValueError(f"sample_weight must be a 1-D array, got shape {sw.shape}")
            if sw.shape[0] != X.shape[0]:
                raise ValueError(f"sample_weight has {sw.shape[0]} rows but X has {X.shape[0]}; they must match")
            sw = as_float_array(sw, "sample_weight", ndim=1)
            if (sw < 0).any():
                raise ValueError(f"sample_weight must be non-negative, got minimum {sw.min()!r}")
            if not sw.any():
                raise ValueError("Sample weights must contain at least one non-zero number (sample_weight is all zero)")
        return X, codes, classes, sw

    def _check_fitted(self):
        if not hasattr(self, "network_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call fit(X, y) before using it"
            )

    def _logits(self, X) -> np.ndarray:
        """Logits (m, n_classes), float64."""
        self._check_fitted()
        X = validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite=True)
        return _predict(self.network_, X, self.mean_, self.scale_, exact=True)

    def predict_log_proba(self, X) -> np.ndarray:
        """Log class probabilities.

        Parameters
        ----------
        X : array-like of shape (m, d)

        Returns
        -------
        log_proba : ndarray of shape (m, n_classes), float64
            Columns ordered as :attr:`classes_`.
        """
        logits = self._logits(X)
        logits -= logits.max(axis=1, keepdims=True)
        logits -= np.log(np.exp(logits).sum(axis=1, keepdims=True))
        return logits

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities (rows sum to 1).

        Parameters
        ----------
        X : array-like of shape (m, d)

        Returns
        -------
        proba : ndarray of shape (m, n_classes), float64
            Columns ordered as :attr:`classes_`.
        """
        proba = np.exp(self.predict_log_proba(X))
        proba /= proba.sum(axis=1, keepdims=True)
        return proba

    def hidden_representation(self, X) -> np.ndarray:
        """The last hidden layer's activations: the network's learned representation of ``X``.

        ``log pi(.|x)`` is an affine function of it followed by a log-softmax, so it is a natural
        feature map for linear models of quantities that vary with the policy (e.g. the
        closed-form Q-evaluation of :class:`genpqr.lstd.LSTDQ`). (Not named ``transform``: that
        would make scikit-learn treat the classifier as a transformer.)

        Parameters
        ----------
        X : array-like of shape (m, d)

        Returns
        -------
        hidden : ndarray of shape (m, hidden_layer_sizes[-1]), float64
            Non-negative (after ReLU). With no hidden layer: the standardized inputs.
        """
        self._check_fitted()
        X = validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite=True)
        return _hidden(self.network_, X, self.mean_, self.scale_)

    def predict(self, X) -> np.ndarray:
        """Most probable label.

        Parameters
        ----------
        X : array-like of shape (m, d)

        Returns
        -------
        labels : ndarray of shape (m,)
            Elements of :attr:`classes_`.
        """
        logits = self._logits(X)  # checks fitted before classes_ is read
        return self.classes_[np.argmax(logits, axis=1)]

    def to_torch(self):
        """An equivalent ``torch.nn.Module`` (eval mode) mapping raw float32 inputs (m, d) to
        logits (m, n_classes); standardization is included as buffers."""
        self._check_fitted()
        return _export_module(self.network_, self.mean_, self.scale_, dueling=False)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags


# --------------------------------------------------------------------------------------------
# stage 2: native Q-model
# --------------------------------------------------------------------------------------------
class DuelingQNetwork(BaseEstimator):
    """Dueling Q-network for fitted Q evaluation (a native Q-model, warm-started).

    ``Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a')``: a ReLU trunk on standardized states feeds a
    value head V (1 output) and an advantage head A (K outputs). Every :meth:`fit_q` call runs
    ``epochs_per_iteration`` epochs of Adam on the mean squared error between ``Q(s_i, a_i)``
    and the targets, *continuing* from the current weights and optimizer state; FQE calls it
    once per Bellman iteration with fresh targets (paper's setting: trunk (128, 128), Adam 5e-3,
    batch 256, 8 iterations x 4 epochs, one network throughout). The first call initialises the
    network and fixes the standardization statistics and ``n_actions``; to start over, use
    ``sklearn.base.clone``.

    Parameters
    ----------
    hidden_layer_sizes : tuple of int, default=(128, 128)
        Widths of the shared trunk.
    learning_rate : float, default=5e-3
        Adam step size.
    batch_size : int, default=256
        Rows per mini-batch.
    epochs_per_iteration : int, default=4
        Epochs run by each :meth:`fit_q` call.
    weight_decay : float, default=0.0
        L2 penalty added to the gradient, as in ``torch.optim.Adam``.
    standardize : bool, default=True
        Standardize states with the mean and standard deviation of the first call's states.
    random_state : int, numpy Generator/RandomState or None, default=None
        Seed of the initial weights and of every shuffle; None draws fresh entropy.

    Attributes
    ----------
    n_actions_ : int
        Number of actions K fixed by the first call.
    n_features_in_ : int
        State dimension d.
    mean_, scale_ : ndarray of shape (d,)
        Standardization statistics of the first call's states.
    n_iter_ : int
        Number of :meth:`fit_q` calls so far.
    loss_curve_ : list of float
        Mean training MSE of every epoch run so far (length ``n_iter_ * epochs_per_iteration``).
    """

    def __init__(
        self,
        hidden_layer_sizes=(128, 128),
        learning_rate=5e-3,
        batch_size=256,
        epochs_per_iteration=4,
        weight_decay=0.0,
        standardize=True,
        random_state=None,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.epochs_per_iteration = epochs_per_iteration
        self.weight_decay = weight_decay
        self.standardize = standardize
        self.random_state = random_state

    def _initialise(self, states: np.ndarray, n_actions: int) -> None:
        torch = _import_torch()
        hidden = _check_hidden_layer_sizes(self.hidden_layer_sizes)
        lr = _check_positive(self.learning_rate, "learning_rate")
        weight_decay = _check_positive(self.weight_decay, "weight_decay", allow_zero=True)
        self.n_actions_ = n_actions
        self.n_features_in_ = states.shape[1]
        self.mean_, self.scale_ = _standardization(states, bool(self.standardize))
        self._generator = torch.Generator().manual_seed(_fresh_seed(self.random_state))
        # output row 0 is V(s), rows 1..K are A(s, .)
        self.network_ = _FlatMLP((states.shape[1], *hidden, n_actions + 1), self._generator)
        self._adam = _FlatAdam(self.network_.flat.numel(), lr, weight_decay=weight_decay)
        self.n_iter_ = 0
        self.loss_curve_ = []

    def fit_q(self, states, actions, targets, n_actions):
        """Run ``epochs_per_iteration`` epochs on the MSE between Q(s_i, a_i) and the targets.

        Parameters
        ----------
        states : array-like of shape (n, d)
            Finite states (not modified).
        actions : array-like of shape (n,)
            Integer action codes in ``[0, n_actions)``.
        targets : array-like of shape (n,)
            Regression targets, e.g. ``u - g + gamma * sum_a' mu(a'|s') Q(s', a')``.
        n_actions : int
            Number of actions K; must equal the first call's.

        Returns
        -------
        self : DuelingQNetwork
        """
        torch = _import_torch()
        states, actions, targets, n_actions = _validate_q_inputs(states, actions, targets, n_actions)
        batch_size = _check_positive(self.batch_size, "batch_size", integer=True)
        epochs = _check_positive(self.epochs_per_iteration, "epochs_per_iteration", integer=True)
        if not hasattr(self, "network_"):
            self._initialise(states, n_actions)
        else:
            if n_actions != self.n_actions_:
                raise ValueError(
                    f"n_actions is {n_actions} but the first fit_q call used {self.n_actions_}; "
                    "clone the model to fit a different problem"
                )
            _check_features(states, self.n_features_in_, "states")
        n, K = states.shape[0], n_actions
        net, adam, generator = self.network_, self._adam, self._generator
        with _torch_threads(_MAX_TRAIN_THREADS), torch.no_grad():
            X_t = _to_tensor(states, self.mean_, self.scale_)
            y_t = torch.from_numpy(targets.astype(np.float32))
            # centred one-hot: q = V + sum_k C[k] A[k] with C = onehot(a) - 1/K  (rows 1..K)
            centred_t = torch.full((K, n), -1.0 / K, dtype=torch.float32)
            centred_t[torch.from_numpy(actions), torch.arange(n)] += 1.0
            slices = _batches(n, batch_size)
            for _ in range(epochs):
                perm = torch.randperm(n, generator=generator)
                X_p, y_p = X_t.index_select(0, perm), y_t.index_select(0, perm)
                C_p = centred_t.index_select(1, perm)
                loss_sum = 0.0
                for start, stop in slices:
                    x_b = X_p[start:stop]
                    ws = net.workspace(stop - start)
                    out_t = net.forward(x_b, ws)
                    loss_sum += _dueling_mse_grad(out_t, C_p[:, start:stop], y_p[start:stop], ws["grad_out_t"])
                    net.backward(x_b, ws)
                    adam.step(net.flat, net.grad)
                self.loss_curve_.append(loss_sum / n)
        self.n_iter_ += 1
        return self

    def _check_fitted(self):
        if not hasattr(self, "network_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call fit_q(states, actions, "
                "targets, n_actions) before predicting"
            )

    def predict_components(self, states) -> tuple[np.ndarray, np.ndarray]:
        """The two heads: value V(s) and raw (uncentred) advantages A(s, .).

        Parameters
        ----------
        states : array-like of shape (m, d)

        Returns
        -------
        value : ndarray of shape (m,), float64
        advantage : ndarray of shape (m, n_actions), float64
            ``predict_q(states) == value[:, None] + advantage - advantage.mean(axis=1, keepdims=True)``.
        """
        self._check_fitted()
        states = _check_features(states, self.n_features_in_, "states")
        out = _predict(self.network_, states, self.mean_, self.scale_, exact=False)
        return out[:, 0], out[:, 1:]

    def predict_q(self, states) -> np.ndarray:
        """Q(s, a) for every action.

        Parameters
        ----------
        states : array-like of shape (m, d)

        Returns
        -------
        q : ndarray of shape (m, n_actions), float64
        """
        value, advantage = self.predict_components(states)
        return value[:, None] + (advantage - advantage.mean(axis=1, keepdims=True))

    def to_torch(self):
        """An equivalent ``torch.nn.Module`` (eval mode) mapping raw float32 states (m, d) to
        Q-values (m, n_actions); standardization is included as buffers."""
        self._check_fitted()
        return _export_module(self.network_, self.mean_, self.scale_, dueling=True)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags


def _export_module(net: _FlatMLP, mean: np.ndarray, scale: np.ndarray, *, dueling: bool):
    """Build a ``torch.nn.Module`` with copies of ``net``'s weights."""
    torch = _import_torch()
    nn = torch.nn

    class _Exported(nn.Module):
        def __init__(self):
            super().__init__()
            layers = []
            for i, (W, b) in enumerate(zip(net.linear_weights(), net.biases)):
                linear = nn.Linear(W.shape[1], W.shape[0])
                with torch.no_grad():
                    linear.weight.copy_(W)
                    linear.bias.copy_(b)
                layers.append(linear)
                if i < len(net.weights) - 1:
                    layers.append(nn.ReLU())
            self.layers = nn.Sequential(*layers)
            self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32))
            self.register_buffer("scale", torch.as_tensor(scale, dtype=torch.float32))
            self.dueling = dueling

        def forward(self, x):
            out = self.layers((x - self.mean) / self.scale)
            if not self.dueling:
                return out
            value, advantage = out[:, :1], out[:, 1:]
            return value + advantage - advantage.mean(dim=1, keepdim=True)

    return _Exported().eval()

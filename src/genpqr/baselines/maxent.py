r"""Neural MaxEnt-IRL baseline: a softmax-Q model whose logits are reported as the reward.

The paper's "MaxEnt-IRL" row (Sec. 6, App. "Simulation Details"; settings of
``/work/shared/benchmarks/synthetic-env.md``): a ReLU MLP (128, 128) on standardized states
outputs ``K`` logits ``Q(s, .)``; the policy is the MaxEnt (Boltzmann, temperature 1) policy
``pi(a|s) = softmax_a Q(s, a)``, fitted by maximum likelihood (cross-entropy against the
logged actions), Adam lr 5e-3, weight decay 1e-4, 150 epochs of mini-batches of 256. The learned
``Q``-surrogate itself is reported as the reward.

Why it scores poorly as a reward: the likelihood only sees ``Q(s, a) - logsumexp_a' Q(s, a')
= log pi(a|s)``, so the logits are identified only up to an arbitrary per-state constant (pinned
only weakly, by weight decay and the initialisation); they are **not normalized** (no anchor,
no ``mu r = g``), and a soft ``Q`` is not a reward anyway (``r = Q - gamma E[V(s')]``, paper
Sec. 3). It is kept as the literature's reference point, not as a recommended estimator.

Measured (``make_synthetic_data(seed, 1000)``, 10,000 rows, seeds 0-4, one torch thread): fit
4.7-5.4 s (paper 8.6 s), test NLL 1.641 (paper 1.624), reward MSE 1.07, corr 0.28 (paper 1.17,
0.35).

The module also holds the small training helpers shared with :mod:`genpqr.baselines.airl`
(fit-input dispatch ``fit(Transitions)`` / ``fit(X, y)`` and the cross-entropy epoch loop on
:mod:`genpqr.models.nn`'s flat-MLP engine).
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import ClassifierMixin

from .._checks import as_float_array, check_length
from ..data import ActionEncoder, Transitions
from ..models.nn import (_FlatAdam, _FlatMLP, _MAX_TRAIN_THREADS, _batches, _check_hidden_layer_sizes, _check_positive,
                  _cross_entropy_grad, _fresh_seed, _import_torch, _predict, _standardization, _to_tensor,
                  _torch_threads)
from ..policy import DEFAULT_CLIP, _check_clip, clip_proba
from ._base import _RewardBaseline

__all__ = ["MaxEntIRL"]


# ============================================================================ shared helpers
def _fit_inputs(data, y):
    """Dispatch ``fit(Transitions)`` / ``fit(X, y)``.

    Returns
    -------
    states : ndarray (n, d) float64
    codes : ndarray (n,) int64 in ``0..K-1``
    classes : ndarray (K,)
        ``arange(K)`` (action codes) for Transitions, else the sorted labels of ``y``.
    encoder : ActionEncoder
        Maps the labels accepted by ``reward(states, actions)`` to codes.
    transitions : Transitions or None
    """
    if isinstance(data, Transitions):
        if y is not None:
            raise ValueError("y must be None when data is a Transitions object (its actions are the labels)")
        if data.n == 0:
            raise ValueError("data must hold at least one transition, got 0")
        return data.states, data.actions.astype(np.int64), np.arange(data.n_actions), data.encoder, data
    if y is None:
        raise TypeError(
            f"fit needs genpqr.data.Transitions, or (X, y) arrays of states and action labels; got "
            f"{type(data).__name__} and y=None"
        )
    X = as_float_array(data, "X", ndim=2)
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be a 1-D array of action labels, got shape {y.shape}")
    check_length(y, X.shape[0], "y", "X")
    if X.shape[0] == 0:
        raise ValueError("X must have at least one row, got 0")
    classes, codes = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise ValueError(f"y must contain at least two action labels, got 1 ({classes[0]!r})")
    return X, codes.astype(np.int64).ravel(), classes, ActionEncoder(classes), None


def _check_int(value, name: str, *, allow_zero: bool) -> int:
    return _check_positive(value, name, integer=True, allow_zero=allow_zero)


def _check_batch_size(batch_size, n: int) -> int:
    """``None`` means full batch."""
    if batch_size is None:
        return n
    return min(_check_int(batch_size, "batch_size", allow_zero=False), n)


def _onehot_t(codes: np.ndarray, K: int):
    """Transposed one-hot (K, n) float32."""
    torch = _import_torch()
    n = codes.shape[0]
    out = torch.zeros(K, n, dtype=torch.float32)
    out[torch.from_numpy(codes), torch.arange(n)] = 1.0
    return out


def _cross_entropy_epochs(net, adam, X_t, onehot_t, epochs: int, batch_size: int, generator) -> list[float]:
    """``epochs`` shuffled passes of mini-batch cross-entropy (softmax over ``net``'s outputs).

    Returns the mean training cross-entropy of every epoch (measured during the epoch).
    """
    torch = _import_torch()
    n = X_t.shape[0]
    slices = _batches(n, batch_size)
    curve = []
    for _ in range(epochs):
        perm = torch.randperm(n, generator=generator)
        X_p = X_t.index_select(0, perm)
        Y_p = onehot_t.index_select(1, perm)
        loss_sum = 0.0
        for start, stop in slices:
            x_b = X_p[start:stop]
            ws = net.workspace(stop - start)
            logits_t = net.forward(x_b, ws)
            loss_sum += _cross_entropy_grad(logits_t, Y_p[:, start:stop], None, ws["grad_out_t"])
            net.backward(x_b, ws)
            adam.step(net.flat, net.grad)
        curve.append(loss_sum / n)
    return curve


def _softmax_rows(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    return p


class _SoftmaxPolicyMixin:
    """``predict_proba`` / ``predict`` / ``log_policy`` from ``self._policy_logits(X)``."""

    def predict_proba(self, X) -> np.ndarray:
        """Unclipped policy probabilities, shape (n, K); columns ordered as ``classes_``."""
        return _softmax_rows(self._policy_logits(self._states(X)))

    def predict_log_proba(self, X) -> np.ndarray:
        """``log`` of :meth:`predict_proba` (unclipped, stable), shape (n, K)."""
        z = self._policy_logits(self._states(X))
        z = z - z.max(axis=1, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=1, keepdims=True))

    def predict(self, X) -> np.ndarray:
        """Most probable action (an element of ``classes_``), shape (n,)."""
        best = np.argmax(self._policy_logits(self._states(X)), axis=1)  # checks fitted before classes_
        return self.classes_[best]

    def log_policy(self, states) -> np.ndarray:
        """``log pi_hat(.|s)``, clipped to ``clip`` and renormalized (as the library's stage 1
        does, :func:`genpqr.policy.clip_proba`), shape (n, K)."""
        return np.log(clip_proba(self.predict_proba(states), self.clip_)[0])


# ============================================================================ the estimator
class MaxEntIRL(_SoftmaxPolicyMixin, ClassifierMixin, _RewardBaseline):
    r"""Neural MaxEnt-IRL: softmax-``Q`` MLP fitted by likelihood; its logits are the reward.

    ``pi(a|s) = exp Q(s, a) / sum_a' exp Q(s, a')`` with ``Q(s, .)`` a ReLU MLP on standardized
    states (K outputs), trained by mean cross-entropy against the logged actions with Adam (L2
    ``weight_decay`` added to the gradient, as ``torch.optim.Adam``), shuffled mini-batches.
    :meth:`reward` returns ``Q(s, a)`` itself, the paper's "learned Q-surrogate as reward".

    This reward is **not normalized**: the likelihood identifies ``Q`` only up to a per-state
    constant (only weight decay and the initialisation pin it), and a soft ``Q`` differs from the
    reward by the continuation ``gamma E[V(s')]``; no normalization ``mu r = g`` is applied. That
    is why it scores poorly in reward MSE (paper, Table Exp. 2: MSE 1.17, corr 0.35).

    It is also a classifier (``predict_proba``, ``classes_``), so it can serve as a stage-1
    policy (``GenPQR(policy_model=..., policy_prefit=True)``).

    Parameters
    ----------
    hidden_layer_sizes : tuple of int, default=(128, 128)
    learning_rate : float, default=5e-3
        Adam step size.
    weight_decay : float, default=1e-4
        L2 penalty (added to the gradient, biases included).
    max_epochs : int, default=150
        Passes over the data.
    batch_size : int or None, default=256
        Rows per mini-batch; ``None`` for full-batch gradient steps (then ``max_epochs`` is
        the number of steps).
    standardize : bool, default=True
        Standardize states with the training mean and standard deviation.
    clip : (low, high) or None, default=(0.01, 0.99)
        Clip bounds of :meth:`log_policy` (rows renormalized).
    random_state : int, Generator or None
        Seed of the initial weights and the shuffles (one ``torch.Generator``).

    Attributes
    ----------
    classes_ : ndarray of shape (K,)
        ``arange(K)`` (action codes) after ``fit(Transitions)``; the sorted labels of ``y``
        after ``fit(X, y)``.
    encoder_ : ActionEncoder
        Labels accepted by ``reward(states, actions)``.
    n_actions_, n_features_in_ : int
    mean_, scale_ : ndarray of shape (d,)
        Standardization statistics.
    network_ : genpqr.models.nn._FlatMLP
        The Q-network (outputs ``Q(s, .)``).
    nll_ : list of float
        Mean training negative log-likelihood (cross-entropy) of every epoch.
    fit_time_ : float
        Seconds spent in ``fit``.
    """

    name = "MaxEnt-IRL"

    def __init__(self, hidden_layer_sizes=(128, 128), learning_rate=5e-3, weight_decay=1e-4, max_epochs=150,
                 batch_size=256, standardize=True, clip=DEFAULT_CLIP, random_state=None):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.standardize = standardize
        self.clip = clip
        self.random_state = random_state

    def fit(self, data, y=None) -> "MaxEntIRL":
        """Fit on ``Transitions`` (actions as codes) or on arrays ``(X, y)``; returns self.

        Parameters
        ----------
        data : Transitions or array-like of shape (n, d)
        y : None or array-like of shape (n,)
            Action labels when ``data`` is an array; must be None with Transitions.
        """
        torch = _import_torch()
        start_time = time.perf_counter()
        hidden = _check_hidden_layer_sizes(self.hidden_layer_sizes)
        lr = _check_positive(self.learning_rate, "learning_rate")
        weight_decay = _check_positive(self.weight_decay, "weight_decay", allow_zero=True)
        epochs = _check_int(self.max_epochs, "max_epochs", allow_zero=False)
        clip = _check_clip(self.clip)
        states, codes, classes, encoder, _ = _fit_inputs(data, y)
        batch_size = _check_batch_size(self.batch_size, states.shape[0])
        K, d = classes.size, states.shape[1]

        mean, scale = _standardization(states, bool(self.standardize))
        generator = torch.Generator().manual_seed(_fresh_seed(self.random_state))
        with _torch_threads(_MAX_TRAIN_THREADS), torch.no_grad():
            X_t = _to_tensor(states, mean, scale)
            net = _FlatMLP((d, *hidden, K), generator)
            adam = _FlatAdam(net.flat.numel(), lr, weight_decay=weight_decay)
            nll = _cross_entropy_epochs(net, adam, X_t, _onehot_t(codes, K), epochs, batch_size, generator)

        self.classes_ = classes
        self.encoder_ = encoder
        self.n_actions_ = K
        self.n_features_in_ = d
        self.mean_, self.scale_ = mean, scale
        self.clip_ = clip
        self.network_ = net
        self.nll_ = nll
        self.fit_time_ = time.perf_counter() - start_time
        return self

    def _policy_logits(self, X: np.ndarray) -> np.ndarray:
        return _predict(self.network_, X, self.mean_, self.scale_, exact=True)

    def q(self, states, actions=None) -> np.ndarray:
        """The softmax-Q logits ``Q(s, a)``: (n, K), or (n,) at the given action labels."""
        return self._select(self._policy_logits(self._states(states)), actions)

    def reward(self, states, actions=None) -> np.ndarray:
        """The learned Q-surrogate reported as the reward (not normalized; see the class
        docstring): (n, K), or (n,) at the given action labels."""
        return self.q(states, actions)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags


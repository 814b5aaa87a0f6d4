"""The dueling Q-network: a native Q-model for GenPQR's stage 2 (fitted Q evaluation).

:class:`DuelingQNetwork` (also importable from ``genpqr.models._nn``) implements the native
Q-model protocol (``fit_q`` / ``predict_q``, warm-started across Bellman iterations), whose
argument checks, ``validate_q_inputs``, every native Q-model shares (e.g.
:class:`genpqr.models.BoostedQModel`). PyTorch is imported only when the network is
fitted or used.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator

from ..data._validation import as_float_array, check_length
from ..exceptions import NotFittedError
from ._torch_training import (
    batch_mean,
    batches,
    check_features,
    check_hidden_layer_sizes,
    check_positive,
    cpu_state,
    evaluate,
    import_torch,
    make_optimizer,
    module_device,
    optimization_step,
    permutation,
    resolve_device,
    seeded_generator,
    standardization,
    to_tensor,
    training_session,
)

__all__ = ["DuelingQNetwork", "validate_q_inputs"]


def validate_q_inputs(states, actions, targets, n_actions):
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
    device : {"cpu", "cuda", "cuda:N", "auto"}, default="cpu"
        Where the network trains and predicts (``"auto"``: CUDA when available). A pickle or
        copy holds the network on CPU; the next :meth:`fit_q` moves it back to ``device``.

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
    network_ : genpqr.models._torch_modules.MLP
        Trunk and heads (output 0 is V, outputs 1..K are A), trained by autograd and
        ``torch.optim.Adam`` (state kept across calls).
    device_ : str
        The device of the last :meth:`fit_q` call.
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
        device="cpu",
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.epochs_per_iteration = epochs_per_iteration
        self.weight_decay = weight_decay
        self.standardize = standardize
        self.random_state = random_state
        self.device = device

    def _initialise(self, states: np.ndarray, n_actions: int, device) -> None:
        from ._torch_modules import MLP

        hidden = check_hidden_layer_sizes(self.hidden_layer_sizes)
        lr = check_positive(self.learning_rate, "learning_rate")
        weight_decay = check_positive(self.weight_decay, "weight_decay", allow_zero=True)
        self.n_actions_ = n_actions
        self.n_features_in_ = states.shape[1]
        self.mean_, self.scale_ = standardization(states, bool(self.standardize))
        self._generator = seeded_generator(self.random_state)
        # output 0 is V(s), outputs 1..K are A(s, .)
        self.network_ = MLP((states.shape[1], *hidden, n_actions + 1), self._generator).to(device)
        self._optimizer = make_optimizer("adam", self.network_.parameters(), lr=lr, weight_decay=weight_decay)
        self.n_iter_ = 0
        self.loss_curve_ = []

    def _to_device(self, device) -> None:
        """Move the network and the optimizer state (e.g. after unpickling) to ``device``."""
        if module_device(self.network_) != device:
            self.network_.to(device)
            self._optimizer.to(device)

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
        torch = import_torch()
        states, actions, targets, n_actions = validate_q_inputs(states, actions, targets, n_actions)
        batch_size = check_positive(self.batch_size, "batch_size", integer=True)
        epochs = check_positive(self.epochs_per_iteration, "epochs_per_iteration", integer=True)
        device = resolve_device(self.device)
        if not hasattr(self, "network_"):
            self._initialise(states, n_actions, device)
        else:
            if n_actions != self.n_actions_:
                raise ValueError(
                    f"n_actions is {n_actions} but the first fit_q call used {self.n_actions_}; "
                    "clone the model to fit a different problem"
                )
            check_features(states, self.n_features_in_, "states")
            self._to_device(device)
        n, K = states.shape[0], n_actions
        with training_session(device):
            X_t = to_tensor(states, self.mean_, self.scale_, device)
            y_t = torch.from_numpy(targets.astype(np.float32)).to(device)
            # Q(s, a) = sum_j M[j] out[j] with M = [1, onehot(a) - 1/K] (V, then the centred A)
            mix_t = torch.full((K + 1, n), -1.0 / K, dtype=torch.float32)
            mix_t[0] = 1.0
            mix_t[torch.from_numpy(actions) + 1, torch.arange(n)] += 1.0
            mix_t = mix_t.to(device)
            for _ in range(epochs):
                self.loss_curve_.append(self._epoch(X_t, y_t, mix_t, batch_size))
        self.device_ = str(device)
        self.n_iter_ += 1
        return self

    def _epoch(self, X_t, y_t, mix_t, batch_size: int) -> float:
        """One shuffled pass of Adam on ``mean_i (Q(s_i, a_i) - y_i)^2``; returns the epoch's mean loss."""
        torch = import_torch()
        n, net, optimizer = X_t.shape[0], self.network_, self._optimizer
        perm = permutation(n, self._generator, X_t.device)
        X_p, y_p, M_p = X_t.index_select(0, perm), y_t.index_select(0, perm), mix_t.index_select(1, perm)
        losses = []
        for start, stop in batches(n, batch_size):
            q = (net.forward_t(X_p[start:stop]) * M_p[:, start:stop]).sum(dim=0)  # Q(s_i, a_i)
            loss = torch.nn.functional.mse_loss(q, y_p[start:stop])
            optimization_step(loss, optimizer)
            losses.append(loss.detach())
        return batch_mean(losses, n, batch_size)

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
        states = check_features(states, self.n_features_in_, "states")
        out = evaluate(self.network_, states, self.mean_, self.scale_, exact=False)
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
        from ._torch_modules import StandardizedNetwork

        return StandardizedNetwork(self.network_, self.mean_, self.scale_, dueling=True).eval()

    def __getstate__(self):
        # a network trained on a GPU is stored on CPU, so the pickle loads anywhere
        return cpu_state(super().__getstate__(), "network_", "_optimizer")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags

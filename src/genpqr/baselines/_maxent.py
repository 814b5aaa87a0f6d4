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
4.7-5.4 s with the former hand-written gradients (paper 8.6 s; with autograd 1.27x the former
engine's time in back-to-back runs, docs/benchmarks.md "Autograd networks"), test NLL 1.641 (paper 1.624), reward MSE 1.07, corr 0.28 (paper 1.17,
0.35).

Implementation: the network is ``genpqr.models._torch_modules.MLP``, trained by autograd and
``torch.optim.Adam`` through ``genpqr.models._torch_training.cross_entropy_epochs`` (the loop
behaviour cloning uses), on ``device``; the fitted network is kept on CPU.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import ClassifierMixin

from ..models._torch_training import (check_hidden_layer_sizes, check_positive, cross_entropy_epochs, evaluate,
                                     make_optimizer, resolve_device, seeded_generator, standardization,
                                     to_tensor, training_session)
from ..stage1._policy import DEFAULT_CLIP, check_clip
from ._base import RewardBaseline, SoftmaxPolicyMixin, check_batch_size, check_count, fit_inputs

__all__ = ["MaxEntIRL"]


# ============================================================================ the estimator
class MaxEntIRL(SoftmaxPolicyMixin, ClassifierMixin, RewardBaseline):
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
    device : {"cpu", "cuda", "cuda:N", "auto"}, default="cpu"
        Where the network trains (``"auto"``: CUDA when available); the fitted network is kept
        on CPU.

    Attributes
    ----------
    classes_ : ndarray of shape (K,)
        ``arange(K)`` (action codes) after ``fit(Transitions)``; the sorted labels of ``y``
        after ``fit(X, y)``.
    encoder_ : FiniteActions
        Labels accepted by ``reward(states, actions)``.
    n_actions_, n_features_in_ : int
    mean_, scale_ : ndarray of shape (d,)
        Standardization statistics.
    network_ : genpqr.models._torch_modules.MLP
        The Q-network (outputs ``Q(s, .)``), on CPU.
    nll_ : list of float
        Mean training negative log-likelihood (cross-entropy) of every epoch.
    fit_time_ : float
        Seconds spent in ``fit``.
    """

    name = "MaxEnt-IRL"

    def __init__(self, hidden_layer_sizes=(128, 128), learning_rate=5e-3, weight_decay=1e-4, max_epochs=150,
                 batch_size=256, standardize=True, clip=DEFAULT_CLIP, random_state=None, device="cpu"):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.standardize = standardize
        self.clip = clip
        self.random_state = random_state
        self.device = device

    def fit(self, data, y=None) -> "MaxEntIRL":
        """Fit on ``Transitions`` (actions as codes) or on arrays ``(X, y)``; returns self.

        Parameters
        ----------
        data : Transitions or array-like of shape (n, d)
        y : None or array-like of shape (n,)
            Action labels when ``data`` is an array; must be None with Transitions.
        """
        from ..models._torch_modules import MLP

        start_time = time.perf_counter()
        hidden = check_hidden_layer_sizes(self.hidden_layer_sizes)
        lr = check_positive(self.learning_rate, "learning_rate")
        weight_decay = check_positive(self.weight_decay, "weight_decay", allow_zero=True)
        epochs = check_count(self.max_epochs, "max_epochs", allow_zero=False)
        clip = check_clip(self.clip)
        device = resolve_device(self.device)
        states, codes, classes, encoder, _ = fit_inputs(data, y)
        batch_size = check_batch_size(self.batch_size, states.shape[0])
        K, d = classes.size, states.shape[1]

        mean, scale = standardization(states, bool(self.standardize))
        generator = seeded_generator(self.random_state)
        with training_session(device):
            net = MLP((d, *hidden, K), generator).to(device)
            adam = make_optimizer("adam", net.parameters(), lr=lr, weight_decay=weight_decay)
            nll = cross_entropy_epochs(net, adam, to_tensor(states, mean, scale, device),
                                       codes, epochs, batch_size, generator)
        net.to("cpu")

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
        return evaluate(self.network_, X, self.mean_, self.scale_, exact=True)

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


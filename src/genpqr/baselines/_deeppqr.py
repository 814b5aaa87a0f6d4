r"""DeepPQR (Geng et al., 2020): anchor-action reward recovery, Policy -> anchor Q -> Reward.

Implements the paper's DeepPQR exactly as fixed in ``/work/shared/benchmarks/synthetic-env.md``
("Estimator settings used for the paper's tables"); the paper discusses it in Sec. 3
("Comparison to DeepPQR").

The model (temperature ``alpha``, anchor action ``a+``, normalization ``r(s, a+) = g(s)``).
With the soft value ``V(s') = Q(s', a+) - alpha log pi(a+|s')`` the soft Bellman equation at the
anchor gives a fixed point for ``W(s) := Q(s, a+)``, the soft Q-value of the anchor action:

.. math::

    W(s)      &= g(s) + \gamma\,E[-\alpha\log\pi(a^+|s') + W(s') \mid s, a^+]   \\
    \hat Q(s,a) &= W(s) + \alpha[\log\pi(a|s) - \log\pi(a^+|s)]                  \\
    h(s,a)    &= E[-\alpha\log\pi(a^+|s') + W(s') \mid s, a] \quad (= E[V(s')|s,a]) \\
    \hat r(s,a) &= \hat Q(s,a) - \gamma\,h(s,a).

At the fixed point ``r_hat(s, a+) = W(s) - gamma h(s, a+) = g(s)``: the anchor normalization
holds by construction. (DeepPQR's ``W`` is the soft ``Q(s, a+) = V(s) + alpha log pi(a+|s)``;
the paper's anchored ``Q^mu_{u-g}(s, a+)`` equals ``-V(s)``, so with ``alpha = 1`` the two differ by
``log pi(a+|s)`` -- the same target reached through a different intermediate quantity.)

Estimation (the specification's settings are the defaults):

1. ``pi_hat``: any classifier (default behaviour cloning, :class:`genpqr.models.MLPClassifier`),
   probabilities clipped to ``[0.01, 0.99]`` and renormalized.
2. ``W``: an MLP (128, 128) ReLU on standardized states, fitted **on the anchor rows only**
   (``a_i = a+``) by ``n_iterations = 80`` fitted-Q iterations: targets
   ``y_i = g(s_i) + gamma c_i (-alpha log pi_hat(a+|s'_i) + W(s'_i))`` with ``W`` of the previous
   iteration (the current network; ``c_i = 0`` for terminated rows), clamped to ``+-50``, then
   ``epochs_per_iteration = 3`` epochs of Adagrad (lr 1e-3, batch 256) on the squared error,
   one network and one optimizer state throughout.
3. ``h``: an MLP (128, 128) on ``[standardized s, onehot(a)]`` fitted on **all** rows to
   ``c_i (-alpha log pi_hat(a+|s'_i) + W(s'_i))``, 200 epochs of Adagrad (lr 1e-3, batch 256).
4. ``r_hat = Q_hat - gamma h``.

Fidelity: checked step by step against the specification (docs/benchmarks.md, "DeepPQR
fidelity"); on a tabular population case the fit reaches the closed-form ``W`` and the true
reward (``tests/baselines/test_baselines.py``). The specification leaves open whether the optimizer state
persists across iterations (here: it does, with the network).

Implementation: the networks are ``genpqr.models._torch_modules.MLP`` trained by autograd and
``torch.optim.Adagrad`` with its defaults, on ``device``; whole data sets live in tensors and
mini-batches are slices of a per-epoch permutation. Training runs on one torch thread (restored
afterwards), like ``genpqr.models._nn``; the fitted networks are kept on CPU.
"""

from __future__ import annotations

import numbers
import time
import warnings

import numpy as np

from ..data._validation import check_gamma, plain, seed_from
from ..data import Transitions
from ..exceptions import WeakSupportWarning
from ..models._torch_training import (
    batch_mean,
    batches,
    check_hidden_layer_sizes,
    check_positive,
    evaluate,
    import_torch,
    make_optimizer,
    optimization_step,
    permutation,
    resolve_device,
    standardization,
    to_tensor,
    training_session,
)
from ..normalization import Normalization
from ..normalization._normalization import AnchorWeights
from ..stage1._policy import DEFAULT_CLIP, clip_log_proba
from ._base import PolicyBaseline, check_fixed_offset, check_transitions, default_normalization, fit_stage1

__all__ = ["DeepPQR"]


def _train_mse(net, opt, X, y, epochs: int, batch_size: int, generator) -> list[float]:
    """``epochs`` shuffled mini-batch passes of ``opt`` on ``mean_i (net(x_i) - y_i)^2`` (autograd).

    ``X`` (n, d) and ``y`` (n,) are float32 tensors on the network's device; ``net`` has one
    output. Returns the mean squared error of every epoch (accumulated over its batches).
    """
    torch = import_torch()
    n = X.shape[0]
    losses = []
    for _ in range(epochs):
        perm = permutation(n, generator, X.device)
        X_p, y_p = X.index_select(0, perm), y.index_select(0, perm)
        batch_losses = []
        for start, stop in batches(n, batch_size):
            loss = torch.nn.functional.mse_loss(net.forward_t(X_p[start:stop])[0], y_p[start:stop])
            optimization_step(loss, opt)
            batch_losses.append(loss.detach())
        losses.append(batch_mean(batch_losses, n, batch_size))
    return losses


def _check_int(value, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


class DeepPQR(PolicyBaseline):
    r"""DeepPQR (Geng et al. 2020): policy, anchor-action soft Q, then reward (module docstring).

    Only the fixed anchor-action normalization ``r(s, a+) = g(s)`` is supported (that is the
    method); :class:`genpqr.GenPQR` handles general normalizations.

    Parameters
    ----------
    normalization : Normalization, optional
        ``anchor_action(a, g)`` with a given ``g`` (scalar, (S,) array or callable). Default:
        ``anchor_action(first action label)``, ``g = 0``. Anything else raises ``ValueError``.
    gamma : float in [0, 1), default 0.9
    policy_model : classifier with ``predict_proba``, FittedPolicy or None
        Stage 1. Default :class:`genpqr.models.MLPClassifier` ``(random_state=random_state)``
        (behaviour cloning; the paper's tables use an AIRL policy shared with GenPQR -- pass it
        with ``policy_prefit=True``).
    policy_prefit : bool, default False
        ``policy_model`` is already fitted (a classifier whose ``classes_`` are action codes, or
        a ``genpqr.stage1._policy.FittedPolicy``) and is used as is: not cloned, not refitted.
    clip : (low, high) or None, default (0.01, 0.99)
        Probability clip bounds (rows renormalized); must leave probabilities positive.
    alpha : float > 0, default 1.0
        Temperature of the soft-optimality model.
    anchor_hidden_layer_sizes : tuple of int, default (128, 128)
        Hidden widths of ``W``.
    n_iterations : int >= 1, default 80
        Fitted-Q iterations for ``W``.
    epochs_per_iteration : int >= 1, default 3
        Adagrad epochs per iteration.
    anchor_learning_rate : float > 0, default 1e-3
        Adagrad step size for ``W``.
    target_clamp : float > 0 or None, default 50.0
        ``W`` targets are clamped to ``[-target_clamp, target_clamp]`` (None: no clamp).
    aux_hidden_layer_sizes : tuple of int, default (128, 128)
        Hidden widths of ``h``.
    aux_epochs : int >= 1, default 200
    aux_learning_rate : float > 0, default 1e-3
    batch_size : int >= 1, default 256
    min_support : int >= 0, default 30
        Warn (:class:`~genpqr.exceptions.WeakSupportWarning`) with fewer anchor rows.
    random_state : int, Generator or None
        Seeds stage 1 (as given) and both networks' initial weights and shuffles.
    device : {"cpu", "cuda", "cuda:N", "auto"}, default="cpu"
        Where ``W`` and ``h`` train (``"auto"``: CUDA when available); the fitted networks are
        kept on CPU. Stage 1 uses ``policy_model``'s own device.

    Attributes
    ----------
    policy_ : FittedPolicy
    normalization_ : Normalization (labels bound to codes)
    anchor_ : int
        Anchor action code; ``anchor_label_`` its label.
    anchor_count_ : int
        Training rows with the anchor action (the sample ``W`` is fitted on).
    anchor_loss_curve_ : list of float
        ``W``'s training MSE in the last epoch of each iteration.
    target_changes_ : list of float
        Per iteration, ``max_i |y_i - y_i^{previous}|`` of the ``W`` targets (the first entry is
        the largest target's magnitude).
    clamped_fraction_ : float
        Share of the last iteration's ``W`` targets at the clamp.
    aux_loss_curve_ : list of float
        ``h``'s training MSE per epoch.
    anchor_network_, aux_network_ : genpqr.models._torch_modules.MLP
        On CPU.
    state_mean_, state_scale_ : ndarray of shape (d,)
        Standardization of the states (all training rows).
    encoder_ : FiniteActions
    n_actions_, n_features_in_ : int
    fit_time_ : float
        Seconds spent in ``fit`` (stage 1 included).
    """

    name = "DeepPQR"

    def __init__(self, normalization=None, gamma=0.9, policy_model=None, policy_prefit=False, clip=DEFAULT_CLIP,
                 alpha=1.0, anchor_hidden_layer_sizes=(128, 128), n_iterations=80, epochs_per_iteration=3,
                 anchor_learning_rate=1e-3, target_clamp=50.0, aux_hidden_layer_sizes=(128, 128), aux_epochs=200,
                 aux_learning_rate=1e-3, batch_size=256, min_support=30, random_state=None, device="cpu"):
        self.normalization = normalization
        self.gamma = gamma
        self.policy_model = policy_model
        self.policy_prefit = policy_prefit
        self.clip = clip
        self.alpha = alpha
        self.anchor_hidden_layer_sizes = anchor_hidden_layer_sizes
        self.n_iterations = n_iterations
        self.epochs_per_iteration = epochs_per_iteration
        self.anchor_learning_rate = anchor_learning_rate
        self.target_clamp = target_clamp
        self.aux_hidden_layer_sizes = aux_hidden_layer_sizes
        self.aux_epochs = aux_epochs
        self.aux_learning_rate = aux_learning_rate
        self.batch_size = batch_size
        self.min_support = min_support
        self.random_state = random_state
        self.device = device

    # ------------------------------------------------------------------ validation
    def _check_params(self) -> dict:
        clamp = self.target_clamp
        if clamp is not None:
            clamp = check_positive(clamp, "target_clamp")
        return dict(
            gamma=check_gamma(self.gamma),
            alpha=check_positive(self.alpha, "alpha"),
            anchor_hidden=check_hidden_layer_sizes(self.anchor_hidden_layer_sizes),
            aux_hidden=check_hidden_layer_sizes(self.aux_hidden_layer_sizes),
            n_iterations=_check_int(self.n_iterations, "n_iterations", 1),
            epochs=_check_int(self.epochs_per_iteration, "epochs_per_iteration", 1),
            anchor_lr=check_positive(self.anchor_learning_rate, "anchor_learning_rate"),
            aux_epochs=_check_int(self.aux_epochs, "aux_epochs", 1),
            aux_lr=check_positive(self.aux_learning_rate, "aux_learning_rate"),
            batch_size=_check_int(self.batch_size, "batch_size", 1),
            min_support=_check_int(self.min_support, "min_support", 0),
            clamp=clamp,
            device=resolve_device(self.device),
        )

    def _anchor_normalization(self, data: Transitions) -> Normalization:
        norm = self.normalization if self.normalization is not None else default_normalization(data)
        if not isinstance(norm, Normalization):
            raise TypeError(f"normalization must be a genpqr Normalization (anchor_action(a)), got {type(norm).__name__}")
        if not isinstance(norm.mu, AnchorWeights):
            raise ValueError(
                f"DeepPQR supports only a fixed anchor action (normalization=anchor_action(a, g)); got "
                f"normalization ({norm.describe()}). Use genpqr.GenPQR for other normalizations."
            )
        check_fixed_offset(norm, "DeepPQR")
        try:
            data.encoder.encode_one(norm.mu.action, "anchor action")
        except (TypeError, ValueError):
            raise ValueError(
                f"the anchor action {plain(norm.mu.action)!r} of the normalization never occurs in the data (known "
                f"action labels: {data.encoder.labels.tolist()}); DeepPQR fits its anchor network on anchor rows only"
            ) from None
        return norm.bind(data.encoder.encode)

    # ------------------------------------------------------------------ fitting
    def fit(self, data: Transitions, y=None) -> "DeepPQR":
        """Fit stage 1, the anchor network ``W`` and the auxiliary network ``h``; returns self."""
        start = time.perf_counter()
        data = check_transitions(data).with_next()  # every step reads a next state
        prm = self._check_params()
        norm = self._anchor_normalization(data)
        anchor = int(norm.mu.action)
        anchor_rows = np.flatnonzero(data.actions == anchor)
        label = data.encoder.labels.tolist()[anchor]
        if anchor_rows.size == 0:
            raise ValueError(
                f"the anchor action {plain(label)!r} never occurs in the data (0 of {data.n} rows); DeepPQR fits its "
                f"anchor network on anchor rows only"
            )
        if anchor_rows.size < prm["min_support"]:
            warnings.warn(
                f"weak support for the anchor action {plain(label)!r}: only {anchor_rows.size} of {data.n} rows take "
                f"it (min_support={prm['min_support']}); DeepPQR's anchor network sees only these rows",
                WeakSupportWarning, stacklevel=2,
            )
        policy = fit_stage1(self.policy_model, self.policy_prefit, data, self.clip, self.random_state)
        # -alpha log pi_hat(a+|s') at every row's next state (out-of-fold if the policy is cross-fitted)
        v_part = -prm["alpha"] * clip_log_proba(policy.training_raw_proba(data.next_states), policy.clip)[:, anchor]
        g_rows = norm.g(data.states)

        seed = seed_from(self.random_state)
        w_seed, h_seed = (int(x) for x in np.random.default_rng(seed).integers(0, 2**62, size=2))
        mean, scale = standardization(data.states, True)
        with training_session(prm["device"]):
            w_net, w_hist = self._fit_anchor_network(data, anchor_rows, g_rows, v_part, mean, scale, w_seed, prm)
            h_net, h_losses = self._fit_aux_network(data, w_net, v_part, mean, scale, h_seed, prm)

        self._record_data(data)
        self.gamma_ = prm["gamma"]
        self.alpha_ = prm["alpha"]
        self.normalization_ = norm
        self.policy_ = policy
        self.anchor_ = anchor
        self.anchor_label_ = label
        self.anchor_count_ = int(anchor_rows.size)
        self.anchor_loss_curve_, self.target_changes_, self.clamped_fraction_ = w_hist
        self.aux_loss_curve_ = h_losses
        self.anchor_network_, self.aux_network_ = w_net.to("cpu"), h_net.to("cpu")
        self.state_mean_, self.state_scale_ = mean, scale
        self.fit_time_ = time.perf_counter() - start
        return self

    @staticmethod
    def _fit_anchor_network(data, rows, g_rows, v_part, mean, scale, seed, prm):
        """Fitted-Q iterations for ``W`` on the anchor rows (spec: 80 x 3 epochs, Adagrad)."""
        from ..models._torch_modules import MLP

        torch = import_torch()
        device = prm["device"]
        generator = torch.Generator().manual_seed(seed)
        net = MLP((data.state_dim, *prm["anchor_hidden"], 1), generator).to(device)
        opt = make_optimizer("adagrad", net.parameters(), lr=prm["anchor_lr"])
        X_t = to_tensor(data.states[rows], mean, scale, device)
        next_t = to_tensor(data.next_states[rows], mean, scale, device)
        g_t, v_t = g_rows[rows], v_part[rows]
        discount_t = prm["gamma"] * data.continues[rows]
        clamp = prm["clamp"]
        losses, changes = [], []
        previous = np.zeros(rows.size)
        clamped = 0.0
        for _ in range(prm["n_iterations"]):
            with torch.no_grad():
                w_next = net.forward_t(next_t)[0].double().cpu().numpy()
            y_t = g_t + discount_t * (v_t + w_next)
            if clamp is not None:
                clamped = float(np.mean(np.abs(y_t) >= clamp))
                y_t = np.clip(y_t, -clamp, clamp)
            changes.append(float(np.max(np.abs(y_t - previous))))
            previous = y_t
            epoch_losses = _train_mse(net, opt, X_t, torch.from_numpy(y_t.astype(np.float32)).to(device),
                                      prm["epochs"], prm["batch_size"], generator)
            losses.append(epoch_losses[-1])
        return net, (losses, changes, clamped)

    @staticmethod
    def _fit_aux_network(data, w_net, v_part, mean, scale, seed, prm):
        """``h(s, a)`` on all rows: targets ``c_i (-alpha log pi(a+|s'_i) + W(s'_i))`` (spec: 200 epochs, Adagrad)."""
        from ..models._torch_modules import MLP

        torch = import_torch()
        device = prm["device"]
        with torch.no_grad():
            w_next = w_net.forward_t(to_tensor(data.next_states, mean, scale, device))[0].double().cpu().numpy()
        h_targets = data.continues * (v_part + w_next)
        onehot = np.eye(data.n_actions)[data.actions]
        h_in = torch.cat([to_tensor(data.states, mean, scale, device),
                          torch.from_numpy(onehot.astype(np.float32)).to(device)], dim=1)
        gen_h = torch.Generator().manual_seed(seed)
        h_net = MLP((data.state_dim + data.n_actions, *prm["aux_hidden"], 1), gen_h).to(device)
        h_opt = make_optimizer("adagrad", h_net.parameters(), lr=prm["aux_lr"])
        y_t = torch.from_numpy(h_targets.astype(np.float32)).to(device)
        h_losses = _train_mse(h_net, h_opt, h_in.contiguous(), y_t, prm["aux_epochs"], prm["batch_size"], gen_h)
        return h_net, h_losses

    # ------------------------------------------------------------------ prediction
    def anchor_value(self, states) -> np.ndarray:
        """``W(s) = Q_hat(s, a+)``, the fitted anchor soft Q-value, shape (n,)."""
        X = self._states(states)
        return evaluate(self.anchor_network_, X, self.state_mean_, self.state_scale_, exact=True)[:, 0]

    def _aux(self, X: np.ndarray) -> np.ndarray:
        """``h(s, a)`` for every action, shape (n, K)."""
        n, K = X.shape[0], self.n_actions_
        X_aug = np.hstack([np.repeat(X, K, axis=0), np.tile(np.eye(K), (n, 1))])
        mean = np.concatenate([self.state_mean_, np.zeros(K)])
        scale = np.concatenate([self.state_scale_, np.ones(K)])
        return evaluate(self.aux_network_, X_aug, mean, scale, exact=True)[:, 0].reshape(n, K)

    def _q(self, X: np.ndarray) -> np.ndarray:
        w = evaluate(self.anchor_network_, X, self.state_mean_, self.state_scale_, exact=True)[:, 0]
        u = self.policy_.log_proba(X)
        return w[:, None] + self.alpha_ * (u - u[:, [self.anchor_]])

    def q(self, states, actions=None) -> np.ndarray:
        """``Q_hat(s, a) = W(s) + alpha [log pi_hat(a|s) - log pi_hat(a+|s)]``: (n, K), or (n,)
        at the given action labels."""
        X = self._states(states)
        return self._select(self._q(X), actions)

    def continuation(self, states, actions=None) -> np.ndarray:
        """``h(s, a)``, the fitted ``E[V(s') | s, a]``: (n, K), or (n,) at the given labels."""
        X = self._states(states)
        return self._select(self._aux(X), actions)

    def reward(self, states, actions=None) -> np.ndarray:
        """``r_hat = Q_hat - gamma h``: (n, K), or (n,) at the given action labels."""
        X = self._states(states)
        return self._select(self._q(X) - self.gamma_ * self._aux(X), actions)

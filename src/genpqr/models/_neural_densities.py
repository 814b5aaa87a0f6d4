r"""Neural conditional densities (PyTorch, imported lazily): a heteroscedastic MLP Gaussian, a
mixture density network, and an adapter for normalizing flows from ``zuko``.

All three standardize states and actions internally (weighted means and standard deviations)
and correct ``log_prob`` by the Jacobian of the action standardization,
``log p(a|s) = log p_z(z|s) - sum_k log sd_k``, so densities are w.r.t. Lebesgue measure on
``R^m`` in the user's units. Training: ``torch.optim.Adam`` on the (weighted) negative
log-likelihood (gradients by autograd; the mixture's density is a
``torch.distributions.MixtureSameFamily`` of diagonal normals), mini-batches, early stopping on a
held-out share of rows (``validation_fraction``), best weights restored; one torch thread;
``random_state`` seeds initial weights (the global torch RNG is left as it was) and shuffles.
``device`` (``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"``) is where training runs; the fitted
module is kept on CPU in float64.
"""

from __future__ import annotations

import copy
import numbers

import numpy as np

from ..data._validation import check_random_state
from ._torch_training import fresh_seed, import_torch, make_optimizer, resolve_device, torch_threads, training_session
from ..actions._densities import ConditionalDensity, check_n_samples

__all__ = ["MixtureDensityNetwork", "MLPGaussianDensity", "FlowDensity"]


def _hidden(sizes):
    if isinstance(sizes, numbers.Integral) and not isinstance(sizes, bool):
        sizes = (sizes,)
    sizes = tuple(int(s) for s in sizes)
    if not sizes or min(sizes) < 1:
        raise ValueError(f"hidden_layer_sizes must be positive integers, got {sizes}")
    return sizes


class _TorchDensity(ConditionalDensity):
    """Shared training loop; subclasses build ``self.module_`` and define ``_nll(Xt, At)``."""

    def _standardize(self, X, A, w):
        self.state_mean_ = np.average(X, axis=0, weights=w)
        sd = np.sqrt(np.average((X - self.state_mean_) ** 2, axis=0, weights=w))
        self.state_scale_ = np.where(sd > 0, sd, 1.0)
        self.action_mean_ = np.average(A, axis=0, weights=w)
        sd = np.sqrt(np.average((A - self.action_mean_) ** 2, axis=0, weights=w))
        self.action_scale_ = np.where(sd > 0, sd, 1.0)
        return (X - self.state_mean_) / self.state_scale_, (A - self.action_mean_) / self.action_scale_

    def _fit_module(self, build, Xs, As, w):
        """Build (``build()``, seeded from ``random_state`` without touching the global torch RNG)
        and train ``self.module_`` on ``device``; keep it on CPU in float64."""
        torch = import_torch()
        device = resolve_device(self.device)
        cuda = [device.index or 0] if device.type == "cuda" else []
        with training_session(device), torch.random.fork_rng(devices=cuda):
            torch.manual_seed(fresh_seed(self.random_state))
            self.module_ = build().to(device)
            self._train(Xs, As, w, device)
        self.module_ = self.module_.to("cpu").double()

    def _train(self, Xs, As, w, device):
        torch = import_torch()
        n = Xs.shape[0]
        seed = fresh_seed(self.random_state)
        rng = np.random.default_rng(seed)
        n_val = int(round(float(self.validation_fraction or 0.0) * n))
        perm = rng.permutation(n)
        val, train = (perm[:n_val], perm[n_val:]) if n_val >= 1 and n - n_val >= 2 else (perm[:0], perm)
        Xt = torch.as_tensor(Xs, dtype=torch.float32, device=device)
        At = torch.as_tensor(As, dtype=torch.float32, device=device)
        Wt = torch.as_tensor(w, dtype=torch.float32, device=device)
        optim = make_optimizer("adam", self.module_.parameters(), lr=float(self.learning_rate),
                               weight_decay=float(self.weight_decay))
        batch = max(1, min(int(self.batch_size), train.size))
        best, best_state, stall = np.inf, None, 0
        self.loss_curve_, self.validation_curve_ = [], []
        for _ in range(int(self.max_epochs)):
            order = torch.as_tensor(train[rng.permutation(train.size)], device=device)
            total = torch.zeros((), dtype=torch.float64, device=device)
            for start in range(0, order.numel(), batch):
                idx = order[start:start + batch]
                loss = torch.sum(Wt[idx] * self._nll(Xt[idx], At[idx])) / torch.sum(Wt[idx])
                optim.zero_grad()
                loss.backward()
                optim.step()
                total += loss.detach() * idx.numel()
            self.loss_curve_.append(float(total) / order.numel())
            if val.size:
                with torch.no_grad():
                    vi = torch.as_tensor(val, device=device)
                    vloss = float(torch.sum(Wt[vi] * self._nll(Xt[vi], At[vi])) / torch.sum(Wt[vi]))
                self.validation_curve_.append(vloss)
                if vloss < best - 1e-6:
                    best, best_state, stall = vloss, copy.deepcopy(self.module_.state_dict()), 0
                else:
                    stall += 1
                    if stall >= int(self.n_iter_no_change):
                        break
        if best_state is not None:
            self.module_.load_state_dict(best_state)
        self.n_epochs_ = len(self.loss_curve_)
        self.module_.eval()

    def _log_jacobian(self):
        return -float(np.sum(np.log(self.action_scale_)))


class MixtureDensityNetwork(_TorchDensity):
    r"""Mixture density network: ``p(a|s) = sum_c w_c(s) N(a; m_c(s), diag(sd_c(s)^2))`` with all
    parameters the outputs of one MLP on the standardized state.

    Parameters
    ----------
    n_components : int
    hidden_layer_sizes : tuple of int
    activation : {"tanh", "relu"}
        ``tanh`` gives smooth densities (and smooth ``u`` for stage 2).
    max_epochs, batch_size, learning_rate, weight_decay : training schedule (Adam)
    validation_fraction : float
        Share of rows held out for early stopping (0: no early stopping).
    n_iter_no_change : int
    min_scale : float
        Lower bound on the component scales, in standardized units.
    random_state : int or None
    device : {"cpu", "cuda", "cuda:N", "auto"}, default="cpu"
        Where the network trains (module docstring); the fitted module is kept on CPU.

    Attributes
    ----------
    module_ : torch.nn.Module
    loss_curve_, validation_curve_ : list of float
    support_ : ActionSpace (``R^m``)
    """

    def __init__(self, n_components=5, hidden_layer_sizes=(64, 64), activation="tanh", max_epochs=200,
                 batch_size=256, learning_rate=3e-3, weight_decay=0.0, validation_fraction=0.1,
                 n_iter_no_change=15, min_scale=1e-3, random_state=None, device="cpu"):
        self.n_components = n_components
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.min_scale = min_scale
        self.random_state = random_state
        self.device = device

    _state_dependent_scale = True

    def _components(self):
        C = self.n_components
        if isinstance(C, bool) or not isinstance(C, numbers.Integral) or C < 1:
            raise ValueError(f"n_components must be a positive integer, got {C!r}")
        return int(C)

    def _build(self, d, m):
        torch = import_torch()
        nn = torch.nn
        act = {"tanh": nn.Tanh, "relu": nn.ReLU}.get(self.activation)
        if act is None:
            raise ValueError(f"activation must be 'tanh' or 'relu', got {self.activation!r}")
        C = self._components()
        layers, width = [], d
        for h in _hidden(self.hidden_layer_sizes):
            layers += [nn.Linear(width, h), act()]
            width = h
        n_out = C + C * m + (C * m if self._state_dependent_scale else 0)
        layers.append(nn.Linear(width, n_out))
        module = nn.Sequential(*layers)
        module.register_parameter("log_scale", nn.Parameter(torch.zeros(C * m)))
        return module

    def _params(self, Xt):
        """(log_w (n, C), means (n, C, m), log_sd (n, C, m)) in standardized units."""
        torch = import_torch()
        C, m = self._components(), self.action_dim_
        out = self.module_(Xt)
        log_w = torch.log_softmax(out[:, :C], dim=1)
        means = out[:, C:C + C * m].reshape(-1, C, m)
        if self._state_dependent_scale:
            raw = out[:, C + C * m:].reshape(-1, C, m)
        else:
            raw = self.module_.log_scale.reshape(1, C, m).expand(out.shape[0], C, m)
        log_sd = torch.logaddexp(raw, torch.tensor(float(np.log(self.min_scale)), dtype=raw.dtype))
        return log_w, means, log_sd

    def _nll(self, Xt, At):
        D = import_torch().distributions
        log_w, means, log_sd = self._params(Xt)
        components = D.Independent(D.Normal(means, log_sd.exp(), validate_args=False), 1, validate_args=False)
        mixture = D.MixtureSameFamily(D.Categorical(logits=log_w, validate_args=False), components,
                                      validate_args=False)
        return -mixture.log_prob(At)

    def fit(self, states, actions, sample_weight=None):
        X, A, w = self._validate_fit(states, actions, sample_weight)
        Xs, As = self._standardize(X, A, w)
        self._fit_module(lambda: self._build(X.shape[1], A.shape[1]), Xs, As, w)
        return self

    def gaussian_mixture(self, states):
        X = self._validate_states(states)
        torch = import_torch()
        with torch_threads(1), torch.no_grad():
            Xt = torch.as_tensor((X - self.state_mean_) / self.state_scale_, dtype=torch.float64)
            log_w, means, log_sd = (t.numpy() for t in self._params(Xt))
        means = self.action_mean_ + self.action_scale_ * means
        sd = self.action_scale_ * np.exp(log_sd)
        return log_w, means, sd[..., None] * np.eye(self.action_dim_)


class MLPGaussianDensity(MixtureDensityNetwork):
    """Gaussian ``N(m(s), diag(sd(s)^2))`` with mean (and, if ``heteroscedastic``, log-scale)
    given by an MLP: the one-component mixture density network."""

    def __init__(self, hidden_layer_sizes=(64, 64), heteroscedastic=True, activation="tanh", max_epochs=200,
                 batch_size=256, learning_rate=3e-3, weight_decay=0.0, validation_fraction=0.1, n_iter_no_change=15,
                 min_scale=1e-3, random_state=None, device="cpu"):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.heteroscedastic = heteroscedastic
        self.activation = activation
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.min_scale = min_scale
        self.random_state = random_state
        self.device = device

    n_components = 1

    @property
    def _state_dependent_scale(self):
        return bool(self.heteroscedastic)


class FlowDensity(_TorchDensity):
    r"""A conditional normalizing flow from ``zuko`` (optional dependency, ``pip install zuko``).

    Parameters
    ----------
    flow : str
        A class of ``zuko.flows`` taking ``features``, ``context``, ``transforms`` and
        ``hidden_features`` (``"NSF"``: neural spline flow; ``"MAF"``).
    transforms : int
    hidden_features : tuple of int
    max_epochs, batch_size, learning_rate, weight_decay, validation_fraction, n_iter_no_change, random_state, device
        As ``MixtureDensityNetwork``.
    """

    def __init__(self, flow="NSF", transforms=3, hidden_features=(64, 64), max_epochs=200, batch_size=256,
                 learning_rate=1e-3, weight_decay=0.0, validation_fraction=0.1, n_iter_no_change=15,
                 random_state=None, device="cpu"):
        self.flow = flow
        self.transforms = transforms
        self.hidden_features = hidden_features
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.random_state = random_state
        self.device = device

    @staticmethod
    def _zuko():
        try:
            import zuko
        except ImportError as exc:
            raise ImportError("FlowDensity needs the optional package zuko (normalizing flows in PyTorch): "
                              "`pip install zuko`; or use MixtureDensityNetwork") from exc
        return zuko

    def _nll(self, Xt, At):
        return -self.module_(Xt).log_prob(At)

    def fit(self, states, actions, sample_weight=None):
        X, A, w = self._validate_fit(states, actions, sample_weight)
        zuko = self._zuko()
        builder = getattr(zuko.flows, str(self.flow), None)
        if builder is None:
            raise ValueError(f"flow must name a class of zuko.flows (e.g. 'NSF', 'MAF'), got {self.flow!r}")
        Xs, As = self._standardize(X, A, w)
        self._fit_module(lambda: builder(features=A.shape[1], context=X.shape[1], transforms=int(self.transforms),
                                         hidden_features=list(_hidden(self.hidden_features))), Xs, As, w)
        return self

    def log_prob(self, states, actions):
        X, A = self._validate_query(states, actions)
        torch = import_torch()
        with torch_threads(1), torch.no_grad():
            Xt = torch.as_tensor((X - self.state_mean_) / self.state_scale_, dtype=torch.float64)
            At = torch.as_tensor((A - self.action_mean_) / self.action_scale_, dtype=torch.float64)
            out = self.module_(Xt).log_prob(At).numpy()
        return out + self._log_jacobian()

    def sample(self, states, n_samples=1, random_state=None):
        X = self._validate_states(states)
        J = check_n_samples(n_samples)
        torch = import_torch()
        seed = int(check_random_state(random_state).integers(0, 2**31 - 1))
        with torch_threads(1), torch.no_grad(), torch.random.fork_rng():
            torch.manual_seed(seed)
            Xt = torch.as_tensor((X - self.state_mean_) / self.state_scale_, dtype=torch.float64)
            z = self.module_(Xt).sample((J,)).numpy()  # (J, n, m)
        return self.action_mean_ + self.action_scale_ * np.transpose(z, (1, 0, 2))

r"""Stage 1 for continuous actions: conditional log-densities ``u(s, a) = log p(a|s)``.

Every density here has one interface (scikit-learn style; ``__init__`` only stores):

* ``fit(states (n, d), actions (n, m), sample_weight=None) -> self``;
* ``log_prob(states, actions) -> (n,)``: the log-density **with respect to Lebesgue measure
  on the density's support** ``support_`` (an :class:`~genpqr.data.BoxActions`;
  ``R^m`` unless stated), the reference measure named by ``reference_measure``;
* ``sample(states, n_samples=1, random_state=None) -> (n, n_samples, m)``.

Gaussian (mixture) densities also give ``gaussian_mixture(states)`` (log-weights, means,
Cholesky factors), which Gauss-Hermite quadrature uses for ``mu = pi_hat``.

Families: :class:`LinearGaussianDensity` (mean and log-scale polynomial in the state;
homoscedastic by closed form, heteroscedastic by L-BFGS), :class:`FixedGaussianDensity` (a
known linear-Gaussian policy), :class:`KnownDensity` (any closed-form policy),
:class:`SquashedDensity` (bounded boxes: any base density pushed through ``tanh``), and in
``genpqr.models._neural_densities`` the MLP Gaussian, the mixture density network and a
normalizing-flow adapter. ``check_normalized`` verifies numerically that a density
integrates to one over its support.

Bounded action spaces: a density on ``R^m`` is not a density on a box, so the estimator
requires ``support_`` to equal the data's action space. The squashed family maps
``x in R^m`` to ``a = low + (high - low) (tanh(x) + 1) / 2``; with ``t = 2 (a - low) / (high - low) - 1``,

    log p_A(a|s) = log p_X(atanh t | s) - sum_k [log((high_k - low_k) / 2) + log(1 - t_k^2)],

a density w.r.t. Lebesgue measure on the box.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp

from .. import exceptions
from ..data._estimator_base import LightEstimator
from ..data._validation import as_float_array, check_length, check_random_state, clone_learner as clone
from ..data import BoxActions as ActionSpace
from ..data._spaces import as_actions

__all__ = ["ConditionalDensity", "LinearGaussianDensity", "FixedGaussianDensity", "KnownDensity", "SquashedDensity",
           "check_density", "check_normalized", "check_n_samples", "gaussian_mixture_log_prob", "gaussian_mixture_sample"]

_LOG_2PI = float(np.log(2.0 * np.pi))


def check_density(model, name: str = "policy_model"):
    """A conditional density must have ``fit``, ``log_prob`` and ``sample``."""
    missing = [m for m in ("fit", "log_prob", "sample") if not callable(getattr(model, m, None))]
    if missing:
        hint = ""
        if hasattr(model, "predict_proba"):
            hint = ("; it looks like a classifier (predict_proba): for discrete actions use genpqr.GenPQR, for "
                    "continuous actions pass a conditional density such as LinearGaussianDensity")
        raise TypeError(f"{name} must be a conditional density with fit(states, actions), log_prob(states, actions) "
                        f"and sample(states, n_samples, random_state); {type(model).__name__} lacks {missing}{hint}")
    return model


# =============================================================================== mixture helpers
def gaussian_mixture_log_prob(log_w, means, chol, actions) -> np.ndarray:
    """``log sum_c w_c N(a; mean_c, L_c L_c')`` for (n, C), (n, C, m), (n, C, m, m), (n, m)."""
    diff = actions[:, None, :] - means  # (n, C, m)
    z = np.linalg.solve(chol, diff[..., None])[..., 0]
    logdet = np.sum(np.log(np.abs(np.diagonal(chol, axis1=-2, axis2=-1))), axis=-1)
    m = actions.shape[1]
    comp = -0.5 * np.sum(z * z, axis=-1) - logdet - 0.5 * m * _LOG_2PI
    log_w = log_w - logsumexp(log_w, axis=1, keepdims=True)
    return logsumexp(log_w + comp, axis=1)


def gaussian_mixture_sample(log_w, means, chol, n_samples: int, rng: np.random.Generator) -> np.ndarray:
    """Draws (n, J, m) from the mixtures (vectorized: Gumbel-max component choice)."""
    n, C, m = means.shape
    log_w = log_w - logsumexp(log_w, axis=1, keepdims=True)
    if C == 1:
        comp = np.zeros((n, n_samples), dtype=np.int64)
    else:
        comp = np.argmax(log_w[:, None, :] + rng.gumbel(size=(n, n_samples, C)), axis=2)
    rows = np.arange(n)[:, None]
    z = rng.standard_normal((n, n_samples, m))
    return means[rows, comp] + np.einsum("njab,njb->nja", chol[rows, comp], z)


# =============================================================================== base class
class ConditionalDensity(LightEstimator):
    """Base class: validation, the stated support and reference measure, the Gaussian-mixture
    route to ``log_prob``/``sample`` for subclasses that define ``gaussian_mixture``."""

    def _support_for(self, m: int) -> ActionSpace:
        return ActionSpace.create(m)

    def _validate_fit(self, states, actions, sample_weight):
        X = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
        A = as_actions(actions)
        check_length(X, A.shape[0], "states", "actions")
        if X.shape[0] < 2:
            raise ValueError(f"need at least 2 rows to fit a density, got {X.shape[0]}")
        w = np.ones(X.shape[0]) if sample_weight is None else as_float_array(sample_weight, "sample_weight", ndim=1)
        check_length(w, X.shape[0], "sample_weight", "actions")
        if w.min() < 0 or w.sum() <= 0:
            raise ValueError("sample_weight must be non-negative with a positive sum")
        support = self._support_for(A.shape[1])
        support.check(A, "actions")
        self.n_features_in_ = X.shape[1]
        self.action_dim_ = A.shape[1]
        self.support_ = support
        return X, A, w / w.mean()

    def _check_is_fitted(self):
        if not hasattr(self, "action_dim_"):
            raise exceptions.NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit(states, actions) first")

    def _validate_states(self, states):
        self._check_is_fitted()
        X = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"states must have {self.n_features_in_} column(s) like the training states, got {X.shape[1]}")
        return X

    def _validate_query(self, states, actions):
        X = self._validate_states(states)
        A = as_actions(actions, dim=self.action_dim_)
        check_length(A, X.shape[0], "actions", "states")
        self.support_.check(A, "actions")
        return X, A

    @property
    def reference_measure(self) -> str:
        """The measure ``log_prob`` is a density against."""
        self._check_is_fitted()
        return self.support_.reference_measure()

    # Gaussian-mixture route
    def log_prob(self, states, actions) -> np.ndarray:
        """``log p(a|s)`` w.r.t. Lebesgue measure on ``support_``, shape (n,)."""
        X, A = self._validate_query(states, actions)
        return gaussian_mixture_log_prob(*self.gaussian_mixture(X), A)

    def sample(self, states, n_samples: int = 1, random_state=None) -> np.ndarray:
        """Draws ``a ~ p(.|s)``, shape (n, n_samples, m)."""
        X = self._validate_states(states)
        return gaussian_mixture_sample(*self.gaussian_mixture(X), check_n_samples(n_samples), check_random_state(random_state))


def check_n_samples(n_samples) -> int:
    """``n_samples`` as a positive int (refusing bools, floats and ``< 1`` by name)."""
    if isinstance(n_samples, bool) or not isinstance(n_samples, numbers.Integral) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}")
    return int(n_samples)




# =============================================================================== linear Gaussian
class LinearGaussianDensity(ConditionalDensity):
    r"""``a | s ~ N(W' phi(s), diag(exp(2 V' phi(s))))`` with ``phi`` the polynomial features
    (degree ``degree``) of the standardized state.

    Parameters
    ----------
    degree : int
        Polynomial degree of the mean (and of the log-scale when heteroscedastic).
    heteroscedastic : bool
        False: constant scale, fitted in closed form (weighted least squares + residual
        variance). True: log-scale polynomial in the state too, fitted by L-BFGS on the
        negative log-likelihood from the homoscedastic solution.
    alpha : float
        Ridge penalty on the coefficients (excluding intercepts).
    max_iter : int
        L-BFGS iterations (heteroscedastic).

    Attributes
    ----------
    mean_coef_ : ndarray of shape (p, m)
    log_scale_coef_ : ndarray of shape (p, m)
    support_ : ActionSpace (``R^m``)
    """

    def __init__(self, degree=1, heteroscedastic=False, alpha=1e-8, max_iter=500):
        self.degree = degree
        self.heteroscedastic = heteroscedastic
        self.alpha = alpha
        self.max_iter = max_iter

    def _features(self, X):
        return self.poly_.transform((X - self.state_mean_) / self.state_scale_)

    def fit(self, states, actions, sample_weight=None):
        from sklearn.preprocessing import PolynomialFeatures

        X, A, w = self._validate_fit(states, actions, sample_weight)
        if isinstance(self.degree, bool) or not isinstance(self.degree, numbers.Integral) or self.degree < 0:
            raise ValueError(f"degree must be a non-negative integer, got {self.degree!r}")
        self.state_mean_ = np.average(X, axis=0, weights=w)
        sd = np.sqrt(np.average((X - self.state_mean_) ** 2, axis=0, weights=w))
        self.state_scale_ = np.where(sd > 0, sd, 1.0)
        self.poly_ = PolynomialFeatures(int(self.degree), include_bias=True).fit(np.zeros((1, X.shape[1])))
        Phi = self._features(X)
        p, m = Phi.shape[1], A.shape[1]
        penalty = np.full(p, float(self.alpha))
        penalty[0] = 0.0
        gram = Phi.T @ (w[:, None] * Phi) + np.diag(penalty) * w.sum()
        W = np.linalg.lstsq(gram, Phi.T @ (w[:, None] * A), rcond=None)[0]
        resid = A - Phi @ W
        var = np.average(resid ** 2, axis=0, weights=w)
        if np.any(var <= 0):
            raise ValueError("actions are an exact function of the state (zero residual variance): no density exists")
        V = np.zeros((p, m))
        V[0] = 0.5 * np.log(var)
        if self.heteroscedastic:
            W, V = self._fit_heteroscedastic(Phi, A, w, W, V, penalty)
        self.mean_coef_, self.log_scale_coef_ = W, V
        return self

    def _fit_heteroscedastic(self, Phi, A, w, W0, V0, penalty):
        p, m = W0.shape
        wn = w / w.sum()

        def objective(theta):
            W, V = theta[: p * m].reshape(p, m), theta[p * m:].reshape(p, m)
            logs = np.clip(Phi @ V, -30, 30)
            inv = np.exp(-2.0 * logs)
            r = A - Phi @ W
            loss = np.sum(wn[:, None] * (logs + 0.5 * r * r * inv)) + 0.5 * np.sum(penalty[:, None] * (W * W + V * V))
            gW = -Phi.T @ (wn[:, None] * r * inv) + penalty[:, None] * W
            gV = Phi.T @ (wn[:, None] * (1.0 - r * r * inv)) + penalty[:, None] * V
            return loss, np.concatenate([gW.ravel(), gV.ravel()])

        res = minimize(objective, np.concatenate([W0.ravel(), V0.ravel()]), jac=True, method="L-BFGS-B",
                       options={"maxiter": int(self.max_iter), "gtol": 1e-10, "ftol": 1e-14})
        self.n_iter_ = int(res.nit)
        theta = res.x
        return theta[: p * m].reshape(p, m), theta[p * m:].reshape(p, m)

    def mean(self, states) -> np.ndarray:
        """``E[a|s]``, shape (n, m)."""
        return self._features(self._validate_states(states)) @ self.mean_coef_

    def scale(self, states) -> np.ndarray:
        """Per-dimension standard deviation, shape (n, m)."""
        return np.exp(np.clip(self._features(self._validate_states(states)) @ self.log_scale_coef_, -30, 30))

    def gaussian_mixture(self, states):
        X = self._validate_states(states)
        mean, scale = self.mean(X), self.scale(X)
        return np.zeros((X.shape[0], 1)), mean[:, None, :], scale[:, None, :, None] * np.eye(mean.shape[1])


# =============================================================================== known policies
class FixedGaussianDensity(ConditionalDensity):
    """A known linear-Gaussian policy ``a | s ~ N(offset + gain @ s, cov)``; ``fit`` only checks
    dimensions (plug in a true policy).

    Parameters
    ----------
    gain : array of shape (m, d)
    offset : array of shape (m,)
    cov : array of shape (m, m) (or a scalar variance for m = 1)
    """

    def __init__(self, gain, offset=0.0, cov=1.0):
        self.gain = gain
        self.offset = offset
        self.cov = cov

    def _params(self):
        G = np.atleast_2d(np.asarray(self.gain, dtype=np.float64))
        m = G.shape[0]
        off = np.broadcast_to(np.asarray(self.offset, dtype=np.float64), (m,))
        cov = np.atleast_2d(np.asarray(self.cov, dtype=np.float64))
        if cov.shape != (m, m):
            raise ValueError(f"cov must have shape ({m}, {m}), got {cov.shape}")
        try:
            chol = np.linalg.cholesky(cov)
        except np.linalg.LinAlgError as exc:
            raise ValueError("cov must be symmetric positive definite") from exc
        return G, off, chol

    def fit(self, states=None, actions=None, sample_weight=None):
        G, _, _ = self._params()
        if states is not None:
            X, A, _ = self._validate_fit(states, actions, sample_weight)
            if X.shape[1] != G.shape[1] or A.shape[1] != G.shape[0]:
                raise ValueError(f"gain has shape {G.shape} but the data has state_dim {X.shape[1]} and action_dim "
                                 f"{A.shape[1]}")
        else:
            self.n_features_in_, self.action_dim_ = G.shape[1], G.shape[0]
            self.support_ = ActionSpace.create(G.shape[0])
        return self

    def _validate_states(self, states):
        if not hasattr(self, "action_dim_"):
            self.fit()
        return super()._validate_states(states)

    def gaussian_mixture(self, states):
        X = self._validate_states(states)
        G, off, chol = self._params()
        mean = X @ G.T + off
        return np.zeros((X.shape[0], 1)), mean[:, None, :], np.broadcast_to(chol, (X.shape[0], 1) + chol.shape).copy()


class KnownDensity(ConditionalDensity):
    """Any closed-form policy density (e.g. the true policy of a benchmark); ``fit`` only checks
    dimensions and support.

    Parameters
    ----------
    log_prob_fn : callable (states (n, d), actions (n, m)) -> (n,)
        Log-density w.r.t. Lebesgue measure on ``[low, high]``.
    sample_fn : callable (states, n_samples, rng) -> (n, n_samples, m)
    action_dim, state_dim : int
    low, high : float or (m,) arrays, optional (default unbounded)
    gaussian_mixture_fn : callable, optional
        ``states -> (log_weights, means, cholesky)`` when the policy is a Gaussian mixture.
    """

    def __init__(self, log_prob_fn, sample_fn, action_dim=1, state_dim=1, low=None, high=None,
                 gaussian_mixture_fn=None):
        self.log_prob_fn = log_prob_fn
        self.sample_fn = sample_fn
        self.action_dim = action_dim
        self.state_dim = state_dim
        self.low = low
        self.high = high
        self.gaussian_mixture_fn = gaussian_mixture_fn

    def _support_for(self, m):
        return ActionSpace.create(m, self.low, self.high)

    def fit(self, states=None, actions=None, sample_weight=None):
        if states is not None:
            X, A, _ = self._validate_fit(states, actions, sample_weight)
            if A.shape[1] != self.action_dim or X.shape[1] != self.state_dim:
                raise ValueError(f"KnownDensity has state_dim={self.state_dim}, action_dim={self.action_dim} but the "
                                 f"data has {X.shape[1]} and {A.shape[1]}")
        else:
            self.n_features_in_, self.action_dim_ = int(self.state_dim), int(self.action_dim)
            self.support_ = self._support_for(self.action_dim_)
        return self

    def _validate_states(self, states):
        if not hasattr(self, "action_dim_"):
            self.fit()
        return super()._validate_states(states)

    def log_prob(self, states, actions):
        X, A = self._validate_query(states, actions)
        return as_float_array(self.log_prob_fn(X, A), "log_prob_fn(states, actions)").reshape(-1)

    def sample(self, states, n_samples=1, random_state=None):
        X = self._validate_states(states)
        out = np.asarray(self.sample_fn(X, check_n_samples(n_samples), check_random_state(random_state)), dtype=np.float64)
        return out.reshape(X.shape[0], n_samples, -1)

    def gaussian_mixture(self, states):
        if self.gaussian_mixture_fn is None:
            raise NotImplementedError("this KnownDensity was given no gaussian_mixture_fn")
        return self.gaussian_mixture_fn(self._validate_states(states))


# =============================================================================== bounded boxes
class SquashedDensity(ConditionalDensity):
    """A density on the box ``[low, high]``: ``base`` (a density on ``R^m``) pushed through
    ``a = low + (high - low) (tanh(x) + 1) / 2`` (change of variables in the module docstring).

    Parameters
    ----------
    base : conditional density on R^m, optional
        Default ``LinearGaussianDensity(degree=2, heteroscedastic=True)``.
    low, high : float or (m,) arrays (finite)
    boundary_eps : float
        Actions within ``boundary_eps * (high - low) / 2`` of a bound (e.g. clipped actions) are
        moved inside by that much before ``atanh``.
    """

    def __init__(self, base=None, low=-1.0, high=1.0, boundary_eps=1e-6):
        self.base = base
        self.low = low
        self.high = high
        self.boundary_eps = boundary_eps

    def _support_for(self, m):
        space = ActionSpace.create(m, self.low, self.high)
        if not space.is_bounded:
            raise ValueError(f"SquashedDensity needs finite low and high, got low={self.low}, high={self.high}")
        return space

    def _to_latent(self, A):
        lo, hi = self.support_.low, self.support_.high
        t = np.clip(2.0 * (A - lo) / (hi - lo) - 1.0, -1.0 + self.boundary_eps, 1.0 - self.boundary_eps)
        return np.arctanh(t), t

    def fit(self, states, actions, sample_weight=None):
        X, A, w = self._validate_fit(states, actions, sample_weight)
        base = self.base if self.base is not None else LinearGaussianDensity(degree=2, heteroscedastic=True)
        check_density(base, "base")
        x, _ = self._to_latent(A)
        self.base_ = clone(base).fit(X, x, sample_weight=w)
        return self

    def log_prob(self, states, actions):
        X, A = self._validate_query(states, actions)
        x, t = self._to_latent(A)
        half = 0.5 * (self.support_.high - self.support_.low)
        return self.base_.log_prob(X, x) - np.sum(np.log(half) + np.log1p(-t * t), axis=1)

    def sample(self, states, n_samples=1, random_state=None):
        X = self._validate_states(states)
        x = self.base_.sample(X, check_n_samples(n_samples), random_state=check_random_state(random_state))
        lo, hi = self.support_.low, self.support_.high
        return lo + (hi - lo) * 0.5 * (np.tanh(x) + 1.0)


# =============================================================================== normalization check
def check_normalized(density, states, *, tol: float = 1e-2, n_nodes: int = 256, n_range_samples: int = 256,
                     random_state=0, name: str = "policy_model") -> np.ndarray:
    r"""Verify ``int exp(log_prob(s, a)) da = 1`` over the density's support at each state.

    Gauss-Legendre quadrature (tensor product; up to 3 action dims) over the support, cut to
    ``[min - 4 sd, max + 4 sd]`` of ``n_range_samples`` draws per state (so unbounded supports
    work). Returns the integrals (n,); raises ValueError when one is off by more than ``tol``.
    """
    rng = check_random_state(random_state)
    X = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
    draws = np.asarray(density.sample(X, n_range_samples, random_state=rng), dtype=np.float64)
    n, _, m = draws.shape
    if m > 3:
        return np.full(n, np.nan)
    per_dim = max(4, int(round(min(n_nodes, 4096 ** (1.0 / m)))))
    x, w = np.polynomial.legendre.leggauss(per_dim)
    support = getattr(density, "support_", ActionSpace.create(m))
    sd = draws.std(axis=1)
    lo = np.maximum(draws.min(axis=1) - 4.0 * sd - 1e-9, support.low)
    hi = np.minimum(draws.max(axis=1) + 4.0 * sd + 1e-9, support.high)
    grids = np.meshgrid(*([x] * m), indexing="ij")
    unit = np.stack([g.ravel() for g in grids], axis=1)  # (J, m) in [-1, 1]
    uw = np.prod(np.stack([g.ravel() for g in np.meshgrid(*([w] * m), indexing="ij")], axis=1), axis=1)
    half = 0.5 * (hi - lo)  # (n, m)
    nodes = lo[:, None, :] + (unit[None] + 1.0) * half[:, None, :]
    J = unit.shape[0]
    logp = np.asarray(density.log_prob(np.repeat(X, J, axis=0), nodes.reshape(-1, m)), dtype=np.float64).reshape(n, J)
    integrals = np.sum(np.exp(logp) * uw[None, :], axis=1) * np.prod(half, axis=1)
    worst = int(np.argmax(np.abs(integrals - 1.0)))
    if not np.isfinite(integrals[worst]) or abs(integrals[worst] - 1.0) > tol:
        raise ValueError(
            f"{name}.log_prob is not a normalized density with respect to {support.reference_measure()}: it integrates "
            f"to {integrals[worst]:.6g} at state {X[worst].tolist()} (tolerance {tol:g}). Normalize it (for a bounded "
            "action space use a density on that box, e.g. SquashedDensity), or pass check_density=False"
        )
    return integrals

r"""Reference kernels ``mu(da|s)`` and reference measures ``lambda``.

Continuous-action GenPQR (paper, App. "Continuous-Action Extension", Alg. "Continuous-Action
GenPQR") needs two kinds of integral over actions:

* ``(mu f)(s) = int f(s, a) mu(da|s)`` in the Bellman targets and in the reward read-off;
* the log-partition ``Xi f(s) = log int exp f(s, a) lambda(da)`` that defines the Boltzmann
  policy, which is where the *reference measure* ``lambda`` enters: ``u = log dpi/dlambda``.

Reference kernels (``mu``)
--------------------------
:class:`GaussianKernel` ``N(m(s), diag(scale(s)^2))`` with ``m(s) = mean + gain @ s`` or a
callable; :class:`UniformKernel` on a box (the continuous "mean-zero" normalization);
:class:`PointMass` at an anchor ``a0(s)`` (the continuous anchor action); :class:`BehaviorKernel`
(``mu = pi_hat``); ``DensityKernel``, any sampler with a density. A kernel with a density
gives it with respect to Lebesgue measure; it must put its mass inside the action space (the
paper's assumption that ``mu`` is dominated by ``lambda``).

Reference measures (``lambda``)
-------------------------------
:class:`Lebesgue` (default) or :class:`GaussianReference`; ``log_density(a)`` is
``log dlambda/dLebesgue``. Changing ``lambda`` to ``lambda'`` changes ``u`` by
``-log dlambda'/dlambda (a)``, an action-dependent term, and so changes the normalized reward:
the reference measure is part of the model, stated in every fitted object.

Integration rules (:mod:`genpqr.actions`)
---------------------------------------------
A rule turns ``mu(.|s_i)`` into weighted nodes (``Nodes``: actions ``(n, J, m)``, weights
``(n, J)`` summing to one per row):

* :class:`MonteCarlo` -- ``J`` draws from ``mu(.|s_i)``, independent across rows, optionally
  antithetic. Drawn once per fit: the same draws serve every FQE iteration (common random
  numbers), so the iteration is a fixed map and converges;
* :class:`GaussHermite` -- tensor-product Gauss-Hermite for Gaussian (mixture) kernels: exact
  for polynomials of degree ``<= 2 J - 1`` in the action;
* :class:`GaussLegendre` -- tensor-product Gauss-Legendre on a bounded support, weighted by
  the kernel's density.

A point mass is integrated exactly by one node under every rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data._validation import as_float_array
from ._sampling import antithetic_normal, antithetic_uniform, as_states
from ..data import BoxActions as ActionSpace

__all__ = [
    "ReferenceKernel", "GaussianKernel", "UniformKernel", "PointMass", "BehaviorKernel", "DensityKernel",
    "ReferenceMeasure", "Lebesgue", "GaussianReference",
]

_LOG_2PI = float(np.log(2.0 * np.pi))


# =============================================================================== helpers
def _param(value, states: np.ndarray, m: int, name: str, positive: bool = False) -> np.ndarray:
    """A state-dependent parameter as (n, m): scalar, (m,) array or callable states -> (n,)/(n, m)."""
    n = states.shape[0]
    if callable(value):
        out = as_float_array(value(states), f"{name}(states)")
        if out.ndim == 1 and m == 1:
            out = out[:, None]
        if out.shape != (n, m):
            raise ValueError(f"{name} callable must return shape ({n}, {m}) (or ({n},) for 1-D actions), "
                             f"got {out.shape}")
    else:
        arr = as_float_array(value, name)
        if arr.ndim > 1 or (arr.ndim == 1 and arr.size not in (1, m)):
            raise ValueError(f"{name} must be a scalar, an ({m},) array or a callable, got shape {arr.shape}")
        out = np.broadcast_to(arr.reshape(-1) if arr.ndim else arr, (n, m)).astype(np.float64)
    if positive and np.any(out <= 0):
        raise ValueError(f"{name} must be positive, got a minimum of {out.min():.3g}")
    return out


def _gain(gain, states: np.ndarray, m: int) -> np.ndarray:
    if gain is None:
        return 0.0
    G = np.atleast_2d(np.asarray(gain, dtype=np.float64))
    if G.shape != (m, states.shape[1]):
        raise ValueError(f"gain must have shape (action_dim, state_dim) = ({m}, {states.shape[1]}), got {G.shape}")
    return states @ G.T


# =============================================================================== kernels
class ReferenceKernel:
    """``mu(da|s)``: a Markov kernel on the action space.

    Subclasses implement ``sample(states, n_samples, rng, antithetic) -> (n, J, m)`` and,
    when ``mu`` has a Lebesgue density, ``log_prob(states, actions) -> (n,)``. Gaussian (mixture)
    kernels also give ``gaussian_mixture(states) -> (log_weights (n, C), means (n, C, m),
    cholesky (n, C, m, m))`` for Gauss-Hermite quadrature. ``support()`` is the box holding the
    mass (None: ``R^m``).
    """

    is_point_mass = False
    needs_policy = False
    #: ``mu`` is a density the user wrote (``DensityKernel``): checked to integrate to one.
    user_density = False

    def bind(self, action_space: ActionSpace, policy=None) -> "ReferenceKernel":
        """A kernel resolved against the data's action space (and, for ``mu = pi``, the policy)."""
        return self

    def sample(self, states, n_samples: int, rng: np.random.Generator, antithetic: bool = False) -> np.ndarray:
        raise NotImplementedError

    def log_prob(self, states, actions) -> np.ndarray:
        raise TypeError(f"{type(self).__name__} has no density with respect to Lebesgue measure")

    def gaussian_mixture(self, states):
        raise NotImplementedError(f"{type(self).__name__} is not a Gaussian (mixture) kernel")

    def support(self) -> ActionSpace | None:
        return None

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class GaussianKernel(ReferenceKernel):
    """``mu(.|s) = N(mean + gain @ s, diag(scale^2))`` on ``R^m``.

    Parameters
    ----------
    mean : float, array of shape (m,), or callable states -> (n, m)
    scale : float, array of shape (m,), or callable states -> (n, m); positive
    gain : array of shape (m, d), optional
        Linear dependence of the mean on the state (with a non-callable ``mean``).
    """

    mean: object = 0.0
    scale: object = 1.0
    gain: object = None
    action_dim: int = 1

    def bind(self, action_space, policy=None):
        if not action_space.is_unbounded:
            raise ValueError(
                f"a Gaussian mu puts mass outside the action space {action_space.describe()}, so it is not dominated by "
                "the reference measure there; use uniform(), anchor() or a kernel supported inside the space")
        return GaussianKernel(self.mean, self.scale, self.gain, action_space.dim)

    def mean_at(self, states) -> np.ndarray:
        X = as_states(states)
        return _param(self.mean, X, self.action_dim, "mean") + _gain(self.gain, X, self.action_dim)

    def scale_at(self, states) -> np.ndarray:
        return _param(self.scale, as_states(states), self.action_dim, "scale", positive=True)

    def sample(self, states, n_samples, rng, antithetic=False):
        X = as_states(states)
        z = antithetic_normal(rng, X.shape[0], n_samples, self.action_dim, antithetic)
        return self.mean_at(X)[:, None, :] + self.scale_at(X)[:, None, :] * z

    def from_uniform(self, states, U) -> np.ndarray:
        """Inverse-CDF transform of uniforms U (n, J, m) into draws from mu(.|s)."""
        from scipy.special import ndtri

        X = as_states(states)
        return self.mean_at(X)[:, None, :] + self.scale_at(X)[:, None, :] * ndtri(np.clip(U, 1e-15, 1.0 - 1e-15))

    def log_prob(self, states, actions):
        X = as_states(states)
        a = as_float_array(actions, "actions", ndim=2, allow_1d_as_column=True)
        mean, scale = self.mean_at(X), self.scale_at(X)
        z = (a - mean) / scale
        return np.sum(-0.5 * z * z - np.log(scale) - 0.5 * _LOG_2PI, axis=1)

    def gaussian_mixture(self, states):
        X = as_states(states)
        mean, scale = self.mean_at(X), self.scale_at(X)
        chol = scale[:, None, :, None] * np.eye(self.action_dim)[None, None]
        return np.zeros((X.shape[0], 1)), mean[:, None, :], chol

    def describe(self):
        mean = "mean(s)" if callable(self.mean) else f"{np.ravel(self.mean).tolist()}"
        if self.gain is not None:
            mean += f" + {np.asarray(self.gain).tolist()} s"
        scale = "scale(s)" if callable(self.scale) else f"{np.ravel(self.scale).tolist()}"
        return f"Gaussian N({mean}, {scale}^2)"


@dataclass(frozen=True, eq=False)
class UniformKernel(ReferenceKernel):
    """Uniform ``mu`` on the box ``[low, high]`` (default: the whole, bounded, action space):
    the continuous counterpart of the mean-zero normalization."""

    low: object = None
    high: object = None

    def bind(self, action_space, policy=None):
        low = action_space.low if self.low is None else np.broadcast_to(np.asarray(self.low, float), (action_space.dim,))
        high = action_space.high if self.high is None else np.broadcast_to(np.asarray(self.high, float),
                                                                           (action_space.dim,))
        box = ActionSpace(low, high)
        if not box.is_bounded:
            raise ValueError(f"a uniform mu needs a bounded box; the action space is {action_space.describe()}: pass "
                             "low/high to uniform() or action_low/action_high to from_arrays")
        if np.any(box.low < action_space.low) or np.any(box.high > action_space.high):
            raise ValueError(f"the uniform mu's box {box.describe()} extends outside the action space "
                             f"{action_space.describe()}")
        return UniformKernel(box.low, box.high)

    def sample(self, states, n_samples, rng, antithetic=False):
        n, m = as_states(states).shape[0], np.size(self.low)
        u = antithetic_uniform(rng, n, n_samples, m, antithetic)
        return np.asarray(self.low) + (np.asarray(self.high) - np.asarray(self.low)) * u

    def from_uniform(self, states, U) -> np.ndarray:
        return np.asarray(self.low) + (np.asarray(self.high) - np.asarray(self.low)) * U

    def log_prob(self, states, actions):
        a = as_float_array(actions, "actions", ndim=2, allow_1d_as_column=True)
        inside = np.all((a >= self.low) & (a <= self.high), axis=1)
        return np.where(inside, -np.log(np.prod(np.asarray(self.high) - np.asarray(self.low))), -np.inf)

    def support(self):
        return None if self.low is None else ActionSpace(self.low, self.high)

    def describe(self):
        return "uniform on the action space" if self.low is None else f"uniform on {ActionSpace(self.low, self.high).describe()}"


@dataclass(frozen=True, eq=False)
class PointMass(ReferenceKernel):
    """Point mass at ``a0(s) = action + gain @ s`` (or a callable ``states -> (n, m)``): the
    continuous anchor action, ``r(s, a0(s)) = g(s)``."""

    action: object = 0.0
    gain: object = None
    action_dim: int = 1
    is_point_mass = True

    def bind(self, action_space, policy=None):
        return PointMass(self.action, self.gain, action_space.dim)

    def anchor(self, states) -> np.ndarray:
        """``a0(s)``, shape (n, m)."""
        X = as_states(states)
        return _param(self.action, X, self.action_dim, "anchor action") + _gain(self.gain, X, self.action_dim)

    def sample(self, states, n_samples, rng=None, antithetic=False):
        return np.repeat(self.anchor(states)[:, None, :], n_samples, axis=1)

    def describe(self):
        a = "a0(s)" if callable(self.action) else f"{np.ravel(self.action).tolist()}"
        if self.gain is not None:
            a += f" + {np.asarray(self.gain).tolist()} s"
        return f"point mass at {a}"


@dataclass(frozen=True, eq=False)
class BehaviorKernel(ReferenceKernel):
    """``mu = pi_hat``, the stage-1 density (bound at fit time)."""

    policy: object = None
    needs_policy = True

    def bind(self, action_space, policy=None):
        if policy is None:
            raise ValueError("the behaviour kernel (mu = pi) needs the fitted policy density")
        return BehaviorKernel(policy)

    def _policy(self):
        if self.policy is None:
            raise ValueError("the behaviour kernel is not bound to a policy yet")
        return self.policy

    def sample(self, states, n_samples, rng, antithetic=False):
        return self._policy().sample(states, n_samples, random_state=rng)

    def log_prob(self, states, actions):
        return self._policy().log_prob(states, actions)

    def gaussian_mixture(self, states):
        policy = self._policy()
        if not hasattr(policy, "gaussian_mixture"):
            raise NotImplementedError(f"the policy density {type(policy).__name__} is not a Gaussian mixture")
        return policy.gaussian_mixture(states)

    def support(self):
        return getattr(self._policy(), "support_", None) if self.policy is not None else None

    def describe(self):
        return "behaviour policy mu = pi_hat"


@dataclass(frozen=True, eq=False)
class DensityKernel(ReferenceKernel):
    """Any ``mu`` given as a sampler with a density.

    Parameters
    ----------
    sampler : callable (states (n, d), n_samples, rng) -> (n, n_samples, m)
    log_density : callable (states (n, d), actions (n, m)) -> (n,)
        Log-density with respect to Lebesgue measure (checked to integrate to one at fit).
    low, high : float or (m,) arrays, optional
        Box holding the mass (needed by Gauss-Legendre).
    """

    sampler: object = None
    log_density: object = None
    low: object = None
    high: object = None
    user_density = True

    def __post_init__(self):
        if not callable(self.sampler) or not callable(self.log_density):
            raise TypeError("DensityKernel needs callables sampler(states, n_samples, rng) and "
                            "log_density(states, actions)")

    def sample(self, states, n_samples, rng, antithetic=False):
        X = as_states(states)
        out = as_float_array(self.sampler(X, n_samples, rng), "sampler(states, n_samples, rng)")
        if out.ndim == 2:
            out = out[:, :, None]
        if out.shape[:2] != (X.shape[0], n_samples):
            raise ValueError(f"sampler must return shape ({X.shape[0]}, {n_samples}, m), got {out.shape}")
        return out

    def log_prob(self, states, actions):
        out = np.asarray(self.log_density(as_states(states), as_float_array(actions, "actions", ndim=2,
                                                                           allow_1d_as_column=True)), float)
        return out.reshape(-1)

    def support(self):
        if self.low is None and self.high is None:
            return None
        m = max(np.size(self.low), np.size(self.high))
        return ActionSpace.create(m, self.low, self.high)

    def describe(self):
        return "user kernel (sampler with a density)"


# =============================================================================== lambda
class ReferenceMeasure:
    """The reference measure ``lambda`` of the Boltzmann policy; ``log_density(a)`` is
    ``log dlambda/dLebesgue(a)``, shape (n,)."""

    def log_density(self, actions) -> np.ndarray:
        raise NotImplementedError

    def describe(self, action_space: ActionSpace) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Lebesgue(ReferenceMeasure):
    """Lebesgue measure on the action space (the default)."""

    def log_density(self, actions):
        return np.zeros(np.shape(actions)[0])

    def describe(self, action_space):
        return action_space.reference_measure()


@dataclass(frozen=True, eq=False)
class GaussianReference(ReferenceMeasure):
    """``lambda = N(mean, diag(scale^2))`` (a probability measure on ``R^m``): the Boltzmann
    policy is ``pi(da|s) = exp(Q - Xi Q) lambda(da)``, i.e. a MaxEnt agent with a Gaussian
    prior over actions (KL-regularized control)."""

    mean: object = 0.0
    scale: object = 1.0

    def log_density(self, actions):
        a = as_float_array(actions, "actions", ndim=2, allow_1d_as_column=True)
        mean = np.broadcast_to(np.asarray(self.mean, float), (a.shape[1],))
        scale = np.broadcast_to(np.asarray(self.scale, float), (a.shape[1],))
        z = (a - mean) / scale
        return np.sum(-0.5 * z * z - np.log(scale) - 0.5 * _LOG_2PI, axis=1)

    def describe(self, action_space):
        return f"Gaussian reference N({np.ravel(self.mean).tolist()}, {np.ravel(self.scale).tolist()}^2)"

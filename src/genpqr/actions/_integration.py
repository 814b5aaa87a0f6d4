"""Integration rules for ``mu``-integrals: ``Nodes`` and the rules :class:`MonteCarlo`,
:class:`GaussHermite` and :class:`GaussLegendre` (see :mod:`genpqr.actions` for the
overview)."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..data import BoxActions as ActionSpace
from ..data._spaces import Nodes
from ._measures import ReferenceKernel
from ._sampling import antithetic_uniform, as_states

__all__ = ["Nodes", "IntegrationRule", "MonteCarlo", "GaussHermite", "GaussLegendre"]


# =============================================================================== rules
def _positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _point_mass_nodes(kernel, states) -> Nodes:
    X = as_states(states)
    return Nodes(kernel.anchor(X)[:, None, :], np.ones((X.shape[0], 1)))


class IntegrationRule:
    """Turns ``mu(.|s_i)`` into ``Nodes``.

    ``is_random``: the nodes are random draws (Monte Carlo); a deterministic rule (a
    quadrature) gives equal states equal nodes, so they can be computed once per distinct state."""

    is_random = False

    def nodes(self, kernel: ReferenceKernel, states, rng: np.random.Generator | None = None,
              support: ActionSpace | None = None, readoff: bool = False) -> Nodes:
        """Weighted nodes of ``kernel`` at ``states``; ``support`` is the action space (used
        when the kernel does not state its own bounded support); ``readoff`` asks for the
        read-off's nodes (Monte Carlo: ``readoff_samples`` draws)."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class MonteCarlo(IntegrationRule):
    """Draws from ``mu(.|s_i)``, independent across states, weights ``1/J``.

    Parameters
    ----------
    n_samples : int
        ``J`` in the Bellman targets. Their Monte Carlo error is noise in the regression targets,
        independent across rows, so it averages out as n grows; a few draws suffice.
    readoff_samples : int or None
        ``J`` in the reward read-off ``r = Q - mu Q + g`` (and :meth:`genpqr.GenPQR.mu_q`). There
        the error of ``mu Q(s)`` enters each reward value directly (variance
        ``Var_mu[Q(s, .)] / J``) and does not average out, hence its own, larger count.
        None: ``n_samples``.
    antithetic : bool
        Pair draws (``u, 1 - u`` on the uniform scale, i.e. ``z, -z`` for Gaussian kernels): exact
        for the part of the integrand odd around the centre (e.g. the linear part of a quadratic).
    stratified : bool
        Latin-hypercube uniforms (one draw per stratum ``[k/J, (k+1)/J)`` in each dimension) pushed
        through the kernel's inverse CDF, for kernels that have one (Gaussian, uniform); others are
        sampled plainly. Unbiased, with variance ``O(J^-2)`` instead of ``O(J^-1)`` for smooth 1-D
        integrands.
    """

    n_samples: int = 32
    readoff_samples: int | None = 1024
    antithetic: bool = True
    is_random = True
    stratified: bool = True

    def __post_init__(self):
        _positive_int(self.n_samples, "MonteCarlo.n_samples")
        if self.readoff_samples is not None:
            _positive_int(self.readoff_samples, "MonteCarlo.readoff_samples")

    def nodes(self, kernel, states, rng=None, support=None, readoff=False):
        if kernel.is_point_mass:
            return _point_mass_nodes(kernel, states)
        X = as_states(states)
        J = self.readoff_samples if readoff and self.readoff_samples is not None else self.n_samples
        rng = np.random.default_rng() if rng is None else rng
        if hasattr(kernel, "from_uniform"):
            m = kernel.action_dim if hasattr(kernel, "action_dim") else np.size(kernel.low)
            U = antithetic_uniform(rng, X.shape[0], J, m, self.antithetic, self.stratified)
            acts = kernel.from_uniform(X, U)
        else:
            acts = kernel.sample(X, J, rng, antithetic=self.antithetic)
        return Nodes(acts, np.full(acts.shape[:2], 1.0 / acts.shape[1]))

    def describe(self):
        kind = " ".join(w for w, on in (("stratified", self.stratified), ("antithetic", self.antithetic)) if on)
        return (f"Monte Carlo ({self.n_samples} {kind + ' ' if kind else ''}draws per next state, common random "
                f"numbers across iterations; {self.readoff_samples or self.n_samples} in the read-off)")


def _tensor_grid(x: np.ndarray, w: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    grids = np.meshgrid(*([x] * m), indexing="ij")
    wgrids = np.meshgrid(*([w] * m), indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1), np.prod(np.stack([g.ravel() for g in wgrids], axis=1), axis=1)


@dataclass(frozen=True)
class GaussHermite(IntegrationRule):
    """Gauss-Hermite quadrature for Gaussian (mixture) kernels (tensor product in ``m`` dims):
    exact for polynomials in the action of degree ``<= 2 n_nodes - 1``."""

    n_nodes: int = 10
    max_nodes: int = 4096

    def __post_init__(self):
        _positive_int(self.n_nodes, "GaussHermite.n_nodes")

    def nodes(self, kernel, states, rng=None, support=None, readoff=False):
        if kernel.is_point_mass:
            return _point_mass_nodes(kernel, states)
        X = as_states(states)
        try:
            log_w, means, chol = kernel.gaussian_mixture(X)
        except NotImplementedError as exc:
            raise ValueError(f"GaussHermite needs a Gaussian (mixture) mu; {kernel.describe()} is not one ({exc}). "
                             "Use GaussLegendre on a bounded support or MonteCarlo") from exc
        n, C, m = means.shape
        if C * self.n_nodes ** m > self.max_nodes:
            raise ValueError(f"GaussHermite with {self.n_nodes} nodes in {m} dims and {C} component(s) needs "
                             f"{C * self.n_nodes ** m} nodes per state (max_nodes={self.max_nodes}); use MonteCarlo")
        x, w = np.polynomial.hermite_e.hermegauss(self.n_nodes)
        grid, gw = _tensor_grid(x, w / np.sqrt(2.0 * np.pi), m)  # nodes of N(0, I_m), weights sum to 1
        acts = means[:, :, None, :] + np.einsum("ncij,kj->ncki", chol, grid)
        comp = np.exp(log_w - np.max(log_w, axis=1, keepdims=True))
        comp /= comp.sum(axis=1, keepdims=True)
        weights = comp[:, :, None] * gw[None, None, :]
        return Nodes(acts.reshape(n, -1, m), weights.reshape(n, -1))

    def describe(self):
        return f"Gauss-Hermite quadrature ({self.n_nodes} nodes per dimension)"


@dataclass(frozen=True)
class GaussLegendre(IntegrationRule):
    """Gauss-Legendre quadrature on the kernel's bounded support, weighted by its density:
    ``int f dmu ~ sum_j w_j f(a_j) p_mu(a_j|s)``. The weights are renormalized to sum to one
    (exact for constants); if they sum to more than ``mass_tol`` away from one before, the
    kernel's density is not normalized on its support (or too peaked for ``n_nodes``) and a
    ValueError is raised."""

    n_nodes: int = 32
    mass_tol: float = 1e-2
    max_nodes: int = 4096

    def __post_init__(self):
        _positive_int(self.n_nodes, "GaussLegendre.n_nodes")

    def nodes(self, kernel, states, rng=None, support=None, readoff=False):
        if kernel.is_point_mass:
            return _point_mass_nodes(kernel, states)
        X = as_states(states)
        box = kernel.support() or support
        if box is None or not box.is_bounded:
            raise ValueError(f"GaussLegendre needs a bounded support; {kernel.describe()} has none. Use GaussHermite "
                             "for a Gaussian mu or MonteCarlo")
        m = box.dim
        if self.n_nodes ** m > self.max_nodes:
            raise ValueError(f"GaussLegendre with {self.n_nodes} nodes in {m} dims needs {self.n_nodes ** m} nodes per "
                             f"state (max_nodes={self.max_nodes}); use MonteCarlo")
        x, w = np.polynomial.legendre.leggauss(self.n_nodes)
        grid, gw = _tensor_grid(x, w, m)
        half = 0.5 * (box.high - box.low)
        grid = box.low + (grid + 1.0) * half
        gw = gw * float(np.prod(half))
        n, J = X.shape[0], grid.shape[0]
        logp = kernel.log_prob(np.repeat(X, J, axis=0), np.tile(grid, (n, 1))).reshape(n, J)
        weights = gw[None, :] * np.exp(logp)
        mass = weights.sum(axis=1)
        bad = np.abs(mass - 1.0) > self.mass_tol
        if bad.any():
            i = int(np.argmax(np.abs(mass - 1.0)))
            raise ValueError(f"mu's density integrates to {mass[i]:.6g} over {box.describe()} at state {X[i].tolist()} "
                             f"(Gauss-Legendre, {self.n_nodes} nodes); it is not normalized there (or too peaked "
                             "for n_nodes)")
        return Nodes(np.broadcast_to(grid, (n, J, m)).copy(), weights / mass[:, None])

    def describe(self):
        return f"Gauss-Legendre quadrature ({self.n_nodes} nodes per dimension)"

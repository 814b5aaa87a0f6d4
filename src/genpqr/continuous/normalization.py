r"""Statewise affine normalizations with a continuous reference kernel: ``int r(s, a) mu(da|s) = g(s)``
(paper, App. "Continuous-Action Extension").

A :class:`ContinuousNormalization` pairs a reference kernel ``mu`` (see
:mod:`genpqr.measures`) with an anchor function ``g`` (a scalar or a callable
``states -> (n,)``, as in :func:`genpqr.normalization.anchor_action`). Constructors:

* :func:`anchor` -- point mass at a continuous anchor action ``a0(s)``: ``r(s, a0(s)) = g(s)``;
* :func:`gaussian` -- ``mu = N(m(s), scale^2)`` (unbounded action spaces);
* :func:`uniform` -- ``mu`` uniform on a bounded action space (mean reward ``g``);
* :func:`behavior` -- ``mu = pi_hat`` (mean reward under the behaviour policy is ``g``);
* :func:`kernel` -- any :class:`~genpqr.measures.ReferenceKernel`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..normalization import FixedOffset, Offset
from ..measures import BehaviorKernel, GaussianKernel, PointMass, ReferenceKernel, UniformKernel

__all__ = ["ContinuousNormalization", "anchor", "gaussian", "uniform", "behavior", "kernel"]


@dataclass(frozen=True)
class ContinuousNormalization:
    """``mu r = g`` with a reference kernel ``mu`` over continuous actions.

    Attributes
    ----------
    mu : ReferenceKernel
    g : Offset (a fixed ``g``: scalar or callable ``states -> (n,)``)
    name : str
    """

    mu: ReferenceKernel
    g: Offset
    name: str

    def __post_init__(self):
        if not isinstance(self.mu, ReferenceKernel):
            raise TypeError(f"mu must be a genpqr.measures.ReferenceKernel, got {type(self.mu).__name__}")
        if not isinstance(self.g, FixedOffset):
            raise TypeError(f"g must be a fixed offset (scalar or callable states -> (n,)), got {type(self.g).__name__}")

    def describe(self) -> str:
        return f"{self.name}: mu = {self.mu.describe()}; {self.g.describe()}"

    def __repr__(self):
        return f"ContinuousNormalization({self.describe()})"


def anchor(action=0.0, gain=None, g=0.0) -> ContinuousNormalization:
    """Point mass at the anchor ``a0(s) = action + gain @ s`` (or ``action(states) -> (n, m)``)."""
    return ContinuousNormalization(PointMass(action, gain), FixedOffset(g), "anchor")


def gaussian(mean=0.0, scale=1.0, gain=None, g=0.0) -> ContinuousNormalization:
    """``mu(.|s) = N(mean + gain @ s, diag(scale^2))``; ``mean``/``scale`` may be callables."""
    return ContinuousNormalization(GaussianKernel(mean, scale, gain), FixedOffset(g), "gaussian")


def uniform(low=None, high=None, g=0.0) -> ContinuousNormalization:
    """Uniform ``mu`` on ``[low, high]`` (default: the bounded action space of the data)."""
    return ContinuousNormalization(UniformKernel(low, high), FixedOffset(g), "uniform")


def behavior(g=0.0) -> ContinuousNormalization:
    """``mu = pi_hat``: the behaviour policy's mean reward is ``g(s)``."""
    return ContinuousNormalization(BehaviorKernel(), FixedOffset(g), "behavior")


def kernel(mu: ReferenceKernel, g=0.0, name: str = "kernel") -> ContinuousNormalization:
    """Any reference kernel ``mu`` with any fixed ``g``."""
    return ContinuousNormalization(mu, FixedOffset(g), name)

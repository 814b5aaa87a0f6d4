r"""Normalizations with a continuous reference kernel, ``int r(s, a) mu(da|s) = g(s)`` (paper,
App. "Continuous-Action Extension"): the constructors of :mod:`genpqr.normalization` for
continuous actions, under their former names.

* :func:`anchor` -- point mass at a continuous anchor action ``a0(s)``: ``r(s, a0(s)) = g(s)``
  (:func:`genpqr.normalization.point_anchor`);
* :func:`gaussian` -- ``mu = N(m(s), scale^2)`` (unbounded action spaces);
* :func:`uniform` -- ``mu`` uniform on a bounded action space (mean reward ``g``);
* :func:`behavior` -- ``mu = pi_hat`` (mean reward under the behaviour policy is ``g``);
* :func:`kernel` -- any :class:`~genpqr.measures.ReferenceKernel`.

:data:`ContinuousNormalization` is :class:`genpqr.normalization.Normalization` (deprecated name).
"""

from __future__ import annotations

from ..measures import BehaviorKernel
from ..normalization import FixedOffset, Normalization, gaussian, kernel, point_anchor, uniform

__all__ = ["ContinuousNormalization", "anchor", "gaussian", "uniform", "behavior", "kernel"]

#: Former name of :class:`genpqr.normalization.Normalization` with a reference kernel ``mu``.
ContinuousNormalization = Normalization

#: Point mass at ``a0(s) = action + gain @ s`` (:func:`genpqr.normalization.point_anchor`).
anchor = point_anchor


def behavior(g=0.0) -> Normalization:
    """``mu = pi_hat``: the behaviour policy's mean reward is ``g(s)`` (a fixed ``g``, default 0)."""
    return Normalization(BehaviorKernel(), FixedOffset(g), "behavior")

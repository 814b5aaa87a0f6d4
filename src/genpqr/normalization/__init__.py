"""Normalizations ``sum_a mu(a|s) r(s,a) = g(s)``: the weights or kernels ``mu`` and the offsets
``g`` (``from genpqr import normalization as N; N.anchor_action(0)``).
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._normalization import (ActionWeights, Normalization, Offset, anchor_action, behavior, gaussian, kernel,
                                 mean_zero, point_anchor, state_anchor, uniform, value, weighted)

__all__ = ["Normalization", "ActionWeights", "Offset", "anchor_action", "state_anchor", "mean_zero", "weighted",
           "value", "behavior", "point_anchor", "gaussian", "uniform", "kernel"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)

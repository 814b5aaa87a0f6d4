"""Continuous-action GenPQR (paper, App. "Continuous-Action Extension"): the former names.

One :class:`genpqr.GenPQR` serves finite and continuous actions: transitions whose
``action_space`` is a :class:`genpqr.spaces.BoxActions` (``genpqr.from_arrays(...,
action_space="box")``) are fitted with a conditional density ``u = log dpi/dlambda`` in stage
1, ``Q = u - g + gamma P mu Q`` by :class:`genpqr.qeval.FQE` over ``mu``-nodes (Monte Carlo or
quadrature, :mod:`genpqr.integration`) and ``r = Q - mu Q + g`` (:mod:`genpqr.estimator_box`).

This package gathers what continuous actions use under the names of the former separate
path: densities (:mod:`genpqr.densities`, :mod:`genpqr.models.neural_densities`), reference
kernels and measures (:mod:`genpqr.measures`), integration rules, the kernel normalizations
(:mod:`genpqr.continuous.normalization`). Deprecated for one release (they warn):
:class:`ContinuousGenPQR`, :class:`ContinuousTransitions`, :func:`from_arrays`,
:class:`ContinuousFQE`; :data:`ActionSpace` is :class:`genpqr.spaces.BoxActions` and
:data:`ContinuousNormalization` is :class:`genpqr.normalization.Normalization`.
"""

from .data import ActionSpace, ContinuousTransitions, from_arrays
from ..densities import (ConditionalDensity, FixedGaussianDensity, KnownDensity, LinearGaussianDensity,
                        SquashedDensity, check_normalized)
from .estimator import ContinuousDiagnostics, ContinuousGenPQR
from .fqe import ContinuousFQE
from ..integration import GaussHermite, GaussLegendre, IntegrationRule, MonteCarlo, Nodes
from ..measures import (BehaviorKernel, DensityKernel, GaussianKernel, GaussianReference, Lebesgue, PointMass,
                       ReferenceKernel, ReferenceMeasure, UniformKernel)
from ..models.neural_densities import FlowDensity, MixtureDensityNetwork, MLPGaussianDensity
from .normalization import ContinuousNormalization, anchor, behavior, gaussian, kernel, uniform
from ..envs.quadratic import Quadratic

__all__ = [
    "ContinuousGenPQR", "ContinuousDiagnostics", "ContinuousFQE",
    "ContinuousTransitions", "ActionSpace", "from_arrays",
    "ConditionalDensity", "LinearGaussianDensity", "FixedGaussianDensity", "KnownDensity", "SquashedDensity",
    "MLPGaussianDensity", "MixtureDensityNetwork", "FlowDensity", "check_normalized",
    "ContinuousNormalization", "anchor", "gaussian", "uniform", "behavior", "kernel",
    "ReferenceKernel", "GaussianKernel", "UniformKernel", "PointMass", "BehaviorKernel", "DensityKernel",
    "ReferenceMeasure", "Lebesgue", "GaussianReference",
    "IntegrationRule", "MonteCarlo", "GaussHermite", "GaussLegendre", "Nodes", "Quadratic",
]

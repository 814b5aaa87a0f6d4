"""Continuous-action GenPQR (paper, App. "Continuous-Action Extension").

Stage 1 estimates a conditional log-density ``u(s, a) = log dpi/dlambda`` with respect to a
stated reference measure ``lambda`` (Lebesgue on the action space by default); stage 2 solves
``Q = u - g + gamma P mu Q`` by fitted Q evaluation whose ``mu``-integrals use Monte Carlo
draws (common random numbers) or Gauss-Hermite / Gauss-Legendre quadrature; the reward is
``r = Q - mu Q + g`` with ``mu Q`` by the same rule.

Modules: :mod:`~genpqr.continuous.data` (transitions, action space),
:mod:`~genpqr.densities` and :mod:`~genpqr.models.neural_densities` (stage 1),
:mod:`~genpqr.measures` (reference kernels, reference measures),
:mod:`~genpqr.integration` (integration rules),
:mod:`~genpqr.continuous.normalization`, :mod:`~genpqr.continuous.fqe` (stage 2),
:mod:`~genpqr.continuous.estimator` (:class:`ContinuousGenPQR`), and the benchmarks with truth
:mod:`~genpqr.envs.lqg` (closed form) and :mod:`~genpqr.envs.nonlinear` (fine
discretization); :mod:`~genpqr.experiments.continuous` runs the ``continuous`` experiment.
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

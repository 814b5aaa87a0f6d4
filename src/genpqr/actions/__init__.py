"""Action spaces and what integrates over them: reference kernels and measures ``mu``,
conditional densities (stage 1 for continuous actions), integration rules (Monte Carlo,
Gauss-Hermite, Gauss-Legendre) and antithetic samplers. The action spaces themselves
(:class:`FiniteActions`, :class:`BoxActions`) live in :mod:`genpqr.data` (a
:class:`~genpqr.data.Transitions` holds one) and are re-exported here.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ..data import ActionSpace, BoxActions, FiniteActions, as_actions
    from ._measures import (BehaviorKernel, DensityKernel, GaussianKernel, GaussianReference, Lebesgue, PointMass,
                            ReferenceKernel, ReferenceMeasure, UniformKernel)
    from ._densities import (ConditionalDensity, FixedGaussianDensity, KnownDensity, LinearGaussianDensity, SquashedDensity,
                             check_density, check_n_samples, check_normalized, gaussian_mixture_log_prob,
                             gaussian_mixture_sample)
    from ._integration import GaussHermite, GaussLegendre, IntegrationRule, MonteCarlo, Nodes
    from ._sampling import antithetic_normal, antithetic_uniform, as_states, latin_hypercube

__all__ = ["ReferenceKernel", "GaussianKernel", "UniformKernel", "PointMass", "BehaviorKernel", "DensityKernel",
           "ReferenceMeasure", "Lebesgue", "GaussianReference", "ConditionalDensity", "LinearGaussianDensity",
           "FixedGaussianDensity", "KnownDensity", "SquashedDensity", "check_density", "check_normalized",
           "check_n_samples", "gaussian_mixture_log_prob", "gaussian_mixture_sample", "IntegrationRule", "MonteCarlo",
           "GaussHermite", "GaussLegendre", "as_states", "antithetic_normal", "antithetic_uniform", "latin_hypercube",
           "Nodes", "ActionSpace", "FiniteActions", "BoxActions", "as_actions"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)

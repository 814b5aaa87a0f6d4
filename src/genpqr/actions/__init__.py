"""Action spaces and what integrates over them: reference kernels and measures ``mu``,
conditional densities (stage 1 for continuous actions), integration rules (Monte Carlo,
Gauss-Hermite, Gauss-Legendre) and antithetic samplers. The action spaces themselves
(:class:`~genpqr.data.FiniteActions`, :class:`~genpqr.data.BoxActions`) live in :mod:`genpqr.data` (a
:class:`~genpqr.data.Transitions` holds one) and are re-exported here.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._measures import BehaviorKernel, GaussianKernel, GaussianReference, Lebesgue, PointMass, UniformKernel
    from ._densities import FixedGaussianDensity, KnownDensity, LinearGaussianDensity, SquashedDensity
    from ._integration import GaussHermite, GaussLegendre, MonteCarlo

__all__ = ["Lebesgue", "GaussianReference", "PointMass", "UniformKernel", "GaussianKernel", "BehaviorKernel",
           "LinearGaussianDensity", "FixedGaussianDensity", "KnownDensity", "SquashedDensity", "MonteCarlo",
           "GaussHermite", "GaussLegendre"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)

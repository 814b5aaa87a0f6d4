"""Stage 1: policy models' glue. Probabilities or densities -> ``u = log pi`` (clipped),
frequency and spline classifiers' checks, the default basis logit of continuous states, the conditional logit over actions with features, cross-fitting by episode, first-stage reports, the E-step of latent agent types.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._conditional_logit import ConditionalLogit
    from ._policy import FrequencyClassifier
    from ._first_stage import SplineLogit
    from ._basis_logit import BasisLogit, StateBasis

__all__ = ["ConditionalLogit", "FrequencyClassifier", "SplineLogit", "BasisLogit", "StateBasis"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)

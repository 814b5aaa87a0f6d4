"""genpqr: reward recovery from behaviour by policy estimation and a linear Bellman equation.

Under the maximum-entropy (Gumbel-shock) model, behaviour identifies the reward only up to
potential shaping; a statewise affine normalization ``sum_a mu(a|s) r(s,a) = g(s)`` picks
one reward. GenPQR estimates ``u = log pi``, solves ``Q = u - g + gamma P mu Q`` and reads
off ``r = Q - mu Q + g`` and ``v = -P mu Q``.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from .lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from . import data, normalization, stage2
    from .data import ActionTable, BoxActions, FiniteActions, Transitions, from_arrays, from_episodes, from_pandas
    from .estimator import Diagnostics, GenPQR, load
    from .exceptions import (ClippingWarning, ConvergenceWarning, CoverageWarning, GenPQRWarning, LatentTypeWarning,
                             NotFittedError, ThinTransitionsWarning, WeakSupportWarning)

__version__ = "0.1.0"

__all__ = [
    "GenPQR",
    "Diagnostics",
    "Transitions",
    "FiniteActions",
    "ActionTable",
    "BoxActions",
    "from_arrays",
    "from_pandas",
    "from_episodes",
    "load",
    "data",
    "normalization",
    "stage2",
    "GenPQRWarning",
    "WeakSupportWarning",
    "ClippingWarning",
    "ConvergenceWarning",
    "CoverageWarning",
    "ThinTransitionsWarning",
    "LatentTypeWarning",
    "NotFittedError",
]

__getattr__, __dir__ = attach(__name__, __file__, __all__)

"""Stage models with the scikit-learn interface, built on the core.

``_nn``, ``_qnetwork``
    Torch networks trained by autograd and ``torch.optim``'s Adam/Adagrad, on any ``device``:
    :class:`~genpqr.models.MLPClassifier` (stage 1) and
    :class:`~genpqr.models.DuelingQNetwork` (native Q model for FQE); their shared
    modules and training loop in ``_torch_modules`` and
    ``_torch_training``.
``_two_tower``
    :class:`~genpqr.models.TwoTowerClassifier` (``genpqr.models.TwoTowerClassifier``),
    stage 1 for thousands of actions with features: ``pi(a|s) ~ exp(f(s)^T h(x_a))``, full or
    sampled (log-Q corrected) softmax.
``_boosting``
    LightGBM: :class:`~genpqr.models.BoostedQModel`, one tree per Bellman update.
``_neural_densities``
    Neural conditional action densities (mixture density network, heteroscedastic MLP
    Gaussian, normalizing flows via zuko) for continuous actions.
``_first_stage``
    ``SplineLogit``, a smooth logit first stage for sparse
    cells of an ordered tabular state, and the rule that chooses it (re-exported from
    :mod:`genpqr.stage1`: ``GenPQR``'s tabular default uses them).

The closed-form densities (linear Gaussian, known, squashed) that serve as the core's
defaults live in :mod:`genpqr.actions`, as the core's default classifier of continuous states
(:class:`genpqr.stage1.BasisLogit`) lives in :mod:`genpqr.stage1`. Nothing here is imported when ``genpqr`` is imported: torch and
LightGBM load only when a model from here is used.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._two_tower import TwoTowerClassifier
    from ._nn import MLPClassifier
    from ._qnetwork import DuelingQNetwork
    from ._boosting import BoostedQModel

__all__ = ["TwoTowerClassifier", "MLPClassifier", "DuelingQNetwork", "BoostedQModel"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)

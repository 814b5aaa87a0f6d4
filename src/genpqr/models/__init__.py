"""Stage models with the scikit-learn interface, built on the core.

:mod:`~genpqr.models.nn`, :mod:`~genpqr.models.qnetwork`
    Torch networks trained by autograd and ``torch.optim``'s Adam/Adagrad, on any ``device``:
    :class:`~genpqr.models.nn.MLPClassifier` (stage 1) and
    :class:`~genpqr.models.qnetwork.DuelingQNetwork` (native Q model for FQE); their shared
    modules and training loop in :mod:`~genpqr.models.torch_modules` and
    :mod:`~genpqr.models.torch_training`.
:mod:`~genpqr.models.two_tower`
    :class:`~genpqr.models.two_tower.TwoTowerClassifier` (``genpqr.models.TwoTowerClassifier``),
    stage 1 for thousands of actions with features: ``pi(a|s) ~ exp(f(s)^T h(x_a))``, full or
    sampled (log-Q corrected) softmax.
:mod:`~genpqr.models.boosting`
    LightGBM: :class:`~genpqr.models.boosting.BoostedQModel`, one tree per Bellman update.
:mod:`~genpqr.models.neural_densities`
    Neural conditional action densities (mixture density network, heteroscedastic MLP
    Gaussian, normalizing flows via zuko) for continuous actions.
:mod:`~genpqr.models.first_stage`
    :class:`~genpqr.models.first_stage.SplineLogit`, a smooth logit first stage for sparse
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
    from .two_tower import TwoTowerClassifier

__all__ = ["TwoTowerClassifier"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)

"""Warnings and errors raised by genpqr.

Importing this module imports no third-party library. :class:`NotFittedError` is scikit-learn's
``NotFittedError`` subclassed (so ``except sklearn.exceptions.NotFittedError``, ``except
ValueError`` and ``except AttributeError`` all catch it, as the estimator contract has it); the
class is made the first time it is read (PEP 562), which imports scikit-learn then -- which the
estimators that raise it have already done. ``except`` clauses match by the real class
hierarchy, not by ``isinstance`` registration, so an own class registered as sklearn's would not
be caught by ``except sklearn.exceptions.NotFittedError``.
"""


class GenPQRWarning(UserWarning):
    """Base class of genpqr's warnings (weak support, heavy clipping, poor coverage, no convergence)."""


class WeakSupportWarning(GenPQRWarning):
    """An anchor action (or the support of mu) is rarely observed in the data."""


class ClippingWarning(GenPQRWarning):
    """A large share of estimated probabilities hit the clip bounds."""


class CoverageWarning(GenPQRWarning):
    """The coverage constant ``max mu/pi_hat`` is large: the normalization leans on actions the
    behaviour rarely takes (see :mod:`genpqr.estimator`)."""


class ConvergenceWarning(GenPQRWarning):
    """An iterative solver stopped before reaching its tolerance."""


class LatentTypeWarning(GenPQRWarning):
    """A fit with latent types is in doubt: the data do not separate the types (the posterior
    type probabilities stay near the mixing proportions), or a type is empty (its posteriors sum
    to less than one episode). The message names the outputs in doubt (per-type rewards of
    :class:`genpqr.GenPQR`, per-type parameters of ``genpqr.structural._types``); the rule is
    ``genpqr.stage1._latent_types.latent_type_warnings``."""


class ExtrapolationWarning(WeakSupportWarning):
    """A counterfactual's answer rests materially on states (or state-action cells) the data
    saw rarely or never: identified is not the same as supported (see :mod:`genpqr.counterfactuals`)."""


class KernelDataWarning(GenPQRWarning):
    """A given transition kernel (``transition_model`` as an array or file; ``genpqr fit --transition
    FILE``) gives probability zero to moves the data show: the data contradict it, and the reward
    computed through it is in doubt."""


class ActionFeaturesWarning(GenPQRWarning):
    """Action features that do not tell some actions apart (a constant column, equal rows of
    different actions, linearly dependent columns): the rewards of those actions, or the
    coefficients of those features, are not decided by the data."""


class ThinTransitionsWarning(WeakSupportWarning):
    """A material share of the logged rows sits on state-action cells with few observed
    transitions, so the estimated kernel there, and the reward computed through it, rest on a
    handful of moves (see :mod:`genpqr.estimator`, ``transition_counts_``)."""


class IntegrityError(ValueError):
    """A file or output folder is not what genpqr wrote: missing, truncated, edited, or left
    incomplete by an interrupted run (see ``genpqr.estimator._manifest``)."""


class UntrustedFileError(ValueError):
    """A pickled file was not written by genpqr under this user's signing key; loading it would
    run any code it holds. Pass ``trusted=True`` (``--trust``) to load it anyway."""


class ActionTableError(ValueError):
    """An action table (labels -> feature vectors, :class:`genpqr.data.ActionTable`) is unusable
    or disagrees with the data or a model; the subclasses name the fault."""


class DuplicateActionLabelError(ActionTableError):
    """An action table lists the same label twice."""


class MissingActionLabelError(ActionTableError):
    """The data takes an action whose label the action table does not list."""


class ActionFeatureError(ActionTableError):
    """Action features are not finite numbers, or their dimension disagrees with a model's."""


class ModelFormatError(ValueError):
    """A model file holds a fitted model in another format than this version of genpqr writes
    (saved by an older genpqr, before its fitted state was one object): refit and save it again."""


class InferenceWarning(GenPQRWarning):
    """A debiased estimate's interval is in doubt (:mod:`genpqr.inference`): the Riesz
    representer's weights are extreme (thin overlap between the target's policy or distribution
    and the behaviour), one episode carries much of the variance, or the correction is large
    relative to the standard error (the first stage is far from the truth, and the second-order
    remainder may not be small). The message names the target."""


__all__ = ["GenPQRWarning", "WeakSupportWarning", "ClippingWarning", "CoverageWarning", "ConvergenceWarning",
           "LatentTypeWarning", "NotFittedError", "ExtrapolationWarning", "ThinTransitionsWarning", "IntegrityError",
           "UntrustedFileError", "ActionTableError", "DuplicateActionLabelError", "MissingActionLabelError",
           "ActionFeatureError", "InferenceWarning", "ModelFormatError", "KernelDataWarning", "ActionFeaturesWarning"]


def _not_fitted_error() -> type:
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    class NotFittedError(SklearnNotFittedError):
        """An estimator was used before ``fit`` (a scikit-learn ``NotFittedError``, hence also
        a ``ValueError`` and an ``AttributeError``)."""

    NotFittedError.__module__, NotFittedError.__qualname__ = __name__, "NotFittedError"
    return NotFittedError


def __getattr__(name: str):
    if name == "NotFittedError":  # once: the class is then a module attribute like the others
        globals()[name] = cls = _not_fitted_error()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), "NotFittedError"})

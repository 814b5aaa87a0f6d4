"""scikit-learn's estimator contract without importing scikit-learn.

Importing scikit-learn costs more than a second (``sklearn.base`` pulls in ``scipy.stats``), longer
than a whole tabular fit. The package's estimators that a fit without scikit-learn's learners
builds (``GenPQR`` and its option objects; the stage-1 classifiers ``FrequencyClassifier``,
``ConditionalLogit``, ``SplineLogit`` and ``FitOnCells``; ``TabularQModel``, ``FQE`` and
``LSTDQ``; the conditional densities; ``NFXP`` and ``StructuralStep``) derive from
``LightEstimator`` instead of ``sklearn.base.BaseEstimator``: the same contract, to the letter --

* parameters are the arguments of ``__init__`` (no ``*args``), which stores each unchanged;
* ``get_params(deep=True)`` returns them, with ``name__sub`` keys for nested estimators;
* ``set_params(**params)`` sets them, ``name__sub`` keys included, and refuses an unknown name
  with a ValueError naming the parameter and listing the valid ones;
* ``repr`` (and a notebook's HTML) shows the parameters that differ from their defaults, laid out
  as scikit-learn does (its pretty printer, imported when a repr is asked for);
* ``sklearn.base.clone`` works (it calls ``__sklearn_clone__``), as do Pipelines, grid searches
  and ``sklearn.utils.estimator_checks``; ``__sklearn_tags__`` imports scikit-learn's tags when
  scikit-learn asks for them;
* pickling stores the instance's ``__dict__``, as ``BaseEstimator`` does for a class outside
  scikit-learn, so model files written before load unchanged.

What ``BaseEstimator`` has and these do not: the metadata-routing request methods
(``set_fit_request`` and the like, used only with ``sklearn.set_config(enable_metadata_routing=True)``).
Transformers (``StateBasis``, ``PolicyFeatures``) stay on scikit-learn's classes; their modules are
imported where they are used.

``clone`` copies these estimators without scikit-learn (and falls back to
``sklearn.base.clone`` for any other object with ``get_params``). ``LightClassifierMixin``
is ``sklearn.base.ClassifierMixin``'s equivalent (``score`` is the accuracy).
"""

from __future__ import annotations

import copy
import inspect

__all__ = ["LightEstimator", "LightClassifierMixin", "clone", "check_is_fitted", "check_classification_targets",
           "estimator_repr", "estimator_html"]


#: Each class's ``(__init__, parameter names)``, filled on first use.
_PARAM_NAMES: dict = {}


class LightEstimator:
    """Base class of estimators that follow scikit-learn's contract without importing it (see
    the module's docstring). Subclasses list their parameters as explicit ``__init__`` arguments
    and store each unchanged."""

    @classmethod
    def _get_param_names(cls):
        """The parameter names, sorted: ``__init__``'s arguments but ``self`` and ``**kwargs``
        (read once per class: ``inspect.signature`` costs more than a small fit's arithmetic)."""
        names = _PARAM_NAMES.get(cls)
        if names is None or names[0] is not cls.__init__:
            names = _PARAM_NAMES[cls] = (cls.__init__, cls._read_param_names())
        return list(names[1])

    @classmethod
    def _read_param_names(cls):
        init = cls.__init__
        if init is object.__init__:
            return []
        signature = inspect.signature(init)
        parameters = [p for p in signature.parameters.values() if p.name != "self" and p.kind != p.VAR_KEYWORD]
        for p in parameters:
            if p.kind == p.VAR_POSITIONAL:
                raise RuntimeError(f"{cls.__name__}{signature}: an estimator's parameters are named arguments of "
                                   f"__init__ (no varargs: *{p.name} cannot be a parameter)")
        return sorted(p.name for p in parameters)

    def get_params(self, deep=True):
        """Parameters of this estimator (``deep``: with those of nested estimators, as
        ``name__sub``)."""
        out = {}
        for key in self._get_param_names():
            value = getattr(self, key)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{key}__{k}", v) for k, v in value.get_params().items())
            out[key] = value
        return out

    def set_params(self, **params):
        """Set parameters (``name__sub`` for a nested estimator's); returns self. An unknown
        name raises ValueError naming it and the valid ones."""
        if not params:
            return self
        valid = self.get_params(deep=True)
        nested = {}
        for key, value in params.items():
            key, delim, sub_key = key.partition("__")
            if key not in valid:
                raise ValueError(f"{type(self).__name__} has no parameter {key!r}; its parameters are "
                                 f"{self._get_param_names()!r}")
            if delim:
                nested.setdefault(key, {})[sub_key] = value
            else:
                setattr(self, key, value)
                valid[key] = value
        for key, sub_params in nested.items():
            valid[key].set_params(**sub_params)
        return self

    def __sklearn_clone__(self):
        return clone(self)

    def __getstate__(self):
        """The instance's ``__dict__`` (``BaseEstimator``'s pickled state for a class outside
        scikit-learn), so subclasses may extend it through ``super()``."""
        if getattr(self, "__slots__", None):
            raise TypeError(f"{type(self).__name__}: estimators cannot use __slots__ (their state is their __dict__)")
        state = super().__getstate__()
        return self.__dict__.copy() if state is None else state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self, N_CHAR_MAX=700):
        return estimator_repr(self, N_CHAR_MAX)

    def __sklearn_tags__(self):
        from sklearn.utils import Tags, TargetTags

        return Tags(estimator_type=None, target_tags=TargetTags(required=False), transformer_tags=None,
                    regressor_tags=None, classifier_tags=None)

    def _repr_html_(self):
        """The notebook rendering: scikit-learn's (imported when a notebook asks for it)."""
        return estimator_html(self)


class LightClassifierMixin:
    """``sklearn.base.ClassifierMixin`` without scikit-learn: the ``classifier`` estimator type
    (tags), and ``score`` as the accuracy. Put it before ``LightEstimator`` in the bases."""

    _estimator_type = "classifier"

    def __sklearn_tags__(self):
        from sklearn.utils import ClassifierTags

        tags = super().__sklearn_tags__()
        tags.estimator_type = "classifier"
        tags.classifier_tags = ClassifierTags()
        tags.target_tags.required = True
        return tags

    def score(self, X, y, sample_weight=None):
        """Mean accuracy of ``self.predict(X)`` against ``y`` (``sklearn.metrics.accuracy_score``)."""
        from sklearn.metrics import accuracy_score

        return accuracy_score(y, self.predict(X), sample_weight=sample_weight)


def clone(estimator):
    """An unfitted copy of ``estimator`` with the same parameters, as ``sklearn.base.clone``
    makes it: each parameter cloned (estimators) or deep-copied (anything else), the constructor
    checked to store each unchanged. A ``LightEstimator`` is copied without importing
    scikit-learn; another estimator goes through ``sklearn.base.clone``."""
    if not isinstance(estimator, LightEstimator) or isinstance(estimator, type):
        from sklearn.base import clone as sklearn_clone

        return sklearn_clone(estimator)
    klass = type(estimator)
    params = {name: _clone_param(value) for name, value in estimator.get_params(deep=False).items()}
    new = klass(**params)
    stored = new.get_params(deep=False)
    for name, value in params.items():
        if value is not stored[name]:
            raise RuntimeError(f"cannot clone {type(estimator).__name__}: its __init__ does not set or modifies "
                               f"parameter {name} (an estimator stores each argument unchanged)")
    for attr in ("_metadata_request", "_sklearn_output_config"):  # scikit-learn's clone carries these two
        if attr in vars(estimator):
            setattr(new, attr, copy.deepcopy(getattr(estimator, attr)))
    return new


def _clone_param(value):
    """``sklearn.base.clone(value, safe=False)``: an estimator cloned, containers element-wise,
    anything else deep-copied."""
    if hasattr(value, "__sklearn_clone__") and not inspect.isclass(value):
        return value.__sklearn_clone__()
    kind = type(value)
    if kind is dict:
        return {k: _clone_param(v) for k, v in value.items()}
    if kind in (list, tuple, set, frozenset):
        return kind(_clone_param(v) for v in value)
    if not hasattr(value, "get_params") or isinstance(value, type):
        return copy.deepcopy(value)
    from sklearn.base import clone as sklearn_clone

    return sklearn_clone(value, safe=False)


def check_is_fitted(estimator, attribute: str) -> None:
    """``sklearn.utils.validation.check_is_fitted(estimator, attribute)`` without scikit-learn:
    ``genpqr.exceptions.NotFittedError`` (a scikit-learn ``NotFittedError``) unless
    ``estimator`` has ``attribute``."""
    if not hasattr(estimator, attribute):
        from .. import exceptions

        raise exceptions.NotFittedError(f"this {type(estimator).__name__} is not fitted yet; call fit first")


def check_classification_targets(y) -> None:
    """``sklearn.utils.multiclass.check_classification_targets(y)``: integer, boolean and string
    labels are classes as they stand (checked here, without scikit-learn); other labels (floats,
    objects, several columns) go through scikit-learn's check."""
    if getattr(y, "ndim", None) == 1 and y.dtype.kind in "iubUS":
        return
    from sklearn.utils.multiclass import check_classification_targets as sklearn_check

    sklearn_check(y)


# ------------------------------------------------------------------ renderings
# scikit-learn's own, imported when a repr is asked for (never on a fit's path), so an estimator
# reads exactly as it did on ``BaseEstimator``. Its pretty printer recognizes its own
# ``BaseEstimator`` subclasses; a light estimator is rendered through a stand-in: an instance of a
# ``BaseEstimator`` subclass of the same name and constructor, holding the same attributes (nested
# light estimators stood in for the same way).
_STAND_IN_CLASSES: dict = {}


def _stand_in_class(cls):
    from sklearn.base import BaseEstimator

    made = _STAND_IN_CLASSES.get(cls)
    if made is None:
        made = type(cls.__name__, (BaseEstimator,), {"__init__": cls.__init__, "__module__": cls.__module__,
                                                      "__qualname__": cls.__qualname__, "__doc__": cls.__doc__})
        _STAND_IN_CLASSES[cls] = made
    return made


def stand_in(value):
    """``value`` with every light estimator in it (nested in parameters, lists, tuples and
    dicts) replaced by a scikit-learn ``BaseEstimator`` of the same name, constructor and
    attributes."""
    kind = type(value)
    if kind is dict:
        return {k: stand_in(v) for k, v in value.items()}
    if kind in (list, tuple):
        return kind(stand_in(v) for v in value)
    if not isinstance(value, LightEstimator) or isinstance(value, type):
        return value
    other = object.__new__(_stand_in_class(kind))
    names = set(kind._get_param_names())
    other.__dict__.update({k: stand_in(v) if k in names else v for k, v in vars(value).items()})
    return other


def estimator_repr(estimator, n_char_max: int = 700) -> str:
    """``BaseEstimator.__repr__`` of ``estimator`` (changed parameters only, scikit-learn's layout
    and its ellipsis beyond ``n_char_max`` non-blank characters)."""
    from sklearn.base import BaseEstimator

    return BaseEstimator.__repr__(stand_in(estimator), N_CHAR_MAX=n_char_max)


def estimator_html(estimator) -> str:
    """scikit-learn's notebook (HTML) rendering of ``estimator``."""
    from sklearn.utils import estimator_html_repr

    return estimator_html_repr(stand_in(estimator))

"""The text and notebook renderings of a ``LightEstimator``: scikit-learn's own, imported when a
repr is asked for (never on a fit's path), so an estimator reads exactly as it did on
``sklearn.base.BaseEstimator``.

scikit-learn's pretty printer recognizes its own ``BaseEstimator`` subclasses; a light estimator
is rendered through a stand-in: an instance of a ``BaseEstimator`` subclass of the same name and
constructor, holding the same attributes (nested light estimators stood in for the same way).
"""

from __future__ import annotations

__all__ = ["estimator_repr", "estimator_html"]

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
    from ._estimator_base import LightEstimator

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

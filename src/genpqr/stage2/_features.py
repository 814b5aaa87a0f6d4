r"""State feature maps ``phi(s)`` for the closed-form Q-evaluation (:mod:`genpqr.stage2`).

A feature map is any scikit-learn transformer (``fit(states)`` then ``transform(states) ->
(n, m)``), or :class:`PolicyFeatures`, which reads the representation of the already-fitted
stage-1 network instead of fitting anything. The constructors below return the maps the
library uses by name:

==============  ==============================================================================
``"spline"``    :func:`spline_features`: standardized states, cubic B-splines per coordinate
                (additive in the coordinates; good for d <= ~5)
``"rff"``       :func:`fourier_features`: random Fourier features of the Gaussian kernel on
                standardized states (``RBFSampler``)
``"onehot"``    :func:`onehot_features`: indicator of a tabular state index (exact tabular
                LSTD: with per-action encoding it is the cell-mean model)
``"policy"``    :class:`PolicyFeatures`: the last hidden layer of the fitted stage-1 network
                (``hidden_representation`` of :class:`genpqr.models.MLPClassifier`), frozen
==============  ==============================================================================
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.kernel_approximation import RBFSampler
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, SplineTransformer, StandardScaler

from ..data._validation import as_float_array, seed_from

__all__ = ["spline_features", "fourier_features", "onehot_features", "PolicyFeatures", "make_features", "bind_policy",
           "learned_representation",
           "FEATURE_MAPS"]

#: Names accepted by :func:`make_features`.
FEATURE_MAPS = ("spline", "rff", "onehot", "policy")


def spline_features(n_knots: int = 5, degree: int = 3):
    """Standardize, then cubic B-splines per state coordinate: ``d * (n_knots + degree - 1)``
    features, each row summing to ``d`` (a partition of unity per coordinate)."""
    return make_pipeline(StandardScaler(), SplineTransformer(n_knots=n_knots, degree=degree, extrapolation="linear"))


def fourier_features(n_components: int = 200, gamma: float = 0.1, random_state=None):
    """Standardize, then ``n_components`` random Fourier features approximating the Gaussian
    kernel ``exp(-gamma |s - s'|^2)`` on standardized states (Rahimi and Recht, 2007)."""
    return make_pipeline(StandardScaler(), RBFSampler(gamma=gamma, n_components=n_components,
                                                      random_state=seed_from(random_state)))


def onehot_features(n_states: int):
    """Indicator features of a tabular state index in ``0..n_states-1`` (one column)."""
    return OneHotEncoder(categories=[np.arange(int(n_states), dtype=np.float64)], sparse_output=False,
                         handle_unknown="ignore")


class PolicyFeatures(BaseEstimator, TransformerMixin):
    """The frozen representation of a fitted stage-1 model: ``hidden_representation`` (else
    ``transform``) of each fitted classifier (e.g. the last hidden layer of
    :class:`genpqr.models.MLPClassifier`), side by side when stage 1 was cross-fitted.

    It is bound to the fitted policy by :meth:`bind` (``GenPQR`` does this); ``fit`` then
    fits nothing.

    Parameters
    ----------
    hidden : bool
        Include the learned representation (``transform``).
    log_proba : bool
        Include ``log pi_hat(.|s)`` (K columns per model, probabilities floored at
        ``min_proba``): quantities that are smooth in the log-policy (e.g. the continuation
        value under an anchor normalization, ``-log pi(anchor|s') / (1 - gamma)``) are then
        in the span even where they are not affine in the hidden layer.
    min_proba : float
    """

    def __init__(self, hidden=True, log_proba=False, min_proba=1e-3):
        self.hidden = hidden
        self.log_proba = log_proba
        self.min_proba = min_proba

    def bind(self, models) -> "PolicyFeatures":
        """Use ``models`` (a list of fitted classifiers with ``transform``); returns self."""
        if not (self.hidden or self.log_proba):
            raise ValueError("PolicyFeatures needs hidden=True or log_proba=True (else it has no features)")
        missing = [type(m).__name__ for m in models if self.hidden and learned_representation(m) is None]
        if missing:
            raise TypeError(
                f"features='policy' needs a stage-1 model with hiddenlearned_representation() or transform() returning its "
                f"learned representation "
                f"(e.g. genpqr.models._nn.MLPClassifier with hidden layers), got {missing[0]}; use features='spline' or "
                "'rff' instead"
            )
        self.models_ = list(models)
        return self

    def fit(self, X, y=None):
        if not hasattr(self, "models_"):
            raise ValueError("PolicyFeatures is not bound to a fitted policy; call bind(models) first "
                             "(GenPQR does this for q_model=LSTDQ(features='policy'))")
        return self

    def transform(self, X):
        X = as_float_array(X, "states", ndim=2)
        blocks = []
        for model in self.models_:
            if self.hidden:
                blocks.append(np.asarray(learned_representation(model)(X), dtype=np.float64))
            if self.log_proba:
                blocks.append(np.log(np.maximum(np.asarray(model.predict_proba(X), dtype=np.float64),
                                                self.min_proba)))
        return np.hstack(blocks)


def learned_representation(model):
    """The method giving a fitted classifier's learned representation of states, or None."""
    for name in ("hidden_representation", "transform"):
        if hasattr(model, name):
            return getattr(model, name)
    if hasattr(model, "steps"):  # a pipeline: preprocessing, then the last step's representation
        last = learned_representation(model.steps[-1][1])
        if last is not None:
            return lambda X: last(model[:-1].transform(X))
    return None


def bind_policy(feature_map, models):
    """Bind every :class:`PolicyFeatures` inside ``feature_map`` (itself, or a step of a
    pipeline / feature union) to the fitted stage-1 ``models``; returns ``feature_map``."""
    found = [feature_map] if isinstance(feature_map, PolicyFeatures) else []
    if hasattr(feature_map, "get_params"):
        found += [v for v in feature_map.get_params(deep=True).values() if isinstance(v, PolicyFeatures)]
    if found and not models:
        raise ValueError("a 'policy' feature map needs the fitted stage-1 models (BellmanProblem.policy_models)")
    for f in found:
        f.bind(models)
    return feature_map


def make_features(features, *, n_states=None, random_state=None):
    """The feature map named by ``features`` (see the module table), or ``features`` itself
    (a transformer with ``fit``/``transform``)."""
    if isinstance(features, str):
        if features == "spline":
            return spline_features()
        if features == "rff":
            return fourier_features(random_state=random_state)
        if features == "onehot":
            if n_states is None:
                raise ValueError("features='onehot' needs the number of tabular states (n_states)")
            return onehot_features(n_states)
        if features == "policy":
            return PolicyFeatures()
        raise ValueError(f"features must be one of {FEATURE_MAPS} or a transformer, got {features!r}")
    if not (hasattr(features, "fit") and hasattr(features, "transform")):
        raise TypeError(f"features must be one of {FEATURE_MAPS} or a transformer with fit() and transform(), "
                        f"got {type(features).__name__}")
    return features

"""Fitting a regressor with row weights: ``sample_weight`` routed to the estimator (a Pipeline's
last step), a named error for a regressor that takes none."""

from __future__ import annotations

import numpy as np

__all__ = ["fit_regressor"]


def fit_regressor(model, X, y, sample_weight=None, slot: str = "q_model"):
    """``model.fit(X, y)`` with ``sample_weight`` routed to the estimator (a Pipeline's last step);
    a ``TypeError`` naming ``slot`` and the estimator when it takes no weights and they differ."""
    if sample_weight is None:
        return model.fit(X, y)
    from sklearn.pipeline import Pipeline
    from sklearn.utils.validation import has_fit_parameter

    if isinstance(model, Pipeline):
        name, last = model.steps[-1]
        if last is not None and last != "passthrough" and has_fit_parameter(last, "sample_weight"):
            return model.fit(X, y, **{f"{name}__sample_weight": sample_weight})
    elif has_fit_parameter(model, "sample_weight"):
        return model.fit(X, y, sample_weight=sample_weight)
    if np.ptp(sample_weight) == 0:
        return model.fit(X, y)
    raise TypeError(f"{slot} {type(model).__name__} does not accept sample_weight, but the data has non-uniform "
                    "sample weights")

"""Fitting a regressor with row weights: ``sample_weight`` routed to the estimator (a Pipeline's
last step), a named error for a regressor that takes none."""

from __future__ import annotations

from ..data._weights import fit_weighted

__all__ = ["fit_regressor"]


def fit_regressor(model, X, y, sample_weight=None, slot: str = "q_model"):
    """``model.fit(X, y)`` with ``sample_weight`` routed to the estimator (a Pipeline's last step);
    a ``TypeError`` naming ``slot`` and the estimator when it takes no weights and they differ
    (``genpqr.data._weights.fit_weighted``)."""
    return fit_weighted(model, X, y, sample_weight, slot)

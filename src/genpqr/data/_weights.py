"""Row weights through a learner slot: ``fit(X, y, sample_weight=w)`` where the learner takes
them, routed to a Pipeline's last step, and a named error where it does not.

Row weights come from :attr:`genpqr.data.Transitions.sample_weight` (survey or design weights,
or the posterior type probabilities of a latent-type fit, :mod:`genpqr.stage1` ``type_row_weights``).
A weighted fit with integer weights is the fit on the data with each row repeated that many
times; weights all equal to one give the unweighted fit.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fit_weighted", "check_sample_weight"]


def check_sample_weight(sample_weight, n: int, name: str = "sample_weight") -> np.ndarray:
    """``sample_weight`` as a float array of shape (n,), finite, non-negative, positive sum."""
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
        raise ValueError(f"{name} must be finite and non-negative with a positive sum")
    return w


def fit_weighted(model, X, y, sample_weight, slot: str):
    """``model.fit(X, y)`` with ``sample_weight`` (n,) passed on (to a Pipeline's last step as
    ``<step>__sample_weight``); returns the fitted model.

    ``sample_weight`` None, or a learner that does not take weights while every weight is
    equal (a rescaling, the same fit for a likelihood or least-squares learner), fits unweighted.
    Otherwise a learner whose ``fit`` has no ``sample_weight`` parameter raises a ``TypeError``
    naming the slot (``slot``, e.g. ``"policy_model"``) and the estimator."""
    if sample_weight is None:
        return model.fit(X, y)
    from sklearn.pipeline import Pipeline
    from sklearn.utils.validation import has_fit_parameter

    w = check_sample_weight(sample_weight, np.shape(X)[0])
    if isinstance(model, Pipeline):
        name, last = model.steps[-1]
        if last is not None and last != "passthrough" and has_fit_parameter(last, "sample_weight"):
            return model.fit(X, y, **{f"{name}__sample_weight": w})
    elif has_fit_parameter(model, "sample_weight"):
        return model.fit(X, y, sample_weight=w)
    if np.ptp(w) == 0:
        return model.fit(X, y)
    raise TypeError(f"{slot} {type(model).__name__} does not accept sample_weight in fit, but the data carries "
                    f"non-uniform row weights (Transitions.sample_weight, or latent-type posteriors); use a "
                    f"{slot} whose fit takes sample_weight")

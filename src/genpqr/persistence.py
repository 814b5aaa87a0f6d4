"""Saving fitted models, with or without their training data.

A fitted :class:`genpqr.GenPQR` (finite or continuous actions) keeps the
transitions it was fitted on (``training_data_``) and, when cross-fitted, the fold of every
training row (``policy_.fold_of_row``; on the exact path the fold models of ``policy_folds_``, which
serve the out-of-fold diagnostics only): together O(n) memory, tens of MB for a million rows,
while everything else is O(states x actions) or the size of the fitted models.

``save(path)`` (``include_data=False``, the default) writes the model without them. The
saved model still predicts: ``reward``, ``continuation``, ``q``, ``policy``, ``reward_table``,
``summary``, ``diagnostics_`` and, on the exact tabular path, ``value_difference``. What
needs the data (and says so when it is missing): ``renormalize``, ``value_difference`` with
fitted Q evaluation, the DDC likelihood's default weights, the fit report's figures, and a
refit. ``save(path, include_data=True)`` (``genpqr fit --save-data``) keeps everything.
"""

from __future__ import annotations

import copy
import pickle

__all__ = ["dump", "without_data", "require_data"]


def without_data(model):
    """A shallow copy of a fitted model without its per-row training data (``model`` is not
    modified)."""
    slim = copy.copy(model)
    slim.__dict__.pop("training_data_", None)
    policy = getattr(slim, "policy_", None)
    if getattr(policy, "fold_of_row", None) is not None:
        slim.policy_ = copy.copy(policy)
        slim.policy_.fold_of_row = None
    if getattr(slim, "policy_folds_", None) is not None:  # the exact path's out-of-fold diagnostics, computed
        slim.policy_folds_ = None
    slim.saved_without_data_ = True
    return slim


def require_data(model, what: str) -> None:
    """Raise a ``ValueError`` naming ``what`` when the model was saved without its data."""
    if not hasattr(model, "training_data_"):
        raise ValueError(f"{what} needs the training data, but this model was saved without it; save it with "
                         f"save(path, include_data=True) (genpqr fit --save-data) or refit it")


def dump(model, path, *, include_data: bool = False) -> None:
    """``joblib.dump`` of the model (or of :func:`without_data`); falls back to cloudpickle for
    models holding user-supplied closures (e.g. a lambda ``g``). :func:`genpqr.load` reads both."""
    import joblib

    obj = model if include_data else without_data(model)
    try:
        joblib.dump(obj, path)
    except (pickle.PicklingError, AttributeError, TypeError):
        import cloudpickle

        with open(path, "wb") as fh:
            cloudpickle.dump(obj, fh)

"""Argument checks shared by the structural estimators: feature arrays ``(S, K, p)``,
``(S, K)`` tables and non-negative likelihood weights. Each error names the argument."""

from __future__ import annotations

import numpy as np

from ..data._validation import as_float_array

__all__ = ["check_features", "check_table", "check_weights"]


def check_features(features, shape=None) -> np.ndarray:
    """``features`` as a float array of shape ``(S, K, p)`` (an ``(S, K)`` array is one feature);
    with ``shape``, ``(S, K)`` must equal it."""
    X = as_float_array(features, "features")
    if X.ndim == 2:
        X = X[:, :, None]
    if X.ndim != 3:
        raise ValueError(f"features must have shape (S, K, p), got {X.shape}")
    if shape is not None and X.shape[:2] != tuple(shape):
        raise ValueError(f"features must have shape (S, K, p) = ({shape[0]}, {shape[1]}, p), got {X.shape}")
    return X


def check_table(x, shape, name) -> np.ndarray:
    """A state-action table (ndarray or DataFrame) as a float array of shape ``shape``."""
    if hasattr(x, "to_numpy"):
        x = x.to_numpy()
    arr = as_float_array(x, name, ndim=2)
    if arr.shape != tuple(shape):
        raise ValueError(f"{name} must have shape (S, K) = {tuple(shape)}, got {arr.shape}")
    return arr


def check_weights(weights, shape, name="weights") -> np.ndarray:
    """A table of non-negative weights with a positive sum (counts or frequencies)."""
    w = check_table(weights, shape, name)
    if w.min() < 0:
        raise ValueError(f"{name} must be non-negative, got a minimum of {w.min():.3g}")
    if w.sum() <= 0:
        raise ValueError(f"{name} must have a positive sum")
    return w

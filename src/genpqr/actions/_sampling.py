"""Random draws shared by the reference kernels (:mod:`genpqr.actions`) and the integration
rules (:mod:`genpqr.actions`): antithetic normal and uniform draws, Latin hypercubes."""

from __future__ import annotations

import numpy as np

from ..data._validation import as_float_array

__all__ = ["as_states", "antithetic_normal", "antithetic_uniform", "latin_hypercube"]


def as_states(states) -> np.ndarray:
    """``states`` as a float array (n, d) (a 1-D array is one column)."""
    return as_float_array(states, "states", ndim=2, allow_1d_as_column=True)


def antithetic_normal(rng, n: int, J: int, m: int, antithetic: bool) -> np.ndarray:
    """Standard normal draws (n, J, m); with ``antithetic`` the second half mirrors the first (``-z``)."""
    if not antithetic or J < 2:
        return rng.standard_normal((n, J, m))
    half = rng.standard_normal((n, J // 2, m))
    parts = [half, -half]
    if J % 2:
        parts.append(rng.standard_normal((n, 1, m)))
    return np.concatenate(parts, axis=1)


def latin_hypercube(rng, n: int, J: int, m: int) -> np.ndarray:
    """n independent Latin hypercubes of J points in [0, 1]^m: (n, J, m)."""
    if J == 0:
        return np.empty((n, 0, m))
    strata = np.argsort(rng.random((n, J, m)), axis=1)  # a random permutation per row and dimension
    return (strata + rng.random((n, J, m))) / J


def antithetic_uniform(rng, n: int, J: int, m: int, antithetic: bool, stratified: bool = False) -> np.ndarray:
    """Uniform draws on [0, 1]^m (n, J, m): Latin hypercubes with ``stratified``; with ``antithetic``
    the second half mirrors the first (``1 - u``)."""
    draw = (lambda k: latin_hypercube(rng, n, k, m)) if stratified else (lambda k: rng.random((n, k, m)))
    if not antithetic or J < 2:
        return draw(J)
    half = draw(J // 2)
    parts = [half, 1.0 - half]
    if J % 2:
        parts.append(rng.random((n, 1, m)))
    return np.concatenate(parts, axis=1)

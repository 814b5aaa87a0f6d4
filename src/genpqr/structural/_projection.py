r"""Structural parameters read off a reward table, and features in a normalization.

* ``normalize_features`` -- the features (and offset) of the representative of
  ``r_theta = features @ theta + offset`` that satisfies ``mu r = g`` for every ``theta``
  (the shaping lemma; the potential is affine in ``theta``);
* :func:`project_reward` -- weighted least squares of a recovered reward table on the
  features (a minimum-distance estimator).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..stage2._kernels import as_kernel
from ..stage2._linear_bellman import solve_linear_bellman
from ..data._validation import check_gamma
from ._checks import check_features, check_table, check_weights

__all__ = ["is_normalized", "features_in_normalization", "normalize_features", "ProjectionResult", "project_reward",
           "projection_std_errors"]


def is_normalized(features, offset, mu, g, atol=1e-9) -> bool:
    """``mu r_theta = g`` for every theta: ``mu @ features = 0`` and ``mu @ offset = g``."""
    mu_x = np.einsum("sa,sap->sp", mu, features)
    gap = np.sum(mu * offset, axis=1) - g
    return (np.max(np.abs(mu_x), initial=0.0) <= atol
            and np.max(np.abs(gap), initial=0.0) <= atol * max(1.0, float(np.max(np.abs(g), initial=0.0))))


def features_in_normalization(features, offset, mu, g, kernel, gamma, solver="auto"):
    """The features/offset themselves if they satisfy ``mu r = g`` (:func:`is_normalized`),
    else their normalized representative (``normalize_features``)."""
    if is_normalized(features, offset, mu, g):
        return features, offset
    return normalize_features(features, kernel, gamma, mu, g, offset=offset, solver=solver)


def normalize_features(features, kernel, gamma, mu, g=0.0, *, offset=None, solver: str = "auto"):
    r"""Features of the normalized representative of ``r_theta = features @ theta + offset``.

    By the shaping lemma the representative of ``r`` with ``mu r = g`` is
    ``r + c - gamma P c`` with ``(I - gamma P_mu) c = g - mu r`` (as
    :func:`genpqr.stage2.normalized_reward`); ``c`` is affine in ``theta``, so the
    normalized reward is ``features_mu @ theta + offset_mu`` with, per feature ``j``,
    ``c_j = -(I - gamma P_mu)^{-1} mu x_j`` and ``x_j + c_j - gamma P c_j``. Lets a
    structural model written in any parametrization (e.g. Rust's ``u(x, replace) = -RC``)
    be combined with GenPQR's ``v`` under any fixed-weights normalization.

    Parameters
    ----------
    features : ndarray of shape (S, K, p)
    kernel : transition kernel
    gamma : float
    mu : ndarray of shape (S, K)
        Normalization weights (e.g. ``GenPQR.stage2_.recovery.mu``).
    g : float or ndarray of shape (S,)
    offset : ndarray of shape (S, K), optional

    Returns
    -------
    features_mu : ndarray of shape (S, K, p)
        ``mu @ features_mu = 0``.
    offset_mu : ndarray of shape (S, K)
        ``mu @ offset_mu = g``.
    """
    gamma = check_gamma(gamma)
    X = check_features(features)
    shape = X.shape[:2]
    kernel = as_kernel(kernel, shape[1])
    mu = check_table(mu, shape, "mu")
    off = np.zeros(shape) if offset is None else check_table(offset, shape, "offset")
    g = np.broadcast_to(np.asarray(g, dtype=np.float64), (shape[0],))
    P_mu = kernel.under(mu)

    def shape_by(b):
        c, _ = solve_linear_bellman(P_mu, b, gamma, solver=solver, tol=1e-12)
        return c[:, None] - gamma * kernel.expect(c)

    X_mu = np.stack([X[:, :, j] + shape_by(-np.sum(mu * X[:, :, j], axis=1)) for j in range(X.shape[2])], axis=2)
    off_mu = off + shape_by(g - np.sum(mu * off, axis=1))
    return X_mu, off_mu


# ============================================================================ projection
@dataclass(frozen=True)
class ProjectionResult:
    """Weighted least-squares projection of a reward table on features.

    Attributes
    ----------
    theta : ndarray of shape (p,)
    fitted : ndarray of shape (S, K)
        ``features @ theta``.
    weighted_r2 : float
        Share of the weighted variance (around zero) of the table that the features explain.
    """

    theta: np.ndarray
    fitted: np.ndarray
    weighted_r2: float

    @property
    def params(self) -> np.ndarray:
        """``theta`` in statsmodels' name (no standard error: the table's errors are not
        independent; ``StructuralFit.bootstrap`` gives one)."""
        return self.theta


def project_reward(reward_table, features, weights=None, *, offset=None) -> ProjectionResult:
    r"""``theta = argmin sum_{s,a} w(s,a) (r(s,a) - offset(s,a) - features(s,a) @ theta)^2``.

    A minimum-distance reading of structural parameters off GenPQR's nonparametric reward.
    With the exact reward it returns the true ``theta`` (if the model is linear in the
    features); with an estimated one its efficiency depends on the weights: visit counts
    weigh the table where the data are, and ``n(s) pi(a|s) pi(a'|s)``-type weights (the
    inverse variance of a log-odds) down-weigh the noisy log-policy of rare actions.

    Parameters
    ----------
    reward_table : ndarray or DataFrame of shape (S, K)
        E.g. ``GenPQR.reward_table()`` or ``model.stage2_.recovery.reward``.
    features : ndarray of shape (S, K, p)
    weights : ndarray of shape (S, K), optional
        Default: equal weights.
    offset : ndarray of shape (S, K), optional
        Known part of the reward.
    """
    r = check_table(reward_table, np.shape(reward_table)[:2], "reward_table")
    X = check_features(features, r.shape)
    w = np.ones(r.shape) if weights is None else check_weights(weights, r.shape)
    y = r - (0.0 if offset is None else check_table(offset, r.shape, "offset"))
    sw = np.sqrt(w).reshape(-1)
    A = X.reshape(-1, X.shape[2]) * sw[:, None]
    b = y.reshape(-1) * sw
    theta, *_ = np.linalg.lstsq(A, b, rcond=None)
    fitted = X @ theta
    total = float(np.sum(w * y ** 2))
    r2 = 1.0 - float(np.sum(w * (y - fitted) ** 2)) / total if total > 0 else 1.0
    return ProjectionResult(theta, fitted, r2)


def projection_std_errors(fit, model, offset=None):
    """The projection's standard errors: the efficient influence function of the least-squares
    projection of the normalized reward (:func:`genpqr.inference.projection_inference`, at the
    model's first stage and kernel), with its :class:`~genpqr.exceptions.InferenceWarning` when the
    Riesz weights are extreme (a normalization on a rarely taken action: the interval is then not to be
    trusted). None (NaN) when the model has no rows (saved without its data) or a normalization those
    influence functions do not carry (``mu = pi``, an estimated ``g``)."""
    from ..inference import projection_inference

    if not hasattr(model, "training_data_"):
        return fit
    try:
        res = projection_inference(model, fit.features, names=fit.names, offset=offset)  # warns when fragile
    except ValueError:
        return fit
    hidden = np.where(fit.identified, 1.0, np.nan)
    return dataclasses.replace(fit, std_error=res.std_error * hidden, cov=res.cov)

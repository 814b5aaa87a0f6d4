r"""Econometric pieces on top of GenPQR for structural dynamic discrete choice (DDC).

GenPQR recovers, nonparametrically, the normalized reward ``r`` (S, K) and the continuation
value ``v = P V`` (S, K) of the normalized reward (paper Sec. 2-4: ``v = -P mu Q``, and the
soft-optimal policy is ``pi = softmax(r + gamma v)``). An economist usually wants a few
*structural parameters* ``theta`` of a reward that is linear in known features,
``r_theta(s, a) = features(s, a) @ theta + offset(s, a)``. This module turns GenPQR's output
into ``theta``:

* :func:`project_reward` -- weighted least squares of the recovered reward table on the
  features (a minimum-distance estimator);
* :func:`fit_structural` -- the conditional-choice-probability (CCP) step: hold GenPQR's
  ``v`` fixed and maximize the conditional-choice log-likelihood
  ``sum_i log softmax_a(r_theta(s_i, a) + gamma v(s_i, a))[a_i]`` (a concave logit
  problem, solved by Newton's method with the analytic Hessian);
* ``fit_npl`` -- Hotz and Miller's (1993) pseudo-likelihood and its iteration, the
  nested pseudo-likelihood (NPL) of Aguirregabiria and Mira (2002). Its policy evaluation
  is GenPQR's exact stage 2 under the *behaviour* normalization ``mu = pi``,
  ``g = pi r_theta``, which makes ``v`` affine in ``theta``.

:class:`StructuralStep` wraps them around a fitted :class:`~genpqr.GenPQR`.

Why GenPQR's ``v`` is the right continuation value. For any reward ``r`` with soft-optimal
policy ``pi`` and soft value ``V = logsumexp(r + gamma P V)``, ``log pi = r + gamma P V - V``;
averaging with ``mu`` gives ``V = g - mu log pi + gamma P_mu V`` when ``mu r = g``. So
``-W = -(I - gamma P_mu)^{-1}(mu u - g)`` (GenPQR's exact stage 2) is the soft value of the
normalized reward and ``v = -P W = P V`` (for the anchor normalization this is Arcidiacono
and Miller's (2011) renewal representation; for Rust's model the anchor is the renewal
action "replace"). Consequently, with ``v`` held fixed the parametric reward must be
written in the same normalization, ``mu r_theta = g`` for every ``theta``;
``normalize_features`` maps any linear parametrization to it (the shaping potential is
affine in ``theta``), and :class:`StructuralStep` does so when needed. For a policy ``pi``
that is *not* soft-optimal (a first-stage estimate, an NPL iterate) the same solve with
``mu = pi`` and ``g = pi r`` returns ``P V^pi_r``, the entropy-regularized value of ``pi``
under ``r``: Hotz-Miller's inversion, and Aguirregabiria-Mira's policy-iteration map.

The normalization is a free choice for the fixed-``v`` step, and it matters in finite
samples. Under an anchor action, ``v`` is built from ``log pi_hat(anchor|s)`` alone (the
renewal estimator of Arcidiacono-Miller); under the fixed weights ``mu = pi_hat`` (``g = 0``)
it is built from ``sum_a pi_hat log pi_hat``, and the fixed-``v`` step is *exactly*
Hotz-Miller's pseudo-likelihood estimator (``method="pml"``; the ``mu``-weighted shaping
terms are state-only and cancel in the logit). On Rust's model, where replacement is almost
never observed at low mileage, the second is far more accurate (docs/engine_replacement.md).

Transitions with a structure: ``increment_kernel`` (and the callable
:class:`IncrementKernel` for ``GenPQR(transition_model=...)``) estimates a kernel in which the
state moves up by an increment whose distribution does not depend on the state (Rust's
mileage), pooling all rows.

Where the pieces live (all importable from here): increment kernels and choice counts in
``_kernels``; ``normalize_features`` and :func:`project_reward` in
``_projection``; ``conditional_loglik``, :func:`fit_structural`,
``fit_npl`` and NPL's policy evaluation in ``_ccp``;
:class:`StructuralStep` here.
"""

from __future__ import annotations

import time

import numpy as np

from .. import exceptions
from ..data._estimator_base import LightEstimator
from ._ccp import StructuralResult, conditional_loglik, fit_npl, fit_structural, policy_evaluation_terms
from ._checks import check_features, check_table, check_weights
from ._kernels import IncrementKernel, choice_counts, increment_kernel, increment_probabilities, kernel_from_increments
from ._projection import ProjectionResult, features_in_normalization, normalize_features, project_reward

__all__ = [
    "increment_probabilities",
    "increment_kernel",
    "kernel_from_increments",
    "IncrementKernel",
    "choice_counts",
    "normalize_features",
    "ProjectionResult",
    "project_reward",
    "StructuralResult",
    "conditional_loglik",
    "fit_structural",
    "fit_npl",
    "policy_evaluation_terms",
    "StructuralStep",
]


# ============================================================================ estimator
class StructuralStep(LightEstimator):
    """Structural parameters of a linear-in-features reward from a fitted exact-path GenPQR.

    Parameters
    ----------
    features : ndarray of shape (S, K, p)
        ``r_theta = features @ theta + offset`` by tabular state and action code, in any
        parametrization: for ``"fixed-v"`` features that do not satisfy GenPQR's
        normalization are mapped to it by ``normalize_features`` (same ``theta``).
    offset : ndarray of shape (S, K), optional
        Known part of the reward (default 0).
    method : {"pml", "fixed-v", "npl", "npl-normalized"}
        ``"pml"`` (default): Hotz-Miller's two-step pseudo-likelihood -- one conditional
        logit step in which ``v`` is GenPQR's exact solve under the behaviour normalization
        ``mu = pi_hat``, ``g = pi_hat r_theta`` (affine in ``theta``; one NPL iteration). It
        inherits the first stage's error where actions are rare (-1.5 / -2.6 SE on a pooled
        panel of four simulated bus groups) and its SEs ignore it; ``genpqr fit`` defaults to
        ``"npl"`` (the MLE, ``genpqr.structural._estimation``), docs/structural_estimation.md.
        ``"fixed-v"``: one conditional-logit step with GenPQR's fitted continuation value
        ``v`` held fixed (:func:`fit_structural`), in whatever normalization GenPQR was fitted
        with: for an anchor action, Arcidiacono-Miller's renewal CCP estimator, which uses
        the log-CCP of the anchor directly and is noisy when that action is rare (Rust's
        model: docs/engine_replacement.md); for ``normalization.weighted(pi_hat)`` it equals
        ``"pml"``. ``"npl"``: NPL iterated to convergence
        (``fit_npl``; converges to the MLE given GenPQR's kernel). ``"npl-normalized"``:
        NPL with the normalized ``v`` held fixed in each step (``fit_npl(mapping="normalized")``;
        slow, not the MLE).
    max_iter : int
        NPL iterations.
    tol : float
        Newton-decrement tolerance (``"fixed-v"``, see :func:`fit_structural`) / parameter
        change tolerance (NPL).
    feature_names : list of str, optional

    Attributes
    ----------
    theta_ : ndarray of shape (p,)
    cov_, se_ : covariance (p, p) and standard errors (p,): for ``"npl"`` at convergence the
        MLE's inverse OPG (as NFXP's); otherwise the (pseudo-)likelihood's inverse Hessian,
        conditional on GenPQR's first stage (see ``StructuralResult``)
    loglik_ : float
    n_iter_ : int
    converged_ : bool
    result_ : StructuralResult
    fit_time_ : float
        Seconds spent in :meth:`fit` (the structural step only, GenPQR excluded).
    """

    _methods = ("pml", "fixed-v", "npl", "npl-normalized")

    def __init__(self, features=None, offset=None, method="pml", max_iter=50, tol=1e-8, feature_names=None):
        self.features = features
        self.offset = offset
        self.method = method
        self.max_iter = max_iter
        self.tol = tol
        self.feature_names = feature_names

    def fit(self, model, weights=None):
        """Fit on a fitted ``GenPQR(q_model="exact")``.

        Parameters
        ----------
        model : GenPQR
            Fitted on the exact tabular path; its continuation value, first-stage policy,
            kernel, normalization and discount are used.
        weights : ndarray of shape (S, K), optional
            Likelihood weights; default the visit counts of ``model.training_data_``.
        """
        from ..estimator import GenPQR

        start = time.perf_counter()
        if not isinstance(model, GenPQR) or not hasattr(model, "stage2_"):
            raise TypeError(f"model must be a fitted genpqr.GenPQR, got {type(model).__name__}")
        if not hasattr(model, "n_states_"):  # the exact tabular path's tables
            raise ValueError("StructuralStep needs GenPQR fitted with q_model='exact' (tabular states)")
        if self.method not in self._methods:
            raise ValueError(f"method must be one of {self._methods}, got {self.method!r}")
        if self.features is None:
            raise ValueError("features must be given: an (S, K, p) array with r_theta = features @ theta")
        rec = model.stage2_.recovery
        shape = rec.reward.shape
        X = check_features(self.features, shape)
        off = np.zeros(shape) if self.offset is None else check_table(self.offset, shape, "offset")
        if weights is not None:
            counts = check_weights(weights, shape)
        elif getattr(model.stage2_, "counts", None) is not None:  # kept by the exact path, also in a slim save
            counts = np.asarray(model.stage2_.counts, dtype=np.float64)
        else:
            from ..estimator._persistence import require_data

            require_data(model, "the default weights (visit counts) of the structural fit")
            counts = choice_counts(model.training_data_, shape[0])
        kernel, gamma = model.stage2_.kernel, model.gamma_
        if self.method == "fixed-v":
            Xn, offn = features_in_normalization(X, off, rec.mu, rec.g, kernel, gamma, model.solver)
            result = fit_structural(rec.continuation, Xn, counts, gamma, offset=offn, tol=self.tol)
        else:
            max_iter = 1 if self.method == "pml" else self.max_iter
            mapping = "normalized" if self.method == "npl-normalized" else "policy-evaluation"
            result = fit_npl(np.exp(rec.log_policy), X, counts, kernel, gamma, offset=off, max_iter=max_iter,
                             tol=self.tol, mapping=mapping, normalization=model.normalization_, solver=model.solver)
        self.result_ = result
        self.theta_ = result.theta
        self.cov_ = result.cov
        self.se_ = result.se
        self.loglik_ = result.loglik
        self.n_iter_ = result.n_iter
        self.converged_ = result.converged
        self.offset_ = off
        self.features_ = X
        self.fit_time_ = time.perf_counter() - start
        return self

    def _check_fitted(self):
        if not hasattr(self, "theta_"):
            raise exceptions.NotFittedError("this StructuralStep is not fitted yet; call fit(genpqr_model) first")

    def reward_table(self) -> np.ndarray:
        """``r_theta_hat = features @ theta_ + offset``, shape (S, K)."""
        self._check_fitted()
        return self.features_ @ self.theta_ + self.offset_

    def summary(self):
        """Estimates, standard errors and their kind (``se_kind``: ``"OPG"`` for NPL at convergence,
        the MLE's; else ``"inverse Hessian"`` of the pseudo- or conditional likelihood, conditional
        on GenPQR's first stage) as a DataFrame."""
        import pandas as pd

        self._check_fitted()
        names = self.feature_names or [f"theta[{j}]" for j in range(self.theta_.size)]
        mle = self.method == "npl" and self.converged_
        kind = "OPG" if mle else "inverse Hessian (conditional on the first stage)"
        return pd.DataFrame({"estimate": self.theta_, "se": self.se_, "se_kind": kind}, index=list(names))

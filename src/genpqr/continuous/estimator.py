r"""Deprecated: continuous-action GenPQR is :class:`genpqr.GenPQR` on transitions whose action
space is a box (``genpqr.from_arrays(..., action_space="box")``); the steps that differ are in
:mod:`genpqr.estimator_box`. :class:`ContinuousGenPQR` keeps the former constructor (and its
defaults: ``n_iterations=200``) for one release and warns.
"""

from __future__ import annotations

import warnings

from ..estimator import GenPQR
from ..diagnostics import ContinuousDiagnostics
from ..transitions import Transitions

__all__ = ["ContinuousGenPQR", "ContinuousDiagnostics"]


class ContinuousGenPQR(GenPQR):
    """Deprecated alias of :class:`genpqr.GenPQR` for continuous actions, with the former
    parameters (see :class:`genpqr.GenPQR` for their meaning; ``n_iterations`` defaults to 200
    here). Fits only transitions with continuous actions."""

    def __init__(self, normalization=None, gamma=0.9, policy_model=None, policy_prefit=False, q_model=None,
                 structure="continuation", integration=None, n_iterations=200, tol=1e-6, warm_start="auto",
                 freeze_transformers=True, reference=None, min_log_density=None, cross_fit=None, min_support=30,
                 check_density=True, density_tol=1e-2, random_state=None):
        warnings.warn("genpqr.continuous.ContinuousGenPQR is deprecated and will be removed in the next release; "
                      "use genpqr.GenPQR (it fits transitions with continuous actions)", DeprecationWarning,
                      stacklevel=2)
        self.normalization = normalization
        self.gamma = gamma
        self.policy_model = policy_model
        self.policy_prefit = policy_prefit
        self.q_model = q_model
        self.structure = structure
        self.integration = integration
        self.n_iterations = n_iterations
        self.tol = tol
        self.warm_start = warm_start
        self.freeze_transformers = freeze_transformers
        self.reference = reference
        self.min_log_density = min_log_density
        self.cross_fit = cross_fit
        self.min_support = min_support
        self.check_density = check_density
        self.density_tol = density_tol
        self.random_state = random_state

    def fit(self, X, y=None):
        """Fit both stages on continuous-action transitions; returns self."""
        if isinstance(X, Transitions) and X.is_finite:
            raise TypeError("ContinuousGenPQR needs continuous actions, but data is a discrete-action "
                            "genpqr.data.Transitions: use genpqr.GenPQR for discrete actions, or build continuous "
                            "transitions with genpqr.from_arrays(..., action_space='box')")
        if not isinstance(X, Transitions):
            raise TypeError(f"data must be genpqr.Transitions with continuous actions (ContinuousTransitions; build "
                            f"it with genpqr.from_arrays(..., action_space='box')), got {type(X).__name__}")
        return self._fit_box(X)

"""Deprecated: continuous-action fitted Q evaluation is :class:`genpqr.qeval.FQE` with
``mu``-nodes (a :class:`~genpqr.integration.Nodes`) in place of the (n, K) weights."""

from __future__ import annotations

import warnings

from ..qeval import FQE, STRUCTURES
from ..qmodels import fit_regressor

__all__ = ["ContinuousFQE", "STRUCTURES", "fit_regressor"]


class ContinuousFQE(FQE):
    """Deprecated alias of :class:`genpqr.qeval.FQE` with the former constructor and ``fit``
    signature (``fit(states, actions, next_states, continues, base, next_nodes, next_base,
    gamma, sample_weight=None, next_index=None)``)."""

    def __init__(self, regressor=None, structure="continuation", n_iterations=200, tol=1e-6, warm_start="auto",
                 freeze_transformers=True):
        warnings.warn("genpqr.continuous.ContinuousFQE is deprecated and will be removed in the next release; use "
                      "genpqr.qeval.FQE", DeprecationWarning, stacklevel=2)
        self.regressor = regressor
        self.structure = structure
        self.n_iterations = n_iterations
        self.tol = tol
        self.warm_start = warm_start
        self.freeze_transformers = freeze_transformers

    def fit(self, states, actions, next_states, continues, base, next_nodes, next_base, gamma, sample_weight=None,
            next_index=None):
        return self._fit_nodes(states, actions, next_states, continues, base, next_nodes, next_base, gamma,
                               sample_weight, next_index)

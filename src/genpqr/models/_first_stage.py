"""The spline-logit first stage and the rule that chooses it, under their first address.

They live in :mod:`genpqr.stage1` (the core), because ``GenPQR``'s default on the exact
tabular path uses the same rule as ``genpqr fit``; this module re-exports the public names
(models pickled with the old path load unchanged).
"""

from __future__ import annotations

from ..stage1 import SplineLogit
from ..stage1._first_stage import (C_GRID, DEFAULT_SEED, KNOT_GRID, SPARSE_MEDIAN_VISITS, SPARSE_ZERO_SHARE,
                                   FirstStageChoice, cells_are_sparse, choose_tabular_policy, given_first_stage,
                                   select_spline_logit, sparsity, state_is_ordered)

__all__ = ["SplineLogit", "select_spline_logit", "cells_are_sparse", "choose_tabular_policy", "FirstStageChoice",
           "state_is_ordered", "given_first_stage", "sparsity", "SPARSE_MEDIAN_VISITS", "SPARSE_ZERO_SHARE", "KNOT_GRID",
           "C_GRID", "DEFAULT_SEED"]

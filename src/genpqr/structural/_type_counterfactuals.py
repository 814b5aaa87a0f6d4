r"""Counterfactuals with latent types: per type, and averaged over the type distribution.

Each type ``m`` of a mixture MLE is a structural model of its own
(``genpqr.structural._type_counterfactuals.type_fit``); a counterfactual on it is the structural route's
(:meth:`genpqr.structural.StructuralFit.counterfactual`: the soft-optimal policy of the changed
flow utility under the type's kernel, with delta-method intervals from the type's block of the
mixture covariance). The population answer averages the types' statistics with the mixing
proportions, ``sum_m prior_m h_m`` (for stationary action rates: the share of agent-periods of a
population whose agents are drawn from the mixture). The average carries no interval here (the
types' answers share parameters and are not independent).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..stage2._kernels import TransitionKernel
from ._estimation import StructuralFit, std_errors
from ._results import SE_KINDS

__all__ = ["type_counterfactuals", "type_fit"]


def type_counterfactuals(typed, parameter_change=None, reward_change=None, transitions=None, gamma=None,
                         **kwargs) -> pd.DataFrame:
    """The counterfactual per type and averaged over types, as one tidy table.

    Parameters
    ----------
    typed : TypedStructuralFit
        A mixture MLE (``npl`` or ``nfxp``).
    parameter_change, reward_change, transitions, gamma, **kwargs
        As in :meth:`genpqr.structural.StructuralFit.counterfactual` (e.g.
        ``parameter_change={"RC": "*2"}``; a type-specific parameter is named by its base name).

    Returns
    -------
    DataFrame
        One row per (type, distribution, statistic): ``type`` (``0..M-1``, then ``"mixture"``),
        ``weight`` (the mixing proportion), ``baseline``, ``counterfactual``, ``difference`` and,
        for the types, the delta-method ``*_lo``/``*_hi`` columns of the structural route.
    """
    frames = []
    for m in range(typed.n_types):
        res = type_fit(typed, m).counterfactual(parameter_change, reward_change, transitions, gamma, **kwargs)
        frame = res.to_frame()
        frame.insert(0, "weight", typed.mixing_proportions[m])
        frame.insert(0, "type", m)
        frames.append(frame)
    keys = ["distribution", "statistic"]
    stacked = pd.concat(frames, ignore_index=True)
    weighted = stacked[keys + ["baseline", "counterfactual", "difference"]].copy()
    for column in ("baseline", "counterfactual", "difference"):
        weighted[column] = weighted[column] * stacked["weight"]
    mixture = weighted.groupby(keys, sort=False).sum().reset_index()
    mixture.insert(0, "weight", float(np.sum(typed.mixing_proportions)))
    mixture.insert(0, "type", "mixture")
    return pd.concat([stacked, mixture], ignore_index=True)


def type_fit(typed, m: int) -> StructuralFit:
    """Type ``m`` of a mixture MLE (:class:`~genpqr.structural.TypedStructuralFit`, ``npl``
    or ``nfxp``) as a single-type :class:`StructuralFit`: its parameters (shared ones included)
    with their block of the mixture covariance, its choice probabilities, its posterior-weighted
    choice counts, its kernel and the discount. Ready for :meth:`StructuralFit.counterfactual`:
    a counterfactual per type (e.g. ``type_fit(typed, 1).counterfactual({"RC": "*2"})``)."""
    if typed.estimator not in ("npl", "nfxp"):
        raise ValueError(f"type_fit needs the mixture MLE (estimator npl or nfxp) and its covariance, got "
                         f"{typed.estimator!r}")
    if not 0 <= int(m) < typed.n_types:
        raise ValueError(f"m must be a type in 0..{typed.n_types - 1}, got {m!r}")
    space, m = typed.space, int(m)
    S, K, cols = space.n_states, space.n_actions, space.columns[m]
    block = slice(m * S, (m + 1) * S)
    cov, cov_robust = typed.cov[np.ix_(cols, cols)], typed.cov_robust[np.ix_(cols, cols)]
    kernel = space.type_kernels[m] if space.type_kernels is not None else TransitionKernel(
        space.kernel.matrix[m * S * K:(m + 1) * S * K][:, block], S, K)
    counts = space.counts(typed.data, typed.posteriors)[block]
    return StructuralFit(
        typed.estimator, list(space.base_names), typed.theta[cols], std_errors(cov), std_errors(cov_robust),
        SE_KINDS[typed.estimator] + f"; type {m} of a {typed.n_types}-type mixture", cov, cov_robust, typed.loglik,
        int(round(counts.sum())), int(sum(typed.iterations.values())), typed.converged, np.nan, typed.type_policy(m),
        counts, typed.seconds, space.features[block][:, :, cols], space.offset[block], kernel, space.gamma,
        None, iterations=dict(typed.iterations), convergence=typed.convergence)

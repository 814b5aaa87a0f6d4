r"""The out-of-core tabular path of :func:`genpqr.scale.fit_parquet` (``q_model="exact"``).

One pass sums :func:`genpqr.scale.tabular_chunk_counts` over chunks (or, in
:func:`genpqr.scale.fit_dask`, over the partitions of a Dask cluster); then
:func:`fit_counts`, from the counts alone (memory O(S K + non-zero n(s, a, s')), not rows):

* stage 1: the cell frequencies ``pi_hat(a|s) = n_choice(s, a) / n_choice(s)``
  (:class:`~genpqr.stage1.FrequencyClassifier` fitted on one row per visited (s, a) weighted by
  its count -- the same table as on the rows), or a prefitted classifier;
* ``P_hat(s'|s, a) = n(s, a, s') / n(s, a)`` (:func:`genpqr.stage2.kernel_from_counts`);
* the exact solve of ``(I - gamma P_mu) W = mu u - g`` (:func:`genpqr.stage2.recover_reward`),
  as ``GenPQR(q_model="exact").fit`` does on the rows.
"""

from __future__ import annotations

import numpy as np

from .. import stage2
from ..estimator import thin_transitions
from ._stream_stats import choice_summary, tabular_pass
from ._stream_steps import check_actions, make_diagnostics, prefitted_policy, resolve_clip

__all__ = ["fit_tabular", "fit_counts", "counts_of_source", "check_tabular"]


def counts_of_source(source, labels, n_states=None, progress=None):
    """:class:`genpqr.scale.TabularCounts` of a whole :class:`~genpqr.scale.ParquetSource`."""
    total = tabular_pass(source, labels, n_states, progress=progress)
    if total is None:
        raise ValueError(f"the Parquet dataset {str(source.path)!r} has no rows")
    return total if n_states is None else total.resized(int(n_states))


def check_tabular(est) -> None:
    if est.state_dim_ != 1:
        raise ValueError(f"q_model='exact' needs tabular states (one index column), got {est.state_dim_} columns")


def fit_tabular(est, source, progress=None):
    """Fill ``est`` (a cloned GenPQR after :func:`genpqr.scale.start`) from the counts of ``source``."""
    check_tabular(est)
    return fit_counts(est, counts_of_source(source, est.encoder_.labels, est.n_states, progress))


def fit_counts(est, counts):
    """Fill ``est`` (a cloned GenPQR after :func:`genpqr.scale.start`) from the summed
    :class:`~genpqr.scale.TabularCounts` of all rows (on ``est.n_states`` states when given)."""
    from ..stage2 import ExactStage2

    check_tabular(est)
    S, K = counts.n_states, est.n_actions_
    est.n_states_ = S
    choices = counts.choices.reshape(S, K)
    policy = _policy(est, choices, counts)
    est.policy_ = policy
    kernel, est.transition_counts_ = stage2.kernel_from_counts(counts.moves, counts.visits)
    if not stage2.is_estimated_spec(est.transition_model):  # "auto" keeps the counts out of core
        if callable(est.transition_model):
            raise ValueError("a callable transition_model needs the transitions in memory; pass a kernel out of core")
        kernel = stage2.as_kernel(est.transition_model, K)
        if kernel.n_states != S:
            raise ValueError(f"transition_model has {kernel.n_states} states but the data has {S}")
    grid = np.arange(S, dtype=np.float64)[:, None]
    with np.errstate(divide="ignore"):
        u = np.log(policy.proba(grid))
    summary = _summary(est, choices, counts.visits.reshape(S, K), counts)
    check_actions(est, summary)
    recovery = stage2.recover_reward(u, kernel, est.gamma_, est.normalization_, solver=est.solver)
    est.visited_states_ = choices.sum(axis=1) > 0
    est.stage2_ = ExactStage2(recovery, kernel, choices)
    info = recovery.solve
    thin = thin_transitions(choices, est.transition_counts_, est.encoder_.decode,
                            estimated=stage2.is_estimated_spec(est.transition_model))
    est.diagnostics_ = make_diagnostics(est, summary, dict(bellman_residuals=[info.residual],
                                                           n_iterations=info.iterations, converged=True,
                                                           solver=info.solver, n_states=int(S),
                                                           unvisited_states=np.flatnonzero(
                                                               ~est.visited_states_).tolist(), **thin))
    return est


def _policy(est, choices, counts):
    """Stage 1 from the choice counts (frequencies) or prefitted; the clip resolved from counts."""
    from ..data.validation import clone_learner as clone
    from ..stage1 import FittedPolicy, FrequencyClassifier, check_classifier

    S, K = choices.shape
    if est.policy_prefit:
        policy = prefitted_policy(est)
    else:
        model = est.policy_model if est.policy_model is not None else FrequencyClassifier(n_states=S)
        if not isinstance(model, FrequencyClassifier):
            raise ValueError("the out-of-core tabular path fits stage 1 from the counts: policy_model must be a "
                             f"FrequencyClassifier (or prefitted with policy_prefit=True), got {type(model).__name__}")
        check_classifier(model)
        pairs = np.flatnonzero(choices.ravel() > 0)
        X = (pairs // K).astype(np.float64)[:, None]
        fitted = clone(model).fit(X, pairs % K, sample_weight=choices.ravel()[pairs])
        policy = FittedPolicy([fitted], None, K, (0.0, 1.0))

    def summary():
        raw = policy.raw_proba(np.arange(S, dtype=np.float64)[:, None])
        visited = choices.sum(axis=1) > 0
        smallest = min(raw[visited].min(), raw[counts.live_next].min() if counts.live_next.any() else np.inf)
        observed = raw[choices > 0]
        positive = observed[observed > 0]
        zero = np.any(raw <= 0, axis=1)
        return (float(smallest), float(positive.min()) if positive.size else None,
                float(choices[zero].sum() / choices.sum()))

    return resolve_clip(policy, est.clip, summary)


def _summary(est, choices, visits, counts):
    """The diagnostics sums from the counts: one row per (s, a) and kind (with / without a next state)."""
    from ..stage1 import clip_proba

    S, K = choices.shape
    raw_grid = est.policy_.raw_proba(np.arange(S, dtype=np.float64)[:, None])
    mu_grid = est.normalization_.weights(np.arange(S, dtype=np.float64)[:, None], K,
                                         clip_proba(raw_grid, est.policy_.clip)[0])
    rows, weights, has_next = [], [], []
    for w, flag in ((visits.ravel(), True), ((choices - visits).ravel(), False)):
        pairs = np.flatnonzero(w > 0)
        rows.append(pairs)
        weights.append(w[pairs])
        has_next.append(np.full(pairs.size, flag))
    pairs, w, has_next = np.concatenate(rows), np.concatenate(weights), np.concatenate(has_next)
    s, a = pairs // K, pairs % K
    return choice_summary(raw_grid[s], a, mu_grid[s], est.policy_.clip, has_next=has_next, weights=w,
                          n_episodes=counts.n_episodes)

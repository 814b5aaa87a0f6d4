r"""Stage 2 of :class:`genpqr.GenPQR` for many actions (``encoding="action_features"``, ``n x K``
too large for dense arrays): nothing of shape ``(n, K)`` is built.

When the data's ``n x K`` float64 matrix would exceed ``genpqr.stage1._bilinear.DENSE_LIMIT_BYTES`` and stage 1 is one
model fitted on all rows (a prefit policy or ``cross_fit=None``), the finite path takes these steps:

* ``u = log pi_hat`` only at the taken actions and at ``mu``'s columns
  (``genpqr.stage1._blocked.log_policy_at``: a bilinear policy's log-partition in blocks, any other
  classifier on blocks of rows);
* ``mu`` at the next states as ``genpqr.stage2._column_weights.ColumnWeights``: **exact** for an anchor
  action or a state-dependent anchor (a few columns), an **unbiased sample** of
  ``MU_SAMPLES`` actions (importance weights, proposal uniform, drawn with ``random_state``)
  for mean-zero (``mu = 1/K``) and behaviour (``mu = pi``) weights; the mean per-row standard
  error of the sampled ``next_reward`` is ``diagnostics_.mu_sum_standard_error``;
* the reward read off at the pairs asked (``LargeStage2.reward_at``), ``r(s, a) = Q(s, a) -
  (mu Q)(s) + g(s)`` with ``Q = u - g + gamma f`` (continuation) from ``u`` and ``f`` at ``a`` and
  at ``mu``'s columns.

Diagnostics that need every action (``max_mu_over_pi`` and ``coverage_share`` under a sampled
``mu``, ``fraction_floored``) are computed where they are cheap and NaN otherwise.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..data._validation import seed_from, short_list
from ..stage1._bilinear import DENSE_LIMIT_BYTES
from ..stage1._blocked import log_policy_at
from ..stage2._column_weights import ColumnWeights, column_mu_sum, sample_columns
from ..stage2._stages import SampleStage2
from ._diagnostic_checks import COVERAGE_LIMIT, emit, failed_diagnostics
from ._diagnostics import Diagnostics
from ._options import fqe_for_fit, fqe_spec, q_model_kind

__all__ = ["MU_SAMPLES", "EXACT_READ_PAIRS", "LargeStage2", "LargePath", "large_path_applies", "reference_columns",
           "behaviour_proposal"]

#: Actions drawn for a sampled mu-sum (mean-zero or behaviour weights over many actions).
MU_SAMPLES = 64
#: Reading the reward off at most this many (state, action) pairs ``n K``, a mean-zero or
#: behaviour mu-sum is exact (all K columns, in blocks); above it, sampled like the fit's.
EXACT_READ_PAIRS = 2 ** 22


def large_path_applies(est, data, norm, policy, max_bytes: int | None = None) -> bool:
    """Whether the finite path runs without (n, K) arrays: FQE with ``encoding="action_features"``,
    one stage-1 model (``policy``), a ``mu`` the columns can carry (a point mass, uniform or the
    behaviour) with a fixed offset, and ``n K`` floats over ``max_bytes`` (default
    ``genpqr.stage1._bilinear.DENSE_LIMIT_BYTES``, read at call time)."""
    max_bytes = DENSE_LIMIT_BYTES if max_bytes is None else max_bytes
    if q_model_kind(est.q_model) != "fqe" or fqe_spec(est.q_model).encoding != "action_features":
        return False
    if 8 * data.n * data.n_actions <= max_bytes or data.action_table is None:
        return False
    if policy.fold_of_row is not None or len(policy.models) != 1 or not norm.g.fixed():
        return False
    mu = norm.mu
    return mu.is_point_mass or mu.is_uniform or mu.needs_policy


def reference_columns(norm, policy, states, n_actions: int, n_samples: int | None = None, random_state=None,
                      max_bytes: int = DENSE_LIMIT_BYTES, proposal=None, exact_pairs: int = 0) -> ColumnWeights:
    """``mu(.|s)`` at ``states`` as ``genpqr.stage2._column_weights.ColumnWeights``: exact on a point mass's
    column(s) (:meth:`~genpqr.normalization.ActionWeights.point_columns`), on all K columns when
    ``n K <= exact_pairs``, else ``n_samples`` (default ``MU_SAMPLES``) draws from ``proposal``
    (K,) (default uniform) with importance weights."""
    n_samples = MU_SAMPLES if n_samples is None else n_samples
    mu, n, K = norm.mu, states.shape[0], int(n_actions)
    if mu.is_point_mass:
        return ColumnWeights(*mu.point_columns(states, K), K)
    if n * K <= exact_pairs:
        every = np.arange(K)
        values = np.exp(log_policy_at(policy, states, np.broadcast_to(every, (n, K)), max_bytes)) \
            if mu.needs_policy else np.full((n, K), 1.0 / K)
        return ColumnWeights(every, values, K)
    if mu.needs_policy:
        weight_fn = lambda c: np.exp(log_policy_at(policy, states, np.broadcast_to(c, (n, c.size)), max_bytes))
    else:
        weight_fn = lambda c: np.full((n, c.size), 1.0 / K)
    return sample_columns(weight_fn, n, K, n_samples, proposal=proposal, random_state=random_state)


def behaviour_proposal(norm, data, floor: float = 0.1):
    """The proposal of a sampled ``mu = pi``: the data's action frequencies mixed with a uniform
    ``floor`` (``(1 - floor) freq + floor / K``; close to ``pi``'s marginal, so the importance
    weights stay moderate); None (uniform) for other weights."""
    if not getattr(norm.mu, "needs_policy", False):
        return None
    freq = data.action_counts() / data.n
    return (1.0 - floor) * freq + floor / data.n_actions


def _check_large_support(norm, data, columns, sampled):
    counts = data.action_counts()
    needed = np.flatnonzero(counts == 0) if sampled else np.unique(columns)[counts[np.unique(columns)] == 0]
    if needed.size:
        what = "anchor action" if norm.mu.is_point_mass else "action"
        raise ValueError(f"the normalization ({norm.describe()}) puts weight on {what}(s) "
                         f"{short_list(data.encoder.decode(needed))} that never occur in the data (no observed choice "
                         f"takes them); the data cannot support this normalization; normalize on taken actions")


class LargePath:
    """Stage 2 of the finite path without (n, K) arrays (a :class:`genpqr.GenPQR`'s
    ``estimator``: read, never written); blocks of at most ``max_bytes`` (default
    ``genpqr.stage1._bilinear.DENSE_LIMIT_BYTES``)."""

    def __init__(self, estimator, max_bytes: int | None = None):
        self.est = estimator
        self.max_bytes = DENSE_LIMIT_BYTES if max_bytes is None else max_bytes

    def solve(self, state, norm):
        """``state`` (after stage 1) with ``normalization``, ``stage2`` (a :class:`LargeStage2`)
        and ``diagnostics`` under the bound normalization ``norm``."""
        est, max_bytes, data, policy = self.est, self.max_bytes, state.training_data, state.policy
        trans, rows, K = data.with_next(), data.next_observed, data.n_actions
        seed = seed_from(est.random_state)
        anchored = norm.mu.is_point_mass
        codes = data.actions
        if anchored:  # u at the row's anchor too (diagnostics), from the same log-partition
            w = reference_columns(norm, policy, data.states, K, max_bytes=max_bytes)
            codes = np.column_stack([data.actions, w.columns[np.argmax(w.values, axis=1)]])
        u_both, clipped = log_policy_at(policy, data.states, codes, max_bytes, return_clipped=True)
        u_taken, clipped = (u_both[:, 0], clipped[:, 0]) if anchored else (u_both, clipped)
        next_w = reference_columns(norm, policy, trans.next_states, K, random_state=seed, max_bytes=max_bytes,
                                   proposal=behaviour_proposal(norm, data))
        _check_large_support(norm, data, next_w.columns, next_w.sampled)
        g_rows, g_next = norm.g(trans.states), norm.g(trans.next_states)
        u_next = log_policy_at(policy, trans.next_states, np.broadcast_to(next_w.columns, next_w.values.shape),
                               max_bytes)
        terms = next_w.values * (u_next - g_next[:, None])
        next_reward = terms.sum(axis=1)
        fqe = fqe_for_fit(est.q_model, random_state=est.random_state, progress=est.progress)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # re-raised below with context
            fqe.fit(trans.states, trans.actions, trans.next_states, trans.continues, u_taken[rows] - g_rows, next_w,
                    state.gamma, groups=trans.episode_ids, next_reward=next_reward,
                    action_features=np.asarray(data.action_table.features))
        stage2 = LargeStage2(fqe, norm, policy, norm.g, K, max_bytes=max_bytes, random_state=seed,
                             proposal=behaviour_proposal(norm, data))
        se = float("nan")
        if next_w.sampled and next_w.columns.size > 1:
            m = next_w.columns.size
            se = float(np.mean(np.sqrt(np.maximum((terms ** 2).sum(1) - next_reward ** 2 / m, 0) * m / (m - 1))))
        anchor = (codes[:, 1], u_both[:, 1]) if anchored else None
        state = state.replace(normalization=norm, stage2=stage2, tabular=None)
        return state.replace(diagnostics=self._diagnostics(state, u_taken, clipped, se, anchor))

    def _diagnostics(self, state, u_taken, clipped, se, anchor):
        """The fit's diagnostics from ``u`` at the taken actions and, for an anchor, ``anchor =
        (the row's anchor code, u there)``; ``max_mu_over_pi`` and ``coverage_share`` NaN otherwise."""
        data, policy, fqe = state.training_data, state.policy, state.stage2.fqe
        hist, spec = fqe.history_, fqe_spec(self.est.q_model)
        ratio = coverage = float("nan")
        support = int(data.n)  # a sampled mu (uniform or pi) weighs every action
        if anchor is not None:
            inv = np.exp(-anchor[1])  # mu / pi on the row's anchor
            ratio, coverage = float(inv.max()), float(np.mean(inv > COVERAGE_LIMIT))
            support = int(np.sum(anchor[0] == data.actions))
        diag = Diagnostics(
            n_transitions=data.n, n_episodes=data.n_episodes,
            action_counts=dict(zip(data.action_labels.tolist(), data.action_counts().tolist())),
            support_count=support, policy_log_loss=float(-np.mean(u_taken)),
            policy_log_loss_kind="out-of-fold" if policy.cross_fitted else "in-sample",
            fraction_clipped=float(np.mean(clipped)), fraction_floored=float("nan"),
            clip=tuple(float(c) for c in policy.clip), clip_rule=policy.clip_rule,
            max_mu_over_pi=ratio, coverage_share=coverage, n_last_choices=data.n_choice_only,
            n_never_taken=int(np.sum(~data.taken_actions())), bellman_residuals=list(hist.bellman_residual),
            target_changes=list(hist.target_change), n_iterations=fqe.n_iter_, converged=bool(fqe.converged_),
            solver="fqe", mu_sum_standard_error=se)
        failures = failed_diagnostics(diag, normalization=state.normalization.describe(), clip=policy.clip,
                                      min_support=self.est.min_support, tol=spec.tol,
                                      early_stopping=bool(spec.validation_fraction), max_iterations=spec.n_iterations)
        diag.warnings = emit(failures, stacklevel=7)
        return diag


class LargeStage2(SampleStage2):
    """A ``genpqr.stage2._stages.SampleStage2`` that also reads the reward off at given pairs
    without (n, K) arrays (``LargeStage2.reward_at``)."""

    def __init__(self, fqe, normalization, policy, g_fn, n_actions, max_bytes=DENSE_LIMIT_BYTES,
                 random_state=None, proposal=None):
        super().__init__(fqe, normalization, policy, g_fn, n_actions)
        self.max_bytes, self.random_state, self.proposal = max_bytes, random_state, proposal

    def reward_at(self, states, codes) -> np.ndarray:
        """``r(s_i, a_i) = Q(s_i, a_i) - (mu Q)(s_i) + g(s_i)``, shape (n,), from ``u`` and the
        Q-model at ``a_i`` and at ``mu``'s columns (exact for an anchor, and for mean-zero or
        behaviour weights up to :data:`EXACT_READ_PAIRS` pairs; above, ``MU_SAMPLES`` draws
        seeded by the fit's ``random_state``)."""
        codes = np.asarray(codes, dtype=np.int64)
        n = states.shape[0]
        if codes.shape != (n,):
            raise ValueError(f"actions has {codes.shape[0]} entries but states has {n} rows")
        w = reference_columns(self.normalization, self.policy, states, self.n_actions, random_state=self.random_state,
                              max_bytes=self.max_bytes, proposal=self.proposal,
                              exact_pairs=EXACT_READ_PAIRS)
        model, g = self.fqe.model_, self.g(states)
        q_at, mu_q = model.predict_q_at(states, codes), column_mu_sum(model, states, w, model.block_size)
        if getattr(self.fqe, "continuation_", False):
            u = log_policy_at(self.policy, states, np.column_stack([codes, np.broadcast_to(w.columns, w.values.shape)]),
                              self.max_bytes)
            gamma = self.fqe.gamma_
            q_at = u[:, 0] - g + gamma * q_at
            mu_q = w.dot(u[:, 1:] - g[:, None]) + gamma * mu_q
        return q_at - mu_q + g

r"""Neural fitted Q evaluation streamed from disk (the FQE path of
:func:`genpqr.scale.fit_parquet`).

Stage 1 is the closed-form path's (a prefitted policy, or a classifier on the bounded random
sample; the clip bounds given or the auto rule from one pass). Stage 2 runs Bellman
iteration ``k = 1, 2, ...`` as one pass over the chunks: a frozen copy (``copy.deepcopy``) of
the model after iteration ``k - 1`` (``Q_0 = 0``) gives each chunk's targets
``y_k = u - g + gamma * continues * sum_a' mu(a'|s') Q_{k-1}(s', a')``
(:func:`genpqr.scale.bellman_chunk`), and the live model's ``fit_q`` is called on that
chunk alone. A model that keeps its weights and optimizer state across calls (e.g.
:class:`genpqr.models.qnetwork.DuelingQNetwork`) so runs mini-batch SGD over the whole dataset,
one epoch-sweep per iteration. Memory: one chunk plus three copies of the model (live, frozen
``Q_{k-1}``, frozen ``Q_{k-2}`` for the target change).

The diagnostics are FQE's: pass ``k + 1`` evaluates ``Q_k`` (its Bellman residual
``rms(Q_k(s, a) - y_{k+1})`` and target change ``max |y_{k+1} - y_k|``, the mean squared change
in ``mean_square_changes_``), so ``n_iterations`` fits take ``n_iterations + 1`` passes (the last
fits nothing). With ``tol``, iteration stops at the first ``Q_k`` whose target change is
``<= tol`` and ``Q_k`` is returned, as :class:`genpqr.stage2.FQE` does.
"""

from __future__ import annotations

import copy

import numpy as np

from ..stage2 import BellmanTargets, FQEHistory, make_q_model, predict_at, q_from_continuation
from ._stream_stats import bellman_chunk, chunk_choice_summary

__all__ = ["StreamedFQE", "fqe_pass", "fit_streamed_fqe", "check_structure"]


class StreamedFQE:
    """The fitted stage 2 of the streamed FQE path: the Q-model and FQE's history (what
    :class:`genpqr.stage2.SampleStage2` and the diagnostics read).

    Attributes
    ----------
    model_ : the fitted native Q-model (wrapped by :func:`genpqr.stage2.make_q_model`)
    history_ : genpqr.stage2.FQEHistory
    mean_square_changes_ : list of float
        Per iteration, the mean over rows of ``(y_{k+1} - y_k)^2``.
    n_iter_ : int
    converged_ : bool
    solver_name_ : str
    """

    solver_name_ = "fqe (out of core)"

    def __init__(self, model, history, mean_square_changes, converged, continuation=False, gamma=None):
        self.model_, self.history_, self.mean_square_changes_ = model, history, list(mean_square_changes)
        self.n_iter_, self.converged_ = len(history.bellman_residual), bool(converged)
        self.continuation_, self.gamma_ = bool(continuation), gamma

    def predict_q(self, states, base=None) -> np.ndarray:
        """``Q(s, .)``, shape (n, K) (continuation: ``base + gamma f`` with ``base = u(s, .) - g(s)``)."""
        from ..data.validation import as_float_array

        out = self.model_.predict_q(as_float_array(states, "states", ndim=2, allow_1d_as_column=True))
        return q_from_continuation(out, base, self.gamma_) if self.continuation_ else out


def _bellman(problem, continuation: bool) -> BellmanTargets:
    """The chunk's targets of the regressed quantity (Q, or ``f = P mu Q`` with ``continuation``)."""
    return BellmanTargets(problem.reward, problem.continues, problem.next_mu,
                          problem.next_reward if continuation else None, problem.gamma)


def _targets(bellman: BellmanTargets, next_states, model):
    """The targets from ``model`` (None: ``Q = 0`` / ``f = 0``)."""
    return bellman.first() if model is None else bellman.targets(model, next_states)


def fqe_pass(source, labels, policy, normalization, gamma, live, previous, before, n_actions, *, fit=True,
             summarize=False, progress=None, desc="FQE", continuation=False):
    """One Bellman iteration over ``source``: per chunk, the targets from the frozen ``previous``
    model (None: ``Q = 0``), ``live.fit_q`` on them (when ``fit``), and the evaluation sums of
    ``previous`` (with ``before``, the model one iteration older, for the target change).
    ``continuation``: the models regress ``f = P mu Q``; the sums are on the scale of Q
    (``gamma`` times those of f).

    Returns ``(sums, summary)``: ``sums = [rows, sum (Q_prev(s,a) - y)^2, sum (y - y_old)^2,
    max |y - y_old|]`` and the :class:`~genpqr.scale.ChoiceSummary` (when ``summarize``).
    """
    sums, summary = [0, 0.0, 0.0, 0.0], None
    for chunk in source.chunks(labels, progress, desc):
        raw = policy.raw_proba(chunk.states)
        if summarize:
            part = chunk_choice_summary(chunk, raw, policy, normalization)
            summary = part if summary is None else summary + part
        problem = bellman_chunk(chunk, policy, normalization, normalization.g, gamma, raw=raw)
        if problem is None:
            continue
        bellman = _bellman(problem, continuation)
        y = _targets(bellman, problem.next_states, previous)
        if previous is not None:
            diff = bellman.q_scale(y - _targets(bellman, problem.next_states, before))
            resid = bellman.q_scale(predict_at(previous, problem.states, problem.actions) - y)
            sums = [sums[0] + problem.n, sums[1] + float(resid @ resid), sums[2] + float(diff @ diff),
                    max(sums[3], float(np.max(np.abs(diff))))]
        if fit:
            live.fit_q(problem.states, problem.actions, y, n_actions)
    return sums, summary


def fit_streamed_fqe(est, source, policy, progress=None):
    """Stage 2 by streamed FQE: returns ``(StreamedFQE, ChoiceSummary)``; ``est`` holds the
    bound normalization, ``gamma_``, ``n_actions_``, ``n_iterations`` and ``tol``."""
    from tqdm.auto import tqdm

    from ._stream_steps import check_actions

    n_iter, K, labels = _check_iterations(est.n_iterations), est.n_actions_, est.encoder_.labels
    continuation = check_structure(est.structure)
    live = make_q_model(est.q_model, "native", K)
    previous = before = summary = None
    history, mean_square, converged = FQEHistory(), [], False
    bar = tqdm(range(1, n_iter + 2), desc="FQE (out of core)", leave=False,
               disable=(None if progress is None else not progress))
    for k in bar:
        sums, part = fqe_pass(source, labels, policy, est.normalization_, est.gamma_, live, previous, before, K,
                              fit=k <= n_iter, summarize=k == 1, progress=progress, desc=f"FQE iteration {k}",
                              continuation=continuation)
        if k == 1:
            summary = _first_summary(est, policy, part, check_actions)
        elif sums[0]:
            history.bellman_residual.append(float(np.sqrt(sums[1] / sums[0])))
            history.target_change.append(sums[3])
            mean_square.append(sums[2] / sums[0])
            bar.set_postfix(change=f"{sums[3]:.2e}")
            if est.tol is not None and sums[3] <= est.tol:
                converged = True
                break
        before, previous = previous, copy.deepcopy(live)
    return StreamedFQE(previous, history, mean_square, converged, continuation, est.gamma_), summary


def check_structure(structure) -> bool:
    """``structure="continuation"`` (regress ``P mu Q``) or ``"direct"`` (regress Q)."""
    if structure not in ("continuation", "direct"):
        raise ValueError(f"structure must be 'continuation' or 'direct', got {structure!r}")
    return structure == "continuation"


def _first_summary(est, policy, summary, check_actions):
    if summary is None:
        raise ValueError("the Parquet dataset has no rows")
    est.policy_ = policy
    check_actions(est, summary)
    if summary.n_choice_only == summary.n:
        raise ValueError("the data holds no complete transition (every episode is a single choice)")
    return summary


def _check_iterations(n_iterations) -> int:
    if isinstance(n_iterations, bool) or not isinstance(n_iterations, (int, np.integer)) or n_iterations < 1:
        raise ValueError(f"n_iterations must be a positive int, got {n_iterations!r}")
    return int(n_iterations)

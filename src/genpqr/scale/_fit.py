r"""Out-of-core GenPQR fits from a Parquet dataset (:func:`fit_parquet`).

Memory stays bounded whatever the row count: one chunk (:class:`genpqr.scale.ParquetSource`)
plus the sufficient statistics of stage 2.

* **Tabular path** (``q_model="exact"``): one pass accumulates the choice counts ``n(s, a)``
  and the transition counts ``n(s, a, s')`` (sparse, ``genpqr.scale._statistics.tabular_chunk_counts``);
  the frequency first stage is read off the counts and the Bellman equation solved exactly
  (:func:`genpqr.stage2.recover_reward`). Memory: O(S K + non-zero transitions), not rows.
  Equal to the in-memory ``GenPQR(q_model="exact").fit`` (to rounding).
* **Closed-form path** (``q_model="lstd"`` or a :class:`genpqr.stage2.LSTDQ`): stage 1 is fitted
  on a bounded uniform random sample of the choices (``sample_rows`` rows, Bernoulli
  selection per row with probability ``sample_rows / n`` seeded by the estimator's
  ``random_state``; every row when the dataset is no larger); the feature map of stage 2 is
  fitted on the sample's complete transitions; with ``clip="auto"`` one pass reduces the
  auto-clip rule's three numbers over all rows; a last pass accumulates the LSTD statistics
  (``LSTDQ.partial_fit``) and the diagnostics sums, then one solve. With a prefitted policy
  (``policy_prefit=True``) and a sample holding every row it equals the in-memory fit with
  the same policy (to rounding).

* **Streamed FQE path** (``q_model`` a native Q-model with ``fit_q`` / ``predict_q``, e.g.
  :class:`genpqr.models.DuelingQNetwork`, bare or in a :class:`genpqr.stage2.FQE`
  holding ``n_iterations``, ``tol`` and ``structure``): stage 1 as in the closed-form path; then
  each of ``n_iterations`` Bellman iterations is one pass over the chunks (``fqe_pass``),
  each chunk's targets computed with a frozen copy (``copy.deepcopy``) of the previous
  iteration's model (``Q_0 = 0``) and ``fit_q`` called on that chunk alone (mini-batch SGD over
  the dataset for a model that keeps its optimizer state), plus one last pass for the
  diagnostics. Memory: one chunk plus three copies of the model (live, frozen ``Q_{k-1}``, frozen
  ``Q_{k-2}`` for the target change). With one chunk it equals the in-memory FQE fit with the
  same prefitted policy. Pass ``k + 1`` evaluates ``Q_k`` (its Bellman residual ``rms(Q_k(s, a)
  - y_{k+1})`` and target change ``max |y_{k+1} - y_k|``, the mean squared change in
  ``mean_square_changes_``), so ``n_iterations`` fits take ``n_iterations + 1`` passes (the last
  fits nothing); with ``tol``, iteration stops at the first ``Q_k`` whose target change is
  ``<= tol``, as :class:`genpqr.stage2.FQE` does.

How: :func:`fit_parquet` passes a ``StreamedFit`` (the source and the sampling settings) to
``GenPQR.fit``, which runs its ``StreamedFit.fit_state``: the passes of the statistics
module, then the steps on the summed statistics below (``start``, ``fit_counts``,
``finish_closed_form``, ``finish_fqe``), each returning the estimator's
:class:`~genpqr.estimator.FittedState`; :func:`genpqr.scale.fit_dask` runs the same passes per
partition on a Dask cluster and ends in the same steps.

The result is an ordinary fitted :class:`genpqr.GenPQR` without training data (like a model
saved with ``include_data=False``): it predicts, gives ``reward_table`` (tabular path),
``summary``, and saves / loads; ``renormalize`` and bootstraps need the in-memory fit.
Not supported out of core (clear errors): ``cross_fit``, FQE regressors without ``fit_q`` /
``predict_q`` (sklearn regressors), ``validation_fraction`` with streamed FQE, normalizations
whose ``g`` is estimated from data (``behavior``-type outcome or value offsets), callable
``transition_model``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from ..data._progress import bar_width
from ..data._spaces import FiniteActions
from ..data._validation import check_gamma, clone_learner as clone
from ..estimator import FittedState
from ..estimator._state import TabularState
from ..estimator._options import fqe_spec, q_model_kind
from ..estimator._diagnostic_checks import thin_transitions
from .. import stage2
from ..stage2._kernels import as_kernel
from ..stage2._stages import ExactStage2
from ..stage2._tabular import kernel_from_counts
from ..stage2._transition_spec import is_estimated_spec
from ._scan import DEFAULT_CHUNK_ROWS, as_source
from ._statistics import (RowDraws, choice_summary, clip_pass, fqe_pass, lstd_pass, sample_pass, tabular_pass)

__all__ = ["fit_parquet", "StreamedFit", "DEFAULT_SAMPLE_ROWS", "Start", "fit_counts", "StreamedFQE"]

#: Stage-1 sample size of the closed-form path by default.
DEFAULT_SAMPLE_ROWS = 200_000


def fit_parquet(estimator, path, *, episode: str | None = None, time: str | None = None, state=None,
                action: str | None = None, terminated: str | None = None,
                truncated: str | None = None, action_labels=None, chunk_rows: int = DEFAULT_CHUNK_ROWS,
                sample_rows: int = DEFAULT_SAMPLE_ROWS, keep_last: bool = True, time_gaps: str = "error",
                progress=None):
    """Fit a :class:`genpqr.GenPQR` on a long-format Parquet dataset, chunk by chunk.

    Parameters
    ----------
    estimator : GenPQR
        Its parameters configure the fit (a new estimator is returned; the argument is not modified).
        ``q_model="exact"`` (tabular path), ``"lstd"`` / :class:`~genpqr.stage2.LSTDQ` (closed form)
        or a native Q-model with ``fit_q(states, actions, targets, n_actions)`` and
        ``predict_q(states)``, bare or in a :class:`~genpqr.stage2.FQE` (streamed FQE:
        ``n_iterations`` passes, ``fit_q`` on one chunk at a time, ``tol`` stops early as in FQE).
    path : str, Path or genpqr.scale.ParquetSource
        A Parquet file or a folder of Parquet files, sorted by ``episode``
        (:mod:`genpqr.scale` states the requirement; a violation raises ``ValueError``); or a
        source (then the column names, ``chunk_rows``, ``keep_last`` and ``time_gaps`` are its
        own).
    episode, time, state, action, terminated, truncated : column names
        As in :func:`genpqr.data.from_pandas` (required unless ``path`` is a source).
    action_labels : sequence, optional
        The full label set in code order (default: the sorted labels found by the validation
        pass, :meth:`genpqr.scale.ParquetSource.scan`, which runs first unless the source has
        already adopted one: it checks every chunk as :func:`genpqr.data.from_pandas` would
        and sets the whole data's time-gap rule).
    chunk_rows : int
        Rows per chunk.
    sample_rows : int
        Closed-form and FQE paths: size of the stage-1 random sample.
    keep_last, time_gaps : as in :func:`genpqr.data.from_pandas`.
    progress : bool or None
        tqdm bars in rows/s, and one over the FQE iterations (None: only on a terminal).

    Returns
    -------
    GenPQR
        Fitted (without ``training_data_``).
    """
    est = clone_estimator(estimator, fqe=True)
    check_sample_rows(sample_rows)
    source = as_source(path, episode=episode, time=time, state=state, action=action, terminated=terminated,
                       truncated=truncated, chunk_rows=chunk_rows, keep_last=keep_last, time_gaps=time_gaps)
    return est.fit(StreamedFit(source, action_labels, sample_rows=sample_rows, progress=progress))


class StreamedFit:
    """The out-of-core fit of a :class:`genpqr.GenPQR` on one machine: ``GenPQR(...).fit(
    StreamedFit(source))`` runs ``fit_state`` (what :func:`fit_parquet` does).

    Parameters
    ----------
    source : genpqr.scale.ParquetSource
    action_labels : sequence, optional
        The full label set in code order (default: the validation pass's).
    sample_rows : int
        Size of the stage-1 random sample (closed-form and FQE paths).
    progress : bool or None
    """

    def __init__(self, source, action_labels=None, *, sample_rows: int = DEFAULT_SAMPLE_ROWS, progress=None):
        self.source, self.action_labels, self.sample_rows, self.progress = source, action_labels, sample_rows, progress

    def fit_state(self, est) -> FittedState:
        """The fitted state of ``est``'s parameters on the source (``est`` is read, not written)."""
        source, progress = self.source, self.progress
        kind = check_out_of_core(est, fqe=True)
        check_sample_rows(self.sample_rows)
        labels = None if self.action_labels is None else np.asarray(self.action_labels)
        if source.expected_step is None or labels is None:
            scan = source.scan(progress)
            source.adopt(scan)
            labels = scan.labels if labels is None else labels
        begun = start(est, FiniteActions(labels), len(source.state))
        if kind == "exact":
            check_tabular(begun)
            return fit_counts(est, begun, _counts_of_source(source, labels, est.n_states, progress))
        return self._sampled(est, begun, kind == "fqe")

    def _sampled(self, est, begun, fqe: bool) -> FittedState:
        """Stage 1 on the random sample, then stage 2 by LSTD statistics or streamed FQE (``fqe``)."""
        source, progress, labels = self.source, self.progress, begun.encoder.labels
        sample = None
        if not (fqe and est.policy_prefit):  # streamed FQE uses the sample only to fit stage 1
            probability = min(1.0, self.sample_rows / max(source.count_rows(), 1))
            sample = sample_pass(source, labels, probability, RowDraws(est.random_state), progress=progress)
            if sample is None:
                raise ValueError(f"the Parquet dataset {str(source.path)!r} has no rows")
        policy = sample_policy(est, begun, sample)
        resolve_clip(policy, est.clip, lambda: clip_pass(source, labels, policy, progress=progress).rule_inputs())
        if fqe:
            fitted, summary = fit_streamed_fqe(est, begun, source, policy, progress)
            return finish_fqe(est, begun, fitted, policy, summary)
        q_model = closed_form_model(est, begun, sample, policy)
        part = lstd_pass(source, labels, q_model, policy, begun.normalization, begun.gamma, progress=progress)
        return finish_closed_form(est, begun, q_model, policy, part.summary)


def check_sample_rows(sample_rows) -> None:
    if isinstance(sample_rows, bool) or not (isinstance(sample_rows, (int, np.integer)) and sample_rows > 0):
        raise ValueError(f"sample_rows must be a positive int, got {sample_rows!r}")


# ============================================================================ the steps every fit shares
@dataclass(frozen=True)
class Start:
    """What an out-of-core fit fixes first (``start``): the checked discount, the action
    codes, the state columns and the normalization bound to the codes."""

    gamma: float
    encoder: FiniteActions
    state_dim: int
    normalization: object

    @property
    def n_actions(self) -> int:
        return self.encoder.n_actions

    def state(self, policy, stage2_fit, diagnostics, tabular=None) -> FittedState:
        """The estimator's fitted state (no training data: an out-of-core fit keeps none)."""
        return FittedState(gamma=self.gamma, action_space=self.encoder, state_dim=self.state_dim,
                           normalization=self.normalization, policy=policy, stage2=stage2_fit,
                           diagnostics=diagnostics, tabular=tabular)


def clone_estimator(estimator, fqe: bool = False):
    """A new, unfitted GenPQR with the same parameter objects (as ``fit`` uses them); TypeError
    unless ``estimator`` is a GenPQR. ``fqe``: a native Q-model is allowed (:func:`path_kind`)."""
    from ..estimator import GenPQR

    if not isinstance(estimator, GenPQR):
        raise TypeError(f"estimator must be a genpqr.GenPQR, got {type(estimator).__name__}")
    est = type(estimator)(**estimator.get_params(deep=False))
    check_out_of_core(est, fqe)
    return est


def check_out_of_core(est, fqe: bool = False) -> str:
    """:func:`path_kind` of ``est``, refusing ``cross_fit`` (it needs every row in memory)."""
    kind = path_kind(est, fqe)
    if est.cross_fit:
        raise ValueError("cross_fit is not supported out of core (it needs every row in memory); set cross_fit=None")
    return kind


def path_kind(est, fqe: bool = False) -> str:
    """``"exact"`` or ``"lstd"`` (a closed-form model that accumulates: ``init_features`` and
    ``partial_fit``, e.g. :class:`~genpqr.stage2.LSTDQ`) from ``est.q_model``; with ``fqe``,
    ``"fqe"`` for a native Q-model (``fit_q`` and ``predict_q``, bare or in an FQE: streamed
    FQE); ValueError for any other regressor."""
    q, kind = est.q_model, q_model_kind(est.q_model)
    if kind == "exact":
        return "exact"
    if kind == "closed_form" and (isinstance(q, str) or (hasattr(q, "partial_fit") and hasattr(q, "init_features"))):
        return "lstd"
    spec = fqe_spec(q) if kind == "fqe" else None
    native = spec is not None and hasattr(spec.regressor, "fit_q") and hasattr(spec.regressor, "predict_q")
    if fqe and native:
        if spec.validation_fraction:
            raise ValueError("validation_fraction (early stopping on held-out episodes) is not supported by the "
                             "streamed FQE path; set FQE(validation_fraction=None)")
        return "fqe"
    if native:
        raise ValueError(f"q_model={q!r} (a native Q-model, streamed FQE) is supported by genpqr.scale."
                         "fit_parquet only; use q_model='exact' or 'lstd' / an LSTDQ here")
    also = " or a native Q-model with fit_q/predict_q (streamed FQE)" if fqe else ""
    raise ValueError(f"an out-of-core fit needs q_model='exact' (tabular) or 'lstd' / an LSTDQ (closed form){also}; "
                     f"got q_model={q!r}, which has no fit_q/predict_q: FQE regressors need the data in memory")


def start(est, encoder, state_dim) -> Start:
    """The discount, the action codes and the normalization bound to them (checked)."""
    from ..normalization import mean_zero

    gamma = check_gamma(est.gamma)
    norm = (est.normalization if est.normalization is not None else mean_zero()).bind(encoder.encode)
    if not norm.g.fixed():
        raise ValueError(f"the normalization ({norm.describe()}) estimates g from the data by a regression, which "
                         "is not supported out of core; give g as a constant or a function of the state")
    if est.policy_prefit and (est.policy_model is None):
        raise ValueError("policy_prefit=True needs a fitted policy_model")
    return Start(gamma, encoder, int(state_dim), norm)


def resolve_clip(policy, clip, summary_fn):
    """Set ``policy.clip`` / ``clip_rule``: the given bounds, or the auto rule from
    ``summary_fn() -> (smallest, smallest_observed, zero_rows)`` (called only for ``"auto"``)."""
    from ..stage1._clipping import auto_clip_from_summary
    from ..stage1._policy import check_clip, is_auto

    if not is_auto(clip):
        policy.clip, policy.clip_rule = check_clip(clip), ("given" if clip is not None else "none (no clip)")
    else:
        policy.clip, policy.clip_rule = auto_clip_from_summary(*summary_fn())
    return policy


def _prefitted_policy(est, begun):
    """Stage 1 of a ``policy_prefit=True`` estimator (clip unresolved)."""
    from types import SimpleNamespace

    from ..stage1._policy import prefit_policy

    # all prefit_policy reads without "auto"; streamed data carry no action table (refused out of core)
    shell = SimpleNamespace(n_actions=begun.n_actions, encoder=begun.encoder, action_table=None)
    return prefit_policy(est.policy_model, shell, clip=None)


def sample_policy(est, begun, sample):
    """Stage 1 of the closed-form path (clip unresolved): prefitted, or ``est.policy_model``
    (default: the in-memory fit's, ``genpqr.estimator._defaults.default_policy_model``) fitted on the
    random ``sample``."""
    from ..estimator._defaults import default_policy_model
    from ..stage1._policy import FittedPolicy, check_classifier

    if est.policy_prefit:
        return _prefitted_policy(est, begun)
    model = est.policy_model if est.policy_model is not None else default_policy_model(sample)[0]
    check_classifier(model)
    return FittedPolicy([clone(model).fit(sample.states, sample.actions)], None, begun.n_actions, (0.0, 1.0))


def closed_form_model(est, begun, sample, policy):
    """The stage-2 :class:`~genpqr.stage2.LSTDQ` with its feature map fitted on the sample's
    complete transitions (``init_features``), ready for ``partial_fit``."""
    from ..stage2 import LSTDQ
    from ._statistics import bellman_chunk

    q_model = LSTDQ(random_state=est.random_state) if isinstance(est.q_model, str) else clone(est.q_model)
    first = bellman_chunk(sample, policy, begun.normalization, begun.normalization.g, begun.gamma)
    if first is None:
        raise ValueError("the stage-1 sample holds no complete transition; raise sample_rows")
    return q_model.init_features(first)


def finish_closed_form(est, begun, q_model, policy, summary) -> FittedState:
    """Checks, the solve of the accumulated ``q_model``, and the fitted state."""
    from ..stage2._stages import SampleStage2

    check_actions(est, begun, summary)
    if getattr(q_model, "statistics_", None) is None:
        raise ValueError("the data holds no complete transition (every episode is a single choice)")
    q_model.solve()
    fitted = SampleStage2(q_model, begun.normalization, policy, begun.normalization.g, begun.n_actions)
    extra = dict(bellman_residuals=list(q_model.history_.bellman_residual), target_changes=[],
                 n_iterations=q_model.n_iter_, converged=True, solver="lstd (out of core)")
    return begun.state(policy, fitted, make_diagnostics(est, begun, policy, summary, extra))


def finish_fqe(est, begun, fqe, policy, summary) -> FittedState:
    """The fitted state of a streamed (or distributed) FQE: ``fqe`` a :class:`StreamedFQE`."""
    from ..stage2._stages import SampleStage2

    fitted = SampleStage2(fqe, begun.normalization, policy, begun.normalization.g, begun.n_actions)
    extra = dict(bellman_residuals=list(fqe.history_.bellman_residual),
                 target_changes=list(fqe.history_.target_change), n_iterations=fqe.n_iter_,
                 converged=fqe.converged_, solver=fqe.solver_name_)
    return begun.state(policy, fitted, make_diagnostics(est, begun, policy, summary, extra))


def check_actions(est, begun, summary):
    """The in-memory fit's checks: two actions; ``mu`` only on actions seen (with a next state)."""
    labels, norm = begun.encoder.labels, begun.normalization
    if begun.n_actions < 2 or np.count_nonzero(summary.action_counts) < 2:
        raise ValueError(f"the data has only one action ({labels[np.argmax(summary.action_counts)]!r}); a reward "
                         "cannot be identified from choices among one option")
    needed = np.flatnonzero((summary.mu_max > 0) & (summary.action_counts == 0))
    if needed.size:
        raise ValueError(f"the normalization ({norm.describe()}) puts weight on action(s) {labels[needed].tolist()} "
                         "that never occur in the data; the data cannot support this normalization")
    exact_given = q_model_kind(est.q_model) == "exact" and not is_estimated_spec(est.transition_model)
    needed = np.flatnonzero((summary.trans_mu_max > 0) & (summary.trans_action_counts == 0))
    if needed.size and summary.n_choice_only and not exact_given:
        raise ValueError(f"the normalization ({norm.describe()}) puts weight on action(s) {labels[needed].tolist()} "
                         "that never occur in the data with an observed next state, so P(.|s, a) cannot be "
                         "estimated for them; give a transition_model or another normalization")


def make_diagnostics(est, begun, policy, summary, extra):
    """GenPQR's :class:`~genpqr.estimator.Diagnostics` from a ``genpqr.scale._statistics.ChoiceSummary``
    and the stage-2 figures ``extra`` (warnings raised as by ``fit``)."""
    from ..estimator import Diagnostics
    from ..estimator._diagnostic_checks import emit, failed_diagnostics

    n = summary.n
    diag = Diagnostics(
        n_transitions=int(n), n_episodes=int(summary.n_episodes),
        action_counts=dict(zip(begun.encoder.labels.tolist(), [int(c) for c in summary.action_counts])),
        support_count=int(summary.support), policy_log_loss=summary.log_loss / n, policy_log_loss_kind="in-sample",
        fraction_clipped=summary.clipped / n, fraction_floored=summary.floored / n,
        clip=tuple(float(c) for c in policy.clip), clip_rule=policy.clip_rule,
        max_mu_over_pi=summary.max_mu_over_pi, coverage_share=summary.poorly_covered / n,
        n_last_choices=int(summary.n_choice_only), **extra)
    tol = fqe_spec(est.q_model).tol if q_model_kind(est.q_model) == "fqe" else None
    failures = failed_diagnostics(diag, normalization=begun.normalization.describe(), clip=policy.clip,
                                  min_support=est.min_support, tol=tol, early_stopping=False)
    diag.warnings = emit(failures, stacklevel=5)
    return diag


# ============================================================================ the tabular path
def _counts_of_source(source, labels, n_states=None, progress=None):
    """``genpqr.scale._statistics.TabularCounts`` of a whole :class:`~genpqr.scale.ParquetSource`."""
    total = tabular_pass(source, labels, n_states, progress=progress)
    if total is None:
        raise ValueError(f"the Parquet dataset {str(source.path)!r} has no rows")
    return total if n_states is None else total.resized(int(n_states))


def check_tabular(begun) -> None:
    if begun.state_dim != 1:
        raise ValueError(f"q_model='exact' needs tabular states (one index column), got {begun.state_dim} columns")


def fit_counts(est, begun, counts) -> FittedState:
    """The fitted state of the exact tabular path from the summed
    ``genpqr.scale._statistics.TabularCounts`` of all rows (on ``est.n_states`` states when given):
    stage 1 the cell frequencies (or prefitted), ``P_hat`` from the counts (or the given kernel),
    the exact solve of ``(I - gamma P_mu) W = mu u - g`` (:func:`genpqr.stage2.recover_reward`)."""
    check_tabular(begun)
    S, K = counts.n_states, begun.n_actions
    choices = counts.choices.reshape(S, K)
    policy = _count_policy(est, begun, choices, counts)
    kernel, transition_counts = kernel_from_counts(counts.moves, counts.visits)
    given = None
    if not is_estimated_spec(est.transition_model):  # "auto" keeps the counts out of core
        if callable(est.transition_model):
            raise ValueError("a callable transition_model needs the transitions in memory; pass a kernel out of core")
        given = est.transition_model
        kernel = as_kernel(given, K)
        if kernel.n_states != S:
            raise ValueError(f"transition_model has {kernel.n_states} states but the data has {S}")
    grid = np.arange(S, dtype=np.float64)[:, None]
    with np.errstate(divide="ignore"):
        u = np.log(policy.proba(grid))
    summary = _count_summary(begun, policy, choices, counts.visits.reshape(S, K), counts)
    check_actions(est, begun, summary)
    recovery = stage2.recover_reward(u, kernel, begun.gamma, begun.normalization, solver=est.solver)
    tables = TabularState(n_states=S, visited_states=choices.sum(axis=1) > 0, transition_counts=transition_counts,
                          transition_model=given)
    info = recovery.solve
    thin = thin_transitions(choices, transition_counts, begun.encoder.decode, estimated=given is None)
    extra = dict(bellman_residuals=[info.residual], target_changes=[], n_iterations=info.iterations, converged=True,
                 solver=info.solver, n_states=int(S), unvisited_states=np.flatnonzero(~tables.visited_states).tolist(),
                 **thin)
    diagnostics = make_diagnostics(est, begun, policy, summary, extra)
    return begun.state(policy, ExactStage2(recovery, kernel, choices), diagnostics, tables)


def _count_policy(est, begun, choices, counts):
    """Stage 1 from the choice counts (frequencies) or prefitted; the clip resolved from counts."""
    from ..stage1 import FrequencyClassifier
    from ..stage1._policy import FittedPolicy, check_classifier

    S, K = choices.shape
    if est.policy_prefit:
        policy = _prefitted_policy(est, begun)
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


def _count_summary(begun, policy, choices, visits, counts):
    """The diagnostics sums from the counts: one row per (s, a) and kind (with / without a next state)."""
    from ..stage1._policy import clip_proba

    S, K = choices.shape
    raw_grid = policy.raw_proba(np.arange(S, dtype=np.float64)[:, None])
    mu_grid = begun.normalization.weights(np.arange(S, dtype=np.float64)[:, None], K,
                                          clip_proba(raw_grid, policy.clip)[0])
    rows, weights, has_next = [], [], []
    for w, flag in ((visits.ravel(), True), ((choices - visits).ravel(), False)):
        pairs = np.flatnonzero(w > 0)
        rows.append(pairs)
        weights.append(w[pairs])
        has_next.append(np.full(pairs.size, flag))
    pairs, w, has_next = np.concatenate(rows), np.concatenate(weights), np.concatenate(has_next)
    s, a = pairs // K, pairs % K
    return choice_summary(raw_grid[s], a, mu_grid[s], policy.clip, has_next=has_next, weights=w,
                          n_episodes=counts.n_episodes)


# ============================================================================ streamed FQE
class StreamedFQE:
    """The fitted stage 2 of the streamed (and the distributed boosted) FQE path: the Q-model and
    FQE's history (what ``genpqr.stage2._stages.SampleStage2`` and the diagnostics read).

    Attributes
    ----------
    model_ : the fitted native Q-model (wrapped by ``genpqr.stage2._qmodels.make_q_model``)
    history_ : genpqr.stage2.FQEHistory
    mean_square_changes_ : list of float
        Per iteration, the mean over rows of ``(y_{k+1} - y_k)^2``.
    n_iter_ : int
    converged_ : bool
    solver_name_ : str
    """

    def __init__(self, model, history, mean_square_changes, converged, continuation=False, gamma=None,
                 solver_name="fqe (out of core)"):
        self.model_, self.history_, self.mean_square_changes_ = model, history, list(mean_square_changes)
        self.n_iter_, self.converged_ = len(history.bellman_residual), bool(converged)
        self.continuation_, self.gamma_, self.solver_name_ = bool(continuation), gamma, solver_name

    def predict_q(self, states, base=None) -> np.ndarray:
        """``Q(s, .)``, shape (n, K) (continuation: ``base + gamma f`` with ``base = u(s, .) - g(s)``)."""
        from ..data._validation import as_float_array
        from ..stage2._qmodels import q_from_continuation

        out = self.model_.predict_q(as_float_array(states, "states", ndim=2, allow_1d_as_column=True))
        return q_from_continuation(out, base, self.gamma_) if self.continuation_ else out


def fit_streamed_fqe(est, begun, source, policy, progress=None):
    """Stage 2 by streamed FQE: ``(StreamedFQE, ChoiceSummary)``, with ``n_iterations``, ``tol``
    and ``structure`` of ``est``'s FQE (``genpqr.estimator._options.fqe_spec``)."""
    from tqdm.auto import tqdm

    from ..stage2._qmodels import FQEHistory, make_q_model

    spec = fqe_spec(est.q_model)
    n_iter, K, labels = _check_iterations(spec.n_iterations), begun.n_actions, begun.encoder.labels
    continuation = check_structure(spec.structure)
    live = make_q_model(spec.regressor, "native", K)
    previous = before = summary = None
    history, mean_square, converged = FQEHistory(), [], False
    bar = tqdm(range(1, n_iter + 2), desc="FQE (out of core)", leave=False, ncols=bar_width(),
               disable=(None if progress is None else not progress))
    for k in bar:
        sums, part = fqe_pass(source, labels, policy, begun.normalization, begun.gamma, live, previous, before, K,
                              fit=k <= n_iter, summarize=k == 1, progress=progress, desc=f"FQE iteration {k}",
                              continuation=continuation)
        if k == 1:
            summary = _first_summary(est, begun, part)
        elif sums[0]:
            history.bellman_residual.append(float(np.sqrt(sums[1] / sums[0])))
            history.target_change.append(sums[3])
            mean_square.append(sums[2] / sums[0])
            bar.set_postfix(change=f"{sums[3]:.2e}")
            if spec.tol is not None and sums[3] <= spec.tol:
                converged = True
                break
        before, previous = previous, copy.deepcopy(live)
    return StreamedFQE(previous, history, mean_square, converged, continuation, begun.gamma), summary


def check_structure(structure) -> bool:
    """``structure="continuation"`` (regress ``P mu Q``) or ``"direct"`` (regress Q)."""
    if structure not in ("continuation", "direct"):
        raise ValueError(f"structure must be 'continuation' or 'direct', got {structure!r}")
    return structure == "continuation"


def _first_summary(est, begun, summary):
    if summary is None:
        raise ValueError("the Parquet dataset has no rows")
    check_actions(est, begun, summary)
    if summary.n_choice_only == summary.n:
        raise ValueError("the data holds no complete transition (every episode is a single choice)")
    return summary


def _check_iterations(n_iterations) -> int:
    if isinstance(n_iterations, bool) or not isinstance(n_iterations, (int, np.integer)) or n_iterations < 1:
        raise ValueError(f"n_iterations must be a positive int, got {n_iterations!r}")
    return int(n_iterations)

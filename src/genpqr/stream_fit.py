r"""Out-of-core GenPQR fits from a Parquet dataset (:func:`fit_parquet`).

Memory stays bounded whatever the row count: one chunk (:class:`genpqr.stream.ParquetSource`)
plus the sufficient statistics of stage 2.

* **Tabular path** (``q_model="exact"``): one pass accumulates the choice counts ``n(s, a)``
  and the transition counts ``n(s, a, s')`` (sparse, :func:`genpqr.stream.tabular_chunk_counts`);
  the frequency first stage is read off the counts and the Bellman equation solved exactly
  (:func:`genpqr.tabular.recover_reward`). Memory: O(S K + non-zero transitions), not rows.
  Equal to the in-memory ``GenPQR(q_model="exact").fit`` (to rounding).
* **Closed-form path** (``q_model="lstd"`` or a :class:`genpqr.lstd.LSTDQ`): stage 1 is fitted
  on a bounded uniform random sample of the choices (``sample_rows`` rows, Bernoulli
  selection per row with probability ``sample_rows / n`` seeded by the estimator's
  ``random_state``; every row when the dataset is no larger); the feature map of stage 2 is
  fitted on the sample's complete transitions; with ``clip="auto"`` one pass reduces the
  auto-clip rule's three numbers over all rows; a last pass accumulates the LSTD statistics
  (``LSTDQ.partial_fit``) and the diagnostics sums, then one solve. With a prefitted policy
  (``policy_prefit=True``) and a sample holding every row it equals the in-memory fit with
  the same policy (to rounding).

The result is an ordinary fitted :class:`genpqr.GenPQR` without training data (like a model
saved with ``include_data=False``): it predicts, gives ``reward_table`` (tabular path),
``summary``, and saves / loads; ``renormalize`` and bootstraps need the in-memory fit.
Not supported out of core (clear errors): ``cross_fit``, FQE regressors (``q_model`` other
than ``"exact"`` / ``"lstd"`` / ``LSTDQ``), normalizations whose ``g`` is estimated from
data (``behavior``-type outcome or value offsets), callable ``transition_model``.
"""

from __future__ import annotations

import numpy as np

from ._checks import clone_learner as clone
from .data import ActionEncoder
from .stream import DEFAULT_CHUNK_ROWS, ParquetSource, bellman_chunk, choice_summary, concatenate_chunks

__all__ = ["fit_parquet", "DEFAULT_SAMPLE_ROWS"]

#: Stage-1 sample size of the closed-form path by default.
DEFAULT_SAMPLE_ROWS = 200_000


def fit_parquet(estimator, path, *, episode: str, time: str, state, action: str, terminated: str | None = None,
                truncated: str | None = None, action_labels=None, chunk_rows: int = DEFAULT_CHUNK_ROWS,
                sample_rows: int = DEFAULT_SAMPLE_ROWS, keep_last: bool = True, time_gaps: str = "error",
                progress=None):
    """Fit a :class:`genpqr.GenPQR` on a long-format Parquet dataset, chunk by chunk.

    Parameters
    ----------
    estimator : GenPQR
        Its parameters configure the fit (a new estimator is returned; the argument is not modified).
        ``q_model="exact"`` (tabular path) or ``"lstd"`` / :class:`~genpqr.lstd.LSTDQ`.
    path : str or Path
        A Parquet file or a folder of Parquet files, sorted by ``episode``
        (:mod:`genpqr.stream` states the requirement; a violation raises ``ValueError``).
    episode, time, state, action, terminated, truncated : column names
        As in :func:`genpqr.data.from_pandas`.
    action_labels : sequence, optional
        The full label set in code order (default: sorted unique labels, one pass over the
        action column).
    chunk_rows : int
        Rows per chunk.
    sample_rows : int
        Closed-form path: size of the stage-1 random sample.
    keep_last, time_gaps : as in :func:`genpqr.data.from_pandas`.
    progress : bool or None
        tqdm bars in rows/s (None: only on a terminal).

    Returns
    -------
    GenPQR
        Fitted (without ``training_data_``).
    """
    from .estimator import GenPQR

    if not isinstance(estimator, GenPQR):
        raise TypeError(f"estimator must be a genpqr.GenPQR, got {type(estimator).__name__}")
    if not (isinstance(sample_rows, (int, np.integer)) and sample_rows > 0):
        raise ValueError(f"sample_rows must be a positive int, got {sample_rows!r}")
    est = type(estimator)(**estimator.get_params(deep=False))  # same parameter objects, as fit() uses them
    path_kind = _path_kind(est)
    if est.cross_fit:
        raise ValueError("cross_fit is not supported out of core (it needs every row in memory); set cross_fit=None")
    source = ParquetSource(path, episode=episode, time=time, state=state, action=action, terminated=terminated,
                           truncated=truncated, chunk_rows=chunk_rows, keep_last=keep_last, time_gaps=time_gaps)
    labels = source.action_labels(progress) if action_labels is None else np.asarray(action_labels)
    _start(est, ActionEncoder(labels), len(source.state))
    if path_kind == "exact":
        from .stream_tabular import fit_tabular

        return fit_tabular(est, source, progress)
    return _fit_closed_form(est, source, int(sample_rows), progress)


def _path_kind(est) -> str:
    from .lstd import LSTDQ

    q = est.q_model
    if isinstance(q, str) and q in ("exact", "lstd"):
        return q
    if isinstance(q, LSTDQ):
        return "lstd"
    raise ValueError(f"an out-of-core fit needs q_model='exact' (tabular) or 'lstd' / an LSTDQ (closed form); got "
                     f"{q!r}: FQE regressors need the data in memory")


def _start(est, encoder, state_dim):
    """The attributes every fit sets first; the normalization bound to the action codes."""
    from ._checks import check_gamma
    from .normalization import OutcomeOffset, ValueOffset, mean_zero

    est.gamma_ = check_gamma(est.gamma)
    est.encoder_, est.n_actions_, est.state_dim_ = encoder, encoder.n_actions, int(state_dim)
    norm = (est.normalization if est.normalization is not None else mean_zero()).bind(encoder.encode)
    if isinstance(norm.g, (OutcomeOffset, ValueOffset)):
        raise ValueError(f"the normalization ({norm.describe()}) estimates g from the data by a regression, which "
                         "is not supported out of core; give g as a constant or a function of the state")
    est.normalization_ = norm
    if est.policy_prefit and (est.policy_model is None):
        raise ValueError("policy_prefit=True needs a fitted policy_model")


def resolve_clip(policy, clip, summary_fn):
    """Set ``policy.clip`` / ``clip_rule``: the given bounds, or the auto rule from
    ``summary_fn() -> (smallest, smallest_observed, zero_rows)`` (called only for ``"auto"``)."""
    from .clipping import auto_clip_from_summary
    from .policy import _check_clip, _is_auto

    if not _is_auto(clip):
        policy.clip, policy.clip_rule = _check_clip(clip), ("given" if clip is not None else "none (no clip)")
    else:
        policy.clip, policy.clip_rule = auto_clip_from_summary(*summary_fn())
    return policy


def prefitted_policy(est):
    """Stage 1 of a ``policy_prefit=True`` estimator (clip unresolved)."""
    from types import SimpleNamespace

    from .policy import prefit_policy

    shell = SimpleNamespace(n_actions=est.n_actions_, encoder=est.encoder_)  # all prefit_policy reads without "auto"
    return prefit_policy(est.policy_model, shell, clip=None)


# ============================================================================ closed form
def _fit_closed_form(est, source, sample_rows, progress):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from .data import Transitions
    from .lstd import LSTDQ
    from .policy import FittedPolicy, check_classifier

    sample = _sample(source, est, sample_rows, progress)
    if est.policy_prefit:
        policy = prefitted_policy(est)
    else:
        model = est.policy_model if est.policy_model is not None else make_pipeline(
            StandardScaler(), LogisticRegression(max_iter=2000))
        check_classifier(model)
        policy = FittedPolicy([clone(model).fit(sample.states, sample.actions)], None, est.n_actions_, (0.0, 1.0))
    resolve_clip(policy, est.clip, lambda: _clip_pass(source, est, policy, progress))
    est.policy_ = policy
    g_fn = est.normalization_.g
    q_model = LSTDQ(random_state=est.random_state) if isinstance(est.q_model, str) else clone(est.q_model)
    first = bellman_chunk(sample, policy, est.normalization_, g_fn, est.gamma_)
    if first is None:
        raise ValueError("the stage-1 sample holds no complete transition; raise sample_rows")
    q_model.init_features(first)
    summary = None
    for chunk in source.chunks(est.encoder_.labels, progress, "LSTD statistics"):
        raw = policy.raw_proba(chunk.states)
        problem = bellman_chunk(chunk, policy, est.normalization_, g_fn, est.gamma_, raw=raw)
        step = q_model.chunk_size
        for start in range(0, 0 if problem is None else problem.n, step):
            q_model.partial_fit(problem.rows(start, start + step))
        part = _summary(chunk, raw, policy, est.normalization_)
        summary = part if summary is None else summary + part
    if summary is None or not isinstance(sample, Transitions):
        raise ValueError(f"the Parquet dataset {str(source.path)!r} has no rows")
    _check_actions(est, summary)
    q_model.solve()
    from .estimator import _SampleStage2

    est.stage2_ = _SampleStage2(q_model, est.normalization_, policy, g_fn, est.n_actions_)
    est.diagnostics_ = make_diagnostics(est, summary)
    return est


def _sample(source, est, sample_rows, progress):
    """A uniform random sample of about ``sample_rows`` choices (every row if fewer), as Transitions."""
    n = source.count_rows()
    p = min(1.0, sample_rows / max(n, 1))
    rng = np.random.default_rng(est.random_state)
    parts = []
    for chunk in source.chunks(est.encoder_.labels, progress, "stage-1 sample"):
        parts.append(chunk if p >= 1.0 else chunk.subset(rng.random(chunk.n) < p))
    if not parts:
        raise ValueError(f"the Parquet dataset {str(source.path)!r} has no rows")
    return concatenate_chunks(parts)


def _clip_pass(source, est, policy, progress):
    """The auto clip's three numbers over every row and live next state (one pass)."""
    smallest, observed_min, zero_rows, n = np.inf, np.inf, 0, 0
    for chunk in source.chunks(est.encoder_.labels, progress, "policy clip"):
        raw = policy.raw_proba(chunk.states)
        live = chunk.next_observed & ~chunk.terminated
        smallest = min(smallest, raw.min(), policy.raw_proba(chunk.next_states[live]).min() if live.any() else np.inf)
        obs = raw[np.arange(chunk.n), chunk.actions]
        if np.any(obs > 0):
            observed_min = min(observed_min, float(obs[obs > 0].min()))
        zero_rows += int(np.count_nonzero(np.any(raw <= 0, axis=1)))
        n += chunk.n
    return float(smallest), (None if not np.isfinite(observed_min) else observed_min), zero_rows / max(n, 1)


def _summary(chunk, raw, policy, norm):
    from .policy import clip_proba

    proba = clip_proba(raw, policy.clip)[0]
    mu = norm.weights(chunk.states, chunk.n_actions, proba)
    return choice_summary(raw, chunk.actions, mu, policy.clip, has_next=chunk.next_observed,
                          n_episodes=chunk.n_episodes)


def _check_actions(est, summary):
    """The in-memory fit's checks: two actions; ``mu`` only on actions seen (with a next state)."""
    labels = est.encoder_.labels
    if est.n_actions_ < 2 or np.count_nonzero(summary.action_counts) < 2:
        raise ValueError(f"the data has only one action ({labels[np.argmax(summary.action_counts)]!r}); a reward "
                         "cannot be identified from choices among one option")
    norm = est.normalization_
    needed = np.flatnonzero((summary.mu_max > 0) & (summary.action_counts == 0))
    if needed.size:
        raise ValueError(f"the normalization ({norm.describe()}) puts weight on action(s) {labels[needed].tolist()} "
                         "that never occur in the data; the data cannot support this normalization")
    exact_given = isinstance(est.q_model, str) and est.q_model == "exact" and est.transition_model is not None
    needed = np.flatnonzero((summary.trans_mu_max > 0) & (summary.trans_action_counts == 0))
    if needed.size and summary.n_choice_only and not exact_given:
        raise ValueError(f"the normalization ({norm.describe()}) puts weight on action(s) {labels[needed].tolist()} "
                         "that never occur in the data with an observed next state, so P(.|s, a) cannot be "
                         "estimated for them; give a transition_model or another normalization")


def make_diagnostics(est, summary, extra=None):
    """GenPQR's :class:`~genpqr.estimator.Diagnostics` from a :class:`genpqr.stream.ChoiceSummary`
    (warnings raised as by ``fit``)."""
    from .diagnostic_checks import emit, failed_diagnostics
    from .estimator import Diagnostics

    n = summary.n
    if extra is None:
        model = est.stage2_.fqe
        extra = dict(bellman_residuals=list(model.history_.bellman_residual), target_changes=[],
                     n_iterations=model.n_iter_, converged=True, solver="lstd (out of core)")
    diag = Diagnostics(
        n_transitions=int(n), n_episodes=int(summary.n_episodes),
        action_counts=dict(zip(est.encoder_.labels.tolist(), [int(c) for c in summary.action_counts])),
        support_count=int(summary.support), policy_log_loss=summary.log_loss / n, policy_log_loss_kind="in-sample",
        fraction_clipped=summary.clipped / n, fraction_floored=summary.floored / n,
        clip=tuple(float(c) for c in est.policy_.clip), clip_rule=est.policy_.clip_rule,
        max_mu_over_pi=summary.max_mu_over_pi, n_last_choices=int(summary.n_choice_only), **extra)
    failures = failed_diagnostics(diag, normalization=est.normalization_.describe(), clip=est.policy_.clip,
                                  min_support=est.min_support, tol=est.tol, early_stopping=False)
    diag.warnings = emit(failures, stacklevel=4)
    return diag

r"""Out-of-core GenPQR fits from a Parquet dataset (:func:`fit_parquet`).

Memory stays bounded whatever the row count: one chunk (:class:`genpqr.scale.ParquetSource`)
plus the sufficient statistics of stage 2.

* **Tabular path** (``q_model="exact"``): one pass accumulates the choice counts ``n(s, a)``
  and the transition counts ``n(s, a, s')`` (sparse, :func:`genpqr.scale.tabular_chunk_counts`);
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
  :class:`genpqr.models.qnetwork.DuelingQNetwork`): stage 1 as in the closed-form path; then
  each of ``n_iterations`` Bellman iterations is one pass over the chunks, each chunk's targets
  computed with a frozen copy of the previous iteration's model (``Q_0 = 0``) and ``fit_q``
  called on that chunk alone (mini-batch SGD over the dataset for a model that keeps its
  optimizer state), plus one last pass for the diagnostics (:mod:`genpqr.scale`).
  Memory: one chunk plus three copies of the model. With one chunk it equals the in-memory
  FQE fit with the same prefitted policy.

The per-pass work is in :mod:`genpqr.scale` and the steps on the summed statistics in
:mod:`genpqr.scale`; :func:`genpqr.scale.fit_dask` runs the same passes per
partition on a Dask cluster.

The result is an ordinary fitted :class:`genpqr.GenPQR` without training data (like a model
saved with ``include_data=False``): it predicts, gives ``reward_table`` (tabular path),
``summary``, and saves / loads; ``renormalize`` and bootstraps need the in-memory fit.
Not supported out of core (clear errors): ``cross_fit``, FQE regressors without ``fit_q`` /
``predict_q`` (sklearn regressors), ``validation_fraction`` with streamed FQE, normalizations
whose ``g`` is estimated from data (``behavior``-type outcome or value offsets), callable
``transition_model``.
"""

from __future__ import annotations

import numpy as np

from ..data import ActionEncoder
from ._stream import DEFAULT_CHUNK_ROWS, as_source
from ._stream_stats import RowDraws, clip_pass, lstd_pass, sample_pass
from ._stream_steps import (clone_estimator, closed_form_model, finish_closed_form, path_kind, resolve_clip,
                            sample_policy, start)

__all__ = ["fit_parquet", "DEFAULT_SAMPLE_ROWS", "check_sample_rows"]

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
        ``predict_q(states)`` (streamed FQE: ``n_iterations`` passes, ``fit_q`` on one chunk at a
        time, ``tol`` stops early as in :class:`genpqr.stage2.FQE`).
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
    labels = None if action_labels is None else np.asarray(action_labels)
    if source.expected_step is None or labels is None:
        scan = source.scan(progress)
        source.adopt(scan)
        labels = scan.labels if labels is None else labels
    start(est, ActionEncoder(labels), len(source.state))
    kind = path_kind(est, fqe=True)
    if kind == "exact":
        from ._stream_tabular import fit_tabular

        return fit_tabular(est, source, progress)
    return _fit_closed_form(est, source, int(sample_rows), progress, fqe=kind == "fqe")


def check_sample_rows(sample_rows) -> None:
    if isinstance(sample_rows, bool) or not (isinstance(sample_rows, (int, np.integer)) and sample_rows > 0):
        raise ValueError(f"sample_rows must be a positive int, got {sample_rows!r}")


def _fit_closed_form(est, source, sample_rows, progress, fqe=False):
    """Stage 1 on the random sample, then stage 2 by LSTD statistics or streamed FQE (``fqe``)."""
    labels = est.encoder_.labels
    sample = None
    if not (fqe and est.policy_prefit):  # streamed FQE uses the sample only to fit stage 1
        probability = min(1.0, sample_rows / max(source.count_rows(), 1))
        sample = sample_pass(source, labels, probability, RowDraws(est.random_state), progress=progress)
        if sample is None:
            raise ValueError(f"the Parquet dataset {str(source.path)!r} has no rows")
    policy = sample_policy(est, sample)
    resolve_clip(policy, est.clip, lambda: clip_pass(source, labels, policy, progress=progress).rule_inputs())
    if fqe:
        return _finish_fqe(est, source, policy, progress)
    q_model = closed_form_model(est, sample, policy)
    part = lstd_pass(source, labels, q_model, policy, est.normalization_, est.gamma_, progress=progress)
    return finish_closed_form(est, q_model, policy, part.summary)


def _finish_fqe(est, source, policy, progress):
    from ..stage2 import SampleStage2
    from ._stream_fqe import fit_streamed_fqe
    from ._stream_steps import make_diagnostics

    fqe, summary = fit_streamed_fqe(est, source, policy, progress)
    est.stage2_ = SampleStage2(fqe, est.normalization_, policy, est.normalization_.g, est.n_actions_)
    extra = dict(bellman_residuals=list(fqe.history_.bellman_residual),
                 target_changes=list(fqe.history_.target_change), n_iterations=fqe.n_iter_,
                 converged=fqe.converged_, solver=fqe.solver_name_)
    est.diagnostics_ = make_diagnostics(est, summary, extra)
    return est

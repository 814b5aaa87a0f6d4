r"""Distributed GenPQR fits on a Dask cluster (:func:`fit_dask`): the out-of-core fit of
:func:`genpqr.scale.fit_parquet` with its passes run by the workers, partition by
partition, and the partial statistics summed on the cluster; the client then takes the same
steps on the sums (:mod:`genpqr.scale`), so the result equals the single-machine
streamed fit up to the order of floating-point sums. Boosted FQE trains each Bellman
iteration with LightGBM's Dask interface instead (:mod:`genpqr.scale`): the
in-memory algorithm, with LightGBM's data-parallel trees.

Partitions are runs of Parquet row groups made *episode-whole* (``genpqr.scale._scan.Partition``):
a scan of the episode and action columns (one task per run) gives the label set and the
first and last episode id of each row group; an episode belongs to the partition holding its
first row, which reads on into the next row groups while it lasts. Every worker must be able
to open the dataset's path (a shared or network file system, or object storage that pyarrow
reads). Each task streams its partition in chunks of ``chunk_rows`` rows, so a worker's
memory is one chunk plus the statistics, as on one machine.

Passes (one task per partition each; sums are reduced pairwise on the workers). After the scan
every fit runs the validation pass of :meth:`genpqr.scale.ParquetSource.scan` per partition
(the in-memory reader's checks, and the whole data's time-gap rule, summed over partitions),
unless the source has adopted one already (``genpqr fit`` runs it on the client):

* tabular (``q_model="exact"``): the scan, the counts (``genpqr.scale._statistics.tabular_pass``);
  the client solves (``genpqr.scale._fit.fit_counts``);
* closed form (``q_model="lstd"`` / ``LSTDQ``): the scan; with ``keep_last=False`` a row
  count (the sample's row positions); the stage-1 sample (the same rows as the streamed fit:
  ``genpqr.scale._statistics.RowDraws`` jumps each partition's random stream to its first
  row), fitted on the client; with ``clip="auto"`` the clip numbers; the LSTD statistics and
  diagnostics sums; one solve on the client;
* boosted FQE (``q_model`` a :class:`genpqr.models.BoostedQModel`): the scan; the
  stage-1 sample (unless ``policy_prefit`` or ``policy="lightgbm"``); with ``clip="auto"`` the
  clip numbers; one read of the complete transitions into blocks kept in the workers' memory;
  then per Bellman iteration one ``lightgbm.DaskLGBMRegressor`` fit on the blocks (boosting
  from the previous Q by ``init_score``) and one task per block adding the new trees and
  computing the next targets (:mod:`genpqr.scale`).

``policy="lightgbm"`` replaces the sampled stage 1 by a ``lightgbm.DaskLGBMClassifier``
trained on every choice of the cluster (a Dask dataframe built from the partitions), which
is then used as a local ``LGBMClassifier``; the feature map of the closed form is still
fitted on the sample. Other FQE regressors are not distributed (neural FQE streams on one
machine: :func:`genpqr.scale.fit_parquet`).
"""

from __future__ import annotations

import numpy as np

from ..data._progress import bar_width
from ..data._spaces import FiniteActions
from ..estimator import FittedState
from ..estimator._options import fqe_spec, q_model_kind
from ._distributed_fqe import check_boosted, fit_boosted_fqe, is_boosted_q_model
from ._fit import (DEFAULT_SAMPLE_ROWS, check_out_of_core, check_sample_rows, check_tabular, clone_estimator,
                   closed_form_model, finish_closed_form, fit_counts, resolve_clip, sample_policy, start)
from ._scan import DEFAULT_CHUNK_ROWS, ParquetSource, as_source, scan_row_groups
from ._statistics import (RowDraws, add_parts, bellman_chunk, choice_frame, clip_pass, concatenate_chunks, lstd_pass,
                          row_count_pass, sample_pass, tabular_pass)

__all__ = ["fit_dask", "DaskFit", "plan_partitions", "POLICIES"]

#: Stage-1 choices of :func:`fit_dask`.
POLICIES = ("sample", "lightgbm")


def fit_dask(estimator, path, *, client, episode: str | None = None, time: str | None = None, state=None,
             action: str | None = None, terminated: str | None = None, truncated: str | None = None,
             action_labels=None, chunk_rows: int = DEFAULT_CHUNK_ROWS, sample_rows: int = DEFAULT_SAMPLE_ROWS,
             npartitions: int | None = None, policy: str = "sample", lightgbm_params: dict | None = None,
             keep_last: bool = True, time_gaps: str = "error", progress=None):
    """Fit a :class:`genpqr.GenPQR` on a long-format Parquet dataset with a Dask cluster.

    Parameters
    ----------
    estimator : GenPQR
        As in :func:`genpqr.scale.fit_parquet` (``q_model="exact"``, ``"lstd"``, an
        ``LSTDQ``, or a :class:`~genpqr.models.BoostedQModel` for boosted FQE with
        ``n_iterations`` / ``tol`` as in-memory; not modified).
    path : str, Path or genpqr.scale.ParquetSource
        A Parquet file or folder sorted by episode, readable by every worker; or a source
        (then the column names, ``chunk_rows``, ``keep_last`` and ``time_gaps`` are its own).
    client : distributed.Client
        The cluster's client.
    episode, time, state, action, terminated, truncated : column names
        As in :func:`genpqr.data.from_pandas` (required unless ``path`` is a source).
    action_labels : sequence, optional
        The full label set in code order (default: the sorted labels found by the scan).
    chunk_rows : int
        Rows per chunk inside a task.
    sample_rows : int
        Closed-form and boosted paths: size of the stage-1 random sample (the streamed fit's sample).
    npartitions : int, optional
        Partitions (tasks per pass); default one per ``chunk_rows`` rows, at most one per
        Parquet row group.
    policy : {"sample", "lightgbm"}
        Stage 1 of the closed-form and boosted paths: ``est.policy_model`` (default: GenPQR's, the
        basis logit) fitted on the sample, as :func:`~genpqr.scale.fit_parquet` does; or a
        ``lightgbm.DaskLGBMClassifier`` on every choice (parameters: those of
        ``est.policy_model`` when it is an ``LGBMClassifier``, updated by ``lightgbm_params``).
    keep_last, time_gaps : as in :func:`genpqr.data.from_pandas`.
    progress : bool or None
        A tqdm bar per pass, in partitions (None: only on a terminal).

    Returns
    -------
    GenPQR
        Fitted (without ``training_data_``), equal to ``fit_parquet``'s result (tabular
        counts exactly; the closed form up to the order of floating-point sums). Boosted FQE:
        the in-memory FQE algorithm with LightGBM's data-parallel trees (see
        :mod:`genpqr.scale`).
    """
    est, _ = _check_arguments(estimator, client, sample_rows, policy)
    source = as_source(path, episode=episode, time=time, state=state, action=action, terminated=terminated,
                       truncated=truncated, chunk_rows=chunk_rows, keep_last=keep_last, time_gaps=time_gaps)
    return est.fit(DaskFit(source, client, action_labels=action_labels, sample_rows=sample_rows,
                           npartitions=npartitions, policy=policy, lightgbm_params=lightgbm_params, progress=progress))


class DaskFit:
    """The distributed fit of a :class:`genpqr.GenPQR` (what :func:`fit_dask` runs):
    ``GenPQR(...).fit(DaskFit(source, client))`` runs ``fit_state``. Parameters as in
    :func:`fit_dask`."""

    def __init__(self, source, client, *, action_labels=None, sample_rows: int = DEFAULT_SAMPLE_ROWS,
                 npartitions: int | None = None, policy: str = "sample", lightgbm_params: dict | None = None,
                 progress=None):
        self.source, self.client, self.action_labels = source, client, action_labels
        self.sample_rows, self.npartitions, self.policy = sample_rows, npartitions, policy
        self.lightgbm_params, self.progress = lightgbm_params, progress

    def fit_state(self, est) -> FittedState:
        """The fitted state of ``est``'s parameters, the passes run by the cluster's workers."""
        kind = _check_fit(est, self.client, self.sample_rows, self.policy)
        source, cluster = self.source, _Cluster(self.client, self.progress)
        partitions, labels = plan_partitions(source, self.client, self.npartitions, progress=self.progress)
        labels = labels if self.action_labels is None else np.asarray(self.action_labels)
        if source.expected_step is None:  # the validation pass, per partition (see genpqr.scale.ParquetSource.scan)
            source.adopt(cluster.map_reduce(_scan_task, partitions, "checking", source=source))
        begun = start(est, FiniteActions(labels), len(source.state))
        if kind == "exact":
            check_tabular(begun)
            counts = cluster.map_reduce(tabular_pass, partitions, "counting", source=source, labels=labels,
                                        n_states=est.n_states)
            if counts is None:
                raise ValueError(f"the Parquet dataset {str(source.path)!r} has no rows")
            return fit_counts(est, begun, counts if est.n_states is None else counts.resized(int(est.n_states)))
        return _fit_sampled(est, begun, source, cluster, partitions, int(self.sample_rows), self.policy,
                            self.lightgbm_params, kind == "fqe")


def plan_partitions(source: ParquetSource, client, npartitions: int | None = None, progress=None) -> tuple:
    """``(partitions, labels)``: the episode-whole ``genpqr.scale._scan.Partition`` objects of
    ``source`` and its sorted action labels, from one scan task per run of row groups."""
    cluster = _Cluster(client, progress)
    groups = source.group_row_groups(npartitions)
    scans = cluster.gather(cluster.client.map(scan_row_groups, [source] * len(groups), groups, pure=False), "scan")
    labels = None
    for part_labels, _ in scans:
        if part_labels is not None:
            labels = part_labels if labels is None else np.union1d(labels, part_labels)
    return source.plan(groups, [s for _, s in scans]), labels


def _fit_sampled(est, begun, source, cluster, partitions, sample_rows, policy, lightgbm_params, fqe):
    """Stage 1 (on the random sample, prefitted or by LightGBM), then the LSTD statistics or
    boosted FQE (``fqe``)."""
    labels = begun.encoder.labels
    common = dict(source=source, labels=labels)
    # boosted FQE needs the sample only to fit stage 1; the closed form also fits its features on it
    sample = None
    if not (fqe and (est.policy_prefit or policy == "lightgbm")):
        sample = _sample(est, begun, source, cluster, partitions, sample_rows)
    if policy == "lightgbm":
        fitted = _lightgbm_policy(est, begun, cluster, source, partitions, lightgbm_params)
    else:
        fitted = sample_policy(est, begun, sample)
    resolve_clip(fitted, est.clip, lambda: cluster.map_reduce(
        clip_pass, partitions, "policy clip", policy=cluster.scatter(fitted), **common).rule_inputs())
    if fqe:
        return fit_boosted_fqe(est, begun, cluster, partitions, source, fitted)
    q_model = closed_form_model(est, begun, sample, fitted)
    total = cluster.map_reduce(_lstd_task, partitions, "LSTD statistics", q_model=cluster.scatter(q_model),
                               policy=cluster.scatter(fitted), normalization=begun.normalization, gamma=begun.gamma,
                               **common)
    if total.statistics is not None:
        _adopt_statistics(q_model, total.statistics, begun, sample, fitted)
    return finish_closed_form(est, begun, q_model, fitted, total.summary)


def _sample(est, begun, source, cluster, partitions, sample_rows):
    """The streamed fit's stage-1 random sample, drawn partition by partition."""
    common = dict(source=source, labels=begun.encoder.labels)
    if source.keep_last:
        offsets = [p.offset for p in partitions]
    else:  # a dropped last choice is no row of the sample's stream: count the rows kept
        rows = cluster.gather(cluster.map(row_count_pass, partitions, **common), "counting rows")
        offsets = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(int).tolist()
    probability = min(1.0, sample_rows / max(source.count_rows(), 1))
    parts = cluster.gather(cluster.map(sample_pass, partitions, offsets=offsets, probability=probability,
                                       draws=RowDraws(est.random_state), **common), "stage-1 sample")
    parts = [p for p in parts if p is not None]
    if not parts:
        raise ValueError(f"the Parquet dataset {str(source.path)!r} has no rows")
    return concatenate_chunks(parts)


def _adopt_statistics(q_model, statistics, begun, sample, policy):
    """Give the client's initialised ``q_model`` the statistics summed on the cluster: one
    sample transition through ``partial_fit`` sets its shapes, then ``statistics_`` is replaced."""
    row = sample.subset(np.flatnonzero(sample.next_observed)[:1])
    q_model.partial_fit(bellman_chunk(row, policy, begun.normalization, begun.normalization.g, begun.gamma))
    q_model.statistics_ = statistics


def _lightgbm_policy(est, begun, cluster, source, partitions, params):
    """Stage 1 by ``lightgbm.DaskLGBMClassifier`` on every choice of the partitions."""
    import dask.dataframe as dd
    import pandas as pd
    from lightgbm import DaskLGBMClassifier, LGBMClassifier

    from ..stage1._policy import FittedPolicy

    base = est.policy_model.get_params() if isinstance(est.policy_model, LGBMClassifier) else {}
    params = {"verbose": -1, "random_state": est.random_state, **base, **(params or {})}
    params.pop("n_jobs", None)  # LightGBM's Dask interface uses each worker's threads
    meta = pd.DataFrame({**{c: pd.Series(dtype="float64") for c in source.state},
                         "_genpqr_action": pd.Series(dtype="int64")})
    frame = dd.from_map(choice_frame, list(partitions), source=source, labels=begun.encoder.labels, meta=meta,
                        enforce_metadata=False)
    frame = cluster.client.persist(frame)
    X, y = frame[list(source.state)].to_dask_array(), frame["_genpqr_action"].to_dask_array()
    model = DaskLGBMClassifier(client=cluster.client, **params).fit(X, y).to_local()
    return FittedPolicy([model], None, begun.n_actions, (0.0, 1.0))


# ============================================================================ the cluster
def _scan_task(source, partition=None, progress=None):
    """:meth:`genpqr.scale.ParquetSource.scan` of one partition (a task)."""
    return source.scan(progress, partition=partition)


def _lstd_task(q_model, **kwargs):
    """``genpqr.scale._statistics.lstd_pass`` into the task's own copy of ``q_model`` (a
    scattered object is one object shared by the tasks of a worker)."""
    import copy

    return lstd_pass(q_model=copy.deepcopy(q_model), **kwargs)


def _on_partition(partition, offset=None, *, fn, **kwargs):
    """Run a pass of :mod:`genpqr.scale` on one partition (a Dask task)."""
    if offset is not None:
        kwargs["offset"] = offset
    return fn(partition=partition, progress=False, **kwargs)


class _Cluster:
    """Map a pass over partitions, gather in partition order, or reduce pairwise on the workers."""

    def __init__(self, client, progress):
        self.client, self.progress = client, progress

    def scatter(self, value):
        return self.client.scatter(value, hash=False)

    def map(self, fn, partitions, offsets=None, **kwargs):
        iterables = [partitions] if offsets is None else [partitions, offsets]
        return self.client.map(_on_partition, *iterables, fn=fn, pure=False, **kwargs)

    def wait(self, futures, desc) -> None:
        """Block until ``futures`` finish, with a tqdm bar (a task's error is raised by ``gather``)."""
        from distributed import as_completed
        from tqdm.auto import tqdm

        with tqdm(total=len(futures), desc=desc, unit="partition", leave=False, ncols=bar_width(),
                  disable=None if self.progress is None else not self.progress) as bar:
            for _ in as_completed(futures):
                bar.update(1)

    def gather(self, futures, desc) -> list:
        self.wait(futures, desc)
        return self.client.gather(futures)

    def map_reduce(self, fn, partitions, desc, **kwargs):
        """``add_parts`` of the pass's results over ``partitions``; None if every one is empty.
        The pairwise tree is fixed by the partition order, so the sum does not depend on timing."""
        futures = self.map(fn, partitions, **kwargs)
        self.wait(futures, desc)
        while len(futures) > 1:
            futures = [self.client.submit(add_parts, *futures[i:i + 2], pure=False) if i + 1 < len(futures)
                       else futures[i] for i in range(0, len(futures), 2)]
        return futures[0].result()


def _boosted(est) -> bool:
    return q_model_kind(est.q_model) == "fqe" and is_boosted_q_model(fqe_spec(est.q_model).regressor)


def _check_arguments(estimator, client, sample_rows, policy) -> tuple:
    """``(est, kind)``: the estimator to fit and its path (``"exact"``, ``"lstd"`` or ``"fqe"``)."""
    from ..estimator import GenPQR

    boosted = isinstance(estimator, GenPQR) and _boosted(estimator)
    try:
        est = clone_estimator(estimator, fqe=boosted)
    except ValueError as exc:
        if "q_model" not in str(exc):
            raise
        raise ValueError(f"{exc}. fit_dask also runs boosted FQE with q_model a genpqr.models._boosting."
                         "BoostedQModel (LightGBM's Dask interface); other FQE regressors are not "
                         "distributed") from None
    return est, _check_fit(est, client, sample_rows, policy)


def _check_fit(est, client, sample_rows, policy) -> str:
    """The path of a distributed fit of ``est`` (``"exact"``, ``"lstd"`` or ``"fqe"``), its arguments checked."""
    check_sample_rows(sample_rows)
    _check_client(client)
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    kind = check_out_of_core(est, fqe=_boosted(est))
    if kind == "fqe":
        check_boosted(est)
    if policy == "lightgbm" and (kind == "exact" or est.policy_prefit):
        raise ValueError("policy='lightgbm' fits stage 1 of the closed-form and boosted paths; the tabular path "
                         "uses cell frequencies and policy_prefit=True a given classifier")
    return kind


def _check_client(client) -> None:
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("fit_dask needs the optional dependency `distributed`: pip install 'genpqr[dask]'") from exc
    if not isinstance(client, Client):
        raise TypeError(f"client must be a distributed.Client, got {type(client).__name__}")


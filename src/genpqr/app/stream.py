r"""``genpqr fit`` out of core: ``--chunk-rows N``, or a folder of Parquet files as DATA.

The data is streamed (:func:`genpqr.scale.fit_parquet`); nothing row-sized is held. With
``--dask-scheduler ADDRESS|local:N`` the passes run on a Dask cluster
(:func:`genpqr.scale.fit_dask`), with the same result up to the order of sums.

* Tabular mode (``--q-model exact``, or one integer state column): the state value is the
  state index (``0..S-1``; ``--n-states`` when top states never occur); stage 1 is the cell
  frequencies (``--policy-model auto`` or ``frequency``); writes ``rewards.csv`` with one row
  per state (``visits``, ``visited``, ``reward_<action>``).
* Closed-form mode (``--q-model lstd``, the default for other states): stage 1 (``logistic``
  by default) on a random sample of ``DEFAULT_SAMPLE_ROWS`` choices, then LSTD.
* Neural mode (``--q-model mlp``): the same stage 1, then neural FQE with one pass over the
  chunks per Bellman iteration (:mod:`genpqr.scale`).
* Boosted mode (``--q-model lightgbm``, with ``--dask-scheduler`` only): the same stage 1, then
  boosted FQE (:class:`genpqr.models.BoostedQModel`, ``--n-iterations`` Bellman
  iterations, default 200, no held-out early stopping) trained by LightGBM's Dask interface
  (:mod:`genpqr.scale`).

Checks: the same as in memory (:mod:`genpqr.app.data_file`): the column names first, then one
validation pass (:meth:`genpqr.scale.ParquetSource.scan`) runs the row checks of the in-memory
reader on every chunk (rows named by their position in the dataset, files in path order) and
the label checks on the whole data's labels; it also fixes the time-gap rule of the whole data
(a gap is found whatever ``--chunk-rows``) and, in tabular mode, numbers the states as in
memory (:class:`genpqr.app.states.StateIndex`: large sparse ids are renumbered, not used as
indices). The one requirement in memory does not have: the rows are sorted by episode
(:mod:`genpqr.scale`).

Writes ``model.joblib``, ``rewards.csv`` (tabular mode; the columns of the in-memory fit:
``state_index``, the state column, ``visits``, ``visited``, ``reward_<label>``,
``transitions_<label>``),
``config.json`` and ``manifest.json`` (the folder as a transaction, as :mod:`genpqr.app.outputs`
says); no HTML report (it reads the rows). Not available out of core (clear errors):
``--bins``, ``--features``, ``--transition`` other than counts, ``--bootstrap``, continuous
actions, normalizations other than ``anchor:`` and ``mean-zero``; cross-fitting is off
(in-sample diagnostics).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..registry import Q_MODELS, SELECTED, STREAMS, STREAMS_ON_CLUSTER, TABULAR
from .build import FitData, build_estimator, check_policy_model
from .config import FIT_OPTIONS, STREAMED
from .data_file import check_action_labels, check_column_names, check_rows
from .outputs import closing_lines, warning_messages, write_fit_folder

__all__ = ["run_stream_fit", "StreamFitOutputs", "dask_client", "route_lightgbm_logs"]


@dataclass
class StreamFitOutputs:
    """What an out-of-core ``genpqr fit`` produced (``describe()`` is printed)."""

    config: object
    model: object
    tabular: bool
    rewards: object = None
    files: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)

    def describe(self, verbose: bool = False) -> str:
        from .console import fit_width
        from .outputs import fit_summary_text

        d = self.model.diagnostics_
        mode = (f"tabular, {self.model.n_states_} states, exact solve" if self.tabular
                else f"continuous states, {self.config.q_model.entry.notes.get('streamed', self.config.q_model)}")
        from ..scale._scan import DEFAULT_CHUNK_ROWS

        lines = [f"genpqr fit (out of core, chunks of {self.config.chunk_rows or DEFAULT_CHUNK_ROWS:,} rows): "
                 f"{d.n_transitions} choices in {d.n_episodes} episodes ({mode})", fit_summary_text(self.model, verbose)]
        if self.tabular:
            lines.append("  first stage: cell frequencies (out of core, the counts are all that is kept; the "
                         "smooth spline first stage that --policy-model auto picks for sparse ordered cells needs "
                         "the rows in memory: fit a CSV/Parquet file without --chunk-rows for it)")
            lines.append("  transition model: counts (out of core; the held-out comparison of --transition auto, the "
                         "in-memory default, needs the rows in memory: fit without --chunk-rows for it)")
        return fit_width("\n".join(lines + closing_lines(self.files, self.warnings, verbose=verbose)))


def _check_parquet_path(config) -> None:
    """Out of core reads Parquet only: a CSV file (or another suffix) is refused, saying what to do."""
    path = Path(config.data)
    if path.is_file() and path.suffix.lower() not in (".parquet", ".pq"):
        flag = "--dask-scheduler" if config.dask_scheduler else "--chunk-rows"
        raise ValueError(f"{flag} (out of core) streams Parquet data, a .parquet file or a folder of them; the data "
                         f"file {config.data!r} is not one: drop {flag} to read it in memory, or convert it (e.g. "
                         f"pandas.read_csv(path).to_parquet('data.parquet'))")


def _refuse_unsupported(config) -> None:
    given = FIT_OPTIONS.refused(config, STREAMED)
    if given:
        raise ValueError(f"{', '.join(given)} cannot be used out of core (--chunk-rows or a Parquet folder); "
                         "see docs/out_of_core.md")
    if not config.normalization.can(STREAMS):
        raise ValueError(f"--normalization {config.normalization} cannot be used out of core: use "
                         f"{config.normalization.registry.forms(STREAMS)}")


def _is_tabular(config, source) -> bool:
    import pyarrow as pa

    q = config.q_model
    if q is not None and q.can(TABULAR):
        if len(source.state) != 1:
            raise ValueError(f"--q-model {q} out of core needs one state column (the tabular state), got "
                             f"{source.state}; in memory (without --chunk-rows) several columns are numbered jointly")
        return True
    if q is not None and q.can(STREAMS_ON_CLUSTER) and not config.dask_scheduler:
        raise ValueError(f"--q-model {q} out of core needs --dask-scheduler ({q.entry.notes['streamed']}); on one "
                         f"machine use {' or '.join(Q_MODELS.names(STREAMS, without=(TABULAR,)))}")
    if q is not None and not (q.can(STREAMS) or q.can(STREAMS_ON_CLUSTER)):
        uses = [f"{e.name} ({e.notes['streamed']})" for e in Q_MODELS.entries()
                if e.can(STREAMS) or e.can(STREAMS_ON_CLUSTER)]
        raise ValueError(f"--q-model {q} cannot be fitted out of core: use {', '.join(uses[:-1])} or {uses[-1]}")
    if q is not None or len(source.state) != 1:
        return False
    return pa.types.is_integer(source.dataset.schema.field(source.state[0]).type)


def run_stream_fit(config) -> StreamFitOutputs:
    """Stream, fit and write (see the module docstring)."""
    import warnings

    from ..scale import fit_parquet

    if config.q_model is not None and config.q_model.can(SELECTED):  # auto: as without --q-model
        config = replace(config, q_model=None)
    _refuse_unsupported(config)
    _check_parquet_path(config)
    source = _checked_source(config)
    progress = False if config.quiet else None
    tabular = _is_tabular(config, source)
    config = replace(config, q_model="exact" if tabular else (config.q_model or "lstd"),
                     policy_model=config.policy_model or ("frequency" if tabular else "logistic"))
    if tabular:  # before the validation pass (the rest is checked when the model is built)
        check_policy_model(config, tabular, streamed=True)
    labels, index = _validate(config, source, tabular, progress)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = build_estimator(config, FitData(labels=labels, index=index, streamed=True)).estimator
        if config.dask_scheduler:
            with dask_client(config.dask_scheduler) as client:
                from ..scale import fit_dask

                model = fit_dask(est, source, client=client, action_labels=labels, progress=progress)
        else:
            model = fit_parquet(est, source, action_labels=labels, progress=progress)
    outputs = StreamFitOutputs(config.with_absolute_paths(), model, tabular, warnings=warning_messages(caught))
    _write(outputs, labels, index)
    return outputs


def _checked_source(config):
    """The :class:`~genpqr.scale.ParquetSource` of ``config``, its column names checked as in memory."""
    from ..scale import ParquetSource
    from ..scale._scan import DEFAULT_CHUNK_ROWS, dataset_columns

    check_column_names(config, dataset_columns(config.data))
    return ParquetSource(config.data, chunk_rows=config.chunk_rows or DEFAULT_CHUNK_ROWS, time_gaps=config.time_gaps,
                         episode=config.episode, time=config.time, state=list(config.state), action=config.action,
                         terminated=config.terminated, truncated=config.truncated)


def _validate(config, source, tabular: bool, progress):
    """The validation pass (:meth:`genpqr.scale.ParquetSource.scan`) with the in-memory row checks
    on every chunk and the label checks on the whole data; the source adopts the whole data's
    time-gap rule and, in tabular mode, the in-memory state numbering. Returns ``(labels, index)``:
    the sorted action labels and the :class:`~genpqr.app.states.StateIndex` (None unless tabular)."""
    import pandas as pd

    from .states import StateIndex

    scan = source.scan(progress, check=lambda frame, first: check_rows(frame, config, first),
                       states=tabular)
    if scan.n_rows == 0:
        raise ValueError(f"{config.data} has no rows")
    check_action_labels(scan.labels, scan.n_rows, config.action)
    index = None
    if tabular:
        values = pd.DataFrame({source.state[0]: scan.state_values})
        index = StateIndex.build(values, source.state, {}, n_states=config.n_states)
    source.adopt(scan, number_states=tabular and not index.identity)
    return scan.labels, index


@contextmanager
def dask_client(address: str):
    """A ``distributed.Client`` for ``address``; ``local:N`` starts (and afterwards closes) a
    local cluster of N single-threaded worker processes."""
    try:
        from distributed import Client, LocalCluster
    except ImportError as err:  # pragma: no cover - the dev environment has it
        raise ImportError("--dask-scheduler needs the dask extra: pip install -e '.[dask]'") from err
    if address.startswith("local"):
        n_workers = int(address.partition(":")[2])
        with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            with Client(cluster) as client:
                client.run(route_lightgbm_logs)
                yield client
    else:
        with Client(address) as client:
            yield client


def route_lightgbm_logs() -> None:
    """Send LightGBM's messages to the ``lightgbm`` logger of Python's ``logging`` (run on the
    workers of the local cluster the command starts: by default LightGBM prints the lines of
    its network set-up, a few per Bellman iteration of boosted FQE; warnings still show)."""
    import logging

    try:
        import lightgbm
    except ImportError:  # pragma: no cover - the closed-form and tabular paths do not need it
        return
    lightgbm.register_logger(logging.getLogger("lightgbm"))


def _write(outputs: StreamFitOutputs, labels, index) -> None:
    """model.joblib, rewards.csv (tabular mode) and config.json, as a transaction
    (:func:`genpqr.app.outputs.write_fit_folder`, manifest.json last)."""
    writers = {"model.joblib": outputs.model.save}
    if outputs.tabular:
        import pandas as pd

        model = outputs.model
        table = np.asarray(model.stage2_.recovery.reward)
        moves = np.asarray(model.transition_counts_, dtype=np.int64)
        columns = {"visits": model.stage2_.counts.sum(axis=1).astype(np.int64), "visited": model.visited_states_,
                   **{f"reward_{label}": table[:, k] for k, label in enumerate(labels)},
                   **{f"transitions_{label}": moves[:, k] for k, label in enumerate(labels)}}
        rewards = index.labels()
        rewards = pd.concat([rewards, pd.DataFrame(columns, index=rewards.index)], axis=1)
        writers["rewards.csv"] = lambda p: rewards.to_csv(p, index=False)
        outputs.rewards = rewards
    writers["config.json"] = outputs.config.to_json
    paths = write_fit_folder(outputs.config, writers)
    outputs.files.update({name.split(".")[0]: path for name, path in paths.items()})

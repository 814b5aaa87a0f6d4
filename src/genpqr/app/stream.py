r"""``genpqr fit`` out of core: ``--chunk-rows N``, or a folder of Parquet files as DATA.

The data is streamed (:func:`genpqr.stream_fit.fit_parquet`); nothing row-sized is held. With
``--dask-scheduler ADDRESS|local:N`` the passes run on a Dask cluster
(:func:`genpqr.distributed.fit_dask`), with the same result up to the order of sums.

* Tabular mode (``--q-model exact``, or one integer state column): the state value is the
  state index (``0..S-1``; ``--n-states`` when top states never occur); stage 1 is the cell
  frequencies (``--policy-model auto`` or ``frequency``); writes ``rewards.csv`` with one row
  per state (``visits``, ``visited``, ``reward_<action>``).
* Closed-form mode (``--q-model lstd``, the default for other states): stage 1 (``logistic``
  by default) on a random sample of ``DEFAULT_SAMPLE_ROWS`` choices, then LSTD.
* Neural mode (``--q-model mlp``): the same stage 1, then neural FQE with one pass over the
  chunks per Bellman iteration (:mod:`genpqr.stream_fqe`).
* Boosted mode (``--q-model lightgbm``, with ``--dask-scheduler`` only): the same stage 1, then
  boosted FQE (:class:`genpqr.models.boosting.BoostedQModel`, ``--n-iterations`` Bellman
  iterations, default 200, no held-out early stopping) trained by LightGBM's Dask interface
  (:mod:`genpqr.distributed_fqe`).

Writes ``model.joblib``, ``rewards.csv`` (tabular mode), ``config.json`` and ``manifest.json``
(the folder as a transaction, as :mod:`genpqr.app.outputs` says); no HTML report
(it reads the rows). Not available out of core (clear errors): ``--bins``, ``--features``,
``--transition`` other than counts, ``--bootstrap``, continuous actions, normalizations other
than ``anchor:`` and ``mean-zero``; cross-fitting is off (in-sample diagnostics).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np

from .config import parse_normalization
from .data_file import match_labels
from .model_choice import make_policy_model, q_model_settings
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

    def describe(self) -> str:
        d = self.model.diagnostics_
        mode = (f"tabular, {self.model.n_states_} states, exact solve" if self.tabular
                else "continuous states, neural FQE streamed by chunk" if self.config.q_model == "mlp"
                else "continuous states, boosted FQE on the Dask cluster" if self.config.q_model == "lightgbm"
                else "continuous states, closed-form LSTD Q")
        from ..stream import DEFAULT_CHUNK_ROWS

        lines = [f"genpqr fit (out of core, chunks of {self.config.chunk_rows or DEFAULT_CHUNK_ROWS:,} rows): "
                 f"{d.n_transitions} choices in {d.n_episodes} episodes ({mode})", str(self.model.summary())]
        if self.tabular:
            lines.append("  first stage: cell frequencies (out of core, the counts are all that is kept; the "
                         "smooth spline first stage that --policy-model auto picks for sparse ordered cells needs "
                         "the rows in memory: fit a CSV/Parquet file without --chunk-rows for it)")
        return "\n".join(lines + closing_lines(self.files, self.warnings))


def _refuse_unsupported(config) -> None:
    given = [flag for flag, bad in (("--bins", bool(config.bins)), ("--features", bool(config.features)),
                                    ("--transition", config.transition != "counts"),
                                    ("--bootstrap", bool(config.bootstrap)),
                                    ("--action-type continuous", config.action_type == "continuous"),
                                    ("--outcome", bool(config.outcome))) if bad]
    if given:
        raise ValueError(f"{', '.join(given)} cannot be used out of core (--chunk-rows or a Parquet folder); "
                         "see docs/out_of_core.md")


def _is_tabular(config, source) -> bool:
    import pyarrow as pa

    if config.q_model == "exact":
        return True
    if config.q_model == "lightgbm" and not config.dask_scheduler:
        raise ValueError("--q-model lightgbm out of core needs --dask-scheduler (boosted FQE is trained by "
                         "LightGBM's Dask interface); on one machine use lstd or mlp")
    if config.q_model not in (None, "lstd", "mlp", "lightgbm"):
        raise ValueError(f"--q-model {config.q_model} cannot be fitted out of core: use exact (tabular), lstd "
                         "(closed form), mlp (neural FQE streamed by chunk) or lightgbm (boosted FQE, with "
                         "--dask-scheduler)")
    if config.q_model in ("lstd", "mlp", "lightgbm") or len(source.state) != 1:
        return False
    return pa.types.is_integer(source._dataset.schema.field(source.state[0]).type)


def _normalization(config, labels):
    from ..normalization import anchor_action, mean_zero

    kind, arg = parse_normalization(config.normalization)
    if kind == "anchor":
        return anchor_action(match_labels([arg], labels, "anchor action", config.action)[0])
    if kind == "mean-zero":
        return mean_zero()
    raise ValueError(f"--normalization {config.normalization} cannot be used out of core: use anchor:ACTION or "
                     "mean-zero")


def run_stream_fit(config) -> StreamFitOutputs:
    """Stream, fit and write (see the module docstring)."""
    import warnings

    from ..clipping import parse_clip
    from ..estimator import GenPQR
    from ..stream import DEFAULT_CHUNK_ROWS, ParquetSource
    from ..stream_fit import fit_parquet

    _refuse_unsupported(config)
    chunk_rows = config.chunk_rows or DEFAULT_CHUNK_ROWS
    columns = dict(episode=config.episode, time=config.time, state=list(config.state), action=config.action,
                   terminated=config.terminated, truncated=config.truncated)
    source = ParquetSource(config.data, chunk_rows=chunk_rows, time_gaps=config.time_gaps, **columns)
    progress = False if config.quiet else None
    tabular = _is_tabular(config, source)
    policy_name = config.policy_model or ("frequency" if tabular else "logistic")
    if tabular and policy_name not in ("auto", "frequency"):
        raise ValueError(f"--policy-model {policy_name}: the out-of-core tabular path uses cell frequencies "
                         "(frequency)")
    config = replace(config, q_model="exact" if tabular else (config.q_model or "lstd"), policy_model=policy_name)
    labels = source.action_labels(progress)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        policy = None if tabular else make_policy_model(policy_name, tabular=False, n_states=None, seed=config.seed)
        settings = q_model_settings(config.q_model, seed=config.seed, n_iterations=config.n_iterations)
        settings.pop("validation_fraction", None)  # no held-out early stopping out of core
        est = GenPQR(normalization=_normalization(config, labels), gamma=config.gamma, clip=parse_clip(config.clip),
                     policy_model=policy, n_states=config.n_states, random_state=config.seed, progress=progress,
                     **settings)
        fit_kwargs = dict(action_labels=labels, chunk_rows=chunk_rows, time_gaps=config.time_gaps,
                          progress=progress, **columns)
        if config.dask_scheduler:
            with dask_client(config.dask_scheduler) as client:
                from ..distributed import fit_dask

                model = fit_dask(est, config.data, client=client, **fit_kwargs)
        else:
            model = fit_parquet(est, config.data, **fit_kwargs)
    outputs = StreamFitOutputs(config.with_absolute_paths(), model, tabular, warnings=warning_messages(caught))
    _write(outputs, labels)
    return outputs


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
    """Send LightGBM's messages to the ``lightgbm`` logger of Python's :mod:`logging` (run on the
    workers of the local cluster the command starts: by default LightGBM prints the lines of
    its network set-up, a few per Bellman iteration of boosted FQE; warnings still show)."""
    import logging

    try:
        import lightgbm
    except ImportError:  # pragma: no cover - the closed-form and tabular paths do not need it
        return
    lightgbm.register_logger(logging.getLogger("lightgbm"))


def _write(outputs: StreamFitOutputs, labels) -> None:
    """model.joblib, rewards.csv (tabular mode) and config.json, as a transaction
    (:func:`genpqr.app.outputs.write_fit_folder`, manifest.json last)."""
    import pandas as pd

    writers = {"model.joblib": outputs.model.save}
    if outputs.tabular:
        model = outputs.model
        table = np.asarray(model.stage2_.recovery.reward)
        rewards = pd.DataFrame({"state_index": np.arange(table.shape[0]),
                                "visits": model.stage2_.counts.sum(axis=1).astype(np.int64),
                                "visited": model.visited_states_})
        for k, label in enumerate(labels):
            rewards[f"reward_{label}"] = table[:, k]
        writers["rewards.csv"] = lambda p: rewards.to_csv(p, index=False)
        outputs.rewards = rewards
    writers["config.json"] = outputs.config.to_json
    paths = write_fit_folder(outputs.config, writers)
    outputs.files.update({name.split(".")[0]: path for name, path in paths.items()})

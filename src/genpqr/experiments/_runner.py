"""Run a sweep seeds x settings x methods in parallel; one CSV row per finished task.

``run_experiment(config, seeds, out)``:

1. saves the configuration as ``out/config.json`` (refusing a folder that holds a different
   experiment or different settings/options: its rows would not be comparable);
2. lists the tasks (seed, setting, method), seed-major, and drops those whose
   ``(experiment, setting, seed, method)`` row is already in ``out/results.csv`` -- a killed
   or partly failed run resumes where it stopped;
3. runs the rest in parallel -- loky processes by default (joblib's
   ``Parallel(return_as="generator_unordered")``), or a Dask cluster with
   ``backend="dask", scheduler="tcp://..."`` (or a ``client``) through Dask's public API
   (``client.map`` and ``distributed.as_completed``) -- adding each row to ``out/results.csv``
   as soon as its task finishes (only this process writes the file), under a tqdm progress bar;
4. returns a ``RunSummary`` accounting for every task. A task that raises writes
   nothing; its error is collected and reported, and the sweep goes on. A row that cannot be
   saved (a full disk) is reported as such.

The folder is updated in place with its ``manifest.json`` true at every instant
(``genpqr.experiments._folder``): each write goes to a temporary name and is renamed, so a
kill leaves ``results.csv`` with or without a row, never half of one, and a folder that is
not a genpqr experiment folder (files genpqr did not write, a file changed since) is refused
before any task runs.

Each task simulates its seed's data (not timed), then calls the method, with BLAS/OpenMP
libraries limited to one thread (``threadpoolctl``) so parallel tasks do not oversubscribe
the cores (the torch and LightGBM models train on one thread by themselves).
"""

from __future__ import annotations

import csv
import io
import json
import os
import socket
import sys
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..data._progress import bar_width
from ..estimator._manifest import atomic_write_bytes
from ._configs import ExperimentConfig, Setting
from ._folder import open_results_folder, update_folder
from ._methods import METHODS, Method

__all__ = ["Task", "TaskFailure", "RunSummary", "ResultsFile", "run_experiment", "build_tasks", "RESULT_COLUMNS",
           "RESULTS_FILE", "CONFIG_FILE", "BACKENDS"]

RESULTS_FILE = "results.csv"
CONFIG_FILE = "config.json"
BACKENDS = ("loky", "dask")
KEY_COLUMNS = ("experiment", "setting", "seed", "method")
RESULT_COLUMNS = (
    *KEY_COLUMNS, "n_train", "anchor_shift", "n_actions", "n_test",
    "reward_mse", "reward_corr", "policy_nll", "fit_time", "anchor_count", "anchor_fraction", "true_reward_var",
    "warnings", "extra", "finished_at", "worker",
)


@dataclass(frozen=True)
class Task:
    """One unit of work: a method on one seed of one setting."""

    experiment: str
    setting: Setting
    seed: int
    method: str

    @property
    def key(self) -> tuple:
        return (self.experiment, self.setting.key, int(self.seed), self.method)


@dataclass(frozen=True)
class TaskFailure:
    task: Task
    error: str

    def short(self) -> str:
        last = self.error.strip().splitlines()[-1] if self.error.strip() else "unknown error"
        return f"seed {self.task.seed}, {self.task.setting.label}, {self.task.method}: {last}"


@dataclass
class RunSummary:
    """What a run did: every task is in exactly one of ``executed``, ``skipped``,
    ``failures`` and ``unsaved``.

    Attributes
    ----------
    out : Path
    executed : list of Task
        Tasks run now whose rows were written, in completion order.
    skipped : list of Task
        Tasks whose rows were already in the results file.
    failures : list of TaskFailure
        Tasks that raised (or whose worker died).
    unsaved : list of TaskFailure
        Tasks that finished but whose row could not be written (a full disk): rerun them.
    n_tasks : int
        Every task of the run.
    """

    out: Path
    executed: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    failures: list = field(default_factory=list)
    unsaved: list = field(default_factory=list)
    n_tasks: int = 0

    @property
    def ok(self) -> bool:
        """No task failed and every finished task's row was saved."""
        return not self.failures and not self.unsaved


# ------------------------------------------------------------------------------ the file
class ResultsFile:
    """``results.csv``: the header :data:`RESULT_COLUMNS`, one row per finished task.

    ``write(data)`` stores the file's new content (default: to a temporary name, renamed over
    the file); the runner's writes also keep the folder's manifest true."""

    def __init__(self, path, write=None):
        self.path = Path(path)
        self.write = write if write is not None else (lambda data: atomic_write_bytes(self.path, data))

    def _repair(self) -> None:
        """Cut a trailing partial line left by a run killed while writing."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        data = self.path.read_bytes()
        if not data.endswith(b"\n"):
            self.write(data[: data.rfind(b"\n") + 1])

    def read_rows(self) -> list[dict]:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return []
        with open(self.path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            if tuple(reader.fieldnames or ()) != RESULT_COLUMNS:
                raise ValueError(f"{self.path} has columns {reader.fieldnames}, expected {list(RESULT_COLUMNS)}; "
                                 "write to a new folder")
            return [row for row in reader if None not in row.values()]

    def completed_keys(self) -> set:
        self._repair()
        return {(r["experiment"], r["setting"], int(r["seed"]), r["method"]) for r in self.read_rows()}

    def append(self, row: dict) -> None:
        """Add one row: the file is written whole with the row at its end (``self.write``), so a
        kill leaves it with or without the row, never half of one."""
        current = self.path.read_bytes() if self.path.exists() else b""
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=RESULT_COLUMNS)
        if not current:
            writer.writeheader()
        writer.writerow({k: _cell(row.get(k)) for k in RESULT_COLUMNS})
        self.write(current + buffer.getvalue().encode("utf-8"))


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    return value


# ------------------------------------------------------------------------------ the config
def _comparable(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in ("methods", "notes", "description")}


def save_config(config: ExperimentConfig, seeds, out: Path, resolved: dict | None = None) -> None:
    """Write ``out/config.json``, merging with an existing one (same experiment only).

    ``resolved`` (``{method: full options}``) is recorded as ``method_options`` so the folder
    names every hyperparameter its rows were produced with."""
    path = out / CONFIG_FILE
    current = json.loads(json.dumps(config.to_dict()))  # tuples -> lists, as stored
    methods, all_seeds = list(config.methods), sorted(set(int(s) for s in seeds))
    if path.exists():
        stored = json.loads(path.read_text())
        old = stored.get("config", {})
        if _comparable(old) != _comparable(current):
            raise ValueError(
                f"{out} holds results of a different configuration ({old.get('name')!r}, settings or options "
                f"differ from {config.name!r}); use another --out folder")
        methods = list(old.get("methods", [])) + [m for m in methods if m not in old.get("methods", [])]
        all_seeds = sorted(set(stored.get("seeds", [])) | set(all_seeds))
        resolved = {**stored.get("method_options", {}), **(resolved or {})}
    current["methods"] = methods
    from .. import __version__

    payload = {"config": current, "seeds": all_seeds, "method_options": resolved or {}, "genpqr_version": __version__,
               "updated": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    update_folder(out, {CONFIG_FILE: (json.dumps(payload, indent=2) + "\n").encode()})


# ------------------------------------------------------------------------------ tasks
def build_tasks(config: ExperimentConfig, seeds) -> list[Task]:
    """Seed-major list of every (seed, setting, method) task."""
    return [Task(config.name, setting, int(seed), method)
            for seed in seeds for setting in config.settings for method in config.methods]


def _execute(task: Task, method: Method, options: dict) -> dict:
    """Run one task in a worker; never raises (errors come back as data)."""
    try:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):
            if "torch" in sys.modules:
                sys.modules["torch"].set_num_threads(1)
            from ..envs._synthetic import make_synthetic_data

            s = task.setting
            data = make_synthetic_data(task.seed, s.n_train, n_test=s.n_test, n_actions=s.n_actions,
                                       anchor_shift=s.anchor_shift)
            metrics = dict(method(data, task.seed, options))
        row = {"experiment": task.experiment, "setting": s.key, "seed": task.seed, "method": task.method,
               "n_train": s.n_train, "anchor_shift": s.anchor_shift, "n_actions": s.n_actions, "n_test": s.n_test}
        extra = {k: v for k, v in metrics.items() if k not in RESULT_COLUMNS}
        row.update({k: v for k, v in metrics.items() if k in RESULT_COLUMNS and k not in row})
        row["extra"] = json.dumps(extra, default=float) if extra else ""
        row["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        row["worker"] = f"{socket.gethostname()}:{os.getpid()}"
        return {"task": task, "row": row, "error": None}
    except Exception:  # noqa: BLE001 - reported, never kills the sweep (Ctrl-C still stops it)
        return {"task": task, "row": None, "error": traceback.format_exc()}


def _parallel_results(calls, n_jobs: int, backend: str, scheduler: str | None, client=None):
    """Yield task results in completion order."""
    if backend == "dask":
        yield from _dask_results(calls, scheduler, client)
        return
    from joblib import Parallel, delayed, parallel_config

    with parallel_config(backend="loky"):
        yield from Parallel(n_jobs=n_jobs, return_as="generator_unordered")(delayed(_execute)(*args) for args in calls)


def _dask_results(calls, scheduler: str | None, client=None):
    """One Dask task per call (``client.map``), results as they finish (``as_completed``); a
    client is opened on ``scheduler`` and closed afterwards unless ``client`` is given."""
    try:
        from distributed import Client, as_completed
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("backend='dask' needs the optional dependency `distributed`: "
                          "pip install 'genpqr[dask]'") from exc
    own = client is None
    client = Client(scheduler) if own else client
    try:
        futures = client.map(_execute, *zip(*calls), pure=False)
        for future in as_completed(futures):
            yield future.result()
    finally:
        if own:
            client.close()


def run_experiment(config: ExperimentConfig, seeds, out, *, n_jobs: int = 1, backend: str = "loky",
                   scheduler: str | None = None, methods: dict | None = None, progress: bool = True,
                   client=None) -> RunSummary:
    """Run (or resume) ``config`` on ``seeds``, writing ``out/results.csv``.

    Parameters
    ----------
    config : ExperimentConfig
    seeds : iterable of int
    out : path
        Results folder: new, empty, or an earlier genpqr experiment folder that matches its
        manifest (created; anything else is refused before any task runs).
    n_jobs : int
        Parallel tasks with loky (joblib's ``n_jobs``; -1: one per core; 1: in this process).
        Ignored by the Dask backend, which keeps every worker thread of the cluster busy.
    backend : {"loky", "dask"}
    scheduler : str, optional
        Address of a running Dask scheduler (``backend="dask"``), e.g. ``"tcp://10.0.0.5:8786"``.
    methods : dict name -> Method, optional
        Registry to resolve ``config.methods`` in (default ``METHODS``).
    progress : bool
        tqdm progress bar on stderr.
    client : distributed.Client, optional
        With ``backend="dask"``, a client to use in place of ``scheduler`` (left open).

    Returns
    -------
    RunSummary
    """
    _check_run(backend, scheduler, client, n_jobs)
    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct integers, got {seeds}")
    registry = METHODS if methods is None else methods
    unknown = [m for m in config.methods if m not in registry]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; registered methods: {list(registry)}")
    resolved = {m: (registry[m], registry[m].resolve(config.method_options(m), tiny=config.tiny))
                for m in config.methods}

    out = Path(out)
    open_results_folder(out, RESULTS_FILE)
    out.mkdir(parents=True, exist_ok=True)
    save_config(config, seeds, out, {m: options for m, (_, options) in resolved.items()})
    results = ResultsFile(out / RESULTS_FILE, write=lambda data: update_folder(out, {RESULTS_FILE: data}))
    done = results.completed_keys()
    tasks = build_tasks(config, seeds)
    summary = RunSummary(out=out, n_tasks=len(tasks))
    todo = []
    for task in tasks:
        (summary.skipped if task.key in done else todo).append(task)
    if todo:
        calls = [(task, *resolved[task.method]) for task in todo]
        _run_tasks(calls, results, summary, config.name, progress,
                   lambda: _parallel_results(calls, n_jobs, backend, scheduler, client))
    return summary


def _check_run(backend, scheduler, client, n_jobs) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "dask" and not scheduler and client is None:
        raise ValueError("backend='dask' needs scheduler, the address of a running Dask scheduler "
                         "(e.g. 'tcp://127.0.0.1:8786'), or a distributed.Client as client")
    if client is not None and backend != "dask":
        raise ValueError(f"client is used by backend='dask' only, got backend={backend!r}")
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0 or n_jobs < -1:
        raise ValueError(f"n_jobs must be a positive integer or -1, got {n_jobs!r}")


def _run_tasks(calls, results: ResultsFile, summary: RunSummary, name: str, progress: bool, stream) -> None:
    """Append each finished task's row (``stream()`` yields results as they finish)."""
    from tqdm.auto import tqdm

    pending = {task.key: task for task, *_ in calls}
    bar = tqdm(total=len(calls), desc=name, unit="task", disable=not progress, file=sys.stderr, ncols=bar_width())
    try:
        for result in stream():
            task = result["task"]
            if result["error"] is None:
                _save_row(result, results, summary, bar)
            else:
                summary.failures.append(TaskFailure(task, result["error"]))
            pending.pop(task.key, None)  # accounted for (an error above leaves it pending: reported below)
            bar.update(1)
    except Exception:  # a worker died: the finished rows are saved, the rest are reported
        error = traceback.format_exc()
        summary.failures.extend(TaskFailure(task, error) for task in pending.values())
    finally:
        bar.close()


def _save_row(result, results: ResultsFile, summary: RunSummary, bar) -> None:
    """Write a finished task's row; one that cannot be written (a full disk) goes to ``summary.unsaved``."""
    task = result["task"]
    try:
        results.append(result["row"])
    except OSError as exc:
        summary.unsaved.append(TaskFailure(task, f"finished, but its row could not be saved: {exc}"))
        return
    summary.executed.append(task)
    bar.set_postfix_str(f"{task.method} seed {task.seed}: {float(result['row']['fit_time']):.1f}s", refresh=False)

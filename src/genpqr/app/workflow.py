"""``genpqr fit``: from a long-format data file and a small config to a fitted model, a
rewards table and a self-contained report.

A ``FitConfig`` says what the columns are and how to fit (it is also a JSON file:
``genpqr fit --config fit.json``; flags given on the command line override it).
:func:`run_fit` reads the file, checks it (missing columns, mixed types, a single action,
an anchor never taken: each a one-line ``ValueError`` naming the problem), fits
:class:`~genpqr.GenPQR`, optionally bootstraps whole episodes, and writes to ``out``:

``model.joblib``
    the fitted model, ``genpqr.load("out/model.joblib")``;
``rewards.csv``
    tabular mode: one row per state (``state_index``, the state columns -- bin labels for
    binned columns --, ``visits`` (rows with that state), ``visited`` (False: no choice observed
    there, so the data do not identify the reward; a ``WeakSupportWarning`` says so), one
    ``reward_<label>`` column per action, one ``transitions_<label>`` column per action (the
    observed transitions from the cell, 0 where the action is never taken), and with a
    bootstrap ``reward_<label>_se`` / ``_lo`` / ``_hi``); continuous mode: one row per row of
    the data file (episode, time, state columns, action, ``reward`` and ``continuation`` at the
    logged action, ``reward_<label>`` for every action, and bootstrap columns for ``reward``);
``reward_se_by_source.csv``
    tabular mode with a bootstrap: per (state, action) the reward's bootstrap SE from the policy
    (kernel held at the full-sample estimate), from the transitions (policy held fixed) and with
    both resampled, next to the cell's visits and observed transitions
    (:func:`genpqr.evaluation.bootstrap_sources`);
``parameters.csv``
    with ``features``: the parameters of the flow utility ``sum_k theta_k f_k(s, a)`` by the
    ``estimator`` (default NPL iterated to convergence, the MLE), their standard errors and
    intervals, the log-likelihood, the number of choices, iterations and convergence (columns:
    :mod:`genpqr.app.structural`);
``config.json``
    the effective config (defaults resolved): ``genpqr fit --config out/config.json`` reruns it;
``report.html``
    see :mod:`genpqr.app.report`;
``manifest.json``
    written last: every file's size and SHA-256, the genpqr version and the command line.
    The folder is written aside and replaces ``out`` as a whole (:mod:`genpqr.app.outputs`): an
    earlier fit there is replaced, never mixed with the new one; an ``out`` holding anything
    else, or the data, is refused before fitting. ``genpqr counterfactual`` refuses a folder
    whose files do not match its manifest.

Continuous actions (``action_type="continuous"``, ``--action-type continuous``): the action
column(s) are real numbers and the model is :class:`~genpqr.GenPQR` over a box action space; see
:mod:`genpqr.app.fit_continuous` (which :func:`run_fit` hands over to) and
:mod:`genpqr.app.report_continuous`. Everything below is about discrete actions.

Tabular mode (the exact solver) is on when ``q_model="exact"``, when ``bins`` are given, or
when ``q_model`` is not given and every state column holds integers. Each distinct
combination of the (binned) state columns is a state. States are numbered as follows: a
single column of non-negative integers (or a single binned column) is its own index when
its values are dense (at most half the range unused) or when a structured or given
transition model needs the order (``increment:`` or a ``.npy`` kernel); otherwise the
distinct combinations are numbered in sorted order. ``rewards.csv`` records the mapping.

Time: the next state of a row is the state of the next time step of its episode. A missing
step inside an episode (``genpqr.data._long_format.time_gap_rows``) is an error naming the episode and
step, or with ``time_gaps="split"`` (``--time-gaps split``) the start of a new episode. Checks
that need no fit (settings, the ``--out`` folder, the bootstrap's minimum of
``genpqr.evaluation._inference.MIN_BOOTSTRAP_EPISODES`` episodes) run before fitting.

Bins: ``bins={"x": [e1, e2, ...]}`` cuts column ``x`` at increasing edges into
``(-inf, e1), [e1, e2), ..., [em, inf)``, bin numbers ``0..m``.

Per-row normalization columns (``state-anchor:COL``, ``value:COL``): in tabular mode the
column must hold one value per state (rows at the same state must agree; missing values are
allowed as long as every state has one). In continuous mode the value at a new state is that
of the nearest logged row (1-nearest neighbour in the state columns, each scaled by its
standard deviation).
"""


from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..data._validation import short_list
from ..registry import OUTCOME, SELECTED, STRUCTURAL_ESTIMATORS
from ..registry import TYPES as TYPES_ESTIMATED
from .config import (FIT_OPTIONS, STATES, FitConfig, check_estimator_needs_features, check_in_memory_action_features,
                     parse_bins)
from .action_features import check_action_separation, read_action_table
from .build import FitData, build_estimator
from .data_file import read_features, read_frame
from .flags import console_text
from .outputs import FitOutputs, check_fit_target, warning_messages, write_outputs
from .latent_types import check_types_config, structural_type_models, type_rewards, types_table
from .results import (RowRewardStatistic, bootstrap_statistic, projected_parameters, row_rewards, run_bootstrap,
                      run_bootstrap_sources, sources_frame, tabular_rewards)
from .states import NearestStateLookup, StateIndex, decide_tabular, tabular_states

__all__ = [
    "FitConfig",
    "FitOutputs",
    "StateIndex",
    "NearestStateLookup",
    "run_fit",
    "tabular_training_data",
    "fit_command",
    "config_from_args",
    "parse_bins",
]


# ============================================================================ the fit
@dataclass
class _DiscreteFit:
    """The fitted pieces of a discrete-action fit, before the output tables."""

    data: object
    index: StateIndex | None
    model: object
    first_stage: object = None
    features: np.ndarray | None = None
    names: list | None = None
    boot: object = None
    structural: object = None
    structural_warnings: list = field(default_factory=list)
    sources: object = None
    transition: object = None
    type_models: list | None = None
    inference: object = None


def run_fit(config: FitConfig) -> FitOutputs:
    """Read, check, fit, bootstrap and write (see the module docstring)."""
    config = config.check()
    check_types_config(config)  # --types M > 1: an in-memory discrete fit (genpqr.app.latent_types)
    check_fit_target(config)  # before the (possibly long) fit: --out is new, empty or an earlier fit
    if config.chunk_rows is not None or config.dask_scheduler or Path(config.data).is_dir():
        from .stream import run_stream_fit

        if config.action_features:  # (--chunk-rows and --dask-scheduler are refused by config.check)
            check_in_memory_action_features("a folder of Parquet files")

        return run_stream_fit(config)
    if config.action_type == "continuous":
        from .fit_continuous import run_continuous_fit

        return run_continuous_fit(config, read_frame(config))
    config = _outcome_of_behavior(config)
    frame = read_frame(config)
    tabular = decide_tabular(config, frame)
    q_model = config.q_model if config.q_model is not None and not config.q_model.can(SELECTED) else None
    config = replace(config, q_model=q_model or ("exact" if tabular else "auto"),  # auto: GenPQR()'s own default
                     policy_model=config.policy_model or ("conditional-logit" if config.action_features
                                                          else "auto" if tabular else "basis-logit"))
    if not tabular and FIT_OPTIONS.refused(config, STATES):
        raise ValueError(f"{_and(FIT_OPTIONS.flags_of(STATES))} need the tabular mode (--q-model exact, --bins, or "
                         "integer state columns)")
    labels = _action_labels(config, frame)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = _fit_discrete(config, frame, labels, tabular)
    outputs = _discrete_outputs(config, frame, labels, fit, warning_messages(caught))
    write_outputs(outputs, n_rows=len(frame))
    return outputs


def _and(items: list) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _outcome_of_behavior(config: FitConfig):
    """A normalization estimating ``g`` from an outcome column (``behavior:COLUMN``) sets the
    outcome column."""
    spec = config.normalization
    if spec.can(OUTCOME):
        if config.outcome and config.outcome != spec.value:
            raise ValueError(f"--normalization {spec} and --outcome {config.outcome} name different outcome columns")
        config = replace(config, outcome=spec.value)
    return config


def _action_labels(config: FitConfig, frame) -> np.ndarray:
    """The action set, sorted: the data's labels, or those of the ``--action-features`` table
    (actions never taken included)."""
    labels = np.unique(frame[config.action].to_numpy())
    return read_action_table(config, labels).labels if config.action_features else labels


def _transitions(config: FitConfig, frame, labels, tabular: bool) -> FitData:
    """The transitions, with the tabular state numbering and a transition model given before it
    (:func:`genpqr.app.states.tabular_states`); with ``--action-features`` the transitions carry
    its table (whose labels are ``labels``)."""
    from ..data import from_pandas

    table = read_action_table(config, labels) if config.action_features else None
    if table is not None:
        check_action_separation(table, config.action_features)
    fit_data = FitData(labels=labels, frame=frame)
    state_cols, fit_frame = list(config.state), frame
    if tabular:
        fit_data.index, fit_data.transition_model = tabular_states(config, frame, labels)
        fit_data.index_rows = fit_data.index.transform(frame)
        name = "state_index"
        while name in frame.columns:
            name = "_" + name
        fit_frame, state_cols = frame.assign(**{name: fit_data.index_rows}), [name]
    fit_data.transitions = from_pandas(fit_frame, episode=config.episode, time=config.time, state=state_cols,
                                       action=config.action, terminated=config.terminated,
                                       truncated=config.truncated, outcome=config.outcome,
                                       action_labels=None if table is not None else labels,
                                       time_gaps=config.time_gaps, action_features=table)
    if hasattr(fit_data.transition_model, "shape"):  # a kernel file: do the data's moves fit it?
        _check_kernel_file(config, fit_data.transition_model, fit_data.transitions)
    return fit_data


def _check_kernel_file(config: FitConfig, kernel, data) -> None:
    """``--transition FILE``: a :class:`~genpqr.exceptions.KernelDataWarning` naming the file when
    the kernel gives probability zero to observed moves (``genpqr.stage2._kernel_files.check_kernel_against_moves``)."""
    from ..exceptions import KernelDataWarning
    from ..stage2._kernel_files import check_kernel_against_moves

    seen = data.next_observed
    message = check_kernel_against_moves(kernel, data.n_actions, data.states[seen, 0], data.actions[seen],
                                         data.next_states[seen, 0], config.transition.value)
    if message is not None:
        warnings.warn(message, KernelDataWarning, stacklevel=2)


def tabular_training_data(config: FitConfig):
    """The transitions a tabular ``genpqr fit`` was fitted on, rebuilt from its ``config.json``:
    the data file read again and its states numbered as the fit numbered them (the same steps
    as :func:`run_fit`). For a fit saved without its data, e.g. for the bootstrap of
    ``genpqr counterfactual``; the caller checks that the file has not changed since (the
    choice counts)."""
    if config.action_type == "continuous" or config.chunk_rows is not None or Path(config.data).is_dir():
        raise ValueError("only an in-memory tabular fit (a single data file, discrete actions) can be rebuilt")
    config = _outcome_of_behavior(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fit reported them
        frame = read_frame(config)
        labels = _action_labels(config, frame)
        return _transitions(config, frame, labels, tabular=True).transitions


def _fit_discrete(config: FitConfig, frame, labels, tabular: bool) -> _DiscreteFit:
    """Fit GenPQR, read the features, bootstrap and estimate the structural parameters."""
    fit_data = _transitions(config, frame, labels, tabular)
    data, index = fit_data.transitions, fit_data.index
    check_before_fit(config, data, index)
    # with --features the structural mixture MLE decides the types: GenPQR is fitted with one type
    built = build_estimator(replace(config, types=1) if config.features else config, fit_data)
    # the estimator is handed the classifier; first_stage (if any) records how it was chosen
    model = built.estimator.fit(data, first_stage=built.first_stage)
    fit = _DiscreteFit(data, index, model, built.first_stage, transition=built.transition)
    if config.features:
        fit.features, fit.names = read_features(config.features, config, index, labels, model.stage2_.counts)
    if config.bootstrap:
        _bootstrap(config, fit, frame, labels)
    if fit.features is not None:
        _structural(config, fit)
    if config.infer:  # --infer: debiased targets of the reward (genpqr.app.infer)
        from .infer import inference_targets, run_inference

        targets = inference_targets(config, data.encoder.labels, fit.features, fit.names)
        fit.inference = run_inference(config, model, data, targets)
    return fit


def _bootstrap(config: FitConfig, fit: _DiscreteFit, frame, labels) -> None:
    """Bootstrap replicates over episodes of the reward (and the structural parameters)."""
    if fit.index is not None:  # the same replicates, also split by source (reward_se_by_source.csv)
        statistic = bootstrap_statistic(fit.features, fit.names, config.estimator.build())
        fit.boot, fit.sources = run_bootstrap_sources(fit.model, fit.data, statistic, config)
    else:
        statistic = RowRewardStatistic(frame[config.state].to_numpy(dtype=np.float64),
                                       np.searchsorted(labels, frame[config.action].to_numpy()))
        fit.boot = run_bootstrap(fit.model, fit.data, statistic, config)


def _structural(config: FitConfig, fit: _DiscreteFit) -> None:
    """The structural estimates of ``--features`` (and, with types, each type's rewards at them)."""
    from .structural import structural_from_model

    with warnings.catch_warnings(record=True) as caught:  # printed apart: they concern parameters.csv
        warnings.simplefilter("always")
        fit.structural = structural_from_model(fit.model, fit.data, fit.features, fit.names, config.estimator.build(),
                                               n_types=config.types)
    fit.structural_warnings = warning_messages(caught)
    fit.model = fit.model.with_structural(fit.structural)  # saved in model.joblib: counterfactuals use it
    if hasattr(fit.structural, "posterior_frame"):  # per-type rewards at the MLE's posteriors, held fixed
        fit.type_models = structural_type_models(fit.model, fit.data, fit.structural)


def _discrete_outputs(config: FitConfig, frame, labels, fit: _DiscreteFit, messages: list) -> FitOutputs:
    """The rewards and parameters tables of a fit, gathered in :class:`FitOutputs`."""
    tabular = fit.index is not None
    typed = getattr(fit.model, "type_models_", None) or fit.type_models
    if typed:  # latent types: one table, a type column
        rewards = type_rewards(typed, fit.index, fit.data, labels, frame, config)
    elif tabular:
        rewards = tabular_rewards(fit.model, fit.index, fit.data, labels, fit.boot, config.level)
    else:
        rewards = row_rewards(fit.model, frame, config, labels, fit.boot)
    parameters = r2 = None
    if fit.features is not None:
        from .structural import parameters_table

        projection, r2 = projected_parameters(fit.model, fit.features, fit.names, fit.boot, config.level)
        parameters = parameters_table(fit.structural, config.level, fit.boot,
                                      projection if config.estimator == "projection" else None)
    return FitOutputs(config, fit.model, fit.data, rewards, parameters, fit.boot,
                      list(dict.fromkeys(messages + fit.structural_warnings)), {}, tabular, fit.index, r2,
                      fit.first_stage, fit.structural, structural_warnings=fit.structural_warnings,
                      types=types_table(fit.model) if hasattr(fit.model, "type_models_") else
                      fit.structural.posterior_frame() if hasattr(fit.structural, "posterior_frame") else None,
                      sources=None if fit.sources is None else sources_frame(fit.model, fit.sources, labels),
                      transition=fit.transition, inference=fit.inference)


def check_types_episodes(config: FitConfig, data) -> None:
    """``--types M`` needs at least M episodes (types are told apart by episodes), on every route:
    tabular, continuous states and the structural mixture MLE (--features) alike."""
    if config.types > data.n_episodes:
        raise ValueError(f"--types {config.types} needs at least {config.types} episodes (the types are told apart "
                         f"by whole episodes), but the data has {data.n_episodes}; lower --types")


def check_before_fit(config: FitConfig, data, index) -> None:
    """What can be refused before the (possibly long) fit: too few episodes for the bootstrap
    or for cross-fitting; a warning for more states than half the transitions. (States never
    visited are a failed diagnostic of the fit itself: a ``WeakSupportWarning`` from
    :mod:`genpqr.estimator`, in the API as here.)"""
    from ..exceptions import WeakSupportWarning
    from ..evaluation._inference import check_bootstrap_episodes

    if config.bootstrap:
        check_bootstrap_episodes(data.n_episodes, "--bootstrap")
    if config.types < 1:
        raise ValueError(f"--types must be a positive number of latent types, got {config.types}")
    if config.types > 1 and config.features and (config.bootstrap or not config.estimator.can(TYPES_ESTIMATED)):
        raise ValueError(f"--types {config.types} with --features estimates the mixture MLE (--estimator "
                         f"{' or '.join(STRUCTURAL_ESTIMATORS.names(TYPES_ESTIMATED))}, got {config.estimator}) without "
                         "--bootstrap (bootstrap in Python: TypedStructuralFit.bootstrap)")
    check_types_episodes(config, data)
    if config.cross_fit >= 2 and data.n_episodes < config.cross_fit:
        raise ValueError(f"--cross-fit {config.cross_fit} needs at least {config.cross_fit} episodes, but the "
                         f"data has {data.n_episodes}; lower it or use --cross-fit 0 (in-sample diagnostics)")
    if index is not None and index.n_states > data.n / 2:
        warnings.warn(f"{index.n_states} states for {data.n} transitions: most states are visited about once, so "
                      f"the recovered reward (rewards.csv) is noisy at most states (consider --bins or a continuous "
                      f"--q-model)", WeakSupportWarning)


# ============================================================================ command line
def config_from_args(args) -> FitConfig:
    """The effective config: defaults, then ``--config`` file, then the flags given (``--bins``
    flags add to the file's bins)."""
    given = dict(vars(args))
    config = FitConfig.from_json(given.pop("config")) if given.get("config") else FitConfig()
    given.pop("config", None)
    values = {k: v for k, v in given.items() if k in FIT_OPTIONS.by_name}
    if "bins" in values:
        values["bins"] = {**config.bins, **dict(parse_bins(text) for text in values["bins"])}
    config = config.updated(values)
    if "estimator" in values and not config.features:  # also --estimator npl, the default, given in vain
        check_estimator_needs_features(config.estimator)
    return config


def interrupted_line(out) -> str:
    """The one line of a command stopped by Ctrl-C: what became of its output folder."""
    if out is None:
        return "interrupted; nothing was written"
    folder = Path(out)
    if folder.is_dir() and any(folder.iterdir()):
        return f"interrupted; the earlier output in {folder} is unchanged"
    return f"interrupted; nothing was written to {folder}"


def fit_command(args) -> int:
    """Run ``genpqr fit``; 0 on success, 2 with a one-line message on bad input."""
    out = getattr(args, "out", None)
    try:
        config = config_from_args(args)
        out = config.out
        outputs = run_fit(config)
    except (ValueError, TypeError, OSError, ImportError) as exc:
        print(f"genpqr fit: error: {console_text(exc)}", file=sys.stderr)  # one line, whatever its length
        return 2
    except KeyboardInterrupt:  # Ctrl-C: the staging folder is gone, --out as it was (manifest.output_folder)
        print(f"genpqr fit: {interrupted_line(out)}", file=sys.stderr)
        return 130
    print(outputs.describe(verbose=config.verbose))
    return 0

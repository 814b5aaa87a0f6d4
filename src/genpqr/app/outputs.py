"""What ``genpqr fit`` produced (:class:`FitOutputs`, printed by :meth:`FitOutputs.describe`)
and writing it to the ``--out`` folder (:func:`write_outputs`): ``model.joblib``,
``rewards.csv``, ``parameters.csv``, ``config.json``, ``report.html`` and, written last,
``manifest.json``. Shared by the discrete (:mod:`genpqr.app.workflow`) and continuous
(:mod:`genpqr.app.fit_continuous`) fits; the out-of-core fit (:mod:`genpqr.app.stream`) writes
through :func:`write_fit_folder` too.

The folder is a transaction (``genpqr.estimator._manifest.output_folder``): the files are written into
a temporary folder beside ``--out`` which then replaces ``--out`` as a whole -- a reader sees
the earlier fit or the new one, never a mix, and a file of an earlier fit that the new one does
not write (``parameters.csv``) does not stay behind. :func:`check_fit_target` refuses, before
the fit, an ``--out`` that holds anything but an earlier fit (the user's files, a symlink, a
counterfactual or experiment folder) or that holds one of the fit's inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..registry import SELECTED
from .config import FitConfig
from .report_base import warning_sections

__all__ = ["FitOutputs", "write_outputs", "write_fit_folder", "check_fit_target", "fit_inputs", "warning_messages",
           "thin_cells_line", "closing_lines", "fit_summary_text"]

KIND = "fit"  # the manifest's kind of a fit folder


def closing_lines(files: dict, warnings_: list, where: str = "", structural_warnings=(), estimator=None,
                  verbose: bool = False) -> list:
    """The end of a fit's console summary: the files written, then the warnings (``where``
    says where else they appear, e.g. " (also in the report)"), grouped by the output they
    concern when the fit has structural estimates (:func:`warning_sections`). A warning is one
    short line (its category and first clause, :func:`genpqr.app.console.short_warning`) unless
    ``verbose``, which prints it in full."""
    from pathlib import Path

    from .console import GLOSSARY_POINTER, short_warning

    paths = [Path(p) for p in files.values()]
    folders = {p.parent for p in paths}
    if len(folders) == 1:
        lines = [f"wrote {next(iter(folders))}/:", f"  {', '.join(p.name for p in paths)}"]
    else:
        lines = ["wrote:", *(f"  {path}" for path in paths)]
    for heading, group in warning_sections(warnings_, structural_warnings, estimator):
        lines.append(f"{len(group)} warning(s){' ' + heading if heading else ''}{where}:")
        lines += [f"  {w}" if verbose else short_warning(w) for w in group]
    if warnings_ and not verbose:
        lines.append(f"  (each in full: --verbose{' or report.html' if where else ''}; {GLOSSARY_POINTER})")
    return lines


def thin_cells_line(model, transition=None) -> str | None:
    """Where the reward's uncertainty comes from, when the transitions are thin (more than
    ``genpqr.estimator._diagnostic_checks.THIN_SHARE`` of the observed moves on cells with fewer than
    ``genpqr.estimator._diagnostic_checks.THIN_TRANSITIONS``); None otherwise or off the exact path."""
    from ..estimator._diagnostic_checks import THIN_SHARE, THIN_TRANSITIONS

    counts = getattr(model, "transition_counts_", None)
    if counts is None or counts.sum() <= 0:
        return None
    thin = (counts > 0) & (counts < THIN_TRANSITIONS)
    share = float(counts[thin].sum() / counts.sum())
    if share <= THIN_SHARE:
        return None
    per_state = counts.sum(axis=1)
    policy = f"a median of {np.median(per_state[per_state > 0]):.0f} observed moves per visited state"
    given = getattr(model, "transition_model_", None)
    if transition is None and given is not None and not callable(given):  # a kernel file: nothing estimated
        return (f"  where the reward's uncertainty comes from: the policy -- {policy}; the transitions are the "
                f"given kernel, not estimated from the {share:.1%} of the observed moves on thin cells")
    kernel = (transition.name if transition is not None else
              "counts" if given is None else type(given).__name__)
    pooled = "the counts of each cell" if kernel == "counts" else f"{kernel}, which pools cells"
    return (f"  where the reward's uncertainty comes from: the transitions -- {share:.1%} of the observed moves are "
            f"on {int(thin.sum())} (state, action) cells with fewer than {THIN_TRANSITIONS} (kernel: {pooled}); "
            f"the policy -- {policy}. --bootstrap N splits the reward's SE by source (reward_se_by_source.csv)")


def warning_messages(caught) -> list:
    """``"Category: message"`` of each caught warning, in order, without repeats (parameters the
    library names are named by their flags, :func:`genpqr.app.flags.cli_text`)."""
    from .flags import cli_text

    return list(dict.fromkeys(f"{w.category.__name__}: {cli_text(w.message)}" for w in caught))


@dataclass
class FitOutputs:
    """What :func:`genpqr.app.workflow.run_fit` produced (everything is also written to ``files``).

    Attributes
    ----------
    config : FitConfig
        The effective config (defaults resolved, paths absolute), as saved in ``config.json``.
    model : GenPQR
    data : Transitions
        The transitions fitted (tabular mode: states are ``state_index``).
    rewards, parameters : DataFrame (parameters None without features)
    bootstrap : BootstrapResult or None
    warnings : list of str
        ``"Category: message"`` of every warning raised during the fit.
    files : dict name -> Path
    tabular : bool
    state_index : genpqr.app.states.StateIndex or None
    projection_r2 : float or None
    transition : genpqr.app.transition_choice.TransitionChoice or None
        The tabular transition model used and why (``--transition auto`` and the named models).
    first_stage : genpqr.stage1.FirstStageChoice or None
        Tabular mode: which first stage ``--policy-model auto``/``spline`` chose and why, or
        that another ``--policy-model`` was requested (with the cells' sparsity); also the
        model's ``first_stage_``, printed by its ``summary()``.
    structural : StructuralFit or None
        With features: the structural estimates (:mod:`genpqr.app.structural`).
    structural_warnings : list of str
        The warnings of the structural step (also in ``warnings``): they concern
        ``parameters.csv``; the others concern ``rewards.csv`` (:func:`warning_sections`).
    types : DataFrame or None
        ``--types M > 1``: ``types.csv``, the posterior type probabilities per episode
        (:mod:`genpqr.app.latent_types`; ``rewards`` then has a ``type`` column).
    sources : DataFrame or None
        Tabular mode with a bootstrap: the reward's SE by source per (state, action)
        (``reward_se_by_source.csv``, :func:`genpqr.app.results.sources_frame`).
    inference : InferenceResult or None
        ``--infer``: the debiased targets (``inference.csv``, :mod:`genpqr.app.infer`).
    """

    config: FitConfig
    model: object
    data: object
    rewards: object
    parameters: object
    bootstrap: object
    warnings: list
    files: dict
    tabular: bool
    state_index: object = None
    projection_r2: float | None = None
    first_stage: object = None
    structural: object = None
    structural_warnings: list = field(default_factory=list)
    types: object = None
    sources: object = None
    transition: object = None
    inference: object = None

    def describe(self, verbose: bool = False) -> str:
        """The lines ``genpqr fit`` prints, each at most :data:`genpqr.app.console.WIDTH`
        characters (the summary's internals and the warnings in full with ``verbose``)."""
        from .console import fit_width
        typed = getattr(self.model, "type_models_", None)
        base = typed[0] if typed else self.model
        d = base.diagnostics_  # with types: the data's figures, the same for every type
        if self.config.action_type == "continuous":
            mode = (f"continuous actions in {d.action_space}, policy {self.config.policy_model}, Q model "
                    f"{self.config.q_model}")
        else:
            mode = (f"tabular, {self.state_index.n_states} states, exact solve" if self.tabular
                    else f"continuous states, policy {self.config.policy_model}, Q model {_q_text(self.config, base)}")
        last = getattr(d, "n_last_choices", 0)
        what = (f"{d.n_transitions} choices ({d.n_transitions - last} transitions + {last} last choices)" if last
                else f"{d.n_transitions} transitions")
        lines = [f"genpqr fit: {what} in {d.n_episodes} episodes ({mode})"]
        if typed:
            from .latent_types import console_lines as type_lines

            lines += type_lines(self.model) + [f"type {m}: {t.summary()}" for m, t in enumerate(typed)]
        else:
            lines.append(fit_summary_text(self.model, verbose))  # its last line: the first stage
        from .action_features import never_taken_line

        lines += [line for line in [never_taken_line(base)] if line]
        if self.transition is not None:
            lines.append(self.transition.describe())
        if self.structural is not None:
            from .structural import console_lines

            lines += console_lines(self.structural, self.parameters)
        elif self.parameters is not None:
            lines.append("  parameters (WLS projection of the reward on the features):")
            for _, row in self.parameters.iterrows():
                ci = (f"  [{row['ci_low']:.4g}, {row['ci_high']:.4g}]" if "ci_low" in row else "")
                lines.append(f"    {row['parameter']}: {row['estimate']:.4g}{ci}")
        if self.sources is not None:
            from .results import source_lines

            lines += source_lines(self.sources, self.config.bootstrap)
        else:
            lines += [line for line in [thin_cells_line(base, self.transition)] if line]
        if self.inference is not None:
            from .infer import console_lines as inference_lines

            lines += inference_lines(self.inference)
        estimator = None if self.structural is None else self.config.estimator
        return fit_width("\n".join(lines + closing_lines(self.files, self.warnings, " (also in the report)",
                                                         self.structural_warnings, estimator, verbose)))


def fit_summary_text(model, verbose: bool = False) -> str:
    """``model.summary()``'s own lines (not the structural table: the fit prints its parameters
    with their bootstrap intervals), without :data:`genpqr.app.console.INTERNALS` unless ``verbose``."""
    from dataclasses import replace

    from .console import INTERNALS

    summary = model.summary()
    summary = summary.parts[0] if hasattr(summary, "parts") else summary
    if not verbose:
        summary = replace(summary, lines=tuple((label, text) for label, text in summary.lines
                                               if label not in INTERNALS))
    return str(summary)


def fit_inputs(config) -> list:
    """The files a fit reads and ``config.json`` names again later (the data file or folder, the
    features, a kernel file, the action features): refused inside ``--out``. (A ``--config`` file there is read
    before anything is written; it may be the ``config.json`` of the earlier fit.)"""
    from ..registry import INPUT_FILE

    kernel = config.transition if config.transition.can(INPUT_FILE) else None
    return [p for p in (config.data, config.features, kernel, getattr(config, "action_features", None)) if p]


def check_fit_target(config) -> None:
    """Refuse, before fitting, an ``--out`` that genpqr may not replace
    (``genpqr.estimator._manifest.check_target``): a ``ValueError`` naming ``--out`` and why."""
    from ..estimator._manifest import check_target

    check_target(config.out, inputs=fit_inputs(config), kind=KIND)


def write_fit_folder(config, writers: dict) -> dict:
    """Write a fit folder at ``config.out`` as a transaction: ``writers[name](path)`` writes each
    file into the temporary folder, ``manifest.json`` last; returns ``{name: final path}``, the
    manifest's included (last)."""
    from pathlib import Path

    from ..estimator._folder_ops import write_each
    from ..estimator._manifest import MANIFEST, output_folder

    with output_folder(config.out, kind=KIND, inputs=fit_inputs(config)) as staging:
        paths = write_each(staging, config.out, writers)
    return {**paths, MANIFEST: Path(config.out) / MANIFEST}


def write_outputs(outputs: FitOutputs, n_rows: int) -> None:
    """model.joblib, rewards.csv, parameters.csv, config.json and report.html into ``config.out``
    (:func:`write_fit_folder`); ``outputs.files`` gets their final paths."""
    from .report import context_from_outputs, write_report

    outputs.config = config = outputs.config.with_absolute_paths()  # config.json reruns from any folder
    writers = {"model.joblib": lambda p: outputs.model.save(p, include_data=config.save_data),
               "rewards.csv": lambda p: outputs.rewards.to_csv(p, index=False)}
    if outputs.sources is not None:
        writers["reward_se_by_source.csv"] = lambda p: outputs.sources.to_csv(p, index=False)
    if outputs.parameters is not None:
        writers["parameters.csv"] = lambda p: outputs.parameters.to_csv(p, index=False)
    if outputs.inference is not None:
        writers["inference.csv"] = lambda p: outputs.inference.to_frame().to_csv(p)
    if outputs.types is not None:
        writers["types.csv"] = lambda p: outputs.types.to_csv(p, index=False)
    writers["config.json"] = config.to_json
    writers["report.html"] = lambda p: write_report(p, context_from_outputs(outputs, n_rows=n_rows))
    paths = write_fit_folder(config, writers)
    keys = {"model.joblib": "model", "rewards.csv": "rewards", "parameters.csv": "parameters",
            "config.json": "config", "report.html": "report", "types.csv": "types",
            "reward_se_by_source.csv": "sources", "inference.csv": "inference", "manifest.json": "manifest"}
    outputs.files.update({keys[name]: path for name, path in paths.items()})


def _q_text(config: FitConfig, model) -> str:
    """``--q-model``, and for ``auto`` what GenPQR's default chose (the LSTD fixed point, or FQE)."""
    q = config.q_model
    if q is None or not q.can(SELECTED):
        return str(q)
    chosen = getattr(model, "q_model_", None)
    return f"{q} (LSTD fixed point)" if hasattr(chosen, "fit_bellman") else f"{q} (FQE)"

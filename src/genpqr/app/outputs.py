"""What ``genpqr fit`` produced (:class:`FitOutputs`, printed by :meth:`FitOutputs.describe`)
and writing it to the ``--out`` folder (:func:`write_outputs`): ``model.joblib``,
``rewards.csv``, ``parameters.csv``, ``config.json`` and ``report.html``. Shared by the
discrete (:mod:`genpqr.app.workflow`) and continuous (:mod:`genpqr.app.fit_continuous`) fits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .config import FitConfig
from .report_base import warning_sections

__all__ = ["FitOutputs", "write_outputs", "warning_messages", "closing_lines"]

def closing_lines(files: dict, warnings_: list, where: str = "", structural_warnings=(), estimator=None) -> list:
    """The end of a fit's console summary: the files written, then the warnings (``where``
    says where else they appear, e.g. " (also in the report)"), grouped by the output they
    concern when the fit has structural estimates (:func:`warning_sections`)."""
    lines = ["wrote:", *(f"  {path}" for path in files.values())]
    for heading, group in warning_sections(warnings_, structural_warnings, estimator):
        lines.append(f"{len(group)} warning(s){' ' + heading if heading else ''}{where}:")
        lines += [f"  {w}" for w in group]
    return lines


def warning_messages(caught) -> list:
    """``"Category: message"`` of each caught warning, in order, without repeats."""
    return list(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught))


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
    first_stage : genpqr.first_stage.FirstStageChoice or None
        Tabular mode: which first stage ``--policy-model auto``/``spline`` chose and why, or
        that another ``--policy-model`` was requested (with the cells' sparsity); also the
        model's ``first_stage_``, printed by its ``summary()``.
    structural : StructuralFit or None
        With features: the structural estimates (:mod:`genpqr.app.structural`).
    structural_warnings : list of str
        The warnings of the structural step (also in ``warnings``): they concern
        ``parameters.csv``; the others concern ``rewards.csv`` (:func:`warning_sections`).
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

    def describe(self) -> str:
        """The lines ``genpqr fit`` prints."""
        d = self.model.diagnostics_
        if self.config.action_type == "continuous":
            mode = (f"continuous actions in {d.action_space}, policy {self.config.policy_model}, Q model "
                    f"{self.config.q_model}")
        else:
            mode = (f"tabular, {self.state_index.n_states} states, exact solve" if self.tabular
                    else f"continuous states, Q model {self.config.q_model}")
        last = getattr(d, "n_last_choices", 0)
        what = (f"{d.n_transitions} choices ({d.n_transitions - last} transitions + {last} last choices)" if last
                else f"{d.n_transitions} transitions")
        lines = [f"genpqr fit: {what} in {d.n_episodes} episodes ({mode})",
                 str(self.model.summary())]  # its last line: the first stage (the model's first_stage_)
        if self.structural is not None:
            from .structural import console_lines

            lines += console_lines(self.structural, self.parameters)
        elif self.parameters is not None:
            lines.append("  parameters (WLS projection of the reward on the features):")
            for _, row in self.parameters.iterrows():
                ci = (f"  [{row['ci_low']:.4g}, {row['ci_high']:.4g}]" if "ci_low" in row else "")
                lines.append(f"    {row['parameter']}: {row['estimate']:.4g}{ci}")
        estimator = None if self.structural is None else self.config.estimator
        return "\n".join(lines + closing_lines(self.files, self.warnings, " (also in the report)",
                                               self.structural_warnings, estimator))


def write_outputs(outputs: FitOutputs, n_rows: int) -> None:
    """model.joblib, rewards.csv, parameters.csv, config.json and report.html into ``config.out``."""
    from .report import context_from_outputs, write_report

    outputs.config = outputs.config.with_absolute_paths()  # config.json reruns from any folder
    out = Path(outputs.config.out)
    out.mkdir(parents=True, exist_ok=True)
    files = outputs.files
    files.update(model=out / "model.joblib", rewards=out / "rewards.csv")
    outputs.model.save(files["model"], include_data=outputs.config.save_data)
    outputs.rewards.to_csv(files["rewards"], index=False)
    if outputs.parameters is not None:
        files["parameters"] = out / "parameters.csv"
        outputs.parameters.to_csv(files["parameters"], index=False)
    files["config"] = out / "config.json"
    outputs.config.to_json(files["config"])
    files["report"] = out / "report.html"
    write_report(files["report"], context_from_outputs(outputs, n_rows=n_rows))

"""``genpqr counterfactual FIT_DIR``: a counterfactual on a tabular ``genpqr fit`` folder.

Reads ``model.joblib``, ``config.json`` and ``rewards.csv`` of the fit, applies the changes
given in ``--spec SPEC.json`` and/or flags, and writes to ``--out`` (default
``FIT_DIR/counterfactual``):

``summary.csv``
    :meth:`~genpqr.counterfactuals.CounterfactualResult.to_frame`: action rates and mean state
    under the stationary (and given-initial-state) distribution, baseline vs counterfactual,
    with bootstrap intervals.
``states.csv``
    :meth:`~genpqr.counterfactuals.CounterfactualResult.policy_frame`: per state, both policies,
    values and distributions.
``support.csv``
    ``genpqr.counterfactuals._support.SupportReport.to_frame``: per scenario and distribution, the
    share of the occupancy on states (and of the choices in state-action cells) the data saw
    fewer than ``--min-visits`` times, and on states never seen.
``identification.json``
    The route that answered, why it is identified (the structural model's functional form, or
    invariance to the normalization with the measured gap), the other route's gap, the support
    share and the bootstrap replicates that left the data's support.
``counterfactual.npz``
    The result object (:func:`genpqr.counterfactuals.load_counterfactual`), as arrays and JSON
    (no pickle: reading it runs no code).
``manifest.json``
    Written last (``genpqr.estimator._manifest.output_folder``): the folder is written aside and
    replaces ``--out`` as a whole (an earlier counterfactual there is replaced; an ``--out``
    holding anything else, or the fit, is refused before the work starts).

The fit folder is checked against its ``manifest.json`` before anything in it is read
(``genpqr.estimator._manifest.verify_folder``): a folder left incomplete by an interrupted fit, mixing
two fits, or edited since is refused with a one-line error naming the file.

Loading: ``model.joblib`` is a pickle, and a pickle runs code when loaded; it is loaded only
when genpqr signed it under this user's key (``genpqr.estimator._manifest``), else the command stops
with one line saying why (``--trust`` loads it anyway: a fit from an older genpqr, or from
another account or machine, whose source you trust).

Bootstrap: the fit saves no replicate models; they are drawn again with the fit's seed
(``config.json``), which reproduces the fit's resampled panels exactly (same episodes), and each
replicate is refitted and the counterfactual re-solved. The refits need the training data: kept
in ``model.joblib`` by ``genpqr fit --save-data``, else read again from the data file named in
``config.json`` (accepted when its choice counts are the fit's). ``--bootstrap 0`` switches it
off.

Routes: a fit with ``--features`` holds its structural fit (``model.structural_``), and the
counterfactual then answers on the estimated structural model (``x @ theta``, changes of the
parameters with ``--parameter-change``, delta-method intervals from the MLE's covariance, or
bootstrap ones) and also reports the nonparametric answer and the gap (``--route`` picks one
explicitly). A fit without ``--features`` answers on the nonparametric reward table.

Spec keys (all optional; flags override): ``reward_change`` (``{label: amount or list of S
amounts}``), ``parameter_change`` (``{name: number or "*F", "+D", "-D", "=V"}``), ``route``
(``auto``, ``structural``, ``nonparametric``), ``transitions`` (a ``.npy`` kernel, ``(S, K, S)``
or ``(S*K, S)``, or a sparse ``.npz`` one), ``gamma``, ``initial`` (state index), ``horizon``, ``bootstrap``, ``level``,
``check_normalization`` (``mean-zero`` or ``anchor:LABEL``), ``min_visits``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from .counterfactual_options import CF_OPTIONS, SPEC_KEYS
from .flags import console_text

__all__ = ["add_counterfactual_parser", "run_counterfactual"]

EXAMPLE = """examples:
  genpqr counterfactual fit-output --reward-change b=-0.5 --initial 0 --horizon 20 --out cf-output
  genpqr counterfactual fit --parameter-change 'RC=*2' --out cf-rc2     (a fit with --features)
"""


def _label(text, labels, what: str = "reward_change (--reward-change)"):
    """The model's action label whose string form is ``text``; ``what`` names the setting."""
    for label in labels:
        if str(label) == str(text):
            return label
    raise ValueError(f"{what} names action {text!r}, but the fitted actions are {[str(x) for x in labels]}")


def _check_normalization(text, labels):
    """The second normalization of the identification check, a name of
    :data:`genpqr.registry.NORMALIZATIONS` that reads no data column (``mean-zero``,
    ``anchor:LABEL``)."""
    from ..registry import COLUMN, NORMALIZATIONS
    from .config import spec_parser

    if text is None:
        return None
    what = f"check_normalization (--check-normalization) {text!r}"
    try:
        spec = spec_parser(NORMALIZATIONS)(text, {})  # the one parser of the command line's names
    except ValueError:
        spec = None
    if spec is None or spec.can(COLUMN):
        raise ValueError(f"check_normalization must be {NORMALIZATIONS.forms(without=(COLUMN,))} (--check-normalization: "
                         f"a normalization that reads no data column), got {text!r}")
    return spec.build(label=lambda action, _: _label(action, labels, what), state_column=None)


def _pairs(items, flag: str, form: str) -> dict:
    """``NAME=VALUE`` flags as a dict (values kept as text)."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"{flag} must be {form}, got {item!r}")
        out[name] = value
    return out


def _check_spec_types(spec: dict) -> None:
    """Each spec entry of the type it must have, or a ValueError naming the key, what it got and what is expected."""
    for option in CF_OPTIONS:
        if option.json and option.check is not None:
            option.check(spec.get(option.name), spec)


def _read_spec(args) -> dict:
    spec = {}
    if args.spec:
        path = Path(args.spec)
        if not path.exists():
            raise FileNotFoundError(f"--spec file {args.spec!r} does not exist")
        try:
            spec = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"--spec file {args.spec} is not valid JSON ({exc})") from None
        if not isinstance(spec, dict) or set(spec) - set(SPEC_KEYS):
            raise ValueError(f"--spec must be a JSON object with keys among {list(SPEC_KEYS)}, got "
                             f"{sorted(spec) if isinstance(spec, dict) else type(spec).__name__}")
    _check_spec_types(spec)
    if args.reward_change:
        changes = dict(spec.get("reward_change") or {})
        for label, amount in _pairs(args.reward_change, "--reward-change", "LABEL=AMOUNT").items():
            try:
                changes[label] = float(amount)
            except ValueError:
                raise ValueError(f"--reward-change {label}={amount}: the amount must be a number") from None
        spec["reward_change"] = changes
    if args.parameter_change:
        spec["parameter_change"] = {**(spec.get("parameter_change") or {}),
                                    **_pairs(args.parameter_change, "--parameter-change", "NAME=SPEC")}
    for key in SPEC_KEYS:
        if key not in ("reward_change", "parameter_change") and getattr(args, key) is not None:
            spec[key] = getattr(args, key)
    _check_spec_types(spec)
    return spec


def _state_values(fit_dir: Path, config, n_states: int) -> np.ndarray:
    """The fit's single numeric state column per state index (else the index)."""
    import pandas as pd

    rewards = pd.read_csv(fit_dir / "rewards.csv")
    if len(config.state) == 1 and config.state[0] in rewards.columns and len(rewards) == n_states:
        column = pd.to_numeric(rewards[config.state[0]], errors="coerce")
        if column.notna().all():
            return column.to_numpy(dtype=np.float64)
    return np.arange(n_states, dtype=np.float64)


def _with_training_data(model, config):
    """``(model, why_not)``: a fit saved without its data (the default of ``genpqr fit``) with its
    training data back for the bootstrap -- the data file named in ``config.json`` read again and
    numbered as the fit did (:func:`genpqr.app.workflow.tabular_training_data`), accepted only when
    its content is the fit's (:meth:`genpqr.GenPQR.with_training_data`: the fingerprint of every
    row in order, so a reordered episode is refused); ``why_not`` None when done, else why not
    (``model`` then unchanged)."""
    from .workflow import tabular_training_data

    if hasattr(model, "training_data_"):
        return model, None
    if not Path(config.data).is_file():
        return model, f"the fit's data file {config.data} is not there any more"
    try:
        data = tabular_training_data(config)
    except (ValueError, OSError) as exc:
        return model, f"the fit's data could not be read again ({console_text(exc)})"
    if getattr(model, "data_fingerprint_", None) is None:
        return model, "the fit kept no fingerprint of its data (an out-of-core fit)"
    if data.fingerprint() != model.data_fingerprint_:
        return model, f"the fit's data file {config.data} has changed since the fit (its content differs)"
    return model.with_training_data(data), None


def _n_boot(spec: dict, config, model) -> tuple:
    """``(replicates, model)``: the spec's ``bootstrap``, else the fit's ``--bootstrap``. The
    bootstrap refits on the training data: a fit saved without it (the default of ``genpqr fit``)
    gets it back from the data file named in ``config.json`` when that file is unchanged
    (:func:`_with_training_data`). Otherwise an explicit request is an error (raised by
    :func:`genpqr.counterfactuals.counterfactual`) and an inherited one falls back to point
    estimates with a printed note."""
    explicit = "bootstrap" in spec
    n_boot = int((spec["bootstrap"] if explicit else config.bootstrap) or 0)
    if not n_boot:
        return 0, model
    saved = hasattr(model, "training_data_")
    model, why_not = _with_training_data(model, config)
    if why_not is None:
        if not saved:
            print(f"genpqr counterfactual: bootstrap: {n_boot} replicates refitted on the fit's data, read again from "
                  f"{config.data} (unchanged since the fit)", file=sys.stderr)
        return n_boot, model
    if explicit:
        print(f"genpqr counterfactual: note: {why_not}", file=sys.stderr)
        return n_boot, model
    print(f"genpqr counterfactual: note: no bootstrap intervals: the fit used --bootstrap {n_boot} but saved "
          f"model.joblib without its training data, which the counterfactual bootstrap refits on, and {why_not}; "
          f"rerun genpqr fit (--save-data keeps the data in model.joblib)", file=sys.stderr)
    return 0, model


def run_counterfactual(fit_dir, spec: dict, out=None, *, progress=None, trusted: bool = False):
    """Run a counterfactual on a fit folder; returns the
    :class:`~genpqr.counterfactuals.CounterfactualResult` and writes the files of the module
    docstring. ``model.joblib`` is loaded by :func:`genpqr.load`: only a file genpqr signed under
    this user's key, unless ``trusted`` (``--trust``)."""
    from ..estimator import load
    from ..estimator._folder_ops import write_each
    from ..estimator._manifest import check_target, output_folder, verify_folder
    from .config import FitConfig

    fit_dir = Path(fit_dir)
    _check_fit_files(fit_dir)
    verify_folder(fit_dir, kind="fit", require=["model.joblib", "config.json", "rewards.csv"])
    out = Path(out) if out is not None else fit_dir / "counterfactual"
    inputs = [fit_dir / "model.joblib", fit_dir / "config.json", fit_dir / "rewards.csv", spec.get("transitions")]
    check_target(out, inputs=inputs, kind="counterfactual")  # before the work (bootstrap refits)
    model, config = load(fit_dir / "model.joblib", trusted=trusted), FitConfig.from_json(fit_dir / "config.json")
    if hasattr(model, "type_models_"):
        raise ValueError(f"{fit_dir} holds a fit with {len(model.type_models_)} latent types (--types); genpqr "
                         f"counterfactual does not take typed fits: in Python, each type's model "
                         f"(genpqr.load(...).type_models_[m].counterfactual(...)), or with --features the mixture "
                         f"MLE's per-type and averaged answers (genpqr.structural.type_counterfactuals)")
    typed = getattr(model, "structural_", None)
    if hasattr(typed, "posterior_frame"):  # a TypedStructuralFit: --features F --types M
        raise ValueError(f"{fit_dir} holds a structural mixture MLE with {typed.n_types} latent types (--features with "
                         f"--types {typed.n_types}); genpqr counterfactual does not take typed fits: in Python, "
                         f"genpqr.structural.type_counterfactuals(genpqr.load('{fit_dir / 'model.joblib'}').structural_, "
                         f"parameter_change={{NAME: '*2'}}) gives each type's answer and their average")
    if not hasattr(model, "n_states_"):
        raise ValueError(f"{fit_dir} holds a fit on continuous states or actions; genpqr counterfactual needs a "
                         "tabular fit (--q-model exact); use genpqr.counterfactuals.soft_counterfactual in Python instead")
    labels = model.encoder_.labels
    change = spec.get("reward_change")
    if change is not None:
        change = {_label(k, labels): (np.asarray(v, dtype=np.float64) if isinstance(v, list) else float(v))
                  for k, v in change.items()}
    transitions = spec.get("transitions")
    if transitions is not None:
        from ..stage2._kernel_files import load_kernel

        transitions = load_kernel(transitions, len(labels), "--transitions kernel", n_states=model.n_states_,
                                  param="transitions")
    if spec.get("parameter_change") and getattr(model, "structural_", None) is None:
        raise ValueError(f"--parameter-change needs a structural fit, but {fit_dir} was fitted without --features; "
                         f"refit with --features FILE.csv, or state the change as --reward-change")
    n_boot, model = _n_boot(spec, config, model)
    result = model.counterfactual(
        change, transitions, spec.get("gamma"), parameter_change=spec.get("parameter_change"),
        route=spec.get("route", "auto"), initial=spec.get("initial"), horizon=spec.get("horizon"),
        state_values=_state_values(fit_dir, config, model.n_states_),
        check_normalization=_check_normalization(spec.get("check_normalization"), labels),
        n_boot=n_boot, level=float(spec.get("level", config.level)),
        n_jobs=config.n_jobs, random_state=config.seed, progress=progress, min_visits=int(spec.get("min_visits", 10)),
        money_parameter=spec.get("money_parameter"))
    writers = {"summary.csv": lambda p: result.to_frame().to_csv(p, index=False),
               "states.csv": lambda p: result.policy_frame().to_csv(p, index=False),
               "support.csv": lambda p: result.support.to_frame().to_csv(p, index=False),
               "identification.json": lambda p: p.write_text(json.dumps(_identification(result), indent=2)),
               "counterfactual.npz": result.save}
    if getattr(result, "welfare", None) is not None:
        writers["welfare.csv"] = lambda p: result.welfare.to_frame().to_csv(p, index=False)
    with output_folder(out, kind="counterfactual", inputs=inputs) as staging:
        write_each(staging, out, writers)
    return result, out


def _check_fit_files(fit_dir: Path) -> None:
    """The files a counterfactual reads are in ``fit_dir``, as plain files (a link is named as one)."""
    for name in ("model.joblib", "config.json", "rewards.csv"):
        if (fit_dir / name).is_symlink():
            raise ValueError(f"{fit_dir / name} is a symbolic link (to {os.readlink(fit_dir / name)}), not the file "
                             f"genpqr fit wrote; genpqr reads only plain files of a fit folder (a link can point "
                             f"anywhere): copy the fit folder with its files (cp -rL), not links")
        if not (fit_dir / name).exists():
            raise FileNotFoundError(f"{fit_dir} is not a genpqr fit folder: it has no {name}")


def _identification(result) -> dict:
    """``identification.json``: the route, why it is identified, the other route's gap, support."""
    off = None if result.off_support is None else {"baseline": int(result.off_support[:, 0].sum()),
                                                   "counterfactual": int(result.off_support[:, 1].sum()),
                                                   "replicates": int(result.off_support.shape[0])}
    gap = result.route_gap()
    return dict(route=result.route, changes=list(result.changes), parameter_change=result.parameter_change,
                invariant=result.invariant, rule=result.rule, normalization=result.normalization,
                check_normalization=result.check_normalization,
                normalization_gap=None if np.isnan(result.normalization_gap) else result.normalization_gap,
                summary_gap=None if np.isnan(result.summary_gap) else result.summary_gap,
                other_route=None if result.alternative is None else result.alternative["route"],
                route_gap=None if np.isnan(gap) else gap, interval_kind=result.interval_kind,
                support_min_visits=result.support.min_visits, support_share=result.support.share,
                support_material=bool(result.support.material), bootstrap_off_support=off)


def add_counterfactual_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "counterfactual", help="soft-optimal behaviour under changed parameters, rewards, transitions or discount "
                               "(tabular fit)",
        description="Solve the soft-optimal policy of a tabular `genpqr fit` folder under changed primitives: on the "
                    "estimated structural model when the fit has --features (and the nonparametric answer beside it, "
                    "with the gap), else on the nonparametric reward table with the check of whether the "
                    "normalization identifies the answer. Reports rates, distributions, intervals of a named kind and "
                    "how much of the answer lies on states the data saw rarely. Writes summary.csv, states.csv, "
                    "support.csv, identification.json and counterfactual.npz.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    CF_OPTIONS.add_arguments(p, suppress=False)
    p.set_defaults(func=counterfactual_command)
    return p


def counterfactual_command(args) -> int:
    import warnings

    from ..exceptions import GenPQRWarning
    from .console import GLOSSARY_POINTER, fit_width, short_warning

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", GenPQRWarning)
            result, out = run_counterfactual(args.fit_dir, _read_spec(args), args.out,
                                             progress=False if args.quiet else None, trusted=args.trust)
    except (ValueError, TypeError, OSError) as exc:
        print(f"genpqr counterfactual: error: {console_text(exc)}", file=sys.stderr)  # one line
        return 2
    if result.to_frame().empty:  # no state distribution: the fitted kernel ends episodes and no --initial was given
        print(fit_width("no summary statistics: the fitted kernel ends episodes (terminations), so there is no "
                        "long-run distribution to average over; give --initial STATE (and --horizon N) for the "
                        f"statistics from a starting state. {out}/states.csv holds the per-state policies and "
                        "values"))
    else:
        print(result.summary())
    seen = set()
    for w in caught:
        text = f"WARNING {w.category.__name__}: {console_text(w.message)}"
        text = fit_width(text) if args.verbose else short_warning(text, indent="")
        if issubclass(w.category, GenPQRWarning) and text not in seen:
            seen.add(text)
            print(text, file=sys.stderr)
        elif not issubclass(w.category, GenPQRWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if seen:
        if not args.verbose:
            print(f"  (each in full: --verbose; {GLOSSARY_POINTER})", file=sys.stderr)
    welfare = ", welfare.csv" if getattr(result, "welfare", None) is not None else ""
    print(fit_width(f"wrote {out}/: summary.csv, states.csv, support.csv, identification.json, "
                    f"counterfactual.npz{welfare}"))
    return 0

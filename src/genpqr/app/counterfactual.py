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
    :meth:`~genpqr.counterfactuals.SupportReport.to_frame`: per scenario and distribution, the
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
    Written last (:func:`genpqr.estimator.manifest.output_folder`): the folder is written aside and
    replaces ``--out`` as a whole (an earlier counterfactual there is replaced; an ``--out``
    holding anything else, or the fit, is refused before the work starts).

The fit folder is checked against its ``manifest.json`` before anything in it is read
(:func:`genpqr.estimator.manifest.verify_folder`): a folder left incomplete by an interrupted fit, mixing
two fits, or edited since is refused with a one-line error naming the file.

Loading: ``model.joblib`` is a pickle, and a pickle runs code when loaded; it is loaded only
when genpqr signed it under this user's key (:mod:`genpqr.estimator.manifest`), else the command stops
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
import sys
from pathlib import Path

import numpy as np

__all__ = ["add_counterfactual_parser", "run_counterfactual"]

_KEYS = ("reward_change", "parameter_change", "route", "transitions", "gamma", "initial", "horizon", "bootstrap",
         "level", "check_normalization", "min_visits")
_SCALAR_KEYS = ("route", "transitions", "gamma", "initial", "horizon", "bootstrap", "level", "check_normalization",
                "min_visits")

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
    from ..normalization import anchor_action, mean_zero

    if text is None:
        return None
    if text == "mean-zero":
        return mean_zero()
    if text.startswith("anchor:"):
        return anchor_action(_label(text.split(":", 1)[1], labels, f"check_normalization (--check-normalization) "
                                                                   f"{text!r}"))
    raise ValueError(f"check_normalization must be 'mean-zero' or 'anchor:LABEL', got {text!r}")


#: The scalar spec keys: (accepted types, what is expected).
_SCALAR_TYPES = {"route": (str, "one of 'auto', 'structural', 'nonparametric'"),
                 "transitions": (str, "the path of a .npy or sparse .npz kernel"),
                 "gamma": ((int, float), "a discount factor in [0, 1)"),
                 "initial": ((int, list), "a state index (an integer) or a list of S probabilities"),
                 "horizon": (int, "a positive integer number of steps"),
                 "bootstrap": (int, "a number of replicates (an integer, 0: none)"),
                 "level": ((int, float), "a confidence level strictly between 0 and 1"),
                 "check_normalization": (str, "'mean-zero' or 'anchor:LABEL'"),
                 "min_visits": (int, "a positive integer")}


def _check_scalar_types(spec: dict) -> None:
    """Each scalar spec key of its type (booleans are no numbers), or a ValueError naming the key and its flag."""
    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    for key, (types, expected) in _SCALAR_TYPES.items():
        value = spec.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, types)
                                  or isinstance(value, list) and not all(map(number, value))):
            raise ValueError(f"{key} (--{key.replace('_', '-')}) must be {expected}, got {type(value).__name__} "
                             f"{value!r:.80}")


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
    for key, expected in (("reward_change", "an object {action label: amount or list of S amounts}"),
                          ("parameter_change", 'an object {parameter name: number or "*F", "+D", "-D", "=V"}')):
        if key in spec and spec[key] is not None and not isinstance(spec[key], dict):
            raise ValueError(f"{key} must be {expected}, got {type(spec[key]).__name__} {spec[key]!r:.80}")
    for label, amount in (spec.get("reward_change") or {}).items():
        ok = isinstance(amount, (int, float)) and not isinstance(amount, bool) or \
            isinstance(amount, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in amount)
        if not ok:
            raise ValueError(f"reward_change[{label!r}] must be a number or a list of numbers (one per state), got "
                             f"{type(amount).__name__} {amount!r:.80}")
    _check_scalar_types(spec)
    level = spec.get("level")
    if level is not None and not 0 < level < 1:
        raise ValueError(f"level must be a confidence level strictly between 0 and 1, got {level!r}")


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
        if not isinstance(spec, dict) or set(spec) - set(_KEYS):
            raise ValueError(f"--spec must be a JSON object with keys among {list(_KEYS)}, got "
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
    for key in _SCALAR_KEYS:
        value = getattr(args, key)
        if value is not None:
            spec[key] = value
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
        return model, f"the fit's data could not be read again ({' '.join(str(exc).split())})"
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
    from ..estimator.folder_ops import write_each
    from ..estimator.manifest import check_target, output_folder, verify_folder
    from .config import FitConfig

    fit_dir = Path(fit_dir)
    for name in ("model.joblib", "config.json", "rewards.csv"):
        if not (fit_dir / name).exists():
            raise FileNotFoundError(f"{fit_dir} is not a genpqr fit folder: it has no {name}")
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
        from .states import load_kernel

        transitions = load_kernel(transitions, len(labels), "--transitions kernel", n_states=model.n_states_)
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
        n_jobs=config.n_jobs, random_state=config.seed, progress=progress, min_visits=int(spec.get("min_visits", 10)))
    writers = {"summary.csv": lambda p: result.to_frame().to_csv(p, index=False),
               "states.csv": lambda p: result.policy_frame().to_csv(p, index=False),
               "support.csv": lambda p: result.support.to_frame().to_csv(p, index=False),
               "identification.json": lambda p: p.write_text(json.dumps(_identification(result), indent=2)),
               "counterfactual.npz": result.save}
    with output_folder(out, kind="counterfactual", inputs=inputs) as staging:
        write_each(staging, out, writers)
    return result, out


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
    p.add_argument("fit_dir", help="output folder of `genpqr fit` (tabular mode) (required)")
    p.add_argument("--spec", default=None, metavar="SPEC.json", help=f"JSON with keys among {', '.join(_KEYS)}; flags override it (default: none)")
    p.add_argument("--parameter-change", dest="parameter_change", action="append", default=None,
                   metavar="NAME=SPEC", help="change a structural parameter (a fit with --features): NAME=*F "
                   "(multiply), NAME=+D / NAME=-D (add / subtract) or NAME=V (set); repeatable (default: none)")
    p.add_argument("--reward-change", dest="reward_change", action="append", default=None, metavar="LABEL=AMOUNT",
                   help="add AMOUNT to the flow reward of action LABEL in every state; repeatable (default: none)")
    p.add_argument("--route", default=None, choices=("auto", "structural", "nonparametric"),
                   help="auto: the structural model when the fit has --features, else the nonparametric reward table "
                        "(default: auto)")
    p.add_argument("--transitions", default=None, metavar="FILE.npy", help="new kernel, (S, K, S) or (S*K, S); or FILE.npz, sparse (S*K, S) (default: the fit's)")
    p.add_argument("--gamma", type=float, default=None, help="new discount factor (default: the fit's)")
    p.add_argument("--initial", type=int, default=None, metavar="STATE", help="initial state index (default: none: the long-run distributions only)")
    p.add_argument("--horizon", type=int, default=None, help="steps from --initial (default: none: the discounted occupancy)")
    p.add_argument("--bootstrap", type=int, default=None, metavar="B",
                   help="bootstrap replicates; 0: none (default: the fit's --bootstrap, same resamples)")
    p.add_argument("--level", type=float, default=None, help="confidence level in (0, 1) (default: the fit's --level)")
    p.add_argument("--check-normalization", dest="check_normalization", default=None, metavar="SPEC",
                   help="second normalization for the identification check: mean-zero or anchor:LABEL (default: "
                        "mean-zero, or, when the fit is normalized by mean-zero, the anchor at the most chosen action)")
    p.add_argument("--min-visits", dest="min_visits", type=int, default=None, metavar="N",
                   help="support: states and cells seen fewer than N times count as thin (default: 10)")
    p.add_argument("--out", default=None, metavar="DIR", help="output folder (default: FIT_DIR/counterfactual)")
    p.add_argument("--trust", action="store_true",
                   help="load FIT_DIR/model.joblib even if genpqr did not sign it under your key (a fit from an "
                        "older genpqr, another account or machine). A model file is code: loading it runs what it "
                        "holds, so use --trust only for a file whose source you trust (default: off)")
    p.add_argument("--quiet", action="store_true", help="no progress bars (default: off)")
    p.set_defaults(func=counterfactual_command)
    return p


def counterfactual_command(args) -> int:
    import warnings

    from ..exceptions import GenPQRWarning

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", GenPQRWarning)
            result, out = run_counterfactual(args.fit_dir, _read_spec(args), args.out,
                                             progress=False if args.quiet else None, trusted=args.trust)
    except (ValueError, TypeError, OSError) as exc:
        print(f"genpqr counterfactual: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    import pandas as pd

    frame = result.to_frame().drop(columns=["interval_kind"], errors="ignore")
    if frame.empty:  # no state distribution: the fitted kernel ends episodes and no --initial was given
        print("no summary statistics: the fitted kernel ends episodes (terminations), so there is no long-run "
              "distribution to average over; give --initial STATE (and --horizon N) for the statistics from a "
              f"starting state. {out}/states.csv holds the per-state policies and values")
    else:
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            print(frame.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(result.describe())
    seen = set()
    for w in caught:
        text = f"WARNING ({w.category.__name__}): {' '.join(str(w.message).split())}"
        if issubclass(w.category, GenPQRWarning) and text not in seen:
            seen.add(text)
            print(text, file=sys.stderr)
        elif not issubclass(w.category, GenPQRWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    print(f"wrote {out}/summary.csv, states.csv, support.csv, identification.json, counterfactual.npz")
    return 0

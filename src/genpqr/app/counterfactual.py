"""``genpqr counterfactual FIT_DIR``: a counterfactual on a tabular ``genpqr fit`` folder.

Reads ``model.joblib``, ``config.json`` and ``rewards.csv`` of the fit, applies the changes
given in ``--spec SPEC.json`` and/or flags, and writes to ``--out`` (default
``FIT_DIR/counterfactual``):

``summary.csv``
    :meth:`CounterfactualResult.to_frame`: action rates and mean state under the stationary
    (and given-initial-state) distribution, baseline vs counterfactual, with bootstrap
    intervals.
``states.csv``
    :meth:`CounterfactualResult.policy_frame`: per state, both policies, values and
    distributions.
``identification.json``
    Whether the counterfactual is invariant to the normalization, why, and the measured gap.
``counterfactual.joblib``
    The result object (:func:`genpqr.counterfactual.load_counterfactual`).

Bootstrap: the fit saves no replicate models; they are drawn again with the fit's seed
(``config.json``), which reproduces the fit's resampled panels exactly (same episodes), and each
replicate is refitted and the counterfactual re-solved. The refits need the training data: kept
in ``model.joblib`` by ``genpqr fit --save-data``, else read again from the data file named in
``config.json`` (accepted when its choice counts are the fit's). ``--bootstrap 0`` switches it
off.

Spec keys (all optional; flags override): ``reward_change`` ({label: amount or list of S
amounts}), ``transitions`` (a ``.npy`` kernel, (S, K, S) or (S*K, S)), ``gamma``, ``initial``
(state index), ``horizon``, ``bootstrap``, ``level``, ``check_normalization``
(``mean-zero`` or ``anchor:LABEL``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

__all__ = ["add_counterfactual_parser", "run_counterfactual"]

_KEYS = ("reward_change", "transitions", "gamma", "initial", "horizon", "bootstrap", "level", "check_normalization")

EXAMPLE = """example:
  genpqr counterfactual fit-output --reward-change b=-0.5 --initial 0 --horizon 20 --out cf-output
"""


def _label(text, labels):
    """The model's action label whose string form is ``text``."""
    for label in labels:
        if str(label) == str(text):
            return label
    raise ValueError(f"reward_change names action {text!r}, but the fitted actions are {[str(x) for x in labels]}")


def _check_normalization(text, labels):
    from ..normalization import anchor_action, mean_zero

    if text is None:
        return None
    if text == "mean-zero":
        return mean_zero()
    if text.startswith("anchor:"):
        return anchor_action(_label(text.split(":", 1)[1], labels))
    raise ValueError(f"check_normalization must be 'mean-zero' or 'anchor:LABEL', got {text!r}")


def _read_spec(args) -> dict:
    spec = {}
    if args.spec:
        path = Path(args.spec)
        if not path.exists():
            raise FileNotFoundError(f"--spec file {args.spec!r} does not exist")
        spec = json.loads(path.read_text())
        if not isinstance(spec, dict) or set(spec) - set(_KEYS):
            raise ValueError(f"--spec must be a JSON object with keys among {list(_KEYS)}, got "
                             f"{sorted(spec) if isinstance(spec, dict) else type(spec).__name__}")
    if args.reward_change:
        changes = dict(spec.get("reward_change") or {})
        for item in args.reward_change:
            label, sep, amount = item.partition("=")
            if not sep:
                raise ValueError(f"--reward-change must be LABEL=AMOUNT, got {item!r}")
            changes[label] = float(amount)
        spec["reward_change"] = changes
    for key in ("transitions", "gamma", "initial", "horizon", "bootstrap", "level", "check_normalization"):
        value = getattr(args, key)
        if value is not None:
            spec[key] = value
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


def _attach_training_data(model, config) -> str | None:
    """Give a fit saved without its data (the default of ``genpqr fit``) its training data back
    for the bootstrap: the data file named in ``config.json`` read again and numbered as the fit
    did (:func:`genpqr.app.workflow.tabular_training_data`), accepted only when its choice counts
    per state and action are the fit's. Returns None when done, else why not."""
    from .workflow import tabular_training_data

    if hasattr(model, "training_data_"):
        return None
    if not Path(config.data).is_file():
        return f"the fit's data file {config.data} is not there any more"
    try:
        data = tabular_training_data(config)
    except (ValueError, OSError) as exc:
        return f"the fit's data could not be read again ({' '.join(str(exc).split())})"
    S, K = model.stage2_.counts.shape
    states = data.states[:, 0].astype(np.int64)
    ok = data.n_actions == K and states.size and 0 <= states.min() and states.max() < S
    counts = np.bincount(states * K + data.actions, minlength=S * K).reshape(S, K) if ok else None
    if not ok or not np.array_equal(counts, np.asarray(model.stage2_.counts)):
        return f"the fit's data file {config.data} has changed since the fit (its choice counts differ)"
    model.training_data_ = data
    return None


def _n_boot(spec: dict, config, model) -> int:
    """Replicates: the spec's ``bootstrap``, else the fit's ``--bootstrap``. The bootstrap refits
    on the training data: a fit saved without it (the default of ``genpqr fit``) gets it back
    from the data file named in ``config.json`` when that file is unchanged
    (:func:`_attach_training_data`). Otherwise an explicit request is an error (raised by
    :func:`genpqr.counterfactual.counterfactual`) and an inherited one falls back to point
    estimates with a printed note."""
    explicit = "bootstrap" in spec
    n_boot = int((spec["bootstrap"] if explicit else config.bootstrap) or 0)
    if not n_boot:
        return 0
    saved = hasattr(model, "training_data_")
    why_not = _attach_training_data(model, config)
    if why_not is None:
        if not saved:
            print(f"genpqr counterfactual: bootstrap: {n_boot} replicates refitted on the fit's data, read again from "
                  f"{config.data} (unchanged since the fit)", file=sys.stderr)
        return n_boot
    if explicit:
        print(f"genpqr counterfactual: note: {why_not}", file=sys.stderr)
        return n_boot
    print(f"genpqr counterfactual: note: no bootstrap intervals: the fit used --bootstrap {n_boot} but saved "
          f"model.joblib without its training data, which the counterfactual bootstrap refits on, and {why_not}; "
          f"rerun genpqr fit (--save-data keeps the data in model.joblib)", file=sys.stderr)
    return 0


def run_counterfactual(fit_dir, spec: dict, out=None, *, progress=None):
    """Run a counterfactual on a fit folder; returns the :class:`CounterfactualResult` and writes
    the files of the module docstring."""
    from ..estimator import load
    from .config import FitConfig

    fit_dir = Path(fit_dir)
    for name in ("model.joblib", "config.json", "rewards.csv"):
        if not (fit_dir / name).exists():
            raise FileNotFoundError(f"{fit_dir} is not a genpqr fit folder: it has no {name}")
    model, config = load(fit_dir / "model.joblib"), FitConfig.from_json(fit_dir / "config.json")
    if not hasattr(model, "n_states_"):
        raise ValueError(f"{fit_dir} holds a fit on continuous states or actions; genpqr counterfactual needs a "
                         "tabular fit (--q-model exact); use genpqr.soft_fqi.soft_counterfactual in Python instead")
    labels = model.encoder_.labels
    change = spec.get("reward_change")
    if change is not None:
        change = {_label(k, labels): (np.asarray(v, dtype=np.float64) if isinstance(v, list) else float(v))
                  for k, v in change.items()}
    transitions = spec.get("transitions")
    if transitions is not None:
        if not Path(transitions).exists():
            raise FileNotFoundError(f"transitions file {transitions!r} does not exist")
        transitions = np.load(transitions, allow_pickle=False)
    result = model.counterfactual(
        change, transitions, spec.get("gamma"), initial=spec.get("initial"), horizon=spec.get("horizon"),
        state_values=_state_values(fit_dir, config, model.n_states_),
        check_normalization=_check_normalization(spec.get("check_normalization"), labels),
        n_boot=_n_boot(spec, config, model), level=float(spec.get("level", config.level)),
        n_jobs=config.n_jobs, random_state=config.seed, progress=progress)
    out = Path(out) if out is not None else fit_dir / "counterfactual"
    out.mkdir(parents=True, exist_ok=True)
    result.to_frame().to_csv(out / "summary.csv", index=False)
    result.policy_frame().to_csv(out / "states.csv", index=False)
    (out / "identification.json").write_text(json.dumps(
        dict(changes=list(result.changes), invariant=result.invariant, rule=result.rule,
             normalization=result.normalization, check_normalization=result.check_normalization,
             normalization_gap=result.normalization_gap, summary_gap=result.summary_gap), indent=2))
    result.save(out / "counterfactual.joblib")
    return result, out


def add_counterfactual_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "counterfactual", help="soft-optimal behaviour under changed reward, transitions or discount (tabular fit)",
        description="Solve the soft-optimal policy of a tabular `genpqr fit` folder under changed primitives; "
                    "report rates, distributions, bootstrap intervals and whether the answer is identified "
                    "under the fit's normalization. Writes summary.csv, states.csv, identification.json and "
                    "counterfactual.joblib.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("fit_dir", help="output folder of `genpqr fit` (tabular mode)")
    p.add_argument("--spec", default=None, metavar="SPEC.json", help=f"JSON with keys among {', '.join(_KEYS)}")
    p.add_argument("--reward-change", dest="reward_change", action="append", default=None, metavar="LABEL=AMOUNT",
                   help="add AMOUNT to the reward of action LABEL in every state (repeatable)")
    p.add_argument("--transitions", default=None, metavar="FILE.npy", help="new kernel, (S, K, S) or (S*K, S)")
    p.add_argument("--gamma", type=float, default=None, help="new discount factor")
    p.add_argument("--initial", type=int, default=None, metavar="STATE", help="initial state index")
    p.add_argument("--horizon", type=int, default=None, help="steps from --initial (default: discounted occupancy)")
    p.add_argument("--bootstrap", type=int, default=None, metavar="B",
                   help="bootstrap replicates (default: the fit's --bootstrap, same resamples)")
    p.add_argument("--level", type=float, default=None, help="confidence level (default: the fit's)")
    p.add_argument("--check-normalization", dest="check_normalization", default=None, metavar="SPEC",
                   help="second normalization for the identification check: mean-zero or anchor:LABEL")
    p.add_argument("--out", default=None, metavar="DIR", help="output folder (default FIT_DIR/counterfactual)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=counterfactual_command)
    return p


def counterfactual_command(args) -> int:
    import warnings

    from ..counterfactual import IdentificationWarning

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", IdentificationWarning)
            result, out = run_counterfactual(args.fit_dir, _read_spec(args), args.out,
                                             progress=False if args.quiet else None)
    except (ValueError, TypeError, OSError) as exc:
        print(f"genpqr counterfactual: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    import pandas as pd

    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(result.to_frame().to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(result.describe())
    for w in caught:
        if issubclass(w.category, IdentificationWarning):
            print("WARNING: not invariant to the normalization: identified only if the fit's normalization is true "
                  "of the real reward", file=sys.stderr)
    print(f"wrote {out}/summary.csv, states.csv, identification.json, counterfactual.joblib")
    return 0

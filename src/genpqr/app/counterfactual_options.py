"""The options of ``genpqr counterfactual``, each declared once (:data:`CF_OPTIONS`): its flags,
the keys of a ``--spec`` file (:data:`SPEC_KEYS`) and their checks."""

from __future__ import annotations

from .options import Option, Options

__all__ = ["CF_OPTIONS", "SPEC_KEYS"]


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _typed(name: str, types, expected: str):
    """The check of a spec key of type ``types`` (booleans are no numbers; a list holds numbers)."""
    def check(value, spec):
        if value is not None and (isinstance(value, bool) or not isinstance(value, types)
                                  or isinstance(value, list) and not all(map(_number, value))):
            raise ValueError(f"{name} (--{name.replace('_', '-')}) must be {expected}, got {type(value).__name__} "
                             f"{value!r:.80}")
    return check


def _mapping(name: str, expected: str, amounts: bool = False):
    """The check of a spec key holding an object (``amounts``: numbers or lists of numbers)."""
    def check(value, spec):
        if value is not None and not isinstance(value, dict):
            raise ValueError(f"{name} must be {expected}, got {type(value).__name__} {value!r:.80}")
        for label, amount in (value or {}).items() if amounts else ():
            if not (_number(amount) or isinstance(amount, list) and all(map(_number, amount))):
                raise ValueError(f"{name}[{label!r}] must be a number or a list of numbers (one per state), got "
                                 f"{type(amount).__name__} {amount!r:.80}")
    return check


def _level(value, spec):
    _typed("level", (int, float), "a confidence level strictly between 0 and 1")(value, spec)
    if value is not None and not 0 < value < 1:
        raise ValueError(f"level must be a confidence level strictly between 0 and 1, got {value!r}")


#: The options of ``genpqr counterfactual``, each declared once: the flags, the keys of ``--spec``
#: (``json``) and their checks.
CF_OPTIONS = Options([
    Option("fit_dir", "output folder of `genpqr fit` (tabular mode)", required=True, positional=True,
           metavar="fit_dir", json=False),
    Option("spec", lambda: f"JSON with keys among {', '.join(SPEC_KEYS)}; flags override it", metavar="SPEC.json",
           shown_default="none", json=False),
    Option("reward_change", "add AMOUNT to the flow reward of action LABEL in every state; repeatable",
           action="append", metavar="LABEL=AMOUNT", shown_default="none",
           check=_mapping("reward_change", "an object {action label: amount or list of S amounts}", amounts=True)),
    Option("parameter_change", "change a structural parameter (a fit with --features): NAME=*F (multiply), NAME=+D / "
                               "NAME=-D (add / subtract) or NAME=V (set); repeatable", action="append",
           metavar="NAME=SPEC", shown_default="none",
           check=_mapping("parameter_change", 'an object {parameter name: number or "*F", "+D", "-D", "=V"}')),
    Option("money_parameter", "the structural parameter that converts utility into money (a fit with --features, "
                              "e.g. RC): the welfare change also in its units, with intervals; writes welfare.csv",
           metavar="NAME", shown_default="none: welfare in utility only",
           check=_typed("money_parameter", str, "the name of a structural parameter")),
    Option("route", "auto: the structural model when the fit has --features, else the nonparametric reward table",
           choices=("auto", "structural", "nonparametric"), shown_default="auto",
           check=_typed("route", str, "one of 'auto', 'structural', 'nonparametric'")),
    Option("transitions", "new kernel, (S, K, S) or (S*K, S); or FILE.npz, sparse (S*K, S)", metavar="FILE.npy",
           shown_default="the fit's", check=_typed("transitions", str, "the path of a .npy or sparse .npz kernel")),
    Option("gamma", "new discount factor", cli_type=float, shown_default="the fit's",
           check=_typed("gamma", (int, float), "a discount factor in [0, 1)")),
    Option("initial", "initial state index", cli_type=int, metavar="STATE",
           shown_default="none: the long-run distributions only",
           check=_typed("initial", (int, list), "a state index (an integer) or a list of S probabilities")),
    Option("horizon", "steps from --initial", cli_type=int, shown_default="none: the discounted occupancy",
           check=_typed("horizon", int, "a positive integer number of steps")),
    Option("bootstrap", "bootstrap replicates; 0: none", cli_type=int, metavar="B", params=("n_boot",),
           shown_default="the fit's --bootstrap, same resamples",
           check=_typed("bootstrap", int, "a number of replicates (an integer, 0: none)")),
    Option("level", "confidence level in (0, 1)", cli_type=float, shown_default="the fit's --level", check=_level),
    Option("check_normalization", "second normalization for the identification check: mean-zero or anchor:LABEL",
           metavar="SPEC", shown_default="mean-zero, or, when the fit is normalized by mean-zero, the anchor at the "
                                         "most chosen action",
           check=_typed("check_normalization", str, "'mean-zero' or 'anchor:LABEL'")),
    Option("min_visits", "support: states and cells seen fewer than N times count as thin", cli_type=int,
           metavar="N", shown_default="10", check=_typed("min_visits", int, "a positive integer")),
    Option("out", "output folder", metavar="DIR", shown_default="FIT_DIR/counterfactual", json=False),
    Option("trust", "load FIT_DIR/model.joblib even if genpqr did not sign it under your key (a fit from an older "
                    "genpqr, another account or machine). A model file is code: loading it runs what it holds, so "
                    "use --trust only for a file whose source you trust", default=False, action="store_true",
           json=False, params=("trusted",)),
    Option("quiet", "no progress bars", default=False, action="store_true", json=False),
    Option("verbose", "every warning in full (else one line each)", default=False, action="store_true", json=False),
], command="counterfactual", required_text="(required)")
#: The keys of a ``--spec`` file.
SPEC_KEYS = tuple(o.name for o in CF_OPTIONS if o.json)

"""The configuration of ``genpqr fit``: each option declared once (:data:`FIT_OPTIONS`), and
``FitConfig``, the typed config made from them (also the JSON file ``--config`` reads and
``config.json`` a fit writes; flags override it).

Every field is parsed when the config is made: the names of models, normalizations, transition
models, integration rules and estimators into :class:`~genpqr.registry.Spec`\\ s of their
registries (:mod:`genpqr.registry`), which build the library's objects once the data are read;
the clip into its bounds; numbers, lists and columns into their types.
"""

from __future__ import annotations

import numpy as np

from ..registry import (ACTION_FEATURES, CONTINUOUS_NORMALIZATIONS, CONTINUOUS_Q_MODELS, DENSITIES, INTEGRATION_RULES, MANY_ACTIONS, NORMALIZATIONS, POLICY_MODELS, Q_MODELS, STREAMS,
                        STRUCTURAL_ESTIMATORS, TRANSITION_MODELS)
from .config_checks import check_dask_scheduler, check_output_folder
from .infer import SPEC_HELP, check_specs, parse_specs
from .options import ConfigBase, Option, Options, Parsed

__all__ = ["FitConfig", "FIT_OPTIONS", "action_columns", "parse_bins", "ACTION_TYPES", "ENCODINGS", "DISCRETE",
           "CONTINUOUS", "STREAMED", "STATES", "TYPED", "check_estimator_needs_features", "check_action_features",
           "check_in_memory_action_features"]

ACTION_TYPES = ("discrete", "continuous")
#: The values of ``--encoding`` (``FQE(encoding=)`` / ``LSTDQ(encoding=)`` for discrete actions).
ENCODINGS = ("auto", "per_action", "joint", "action_features")

# the fits an option may be refused in (Option.refused)
DISCRETE = "discrete actions"
CONTINUOUS = "continuous actions"
STREAMED = "out of core"
STATES = "continuous states"  # a discrete-action fit outside the tabular mode
TYPED = "latent types"


# ------------------------------------------------------------------------------ parsers
def _text(value, values):
    return str(value)


def _lower(value, values):
    return str(value).strip().lower()


def _integer(value, values):
    if isinstance(value, bool) or float(value) != int(value):
        raise TypeError("expected an integer")
    return int(value)


def _number(value, values):
    if isinstance(value, bool):
        raise TypeError("expected a number")
    return float(value)


def _boolean(value, values):
    if not isinstance(value, bool):
        raise TypeError("expected true or false")
    return value


def _columns(value, values):
    items = value.split(",") if isinstance(value, str) else list(value)
    return [str(v).strip() for v in items if str(v).strip()]


def _action(value, values):
    return ",".join(str(v).strip() for v in value) if isinstance(value, (list, tuple)) else str(value)


def _bounds(value, values):
    items = value.split(",") if isinstance(value, str) else (list(value) if isinstance(value, (list, tuple)) else
                                                            [value])
    if not items or any(isinstance(v, bool) for v in items):
        raise TypeError("expected numbers")
    out = [float(v) for v in items]
    if any(np.isnan(v) for v in out):
        raise ValueError("NaN is not a bound")
    return out


def _edges(column, edges) -> list:
    if isinstance(edges, str):
        edges = edges.split(",")
    try:
        out = [float(e) for e in edges]
    except (TypeError, ValueError):
        raise ValueError(f"bins for column {column!r} must be numbers, got {edges!r}") from None
    if not out or np.any(np.diff(out) <= 0) or not np.all(np.isfinite(out)):
        raise ValueError(f"bins for column {column!r} must be finite, strictly increasing cut points, got {out}")
    return out


def parse_bins(text: str) -> tuple[str, list]:
    """``"COL=e1,e2,..."`` (a ``--bins`` flag) -> ``(COL, [e1, e2, ...])``."""
    column, sep, edges = text.partition("=")
    if not sep or not column.strip():
        raise ValueError(f"--bins must look like COLUMN=e1,e2,..., got {text!r}")
    return column.strip(), _edges(column.strip(), edges)


def _bins(value, values):
    if isinstance(value, list) and all(isinstance(v, str) for v in value):  # --bins flags
        return dict(parse_bins(text) for text in value)
    if not isinstance(value, dict):
        raise TypeError("expected an object column -> list of cut points")
    return {str(col): _edges(col, edges) for col, edges in value.items()}


def _separator(value, values):
    return {"\\t": "\t", "tab": "\t"}.get(str(value), str(value))


def _clip(value, values):
    from ..stage1._clipping import parse_clip

    text = ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)
    return Parsed(text.strip().lower(), parse_clip(text))


def _choice(name: str, choices):
    def parse(value, values):
        text = str(value).strip().lower()
        if text not in choices:
            raise ValueError(f"--{name.replace('_', '-')} must be one of {list(choices)}, got {text!r}")
        return text
    return parse


def spec_parser(discrete, continuous=None):
    """A parser into the registry of the fit's actions (``continuous``: of continuous actions)."""
    def parse(value, values):
        registry = continuous if continuous is not None and values.get("action_type") == "continuous" else discrete
        return registry.parse(str(value).strip().lower() if registry is STRUCTURAL_ESTIMATORS else value)
    return parse


# ------------------------------------------------------------------------------ checks of one value
def _gamma(value, config):
    if value is not None:
        from ..data._validation import check_gamma

        check_gamma(value)


def _at_least(flag: str, low: int):
    def check(value, config):
        if value is not None and value < low:
            raise ValueError(f"{flag} must be at least {low}, got {value}")
    return check


def _bootstrap(value, config):
    if value == 1 or value < 0:
        raise ValueError(f"--bootstrap must be 0 (none) or at least 2 replicates, got {value}")


def _level(value, config):
    if not 0 < value < 1:
        raise ValueError(f"--level must be in (0, 1), got {value}")


def _n_jobs(value, config):
    if value == 0:
        raise ValueError("--n-jobs must be a positive number of workers or negative (-1: one per core, -2: all but "
                         "one), got 0")


def _sep(value, config):
    if value is not None and len(value) == 0:
        raise ValueError("--sep must be a non-empty delimiter, e.g. ';'")


def _chunk_rows(value, config):
    if value is not None and value <= 0:
        raise ValueError(f"--chunk-rows must be a positive number of rows, got {value!r}")


def _time_gaps(value, config):
    from ..data._long_format import TIME_GAPS

    if value not in TIME_GAPS:
        raise ValueError(f"--time-gaps must be one of {list(TIME_GAPS)}, got {value!r}")


def _types(value, config):
    if value < 1:
        raise ValueError(f"--types must be a number of latent types >= 1, got {value!r}")


# ------------------------------------------------------------------------------ help built from the registries
def _policy_help() -> str:
    many = "; ".join(f"{e.name}: {e.help}" for e in POLICY_MODELS.entries(ACTION_FEATURES, MANY_ACTIONS))
    return (f"{POLICY_MODELS.forms()}; continuous actions: {DENSITIES.forms()}. Many actions described by "
            f"--action-features (docs/large_action_spaces.md) -- {many}")


_POLICY_DEFAULT = ("conditional-logit with --action-features; else auto for tabular states -- a spline logit chosen "
                   "by cross-validation when the state is ordered and its cells are sparse, else cell frequencies --, "
                   "basis-logit for continuous states (GenPQR()'s default), gaussian for continuous actions")


def _transition_help() -> str:
    return "tabular transitions: " + "; ".join(f"{e.form} ({e.help})" for e in TRANSITION_MODELS.entries())


# ------------------------------------------------------------------------------ the options of genpqr fit
_COLUMN, _NOT_IN_TYPES = "COL", frozenset({TYPED})
FIT_OPTIONS = Options([
    Option("data", "CSV or Parquet data file, or a folder of Parquet files (read out of core)", parse=_text,
           required=True, positional=True, metavar="DATA", path=True),
    Option("episode", "episode id column", parse=_text, required=True, metavar=_COLUMN),
    Option("time", "time step column", parse=_text, required=True, metavar=_COLUMN),
    Option("state", "state column(s)", default=[], parse=_columns, required=True, metavar="COL[,COL...]"),
    Option("action", "action column", parse=_action, required=True, metavar=_COLUMN),
    Option("action_type", "discrete (labels) or continuous (real-valued action column(s): --action a1,a2)",
           default="discrete", parse=_choice("action_type", ACTION_TYPES), choices=ACTION_TYPES,
           refused=frozenset({STREAMED, TYPED}), shown_value=True, params=("action_space",),
           values={"box": "continuous", "finite": "discrete"}),
    Option("action_low", "continuous actions: lower bound(s) of the box support, with --action-high", parse=_bounds,
           shown_default="none: unbounded", metavar="LOW[,LOW...]", refused=frozenset({DISCRETE})),
    Option("action_high", "continuous actions: upper bound(s) of the box support", parse=_bounds,
           shown_default="none: unbounded", metavar="HIGH[,HIGH...]", refused=frozenset({DISCRETE})),
    Option("terminated", "column flagging absorbing episode ends", parse=_text, metavar=_COLUMN,
           shown_default="none: no episode ends in an absorbing state"),
    Option("truncated", "column flagging steps after which logging stopped", parse=_text, metavar=_COLUMN,
           shown_default="none"),
    Option("outcome", "outcome column (kept in the data; see behavior:)", parse=_text, metavar=_COLUMN,
           shown_default="none", refused=frozenset({STREAMED})),
    Option("gamma", "discount factor in [0, 1)", parse=_number, required=True, cli_type=float, check=_gamma),
    Option("normalization", lambda: f"{NORMALIZATIONS.forms()}; continuous actions: "
                                    f"{CONTINUOUS_NORMALIZATIONS.forms()}",
           parse=spec_parser(NORMALIZATIONS, CONTINUOUS_NORMALIZATIONS), required=True, metavar="SPEC"),
    Option("policy_model", _policy_help, parse=spec_parser(POLICY_MODELS, DENSITIES), metavar="NAME",
           shown_default=_POLICY_DEFAULT, params=("force",)),
    Option("q_model", lambda: f"{Q_MODELS.forms()}; continuous actions: {CONTINUOUS_Q_MODELS.forms()}",
           parse=spec_parser(Q_MODELS, CONTINUOUS_Q_MODELS), metavar="NAME",
           shown_default="auto, GenPQR()'s own: exact for tabular states, the LSTD fixed point for "
                         "continuous states; linear for continuous actions"),
    Option("integration", lambda: f"continuous actions: mu-integrals by {INTEGRATION_RULES.forms()}",
           parse=spec_parser(INTEGRATION_RULES), metavar="SPEC", shown_default="mc:32", refused=frozenset({DISCRETE})),
    Option("clip", "probability clip of the policy: auto (no clip when every fitted probability is positive, else a "
                   "floor below the smallest fitted probability of an observed action), none, or bounds such as "
                   "0.01,0.99 (the paper's); the bounds used are printed", default="auto", parse=_clip,
           metavar="LOW,HIGH|none|auto", params=("clip",)),
    Option("cross_fit", "episode folds for the policy (out-of-fold diagnostics; <2: none)", default=5,
           parse=_integer, cli_type=int, metavar="K", values={None: 0}),
    Option("bootstrap", "bootstrap replicates over episodes", default=0, parse=_integer, cli_type=int, metavar="B",
           shown_default="0: none", check=_bootstrap, refused=frozenset({CONTINUOUS, STREAMED, TYPED}),
           params=("n_boot",)),
    Option("n_jobs", "bootstrap workers", default=1, parse=_integer, cli_type=int, metavar="J", check=_n_jobs),
    Option("bins", "cut a state column at these points (tabular mode; repeatable)", default={}, parse=_bins,
           action="append", metavar="COL=e1,e2,...", shown_default="none", refused=frozenset({CONTINUOUS, STREAMED})),
    Option("transition", _transition_help, default="auto", parse=spec_parser(TRANSITION_MODELS), metavar="SPEC",
           refused=frozenset({CONTINUOUS, STREAMED, STATES}), inert=lambda spec: spec.can(STREAMS),
           params=("transition_model",), path=True),
    Option("n_states", "tabular: number of states of one integer state column, when the top states never occur",
           parse=_integer, cli_type=int, metavar="S", check=_at_least("--n-states", 1),
           shown_default="none: the largest state in the data + 1", refused=frozenset({CONTINUOUS, STATES})),
    Option("features", "flow-utility features per (state, action): estimate their parameters (--estimator)",
           parse=_text, metavar="FILE.csv", shown_default="none", refused=frozenset({CONTINUOUS, STREAMED, STATES}),
           path=True),
    Option("estimator", lambda: "with --features: " + "; ".join(f"{e.name} ({e.help})"
                                                               for e in STRUCTURAL_ESTIMATORS.entries()),
           default="npl", parse=spec_parser(STRUCTURAL_ESTIMATORS), metavar="NAME"),
    Option("n_iterations", "maximum fitted-Q-evaluation iterations", parse=_integer, cli_type=int, metavar="N",
           check=_at_least("--n-iterations", 1), params=("n_iterations",),
           shown_default="per --q-model: linear 500, mlp 30, lightgbm 200, hgb 50, an import path 100; exact, "
                         "lstd and auto: a closed-form solve (auto's FQE, where it falls back to it: 100)"),
    Option("infer", SPEC_HELP, default=[], parse=parse_specs, action="append", metavar="SPEC", shown_default="none",
           refused=frozenset({CONTINUOUS, STREAMED, TYPED})),
    Option("level", "confidence level of the intervals", default=0.95, parse=_number, cli_type=float, check=_level),
    Option("seed", "random seed", default=0, parse=_integer, cli_type=int, params=("random_state",)),
    Option("out", "output folder (created; checked before fitting)", parse=_text, required=True, metavar="DIR",
           params=("target",),
           check=lambda value, config: check_output_folder(value, "--out") if value else None, path=True),
    Option("quiet", "no progress bars", default=False, parse=_boolean, action="store_true"),
    Option("verbose", "print the fit's internals (support rows, the stage-2 solve) and every warning in full",
           default=False, parse=_boolean, action="store_true"),
    Option("time_gaps", "a missing time step inside an episode: error (names the episode and step) or split (start "
                        "a new episode after the gap). Integer times must be consecutive; other times may not step "
                        "further than the episode's most common step", default="error", parse=_lower,
           choices=("error", "split"), check=_time_gaps, params=("time_gaps",), values={"split": "split"}),
    Option("sep", "CSV delimiter, e.g. ';' or '\\t'", parse=_separator, metavar="CHAR", shown_default="','",
           check=_sep, values={"\t": "'\\t'", ";": "';'", "|": "'|'", ",": "','"}),
    Option("save_data", "keep the training data in model.joblib (larger file; needed only to refit, bootstrap or "
                        "re-normalize the saved model)", default=False, parse=_boolean, action="store_true",
           params=("include_data",)),
    Option("chunk_rows", "out of core: stream the Parquet file/folder (sorted by episode) in chunks of N rows; "
                         "tabular counts or closed-form LSTD statistics, docs/out_of_core.md", parse=_integer,
           cli_type=int, metavar="N", check=_chunk_rows, refused=_NOT_IN_TYPES,
           shown_default="none: read the file into memory; a folder of Parquet files streams in chunks of "
                         "250000 rows"),
    Option("dask_scheduler", "out of core on a Dask cluster: a scheduler address (tcp://host:8786) or local:N (a "
                             "local cluster of N worker processes); the workers read the Parquet data, "
                             "docs/distributed.md", parse=_text, metavar="ADDRESS", shown_default="none",
           check=lambda value, config: check_dask_scheduler(value), refused=_NOT_IN_TYPES),
    Option("action_features", "discrete actions: CSV or Parquet file with one row per action (the labels in the "
                              "--action column, actions never taken included) and numeric feature columns; every "
                              "action gets a reward column, a never-taken one predicted from its features; in "
                              "memory only (docs/large_action_spaces.md)", parse=_text, metavar="FILE",
           shown_default="none", path=True),
    Option("types", "latent agent types: a finite mixture of M types over episodes; writes types.csv (the posterior "
                    "type probabilities per episode) and rewards.csv per type (a type column). Without --features: "
                    "EM over episodes, log likelihood, AIC and BIC; with --features: the mixture MLE (--estimator "
                    "npl or nfxp, all parameters type-specific) decides the types and each type's rewards are "
                    "fitted at its posteriors held fixed", default=1, parse=_integer, cli_type=int, metavar="M",
           check=_types, params=("n_types",)),
    Option("encoding", "how stage 2 sees discrete actions, FQE's encoding; action_features: one Q-model on "
                       "[s, x_a] from --action-features, pair features phi(s) (x) x_a for --q-model lstd",
           parse=_lower, choices=ENCODINGS, shown_default="auto", params=("encoding",)),
], command="fit")


# ------------------------------------------------------------------------------ the config
class _FitRules(ConfigBase):
    """The checks of a fit config that span options (each option's own check is declared with it)."""

    def check(self):
        """Raise ``ValueError`` naming the first missing or invalid setting; returns self."""
        missing = FIT_OPTIONS.missing(self)
        if missing:
            raise ValueError(f"missing required setting(s): {', '.join(o.cli for o in missing)} (give them as flags or "
                             "in --config FILE.json)")
        FIT_OPTIONS.check(self)
        _check_action_type(self)
        if self.estimator != "npl" and not self.features:
            check_estimator_needs_features(self.estimator)
        check_action_features(self)
        check_specs(self)
        unknown_bins = sorted(set(self.bins) - set(self.state))
        if unknown_bins:
            raise ValueError(f"--bins names column(s) {unknown_bins} that are not state columns {self.state}")
        return self


FitConfig = FIT_OPTIONS.config_class("FitConfig", _FitRules, """Everything ``genpqr fit`` needs; also the JSON config file (same keys).

    One field per option of :data:`FIT_OPTIONS`, parsed when the config is made (from flags, a
    JSON file or keyword arguments): spec names into :class:`~genpqr.registry.Spec` (still the
    text as typed), numbers and lists into their types. :meth:`check` then checks the settings
    that need no data.""")


def _check_action_type(config) -> None:
    """Options of the other action type: ``--action-low`` etc. need continuous actions; the
    probability clip is for discrete ones; a box needs both bounds."""
    if config.action_type != "continuous":
        given = FIT_OPTIONS.refused(config, DISCRETE)
        if given or "," in config.action:
            what = ", ".join(given) if given else f"several action columns ({config.action})"
            raise ValueError(f"{what} need(s) --action-type continuous (the actions are discrete labels)")
        return
    if (config.action_low is None) != (config.action_high is None):
        raise ValueError("--action-low and --action-high must be given together (the support is a box; neither: "
                         "unbounded actions)")
    if config.clip.value != "auto":
        raise ValueError(f"--clip {config.clip} is the probability clip of discrete actions; continuous actions floor "
                         "the log density instead (genpqr.GenPQR(continuous=ContinuousOptions(min_log_density=...)))")


def check_estimator_needs_features(estimator: str) -> None:
    """``--estimator`` without ``--features``: refused, since it would be ignored."""
    raise ValueError(f"--estimator {estimator} needs --features FILE.csv (the flow-utility features whose parameters "
                     f"it estimates); without --features nothing is estimated: drop --estimator, or add --features")


def check_action_features(config) -> None:
    """A policy model scoring actions by their features needs ``--action-features``; the table
    needs discrete actions read into memory (the models fit on the rows in memory)."""
    policy = config.policy_model
    if policy is not None and policy.can(ACTION_FEATURES) and not config.action_features:
        raise ValueError(f"--policy-model {policy.name} scores actions by their features: give --action-features "
                         "FILE (one row per action label, numeric feature columns)")
    if config.encoding == "action_features" and not config.action_features:
        raise ValueError("--encoding action_features fits stage 2 on the actions' features: give --action-features FILE")
    if not config.action_features:
        return
    if config.action_type == "continuous":
        raise ValueError("--action-features describes discrete action labels; it cannot be used with --action-type "
                         "continuous")
    for flag, value in (("--chunk-rows", config.chunk_rows), ("--dask-scheduler", config.dask_scheduler)):
        if value is not None:
            check_in_memory_action_features(flag)


def check_in_memory_action_features(how: str) -> None:
    """``--action-features`` out of core (``how``: the flag, or a folder of Parquet files): refused."""
    raise ValueError(f"--action-features cannot be used out of core ({how}): the policy model fits on the rows in "
                     f"memory; drop {how if how.startswith('--') else 'the folder (give one data file)'} to fit "
                     f"in memory, or drop --action-features")


def action_columns(config) -> list:
    """The action column(s) of ``--action a1,a2`` (continuous actions)."""
    return [c.strip() for c in str(config.action).split(",") if c.strip()]

"""The configuration of ``genpqr fit``: a typed dataclass (JSON-loadable; CLI flags override it)
and the parsers of its small string languages (normalization, transition, bins specs)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import numpy as np

from .config_checks import check_dask_scheduler, check_output_folder
from .transition_choice import parse_transition

__all__ = ["FitConfig", "action_columns", "parse_normalization", "parse_transition", "parse_bins",
           "parse_integration", "POLICY_MODELS", "Q_MODELS", "NORMALIZATION_FORMS", "ACTION_TYPES",
           "CONTINUOUS_POLICY_MODELS", "CONTINUOUS_Q_MODELS", "CONTINUOUS_NORMALIZATION_FORMS", "INTEGRATION_FORMS",
           "ESTIMATORS"]

ACTION_TYPES = ("discrete", "continuous")
POLICY_MODELS = ("auto", "frequency", "spline", "logistic", "mlp", "lightgbm", "conditional-logit")
Q_MODELS = ("exact", "linear", "mlp", "lightgbm", "hgb", "lstd")
NORMALIZATION_FORMS = "anchor:ACTION, mean-zero, state-anchor:COLUMN, value:COLUMN or behavior:OUTCOME_COLUMN"
CONTINUOUS_POLICY_MODELS = ("gaussian", "mlp-gaussian", "mdn", "flow")
CONTINUOUS_Q_MODELS = ("linear", "hgb", "mlp", "lightgbm")
CONTINUOUS_NORMALIZATION_FORMS = "anchor:VALUE[,VALUE...], gaussian:MEAN,SCALE, uniform or behavior"
INTEGRATION_FORMS = "mc:N, gauss-hermite:N or gauss-legendre:N"
_CONTINUOUS_ONLY_NORMALIZATIONS = ("gaussian", "uniform")
ESTIMATORS = ("npl", "nfxp", "pml", "projection")


@dataclass
class FitConfig:
    """Everything ``genpqr fit`` needs; also the JSON config file (same keys).

    Parameters
    ----------
    data : str
        CSV or Parquet file in long format (one row per episode and time step).
    episode, time : str
        Column names.
    action : str
        Action column name; with ``action_type="continuous"`` a comma-separated list of
        columns (one per action dimension; a JSON list is accepted).
    action_type : {"discrete", "continuous"}
        ``discrete`` (labels; :class:`genpqr.GenPQR`) or ``continuous`` (real-valued actions;
        :class:`genpqr.GenPQR` on continuous actions, see :mod:`genpqr.app.fit_continuous`).
    action_low, action_high : list of float, optional
        Continuous actions: the bounds of the box support (one value for every dimension, or
        one per dimension); both or neither (default: unbounded, ``R^m``).
    state : list of str
        State column name(s) (a comma-separated string is accepted).
    terminated, truncated, outcome : str, optional
        Column names (see :func:`genpqr.data.from_pandas`).
    gamma : float in [0, 1)
    normalization : str
        ``anchor:ACTION``, ``mean-zero``, ``state-anchor:COLUMN``, ``value:COLUMN`` or
        ``behavior:OUTCOME_COLUMN`` (see the module docstring). Continuous actions:
        ``anchor:VALUE[,VALUE...]`` (point mass, one value per action dimension),
        ``gaussian:MEAN,SCALE`` (``N(MEAN, SCALE^2)`` in every dimension; unbounded actions),
        ``uniform`` (bounded actions) or ``behavior`` (``mu = pi_hat``, g = 0).
    policy_model : str, optional
        ``auto`` (the tabular default: ``spline`` when the state is ordered -- one integer
        column numbered by its value, with ``--transition increment:`` or ``--n-states`` --
        and the cells are sparse, else ``frequency``; see
        :func:`genpqr.stage1.choose_tabular_policy`, the rule ``GenPQR`` applies by default; the
        choice and its reason are printed and reported), ``frequency`` (cell frequencies; tabular only), ``spline`` (a
        multinomial logit on a cubic spline basis of the ordered state, knots and penalty by
        episode-grouped cross-validated log loss; tabular only), ``logistic`` (standardized
        multinomial logistic regression; one-hot states in tabular mode; the continuous
        default), ``mlp`` (:class:`genpqr.models.nn.MLPClassifier`), ``lightgbm``
        (``LGBMClassifier(verbose=-1)``) or an import path ``package.module:Class``
        (instantiated with no arguments).
    q_model : str, optional
        ``exact`` (tabular), ``linear`` (ridge per action), ``mlp``
        (:class:`genpqr.models.nn.DuelingQNetwork`, 30 iterations), ``lightgbm``
        (:class:`genpqr.models.boosting.BoostedQModel`, iterations chosen on 20% held-out episodes),
        ``hgb`` (scikit-learn's HistGradientBoostingRegressor, likewise; the continuous
        default) or an import path. Default: ``exact`` for tabular data, else ``hgb``.
        Continuous actions: ``gaussian`` (heteroscedastic degree-2 linear Gaussian; the
        default), ``mlp-gaussian``, ``mdn``, ``flow`` or an import path for the policy (each
        squashed onto the box when the actions are bounded); ``linear`` (degree-2 polynomial
        features + least squares; the default), ``hgb``, ``mlp`` (scikit-learn's
        MLPRegressor) or ``lightgbm`` (``LGBMRegressor``) for Q, each a regressor on ``[s, a]``.
    integration : str, optional
        Continuous actions: the rule for the ``mu``-integrals: ``mc:N`` (Monte Carlo, N draws
        per next state; default ``mc:32``), ``gauss-hermite:N`` (Gaussian mu) or
        ``gauss-legendre:N`` (bounded actions).
    clip : str
        Probability clip of stage 1: ``auto`` (default: no clip when every fitted
        probability is positive, else a floor below the smallest fitted probability of an
        observed action; :mod:`genpqr.stage1`), ``none``, or ``LOW,HIGH`` (the paper:
        ``0.01,0.99``). The bounds used are printed and reported.
    cross_fit : int
        Episode folds for stage 1 (out-of-fold log loss and calibration); < 2: no cross-fitting.
    bootstrap : int
        Bootstrap replicates over whole episodes (0: none; else at least 2).
    n_jobs : int
        Parallel bootstrap workers (joblib).
    bins : dict column -> list of float
        Cut points per state column (tabular mode).
    transition : str
        Tabular mode: ``auto`` (:func:`genpqr.stage2.select_transition_model`), ``counts``
        (maximum likelihood), ``shrinkage``, ``lowrank``, ``classifier``, ``increment:MAX[:RESET_ACTION]``
        (increments ``0..MAX`` whose distribution does not depend on the state; under the
        reset action the state restarts at 0 and that period's increment is added from 0,
        the timing of Rust (1987): ``P(.|x, reset) = P(.|0, keep)``; the increment after a
        reset is counted as ``x' - 0``) or a ``.npy`` (or sparse ``.npz``) file holding
        the kernel ((S, K, S) or (S*K, S), states numbered as ``state_index``).
    n_states : int, optional
        Tabular mode with one integer (or binned) state column numbered by its value: the
        number of states when some of the top ones never occur in the data (e.g. mileage
        bins of an engine-replacement model).
    features : str, optional
        Tabular mode: CSV of reward features, one row per (state, action) with the action
        column, ``state_index`` or the state columns, and one numeric column per feature.
        Pairs never visited may be left out (zero features, zero weight). The features
        define the flow utility ``u_theta(s, a) = sum_k theta_k f_k(s, a)`` whose parameters
        ``estimator`` estimates.
    estimator : {"npl", "nfxp", "pml", "projection"}
        With ``features``: ``npl`` (default; nested pseudo-likelihood iterated to convergence,
        the maximum likelihood estimator), ``nfxp`` (Rust's nested fixed point, the same
        estimate), ``pml`` (Hotz-Miller two-step pseudo-likelihood) or ``projection`` (weighted
        least squares of the reward table on the features). See
        docs/structural_estimation.md.
    n_iterations : int, optional
        Maximum FQE iterations (default per ``q_model``).
    level : float
        Confidence level of the bootstrap intervals.
    seed : int
    out : str
        Output folder (created).
    quiet : bool
        No progress bars.
    time_gaps : {"error", "split"}
        A missing time step inside an episode: ``error`` (default; names the first episode and
        step) or ``split`` (a new episode starts after each gap); see
        :func:`genpqr.data.time_gap_rows` for the rule.
    sep : str, optional
        CSV field delimiter (default: comma; e.g. ``";"``).
    save_data : bool
        Keep the training data inside ``model.joblib`` (default False: a small file that
        still predicts; see :meth:`genpqr.GenPQR.save` for what needs the data).
    chunk_rows : int, optional
        Out of core: read the Parquet file or folder in chunks of this many rows
        (:mod:`genpqr.app.stream`; also the mode for a folder of Parquet files).
    dask_scheduler : str, optional
        Out of core on a Dask cluster (:func:`genpqr.scale.fit_dask`): a scheduler
        address (``tcp://host:8786``), or ``local:N`` for a local cluster of N worker
        processes started for the fit. Every worker must be able to read the data path.
    types : int
        Latent agent types M (default 1); M > 1: per-type rewards and ``types.csv`` (:mod:`genpqr.app.latent_types`);
        with ``features``: the mixture MLE of the structural parameters (:mod:`genpqr.structural.types`).
    action_features : str, optional
        Discrete actions: a CSV or Parquet file with one row per action, the labels in the
        ``action`` column (actions never taken included) and numeric feature columns: the
        action set of the fit (:func:`genpqr.app.action_features.read_action_table`); the policy model
        defaults to ``conditional-logit`` (:class:`genpqr.stage1.ConditionalLogit`).
    encoding : str, optional
        Stage 2's ``FQE(encoding=)`` (default: the API's ``auto``); ``action_features`` needs ``action_features``.
    """

    data: str | None = None
    episode: str | None = None
    time: str | None = None
    state: list = field(default_factory=list)
    action: str | None = None
    action_type: str = "discrete"
    action_low: list | None = None
    action_high: list | None = None
    terminated: str | None = None
    truncated: str | None = None
    outcome: str | None = None
    gamma: float | None = None
    normalization: str | None = None
    policy_model: str | None = None
    q_model: str | None = None
    integration: str | None = None
    clip: str = "auto"
    cross_fit: int = 5
    bootstrap: int = 0
    n_jobs: int = 1
    bins: dict = field(default_factory=dict)
    transition: str = "auto"
    n_states: int | None = None
    features: str | None = None
    estimator: str = "npl"
    n_iterations: int | None = None
    level: float = 0.95
    seed: int = 0
    out: str | None = None
    quiet: bool = False
    time_gaps: str = "error"
    sep: str | None = None
    save_data: bool = False
    chunk_rows: int | None = None
    dask_scheduler: str | None = None
    action_features: str | None = None
    types: int = 1
    encoding: str | None = None

    # -------------------------------------------------------------- construction
    @classmethod
    def from_dict(cls, values: dict) -> "FitConfig":
        """A config from a mapping with the field names as keys (unknown keys are refused)."""
        return cls().updated(values)

    @classmethod
    def from_json(cls, path) -> "FitConfig":
        """A config from a JSON file holding one object (paths in it are relative to the
        working directory, as on the command line)."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"config file {str(path)!r} does not exist")
        try:
            values = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"config file {str(path)!r} is not valid JSON: {exc}") from None
        if not isinstance(values, dict):
            raise ValueError(f"config file {str(path)!r} must hold a JSON object, got {type(values).__name__}")
        return cls.from_dict(values)

    def updated(self, values: dict) -> "FitConfig":
        """A copy with ``values`` (field name -> value) applied and coerced."""
        names = {f.name for f in fields(self)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown config key(s) {unknown}; valid keys are {sorted(names)}")
        return replace(self, **{k: _coerce(k, v) for k, v in values.items()})

    def to_dict(self) -> dict:
        return asdict(self)

    def with_absolute_paths(self, base=None) -> "FitConfig":
        """A copy whose file and folder settings (``data``, ``features``, ``action_features``, a
        ``transition`` kernel file, ``out``) are absolute, resolved against ``base`` (default: the working
        directory). ``genpqr fit`` writes this to ``config.json`` so that ``genpqr fit --config
        DIR/config.json`` reruns the same fit from any folder."""
        base = Path.cwd() if base is None else Path(base)

        def absolute(p):
            return None if p in (None, "") else str((base / Path(p).expanduser()).resolve())

        transition = self.transition
        if parse_transition(transition)[0] == "file":
            transition = absolute(transition)
        return replace(self, data=absolute(self.data), features=absolute(self.features), out=absolute(self.out),
                       transition=transition, action_features=absolute(self.action_features))

    def to_json(self, path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    def check(self) -> "FitConfig":
        """Raise ``ValueError`` naming the first missing or invalid setting; returns self."""
        required = ("data", "episode", "time", "state", "action", "gamma", "normalization", "out")
        missing = [k for k in required if getattr(self, k) in (None, "", [])]
        if missing:
            flags = ", ".join("DATA" if k == "data" else f"--{k.replace('_', '-')}" for k in missing)
            raise ValueError(f"missing required setting(s): {flags} (give them as flags or in --config FILE.json)")
        from ..data.validation import check_gamma

        check_gamma(self.gamma)
        if self.action_type not in ACTION_TYPES:
            raise ValueError(f"--action-type must be discrete or continuous, got {self.action_type!r}")
        continuous = self.action_type == "continuous"
        kind, _ = parse_normalization(self.normalization, continuous=continuous)
        if not continuous:
            given = [flag for flag, value in (("--action-low", self.action_low), ("--action-high", self.action_high),
                                              ("--integration", self.integration)) if value is not None]
            if given or "," in self.action:
                what = ", ".join(given) if given else f"several action columns ({self.action})"
                raise ValueError(f"{what} need(s) --action-type continuous (the actions are discrete labels)")
            if self.policy_model in CONTINUOUS_POLICY_MODELS:
                raise ValueError(f"--policy-model {self.policy_model} is a density for continuous actions; with "
                                 f"discrete actions use one of {list(POLICY_MODELS)} (or --action-type continuous)")
        else:
            if (self.action_low is None) != (self.action_high is None):
                raise ValueError("--action-low and --action-high must be given together (the support is a box; "
                                 "neither: unbounded actions)")
            if self.integration is not None:
                parse_integration(self.integration)
        parse_transition(self.transition)
        from ..stage1 import parse_clip

        if parse_clip(self.clip) != "auto" and continuous:
            raise ValueError(f"--clip {self.clip} is the probability clip of discrete actions; continuous actions "
                             "floor the log density instead (genpqr.GenPQR(continuous=ContinuousOptions("
                             "min_log_density=...)))")
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"--estimator must be one of {list(ESTIMATORS)}, got {self.estimator!r}")
        if self.estimator != "npl" and not self.features:
            check_estimator_needs_features(self.estimator)
        if self.bootstrap == 1 or self.bootstrap < 0:
            raise ValueError(f"--bootstrap must be 0 (none) or at least 2 replicates, got {self.bootstrap}")
        if not 0 < self.level < 1:
            raise ValueError(f"--level must be in (0, 1), got {self.level}")
        if self.n_states is not None and self.n_states < 1:
            raise ValueError(f"--n-states must be at least 1, got {self.n_states}")
        if self.n_iterations is not None and self.n_iterations < 1:
            raise ValueError(f"--n-iterations must be at least 1, got {self.n_iterations}")
        check_settings(self)
        check_action_features(self)
        unknown_bins = sorted(set(self.bins) - set(self.state))
        if unknown_bins:
            raise ValueError(f"--bins names column(s) {unknown_bins} that are not state columns {self.state}")
        return self


def check_estimator_needs_features(estimator: str) -> None:
    """``--estimator`` without ``--features``: refused, since it would be ignored."""
    raise ValueError(f"--estimator {estimator} needs --features FILE.csv (the flow-utility features whose parameters "
                     f"it estimates); without --features nothing is estimated: drop --estimator, or add --features")


def check_action_features(config: FitConfig) -> None:
    """``--action-features`` and ``--policy-model conditional-logit`` go together, with discrete
    actions read into memory (the conditional logit fits on the rows in memory)."""
    if config.policy_model == "conditional-logit" and not config.action_features:
        raise ValueError("--policy-model conditional-logit scores actions by their features: give --action-features "
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
    raise ValueError(f"--action-features cannot be used out of core ({how}): the conditional logit fits on the rows in "
                     f"memory; drop {how if how.startswith('--') else 'the folder (give one data file)'} to fit "
                     f"in memory, or drop --action-features")


def action_columns(config: FitConfig) -> list:
    """The action column name(s) of ``--action a1,a2`` (continuous actions)."""
    return [c.strip() for c in str(config.action).split(",") if c.strip()]


def check_settings(config: "FitConfig") -> None:
    """Checks that need no data: worker count, time-gap rule, delimiter, and an output folder
    that can be written (so that a long fit does not fail at the end)."""
    from ..data import TIME_GAPS

    if config.n_jobs == 0:
        raise ValueError("--n-jobs must be a positive number of workers or negative (-1: one per core, -2: all but "
                         "one), got 0")
    if config.time_gaps not in TIME_GAPS:
        raise ValueError(f"--time-gaps must be one of {list(TIME_GAPS)}, got {config.time_gaps!r}")
    if config.sep is not None and len(config.sep) == 0:
        raise ValueError("--sep must be a non-empty delimiter, e.g. ';'")
    if config.chunk_rows is not None and not (isinstance(config.chunk_rows, int) and config.chunk_rows > 0):
        raise ValueError(f"--chunk-rows must be a positive number of rows, got {config.chunk_rows!r}")
    check_dask_scheduler(config.dask_scheduler)
    check_output_folder(config.out, "--out")


def _coerce(key: str, value):
    """JSON / CLI value -> field type, with a message naming the key."""
    if value is None:
        return [] if key == "state" else ({} if key == "bins" else value)
    try:
        if key == "action" and isinstance(value, (list, tuple)):
            return ",".join(str(v).strip() for v in value)
        if key in ("action_low", "action_high"):
            items = value.split(",") if isinstance(value, str) else (list(value) if isinstance(value, (list, tuple))
                                                                      else [value])
            if not items or any(isinstance(v, bool) for v in items):
                raise TypeError("expected numbers")
            out = [float(v) for v in items]
            if any(np.isnan(v) for v in out):
                raise ValueError("NaN is not a bound")
            return out
        if key in ("action_type", "estimator"):
            return str(value).strip().lower()
        if key == "state":
            items = value.split(",") if isinstance(value, str) else list(value)
            return [str(v).strip() for v in items if str(v).strip()]
        if key == "bins":
            if not isinstance(value, dict):
                raise TypeError("expected an object column -> list of cut points")
            return {str(col): _edges(col, edges) for col, edges in value.items()}
        if key in ("gamma", "level"):
            return float(value)
        if key == "clip":
            from ..stage1 import parse_clip

            if isinstance(value, (list, tuple)):
                value = ",".join(str(v) for v in value)
            parse_clip(str(value))
            return str(value).strip().lower()
        if key in ("cross_fit", "bootstrap", "n_jobs", "n_iterations", "seed", "n_states", "chunk_rows", "types"):
            if isinstance(value, bool) or float(value) != int(value):
                raise TypeError("expected an integer")
            return int(value)
        if key == "sep":
            return {"\\t": "\t", "tab": "\t"}.get(str(value), str(value))
        if key == "time_gaps":
            return str(value).strip().lower()
        if key in ("quiet", "save_data"):
            if not isinstance(value, bool):
                raise TypeError("expected true or false")
            return value
        return str(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"config key {key!r}: cannot use {value!r} ({exc})") from None


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
    """``"COL=e1,e2,..."`` -> ``(COL, [e1, e2, ...])``."""
    column, sep, edges = text.partition("=")
    if not sep or not column.strip():
        raise ValueError(f"--bins must look like COLUMN=e1,e2,..., got {text!r}")
    return column.strip(), _edges(column.strip(), edges)


def parse_normalization(spec: str, continuous: bool = False) -> tuple[str, str | None]:
    """``"anchor:a"`` -> ``("anchor", "a")``; ``"mean-zero"`` -> ``("mean-zero", None)``.

    ``continuous``: the forms for continuous actions (``anchor:VALUE[,VALUE...]``,
    ``gaussian:MEAN,SCALE``, ``uniform``, ``behavior``); the others raise ``ValueError``."""
    forms = CONTINUOUS_NORMALIZATION_FORMS if continuous else NORMALIZATION_FORMS
    if not isinstance(spec, str):
        raise ValueError(f"--normalization must be one of {forms}, got {spec!r}")
    kind, sep, arg = spec.partition(":")
    kind = kind.strip().lower().replace("_", "-")
    kind = {"behaviour": "behavior", "meanzero": "mean-zero", "state-anchor": "state-anchor"}.get(kind, kind)
    if continuous:
        return _parse_continuous_normalization(spec, kind, arg.strip())
    if kind in _CONTINUOUS_ONLY_NORMALIZATIONS:
        raise ValueError(f"--normalization {spec} is for continuous actions (--action-type continuous); with "
                         f"discrete actions use {NORMALIZATION_FORMS}")
    if kind == "mean-zero":
        if arg:
            raise ValueError(f"--normalization mean-zero takes no argument, got {spec!r}")
        return kind, None
    if kind in ("anchor", "state-anchor", "value", "behavior"):
        if not arg:
            what = {"anchor": "ACTION", "behavior": "OUTCOME_COLUMN"}.get(kind, "COLUMN")
            raise ValueError(f"--normalization {kind} needs an argument: {kind}:{what}")
        return kind, arg
    raise ValueError(f"--normalization must be one of {NORMALIZATION_FORMS}, got {spec!r}")


def _parse_continuous_normalization(spec: str, kind: str, arg: str):
    """The continuous forms; the argument comes back as a tuple of floats (or None)."""
    def numbers(what):
        try:
            values = tuple(float(v) for v in arg.split(","))
        except ValueError:
            values = ()
        if not arg or not values or not all(np.isfinite(values)):
            raise ValueError(f"--normalization {kind} needs {what} for continuous actions, got {spec!r}")
        return values

    if kind == "anchor":
        return kind, numbers("numbers: anchor:VALUE (one value per action dimension, comma-separated)")
    if kind == "gaussian":
        values = numbers("two numbers: gaussian:MEAN,SCALE")
        if len(values) != 2 or values[1] <= 0:
            raise ValueError(f"--normalization gaussian:MEAN,SCALE needs a mean and a positive scale, got {spec!r}")
        return kind, values
    if kind in ("uniform", "behavior"):
        if arg and kind == "behavior":
            raise ValueError(f"--normalization behavior:{arg} (g from an outcome column) is not supported for "
                             "continuous actions; use behavior (mu = pi_hat, mean reward 0 under the behaviour) or "
                             f"another of {CONTINUOUS_NORMALIZATION_FORMS}")
        if arg:
            raise ValueError(f"--normalization {kind} takes no argument for continuous actions, got {spec!r}")
        return kind, None
    if kind in ("mean-zero", "state-anchor", "value"):
        hint = (" (the continuous counterpart of mean-zero is uniform, on bounded actions)" if kind == "mean-zero"
                else "")
        raise ValueError(f"--normalization {kind} is not supported for continuous actions{hint}; use one of "
                         f"{CONTINUOUS_NORMALIZATION_FORMS}")
    raise ValueError(f"--normalization must be one of {CONTINUOUS_NORMALIZATION_FORMS} for continuous actions, got "
                     f"{spec!r}")


def parse_integration(spec: str) -> tuple[str, int]:
    """``"mc:32"`` -> ``("mc", 32)``; also ``gauss-hermite:N`` and ``gauss-legendre:N``."""
    kind, _, arg = str(spec).partition(":")
    kind = kind.strip().lower().replace("_", "-")
    kind = {"monte-carlo": "mc", "montecarlo": "mc"}.get(kind, kind)
    try:
        n = int(arg)
    except ValueError:
        n = 0
    if kind not in ("mc", "gauss-hermite", "gauss-legendre") or n < 1:
        raise ValueError(f"--integration must be {INTEGRATION_FORMS} with a positive integer N, got {spec!r}")
    return kind, n

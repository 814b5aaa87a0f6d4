"""The paper's experiments as typed configurations (one registry, ``EXPERIMENTS``).

An :class:`ExperimentConfig` is everything a sweep needs except the seeds: the benchmark
settings, the methods (names in ``genpqr.experiments._methods.METHODS``, in the order of the
paper's table), per-method option overrides, the table layout and the notes printed above the
table. It round-trips through JSON (``to_dict`` / ``from_dict``) and is saved with the results
as ``config.json``.

Each experiment has a ``tiny`` variant (:func:`get_config` with ``tiny=True``): 1/40 of the training
trajectories (at least 10), 20 test trajectories, and every method switches to its own tiny schedule (a few epochs; see
``Method.tiny`` in ``genpqr.experiments._methods``), so that the whole pipeline runs in
seconds. Its name gets a ``-tiny`` suffix so its rows never mix with full-size ones.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

__all__ = ["Setting", "ExperimentConfig", "EXPERIMENTS", "LAYOUTS", "get_config"]

#: Table layouts understood by ``genpqr.experiments._report``.
LAYOUTS = ("matched", "methods", "actions")


@dataclass(frozen=True)
class Setting:
    """One benchmark setting (see ``make_synthetic_data``).

    Attributes
    ----------
    n_train : int
        Training trajectories (10 steps each).
    anchor_shift : float
        Shift of the anchor action's logit (-1.0: rare anchor, 0.0: common).
    n_actions : int
    n_test : int
        Test trajectories.
    """

    n_train: int
    anchor_shift: float
    n_actions: int = 5
    n_test: int = 300

    def __post_init__(self):
        for name in ("n_train", "n_actions", "n_test"):
            val = getattr(self, name)
            if isinstance(val, bool) or not isinstance(val, int) or val < 1:
                raise ValueError(f"Setting.{name} must be a positive integer, got {val!r}")
        if self.n_actions < 2:
            raise ValueError(f"Setting.n_actions must be at least 2, got {self.n_actions}")
        object.__setattr__(self, "anchor_shift", float(self.anchor_shift))

    @property
    def key(self) -> str:
        """Stable identifier of the setting in the results file."""
        return f"n={self.n_train} shift={self.anchor_shift:g} K={self.n_actions} test={self.n_test}"

    @property
    def label(self) -> str:
        """Short label of the paper's tables, e.g. ``"200 / shift -1"``."""
        return f"{self.n_train} / shift {self.anchor_shift:g}"


@dataclass(frozen=True)
class ExperimentConfig:
    """A sweep of settings x methods (x seeds, given at run time).

    Attributes
    ----------
    name : str
        Experiment name; the ``experiment`` column of the results file.
    settings : tuple of Setting
    methods : tuple of str
        Method names (registry ``METHODS``) in table order.
    layout : {"matched", "methods", "actions"}
        Table and figure layout: ``"matched"`` (Experiment 1: per setting, anchor count, MSE,
        correlation, time), ``"methods"`` (Experiment 2: MSE, correlation, NLL, time),
        ``"actions"`` (many-action study: per ``|A|``, anchor count and MSE).
    description : str
        One line, the table's title.
    notes : tuple of str
        Printed under the title (e.g. which policy estimate is shared).
    options : dict
        ``{method name: {group: {option: value}}}`` overrides of the methods' default options
        (see ``genpqr.experiments._methods``), for every method of the sweep.
    tiny : bool
        Tiny smoke-test variant: every method uses its tiny option defaults.
    """

    name: str
    settings: tuple
    methods: tuple
    layout: str
    description: str = ""
    notes: tuple = ()
    options: dict = field(default_factory=dict)
    tiny: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"ExperimentConfig.name must be a non-empty string, got {self.name!r}")
        settings = tuple(s if isinstance(s, Setting) else Setting(**s) for s in self.settings)
        if not settings:
            raise ValueError("ExperimentConfig.settings must hold at least one Setting")
        keys = [s.key for s in settings]
        if len(set(keys)) != len(keys):
            raise ValueError(f"ExperimentConfig.settings has duplicates: {keys}")
        methods = tuple(self.methods)
        if not methods or len(set(methods)) != len(methods):
            raise ValueError(f"ExperimentConfig.methods must be distinct method names, got {list(methods)}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"ExperimentConfig.layout must be one of {LAYOUTS}, got {self.layout!r}")
        object.__setattr__(self, "settings", settings)
        object.__setattr__(self, "methods", methods)
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "options", {k: dict(v) for k, v in dict(self.options).items()})

    def method_options(self, method: str) -> dict:
        """The option overrides of ``method`` in this sweep (``{}`` if none)."""
        return dict(self.options.get(method, {}))

    def with_methods(self, methods) -> "ExperimentConfig":
        """A copy running ``methods`` (any registered names) instead."""
        return replace(self, methods=tuple(methods))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["settings"] = [asdict(s) for s in self.settings]
        d["methods"] = list(self.methods)
        d["notes"] = list(self.notes)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ExperimentConfig":
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown ExperimentConfig field(s) {sorted(unknown)}; "
                             f"expected a subset of {sorted(known)}")
        return cls(**d)


# ------------------------------------------------------------------------------ the paper's
_SHARED = ("matched comparison: within a policy source, GenPQR and DeepPQR use the identical policy estimate (each "
           "method fits the same seeded model): AIRL (offline, the specification's settings: 60 BC epochs, 80 "
           "adversarial passes, the benchmark's known transition) as in the paper, and behaviour cloning (MLP "
           "(64, 64)) as a second comparison; times include fitting the policy estimate")
_NN_FQE = ("GenPQR: neural FQE with our default schedule (dueling MLP (128, 128), 16 Bellman iterations x 1 epoch, "
           "batch 512), chosen by benchmarks/nn_schedule.py; 'paper 8x4' rows use the paper's schedule (8 x 4 "
           "epochs, batch 256); behaviour cloning is the specification's (MLP (64, 64), 40 epochs, batch 256)")
_ORACLE = ("'Linear reward (supervised oracle)' regresses the logged (noisy true) rewards: it sees rewards no IRL "
           "method may use, so it is a reference, not a competitor (absent from the paper's table)")

#: Experiment 1 spans 200 to 2,500 trajectories: its GenPQR rows run at least this many Adam updates per
#: Bellman iteration (``min_updates_per_iteration``; genpqr.experiments._methods.updates_schedule), so the
#: 1-epoch default (49 updates at 2,500 trajectories, 4 at 200) does not leave the small-sample FQE
#: unconverged (docs/benchmarks.md, "Stage-2 updates at 200 trajectories").
EXP1_MIN_UPDATES = 32
_EXP1_UPDATES = (f"GenPQR rows of this experiment: at least {EXP1_MIN_UPDATES} mini-batch updates per Bellman "
                 "iteration (epochs = max(1, ceil(32 / batches per epoch)): 8 epochs at 200 trajectories, 2 at 1000, "
                 "1 at 2500)")

#: Many actions: with 40 actions each action's Q-head sees 1/40 of the rows and log pi_hat(0|s) enters the
#: reward with weight 10 (``-10 e_0(s) + 9 e_0(s')``), so both stages need more care than at |A| = 5
#: (docs/benchmarks.md, "Many actions: behaviour-cloning weight decay and FQE epochs"): behaviour cloning
#: with L2 weight decay (a smoother log pi_hat(0|.); it also has the lowest held-out NLL of the variants
#: tried) shared by both BC rows, and 4 epochs per Bellman iteration for GenPQR's FQE, which regresses
#: only the continuation P mu Q (``structure="continuation"``: the known log pi_hat(a|s) is not relearned
#: by one Q-head per action from 1/|A| of the rows; with the true policy its stage-2 error at |A| = 40 falls
#: from 0.174 to 0.038; docs/benchmarks.md, "FQE structure").
MANY_ACTIONS_BC_WEIGHT_DECAY = 1e-3
MANY_ACTIONS_FQE_EPOCHS = 4
MANY_ACTIONS_FQE_STRUCTURE = "continuation"
_MANY_BC = {"bc": {"weight_decay": MANY_ACTIONS_BC_WEIGHT_DECAY}}
_MANY_NOTE = (f"BC rows of this experiment: behaviour cloning with weight decay {MANY_ACTIONS_BC_WEIGHT_DECAY:g} "
              f"(shared by DeepPQR and GenPQR); GenPQR (BC, NN): {MANY_ACTIONS_FQE_EPOCHS} epochs per Bellman "
              f"iteration (16 x 4), regressing the continuation P mu Q")

EXPERIMENTS: dict[str, ExperimentConfig] = {
    "exp1": ExperimentConfig(
        name="exp1",
        settings=(Setting(200, -1.0), Setting(1000, -1.0), Setting(2500, 0.0)),
        methods=("DeepPQR (AIRL)", "GenPQR (AIRL, NN)", "DeepPQR", "GenPQR (BC, NN)"),
        layout="matched",
        description="Experiment 1: matched DeepPQR vs GenPQR comparison (anchor normalization, r(s, 0) = 0)",
        notes=(_SHARED, _NN_FQE, _EXP1_UPDATES,
               "anchor count: training rows with the anchor action, the sample of DeepPQR's anchor-Q step"),
        options={m: {"q_model": {"min_updates_per_iteration": EXP1_MIN_UPDATES}}
                 for m in ("GenPQR (AIRL, NN)", "GenPQR (BC, NN)")},
    ),
    "exp2": ExperimentConfig(
        name="exp2",
        settings=(Setting(1000, 0.0),),
        methods=("GenPQR (BC, NN)", "GenPQR (AIRL, NN)", "GenPQR (BC, GBT)", "GenPQR (AIRL, GBT)", "DeepPQR (AIRL)",
                 "MaxEnt-IRL", "AIRL state reward", "Log-policy pseudo-reward (AIRL)", "GenPQR (BC, NN, paper 8x4)",
                 "Linear reward (supervised oracle)"),
        layout="methods",
        description="Experiment 2: estimator choices at 1000 trajectories, common anchor (shift 0)",
        notes=("NN = neural FQE; GBT = boosted FQE (LightGBM, one tree per Bellman update, at most 30, early "
               "stopping on a 20% episode split); BC / AIRL = the policy estimate (as in the paper, DeepPQR, the "
               "log-policy pseudo-reward and the AIRL state reward use AIRL's)",
               _NN_FQE, _ORACLE),
    ),
    "many-actions": ExperimentConfig(
        name="many-actions",
        settings=tuple(Setting(2500, 0.0, n_actions=k) for k in (5, 10, 20, 40)),
        methods=("DeepPQR (AIRL)", "GenPQR (AIRL, NN)", "DeepPQR", "GenPQR (BC, NN)"),
        layout="actions",
        description="Many actions: 2500 trajectories, shift 0, |A| = 5, 10, 20, 40",
        notes=(_SHARED, _NN_FQE,
               "the sample size is fixed, so DeepPQR's anchor sample shrinks with |A| while GenPQR's Q-evaluation "
               "uses every row", _MANY_NOTE),
        options={"DeepPQR": _MANY_BC,
                 "GenPQR (BC, NN)": {**_MANY_BC, "q_model": {"epochs_per_iteration": MANY_ACTIONS_FQE_EPOCHS},
                                     "fqe": {"structure": MANY_ACTIONS_FQE_STRUCTURE}}},
    ),
}


def _tiny(config: ExperimentConfig) -> ExperimentConfig:
    settings = tuple(Setting(max(10, s.n_train // 40), s.anchor_shift, n_actions=s.n_actions, n_test=20)
                     for s in config.settings)
    notes = ("TINY smoke-test variant (1/40 of the training trajectories, 20 test trajectories, a few epochs): "
             "numbers are meaningless",
             *config.notes)
    return replace(config, name=f"{config.name}-tiny", settings=settings, notes=notes, tiny=True)


def get_config(name: str, *, tiny: bool = False) -> ExperimentConfig:
    """The registered experiment ``name`` (its tiny variant with ``tiny=True``)."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; choose one of {sorted(EXPERIMENTS)}")
    config = EXPERIMENTS[name]
    return _tiny(config) if tiny else config

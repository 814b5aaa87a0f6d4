"""The methods of the paper's tables, behind one contract, in a registry.

A ``Method`` is a callable ``method(data, seed, options) -> dict``: it builds its
estimator from ``options``, fits it on ``data.train`` (timing only the fit, with
``time.perf_counter``; simulating the data is not timed) and returns the metric row:

===================  ===========================================================================
``reward_mse``       mean squared error of the reward at the test (state, logged action) pairs,
                     against the true anchor-normalized reward (``r(s, 0) = 0``)
``reward_corr``      Pearson correlation at the same pairs (NaN for a constant estimate)
``policy_nll``       ``-mean log pi_hat(a|s)`` on the test rows, clipped pi_hat (NaN: no policy)
``fit_time``         seconds spent in ``fit``
``anchor_count``     training rows with the anchor action 0; ``anchor_fraction`` their share
``true_reward_var``  variance of the true reward at the test pairs (the scale of the MSE)
``warnings``         the distinct warning messages raised while fitting and predicting
===================  ===========================================================================

Options are ``{group: {name: value}}``. A method declares its groups and their defaults
(the specification's settings) and a ``tiny`` override (a few epochs, for smoke tests);
``Method.resolve`` merges ``defaults <- tiny (if asked) <- overrides`` and rejects unknown
groups. The groups used here:

* ``"bc"``: keyword arguments of the behaviour-cloning :class:`~genpqr.models.MLPClassifier`
  (seeded with the seed; every method of a seed with the same ``"bc"`` options fits the
  *identical* policy estimate, which is how Experiment 1 shares one estimate);
* ``"q_model"``: keyword arguments of the stage-2 model (:class:`~genpqr.models.DuelingQNetwork`:
  ``epochs_per_iteration``, ``batch_size``, ...; or :class:`~genpqr.models.BoostedQModel`);
* ``"fqe"``: GenPQR's FQE schedule (``n_iterations``, ``tol``, ``validation_fraction``,
  ``n_iter_no_change``);
* ``"estimator"``: extra keyword arguments of a baseline's class.

A faster neural schedule is one more registry entry, no runner change::

    register(Method("GenPQR (BC, NN, fast)", build_genpqr_nn,
                    defaults=merge_options(GENPQR_NN_DEFAULTS, {"fqe": {"n_iterations": 4},
                                                                 "q_model": {"batch_size": 1024}})))

The baselines (``genpqr.baselines``) are imported when a method is built, not when this
module is imported. The DeepPQR and log-policy rows use the specification's settings through the
baselines' own defaults (DeepPQR: 80 iterations x 3 epochs, Adagrad 1e-3, auxiliary network 200
epochs); the ``"estimator"`` group overrides them.
"""

from __future__ import annotations

import copy
import importlib
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .. import evaluation
from ..evaluation._metrics import anchor_count

__all__ = ["Method", "METHODS", "register", "get_method", "merge_options", "build_genpqr_nn", "build_genpqr_gbt",
           "build_genpqr_lstd", "build_genpqr_default",
           "updates_schedule", "build_deeppqr", "build_log_policy", "build_linear_oracle", "GENPQR_NN_DEFAULTS", "GENPQR_GBT_DEFAULTS",
           "PAPER_CLIP", "SPEC_BC_STRUCTURE", "GAMMA", "ANCHOR"]

#: Probability clip bounds of every fitted policy in the paper.
PAPER_CLIP = (0.01, 0.99)
#: Discount of the benchmark.
GAMMA = 0.9
#: Anchor action of the benchmark's normalization (``g = 0``).
ANCHOR = 0
_MAX_WARNING_CHARS = 500


def merge_options(base: dict, override: dict | None) -> dict:
    """``base`` with ``override``'s groups merged in, key by key (deep copies; inputs untouched)."""
    out = copy.deepcopy({g: dict(v) for g, v in base.items()})
    for group, values in (override or {}).items():
        if not isinstance(values, dict):
            raise TypeError(f"options[{group!r}] must be a dict of keyword arguments, got {type(values).__name__}")
        out.setdefault(group, {}).update(copy.deepcopy(values))
    return out


@dataclass(frozen=True)
class Method:
    """A named benchmark method: ``method(data, seed, options) -> metric row``.

    Parameters
    ----------
    name : str
        Row label in the tables.
    build : callable ``(data, seed, options) -> estimator``
        Returns an unfitted estimator with ``fit(transitions)`` and
        ``reward(states, actions) -> (n,)``, and ``log_policy(states) -> (n, K)`` when
        ``has_policy``.
    defaults : dict
        ``{group: {option: value}}``; the groups the method accepts.
    tiny : dict
        Overrides for smoke tests (merged over ``defaults`` by ``resolve(tiny=True)``).
    has_policy : bool
        Whether the estimator has a policy estimate (``policy_nll`` is NaN otherwise).
    preload : tuple of str
        Modules imported before the timer starts (importing torch takes seconds and would
        otherwise be charged to the first fit of every worker process).
    """

    name: str
    build: Callable[[Any, int, dict], Any]
    defaults: dict = field(default_factory=dict)
    tiny: dict = field(default_factory=dict)
    has_policy: bool = True
    preload: tuple = ()

    def resolve(self, overrides: dict | None = None, *, tiny: bool = False) -> dict:
        """Full options: ``defaults``, then ``tiny`` (if asked), then ``overrides``."""
        unknown = set(overrides or {}) - set(self.defaults)
        if unknown:
            raise ValueError(f"method {self.name!r} has no option group(s) {sorted(unknown)}; "
                             f"its groups are {sorted(self.defaults)}")
        options = merge_options(self.defaults, self.tiny if tiny else None)
        return merge_options(options, overrides)

    def __call__(self, data, seed: int, options: dict | None = None) -> dict:
        """Build, fit (timed) and evaluate on ``data`` (a ``SyntheticData``); returns the row."""
        options = self.resolve() if options is None else options
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for module in self.preload:
                importlib.import_module(module)
            estimator = self.build(data, int(seed), options)
            start = time.perf_counter()
            estimator.fit(data.train)
            fit_time = time.perf_counter() - start
            row = evaluate(estimator, data, has_policy=self.has_policy)
        row["fit_time"] = fit_time
        row["warnings"] = _warning_text(caught)
        return row


def evaluate(estimator, data, *, has_policy: bool = True) -> dict:
    """Metrics of a fitted estimator on ``data.test`` (see the module docstring)."""
    test = data.test
    truth = data.true_test_reward()
    estimate = np.asarray(estimator.reward(test.states, test.actions), dtype=np.float64)
    if estimate.shape != truth.shape:
        raise ValueError(f"reward(states, actions) must return shape {truth.shape}, got {estimate.shape}")
    log_policy = estimator.log_policy(test.states) if has_policy else None
    nll = float("nan") if log_policy is None else evaluation.policy_nll(log_policy, test.actions)
    count = anchor_count(data.train.actions, ANCHOR)
    return {
        "reward_mse": evaluation.reward_mse(estimate, truth),
        "reward_corr": evaluation.reward_correlation(estimate, truth),
        "policy_nll": nll,
        "anchor_count": count,
        "anchor_fraction": count / data.train.n,
        "true_reward_var": float(np.var(truth)),
    }


def _warning_text(caught) -> str:
    seen = []
    for w in caught:
        msg = f"{w.category.__name__}: {w.message}"
        if msg not in seen:
            seen.append(msg)
    text = " | ".join(seen)
    return text if len(text) <= _MAX_WARNING_CHARS else text[: _MAX_WARNING_CHARS - 3] + "..."


# ------------------------------------------------------------------------------ builders
def anchor_normalization():
    """The benchmark's normalization: anchor action ``ANCHOR`` with ``g = 0``."""
    from ..normalization import anchor_action

    return anchor_action(ANCHOR)


def behaviour_cloning(seed: int, options: dict):
    """The shared stage-1 model: ``MLPClassifier(random_state=seed, **options["bc"])``."""
    from ..models._nn import MLPClassifier

    return MLPClassifier(random_state=seed, **layer_tuples(options.get("bc", {})))


def airl_policy(data, seed: int, options: dict):
    """The AIRL stage-1 model: offline AIRL with the benchmark's known deterministic transition
    (``AIRL(transition=env.transition, random_state=seed, **options["airl"])``)."""
    from ..baselines._airl import AIRL

    return AIRL(transition=data.env.transition, random_state=seed, **layer_tuples(options.get("airl", {})))


def stage1_model(data, seed: int, options: dict):
    """The policy estimate named by ``options["policy"]["kind"]``: ``"bc"`` (default) or ``"airl"``.
    Every method of a seed with the same options fits the identical (seeded) estimate."""
    kind = options.get("policy", {}).get("kind", "bc")
    if kind == "bc":
        return behaviour_cloning(seed, options)
    if kind == "airl":
        return airl_policy(data, seed, options)
    raise ValueError(f"options['policy']['kind'] must be 'bc' or 'airl', got {kind!r}")


def layer_tuples(kwargs: dict) -> dict:
    """JSON turns tuples into lists; layer sizes go back to tuples."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}


def _genpqr(data, seed, options, q_model):
    from ..estimator import GenPQR
    from ..stage2 import FQE

    fqe = options.get("fqe")  # FQE's settings (iterations, tolerance, early stopping, structure)
    return GenPQR(normalization=anchor_normalization(), gamma=GAMMA, policy_model=stage1_model(data, seed, options),
                  q_model=FQE(q_model, **fqe) if fqe else q_model, clip=PAPER_CLIP, random_state=seed,
                  progress=False)


def updates_schedule(q_options: dict, n_rows: int) -> dict:
    """``q_options`` with ``min_updates_per_iteration`` (if present) turned into epochs.

    An epoch count means a different amount of optimization at each sample size: one epoch at
    batch 512 is 49 Adam updates on 2,500 trajectories (25,000 rows) but 4 on 200 trajectories
    (2,000 rows). ``min_updates_per_iteration = m`` makes every Bellman iteration run at least
    ``m`` mini-batch updates: ``epochs_per_iteration = max(epochs_per_iteration,
    ceil(m / ceil(n_rows / batch_size)))``. The option is removed from the returned dict (the
    Q-network has no such parameter); without it, ``q_options`` is returned unchanged.
    """
    out = dict(q_options)
    m = out.pop("min_updates_per_iteration", None)
    if m is None:
        return out
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"options['q_model']['min_updates_per_iteration'] must be a positive integer or None, "
                         f"got {m!r}")
    n_rows = int(n_rows)
    if n_rows < 1:
        raise ValueError(f"n_rows must be a positive integer, got {n_rows}")
    per_epoch = -(-n_rows // min(int(out.get("batch_size", 256)), n_rows))
    epochs = out.get("epochs_per_iteration", 4)
    out["epochs_per_iteration"] = max(int(epochs), -(-int(m) // per_epoch))
    return out


def build_genpqr_nn(data, seed: int, options: dict):
    """GenPQR with behaviour cloning and neural FQE (dueling Q-network, warm-started); the
    ``q_model`` option ``min_updates_per_iteration`` scales the epochs to the training rows
    (:func:`updates_schedule`)."""
    from ..models._nn import DuelingQNetwork

    q_options = updates_schedule(layer_tuples(options.get("q_model", {})), data.train.n)
    return _genpqr(data, seed, options, DuelingQNetwork(random_state=seed, **q_options))


def build_genpqr_gbt(data, seed: int, options: dict):
    """GenPQR with behaviour cloning and boosted FQE (LightGBM, one tree per Bellman update)."""
    from ..models._boosting import BoostedQModel

    return _genpqr(data, seed, options, BoostedQModel(random_state=seed, **options.get("q_model", {})))


def build_genpqr_lstd(data, seed: int, options: dict):
    """GenPQR with behaviour cloning and closed-form Q-evaluation (LSTD in features, one solve)."""
    from ..stage2 import fourier_features, spline_features
    from ..stage2 import LSTDQ

    q_opts = dict(options.get("q_model", {}))
    kind = q_opts.pop("features", "spline")
    n_components = q_opts.pop("n_components", 300)
    rff_gamma = q_opts.pop("rff_gamma", 0.1)
    if kind == "spline":
        features = spline_features()
    elif kind == "rff":
        features = fourier_features(n_components=n_components, gamma=rff_gamma, random_state=seed)
    elif kind == "spline+rff":
        from sklearn.pipeline import make_union

        features = make_union(spline_features(),
                              fourier_features(n_components=n_components, gamma=rff_gamma, random_state=seed))
    else:
        features = kind  # "policy" or a transformer
    model = LSTDQ(features=features, random_state=seed, **q_opts)
    return _genpqr(data, seed, {k: v for k, v in options.items() if k != "fqe"}, model)


def build_deeppqr(data, seed: int, options: dict):
    """DeepPQR (Geng et al. 2020) on the shared behaviour-cloning estimate."""
    from ..baselines import DeepPQR

    return DeepPQR(normalization=anchor_normalization(), gamma=GAMMA, policy_model=stage1_model(data, seed, options),
                   clip=PAPER_CLIP, random_state=seed, **layer_tuples(options.get("estimator", {})))


def build_log_policy(data, seed: int, options: dict):
    """Log-policy pseudo-reward ``log pi_hat(a|s) - g(s)`` on the shared behaviour-cloning estimate."""
    from ..baselines._simple import LogPolicyReward

    return LogPolicyReward(policy_model=stage1_model(data, seed, options), clip=PAPER_CLIP, normalization=anchor_normalization(),
                           random_state=seed, **options.get("estimator", {}))


def build_airl_reward(data, seed: int, options: dict):
    """AIRL's state-only reward head g(s) as the reward (the paper's "AIRL state reward" row)."""
    return airl_policy(data, seed, options)


def build_maxent(data, seed: int, options: dict):
    """Neural MaxEnt-IRL: softmax-Q MLP (128, 128); its logits are reported as the reward."""
    from ..baselines._maxent import MaxEntIRL

    return MaxEntIRL(random_state=seed, **layer_tuples(options.get("estimator", {})))


def build_linear_oracle(data, seed: int, options: dict):
    """Ridge regression of the LOGGED rewards on action-specific linear features: a supervised
    oracle (it sees rewards), not an IRL method."""
    from ..baselines._simple import LinearRewardOracle

    return LinearRewardOracle(**{"alpha": 1.0, **options.get("estimator", {})})


# ------------------------------------------------------------------------------ registry
#: The specification's behaviour cloning: MLP (64, 64), Adam 5e-3, batch 256, 40 epochs.
BC_DEFAULTS = {"hidden_layer_sizes": (64, 64), "learning_rate": 5e-3, "batch_size": 256, "max_epochs": 40}
_BC_TINY = {"hidden_layer_sizes": (16,), "max_epochs": 2}
#: AIRL with the specification's settings (the class defaults): 60 BC epochs, 80 adversarial passes.
AIRL_DEFAULTS: dict = {}
_AIRL_TINY = {"policy_hidden_layer_sizes": (16,), "reward_hidden_layer_sizes": (16,),
              "potential_hidden_layer_sizes": (16,), "bc_epochs": 2, "adversarial_epochs": 1}
_BC = {"policy": {"kind": "bc"}}
_AIRL = {"policy": {"kind": "airl"}, "airl": AIRL_DEFAULTS}

#: FQE structure of the rows on the specification's behaviour cloning: regress Q itself (the paper's
#: Algorithm 2 as written). Regressing only the continuation P mu Q (GenPQR's default) uses log pi_hat
#: as it is, and the specification's 40-epoch BC without weight decay is rough enough that the direct
#: regression's smoothing wins there (exp2, 10 seeds: NN 0.286 direct vs 0.326 continuation), while
#: on a smooth (weight-decayed) estimate the continuation wins (NN 0.257 -> 0.225, GBT 0.749 -> 0.613;
#: docs/benchmarks.md, "FQE structure").
SPEC_BC_STRUCTURE = "direct"
#: Neural FQE as in the paper: trunk (128, 128), Adam 5e-3, batch 256, 8 iterations x 4 epochs,
#: behaviour cloning 40 epochs at batch 256.
GENPQR_NN_PAPER = {
    **_BC,
    "bc": BC_DEFAULTS,
    "q_model": {"hidden_layer_sizes": (128, 128), "learning_rate": 5e-3, "batch_size": 256,
                "epochs_per_iteration": 4},
    "fqe": {"n_iterations": 8, "tol": None, "structure": SPEC_BC_STRUCTURE},
}
#: Our default neural FQE schedule: 16 Bellman iterations x 1 epoch at batch 512 (behaviour cloning
#: unchanged, so every method shares one policy estimate): faster than the paper's 8 x 4 at a lower
#: reward MSE (benchmarks/nn_schedule.py, docs/benchmarks.md).
GENPQR_NN_DEFAULTS = merge_options(GENPQR_NN_PAPER, {"q_model": {"batch_size": 512, "epochs_per_iteration": 1},
                                                     "fqe": {"n_iterations": 16}})
#: Boosted FQE: lr 0.05, 32 leaves, min 20 per leaf, one tree per update, at most 30 updates,
#: early stopping (patience 10) on a 20% episode split, then refit on all rows.
GENPQR_GBT_DEFAULTS = {
    **_BC,
    "bc": BC_DEFAULTS,
    "q_model": {"learning_rate": 0.05, "num_leaves": 32, "min_child_samples": 20, "trees_per_iteration": 1},
    "fqe": {"n_iterations": 30, "tol": None, "validation_fraction": 0.2, "n_iter_no_change": 10,
            "structure": SPEC_BC_STRUCTURE},
}
_BASELINE_DEFAULTS = {**_BC, "bc": BC_DEFAULTS, "estimator": {}}
#: Closed-form Q-evaluation (genpqr.stage2.LSTDQ): splines per coordinate, per-action blocks, the fixed
#: point (docs/benchmarks.md compares feature maps and truncations).
GENPQR_LSTD_DEFAULTS = {**_BC, "bc": BC_DEFAULTS, "q_model": {"features": "spline", "alpha": 1e-4}}
#: Splines and 100 random Fourier features (interactions), the fixed point: the most accurate
#: LSTD variant measured per unit of time (benchmarks/lstd_features.py, docs/benchmarks.md).
GENPQR_LSTD_RFF = {**_BC, "bc": BC_DEFAULTS,
                   "q_model": {"features": "spline+rff", "n_components": 100, "alpha": 1e-4}}

#: Behaviour cloning with weight decay 1e-3 for 10 epochs (weight decay lowers the held-out policy
#: log loss, and with it 10 epochs are as good as 40: the choice needs no true reward; a smoother
#: log pi_hat(anchor|.) also cancels in the reward's -10 log pi(0|s) + 9 log pi(0|s') terms), then the
#: closed-form LSTD fixed point in splines and 100 random Fourier features: the experiment's fast path
#: before GenPQR's own defaults took its place (docs/benchmarks.md, "The default path of Experiment 2").
GENPQR_BC_WD_LSTD_RFF = {**_BC, "bc": {**BC_DEFAULTS, "weight_decay": 1e-3, "max_epochs": 10},
                         "q_model": {"features": "spline+rff", "n_components": 100, "alpha": 1e-4}}
#: Former name of :data:`GENPQR_BC_WD_LSTD_RFF`.
GENPQR_DEFAULT_PATH = GENPQR_BC_WD_LSTD_RFF


def build_genpqr_default(data, seed: int, options: dict):
    """``GenPQR()`` as users call it: its default first and second stage (on continuous states the
    basis logit and the LSTD fixed point on its basis, ``genpqr.estimator._defaults.default_q_model``),
    its default clip; only the benchmark's normalization, gamma and seed are given (the
    ``"estimator"`` group adds keyword arguments)."""
    from ..estimator import GenPQR

    return GenPQR(normalization=anchor_normalization(), gamma=GAMMA, random_state=seed, progress=False,
                  **options.get("estimator", {}))


def _with_airl(defaults: dict) -> dict:
    """The same method on the AIRL policy estimate (the ``bc`` group is dropped)."""
    out = {g: v for g, v in defaults.items() if g != "bc"}
    return merge_options(out, _AIRL)


METHODS: dict[str, Method] = {}


def register(method: Method, *, replace: bool = False) -> Method:
    """Add ``method`` to ``METHODS`` under its name."""
    if not isinstance(method, Method):
        raise TypeError(f"method must be a genpqr.experiments._methods.Method, got {type(method).__name__}")
    if method.name in METHODS and not replace:
        raise ValueError(f"a method named {method.name!r} is already registered; pass replace=True to replace it")
    METHODS[method.name] = method
    return method


def get_method(name: str) -> Method:
    """The registered method ``name``."""
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; registered methods: {list(METHODS)}") from None


_TORCH = ("torch",)
_NN_TINY = {"q_model": {"hidden_layer_sizes": (16,), "epochs_per_iteration": 1}, "fqe": {"n_iterations": 2}}
_GBT_TINY = {"fqe": {"n_iterations": 3, "n_iter_no_change": 2}}
_DEEPPQR_TINY = {"estimator": {"anchor_hidden_layer_sizes": (16,), "n_iterations": 2, "epochs_per_iteration": 1,
                               "aux_hidden_layer_sizes": (16,), "aux_epochs": 2}}
_TINY_BC = {"bc": _BC_TINY}
_TINY_AIRL = {"airl": _AIRL_TINY}

for _name, _build, _defaults, _tiny_opts, _preload in (
    ("GenPQR (BC, NN)", build_genpqr_nn, GENPQR_NN_DEFAULTS, _NN_TINY, _TORCH),
    ("GenPQR (BC, NN, paper 8x4)", build_genpqr_nn, GENPQR_NN_PAPER, _NN_TINY, _TORCH),
    ("GenPQR (BC, GBT)", build_genpqr_gbt, GENPQR_GBT_DEFAULTS, _GBT_TINY, ("torch", "lightgbm")),
    ("GenPQR (BC, LSTD)", build_genpqr_lstd, GENPQR_LSTD_DEFAULTS, {}, _TORCH),
    ("GenPQR (BC, LSTD, RFF)", build_genpqr_lstd, GENPQR_LSTD_RFF, {"q_model": {"n_components": 20}}, _TORCH),
    ("DeepPQR", build_deeppqr, _BASELINE_DEFAULTS, _DEEPPQR_TINY, _TORCH),
    ("Log-policy pseudo-reward", build_log_policy, _BASELINE_DEFAULTS, {}, _TORCH),
):
    register(Method(_name, _build, defaults=_defaults, tiny=merge_options(_TINY_BC, _tiny_opts), preload=_preload))
    airl_name = _name.replace("(BC, ", "(AIRL, ") if "(BC, " in _name else f"{_name} (AIRL)"
    register(Method(airl_name, _build, defaults=_with_airl(_defaults), tiny=merge_options(_TINY_AIRL, _tiny_opts),
                    preload=_preload))

register(Method("GenPQR (default path)", build_genpqr_default, defaults={"estimator": {}}))
register(Method("GenPQR (BC wd, LSTD, RFF)", build_genpqr_lstd, defaults=GENPQR_BC_WD_LSTD_RFF,
                tiny=merge_options(_TINY_BC, {"q_model": {"n_components": 20}}), preload=_TORCH))
register(Method("AIRL state reward", build_airl_reward, defaults=_AIRL, tiny=_TINY_AIRL, preload=_TORCH))
register(Method("MaxEnt-IRL", build_maxent, defaults={"estimator": {}}, preload=_TORCH,
                tiny={"estimator": {"hidden_layer_sizes": (16,), "max_epochs": 2}}))
register(Method("Linear reward (supervised oracle)", build_linear_oracle, defaults={"estimator": {}},
                has_policy=False))

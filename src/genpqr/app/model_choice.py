"""The models of ``genpqr fit`` named by ``--policy-model`` and ``--q-model`` (a built-in name
or an import path ``package.module:Class``), the tabular first stage chosen from the data
(``auto``/``spline``), and the :class:`~genpqr.GenPQR` estimator of a config.
"""

from __future__ import annotations

from .config import POLICY_MODELS, Q_MODELS, FitConfig

__all__ = ["LEARNER_METHODS", "import_object", "make_policy_model", "q_model_settings", "make_estimator",
           "choose_first_stage", "ENCODINGS", "with_encoding"]

#: The values of ``--encoding`` (``FQE(encoding=)`` / ``LSTDQ(encoding=)`` for discrete actions).
ENCODINGS = ("auto", "per_action", "joint", "action_features")


#: The methods a class named by an import path must have, by what it is (what genpqr calls on it).
LEARNER_METHODS = {"policy model": ("fit", "predict_proba"), "Q model": ("fit", "predict"),
                   "density": ("fit", "log_prob", "sample")}
_FLAGS = {"policy model": "--policy-model", "Q model": "--q-model", "density": "--policy-model"}


def import_object(path: str, what: str):
    """An instance of the learner class at ``package.module:Class``, made with no arguments.

    Only a class with the methods genpqr calls on a ``what`` (:data:`LEARNER_METHODS`: a policy
    model ``fit`` and ``predict_proba``; a Q model ``fit`` and ``predict``; a density ``fit``,
    ``log_prob`` and ``sample``) is accepted, checked before anything is instantiated or called:
    a function, a module or any other object is refused (``os:getcwd`` is never called). Importing
    the module runs its top-level code, as any import does: name modules you trust.

    Raises
    ------
    ValueError
        Naming the flag and config key (``--policy-model`` / ``policy_model``), when the path is
        malformed, cannot be imported, or names something other than such a class.
    """
    import importlib
    import inspect

    flag = _FLAGS[what]
    where = f"{flag} (config key {flag[2:].replace('-', '_')})"
    module, sep, name = path.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"{where}: a {what} import path must look like package.module:Class, got {path!r}")
    try:
        obj = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{where}: cannot import {what} {path!r}: {exc}") from None
    methods = LEARNER_METHODS[what]
    needs = " and ".join(f"{m}()" for m in methods)
    if not inspect.isclass(obj):
        kind = ("a function" if inspect.isroutine(obj) else "a module" if inspect.ismodule(obj)
                else f"an object of type {type(obj).__name__}")
        raise ValueError(f"{where}: {path!r} is {kind}, not a class; a {what} import path must name a class with "
                         f"{needs} (made with no arguments)")
    missing = [m for m in methods if not callable(getattr(obj, m, None))]
    if missing:
        raise ValueError(f"{where}: class {path!r} lacks {', '.join(f'{m}()' for m in missing)}; a {what} must have "
                         f"{needs}")
    try:
        return obj()
    except TypeError as exc:
        raise ValueError(f"{where}: class {path!r} cannot be made with no arguments ({exc}); write a subclass "
                         "whose defaults are the settings you want") from None


def make_policy_model(name: str, *, tabular: bool, n_states: int | None, seed: int):
    """The stage-1 classifier named by ``--policy-model``."""
    if name in ("auto", "spline"):
        if not tabular:
            raise ValueError(f"--policy-model {name} needs tabular states (use logistic, mlp or lightgbm)")
        raise ValueError(f"--policy-model {name} is chosen from the data by "
                         "genpqr.stage1.choose_tabular_policy")
    if name == "frequency":
        if not tabular:
            raise ValueError("--policy-model frequency needs tabular states (use logistic, mlp or lightgbm)")
        from ..stage1 import FrequencyClassifier

        return FrequencyClassifier(n_states=n_states)
    if name == "conditional-logit":  # GenPQR binds the data's action table (--action-features)
        from ..stage1 import ConditionalLogit

        return (ConditionalLogit(state_basis="onehot", n_states=n_states) if tabular
                else ConditionalLogit(state_basis="linear"))
    if name == "logistic":
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import OneHotEncoder, StandardScaler

        first = OneHotEncoder(handle_unknown="ignore") if tabular else StandardScaler()
        return make_pipeline(first, LogisticRegression(max_iter=2000))
    if name == "mlp":
        from ..models.nn import MLPClassifier

        return MLPClassifier(random_state=seed)
    if name == "lightgbm":
        try:
            from lightgbm import LGBMClassifier
        except ImportError:
            raise ValueError("--policy-model lightgbm needs the lightgbm package (pip install "
                             "genpqr[lightgbm])") from None
        return LGBMClassifier(verbose=-1, random_state=seed, n_jobs=1)
    if ":" in name:
        return import_object(name, "policy model")
    raise ValueError(f"--policy-model must be one of {list(POLICY_MODELS)} or package.module:Class, got {name!r}")


def q_model_settings(name: str, *, seed: int, n_iterations: int | None) -> dict:
    """GenPQR keyword arguments for the stage-2 model named by ``--q-model`` (FQE's settings in a
    :class:`~genpqr.stage2.FQE`)."""
    from ..stage2 import FQE

    if name == "exact":
        return {"q_model": "exact"}
    if name == "linear":
        from sklearn.linear_model import Ridge

        return dict(q_model=FQE(Ridge(alpha=1.0), encoding="per_action", n_iterations=n_iterations or 500, tol=1e-6))
    if name == "mlp":
        from ..models.nn import DuelingQNetwork

        return dict(q_model=FQE(DuelingQNetwork(random_state=seed), n_iterations=n_iterations or 30, tol=None))
    if name == "lightgbm":
        from ..models.boosting import BoostedQModel

        return dict(q_model=FQE(BoostedQModel(random_state=seed), n_iterations=n_iterations or 200,
                                validation_fraction=0.2))
    if name == "lstd":
        from ..stage2 import LSTDQ

        return dict(q_model=LSTDQ(n_iterations=n_iterations, random_state=seed))
    if name == "hgb":
        from sklearn.ensemble import HistGradientBoostingRegressor

        return dict(q_model=FQE(HistGradientBoostingRegressor(max_iter=100, random_state=seed),
                                n_iterations=n_iterations or 50, validation_fraction=0.2))
    if ":" in name:
        return dict(q_model=FQE(import_object(name, "Q model"), n_iterations=n_iterations or 100))
    raise ValueError(f"--q-model must be one of {list(Q_MODELS)} or package.module:Class, got {name!r}")


def make_estimator(config: FitConfig, normalization, index, transition_model, policy_model=None):
    """The (unfitted) :class:`~genpqr.GenPQR` of a discrete-action config; ``index`` is the
    :class:`~genpqr.app.states.StateIndex` of the tabular mode, else None."""
    from ..stage1 import parse_clip
    from ..estimator import GenPQR

    n_states = None if index is None else index.n_states
    if policy_model is None:
        policy_model = make_policy_model(config.policy_model, tabular=index is not None, n_states=n_states,
                                         seed=config.seed)
    return GenPQR(
        normalization=normalization, gamma=config.gamma, clip=parse_clip(config.clip),
        policy_model=policy_model,
        cross_fit=config.cross_fit if config.cross_fit >= 2 else None, n_states=n_states,
        transition_model=transition_model, random_state=config.seed, progress=False if config.quiet else None,
        n_types=getattr(config, "types", 1),
        **with_encoding(q_model_settings(config.q_model, seed=config.seed, n_iterations=config.n_iterations),
                        config.encoding))


def with_encoding(settings: dict, encoding: str | None) -> dict:
    """``--encoding`` over a Q model's own: ``FQE(encoding=)`` for FQE, ``LSTDQ(encoding=)`` for
    ``lstd`` (``auto`` keeps its per-action default); None keeps ``settings`` (the exact path has none)."""
    q = settings.get("q_model")
    if encoding is None or isinstance(q, str):
        return settings
    if hasattr(q, "fit_bellman") and "encoding" in q.get_params():
        q.set_params(encoding="per_action" if encoding == "auto" else encoding)
    elif hasattr(q, "encoding"):  # an FQE
        q.set_params(encoding=encoding)
    return settings


def choose_first_stage(config: FitConfig, data, index, transition_model=None):
    """Tabular ``auto``/``spline`` policy models: ``(classifier, FirstStageChoice)`` from
    :func:`genpqr.stage1.choose_tabular_policy`, the rule ``GenPQR`` applies with
    ``policy_model=None`` (the same function, folds seeded by ``--seed``); other tabular policy
    models ``(None, FirstStageChoice)`` saying it was requested (with the cells' sparsity);
    non-tabular ``(None, None)``. The state counts as *ordered*
    (:func:`genpqr.stage1.state_is_ordered`: mileage, age, stock) when its single integer
    column is its index and the transitions say so (``--transition increment:``, an
    ``IncrementKernel``) or ``--n-states`` numbers it; a plain integer column may be a category
    code, where a smooth model would be wrong. ``--policy-model spline`` asks for an ordered
    state (its index must be the column)."""
    if index is None:
        return None, None
    from ..stage1 import choose_tabular_policy, state_is_ordered

    ordered = (state_is_ordered(transition_model, config.n_states, identity=index.identity)
               or (index.identity and config.policy_model == "spline"))
    if config.policy_model not in ("auto", "spline"):
        return None, _requested_first_stage(config, data, index, ordered)
    return choose_tabular_policy(data, index.n_states, ordered=ordered,
                                 force="spline" if config.policy_model == "spline" else None, random_state=config.seed)


def _requested_first_stage(config: FitConfig, data, index, ordered: bool):
    """A ``FirstStageChoice`` for a policy model the user named: say so, with the cells' sparsity
    (by the folds of the ``auto`` rule)."""
    from ..stage1 import FirstStageChoice, sparsity

    sparse, median, zero_share, facts = sparsity(data, index.n_states, random_state=config.seed)
    hint = ("; cells are sparse and the state is ordered: --policy-model auto would choose a spline logit"
            if sparse and ordered and config.policy_model == "frequency" else "")
    return FirstStageChoice(config.policy_model, f"requested (--policy-model {config.policy_model}) ({facts}){hint}",
                            median, zero_share)

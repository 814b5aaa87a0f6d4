"""From a checked config and what the data tell to an unfitted :class:`~genpqr.GenPQR`: the one
place the command line builds an estimator (:func:`build_estimator`) and a normalization
(:func:`build_normalization`), for the in-memory, out-of-core, continuous-action and typed fits.

The names in the config are :class:`~genpqr.registry.Spec`\\ s parsed when it was made; here
each builds its object with what only the data tell (:class:`FitData`: the action labels, the
state numbering, the box of actions). Which path a name may take is a capability of its
registry entry (:mod:`genpqr.registry`), never its class or its spelling.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..registry import (ACTION_FEATURES, CHOSEN, CONTINUOUS_STATES, ORDERED, POLICY_MODELS, STREAMS, TABULAR)
from .config import FitConfig
from .flags import cli_text

__all__ = ["FitData", "BuiltEstimator", "build_estimator", "build_normalization", "q_model",
           "check_policy_model"]


@dataclass
class FitData:
    """What the data tell the builders.

    Attributes
    ----------
    transitions : Transitions or None
        The fit's transitions (None out of core: they are streamed).
    labels : ndarray of shape (K,) or None
        Discrete actions: the sorted action labels.
    index : StateIndex or None
        The tabular mode's state numbering.
    index_rows : ndarray of shape (n_rows,) or None
        The state index of every data row (tabular, in memory).
    frame : DataFrame or None
        The data rows (per-row normalization columns are read from it).
    transition_model : object
        A transition model given before the states were numbered
        (:func:`genpqr.app.states.tabular_states`), else None.
    space : BoxActions or None
        Continuous actions: the box.
    actions : ndarray of shape (n, m) or None
        Continuous actions: the logged actions.
    streamed : bool
        Out of core.
    """

    transitions: object = None
    labels: np.ndarray | None = None
    index: object = None
    index_rows: np.ndarray | None = None
    frame: object = None
    transition_model: object = None
    space: object = None
    actions: np.ndarray | None = None
    streamed: bool = False


@dataclass
class BuiltEstimator:
    """An unfitted estimator and how its first stage and transitions were chosen (for the outputs)."""

    estimator: object
    first_stage: object = None
    transition: object = None


def build_normalization(config: FitConfig, data: FitData):
    """The :class:`~genpqr.normalization.Normalization` of ``config.normalization`` on ``data``."""
    from .states import column_reader, label_matcher

    spec = config.normalization
    if data.space is not None:
        return spec.build(space=data.space, actions=data.actions)
    if data.streamed and not spec.can(STREAMS):
        raise ValueError(f"--normalization {spec} cannot be used out of core: use "
                         f"{spec.registry.forms(STREAMS)}")
    n_states = None if data.index is None else data.index.n_states
    return spec.build(label=label_matcher(config, data.labels),
                      state_column=column_reader(config, data.frame, data.labels, data.index_rows, n_states))


def build_estimator(config: FitConfig, data: FitData) -> BuiltEstimator:
    """The unfitted :class:`~genpqr.GenPQR` of a config whose defaults are resolved (its
    ``policy_model`` and ``q_model`` named), on ``data``."""
    from ..estimator import ContinuousOptions, GenPQR

    common = dict(normalization=build_normalization(config, data), gamma=config.gamma, random_state=config.seed,
                  progress=False if config.quiet else None)
    settings = config.q_model.build(seed=config.seed, n_iterations=config.n_iterations)
    if data.space is not None:  # continuous actions
        density = config.policy_model.build(space=data.space, seed=config.seed)
        return BuiltEstimator(GenPQR(**common, policy_model=density, cross_fit=_folds(config),
                                     q_model=q_model(settings),
                                     continuous=ContinuousOptions(integration=config.integration.build())))
    transition_model, transition = _transitions(config, data)
    policy_model, first_stage = _policy(config, data, transition_model)
    n_states = None if data.index is None else data.index.n_states
    if data.streamed:  # no held-out early stopping out of core
        return BuiltEstimator(GenPQR(**common, clip=config.clip.value, policy_model=policy_model,
                                     n_states=n_states if n_states is not None else config.n_states,
                                     q_model=q_model(settings, streamed=True)))
    estimator = GenPQR(**common, clip=config.clip.value, policy_model=policy_model, cross_fit=_folds(config),
                       n_states=n_states, transition_model=transition_model, n_types=config.types,
                       q_model=q_model(settings, encoding=config.encoding))
    return BuiltEstimator(estimator, first_stage, transition)


def _folds(config: FitConfig):
    return config.cross_fit if config.cross_fit >= 2 else None


def _transitions(config: FitConfig, data: FitData):
    """The tabular transition model (given, or chosen from the data by
    :func:`genpqr.app.transition_choice.choose_transition`) and the record of the choice."""
    if data.index is None or data.streamed:
        return data.transition_model, None
    from .transition_choice import choose_transition

    chosen, transition = choose_transition(config, data.transitions, data.index)
    return (data.transition_model if chosen is None else chosen), transition


def _policy(config: FitConfig, data: FitData, transition_model):
    """``(classifier, FirstStageChoice or None)`` of ``--policy-model`` (tabular: the record of how
    the first stage was chosen, or that it was requested)."""
    spec, index = config.policy_model, data.index
    tabular = index is not None
    check_policy_model(config, tabular, data.streamed)
    if data.streamed and tabular:
        return None, None
    if not tabular:
        return spec.build(tabular=False, n_states=None, seed=config.seed), None
    from ..stage1._first_stage import state_is_ordered

    ordered = (not getattr(index, "categories", None)  # text labels are unordered: no smoothing across their order
               and (state_is_ordered(transition_model, config.n_states, identity=index.identity)
                    or (index.identity and spec.can(ORDERED))))
    if spec.can(CHOSEN):
        classifier, choice = spec.build(data=data.transitions, n_states=index.n_states, ordered=ordered,
                                        seed=config.seed, tabular=True)
        return classifier, replace(choice, reason=cli_text(choice.reason))  # the command line's names
    return (spec.build(tabular=True, n_states=index.n_states, seed=config.seed),
            _requested_first_stage(config, data.transitions, index, ordered))


def check_policy_model(config: FitConfig, tabular: bool, streamed: bool = False) -> None:
    """``--policy-model`` fits the states: tabular-only models need tabular states, state-tower
    models continuous ones, and out of core tabular states take cell frequencies."""
    spec = config.policy_model
    if spec.can(TABULAR) and not tabular:
        raise ValueError(f"--policy-model {spec.name} needs tabular states (use "
                         f"{', '.join(POLICY_MODELS.names(without=(TABULAR, ACTION_FEATURES)))})")
    if spec.can(CONTINUOUS_STATES) and tabular:
        raise ValueError(f"--policy-model {spec.name} needs continuous states (a state vector for its state tower, "
                         f"not a tabular index); on tabular states use "
                         f"{' or '.join(POLICY_MODELS.names(ACTION_FEATURES, without=(CONTINUOUS_STATES,)))}")
    if streamed and tabular and not spec.can(TABULAR, STREAMS):
        raise ValueError(f"--policy-model {spec}: the out-of-core tabular path uses cell frequencies (frequency)")


def _requested_first_stage(config: FitConfig, data, index, ordered: bool):
    """A ``FirstStageChoice`` for a policy model the user named: say so, with the cells' sparsity
    (by the folds of the ``auto`` rule)."""
    from ..stage1._first_stage import FirstStageChoice, sparsity

    spec = config.policy_model
    sparse, median, zero_share, facts = sparsity(data, index.n_states, random_state=config.seed)
    hint = ("; cells are sparse and the state is ordered: --policy-model auto would choose a spline logit"
            if sparse and ordered and spec.can(TABULAR) else "")
    return FirstStageChoice(str(spec), f"requested (--policy-model {spec}) ({facts}){hint}", median, zero_share)


def q_model(settings: dict, *, encoding: str | None = None, streamed: bool = False):
    """``GenPQR(q_model=)`` of a Q factory's settings (``q_model`` and, for fitted Q evaluation,
    FQE's knobs: ``n_iterations``, ``tol``, ``validation_fraction``, ``encoding``): the exact
    solve's name, a closed-form model, or a :class:`~genpqr.stage2.FQE` carrying the knobs.

    ``encoding`` (``--encoding``) overrides the model's own: ``FQE(encoding=)``, or
    ``LSTDQ(encoding=)`` for ``lstd`` (``auto`` keeps its per-action default); the exact solve has
    none. ``streamed``: no held-out early stopping (out of core)."""
    from ..stage2 import FQE

    if "q_model" not in settings:  # auto: GenPQR()'s own default; another --encoding makes it FQE's
        if encoding in (None, "auto", "per_action"):
            return None
        return FQE(encoding=encoding, **{k: v for k, v in settings.items() if k != "validation_fraction"})
    q, knobs = settings["q_model"], {k: v for k, v in settings.items() if k != "q_model"}
    if isinstance(q, str) or hasattr(q, "fit_bellman"):
        if encoding is not None and not isinstance(q, str) and "encoding" in q.get_params():
            q.set_params(encoding="per_action" if encoding == "auto" else encoding)
        return q
    if streamed:
        knobs.pop("validation_fraction", None)
    if encoding is not None:
        knobs["encoding"] = encoding
    return FQE(regressor=q, **knobs)

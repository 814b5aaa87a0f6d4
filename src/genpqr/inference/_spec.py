"""Targets named in one string: the form ``genpqr fit --infer SPEC`` takes, parsed once, here.

::

    value:POLICY[;gamma=G][;reward=normalized|log_policy][;name=N]
    difference:POLICY,POLICY[;gamma=G][;reward=log_policy|normalized][;name=N]
    softmax[:A|B|...][;temperature=T][;gamma=G][;reward=normalized|log_policy][;name=N]
    reward-mean[;name=N]
    reward-at:STATE=ACTION[,STATE=ACTION...][;name=N]
    projection[;weights=data|efficient][;name=N]

``POLICY`` is ``behavior``, ``uniform``, ``action=LABEL`` (always ``LABEL``) or the name of a
policy table the caller read (``policies``: name -> (S, K) array or callable). ``projection`` uses
the ``features`` (and ``feature_names``) the caller passes (``genpqr fit --features``); its
``weights`` are one of ``PROJECTION_WEIGHTINGS`` (:func:`genpqr.inference.reward_projection`),
and with ``weights=efficient`` its components are the feature names followed by `` (efficient)``.
"""

from __future__ import annotations

import numpy as np

from ..normalization import mean_zero
from ._targets import (PROJECTION_WEIGHTINGS, Target, policy_value, reward_at, reward_mean, reward_projection,
                       softmax_value, value_difference)

__all__ = ["TARGET_KINDS", "parse_target", "target_kind"]

#: The target kinds :func:`parse_target` knows, with their forms.
TARGET_KINDS = {
    "value": "value:POLICY[;gamma=G][;reward=normalized|log_policy]",
    "difference": "difference:POLICY,POLICY[;gamma=G][;reward=log_policy|normalized]",
    "softmax": "softmax[:A|B|...][;temperature=T][;gamma=G][;reward=normalized|log_policy]",
    "reward-mean": "reward-mean",
    "reward-at": "reward-at:STATE=ACTION[,STATE=ACTION...]",
    "projection": "projection[;weights=" + "|".join(PROJECTION_WEIGHTINGS) + "] (on the features the caller gives)",
}
_OPTIONS = {"value": {"gamma", "reward", "name"}, "difference": {"gamma", "reward", "name"},
            "softmax": {"temperature", "gamma", "reward", "name"}, "reward-mean": {"name"}, "reward-at": {"name"},
            "projection": {"weights", "name"}}


def parse_target(spec: str, *, policies=None, labels=None, features=None, feature_names=None) -> Target:
    """The ``Target`` of ``spec`` (module docstring). ``labels``: the data's action labels
    (a label written in ``spec`` is matched by its text); ``policies``: name -> policy;
    ``features``: (S, K, p) array or callable for ``projection``."""
    kind, arg, options = _split(spec)
    name = options.pop("name", None)
    gamma = float(options["gamma"]) if "gamma" in options else None
    policy = (lambda text: _policy(text, policies, labels, spec))
    if kind == "value":
        return policy_value(policy(_needed(arg, kind, spec)), reward=options.get("reward", "normalized"), gamma=gamma,
                            name=name or f"V({arg.strip()})")
    if kind == "difference":
        first, sep, second = _needed(arg, kind, spec).partition(",")
        if not sep:
            raise ValueError(f"difference needs two policies, difference:POLICY,POLICY; got {spec!r}")
        return value_difference(policy(first), policy(second), reward=options.get("reward", "log_policy"), gamma=gamma,
                                name=name or f"V({first.strip()}) - V({second.strip()})")
    if kind == "softmax":
        actions = None if not arg.strip() else [_label(a, labels, spec) for a in arg.split("|")]
        return softmax_value(actions, float(options.get("temperature", 1.0)), reward=options.get("reward", "normalized"),
                             gamma=gamma, name=name)
    if arg.strip() and kind in ("reward-mean", "projection"):
        raise ValueError(f"{kind} takes no argument, got {spec!r}")
    if kind == "reward-mean":
        return reward_mean(name=name)
    if kind == "reward-at":
        return reward_at([_cell(c, labels, spec) for c in _needed(arg, kind, spec).split(",")], name=name)
    if features is None:
        raise ValueError(f"projection needs the features the reward is projected on (features=, an (S, K, p) array "
                         f"or a callable), got {spec!r}")
    weights = _weighting(options.get("weights", "data"), spec)
    if weights != "data":  # its components beside the data-weighted projection's: named apart
        if feature_names is None and not callable(features):
            feature_names = [f"theta[{j}]" for j in range(np.shape(features)[-1])]
        feature_names = None if feature_names is None else [f"{n} ({weights})" for n in feature_names]
    return reward_projection(features, names=feature_names, weights=weights,
                             name=name or ("projection" if weights == "data" else f"projection ({weights})"))


def target_kind(spec: str) -> str:
    """The kind of ``spec`` (a key of :data:`TARGET_KINDS`), its form checked without the data
    (the kind, its options, its argument): what a front end checks where the text enters."""
    kind, arg, options = _split(spec)
    if kind in ("value", "difference", "reward-at"):
        _needed(arg, kind, spec)
    if arg.strip() and kind in ("reward-mean", "projection"):
        raise ValueError(f"{kind} takes no argument, got {spec!r}")
    if kind == "projection":
        _weighting(options.get("weights", "data"), spec)
    return kind


def _split(spec):
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"an inference target must be a string like {TARGET_KINDS['value']!r}, got {spec!r}")
    head, *parts = [p.strip() for p in spec.split(";")]
    kind, _, arg = head.partition(":")
    kind = kind.strip().lower().replace("_", "-")
    if kind not in TARGET_KINDS:
        raise ValueError(f"unknown inference target {kind!r} in {spec!r}; expected one of: "
                         + "; ".join(TARGET_KINDS.values()))
    return kind, arg, _options(parts, kind, spec)


def _options(parts, kind, spec) -> dict:
    out = {}
    for part in parts:
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in _OPTIONS[kind]:
            raise ValueError(f"{kind} takes the options {sorted(_OPTIONS[kind])} as key=value after ';', got "
                             f"{part!r} in {spec!r}")
        out[key] = value.strip()
    return out


def _weighting(text, spec) -> str:
    text = text.strip().lower()
    if text not in PROJECTION_WEIGHTINGS:
        raise ValueError(f"projection: weights must be one of {list(PROJECTION_WEIGHTINGS)}, got {text!r} in {spec!r}")
    return text


def _needed(arg, kind, spec) -> str:
    if not arg.strip():
        raise ValueError(f"{kind} needs an argument: {TARGET_KINDS[kind]}; got {spec!r}")
    return arg.strip()


def _label(text, labels, spec):
    text = text.strip()
    if labels is None:
        return text
    for label in labels:
        if str(label) == text:
            return label
    raise ValueError(f"{spec!r} names action {text!r}, which is not one of the data's actions "
                     f"{[str(x) for x in labels]}")


def _policy(text, policies, labels, spec):
    text = text.strip()
    if text.lower() in ("behavior", "behaviour"):
        return "behavior"
    if text.lower() == "uniform":
        return mean_zero()  # its weights: uniform over the actions
    if text.lower().startswith("action="):
        return {_label(text.split("=", 1)[1], labels, spec): 1.0}
    if policies is not None and text in policies:
        return policies[text]
    known = "" if not policies else f", or one of the policy tables {sorted(policies)}"
    raise ValueError(f"{spec!r}: policy {text!r} is not behavior, uniform or action=LABEL{known}")


def _cell(text, labels, spec):
    state, sep, action = text.partition("=")
    if not sep:
        raise ValueError(f"reward-at cells are STATE=ACTION, got {text!r} in {spec!r}")
    try:
        s = int(state.strip())
    except ValueError:
        raise ValueError(f"reward-at: the state of {text!r} must be a state index, in {spec!r}") from None
    return s, _label(action, labels, spec)

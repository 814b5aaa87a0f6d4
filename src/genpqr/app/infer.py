"""``genpqr fit --infer SPEC``: debiased estimates of what the user asks of the reward, with
efficient-influence-function standard errors (:mod:`genpqr.inference`), written to
``inference.csv`` and printed.

The option is declared once (:data:`genpqr.app.config.FIT_OPTIONS`); its text is checked where
it enters (:func:`parse_specs`: the target's kind, options and argument, by
``genpqr.inference._spec.target_kind``) and read into targets once the data's action labels and
the ``--features`` are known (:func:`inference_targets`). A spec the data refuse (an action the
data never show, a state out of range, a cell on continuous states) is one line naming
``--infer`` and the spec. ``SPEC`` forms: :func:`genpqr.inference.parse_target`; ``reward-at``
names states by their ``state_index`` in ``rewards.csv``.
"""

from __future__ import annotations

__all__ = ["parse_specs", "check_specs", "inference_targets", "run_inference", "SPEC_HELP"]

FLAG = "--infer"
SPEC_HELP = ("debiased estimate and efficient-influence-function SE of a target of the reward (repeatable; "
             "writes inference.csv): value:POLICY[;gamma=G], difference:POLICY,POLICY, softmax[:A|B...]"
             "[;temperature=T], reward-mean, reward-at:STATE=ACTION[,...], projection (of --features); POLICY is "
             "behavior, uniform or action=LABEL; STATE the state_index of rewards.csv (docs/inference.md)")


def parse_specs(value, values) -> list:
    """The ``--infer`` texts (flags: a list; JSON: a string or a list), each checked without the
    data: a ``ValueError`` naming ``--infer`` and the spec otherwise."""
    items = [value] if isinstance(value, str) else list(value)
    if not items:  # no --infer: nothing to import (the inference wing costs seconds to import)
        return []
    from ..inference._spec import target_kind
    from ..messages import Message

    for text in items:
        if not isinstance(text, str):
            raise TypeError(f"{FLAG} takes target specs as text, got {text!r}")
        try:
            target_kind(text)
        except ValueError as exc:
            raise ValueError(Message(f"{FLAG} {text!r}: {exc}")) from None  # as it is (not "config key ...")
    return [str(t).strip() for t in items]


def check_specs(config) -> None:
    """What ``--infer`` needs from the other settings (no data needed): a projection needs
    ``--features``."""
    if not config.infer:  # nothing to import (the inference wing costs seconds to import)
        return
    from ..inference._spec import target_kind

    for text in config.infer:
        if target_kind(text) == "projection" and not config.features:
            raise ValueError(f"{FLAG} {text!r} needs --features FILE.csv (the features the reward is projected on)")


def inference_targets(config, labels, features=None, names=None) -> list:
    """The targets of ``--infer``, read with the data's action labels and the ``--features``."""
    from ..inference import parse_target

    out = []
    for text in config.infer:
        try:
            out.append(parse_target(text, labels=labels, features=features, feature_names=names))
        except ValueError as exc:
            raise ValueError(f"{FLAG} {text!r}: {exc}") from None
    return out


def run_inference(config, model, data, targets):
    """:meth:`genpqr.GenPQR.infer` on the fitted model and its rows (``--seed`` the folds,
    ``--level`` the intervals); a target the fit cannot answer is one line naming ``--infer``."""
    try:
        return model.infer(targets, data, level=config.level, random_state=config.seed, progress=not config.quiet)
    except ValueError as exc:
        which = f" {config.infer[0]!r}" if len(config.infer) == 1 else ""
        raise ValueError(f"{FLAG}{which}: {exc}") from None


def console_lines(result) -> list:
    """The summary ``genpqr fit`` prints (lines of at most 100 characters)."""
    return ["", *str(result.summary()).splitlines()]

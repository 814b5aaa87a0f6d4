r"""The probability clip of stage 1: parsing, the data-aware default and its diagnostics.

Stage 1 gives ``u(s, a) = log pi_hat(a|s)``; a probability of 0 (an action never chosen in a
cell) makes ``u = -inf``, so estimated probabilities are clipped to ``[low, high]`` and each
row renormalized (``genpqr.stage1._policy.clip_proba``). Where a bound binds, ``log pi_hat`` is
replaced by ``log(bound)``: the reward and ``Q`` of that action are then pulled toward
``log(bound)`` instead of being estimated. With two actions and the anchor normalization,
the reward difference at a state where the clip binds on both sides is
``log(high / low)`` (``log(0.99 / 0.01) = 4.595`` for the paper's clip), whatever the data
say. On panels with rare actions (replace, exit, default) a fixed clip such as the paper's
binds on most observed choices and decides the answer.

The clip is therefore chosen from the data by default (``clip="auto"``):

* **no clip**, ``(0, 1)``, when every fitted probability of every action at every training
  state and observed next state is strictly positive (e.g. a logit or spline-logit first
  stage, whose probabilities lie strictly inside (0, 1)): ``log pi_hat`` is finite and
  nothing is replaced;
* otherwise ``low = min(AUTO_LOW_MAX, AUTO_LOW_FRACTION * p_min)`` and ``high = 1``, where
  ``p_min`` is the smallest positive fitted probability of an observed action
  (``pi_hat(a_i|s_i)`` over the training rows, out-of-fold when cross-fitted). The lower
  bound then binds on no observed action that the first stage gives positive probability;
  it only floors the actions given probability 0 (never chosen at that state), and after
  renormalization an observed action of probability 1 loses at most ``low``. No upper
  bound is needed: the floor and the renormalization keep every probability positive.

Explicit bounds ``(low, high)`` and ``None`` (no clip; probabilities of 0 then raise) are
honoured as given. The share of observed actions whose probability hits a bound, and the
share of rows at whose state some action sits at the floor, are diagnostics; above
``CLIP_WARN_FRACTION`` a :class:`~genpqr.exceptions.ClippingWarning` says what the clip
does to the reward and how to change it.

After the clip, ``safe_log`` takes ``u = log pi_hat`` (refusing a zero probability with
what to do about it), and ``mu_expectation`` the known part ``sum_a mu(a|s) (u(s, a) -
g(s))`` of the Bellman targets, for the in-memory and the out-of-core stage 2 alike.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..messages import Mention, Message

__all__ = ["PAPER_CLIP", "CLIP_WARN_FRACTION", "AUTO_LOW_MAX", "AUTO_LOW_FRACTION", "parse_clip", "check_bounds", "auto_clip_from_summary",
           "auto_clip", "resolve_policy_clip", "clip_fractions", "clip_binds_message", "warn_if_clip_binds", "safe_log",
           "mu_expectation"]

#: The paper's clip (Ionides 2008); kept by the paper's experiments.
PAPER_CLIP = (0.01, 0.99)
#: Warn when more than this share of observed choices is decided by a clip bound.
CLIP_WARN_FRACTION = 0.05
#: The automatic lower bound is at most this ...
AUTO_LOW_MAX = 0.01
#: ... and at most this fraction of the smallest fitted probability of an observed action.
AUTO_LOW_FRACTION = 0.5
#: Rows weighing less than this share of the largest row weight do not set the auto clip.
_NEGLIGIBLE_WEIGHT = 1e-6


def check_bounds(clip) -> tuple[float, float]:
    """``(low, high)`` floats with ``0 <= low < high <= 1``; ``None`` or ``"none"`` is ``(0, 1)``."""
    if clip is None or (isinstance(clip, str) and clip.strip().lower() == "none"):
        return (0.0, 1.0)
    if isinstance(clip, str):
        raise TypeError(f"clip must be 'auto', 'none', None or a (low, high) pair, got {clip!r}")
    try:
        low, high = (float(c) for c in clip)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"clip must be 'auto', 'none', None or a (low, high) pair, got {clip!r}") from exc
    if not (0.0 <= low < high <= 1.0):
        raise ValueError(f"clip must satisfy 0 <= low < high <= 1, got {clip!r}")
    return low, high


def parse_clip(value):
    """A clip setting from the API, a config file or the command line: ``"auto"``, ``None``
    (from ``None``, ``"none"``), or ``(low, high)`` (from a pair or ``"LOW,HIGH"``)."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "auto":
            return "auto"
        if text in ("none", "off", "no"):
            return None
        parts = text.split(",")
        if len(parts) != 2:
            raise ValueError(f"clip must be auto, none or LOW,HIGH (e.g. 0.01,0.99), got {value!r}")
        try:
            return check_bounds([float(p) for p in parts])
        except (TypeError, ValueError):
            raise ValueError(f"clip must be auto, none or LOW,HIGH with 0 <= LOW < HIGH <= 1, got {value!r}") from None
    if value is None:
        return None
    return check_bounds(value)


def auto_clip(raw_rows: np.ndarray, actions: np.ndarray, raw_other: np.ndarray | None = None):
    """The data-aware clip (module docstring).

    Parameters
    ----------
    raw_rows : ndarray of shape (n, K)
        Unclipped fitted probabilities at the training rows (out-of-fold when cross-fitted).
    actions : ndarray of shape (n,)
        Observed action codes.
    raw_other : ndarray of shape (m, K), optional
        Unclipped probabilities at other states the fit evaluates (next states, the grid).

    Returns
    -------
    bounds : (low, high)
    rule : str
        The rule applied, with its numbers (printed by ``genpqr fit``).
    """
    raw_rows = np.asarray(raw_rows, dtype=np.float64)
    every = raw_rows if raw_other is None else np.vstack([raw_rows, np.asarray(raw_other, dtype=np.float64)])
    observed = raw_rows[np.arange(raw_rows.shape[0]), np.asarray(actions, dtype=np.int64)]
    positive = observed[observed > 0]
    return auto_clip_from_summary(float(every.min()) if every.size else 0.0,
                                  float(positive.min()) if positive.size else None,
                                  float(np.mean(np.any(raw_rows <= 0, axis=1))))


def auto_clip_from_summary(smallest: float, smallest_observed: float | None, zero_rows: float):
    """:func:`auto_clip` from three numbers that reduce over chunks (min, min, mean): the
    smallest fitted probability anywhere, the smallest positive one of an observed action
    (None if none) and the share of rows where some action has probability 0."""
    if smallest > 0:
        return (0.0, 1.0), ("auto: no clip (every fitted probability is strictly positive, smallest "
                            f"{smallest:.3g})")
    p_min = smallest_observed if smallest_observed is not None else AUTO_LOW_MAX / AUTO_LOW_FRACTION
    low = min(AUTO_LOW_MAX, AUTO_LOW_FRACTION * p_min)
    return (low, 1.0), (f"auto: low = min({AUTO_LOW_MAX:g}, {AUTO_LOW_FRACTION:g} x {p_min:.3g} (smallest fitted "
                        f"probability of an observed action)) = {low:.3g}, no upper bound; the first stage gives "
                        f"probability 0 to some action at the states of {zero_rows:.1%} of the rows")


def resolve_policy_clip(policy, clip, transitions):
    """Set ``policy.clip`` of a ``genpqr.stage1._policy.FittedPolicy`` (returned): the given bounds, or
    the data-aware rule of :func:`auto_clip` from the raw probabilities at the training rows of
    ``transitions`` and their observed next states (once per distinct (fold, state) when the
    states repeat: the same three numbers)."""
    if not (isinstance(clip, str) and clip.strip().lower() == "auto"):
        policy.clip, policy.clip_rule = check_bounds(clip), ("given" if clip is not None else "none (no clip)")
        return policy
    live = transitions.next_observed & ~transitions.terminated
    actions = transitions.actions
    keep = np.ones(transitions.n, dtype=bool)
    if transitions.sample_weight is not None:  # rows of (all but) zero weight are not data of this fit:
        weights = np.asarray(transitions.sample_weight)  # e.g. episodes a latent type's posterior excludes
        keep = weights > _NEGLIGIBLE_WEIGHT * weights.max()
        live = live & keep
    summary = _clip_summary_distinct(policy, transitions, actions, keep, live)
    if summary is not None:
        policy.clip, policy.clip_rule = auto_clip_from_summary(*summary)
        return policy
    raw_rows = policy.training_raw_proba(transitions.states)
    if transitions.sample_weight is not None:
        raw_rows, actions = raw_rows[keep], actions[keep]
    raw_next = policy.training_raw_proba(transitions.next_states[live], rows=live) if live.any() else None
    policy.clip, policy.clip_rule = auto_clip(raw_rows, actions, raw_next)
    return policy


def _clip_summary_distinct(policy, transitions, actions, keep, live):
    """:func:`auto_clip`'s three numbers (smallest probability at the kept rows and the live next
    states, smallest positive one of an observed action, share of kept rows with a zero) from the
    distinct (fold, state) rows and (fold, state, action) cells when the states repeat, else None."""
    rows = np.flatnonzero(keep)
    if rows.size == 0:
        return None
    at_rows = policy.distinct_training_raw_proba(transitions.states[rows], rows)
    if at_rows is None:
        return None
    raw, index, _ = at_rows
    from ._cells import present_keys

    cells = present_keys(index * policy.n_actions + actions[rows], raw.shape[0] * policy.n_actions)[0]
    observed = raw[cells // policy.n_actions, cells % policy.n_actions]
    positive = observed[observed > 0]
    zero_rows = float(np.bincount(index, minlength=raw.shape[0]) @ np.any(raw <= 0, axis=1) / rows.size)
    smallest = float(raw.min())
    nxt = np.flatnonzero(live)
    if nxt.size:
        at_next = policy.distinct_training_raw_proba(transitions.next_states[nxt], nxt)
        raw_next = at_next[0] if at_next is not None else policy.training_raw_proba(transitions.next_states[nxt], nxt)
        smallest = min(smallest, float(raw_next.min()))
    return smallest, (float(positive.min()) if positive.size else None), zero_rows


def clip_fractions(raw_rows: np.ndarray, actions: np.ndarray, bounds, index=None) -> tuple[float, float]:
    """``(observed, floored)``: the share of rows whose observed action's probability hits a
    bound, and the share of rows at whose state some action's probability is below ``low``
    (its ``log pi_hat`` is the floor). ``index`` (n,): ``raw_rows`` holds the distinct states
    and row ``i``'s probabilities are ``raw_rows[index[i]]`` (``genpqr.stage1._cells.RowTable``)."""
    low, high = bounds
    raw_rows = np.asarray(raw_rows, dtype=np.float64)
    actions = np.asarray(actions, dtype=np.int64)
    rows = np.arange(actions.shape[0]) if index is None else np.asarray(index)
    observed = raw_rows[rows, actions]
    observed = (observed < low) | (observed > high)
    floored = np.any(raw_rows < low, axis=1)[rows]
    return float(np.mean(observed)), float(np.mean(floored))


def clip_binds_message(fraction_observed: float, fraction_floored: float, bounds, rule: str) -> str | None:
    """The :class:`~genpqr.exceptions.ClippingWarning` text when either share exceeds
    ``CLIP_WARN_FRACTION`` (what the clip does to the reward and what to change), else None."""
    low, high = bounds
    parts = []
    if fraction_observed > CLIP_WARN_FRACTION:
        parts.append(f"{fraction_observed:.1%} of the observed actions' probabilities hit the clip bounds "
                     f"({low:.3g}, {high:.3g})")
    if fraction_floored > CLIP_WARN_FRACTION:
        parts.append(f"at the states of {fraction_floored:.1%} of the rows some action's probability is below the "
                     f"lower clip bound {low:.3g} (never or rarely chosen there)")
    if not parts:
        return None
    spread = (f"; with two actions and an anchor the reward difference there is log({high:.3g}/{low:.3g}) = "
              f"{np.log(high / low):.3f}" if high < 1 and low > 0 else
              f"; e.g. log({low:.3g}) = {np.log(low):.3f}" if low > 0 else "")
    auto = "" if rule.startswith("auto") else Message(Mention("clip", "auto"), " (bounds that bind on no observed "
                                                                                 "action), ")
    return Message(
        f"{' and '.join(parts)} [{rule}]: there log pi_hat is replaced by log(bound), so the recovered reward "
        f"(model.reward; genpqr fit: rewards.csv) and the Q-values of those actions are pulled toward log(bound) "
        f"and decided by the clip, not the data{spread} (a structural MLE, npl/nfxp, does not use the clip). "
        f"Change it with ", auto, "a smoother policy model (",
        Mention("policy_model", "spline", python="genpqr.models._first_stage.SplineLogit"), " for an ordered state, "
        "or logistic), or ", Mention("clip", None), " (no clip; needs positive probabilities).")


def warn_if_clip_binds(fraction_observed: float, fraction_floored: float, bounds, rule: str, *,
                       category=None, stacklevel: int = 3) -> None:
    """Raise :func:`clip_binds_message` as a :class:`~genpqr.exceptions.ClippingWarning`, if any."""
    from ..exceptions import ClippingWarning

    message = clip_binds_message(fraction_observed, fraction_floored, bounds, rule)
    if message is not None:
        warnings.warn(message, category or ClippingWarning, stacklevel=stacklevel)


def safe_log(proba):
    """``log`` of estimated probabilities, refusing zeros with an actionable message."""
    if np.any(proba <= 0):
        raise ValueError(
            "the estimated policy gives probability 0 to some action (e.g. an action never observed at a "
            "state), so log pi is -inf; use clip='auto' (a floor below every observed action's probability), "
            "clip=(low, high) with low > 0, or a smooth policy model (genpqr.models._first_stage.SplineLogit)"
        )
    return np.log(proba)


def mu_expectation(mu, proba, g) -> np.ndarray:
    """``sum_a mu(a|s) (log pi(a|s) - g(s))`` per row, shape (n,): ``mu`` and ``proba`` (n, K), ``g``
    (n,) or a scalar. Actions without weight do not enter (their probability may be 0); a zero
    probability under weight is refused by ``safe_log``."""
    weighed = mu != 0
    logs = np.zeros_like(proba, dtype=np.float64)
    logs[weighed] = safe_log(proba[weighed])
    return np.sum(np.where(weighed, mu * (logs - np.reshape(g, (-1, 1))), 0.0), axis=1)

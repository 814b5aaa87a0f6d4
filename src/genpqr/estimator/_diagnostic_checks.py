"""Which fit diagnostics failed: the one place that turns diagnostics into warnings.

``failed_diagnostics`` reads a :class:`genpqr.estimator.Diagnostics` (discrete actions)
or ``genpqr.estimator._diagnostics.ContinuousDiagnostics`` and returns a ``(category, message)``
pair for every check that failed; ``emit`` raises them as Python warnings and returns
their ``"Category: message"`` lines. The estimators call both at the end of ``fit`` and keep
the lines in ``diagnostics_.warnings``, so a report lists every failed check even when
nobody caught the warnings (a model fitted elsewhere, warnings filtered, a loaded model).

Checks and thresholds
---------------------
- **convergence**: the Q-evaluation stopped before its targets settled (``converged`` false):
  FQE hit ``n_iterations``, or its iteration count was chosen by a held-out Bellman residual
  while the targets were still moving; the Q estimate is then not a fixed point.
- **clipping**: more than ``CLIP_SHARE`` (5%, ``genpqr.stage1._clipping.CLIP_WARN_FRACTION``) of
  the observed actions' estimated probabilities hit a clip bound, or of the rows sit at a state
  where some action is floored (``genpqr.stage1._clipping.clip_binds_message``); continuous: the
  observed actions' log-densities hit ``min_log_density``. ``log pi`` there is the bound, not an
  estimate.
- **coverage**: at the states of more than ``COVERAGE_SHARE`` (5%) of the logged rows the
  normalization weights an action with ``mu/pi_hat`` above ``COVERAGE_LIMIT`` (20): the
  reward there is read off ``log pi_hat`` of an action the behaviour takes less than once in 20
  times (for an anchor). The paper's reward-recovery bound (Theorem "Reward recovery bound")
  multiplies the Q and policy errors by ``1 + sqrt(C_mu/pi)``, ``C_mu/pi = max mu/pi_hat``,
  and that maximum enters only through ``E_beh[(mu/pi) f^2] <= C_mu/pi ||f||^2`` (its proof,
  with ``f`` the Q error): splitting the rows at the limit ``L`` gives
  ``E_beh[(mu/pi) f^2] <= L ||f||^2 + rho(B) max_B sum_a mu f^2``, where ``B`` are the poorly
  covered states and ``rho(B)`` their share of the rows (:attr:`Diagnostics.coverage_share`).
  A single rarely visited state with a tiny anchor probability (a maximum of 1e4 on 0.1% of
  the rows) thus hardly moves the behaviour-weighted reward error the theorem bounds, while a
  normalization on an action rare at many visited states (Rust's bus with ``anchor:1``, the
  replacement, taken about once in 100 bus-months) does; the warning fires for the latter
  only. It concerns the recovered reward (``model.reward``, ``rewards.csv``) and what is
  computed from it (counterfactuals on it, the projection estimator); a structural MLE
  (``genpqr fit --features``, NPL/NFXP) does not use the normalization. ``max mu/pi_hat`` is
  printed by ``summary()`` and the report either way. Without the share (continuous actions, a
  model saved before it existed) the check is on the maximum alone.
- **support**: fewer than ``min_support`` rows take an action with weight under mu
  (continuous: the effective sample size of the importance weights ``mu/pi_hat``).
- **thin transitions** (exact tabular path, ``P`` estimated from counts): more than
  ``THIN_SHARE`` (5%) of the logged occupancy (the rows, i.e. the state-action visits of the
  data) sits on cells ``(s, a)`` with fewer than ``THIN_TRANSITIONS`` (10) observed transitions
  (``transition_counts_``). ``P_hat(.|s, a)`` there is the frequency of a handful of moves, and
  the reward at the cell, ``r = Q - mu Q + g`` with ``Q = u - g + gamma P mu Q``, moves with
  every one of them: the reward is then mostly transition noise. Not checked when the kernel is
  given (``transition_model``, ``--transition FILE.npy``) or comes from a structured model that
  pools cells (``increment:``).
- **unvisited states** (exact tabular path): some states have no observed choice, so their
  rewards are the policy model's extrapolation, not identified by the data
  (``visited_states_``; ``genpqr fit`` marks them ``visited=False``).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..messages import Mention, Message
from ..stage1._clipping import CLIP_WARN_FRACTION, clip_binds_message
from ..exceptions import (ClippingWarning, ConvergenceWarning, CoverageWarning, ThinTransitionsWarning,
                          WeakSupportWarning)

__all__ = ["CLIP_SHARE", "COVERAGE_LIMIT", "COVERAGE_SHARE", "THIN_TRANSITIONS", "THIN_SHARE", "REWARD_OUTPUT",
           "MLE_UNAFFECTED", "poorly_covered", "thin_transitions", "failed_diagnostics", "emit"]

#: The clipping check fails above this share of clipped observed choices (the stage-1 threshold).
CLIP_SHARE = CLIP_WARN_FRACTION
#: A state is poorly covered when the normalization weights an action with ``mu/pi_hat`` above this.
COVERAGE_LIMIT = 20.0
#: The coverage check fails when poorly covered states hold more than this share of the logged rows.
COVERAGE_SHARE = 0.05
#: A state-action cell is thin when fewer transitions than this were observed from it.
THIN_TRANSITIONS = 10
#: The thin-transitions check fails when thin cells hold more than this share of the logged rows.
THIN_SHARE = 0.05
#: What the recovered reward is, in the API and in ``genpqr fit``'s files (warnings name it).
REWARD_OUTPUT = "the recovered reward (model.reward / reward_table(); genpqr fit: rewards.csv)"
#: What the normalization and the first stage do not touch (warnings about them say so).
MLE_UNAFFECTED = Message("a structural MLE (", Mention("features", python="genpqr.structural"),
                         ", npl/nfxp: parameters.csv) does not use the normalization, the clip or the first stage and "
                         "is not affected")


def poorly_covered(mu, proba) -> np.ndarray:
    """Per row, shape (n,): whether the normalization weights an action with ``mu/pi_hat`` above
    :data:`COVERAGE_LIMIT` at the row's state (``mu``, ``proba`` of shape (n, K))."""
    mu = np.asarray(mu, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(mu > 0, mu / np.asarray(proba, dtype=np.float64), 0.0)
    return np.max(ratio, axis=1, initial=0.0) > COVERAGE_LIMIT


def thin_transitions(visits, transition_counts, decode, *, estimated: bool = True) -> dict:
    """The thin-transitions fields of :class:`~genpqr.estimator.Diagnostics`.

    ``visits`` (S, K): logged rows per state-action cell; ``transition_counts`` (S, K): observed
    transitions from it (``transition_counts_``); ``decode``: action codes -> labels. Returns
    ``thin_transition_share`` (share of the rows on cells with fewer than
    :data:`THIN_TRANSITIONS` transitions; NaN when ``estimated`` is False, a kernel not estimated
    from the counts), ``n_thin_cells`` (visited thin cells) and ``thin_cells`` (up to five
    ``(state_index, action label)`` of the most visited thin cells).
    """
    if not estimated:
        return dict(thin_transition_share=float("nan"), n_thin_cells=0, thin_cells=[])
    visits = np.asarray(visits, dtype=np.float64)
    thin = (np.asarray(transition_counts) < THIN_TRANSITIONS) & (visits > 0)
    total = visits.sum()
    share = float(visits[thin].sum() / total) if total > 0 else 0.0
    flat = np.flatnonzero(thin.ravel())
    top = flat[np.argsort(-visits.ravel()[flat], kind="stable")[:5]]
    s, a = np.divmod(top, visits.shape[1])
    labels = decode(a) if a.size else []
    cells = [(int(si), label.item() if hasattr(label, "item") else label) for si, label in zip(s, labels)]
    return dict(thin_transition_share=share, n_thin_cells=int(flat.size), thin_cells=cells)


def _thin(diag):
    share = getattr(diag, "thin_transition_share", float("nan"))
    if not (np.isfinite(share) and share > THIN_SHARE):
        return None
    cells = ", ".join(f"(state_index {s}, action {a!r})" for s, a in getattr(diag, "thin_cells", []))
    return (ThinTransitionsWarning, Message(
            f"{share:.1%} of the logged rows sit on {diag.n_thin_cells} state-action cells with fewer than "
            f"{THIN_TRANSITIONS} observed transitions (the check allows {THIN_SHARE:.0%}), e.g. {cells}: P(.|s, a) "
            f"there is the frequency of a few observed moves, so {REWARD_OUTPUT} at those cells (rewards.csv: the "
            f"reward_<action> columns where transitions_<action> < {THIN_TRANSITIONS}) rests on them and is mostly "
            f"transition noise. transition_counts_ (rewards.csv: transitions_<action>) gives the transitions per "
            f"cell; a known kernel (", Mention("transition_model", "FILE.npy", python="transition_model"), ") or a "
            f"transition model that pools cells firms it up, and the bootstrap with resample='transitions' measures "
            f"the part of the reward's uncertainty that comes from the transitions"))


def _convergence(diag, tol, early_stopping, max_iterations=None):
    if diag.converged or diag.solver in ("", None) or not str(diag.solver).startswith("fqe"):
        return None
    change = f"{diag.target_changes[-1]:.3g}" if diag.target_changes else "n/a"
    tol_text = "no tolerance set" if tol is None else f"tol={tol:g}"
    at_cap = max_iterations is not None and diag.n_iterations >= max_iterations
    if early_stopping and at_cap:  # the held-out residual was still falling at the last allowed iteration
        why = (f"stopped at the iteration limit n_iterations={max_iterations} (the held-out Bellman residual "
               f"still improving),")
        advice = Message("raise ", Mention("n_iterations"), " and inspect the convergence plot")
    elif early_stopping:
        why = f"stopped after {diag.n_iterations} iterations, the count chosen by the held-out Bellman residual,"
        advice = ("the held-out residual stopped improving there: try a Q model suited to the states, or more data, "
                  "and inspect the convergence plot")
    else:
        why = f"stopped after {diag.n_iterations} iterations"
        advice = Message("raise ", Mention("n_iterations"), " and inspect the convergence plot")
    return (ConvergenceWarning, Message(
            f"FQE did not converge: it {why} with the Bellman targets still moving (last max change {change}, "
            f"{tol_text}); the Q estimate is not a fixed point and {REWARD_OUTPUT} depends on where it stopped (",
            advice, ")"))


def _clipping(diag, clip):
    if hasattr(diag, "support_ess"):  # continuous actions: the log-density floor
        if not diag.fraction_clipped > CLIP_SHARE:
            return None
        return (ClippingWarning,
                f"{diag.fraction_clipped:.1%} of the observed actions' log densities hit the floor {clip}: there "
                f"u = log pi_hat is replaced by the floor, so {REWARD_OUTPUT} and the Q-values of those actions are "
                f"pulled toward it and decided by the floor, not the data; lower it or set min_log_density=None (the "
                f"default, no floor)")
    bounds = getattr(diag, "clip", None) or clip
    message = clip_binds_message(diag.fraction_clipped, getattr(diag, "fraction_floored", 0.0), bounds,
                                 getattr(diag, "clip_rule", "") or "given")
    return None if message is None else (ClippingWarning, message)


def _coverage(diag, normalization):
    c = diag.max_mu_over_pi
    share = getattr(diag, "coverage_share", float("nan"))
    if not (np.isfinite(c) and c > COVERAGE_LIMIT):
        return None
    if np.isfinite(share):
        if share <= COVERAGE_SHARE:
            return None
        where = (f"at the states of {share:.1%} of the rows (the check allows {COVERAGE_SHARE:.0%}) the normalization "
                 f"({normalization}) weights an action taken there less than once in {COVERAGE_LIMIT:g} times "
                 f"(mu/pi_hat up to {c:.3g})")
    else:
        where = (f"the coverage constant max mu/pi_hat is {c:.3g} (> {COVERAGE_LIMIT:g}): at some logged state the "
                 f"normalization ({normalization}) weights an action the behaviour rarely takes there")
    return (CoverageWarning, Message(
            f"{REWARD_OUTPUT} rests on rarely taken actions: {where}, so the reward there is read off the log "
            f"probability of a rare action and its error bound grows with sqrt(mu/pi_hat); a normalization weighting "
            f"only actions common at those states (e.g. an anchor on the action taken there most) would firm it up, "
            f"if it suits what you know about the reward. Counterfactuals and the projection estimator computed from "
            f"this reward inherit it; ", MLE_UNAFFECTED))


def _support(diag, normalization, min_support):
    if min_support is None:
        return None
    if hasattr(diag, "support_ess"):
        ess = diag.support_ess
        if not (np.isfinite(ess) and ess < min_support):
            return None
        return (WeakSupportWarning,
                f"weak support for mu ({normalization}): the importance weights mu/pi_hat at the training rows have "
                f"an effective sample size of {ess:.1f} (min_support={min_support}); {REWARD_OUTPUT} where pi_hat "
                "has little mass rests on extrapolation")
    if diag.support_count >= min_support:
        return None
    return (WeakSupportWarning, Message(
            f"weak support for the normalization ({normalization}): only {diag.support_count} of "
            f"{diag.n_transitions} rows take an action with positive weight under mu (min_support={min_support}): "
            f"{REWARD_OUTPUT} rests on these few choices; ", MLE_UNAFFECTED))


def _unvisited(diag):
    from ..data._validation import short_list

    missing = list(getattr(diag, "unvisited_states", None) or [])
    if not missing:
        return None
    n_states = getattr(diag, "n_states", 0) or "the"
    return (WeakSupportWarning,
            f"{len(missing)} of {n_states} states have no observed choice (e.g. state_index "
            f"{short_list(missing, 5)}): {REWARD_OUTPUT} at those states is not identified by the data, only "
            f"extrapolated by the policy model (a frequency policy gives them the overall action frequencies); "
            f"visited_states_ marks them (genpqr fit: visited=False in rewards.csv and hollow in the report's "
            f"figures). A structural MLE is not affected: its flow utility there is the features' and its likelihood has only "
            f"the observed choices")


def failed_diagnostics(diag, *, normalization: str = "", clip=None, min_support=None, tol=None,
                       early_stopping: bool = False, max_iterations=None) -> list:
    """``[(warning category, message), ...]``: one per failed check (see the module docstring).
    ``max_iterations``: the FQE iteration limit (tells a run that hit it from one stopped early)."""
    found = [_unvisited(diag), _thin(diag), _support(diag, normalization, min_support), _clipping(diag, clip),
             _coverage(diag, normalization), _convergence(diag, tol, early_stopping, max_iterations)]
    return [f for f in found if f is not None]


def emit(failures, stacklevel: int = 3) -> list:
    """Raise each ``(category, message)`` as a warning; returns ``["Category: message", ...]``."""
    lines = []
    for category, message in failures:
        warnings.warn(message, category, stacklevel=stacklevel)
        lines.append(f"{category.__name__}: {message}")
    return lines

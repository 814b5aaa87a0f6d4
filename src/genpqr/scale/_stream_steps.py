r"""The steps of an out-of-core fit that run once, on the summed statistics: shared by the
streamed fit (:func:`genpqr.scale.fit_parquet`, :func:`genpqr.scale.fit_tabular`) and the
distributed one (:func:`genpqr.scale.fit_dask`), so that both end in the same estimator.

* :func:`start` -- the attributes every fit sets first, the normalization bound to the codes;
* :func:`path_kind` -- ``"exact"`` (tabular counts) or ``"lstd"`` (closed form);
* stage 1: :func:`prefitted_policy`, :func:`sample_policy` (a classifier on the random
  sample), :func:`resolve_clip` (given bounds or the auto rule from summed numbers);
* stage 2 of the closed form: :func:`closed_form_model` (the feature map fitted on the
  sample) and :func:`finish_closed_form` (checks, solve, diagnostics);
* :func:`check_actions` and :func:`make_diagnostics` from a
  :class:`genpqr.scale.ChoiceSummary`.
"""

from __future__ import annotations

import numpy as np

from ..data.validation import clone_learner as clone
from .. import stage2

__all__ = ["start", "path_kind", "resolve_clip", "prefitted_policy", "sample_policy", "closed_form_model",
           "finish_closed_form", "check_actions", "make_diagnostics", "clone_estimator"]


def clone_estimator(estimator, fqe: bool = False):
    """A new, unfitted GenPQR with the same parameter objects (as ``fit`` uses them); TypeError
    unless ``estimator`` is a GenPQR. ``fqe``: a native Q-model is allowed (:func:`path_kind`)."""
    from ..estimator import GenPQR

    if not isinstance(estimator, GenPQR):
        raise TypeError(f"estimator must be a genpqr.GenPQR, got {type(estimator).__name__}")
    est = type(estimator)(**estimator.get_params(deep=False))
    path_kind(est, fqe)
    if est.cross_fit:
        raise ValueError("cross_fit is not supported out of core (it needs every row in memory); set cross_fit=None")
    return est


def path_kind(est, fqe: bool = False) -> str:
    """``"exact"`` or ``"lstd"`` from ``est.q_model``; with ``fqe``, ``"fqe"`` for a native
    Q-model (``fit_q`` and ``predict_q``: streamed FQE, :mod:`genpqr.scale`); ValueError
    for any other regressor."""
    from ..stage2 import LSTDQ

    q = est.q_model
    if isinstance(q, str) and q in ("exact", "lstd"):
        return q
    if isinstance(q, LSTDQ):
        return "lstd"
    native = hasattr(q, "fit_q") and hasattr(q, "predict_q")
    if fqe and native:
        if est.validation_fraction:
            raise ValueError("validation_fraction (early stopping on held-out episodes) is not supported by the "
                             "streamed FQE path; set validation_fraction=None")
        return "fqe"
    if native:
        raise ValueError(f"q_model={q!r} (a native Q-model, streamed FQE) is supported by genpqr.scale."
                         "fit_parquet only; use q_model='exact' or 'lstd' / an LSTDQ here")
    also = " or a native Q-model with fit_q/predict_q (streamed FQE)" if fqe else ""
    raise ValueError(f"an out-of-core fit needs q_model='exact' (tabular) or 'lstd' / an LSTDQ (closed form){also}; "
                     f"got q_model={q!r}, which has no fit_q/predict_q: FQE regressors need the data in memory")


def start(est, encoder, state_dim):
    """The attributes every fit sets first; the normalization bound to the action codes."""
    from ..data.validation import check_gamma
    from ..normalization import OutcomeOffset, ValueOffset, mean_zero

    est.gamma_ = check_gamma(est.gamma)
    est.encoder_, est.n_actions_, est.state_dim_ = encoder, encoder.n_actions, int(state_dim)
    norm = (est.normalization if est.normalization is not None else mean_zero()).bind(encoder.encode)
    if isinstance(norm.g, (OutcomeOffset, ValueOffset)):
        raise ValueError(f"the normalization ({norm.describe()}) estimates g from the data by a regression, which "
                         "is not supported out of core; give g as a constant or a function of the state")
    est.normalization_ = norm
    if est.policy_prefit and (est.policy_model is None):
        raise ValueError("policy_prefit=True needs a fitted policy_model")


def resolve_clip(policy, clip, summary_fn):
    """Set ``policy.clip`` / ``clip_rule``: the given bounds, or the auto rule from
    ``summary_fn() -> (smallest, smallest_observed, zero_rows)`` (called only for ``"auto"``)."""
    from ..stage1 import auto_clip_from_summary
    from ..stage1 import check_clip, is_auto

    if not is_auto(clip):
        policy.clip, policy.clip_rule = check_clip(clip), ("given" if clip is not None else "none (no clip)")
    else:
        policy.clip, policy.clip_rule = auto_clip_from_summary(*summary_fn())
    return policy


def prefitted_policy(est):
    """Stage 1 of a ``policy_prefit=True`` estimator (clip unresolved)."""
    from types import SimpleNamespace

    from ..stage1 import prefit_policy

    # all prefit_policy reads without "auto"; streamed data carry no action table (refused out of core)
    shell = SimpleNamespace(n_actions=est.n_actions_, encoder=est.encoder_, action_table=None)
    return prefit_policy(est.policy_model, shell, clip=None)


def sample_policy(est, sample):
    """Stage 1 of the closed-form path (clip unresolved): prefitted, or ``est.policy_model``
    (default: the in-memory fit's, :func:`genpqr.estimator.default_policy_model`) fitted on the
    random ``sample``."""
    from ..estimator import default_policy_model
    from ..stage1 import FittedPolicy, check_classifier

    if est.policy_prefit:
        return prefitted_policy(est)
    model = est.policy_model if est.policy_model is not None else default_policy_model(sample)[0]
    check_classifier(model)
    return FittedPolicy([clone(model).fit(sample.states, sample.actions)], None, est.n_actions_, (0.0, 1.0))


def closed_form_model(est, sample, policy):
    """The stage-2 :class:`~genpqr.stage2.LSTDQ` with its feature map fitted on the sample's
    complete transitions (``init_features``), ready for ``partial_fit``."""
    from ..stage2 import LSTDQ
    from ._stream_stats import bellman_chunk

    q_model = LSTDQ(random_state=est.random_state) if isinstance(est.q_model, str) else clone(est.q_model)
    first = bellman_chunk(sample, policy, est.normalization_, est.normalization_.g, est.gamma_)
    if first is None:
        raise ValueError("the stage-1 sample holds no complete transition; raise sample_rows")
    return q_model.init_features(first)


def finish_closed_form(est, q_model, policy, summary):
    """Checks, the solve of the accumulated ``q_model`` and the fitted attributes of ``est``."""
    from ..stage2 import SampleStage2

    est.policy_ = policy
    check_actions(est, summary)
    if getattr(q_model, "statistics_", None) is None:
        raise ValueError("the data holds no complete transition (every episode is a single choice)")
    q_model.solve()
    est.stage2_ = SampleStage2(q_model, est.normalization_, policy, est.normalization_.g, est.n_actions_)
    est.diagnostics_ = make_diagnostics(est, summary)
    return est


def check_actions(est, summary):
    """The in-memory fit's checks: two actions; ``mu`` only on actions seen (with a next state)."""
    labels = est.encoder_.labels
    if est.n_actions_ < 2 or np.count_nonzero(summary.action_counts) < 2:
        raise ValueError(f"the data has only one action ({labels[np.argmax(summary.action_counts)]!r}); a reward "
                         "cannot be identified from choices among one option")
    norm = est.normalization_
    needed = np.flatnonzero((summary.mu_max > 0) & (summary.action_counts == 0))
    if needed.size:
        raise ValueError(f"the normalization ({norm.describe()}) puts weight on action(s) {labels[needed].tolist()} "
                         "that never occur in the data; the data cannot support this normalization")
    exact_given = isinstance(est.q_model, str) and est.q_model == "exact" and not stage2.is_estimated_spec(
        est.transition_model)
    needed = np.flatnonzero((summary.trans_mu_max > 0) & (summary.trans_action_counts == 0))
    if needed.size and summary.n_choice_only and not exact_given:
        raise ValueError(f"the normalization ({norm.describe()}) puts weight on action(s) {labels[needed].tolist()} "
                         "that never occur in the data with an observed next state, so P(.|s, a) cannot be "
                         "estimated for them; give a transition_model or another normalization")


def make_diagnostics(est, summary, extra=None):
    """GenPQR's :class:`~genpqr.estimator.Diagnostics` from a :class:`genpqr.scale.ChoiceSummary`
    (warnings raised as by ``fit``)."""
    from ..estimator import emit, failed_diagnostics
    from ..estimator import Diagnostics

    n = summary.n
    if extra is None:
        model = est.stage2_.fqe
        extra = dict(bellman_residuals=list(model.history_.bellman_residual), target_changes=[],
                     n_iterations=model.n_iter_, converged=True, solver="lstd (out of core)")
    diag = Diagnostics(
        n_transitions=int(n), n_episodes=int(summary.n_episodes),
        action_counts=dict(zip(est.encoder_.labels.tolist(), [int(c) for c in summary.action_counts])),
        support_count=int(summary.support), policy_log_loss=summary.log_loss / n, policy_log_loss_kind="in-sample",
        fraction_clipped=summary.clipped / n, fraction_floored=summary.floored / n,
        clip=tuple(float(c) for c in est.policy_.clip), clip_rule=est.policy_.clip_rule,
        max_mu_over_pi=summary.max_mu_over_pi, coverage_share=summary.poorly_covered / n,
        n_last_choices=int(summary.n_choice_only), **extra)
    failures = failed_diagnostics(diag, normalization=est.normalization_.describe(), clip=est.policy_.clip,
                                  min_support=est.min_support, tol=est.tol, early_stopping=False)
    diag.warnings = emit(failures, stacklevel=4)
    return diag

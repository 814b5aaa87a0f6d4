r"""Counterfactuals from a recovered reward on a finite state space, with identification checks.

A fitted tabular :class:`~genpqr.GenPQR` holds ``r_hat`` (S, K), the kernel ``P_hat`` and
``gamma``. A counterfactual changes the primitives,

    r' = r_hat + delta,      P' (new transitions),      gamma' (new discount),

and solves the soft-optimal (logit / MaxEnt) policy of ``(r', P', gamma')`` exactly by soft
policy iteration (:func:`genpqr.stage2.soft_optimal_solution`). The baseline is the same
solve at ``(r_hat, P_hat, gamma)``: its policy is the fitted policy ``exp(u)``.

Identification (Kalouptsidi, Scott & Souza-Rodrigues 2021; paper, Sec. 2 on normalizations).
Behaviour identifies ``r`` only up to shaping, ``r + c - gamma P c`` (Lemma "Potential-based
shaping invariance"); a normalization ``mu r = g`` picks one ``c``. Hence

* a change of the flow reward by a *known amount* ``delta`` (not depending on the level of
  ``r``) leaves ``P`` and ``gamma`` as they are, so the shaped reward ``r + delta + c - gamma P c``
  has the same soft-optimal policy as ``r + delta``: the counterfactual policy (and the state and
  action distributions, and the change in value) is the same under every normalization;
* a change of the transitions or of the discount in general breaks the shaping term:
  ``c - gamma P c`` is not a shaping term under ``(P', gamma')``, so the counterfactual is
  identified only when the normalization is true of the real reward (e.g. Rust's anchor
  ``r(x, replace) = 0`` when that is the model's assumption). Exactly: it is identified under
  every normalization iff every shaping term of ``(P, gamma)`` is one of ``(P', gamma')``, i.e.
  for every ``c`` some ``c'`` has ``(I - gamma P_a) c = (I - gamma' P'_a) c'`` for every action
  ``a``, i.e. iff ``M_a = (I - gamma' P'_a)^{-1} (I - gamma P_a)`` is the same matrix for every
  action (:func:`shaping_preserved`). Examples where it holds: ``P' = P`` and ``gamma' = gamma``;
  transitions that no action affects (``P_a = P_b`` and ``P'_a = P'_b``), any ``gamma'``; a
  discount traded for a termination hazard, ``gamma' P'_a = gamma P_a``. The same non-identification
  holds for a change that depends on the reward level (e.g. "the replacement cost rises 20%":
  the cost's level is set by the normalization).

Every :class:`CounterfactualResult` states the rule that applies (``invariant``) and shows it:
the counterfactual is solved again from the model renormalized under a second normalization
(:meth:`GenPQR.renormalize`) and the largest policy difference is reported
(``normalization_gap``). An :class:`IdentificationWarning` is raised when the result is not
invariant.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..data._validation import check_gamma
from ._counterfactual_result import CounterfactualResult, load_counterfactual
from ..exceptions import ExtrapolationWarning, GenPQRWarning
from ..messages import Mention, Message
from ._identification import IdentificationWarning, identification_rule, shaping_preserved
from ._parametric_counterfactual import REQUIRED_ATTRIBUTES, DeltaResult, delta_method, parse_parameter_change
from ._scenarios import (ScenarioSolution, initial_distribution, new_kernel, reward_delta, solve_scenario,
                         state_occupancy, stationary_distribution)
from ..data import FiniteActions
from ._support import MATERIAL_SHARE, MIN_VISITS, off_support, support_report, warn_if_material
from ._welfare import WelfareResult, check_money_parameter, welfare_values, welfare_weights

__all__ = ["CounterfactualResult", "ScenarioSolution", "IdentificationWarning", "counterfactual",
           "solve_scenario", "stationary_distribution", "state_occupancy", "identification_rule",
           "shaping_preserved", "load_counterfactual", "ROUTES", "STRUCTURAL_RULE"]

#: The routes a counterfactual answers by (``route=``): ``"auto"`` takes the structural route when
#: there is a structural fit, else the nonparametric one (the recovered reward table).
ROUTES = ("auto", "structural", "nonparametric")
#: Why the structural route's answer is identified.
STRUCTURAL_RULE = ("solved on the estimated structural flow utility x @ theta: the features fix the reward's level "
                   "(e.g. u(x, replace) = 0), so parameter, payoff, transition and discount changes are identified by "
                   "the model's functional form -- the assumption the answer rests on -- not by a normalization")
#: Warn when more than this share of bootstrap replicates left the data's support.
OFF_SUPPORT_WARN = 0.05


@dataclass(frozen=True)
class _Spec:
    """The counterfactual primitives, applied to any fit (full sample or replicate) on either route.

    ``parameter_delta`` (S, K): the nonparametric route's reading of a parameter change, the
    flow-payoff change ``x @ (theta' - theta_hat)`` at the full-sample estimate."""

    reward_change: object = None
    transitions: object = None
    gamma: float | None = None
    initial: object = None
    horizon: int | None = None
    state_values: object = None
    parameter_change: object = None
    parameter_delta: object = None

    @property
    def changes(self) -> tuple:
        return tuple(name for name, v in (("parameters", self.parameter_change), ("reward", self.reward_change),
                                          ("transitions", self.transitions), ("gamma", self.gamma)) if v is not None)

    def primitives(self, kernel, gamma):
        """The counterfactual ``(kernel, gamma)`` from the fitted ones."""
        return new_kernel(self.transitions, kernel), (gamma if self.gamma is None else check_gamma(self.gamma))

    def _pair(self, reward, delta, kernel, gamma):
        d0 = initial_distribution(self.initial, kernel.n_states)
        base = solve_scenario(reward, kernel, gamma, initial=d0, horizon=self.horizon)
        new_k, new_gamma = self.primitives(kernel, gamma)
        return base, solve_scenario(reward + delta, new_k, new_gamma, initial=d0, horizon=self.horizon)

    def solve(self, model):
        """Nonparametric route: (baseline, counterfactual, level_dependent) of a fitted GenPQR."""
        rec = model.stage2_.recovery
        delta, level = reward_delta(self.reward_change, rec.reward, model.encoder_)
        if self.parameter_delta is not None:
            delta = delta + self.parameter_delta
        return (*self._pair(rec.reward, delta, model.stage2_.kernel, model.gamma_), level)

    def solve_structural(self, structural, encoder, theta=None):
        """Structural route: (baseline, counterfactual) of the flow utility at ``theta`` (default
        the estimate) and at its changed value."""
        theta = np.asarray(structural.theta if theta is None else theta, dtype=np.float64)
        u = structural.flow_utility(theta)
        new_theta = theta if self.parameter_change is None else self.parameter_change(theta)
        delta, _ = reward_delta(self.reward_change, u, encoder)
        delta = delta + (structural.flow_utility(new_theta) - u)
        return self._pair(u, delta, structural.kernel, structural.gamma)

    def welfare(self, base, cf) -> np.ndarray:
        """``[W, W']``: both scenarios' values averaged over the welfare distribution (the initial
        one, else the baseline's stationary one; NaN when there is neither)."""
        d, _ = welfare_weights(initial_distribution(self.initial, base.value.size), base)
        return np.full(2, np.nan) if d is None else welfare_values(base, cf, d)

    def values(self, n_states):
        x = np.arange(n_states, dtype=np.float64) if self.state_values is None else \
            np.asarray(self.state_values, dtype=np.float64)
        if x.shape != (n_states,):
            raise ValueError(f"state_values must have shape ({n_states},), got {x.shape}")
        return x


class _SummaryStatistic:
    """Bootstrap statistic (picklable): baseline and counterfactual summaries of a replicate on
    the route, and whether each left the full data's support (last column), shape
    (2, n_statistics + 1), then each scenario's welfare ``W`` and the money parameter's
    re-estimate (NaN without one): shape (2, n_statistics + 3). On the structural route the
    parameters are re-estimated on the replicate (``structural.refit(model)``)."""

    def __init__(self, spec: _Spec, keys, labels, route: str, structural, counts, money_index=None):
        self.spec, self.keys, self.labels = spec, keys, labels
        self.route, self.structural, self.counts = route, structural, counts
        self.money_index = money_index

    def __call__(self, model):
        money = np.nan
        if self.route == "structural":
            fit = self.structural.refit(model)
            base, cf = self.spec.solve_structural(fit, model.encoder_)
            money = np.nan if self.money_index is None else float(fit.theta[self.money_index])
        else:
            base, cf, _ = self.spec.solve(model)
        x = self.spec.values(model.n_states_)
        b, c = base.summary(self.labels, x), cf.summary(self.labels, x)
        w = self.spec.welfare(base, cf)
        return np.array([[b.get(k, np.nan) for k in self.keys] + [float(off_support(base, self.counts)), w[0], money],
                         [c.get(k, np.nan) for k in self.keys] + [float(off_support(cf, self.counts)), w[1], money]])


# ============================================================================ the entry point
def _default_check(model):
    from ..normalization import anchor_action, mean_zero

    if model.normalization_.name != "mean-zero":
        return mean_zero()
    counts = np.asarray(model.stage2_.counts).sum(axis=0)  # choices per action (kept in a slim save too)
    return anchor_action(model.encoder_.decode(np.array([int(np.argmax(counts))]))[0])


def _check_arguments(model, structural, route, parameter_change, level, n_boot, initial, horizon):
    """The arguments' checks; returns the resolved route."""
    if route not in ROUTES:
        raise ValueError(f"route must be one of {list(ROUTES)}, got {route!r}")
    if isinstance(level, bool) or not isinstance(level, (int, float, np.integer, np.floating)) or \
            not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must be a confidence level strictly between 0 and 1, got {level!r}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 0:
        raise ValueError(f"n_boot must be a non-negative number of bootstrap replicates, got {n_boot!r}")
    if horizon is not None and (initial is None or int(horizon) < 1):
        raise ValueError(f"horizon needs an initial distribution and must be a positive integer, got {horizon!r}")
    if structural is not None:
        missing = [a for a in REQUIRED_ATTRIBUTES if not hasattr(structural, a)]
        if missing:
            raise TypeError(f"structural must be a structural fit (genpqr.structural.StructuralFit) with "
                            f"{list(REQUIRED_ATTRIBUTES)}; {type(structural).__name__} lacks {missing}")
    if model is not None:
        model._check_fitted()
        if not hasattr(model, "n_states_"):  # the exact tabular path's tables
            raise ValueError("counterfactual() needs the exact tabular path (q_model='exact'); for continuous states "
                             "use genpqr.counterfactuals.SoftFQI on the recovered reward")
    if route == "auto":
        route = "structural" if structural is not None else "nonparametric"
    if structural is None and (route == "structural" or parameter_change is not None):
        what = Mention("route", "structural") if route == "structural" else Mention("parameter_change")
        raise ValueError(Message(what, " needs a structural fit: estimate one from the reward features (",
                                 Mention("features", python="genpqr.structural.fit_structural(model, features)"),
                                 ") and pass it as structural="))
    if model is None and route == "nonparametric":
        raise ValueError("the nonparametric route needs the fitted GenPQR model (its reward table)")
    return route


def _normalization_check(model, spec, cf, labels, x, check_normalization):
    """``(gap, summary_gap, text)``: the nonparametric counterfactual re-solved under a second
    normalization."""
    if check_normalization is False:
        return np.nan, np.nan, "not checked"
    check = check_normalization if check_normalization is not None else _default_check(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GenPQRWarning)
        other = model.renormalize(check)
        _, cf_check, _ = spec.solve(other)
    gap = float(np.max(np.abs(cf.policy - cf_check.policy)))
    s_cf, s_check = cf.summary(labels, x), cf_check.summary(labels, x)
    s_gap = max((abs(s_cf[k] - s_check[k]) for k in s_cf if k[1] != "value"), default=0.0)
    text = check.describe()
    shift = other.stage2_.recovery.reward - model.stage2_.recovery.reward
    if np.ptp(shift) <= 1e-9 * max(1.0, float(np.max(np.abs(model.stage2_.recovery.reward)))):
        text += (" (differs from the fitted normalization only by a constant added to every reward, which hides most "
                 "dependence on the normalization; choose another check_normalization)")
    return gap, float(s_gap), text


def _split(delta, parts):
    """``delta`` cut into consecutive :class:`DeltaResult` of the given sizes."""
    out, start = [], 0
    for size in parts:
        part = slice(start, start + size)
        out.append(DeltaResult(delta.estimate[part], delta.std_error[part], delta.low[part], delta.high[part],
                               delta.logit[part], delta.kind))
        start += size
    return out


def _delta(spec, structural, encoder, labels, x, level, money_index=None):
    """Delta-method intervals of the structural route's ``[baseline, counterfactual, difference]``
    summaries and of the welfare ``[W, W', W' - W]`` (divided by the money parameter too), from one
    Jacobian: ``(summaries, welfare or None)``."""
    keys = None

    def fun(theta):
        nonlocal keys
        base, cf = spec.solve_structural(structural, encoder, theta)
        b, c = base.summary(labels, x), cf.summary(labels, x)
        keys = keys or list(b)
        vb, vc = np.array([b[k] for k in keys]), np.array([c[k] for k in keys])
        w = spec.welfare(base, cf)
        w = np.array([w[0], w[1], w[1] - w[0]])
        money = [] if money_index is None else list(w / theta[money_index])
        return np.concatenate([vb, vc, vc - vb, w, money])

    value = fun(structural.theta)
    m = len(keys)
    bounds = np.full((m, 2), np.nan)
    bounds[[k[1].startswith("rate[") for k in keys]] = [0.0, 1.0]
    bounds[[k[1] == "mean_state" for k in keys]] = [float(np.min(x)), float(np.max(x))]
    rest = value.size - 3 * m
    delta = delta_method(fun, structural.theta, structural.cov, level=level,
                         bounds=np.vstack([bounds, bounds, np.nan * bounds, np.full((rest, 2), np.nan)]))
    summaries, welfare = _split(delta, [3 * m, rest])
    return summaries, (welfare if np.all(np.isfinite(value[3 * m:])) else None)


def _bootstrap(model, spec, keys, labels, route, structural, n_boot, n_jobs, random_state, progress, money_index=None):
    """``(replicates (B, 2, m), off_support (B, 2), welfare (B, 2, 2))`` over episodes (welfare:
    each scenario's ``W`` and the money parameter's re-estimate)."""
    from ..evaluation import bootstrap

    if model is None or not hasattr(model, "training_data_"):
        raise ValueError(Message(
            Mention("n_boot", n_boot), ": the counterfactual bootstrap refits the model on resampled episodes, so it "
            "needs the fitted GenPQR with its training data, which this model was saved without; refit and save it "
            "with ", Mention("include_data", True, python="save(path, include_data=True)"), ", or use ",
            Mention("n_boot", 0), " for point estimates"))
    statistic = _SummaryStatistic(spec, keys, labels, route, structural, np.asarray(model.stage2_.counts),
                                  money_index)
    boot = bootstrap(model, model.training_data_, n_boot=n_boot, statistic=statistic, n_jobs=n_jobs,
                     random_state=random_state, progress=progress, fitted=model)
    m = len(keys)
    return boot.replicates[:, :, :m], boot.replicates[:, :, m] > 0.5, boot.replicates[:, :, m + 1:]


def _warn(result, warn):
    """The warnings of a result: each names the output it concerns and fires only when it is in doubt."""
    if not warn:
        return
    if result.route == "nonparametric" and not result.invariant:
        warnings.warn("the nonparametric answer is not invariant to the normalization: " + result.describe(),
                      IdentificationWarning, stacklevel=4)
    if result.support is not None:
        warn_if_material(result.support, result.route, stacklevel=4)
    from ._counterfactual_summary import CORNER, ROUTE_GAP_WARN, corner_rates

    corners = corner_rates(result)
    if corners:
        from ..exceptions import ExtrapolationWarning

        warnings.warn(f"the counterfactual pushes a choice rate to a corner ({', '.join(corners)} within "
                      f"{CORNER:g} of 0 or 1): its interval is not shown (the delta method's collapses to a point) "
                      f"and the answer rests on the model's form far from the data (summary.csv)",
                      ExtrapolationWarning, stacklevel=4)
    if result.off_support is not None and result.off_support[:, 1].mean() > OFF_SUPPORT_WARN:
        n_off, B = int(result.off_support[:, 1].sum()), result.off_support.shape[0]
        warnings.warn(f"{n_off} of {B} bootstrap replicates ({n_off / B:.0%}) of the {result.route} counterfactual "
                      f"left the data's support (more than half of the state distribution on never-visited states, or "
                      f"an action no longer chosen); the bootstrap intervals include them, so an end of each interval "
                      f"reflects models whose answer is set outside the data", ExtrapolationWarning, stacklevel=4)
    if result.route == "nonparametric" and result.alternative is not None and result.route_gap() > ROUTE_GAP_WARN:
        warnings.warn(f"the nonparametric counterfactual differs from the structural model's by up to "
                      f"{result.route_gap():.0%} (relative): the nonparametric reward table and the structural flow "
                      f"utility disagree where the counterfactual goes; route='structural' answers on the model the "
                      f"parameters were estimated on", GenPQRWarning, stacklevel=4)


def _answers(model, structural, spec, encoder, labels, x, check_normalization):
    """Both routes' solutions where their fits are there: ``({route: (baseline, counterfactual)},
    normalization check of the nonparametric one, (invariant, rule) of the nonparametric one)``."""
    answers, np_check, identification = {}, (np.nan, np.nan, "not checked"), (True, STRUCTURAL_RULE)
    if model is not None:
        base, cf, level_dep = spec.solve(model)
        answers["nonparametric"] = (base, cf)
        np_check = _normalization_check(model, spec, cf, labels, x, check_normalization)
        preserved = None
        if "transitions" in spec.changes or "gamma" in spec.changes:
            preserved = shaping_preserved(model.stage2_.kernel, model.gamma_,
                                          *spec.primitives(model.stage2_.kernel, model.gamma_))[0]
        # a parameter change is, on this route, a known change of the flow payoffs: x @ (theta' - theta_hat)
        changes = tuple(dict.fromkeys("reward" if c == "parameters" else c for c in spec.changes))
        identification = identification_rule(changes, level_dep, preserved)
    if structural is not None:
        answers["structural"] = spec.solve_structural(structural, encoder)
    return answers, np_check, identification


def _spec(model, structural, parameter_change, primitives: dict):
    """``(_Spec, action labels, encoder)``: the primitives, the parameter change and its reading as
    a change of flow payoffs ``x @ (theta' - theta_hat)``."""
    change = None if structural is None else parse_parameter_change(parameter_change, structural.names)
    labels = np.asarray(model.encoder_.labels if model is not None else
                        (structural.action_labels if structural.action_labels is not None
                         else np.arange(structural.kernel.n_actions)))
    encoder = model.encoder_ if model is not None else FiniteActions(labels)
    p_delta = None if change is None else structural.flow_utility(change(structural.theta)) - structural.flow_utility()
    return _Spec(**primitives, parameter_change=change, parameter_delta=p_delta), labels, encoder


def _alternative(answers, route, labels, x, counts, min_visits, threshold):
    """The other route's summaries and support (None when only one route could answer)."""
    other = next((r for r in answers if r != route), None)
    if other is None:
        return None
    base, cf = answers[other]
    return dict(route=other, baseline=base.summary(labels, x), counterfactual=cf.summary(labels, x),
                support=support_report(base, cf, counts, min_visits=min_visits, threshold=threshold))


def _uncertainty(model, spec, structural, encoder, labels, x, route, base, money, level, boot):
    """The delta method (structural route) and the bootstrap (``boot``: ``(n_boot, n_jobs,
    random_state, progress)``): ``(delta, replicates, off_support, welfare delta, welfare
    replicates)``."""
    delta, w_delta = _delta(spec, structural, encoder, labels, x, level, money) if route == "structural" \
        else (None, None)
    n_boot, n_jobs, random_state, progress = boot
    reps, flags, w_reps = (None, None, None) if not n_boot else _bootstrap(
        model, spec, list(base.summary(labels, x)), labels, route, structural, n_boot, n_jobs, random_state, progress,
        money)
    return delta, reps, flags, w_delta, w_reps


def _welfare(spec, base, cf, structural, money, w_delta, w_reps, level, invariant):
    """The :class:`~genpqr.counterfactuals.WelfareResult` of the answer (None without a state
    distribution to average over)."""
    d, name = welfare_weights(initial_distribution(spec.initial, base.value.size), base)
    if d is None:
        return None
    values = welfare_values(base, cf, d)
    return WelfareResult(name, float(values[0]), float(values[1]), float(base.gamma),
                         None if money is None else str(structural.names[money]),
                         float("nan") if money is None else float(structural.theta[money]), w_delta,
                         None if w_reps is None else np.asarray(w_reps, dtype=np.float64), float(level), bool(invariant))


def counterfactual(model, reward_change=None, transitions=None, gamma=None, *, parameter_change=None, route="auto",
                   structural=None, initial=None, horizon=None, state_values=None, check_normalization=None, n_boot=0,
                   level=0.95, n_jobs=1, random_state=None, progress=None, warn=True, min_visits=MIN_VISITS,
                   support_threshold=MATERIAL_SHARE, money_parameter=None) -> CounterfactualResult:
    """A counterfactual on a fitted exact-path GenPQR ``model`` (:meth:`genpqr.GenPQR.counterfactual`) and/or a
    ``structural`` fit (default ``model.structural_``; ``model`` None: the structural route alone); returns a
    :class:`CounterfactualResult` (``summary()``: its table; ``welfare``).

    Parameters
    ----------
    reward_change : dict, ndarray or callable, optional
        ``delta``: ``{label: amount or (S,) array}``, (K,) or (S, K) array, or callable ``reward -> delta`` (not invariant).
    transitions : kernel or callable, optional
        ``P'``: dense (S, K, S), sparse (S*K, S), ``TransitionKernel``, or a callable of the fitted kernel.
    gamma : float, optional
        ``gamma'``.
    parameter_change : dict, optional
        ``{parameter name: number (the new value) or "*F", "+D", "-D", "=V"}`` (structural fit;
        ``genpqr.counterfactuals._parametric_counterfactual.parse_parameter_change``).
    route : {"auto", "structural", "nonparametric"}
        ``"auto"``: structural when there is a structural fit.
    initial, horizon : state index or (S,) distribution, int, optional
        Adds the distribution from ``initial`` (average over ``horizon`` steps, else the discounted
        occupancy) and the value ``d_0 V``; the welfare is then averaged over ``initial``.
    state_values : ndarray (S,), optional
        ``x(s)`` for the mean state (default: the index).
    check_normalization : Normalization or False, optional
        Second normalization for the nonparametric check (default: mean-zero, or an anchor on the most
        frequent action when the model is mean-zero); False skips it.
    n_boot, level, n_jobs, random_state, progress
        Bootstrap replicates over episodes (each refitted and re-solved; 0: none), the confidence
        level in (0, 1), the bootstrap's workers, seed and progress bar.
    warn : bool
        Raise the result's warnings (not invariant, thin support, replicates off the support, routes apart).
    min_visits, support_threshold
        Thin states and cells (:mod:`genpqr.counterfactuals`); an ExtrapolationWarning above the threshold.
    money_parameter : str, optional
        The structural parameter whose coefficient is the utility of one unit of money (structural
        route): the welfare change also in its units (:class:`~genpqr.counterfactuals.WelfareResult`).
    """
    if structural is None and model is not None:
        structural = getattr(model, "structural_", None)
    route = _check_arguments(model, structural, route, parameter_change, level, n_boot, initial, horizon)
    money = check_money_parameter(money_parameter, structural, route)
    spec, labels, encoder = _spec(model, structural, parameter_change,
                                  dict(reward_change=reward_change, transitions=transitions, gamma=gamma,
                                       initial=initial, horizon=horizon, state_values=state_values))
    x = spec.values(model.n_states_ if model is not None else structural.kernel.n_states)  # the mean state's x(s)
    answers, np_check, (invariant, rule) = _answers(model, structural, spec, encoder, labels, x, check_normalization)
    invariant, rule = (True, STRUCTURAL_RULE) if route == "structural" else (invariant, rule)
    base, cf = answers[route]
    counts = np.asarray(model.stage2_.counts if model is not None else structural.counts)
    delta, reps, flags, w_delta, w_reps = _uncertainty(model, spec, structural, encoder, labels, x, route, base, money,
                                                       level, (n_boot, n_jobs, random_state, progress))
    result = CounterfactualResult(
        base, cf, labels, x, spec.changes, invariant, rule,
        model.normalization_.describe() if model is not None else "none (structural fit)", np_check[2], np_check[0],
        np_check[1], reps, float(level), route,
        "none" if spec.parameter_change is None else spec.parameter_change.describe(),
        support_report(base, cf, counts, min_visits=min_visits, threshold=support_threshold), delta,
        _alternative(answers, route, labels, x, counts, min_visits, support_threshold), flags,
        getattr(structural, "se_kind", "") if route == "structural" else "",
        _welfare(spec, base, cf, structural, money, w_delta, w_reps, level, invariant))
    _warn(result, warn)
    return result

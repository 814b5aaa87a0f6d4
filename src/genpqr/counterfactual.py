r"""Counterfactuals from a recovered reward on a finite state space, with identification checks.

A fitted tabular :class:`~genpqr.GenPQR` holds ``r_hat`` (S, K), the kernel ``P_hat`` and
``gamma``. A counterfactual changes the primitives,

    r' = r_hat + delta,      P' (new transitions),      gamma' (new discount),

and solves the soft-optimal (logit / MaxEnt) policy of ``(r', P', gamma')`` exactly by soft
policy iteration (:func:`genpqr.tabular.soft_optimal_solution`). The baseline is the same
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
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from . import tabular
from ._checks import check_gamma
from .exceptions import GenPQRWarning
from .identification import IdentificationWarning, identification_rule, shaping_preserved
from .stages import ExactStage2

__all__ = ["CounterfactualResult", "ScenarioSolution", "IdentificationWarning", "counterfactual",
           "solve_scenario", "stationary_distribution", "state_occupancy", "identification_rule",
           "shaping_preserved", "load_counterfactual"]


# ============================================================================ distributions
def _dense(P_pi) -> np.ndarray:
    return P_pi.toarray() if sp.issparse(P_pi) else np.asarray(P_pi)


def stationary_distribution(P_pi) -> np.ndarray | None:
    r"""Long-run state distribution ``d = d P_pi``, ``sum d = 1`` (S,), of a state kernel (S, S).

    Solved directly (one balance equation replaced by ``sum d = 1``). Returns None when the
    chain terminates (rows summing to less than one: no stationary law). A chain with several
    recurrent classes has no unique one; the Cesaro average of ``d_0 P^t`` from the uniform
    ``d_0`` over 5,000 steps is returned instead.
    """
    M = _dense(P_pi)
    S = M.shape[0]
    if np.any(M.sum(axis=1) < 1.0 - 1e-9):
        return None
    A = np.eye(S) - M.T
    A[-1] = 1.0
    b = np.zeros(S)
    b[-1] = 1.0
    try:
        d = np.linalg.solve(A, b)
        if np.max(np.abs(d @ M - d)) < 1e-8 and d.min() > -1e-10:
            d = np.clip(d, 0.0, None)
            return d / d.sum()
    except np.linalg.LinAlgError:
        pass
    d, avg = np.full(S, 1.0 / S), np.zeros(S)
    for _ in range(5000):
        avg += d
        d = d @ M
    return avg / avg.sum()


def state_occupancy(P_pi, initial: np.ndarray, gamma: float, horizon: int | None = None) -> np.ndarray:
    r"""State distribution from ``initial`` (S,): over ``horizon`` steps the average
    ``(1/H) sum_{t<H} d_0 P_pi^t``, else the discounted occupancy
    ``(1 - gamma) d_0 (I - gamma P_pi)^{-1}``; normalized to sum to one (terminations remove
    mass)."""
    if horizon is not None:
        d, total = initial.copy(), np.zeros_like(initial)
        PT = P_pi.T.tocsr() if sp.issparse(P_pi) else np.asarray(P_pi).T
        for _ in range(int(horizon)):
            total += d
            d = PT @ d
    else:
        PT = P_pi.T.tocsr() if sp.issparse(P_pi) else np.asarray(P_pi).T
        total, _ = tabular.solve_linear_bellman(PT, (1.0 - gamma) * initial, gamma)
    total = np.clip(total, 0.0, None)
    return total / total.sum()


# ============================================================================ one scenario
@dataclass(frozen=True)
class ScenarioSolution:
    """The soft-optimal solution of one set of primitives and its distributions.

    Attributes
    ----------
    policy, log_policy, q : ndarray of shape (S, K)
    value : ndarray of shape (S,)
        ``V = logsumexp_a Q`` (in the units of the reward's normalization).
    gamma : float
    stationary : ndarray of shape (S,) or None
        Long-run state distribution (None when the chain terminates).
    occupancy : ndarray of shape (S,) or None
        From the given initial distribution (horizon average or discounted occupancy).
    initial_value : float or None
        ``sum_s d_0(s) V(s)``.
    """

    policy: np.ndarray
    log_policy: np.ndarray
    q: np.ndarray
    value: np.ndarray
    gamma: float
    stationary: np.ndarray | None
    occupancy: np.ndarray | None
    initial_value: float | None

    def summary(self, labels, state_values) -> dict:
        """Action rates ``sum_s d(s) pi(a|s)`` and mean state ``sum_s d(s) x(s)`` under each
        distribution; keys ``(distribution, statistic)``."""
        out = {}
        for name, d in (("stationary", self.stationary), ("initial", self.occupancy)):
            if d is None:
                continue
            rates = d @ self.policy
            for label, rate in zip(labels, rates):
                out[(name, f"rate[{label}]")] = float(rate)
            out[(name, "mean_state")] = float(d @ state_values)
        if self.initial_value is not None:
            out[("initial", "value")] = self.initial_value
        return out


def solve_scenario(reward, kernel, gamma, *, initial=None, horizon=None) -> ScenarioSolution:
    """Soft-optimal policy of ``(reward (S, K), kernel, gamma)`` and its state distributions."""
    sol = tabular.soft_optimal_solution(reward, kernel, gamma)
    P_pi = kernel.under(sol.policy)
    occ = value0 = None
    if initial is not None:
        occ = state_occupancy(P_pi, initial, gamma, horizon)
        value0 = float(initial @ sol.value)
    return ScenarioSolution(sol.policy, sol.log_policy, sol.q, sol.value, float(gamma),
                            stationary_distribution(P_pi), occ, value0)


def _reward_delta(change, reward: np.ndarray, encoder) -> tuple[np.ndarray, bool]:
    """``delta`` (S, K) and whether it depends on the reward level (a callable of the reward)."""
    S, K = reward.shape
    if change is None:
        return np.zeros((S, K)), False
    if callable(change):
        delta = np.asarray(change(reward.copy()), dtype=np.float64)
        if delta.shape != (S, K):
            raise ValueError(f"reward_change(reward) must return shape (S, K) = ({S}, {K}), got {delta.shape}")
        level = True
    elif isinstance(change, dict):
        delta = np.zeros((S, K))
        codes = encoder.encode(np.asarray(list(change.keys())), "reward_change action")
        for code, value in zip(codes, change.values()):
            col = np.asarray(value, dtype=np.float64)
            if col.ndim > 1 or (col.ndim == 1 and col.shape != (S,)):
                raise ValueError(f"reward_change values must be scalars or (S,) = ({S},) arrays, got {col.shape}")
            delta[:, int(code)] += col
        level = False
    else:
        delta = np.asarray(change, dtype=np.float64)
        if delta.shape == (K,):
            delta = np.broadcast_to(delta, (S, K)).copy()
        if delta.shape != (S, K):
            raise ValueError(f"reward_change must be a dict label -> amount, a (K,) = ({K},) or (S, K) = ({S}, {K}) "
                             f"array, or a callable reward -> (S, K); got shape {delta.shape}")
        level = False
    if not np.all(np.isfinite(delta)):
        raise ValueError("reward_change must be finite, but holds NaN/inf")
    return delta, level


def _new_kernel(transitions, kernel: tabular.TransitionKernel) -> tabular.TransitionKernel:
    if transitions is None:
        return kernel
    given = transitions(kernel) if callable(transitions) and not isinstance(transitions, tabular.TransitionKernel) \
        else transitions
    new = tabular.as_kernel(given, kernel.n_actions)
    if (new.n_states, new.n_actions) != (kernel.n_states, kernel.n_actions):
        raise ValueError(f"transitions must have {kernel.n_states} states and {kernel.n_actions} actions like the "
                         f"fitted model, got {new.n_states} and {new.n_actions}")
    return new


def _initial(initial, n_states: int) -> np.ndarray | None:
    if initial is None:
        return None
    arr = np.asarray(initial, dtype=np.float64)
    if arr.ndim == 0:
        if arr != np.round(arr) or not 0 <= int(arr) < n_states:
            raise ValueError(f"initial must be a state index in [0, {n_states}) or an (S,) distribution, got {initial!r}")
        d = np.zeros(n_states)
        d[int(arr)] = 1.0
        return d
    if arr.shape != (n_states,) or arr.min() < 0 or abs(arr.sum() - 1.0) > 1e-8:
        raise ValueError(f"initial must be a state index or a probability vector of shape ({n_states},) summing to 1, "
                         f"got shape {arr.shape}")
    return arr


@dataclass(frozen=True)
class _Spec:
    """The counterfactual primitives, applied to any fitted tabular model (full sample or replicate)."""

    reward_change: object = None
    transitions: object = None
    gamma: float | None = None
    initial: object = None
    horizon: int | None = None
    state_values: object = None

    @property
    def changes(self) -> tuple:
        return tuple(name for name, v in (("reward", self.reward_change), ("transitions", self.transitions),
                                          ("gamma", self.gamma)) if v is not None)

    def primitives(self, model):
        """The counterfactual ``(kernel, gamma)`` of a fitted model."""
        gamma = model.gamma_ if self.gamma is None else check_gamma(self.gamma)
        return _new_kernel(self.transitions, model.stage2_.kernel), gamma

    def solve(self, model):
        """(baseline, counterfactual, level_dependent) ScenarioSolutions of a fitted model."""
        rec, kernel = model.stage2_.recovery, model.stage2_.kernel
        d0 = _initial(self.initial, kernel.n_states)
        base = solve_scenario(rec.reward, kernel, model.gamma_, initial=d0, horizon=self.horizon)
        delta, level = _reward_delta(self.reward_change, rec.reward, model.encoder_)
        new_kernel, gamma = self.primitives(model)
        cf = solve_scenario(rec.reward + delta, new_kernel, gamma, initial=d0, horizon=self.horizon)
        return base, cf, level

    def values(self, n_states):
        x = np.arange(n_states, dtype=np.float64) if self.state_values is None else \
            np.asarray(self.state_values, dtype=np.float64)
        if x.shape != (n_states,):
            raise ValueError(f"state_values must have shape ({n_states},), got {x.shape}")
        return x


class _SummaryStatistic:
    """Bootstrap statistic: baseline and counterfactual summaries of a replicate (picklable)."""

    def __init__(self, spec: _Spec, keys, labels):
        self.spec, self.keys, self.labels = spec, keys, labels

    def __call__(self, model):
        base, cf, _ = self.spec.solve(model)
        x = self.spec.values(model.n_states_)
        b, c = base.summary(self.labels, x), cf.summary(self.labels, x)
        return np.array([[b.get(k, np.nan) for k in self.keys], [c.get(k, np.nan) for k in self.keys]])


# ============================================================================ the result
@dataclass
class CounterfactualResult:
    """Baseline vs counterfactual: policies, values, distributions, summaries, identification.

    Attributes
    ----------
    baseline, counterfactual : ScenarioSolution
    action_labels : ndarray of shape (K,)
    state_values : ndarray of shape (S,)
        ``x(s)`` used for the mean state (default: the state index).
    changes : tuple of str
        Which primitives changed (``"reward"``, ``"transitions"``, ``"gamma"``).
    invariant : bool
        The identification rule: True when the counterfactual policy is the same under every
        normalization (a known change of the flow reward, with transitions and discount
        unchanged or changed in a way that keeps every shaping term one:
        :func:`shaping_preserved`).
    rule : str
        Why.
    normalization, check_normalization : str
        The fitted normalization and the second one used to demonstrate the rule.
    normalization_gap : float
        ``max |pi'(a|s) - pi'_check(a|s)|``: the counterfactual policy under the fitted vs the
        second normalization (zero to rounding when ``invariant``).
    summary_gap : float
        Largest difference of the summary statistics between the two normalizations.
    bootstrap : ndarray of shape (B, 2, n_statistics) or None
        Replicates of the baseline (index 0) and counterfactual (index 1) summaries.
    level : float
        Confidence level of the percentile intervals.
    """

    baseline: ScenarioSolution
    counterfactual: ScenarioSolution
    action_labels: np.ndarray
    state_values: np.ndarray
    changes: tuple
    invariant: bool
    rule: str
    normalization: str
    check_normalization: str
    normalization_gap: float
    summary_gap: float
    bootstrap: np.ndarray | None = field(default=None, repr=False)
    level: float = 0.95

    def summary_keys(self) -> list:
        return list(self.baseline.summary(self.action_labels, self.state_values))

    def to_frame(self):
        """Tidy summaries: one row per (distribution, statistic) with baseline, counterfactual,
        difference and, with bootstrap replicates, ``*_lo`` / ``*_hi`` percentile bounds and
        ``*_se`` standard errors."""
        import pandas as pd

        keys = self.summary_keys()
        b = self.baseline.summary(self.action_labels, self.state_values)
        c = self.counterfactual.summary(self.action_labels, self.state_values)
        frame = pd.DataFrame({"distribution": [k[0] for k in keys], "statistic": [k[1] for k in keys],
                              "baseline": [b[k] for k in keys], "counterfactual": [c[k] for k in keys]})
        frame["difference"] = frame["counterfactual"] - frame["baseline"]
        if self.bootstrap is not None:
            reps = {"baseline": self.bootstrap[:, 0], "counterfactual": self.bootstrap[:, 1],
                    "difference": self.bootstrap[:, 1] - self.bootstrap[:, 0]}
            alpha = (1 - self.level) / 2
            for name, r in reps.items():
                frame[f"{name}_se"] = np.nanstd(r, axis=0, ddof=1)
                frame[f"{name}_lo"], frame[f"{name}_hi"] = np.nanquantile(r, [alpha, 1 - alpha], axis=0)
        return frame

    def policy_frame(self):
        """Per state: ``x(s)``, baseline and counterfactual policies, values and distributions."""
        import pandas as pd

        frame = pd.DataFrame({"state_index": np.arange(self.state_values.size), "state_value": self.state_values})
        for tag, sol in (("baseline", self.baseline), ("counterfactual", self.counterfactual)):
            for k, label in enumerate(self.action_labels):
                frame[f"{tag}_policy[{label}]"] = sol.policy[:, k]
            frame[f"{tag}_value"] = sol.value
            if sol.stationary is not None:
                frame[f"{tag}_stationary"] = sol.stationary
            if sol.occupancy is not None:
                frame[f"{tag}_initial"] = sol.occupancy
        return frame

    def describe(self) -> str:
        state = "invariant to the normalization" if self.invariant else "NOT invariant to the normalization"
        return (f"counterfactual ({', '.join(self.changes) or 'no change'}): {state}; {self.rule}. Re-solved under "
                f"{self.check_normalization}: max policy difference {self.normalization_gap:.3g}, max summary "
                f"difference {self.summary_gap:.3g}.")

    def save(self, path) -> None:
        """joblib file; read back with :func:`load_counterfactual`."""
        import joblib

        joblib.dump(self, path)


def load_counterfactual(path) -> CounterfactualResult:
    import joblib

    result = joblib.load(path)
    if not isinstance(result, CounterfactualResult):
        raise TypeError(f"{path} does not hold a CounterfactualResult (got {type(result).__name__})")
    return result


# ============================================================================ the entry point
def _default_check(model):
    from .normalization import anchor_action, mean_zero

    if model.normalization_.name != "mean-zero":
        return mean_zero()
    counts = np.asarray(model.stage2_.counts).sum(axis=0)  # choices per action (kept in a slim save too)
    return anchor_action(model.encoder_.decode(np.array([int(np.argmax(counts))]))[0])


def counterfactual(model, reward_change=None, transitions=None, gamma=None, *, initial=None, horizon=None,
                   state_values=None, check_normalization=None, n_boot=0, level=0.95, n_jobs=1,
                   random_state=None, progress=None, warn=True) -> CounterfactualResult:
    """See :meth:`genpqr.GenPQR.counterfactual`."""
    model._check_fitted()
    if not isinstance(model.stage2_, ExactStage2):
        raise ValueError("counterfactual() needs the exact tabular path (q_model='exact'); for continuous states "
                         "use genpqr.soft_fqi.SoftFQI on the recovered reward")
    if horizon is not None and (initial is None or int(horizon) < 1):
        raise ValueError(f"horizon needs an initial distribution and must be a positive integer, got {horizon!r}")
    spec = _Spec(reward_change, transitions, gamma, initial, horizon, state_values)
    labels = np.asarray(model.encoder_.labels)
    x = spec.values(model.n_states_)
    base, cf, level_dep = spec.solve(model)
    preserved = None
    if "transitions" in spec.changes or "gamma" in spec.changes:
        preserved = shaping_preserved(model.stage2_.kernel, model.gamma_, *spec.primitives(model))[0]
    invariant, rule = identification_rule(spec.changes, level_dep, preserved)
    gap = s_gap = np.nan
    check_text = "not checked"
    if check_normalization is not False:
        check = check_normalization if check_normalization is not None else _default_check(model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GenPQRWarning)
            other = model.renormalize(check)
            _, cf_check, _ = spec.solve(other)
        gap = float(np.max(np.abs(cf.policy - cf_check.policy)))
        s_cf, s_check = cf.summary(labels, x), cf_check.summary(labels, x)
        s_gap = max((abs(s_cf[k] - s_check[k]) for k in s_cf if k[1] != "value"), default=0.0)
        check_text = check.describe()
        shift = other.stage2_.recovery.reward - model.stage2_.recovery.reward
        if np.ptp(shift) <= 1e-9 * max(1.0, float(np.max(np.abs(model.stage2_.recovery.reward)))):
            check_text += (" (differs from the fitted normalization only by a constant added to every reward, which "
                           "hides most dependence on the normalization; choose another check_normalization)")
    reps = None
    if n_boot:
        from .inference import bootstrap

        if not hasattr(model, "training_data_"):
            raise ValueError(
                f"n_boot={n_boot}: the counterfactual bootstrap refits the model on resampled episodes, so it needs "
                f"the training data, which this model was saved without (genpqr fit leaves it out of model.joblib "
                f"unless --save-data; genpqr counterfactual reads it again from the fit's data file when that is "
                f"unchanged); refit with --save-data / save(path, include_data=True), or use n_boot=0 "
                f"(genpqr counterfactual --bootstrap 0) for point estimates")

        keys = list(base.summary(labels, x))
        boot = bootstrap(model, model.training_data_, n_boot=n_boot, statistic=_SummaryStatistic(spec, keys, labels),
                         n_jobs=n_jobs, random_state=random_state, progress=progress, fitted=model)
        reps = boot.replicates
    result = CounterfactualResult(base, cf, labels, x, spec.changes, invariant, rule, model.normalization_.describe(),
                                  check_text, gap, float(s_gap), reps, level)
    if warn and not invariant:
        warnings.warn(result.describe(), IdentificationWarning, stacklevel=3)
    return result

r"""What a user asks of a reward: the targets of :func:`genpqr.inference.infer`.

Every target is a smooth functional ``psi(P_0)`` of the law of the logged rows
``(S, A, S')`` (notation of the debiased-inference notes, shared/references/debiased-inference.md,
and of van der Laan, Bibaut & Kallus, arXiv 2512.24407): ``rho`` the law of a row's state,
``pi`` the behaviour, ``P`` the kernel, ``u = log pi`` the pseudo-reward, ``(mu, g)`` the
normalization ``sum_a mu(a|s) r(s,a) = g(s)`` and ``rbar = Q - mu Q + g`` the normalized reward
GenPQR recovers (``Q = u - g + gamma P mu Q``; notes Thm 3).

Two rewards can be valued (``reward=``):

* ``"normalized"`` (default): ``rbar``, at any discount ``gamma'``. The answer depends on the
  normalization, as the reward does.
* ``"log_policy"``: ``u = log pi`` (notes Lemma 1), at the agent's discount only. ``u`` differs
  from the agent's reward by potential shaping, so a value under ``u`` equals the value under
  any reward of the class minus ``E_rho V^dagger``: differences of such values are the
  normalization-free answer (notes Thm 2), and each level is "the value under the log-policy
  reward". At another discount the shaping no longer cancels: refused.

The influence function of each target is derived and checked numerically (pathwise derivative
along random submodels, tests/inference/test_derivative.py); the closed forms are in
``_algebra``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..data._validation import plain, short_list
from . import _algebra as alg
from ._context import (Context, check_normalization, check_probabilities, check_reward, check_start, check_taken,
                       check_visited, resolve_policy)

__all__ = ["Target", "policy_value", "softmax_value", "value_difference", "reward_mean", "reward_at",
           "reward_projection", "PROJECTION_WEIGHTINGS"]

#: The named weightings of :func:`reward_projection` (``weights=``): ``"data"`` (the same as None),
#: the data's (state, action) law; ``"efficient"``, the optimal minimum distance.
PROJECTION_WEIGHTINGS = {
    "data": "least squares under the data's (state, action) law (the default, weights=None)",
    "efficient": "optimal minimum distance: the inverse of the cell rewards' influence-function covariance",
}
EFFICIENT = "efficient"

class Target:
    """A functional of the law of the data (base class). Build with :func:`policy_value`,
    :func:`softmax_value`, :func:`value_difference`, :func:`reward_mean`, :func:`reward_at`,
    :func:`reward_projection`; ``a - b`` of two scalar targets is their difference."""

    name: str = ""

    def components(self) -> list:
        """Names of the target's components (one for a scalar target)."""
        return [self.name]

    def describe(self) -> str:
        return self.name

    def bind(self, ctx: Context) -> "Target":
        """A checked copy for the fitted model ``ctx`` (labels -> codes, arrays resolved)."""
        raise NotImplementedError

    def pieces(self, law: alg.TabularLaw) -> alg.Pieces:
        """Exact tabular value and gradient (``_algebra``)."""
        raise NotImplementedError

    def __sub__(self, other):
        if not isinstance(other, Target):
            return NotImplemented
        return Difference(self, other)

    def __repr__(self):
        return f"{type(self).__name__}({self.describe()})"


# ============================================================================ policy values
@dataclass
class PolicyValue(Target):
    r"""``psi = E_{rho0}[V^sigma(S)]``, ``V^sigma = sigma Q``, ``Q = r + gamma' P V^sigma``.

    ``reward="log_policy"``: notes Example 1a (Thm 9, checked): with ``d = w_sigma sigma / pi``,
    ``chi = w_sigma(s)(sigma/pi - 1) + d delta[u; sigma] + V(s) - psi``. ``reward="normalized"``:
    Example 2 (Thm 11 corrected, notes Sec. 5.6): the representer carries the propagation through
    ``mu``. ``policy="behavior"``: the behaviour's own value (notes Sec. 5.2), which moves with the
    data. ``start``: the rows' state law (``"data"``, the paper's ``rho0``) or a fixed (S,) law.
    """

    policy: object
    reward: str = "normalized"
    gamma: float | None = None
    start: object = "data"
    name: str = ""
    _sigma: object = field(default=None, repr=False)
    _bound: bool = field(default=False, repr=False)

    def describe(self) -> str:
        who = "behaviour" if isinstance(self.policy, str) else "policy"
        g = "" if self.gamma is None else f", gamma={self.gamma:g}"
        return f"value of the {who} under the {_reward_words(self.reward)}{g}"

    def bind(self, ctx):
        gamma = check_reward(self.reward, self.gamma, ctx, self.name)
        sigma = resolve_policy(self.policy, ctx, self.name)
        return replace(self, gamma=gamma, start=check_start(self.start, ctx, self.name), _sigma=sigma, _bound=True)

    def functional(self):
        return alg.policy_value_functional(self._sigma, self.start)

    def pieces(self, law):
        return _mapped(self.reward, law, self.functional(), self.gamma)

    def sieve(self, fold, held):
        from ._sieve import policy_value_parts

        return policy_value_parts(fold, held, self._sigma, self.reward, self.gamma)


@dataclass
class SoftmaxValue(Target):
    r"""``psi = E_{rho0}[V*(S)]``: the (hard) value under the reward of the counterfactual policy
    ``pi* = softmax_{A*}((r + gamma' v*) / tau)`` with ``v* = P Phi*`` its restricted soft fixed
    point (notes Example 1b; influence function: Thm 10 corrected, notes Sec. 5.3; under the
    normalized reward, notes Sec. 5.7). ``actions``: the counterfactual choice set ``A*``
    (labels; default every action), ``temperature``: ``tau``. The policy is invariant to
    shaping, its value is not: under ``"log_policy"`` the value is a level under ``u``.
    """

    actions: object = None
    temperature: float = 1.0
    reward: str = "normalized"
    gamma: float | None = None
    start: object = "data"
    name: str = ""
    _mask: object = field(default=None, repr=False)

    def describe(self) -> str:
        acts = "every action" if self.actions is None else f"actions {short_list([plain(a) for a in self.actions])}"
        g = "" if self.gamma is None else f", gamma={self.gamma:g}"
        return (f"value of the softmax policy over {acts} (temperature {self.temperature:g}) under the "
                f"{_reward_words(self.reward)}{g}")

    def bind(self, ctx):
        if not float(self.temperature) > 0:
            raise ValueError(f"{self.name}: temperature must be positive, got {self.temperature!r}")
        gamma = check_reward(self.reward, self.gamma, ctx, self.name)
        mask = np.ones(ctx.n_actions, dtype=bool)
        if self.actions is not None:
            acts = list(self.actions) if not isinstance(self.actions, str) else [self.actions]
            if not acts:
                raise ValueError(f"{self.name}: actions must name at least one action")
            mask[:] = False
            mask[ctx.encode(acts, "actions")] = True
        check_taken(mask[None].astype(float), ctx, self.name)
        if not ctx.tabular:
            raise ValueError(f"{self.name}: the softmax value is implemented for tabular states (q_model='exact'); "
                             f"on continuous states use policy_value with a fixed policy")
        return replace(self, gamma=gamma, start=check_start(self.start, ctx, self.name),
                       _mask=np.broadcast_to(mask, (ctx.n_states, ctx.n_actions)).copy())

    def pieces(self, law):
        return _mapped(self.reward, law, alg.softmax_value_functional(self._mask, float(self.temperature), self.start),
                       self.gamma)


@dataclass
class Difference(Target):
    """``psi = psi_first - psi_second`` of two scalar targets; influence ``chi_1 - chi_2``."""

    first: Target = None
    second: Target = None
    name: str = ""

    def __post_init__(self):
        if not self.name:
            self.name = f"{self.first.name} - {self.second.name}"

    def describe(self) -> str:
        return f"({self.first.describe()}) - ({self.second.describe()})"

    def bind(self, ctx):
        first, second = self.first.bind(ctx), self.second.bind(ctx)
        for t in (first, second):
            if len(t.components()) != 1:
                raise ValueError(f"{self.name}: a difference needs scalar targets, {t.name} has "
                                 f"{len(t.components())} components")
        return replace(self, first=first, second=second)

    def pieces(self, law):
        return self.first.pieces(law).combine(self.second.pieces(law), -1.0)

    def sieve(self, fold, held):
        first, second = self.first.sieve(fold, held), self.second.sieve(fold, held)
        if held is None:
            return type(first)(first.value - second.value, None, None)
        return first.minus(second)


def _reward_words(reward: str) -> str:
    return "normalized reward" if reward == "normalized" else "log-policy reward u = log pi"


def _mapped(reward, law, functional, gamma):
    if reward == "log_policy":
        return alg.log_policy_map(law, functional)
    return alg.normalized_map(law, functional, gamma)


# ============================================================================ reward functionals
@dataclass
class RewardFunctional(Target):
    r"""A linear functional of the normalized reward (notes Sec. 5.8, corrected): ``kind``

    * ``"data_mean"``: ``E_0[w(S, A) rbar(S, A)]`` over the rows' law (``w`` = 1: the mean reward);
    * ``"measure"``: ``sum_{s,a} W(s, a) rbar(s, a)`` for a user's measure ``W`` (a distribution
      over cells, or point masses: the reward at chosen cells). No ``m - psi`` term;
    * ``"projection"``: ``theta = G^{-1} E_0[x (rbar - offset)]``, ``G = E_0[x x^T]``: the
      least-squares projection on features, the semiparametric counterpart of structural
      parameters (no linear form assumed);
    * ``"efficient"``: the optimal minimum-distance projection (Chamberlain 1982;
      ``_algebra.minimum_distance``): ``theta = H (rbar - offset)`` with
      ``H = (Phi^T V^+ Phi)^{-1} Phi^T V^+`` over the identified contrasts of the visited cells,
      ``V`` the cells' influence-function covariance at the law. ``H`` is held fixed in the
      influence function (a weight estimated at the fold's law): exact when the linear form holds
      (then ``dH (rbar - Phi theta) = 0``); otherwise the target is the ``V``-weighted pseudo-true
      value and the SE omits the weight's own estimation error. The overidentification statistic
      ``J`` tests the linear form (``infer``'s diagnostics).
    """

    kind: str = "data_mean"
    weights: object = None
    names: list = None
    offset: object = None
    name: str = ""
    row_weights: object = None

    def components(self):
        return list(self.names) if self.names else [self.name]

    def describe(self) -> str:
        return {"data_mean": "mean of the normalized reward over the data",
                "measure": "normalized reward under a given distribution of (state, action)",
                "projection": "projection of the normalized reward on features",
                EFFICIENT: "projection of the normalized reward on features, efficient (optimal minimum-distance) "
                           "weights"}[self.kind]

    def bind(self, ctx):
        check_normalization(ctx.normalization, self.name)
        if self.kind == EFFICIENT and not ctx.tabular:
            raise ValueError(f"{self.name}: the efficient projection (weights='efficient') weights the reward's "
                             f"(state, action) cells: tabular states only (q_model='exact'); on continuous states "
                             f"use the data's weights or fixed weights")
        if not ctx.tabular:
            return self._bind_states(ctx)
        shape = (ctx.n_states, ctx.n_actions)
        weights = np.ones(shape) if self.weights is None else self.weights
        if callable(weights):
            weights = weights(ctx.grid())
        if isinstance(weights, tuple):
            raise ValueError(f"{self.name}: on tabular states give the distribution as an (S, K) array")
        W = _table_stack(weights, shape, self.name, "features" if self.kind in ("projection", EFFICIENT) else "weights")
        if self.kind == "measure":
            for j in range(W.shape[0]):
                check_visited(np.abs(W[j]).sum(axis=1), ctx, self.name, "the distribution")
                check_taken(np.abs(W[j]), ctx, self.name)
        offset = self.offset(ctx.grid()) if callable(self.offset) else self.offset
        offset = None if offset is None else _table_stack(offset, shape, self.name, "offset")[0]
        rw = self.row_weights(ctx.grid()) if callable(self.row_weights) else self.row_weights
        rw = None if rw is None else _table_stack(rw, shape, self.name, "weights")[0]
        if rw is not None and (not np.all(np.isfinite(rw)) or np.any(rw < 0)):
            raise ValueError(f"{self.name}: weights must be finite and non-negative")
        return replace(self, weights=W, offset=offset, row_weights=rw)

    def _bind_states(self, ctx):
        """Continuous states: callables ``states -> (n, K)`` / ``(n, K, p)``, or (states, weights) points."""
        if self.kind == "projection":
            if not callable(self.weights):
                raise ValueError(f"{self.name}: on continuous states features must be a callable states -> (n, K, p)")
            if self.offset is not None and not callable(self.offset):
                raise ValueError(f"{self.name}: on continuous states offset must be a callable states -> (n, K)")
            if self.row_weights is not None and not callable(self.row_weights):
                raise ValueError(f"{self.name}: on continuous states weights must be a callable states -> (n, K)")
            checked = (lambda fn, nd: None if fn is None else _checked_callable(fn, ctx, self.name, nd))
            return replace(self, weights=checked(self.weights, 3), offset=checked(self.offset, 2),
                           row_weights=checked(self.row_weights, 2))
        if self.kind == "measure":
            if not (isinstance(self.weights, tuple) and len(self.weights) == 2):
                raise ValueError(f"{self.name}: on continuous states give the distribution as (states (n, d), action "
                                 f"probabilities (n, K)) points")
            states = np.asarray(self.weights[0], dtype=np.float64)
            probs = check_probabilities(self.weights[1], (len(states), ctx.n_actions), self.name)
            check_taken(probs, ctx, self.name)
            return replace(self, weights=(states, probs))
        if self.weights is not None and not callable(self.weights):
            raise ValueError(f"{self.name}: on continuous states weights must be a callable states -> (n, K)")
        return replace(self, weights=None if self.weights is None else _checked_callable(self.weights, ctx, self.name, 2))

    def sieve(self, fold, held):
        from ._sieve import reward_parts

        spec = (self.weights, self.offset, self.row_weights) if self.kind == "projection" else self.weights
        return reward_parts(fold, held, self.kind, spec)

    def pieces(self, law):
        W = self.weights
        if self.kind == EFFICIENT:
            return efficient_pieces(law, np.moveaxis(W, 0, -1), self.offset, self.names)
        if self.kind == "data_mean":
            fn = alg.data_mean_functional(W)
        elif self.kind == "measure":
            fn = alg.weighted_sum_functional(W)
        else:
            fn = alg.projection_functional(np.moveaxis(W, 0, -1), self.offset, self.row_weights)
        return alg.normalized_map(law, fn, law.gamma)


def efficient_pieces(law, features, offset=None, names=None) -> alg.Pieces:
    """The optimal minimum-distance projection at ``law`` as a linear functional of the reward with
    the weights ``H`` held (``RewardFunctional``, kind ``"efficient"``); ``extras["min_distance"]``
    keeps what the overidentification statistic needs."""
    md = alg.minimum_distance(law, features, offset, names)
    pieces = alg.normalized_map(law, alg.weighted_sum_functional(md.weights), law.gamma)
    if offset is not None:
        pieces.value = pieces.value - np.einsum("psa,sa->p", md.weights, offset)
    pieces.extras["min_distance"] = md
    return pieces


def _checked_callable(fn, ctx: Context, what: str, ndim: int):
    """``fn(states)`` checked for shape (n, K) or (n, K, p) when called."""
    def call(states):
        out = np.asarray(fn(states), dtype=np.float64)
        if out.ndim != ndim or out.shape[:2] != (len(states), ctx.n_actions):
            raise ValueError(f"{what}: the callable must return shape (n, K{', p' if ndim == 3 else ''}) = "
                             f"({len(states)}, {ctx.n_actions}{', p' if ndim == 3 else ''}), got {out.shape}")
        return out
    return call


def _table_stack(x, shape, what, name) -> np.ndarray:
    """``x`` as (m, S, K): one (S, K) table, or (S, K, m) features, or a list of tables."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.shape == shape:
        return arr[None]
    if arr.ndim == 3 and arr.shape[:2] == shape:
        return np.moveaxis(arr, -1, 0)
    raise ValueError(f"{what}: {name} must have shape (S, K) = {shape} or (S, K, m), got {arr.shape}")


# ============================================================================ constructors
def policy_value(policy, *, reward: str = "normalized", gamma: float | None = None, start="data",
                 name: str | None = None) -> PolicyValue:
    """The value of a known policy (or of the behaviour, ``policy="behavior"``) under the
    recovered reward: ``E_{rho0}[V^policy(S)]`` (notes Example 1a / Example 2; see
    ``PolicyValue``).

    Parameters
    ----------
    policy : "behavior", Normalization, dict label -> probability, ndarray (K,) or (S, K), or callable
        ``states -> (n, K)`` probabilities (columns in the data's action order).
    reward : {"normalized", "log_policy"}
    gamma : float, optional
        The discount of the value (default: the model's). ``"log_policy"`` only at the model's.
    start : "data" or ndarray (S,)
        The start law: the rows' state law (default) or a fixed distribution (tabular).
    name : str, optional
    """
    check_reward(reward, gamma, None, "policy_value")
    return PolicyValue(policy, reward, gamma, start, name or _default_name("V", policy, reward))


def softmax_value(actions=None, temperature: float = 1.0, *, reward: str = "normalized", gamma: float | None = None,
                  start="data", name: str | None = None) -> SoftmaxValue:
    """The value of the counterfactual softmax policy over ``actions`` at ``temperature``
    under the recovered reward (notes Example 1b; see ``SoftmaxValue``)."""
    check_reward(reward, gamma, None, "softmax_value")
    return SoftmaxValue(None if actions is None else list(np.atleast_1d(actions)), float(temperature), reward, gamma,
                        start, name or f"V(softmax{'' if actions is None else ' ' + '|'.join(map(str, np.atleast_1d(actions)))}, "
                                       f"tau={float(temperature):g})")


def value_difference(first, second="behavior", *, reward: str = "log_policy", gamma: float | None = None,
                     name: str | None = None) -> Difference:
    """``psi_first - psi_second`` of two policy values. ``first``/``second``: targets, or
    policies (as in :func:`policy_value`, valued under ``reward`` at ``gamma``). Under
    ``reward="log_policy"`` (default) at the agent's discount the difference is the same under
    every reward of the class: no normalization enters (notes Thm 2)."""
    parts = [p if isinstance(p, Target) else policy_value(p, reward=reward, gamma=gamma) for p in (first, second)]
    return Difference(parts[0], parts[1], name or "")


def reward_mean(weights=None, *, distribution=None, name: str | None = None) -> RewardFunctional:
    """The mean of the normalized reward: over the data's (state, action) law, times ``weights``
    if given (``E_0[w rbar]``; (S, K) on tabular states, a callable ``states -> (n, K)`` on any);
    or under a given ``distribution``: an (S, K) array of cells (tabular) or ``(states, action
    probabilities)`` points (any states; the mean over the points). See ``RewardFunctional``."""
    if isinstance(distribution, tuple):
        return RewardFunctional("measure", distribution, None, None, name or "E_dist[r]")
    if distribution is not None:
        dist = np.asarray(distribution, dtype=np.float64)
        if np.any(dist < 0) or abs(dist.sum() - 1.0) > 1e-8:
            raise ValueError(f"distribution must be non-negative and sum to 1, got a total of {dist.sum():.6g}")
        W = dist if weights is None else dist * np.asarray(weights, dtype=np.float64)
        return RewardFunctional("measure", W, None, None, name or "E_dist[r]")
    return RewardFunctional("data_mean", weights, None, None, name or "E[r]")


def reward_at(cells, *, name: str | None = None) -> RewardFunctional:
    """The normalized reward at chosen cells ``[(state, action label), ...]`` (tabular states:
    a point value is root-n estimable only on a finite state space)."""
    cells = [tuple(c) for c in cells]
    if not cells or any(len(c) != 2 for c in cells):
        raise ValueError(f"cells must be a non-empty list of (state, action) pairs, got {cells!r}")
    return CellReward("measure", cells, [f"r({plain(s)}, {plain(a)})" for s, a in cells], None, name or "r(cells)")


@dataclass
class CellReward(RewardFunctional):
    """:func:`reward_at`: point masses, built when the states and labels are known."""

    def bind(self, ctx):
        if not ctx.tabular:
            raise ValueError(f"{self.name}: the reward at a cell is root-n estimable only for tabular states; on "
                             f"continuous states ask for a mean over a distribution or a projection")
        W = np.zeros((len(self.weights), ctx.n_states, ctx.n_actions))
        for j, (s, a) in enumerate(self.weights):
            if not (float(s).is_integer() and 0 <= int(s) < ctx.n_states):
                raise ValueError(f"{self.name}: state {s!r} is not a state index in 0..{ctx.n_states - 1}")
            W[j, int(s), ctx.encode([a], "action")[0]] = 1.0
        return RewardFunctional.bind(replace(self, kind="measure", weights=np.moveaxis(W, 0, -1)), ctx)


def reward_projection(features, *, names=None, offset=None, weights=None, name: str | None = None) -> RewardFunctional:
    """The least-squares projection ``theta`` of the normalized reward on ``features``
    (S, K, p) under the data's (state, action) law (``offset`` (S, K): a known part of the
    reward): the structural parameters without assuming the linear form (notes Example 3).

    ``weights`` (S, K) (or a callable ``states -> (n, K)``), fixed: the projection under
    ``w(s, a)`` times the data's law, ``E_0[w x x^T]^{-1} E_0[w x rbar]``. When the linear form
    holds every weighting has the same target and the weights only change the precision.

    ``weights="efficient"`` (tabular states): the optimal minimum-distance projection
    (Chamberlain 1982): the reward's contrasts at the visited cells weighted by the inverse of
    their influence-function covariance. When the linear form holds it is as efficient as the
    maximum likelihood estimator under the same restriction (its SE is the MLE's up to the
    kernel's estimation error) and ``J``, in the result's diagnostics, tests that form; when it
    does not, its target is the covariance-weighted pseudo-true value, which depends on the law
    (``weights=None``, ``"data"``, keeps the data-weighted projection, whose target does not).
    See docs/inference.md ("The efficient projection")."""
    if isinstance(weights, str):
        if weights not in PROJECTION_WEIGHTINGS:
            raise ValueError(f"weights must be an (S, K) array, a callable, or one of {list(PROJECTION_WEIGHTINGS)}, "
                             f"got {weights!r}")
        if weights == EFFICIENT and callable(features):
            raise ValueError("weights='efficient' weights the (state, action) cells of tabular states: give the "
                             "features as an (S, K, p) array")
        kind, weights = ("projection", None) if weights == "data" else (EFFICIENT, None)
    else:
        kind = "projection"
    if callable(features):
        if names is None:
            raise ValueError("features given as a callable need their names (names=[...], one per feature)")
        return RewardFunctional(kind, features, list(names), offset, name or "projection", weights)
    X = np.asarray(features, dtype=np.float64)
    if X.ndim != 3:
        raise ValueError(f"features must have shape (S, K, p) or be a callable states -> (n, K, p), got {X.shape}")
    names = list(names) if names is not None else [f"theta[{j}]" for j in range(X.shape[2])]
    if len(names) != X.shape[2]:
        raise ValueError(f"names must name the {X.shape[2]} features, got {len(names)}")
    return RewardFunctional(kind, X, names, offset, name or "projection", weights)


def _default_name(prefix, policy, reward) -> str:
    who = "behavior" if isinstance(policy, str) else "pi"
    return f"{prefix}({who})" + (" [u]" if reward == "log_policy" else "")

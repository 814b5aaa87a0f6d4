r"""Statewise affine normalizations :math:`\sum_a \mu(a|s) r(s,a) = g(s)` (paper, Sec. 2).

Behaviour identifies the reward only up to potential shaping (Lemma "Potential-based
shaping invariance"); a normalization ``(mu, g)`` picks one representative. A
:class:`Normalization` pairs

* an :class:`ActionWeights` ``mu(.|s)``: a fixed anchor action, a state-dependent anchor
  ``a(s)``, fixed weights (uniform = mean-zero reward) or the behaviour policy ``pi``; and
* an :class:`Offset` ``g(s)``: fixed (scalar, per-state array or callable), derived from a
  value target ``V^mu_r = h`` via ``g = h - gamma mu P h``, or estimated from outcome data
  as ``g(s) = E[y | s]`` (with ``mu = pi``).

Callables receive states as an ``(n, d)`` float array (a tabular state is an index in a
single column) and return ``(n, K)`` weights or ``(n,)`` offsets; arrays indexed by state
(``(S,)`` or ``(S, K)``) are accepted when states are tabular indices. Action labels in a
normalization are the user's labels; :meth:`Normalization.bind` maps them to codes.

The constructors :func:`anchor_action`, :func:`state_anchor`, :func:`mean_zero`,
:func:`weighted`, :func:`value` and :func:`behavior` are the public way to build one.

Continuous actions (a :class:`~genpqr.data.BoxActions`; paper, App. "Continuous-Action
Extension") use the same class with ``mu`` a reference kernel
(``genpqr.actions._measures.ReferenceKernel``) and a fixed ``g``: ``int r(s, a) mu(da|s) = g(s)``.
Constructors: :func:`point_anchor` (point mass at ``a0(s)``), :func:`gaussian`,
:func:`uniform`, :func:`kernel`; and :meth:`Normalization.for_space` carries the
space-free ones over to a box: :func:`behavior` (``mu = pi_hat``), :func:`mean_zero`
(uniform ``mu`` on a bounded box), :func:`anchor_action` with a numeric action (a point mass).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from ..data._validation import as_float_array, check_probability_rows, check_state_indices, plain
from ..actions import BehaviorKernel, GaussianKernel, PointMass, UniformKernel
from ..actions._measures import ReferenceKernel

__all__ = [
    "Normalization",
    "ActionWeights",
    "Offset",
    "anchor_action",
    "state_anchor",
    "mean_zero",
    "weighted",
    "value",
    "behavior",
    "point_anchor",
    "gaussian",
    "uniform",
    "kernel", "AnchorWeights", "FixedOffset", "FixedWeights", "OutcomeOffset", "ValueOffset",
]


def _identity_encode(labels, name="action"):
    return np.asarray(labels)


def _state_index(states, n_rows: int, name: str) -> np.ndarray:
    return check_state_indices(states, n_rows, name=f"states (to index {name})")


# =============================================================================== mu
class ActionWeights:
    """Reference distribution ``mu(.|s)`` over actions.

    Capabilities (class attributes the estimator asks instead of testing classes):
    ``needs_policy`` (``mu`` is read off the fitted policy, ``mu = pi``), ``is_point_mass``
    (all of ``mu(.|s)`` on one action per state: :meth:`point_columns` gives those columns),
    ``is_uniform`` (``mu = 1/K``, the mean-zero weights)."""

    needs_policy = False
    is_point_mass = False
    is_uniform = False

    def bind(self, encode: Callable) -> "ActionWeights":
        """A copy whose action labels are mapped to codes by ``encode(labels, name)``."""
        return self

    def probabilities(self, states: np.ndarray, n_actions: int, policy_proba: np.ndarray | None = None) -> np.ndarray:
        """``mu(a|s)`` for each state, shape (n, K)."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def point_columns(self, states, n_actions: int) -> tuple:
        """A point mass's ``(columns (c,), values (n, c))``: the codes it puts mass on and the
        one-hot weights of each state over them (``mu`` without an (n, K) array)."""
        raise TypeError(f"{type(self).__name__} is not a point mass")


@dataclass(frozen=True)
class AnchorWeights(ActionWeights):
    """Point mass on one anchor action: ``mu(a|s) = 1{a = a_dagger}``."""

    action: object
    label: object = field(default=None, compare=False)
    is_point_mass = True

    def bind(self, encode):
        code = int(np.asarray(encode(np.asarray([self.action]), "anchor action"))[0])
        return replace(self, action=code, label=self.action if self.label is None else self.label)

    def probabilities(self, states, n_actions, policy_proba=None):
        code = _check_code(self.action, n_actions, "anchor action")
        mu = np.zeros((len(states), n_actions))
        mu[:, code] = 1.0
        return mu

    def describe(self):
        return f"anchor action {self.action if self.label is None else plain(self.label)!r}"

    def point_columns(self, states, n_actions):
        return np.array([_check_code(self.action, n_actions, "anchor action")]), np.ones((len(states), 1))


@dataclass(frozen=True)
class StateAnchorWeights(ActionWeights):
    """Point mass on a state-dependent anchor ``a(s)``: array (S,) of labels by tabular
    state index, or a callable ``states -> (n,)`` labels."""

    actions: object
    _encode: Callable | None = field(default=None, compare=False)
    is_point_mass = True

    def bind(self, encode):
        if callable(self.actions):
            return replace(self, _encode=encode)
        return replace(self, actions=np.asarray(encode(np.asarray(self.actions), "state anchor actions")))

    def codes(self, states, n_actions: int) -> np.ndarray:
        """The anchor's code at each state, shape (n,)."""
        n = len(states)
        if callable(self.actions):
            labels = np.asarray(self.actions(states))
            if labels.shape != (n,):
                raise ValueError(f"state anchor callable must return shape ({n},), got {labels.shape}")
            codes = np.asarray((self._encode or _identity_encode)(labels, "state anchor actions"))
        else:
            table = np.asarray(self.actions)
            codes = table[_state_index(states, table.shape[0], "state anchor actions")]
        codes = codes.astype(np.int64)
        if codes.size and (codes.min() < 0 or codes.max() >= n_actions):
            raise ValueError(f"state anchor actions must be action codes in [0, {n_actions})")
        return codes

    def probabilities(self, states, n_actions, policy_proba=None):
        codes = self.codes(states, n_actions)
        mu = np.zeros((codes.size, n_actions))
        mu[np.arange(codes.size), codes] = 1.0
        return mu

    def describe(self):
        return "state-dependent anchor a(s)"

    def point_columns(self, states, n_actions):
        codes = self.codes(states, n_actions)
        columns = np.unique(codes)
        return columns, (codes[:, None] == columns[None, :]).astype(np.float64)


@dataclass(frozen=True)
class FixedWeights(ActionWeights):
    """Fixed weights: ``(K,)`` for every state, ``(S, K)`` by tabular state index, a
    callable ``states -> (n, K)``, or ``None`` for uniform weights (mean-zero reward)."""

    weights: object = None

    @property
    def is_uniform(self) -> bool:
        return self.weights is None

    def __post_init__(self):
        if self.weights is not None and not callable(self.weights):
            arr = np.asarray(self.weights, dtype=np.float64)
            check_probability_rows(np.atleast_2d(arr), "mu")
            if arr.ndim not in (1, 2):
                raise ValueError(f"mu must have shape (K,) or (S, K), got {arr.shape}")

    def probabilities(self, states, n_actions, policy_proba=None):
        n = len(states)
        if self.weights is None:
            return np.full((n, n_actions), 1.0 / n_actions)
        if callable(self.weights):
            mu = np.asarray(self.weights(states), dtype=np.float64)
            if mu.shape != (n, n_actions):
                raise ValueError(f"mu callable must return shape ({n}, {n_actions}), got {mu.shape}")
            return check_probability_rows(mu, "mu")
        arr = np.asarray(self.weights, dtype=np.float64)
        if arr.shape[-1] != n_actions:
            raise ValueError(f"mu has {arr.shape[-1]} action columns but the problem has {n_actions} actions")
        if arr.ndim == 1:
            return np.broadcast_to(arr, (n, n_actions)).copy()
        return arr[_state_index(states, arr.shape[0], "mu")]

    def describe(self):
        return "uniform weights (mean-zero)" if self.weights is None else "fixed weights mu(a|s)"


@dataclass(frozen=True)
class BehaviorWeights(ActionWeights):
    """The behaviour policy itself, ``mu = pi`` (estimated in stage 1)."""

    needs_policy = True

    def probabilities(self, states, n_actions, policy_proba=None):
        if policy_proba is None:
            raise ValueError("the behaviour normalization (mu = pi) needs the policy's probabilities")
        proba = np.asarray(policy_proba, dtype=np.float64)
        if proba.shape != (len(states), n_actions):
            raise ValueError(f"policy probabilities must have shape ({len(states)}, {n_actions}), got {proba.shape}")
        return proba

    def describe(self):
        return "behaviour policy mu = pi"


def _check_code(code, n_actions, name):
    if not isinstance(code, (numbers.Integral, np.integer)) or not 0 <= int(code) < n_actions:
        raise ValueError(f"{name} must be an action code in [0, {n_actions}) after label mapping, got {plain(code)!r}")
    return int(code)


# =============================================================================== g
class Offset:
    """The anchor function ``g(s)``.

    Capabilities: ``needs_outcomes`` (``g = E[y|s]`` is estimated from the data's outcomes),
    ``needs_transitions`` (``g`` involves ``P``, a value target); :meth:`fixed` when neither."""

    needs_outcomes = False
    needs_transitions = False

    def fixed(self) -> bool:
        """True when ``g`` needs neither transitions nor data."""
        return not (self.needs_outcomes or self.needs_transitions)

    def __call__(self, states: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class FixedOffset(Offset):
    """``g`` given: a scalar, an ``(S,)`` array by tabular state index, or ``states -> (n,)``."""

    g: object = 0.0

    def __post_init__(self):
        if not callable(self.g):
            arr = as_float_array(self.g, "g")
            if arr.ndim > 1:
                raise ValueError(f"g must be a scalar, an (S,) array or a callable, got shape {arr.shape}")

    def __call__(self, states):
        n = len(states)
        if callable(self.g):
            out = as_float_array(self.g(states), "g(states)")
            if out.shape != (n,):
                raise ValueError(f"g callable must return shape ({n},), got {out.shape}")
            return out
        arr = np.asarray(self.g, dtype=np.float64)
        if arr.ndim == 0:
            return np.full(n, float(arr))
        return arr[_state_index(states, arr.shape[0], "g")]

    def describe(self):
        return f"g = {self.g!r}" if np.ndim(self.g) == 0 and not callable(self.g) else "g(s) given"


@dataclass(frozen=True)
class ValueOffset(Offset):
    r"""Value normalization ``V^mu_r = h``: ``g = h - gamma * mu P h`` (paper, Sec. 2).

    ``h`` is a scalar, an (S,) array or a callable. ``mu P h`` needs the transitions: exact
    with a tabular ``P``; in the sample path ``E[h(s') | s, a]`` is regressed per action
    (``regressor``, default gradient boosting), or is exact when ``h`` is constant and no
    transition terminates.
    """

    h: object
    regressor: object = None
    needs_transitions = True

    def describe(self):
        return "value target V^mu_r = h"


@dataclass(frozen=True)
class OutcomeOffset(Offset):
    """``g(s) = E[y | s]`` from observed outcomes ``y`` (with ``mu = pi``); estimated by
    ``regressor`` (default gradient boosting) or by per-state means for tabular states."""

    regressor: object = None
    needs_outcomes = True

    def describe(self):
        return "g(s) = E[outcome | s]"


# =============================================================================== the pair
@dataclass(frozen=True)
class Normalization:
    """A statewise affine normalization ``mu r = g``.

    Attributes
    ----------
    mu : ActionWeights
    g : Offset
    name : str
        Short name (``"anchor"``, ``"state-anchor"``, ``"mean-zero"``, ``"weighted"``,
        ``"value"``, ``"behavior"``).
    """

    mu: ActionWeights | ReferenceKernel
    g: Offset
    name: str

    def __post_init__(self):
        if not isinstance(self.mu, (ActionWeights, ReferenceKernel)):
            raise TypeError(f"mu must be genpqr.normalization ActionWeights (finite actions) or a "
                            f"genpqr.actions.ReferenceKernel (continuous actions), got {type(self.mu).__name__}")
        if not isinstance(self.g, Offset):
            raise TypeError(f"g must be a genpqr.normalization Offset, got {type(self.g).__name__}")
        if self.is_kernel and not isinstance(self.g, FixedOffset):
            raise TypeError(f"with a reference kernel mu, g must be a fixed offset (scalar or callable states -> (n,)), "
                            f"got {type(self.g).__name__}")

    @property
    def is_kernel(self) -> bool:
        """``mu`` is a reference kernel over continuous actions."""
        return isinstance(self.mu, ReferenceKernel)

    def for_space(self, action_space) -> "Normalization":
        """This normalization on ``action_space``: itself on a finite space; on a box, ``mu``
        as a reference kernel (``mu = pi`` -> :class:`~genpqr.actions.BehaviorKernel`, uniform
        weights -> :class:`~genpqr.actions.UniformKernel` on a bounded box, a numeric anchor
        action -> :class:`~genpqr.actions.PointMass`)."""
        if action_space.is_finite:
            if self.is_kernel:
                raise TypeError(f"the normalization ({self.describe()}) has a reference kernel mu for continuous "
                                f"actions, but the data has finite actions; use anchor_action, mean_zero, ...")
            return self
        if self.is_kernel:
            return self
        mu = self.mu
        if isinstance(mu, BehaviorWeights):
            kernel = BehaviorKernel()
        elif isinstance(mu, FixedWeights) and mu.weights is None and action_space.is_bounded:
            kernel = UniformKernel()
        elif isinstance(mu, AnchorWeights) and isinstance(mu.action, (numbers.Real, np.ndarray, list, tuple)):
            kernel = PointMass(mu.action)
        else:
            raise TypeError(f"the normalization ({self.describe()}) is defined for finite actions; for continuous "
                            f"actions in {action_space.describe()} give a reference kernel mu (point_anchor, gaussian, "
                            f"uniform, behavior, kernel)")
        if not isinstance(self.g, FixedOffset):
            raise TypeError(f"continuous actions need a fixed g (scalar or callable states -> (n,)); "
                            f"{self.g.describe()} is not supported")
        return Normalization(kernel, self.g, self.name)

    def bind(self, encode: Callable) -> "Normalization":
        """Map action labels to codes with ``encode(labels, name) -> codes``."""
        return replace(self, mu=self.mu.bind(encode))

    def weights(self, states, n_actions: int, policy_proba=None) -> np.ndarray:
        """``mu(.|s)``, shape (n, K)."""
        return self.mu.probabilities(states, n_actions, policy_proba)

    def describe(self) -> str:
        return f"{self.name}: mu = {self.mu.describe()}; {self.g.describe()}"

    def __repr__(self) -> str:
        return f"Normalization({self.describe()})"

    # ---------------------------------------------------------------- tabular resolution
    def resolve_tabular(self, policy: np.ndarray, expect_next: Callable, gamma: float, states=None):
        """Concrete ``(mu, g)`` on a finite state space.

        Parameters
        ----------
        policy : ndarray of shape (S, K)
            Behaviour probabilities (used by ``mu = pi``).
        expect_next : callable
            ``h (S,) -> (P h) (S, K)``, the expectation of a state function at the next state.
        gamma : float
        states : ndarray of shape (S, 1), optional
            State representation passed to callables (default: indices ``0..S-1``).

        Returns
        -------
        mu : ndarray of shape (S, K)
        g : ndarray of shape (S,)
        """
        S, K = policy.shape
        if states is None:
            states = np.arange(S, dtype=np.float64)[:, None]
        mu = self.weights(states, K, policy)
        g = self._tabular_offset(states, mu, expect_next, gamma)
        return mu, g

    def _tabular_offset(self, states, mu, expect_next, gamma):
        g = self.g
        if isinstance(g, ValueOffset):
            h = FixedOffset(g.h)(states)
            return h - gamma * np.sum(mu * expect_next(h), axis=1)
        if isinstance(g, OutcomeOffset):
            raise ValueError(
                "behavior() without g estimates g from outcome data; on a known tabular MDP pass g "
                "explicitly (behavior(g=...)), or fit GenPQR on transitions that carry outcomes"
            )
        return g(states)


# =============================================================================== constructors
def anchor_action(a, g=0.0) -> Normalization:
    """Fixed anchor action: ``r(s, a) = g(s)`` for the anchor action ``a`` (Rust's
    normalization with ``g = 0``). ``a`` is an action label."""
    return Normalization(AnchorWeights(a), FixedOffset(g), "anchor")


def state_anchor(actions, g=0.0) -> Normalization:
    """State-dependent anchor ``r(s, a(s)) = g(s)``; ``actions`` is an (S,) array of labels
    by tabular state or a callable ``states -> (n,)`` labels."""
    return Normalization(StateAnchorWeights(actions), FixedOffset(g), "state-anchor")


def mean_zero(g=0.0) -> Normalization:
    """Uniform weights: the statewise mean reward equals ``g`` (sum-to-zero when g = 0)."""
    return Normalization(FixedWeights(None), FixedOffset(g), "mean-zero")


def weighted(mu, g=0.0) -> Normalization:
    """Any fixed reference distribution ``mu`` ((K,), (S, K) or callable) with any ``g``."""
    if mu is None:
        raise ValueError("mu must be given for weighted(); use mean_zero() for uniform weights")
    return Normalization(FixedWeights(mu), FixedOffset(g), "weighted")


def value(h, mu: Normalization | None = None, regressor=None) -> Normalization:
    """Value normalization ``V^mu_r = h``, i.e. ``g = h - gamma mu P h``.

    Parameters
    ----------
    h : float, ndarray of shape (S,), or callable states -> (n,)
    mu : Normalization, optional
        Whose ``mu`` to use (its ``g`` is ignored). Default: the behaviour policy, so that
        the behaviour policy's expected discounted reward from each state equals ``h``.
    regressor : sklearn regressor, optional
        Sample path only: estimates ``E[h(s') | s, a]`` per action.
    """
    weights = BehaviorWeights() if mu is None else mu.mu
    return Normalization(weights, ValueOffset(h, regressor), "value")


def behavior(g=None, regressor=None) -> Normalization:
    """Behaviour weights ``mu = pi``: ``sum_a pi(a|s) r(s,a) = g(s)``.

    With ``g=None``, ``g(s) = E[y | s]`` is estimated from the outcome column of the data
    (by ``regressor``, or per-state means for tabular states).
    """
    offset = OutcomeOffset(regressor) if g is None else FixedOffset(g)
    return Normalization(BehaviorWeights(), offset, "behavior")


# =============================================================================== continuous actions
def point_anchor(action=0.0, gain=None, g=0.0) -> Normalization:
    """Continuous actions: point mass at the anchor ``a0(s) = action + gain @ s`` (or a callable
    ``action(states) -> (n, m)``): ``r(s, a0(s)) = g(s)``."""
    return Normalization(PointMass(action, gain), FixedOffset(g), "anchor")


def gaussian(mean=0.0, scale=1.0, gain=None, g=0.0) -> Normalization:
    """Continuous actions: ``mu(.|s) = N(mean + gain @ s, diag(scale^2))``; ``mean``/``scale``
    may be callables (unbounded action spaces)."""
    return Normalization(GaussianKernel(mean, scale, gain), FixedOffset(g), "gaussian")


def uniform(low=None, high=None, g=0.0) -> Normalization:
    """Continuous actions: uniform ``mu`` on ``[low, high]`` (default: the bounded action space
    of the data); the mean reward over the box is ``g``."""
    return Normalization(UniformKernel(low, high), FixedOffset(g), "uniform")


def kernel(mu: ReferenceKernel, g=0.0, name: str = "kernel") -> Normalization:
    """Continuous actions: any reference kernel ``mu`` with any fixed ``g``."""
    return Normalization(mu, FixedOffset(g), name)

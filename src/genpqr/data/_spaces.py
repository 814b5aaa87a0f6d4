"""Action spaces: where actions live, the reference measure, and the ``mu``-integral rule.

The paper's algorithm is one algorithm for finite and continuous actions:

    u = log dpi/dlambda,   Q = u - g + gamma P mu Q,   r = Q - mu Q + g

and what differs between the two cases is owned by the action space:

* :class:`FiniteActions` -- labels ``labels[code]`` for codes ``0..K-1``; ``lambda`` is the
  counting measure (so ``u = log pi``), and a ``mu``-integral is the weighted sum over the K
  actions with weights ``mu(a|s)``: the nodes are all K actions (:meth:`FiniteActions.nodes`).
* :class:`BoxActions` -- a box ``[low, high]`` in ``R^m`` (infinite bounds allowed);
  ``lambda`` is Lebesgue measure on the box unless a
  ``genpqr.actions._measures.ReferenceMeasure`` says otherwise, and a ``mu``-integral is a
  quadrature or Monte Carlo rule (:mod:`genpqr.actions`).

Both answer ``check(actions)``, ``describe()`` and ``reference_measure()``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..exceptions import ActionTableError
from ._validation import as_float_array, short_list
from ._action_table import ActionTable, as_action_table

__all__ = ["ActionSpace", "FiniteActions", "BoxActions", "Nodes", "as_actions"]


@dataclass(frozen=True, eq=False)
class Nodes:
    """Weighted nodes of ``mu(.|s_i)`` for n states.

    Attributes
    ----------
    actions : ndarray of shape (n, J, m)
    weights : ndarray of shape (n, J), rows sum to 1
    """

    actions: np.ndarray
    weights: np.ndarray

    @property
    def n_nodes(self) -> int:
        return int(self.weights.shape[1])

    def repeat_states(self, states: np.ndarray) -> np.ndarray:
        """States repeated once per node, aligned with ``flat_actions``: (n * J, d)."""
        return np.repeat(states, self.n_nodes, axis=0)

    @property
    def flat_actions(self) -> np.ndarray:
        """(n * J, m)."""
        return self.actions.reshape(-1, self.actions.shape[-1])

    def integrate(self, values: np.ndarray) -> np.ndarray:
        """``sum_j w_ij values_ij`` for values of shape (n, J) or flat (n * J,)."""
        values = np.asarray(values, dtype=np.float64).reshape(self.weights.shape)
        return np.sum(self.weights * values, axis=1)


class ActionSpace:
    """Base of :class:`FiniteActions` and :class:`BoxActions`."""

    #: True for a finite label set, False for a box in ``R^m``.
    is_finite: bool = False

    def check(self, actions, name: str = "actions") -> None:
        """Raise ValueError when an action (codes for a finite space) lies outside the space."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def reference_measure(self) -> str:
        """The default reference measure ``lambda`` of ``u = log dpi/dlambda``."""
        raise NotImplementedError


@dataclass(frozen=True)
class FiniteActions(ActionSpace):
    """A finite action set: a bijection between the user's labels and integer codes ``0..K-1``
    (the counting measure is the reference measure: ``u = log pi``).

    Parameters
    ----------
    labels : ndarray of shape (K,)
        The labels, in code order (``labels[code]``).
    table : ActionTable, optional
        The actions' features (:class:`genpqr.data.ActionTable`); its labels must be ``labels``
        in the same order (:meth:`from_table`). None: actions described by their labels only.
    """

    labels: np.ndarray
    table: ActionTable | None = None
    is_finite = True

    def __post_init__(self):
        labels = np.array(self.labels)  # a private copy: later changes to the caller's array do not leak in
        if labels.ndim != 1 or labels.size == 0:
            raise ValueError(f"action labels must be a non-empty 1-D sequence, got shape {labels.shape}")
        if len(np.unique(labels)) != labels.size:
            raise ValueError(f"action labels must be distinct, got {short_list(labels, 20)}")
        labels.setflags(write=False)
        object.__setattr__(self, "labels", labels)
        if self.table is not None:
            if not isinstance(self.table, ActionTable):
                raise TypeError(f"table must be a genpqr.data.ActionTable, got {type(self.table).__name__}")
            if not np.array_equal(self.table.labels, labels):
                raise ActionTableError("the action table's labels must be the action labels in code order")

    def __eq__(self, other):
        return isinstance(other, FiniteActions) and np.array_equal(self.labels, other.labels) and (
            (self.table is None) == (other.table is None)) and (self.table is None or self.table == other.table)

    __hash__ = None

    @property
    def n_actions(self) -> int:
        return int(self.labels.size)

    @property
    def features(self) -> np.ndarray | None:
        """The actions' features in code order, shape (K, d); None without a table."""
        return None if self.table is None else self.table.features

    @classmethod
    def from_table(cls, table) -> "FiniteActions":
        """The K actions of an action table (a :class:`genpqr.data.ActionTable`, a DataFrame or a
        mapping label -> features), coded ``0..K-1`` in the table's row order."""
        table = as_action_table(table)
        return cls(table.labels, table)

    @classmethod
    def from_observed(cls, actions) -> "FiniteActions":
        """Sorted unique labels of ``actions``."""
        return cls(np.unique(np.asarray(actions)))

    def encode(self, actions, name: str = "actions") -> np.ndarray:
        """Codes ``(n,)`` int64 for labels ``actions``; unknown labels raise ``ValueError``."""
        actions = np.asarray(actions)
        if actions.ndim == 2 and actions.shape[1] == 1:
            actions = actions[:, 0]
        if actions.ndim != 1:
            raise ValueError(f"{name} must be a 1-D array of action labels, got shape {actions.shape}")
        if actions.dtype.kind == "f" and not np.all(np.isfinite(actions)):
            raise ValueError(f"{name} must not contain NaN/inf")
        order = np.argsort(self.labels, kind="stable")
        sorted_labels = self.labels[order]
        try:
            pos = np.searchsorted(sorted_labels, actions)
        except TypeError as exc:
            raise TypeError(
                f"{name} has labels of type {actions.dtype} that cannot be compared with the known "
                f"action labels {short_list(self.labels, 20)}"
            ) from exc
        pos = np.clip(pos, 0, len(sorted_labels) - 1)
        known = sorted_labels[pos] == actions
        if not np.all(known):
            unknown = np.unique(actions[~known])[:5].tolist()
            raise ValueError(
                f"{name} contains action label(s) {unknown} that the model never saw; "
                f"known labels are {short_list(self.labels, 20)}"
            )
        return order[pos].astype(np.int64)

    def encode_one(self, label, name: str = "action") -> int:
        return int(self.encode(np.asarray([label]), name=name)[0])

    def decode(self, codes) -> np.ndarray:
        """Labels for integer codes."""
        codes = np.asarray(codes, dtype=np.int64)
        if codes.size and (codes.min() < 0 or codes.max() >= self.n_actions):
            raise ValueError(f"action codes must be in [0, {self.n_actions}), got [{codes.min()}, {codes.max()}]")
        return self.labels[codes]

    def check(self, actions, name: str = "actions") -> None:
        """Codes must lie in ``[0, K)``."""
        actions = np.asarray(actions)
        if actions.size and (actions.min() < 0 or actions.max() >= self.n_actions):
            raise ValueError(f"{name} must be codes in [0, K)")

    def nodes(self, weights) -> "Nodes":
        """The ``mu``-integral over a finite set as integration nodes: every action ``0..K-1``
        at every state, with weights ``mu(a|s)`` of shape (n, K)."""
        weights = np.asarray(weights, dtype=np.float64)
        n, K = weights.shape
        return Nodes(np.broadcast_to(np.arange(K, dtype=np.float64)[None, :, None], (n, K, 1)), weights)

    def describe(self) -> str:
        features = "" if self.table is None else f" described by {self.table.n_features} feature(s)"
        return f"{self.n_actions} actions {short_list(self.labels, 8)}{features}"

    def reference_measure(self) -> str:
        return "counting measure on the actions"


@dataclass(frozen=True, eq=False)
class BoxActions(ActionSpace):
    """A box ``[low, high]`` in ``R^m``; infinite bounds allowed (``R^m`` by default).

    Attributes
    ----------
    low, high : ndarray of shape (m,)
    """

    low: np.ndarray
    high: np.ndarray

    def __post_init__(self):
        low = np.atleast_1d(np.asarray(self.low, dtype=np.float64)).copy()
        high = np.atleast_1d(np.asarray(self.high, dtype=np.float64)).copy()
        if low.ndim != 1 or low.shape != high.shape:
            raise ValueError(f"action_low and action_high must be (m,) arrays of equal shape, got {low.shape} and "
                             f"{high.shape}")
        if np.isnan(low).any() or np.isnan(high).any():
            raise ValueError("action_low and action_high must not be NaN")
        if np.any(low >= high):
            j = int(np.argmax(low >= high))
            raise ValueError(f"action_low must be below action_high in every dimension; dimension {j} has "
                             f"low={low[j]} >= high={high[j]}")
        low.setflags(write=False)
        high.setflags(write=False)
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    @classmethod
    def create(cls, dim: int, low=None, high=None) -> "BoxActions":
        """``low``/``high``: None (unbounded), a scalar or an (m,) array."""
        lo = np.full(dim, -np.inf) if low is None else np.broadcast_to(np.asarray(low, dtype=np.float64), (dim,))
        hi = np.full(dim, np.inf) if high is None else np.broadcast_to(np.asarray(high, dtype=np.float64), (dim,))
        return cls(lo, hi)

    @property
    def dim(self) -> int:
        return int(self.low.size)

    @property
    def is_bounded(self) -> bool:
        """Every dimension has finite bounds (the Lebesgue reference measure is finite)."""
        return bool(np.all(np.isfinite(self.low)) and np.all(np.isfinite(self.high)))

    @property
    def is_unbounded(self) -> bool:
        """No dimension has a finite bound (``R^m``)."""
        return bool(np.all(np.isinf(self.low)) and np.all(np.isinf(self.high)))

    @property
    def volume(self) -> float:
        return float(np.prod(self.high - self.low)) if self.is_bounded else float("inf")

    def contains(self, actions: np.ndarray) -> np.ndarray:
        """Boolean mask over the leading axes of ``actions`` (..., m): inside the closed box."""
        return np.all((actions >= self.low) & (actions <= self.high), axis=-1)

    def check(self, actions, name: str = "actions") -> None:
        """Raise ValueError when any action lies outside the space."""
        inside = self.contains(actions)
        if not np.all(inside):
            bad = np.argwhere(~inside)[0]
            first = tuple(int(i) for i in bad)
            where = f"row {first[0]}" if len(first) == 1 else f"index {first}"
            raise ValueError(
                f"{name} has {int((~inside).sum())} action(s) outside the stated support {self.describe()} "
                f"(first at {where}: {np.asarray(actions)[first].tolist()}); widen action_low/action_high or "
                "fix the data"
            )

    def same_as(self, other: "BoxActions") -> bool:
        return self.dim == other.dim and np.array_equal(self.low, other.low) and np.array_equal(self.high, other.high)

    def describe(self) -> str:
        if self.is_unbounded:
            return f"R^{self.dim}"
        parts = [f"[{lo:g}, {hi:g}]" for lo, hi in zip(self.low, self.high)]
        return " x ".join(parts)

    def reference_measure(self) -> str:
        """The default reference measure: Lebesgue measure on the space."""
        return f"Lebesgue measure on {self.describe()}"

    def __repr__(self):
        return f"ActionSpace({self.describe()})"


def as_actions(actions, name: str = "actions", dim: int | None = None) -> np.ndarray:
    """Real actions as an (n, m) float array (a 1-D input is one action dimension)."""
    arr = np.asarray(actions)
    if arr.dtype.kind not in "iuf":
        raise TypeError(
            f"{name} must be real-valued (continuous actions), got dtype {arr.dtype}; for discrete action labels "
            "use genpqr.from_arrays and genpqr.GenPQR"
        )
    arr = as_float_array(arr, name, ndim=2, allow_1d_as_column=True)
    if dim is not None and arr.shape[1] != dim:
        raise ValueError(f"{name} must have {dim} column(s) (the action dimension), got {arr.shape[1]}")
    return arr

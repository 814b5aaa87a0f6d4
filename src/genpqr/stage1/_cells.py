r"""Choice counts per (state, action) cell: the sufficient statistic of every first stage whose
likelihood sees a row only through its state and its action.

A policy model ``pi_theta(a|s)`` fitted by (weighted, penalised) maximum likelihood minimises

.. math::

    \sum_i w_i \, [-\log \pi_\theta(a_i \mid s_i)]
        = \sum_{(s, a)} n_w(s, a) \, [-\log \pi_\theta(a \mid s)],
    \qquad n_w(s, a) = \sum_{i: s_i = s, a_i = a} w_i ,

so with tabular states (or any states that repeat) the ``n`` rows can be replaced by the ``c``
distinct cells and their weighted counts ``n_w``: the same objective, the same optimum, at the
cost of one pass over the rows to count. With sample weights (a latent type's posterior weights,
a bootstrap's multiplicities) the counts are weighted; integer weights are repeated rows.

``choice_cells`` counts (one pass; a state row is a cell's key, so the states need not be
integer indices); ``ChoiceCells`` holds the counts and the distinct state rows, and gives
the per-state totals and feature sums a conditional logit needs and the rows of a weighted fit
(``ChoiceCells.as_rows``). ``distinct_rows`` numbers the distinct state rows (a count
for state indices, else one sort); ``repeated_rows`` does so only when it pays
(``COMPRESS_SHARE``). ``FitOnCells`` fits any classifier whose weighted fit is a sum
over rows (a multinomial logit) on the cells; ``RowTable`` holds per-row values once per
distinct (fold, state) row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data._estimator_base import LightClassifierMixin, LightEstimator

__all__ = ["ChoiceCells", "choice_cells", "distinct_rows", "repeated_rows", "present_keys", "COMPRESS_SHARE",
           "compresses", "FitOnCells", "RowTable"]

#: Fit on the cells when there are at most this share as many distinct states as rows (else on
#: the rows: every state distinct, as with continuous states, and counting would only reorder them).
COMPRESS_SHARE = 0.5


def compresses(n_distinct: int, n_rows: int) -> bool:
    """Whether ``n_distinct`` distinct states (or cells) among ``n_rows`` rows are few enough
    (``COMPRESS_SHARE``) for a fit on the counts to pay."""
    return n_distinct <= COMPRESS_SHARE * n_rows


#: ``repeated_rows`` first looks at this many leading rows: when most of them are distinct
#: (continuous states) it does not sort the rest.
PREFIX_ROWS = 4096


def distinct_rows(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct (m, d), index (n,))`` of the rows of ``X`` (n, d): the distinct rows in sorted
    (lexicographic) order and each row's position among them (``distinct[index] == X``). Small
    non-negative integers in one column (tabular state indices) are counted in place (no sort)."""
    X = np.asarray(X)
    if X.ndim == 1:
        X = X[:, None]
    n = X.shape[0]
    if n == 0:
        return X[:0], np.zeros(0, dtype=np.int64)
    key = _mixed_radix(X)  # several columns of small integers (a fold and a state index): one key
    if key is not None:
        code, radix = key
        counted = _small_integers(code)
        if counted is not None:
            return _decode(counted[0][:, 0], radix).astype(X.dtype), counted[1]
    if X.shape[1] == 1:
        counted = _small_integers(X[:, 0])
        if counted is not None:
            return counted
        values, index = np.unique(X[:, 0], return_inverse=True)
        return values[:, None], index.reshape(-1).astype(np.int64)
    order = np.lexsort(X.T[::-1])
    ordered = X[order]
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.any(ordered[1:] != ordered[:-1], axis=1, out=new[1:])
    index = np.empty(n, dtype=np.int64)
    index[order] = np.cumsum(new) - 1
    return ordered[new], index


def _mixed_radix(X: np.ndarray):
    """``(key (n,), radix (d,))`` numbering the rows of ``X`` (n, d >= 2) of non-negative integers
    in lexicographic order, when the key stays below ``4 n + 2**16``; else None."""
    if X.shape[1] < 2 or X.dtype.kind not in "iuf":
        return None
    top = X.max(axis=0)
    if not (np.all(X.min(axis=0) >= 0) and np.prod(top.astype(np.float64) + 1) < 4 * X.shape[0] + 2 ** 16):
        return None
    if X.dtype.kind == "f" and not np.all(X == np.floor(X)):
        return None
    radix = top.astype(np.int64) + 1
    key = np.zeros(X.shape[0], dtype=np.int64)
    for j in range(X.shape[1]):
        key = key * radix[j] + X[:, j].astype(np.int64)
    return key, radix


def _decode(key: np.ndarray, radix: np.ndarray) -> np.ndarray:
    """The rows (m, d) of mixed-radix keys (:func:`_mixed_radix`)."""
    out = np.empty((key.size, radix.size), dtype=np.int64)
    for j in range(radix.size - 1, -1, -1):
        out[:, j] = key % radix[j]
        key = key // radix[j]
    return out


def _small_integers(x: np.ndarray):
    """``distinct_rows`` of one column of non-negative integers below ``4 n + 2**16`` by a
    count, or None for other values."""
    n = x.size
    if x.dtype.kind == "f":
        if not (np.all(x >= 0) and np.all(x < 4 * n + 2 ** 16) and np.all(x == np.floor(x))):
            return None
    elif x.dtype.kind not in "iu" or x.min() < 0 or x.max() >= 4 * n + 2 ** 16:
        return None
    codes = x.astype(np.int64)
    present = np.bincount(codes) > 0
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present).astype(x.dtype)[:, None], rank[codes]


def repeated_rows(X: np.ndarray):
    """``distinct_rows`` of ``X`` (n, d) when its rows repeat enough for a fit or a
    prediction on the distinct rows to pay (:func:`compresses`), else None. Continuous states are
    recognised from their first ``PREFIX_ROWS`` rows, most of them distinct, without a sort."""
    X = np.asarray(X)
    X = X[:, None] if X.ndim == 1 else X
    n = X.shape[0]
    if n < 2:
        return None
    head = X[:PREFIX_ROWS]
    if n > head.shape[0] and not compresses(distinct_rows(head)[0].shape[0], head.shape[0]):
        return None
    distinct, index = distinct_rows(X)
    return (distinct, index) if compresses(distinct.shape[0], n) else None


@dataclass(frozen=True)
class ChoiceCells:
    """Weighted choice counts per (state, action) cell.

    Attributes
    ----------
    states : ndarray of shape (m, d)
        The distinct state rows, sorted.
    state : ndarray of shape (c,)
        Each cell's state, a row of ``states``.
    action : ndarray of shape (c,)
        Each cell's action code.
    weight : ndarray of shape (c,)
        Each cell's summed row weights (its count without weights).
    n_actions : int
    n_rows : int
        The rows counted.

    Cells are sorted by state, then action. A cell whose rows all weigh 0 is kept with weight 0
    (it adds nothing to a weighted likelihood, but its action is still one of the data's classes).
    """

    states: np.ndarray
    state: np.ndarray
    action: np.ndarray
    weight: np.ndarray
    n_actions: int
    n_rows: int

    @property
    def n_cells(self) -> int:
        return int(self.state.size)

    def state_weights(self) -> np.ndarray:
        """Summed weight per distinct state, shape (m,)."""
        return np.bincount(self.state, weights=self.weight, minlength=self.states.shape[0])

    def feature_sums(self, features: np.ndarray) -> np.ndarray:
        """``sum_a n_w(s, a) x_a`` per distinct state, shape (m, d_x), for action features (K, d_x)."""
        features = np.asarray(features, dtype=np.float64)
        out = np.zeros((self.states.shape[0], features.shape[1]))
        live = self.weight > 0  # zero-weight cells add nothing (left out: a weight of 0 is a dropped row)
        state, action, weight = (self.state, self.action, self.weight) if live.all() else \
            (self.state[live], self.action[live], self.weight[live])
        if state.size:  # the cells are sorted by state: one segment sum per state with a cell
            starts = np.flatnonzero(np.r_[True, state[1:] != state[:-1]])
            out[state[starts]] = np.add.reduceat(weight[:, None] * features[action], starts, axis=0)
        return out

    def as_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(X (c, d), y (c,), sample_weight (c,))``: one weighted row per cell, the input of a
        classifier's ``fit`` whose weighted objective is a sum over rows."""
        return self.states[self.state], self.action, self.weight

    def table(self) -> np.ndarray:
        """The counts as a dense (m, K) matrix (for few states and actions)."""
        out = np.zeros((self.states.shape[0], self.n_actions))
        out[self.state, self.action] = self.weight
        return out


@dataclass
class RowTable:
    """Per-row ``(n, K)`` values held once per distinct (fold, state) row: row ``i``'s values are
    ``values[index[i]]`` (``index`` None: one row of ``values`` per row). With tabular states the
    table has one row per visited state (and fold) instead of one per logged choice.

    Attributes
    ----------
    states : ndarray of shape (m, d)
        The distinct states (the rows' states when ``index`` is None).
    values : ndarray of shape (m, K)
    index : ndarray of shape (n,) or None
    """

    states: np.ndarray
    values: np.ndarray
    index: np.ndarray | None = None

    def rows(self, values: np.ndarray | None = None) -> np.ndarray:
        """``values`` (default: the table's) spread over the rows, shape (n, ...)."""
        values = self.values if values is None else values
        return values if self.index is None else values[self.index]

    def at(self, values: np.ndarray, codes) -> np.ndarray:
        """Row ``i``'s entry of ``values`` (m, K) at action code ``codes[i]``, shape (n,)."""
        codes = np.asarray(codes, dtype=np.int64)
        rows = np.arange(codes.shape[0]) if self.index is None else self.index
        return values[rows, codes]

    def with_values(self, values: np.ndarray) -> "RowTable":
        return RowTable(self.states, values, self.index)


def choice_cells(X, codes, n_actions: int, sample_weight=None, *, index=None) -> ChoiceCells:
    """Count the choices ``codes`` (n,) (action codes ``0..K-1``) in states ``X`` (n, d) per
    (state, action) cell, weighted by ``sample_weight`` (n,) (None: counts). ``index``: the
    rows' ``distinct_rows`` when already computed, as ``(distinct, index)``.

    Raises ``ValueError`` for mismatched lengths or negative weights."""
    X = np.asarray(X)
    X = X[:, None] if X.ndim == 1 else X
    codes = np.asarray(codes, dtype=np.int64)
    n, K = X.shape[0], int(n_actions)
    if codes.shape != (n,):
        raise ValueError(f"choice_cells: codes must have shape ({n},) like X, got {codes.shape}")
    if n and (codes.min() < 0 or codes.max() >= K):
        raise ValueError(f"choice_cells: codes must be action codes in [0, {K})")
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight, dtype=np.float64)
        if sample_weight.shape != (n,) or (n and sample_weight.min() < 0):
            raise ValueError(f"choice_cells: sample_weight must be ({n},) non-negative")
    states, row_state = distinct_rows(X) if index is None else index
    cells, where = present_keys(row_state * K + codes, states.shape[0] * K)
    weight = np.bincount(where, weights=sample_weight, minlength=cells.size).astype(np.float64)
    return ChoiceCells(states, cells // K, cells % K, weight, K, n)


def present_keys(key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``(present (c,), where (n,))``: the distinct values of ``key`` (n,) (integers in ``[0, size)``),
    sorted, and each entry's position among them; by a count when ``size`` is small, else a sort."""
    key = np.asarray(key, dtype=np.int64)
    if size <= max(4 * key.size, 2 ** 16):
        seen = np.bincount(key, minlength=size) > 0
        return np.flatnonzero(seen), (np.cumsum(seen) - 1)[key]
    present, where = np.unique(key, return_inverse=True)
    return present, where.reshape(-1)


class FitOnCells(LightClassifierMixin, LightEstimator):
    """A classifier fitted on the weighted (state, action) cells instead of the rows.

    For a classifier whose weighted fit minimises a sum of per-row losses -- a multinomial logit
    (``LogisticRegression`` with the lbfgs solver, alone or after a ``OneHotEncoder`` of tabular
    states), any GLM -- a row repeated k times is a weight of k, so the ``n`` rows and the ``c``
    distinct cells weighted by their (weighted) counts give the same objective and the same fit
    (``choice_cells``; to the solver's tolerance). With tabular states ``c <= S K``, however
    many rows. Predictions are made once per distinct state and spread over the rows. A learner
    whose fit counts rows rather than weights (a tree's ``min_samples_leaf``, mini-batch training)
    is not the same fit on the cells: do not wrap it.

    Parameters
    ----------
    estimator : classifier with ``fit(X, y, sample_weight=...)`` and ``predict_proba``
        Cloned at fit time; a Pipeline gets the weights on its last step.

    Attributes
    ----------
    estimator_ : the fitted clone
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    n_cells_ : int
        The weighted rows the clone was fitted on.
    """

    def __init__(self, estimator=None):
        self.estimator = estimator

    def fit(self, X, y, sample_weight=None):
        """Fit a clone of ``estimator`` on the cells of ``(X, y)``; returns self."""
        from ..data._validation import as_float_array, clone_learner as clone
        from ..data._weights import fit_weighted

        if self.estimator is None or not hasattr(self.estimator, "fit") or not hasattr(self.estimator,
                                                                                      "predict_proba"):
            raise TypeError(f"FitOnCells: estimator must be a classifier with fit() and predict_proba(), got "
                            f"{type(self.estimator).__name__}")
        X = as_float_array(X, "X", ndim=2, allow_1d_as_column=True)
        y = np.asarray(y)
        y = y[:, 0] if y.ndim == 2 and y.shape[1] == 1 else y
        if y.shape != (X.shape[0],):
            raise ValueError(f"FitOnCells: y must have shape ({X.shape[0]},) like X, got {y.shape}")
        labels, codes = np.unique(y, return_inverse=True)
        cells = choice_cells(X, codes.reshape(-1), labels.size, sample_weight)
        Xc, yc, wc = cells.as_rows()
        self.estimator_ = fit_weighted(clone(self.estimator), Xc, labels[yc], wc, "FitOnCells estimator")
        self.classes_ = np.asarray(getattr(self.estimator_, "classes_", labels))
        self.n_features_in_ = X.shape[1]
        self.n_cells_ = cells.n_cells
        return self

    def predict_proba(self, X):
        """``estimator_.predict_proba`` once per distinct row of ``X``, shape (n, n_classes)."""
        from ..data._estimator_base import check_is_fitted
        from ..data._validation import as_float_array

        check_is_fitted(self, "estimator_")
        X = as_float_array(X, "X", ndim=2, allow_1d_as_column=True)
        repeated = repeated_rows(X)
        if repeated is None:
            return self.estimator_.predict_proba(X)
        return np.asarray(self.estimator_.predict_proba(repeated[0]))[repeated[1]]

    def predict(self, X):
        """The most probable class at each row of ``X``, shape (n,)."""
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def describe(self) -> str:
        steps = getattr(self.estimator, "steps", None)
        inner = " -> ".join(type(step).__name__ for _, step in steps) if steps else type(self.estimator).__name__
        return f"{inner} fitted on the (state, action) counts"

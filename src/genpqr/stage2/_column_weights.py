r"""mu-sums over many actions without a dense ``(n, K)`` weight matrix.

FQE's targets need ``(mu Q)(s') = sum_a mu(a|s') Q(s', a)``. With ``K`` in the thousands the
weights are kept as ``ColumnWeights``: the action codes that carry weight (``columns``, c of
them) and the weights on them (n, c). Two cases:

* **exact**: the normalization's support is small (an anchor action, a state-dependent anchor
  among a few well-supported actions): ``columns`` is that support and the sum is exact;
* **sampled**: ``mu`` weighs every action (mean-zero ``mu = 1/K``, behaviour ``mu = pi``).
  ``sample_columns`` draws ``m`` action codes ``a_1..a_m`` i.i.d. from a proposal ``q``
  (shared by all rows, fixed by ``random_state``) and the weights are the importance weights
  ``mu(a_j|s) / (m q(a_j))``, so that

  .. math::

      \widehat{(\mu Q)}(s) = \frac{1}{m} \sum_{j=1}^m \frac{\mu(a_j|s)}{q(a_j)} Q(s, a_j),
      \qquad E_q\left[\widehat{(\mu Q)}(s)\right] = \sum_a \mu(a|s) Q(s, a),

  unbiased for every row, with standard error ``sd_j(mu(a_j|s) Q(s, a_j) / q(a_j)) / sqrt(m)``
  (``column_mu_sum`` with ``return_se=True``). The rows share the draws, so their errors are
  correlated; the error shrinks as ``1/sqrt(m)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data._validation import check_random_state
from ._feature_q import action_blocks

__all__ = ["ColumnWeights", "sample_columns", "column_mu_sum"]


@dataclass(frozen=True)
class ColumnWeights:
    """Action weights on a few columns: ``mu(columns[j] | s_i) = values[i, j]`` (a sampled set
    holds importance weights, ``sampled=True``).

    Attributes
    ----------
    columns : ndarray of int, shape (c,)
        Action codes (repeats allowed in a sample).
    values : ndarray of shape (n, c)
    n_actions : int
        K, the number of actions the codes index.
    sampled : bool
    """

    columns: np.ndarray
    values: np.ndarray
    n_actions: int
    sampled: bool = False

    def __post_init__(self):
        columns = np.asarray(self.columns, dtype=np.int64).ravel()
        values = np.asarray(self.values, dtype=np.float64)
        if values.ndim != 2 or values.shape[1] != columns.size:
            raise ValueError(f"values must have shape (n, {columns.size}) (one column per code), got {values.shape}")
        if columns.size and (columns.min() < 0 or columns.max() >= int(self.n_actions)):
            raise ValueError(f"columns must be action codes in 0..{int(self.n_actions) - 1}")
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "values", values)

    @property
    def shape(self) -> tuple[int, int]:
        """``(n, K)``: the shape of the dense weights these stand for."""
        return self.values.shape[0], int(self.n_actions)

    def __getitem__(self, rows) -> "ColumnWeights":
        return ColumnWeights(self.columns, self.values[rows], self.n_actions, self.sampled)

    def dense(self) -> np.ndarray:
        """The (n, K) weights (repeated codes added up): for tests and small cases."""
        out = np.zeros(self.shape)
        np.add.at(out, (slice(None), self.columns), self.values)
        return out

    def dot(self, table) -> np.ndarray:
        """``sum_j values[i, j] table[i, j]`` for a table (n, c) at the same columns, shape (n,)."""
        return np.einsum("ij,ij->i", self.values, np.asarray(table, dtype=np.float64))


def sample_columns(weight_fn, n_rows: int, n_actions: int, n_samples: int, proposal=None,
                   random_state=None) -> ColumnWeights:
    r"""An unbiased sampled ``ColumnWeights`` of ``mu`` (module docstring).

    Parameters
    ----------
    weight_fn : callable ``codes (m,) -> (n_rows, m)``
        ``mu(codes[j] | s_i)`` at the rows.
    n_rows, n_actions : int
    n_samples : int
        ``m``, the draws (shared by every row).
    proposal : ndarray of shape (K,), optional
        ``q`` (positive where ``mu`` can be; normalized here); default uniform ``1/K``.
    random_state : int, Generator or None
    """
    K, m = int(n_actions), int(n_samples)
    if m < 1:
        raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}")
    q = np.full(K, 1.0 / K) if proposal is None else np.asarray(proposal, dtype=np.float64)
    if q.shape != (K,) or not np.all(np.isfinite(q)) or q.min() < 0 or q.sum() <= 0:
        raise ValueError(f"proposal must be ({K},) non-negative with a positive sum, got shape {q.shape}")
    q = q / q.sum()
    codes = check_random_state(random_state).choice(K, size=m, replace=True, p=q)
    mu = np.asarray(weight_fn(codes), dtype=np.float64)
    if mu.shape != (int(n_rows), m):
        raise ValueError(f"weight_fn returned shape {mu.shape}, expected ({int(n_rows)}, {m})")
    return ColumnWeights(codes, mu / (m * q[codes])[None, :], K, sampled=True)


def column_mu_sum(model, states, weights: ColumnWeights, block_size: int = 65536, return_se: bool = False):
    """``sum_j values[i, j] Q(s_i, columns[j])``, shape (n,), from a Q-model with
    ``predict_q_columns`` in blocks of (state, action) pairs (a
    ``genpqr.stage2._feature_q.FeatureQ`` predicts only the pairs asked); with ``return_se`` also the
    per-row standard error of a sampled sum (zeros when exact)."""
    n, c = weights.values.shape
    total, squares = np.zeros(n), np.zeros(n)
    if hasattr(model, "_predict_block"):  # blocks of (state, action) pairs: no (n, c) table of Q
        for rows, pos in action_blocks(n, np.arange(c), block_size):
            terms = weights.values[rows][:, pos] * model._predict_block(states[rows], weights.columns[pos])
            total[rows] += terms.sum(axis=1)
            squares[rows] += (terms ** 2).sum(axis=1)
    else:
        terms = weights.values * np.asarray(model.predict_q(states), dtype=np.float64)[:, weights.columns]
        total, squares = terms.sum(axis=1), (terms ** 2).sum(axis=1)
    if not return_se:
        return total
    if not weights.sampled or c < 2:
        return total, np.zeros(n)
    # terms_j = Y_j / m with Y_j = mu Q / q; Var(mean Y) estimated by sum_j (terms_j - total/m)^2 * m / (m - 1)
    spread = np.maximum(squares - total ** 2 / c, 0.0)
    return total, np.sqrt(spread * c / (c - 1))

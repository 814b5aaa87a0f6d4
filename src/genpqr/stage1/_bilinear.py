r"""Bilinear policies ``pi(a|s) ~ exp(F_s^T H_a)`` at given (state, action) pairs, in blocks of
bounded memory: the log-partition by an online log-sum-exp over blocks of rows and of actions,
``log pi(a|s) = F_s^T H_a - log sum_b exp(F_s^T H_b)`` (exact: the same sum in another order).
Used by :class:`genpqr.stage1.ConditionalLogit`, ``genpqr.models.TwoTowerClassifier`` and
``genpqr.stage1._blocked.log_policy_at``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DENSE_LIMIT_BYTES", "block_rows", "bilinear_log_partition", "bilinear_log_proba_at"]

#: Default most bytes of one (rows x actions) float64 block (256 MiB).
DENSE_LIMIT_BYTES = 2 ** 28


def block_rows(n_columns: int, max_bytes: int) -> int:
    """Rows of a float64 block of ``n_columns`` columns within ``max_bytes`` (at least 1)."""
    if isinstance(max_bytes, bool) or int(max_bytes) < 8:
        raise ValueError(f"max_bytes must be an integer of at least 8 (one float64), got {max_bytes!r}")
    return max(1, int(max_bytes) // (8 * max(int(n_columns), 1)))


#: Most scores in one block of the online log-sum-exp (8 MiB of float64: the block stays in cache).
CACHE_BLOCK = 2 ** 20


def bilinear_log_partition(F, H, max_bytes: int = DENSE_LIMIT_BYTES) -> np.ndarray:
    r"""``log Z(s_i) = log sum_a exp(F_i^T H_a)``, shape (n,), for ``F`` (n, e) and ``H`` (K, e):
    an online log-sum-exp over blocks of at most ``min(max_bytes / 8, CACHE_BLOCK)`` scores,
    shifted and exponentiated in place."""
    F, H = np.asarray(F, dtype=np.float64), np.asarray(H, dtype=np.float64)
    n, K = F.shape[0], H.shape[0]
    out = np.empty(n)
    entries = max(1, min(block_rows(1, max_bytes), CACHE_BLOCK))
    rows = max(1, min(n, entries // min(K, 4096)))
    step = max(1, entries // rows)
    towers = [np.ascontiguousarray(H[a0:a0 + step].T) for a0 in range(0, K, step)]
    buffer = np.empty((rows, min(step, K)))
    for r0 in range(0, n, rows):
        Fb = F[r0:r0 + rows]
        top, total = np.full(Fb.shape[0], -np.inf), np.zeros(Fb.shape[0])
        for Hb in towers:
            scores = buffer[:Fb.shape[0], :Hb.shape[1]]
            np.matmul(Fb, Hb, out=scores)
            new_top = np.maximum(top, scores.max(axis=1))
            scores -= new_top[:, None]
            np.exp(scores, out=scores)
            total = total * np.exp(top - new_top) + scores.sum(axis=1)
            top = new_top
        out[r0:r0 + rows] = top + np.log(total)
    return out


def bilinear_log_proba_at(F, H, codes, max_bytes: int = DENSE_LIMIT_BYTES, log_z=None) -> np.ndarray:
    r"""``log pi(a_ij | s_i) = F_i^T H_{a_ij} - log Z(s_i)`` at action codes ``codes`` of shape (n,)
    or (n, c); same shape out. ``log_z`` (n,) reuses a computed :func:`bilinear_log_partition`."""
    F, H = np.asarray(F, dtype=np.float64), np.asarray(H, dtype=np.float64)
    codes = np.asarray(codes, dtype=np.int64)
    if codes.shape[0] != F.shape[0] or codes.ndim not in (1, 2):
        raise ValueError(f"codes must have shape ({F.shape[0]},) or ({F.shape[0]}, c), got {codes.shape}")
    if codes.size and (codes.min() < 0 or codes.max() >= H.shape[0]):
        raise ValueError(f"codes must be action codes in 0..{H.shape[0] - 1}")
    log_z = bilinear_log_partition(F, H, max_bytes) if log_z is None else np.asarray(log_z, dtype=np.float64)
    c2 = codes.reshape(codes.shape[0], -1)
    out = np.empty(c2.shape)
    step = block_rows(c2.shape[1] * max(F.shape[1], 1), max_bytes)
    for r0 in range(0, F.shape[0], step):  # (rows, c, e) gathered embeddings in blocks
        out[r0:r0 + step] = np.einsum("ie,ije->ij", F[r0:r0 + step], H[c2[r0:r0 + step]])
    return (out - log_z[:, None]).reshape(codes.shape)

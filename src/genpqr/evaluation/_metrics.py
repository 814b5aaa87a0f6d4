r"""Evaluation metrics of the benchmark (specification ``shared/benchmarks/synthetic-env.md``).

Per seed:

* :func:`reward_mse` and :func:`reward_correlation` (Pearson) between an estimated and the
  true reward at given (state, action) pairs -- both under the same normalization;
* :func:`policy_nll`, ``-mean log pi_hat(a_i|s_i)`` from a table of (clipped) log-probabilities;
* ``anchor_count``, the number of rows taking the anchor action.

Over seeds: ``mean_ci``, the mean and the normal-approximation 95% half-width
``1.96 * sd / sqrt(n)`` (sample sd, ``ddof=1``), as in the paper's tables.

This module is the library's home for these formulas. ``genpqr.envs._synthetic`` has its own
copies (``SyntheticData.evaluate``, ``seed_summary``) that give the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..data._validation import as_float_array

__all__ = ["reward_mse", "reward_correlation", "policy_nll", "anchor_count", "mean_ci", "SeedSummary",
           "summarize", "Z_95"]

#: Normal quantile of a two-sided 95% interval.
Z_95 = 1.96


def _pair(estimate, truth, estimate_name: str, truth_name: str) -> tuple[np.ndarray, np.ndarray]:
    est = as_float_array(estimate, estimate_name, ndim=1)
    tru = as_float_array(truth, truth_name, ndim=1)
    if est.shape != tru.shape:
        raise ValueError(f"{estimate_name} has {est.shape[0]} values but {truth_name} has {tru.shape[0]}; "
                         "they must be evaluated at the same (state, action) pairs")
    if est.size == 0:
        raise ValueError(f"{estimate_name} and {truth_name} are empty; need at least one (state, action) pair")
    return est, tru


def reward_mse(estimate, truth) -> float:
    """``mean (r_hat - r)^2`` over (state, action) pairs.

    Parameters
    ----------
    estimate, truth : array-like of shape (n,)
        Estimated and true reward at the same n pairs, under the same normalization.
    """
    est, tru = _pair(estimate, truth, "estimate", "truth")
    return float(np.mean((est - tru) ** 2))


def reward_correlation(estimate, truth) -> float:
    """Pearson correlation of ``r_hat`` and ``r`` over (state, action) pairs.

    NaN (not an error) when either array is constant -- e.g. a method that predicts a flat
    reward -- or has fewer than two values.

    Parameters
    ----------
    estimate, truth : array-like of shape (n,)
    """
    est, tru = _pair(estimate, truth, "estimate", "truth")
    if est.size < 2:
        return float("nan")
    de, dt = est - est.mean(), tru - tru.mean()
    denom = math.sqrt(float(np.dot(de, de)) * float(np.dot(dt, dt)))
    if denom == 0.0:
        return float("nan")
    return float(np.clip(np.dot(de, dt) / denom, -1.0, 1.0))


def policy_nll(log_policy, actions) -> float:
    """Held-out negative log-likelihood ``-mean_i log pi_hat(a_i|s_i)``.

    Parameters
    ----------
    log_policy : array-like of shape (n, K)
        (Clipped) log-probabilities at the n states, one column per action code.
    actions : array-like of int, shape (n,)
        Action codes ``0..K-1`` taken at those states.
    """
    lp = as_float_array(log_policy, "log_policy", ndim=2)
    a = np.asarray(actions)
    if a.ndim != 1:
        raise ValueError(f"actions must be a 1-D array of action codes, got shape {a.shape}")
    if a.shape[0] != lp.shape[0]:
        raise ValueError(f"actions has {a.shape[0]} entries but log_policy has {lp.shape[0]} rows; they must match")
    if a.size == 0:
        raise ValueError("actions is empty; need at least one row")
    if not np.issubdtype(a.dtype, np.integer) or a.min() < 0 or a.max() >= lp.shape[1]:
        raise ValueError(f"actions must be integer codes in 0..{lp.shape[1] - 1} (log_policy has {lp.shape[1]} "
                         f"columns), got values in [{a.min()}, {a.max()}] of dtype {a.dtype}")
    if (lp > 1e-12).any():
        raise ValueError(f"log_policy must hold log-probabilities (<= 0), got a maximum of {lp.max():.3g}")
    return float(-np.mean(lp[np.arange(lp.shape[0]), a]))


def anchor_count(actions, anchor: int = 0) -> int:
    """Number of rows whose action is ``anchor``."""
    return int(np.sum(np.asarray(actions) == anchor))


@dataclass(frozen=True)
class SeedSummary:
    """Mean and 95% half-width of per-seed values.

    Attributes
    ----------
    mean : float
    ci : float
        ``1.96 * sd / sqrt(n)`` (``ddof=1``); NaN when ``n < 2``.
    n : int
        Number of values used.
    """

    mean: float
    ci: float
    n: int

    def format(self, digits: int = 2) -> str:
        """``"mean ± ci"`` (only the mean when the interval is undefined; ``"n/a"`` when empty)."""
        if self.n == 0 or not math.isfinite(self.mean):
            return "n/a"
        if not math.isfinite(self.ci):
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} ± {self.ci:.{digits}f}"


def summarize(values, *, nan_policy: str = "omit") -> SeedSummary:
    """:class:`SeedSummary` of per-seed values.

    Parameters
    ----------
    values : array-like of shape (n,)
    nan_policy : {"omit", "propagate"}
        ``"omit"`` drops NaN values (e.g. a seed whose correlation is undefined) and reports
        the remaining count in ``n``; ``"propagate"`` returns NaN if any value is NaN.
    """
    if nan_policy not in ("omit", "propagate"):
        raise ValueError(f"nan_policy must be 'omit' or 'propagate', got {nan_policy!r}")
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1:
        raise ValueError(f"values must be a 1-D array of per-seed values, got shape {v.shape}")
    if np.isinf(v).any():
        raise ValueError("values must not hold inf")
    nan = np.isnan(v)
    if nan.any():
        if nan_policy == "propagate":
            return SeedSummary(float("nan"), float("nan"), int(v.size))
        v = v[~nan]
    n = int(v.size)
    if n == 0:
        return SeedSummary(float("nan"), float("nan"), 0)
    ci = Z_95 * float(np.std(v, ddof=1)) / math.sqrt(n) if n >= 2 else float("nan")
    return SeedSummary(float(v.mean()), ci, n)


def mean_ci(values, *, nan_policy: str = "omit") -> tuple[float, float]:
    """``(mean, 1.96 * sd / sqrt(n))`` over per-seed values (sample sd, ``ddof=1``).

    The half-width is NaN for a single value. See :func:`summarize` for ``nan_policy``.
    """
    s = summarize(values, nan_policy=nan_policy)
    return s.mean, s.ci

r"""Separation: whether the maximum likelihood estimate of a (dynamic) logit exists, read off the
choices and the features -- not off the point where an optimizer stopped.

The log-likelihood is ``L(theta) = sum_{s,a} n(s,a) log pi_theta(a|s)`` with
``pi_theta = softmax(Q_theta)`` and ``Q_theta = x theta + offset + gamma P V_theta``
(``genpqr.structural._estimation``). Call an *observed row* a triple ``(s, a, a')`` with
``n(s, a) > 0`` and ``a' != a``.

**Static logit** (``gamma = 0``: the flow-utility differences alone). ``L`` is concave; along a
ray ``theta + t d`` every term ``log pi(a|s)`` is non-decreasing in ``t`` exactly when
``(x(s,a) - x(s,a')) d >= 0`` for every observed row. So a finite maximizer fails to exist iff
there is a direction ``d`` with ``(x(s,a) - x(s,a')) d >= 0`` on every observed row and ``> 0`` on
at least one (*quasi-complete separation*; *complete* when strict on every row): the
likelihood then rises along ``d`` for ever (Albert and Anderson 1984; Santner and Duffy 1986 for
the multinomial logit). The check is two linear programmes in ``d`` alone
(``scipy.optimize.linprog``, HiGHS), ``-1 <= d_j <= 1``: ``max sum_i D_i d`` subject to
``D d >= 0`` (positive iff some row can be strict: quasi-complete), then ``max t`` subject to
``D d >= t`` (positive: complete).

**Dynamic logit** (``gamma > 0``). The continuation values move with ``theta``: along
``theta = t d``, ``V_{t d} = t V*_d + O(1)`` (the soft and the hard maximum differ by at most
``log K / (1 - gamma)``), where ``V*_d`` is the value of the *deterministic* problem with reward
``x d``, so ``Q_{t d}(s,a) - Q_{t d}(s,a') = t (Q*_d(s,a) - Q*_d(s,a')) + O(1)``. If every
observed choice is the *strict* optimum of ``Q*_d`` at its state (complete separation of the
value differences), every observed choice's probability tends to 1, ``L(t d) -> 0 = sup L``,
and since ``L < 0`` at every finite ``theta`` the MLE does not exist. For a deterministic
policy ``sigma``, ``Q^sigma_d = (x + gamma P (I - gamma P_sigma)^{-1} x_sigma) d =: G_sigma d`` is
linear in ``d``, and ``sigma`` is optimal for ``x d`` iff ``(G_sigma(s, sigma(s)) - G_sigma(s, a')) d
>= 0`` at every state: with ``sigma`` equal to the observed choice wherever there is one, the
question is again a linear programme in ``d`` (rows with slack at states with choices, rows
``>= 0`` at states without). The continuation solve is in relative values
(``relative_solve``), accurate up to ``gamma = 1``.

What is checked, and its limits:

* ``gamma = 0``: the static condition, necessary and sufficient;
* ``gamma > 0``, every state with a choice: ``sigma`` is fixed by the data, the programme is
  exact: complete separation proves the MLE does not exist; *quasi-complete* separation (some
  observed rows tied along ``d``, e.g. a state where both actions are chosen) is reported as
  such, with "may not exist": along ``d`` the tied rows converge to the likelihood of a reduced
  problem, which can be lower than at a finite ``theta`` (unlike the static logit);
* ``gamma > 0`` with states that have no choice: ``sigma`` there is free (a combinatorial
  choice); the check tries ``sigma`` optimal along the static direction (when there is one) and
  each constant action, ``K + 1`` programmes at most. A separation found is a proof; none found
  is not a proof that the MLE exists (``exact=False``).
* Above ``MAX_ROWS`` rows, or ``MAX_DYNAMIC_STATES`` states for ``gamma > 0``, no
  programme runs (``"none"``, ``exact=False``; the estimators then fall back on their end point).

Every decision is made on margins ``D d`` recomputed in floating point from the programme's
``d``, against ``MARGIN_TOL`` times the scale of ``D``: separated data have margins of the
order of the features, far from that tolerance, so the answer does not depend on the optimizer,
the CPU or the BLAS.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from ..stage2._kernels import as_kernel
from ._checks import check_features, check_weights
from ._likelihood import relative_solve

__all__ = ["Separation", "find_separation", "MARGIN_TOL", "MAX_ROWS", "MAX_DYNAMIC_STATES"]

#: A margin counts as strict above this fraction of the largest entry of ``D`` (times ``max |d|``).
MARGIN_TOL = 1e-9
#: Largest number of rows of a programme (observed rows plus rows of states without choices).
MAX_ROWS = 200_000
#: Largest number of states for the dynamic programmes (one dense relative-value solve per candidate policy).
MAX_DYNAMIC_STATES = 2000


@dataclass(frozen=True)
class Separation:
    """What :func:`find_separation` found.

    Attributes
    ----------
    kind : {"none", "complete", "quasi-complete"}
    direction : ndarray (p,) or None
        A separating direction ``d`` (``max |d_j| = 1``), None for ``"none"``.
    n_strict, n_rows : int
        Observed rows ``(s, a, a')`` strictly favoured along ``direction``, and all observed rows.
    dynamic : bool
        Whether the rows are the value differences of the dynamic model (``gamma > 0``) rather
        than the flow-utility differences.
    exact : bool
        Whether ``"none"`` proves that no separating direction exists (``gamma = 0``, or every
        state has a choice and the dynamic programme ran).
    """

    kind: str
    direction: np.ndarray | None
    n_strict: int
    n_rows: int
    dynamic: bool
    exact: bool

    @property
    def mle_exists(self):
        """``False`` (proved not to exist), ``True`` (proved: no separation) or ``None`` (unknown)."""
        if self.kind == "complete" or (self.kind == "quasi-complete" and not self.dynamic):
            return False
        if self.kind == "none" and self.exact:
            return True
        return None

    def describe(self, names) -> str:
        """The direction as ``"RC 0.0885, theta11 1"``."""
        if self.direction is None:
            return "none"
        return ", ".join(f"{name} {value:.4g}" for name, value in zip(names, self.direction))


def _row_differences(G, counts, states=None, sigma=None):
    """Rows ``G(s, a) - G(s, a')``: for every observed ``(s, a)`` (``counts``) and ``a' != a`` when
    ``sigma`` is None; else for each state in ``states``, ``G(s, sigma(s)) - G(s, a')``."""
    K = G.shape[1]
    if sigma is None:
        s, a = np.nonzero(counts > 0)
    else:
        s = np.asarray(states, dtype=np.int64)
        a = np.asarray(sigma)[s]
    diffs = G[s, a][:, None, :] - G[s]  # (rows, K, p)
    keep = np.arange(K)[None, :] != a[:, None]
    return diffs[keep].reshape(-1, G.shape[2])


def _solve_lp(R, Z):
    """``(kind, d, n_strict)`` of the separation programmes on the rows ``R`` (observed) and ``Z``
    (``>= 0`` only; see the module notes), decided on recomputed margins."""
    p, m, z = R.shape[1], R.shape[0], Z.shape[0]
    scale = MARGIN_TOL * max(1.0, float(np.max(np.abs(R), initial=0.0)), float(np.max(np.abs(Z), initial=0.0)))
    A = sp.csr_matrix(np.vstack([-R, -Z]))
    bounds = [(-1.0, 1.0)] * p
    # quasi-complete: max sum_i R_i d  s.t.  R d >= 0, Z d >= 0 (positive iff some row can be strict)
    res = linprog(-R.sum(axis=0), A_ub=A, b_ub=np.zeros(m + z), bounds=bounds, method="highs")
    if res.status != 0:
        return "none", None, 0
    d = res.x / max(float(np.max(np.abs(res.x))), 1e-300)
    margins = R @ d
    n_strict = int(np.sum(margins > scale))
    if n_strict == 0 or margins.min() < -scale or (z and (Z @ d).min() < -scale):
        return "none", None, 0
    if n_strict == m:
        return "complete", d, m
    # complete: max t  s.t.  R d >= t, Z d >= 0, t <= 1
    A2 = sp.hstack([A, sp.csr_matrix(np.concatenate([np.ones(m), np.zeros(z)])[:, None])], format="csr")
    res2 = linprog(np.concatenate([np.zeros(p), [-1.0]]), A_ub=A2, b_ub=np.zeros(m + z),
                   bounds=bounds + [(0.0, 1.0)], method="highs")
    if res2.status == 0:
        d2 = res2.x[:p] / max(float(np.max(np.abs(res2.x[:p]))), 1e-300)
        if (R @ d2).min() > scale and (not z or (Z @ d2).min() >= -scale):
            return "complete", d2, m
    return "quasi-complete", d, n_strict


def _policy_values(X, kernel, gamma, sigma):
    """``G_sigma = x + gamma P (I - gamma P_sigma)^{-1} x_sigma``, shape (S, K, p), in relative values."""
    S, K, p = X.shape
    onehot = np.zeros((S, K))
    onehot[np.arange(S), sigma] = 1.0
    M = relative_solve(kernel.under(onehot), X[np.arange(S), sigma], gamma)
    return X + gamma * kernel.expect(M)


def _optimal_policy(X, kernel, gamma, d, start, max_iter=200):
    """A deterministic optimal policy for the reward ``x d`` (policy iteration from ``start``)."""
    sigma = np.array(start)
    for _ in range(max_iter):
        new = np.argmax(_policy_values(X, kernel, gamma, sigma) @ d, axis=1)
        if np.array_equal(new, sigma):
            break
        sigma = new
    return sigma


def find_separation(features, counts, kernel=None, gamma: float = 0.0) -> Separation:
    """Whether some direction of the parameters makes every observed choice (weakly) certain.

    Parameters
    ----------
    features : ndarray (S, K, p)
        ``u_theta = features @ theta + offset`` (the offset does not matter).
    counts : ndarray (S, K)
        Choices per state and action.
    kernel : transition kernel, optional
        Needed for ``gamma > 0``.
    gamma : float
        ``0`` (or no kernel): the static check on the flow-utility differences.

    Returns
    -------
    Separation
        See the module notes for what is checked and its limits.
    """
    X = check_features(features)
    n = check_weights(counts, X.shape[:2], "counts")
    n_rows = int(np.count_nonzero(n)) * (X.shape[1] - 1)
    if n_rows > MAX_ROWS:
        return Separation("none", None, 0, n_rows, gamma != 0 and kernel is not None, False)
    R = _row_differences(X, n)
    kind, d, strict = _solve_lp(R, np.zeros((0, X.shape[2])))
    static = Separation(kind, d, strict, R.shape[0], False, True)
    if gamma == 0 or kernel is None:
        return static
    kernel = as_kernel(kernel, X.shape[1])
    visited = n.sum(axis=1) > 0
    free = np.flatnonzero(~visited)
    if not _can_be_strict(n):
        return Separation("none", None, 0, R.shape[0], True, True)
    if R.shape[0] + free.size * (X.shape[1] - 1) > MAX_ROWS or X.shape[0] > MAX_DYNAMIC_STATES:
        return Separation("none", None, 0, R.shape[0], True, False)
    forced = np.argmax(n, axis=1)
    candidates = []
    if free.size == 0:
        candidates.append(forced)
    else:
        if d is not None:
            sigma = _optimal_policy(X, kernel, gamma, d, forced)
            candidates.append(np.where(visited, forced, sigma))
        candidates += [np.where(visited, forced, k) for k in range(X.shape[1])]
    best = Separation("none", None, 0, R.shape[0], True, free.size == 0)
    for sigma in candidates:
        G = _policy_values(X, kernel, gamma, sigma)
        kind, d, strict = _solve_lp(_row_differences(G, n), _row_differences(G, n, free, sigma))
        if kind == "complete":
            return Separation(kind, d, strict, R.shape[0], True, True)
        if kind == "quasi-complete" and best.kind == "none":
            best = Separation(kind, d, strict, R.shape[0], True, True)
    return best


def _can_be_strict(counts) -> bool:
    """Some observed row can be strict only where a state has an action that is never chosen there
    (otherwise every observed row has its reverse and all are tied: no separation)."""
    n = np.asarray(counts)
    visited = n.sum(axis=1) > 0
    return bool(np.any((n[visited] == 0)))

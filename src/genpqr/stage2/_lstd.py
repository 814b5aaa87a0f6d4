r"""Closed-form Q-evaluation in features: least-squares temporal differences (LSTD) under mu.

Stage 2 solves the *linear* Bellman equation ``Q = u - g + gamma P mu Q`` (paper, Eq. of
Theorem "IRL via a Bellman equation"). With a linear model ``Q(s, a) = phi(s, a)^T w`` its
projected (least-squares) fixed point solves one linear system (Bradtke and Barto, 1996)::

    A w = b,   A = sum_i phi_i (phi_i - gamma c_i phi'_{mu,i})^T,   b = sum_i phi_i y_i,
    phi'_{mu,i} = sum_a' mu(a'|s'_i) phi(s'_i, a'),    c_i = 1 - terminated_i,

with ``y_i = u(s_i, a_i) - g(s_i)`` (``target="q"``). Ridge regularization solves
``(A / n + alpha I) w = b / n`` (it is the regularized projection
``w = (Phi^T Phi + n alpha I)^{-1} Phi^T (y + gamma Phi'_mu w)``).

``target="continuation"`` (the default) keeps the known part of Q exact and fits only the
smooth remainder: ``Q = u - g + gamma Z`` with ``Z = P mu Q = -v`` (the negated continuation
value), which solves its own Bellman equation ``Z = P[mu (u - g)] + gamma P mu Z``. The same
``A`` applies, with ``y_i = c_i sum_a' mu(a'|s'_i) (u(s'_i, a') - g(s'_i))``. Both are exact
when the features can represent the solution (one-hot cells: the tabular solve).

Encodings of the action: ``"per_action"`` (blocks ``phi(s, a) = e_a (x) phi(s)``, one weight
vector per action), ``"joint"`` (``phi(s, a) = [phi(s), e_a]``: shared state features and
action intercepts) or ``"action_features"`` (``phi(s, a) = phi(s) (x) x_a`` with ``x_a`` the
action's row of an action table (K, d): ``q d`` weights whatever K, shared by every action, so an
action never taken gets the Q its features predict; with one-hot ``x_a`` it is ``"per_action"``).
Its next features are ``phi'_{mu,i} = phi(s'_i) (x) sum_a' mu(a'|s'_i) x_a'``: one (n, K) x
(K, d) product, never an (n, K, q d) array.

``A`` and ``b`` are sums over transitions: ``BellmanStatistics`` accumulates them chunk
by chunk (``accumulate``), merges partial sums (``merge``: out-of-core or distributed
reductions) and solves once (``solve``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields

import numpy as np

from .. import exceptions
from ..data._estimator_base import LightEstimator
from ..data._validation import as_float_array, check_gamma, clone_learner as clone
from ..exceptions import ActionFeatureError, ActionTableError
from ._qeval import FQEHistory

__all__ = ["BellmanProblem", "BellmanStatistics", "LSTDQ"]

#: LSTDQ's encodings of the action (module docstring).
ENCODINGS = ("per_action", "joint", "action_features")


@dataclass
class BellmanProblem:
    """The sample pieces of ``Q = u - g + gamma P mu Q`` (row i is transition ``(s_i, a_i, s'_i)``).

    Attributes
    ----------
    states, next_states : ndarray of shape (n, d)
    actions : ndarray of shape (n,), int codes in ``0..K-1``
    continues : ndarray of shape (n,)
        ``1 - terminated``.
    reward : ndarray of shape (n,)
        ``u(s_i, a_i) - g(s_i)``.
    next_mu : ndarray of shape (n, K)
        ``mu(.|s'_i)``.
    gamma : float
    next_reward : ndarray of shape (n,), optional
        ``sum_a' mu(a'|s'_i) (u(s'_i, a') - g(s'_i))`` (needed by ``target="continuation"``).
    log_policy, offset : callables, optional
        ``states -> u (m, K)`` and ``states -> g (m,)`` (needed to predict with
        ``target="continuation"``).
    policy_models : list, optional
        The fitted stage-1 classifier(s) (for ``features="policy"``).
    sample_weight : ndarray of shape (n,), optional
        Row weights ``w_i``: the weighted normal equations ``sum_i w_i phi_i (phi_i - x_i)^T w =
        sum_i w_i phi_i y_i`` (integer weights: rows repeated).
    action_features : ndarray of shape (K, d), optional
        The actions' features (the data's action table), for ``encoding="action_features"``.
    """

    states: np.ndarray
    actions: np.ndarray
    next_states: np.ndarray
    continues: np.ndarray
    reward: np.ndarray
    next_mu: np.ndarray
    gamma: float
    next_reward: np.ndarray | None = None
    log_policy: object = None
    offset: object = None
    policy_models: list | None = None
    sample_weight: np.ndarray | None = None
    action_features: np.ndarray | None = None

    _ROWWISE = ("states", "actions", "next_states", "continues", "reward", "next_mu", "next_reward", "sample_weight")

    @property
    def n(self) -> int:
        return int(self.actions.shape[0])

    @property
    def n_actions(self) -> int:
        return int(self.next_mu.shape[1])

    def rows(self, start: int, stop: int) -> "BellmanProblem":
        """The transitions ``start:stop`` (views; callables and models shared)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in self._ROWWISE:
            if values[name] is not None:
                values[name] = values[name][start:stop]
        return BellmanProblem(**values)

    def validated(self) -> "BellmanProblem":
        """A copy with checked shapes and dtypes (float64 arrays, int64 actions)."""
        states = as_float_array(self.states, "states", ndim=2)
        n = states.shape[0]
        next_mu = as_float_array(self.next_mu, "next_mu", ndim=2)
        actions = np.asarray(self.actions, dtype=np.int64)
        out = BellmanProblem(states, actions, as_float_array(self.next_states, "next_states", ndim=2),
                             as_float_array(self.continues, "continues", ndim=1),
                             as_float_array(self.reward, "reward", ndim=1), next_mu, check_gamma(self.gamma),
                             None if self.next_reward is None else as_float_array(self.next_reward, "next_reward", ndim=1),
                             self.log_policy, self.offset, self.policy_models,
                             None if self.sample_weight is None else as_float_array(self.sample_weight,
                                                                                    "sample_weight", ndim=1),
                             self.action_features)
        for name in self._ROWWISE:
            value = getattr(out, name)
            if value is not None and value.shape[0] != n:
                raise ValueError(f"{name} has {value.shape[0]} rows but states has {n}; they must match")
        if actions.size and (actions.min() < 0 or actions.max() >= next_mu.shape[1]):
            raise ValueError(f"actions must be codes in 0..{next_mu.shape[1] - 1} (next_mu has {next_mu.shape[1]} "
                             f"columns), got values in [{actions.min()}, {actions.max()}]")
        return out


class BellmanStatistics:
    r"""Running sums over transitions, accumulated by chunk:

    ``G = sum_i phi_i phi_i^T`` (the Gram matrix), ``C = sum_i phi_i x_i^T`` with
    ``x_i = gamma c_i phi'_{mu,i}`` (the discounted next features), and ``b = sum_i phi_i y_i``.
    The LSTD matrix is ``A = G - C``.

    Parameters
    ----------
    n_features : int
        Length p of ``phi(s, a)``.

    Attributes
    ----------
    gram, cross : ndarray of shape (p, p)
    b : ndarray of shape (p,)
    n_rows : int
        Transitions accumulated so far.
    """

    def __init__(self, n_features: int):
        p = int(n_features)
        self.gram = np.zeros((p, p))
        self.cross = np.zeros((p, p))
        self.b = np.zeros(p)
        self.n_rows = 0

    @property
    def n_features(self) -> int:
        return self.b.shape[0]

    @property
    def A(self) -> np.ndarray:
        """``G - C = sum_i phi_i (phi_i - gamma c_i phi'_{mu,i})^T``."""
        return self.gram - self.cross

    def accumulate(self, phi, discounted_next_phi, target, weight=None) -> "BellmanStatistics":
        """Add dense rows: ``phi`` and ``discounted_next_phi`` (m, p), ``target`` (m,); with
        ``weight`` (m,) each row's terms times its weight (``n_rows`` grows by the weights' sum)."""
        left = phi if weight is None else phi * weight[:, None]
        self.gram += left.T @ phi
        self.cross += left.T @ discounted_next_phi
        self.b += left.T @ target
        self.n_rows += phi.shape[0] if weight is None else float(np.sum(weight))
        return self

    def accumulate_blocks(self, state_phi, actions, next_state_phi, next_weights, target,
                          weight=None) -> "BellmanStatistics":
        """Add rows of the per-action encoding ``phi(s, a) = e_a (x) phi(s)`` without forming it.

        Parameters
        ----------
        state_phi, next_state_phi : ndarray of shape (m, q)
            ``phi(s_i)`` and ``phi(s'_i)``; here ``p = K q``, block ``a`` is ``a*q:(a+1)*q``.
        actions : ndarray of shape (m,), int codes
        next_weights : ndarray of shape (m, K)
            ``gamma c_i mu(.|s'_i)``.
        target : ndarray of shape (m,)
        weight : ndarray of shape (m,), optional
            Row weights (as in :meth:`accumulate`).
        """
        q = state_phi.shape[1]
        K = next_weights.shape[1]
        support = np.flatnonzero(np.any(next_weights != 0, axis=0))  # e.g. one column for an anchor
        order = np.argsort(actions, kind="stable")
        bounds = np.searchsorted(actions[order], np.arange(K + 1))
        for a in range(K):
            rows = order[bounds[a]:bounds[a + 1]]
            if rows.size == 0:
                continue
            X = state_phi[rows]
            left = X if weight is None else X * weight[rows][:, None]
            block = slice(a * q, (a + 1) * q)
            self.gram[block, block] += left.T @ X
            if support.size:
                w = next_weights[rows][:, support]
                nxt = (w[:, :, None] * next_state_phi[rows][:, None, :]).reshape(rows.size, support.size * q)
                prod = left.T @ nxt
                for j, col in enumerate(support):
                    self.cross[block, col * q:(col + 1) * q] += prod[:, j * q:(j + 1) * q]
            self.b[block] += left.T @ target[rows]
        self.n_rows += state_phi.shape[0] if weight is None else float(np.sum(weight))
        return self

    def merge(self, other: "BellmanStatistics") -> "BellmanStatistics":
        """Add another partial sum (e.g. from another chunk, file or worker); returns self."""
        if other.n_features != self.n_features:
            raise ValueError(f"cannot merge statistics of {other.n_features} features into {self.n_features}")
        self.gram += other.gram
        self.cross += other.cross
        self.b += other.b
        self.n_rows += other.n_rows
        return self

    def solve(self, alpha: float = 0.0, n_iterations: int | None = None) -> np.ndarray:
        """The weights ``w``.

        ``n_iterations=None``: the projected fixed point, ``(A / n + alpha I) w = b / n``.
        Otherwise linear FQE in closed form: ``w_0 = 0``,
        ``w_{k+1} = (G / n + alpha I)^{-1} (b + C w_k) / n`` (ridge regression of the Bellman
        targets on ``phi``), ``n_iterations`` times: the truncated Neumann series
        ``sum_{k < K} (gamma P mu)^k y`` projected, which shrinks the fixed point's
        ``1 / (1 - gamma)`` amplification of errors in ``y``.
        """
        if self.n_rows == 0:
            raise ValueError("no transitions accumulated; call accumulate() before solve()")
        eye = float(alpha) * np.eye(self.n_features)
        rhs = self.b / self.n_rows
        if n_iterations is None:
            return _solve(self.A / self.n_rows + eye, rhs)
        gram = self.gram / self.n_rows + eye
        step = _solve(gram, np.column_stack([rhs, self.cross / self.n_rows]))
        shift, transfer = step[:, 0], step[:, 1:]
        w = np.zeros(self.n_features)
        for _ in range(int(n_iterations)):
            w = shift + transfer @ w
        return w


def _solve(M, rhs):
    """``M^{-1} rhs``; the minimum-norm least-squares solution (with a warning) if ``M`` is singular."""
    try:
        x = np.linalg.solve(M, rhs)
        if np.all(np.isfinite(x)):
            return x
    except np.linalg.LinAlgError:
        pass
    warnings.warn("the LSTD system is singular (features never visited or collinear); returning the "
                  "minimum-norm least-squares solution: set alpha > 0", RuntimeWarning, stacklevel=3)
    return np.linalg.lstsq(M, rhs, rcond=None)[0]


class LSTDQ(LightEstimator):
    """Closed-form Q-evaluation: LSTD under mu on a feature map (a stage-2 ``q_model`` of GenPQR).

    Parameters
    ----------
    features : None, {"spline", "rff", "onehot", "policy"} or transformer
        The state feature map (:mod:`genpqr.stage2`). None: ``"policy"`` when the stage-1
        model has a learned representation (``hidden_representation``), else ``"spline"``.
    encoding : {"per_action", "joint", "action_features"}
        ``phi(s, a) = e_a (x) phi(s)``, ``[phi(s), e_a]`` or ``phi(s) (x) x_a`` (module docstring;
        add a constant column to ``x_a`` for terms shared by all actions).
    alpha : float >= 0
        Ridge penalty on the mean-scaled system ``(A / n + alpha I) w = b / n``.
    n_iterations : int or None
        None: the projected fixed point (LSTD). An int K: K steps of linear FQE from zero,
        in closed form from the same statistics (``BellmanStatistics.solve``).
    target : {"continuation", "q"}
        Fit ``Z = P mu Q`` and set ``Q = u - g + gamma Z`` (exact ``u``), or fit ``Q`` itself.
    fit_intercept : bool
        Append a constant feature.
    chunk_size : int
        Rows per accumulation chunk (bounds memory: ``chunk_size * K * q`` floats).
    n_states : int, optional
        Number of tabular states, for ``features="onehot"``.
    random_state : int or None
        Seed of random feature maps (``"rff"``).
    action_features : array-like of shape (K, d), optional
        ``x_a`` for ``encoding="action_features"``; None: the ``BellmanProblem``'s (inside
        :class:`genpqr.GenPQR`, the data's action table).

    Attributes
    ----------
    features_ : fitted feature map
    coef_ : ndarray of shape (K, q) (per_action), (q + K,) (joint) or (q, d) (action_features)
    action_features_ : ndarray of shape (K, d) or None
    statistics_ : BellmanStatistics
    history_ : FQEHistory
        ``bellman_residual``: RMS of the sample Bellman residual of Q at the solution.
    n_iter_ : int
        Always 1.
    converged_ : bool
        Always True.
    solver_name_ : str
        Always ``"lstd"``.
    """

    def __init__(self, features=None, encoding="per_action", alpha=1e-4, n_iterations=None, target="continuation",
                 fit_intercept=True, chunk_size=65536, n_states=None, random_state=None, action_features=None):
        self.action_features = action_features
        self.features = features
        self.n_iterations = n_iterations
        self.encoding = encoding
        self.alpha = alpha
        self.target = target
        self.fit_intercept = fit_intercept
        self.chunk_size = chunk_size
        self.n_states = n_states
        self.random_state = random_state

    # ------------------------------------------------------------------ fitting
    def fit_bellman(self, problem: BellmanProblem) -> "LSTDQ":
        """Fit the feature map on all states, accumulate the statistics by chunk, solve."""
        problem = self._check(problem)
        self._reset(problem)
        self.features_.fit(problem.states)
        if problem.n <= self._chunk():  # one chunk: the features serve the sums and the residual
            phi = (self._state_phi(problem.states), self._state_phi(problem.next_states))
            self._accumulate(problem, phi)
            return self._finish(problem, phi)
        for start in range(0, problem.n, self._chunk()):
            self._accumulate(problem.rows(start, start + self._chunk()))
        return self.solve(problem)

    def init_features(self, problem: BellmanProblem) -> "LSTDQ":
        """Start an accumulation: reset the statistics and fit the feature map on
        ``problem.states`` (e.g. a bounded random sample of the states, for an out-of-core
        fit); nothing is accumulated. Then :meth:`partial_fit` each chunk and :meth:`solve`."""
        problem = self._check(problem)
        self._reset(problem)
        self.features_.fit(problem.states)
        return self

    def partial_fit(self, chunk: BellmanProblem) -> "LSTDQ":
        """Accumulate one chunk of transitions (the feature map is fitted on the first chunk);
        call :meth:`solve` after the last."""
        chunk = self._check(chunk)
        if not hasattr(self, "statistics_"):
            self._reset(chunk)
            self.features_.fit(chunk.states)
        self._accumulate(chunk)
        return self

    def solve(self, problem: BellmanProblem | None = None) -> "LSTDQ":
        """Solve the accumulated system; with ``problem``, also record its Bellman residual."""
        if not hasattr(self, "statistics_"):
            raise exceptions.NotFittedError("no statistics accumulated; call partial_fit or fit_bellman first")
        return self._finish(problem)

    def _finish(self, problem, phi=None) -> "LSTDQ":
        """:meth:`solve`; ``phi``: the features of ``problem``'s states and next states, if at hand."""
        w = self.statistics_.solve(self.alpha, self.n_iterations)
        q = self._n_state_features
        self.coef_ = w.reshape(self.n_actions_, q) if self.encoding == "per_action" else \
            w.reshape(q, -1) if self.encoding == "action_features" else w
        self.history_ = FQEHistory()
        if problem is not None:
            self.history_.bellman_residual.append(self._residual(problem, phi))
        self.n_iter_ = 1 if self.n_iterations is None else int(self.n_iterations)
        self.converged_, self.solver_name_ = True, "lstd"
        return self

    def _check(self, problem):
        if not isinstance(problem, BellmanProblem):
            raise TypeError(f"problem must be a genpqr.stage2.BellmanProblem, got {type(problem).__name__}")
        if self.encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {ENCODINGS}, got {self.encoding!r}")
        if self.target not in ("continuation", "q"):
            raise ValueError(f"target must be 'continuation' or 'q', got {self.target!r}")
        if not (np.isscalar(self.alpha) and np.isfinite(self.alpha) and self.alpha >= 0):
            raise ValueError(f"alpha must be a finite number >= 0, got {self.alpha!r}")
        if self.n_iterations is not None and not (isinstance(self.n_iterations, (int, np.integer))
                                                  and self.n_iterations >= 1):
            raise ValueError(f"n_iterations must be None (the fixed point) or an int >= 1, got {self.n_iterations!r}")
        problem = problem.validated()
        if self.target == "continuation" and (problem.next_reward is None or problem.log_policy is None
                                              or problem.offset is None):
            raise ValueError("target='continuation' needs next_reward, log_policy and offset in the BellmanProblem; "
                             "pass them or use target='q'")
        return problem

    def _chunk(self) -> int:
        if not (isinstance(self.chunk_size, (int, np.integer)) and self.chunk_size > 0):
            raise ValueError(f"chunk_size must be a positive int, got {self.chunk_size!r}")
        return int(self.chunk_size)

    def _reset(self, problem):
        from ._features import bind_policy, learned_representation, make_features  # scikit-learn's transformers

        features = self.features
        if features is None:
            models = problem.policy_models or []
            features = "policy" if models and all(learned_representation(m) is not None for m in models) else "spline"
        fmap = clone(make_features(features, n_states=self.n_states, random_state=self.random_state))
        self.features_ = bind_policy(fmap, problem.policy_models)
        self.n_actions_ = problem.n_actions
        self.gamma_ = problem.gamma
        self.log_policy_, self.offset_ = problem.log_policy, problem.offset
        self.action_features_ = _check_action_features(
            self.action_features if self.action_features is not None else problem.action_features,
            problem.n_actions) if self.encoding == "action_features" else None
        self.statistics_ = None

    def _state_phi(self, states) -> np.ndarray:
        phi = np.asarray(self.features_.transform(states), dtype=np.float64)
        if self.fit_intercept:
            phi = np.hstack([phi, np.ones((phi.shape[0], 1))])
        return phi

    def _accumulate(self, chunk, phi=None):
        phi, next_phi = phi if phi is not None else (self._state_phi(chunk.states), self._state_phi(chunk.next_states))
        q, K = phi.shape[1], self.n_actions_
        if self.statistics_ is None:
            self._n_state_features = q
            size = K * q if self.encoding == "per_action" else q + K if self.encoding == "joint" else \
                q * self.action_features_.shape[1]
            self.statistics_ = BellmanStatistics(size)
        weights = chunk.gamma * chunk.continues[:, None] * chunk.next_mu
        y = chunk.reward if self.target == "q" else chunk.continues * chunk.next_reward
        if self.encoding == "action_features":
            X = self.action_features_
            self.statistics_.accumulate(_row_kron(phi, X[chunk.actions]), _row_kron(next_phi, weights @ X), y,
                                        chunk.sample_weight)
        elif self.encoding == "per_action":
            self.statistics_.accumulate_blocks(phi, chunk.actions, next_phi, weights, y, chunk.sample_weight)
        else:
            design = np.hstack([phi, np.eye(K)[chunk.actions]])
            nxt = np.hstack([weights.sum(axis=1, keepdims=True) * next_phi, weights])
            self.statistics_.accumulate(design, nxt, y, chunk.sample_weight)

    # ------------------------------------------------------------------ prediction
    def _linear(self, states, phi=None) -> np.ndarray:
        """The fitted linear part (m, K): Q itself or Z (``phi``: the states' features, if at hand)."""
        phi = self._state_phi(states) if phi is None else phi
        if self.encoding == "per_action":
            return phi @ self.coef_.T
        if self.encoding == "action_features":
            return phi @ self.coef_ @ self.action_features_.T
        q = phi.shape[1]
        return (phi @ self.coef_[:q])[:, None] + self.coef_[q:][None, :]

    def predict_q(self, states) -> np.ndarray:
        """``Q(s, a)`` for every action, shape (m, K)."""
        if not hasattr(self, "coef_"):
            raise exceptions.NotFittedError("this LSTDQ is not fitted yet; call fit_bellman (or partial_fit + solve) first")
        states = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
        out = np.empty((states.shape[0], self.n_actions_))
        for start in range(0, states.shape[0], self._chunk()):
            X = states[start:start + self._chunk()]
            lin = self._linear(X)
            if self.target == "q":
                out[start:start + X.shape[0]] = lin
            else:
                u = np.asarray(self.log_policy_(X), dtype=np.float64)
                g = np.asarray(self.offset_(X), dtype=np.float64)
                out[start:start + X.shape[0]] = u - g[:, None] + self.gamma_ * lin
        return out

    def _residual(self, problem, phi=None) -> float:
        """RMS over rows of ``Q(s_i, a_i) - y_i - gamma c_i sum_a' mu(a'|s'_i) Q(s'_i, a')``, with
        the linear part in place of Q for ``target="continuation"`` (times gamma: the Q residual
        when u at the rows is the training u). ``phi``: the features of all of ``problem``'s states
        and next states, if at hand (one chunk)."""
        if phi is not None:
            total = self._squared_residuals(problem, self._linear(None, phi[0]), self._linear(None, phi[1]))
            return float(np.sqrt(total / max(problem.n, 1)))
        total = 0.0
        rows_all = problem.n
        for start in range(0, rows_all, self._chunk()):
            c = problem.rows(start, start + self._chunk())
            total += self._squared_residuals(c, self._linear(c.states), self._linear(c.next_states))
        return float(np.sqrt(total / max(rows_all, 1)))

    def _squared_residuals(self, c, linear, next_linear) -> float:
        """The sum of squares of :meth:`_residual`'s residuals on the rows of ``c``, from the linear
        part at their states and next states (m, K)."""
        here = linear[np.arange(c.n), c.actions]
        nxt = np.sum(c.next_mu * next_linear, axis=1)
        y = c.reward if self.target == "q" else c.continues * c.next_reward
        res = here - y - c.gamma * c.continues * nxt
        if self.target == "continuation":
            res = c.gamma * res
        return float(np.sum(res ** 2))


def _row_kron(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Row-wise Kronecker product ``out[i] = A[i] (x) B[i]``, shape (m, p_A p_B)."""
    return (A[:, :, None] * B[:, None, :]).reshape(A.shape[0], A.shape[1] * B.shape[1])


def _check_action_features(features, n_actions: int) -> np.ndarray:
    """The (K, d) action features of ``encoding="action_features"``, finite, one row per action."""
    if features is None:
        raise ActionTableError("LSTDQ(encoding='action_features') needs action features: pass "
                               "action_features=(K, d) array, or fit data that carry an action table")
    features = np.asarray(getattr(features, "features", features), dtype=np.float64)
    if features.ndim != 2:
        raise ActionTableError(f"action_features must be a (K, d) array, got shape {features.shape}")
    if features.shape[0] != n_actions:
        raise ActionTableError(f"action_features has {features.shape[0]} rows but the problem has {n_actions} "
                               "actions (next_mu columns); one row per action is expected")
    if not np.all(np.isfinite(features)):
        raise ActionFeatureError(f"action_features holds {int((~np.isfinite(features)).sum())} NaN or infinite "
                                 "value(s); every action needs finite features")
    return features

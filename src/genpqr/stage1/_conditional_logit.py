r"""A conditional logit over actions described by features (McFadden 1974): stage 1 for many
actions, borrowing strength across actions through their features ``x_a``.

.. math::

    \pi(a \mid s) = \frac{\exp(b(s)^\top W x_a)}{\sum_{a'} \exp(b(s)^\top W x_{a'})},

a bilinear (two-tower, linear) score: ``phi(s, a) = b(s) (outer) x_a`` with the state basis
``b(s) = [1, z(s)]``, so the coefficients ``W`` (q x d) hold the main effects of the action
features (row 0: ``x_a`` alone, the classic conditional logit) and their interactions with
the state basis ``z(s)``. An action never taken in the data gets the probability its features
predict. Fitted by L-BFGS on the full batch with analytic gradients; the softmax over the K
actions is accumulated in blocks of actions (an online log-sum-exp), so no dense n x K matrix
is formed while fitting.

**Sufficient statistics.** The likelihood sees a row only through its state and its action, so
when the states repeat (tabular states: a few distinct rows among many) the fit runs on the
distinct states ``s`` with their summed weights ``w_s`` and their weighted sums of chosen
features ``c_s = sum_{i: s_i = s} w_i x_{a_i}`` (:mod:`genpqr.stage1` ``choice_cells``):

.. math::

    \sum_i w_i [\log Z(s_i) - b(s_i)^\top W x_{a_i}]
        = \sum_s [w_s \log Z(s) - b(s)^\top W c_s],

the same objective, so the same optimum, at ``m x K`` instead of ``n x K`` scores per step (50
user states and 200,000 choices: 4,000 times fewer). Counting is one pass over the rows; it is
used when there are at most half as many distinct states as rows, else the rows are the units.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..data import ActionTable, FiniteActions
from ..data._estimator_base import LightClassifierMixin, LightEstimator, check_is_fitted
from ..data._validation import as_float_array, check_state_indices, clone_learner as clone, short_list
from ..exceptions import ActionFeatureError, ActionTableError, ConvergenceWarning
from ._bilinear import bilinear_log_partition, bilinear_log_proba_at
from ._cells import choice_cells, repeated_rows
from ._stage1 import progress_bar

__all__ = ["ConditionalLogit", "STATE_BASES", "bind_action_features", "check_feature_dim", "action_feature_matrix",
           "action_codes"]

#: Newton steps after L-BFGS (L-BFGS stalls where the objective's rounding hides its decrease,
#: about 1e-8 in the coefficients) when W has at most this many entries ...
_POLISH_MAX_PARAMS = 400
#: ... and the Hessian costs at most this many multiply-adds (n * (q d)^2).
_POLISH_MAX_WORK = 2e8

#: The state bases ``b(s)`` of :class:`ConditionalLogit` by name.
STATE_BASES = ("linear", "none", "onehot")


class ConditionalLogit(LightClassifierMixin, LightEstimator):
    r"""Conditional logit ``pi(a|s) ~ exp(b(s)^T W x_a)`` over actions with features ``x_a``.

    Parameters
    ----------
    action_features : ActionTable or array-like of shape (K, d), optional
        The actions' features. An :class:`~genpqr.data.ActionTable`: ``y`` holds its labels and
        ``classes_`` are its labels; an array: ``y`` holds row indices (codes ``0..K-1``). None:
        :class:`genpqr.GenPQR` (stage 1) passes the training data's table; fitting it alone
        then raises.
    state_basis : {"linear", "none", "onehot"} or callable
        ``b(s)``: ``"linear"`` ``[1, standardized s]`` (d_s + 1 columns, the default);
        ``"none"`` ``[1]`` (no state interaction: a choice among described alternatives);
        ``"onehot"`` the indicator of a tabular state index (``n_states`` columns: a
        separate ``W`` row per state, so one-hot ``x_a`` make the model saturated); a callable
        ``states (n, d_s) -> (n, p)``: ``[1, f(s)]``.
    C : float
        Inverse L2 strength as in scikit-learn: minimises ``C * sum_i w_i (-log pi(a_i|s_i)) +
        ||W||^2 / 2``; ``numpy.inf``: no penalty (maximum likelihood).
    n_states : int, optional
        ``state_basis="onehot"``: the number of states (default: max index + 1).
    max_iter : int
        L-BFGS iterations (a :class:`~genpqr.exceptions.ConvergenceWarning` when reached).
    tol : float
        L-BFGS's projected-gradient tolerance on the mean objective. When ``W`` has at most 400
        entries, up to 3 Newton steps (the analytic Hessian, a least-squares solve) follow, so a
        well-posed fit reaches the optimum to rounding (L-BFGS alone stalls near 1e-8).
    block_size : int
        At most this many (row, action) scores at a time (the actions are taken in blocks of
        ``max(1, block_size // n)``).
    random_state : int, Generator or None
        Unused (the fit starts at ``W = 0`` and is deterministic); kept for the interface.
    progress : bool or None
        A bar over the L-BFGS iterations on stderr, shown once a fit has run 2 seconds (None:
        only on a terminal; False: never). :class:`genpqr.GenPQR` passes its own ``progress``
        to a model left at None.

    Attributes
    ----------
    coef_ : ndarray of shape (q, d)
        ``W``; row 0 the main effects of the features (except with ``"onehot"``, whose rows are
        the states).
    classes_ : ndarray of shape (K,)
    action_features_ : ndarray of shape (K, d)
    n_features_in_ : int
    n_iter_ : int
    converged_ : bool
    n_fit_units_ : int
        The units the likelihood was summed over: the distinct states when the states repeat
        (tabular states: a sufficient statistic), else the rows.
    """

    def __init__(self, action_features=None, state_basis="linear", C=1.0, n_states=None, max_iter=1000,
                 tol=1e-8, block_size=2 ** 20, random_state=None, progress=None):
        self.action_features = action_features
        self.state_basis = state_basis
        self.C = C
        self.n_states = n_states
        self.max_iter = max_iter
        self.tol = tol
        self.block_size = block_size
        self.random_state = random_state
        self.progress = progress

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y, sample_weight=None):
        """Maximise the penalised conditional likelihood of ``y`` given states ``X`` (n, d_s): on
        the distinct states and their choice counts when the states repeat (module docstring)."""
        from scipy.optimize import minimize

        self._check_params()
        features, classes = action_feature_matrix(self.action_features)
        X = as_float_array(X, "X", ndim=2, allow_1d_as_column=True)
        codes = action_codes(y, classes, X.shape[0])
        w = np.ones(X.shape[0]) if sample_weight is None else as_float_array(sample_weight, "sample_weight", ndim=1)
        if w.shape != (X.shape[0],) or w.min() < 0 or w.sum() <= 0:
            raise ValueError(f"sample_weight must be ({X.shape[0]},) non-negative with a positive sum")
        self.n_features_in_, self.classes_, self.action_features_ = X.shape[1], classes, features
        self._fit_basis(X)
        problem = self._likelihood(X, codes, w, features)
        self.n_fit_units_ = problem.n_units
        with _Progress(self.progress, int(self.max_iter)) as bar:
            result = minimize(problem.value_grad, np.zeros(problem.size), jac=True, method="L-BFGS-B",
                              callback=bar.step,
                              options=dict(maxiter=int(self.max_iter), gtol=float(self.tol), ftol=0.0, maxcor=20))
            theta = result.x
            if problem.polishable():
                bar.stage("Newton polish")
                theta = _newton_polish(theta, problem)
        self.coef_ = theta.reshape(problem.shape)
        self.n_iter_ = int(result.nit)
        self.converged_ = bool(result.nit < self.max_iter)
        if not self.converged_:
            warnings.warn(f"ConditionalLogit: L-BFGS stopped after max_iter={self.max_iter} iterations (gradient "
                          f"norm {np.abs(result.jac).max():.2e} > tol={self.tol}); raise max_iter",
                          ConvergenceWarning, stacklevel=2)
        return self

    def _likelihood(self, X, codes, w, features) -> "_Likelihood":
        """The objective on its units: the distinct states and their counts when they repeat
        (``genpqr.stage1._cells.repeated_rows``), else the rows."""
        penalty = 0.0 if np.isinf(self.C) else 1.0 / (self.C * w.sum())
        total = w.sum()
        index = repeated_rows(X)
        if index is not None:
            cells = choice_cells(X, codes, features.shape[0], w, index=index)
            weight = cells.state_weights()
            live = weight > 0  # states whose rows all weigh 0 add nothing
            units, weight = cells.states[live], weight[live]
            chosen = cells.feature_sums(features)[live] / weight[:, None]
        else:
            units, weight, chosen = X, w, features[codes]
        return _Likelihood(self, units, weight / total, chosen, features, penalty)

    def _check_params(self):
        if not (isinstance(self.state_basis, str) and self.state_basis in STATE_BASES) and \
                not callable(self.state_basis):
            raise ValueError(f"state_basis must be one of {STATE_BASES} or a callable, got {self.state_basis!r}")
        if not (np.isscalar(self.C) and self.C > 0):
            raise ValueError(f"C must be a positive number (numpy.inf: no penalty), got {self.C!r}")
        if int(self.block_size) < 1 or int(self.max_iter) < 1:
            raise ValueError("block_size and max_iter must be positive integers")

    def _fit_basis(self, X):
        if self.state_basis == "linear":
            self.state_mean_ = X.mean(axis=0)
            scale = X.std(axis=0)
            self.state_scale_ = np.where(scale > 0, scale, 1.0)
        elif self.state_basis == "onehot":
            if X.shape[1] != 1:
                raise ValueError(f"state_basis='onehot' needs one column of tabular state indices, got {X.shape[1]}")
            self.n_states_ = int(self.n_states) if self.n_states is not None else int(X.max()) + 1

    def _basis(self, X) -> np.ndarray:
        """``b(s)``, shape (n, q)."""
        ones = np.ones((X.shape[0], 1))
        if self.state_basis == "none":
            return ones
        if self.state_basis == "linear":
            return np.hstack([ones, (X - self.state_mean_) / self.state_scale_])
        if self.state_basis == "onehot":
            s = check_state_indices(X, self.n_states_, "X")
            return np.eye(self.n_states_)[s]
        extra = as_float_array(self.state_basis(X), "state_basis(X)", ndim=2, allow_1d_as_column=True)
        if extra.shape[0] != X.shape[0]:
            raise ValueError(f"state_basis(X) returned {extra.shape[0]} rows for {X.shape[0]} states")
        return np.hstack([ones, extra])

    # ------------------------------------------------------------------ prediction
    def _tower(self, X) -> np.ndarray:
        """``G = b(s) W``, shape (n, d): the state tower, scored against ``x_a``."""
        check_is_fitted(self, "coef_")
        X = as_float_array(X, "X", ndim=2, allow_1d_as_column=True)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} column(s) but ConditionalLogit was fitted on {self.n_features_in_}")
        return self._basis(X) @ self.coef_

    def decision_function(self, X) -> np.ndarray:
        """Scores ``b(s)^T W x_a``, shape (n, K)."""
        return self._tower(X) @ self.action_features_.T

    def predict_log_proba(self, X) -> np.ndarray:
        """``log pi(a|s)`` for every action of the table (never-taken ones included), (n, K),
        filled in blocks of actions (once per distinct state when the states repeat)."""
        out, index = self._distinct_log_proba(X)
        return out if index is None else out[index]

    def _distinct_log_proba(self, X):
        """``(log pi at the distinct rows of X, each row's position among them or None)``."""
        G, index = self._distinct_tower(X)
        log_z = bilinear_log_partition(G, self.action_features_, 8 * int(self.block_size))
        out = G @ self.action_features_.T
        out -= log_z[:, None]
        return out, index

    def predict_log_proba_at(self, X, codes, max_bytes: int | None = None) -> np.ndarray:
        """``log pi(a_ij|s_i)`` at action codes ``codes`` (n,) or (n, c), same shape: the
        log-partition by ``genpqr.stage1._bilinear.bilinear_log_partition`` in blocks of at most
        ``max_bytes`` (default ``8 * block_size``) of scores, once per distinct state; no (n, K) matrix."""
        limit = 8 * int(self.block_size) if max_bytes is None else max_bytes
        G, index = self._distinct_tower(X)
        if index is None:
            return bilinear_log_proba_at(G, self.action_features_, codes, limit)
        log_z = bilinear_log_partition(G, self.action_features_, limit)[index]
        return bilinear_log_proba_at(G[index], self.action_features_, codes, limit, log_z=log_z)

    def _distinct_tower(self, X):
        """``(G, index)``: the tower at the distinct rows of ``X`` and each row's position among
        them when the rows repeat (``genpqr.stage1._cells.repeated_rows``), else ``(G, None)``."""
        check_is_fitted(self, "coef_")
        X = as_float_array(X, "X", ndim=2, allow_1d_as_column=True)
        repeated = repeated_rows(X)
        if repeated is None:
            return self._tower(X), None
        return self._tower(repeated[0]), repeated[1]

    def predict_proba(self, X) -> np.ndarray:
        """``pi(a|s)``, shape (n, K)."""
        out, index = self._distinct_log_proba(X)
        np.exp(out, out=out)
        return out if index is None else out[index]

    def predict(self, X) -> np.ndarray:
        """The most probable action (a label of ``classes_``), shape (n,)."""
        G, index = self._distinct_tower(X)
        best = np.argmax(G @ self.action_features_.T, axis=1)
        return self.classes_[best if index is None else best[index]]


def bind_action_features(model, transitions):
    """A model that scores actions by their features (a parameter ``action_features``, e.g.
    :class:`genpqr.stage1.ConditionalLogit`) gets the data's action table in code order: a copy
    with ``action_features`` set to the table's (K, d) features when it is None; a table or
    array it already holds must agree with the data's (named errors). Other models pass as they are."""
    params = model.get_params(deep=False) if hasattr(model, "get_params") else {}
    if "action_features" not in params:
        return model
    table, given = transitions.action_table, params["action_features"]
    if table is None:
        if given is None:
            raise ActionTableError(f"policy_model {type(model).__name__} scores actions by their features, but the "
                                   "data has no action table; build it with from_arrays/from_pandas(..., "
                                   "action_features=)")
        return model
    if isinstance(given, ActionTable) and not np.array_equal(given.labels, table.labels):
        raise ActionTableError(f"policy_model's action table lists labels {short_list(given.labels, 10)}, the "
                               f"data's {short_list(table.labels, 10)}; they must be the same labels in the same order")
    check_feature_dim(model, given, transitions)
    return clone(model).set_params(action_features=np.asarray(table.features))


def check_feature_dim(model, given, transitions) -> None:
    """``ActionFeatureError`` when ``given`` (the model's features) and the data's table disagree
    in the number of actions or of features."""
    table = transitions.action_table
    if given is None or table is None:
        return
    given = np.asarray(given.features if isinstance(given, ActionTable) else given)
    given = given[:, None] if given.ndim == 1 else given
    if given.shape != table.features.shape:
        raise ActionFeatureError(f"policy_model {type(model).__name__} has action features of shape {given.shape} "
                                 f"(K, d) but the data's action table has {table.features.shape}")


def action_feature_matrix(action_features, owner: str = "ConditionalLogit") -> tuple[np.ndarray, np.ndarray]:
    """``(features (K, d), classes (K,))`` of an ActionTable or a (K, d) array, for a policy model
    that scores actions by their features (``owner``, named in the errors)."""
    if action_features is None:
        raise ValueError(f"{owner} needs action_features (an ActionTable or a (K, d) array); inside "
                         "GenPQR it reads the training data's table: build the data with action_features=")
    if isinstance(action_features, ActionTable):
        return np.asarray(action_features.features, dtype=np.float64), action_features.labels
    try:
        features = np.array(action_features, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ActionFeatureError("action_features must be real numbers") from exc
    features = features[:, None] if features.ndim == 1 else features
    if features.ndim != 2 or features.shape[0] < 2:
        raise ActionFeatureError(f"action_features must have shape (K >= 2, d), got {features.shape}")
    bad = ~np.all(np.isfinite(features), axis=1)
    if bad.any():
        raise ActionFeatureError(f"action_features have NaN/inf in row(s) {np.flatnonzero(bad)[:10].tolist()}")
    return features, np.arange(features.shape[0])


def action_codes(y, classes, n: int, owner: str = "ConditionalLogit") -> np.ndarray:
    """``y`` (n,) as codes ``0..K-1``: labels of a table (``classes``), or row codes of a feature array."""
    if y is None:
        raise ValueError(f"{owner} requires y (the chosen actions)")
    y = np.asarray(y)
    y = y[:, 0] if y.ndim == 2 and y.shape[1] == 1 else y
    if y.shape != (n,):
        raise ValueError(f"y must have shape ({n},) like X, got {y.shape}")
    if not np.array_equal(classes, np.arange(classes.size)):
        return FiniteActions(classes).encode(y, "y")
    if y.dtype.kind not in "iu" and not (y.dtype.kind == "f" and np.all(y == np.round(y))):
        raise ValueError(f"y must hold action codes (rows of action_features), got dtype {y.dtype}")
    codes = y.astype(np.int64)
    if codes.min() < 0 or codes.max() >= classes.size:
        raise ValueError(f"y must hold action codes in [0, {classes.size}), got [{codes.min()}, {codes.max()}]")
    return codes


class _Likelihood:
    """The penalised mean negative log-likelihood of :class:`ConditionalLogit` over its units
    (rows, or distinct states with their counts): unit ``u`` has the state ``units[u]``, the weight
    ``weight[u]`` (summing to 1) and the mean chosen features ``chosen[u]``, so

    ``f(W) = sum_u weight_u [log Z(s_u) - b(s_u)^T W chosen_u] + penalty ||W||^2 / 2``."""

    def __init__(self, model, units, weight, chosen, features, penalty):
        self.onehot = model.state_basis == "onehot"
        if self.onehot:  # b(s) W is row s of W: index instead of a (units x n_states) one-hot matrix
            self.index = check_state_indices(units, model.n_states_, "X")
            q = model.n_states_
        else:
            self.B = model._basis(units)
            q = self.B.shape[1]
        self.weight, self.chosen, self.features, self.penalty = weight, chosen, features, penalty
        self.block_size = model.block_size
        self.shape = (q, features.shape[1])
        self.size = q * features.shape[1]
        self.n_units = int(units.shape[0])

    def tower(self, W) -> np.ndarray:
        """``G = b(s_u)^T W`` per unit, shape (units, d)."""
        return W[self.index] if self.onehot else self.B @ W

    def back(self, R) -> np.ndarray:
        """``sum_u b(s_u) R_u^T``, shape (q, d): the tower's transpose."""
        if not self.onehot:
            return self.B.T @ R
        out = np.zeros(self.shape)
        np.add.at(out, self.index, R)
        return out

    def value_grad(self, theta):
        W = theta.reshape(self.shape)
        G = self.tower(W)
        log_z, expected = _softmax_moments(G, self.features, self.block_size)
        value = np.dot(self.weight, log_z - np.einsum("ij,ij->i", G, self.chosen)) + 0.5 * self.penalty * theta @ theta
        grad = self.back(self.weight[:, None] * (expected - self.chosen)) + self.penalty * W
        return value, grad.ravel()

    def polishable(self) -> bool:
        """Newton steps are cheap: a one-hot basis (a block-diagonal Hessian, one (d, d) block per
        state), or at most :data:`_POLISH_MAX_PARAMS` coefficients and :data:`_POLISH_MAX_WORK`
        multiply-adds for the Hessian."""
        return self.onehot or (self.size <= _POLISH_MAX_PARAMS and self.n_units * self.size ** 2 <= _POLISH_MAX_WORK)

    def newton_step(self, theta, grad) -> np.ndarray:
        """``H^+ grad`` with ``H = sum_u weight_u (b_u b_u^T) (x) Cov_pi(x | s_u) + penalty I``."""
        q, d = self.shape
        G = self.tower(theta.reshape(q, d))
        _, mean, second = _softmax_moments(G, self.features, self.block_size, second=True)
        cov = second.reshape(-1, d, d) - np.einsum("ij,ik->ijk", mean, mean)
        if self.onehot:  # one (d, d) block per state
            blocks = np.zeros((q, d, d))
            np.add.at(blocks, self.index, self.weight[:, None, None] * cov)
            blocks += self.penalty * np.eye(d)
            step = np.einsum("sij,sj->si", np.linalg.pinv(blocks, rcond=1e-12), grad.reshape(q, d))
            return step.ravel()
        B = self.B
        hess = np.einsum("ij,il,ikm->jklm", self.weight[:, None] * B, B, cov).reshape(q * d, q * d) \
            + self.penalty * np.eye(q * d)
        return np.linalg.lstsq(hess, grad, rcond=1e-12)[0]


def _newton_polish(theta, problem: _Likelihood, steps: int = 3) -> np.ndarray:
    """Up to ``steps`` Newton steps on the (convex) mean objective; a step is kept only when it
    shrinks the gradient. Hessian: ``sum_u w_u (b_u b_u^T) (x) Cov_pi(x | s_u) + penalty I``."""
    value, grad = problem.value_grad(theta)
    for _ in range(steps):
        step = problem.newton_step(theta, grad)
        new_value, new_grad = problem.value_grad(theta - step)
        if not np.abs(new_grad).max() < np.abs(grad).max():  # near the optimum the value's decrease is rounding
            break
        theta, value, grad = theta - step, new_value, new_grad
    return theta


class _Progress:
    """A tqdm bar over the L-BFGS iterations (shown after 2 seconds; ``progress`` None: only on
    a terminal, False: never), with the current objective; ``stage(text)`` names a later step."""

    def __init__(self, progress, total: int):
        self.progress, self.total, self.bar = progress, total, None

    def __enter__(self):
        if self.progress is not False:
            self.bar = progress_bar(self.progress, total=self.total, desc="conditional logit (L-BFGS)")
        return self

    def step(self, intermediate_result=None):
        if self.bar is not None:
            self.bar.update(1)
            fun = getattr(intermediate_result, "fun", None)
            if fun is not None:
                self.bar.set_postfix_str(f"objective {fun:.8g}", refresh=False)

    def stage(self, text: str):
        if self.bar is not None:
            self.bar.set_description_str(f"conditional logit ({text})", refresh=False)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
        return False


def _blocks(n_rows: int, n_actions: int, block_size: int):
    step = max(1, int(block_size) // max(n_rows, 1))
    for start in range(0, n_actions, step):
        yield start, min(start + step, n_actions)


def _row_blocks(n_rows: int, n_actions: int, block_size: int):
    """Blocks of rows for the online log-sum-exp: all rows while a block still spans at least
    ``min(K, 256)`` actions (few units: tabular states), else rows enough for ``min(K, 4096)``
    actions a block (many rows: the scores of one block stay within ``block_size``)."""
    block_size = int(block_size)
    if block_size // max(n_rows, 1) >= min(n_actions, 256):
        yield 0, n_rows
        return
    rows = max(1, block_size // min(n_actions, 4096))
    for start in range(0, n_rows, rows):
        yield start, min(start + rows, n_rows)


def _softmax_moments(G, features, block_size, second: bool = False):
    """``log sum_a exp(G x_a)`` (n,) and ``E_pi[x_a | s]`` (n, d) -- with ``second`` also
    ``E_pi[x_a x_a^T | s]`` flattened, (n, d * d) -- by an online log-sum-exp over blocks of rows
    and of actions (at most ``block_size`` scores at a time)."""
    n, d = G.shape[0], features.shape[1]
    log_z, moment = np.empty(n), np.empty((n, d))
    outer = np.einsum("kj,kl->kjl", features, features).reshape(-1, d * d) if second else None
    square = np.empty((n, d * d)) if second else None
    for r0, r1 in _row_blocks(n, features.shape[0], block_size):
        Gb = G[r0:r1]
        top = np.full(r1 - r0, -np.inf)
        total = np.zeros(r1 - r0)
        mom = np.zeros((r1 - r0, d))
        sq = np.zeros((r1 - r0, d * d)) if second else None
        for start, stop in _blocks(r1 - r0, features.shape[0], block_size):
            block = features[start:stop]
            scores = Gb @ block.T
            new_top = np.maximum(top, scores.max(axis=1))
            shrink = np.exp(top - new_top)
            e = np.exp(scores - new_top[:, None])
            total = total * shrink + e.sum(axis=1)
            mom = mom * shrink[:, None] + e @ block
            if second:
                sq = sq * shrink[:, None] + e @ outer[start:stop]
            top = new_top
        log_z[r0:r1] = top + np.log(total)
        moment[r0:r1] = mom / total[:, None]
        if second:
            square[r0:r1] = sq / total[:, None]
    return (log_z, moment, square) if second else (log_z, moment)

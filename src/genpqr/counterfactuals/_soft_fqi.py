r"""Soft fitted Q iteration: the soft-optimal policy of a reward from samples.

The soft (MaxEnt, temperature 1) Bellman optimality equation

    Q(s, a) = r(s, a) + gamma E[ logsumexp_a' Q(s', a') | s, a ],     pi(a|s) = softmax_a Q(s, a)

(the nonlinear counterpart of stage 2's linear ``Q = u - g + gamma P mu Q``) is solved by
fitted iteration on transitions ``(s_i, a_i, r_i, s'_i)``: from ``Q_0 = 0``,

    y_i = r_i + gamma (1 - terminated_i) logsumexp_a' Q_{k-1}(s'_i, a'),    Q_k = regress y on (s_i, a_i),

with any scikit-learn regressor in the encodings of :mod:`genpqr.stage2` (per action, joint
``[s, onehot(a)]`` or a native Q-model), warm-started where the regressor supports it. With
one-hot tabular states and a saturated model the iteration is exactly soft value iteration on
the empirical kernel (a contraction at rate gamma).

:func:`soft_counterfactual` feeds it GenPQR's recovered reward, optionally changed, on logged
or simulated transitions (e.g. from a changed environment) and a new discount: the sample-path
counterfactual. The identification rules of :mod:`genpqr.counterfactuals` apply unchanged; without
the kernels, a change of the environment or the discount is taken to break the shaping term, as
it generically does (the exact condition, :func:`genpqr.counterfactuals.shaping_preserved`, needs
the tabular kernels).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import logsumexp, softmax
from sklearn.base import BaseEstimator
from tqdm.auto import tqdm

from ..data._progress import bar_width
from ..data._validation import as_float_array, check_gamma
from ._counterfactual import IdentificationWarning, identification_rule
from ..exceptions import ConvergenceWarning, NotFittedError
from ..stage2._qmodels import FQEHistory, make_q_model

__all__ = ["SoftFQI", "soft_counterfactual"]


class SoftFQI(BaseEstimator):
    """Soft fitted Q iteration (module docstring).

    Parameters
    ----------
    regressor : regressor or native Q-model, optional
        Default ``HistGradientBoostingRegressor(max_iter=100)``.
    encoding : {"auto", "per_action", "joint", "native"}
    n_iterations : int
        Maximum iterations.
    tol : float or None
        Stop when ``max_i |y^{(k+1)}_i - y^{(k)}_i|`` <= ``tol`` (None: run all iterations).
    warm_start : "auto" or bool
    progress : bool or None

    Attributes
    ----------
    n_actions_ : int
    history_ : FQEHistory
        Per-iteration RMS Bellman residual and sup change of the targets.
    n_iter_ : int
    converged_ : bool
    """

    def __init__(self, regressor=None, encoding="auto", n_iterations=200, tol=1e-6, warm_start="auto",
                 progress=False):
        self.regressor = regressor
        self.encoding = encoding
        self.n_iterations = n_iterations
        self.tol = tol
        self.warm_start = warm_start
        self.progress = progress

    def fit(self, states, actions, rewards, next_states, gamma, *, terminated=None, n_actions=None):
        """Iterate to the soft-optimal ``Q``.

        Parameters
        ----------
        states, next_states : ndarray of shape (n, d)
        actions : ndarray of shape (n,)
            Integer codes ``0..K-1``.
        rewards : ndarray of shape (n,)
            ``r(s_i, a_i)``.
        gamma : float in [0, 1)
        terminated : ndarray of shape (n,) of bool, optional
            Absorbing transitions (no continuation).
        n_actions : int, optional
            ``K`` (default ``max(actions) + 1``).
        """
        gamma = check_gamma(gamma)
        X = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
        X2 = as_float_array(next_states, "next_states", ndim=2, allow_1d_as_column=True)
        r = as_float_array(rewards, "rewards", ndim=1)
        a = np.asarray(actions)
        if a.ndim != 1 or a.dtype.kind not in "iu" or (a.size and a.min() < 0):
            raise ValueError(f"actions must be a 1-D array of integer codes >= 0, got dtype {a.dtype}, shape {a.shape}")
        n = X.shape[0]
        if not (X2.shape == X.shape and r.shape == (n,) and a.shape == (n,)):
            raise ValueError(f"states {X.shape}, actions {a.shape}, rewards {r.shape} and next_states {X2.shape} "
                             f"must have n = {n} rows")
        K = int(a.max()) + 1 if n_actions is None else int(n_actions)
        if a.size and a.max() >= K:
            raise ValueError(f"actions must be codes below n_actions={K}, got {a.max()}")
        if self.n_iterations < 1:
            raise ValueError(f"n_iterations must be at least 1, got {self.n_iterations}")
        cont = np.ones(n) if terminated is None else 1.0 - np.asarray(terminated, dtype=np.float64)
        self.n_actions_ = K
        self.model_, self.converged_ = self._loop(X, a, r, X2, gamma * cont, K)
        self.n_iter_ = len(self.history_.target_change)
        if self.tol is not None and not self.converged_:
            warnings.warn(f"soft FQI did not reach tol={self.tol:g} in {self.n_iterations} iterations (last target "
                          f"change {self.history_.target_change[-1]:.3g}): its soft Q (q, policy; the counterfactual "
                          f"policy of soft_counterfactual) is not a fixed point and depends on where it stopped; raise "
                          f"n_iterations", ConvergenceWarning, stacklevel=2)
        return self

    def _loop(self, X, a, r, X2, discount, K):
        model = make_q_model(self.regressor, self.encoding, K, self.warm_start)
        self.history_ = FQEHistory()
        targets, rows, converged = r.copy(), np.arange(a.size), False
        bar = tqdm(range(self.n_iterations), desc="soft FQI", leave=False, ncols=bar_width(),
                   disable=(None if self.progress is None else not self.progress))
        for _ in bar:
            model.fit_q(X, a, targets, K)
            new = r + discount * logsumexp(model.predict_q(X2), axis=1)
            change = float(np.max(np.abs(new - targets)))
            fitted = model.predict_q(X)[rows, a]
            self.history_.bellman_residual.append(float(np.sqrt(np.mean((fitted - new) ** 2))))
            self.history_.target_change.append(change)
            targets = new
            if self.tol is not None and change <= self.tol:
                converged = True
                break
            bar.set_postfix(change=f"{change:.2e}")
        model.fit_q(X, a, targets, K)  # Q of the last targets
        return model, converged

    def _check(self):
        if not hasattr(self, "model_"):
            raise NotFittedError("this SoftFQI is not fitted yet; call fit first")

    def predict_q(self, states) -> np.ndarray:
        """``Q(s, .)``, shape (n, K)."""
        self._check()
        return np.asarray(self.model_.predict_q(as_float_array(states, "states", ndim=2, allow_1d_as_column=True)))

    def value(self, states) -> np.ndarray:
        """``V(s) = logsumexp_a Q(s, a)``, shape (n,)."""
        return logsumexp(self.predict_q(states), axis=1)

    def policy(self, states) -> np.ndarray:
        """``pi(.|s) = softmax Q(s, .)``, shape (n, K)."""
        return softmax(self.predict_q(states), axis=1)

    def log_policy(self, states) -> np.ndarray:
        q = self.predict_q(states)
        return q - logsumexp(q, axis=1, keepdims=True)


def _row_delta(change, states, K):
    """``delta(s_i, .)`` (n, K): None, (K,) constants, or a callable ``states -> (n, K)``."""
    n = states.shape[0]
    if change is None:
        return np.zeros((n, K))
    out = np.asarray(change(states), dtype=np.float64) if callable(change) else \
        np.broadcast_to(np.asarray(change, dtype=np.float64), (n, K))
    if out.shape != (n, K):
        raise ValueError(f"reward_change must be (K,) = ({K},) constants or a callable states -> (n, {K}); got shape "
                         f"{out.shape}")
    return out


def soft_counterfactual(model, transitions=None, reward_change=None, gamma=None, *, environment_changed=False,
                        fqi=None, warn=True) -> SoftFQI:
    r"""The soft-optimal policy of GenPQR's recovered reward (changed) on logged or simulated data.

    Parameters
    ----------
    model : fitted GenPQR (either path)
    transitions : Transitions, optional
        Where to learn: ``(s, a, s')`` rows, e.g. simulated in a changed environment; their
        actions must use the model's labels. Default: the training data.
    reward_change : (K,) array or callable states (n, d) -> (n, K), optional
        A known change ``delta`` added to the recovered reward.
    gamma : float, optional
        New discount (default: the model's).
    environment_changed : bool
        True when ``transitions`` come from changed dynamics (a transition counterfactual);
        False when they are more draws from the logged environment (e.g. every action
        simulated at every logged state, for coverage).
    fqi : SoftFQI, optional
        The iteration's settings (default ``SoftFQI()``: gradient boosting, joint encoding).

    Returns
    -------
    SoftFQI
        Fitted; with ``invariant_`` and ``rule_`` (``genpqr.counterfactuals._identification.identification_rule``).
        An :class:`IdentificationWarning` is raised when the counterfactual changes the
        environment (``environment_changed``) or the discount.
    """
    model._check_fitted()
    data = model.training_data_ if transitions is None else transitions
    codes = model.encoder_.encode(data.labels_of()) if transitions is not None else data.actions
    K = model.n_actions_
    reward = model.reward(data.states) + _row_delta(reward_change, data.states, K)
    rows = np.arange(data.n)
    new_gamma = model.gamma_ if gamma is None else check_gamma(gamma)
    if environment_changed and transitions is None:
        raise ValueError("environment_changed=True needs the transitions of the changed environment")
    changes = tuple(name for name, v in (("reward", reward_change), ("transitions", environment_changed or None),
                                         ("gamma", gamma)) if v is not None)
    invariant, rule = identification_rule(changes, False)
    est = SoftFQI() if fqi is None else fqi
    est = est.fit(data.states, codes, reward[rows, codes], data.next_states, new_gamma, terminated=data.terminated,
                  n_actions=K)
    est.invariant_, est.rule_ = invariant, rule
    if warn and not invariant:
        warnings.warn(f"sample-path counterfactual ({', '.join(changes)}): {rule}", IdentificationWarning,
                      stacklevel=2)
    return est

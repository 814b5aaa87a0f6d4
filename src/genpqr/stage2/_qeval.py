r"""Stage 2: evaluate ``Q = u - g + gamma P mu Q`` from samples (paper, Alg. 2, FQE), for
finite and continuous actions.

Fitted Q evaluation: starting from ``Q_0 = 0``, iterate

    y_i = u(s_i, a_i) - g(s_i) + gamma (1 - terminated_i) (mu Q_{k-1})(s'_i)
    Q_k = regress y on (s_i, a_i)

where ``(mu Q)(s') = sum_j w_j Q(s', a'_j)`` over the ``mu``-nodes of the action space at
``s'`` (:mod:`genpqr.data`): for finite actions all K actions with weights ``mu(a|s')``
(``next_mu`` of shape (n, K)); for continuous actions a quadrature or Monte Carlo rule
(``next_mu`` a ``Nodes``, drawn once: common random numbers).

Finite actions: the Q-models of :mod:`genpqr.stage2`; a regressor enters in one of three
encodings:

* ``"per_action"``: one clone per action, fitted on that action's rows, features ``s``;
* ``"joint"``: one regressor on ``[s, onehot(a)]``;
* ``"action_features"``: one regressor on ``[s, x_a]`` (``action_interactions``: also the
  products ``s_j x_a^k``), ``x_a`` the action table's features (``fit(action_features=)``):
  shared across actions, so ``Q`` (or ``f``) of an action no row takes is a prediction; the
  mu-sums run in blocks of at most ``block_size`` (state, action) rows;
* ``"native"``: a Q-model with ``fit_q(states, actions, targets, n_actions)`` and
  ``predict_q(states) -> (n, K)`` (e.g. the dueling network, boosted trees, the tabular
  cell-mean model below). It is called once per iteration on the same object, so it can
  warm-start.

The same model objects are reused across iterations; scikit-learn regressors whose
``warm_start`` continues from the previous solution (linear models, MLPs) are switched to
warm starts after the first fit (ensembles, whose ``warm_start`` adds members, are not).

Stopping rule: after each iteration the change of the Bellman targets
``max_i |y^{(k+1)}_i - y^{(k)}_i|`` (= gamma times the sup change of ``mu Q`` at the next
states, the projected Bellman residual) is compared with ``tol``. Diagnostics record the
sample Bellman residual ``RMS_i(Q_k(s_i, a_i) - y^{(k+1)}_i)`` per iteration. With
``validation_fraction`` set, a share of episodes is held out, the held-out Bellman residual
picks the iteration count (patience ``n_iter_no_change``), and the loop is re-run on all
rows for that many iterations.

Structure. Because ``u - g`` is known at every (s, a) -- it is the stage-1 output, not an
unknown -- by default only the continuation is regressed (``structure="continuation"``):

    f = P mu Q,   Q = u - g + gamma f,
    y_i = (1 - terminated_i) sum_j w_ij [u(s'_i, a'_ij) - g(s'_i) + gamma f^{(k-1)}(s'_i, a'_ij)]

over the ``mu``-nodes ``a'_ij`` of ``s'_i`` (finite actions: all K actions; the known part
enters as ``next_reward_i = sum_a' mu(a'|s'_i) (u(s'_i, a') - g(s'_i))``, and
:meth:`FQE.predict_q` adds ``base = u(s, .) - g(s)`` back). ``structure="direct"`` regresses
Q itself as above (finite actions: also when ``next_reward`` is not given). Both iterate the same Bellman operator
and have the same fixed point when the regression is exact; the continuation form only asks
the regressor to learn ``P mu Q`` (smooth whenever the dynamics are), not the log-policy or
log-density (DeepPQR's idea of regressing only the unknown part). With many actions this
matters most: a per-action Q-head must otherwise learn ``log pi(a|s)`` from ``1/|A|`` of the
rows (docs/benchmarks.md, "Many actions"). Sample weights are passed to the
regressor (for a Pipeline, to its last step).
"""


from __future__ import annotations

import warnings

import numpy as np

from .. import exceptions
from ..data._estimator_base import LightEstimator
from ..data._progress import bar_width
from ..data._validation import as_float_array, check_finite, check_gamma, check_random_state, clone_learner as clone
from ..exceptions import ConvergenceWarning
from ..actions._integration import Nodes
from ._column_weights import ColumnWeights
from ._qmodels import (BellmanTargets, FQEHistory, TabularQModel, fit_regressor, make_q_model, predict_at,
                       q_from_continuation, warm_start_ok)

__all__ = ["FQE", "TabularQModel", "FQEHistory", "make_q_model", "STRUCTURES"]

#: How the regressor enters the Q-function for continuous actions.
STRUCTURES = ("continuation", "direct")


class FQE(LightEstimator):
    """Fitted Q evaluation of ``Q^mu_{u-g}`` (paper, Algorithm 2).

    Parameters
    ----------
    regressor : regressor or native Q-model, optional
        Default: ``HistGradientBoostingRegressor(max_iter=100)``.
    encoding : {"auto", "per_action", "joint", "action_features", "native"}
        ``"auto"``: native if the model has ``fit_q``, else joint. ``"action_features"`` needs
        ``fit(action_features=)``.
    n_iterations : int
        Maximum number of Bellman iterations (the paper's K).
    tol : float or None
        Stop when the sup change of the Bellman targets is <= ``tol``; None runs all iterations.
    warm_start : "auto" or bool
    validation_fraction : float or None
        Share of episodes held out to choose the iteration count by held-out Bellman residual.
    n_iter_no_change : int
        Patience for that choice.
    refit : bool
        After choosing the count on the split, re-run on all rows.
    progress : bool or None
        tqdm progress bar (None: only on a terminal).
    random_state : int, Generator or None
    structure : {"continuation", "direct"}
        Regress ``f = P mu Q`` (Q = u - g + gamma f) or Q itself (see the module docstring).
        Finite actions use the continuation when :meth:`fit` is given ``next_reward``.
    freeze_transformers : bool
        Continuous actions, a :class:`~sklearn.pipeline.Pipeline` regressor: fit its
        transformers once (the inputs ``[s, a]`` and the nodes are the same every iteration),
        and refit only the final estimator per iteration. Exact for transformers that ignore
        the targets (scalers, polynomial/spline features); set False for ones that use them.
    action_interactions : bool
        ``encoding="action_features"``: append the products of state and action features.
    block_size : int
        ``encoding="action_features"``: most (state, action) rows per regressor call when
        predicting (mu-sums over K in blocks; exact).

    Notes
    -----
    The finite-action options (``encoding``, ``validation_fraction``, ``n_iter_no_change``,
    ``refit``, ``progress``) do not apply to continuous actions.
    """

    def __init__(self, regressor=None, encoding="auto", n_iterations=100, tol=1e-6, warm_start="auto",
                 validation_fraction=None, n_iter_no_change=10, refit=True, progress=False, random_state=None,
                 structure="continuation", freeze_transformers=True, action_interactions=False, block_size=65536):
        self.regressor = regressor
        self.encoding = encoding
        self.n_iterations = n_iterations
        self.tol = tol
        self.warm_start = warm_start
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.refit = refit
        self.progress = progress
        self.random_state = random_state
        self.structure = structure
        self.freeze_transformers = freeze_transformers
        self.action_interactions = action_interactions
        self.block_size = block_size

    def fit(self, states, actions, next_states, continues, reward, next_mu, gamma, groups=None, sample_weight=None,
            next_base=None, next_index=None, next_reward=None, action_features=None):
        """Run FQE.

        Parameters
        ----------
        states, next_states : ndarray of shape (n, d)
        actions : ndarray of shape (n,), int codes; or (n, m) real actions
        continues : ndarray of shape (n,)
            ``1 - terminated``.
        reward : ndarray of shape (n,)
            ``u(s_i, a_i) - g(s_i)``.
        next_mu : ndarray of shape (n, K), ColumnWeights, or Nodes
            ``mu(.|s'_i)``: weights over the K actions (or on a few, or sampled, columns: a
            ``genpqr.stage2._column_weights.ColumnWeights``, no (n, K) matrix), or continuous ``mu``-nodes at the next
            states (actions (n', J, m), weights (n', J)).
        gamma : float
        groups : ndarray of shape (n,), optional
            Episode ids (for the validation split).
        sample_weight : ndarray of shape (n,), optional
            Row weights passed to the regressor at every iteration (weighted least squares of
            the Bellman targets); a regressor whose fit takes none raises a ``TypeError``.
        next_base : ndarray of shape (n', J)
            Continuous actions: ``u(s'_i, a'_ij) - g(s'_i)`` at the nodes.
        next_index : ndarray of shape (n,), optional
            Continuous actions: row ``i``'s next state is ``next_states[next_index[i]]``
            (``next_states`` then holds the n' distinct next states). Default row-aligned.
        next_reward : ndarray of shape (n,), optional
            Finite actions, ``structure="continuation"``: ``sum_a' mu(a'|s'_i) (u(s'_i, a') -
            g(s'_i))``. Then the regressor fits ``f = P mu Q`` and :meth:`predict_q` needs ``base``.
        action_features : ndarray of shape (K, d_x), optional
            Finite actions, ``encoding="action_features"``: row ``a`` describes action code ``a``.
        """
        if isinstance(next_mu, Nodes):
            return self._fit_nodes(states, actions, next_states, continues, reward, next_mu, next_base, gamma,
                                   sample_weight, next_index)
        gamma = check_gamma(gamma)
        if self.structure not in STRUCTURES:
            raise ValueError(f"structure must be one of {STRUCTURES}, got {self.structure!r}")
        data = _finite_inputs(states, actions, next_states, continues, reward, next_mu, next_reward,
                              self.structure == "continuation") + (sample_weight,)
        if self.n_iterations < 1:
            raise ValueError(f"n_iterations must be at least 1, got {self.n_iterations}")
        self.n_actions_ = data[5].shape[1]
        self.action_features_ = _check_action_features(action_features, self.n_actions_)
        self.continuation_, self.gamma_ = data[6] is not None, gamma
        self.history_ = FQEHistory()
        model, converged = self._run(data, gamma, groups)
        self.model_ = model
        self.converged_ = converged
        self.nodes_ = False
        self.n_iter_ = len(self.history_.bellman_residual)
        if self.tol is not None and not converged and not self.validation_fraction:
            warnings.warn(
                f"FQE did not reach tol={self.tol:g} in {self.n_iterations} iterations (last target change "
                f"{self.history_.target_change[-1]:.3g}): its Q (predict_q) is not a fixed point; raise n_iterations "
                f"or tol",
                ConvergenceWarning, stacklevel=2,
            )
        return self

    def _run(self, data, gamma, groups):
        """The FQE loop, with early stopping on a held-out split when ``validation_fraction``
        (then refit on all rows for the best number of iterations when ``refit``)."""
        if not self.validation_fraction:
            model, converged, _ = self._loop(data, gamma, self.n_iterations)
            return model, converged
        train, val = self._split(data[0].shape[0], groups)
        model, _, best = self._loop(_rows(data, train), gamma, self.n_iterations, _rows(data, val))
        self.best_iteration_ = best
        if not self.refit:
            return model, True
        self.history_ = FQEHistory(validation_residual=self.history_.validation_residual)
        model, converged, _ = self._loop(data, gamma, best)
        return model, converged

    def _split(self, n, groups):
        rng = check_random_state(self.random_state)
        groups = np.arange(n) if groups is None else np.asarray(groups)
        uniq = np.unique(groups)
        n_val = max(1, int(round(self.validation_fraction * uniq.size)))
        if n_val >= uniq.size:
            raise ValueError("validation_fraction leaves no training episodes")
        val = np.isin(groups, rng.choice(uniq, size=n_val, replace=False))
        return ~val, val

    def _loop(self, data, gamma, n_iter, val_data=None):
        states, actions, next_states, continues, reward, next_mu, next_reward, weight = data
        K = next_mu.shape[1]
        fit_kw = {} if weight is None else {"sample_weight": np.asarray(weight, dtype=np.float64)}
        model = make_q_model(self.regressor, self.encoding, K, self.warm_start, getattr(self, "action_features_", None),
                             self.action_interactions, self.block_size)
        bellman = BellmanTargets(reward, continues, next_mu, next_reward, gamma)
        targets = bellman.first()  # Q_0 = 0 (direct) or f_0 = 0 (continuation)
        best, best_loss, stall, converged = 0, np.inf, 0, False
        from tqdm.auto import tqdm

        bar = tqdm(range(n_iter), desc="FQE", disable=(None if self.progress is None else not self.progress),
                   leave=False, ncols=bar_width())
        for _ in bar:
            model.fit_q(states, actions, targets, K, **fit_kw)
            new_targets = bellman.targets(model, next_states)
            resid = bellman.q_scale(predict_at(model, states, actions) - new_targets)
            change = float(np.max(np.abs(bellman.q_scale(new_targets - targets))))
            self.history_.bellman_residual.append(float(np.sqrt(np.mean(resid ** 2))))
            self.history_.target_change.append(change)
            targets = new_targets
            if val_data is not None:
                loss = self._validation_residual(model, val_data, gamma)
                self.history_.validation_residual.append(loss)
                if loss < best_loss - 1e-12:
                    best, best_loss, stall = len(self.history_.validation_residual), loss, 0
                else:
                    stall += 1
                    if stall >= self.n_iter_no_change:
                        break
            elif self.tol is not None and change <= self.tol:
                converged = True
                break
            bar.set_postfix(change=f"{change:.2e}")
        return model, converged, max(best, 1)

    @staticmethod
    def _validation_residual(model, val_data, gamma):
        states, actions, next_states, continues, reward, next_mu, next_reward, _ = val_data
        bellman = BellmanTargets(reward, continues, next_mu, next_reward, gamma)
        resid = bellman.q_scale(predict_at(model, states, actions) - bellman.targets(model, next_states))
        return float(np.mean(resid ** 2))

    def _check_fitted(self):
        if not hasattr(self, "model_"):
            raise exceptions.NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def predict_q(self, states, actions=None, base=None) -> np.ndarray:
        """``Q(s, a)``: finite actions, for every action, shape (n, K) (continuation: with ``base
        = u(s, .) - g(s)``, shape (n, K)); continuous actions, at ``actions`` (n, m), with ``base =
        u(s, a) - g(s)`` at the same rows, shape (n,)."""
        self._check_fitted()
        if not getattr(self, "nodes_", False):
            out = self.model_.predict_q(as_float_array(states, "states", ndim=2, allow_1d_as_column=True))
            return q_from_continuation(out, base, self.gamma_) if getattr(self, "continuation_", False) else out
        out = self.predict_model(states, actions)
        return base + self.gamma_ * out if self.structure == "continuation" else out

    # ------------------------------------------------------------------ continuous actions
    def _fit_nodes(self, states, actions, next_states, continues, base, next_nodes, next_base, gamma,
                   sample_weight, next_index):
        """The iteration with ``mu``-nodes at the next states (continuous actions)."""
        gamma = check_gamma(gamma)
        if self.structure not in STRUCTURES:
            raise ValueError(f"structure must be one of {STRUCTURES}, got {self.structure!r}")
        if isinstance(self.n_iterations, bool) or int(self.n_iterations) < 1:
            raise ValueError(f"n_iterations must be at least 1, got {self.n_iterations}")
        states, actions = as_float_array(states, "states", ndim=2), as_float_array(actions, "actions", ndim=2)
        base = as_float_array(base, "base", ndim=1)
        continues = as_float_array(continues, "continues", ndim=1)
        next_states = as_float_array(next_states, "next_states", ndim=2)
        index = np.arange(states.shape[0]) if next_index is None else np.asarray(next_index, dtype=np.int64)
        if index.shape != (states.shape[0],) or next_nodes.weights.shape[0] != next_states.shape[0] \
                or np.shape(next_base) != next_nodes.weights.shape:
            raise ValueError("next_nodes and next_base need one row per next state, and next_index one entry per "
                             "transition")
        if self.regressor is None:
            from sklearn.ensemble import HistGradientBoostingRegressor

            regressor = HistGradientBoostingRegressor(max_iter=100)
        else:
            regressor = self.regressor
        if not (hasattr(regressor, "fit") and hasattr(regressor, "predict")):
            raise TypeError(f"q_model must be a regressor with fit() and predict(), got {type(regressor).__name__}")
        model, final, X, X_next = self._split_pipeline(
            clone(regressor), np.hstack([states, actions]),
            np.hstack([next_nodes.repeat_states(next_states), next_nodes.flat_actions]))
        continuation = self.structure == "continuation"
        next_base_mean = next_nodes.integrate(next_base)[index] if continuation else None
        loop = _NodesLoop(final, X, X_next, next_nodes, index, continues, base, next_base_mean, gamma, sample_weight)
        self.history_ = FQEHistory()
        converged = loop.run(self, warm_start_ok(final) if self.warm_start == "auto" else bool(self.warm_start))
        self.model_, self.gamma_, self.converged_, self.nodes_ = model, gamma, converged, True
        self.n_iter_ = len(self.history_.target_change)
        self.state_dim_, self.action_dim_ = states.shape[1], actions.shape[1]
        if self.tol is not None and not converged:
            warnings.warn(f"continuous FQE did not reach tol={self.tol:g} in {self.n_iterations} iterations (last "
                          f"target change {self.history_.target_change[-1]:.3g}): its Q (predict_q) is not a fixed "
                          f"point; raise n_iterations or tol",
                          ConvergenceWarning, stacklevel=3)
        return self

    def _split_pipeline(self, model, X, X_next):
        """(model, final estimator, features, node features): a Pipeline's transformers fitted once
        when ``freeze_transformers``; otherwise the model is its own final estimator."""
        from sklearn.pipeline import Pipeline

        if not (self.freeze_transformers and isinstance(model, Pipeline) and len(model.steps) > 1):
            return model, model, X, X_next
        final = model.steps[-1][1]
        if final is None or final == "passthrough":
            raise TypeError("q_model Pipeline must end with a regressor")
        for _, step in model.steps[:-1]:
            if step is None or step == "passthrough":
                continue
            X = step.fit_transform(X)
            X_next = step.transform(X_next)
        return model, final, X, X_next

    def predict_model(self, states, actions) -> np.ndarray:
        """Continuous actions: the regressor's output at (s, a), ``f = P mu Q`` (continuation)
        or ``Q`` (direct)."""
        self._check_fitted()
        X = np.hstack([as_float_array(states, "states", ndim=2), as_float_array(actions, "actions", ndim=2)])
        return np.asarray(self.model_.predict(X), dtype=np.float64)

    def predict_continuation(self, states, actions, base) -> np.ndarray:
        """Continuous actions: ``(P mu Q)(s, a)``, the regressor (continuation) or
        ``(Q - u + g) / gamma`` (direct)."""
        out = self.predict_model(states, actions)
        if self.structure == "continuation":
            return out
        if self.gamma_ == 0:
            return np.zeros_like(out)
        return (out - base) / self.gamma_


class _NodesLoop:
    """The Bellman iterations of :meth:`FQE._fit_nodes` on fixed features and nodes."""

    def __init__(self, final, X, X_next, nodes, index, continues, base, next_base_mean, gamma, sample_weight):
        self.final, self.X, self.X_next, self.nodes, self.index = final, X, X_next, nodes, index
        self.continues, self.base, self.next_base_mean = continues, base, next_base_mean
        self.gamma, self.sample_weight = gamma, sample_weight

    def _targets(self, pred_next):
        if self.next_base_mean is not None:  # continuation: f = P mu Q
            return self.continues * (self.next_base_mean + self.gamma * pred_next)
        return self.base + self.gamma * self.continues * pred_next

    def run(self, fqe, warm_start: bool) -> bool:
        final, history = self.final, fqe.history_
        continuation = self.next_base_mean is not None
        targets = self.continues * self.next_base_mean if continuation else self.base.copy()  # f_0 = 0 / Q_0 = 0
        for k in range(int(fqe.n_iterations)):
            fit_regressor(final, self.X, targets, self.sample_weight)
            if warm_start and k == 0:
                final.set_params(warm_start=True)
            pred_next = self.nodes.integrate(np.asarray(final.predict(self.X_next), dtype=np.float64))[self.index]
            new_targets = self._targets(pred_next)
            fitted = np.asarray(final.predict(self.X), dtype=np.float64)
            change = float(np.max(np.abs(new_targets - targets)))
            history.bellman_residual.append(float(np.sqrt(np.average((fitted - new_targets) ** 2,
                                                                      weights=self.sample_weight))))
            history.target_change.append(change)
            targets = new_targets
            if fqe.tol is not None and change <= fqe.tol:
                return True
        return False


def _rows(data, rows) -> list:
    return [None if d is None else d[rows] for d in data]


def _finite_inputs(states, actions, next_states, continues, reward, next_mu, next_reward=None,
                   continuation=False) -> tuple:
    """FQE's finite-action inputs, checked: ``(states, actions, next_states, continues, reward,
    next_mu, next_reward)`` (``next_reward`` None for the direct structure)."""
    states = as_float_array(states, "states", ndim=2)
    next_states = as_float_array(next_states, "next_states", ndim=2)
    actions = np.asarray(actions, dtype=np.int64)
    reward = as_float_array(reward, "reward", ndim=1)
    if not isinstance(next_mu, ColumnWeights):
        next_mu = as_float_array(next_mu, "next_mu", ndim=2)
    elif next_mu.shape[0] != reward.shape[0]:
        raise ValueError(f"next_mu must have one row per transition ({reward.shape[0]}), got {next_mu.shape[0]}")
    continues = as_float_array(continues, "continues", ndim=1)
    if continuation and next_reward is not None:
        next_reward = as_float_array(next_reward, "next_reward", ndim=1)
        if next_reward.shape != reward.shape:
            raise ValueError(f"next_reward must have one entry per transition, shape {reward.shape}, got "
                             f"{next_reward.shape}")
    else:
        next_reward = None
    return states, actions, next_states, continues, reward, next_mu, next_reward


def _check_action_features(action_features, n_actions):
    """``action_features`` as a finite (K, d_x) float array (None stays None)."""
    if action_features is None:
        return None
    arr = np.asarray(action_features, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != n_actions:
        raise ValueError(f"action_features must have shape (n_actions={n_actions}, d_x), got {arr.shape}")
    check_finite(arr, "action_features")
    return arr

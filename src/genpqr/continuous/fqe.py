r"""Stage 2 for continuous actions: fitted Q evaluation of ``Q = u - g + gamma P mu Q`` (paper,
Alg. "Continuous-Action GenPQR").

With ``mu``-nodes ``(a'_ij, w_ij)`` at each next state ``s'_i`` (drawn once: common random
numbers across iterations), the iteration is

    m_i^{(k-1)} = sum_j w_ij Q^{(k-1)}(s'_i, a'_ij)
    y_i         = u(s_i, a_i) - g(s_i) + gamma (1 - terminated_i) m_i^{(k-1)}
    Q^{(k)}     = regress y on (s_i, a_i)                               (``structure="direct"``)

A regressor sees the features ``[s, a]``. Because ``u - g`` is known at every (s, a) -- it is
the stage-1 output, not an unknown -- the library by default regresses only the continuation

    f = P mu Q,   Q = u - g + gamma f,
    y_i = (1 - terminated_i) sum_j w_ij [u(s'_i, a'_ij) - g(s'_i) + gamma f^{(k-1)}(s'_i, a'_ij)]

(``structure="continuation"``). Both iterate the same Bellman operator and have the same fixed
point when the regression is exact; the continuation form only asks the regressor to learn
``P mu Q`` (smooth whenever the dynamics are), not the log-density, which may be rough or
heavy-tailed. It is DeepPQR's idea of regressing only the unknown part, with ``mu Q`` in
place of the anchor value. Sample weights are passed to the regressor (for a Pipeline, to its
last step).

Stopping rule and diagnostics as :class:`genpqr.qeval.FQE`: stop when the sup change of the
targets is ``<= tol``; record the RMS sample Bellman residual per iteration.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator

from .._checks import as_float_array, check_gamma, clone_learner as clone
from ..exceptions import ConvergenceWarning, NotFittedError
from ..qeval import FQEHistory, _warm_start_ok
from ..integration import Nodes

__all__ = ["ContinuousFQE", "STRUCTURES", "fit_regressor"]

#: How the regressor enters the Q-function.
STRUCTURES = ("continuation", "direct")


def _default_regressor():
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(max_iter=100)


def fit_regressor(model, X, y, sample_weight=None):
    """``model.fit(X, y)`` with ``sample_weight`` routed to the estimator (a Pipeline's last step)."""
    if sample_weight is None:
        return model.fit(X, y)
    from sklearn.pipeline import Pipeline
    from sklearn.utils.validation import has_fit_parameter

    if isinstance(model, Pipeline):
        name, last = model.steps[-1]
        if last is not None and last != "passthrough" and has_fit_parameter(last, "sample_weight"):
            return model.fit(X, y, **{f"{name}__sample_weight": sample_weight})
    elif has_fit_parameter(model, "sample_weight"):
        return model.fit(X, y, sample_weight=sample_weight)
    if np.ptp(sample_weight) == 0:
        return model.fit(X, y)
    raise TypeError(f"q_model {type(model).__name__} does not accept sample_weight, but the data has non-uniform "
                    "sample weights")


class ContinuousFQE(BaseEstimator):
    """Fitted Q evaluation with continuous actions.

    Parameters
    ----------
    regressor : scikit-learn regressor, optional
        Fitted on ``[s, a]``. Default ``HistGradientBoostingRegressor(max_iter=100)``.
    structure : {"continuation", "direct"}
        Regress ``P mu Q`` (Q = u - g + gamma f) or Q itself (see module docstring).
    n_iterations : int
        Maximum Bellman iterations K.
    tol : float or None
        Stop when ``max_i |y_i^{(k)} - y_i^{(k-1)}| <= tol``.
    warm_start : "auto" or bool
        Continue from the previous solution where the regressor supports it.
    freeze_transformers : bool
        For a :class:`~sklearn.pipeline.Pipeline`, fit its transformers once (the regression inputs
        ``[s, a]`` and the nodes are the same every iteration, only the targets change), transform
        the inputs and the ``mu``-nodes once, and refit only the final estimator per iteration.
        Exact for transformers that ignore the targets (scalers, polynomial/spline features);
        set False for ones that use them (e.g. supervised feature selection).
    """

    def __init__(self, regressor=None, structure="continuation", n_iterations=200, tol=1e-6, warm_start="auto",
                 freeze_transformers=True):
        self.regressor = regressor
        self.structure = structure
        self.n_iterations = n_iterations
        self.tol = tol
        self.warm_start = warm_start
        self.freeze_transformers = freeze_transformers

    def fit(self, states, actions, next_states, continues, base, next_nodes: Nodes, next_base, gamma,
            sample_weight=None, next_index=None):
        """Run the iteration.

        Parameters
        ----------
        states, next_states : ndarray of shape (n, d)
        actions : ndarray of shape (n, m)
        continues : ndarray of shape (n,)
            ``1 - terminated``.
        base : ndarray of shape (n,)
            ``u(s_i, a_i) - g(s_i)``.
        next_nodes : Nodes
            ``mu``-nodes at the next states: actions (n', J, m), weights (n', J).
        next_base : ndarray of shape (n', J)
            ``u(s'_i, a'_ij) - g(s'_i)`` (used by the continuation structure).
        gamma : float
        sample_weight : ndarray of shape (n,), optional
        next_index : ndarray of shape (n,), optional
            Row ``i``'s next state is ``next_states[next_index[i]]`` (``next_states`` then holds
            the n' distinct next states, e.g. with deterministic quadrature nodes). Default:
            ``n' = n``, row-aligned.
        """
        gamma = check_gamma(gamma)
        if self.structure not in STRUCTURES:
            raise ValueError(f"structure must be one of {STRUCTURES}, got {self.structure!r}")
        if isinstance(self.n_iterations, bool) or int(self.n_iterations) < 1:
            raise ValueError(f"n_iterations must be at least 1, got {self.n_iterations}")
        states = as_float_array(states, "states", ndim=2)
        actions = as_float_array(actions, "actions", ndim=2)
        base = as_float_array(base, "base", ndim=1)
        continues = as_float_array(continues, "continues", ndim=1)
        n = states.shape[0]
        next_states = as_float_array(next_states, "next_states", ndim=2)
        index = np.arange(n) if next_index is None else np.asarray(next_index, dtype=np.int64)
        if index.shape != (n,) or next_nodes.weights.shape[0] != next_states.shape[0] \
                or np.shape(next_base) != next_nodes.weights.shape:
            raise ValueError("next_nodes and next_base need one row per next state, and next_index one entry per "
                             "transition")
        regressor = self.regressor if self.regressor is not None else _default_regressor()
        if not (hasattr(regressor, "fit") and hasattr(regressor, "predict")):
            raise TypeError(f"q_model must be a regressor with fit() and predict(), got {type(regressor).__name__}")
        model = clone(regressor)
        X = np.hstack([states, actions])
        X_next = np.hstack([next_nodes.repeat_states(next_states), next_nodes.flat_actions])
        model, final, X, X_next = self._split_pipeline(model, X, X_next)
        ws = _warm_start_ok(final) if self.warm_start == "auto" else bool(self.warm_start)
        bootstrap = gamma * continues
        continuation = self.structure == "continuation"
        next_base_mean = next_nodes.integrate(next_base)[index] if continuation else None
        targets = continues * next_base_mean if continuation else base.copy()  # f_0 = 0 / Q_0 = 0
        self.history_ = FQEHistory()
        converged = False
        for k in range(int(self.n_iterations)):
            fit_regressor(final, X, targets, sample_weight)
            if ws and k == 0:
                final.set_params(warm_start=True)
            pred_next = next_nodes.integrate(np.asarray(final.predict(X_next), dtype=np.float64))[index]
            if continuation:
                new_targets = continues * (next_base_mean + gamma * pred_next)
            else:
                new_targets = base + bootstrap * pred_next
            fitted = np.asarray(final.predict(X), dtype=np.float64)
            change = float(np.max(np.abs(new_targets - targets)))
            self.history_.bellman_residual.append(float(np.sqrt(np.average((fitted - new_targets) ** 2,
                                                                           weights=sample_weight))))
            self.history_.target_change.append(change)
            targets = new_targets
            if self.tol is not None and change <= self.tol:
                converged = True
                break
        self.model_ = model
        self.gamma_ = gamma
        self.converged_ = converged
        self.n_iter_ = len(self.history_.target_change)
        self.state_dim_, self.action_dim_ = states.shape[1], actions.shape[1]
        if self.tol is not None and not converged:
            warnings.warn(f"continuous FQE did not reach tol={self.tol:g} in {self.n_iterations} iterations (last "
                          f"target change {self.history_.target_change[-1]:.3g}); raise n_iterations or tol",
                          ConvergenceWarning, stacklevel=2)
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
        """The regressor's output at (s, a): ``f = P mu Q`` (continuation) or ``Q`` (direct)."""
        if not hasattr(self, "model_"):
            raise NotFittedError("this ContinuousFQE is not fitted yet; call fit first")
        X = np.hstack([as_float_array(states, "states", ndim=2), as_float_array(actions, "actions", ndim=2)])
        return np.asarray(self.model_.predict(X), dtype=np.float64)

    def predict_q(self, states, actions, base) -> np.ndarray:
        """``Q(s, a)``; ``base = u(s, a) - g(s)`` at the same rows (used by the continuation form)."""
        out = self.predict_model(states, actions)
        return base + self.gamma_ * out if self.structure == "continuation" else out

    def predict_continuation(self, states, actions, base) -> np.ndarray:
        """``(P mu Q)(s, a)``: the regressor (continuation) or ``(Q - u + g) / gamma`` (direct)."""
        out = self.predict_model(states, actions)
        if self.structure == "continuation":
            return out
        if self.gamma_ == 0:
            return np.zeros_like(out)
        return (out - base) / self.gamma_

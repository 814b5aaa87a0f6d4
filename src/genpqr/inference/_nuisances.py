"""The nuisances of :func:`genpqr.inference.infer` from a GenPQR template: the full-sample fit,
the per-fold refits (with the full fit's data-driven choices held fixed), and the law of the
data they give (``TabularLaw`` on the exact tabular path)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..data import Transitions
from ..data._validation import clone_learner as clone
from ..exceptions import GenPQRWarning
from ..stage2._kernels import KernelOperator, TransitionKernel
from . import _algebra as alg
from ._context import Context

__all__ = []

#: Pseudo-count added to each state's rows when the state law of a training fold divides
#: (cross-fitting: a held-out state may be rare in the other folds; debiased-inference notes Sec. 9.4).
STATE_PRIOR = 0.5


def check_inputs(model, data) -> None:
    """``TypeError``/``ValueError`` naming the argument, before any fit."""
    if not (hasattr(model, "fit") and hasattr(model, "get_params") and hasattr(model, "normalization")):
        raise TypeError(f"model must be a genpqr.GenPQR (fitted or not), got {type(model).__name__}")
    if not isinstance(data, Transitions):
        raise TypeError(f"data must be genpqr.data.Transitions (build it with genpqr.from_arrays / from_pandas / "
                        f"from_episodes), got {type(data).__name__}")
    if not data.is_finite:
        raise ValueError(f"inference needs finite actions; the data has continuous actions in "
                         f"{data.action_space.describe()}")
    if data.sample_weight is not None and not np.all(data.sample_weight == 1):
        raise ValueError("data carries row weights (sample_weight): the influence-function variance here is for "
                         "unweighted rows")
    if getattr(model, "n_types", 1) != 1:
        raise ValueError(f"model has n_types={model.n_types} latent types: inference is for one type (fit one "
                         f"GenPQR per type's rows, or n_types=1)")


def fitted_on(model, data):
    """The full-sample fit: ``model`` itself when it was fitted on ``data`` (same content),
    else a clone fitted on ``data`` (its warnings are the fit's, shown once)."""
    same = getattr(model, "data_fingerprint_", None) == data.fingerprint() and hasattr(model, "stage2_")
    if same:
        return model
    return refit_copy(model).fit(data)


def refit_copy(model):
    """An unfitted copy; a prefit policy model is kept as it is (cloning would drop its fit)."""
    copy_ = clone(model)
    if getattr(model, "policy_prefit", False):
        copy_.set_params(policy_model=model.policy_model)
    return copy_


def fold_template(full):
    """The estimator each fold refits: ``full``'s settings with its data-driven choices held
    (the first stage chosen by the tabular rule, with its cross-validated settings; the transition
    model chosen by ``"auto"``; the number of states), so that folds do not choose again."""
    template = refit_copy(full).set_params(progress=False)
    exact = isinstance(full.q_model, str) and full.q_model == "exact"
    if exact:
        template.set_params(n_states=int(full.n_states_), cross_fit=None)  # exact path: cross_fit is diagnostics only
    if full.policy_model is None and not full.policy_prefit:
        template.set_params(policy_model=clone(full.policy_.models[0]))
    if isinstance(full.transition_model, str) and getattr(full, "transition_selection_", None) is not None:
        chosen = full.transition_model_
        template.set_params(transition_model="counts" if chosen is None else chosen.fixed_copy())
    if exact and kernel_is_given(full):  # the full fit's validated kernel: the folds' laws hold the plug-in's object
        template.set_params(transition_model=full.stage2_.kernel)
    return template


def fit_quietly(template, data):
    """Fit a fold: the full-sample fit already raised the fit's warnings and reported its
    diagnostics (a fold's fit skips them, ``genpqr.estimator._estimator_finite.lean_fits``: the
    same stages, without the fit's per-call extras)."""
    from ..estimator._estimator_finite import lean_fits

    with warnings.catch_warnings(), lean_fits():
        warnings.simplefilter("ignore", GenPQRWarning)
        return clone_for_fold(template).fit(data)


def clone_for_fold(template):
    """An unfitted copy of the fold template; a given kernel (``fold_template``: the full fit's) is
    shared, not deep-copied (a fit reads its kernel, never writes it)."""
    kernel = template.transition_model
    if not isinstance(kernel, (TransitionKernel, KernelOperator)):
        return refit_copy(template)
    template.transition_model = None  # the attribute itself: set_params walks the policy model's parameters
    try:
        copy_ = refit_copy(template)
    finally:
        template.transition_model = kernel
    copy_.transition_model = kernel
    return copy_


def kernel_is_given(model) -> bool:
    """Whether the exact path's kernel was given (an array or kernel: not estimated from the moves
    by counts, ``"auto"``, a transition model or a callable)."""
    from ..stage2._transition_spec import is_estimated_spec

    spec = getattr(model, "transition_model", None)
    return not (is_estimated_spec(spec) or callable(spec) or hasattr(spec, "fit") or hasattr(spec, "predict_proba"))


def is_exact(model) -> bool:
    return isinstance(model.q_model, str) and model.q_model == "exact"


def context_of(model, data) -> Context:
    """The :class:`Context` targets are checked against, from the estimator's settings and the
    data (before any fit: a refused target costs nothing)."""
    from ..data._validation import check_gamma
    from ..normalization import mean_zero

    encoder = data.encoder
    norm = model.normalization if model.normalization is not None else mean_zero()
    exact = is_exact(model)
    n_states = visited = None
    if exact:
        if data.state_dim != 1:
            raise ValueError(f"q_model='exact' needs tabular states (one index column), got {data.state_dim} columns")
        nxt = data.next_states[data.next_observed, 0]
        n_states = int(model.n_states) if model.n_states is not None else int(max(data.states.max(), nxt.max(
            initial=0))) + 1
        visited = np.bincount(data.states[:, 0].astype(np.int64), minlength=n_states) > 0
    return Context(int(data.n_actions), check_gamma(model.gamma), np.asarray(encoder.labels), encoder.encode,
                   data.action_counts() > 0, norm.bind(encoder.encode), n_states, visited)


@dataclass(frozen=True)
class Rows:
    """The rows of the data as the influence function reads them."""

    s: np.ndarray
    a: np.ndarray
    s_next: np.ndarray
    cont: np.ndarray
    has_next: np.ndarray
    episodes: np.ndarray

    @classmethod
    def of(cls, data: Transitions, tabular: bool) -> "Rows":
        has_next = np.asarray(data.next_observed, dtype=bool)
        cont = np.where(has_next, 1.0 - np.asarray(data.terminated, dtype=np.float64), 0.0)
        if tabular:
            s = data.states[:, 0].astype(np.int64)
            nxt = np.where(cont > 0, np.nan_to_num(data.next_states[:, 0]), 0).astype(np.int64)
        else:
            s, nxt = data.states, np.nan_to_num(data.next_states)
        return cls(s, np.asarray(data.actions, dtype=np.int64), nxt, cont, has_next, np.asarray(data.episode_ids))

    def take(self, index) -> "Rows":
        return Rows(self.s[index], self.a[index], self.s_next[index], self.cont[index], self.has_next[index],
                    self.episodes[index])


def tabular_law(fitted, rows: Rows, prior: float, cells: bool = False, features=None,
                states=None) -> alg.TabularLaw:
    """The law of the data at an exact-path fit: its clipped ``pi_hat`` (the ``u`` it solved
    with), kernel and normalization, and the state law of ``states`` (default: those of ``rows``;
    ``prior`` pseudo-rows per state); ``observed``: the share of a cell's rows with a next state (1
    when all have one). Cross-fitted, the state law is the whole sample's: it is a function of the
    states alone, so a held-out row's own state in it leaves every term the representers multiply
    (the policy score given the state, the Bellman residuals given the state and action) with the
    same conditional mean; and no held-out row then sits on a state its fold never saw."""
    rec = fitted.stage2_.recovery
    S, K = rec.log_policy.shape
    counts = np.bincount(rows.s, minlength=S).astype(np.float64)
    if states is None:
        rho = (counts + prior) / (counts.sum() + prior * S)
    else:
        rho = np.bincount(states, minlength=S).astype(np.float64)
        rho /= rho.sum()
    policy = np.exp(rec.log_policy)
    policy /= policy.sum(axis=1, keepdims=True)
    observed = None
    if not np.all(rows.has_next):
        cell = rows.s * K + rows.a
        n = np.bincount(cell, minlength=S * K)
        n_next = np.bincount(cell[rows.has_next], minlength=S * K)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = (n_next + prior) / (n + prior)
        observed = np.where(n > 0, share, 1.0).reshape(S, K)
    cell_law = None
    if cells:  # the saturated Riesz regression: cell frequencies, the prior spread by pi_hat
        n_cells = np.bincount(rows.s * K + rows.a, minlength=S * K).reshape(S, K)
        cell_law = (n_cells + prior * policy) / (counts.sum() + prior * S)
    project = None
    if features is not None:  # Riesz regression on a sieve of state features (large state spaces)
        grid = np.arange(S, dtype=np.float64)[:, None]
        fmap = clone(features).fit(rows.s[:, None].astype(np.float64))
        psi = np.column_stack([np.ones(S), np.asarray(fmap.transform(grid), dtype=np.float64)])
        cell = rows.s * K + rows.a
        freq = np.bincount(cell, minlength=S * K).reshape(S, K) / max(len(cell), 1)
        half = np.random.default_rng(0).permutation(len(cell)) % 2 == 0
        halves = [np.bincount(cell[h], minlength=S * K).reshape(S, K) / max(h.sum(), 1) for h in (half, ~half)]
        project = alg.SieveProjector(psi, freq, ridge=None, halves=halves)
    return alg.TabularLaw(rho, policy, fitted.stage2_.kernel, float(fitted.gamma_), rec.mu, rec.g, observed, cell_law,
                          project)

"""Stage-1 bookkeeping for continuous actions: fit (or take prefit) a conditional density,
optionally cross-fitted by episode, behind one :class:`FittedDensity`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from .._checks import check_random_state, clone_learner as clone
from .data import ActionSpace, ContinuousTransitions
from ..densities import check_density

__all__ = ["FittedDensity", "fit_density", "prefit_density"]


@dataclass
class FittedDensity:
    """One fitted density, or one per cross-fitting fold (their equal-weight mixture away from
    the training rows; out-of-fold at the training rows).

    Attributes
    ----------
    models : list
    fold_of_row : ndarray of shape (n,) or None
    support_ : ActionSpace
    """

    models: list
    fold_of_row: np.ndarray | None
    support_: ActionSpace

    @property
    def reference_measure(self) -> str:
        return self.support_.reference_measure()

    def log_prob(self, states, actions) -> np.ndarray:
        if len(self.models) == 1:
            return np.asarray(self.models[0].log_prob(states, actions), dtype=np.float64)
        parts = np.stack([np.asarray(m.log_prob(states, actions), dtype=np.float64) for m in self.models])
        return logsumexp(parts, axis=0) - np.log(len(self.models))

    def training_log_prob(self, states, actions, rows) -> np.ndarray:
        """``log p(a|s)`` where row ``k`` of (states, actions) belongs to training row ``rows[k]``:
        scored by the model that did not see that row's episode when cross-fitted."""
        if self.fold_of_row is None:
            return self.log_prob(states, actions)
        folds = self.fold_of_row[np.asarray(rows)]
        out = np.empty(folds.shape[0])
        for k, model in enumerate(self.models):
            sel = folds == k
            if sel.any():
                out[sel] = model.log_prob(states[sel], actions[sel])
        return out

    def sample(self, states, n_samples=1, random_state=None) -> np.ndarray:
        rng = check_random_state(random_state)
        if len(self.models) == 1:
            return self.models[0].sample(states, n_samples, random_state=rng)
        draws = np.stack([m.sample(states, n_samples, random_state=rng) for m in self.models])  # (K, n, J, m)
        pick = rng.integers(0, len(self.models), size=draws.shape[1:3])
        return np.take_along_axis(draws, pick[None, :, :, None], axis=0)[0]

    def gaussian_mixture(self, states):
        if not all(hasattr(m, "gaussian_mixture") for m in self.models):
            raise NotImplementedError(f"{type(self.models[0]).__name__} is not a Gaussian mixture")
        parts = [m.gaussian_mixture(states) for m in self.models]
        if len(parts) == 1:
            return parts[0]
        log_w = np.concatenate([p[0] - logsumexp(p[0], axis=1, keepdims=True) for p in parts], axis=1)
        return log_w - np.log(len(parts)), np.concatenate([p[1] for p in parts], 1), np.concatenate([p[2] for p in parts], 1)


def _support(model, data: ContinuousTransitions) -> ActionSpace:
    support = getattr(model, "support_", None)
    if support is None:
        return ActionSpace.create(data.action_dim)
    if not isinstance(support, ActionSpace):
        raise TypeError(f"policy_model.support_ must be a genpqr.continuous.ActionSpace, got {type(support).__name__}")
    return support


def fit_density(model, data: ContinuousTransitions, *, cross_fit: int | None = None, random_state=None) -> FittedDensity:
    """Fit clones of ``model`` on ``(states, actions)`` (one per episode fold with ``cross_fit``)."""
    check_density(model)
    w = data.sample_weight
    if cross_fit is None:
        fitted = clone(model).fit(data.states, data.actions, sample_weight=w)
        return FittedDensity([fitted], None, _support(fitted, data))
    models, fold_of_row = [], np.empty(data.n, dtype=np.int64)
    for k, (train, test) in enumerate(data.episode_folds(int(cross_fit), random_state=random_state)):
        models.append(clone(model).fit(data.states[train], data.actions[train],
                                       sample_weight=None if w is None else w[train]))
        fold_of_row[test] = k
    return FittedDensity(models, fold_of_row, _support(models[0], data))


def prefit_density(model, data: ContinuousTransitions) -> FittedDensity:
    """Use an already fitted density as is (not cloned, not refitted)."""
    check_density(model)
    model.log_prob(data.states[:1], data.actions[:1])  # raises if the model is not fitted
    return FittedDensity([model], None, _support(model, data))

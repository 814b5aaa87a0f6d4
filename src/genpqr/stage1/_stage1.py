r"""The one stage-1 interface of :class:`genpqr.GenPQR` (paper, Alg. 1): a fitted behaviour
model that gives ``u(s, a) = log dpi/dlambda (a|s)``.

* finite actions: a classifier, ``u = log pi_hat(a|s)`` of clipped, renormalized probabilities
  (``genpqr.stage1._policy.FittedPolicy``);
* continuous actions: a conditional density, ``u = log p_hat(a|s) - log dlambda/dLebesgue (a)``
  clipped below at ``min_log_density`` (``genpqr.stage1._policy.FittedDensity``).

Both are a ``FittedStage1``: ``log_policy(states, actions)`` (the fitted model, averaged over
the cross-fitting folds), ``training_log_policy(states, actions, rows)`` (out of fold at the
training rows when cross-fitted) and ``fraction_clipped``; both are cross-fitted by episode
with ``cross_fit_models``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data._progress import BAR_WIDTH, bar_width as _bar_width  # the bars' width (every wing's)

__all__ = ["FittedStage1", "cross_fit_models", "PROGRESS_DELAY", "progress_bar", "forward_progress"]

#: Seconds a stage-1 step (the folds, a conditional logit's optimizer, a two tower's epochs) runs
#: before its progress bar appears: quick fits print nothing.
PROGRESS_DELAY = 2.0


def _tqdm():
    """``tqdm.auto.tqdm``, imported when a bar may show; the module attribute ``tqdm`` (read
    through the module's ``__getattr__``, replaceable like any attribute) once imported."""
    bar = globals().get("tqdm")
    if bar is None:
        from tqdm.auto import tqdm as bar

        globals()["tqdm"] = bar
    return bar


def __getattr__(name: str):
    if name == "tqdm":
        return _tqdm()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def progress_bar(progress, *, total=None, iterable=None, desc: str, unit: str = "it"):
    """The tqdm bar of a step on stderr, by the estimator's convention: ``progress`` True shows
    it, False never, None only on a terminal; it appears once the step has run
    :data:`PROGRESS_DELAY` seconds, is at most ``BAR_WIDTH`` (100) columns wide (fewer on a narrower
    terminal) and is removed when done."""
    if progress is False:  # never shown: no tqdm (its lock imports multiprocessing)
        from ..data._progress import SilentBar

        return SilentBar(iterable, total=total, desc=desc)
    return _tqdm()(iterable, total=total, desc=desc, unit=unit, leave=False, delay=PROGRESS_DELAY, ncols=_bar_width(),
                disable=None if progress is None else not progress)


def forward_progress(model, progress):
    """A model with a ``progress`` parameter of its own left at None (its bar shown only on a
    terminal; :class:`genpqr.stage1.ConditionalLogit`, ``genpqr.models.TwoTowerClassifier``) gets
    the fit's ``progress`` (a clone): ``GenPQR(progress=False)`` silences it."""
    params = model.get_params(deep=False) if hasattr(model, "get_params") else {}
    if progress is None or "progress" not in params or params["progress"] is not None:
        return model
    from ..data._validation import clone_learner

    return clone_learner(model).set_params(progress=progress)


@dataclass
class FittedStage1:
    """A fitted stage 1: one model, or one per cross-fitting fold.

    Attributes
    ----------
    models : list
        One fitted model, or one per cross-fitting fold.
    fold_of_row : ndarray of shape (n,) or None
        The fold each training row was held out in (cross-fitting only).
    """

    models: list
    fold_of_row: np.ndarray | None

    @property
    def cross_fitted(self) -> bool:
        return self.fold_of_row is not None

    def log_policy(self, states, actions=None, *, return_clipped: bool = False):
        """``u(s, a)`` at ``actions`` (n,) (finite actions: codes; None gives every action, (n, K));
        with ``return_clipped`` also the mask of entries at a clip bound."""
        raise NotImplementedError

    def training_log_policy(self, states, actions=None, rows=None, *, return_clipped: bool = False):
        """:meth:`log_policy` where row ``k`` of ``states`` belongs to training row ``rows[k]``
        (None: every training row, in order): out of fold when cross-fitted."""
        raise NotImplementedError

    def fraction_clipped(self, states, actions, rows=None, weights=None) -> float:
        """(Weighted) share of the rows whose ``u`` at the observed action hit a clip bound, out
        of fold at the training rows ``rows``."""
        _, clipped = self.training_log_policy(states, actions, rows, return_clipped=True)
        return float(np.average(clipped, weights=weights))

    def _training_folds(self, n_rows: int, rows) -> np.ndarray:
        folds = self.fold_of_row if rows is None else self.fold_of_row[np.asarray(rows)]
        if folds.shape[0] != n_rows:
            raise ValueError(f"states has {n_rows} rows but the policy was cross-fitted on {folds.shape[0]}; "
                             "out-of-fold values need rows aligned with the training transitions")
        return folds

    def _by_fold(self, folds: np.ndarray, score, width: tuple = ()) -> np.ndarray:
        """``score(k, mask)`` of fold ``k``'s model at the rows held out in fold ``k``, assembled."""
        out = np.empty((folds.shape[0],) + width)
        for k in range(len(self.models)):
            sel = folds == k
            if sel.any():
                out[sel] = score(k, sel)
        return out


def cross_fit_models(data, cross_fit: int, fit_fold, *, random_state=None, progress: bool | None = False,
                     desc: str = "policy folds"):
    """Fit one model per episode fold: ``fit_fold(k, train_rows)`` for each of ``cross_fit``
    folds of ``data.episode_folds`` (a tqdm bar with ``progress``, shown once the folds have taken 2
    seconds; None: only on a terminal).
    Returns ``(models, fold_of_row)``."""
    folds = data.episode_folds(int(cross_fit), random_state=random_state)
    models, fold_of_row = [], np.empty(data.n, dtype=np.int64)
    bar = progress_bar(progress, iterable=folds, desc=desc, unit="fold")
    for k, (train, test) in enumerate(bar):
        models.append(fit_fold(k, train))
        fold_of_row[test] = k
    return models, fold_of_row

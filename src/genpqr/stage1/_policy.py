r"""Stage 1: the behaviour policy ``pi(a|s)`` and ``u(s, a) = log pi(a|s)`` (paper, Alg. 1).

Any classifier with ``fit(X, y)`` and ``predict_proba`` works. Probabilities are checked
(finite, in [0, 1], rows summing to one), mapped onto all ``K`` action codes (a class the
classifier never saw gets probability 0 before clipping), clipped to ``[low, high]`` and
renormalized (the paper clips to [0.01, 0.99]; Ionides 2008). ``clip="auto"`` (the default
of :class:`~genpqr.GenPQR`) chooses the bounds from the fitted probabilities so that they
bind on no observed action, or no clip at all (:mod:`genpqr.stage1`). Cross-fitting by
episode gives out-of-fold probabilities at the training rows and their next states.

Continuous actions (a box, :class:`~genpqr.data.BoxActions`): the same stage with a
conditional density (:mod:`genpqr.actions`) in place of the classifier, behind
``FittedDensity`` (``fit_density``, ``prefit_density``): ``log_prob(s, a)``
and, when cross-fitted, ``training_log_prob`` out of fold at the training rows.

Both are a ``genpqr.stage1._stage1.FittedStage1`` (one interface: ``log_policy(states, actions)
-> u``, ``training_log_policy``, ``fraction_clipped``), cross-fitted by the same helper and
fitted through ``fit_stage1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from ..data._estimator_base import LightClassifierMixin, LightEstimator, check_classification_targets, check_is_fitted
from ..data._validation import as_float_array, check_random_state, check_state_indices, clone_learner as clone, plain
from ._clipping import PAPER_CLIP, check_bounds, resolve_policy_clip
from ..data import BoxActions, Transitions
from ._conditional_logit import bind_action_features, check_feature_dim
from ..actions._densities import check_density
from ._stage1 import FittedStage1, cross_fit_models, forward_progress
from ._cells import RowTable, repeated_rows
from ..data._weights import fit_weighted
from ..messages import Mention, Message

__all__ = ["FittedStage1", "FittedDensity", "fit_density", "prefit_density", "clip_proba", "clip_log_proba",
           "FrequencyClassifier", "FREQUENCY_CHECK_EXCLUSIONS", "FittedPolicy", "fit_policy", "prefit_policy",
           "fit_stage1", "check_classifier", "check_clip", "is_auto", "DEFAULT_CLIP"]

#: The paper's clip: the default of the paper's baselines (GenPQR's default is ``"auto"``).
DEFAULT_CLIP = PAPER_CLIP


def check_clip(clip) -> tuple[float, float]:
    """Probability clip bounds ``(low, high)`` (None: ``(0, 1)``), checked."""
    return check_bounds(clip)


def is_auto(clip) -> bool:
    """Whether ``clip`` asks for the data-aware rule (``"auto"``)."""
    return isinstance(clip, str) and clip.strip().lower() == "auto"


def clip_proba(proba: np.ndarray, clip=DEFAULT_CLIP) -> tuple[np.ndarray, np.ndarray]:
    """Clip probabilities (n, K) to ``[low, high]`` and renormalize each row.

    Returns
    -------
    proba : ndarray of shape (n, K)
    clipped : ndarray of bool, shape (n, K)
        Entries that hit a bound.
    """
    low, high = check_clip(clip)
    clipped = (proba < low) | (proba > high)
    p = np.clip(proba, low, high)
    p = p / p.sum(axis=1, keepdims=True)
    return p, clipped


def clip_log_proba(proba: np.ndarray, clip=DEFAULT_CLIP) -> np.ndarray:
    """``log`` of ``clip_proba`` (a finite, normalized log-policy)."""
    p, _ = clip_proba(proba, clip)
    if not np.all(p > 0):
        raise ValueError("probabilities of 0 remain after clipping; use a positive lower clip bound")
    return np.log(p)


def check_classifier(model, name: str = "policy_model"):
    """A classifier usable for stage 1 (has ``fit`` and ``predict_proba``)."""
    if isinstance(model, type):
        raise TypeError(f"{name} must be a classifier instance, got the class {model.__name__}; instantiate it")
    if not hasattr(model, "fit") or not hasattr(model, "predict_proba"):
        raise TypeError(
            f"{name} must be a probabilistic classifier with fit() and predict_proba(), got "
            f"{type(model).__name__} (for SVC pass probability=True)"
        )
    return model


class FrequencyClassifier(LightClassifierMixin, LightEstimator):
    """Empirical action frequencies per tabular state (the tabular MLE of ``pi``).

    Parameters
    ----------
    n_states : int, optional
        Number of states (default: max observed index + 1).
    smoothing : float
        Additive (Laplace) count added to every action at every state.

    Notes
    -----
    ``X``: states as integer indices, shape (n,) or (n, 1); ``y``: at least two classes (one
    class is refused: there is no choice to estimate). States never visited (no data, whatever
    the smoothing) get the marginal action frequencies of the data. ``predict`` /
    ``predict_proba`` before ``fit`` raise scikit-learn's ``NotFittedError``.

    scikit-learn's ``check_estimator`` passes except for ``FREQUENCY_CHECK_EXCLUSIONS``:
    checks that feed continuous multi-column features (``X`` of shape (n, d > 1) drawn from a
    normal distribution) to a classifier whose input is, by definition, one column of state
    indices; each is refused with the message naming the expected input (tested in
    tests/stage2/test_model_selection.py).
    """

    def __init__(self, n_states: int | None = None, smoothing: float = 0.0):
        self.n_states = n_states
        self.smoothing = smoothing

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True  # state indices
        return tags

    def fit(self, X, y, sample_weight=None):
        """Cell frequencies from ``X`` (state indices) and ``y`` (actions); returns self."""
        if not self.smoothing >= 0:
            raise ValueError(f"smoothing must be a non-negative count, got {self.smoothing!r}")
        s_raw = _check_index_input(X, "X")
        if y is None:
            raise ValueError("FrequencyClassifier requires y to be passed, but the target y is None")
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        if self.classes_.size < 2:
            raise ValueError(f"y has only one class ({plain(self.classes_[0])!r}); FrequencyClassifier needs at least 2 "
                             "classes (actions): with one action there is no choice to estimate")
        n_states = self.n_states if self.n_states is not None else int(np.max(s_raw)) + 1
        s = check_state_indices(s_raw, n_states, "X")
        if s.size != y.size:
            raise ValueError(f"X has {s.size} rows but y has {y.size}")
        K = self.classes_.size
        w = np.ones(s.size) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        if w.shape != (s.size,):
            raise ValueError(f"sample_weight must have shape ({s.size},), got {w.shape}")
        if not np.any(w > 0):
            raise ValueError("sample_weight is zero for every row: no choice to count")
        raw = np.bincount(s * K + codes.ravel(), weights=w, minlength=n_states * K).reshape(n_states, K)
        visited = raw.sum(axis=1, keepdims=True) > 0  # by the data, not by the smoothing
        marginal = raw.sum(axis=0) / raw.sum()
        counts = raw + self.smoothing
        totals = counts.sum(axis=1, keepdims=True)
        self.counts_ = counts
        self.table_ = np.where(visited, counts / np.where(totals > 0, totals, 1.0), marginal)
        self.n_states_ = n_states
        self.n_features_in_ = 1
        return self

    def predict_proba(self, X):
        """``pi_hat(.|s)`` at state indices ``X``, shape (n, n_classes)."""
        check_is_fitted(self, "table_")
        return self.table_[check_state_indices(_check_index_input(X, "X"), self.n_states_, "X")]

    def predict(self, X):
        """The most frequent action at each state of ``X``, shape (n,)."""
        proba = self.predict_proba(X)  # first: NotFittedError before any fitted attribute is read
        return self.classes_[np.argmax(proba, axis=1)]


#: ``check_estimator`` checks :class:`FrequencyClassifier` is expected to fail, with the reason:
#: they fit on continuous features with several columns, outside its domain (state indices).
FREQUENCY_CHECK_EXCLUSIONS = {name: "feeds continuous multi-column X; the input is one column of state indices"
                              for name in (
    "check_dont_overwrite_parameters", "check_estimators_fit_returns_self", "check_readonly_memmap_input",
    "check_n_features_in_after_fitting", "check_estimators_dtypes", "check_sample_weights_pandas_series",
    "check_sample_weights_not_an_array", "check_sample_weights_list", "check_all_zero_sample_weights_error",
    "check_sample_weights_shape", "check_sample_weights_not_overwritten",
    "check_sample_weight_equivalence_on_dense_data", "check_dtype_object", "check_pipeline_consistency",
    "check_estimators_nan_inf", "check_estimators_pickle", "check_f_contiguous_array_estimator",
    "check_classifier_data_not_an_array", "check_classifiers_classes", "check_classifiers_train",
    "check_supervised_y_2d", "check_methods_sample_order_invariance", "check_methods_subset_invariance",
    "check_fit2d_1feature", "check_fit_score_takes_y", "check_estimators_overwrite_params", "check_dict_unchanged", "check_fit_idempotent",
    "check_fit_check_is_fitted", "check_n_features_in", "check_fit2d_predict1d",
    "check_classifiers_one_label_sample_weights",
)}


def _check_index_input(X, name: str) -> np.ndarray:
    """``X`` as an array for :func:`check_state_indices`: refuses sparse, empty and complex input by name."""
    import scipy.sparse as sp

    if sp.issparse(X):
        raise TypeError(f"{name}: sparse input is not supported (FrequencyClassifier needs one column of state "
                        "indices); pass a dense array")
    arr = np.asarray(X)
    if arr.ndim == 2 and arr.shape[1] == 0:
        raise ValueError(f"{name} has 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required.")
    if arr.size == 0:
        raise ValueError(f"{name} has 0 sample(s) (shape={arr.shape}) while a minimum of 1 is required.")
    if np.iscomplexobj(arr):
        raise ValueError(f"{name}: Complex data not supported; state indices are integers")
    if arr.dtype.kind in "iuf" and np.any(arr < 0):
        raise ValueError(f"{name}: Negative values in data passed to FrequencyClassifier (state indices are >= 0)")
    return arr


def _proba_on_codes(model, X: np.ndarray, n_actions: int, name: str) -> np.ndarray:
    """``predict_proba`` mapped onto codes 0..K-1 with sanity checks (named messages); asked once
    per distinct state when the states repeat (tabular states), then spread over the rows."""
    repeated = repeated_rows(X)
    if repeated is not None:
        return _distinct_proba_on_codes(model, repeated[0], n_actions, name)[repeated[1]]
    return _distinct_proba_on_codes(model, X, n_actions, name)


def _distinct_proba_on_codes(model, X: np.ndarray, n_actions: int, name: str) -> np.ndarray:
    raw = np.asarray(model.predict_proba(X), dtype=np.float64)
    if raw.ndim != 2:
        raise ValueError(f"{name}.predict_proba returned shape {raw.shape}, expected a 2-D (n_samples, n_classes) array")
    classes = np.asarray(getattr(model, "classes_", np.arange(raw.shape[1])))
    if raw.shape != (X.shape[0], classes.size):
        raise ValueError(f"{name}.predict_proba returned shape {raw.shape}, expected ({X.shape[0]}, {classes.size})")
    if not np.all(np.isfinite(raw)):
        raise ValueError(f"{name}.predict_proba returned NaN/inf")
    if raw.min() < -1e-9 or raw.max() > 1 + 1e-9:
        raise ValueError(f"{name}.predict_proba returned values outside [0, 1] (are these labels or scores?)")
    if not np.allclose(raw.sum(axis=1), 1.0, atol=1e-6):
        raise ValueError(f"{name}.predict_proba rows do not sum to 1")
    if classes.size == n_actions and np.array_equal(classes, np.arange(n_actions)):
        return raw
    proba = np.zeros((X.shape[0], n_actions))
    proba[:, classes.astype(np.int64)] = raw
    return proba


@dataclass
class FittedPolicy(FittedStage1):
    """Stage-1 result for finite actions: fitted classifier(s), clipping, and out-of-fold
    bookkeeping; ``u = log pi_hat`` of the clipped, renormalized probabilities.

    Attributes
    ----------
    models, fold_of_row
        The fitted classifier(s) and folds (``genpqr.stage1._stage1.FittedStage1``).
    n_actions : int
    clip : (low, high)
    clip_rule : str
        How ``clip`` was chosen (``"auto: ..."`` for the data-aware rule, else "given").
    """

    n_actions: int
    clip: tuple[float, float]
    clip_rule: str = "given"

    def raw_proba(self, states: np.ndarray, fold: int | None = None) -> np.ndarray:
        """Unclipped probabilities (n, K); averaged over fold models unless ``fold`` given."""
        X = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
        if fold is not None:
            return _proba_on_codes(self.models[fold], X, self.n_actions, "policy_model")
        return np.mean([_proba_on_codes(m, X, self.n_actions, "policy_model") for m in self.models], axis=0)

    def proba(self, states, fold: int | None = None) -> np.ndarray:
        """Clipped, renormalized ``pi_hat(.|s)``, shape (n, K)."""
        return clip_proba(self.raw_proba(states, fold), self.clip)[0]

    def log_proba(self, states, fold: int | None = None) -> np.ndarray:
        """``u(s, .) = log pi_hat(.|s)``, shape (n, K)."""
        return np.log(self.proba(states, fold))

    def training_raw_proba(self, states: np.ndarray, rows=None) -> np.ndarray:
        """Raw probabilities at rows aligned with the training rows: out-of-fold when
        cross-fitted (each row scored by the model that did not see its episode).
        ``rows`` (boolean mask or indices into the training rows): ``states`` is aligned
        with those training rows only (e.g. the rows with an observed next state)."""
        if self.fold_of_row is None:
            return self.raw_proba(states)
        states = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
        folds = self._training_folds(states.shape[0], rows)
        return self._by_fold(folds, lambda k, sel: self.raw_proba(states[sel], fold=k), (self.n_actions,))

    def training_table(self, states, rows=None) -> RowTable:
        """:meth:`training_raw_proba` as a ``RowTable``: once per distinct (fold, state) row
        when the rows repeat (tabular states), else one row per row."""
        distinct = self.distinct_training_raw_proba(states, rows)
        if distinct is None:
            X = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
            return RowTable(X, self.training_raw_proba(X, rows))
        raw, index, X = distinct
        return RowTable(X, raw, index)

    def distinct_training_raw_proba(self, states, rows=None):
        """:meth:`training_raw_proba` once per distinct (fold, state) row when the rows repeat
        (tabular states): ``(raw (m, K), index (n,), states (m, d))`` with ``raw[index]`` the rows'
        values; None when they do not repeat enough to pay (``genpqr.stage1._cells.repeated_rows``)."""
        X = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
        folds = None if self.fold_of_row is None else self._training_folds(X.shape[0], rows)
        repeated = repeated_rows(X if folds is None else np.column_stack([folds, X]))
        if repeated is None:
            return None
        distinct, index = repeated
        if folds is None:
            return self.raw_proba(distinct), index, distinct
        fold = distinct[:, 0].astype(np.int64)
        raw = self._by_fold(fold, lambda k, sel: self.raw_proba(distinct[sel, 1:], fold=k), (self.n_actions,))
        return raw, index, distinct[:, 1:]

    def log_policy(self, states, actions=None, *, return_clipped: bool = False):
        """``u = log pi_hat`` (clipped, renormalized): (n, K), or (n,) at action codes ``actions``."""
        return self._u(self.raw_proba(states), actions, return_clipped)

    def training_log_policy(self, states, actions=None, rows=None, *, return_clipped: bool = False):
        """:meth:`log_policy` out of fold at training rows (see :meth:`training_raw_proba`)."""
        return self._u(self.training_raw_proba(states, rows), actions, return_clipped)

    def _u(self, raw, actions, return_clipped):
        proba, clipped = clip_proba(raw, self.clip)
        u = np.log(proba)
        if actions is not None:
            rows, codes = np.arange(u.shape[0]), np.asarray(actions, dtype=np.int64)
            u, clipped = u[rows, codes], clipped[rows, codes]
        return (u, clipped) if return_clipped else u


def prefit_policy(classifier, transitions: Transitions, *, clip=DEFAULT_CLIP) -> FittedPolicy:
    """Wrap an already fitted classifier (not cloned, not refitted). Its ``classes_`` must be
    action codes ``0..K-1`` or the data's action labels."""
    if not hasattr(classifier, "predict_proba"):
        raise TypeError(f"policy_model must have predict_proba(), got {type(classifier).__name__}")
    classes = getattr(classifier, "classes_", None)
    if classes is None:
        raise ValueError("policy_model is not fitted (it has no classes_); fit it or use policy_prefit=False")
    classes = np.asarray(classes)
    check_feature_dim(classifier, getattr(classifier, "action_features_", None), transitions)
    codes = np.arange(transitions.n_actions)
    if not np.all(np.isin(classes, codes)) or classes.dtype.kind not in "iu":
        classifier = _LabelledClassifier(classifier, transitions.encoder.encode(classes, "policy_model.classes_"))
    return resolve_policy_clip(FittedPolicy([classifier], None, transitions.n_actions, (0.0, 1.0)), clip, transitions)


class _LabelledClassifier:
    """A fitted classifier whose classes are the user's labels, seen through action codes."""

    def __init__(self, model, codes):
        self.model, self.classes_ = model, np.asarray(codes)

    def predict_proba(self, X):
        return self.model.predict_proba(X)


def fit_policy(classifier, transitions: Transitions, *, clip=DEFAULT_CLIP, cross_fit: int | None = None,
               random_state=None, progress: bool | None = False) -> FittedPolicy:
    """Fit stage 1 on ``(states, actions)`` (every observed choice); with ``cross_fit = k``, k
    episode folds (a tqdm bar over the folds with ``progress``; None: only on a terminal; a model
    with a ``progress`` parameter left at None gets this one).
    ``clip``: ``(low, high)``, ``None`` or ``"auto"`` (:mod:`genpqr.stage1`)."""
    classifier = forward_progress(bind_action_features(check_classifier(classifier), transitions), progress)
    if not is_auto(clip):
        check_clip(clip)
    X, y, K = transitions.states, transitions.actions, transitions.n_actions
    w = transitions.sample_weight
    if cross_fit is None:
        fitted = fit_weighted(clone(classifier), X, y, w, "policy_model")
        return resolve_policy_clip(FittedPolicy([fitted], None, K, (0.0, 1.0)), clip, transitions)

    def fit_fold(k, train):
        if np.unique(y[train]).size < 2:
            raise ValueError(Message(Mention("cross_fit", cross_fit), f": the training episodes of fold {k} take only "
                                     f"action {plain(transitions.labels_of(y[train][:1])[0])!r}, so stage 1 cannot be "
                                     "fitted there; use fewer folds or ", Mention("cross_fit", None)))
        return fit_weighted(clone(classifier), X[train], y[train], None if w is None else w[train], "policy_model")

    models, fold_of_row = cross_fit_models(transitions, cross_fit, fit_fold, random_state=random_state,
                                           progress=progress)
    return resolve_policy_clip(FittedPolicy(models, fold_of_row, K, (0.0, 1.0)), clip, transitions)


# ============================================================================ continuous actions
# Stage 1 for a box action space: a conditional density ``log p(a|s)`` (``u = log dpi/dlambda``
# after the reference measure), fitted or prefit, optionally cross-fitted by episode.

@dataclass
class FittedDensity(FittedStage1):
    """One fitted density, or one per cross-fitting fold (their equal-weight mixture away from
    the training rows; out-of-fold at the training rows).

    Attributes
    ----------
    models, fold_of_row
        The fitted density (or densities) and folds (``genpqr.stage1._stage1.FittedStage1``).
    support_ : BoxActions
    reference : ReferenceMeasure or None
        ``lambda`` of ``u = log dpi/dlambda = log p_hat - log dlambda/dLebesgue`` (None: Lebesgue).
    min_log_density : float or None
        Lower clip of ``u`` (None: no clip).
    """

    support_: BoxActions
    reference: object = None
    min_log_density: float | None = None

    def log_policy(self, states, actions, *, return_clipped: bool = False):
        """``u(s, a) = log dpi_hat/dlambda``, clipped below at ``min_log_density``, shape (n,)."""
        return self._u(self.log_prob(states, actions), actions, return_clipped)

    def training_log_policy(self, states, actions, rows=None, *, return_clipped: bool = False):
        """:meth:`log_policy` out of fold at training rows (see :meth:`training_log_prob`)."""
        return self._u(self.training_log_prob(states, actions, rows), actions, return_clipped)

    def _u(self, logp, actions, return_clipped):
        u = np.asarray(logp, dtype=np.float64)
        if self.reference is not None:
            u = u - self.reference.log_density(actions)
        if self.min_log_density is None:
            clipped = np.zeros(u.shape, dtype=bool)
        else:
            clipped = u < self.min_log_density
            u = np.maximum(u, float(self.min_log_density))
        return (u, clipped) if return_clipped else u

    @property
    def reference_measure(self) -> str:
        return self.support_.reference_measure()

    def log_prob(self, states, actions) -> np.ndarray:
        if len(self.models) == 1:
            return np.asarray(self.models[0].log_prob(states, actions), dtype=np.float64)
        parts = np.stack([np.asarray(m.log_prob(states, actions), dtype=np.float64) for m in self.models])
        return logsumexp(parts, axis=0) - np.log(len(self.models))

    def training_log_prob(self, states, actions, rows=None) -> np.ndarray:
        """``log p(a|s)`` where row ``k`` of (states, actions) belongs to training row ``rows[k]``
        (None: every training row): scored by the model that did not see that row's episode when
        cross-fitted."""
        if self.fold_of_row is None:
            return self.log_prob(states, actions)
        folds = self._training_folds(np.shape(states)[0], rows)
        return self._by_fold(folds, lambda k, sel: self.models[k].log_prob(states[sel], actions[sel]))

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


def _support(model, data: Transitions) -> BoxActions:
    support = getattr(model, "support_", None)
    if support is None:
        return BoxActions.create(data.action_dim)
    if not isinstance(support, BoxActions):
        raise TypeError(f"policy_model.support_ must be a genpqr.data.BoxActions, got {type(support).__name__}")
    return support


def fit_density(model, data: Transitions, *, cross_fit: int | None = None, random_state=None) -> FittedDensity:
    """Fit clones of ``model`` on ``(states, actions)`` (one per episode fold with ``cross_fit``)."""
    check_density(model)
    w = data.sample_weight
    if cross_fit is None:
        fitted = clone(model).fit(data.states, data.actions, sample_weight=w)
        return FittedDensity([fitted], None, _support(fitted, data))

    def fit_fold(k, train):
        return clone(model).fit(data.states[train], data.actions[train], sample_weight=None if w is None else w[train])

    models, fold_of_row = cross_fit_models(data, cross_fit, fit_fold, random_state=random_state, progress=False,
                                           desc="density folds")
    return FittedDensity(models, fold_of_row, _support(models[0], data))


def prefit_density(model, data: Transitions) -> FittedDensity:
    """Use an already fitted density as is (not cloned, not refitted)."""
    check_density(model)
    model.log_prob(data.states[:1], data.actions[:1])  # raises if the model is not fitted
    return FittedDensity([model], None, _support(model, data))


def fit_stage1(model, data: Transitions, *, prefit: bool = False, clip="auto", cross_fit: int | None = None,
               random_state=None, progress: bool | None = False, reference=None,
               min_log_density=None) -> FittedStage1:
    """Stage 1 of :class:`genpqr.GenPQR` on either action space: a classifier for finite actions
    (:func:`fit_policy` / :func:`prefit_policy`, ``clip``), a conditional density for a box
    (``fit_density`` / ``prefit_density``, ``reference`` and ``min_log_density``).
    ``prefit``: ``model`` is already fitted and used as is (no ``cross_fit``)."""
    if prefit and (model is None or cross_fit):
        raise ValueError("policy_prefit=True needs a fitted policy_model and no cross_fit")
    if data.is_finite:
        if prefit:
            return prefit_policy(model, data, clip=clip)
        return fit_policy(model, data, clip=clip, cross_fit=cross_fit, random_state=random_state, progress=progress)
    fitted = prefit_density(model, data) if prefit else fit_density(model, data, cross_fit=cross_fit,
                                                                    random_state=random_state)
    fitted.reference, fitted.min_log_density = reference, min_log_density
    return fitted

r"""The first stage of the exact tabular path, chosen from the data: cell frequencies, or a
smooth logit in an ordered state when the cells are sparse. One rule for both doors:
:class:`genpqr.GenPQR` with ``q_model="exact"`` and ``policy_model=None`` and ``genpqr fit``
with ``--policy-model auto`` (its default) both call ``choose_tabular_policy``.

Cell frequencies ``pi_hat(a|s) = n(s, a) / n(s)`` are the tabular MLE, but on a panel with a
rare action (engine replacement, exit, default) most cells never see it: ``pi_hat = 0`` there,
``log pi_hat = -inf`` and the answer is whatever the probability floor says. When the state
is *ordered* (mileage, age, stock: one integer column numbered by its value), the choice
probabilities are smooth in it, and a multinomial logit on a spline basis of the state
borrows strength across neighbouring cells. Its probabilities lie strictly inside (0, 1),
so with ``clip="auto"`` no clip binds (:mod:`genpqr.stage1`).

:class:`SplineLogit`
    ``LogisticRegression(C)`` on ``SplineTransformer(n_knots, degree=3)`` features of the
    state (linear extrapolation beyond the observed range); a scikit-learn classifier.
``select_spline_logit``
    ``(n_knots, C)`` chosen by the cross-validated log loss with episode-grouped folds
    (a held-out episode is scored by a model that never saw it).
``cells_are_sparse``
    The rule: cells are *sparse* when the median number of observed choices per visited
    state is below ``SPARSE_MEDIAN_VISITS``, or when more than
    ``SPARSE_ZERO_SHARE`` of the observed choices sit at states where some action
    (observed somewhere in the data) is never chosen by the episodes of the *other* folds:
    there the frequency first stage, fitted without the choice's fold, gives it probability 0.
``state_is_ordered``
    When a tabular state counts as ordered: it is its own index (always so for ``GenPQR``,
    whose tabular states are indices; ``genpqr fit``: one integer or binned column numbered
    by its value) and the transitions are an increment kernel (a transition model with
    ``orders_states = True``, e.g. :class:`genpqr.structural.IncrementKernel`) or the
    number of states was given (``n_states=``, ``--n-states``).
``choose_tabular_policy``
    The spline logit when the state is ordered and the cells are sparse, else cell
    frequencies; returns the model and a ``FirstStageChoice`` saying which and why.
    Deterministic: the folds of the sparse rule and of the cross-validation are the
    ``n_splits`` episode folds drawn with ``random_state`` (None: ``DEFAULT_SEED``, the
    default ``--seed`` of ``genpqr fit``), whatever the fit's ``cross_fit``.

The module lives in the core (not in :mod:`genpqr.models`, where it started) because the
estimator's default needs it; ``genpqr.models._first_stage`` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..data._estimator_base import LightClassifierMixin, LightEstimator
from ..data._validation import check_state_indices, seed_from
from ..data import Transitions
from ..messages import Mention, Message
from ._policy import FrequencyClassifier
from ._cells import choice_cells, compresses, repeated_rows

__all__ = ["SplineLogit", "select_spline_logit", "cells_are_sparse", "choose_tabular_policy", "FirstStageChoice",
           "state_is_ordered", "given_first_stage", "sparsity", "SPARSE_MEDIAN_VISITS", "SPARSE_ZERO_SHARE",
           "KNOT_GRID", "C_GRID", "DEFAULT_SEED"]

#: Cells are sparse when the median number of choices per visited state is below this ...
SPARSE_MEDIAN_VISITS = 30
#: ... or when more than this share of the choices sit at a state where some action is unobserved.
SPARSE_ZERO_SHARE = 0.05
#: Candidate numbers of spline knots (cubic B-splines: n_knots + 2 basis functions).
KNOT_GRID = (3, 4, 6, 8)
#: Candidate inverse L2 penalties of the logit (intercept unpenalized).
C_GRID = (1.0, 10.0, 1000.0)
#: The seed of the rule's folds when ``random_state`` is None: ``genpqr fit``'s default ``--seed``.
DEFAULT_SEED = 0


class SplineLogit(LightClassifierMixin, LightEstimator):
    """Multinomial logit on a cubic B-spline basis of the (ordered) state.

    Parameters
    ----------
    n_knots : int
        Knots of :class:`sklearn.preprocessing.SplineTransformer` (uniform over the
        observed range; linear extrapolation beyond it).
    degree : int
    C : float
        Inverse L2 penalty of :class:`sklearn.linear_model.LogisticRegression`.
    max_iter : int
    tol : float
        Stopping tolerance of the logistic regression (lbfgs).

    Notes
    -----
    ``X`` is 2-D, shape (n, d) (a single state column as (n, 1)), validated like any
    scikit-learn classifier: ``check_estimator`` passes with no exclusion
    (tests/stage2/test_model_selection.py). ``sample_weight`` also weights the knot range (zero-weight
    rows do not move the knots), so a weight of 2 is a repeated row. When the states repeat
    (tabular states) the logit is fitted on the weighted (state, action) cells
    (``genpqr.stage1._cells.choice_cells``: the same objective at ``S x K`` rows at most) and
    predicts once per distinct state.
    """

    def __init__(self, n_knots=5, degree=3, C=1.0, max_iter=2000, tol=1e-4):
        self.n_knots = n_knots
        self.degree = degree
        self.C = C
        self.max_iter = max_iter
        self.tol = tol

    def fit(self, X, y, sample_weight=None):
        """Fit on states ``X`` of shape (n, d) (one ordered column in the intended use) and
        actions ``y``; one class or one distinct state: the constant frequencies. Returns self."""
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import SplineTransformer
        from sklearn.utils.multiclass import check_classification_targets
        from sklearn.utils.validation import validate_data

        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
            if sample_weight.shape != (X.shape[0],):
                raise ValueError(f"sample_weight must have shape ({X.shape[0]},), got {sample_weight.shape}")
        if np.unique(y).size < 2 or np.all(X == X[0]):  # one class, or one state: the constant frequencies
            self.classes_, codes = np.unique(y, return_inverse=True)
            self.pipeline_ = None
            w = np.ones(y.size) if sample_weight is None else sample_weight
            self.constant_ = np.bincount(codes.ravel(), weights=w, minlength=self.classes_.size) / w.sum()
            self.n_iter_ = np.zeros(1, dtype=np.int32)
            return self
        self.pipeline_ = make_pipeline(
            SplineTransformer(n_knots=int(self.n_knots), degree=int(self.degree), extrapolation="linear"),
            LogisticRegression(C=float(self.C), max_iter=int(self.max_iter), tol=self.tol))
        X, y, sample_weight = _cells_or_rows(X, y, sample_weight)
        kw = {} if sample_weight is None else {"logisticregression__sample_weight": sample_weight,
                                               "splinetransformer__sample_weight": sample_weight}  # knot range
        self.pipeline_.fit(X, y, **kw)
        self.classes_ = self.pipeline_.classes_
        self.n_iter_ = self.pipeline_[-1].n_iter_
        return self

    def predict_proba(self, X):
        """Choice probabilities at states ``X`` (n, d), shape (n, n_classes)."""
        from sklearn.utils.validation import check_is_fitted, validate_data

        check_is_fitted(self, "classes_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        if self.pipeline_ is None:
            return np.tile(self.constant_, (X.shape[0], 1))
        repeated = repeated_rows(X)  # tabular states: once per distinct state
        if repeated is None:
            return self.pipeline_.predict_proba(X)
        return self.pipeline_.predict_proba(repeated[0])[repeated[1]]

    def predict(self, X):
        """The most probable action at each state, shape (n,)."""
        proba = self.predict_proba(X)  # first: NotFittedError before any fitted attribute is read
        return self.classes_[np.argmax(proba, axis=1)]

    def describe(self) -> str:
        return f"spline logit (n_knots={self.n_knots}, degree={self.degree}, C={self.C:g})"


def _cells_or_rows(X, y, sample_weight):
    """``(X, y, sample_weight)`` of the weighted (state, action) cells when the rows repeat
    (``genpqr.stage1._cells.choice_cells``: the same weighted log-likelihood, the same knot range --
    the cells with positive weight span the rows with positive weight), else as given."""
    repeated = repeated_rows(X)
    if repeated is None:
        return X, y, sample_weight
    labels, codes = np.unique(y, return_inverse=True)
    cells = choice_cells(X, codes.reshape(-1), labels.size, sample_weight, index=repeated)
    if not compresses(cells.n_cells, X.shape[0]):
        return X, y, sample_weight
    Xc, yc, wc = cells.as_rows()
    return Xc, labels[yc], wc


@dataclass
class FirstStageChoice:
    """Which first stage a fit used and why (``GenPQR.first_stage_``, printed by ``summary()``
    and by ``genpqr fit``).

    Attributes
    ----------
    name : str
        ``"spline"`` or ``"frequency"`` (chosen by ``choose_tabular_policy``), ``"given"``
        (a ``policy_model`` passed to ``GenPQR``), ``"basis-logit"`` (``GenPQR``'s default for
        non-tabular states, :class:`genpqr.stage1.BasisLogit`), or the ``--policy-model`` the user
        named (``genpqr fit``).
    reason : str
    median_visits : float
        Median observed choices per visited state (NaN when not computed).
    zero_share : float
        Share of choices at states where some action is unobserved in the other folds.
    cv_log_loss : dict
        ``"n_knots=.., C=.."`` -> cross-validated log loss (spline candidates), and
        ``"frequency"`` (infinite when a held-out action was never seen in its cell).
    """

    name: str
    reason: str
    median_visits: float = float("nan")
    zero_share: float = float("nan")
    cv_log_loss: dict = field(default_factory=dict)

    def describe(self) -> str:
        return f"{self.name}: {self.reason}"

    def __str__(self) -> str:
        return self.describe()


def _counts(transitions: Transitions, n_states: int) -> np.ndarray:
    """Observed choices per (state, action code), shape (S, K) (every choice row)."""
    s = check_state_indices(transitions.states, n_states, "states")
    K = transitions.n_actions
    return np.bincount(s * K + transitions.actions, minlength=n_states * K).reshape(n_states, K).astype(np.float64)


def cells_are_sparse(transitions: Transitions, n_states: int, *, n_folds: int | None = None,
                     random_state=None) -> tuple[bool, float, float]:
    """``(sparse, median_visits, zero_share)`` by the rule of the module docstring (every
    observed choice counts, the last row of each episode included).

    ``zero_share`` is the fraction of choices ``i`` at whose state ``s_i`` some action
    observed in the data has no choice among the held-out rows' complement: with ``n_folds =
    k`` (2 <= k <= episodes) the other folds of ``transitions.episode_folds(k, random_state)``
    (the folds of ``select_spline_logit`` with the same seed), else the other episodes
    (leave-one-episode-out)."""
    counts = _counts(transitions, n_states)
    K = counts.shape[1]
    visits = counts.sum(axis=1)
    median = float(np.median(visits[visits > 0]))
    seen = counts.sum(axis=0) > 0
    s = check_state_indices(transitions.states, n_states, "states")
    group = transitions.episode_ids
    if n_folds is not None and 2 <= int(n_folds) <= transitions.n_episodes:
        group = np.empty(transitions.n, dtype=np.int64)
        for k, (_, test) in enumerate(transitions.episode_folds(int(n_folds), random_state=random_state)):
            group[test] = k
    pair, pair_of_row = np.unique(group * n_states + s, return_inverse=True)
    pair_of_row = pair_of_row.reshape(-1)
    own = np.bincount(pair_of_row * K + transitions.actions, minlength=pair.size * K).reshape(pair.size, K)
    others = counts[pair % n_states] - own
    hole = np.any(others[:, seen] == 0, axis=1)
    zero_share = float(np.mean(hole[pair_of_row]))
    return bool(median < SPARSE_MEDIAN_VISITS or zero_share > SPARSE_ZERO_SHARE), median, zero_share


def _held_out_log_loss(model, X, y, folds, n_actions: int) -> float:
    """Mean held-out ``-log p(a|s)`` over episode folds; infinite when a held-out action gets
    probability 0 (e.g. cell frequencies where the action was never seen in training)."""
    from ..data._validation import clone_learner as clone

    total = 0.0
    for train, test in folds:
        seen = np.unique(y[train])
        if seen.size < 2:  # the training episodes take one action: probability 1 on it (the MLE)
            if np.any(y[test] != seen[0]):
                return float("inf")
            continue
        fitted = clone(model).fit(X[train], y[train])
        raw = fitted.predict_proba(X[test])
        proba = np.zeros((test.size, n_actions))
        proba[:, np.asarray(fitted.classes_, dtype=np.int64)] = raw
        p = proba[np.arange(test.size), y[test]]
        if np.any(p <= 0):
            return float("inf")
        total += -np.sum(np.log(p))
    return float(total / X.shape[0])


def select_spline_logit(transitions: Transitions, *, knots=KNOT_GRID, C=C_GRID, n_splits: int = 5,
                        random_state=None) -> tuple[SplineLogit, dict]:
    """The :class:`SplineLogit` with the smallest cross-validated log loss over ``knots x C``
    (``n_splits`` episode-grouped folds; fewer when there are fewer episodes, at least 2).

    Returns
    -------
    model : SplineLogit (unfitted, with the chosen hyperparameters)
    scores : dict ``"n_knots=K, C=c"`` -> held-out log loss
    """
    X, y = transitions.states, transitions.actions
    k = min(int(n_splits), transitions.n_episodes)
    if k < 2:
        raise ValueError("select_spline_logit needs at least 2 episodes for episode-grouped cross-validation")
    folds = transitions.episode_folds(k, random_state=random_state)
    scores, best = {}, None
    for n_knots in knots:
        for c in C:
            model = SplineLogit(n_knots=n_knots, C=c)
            score = _held_out_log_loss(model, X, y, folds, transitions.n_actions)
            scores[f"n_knots={n_knots}, C={c:g}"] = score
            if best is None or score < best[0] - 1e-12:
                best = (score, model)
    return best[1], scores


def sparsity(transitions: Transitions, n_states: int, *, n_splits: int = 5, random_state=None):
    """``(sparse, median_visits, zero_share, facts)``: ``cells_are_sparse`` by the folds of
    ``choose_tabular_policy`` (``min(n_splits, episodes)`` episode folds seeded by
    ``random_state``, None: ``DEFAULT_SEED``), and the two numbers as printed text."""
    seed = DEFAULT_SEED if random_state is None else seed_from(random_state)
    k = min(int(n_splits), transitions.n_episodes)
    sparse, median, zero_share = cells_are_sparse(transitions, n_states, n_folds=k, random_state=seed)
    facts = (f"median {median:g} choices per visited state, {zero_share:.1%} of the choices at states where some "
             f"action is never chosen by the other {'folds' if k >= 2 else 'episodes'}")
    return sparse, median, zero_share, facts


def state_is_ordered(transition_model=None, n_states=None, *, identity: bool = True) -> bool:
    """Whether a tabular state counts as *ordered* for ``choose_tabular_policy``.

    Parameters
    ----------
    transition_model : object, optional
        The fit's transition model; an increment kernel (``orders_states = True``, e.g.
        :class:`genpqr.structural.IncrementKernel`) presumes states numbered by value.
    n_states : int, optional
        The number of states, when the user gave it (``GenPQR(n_states=...)``, ``--n-states``):
        it numbers the states by their value, top states unvisited included.
    identity : bool
        The state is its own index (always so for ``GenPQR``, whose tabular states are
        indices; ``genpqr fit``: one integer or binned column numbered by its value, not
        distinct combinations numbered in sorted order).

    Notes
    -----
    A plain index with neither may be a category code, where a model smooth across states
    would be wrong: then cell frequencies are used.
    """
    return bool(identity and (getattr(transition_model, "orders_states", False) is True or n_states is not None))


def given_first_stage(policy_model, *, prefit: bool = False) -> FirstStageChoice:
    """The ``FirstStageChoice`` of a policy model the user passed (used as given)."""
    describe = getattr(policy_model, "describe", None)
    steps = getattr(policy_model, "steps", None)
    if callable(describe):
        text = describe()
    elif isinstance(steps, list) and steps:
        text = " -> ".join(type(step).__name__ for _, step in steps)
    else:
        text = type(policy_model).__name__
    return FirstStageChoice("given", f"policy_model={text}" + (" (prefit, used as is)" if prefit else ""))


def choose_tabular_policy(transitions: Transitions, n_states: int, *, ordered: bool, force: str | None = None,
                          n_splits: int = 5, random_state=None):
    """The first stage for tabular states: ``(classifier, FirstStageChoice)``.

    ``ordered``: the state index is an ordered quantity (``state_is_ordered``).
    ``force="spline"`` selects the spline logit whatever the cells; otherwise it is used when
    ``ordered`` and ``cells_are_sparse`` (and the data hold at least 2 episodes), else
    cell frequencies. The sparse rule and the
    spline's cross-validation use the same ``min(n_splits, episodes)`` episode folds, drawn
    with ``random_state`` (None: ``DEFAULT_SEED``), so the choice is deterministic and
    does not depend on the fit's cross-fitting.
    """
    if force == "spline" and not ordered:
        raise ValueError(Message(Mention("force", "spline"), " needs an ordered state: one integer (or binned) state "
                                 "column numbered by its value; use ",
                                 Mention("policy_model", "frequency", python="FrequencyClassifier"), " or logistic"))
    seed = DEFAULT_SEED if random_state is None else seed_from(random_state)
    k = min(int(n_splits), transitions.n_episodes)
    sparse, median, zero_share, facts = sparsity(transitions, n_states, n_splits=n_splits, random_state=seed)
    if force != "spline" and not (ordered and sparse and k >= 2):
        why = ("cells are well filled" if not sparse else Message(
            "cells are sparse but the state is not ordered (no smooth model across states; an ordered index: give ",
            Mention("n_states"), " or ", Mention("transition_model", "increment:", python="an increment kernel"), ")")
            if not ordered else "cells are sparse but the data hold one episode (the spline logit is chosen by "
                                "episode-grouped cross-validation)")
        return FrequencyClassifier(n_states=n_states), FirstStageChoice(
            "frequency", Message("cell frequencies: ", why, f" ({facts})"), median, zero_share)
    if transitions.n_episodes < 2:
        raise ValueError(Message("the spline-logit first stage needs at least 2 episodes (episode-grouped "
                                 "cross-validation); use ", Mention("policy_model", "frequency",
                                                                    python="policy_model=FrequencyClassifier(n_states)")))
    model, scores = select_spline_logit(transitions, n_splits=n_splits, random_state=seed)
    freq = _held_out_log_loss(FrequencyClassifier(n_states=n_states), transitions.states, transitions.actions,
                              transitions.episode_folds(k, random_state=seed), transitions.n_actions)
    scores["frequency"] = freq
    best = min(v for key, v in scores.items() if key != "frequency")
    why = Message("requested (", Mention("force", "spline"), ")") if force == "spline" else \
        f"cells are sparse ({facts})"
    freq_text = "inf (held-out actions unseen in their cell)" if not np.isfinite(scores["frequency"]) else \
        f"{scores['frequency']:.4f}"
    reason = Message(f"{model.describe()}: ", why, f"; chosen by {k}-fold episode-grouped cross-validated log loss "
                                                   f"{best:.4f} over {len(scores) - 1} (n_knots, C) candidates (cell "
                                                   f"frequencies: {freq_text})")
    return model, FirstStageChoice("spline", reason, median, zero_share, scores)

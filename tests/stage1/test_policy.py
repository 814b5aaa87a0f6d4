"""Tests of genpqr.stage1 (stage 1): clipping, the tabular frequency classifier, classifier
checks, predict_proba sanity checks, cross-fitting by episode, and recovery of a known
softmax policy by logistic regression."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.svm import SVC, LinearSVC
from sklearn.utils.estimator_checks import (
    check_estimator_cloneable,
    check_get_params_invariance,
    check_no_attributes_set_in_init,
)

from genpqr.data import from_arrays, from_episodes
from genpqr.stage1 import FrequencyClassifier
from genpqr.stage1._policy import DEFAULT_CLIP, FittedPolicy, check_classifier, clip_log_proba, clip_proba, fit_policy


# ---------------------------------------------------------------------------- clipping
def test_clip_proba_hand_computation():
    proba = np.array([[0.005, 0.995, 0.0], [0.2, 0.3, 0.5], [0.01, 0.99, 0.0]])
    p, clipped = clip_proba(proba, (0.01, 0.99))
    # row 0: clip to [0.01, 0.99, 0.01], then divide by the row sum 1.01
    np.testing.assert_allclose(p[0], np.array([0.01, 0.99, 0.01]) / 1.01, rtol=0, atol=1e-15)
    np.testing.assert_allclose(p[1], proba[1], rtol=0, atol=1e-15)  # inside the bounds: untouched
    np.testing.assert_allclose(p[2], np.array([0.01, 0.99, 0.01]) / 1.01, rtol=0, atol=1e-15)
    # an entry exactly at a bound is not "clipped"
    np.testing.assert_array_equal(clipped, [[True, True, True], [False, False, False], [False, False, True]])
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(clip_log_proba(proba, (0.01, 0.99)), np.log(p), rtol=0, atol=1e-14)


def test_clip_proba_rows_sum_to_one_and_default_bounds(rng):
    proba = rng.dirichlet(np.full(5, 0.05), size=200)  # many near-0 and near-1 entries
    p, clipped = clip_proba(proba)
    low, high = DEFAULT_CLIP
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(clipped, (proba < low) | (proba > high))
    assert clipped.any() and not clipped.all()
    expected = np.clip(proba, low, high)
    np.testing.assert_allclose(p, expected / expected.sum(axis=1, keepdims=True), rtol=0, atol=1e-15)
    assert np.all(p > 0)
    # no clipping: the input back, nothing flagged
    p0, c0 = clip_proba(proba, None)
    np.testing.assert_allclose(p0, proba / proba.sum(axis=1, keepdims=True), rtol=0, atol=1e-15)
    assert not c0.any()
    # the input is not modified
    copy = proba.copy()
    clip_proba(proba)
    np.testing.assert_array_equal(proba, copy)


@pytest.mark.parametrize("clip", [(0.5, 0.1), (-0.1, 0.9), (0.1, 1.5), (0.3, 0.3), (np.nan, 0.9)])
def test_bad_clip_bounds_value_error(clip):
    with pytest.raises(ValueError, match="clip"):
        clip_proba(np.full((2, 2), 0.5), clip)


@pytest.mark.parametrize("clip", [0.01, (0.1,), (0.1, 0.2, 0.3), ("a", "b"), "ab"])
def test_bad_clip_bounds_type_error(clip):
    with pytest.raises(TypeError, match="clip"):
        clip_proba(np.full((2, 2), 0.5), clip)


def test_clip_log_proba_needs_positive_floor():
    with pytest.raises(ValueError, match="lower clip bound"):
        clip_log_proba(np.array([[0.0, 1.0]]), None)


# ---------------------------------------------------------------------------- FrequencyClassifier
S_TAB = np.array([0, 0, 0, 0, 1, 1, 2, 0, 2, 2])
A_TAB = np.array([0, 1, 1, 2, 2, 2, 0, 1, 0, 0])
# counts by hand: state 0 -> [1, 3, 1], state 1 -> [0, 0, 2], state 2 -> [3, 0, 0]; state 3 unvisited
COUNTS = np.array([[1, 3, 1], [0, 0, 2], [3, 0, 0], [0, 0, 0]], dtype=float)


def test_frequency_classifier_matches_hand_counts():
    clf = FrequencyClassifier(n_states=4).fit(S_TAB[:, None], A_TAB)
    expected = np.array([[0.2, 0.6, 0.2], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.4, 0.3, 0.3]])  # last: marginal
    np.testing.assert_allclose(clf.table_, expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(clf.predict_proba(np.array([3, 0, 2])), expected[[3, 0, 2]], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(clf.classes_, [0, 1, 2])
    np.testing.assert_array_equal(clf.predict(np.array([[0], [1], [2]])), [1, 2, 0])
    np.testing.assert_array_equal(clf.counts_, COUNTS)
    # n_states defaults to max index + 1 (no unvisited trailing state then)
    assert FrequencyClassifier().fit(S_TAB, A_TAB).table_.shape == (3, 3)


def test_frequency_classifier_smoothing_and_unvisited_states():
    alpha = 0.5
    clf = FrequencyClassifier(n_states=4, smoothing=alpha).fit(S_TAB, A_TAB)
    visited = (COUNTS[:3] + alpha) / (COUNTS[:3] + alpha).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(clf.table_[:3], visited, rtol=0, atol=1e-15)
    # an unvisited state gets the data's marginal action frequencies, smoothing or not
    np.testing.assert_allclose(clf.table_[3], [0.4, 0.3, 0.3], rtol=0, atol=1e-15)
    np.testing.assert_allclose(clf.table_.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="smoothing"):
        FrequencyClassifier(smoothing=-1.0).fit(S_TAB, A_TAB)


def test_frequency_classifier_labels_and_weights():
    labels = np.array(["b", "a", "a", "c"])
    clf = FrequencyClassifier(n_states=2).fit(np.array([0, 0, 1, 1]), labels, sample_weight=[1.0, 3.0, 1.0, 1.0])
    np.testing.assert_array_equal(clf.classes_, ["a", "b", "c"])
    np.testing.assert_allclose(clf.table_, [[0.75, 0.25, 0.0], [0.5, 0.0, 0.5]], rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="X must be indices in"):
        clf.predict_proba(np.array([2]))
    with pytest.raises(ValueError, match="integer state indices"):
        clf.predict_proba(np.array([0.5]))


def test_frequency_classifier_sklearn_contract():
    clf = FrequencyClassifier(n_states=5, smoothing=0.25)
    assert clf.get_params() == {"n_states": 5, "smoothing": 0.25}
    twin = clone(clf)
    assert twin is not clf and twin.get_params() == clf.get_params()
    fitted = clone(clf).fit(S_TAB, A_TAB)
    assert not hasattr(clone(fitted), "table_")  # clone drops fitted state
    check_estimator_cloneable("FrequencyClassifier", clf)
    check_no_attributes_set_in_init("FrequencyClassifier", clf)
    check_get_params_invariance("FrequencyClassifier", clf)
    assert clf.set_params(smoothing=2.0) is clf and clf.smoothing == 2.0


# ---------------------------------------------------------------------------- classifier checks
def _tabular_data(seed=0, n_episodes=12, n_states=5, K=3, action_labels=None):
    """Episodes on tabular states whose action frequencies differ by episode."""
    rng = np.random.default_rng(seed)
    eps = []
    for e in range(n_episodes):
        T = int(rng.integers(3, 8))
        probs = rng.dirichlet(np.ones(K))
        eps.append({"states": rng.integers(0, n_states, size=T + 1), "actions": rng.choice(K, size=T, p=probs)})
    return from_episodes(eps, action_labels=action_labels)


@pytest.mark.parametrize("model", [LinearSVC(), SVC()])
def test_classifier_without_predict_proba_is_rejected(model):
    data = _tabular_data()
    with pytest.raises(TypeError, match="policy_model.*predict_proba"):
        fit_policy(model, data)
    with pytest.raises(TypeError, match="stage_one"):
        check_classifier(model, name="stage_one")


def test_classifier_class_instead_of_instance_is_rejected():
    with pytest.raises(TypeError, match="policy_model must be a classifier instance.*LogisticRegression"):
        fit_policy(LogisticRegression, _tabular_data())
    assert check_classifier(SVC(probability=True)) is not None


def test_fit_policy_bad_clip():
    with pytest.raises(ValueError, match="clip"):
        fit_policy(FrequencyClassifier(), _tabular_data(), clip=(0.9, 0.1))
    with pytest.raises(TypeError, match="clip"):
        fit_policy(FrequencyClassifier(), _tabular_data(), clip=0.01)


def test_fit_policy_clones_and_does_not_fit_the_given_model():
    model = FrequencyClassifier(n_states=5)
    fitted = fit_policy(model, _tabular_data())
    assert not hasattr(model, "table_")
    assert fitted.models[0] is not model and fitted.fold_of_row is None
    data = _tabular_data()
    np.testing.assert_array_equal(fitted.training_raw_proba(data.states), fitted.raw_proba(data.states))


def test_action_never_observed_gets_zero_then_the_clip_floor():
    # 4 action labels, the last one never taken
    data = _tabular_data(K=3, action_labels=[0, 1, 2, 3])
    assert data.n_actions == 4 and data.action_counts()[3] == 0
    for model in (LogisticRegression(), FrequencyClassifier(n_states=5)):
        fitted = fit_policy(model, data, clip=(0.01, 0.99))
        raw = fitted.raw_proba(data.states)
        assert raw.shape == (data.n, 4)
        np.testing.assert_array_equal(raw[:, 3], 0.0)
        np.testing.assert_allclose(raw.sum(axis=1), 1.0, atol=1e-12)
        p = fitted.proba(data.states)
        clipped = np.clip(raw, 0.01, 0.99)
        np.testing.assert_allclose(p, clipped / clipped.sum(axis=1, keepdims=True), rtol=0, atol=1e-15)
        np.testing.assert_allclose(p[:, 3], 0.01 / clipped.sum(axis=1), rtol=0, atol=1e-15)
        np.testing.assert_allclose(fitted.log_proba(data.states), np.log(p), rtol=0, atol=1e-15)
    # a middle code missing too (labels 'a'..'d', 'b' never taken)
    data = from_arrays([0, 0, 0, 1, 1, 1], ["a", "a", "d", "c", "c", "d"], np.zeros(6),
                       action_labels=["a", "b", "c", "d"])
    raw = fit_policy(FrequencyClassifier(), data).raw_proba(np.array([0.0, 1.0]))
    np.testing.assert_allclose(raw, [[2 / 3, 0, 0, 1 / 3], [0, 0, 2 / 3, 1 / 3]], atol=1e-15)


class _FakeClassifier:
    """Fits nothing and returns a fixed ``predict_proba`` output."""

    def __init__(self, output="scores"):
        self.output = output

    def get_params(self, deep=True):
        return {"output": self.output}

    def set_params(self, **params):
        self.output = params.get("output", self.output)
        return self

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def predict_proba(self, X):
        n, K = len(X), len(self.classes_)
        out = np.full((n, K), 1.0 / K)
        if self.output == "scores":
            out[:, 0] = 3.5
        elif self.output == "negative":
            out[:, 0] -= 0.5
            out[:, 1] += 0.5
        elif self.output == "nan":
            out[0, 0] = np.nan
        elif self.output == "unnormalized":
            out *= 0.8
        elif self.output == "1d":
            out = out[:, 0]
        elif self.output == "wrong-shape":
            out = out[:, :-1]
        return out


@pytest.mark.parametrize(
    "output, message",
    [
        ("scores", r"policy_model\.predict_proba returned values outside \[0, 1\]"),
        ("negative", r"policy_model\.predict_proba returned values outside \[0, 1\]"),
        ("nan", r"policy_model\.predict_proba returned NaN"),
        ("unnormalized", r"policy_model\.predict_proba rows do not sum to 1"),
        ("1d", r"policy_model\.predict_proba returned shape \(\d+,\)"),
        ("wrong-shape", r"policy_model\.predict_proba returned shape \(\d+, 2\), expected \(\d+, 3\)"),
    ],
)
def test_predict_proba_outputs_that_are_not_probabilities(output, message):
    data = _tabular_data()
    fitted = fit_policy(_FakeClassifier(output), data)
    for call in (fitted.raw_proba, fitted.proba, fitted.log_proba, fitted.training_raw_proba):
        with pytest.raises(ValueError, match=message):
            call(data.states)
    np.testing.assert_allclose(fit_policy(_FakeClassifier("ok"), data).raw_proba(data.states), 1 / 3)


# ---------------------------------------------------------------------------- cross-fitting
def test_cross_fit_rows_scored_by_the_model_that_did_not_see_their_episode():
    data = _tabular_data(seed=3, n_episodes=15)
    fitted = fit_policy(FrequencyClassifier(n_states=5), data, cross_fit=3, random_state=7)
    assert isinstance(fitted, FittedPolicy) and len(fitted.models) == 3
    folds = data.episode_folds(3, random_state=7)
    out_of_fold = fitted.training_raw_proba(data.states)
    assert out_of_fold.shape == (data.n, 3)
    new_states = np.arange(5.0)[:, None]
    manual_new = []
    for k, (train, test) in enumerate(folds):
        np.testing.assert_array_equal(np.flatnonzero(fitted.fold_of_row == k), np.sort(test))
        # refit by hand on the complement of fold k
        manual = FrequencyClassifier(n_states=5).fit(data.states[train], data.actions[train])
        expected = np.zeros((test.size, 3))
        expected[:, manual.classes_] = manual.predict_proba(data.states[test])
        np.testing.assert_allclose(out_of_fold[test], expected, rtol=0, atol=1e-15)
        full = np.zeros((5, 3))
        full[:, manual.classes_] = manual.predict_proba(new_states)
        manual_new.append(full)
    # each episode lies in one fold
    for e in np.unique(data.episode_ids):
        assert np.unique(fitted.fold_of_row[data.episode_ids == e]).size == 1
    # the out-of-fold scores differ from in-sample ones: the test above has teeth
    in_sample = fit_policy(FrequencyClassifier(n_states=5), data).raw_proba(data.states)
    assert np.abs(out_of_fold - in_sample).max() > 0.05
    # new states: the average of the fold models, then clipping
    mean = np.mean(manual_new, axis=0)
    np.testing.assert_allclose(fitted.raw_proba(new_states), mean, rtol=0, atol=1e-15)
    clipped = np.clip(mean, *DEFAULT_CLIP)
    np.testing.assert_allclose(fitted.proba(new_states), clipped / clipped.sum(axis=1, keepdims=True),
                               rtol=0, atol=1e-15)
    np.testing.assert_allclose(fitted.proba(new_states, fold=1), clip_proba(manual_new[1])[0], rtol=0, atol=1e-15)
    # out-of-fold at other rows aligned with training (e.g. the next states)
    nxt = fitted.training_raw_proba(data.next_states)
    for k, (_, test) in enumerate(folds):
        np.testing.assert_allclose(nxt[test], fitted.raw_proba(data.next_states[test], fold=k), rtol=0, atol=1e-15)


def test_cross_fit_reproducible_and_validated():
    data = _tabular_data(seed=1)
    a = fit_policy(FrequencyClassifier(n_states=5), data, cross_fit=4, random_state=0)
    b = fit_policy(FrequencyClassifier(n_states=5), data, cross_fit=4, random_state=0)
    np.testing.assert_array_equal(a.fold_of_row, b.fold_of_row)
    np.testing.assert_array_equal(a.training_raw_proba(data.states), b.training_raw_proba(data.states))
    with pytest.raises(ValueError, match="n_splits"):
        fit_policy(FrequencyClassifier(), data, cross_fit=1)
    with pytest.raises(ValueError, match="episode folds"):
        fit_policy(FrequencyClassifier(), data, cross_fit=data.n_episodes + 1)
    with pytest.raises(ValueError, match="states has 3 rows"):
        a.training_raw_proba(data.states[:3])


# ---------------------------------------------------------------------------- statistical recovery
def test_logistic_regression_recovers_softmax_policy():
    """Multinomial logistic regression on a softmax-linear policy: held-out mean log loss
    within 0.02 of the true policy's (n = 4000 train rows, seed 0; the excess risk is about
    (number of parameters) / (2 n) = 16 / 8000)."""
    rng = np.random.default_rng(0)
    d, K, n = 3, 4, 4000
    W, b = rng.normal(size=(d, K)), rng.normal(size=K)

    def sample(m):
        X = rng.normal(size=(m, d))
        logits = X @ W + b
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        a = (rng.random(m)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
        return X, a, p

    X, a, _ = sample(n)
    X_test, a_test, p_test = sample(n)
    labels = np.array(["n", "e", "s", "w"])
    data = from_arrays(X, labels[a], X, episode_ids=np.arange(n) // 20, action_labels=labels)
    fitted = fit_policy(LogisticRegression(C=100.0, max_iter=1000), data, clip=None)
    rows = np.arange(n)
    true_loss = -np.mean(np.log(p_test[rows, a_test]))
    model_loss = -np.mean(fitted.log_proba(X_test)[rows, a_test])
    assert model_loss - true_loss < 0.02, (model_loss, true_loss)
    assert abs(model_loss - true_loss) < 0.02

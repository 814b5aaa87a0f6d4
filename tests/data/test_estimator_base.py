"""``LightEstimator`` keeps scikit-learn's estimator contract to the letter (issue 31): each
behaviour is compared with the same class written on ``sklearn.base.BaseEstimator``; scikit-learn's
own tools (clone, Pipeline, GridSearchCV, the estimator checks) work on it; and the package's
cloning of light estimators imports no scikit-learn."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, clone as sklearn_clone, is_classifier
from sklearn.exceptions import NotFittedError as SklearnNotFittedError
from sklearn.model_selection import GridSearchCV, GroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.estimator_checks import (check_estimator_cloneable, check_get_params_invariance,
                                            check_no_attributes_set_in_init, check_set_params)

from genpqr.data._estimator_base import (LightClassifierMixin, LightEstimator, check_classification_targets,
                                         check_is_fitted, clone)
from genpqr.data._transitions import group_folds
from genpqr.stage1 import FrequencyClassifier

SRC = Path(__file__).resolve().parents[2] / "src"


def _twins(bases_light, bases_sklearn, body):
    """The same class on the light base and on scikit-learn's."""
    return type("Model", bases_light, dict(body)), type("Model", bases_sklearn, dict(body))


def _init(self, alpha=1.0, inner=None, steps=(1, 2), name="a", values=None, *, tol=1e-4):
    self.alpha = alpha
    self.inner = inner
    self.steps = steps
    self.name = name
    self.values = values
    self.tol = tol


def _inner_init(self, depth=3, seed=None):
    self.depth = depth
    self.seed = seed


LightModel, SkModel = _twins((LightEstimator,), (BaseEstimator,), {"__init__": _init})
LightInner, SkInner = _twins((LightEstimator,), (BaseEstimator,), {"__init__": _inner_init})


def _pairs():
    long = list(range(40))
    return [
        (LightModel(), SkModel()),
        (LightModel(alpha=2.5, tol=1e-3), SkModel(alpha=2.5, tol=1e-3)),
        (LightModel(inner=LightInner(depth=7)), SkModel(inner=SkInner(depth=7))),
        (LightModel(inner=LightInner(seed=3), values=long, name="x" * 90),
         SkModel(inner=SkInner(seed=3), values=long, name="x" * 90)),
        (LightModel(values={"b": LightInner(), "a": [1, 2]}, steps=(LightInner(depth=1),)),
         SkModel(values={"b": SkInner(), "a": [1, 2]}, steps=(SkInner(depth=1),))),
    ]


@pytest.mark.parametrize("pair", range(len(_pairs())))
def test_params_repr_and_clone_are_scikit_learns(pair):
    light, sk = _pairs()[pair]
    assert repr(light) == repr(sk)
    assert light.__repr__(N_CHAR_MAX=40) == sk.__repr__(N_CHAR_MAX=40)
    assert list(light.get_params()) == list(sk.get_params())
    assert list(light.get_params(deep=False)) == list(sk.get_params(deep=False))
    for copy in (clone(light), sklearn_clone(light)):
        assert type(copy) is type(light) and copy is not light and repr(copy) == repr(light)
        inner = copy.get_params(deep=False)["inner"]
        assert inner is None or inner is not light.inner


def test_pickling_keeps_the_instance_dict():
    from genpqr import GenPQR

    model = FrequencyClassifier(smoothing=2.0).fit(np.array([0, 1, 1, 2]), np.array([0, 1, 0, 1]))
    back = pickle.loads(pickle.dumps(model))
    assert repr(back) == repr(model) and np.array_equal(back.table_, model.table_)
    assert set(model.__getstate__()) == set(vars(model)) == {"n_states", "smoothing", "classes_", "counts_",
                                                             "table_", "n_states_", "n_features_in_"}
    estimator = pickle.loads(pickle.dumps(GenPQR(policy_model=model, gamma=0.5)))
    assert np.array_equal(estimator.policy_model.table_, model.table_) and estimator.gamma == 0.5


def test_set_params_nested_and_its_errors_as_scikit_learn_s():
    light, sk = LightModel(inner=LightInner()), SkModel(inner=SkInner())
    assert light.set_params(alpha=3, inner__depth=9) is light
    sk.set_params(alpha=3, inner__depth=9)
    assert repr(light) == repr(sk) and light.inner.depth == 9
    assert light.set_params() is light
    for bad in ({"beta": 1}, {"inner__beta": 1}):
        with pytest.raises(ValueError) as mine:
            light.set_params(**bad)
        with pytest.raises(ValueError) as theirs:
            sk.set_params(**bad)
        name = next(iter(bad)).partition("__")[2] or next(iter(bad))  # the unknown name, both name it
        assert repr(name) in str(mine.value) and repr(name) in str(theirs.value)
        owner = light.inner if "__" in next(iter(bad)) else light
        assert f"{type(owner).__name__} has no parameter {name!r}" in str(mine.value)
        assert repr(owner._get_param_names()) in str(mine.value)  # and list the valid ones
    with pytest.raises(AttributeError):  # a nested key on a None parameter, as scikit-learn
        LightModel().set_params(inner__depth=1)


def test_the_contract_s_refusals():
    class Varargs(LightEstimator):
        def __init__(self, *args):
            self.args = args

    class Modifies(LightEstimator):
        def __init__(self, alpha=(1.0,)):
            self.alpha = list(alpha)  # a copy: not the object passed

    with pytest.raises(RuntimeError, match="no varargs"):
        Varargs().get_params()
    with pytest.raises(RuntimeError, match="does not set or modifies parameter alpha"):
        clone(Modifies(alpha=[1]))
    with pytest.raises(RuntimeError, match="does not set or modifies parameter alpha"):
        sklearn_clone(Modifies(alpha=[1]))


def test_scikit_learn_tools_work_on_light_estimators():
    assert is_classifier(FrequencyClassifier()) and not is_classifier(LightModel())
    assert FrequencyClassifier._estimator_type == "classifier"
    rng = np.random.default_rng(0)
    X = rng.integers(0, 4, 200)[:, None]
    y = (rng.random(200) < 0.2 + 0.2 * X[:, 0]).astype(int)
    search = GridSearchCV(FrequencyClassifier(n_states=4), {"smoothing": [0.0, 1.0, 5.0]}, cv=3).fit(X, y)
    assert search.best_params_["smoothing"] in (0.0, 1.0, 5.0) and 0.0 <= search.best_score_ <= 1.0
    assert search.best_estimator_.score(X, y) == pytest.approx(np.mean(search.best_estimator_.predict(X) == y))
    pipe = make_pipeline(FunctionTransformer(lambda v: v), FrequencyClassifier(n_states=4)).fit(X, y)
    assert pipe.predict_proba(X).shape == (200, 2)
    assert pipe.get_params()["frequencyclassifier__n_states"] == 4
    clf = FrequencyClassifier(n_states=4)
    check_estimator_cloneable("FrequencyClassifier", clf)
    check_no_attributes_set_in_init("FrequencyClassifier", clf)
    check_get_params_invariance("FrequencyClassifier", clf)
    check_set_params("FrequencyClassifier", clf)


def test_not_fitted_and_targets_checks_match_scikit_learn():
    with pytest.raises(SklearnNotFittedError, match="this FrequencyClassifier is not fitted yet; call fit first"):
        check_is_fitted(FrequencyClassifier(), "table_")
    from sklearn.utils.multiclass import check_classification_targets as theirs

    for y in (np.array([0, 1, 1]), np.array(["a", "b"]), np.array([True, False]), np.array([0.0, 1.0]),
              np.array([0.5, 1.5]), np.array([[0, 1], [1, 0]])):
        outcomes = []
        for check in (check_classification_targets, theirs):
            try:
                check(y)
                outcomes.append(None)
            except ValueError as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1], y


def test_a_classifier_mixin_scores_accuracy():
    class Constant(LightClassifierMixin, LightEstimator):
        def __init__(self, label=1):
            self.label = label

        def predict(self, X):
            return np.full(len(X), self.label)

    class SkConstant(ClassifierMixin, BaseEstimator):
        def __init__(self, label=1):
            self.label = label

        def predict(self, X):
            return np.full(len(X), self.label)

    X, y, w = np.zeros((4, 1)), np.array([1, 1, 0, 1]), np.array([1.0, 1.0, 2.0, 0.0])
    assert Constant().score(X, y) == SkConstant().score(X, y) == 0.75
    assert Constant().score(X, y, sample_weight=w) == SkConstant().score(X, y, sample_weight=w)
    assert Constant().__sklearn_tags__() == SkConstant().__sklearn_tags__()
    assert LightModel().__sklearn_tags__() == SkModel().__sklearn_tags__()


@pytest.mark.parametrize("groups", [np.repeat(np.arange(17), 5), np.arange(40) % 13 * 1.0,
                                    np.array(list("abcdefgabcdefh"))])
@pytest.mark.parametrize("n_splits", [2, 3, 5])
@pytest.mark.parametrize("seed", [0, 11])
def test_group_folds_are_group_k_fold_s(groups, n_splits, seed):
    for random_state in (seed, np.random.RandomState(seed)):
        mine = group_folds(groups, n_splits, random_state)
        theirs = GroupKFold(n_splits, shuffle=True, random_state=np.random.RandomState(seed) if not isinstance(
            random_state, int) else seed).split(np.zeros((groups.size, 1)), groups=groups)
        for (train, test), (train2, test2) in zip(mine, theirs, strict=True):
            assert np.array_equal(train, train2) and np.array_equal(test, test2)


def test_cloning_a_light_estimator_imports_no_scikit_learn():
    script = ("import sys, json, pickle\nfrom genpqr import GenPQR\nfrom genpqr.data._validation import clone_learner\n"
              "from genpqr.stage1 import FrequencyClassifier\n"
              "m = GenPQR(policy_model=FrequencyClassifier(smoothing=1.0), gamma=0.5)\n"
              "c = clone_learner(m)\nassert c is not m and c.policy_model is not m.policy_model\n"
              "assert c.get_params(deep=False).keys() == m.get_params(deep=False).keys()\n"
              "pickle.loads(pickle.dumps(c)).set_params(policy_model__smoothing=2.0)\n"
              "print(json.dumps(sorted(n for n in ('sklearn', 'scipy.stats') if n in sys.modules)))")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []

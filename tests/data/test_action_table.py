"""genpqr.data.ActionTable (labels -> features): validation with named errors, the action set
it gives the transitions (K includes actions never taken, in the table's order), and round
trips through pandas."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import genpqr
from genpqr import GenPQR
from genpqr.data import ActionTable, FiniteActions, from_arrays, from_pandas
from genpqr.data._action_table import as_action_table
from genpqr.exceptions import (ActionFeatureError, ActionTableError, DuplicateActionLabelError,
                               MissingActionLabelError)
from genpqr.stage1 import ConditionalLogit

S = np.array([0.0, 1.0, 0.0, 1.0, 1.0, 0.0])
A = np.array(["a", "b", "a", "c", "b", "a"])
FEATURES = {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 1.0], "new": [2.0, -1.0]}


def _table(**changes):
    labels = changes.get("labels", list(FEATURES))
    features = changes.get("features", np.array(list(FEATURES.values())))
    return ActionTable(labels, features)


def _data(table=None, actions=A):
    return from_arrays(S, actions, np.roll(S, -1), episode_ids=[0, 0, 0, 1, 1, 1],
                       action_features=_table() if table is None else table)


def _bad_features():
    features = np.array(list(FEATURES.values()))
    features[2, 1] = np.nan
    return features


def _bad_dimension():
    model = GenPQR(gamma=0.5, policy_model=ConditionalLogit(action_features=np.eye(4)), q_model="lstd")
    return model.fit(_data())


def _no_table():
    return GenPQR(gamma=0.5, policy_model=ConditionalLogit(), q_model="lstd").fit(from_arrays(S, A, np.roll(S, -1)))


def _other_labels():
    table = ActionTable(["a", "b", "c", "zzz"], np.ones((4, 2)))
    return GenPQR(gamma=0.5, policy_model=ConditionalLogit(action_features=table), q_model="lstd").fit(_data())


def _two_tower_dimension():
    from genpqr.models import TwoTowerClassifier

    pytest.importorskip("torch")
    model = GenPQR(gamma=0.5, policy_model=TwoTowerClassifier(action_features=np.eye(4), max_epochs=1),
                   q_model="lstd")
    return model.fit(_data())


def _lstd_rows():
    from genpqr.normalization import anchor_action
    from genpqr.stage2 import LSTDQ

    return GenPQR(anchor_action("a"), gamma=0.5, policy_model=ConditionalLogit(),
                  q_model=LSTDQ(encoding="action_features", action_features=np.eye(3))).fit(_data())


# (case, callable, error, fragments the message must contain)
BAD_INPUTS = [
    ("duplicate labels", lambda: _table(labels=["a", "b", "a", "new"]), DuplicateActionLabelError, ["'a'"]),
    ("NaN feature", lambda: _table(features=_bad_features()), ActionFeatureError, ["NaN/inf", "'c'"]),
    ("inf feature", lambda: ActionTable([1, 2], [[0.0], [np.inf]]), ActionFeatureError, ["NaN/inf", "2"]),
    ("rows != labels", lambda: ActionTable([1, 2, 3], np.ones((2, 2))), ActionTableError, ["(3, d >= 1)", "(2, 2)"]),
    ("label of the data missing", lambda: _data(actions=np.where(A == "c", "zebra", A)), MissingActionLabelError,
     ["'zebra'", "does not list"]),
    ("table and action_labels", lambda: from_arrays(S, A, S, action_labels=["a", "b", "c"],
                                                    action_features=_table()), ValueError, ["not both"]),
    ("ragged mapping", lambda: as_action_table({"a": [1.0], "b": [1.0, 2.0]}), ActionFeatureError,
     ["same length"]),
    ("model's feature dimension", _bad_dimension, ActionFeatureError, ["(4, 4)", "(4, 2)"]),
    ("two tower's feature dimension", _two_tower_dimension, ActionFeatureError, ["TwoTowerClassifier", "(4, 4)",
                                                                                 "(4, 2)"]),
    ("LSTD pair features, rows", _lstd_rows, ActionTableError, ["3 rows", "4 actions"]),
    ("model's table, other labels", _other_labels, ActionTableError, ["'zzz'", "same labels"]),
    ("feature model, no table", _no_table, ActionTableError, ["no action table", "action_features="]),
]


@pytest.mark.parametrize("case, make, error, fragments", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_action_tables_raise_named_errors(case, make, error, fragments):
    with pytest.raises(error) as info:
        make()
    assert isinstance(info.value, ValueError)  # every named error is a ValueError
    for fragment in fragments:
        assert fragment in str(info.value), (case, str(info.value))


def test_the_table_fixes_the_action_set_and_keeps_never_taken_actions():
    data = _data()
    assert data.action_labels.tolist() == ["a", "b", "c", "new"]  # the table's order
    assert data.n_actions == 4 and data.taken_actions().tolist() == [True, True, True, False]
    np.testing.assert_array_equal(data.labels_of(), A)
    np.testing.assert_array_equal(data.action_space.features, np.array(list(FEATURES.values())))
    assert "2 feature(s)" in data.action_space.describe()
    # subsets, bootstrap resamples and folds keep the table (and K)
    for part in (data[[0, 1]], data.subset(np.array([5, 5, 0])), data.split_episodes(0.5, random_state=0)[0]):
        assert part.action_table == data.action_table and part.n_actions == 4
    # the features are part of the data's identity
    other = _data(_table(features=np.array(list(FEATURES.values())) * 2))
    assert other.fingerprint() != data.fingerprint()


def test_without_a_table_nothing_changes():
    data = from_arrays(S, A, np.roll(S, -1))
    assert data.action_table is None and data.action_labels.tolist() == ["a", "b", "c"]
    assert data.action_space == FiniteActions(np.array(["a", "b", "c"]))


def test_table_round_trips_through_pandas_and_from_pandas():
    table = ActionTable(["a", "b", "c", "new"], np.array(list(FEATURES.values())), ("price", "quality"))
    frame = table.to_pandas()
    assert frame.columns.tolist() == ["action", "price", "quality"]
    assert ActionTable.from_pandas(frame, label="action") == table
    assert as_action_table(frame.set_index("action")) == table
    assert as_action_table(FEATURES) == ActionTable(list(FEATURES), np.array(list(FEATURES.values())))
    np.testing.assert_array_equal(table.features_of(["c", "a"]), [[1.0, 1.0], [1.0, 0.0]])
    long = pd.DataFrame({"episode": [0, 0, 0, 1, 1, 1], "time": [0, 1, 2, 0, 1, 2], "s": S, "action": A})
    data = from_pandas(long, episode="episode", time="time", state="s", action="action",
                       action_features=frame.set_index("action"))
    assert data.action_table == table and data.n_actions == 4
    np.testing.assert_array_equal(data.labels_of(), A)
    assert genpqr.ActionTable is ActionTable


class _CountedLabel:
    """A label that counts the comparisons made with it (hashable, ordered)."""

    comparisons = 0

    def __init__(self, k):
        self.k = k

    def __hash__(self):
        return hash(self.k)

    def __eq__(self, other):
        _CountedLabel.comparisons += 1
        return isinstance(other, _CountedLabel) and self.k == other.k

    def __lt__(self, other):
        return self.k < other.k


def test_label_checks_are_linear_in_the_number_of_actions():
    """The label checks of a table of K actions against labels taken (issue 33: 1e5 items took
    minutes, comparing every label with every other): comparisons O(K), not O(K^2), counted, not
    timed. The table's own checks and the coverage of every label, then of a data set's few."""
    K = 3000
    labels = np.empty(K, dtype=object)
    labels[:] = [_CountedLabel(k) for k in range(K)]
    _CountedLabel.comparisons = 0
    table = ActionTable(labels, np.arange(K, dtype=float))
    table.check_covers(labels)  # every label: the wide fit checks its own action set
    taken = labels[[0, 17, 2999]]
    data = from_arrays(np.zeros(3), taken, np.zeros(3), action_features=table)
    assert data.n_actions == K
    assert _CountedLabel.comparisons < 20 * K, _CountedLabel.comparisons  # pairwise: K^2 = 9e6
    with pytest.raises(MissingActionLabelError, match="does not list"):
        table.check_covers(np.array([_CountedLabel(K + 1)], dtype=object))
    numbers = ActionTable(np.array([1, 2, 3]), np.arange(3.0))
    numbers.check_covers(np.array([3.0, 1.0]))  # equality as ==: 3.0 is the label 3
    with pytest.raises(MissingActionLabelError, match=r"\['3'\]"):
        numbers.check_covers(np.array(["3"]))

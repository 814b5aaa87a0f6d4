"""genpqr.stage1's choice counts per (state, action) cell: the counts against a plain loop, the
distinct rows against numpy's, when counting pays, and first stages fitted on the counts against
the same models fitted on the rows (exact identities: the same objective; integer weights are
repeated rows)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

import genpqr
from genpqr import GenPQR, normalization as N
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.stage1 import FrequencyClassifier, SplineLogit
from genpqr.stage1._cells import FitOnCells, choice_cells, distinct_rows, repeated_rows
from genpqr.stage1._policy import fit_policy
from genpqr.stage1 import _cells
from genpqr.stage1._cells import ChoiceCells

GAMMA = 0.9


def _rows(monkeypatch):
    """Make every fit and prediction use the rows (no state repeats enough to count)."""
    monkeypatch.setattr(_cells, "COMPRESS_SHARE", 0.0)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 60), st.integers(1, 6), st.integers(2, 5), st.integers(1, 3), st.booleans(), st.integers(0, 99))
def test_choice_cells_are_the_weighted_counts_of_a_loop(n, n_states, K, d, weighted, seed):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, n_states, size=(n, d)).astype(np.float64)
    a = rng.integers(0, K, size=n)
    w = rng.uniform(0, 2, size=n) * (rng.random(n) > 0.2) if weighted else None
    cells = choice_cells(X, a, K, w)
    expected = {}
    for i in range(n):
        key = (tuple(X[i]), int(a[i]))
        expected[key] = expected.get(key, 0.0) + (1.0 if w is None else w[i])
    got = {(tuple(cells.states[s]), int(k)): v for s, k, v in zip(cells.state, cells.action, cells.weight)}
    assert got.keys() == expected.keys()  # a cell whose rows all weigh 0 is kept, with weight 0
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12)
    assert isinstance(cells, ChoiceCells) and cells.n_rows == n and cells.n_cells == len(expected)
    keys = cells.state * K + cells.action
    assert np.all(np.diff(keys) > 0)  # sorted by state, then action
    np.testing.assert_allclose(cells.state_weights().sum(), n if w is None else w.sum(), rtol=1e-12)
    np.testing.assert_allclose(cells.table().sum(axis=1), cells.state_weights(), rtol=1e-12, atol=1e-12)


def test_distinct_rows_agree_with_numpy_and_rebuild_the_rows():
    rng = np.random.default_rng(0)
    for X in (rng.integers(0, 7, size=(500, 3)).astype(float), rng.integers(0, 40, size=(300, 1)).astype(float),
              rng.normal(size=(200, 2)).round(1), np.array([[2.5], [0.5], [2.5]]), rng.integers(0, 9, size=(50, 1))):
        distinct, index = distinct_rows(X)
        np.testing.assert_array_equal(distinct, np.unique(X, axis=0))
        np.testing.assert_array_equal(distinct[index], X)
    distinct, index = distinct_rows(np.zeros((0, 2)))
    assert distinct.shape == (0, 2) and index.shape == (0,)


def test_repeated_rows_only_when_counting_pays():
    rng = np.random.default_rng(1)
    assert repeated_rows(rng.normal(size=(10_000, 2))) is None  # continuous: decided from the first rows
    assert repeated_rows(rng.normal(size=(100, 1))) is None
    tabular = rng.integers(0, 50, size=(10_000, 1)).astype(float)
    distinct, index = repeated_rows(tabular)
    assert distinct.shape == (50, 1) and np.array_equal(distinct[index], tabular)
    assert repeated_rows(np.arange(10.0)[:, None]) is None  # every state once
    assert repeated_rows(np.zeros((1, 1))) is None


def _choices(n=4000, S=12, K=30, d=3, seed=0):
    """Tabular states, K actions with d features, choices from a conditional logit per state."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(K, d))
    theta = 0.7 * rng.normal(size=(S, d))
    s = rng.integers(0, S, size=n)
    z = theta[s] @ x.T
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = (p.cumsum(axis=1) > rng.random(n)[:, None]).argmax(axis=1)
    return x, s.astype(np.float64)[:, None], y


BASES = [dict(state_basis="onehot", n_states=12), dict(state_basis="none"),
         dict(state_basis=lambda X: np.column_stack([X[:, 0], X[:, 0] ** 2]) / 10.0)]


@pytest.mark.parametrize("basis", BASES, ids=["onehot", "none", "callable"])
@pytest.mark.parametrize("weighted", [False, True])
def test_conditional_logit_on_counts_is_the_fit_on_rows(basis, weighted, monkeypatch):
    x, X, y = _choices()
    w = np.random.default_rng(5).uniform(0.2, 3.0, size=y.size) if weighted else None
    counts = genpqr.stage1.ConditionalLogit(x, C=2.0, progress=False, **basis).fit(X, y, sample_weight=w)
    assert counts.n_fit_units_ == 12  # the distinct states
    with monkeypatch.context() as m:
        _rows(m)
        rows = genpqr.stage1.ConditionalLogit(x, C=2.0, progress=False, **basis).fit(X, y, sample_weight=w)
        assert rows.n_fit_units_ == y.size
        grid = np.arange(12.0)[:, None]
        np.testing.assert_allclose(counts.predict_proba(grid), rows.predict_proba(grid), atol=1e-6, rtol=0)
    np.testing.assert_allclose(counts.coef_, rows.coef_, atol=1e-5)
    # predictions on repeated rows are made once per state and spread: the same numbers
    np.testing.assert_allclose(counts.predict_log_proba(X[:300]),
                               counts.predict_log_proba(grid)[X[:300, 0].astype(int)], atol=1e-12)
    np.testing.assert_allclose(counts.predict_log_proba_at(X, y), counts.predict_log_proba(X)[np.arange(y.size), y],
                               atol=1e-12)
    np.testing.assert_array_equal(counts.predict(X[:50]), counts.predict_proba(X[:50]).argmax(axis=1))


def test_conditional_logit_integer_weights_are_repeated_rows():
    x, X, y = _choices(n=1500)
    k = np.random.default_rng(2).integers(0, 4, size=y.size)  # 0 drops a row
    repeated = np.repeat(np.arange(y.size), k)
    for basis in BASES[:2]:
        weighted = genpqr.stage1.ConditionalLogit(x, progress=False, **basis).fit(X, y, sample_weight=k)
        copies = genpqr.stage1.ConditionalLogit(x, progress=False, **basis).fit(X[repeated], y[repeated])
        np.testing.assert_array_equal(weighted.coef_, copies.coef_)  # the same counts: bit for bit


def test_conditional_logit_linear_basis_on_repeated_states(monkeypatch):
    """Two discrete state columns with the standardized linear basis (standardized on the rows, as
    before): counts and rows give the same fit."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(20, 2))
    X = rng.integers(0, 4, size=(3000, 2)).astype(float)
    z = np.column_stack([np.ones(3000), X]) @ np.array([[0.5, -0.3], [0.4, 0.2], [-0.2, 0.6]]) @ x.T
    p = np.exp(z - z.max(axis=1, keepdims=True))
    y = (np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1) > rng.random(3000)[:, None]).argmax(axis=1)
    counts = genpqr.stage1.ConditionalLogit(x, C=np.inf, progress=False).fit(X, y)
    assert counts.n_fit_units_ == 16
    with monkeypatch.context() as m:
        _rows(m)
        rows = genpqr.stage1.ConditionalLogit(x, C=np.inf, progress=False).fit(X, y)
    np.testing.assert_allclose(counts.predict_proba(X[:40]), rows.predict_proba(X[:40]), atol=1e-6, rtol=0)


@pytest.mark.parametrize("weighted", [False, True])
def test_spline_logit_on_counts_is_the_fit_on_rows(weighted, monkeypatch):
    rng = np.random.default_rng(4)
    X = rng.integers(0, 25, size=(3000, 1)).astype(float)
    p = 1 / (1 + np.exp(-(X[:, 0] - 12) / 4))
    y = np.where(rng.random(3000) < p, "replace", "keep")
    w = rng.uniform(0, 2, size=3000) if weighted else None
    counts = SplineLogit(n_knots=4, C=10.0, tol=1e-10).fit(X, y, sample_weight=w)
    with monkeypatch.context() as m:
        _rows(m)
        rows = SplineLogit(n_knots=4, C=10.0, tol=1e-10).fit(X, y, sample_weight=w)
        grid = np.arange(25.0)[:, None]
        expected = rows.predict_proba(grid)
    np.testing.assert_array_equal(counts.classes_, rows.classes_)
    np.testing.assert_allclose(counts.predict_proba(grid), expected, atol=1e-6, rtol=0)
    np.testing.assert_allclose(counts.predict_proba(X), expected[X[:, 0].astype(int)], atol=1e-6, rtol=0)


def test_fit_on_cells_is_the_multinomial_logit_on_rows():
    """The one-hot multinomial logit of tabular states (``genpqr fit --policy-model logistic``)
    on the counts: the fit on the rows, to the solver's tolerance; integer weights are repeated rows."""
    rng = np.random.default_rng(6)
    X = rng.integers(0, 15, size=(5000, 1)).astype(float)
    y = np.array(["a", "b", "c", "d"])[(rng.random(5000) * (1 + X[:, 0] % 4)).astype(int) % 4]
    logit = make_pipeline(OneHotEncoder(handle_unknown="ignore"), LogisticRegression(max_iter=5000, tol=1e-10))
    rows = logit.fit(X, y)
    cells = FitOnCells(logit).fit(X, y)
    assert cells.n_cells_ <= 15 * 4 and cells.describe().endswith("fitted on the (state, action) counts")
    np.testing.assert_array_equal(cells.classes_, rows.classes_)
    np.testing.assert_allclose(cells.predict_proba(X), rows.predict_proba(X), atol=1e-6, rtol=0)
    k = rng.integers(0, 3, size=5000)
    again = np.repeat(np.arange(5000), k)
    np.testing.assert_allclose(FitOnCells(logit).fit(X, y, sample_weight=k).predict_proba(X[:20]),
                               FitOnCells(logit).fit(X[again], y[again]).predict_proba(X[:20]), atol=1e-12)
    with pytest.raises(TypeError, match="estimator must be a classifier"):
        FitOnCells(None).fit(X, y)


def _tabular_data(seed=0):
    mdp = random_mdp(8, 3, n_next=3, gamma=GAMMA, random_state=seed)
    policy = np.random.default_rng(seed).dirichlet(np.ones(3), size=8)
    policy[2] = [0.0, 0.5, 0.5]  # an action never taken at state 2: a probability 0 for cell frequencies
    return simulate_tabular(mdp, policy / policy.sum(axis=1, keepdims=True), 300, 15, random_state=seed + 1)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("cross_fit", [None, 4])
def test_policy_probabilities_and_the_auto_clip_once_per_distinct_state(cross_fit, monkeypatch):
    """The fitted policy at the training rows (out of fold), its auto clip and the estimator's
    diagnostics computed once per distinct (fold, state) equal the row-by-row ones."""
    data = _tabular_data()
    w = np.random.default_rng(7).uniform(0.5, 2.0, size=data.n)
    weighted = genpqr.from_arrays(data.states, data.actions, data.next_states, terminated=data.terminated,
                                  truncated=data.truncated, episode_ids=data.episode_ids, sample_weight=w)
    for d in (data, weighted):
        policy = fit_policy(FrequencyClassifier(8), d, clip="auto", cross_fit=cross_fit, random_state=0)
        table = policy.training_table(d.states)
        assert table.index is not None and table.values.shape[0] <= 8 * (cross_fit or 1)
        est = GenPQR(N.mean_zero(), gamma=GAMMA, q_model="exact", policy_model=FrequencyClassifier(8),
                     cross_fit=cross_fit, random_state=0, transition_model="counts").fit(d)
        with monkeypatch.context() as m:
            _rows(m)
            by_rows = fit_policy(FrequencyClassifier(8), d, clip="auto", cross_fit=cross_fit, random_state=0)
            assert by_rows.training_table(d.states).index is None
            np.testing.assert_array_equal(table.rows(), by_rows.training_raw_proba(d.states))
            ref = GenPQR(N.mean_zero(), gamma=GAMMA, q_model="exact", policy_model=FrequencyClassifier(8),
                         cross_fit=cross_fit, random_state=0, transition_model="counts").fit(d)
        assert policy.clip == by_rows.clip and policy.clip_rule == by_rows.clip_rule
        assert policy.clip[0] > 0  # the auto clip floors the untaken action
        for field in ("support_count", "policy_log_loss", "fraction_clipped", "fraction_floored", "max_mu_over_pi",
                      "coverage_share", "clip"):
            assert getattr(est.diagnostics_, field) == pytest.approx(getattr(ref.diagnostics_, field), rel=1e-12), field
        assert est.diagnostics_.clip_rule == ref.diagnostics_.clip_rule
        assert est.diagnostics_.warnings == ref.diagnostics_.warnings
        np.testing.assert_allclose(est.reward_table().values, ref.reward_table().values, atol=1e-12)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_progress_of_the_conditional_logit_follows_the_estimator(capsys, monkeypatch):
    """A bar over the L-BFGS iterations on stderr (here at once: no 2-second delay), silent with
    ``progress=False``; a model left at ``progress=None`` takes GenPQR's ``progress``."""
    from genpqr.stage1 import ConditionalLogit, _stage1

    monkeypatch.setattr(_stage1, "PROGRESS_DELAY", 0.0)
    x, X, y = _choices(n=500)
    ConditionalLogit(x, state_basis="onehot", n_states=12, progress=False).fit(X, y)
    assert capsys.readouterr().err == ""
    ConditionalLogit(x, state_basis="onehot", n_states=12, progress=True).fit(X, y)
    assert "conditional logit" in capsys.readouterr().err
    data = genpqr.from_arrays(X[:, 0].astype(int), y, np.roll(X[:, 0].astype(int), -1),
                              episode_ids=np.repeat(np.arange(50), 10), action_features=genpqr.ActionTable(
                                  np.arange(30), x))
    for progress, shown in ((False, False), (True, True)):
        GenPQR(N.mean_zero(), gamma=GAMMA, q_model="exact", n_states=12, cross_fit=2, progress=progress,
               transition_model="counts", random_state=0,
               policy_model=ConditionalLogit(state_basis="onehot", n_states=12)).fit(data)
        err = capsys.readouterr().err
        assert ("conditional logit" in err) is shown and ("policy folds" in err) is shown

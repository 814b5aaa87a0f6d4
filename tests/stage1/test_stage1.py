"""The one stage-1 interface (genpqr.stage1.FittedStage1): a classifier (finite actions) and a
conditional density (continuous actions) give ``u`` through the same methods, cross-fitted by the
same helper, and GenPQR's two paths read ``u`` and the clipped share through it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression

import genpqr
from genpqr import normalization as N
from genpqr.actions import GaussianReference, LinearGaussianDensity
from genpqr.stage1._policy import FittedDensity, FittedPolicy, fit_stage1
from genpqr.stage1._stage1 import FittedStage1
from genpqr.stage2 import FQE
from genpqr.estimator import ContinuousOptions


def _finite_data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(n, 2))
    a = (s[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(int) + (s[:, 1] > 1).astype(int)
    s2 = 0.7 * s + 0.3 * rng.normal(size=(n, 2))
    return genpqr.from_arrays(s, a, s2, episode_ids=np.arange(n) // 20)


def _box_data(n=600, seed=1):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(n, 1))
    a = 0.5 * s + 0.4 * rng.normal(size=(n, 1))
    s2 = 0.8 * s + 0.5 * a + 0.3 * rng.normal(size=(n, 1))
    return genpqr.from_arrays(s, a, s2, action_space="box", episode_ids=np.arange(n) // 20)


def test_both_stage_one_results_share_the_interface():
    finite = fit_stage1(LogisticRegression(), _finite_data(), clip=(0.05, 0.95), cross_fit=3, random_state=0)
    box = fit_stage1(LinearGaussianDensity(), _box_data(), cross_fit=3, random_state=0, min_log_density=-1.0)
    assert isinstance(finite, FittedPolicy) and isinstance(box, FittedDensity)
    for fitted in (finite, box):
        assert isinstance(fitted, FittedStage1) and fitted.cross_fitted and len(fitted.models) == 3
        assert set(np.unique(fitted.fold_of_row)) == {0, 1, 2}


def test_finite_log_policy_is_the_clipped_log_probability_out_of_fold():
    data = _finite_data()
    policy = fit_stage1(LogisticRegression(), data, clip=(0.05, 0.95), cross_fit=3, random_state=0)
    u_all = policy.log_policy(data.states)
    np.testing.assert_array_equal(u_all, policy.log_proba(data.states))
    rows = np.arange(data.n)
    np.testing.assert_array_equal(policy.log_policy(data.states, data.actions), u_all[rows, data.actions])
    u_oof, clipped = policy.training_log_policy(data.states, data.actions, return_clipped=True)
    by_hand = np.empty(data.n)
    for k, model in enumerate(policy.models):  # each row scored by the fold model that did not see it
        sel = policy.fold_of_row == k
        p = np.clip(model.predict_proba(data.states[sel]), 0.05, 0.95)
        p /= p.sum(axis=1, keepdims=True)
        by_hand[sel] = np.log(p[np.arange(sel.sum()), data.actions[sel]])
    np.testing.assert_allclose(u_oof, by_hand, rtol=0, atol=1e-12)
    assert policy.fraction_clipped(data.states, data.actions) == pytest.approx(np.mean(clipped))


def test_density_log_policy_subtracts_the_reference_and_clips():
    data = _box_data()
    ref = GaussianReference(0.0, 2.0)
    dens = fit_stage1(LinearGaussianDensity(), data, reference=ref, min_log_density=-1.5)
    raw = dens.log_prob(data.states, data.actions) - ref.log_density(data.actions)
    u, clipped = dens.log_policy(data.states, data.actions, return_clipped=True)
    np.testing.assert_array_equal(u, np.maximum(raw, -1.5))
    np.testing.assert_array_equal(clipped, raw < -1.5)
    assert 0 < clipped.mean() < 1
    assert dens.fraction_clipped(data.states, data.actions) == pytest.approx(clipped.mean())
    with pytest.raises(ValueError, match="cross-fitted on"):
        fit_stage1(LinearGaussianDensity(), data, cross_fit=2).training_log_policy(data.states[:5], data.actions[:5])


def test_prefit_needs_a_model_and_no_cross_fit():
    for data, model in ((_finite_data(), LogisticRegression()), (_box_data(), LinearGaussianDensity())):
        with pytest.raises(ValueError, match="policy_prefit=True needs a fitted policy_model"):
            fit_stage1(None, data, prefit=True)
        with pytest.raises(ValueError, match="and no cross_fit"):
            fit_stage1(model, data, prefit=True, cross_fit=2)


def test_genpqr_reads_u_and_the_clipped_share_through_stage_one():
    data = _finite_data()
    est = genpqr.GenPQR(normalization=N.anchor_action(0), q_model=FQE(LinearRegression(), n_iterations=5),
                        clip=(0.05, 0.95), random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(data)
    np.testing.assert_array_equal(est.log_policy(data.states), est.policy_.log_policy(data.states))
    assert est.diagnostics_.fraction_clipped == pytest.approx(est.policy_.fraction_clipped(data.states, data.actions))
    box = _box_data()
    est = genpqr.GenPQR(normalization=N.point_anchor(0.0), q_model=FQE(LinearRegression(), n_iterations=5),
                        random_state=0, continuous=ContinuousOptions(min_log_density=-1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(box)
    np.testing.assert_array_equal(est.log_policy(box.states, box.actions), est.policy_.log_policy(box.states, box.actions))
    assert est.diagnostics_.fraction_clipped == pytest.approx(est.policy_.fraction_clipped(box.states, box.actions))

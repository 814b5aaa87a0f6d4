"""Metrics against hand computations; the seed summary's formula; degenerate inputs."""

import math

import numpy as np
import pytest

from genpqr import evaluation
from genpqr.evaluation._metrics import anchor_count, mean_ci, summarize


def test_reward_mse_by_hand():
    assert evaluation.reward_mse([1.0, 2.0, 4.0], [1.0, 0.0, 1.0]) == pytest.approx((0 + 4 + 9) / 3, abs=1e-12)
    assert evaluation.reward_mse(np.zeros(4), np.zeros(4)) == 0.0


def test_reward_correlation_by_hand():
    est, tru = np.array([1.0, 2.0, 3.0, 5.0]), np.array([2.0, 1.0, 4.0, 3.0])
    de, dt = est - est.mean(), tru - tru.mean()
    by_hand = np.sum(de * dt) / math.sqrt(np.sum(de**2) * np.sum(dt**2))
    assert evaluation.reward_correlation(est, tru) == pytest.approx(by_hand, abs=1e-12)
    assert evaluation.reward_correlation(est, tru) == pytest.approx(np.corrcoef(est, tru)[0, 1], abs=1e-12)
    assert evaluation.reward_correlation(est, 3 * est - 1) == pytest.approx(1.0, abs=1e-12)
    assert evaluation.reward_correlation(est, -est) == pytest.approx(-1.0, abs=1e-12)


def test_constant_or_single_inputs_give_nan_correlation_without_crashing():
    assert math.isnan(evaluation.reward_correlation(np.ones(5), np.arange(5.0)))
    assert math.isnan(evaluation.reward_correlation(np.arange(5.0), np.full(5, 2.0)))
    assert math.isnan(evaluation.reward_correlation([1.0], [2.0]))
    assert evaluation.reward_mse(np.ones(5), np.arange(5.0)) == pytest.approx(np.mean((1 - np.arange(5.0)) ** 2))


@pytest.mark.parametrize("fn", [evaluation.reward_mse, evaluation.reward_correlation])
def test_length_mismatch_names_the_argument(fn):
    with pytest.raises(ValueError, match="estimate has 3 values but truth has 2"):
        fn([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="estimate must be finite"):
        fn([1.0, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="empty"):
        fn([], [])


def test_policy_nll_by_hand():
    p = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [0.25, 0.25, 0.5]])
    actions = np.array([0, 2, 1])
    expected = -(np.log(0.5) + np.log(0.8) + np.log(0.25)) / 3
    assert evaluation.policy_nll(np.log(p), actions) == pytest.approx(expected, abs=1e-12)


def test_policy_nll_rejects_bad_inputs():
    lp = np.log(np.full((2, 3), 1 / 3))
    with pytest.raises(ValueError, match="actions has 3 entries but log_policy has 2 rows"):
        evaluation.policy_nll(lp, [0, 1, 2])
    with pytest.raises(ValueError, match="actions must be integer codes in 0..2"):
        evaluation.policy_nll(lp, [0, 3])
    with pytest.raises(ValueError, match="actions must be integer codes"):
        evaluation.policy_nll(lp, [0.0, 1.0])
    with pytest.raises(ValueError, match="log_policy must hold log-probabilities"):
        evaluation.policy_nll(np.full((2, 3), 1 / 3), [0, 1])
    with pytest.raises(ValueError, match="log_policy must be a 2-D array"):
        evaluation.policy_nll(np.zeros(3), [0, 1, 2])


def test_mean_ci_formula():
    v = np.array([1.0, 2.0, 4.0, 7.0])
    sd = math.sqrt(np.sum((v - v.mean()) ** 2) / (len(v) - 1))
    mean, ci = mean_ci(v)
    assert mean == pytest.approx(3.5, abs=1e-12)
    assert ci == pytest.approx(1.96 * sd / math.sqrt(4), abs=1e-12)


def test_mean_ci_agrees_with_the_env_module_copy():
    from genpqr.envs._synthetic import seed_summary

    v = np.random.default_rng(0).normal(size=17)
    assert mean_ci(v) == pytest.approx(seed_summary(v), abs=1e-12)


def test_summaries_of_degenerate_inputs():
    one = summarize([2.5])
    assert one.mean == 2.5 and math.isnan(one.ci) and one.n == 1
    assert one.format(2) == "2.50"
    empty = summarize([])
    assert empty.n == 0 and empty.format() == "n/a"
    assert summarize([1.0, 1.0]).ci == 0.0
    omitted = summarize([1.0, np.nan, 3.0])
    assert (omitted.mean, omitted.n) == (2.0, 2)
    assert math.isnan(summarize([1.0, np.nan], nan_policy="propagate").mean)
    assert summarize([1.0, 3.0]).format(1) == f"2.0 ± {1.96 * math.sqrt(2) / math.sqrt(2):.1f}"
    with pytest.raises(ValueError, match="nan_policy"):
        summarize([1.0], nan_policy="raise")
    with pytest.raises(ValueError, match="1-D"):
        summarize(np.ones((2, 2)))


def test_anchor_count():
    assert anchor_count([0, 1, 0, 2, 0]) == 3
    assert anchor_count([0, 1, 0, 2, 0], anchor=2) == 1

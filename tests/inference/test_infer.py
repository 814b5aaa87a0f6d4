"""genpqr.inference.infer end to end on the exact tabular path: exact identities, the result
object, the diagnostics and their warning, and the refusals (the bad-input table)."""

import warnings

import numpy as np
import pandas as pd
import pytest

import genpqr
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.exceptions import InferenceWarning
from genpqr.inference import (InferenceResult, infer, policy_value, reward_at, reward_mean, reward_projection,
                              softmax_value, value_difference)
from genpqr.inference._infer import plug_in
from genpqr.normalization import anchor_action, behavior, mean_zero, value
from genpqr.stage1 import FrequencyClassifier
from genpqr.stage2 import soft_optimal_solution

S, K = 6, 3


@pytest.fixture(scope="module")
def panel():
    mdp = random_mdp(S, K, gamma=0.9, random_state=0)
    policy = soft_optimal_solution(mdp.reward, mdp.kernel, mdp.gamma).policy
    return simulate_tabular(mdp, policy, n_episodes=150, horizon=15, random_state=1)


def model_for(norm=None, **kw):
    kw.setdefault("policy_model", FrequencyClassifier(n_states=S))
    kw.setdefault("transition_model", "counts")
    kw.setdefault("clip", None)
    return genpqr.GenPQR(q_model="exact", normalization=norm or anchor_action(0), gamma=0.9, n_states=S, **kw)


TARGETS = [policy_value(np.full(K, 1 / K), reward="log_policy", name="V_u"),
           policy_value(np.full(K, 1 / K), gamma=0.7, name="V_rbar"),
           softmax_value([0, 2], 0.5, name="soft"),
           value_difference(np.full(K, 1 / K), name="diff"),
           reward_mean(name="mean"),
           reward_at([(0, 1), (3, 2)], name="cells"),
           reward_projection(np.random.default_rng(0).normal(size=(S, K, 2)), names=["a", "b"])]


def test_saturated_nuisances_without_splitting_give_the_plug_in(panel):
    """Cell frequencies and the count kernel are the nonparametric MLE: the influence function
    averages to zero at the data, so the one-step estimate is the plug-in (to rounding)."""
    model = model_for().fit(panel)
    res = infer(model, TARGETS, panel, cross_fit=None, warn=False)
    np.testing.assert_allclose(res.estimate, res.plug_in, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(res.plug_in, plug_in(model, TARGETS), rtol=1e-12)
    assert np.all(res.std_error > 0) and np.all(np.isfinite(res.cov))
    np.testing.assert_allclose(res.influence.mean(axis=0), 0.0, atol=1e-10)


def test_value_difference_under_u_is_the_model_own_difference(panel):
    """Thm 2: the plug-in difference under u equals GenPQR.policy_value_difference averaged over the rows."""
    model = model_for().fit(panel)
    uniform = np.full((S, K), 1 / K)
    res = infer(model, value_difference(uniform, "behavior"), panel, cross_fit=None, warn=False)
    by_state = model.policy_value_difference(uniform, np.exp(model.stage2_.recovery.log_policy))
    rho = np.bincount(panel.states[:, 0].astype(int), minlength=S) / panel.n
    np.testing.assert_allclose(res.plug_in[0], rho @ by_state, rtol=1e-10)


def test_cross_fitted_result_object(panel):
    model = model_for()
    res = infer(model, TARGETS, panel, cross_fit=3, random_state=0, warn=False)
    assert isinstance(res, InferenceResult)
    assert res.names == ["V_u", "V_rbar", "soft", "diff", "mean", "r(0, 1)", "r(3, 2)", "a", "b"]
    assert res.se_kind == "efficient influence function" and res.cross_fit == 3 and res.n_rows == panel.n
    assert not hasattr(model, "stage2_")  # the template is not fitted in place
    ci = res.conf_int(0.9)
    assert list(ci.columns) == ["lower", "upper"] and np.all(ci.lower < res.estimate) and np.all(res.estimate < ci.upper)
    z = 1.959963984540054
    np.testing.assert_allclose(res.conf_int().upper - res.estimate, z * res.std_error)
    assert res.folds.shape[0] == 3 * len(res.names) and res.folds.n_rows.groupby(res.folds.fold).first().sum() == panel.n
    frame = res.to_frame()
    assert {"estimate", "std_error", "std_error_kind", "ci_low", "ci_high", "plug_in", "correction_to_se",
            "effective_rows", "top_episode_share"} <= set(frame.columns)
    np.testing.assert_allclose(res.cov_params().to_numpy(), res.cov)
    np.testing.assert_allclose(np.sqrt(np.diag(res.cov)), res.std_error)
    text = str(res.summary())
    assert all(len(line) <= 100 for line in text.splitlines())
    assert "efficient influence function" in text and "plug-in" in text
    # the covariance is the influence function's, clustered by episode
    _, inv = np.unique(res.episode_ids, return_inverse=True)
    sums = np.zeros((inv.max() + 1, len(res.names)))
    np.add.at(sums, inv, res.influence)
    np.testing.assert_allclose(res.cov, sums.T @ sums / panel.n ** 2)


def test_difference_of_targets_matches_the_difference_of_components(panel):
    a, b = policy_value(np.full(K, 1 / K), reward="log_policy", name="a"), policy_value("behavior", reward="log_policy",
                                                                                      name="b")
    res = infer(model_for(), [a, b, a - b], panel, cross_fit=2, random_state=3, warn=False)
    np.testing.assert_allclose(res.estimate[2], res.estimate[0] - res.estimate[1], rtol=1e-10)
    c = np.array([1.0, -1.0, 0.0])
    np.testing.assert_allclose(res.std_error[2], np.sqrt(c @ res.cov @ c), rtol=1e-10)


def test_folds_reuse_the_full_fits_choices(panel):
    """With GenPQR's defaults (the first stage and the transition model chosen from the data) the
    folds refit the chosen ones: the same random_state gives the same answer."""
    model = genpqr.GenPQR(q_model="exact", normalization=anchor_action(0), gamma=0.9, n_states=S)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r1 = infer(model, TARGETS[:2], panel, cross_fit=2, random_state=5, warn=False)
        r2 = infer(model, TARGETS[:2], panel, cross_fit=2, random_state=5, warn=False)
    np.testing.assert_array_equal(r1.estimate, r2.estimate)


def test_thin_overlap_warns_and_names_the_target(panel):
    counts = panel.action_counts()
    rare = int(np.argmin(counts))
    greedy = np.zeros(K)
    greedy[rare] = 1.0
    # keep only a handful of rows that take the rare action
    keep = (panel.actions != rare) | (np.cumsum(panel.actions == rare) <= 3)
    thin = panel.subset(keep)
    with pytest.warns(InferenceWarning, match="V_thin.*thin overlap"):
        res = infer(model_for(clip=(1e-3, 1.0)), policy_value(greedy, reward="log_policy", name="V_thin"), thin,
                    cross_fit=None)
    assert res.warnings and "V_thin" in res.warnings[0]


def test_no_warning_on_a_well_supported_target(panel):
    with warnings.catch_warnings():
        warnings.simplefilter("error", InferenceWarning)
        infer(model_for(), TARGETS[:4], panel, cross_fit=2, random_state=0)


# ---------------------------------------------------------------------------- the bad-input table
@pytest.mark.parametrize("target, norm, match", [
    (policy_value(np.full(K, 1 / K), reward="log_policy", gamma=0.7), None, "only at the agent's discount"),
    (policy_value(np.full(K, 1 / K)), behavior(g=0.0), "weights by the estimated behaviour policy"),
    (reward_mean(), value(0.0, mu=anchor_action(0)), "offset .* is estimated"),
    (reward_at([(S - 1, 0)]), None, "no row visits"),
    (reward_at([(0, "nope")]), None, "nope"),
    (reward_at([(99, 0)]), None, "not a state index"),
    (policy_value(np.ones((S + 1, K)) / K), None, r"shape \(S, K\)"),
    (policy_value("optimal"), None, "must be 'behavior'"),
    (policy_value(np.array([0.5, 0.6, -0.1])), None, "non-negative and sum to 1"),
    (reward_projection(np.ones((S + 1, K, 2))), None, r"shape \(S, K\)"),
    (softmax_value([0], temperature=0.0), None, "temperature must be positive"),
])
def test_refusals_name_the_reason(panel, target, norm, match):
    data = panel
    if "no row visits" in match:
        data = panel.subset(panel.states[:, 0] != S - 1)
    with pytest.raises((ValueError, TypeError), match=match):
        infer(model_for(norm), target, data, cross_fit=None, warn=False)


def test_a_policy_on_an_action_the_data_never_shows_is_refused(panel):
    data = panel.subset(panel.actions != 2)
    for target in (policy_value(np.full(K, 1 / K), reward="log_policy"), softmax_value([0, 2]),
                   reward_at([(0, 2)])):
        with pytest.raises(ValueError, match="never shows"):
            infer(model_for(), target, data, cross_fit=None, warn=False)


@pytest.mark.parametrize("kwargs, match", [
    (dict(target="value"), "target must be a genpqr.inference target"),
    (dict(cross_fit=1), "cross_fit must be .auto., an integer >= 2"),
    (dict(cross_fit="many"), "cross_fit must be .auto., an integer >= 2"),
    (dict(level=1.5), r"level must be in \(0, 1\)"),
    (dict(riesz="neural"), "riesz must be"),
    (dict(data="rows"), "data must be genpqr.data.Transitions"),
    (dict(model="GenPQR"), "model must be a genpqr.GenPQR"),
])
def test_bad_arguments(panel, kwargs, match):
    args = dict(model=model_for(), target=reward_mean(), data=panel)
    args.update(kwargs)
    with pytest.raises((ValueError, TypeError), match=match):
        infer(args.pop("model"), args.pop("target"), args.pop("data"), **args)


def test_duplicate_component_names_are_refused(panel):
    with pytest.raises(ValueError, match="distinct names"):
        infer(model_for(), [reward_mean(), reward_mean()], panel, cross_fit=None)


def test_inputs_are_not_modified(panel):
    pi = np.full((S, K), 1 / K)
    before = pi.copy()
    states = panel.states.copy()
    infer(model_for(), policy_value(pi), panel, cross_fit=2, random_state=0, warn=False)
    np.testing.assert_array_equal(pi, before)
    np.testing.assert_array_equal(panel.states, states)


def test_rows_without_a_next_state(panel):
    """The last choice of an episode (no next state) carries no kernel information: it enters the
    policy's and the state law's terms, not the Bellman residuals. Saturated nuisances without
    splitting still give the plug-in."""
    last = np.r_[panel.episode_ids[1:] != panel.episode_ids[:-1], True]
    nxt = panel.next_states.copy()
    nxt[last] = np.nan
    data = genpqr.from_arrays(panel.states, panel.labels_of(), nxt, episode_ids=panel.episode_ids,
                              next_observed=~last)
    assert data.n_choice_only == last.sum() > 0
    res = infer(model_for(), TARGETS, data, cross_fit=None, warn=False)
    np.testing.assert_allclose(res.estimate, res.plug_in, rtol=1e-9, atol=1e-9)
    folded = infer(model_for(), TARGETS, data, cross_fit=3, random_state=0, warn=False)
    assert np.all(np.isfinite(folded.estimate)) and np.all(folded.std_error > 0)


def test_auto_cross_fit(panel):
    """``cross_fit="auto"``: no splitting with the tabular rule's first stage or cell frequencies,
    5 episode folds with another first stage."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    assert infer(model_for(), reward_mean(), panel, warn=False).cross_fit is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ruled = infer(genpqr.GenPQR(q_model="exact", normalization=anchor_action(0), gamma=0.9, n_states=S),
                      reward_mean(), panel, warn=False)
    assert ruled.cross_fit is None
    logit = make_pipeline(OneHotEncoder(handle_unknown="ignore"), LogisticRegression(C=1.0, max_iter=500))
    flexible = infer(model_for(policy_model=logit, clip="auto"), reward_mean(), panel, warn=False, random_state=0)
    assert flexible.cross_fit == 5 and flexible.folds.fold.nunique() == 5


# ---------------------------------------------------------------------------- GenPQR.infer
def test_the_estimator_method_is_the_function_on_its_own_rows(panel):
    """model.infer(target) == infer(model, target, its training data), the text forms equal the
    constructors, and a fitted model is not modified."""
    model = model_for().fit(panel)
    before = model.reward_table().to_numpy().copy()
    texts = ["value:uniform;gamma=0.7;name=V_rbar", "softmax:0|2;temperature=0.5;name=soft",
             "reward-at:0=1,3=2;name=cells"]
    by_text = model.infer(texts, cross_fit=2, random_state=3, warn=False)
    by_function = infer(model, [TARGETS[1], TARGETS[2], TARGETS[5]], panel, cross_fit=2, random_state=3, warn=False)
    assert by_text.names == by_function.names == ["V_rbar", "soft", "r(0, 1)", "r(3, 2)"]
    np.testing.assert_allclose(by_text.estimate, by_function.estimate, rtol=1e-12)
    np.testing.assert_allclose(by_text.cov, by_function.cov, rtol=1e-12)
    pd.testing.assert_series_equal(by_text.params, by_function.params)
    assert list(by_text.conf_int().columns) == ["lower", "upper"] and "std err" in str(by_text.summary())
    np.testing.assert_array_equal(model.reward_table().to_numpy(), before)
    one = model.infer(TARGETS[0], cross_fit=None, warn=False)
    assert one.names == ["V_u"] and one.se_kind == "efficient influence function"

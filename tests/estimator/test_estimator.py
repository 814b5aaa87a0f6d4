"""GenPQR end to end: exact and FQE paths, renormalize, value differences, errors."""

import dataclasses

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.svm import LinearSVC
from sklearn.utils.estimator_checks import check_get_params_invariance, check_no_attributes_set_in_init

import genpqr
from genpqr import GenPQR, from_arrays, normalization as N, stage2 as T
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.exceptions import ClippingWarning, NotFittedError, WeakSupportWarning
from genpqr.stage1 import FrequencyClassifier
from genpqr.stage2 import FQE, TabularQModel

S, K, GAMMA = 10, 3, 0.9
GRID = np.arange(S, dtype=float)[:, None]


@pytest.fixture(scope="module")
def logged():
    mdp = random_mdp(S, K, n_next=4, gamma=GAMMA, random_state=7)
    sol = T.soft_optimal_solution(mdp.reward, mdp.kernel, GAMMA)
    data = simulate_tabular(mdp, sol.policy, n_episodes=400, horizon=20, random_state=8, outcome_noise=0.1)
    return mdp, sol, data


def onehot_regressor(n_states=S):
    """Least squares on one-hot states: exact per-state means (a saturated tabular model)."""
    return make_pipeline(OneHotEncoder(categories=[np.arange(n_states, dtype=float)], sparse_output=False),
                         LinearRegression(fit_intercept=False))


def fqe_model(norm, n_iterations=300, tol=1e-10, **kw):
    kw.setdefault("offset_model", onehot_regressor())
    return GenPQR(norm, gamma=GAMMA, q_model=FQE(TabularQModel(S), n_iterations=n_iterations, tol=tol),
                  policy_model=FrequencyClassifier(S), clip=None, **kw)


def exact_model(norm, **kw):
    return GenPQR(norm, gamma=GAMMA, q_model="exact", clip=None, **kw)


def normalizations(rng):
    return {
        "anchor": N.anchor_action(2),
        "anchor-g": N.anchor_action(0, g=rng.normal(size=S)),
        "state-anchor": N.state_anchor(rng.integers(0, K, size=S)),
        "mean-zero": N.mean_zero(),
        "weighted": N.weighted(rng.dirichlet(np.ones(K), size=S), g=0.5),
        "value": N.value(rng.normal(size=S)),
        "behavior": N.behavior(g=rng.normal(size=S)),
    }


def test_exact_path_equals_tabular_recovery_on_estimates(logged):
    _, _, data = logged
    model = exact_model(N.mean_zero()).fit(data)
    kernel, _ = T.estimate_transitions(data.states, data.actions, data.next_states, S, K)
    u = np.log(FrequencyClassifier(S).fit(data.states, data.actions).predict_proba(GRID))
    rec = T.recover_reward(u, kernel, GAMMA, N.mean_zero())
    assert np.max(np.abs(model.reward(GRID) - rec.reward)) < 1e-12
    assert np.max(np.abs(model.continuation(GRID) - rec.continuation)) < 1e-12
    assert np.max(np.abs(model.q(GRID) - rec.q)) < 1e-12
    assert np.max(np.abs(model.log_policy(GRID) - u)) < 1e-12
    assert np.allclose(model.reward(GRID, actions=np.zeros(S, int)), rec.reward[:, 0])
    assert model.reward_table().shape == (S, K)


@pytest.mark.parametrize("name", ["anchor", "anchor-g", "state-anchor", "mean-zero", "weighted", "value", "behavior"])
def test_fqe_path_matches_exact_path(logged, name):
    _, _, data = logged
    norm = normalizations(np.random.default_rng(0))[name]
    exact = exact_model(norm).fit(data)
    fqe = fqe_model(norm).fit(data)
    for what in ("reward", "q", "continuation"):
        assert np.max(np.abs(getattr(fqe, what)(GRID) - getattr(exact, what)(GRID))) < 1e-7, what


@pytest.mark.parametrize("path", ["exact", "fqe"])
def test_renormalize_equals_direct_fit(logged, path):
    _, _, data = logged
    norms = normalizations(np.random.default_rng(1))
    make = exact_model if path == "exact" else fqe_model
    base = make(norms["anchor"]).fit(data)
    before = base.reward(GRID).copy()
    for name, norm in norms.items():
        moved = base.renormalize(norm)
        direct = make(norm).fit(data)
        assert np.max(np.abs(moved.reward(GRID) - direct.reward(GRID))) < 1e-8, name
        assert np.max(np.abs(np.sum(moved.stage2_.mu(GRID) * moved.reward(GRID), 1) - moved.stage2_.g(GRID))) < 1e-8
        assert moved.policy_ is base.policy_  # stage 1 re-used, not refitted
    assert np.array_equal(base.reward(GRID), before)  # the original is untouched


def test_policy_value_differences_identified_from_u(logged):
    _, _, data = logged
    rng = np.random.default_rng(2)
    pi1, pi2 = rng.dirichlet(np.ones(K), size=S), rng.dirichlet(np.ones(K), size=S)
    model = exact_model(N.anchor_action(0)).fit(data)
    diff = model.policy_value_difference(pi1, pi2)
    kernel = model.stage2_.kernel
    for norm in (N.anchor_action(0), N.mean_zero(g=1.0), N.value(2.0)):
        r_star = model.renormalize(norm).reward(GRID)
        v1 = T.policy_evaluation(r_star, pi1, kernel, GAMMA)[1]
        v2 = T.policy_evaluation(r_star, pi2, kernel, GAMMA)[1]
        assert np.max(np.abs((v1 - v2) - diff)) < 1e-8
    sample = fqe_model(N.anchor_action(0)).fit(data).policy_value_difference(pi1, pi2, states=GRID)
    assert np.max(np.abs(sample - diff)) < 1e-7
    # a normalization's mu works as a policy too
    d2 = model.policy_value_difference(N.anchor_action(0), N.mean_zero())
    assert d2.shape == (S,)


@pytest.mark.slow
def test_sample_path_mse_falls_with_n():
    """Logged data from 3 random MDPs; frequency and one-hot logistic policies, exact and
    FQE stage 2. Tolerance: mean MSE over (s, a) below 0.15 at n = 1e5 (measured ~0.06)."""
    S_, K_ = 15, 3
    results = {}
    for seed in range(3):
        mdp = random_mdp(S_, K_, n_next=4, gamma=GAMMA, random_state=seed)
        sol = T.soft_optimal_solution(mdp.reward, mdp.kernel, GAMMA)
        norm = N.anchor_action(0)
        truth = T.normalized_reward(mdp.reward, mdp.kernel, GAMMA, norm)
        grid = np.arange(S_, dtype=float)[:, None]
        for n in (1_000, 10_000, 100_000):
            data = simulate_tabular(mdp, sol.policy, n_episodes=n // 20, horizon=20, random_state=seed + 100)
            logistic = make_pipeline(OneHotEncoder(categories=[np.arange(S_, dtype=float)], sparse_output=False),
                                     LogisticRegression(C=100.0, max_iter=2000))
            models = {
                "frequency+exact": GenPQR(norm, gamma=GAMMA, q_model="exact", n_states=S_),
                "logistic+fqe": GenPQR(norm, gamma=GAMMA, q_model=FQE(TabularQModel(S_), n_iterations=300, tol=1e-8),
                                       policy_model=logistic),
            }
            for name, model in models.items():
                mse = np.mean((model.fit(data).reward(grid) - truth) ** 2)
                results.setdefault(name, {}).setdefault(n, []).append(mse)
    for name, by_n in results.items():
        means = [np.mean(by_n[n]) for n in (1_000, 10_000, 100_000)]
        assert means[0] > 3 * means[1] > 9 * means[2], (name, means)
        assert means[2] < 0.15, (name, means)


def test_behavior_normalization_from_outcomes(logged):
    """g = E[y|s] from outcome data, mu = pi: the pi-average reward matches the data."""
    mdp, sol, data = logged
    model = exact_model(N.behavior()).fit(data)
    s = data.states[:, 0].astype(int)
    means = np.bincount(s, weights=data.outcomes, minlength=S) / np.bincount(s, minlength=S)
    pi_r = np.sum(model.stage2_.mu(GRID) * model.reward(GRID), axis=1)
    assert np.max(np.abs(pi_r - means)) < 1e-10
    truth = T.normalized_reward(mdp.reward, mdp.kernel, GAMMA, N.behavior(g=np.sum(sol.policy * mdp.reward, 1)))
    assert np.mean((model.reward(GRID) - truth) ** 2) < 0.5
    fqe = fqe_model(N.behavior()).fit(data)
    assert np.max(np.abs(fqe.reward(GRID) - model.reward(GRID))) < 1e-7


def test_continuous_states_with_default_models():
    """Smoke test of the sample path on continuous states with the default learners."""
    rng = np.random.default_rng(0)
    n = 600
    states = rng.normal(size=(n, 2))
    logits = np.c_[states[:, 0], -states[:, 0], 0.5 * states[:, 1]]
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    actions = np.array(["left", "right", "stay"])[(p.cumsum(1) > rng.random((n, 1))).argmax(1)]
    next_states = states + rng.normal(scale=0.1, size=states.shape)
    data = from_arrays(states, actions, next_states, episode_ids=np.repeat(np.arange(60), 10))
    from sklearn.ensemble import HistGradientBoostingRegressor

    default = GenPQR(N.anchor_action("stay"), gamma=0.8, random_state=0)
    former = GenPQR(N.anchor_action("stay"), gamma=0.8, random_state=0,  # the former defaults
                    policy_model=make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
                    q_model=FQE(HistGradientBoostingRegressor(max_iter=100), n_iterations=20, tol=None))
    for model, iterations in ((default.fit(data), 1), (former.fit(data), 20)):  # LSTD: one solve; FQE: 20
        r = model.reward(states[:5])
        assert r.shape == (5, 3) and np.all(np.isfinite(r))
        assert np.allclose(model.reward(states[:5], actions=["stay"] * 5), 0.0)
        assert model.diagnostics_.support_count == int(np.sum(actions == "stay"))
        assert len(model.diagnostics_.bellman_residuals) == iterations
    assert default.diagnostics_.solver == "lstd" and former.diagnostics_.solver == "fqe"


def test_cross_fitting_on_the_exact_path_serves_the_diagnostics_only(logged):
    """Exact path: the reward, the clip and log pi_hat come from one full-sample stage 1 whatever
    cross_fit is; the fold models give the out-of-fold log loss, by hand here. FQE keeps using
    the out-of-fold probabilities."""
    _, _, data = logged
    crossed = exact_model(N.mean_zero(), cross_fit=3, random_state=0).fit(data)
    plain = exact_model(N.mean_zero()).fit(data)
    assert len(crossed.policy_.models) == 1 and len(crossed.policy_folds_.models) == 3 and plain.policy_folds_ is None
    np.testing.assert_array_equal(crossed.reward(GRID), plain.reward(GRID))
    np.testing.assert_array_equal(crossed.log_policy(GRID), plain.log_policy(GRID))
    assert crossed.diagnostics_.clip == plain.diagnostics_.clip
    assert crossed.diagnostics_.policy_log_loss_kind == "out-of-fold" and plain.diagnostics_.policy_log_loss_kind \
        == "in-sample"
    loss = 0.0
    for train, test in data.episode_folds(3, random_state=0):  # each fold scored by the other folds' frequencies
        p = FrequencyClassifier(S).fit(data.states[train], data.actions[train]).predict_proba(data.states[test])
        loss -= np.sum(np.log(p[np.arange(test.size), data.actions[test]]))
    assert abs(crossed.diagnostics_.policy_log_loss - loss / data.n) < 1e-12
    assert crossed.diagnostics_.policy_log_loss > plain.diagnostics_.policy_log_loss
    fqe = fqe_model(N.mean_zero(), cross_fit=3, random_state=0).fit(data)
    assert len(fqe.policy_.models) == 3 and fqe.policy_folds_ is None and np.all(np.isfinite(fqe.reward(GRID)))
    assert fqe.diagnostics_.policy_log_loss_kind == "out-of-fold"


def test_diagnostics(logged):
    _, _, data = logged
    model = exact_model(N.anchor_action(1)).fit(data)
    d = model.diagnostics_
    assert d.support_count == int(np.sum(data.actions == 1))
    assert d.action_counts == {a: int(np.sum(data.actions == a)) for a in range(K)}
    assert d.max_mu_over_pi >= 1.0
    u = model.log_policy(data.states)
    assert np.isclose(d.policy_log_loss, -np.mean(u[np.arange(data.n), data.actions]))
    assert np.isclose(model.policy_log_loss(data), d.policy_log_loss)
    assert "GenPQR fit" in str(model.summary())
    assert set(d.to_dict()) >= {"policy_log_loss", "fraction_clipped", "max_mu_over_pi", "bellman_residuals"}


def test_summary_is_an_object_and_diagnostics_print_short(logged):
    _, _, data = logged
    model = exact_model(N.anchor_action(1), cross_fit=3, random_state=0).fit(data)
    s, d = model.summary(), model.diagnostics_
    text = str(s)
    assert text == s.as_text() == repr(s) and text.splitlines()[0].startswith("GenPQR fit:")
    assert [line.split(":")[0].strip() for line in text.splitlines()[1:]] == [label for label, _ in s.lines]
    assert "  first stage: frequency: cell frequencies" in text  # no n_states, no increment kernel: not ordered
    figures = s.to_frame().set_index("quantity")["value"]
    assert figures["policy_log_loss"] == d.policy_log_loss and figures["first_stage"] == "frequency"
    assert figures["policy_log_loss_kind"] == "out-of-fold" and figures["n_choices"] == data.n
    html = s._repr_html_()
    assert html.startswith("<table>") and html.count("<tr>") == len(s.lines) and "first stage" in html
    short = repr(d)
    assert short == str(d) and short.startswith("Diagnostics(") and len(short.splitlines()) <= 10
    assert max(len(line) for line in short.splitlines()) <= 100
    assert f"policy_log_loss={d.policy_log_loss:.4g}" in short and f"support_count={d.support_count}" in short
    long = dataclasses.replace(d, bellman_residuals=list(np.linspace(1.0, 0.0, 500)), unvisited_states=list(range(300)),
                               action_counts={f"a{k}": k for k in range(40)})
    text = repr(long)
    assert "bellman_residuals=[500 values: 1, ..., 0]" in text and "unvisited_states=[300 values: 0, ..., 299]" in text
    assert "action_counts={40 entries}" in text and len(text) < 1000
    table = d.to_frame().set_index("field")["value"]
    assert table["support_count"] == d.support_count and table["clip"] == d.clip and "bellman_residuals" not in table


def test_first_stage_is_recorded_and_a_given_policy_model_used_as_is(logged):
    _, _, data = logged
    given = exact_model(N.mean_zero(), policy_model=FrequencyClassifier(S)).fit(data)
    assert given.first_stage_.name == "given" and "FrequencyClassifier" in given.first_stage_.reason
    auto = exact_model(N.mean_zero()).fit(data)
    assert auto.first_stage_.name == "frequency" and "cells are well filled" in auto.first_stage_.reason
    np.testing.assert_array_equal(auto.reward(GRID), given.reward(GRID))
    fqe = fqe_model(N.mean_zero(), n_iterations=3).fit(data)
    assert fqe.first_stage_.name == "given"


def test_weak_support_and_clipping_warnings(logged):
    _, _, data = logged
    with pytest.warns(WeakSupportWarning, match="weak support"):
        exact_model(N.anchor_action(0), min_support=10**6).fit(data)
    with pytest.warns(ClippingWarning, match="clip bounds"):
        GenPQR(N.mean_zero(), gamma=GAMMA, q_model="exact", clip=(0.4, 0.5)).fit(data)


# --------------------------------------------------------------------------- errors
def test_clear_errors(logged):
    _, _, data = logged
    with pytest.raises(TypeError, match="policy_model must be a probabilistic classifier"):
        GenPQR(policy_model=LinearSVC(), q_model="exact").fit(data)
    with pytest.raises(TypeError, match="data must be genpqr.data.Transitions"):
        GenPQR().fit(np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"gamma must be in \[0, 1\)"):
        GenPQR(gamma=1.0, q_model="exact").fit(data)
    with pytest.raises(TypeError, match="gamma must be a real number"):
        GenPQR(gamma="0.9", q_model="exact").fit(data)
    with pytest.raises(ValueError, match="q_model must be 'exact'"):
        GenPQR(q_model="fast").fit(data)
    with pytest.raises(TypeError, match="normalization must be a genpqr Normalization"):
        GenPQR("anchor", q_model="exact").fit(data)
    with pytest.raises(ValueError, match="never saw"):
        GenPQR(N.anchor_action(9), q_model="exact").fit(data)
    with pytest.raises(NotFittedError, match="not fitted"):
        GenPQR().reward(GRID)
    model = exact_model(N.mean_zero()).fit(data)
    with pytest.raises(ValueError, match="never saw"):
        model.reward(GRID, actions=np.full(S, 7))
    with pytest.raises(ValueError, match="states must have 1 column"):
        model.reward(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="states must be finite"):
        model.reward(np.array([[np.nan]]))
    with pytest.raises(ValueError, match="mu must be a distribution"):
        GenPQR(N.weighted(lambda s: np.full((len(s), K), 0.5)), q_model="exact").fit(data)


def test_zero_probabilities_without_clipping_are_refused():
    states = np.array([0.0, 0.0, 1.0, 1.0])
    data = from_arrays(states, [0, 1, 0, 0], states[::-1])
    with pytest.raises(ValueError, match="probability 0 to some action"):
        GenPQR(q_model="exact", clip=None, min_support=1).fit(data)


def test_single_action_is_refused():
    states = np.arange(4.0)
    with pytest.raises(ValueError, match="only one action"):
        GenPQR(q_model="exact").fit(from_arrays(states, ["go"] * 4, states))


def test_anchor_action_absent_from_data():
    states = np.arange(6.0)
    data = from_arrays(states, ["a", "b", "a", "b", "a", "b"], (states + 1) % 6, action_labels=["a", "b", "c"])
    with pytest.raises(ValueError, match=r"anchor action\(s\) \['c'\] that never occur in the data"):
        GenPQR(N.anchor_action("c"), q_model="exact").fit(data)
    with pytest.raises(ValueError, match=r"action\(s\) \['c'\] that never occur"):
        GenPQR(N.mean_zero(), q_model="exact").fit(data)


def test_outcome_normalization_needs_outcomes():
    states = np.arange(6.0)
    data = from_arrays(states, [0, 1, 0, 1, 0, 1], (states + 1) % 6)
    with pytest.raises(ValueError, match="no outcomes"):
        GenPQR(N.behavior(), q_model="exact", min_support=1).fit(data)


# --------------------------------------------------------------------------- contract
def test_sklearn_contract():
    est = GenPQR(N.anchor_action(0), q_model=TabularQModel(3), policy_model=FrequencyClassifier())
    check_no_attributes_set_in_init("GenPQR", est)
    check_get_params_invariance("GenPQR", est)
    cloned = clone(est)
    assert cloned.get_params()["gamma"] == 0.9 and cloned.q_model is not est.q_model


def test_fit_returns_self_does_not_modify_inputs_and_is_reproducible(logged):
    _, _, data = logged
    before = {k: np.array(getattr(data, k)) for k in ("states", "actions", "next_states")}
    model = GenPQR(N.mean_zero(), gamma=GAMMA, q_model=FQE(TabularQModel(S), n_iterations=5, tol=None),
                   policy_model=FrequencyClassifier(S), cross_fit=3, random_state=1)
    assert model.fit(data) is model
    for k, v in before.items():
        assert np.array_equal(getattr(data, k), v)
    again = clone(model).fit(data)
    assert np.array_equal(model.reward(GRID), again.reward(GRID))


def test_save_and_load(tmp_path, logged):
    _, _, data = logged
    model = fqe_model(N.anchor_action(0), n_iterations=20, tol=None).fit(data)
    path = tmp_path / "model.joblib"
    model.save(path)
    loaded = genpqr.load(path)
    assert np.array_equal(loaded.reward(GRID), model.reward(GRID))
    import joblib

    from genpqr.exceptions import UntrustedFileError

    # user closures (a lambda g) and data-driven offsets are saved too
    lam = GenPQR(N.mean_zero(g=lambda s: 0.1 * s[:, 0]), gamma=GAMMA, q_model="exact", clip=None).fit(data)
    lam.save(tmp_path / "lambda.joblib")
    assert np.allclose(genpqr.load(tmp_path / "lambda.joblib").reward(GRID), lam.reward(GRID))
    joblib.dump({"not": "a model"}, tmp_path / "other.joblib")
    with pytest.raises(UntrustedFileError, match="no genpqr header"):
        genpqr.load(tmp_path / "other.joblib")  # not signed: refused before it is unpickled
    with pytest.raises(TypeError, match="does not hold a GenPQR model"):
        genpqr.load(tmp_path / "other.joblib", trusted=True)


def test_policy_prefit_shares_one_estimate(logged):
    _, _, data = logged
    policy = FrequencyClassifier(S).fit(data.states, data.actions)
    table = policy.table_.copy()
    a = GenPQR(N.anchor_action(0), gamma=GAMMA, q_model="exact", policy_model=policy, policy_prefit=True,
               clip=None).fit(data)
    b = exact_model(N.anchor_action(0)).fit(data)
    assert a.policy_.models[0] is policy and np.array_equal(policy.table_, table)
    assert np.max(np.abs(a.reward(GRID) - b.reward(GRID))) < 1e-12
    with pytest.raises(ValueError, match="policy_prefit=True needs"):
        GenPQR(policy_model=policy, policy_prefit=True, cross_fit=3, q_model="exact").fit(data)
    with pytest.raises(ValueError, match="not fitted"):
        GenPQR(policy_model=FrequencyClassifier(S), policy_prefit=True, q_model="exact").fit(data)


def test_transition_model_known_or_custom(logged):
    """A known kernel replaces the count estimate; with the true P and the true policy the
    exact path reproduces the truth exactly."""
    mdp, sol, data = logged

    class TruePolicy:
        classes_ = np.arange(K)

        def predict_proba(self, X):
            return sol.policy[np.asarray(X)[:, 0].astype(int)]

    norm = N.anchor_action(1)
    truth = T.normalized_reward(mdp.reward, mdp.kernel, GAMMA, norm)
    for model in (mdp.kernel, mdp.kernel.dense(), lambda d, s, k: mdp.kernel):
        fit = GenPQR(norm, gamma=GAMMA, q_model="exact", policy_model=TruePolicy(), policy_prefit=True, clip=None,
                     transition_model=model).fit(data)
        assert np.max(np.abs(fit.reward(GRID) - truth)) < 1e-10
    with pytest.raises(ValueError, match="transition_model has 4 states"):
        GenPQR(norm, q_model="exact", transition_model=np.full((4, K, 4), 0.25)).fit(data)


# --------------------------------------------------------------------------- the fitted state (issue 30)
def test_the_fitted_state_is_one_object_behind_read_only_attributes(logged):
    """``fit`` sets one :class:`~genpqr.estimator.FittedState` (``fitted_``); the fitted
    attributes are views of it, absent where the fit has no such part, and cannot be assigned;
    what a caller adds goes through a door that returns a new estimator."""
    from genpqr.estimator import FittedState
    from genpqr.estimator._state import STATE_FORMAT
    from genpqr.estimator._persistence import without_data
    from genpqr.stage1._first_stage import FirstStageChoice

    _, _, data = logged
    model = exact_model(N.anchor_action(0)).fit(data)
    state = model.fitted_
    assert isinstance(state, FittedState) and state.format == STATE_FORMAT and state.is_exact
    assert model.policy_ is state.policy and model.stage2_ is state.stage2 and model.gamma_ == GAMMA
    assert model.n_states_ == state.tabular.n_states == S and model.encoder_ is state.action_space
    assert model.n_actions_ == K and model.training_data_ is data and model.policy_folds_ is None
    for absent in ("type_models_", "reference_", "fqe_", "structural_", "saved_without_data_"):
        assert not hasattr(model, absent), absent
    with pytest.raises(AttributeError, match="read-only"):
        model.policy_ = None
    assert not hasattr(GenPQR(), "policy_") and not hasattr(GenPQR(), "fitted_")
    # the doors: a fit option, and copies holding the training data or a structural fit
    choice = FirstStageChoice("frequency", "requested by the caller")
    assert exact_model(N.anchor_action(0)).fit(data, first_stage=choice).first_stage_ is choice
    slim = without_data(model)
    assert not hasattr(slim, "training_data_") and slim.saved_without_data_ and model.training_data_ is data
    back = slim.with_training_data(data)
    assert back.training_data_ is data and not hasattr(slim, "training_data_")
    np.testing.assert_array_equal(back.renormalize(N.mean_zero()).reward(GRID),
                                  model.renormalize(N.mean_zero()).reward(GRID))
    with pytest.raises(ValueError, match="differs from the data of the fit"):
        slim.with_training_data(data[np.arange(data.n - 1)])
    fit = object()
    attached = model.with_structural(fit)
    assert attached.structural_ is fit and not hasattr(model, "structural_")
    assert attached.policy_ is model.policy_


def test_n_types_must_be_an_integer_of_at_least_one(logged):
    _, _, data = logged
    for bad in (True, 0, 1.0, "2"):
        with pytest.raises(ValueError, match="n_types must be an int >= 1"):
            exact_model(N.anchor_action(0), n_types=bad).fit(data)

"""FQE (Algorithm 2) against the exact linear solve on the empirical kernel."""

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, Ridge, SGDRegressor
from sklearn.neural_network import MLPRegressor
from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder
from sklearn.tree import DecisionTreeRegressor

from genpqr import normalization as N, stage2 as T
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.exceptions import ConvergenceWarning
from genpqr.stage2 import FQE, TabularQModel
from genpqr.stage2._qmodels import make_q_model
from genpqr.stage2._qmodels import warm_start_ok

S, K, GAMMA = 12, 3, 0.9


@pytest.fixture(scope="module")
def problem():
    """Logged data from a small MDP, and the exact Q on the empirical kernel."""
    mdp = random_mdp(S, K, n_next=4, gamma=GAMMA, random_state=3)
    sol = T.soft_optimal_solution(mdp.reward, mdp.kernel, GAMMA)
    data = simulate_tabular(mdp, sol.policy, n_episodes=300, horizon=20, random_state=4)
    kernel, counts = T.estimate_transitions(data.states, data.actions, data.next_states, S, K)
    assert counts.min() > 0
    out = {}
    for name, norm in {"anchor": N.anchor_action(1), "mean-zero": N.mean_zero(g=0.3),
                       "behavior": N.behavior(g=-0.2)}.items():
        rec = T.recover_reward(sol.log_policy, kernel, GAMMA, norm)
        s, s2 = data.states[:, 0].astype(int), data.next_states[:, 0].astype(int)
        out[name] = dict(rec=rec, reward=sol.log_policy[s, data.actions] - rec.g[s], next_mu=rec.mu[s2])
    return data, out


def run_fqe(data, case, regressor, n_iterations, next_reward=None, **kwargs):
    return FQE(regressor, n_iterations=n_iterations, tol=None, **kwargs).fit(
        data.states, data.actions, data.next_states, data.continues, case["reward"], case["next_mu"], GAMMA,
        next_reward=next_reward)


@pytest.mark.parametrize("norm", ["anchor", "mean-zero", "behavior"])
def test_tabular_fqe_converges_to_exact_solve(problem, norm):
    data, cases = problem
    grid = np.arange(S)[:, None]
    errors = {k: np.max(np.abs(run_fqe(data, cases[norm], TabularQModel(S), k).predict_q(grid) - cases[norm]["rec"].q))
              for k in (10, 50, 200)}
    assert errors[10] > errors[50] > errors[200]
    assert errors[200] < 1e-6


def test_sklearn_regressors_per_action_and_joint_match_exact(problem):
    """A one-hot linear model per action and a fully grown tree on [s, onehot(a)] are
    saturated tabular regressors: FQE with them is exact value iteration."""
    data, cases = problem
    case = cases["anchor"]
    grid = np.arange(S)[:, None].astype(float)
    onehot_lr = make_pipeline(OneHotEncoder(categories=[np.arange(S).astype(float)], sparse_output=False), LinearRegression(fit_intercept=False))
    q1 = run_fqe(data, case, onehot_lr, 200, encoding="per_action").predict_q(grid)
    q2 = run_fqe(data, case, DecisionTreeRegressor(random_state=0), 200, encoding="joint").predict_q(grid)
    assert np.max(np.abs(q1 - case["rec"].q)) < 1e-6
    assert np.max(np.abs(q2 - case["rec"].q)) < 1e-6


def _next_reward(data, case):
    """``sum_a' mu(a'|s') (u(s', a') - g(s'))`` at the logged next states, from the exact recovery."""
    rec, s2 = case["rec"], data.next_states[:, 0].astype(int)
    return np.sum(rec.mu[s2] * (rec.log_policy[s2] - rec.g[s2][:, None]), axis=1)


@pytest.mark.parametrize("norm", ["anchor", "mean-zero", "behavior"])
def test_continuation_structure_reaches_the_exact_solve(problem, norm):
    """Regressing only ``f = P mu Q`` (finite actions) has the same fixed point as regressing Q:
    with the saturated cell-mean model, ``base + gamma f`` is the exact Q to 1e-8, and the
    per-iteration diagnostics are on the scale of Q (they match the direct iteration's, which
    runs the same Bellman operator from Q_0 = 0 shifted by one step)."""
    data, cases = problem
    case, grid = cases[norm], np.arange(S)[:, None]
    base = case["rec"].log_policy - case["rec"].g[:, None]
    fqe = run_fqe(data, case, TabularQModel(S), 300, next_reward=_next_reward(data, case))
    assert fqe.continuation_
    np.testing.assert_allclose(fqe.predict_q(grid, base=base), case["rec"].q, atol=1e-8, rtol=0)
    direct = run_fqe(data, case, TabularQModel(S), 300, structure="direct", next_reward=_next_reward(data, case))
    assert not direct.continuation_
    np.testing.assert_allclose(direct.predict_q(grid), case["rec"].q, atol=1e-8, rtol=0)
    # f_k = P mu Q_k of the direct iteration, so the continuation's Q-scale changes are the
    # direct ones one iteration later
    np.testing.assert_allclose(fqe.history_.target_change[:50], direct.history_.target_change[1:51], rtol=1e-6)


def test_continuation_needs_base_and_checks_next_reward(problem):
    data, cases = problem
    case = cases["anchor"]
    fqe = run_fqe(data, case, TabularQModel(S), 5, next_reward=_next_reward(data, case))
    with pytest.raises(ValueError, match="needs base"):
        fqe.predict_q(np.arange(S)[:, None])
    with pytest.raises(ValueError, match="next_reward must have one entry per transition"):
        run_fqe(data, case, TabularQModel(S), 5, next_reward=_next_reward(data, case)[:-1])
    with pytest.raises(ValueError, match="structure must be one of"):
        run_fqe(data, case, TabularQModel(S), 5, structure="residual")


def test_continuation_helps_a_misspecified_regressor(problem):
    """The known ``u - g`` part stays exact: a linear regressor on the raw state index is far
    closer to the exact Q when it only has to fit the continuation."""
    data, cases = problem
    case, grid = cases["anchor"], np.arange(S)[:, None].astype(float)
    base = case["rec"].log_policy - case["rec"].g[:, None]
    cont = run_fqe(data, case, LinearRegression(), 200, encoding="per_action", next_reward=_next_reward(data, case))
    direct = run_fqe(data, case, LinearRegression(), 200, encoding="per_action")
    err_cont = np.max(np.abs(cont.predict_q(grid, base=base) - case["rec"].q))
    err_direct = np.max(np.abs(direct.predict_q(grid) - case["rec"].q))
    assert err_cont < 0.5 * err_direct


def test_stopping_rule_and_history(problem):
    data, cases = problem
    case = cases["mean-zero"]
    fqe = FQE(TabularQModel(S), n_iterations=1000, tol=1e-9).fit(
        data.states, data.actions, data.next_states, data.continues, case["reward"], case["next_mu"], GAMMA)
    assert fqe.converged_ and fqe.n_iter_ < 1000
    assert fqe.history_.target_change[-1] <= 1e-9
    assert len(fqe.history_.bellman_residual) == fqe.n_iter_
    # the target change contracts at about rate gamma
    ratio = np.array(fqe.history_.target_change[20:60:10])
    assert np.all(ratio[1:] < ratio[:-1])
    with pytest.warns(ConvergenceWarning, match="did not reach tol"):
        FQE(TabularQModel(S), n_iterations=3, tol=1e-9).fit(
            data.states, data.actions, data.next_states, data.continues, case["reward"], case["next_mu"], GAMMA)


def test_validation_early_stopping_and_refit(problem):
    data, cases = problem
    case = cases["anchor"]
    fqe = FQE(TabularQModel(S), n_iterations=60, validation_fraction=0.3, n_iter_no_change=5, random_state=0).fit(
        data.states, data.actions, data.next_states, data.continues, case["reward"], case["next_mu"], GAMMA,
        groups=data.episode_ids)
    assert 1 <= fqe.best_iteration_ <= 60
    assert fqe.n_iter_ == fqe.best_iteration_  # refit on all rows for the chosen count
    assert len(fqe.history_.validation_residual) >= fqe.best_iteration_


def test_terminated_transitions_have_no_continuation():
    states = np.array([[0.0], [1.0]])
    fqe = FQE(TabularQModel(2), n_iterations=50, tol=None).fit(
        states, np.array([0, 0]), np.array([[1.0], [1.0]]), np.array([1.0, 0.0]), np.array([1.0, 2.0]),
        np.array([[1.0], [1.0]]), 0.5)
    q = fqe.predict_q(states)[:, 0]
    assert np.allclose(q, [1.0 + 0.5 * 2.0, 2.0])
    # the continuation f = P mu Q: row 1 terminates, so f = 0 there; row 0 continues into
    # state 1, whose mu-weighted u - g (next_reward) is 2 and whose own f is 0: f = 2
    cont = FQE(TabularQModel(2), n_iterations=50, tol=None).fit(
        states, np.array([0, 0]), np.array([[1.0], [1.0]]), np.array([1.0, 0.0]), np.array([1.0, 2.0]),
        np.array([[1.0], [1.0]]), 0.5, next_reward=np.array([2.0, 2.0]))
    base = np.array([[1.0], [2.0]])
    assert np.allclose(cont.model_.predict_q(states)[:, 0], [2.0, 0.0])
    assert np.allclose(cont.predict_q(states, base=base)[:, 0], [1.0 + 0.5 * 2.0, 2.0])


def test_warm_start_only_where_it_means_continue():
    assert warm_start_ok(MLPRegressor())
    assert warm_start_ok(SGDRegressor())
    assert not warm_start_ok(GradientBoostingRegressor())
    assert not warm_start_ok(RandomForestRegressor())
    assert not warm_start_ok(LinearRegression())
    model = make_q_model(SGDRegressor(max_iter=5, tol=None, random_state=0), "per_action", 2)
    X = np.random.default_rng(0).normal(size=(40, 2))
    a = np.repeat([0, 1], 20)
    model.fit_q(X, a, X[:, 0], 2)
    assert all(m.get_params()["warm_start"] for m in model.models)


def test_encodings_and_bad_models():
    with pytest.raises(ValueError, match="encoding must be"):
        make_q_model(Ridge(), "bogus", 2)
    with pytest.raises(TypeError, match="fit_q/predict_q"):
        make_q_model(Ridge(), "native", 2)
    with pytest.raises(TypeError, match="regressor with fit"):
        make_q_model(object(), "joint", 2)
    assert type(make_q_model(TabularQModel(3), "auto", 2)).__name__ == "_NativeQ"
    assert type(make_q_model(Ridge(), "auto", 2)).__name__ == "_JointQ"
    with pytest.raises(ValueError, match="gamma"):
        FQE(Ridge()).fit(np.zeros((2, 1)), [0, 1], np.zeros((2, 1)), np.ones(2), np.zeros(2), np.ones((2, 2)) / 2, 1.2)
    with pytest.raises(ValueError, match="reward must be finite"):
        FQE(Ridge()).fit(np.zeros((2, 1)), [0, 1], np.zeros((2, 1)), np.ones(2), np.array([0, np.nan]),
                         np.ones((2, 2)) / 2, 0.5)

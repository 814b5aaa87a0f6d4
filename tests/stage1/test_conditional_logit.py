"""genpqr.stage1.ConditionalLogit: the estimator contract, blocked softmax, the one-hot
identity with the exact tabular solve (1e-8), recovery of a reward linear in action features
(an action never taken included), and the docs page docs/large_action_spaces.md."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

import genpqr
from genpqr import GenPQR, normalization as N, stage2 as T
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.stage1 import ConditionalLogit, FrequencyClassifier
from tests.doc_warnings import check_warnings, printed, recording

ROOT = Path(__file__).resolve().parents[2]
GAMMA = 0.9


def _choices(n=3000, K=40, seed=0):
    """States (n, 2), actions drawn from a conditional logit with a linear state basis."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(K, 3))
    states = rng.normal(size=(n, 2))
    W = np.array([[1.0, -0.5, 0.3], [0.5, 0.0, 0.0], [0.0, 0.4, 0.0]])
    scores = np.hstack([np.ones((n, 1)), states]) @ W @ x.T
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = (p.cumsum(axis=1) > rng.random(n)[:, None]).argmax(axis=1)
    return x, states, y, W


def test_estimator_contract_and_blocked_probabilities():
    x, states, y, W = _choices()
    model = ConditionalLogit(x, C=np.inf)
    cloned = clone(model)  # __init__ only stores: scikit-learn's clone round trip
    np.testing.assert_array_equal(cloned.action_features, x)
    assert {k: v for k, v in cloned.get_params().items() if k != "action_features"} == \
        {k: v for k, v in model.get_params().items() if k != "action_features"}
    with pytest.raises(NotFittedError):
        model.predict_proba(states)
    assert model.fit(states, y) is model and model.converged_
    # standardized states: W's state rows are rescaled by the states' std (close to 1 here)
    np.testing.assert_allclose(model.coef_, W, atol=0.15)
    full = model.predict_proba(states[:50])
    blocked = clone(model).set_params(block_size=7).fit(states, y).predict_proba(states[:50])  # one action a block
    np.testing.assert_allclose(blocked, full, atol=1e-10)
    assert full.shape == (50, 40) and np.allclose(full.sum(axis=1), 1.0)
    np.testing.assert_array_equal(model.predict(states[:50]), full.argmax(axis=1))


def test_labels_through_an_action_table():
    x, states, y, _ = _choices(n=500, K=5)
    labels = np.array(["v", "w", "x", "y", "z"])
    model = ConditionalLogit(genpqr.ActionTable(labels, x)).fit(states, labels[y])
    np.testing.assert_array_equal(model.classes_, labels)
    coded = ConditionalLogit(x).fit(states, y)
    np.testing.assert_allclose(model.predict_proba(states[:5]), coded.predict_proba(states[:5]), atol=1e-10)


def test_one_hot_features_reproduce_the_exact_solve_to_1e_8():
    """Action features = one-hot codes and the saturated state basis (one W row per state):
    the unpenalised conditional logit is the cell-frequency MLE, so GenPQR's exact solve with
    it equals the exact solve with the frequency policy, to 1e-8 (measured: ~4e-15)."""
    S, K = 10, 3
    mdp = random_mdp(S, K, n_next=4, gamma=GAMMA, random_state=7)
    sol = T.soft_optimal_solution(mdp.reward, mdp.kernel, GAMMA)
    data = simulate_tabular(mdp, sol.policy, n_episodes=400, horizon=20, random_state=8)
    with_table = genpqr.from_arrays(data.states, data.labels_of(), data.next_states, terminated=data.terminated,
                                    truncated=data.truncated, episode_ids=data.episode_ids,
                                    action_features=genpqr.ActionTable(np.arange(K), np.eye(K)))
    exact = dict(gamma=GAMMA, q_model="exact", clip=None)
    reference = GenPQR(N.anchor_action(0), policy_model=FrequencyClassifier(S), **exact).fit(data)
    same = GenPQR(N.anchor_action(0), policy_model=FrequencyClassifier(S), **exact).fit(with_table)
    np.testing.assert_array_equal(same.reward_table().values, reference.reward_table().values)
    logit = ConditionalLogit(state_basis="onehot", n_states=S, C=np.inf)
    for norm in (N.anchor_action(0), N.mean_zero()):
        ref = GenPQR(norm, policy_model=FrequencyClassifier(S), **exact).fit(data)
        fit = GenPQR(norm, policy_model=logit, **exact).fit(with_table)
        np.testing.assert_allclose(fit.reward_table().values, ref.reward_table().values, atol=1e-8, rtol=0)
        np.testing.assert_allclose(fit.reward(np.arange(S)), ref.reward(np.arange(S)), atol=1e-8, rtol=0)
    assert fit.taken_actions_.all() and fit.reward_table().attrs["never_taken"] == []


def _linear_reward_problem():
    """S=5 states, K=8 actions with 2 features, reward r(s, a) = W_s . x_a, transitions that do
    not depend on the action (so log pi(a|s) = r(s, a) - const(s): the conditional logit with a
    one-hot state basis is correctly specified). The last action is so unattractive that the
    1,000 logged episodes (seed 4) never take it."""
    S, K = 5, 8
    rng = np.random.default_rng(3)
    x = np.column_stack([np.linspace(-1, 1, K), rng.uniform(-1, 1, size=K)])
    x[-1] = [-4.5, -4.0]
    W = np.column_stack([1 + 0.3 * rng.normal(size=S), 0.7 + 0.3 * rng.normal(size=S)])
    reward = W @ x.T
    P = np.repeat(rng.dirichlet(5 * np.ones(S), size=S)[:, None, :], K, axis=1)
    mdp = T.TabularMDP.create(P, GAMMA, reward)
    sol = T.soft_optimal_solution(reward, mdp.kernel, GAMMA)
    logged = simulate_tabular(mdp, sol.policy, n_episodes=200, horizon=20, random_state=4)
    labels = np.array([f"item{k}" for k in range(K)])
    data = genpqr.from_arrays(logged.states, labels[logged.actions], logged.next_states,
                              episode_ids=logged.episode_ids, terminated=logged.terminated,
                              truncated=logged.truncated,
                              action_features=genpqr.ActionTable(labels, x, ("price", "quality")))
    return data, reward, P


def test_recovers_a_reward_linear_in_action_features_including_a_never_taken_action():
    """Statistical check (fixed seeds): anchored on the most common action, the reward error is
    at most 0.25 on the taken actions (range of the truth: 3.7) and at most 1.0 on the action
    never taken (truth up to 11.9: an extrapolation of the features' coefficients; measured
    0.20 and 0.81)."""
    data, reward, P = _linear_reward_problem()
    assert data.taken_actions().tolist() == [True] * 7 + [False]
    model = GenPQR(N.anchor_action("item6"), gamma=GAMMA, q_model="exact", clip=None, n_states=5,
                   transition_model=P, policy_model=ConditionalLogit(state_basis="onehot", n_states=5, C=np.inf))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", genpqr.CoverageWarning)  # rare actions at some states: expected here
        model.fit(data)
    table = model.reward_table()
    error = np.abs(table.to_numpy() - (reward - reward[:, [6]]))
    assert error[:, :7].max() < 0.25 and error[:, 7].max() < 1.0
    assert table.attrs["never_taken"] == ["item7"] and model.taken_actions_.tolist() == [True] * 7 + [False]
    np.testing.assert_allclose(model.reward(np.zeros(1), ["item7"]), table.loc[0, "item7"])


def test_large_action_spaces_page_runs(tmp_path, monkeypatch, capsys):
    """Every python block of docs/large_action_spaces.md, in one namespace; its claims hold."""
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "docs" / "large_action_spaces.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    ns: dict = {}
    with recording() as found:
        for block in blocks:
            exec(compile(block, "docs/large_action_spaces.md", "exec"), ns)
    check_warnings("docs/large_action_spaces.md", "python", found)
    assert ns["model"].taken_actions_.tolist() == [True] * 5 + [False]
    error = ns["error"]
    assert error[:, :5].max() < 0.3 and error[:, 5].max() < 1.0  # the page's figures: about 0.1 and 0.72
    # the page's command, on the files its last block wrote, into a fresh --out folder
    import shlex

    import pandas as pd
    from genpqr.app.cli import main
    from genpqr.app.console import unwrap

    command = re.search(r"```bash\n(genpqr fit .*?)```", text, re.S).group(1).replace("\\\n", " ")
    assert not (tmp_path / "fit-items").exists()
    with recording() as found:
        assert main(shlex.split(command)[1:] + ["--quiet"]) == 0
    console = unwrap(capsys.readouterr().out)
    check_warnings("docs/large_action_spaces.md", "shell", found + printed(console))
    assert ("1 action(s) in the table were never taken: their rewards are predictions from their features "
            "(['item5'])") in console
    rewards = pd.read_csv(tmp_path / "fit-items" / "rewards.csv")
    assert [c for c in rewards.columns if c.startswith("reward_")] == [f"reward_item{k}" for k in range(6)]

"""GenPQR with latent agent types (``n_types=M``): EM over episodes, the fixed-weights M-step,
the information criteria, warnings, persistence."""

import dataclasses
import re

import numpy as np
import pytest
from scipy.special import logsumexp

import genpqr
from genpqr import GenPQR, from_arrays, normalization as N, stage2 as T
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.estimator import fit_type_models, type_criteria
from genpqr.estimator._latent_types import LatentTypeWarning, ccp_parameter_count, type_loglik_terms, type_warnings
from genpqr.stage1 import FrequencyClassifier
from genpqr.stage1._latent_types import episode_codes
from genpqr.stage2 import FQE, TabularQModel
from genpqr.estimator import TypeOptions

pytestmark = pytest.mark.filterwarnings("ignore::genpqr.exceptions.CoverageWarning")

S, K, GAMMA = 6, 3, 0.9
GRID = np.arange(S, dtype=float)[:, None]


def concat(parts):
    """One Transitions from several, episode ids made distinct (type of part j = j)."""
    cols = {k: [] for k in ("states", "actions", "next_states", "terminated", "episode_ids")}
    offset, types = 0, []
    for j, d in enumerate(parts):
        cols["states"].append(d.states[:, 0])
        cols["actions"].append(d.action_labels[d.actions])
        cols["next_states"].append(d.next_states[:, 0])
        cols["terminated"].append(d.terminated)
        cols["episode_ids"].append(d.episode_ids + offset)
        offset += int(d.episode_ids.max()) + 1
        types.append(np.full(np.unique(d.episode_ids).size, j))
    c = {k: np.concatenate(v) for k, v in cols.items()}
    data = from_arrays(c["states"], c["actions"], c["next_states"], terminated=c["terminated"],
                       episode_ids=c["episode_ids"])
    return data, np.concatenate(types)


@pytest.fixture(scope="module")
def two_types():
    """Two types on one MDP with opposite rewards (60% / 40% of the episodes)."""
    mdp = random_mdp(S, K, n_next=3, gamma=GAMMA, random_state=1, reward_scale=1.5)
    mdps = [mdp, dataclasses.replace(mdp, reward=-mdp.reward)]
    parts = [simulate_tabular(m, T.soft_optimal_solution(m.reward, m.kernel, GAMMA).policy, n_episodes=n,
                              horizon=15, random_state=10 + j) for j, (m, n) in enumerate(zip(mdps, (180, 120)))]
    data, types = concat(parts)
    return data, types, [m.reward for m in mdps]


def exact(**kw):
    kw.setdefault("policy_model", FrequencyClassifier(S))
    return GenPQR(N.mean_zero(), gamma=GAMMA, q_model="exact", n_states=S, **kw)


def test_one_type_is_todays_fit(two_types):
    data = two_types[0]
    today = GenPQR(N.mean_zero(), gamma=GAMMA, q_model="exact").fit(data)  # the automatic first stage
    same = GenPQR(N.mean_zero(), gamma=GAMMA, q_model="exact", n_types=1).fit(data)
    np.testing.assert_allclose(same.reward(GRID), today.reward(GRID), atol=1e-12, rtol=0)
    n_episodes = np.unique(data.episode_ids).size
    (one,) = fit_type_models(GenPQR(N.mean_zero(), gamma=GAMMA, q_model="exact"), data, np.ones((n_episodes, 1)))
    np.testing.assert_allclose(one.reward(GRID), today.reward(GRID), atol=1e-8, rtol=0)
    np.testing.assert_allclose(one.log_policy(GRID), today.log_policy(GRID), atol=1e-8, rtol=0)
    assert one.first_stage_.name == today.first_stage_.name


@pytest.mark.parametrize("specific", [True, False])
def test_known_types_equal_separate_fits(two_types, specific):
    data, types, _ = two_types
    onehot = np.eye(2)[types]
    models = fit_type_models(exact(types=TypeOptions(specific_transitions=specific)), data, onehot)
    labels, codes = episode_codes(data.episode_ids)
    pooled = T.estimate_transitions(data.states, data.actions, data.next_states, S, K, terminated=data.terminated)[0]
    for m, model in enumerate(models):
        alone = exact(transition_model=None if specific else pooled).fit(data.subset(types[codes] == m))
        np.testing.assert_allclose(model.reward(GRID), alone.reward(GRID), atol=1e-8, rtol=0)
        np.testing.assert_allclose(model.log_policy(GRID), alone.log_policy(GRID), atol=1e-8, rtol=0)
        np.testing.assert_allclose(model.stage2_.kernel.dense(), alone.stage2_.kernel.dense(), atol=1e-12)
        for name in ("policy_log_loss", "fraction_clipped"):  # weighted diagnostics: those of the type's episodes
            assert getattr(model.diagnostics_, name) == pytest.approx(getattr(alone.diagnostics_, name), abs=1e-10)


def test_em_recovers_types_and_rewards(two_types):
    """Tolerances: proportions within 0.05 of 0.6/0.4; each type's reward within 0.1 on average
    (0.5 at most) over the S x K table of the fit that knows the types; the episodes' types
    classified >= 97% right; BIC prefers two types."""
    data, types, rewards = two_types
    model = exact(n_types=2, random_state=0).fit(data)
    np.testing.assert_allclose(model.type_proportions_, [0.6, 0.4], atol=0.05)
    assert np.mean(model.type_weights_.argmax(axis=1) == types) >= 0.97
    oracle = fit_type_models(exact(), data, np.eye(2)[types])
    for m in range(2):
        gap = model.type_models_[m].reward(GRID) - oracle[m].reward(GRID)
        assert np.mean(np.abs(gap)) < 0.1 and np.max(np.abs(gap)) < 0.5
        truth = rewards[m] - rewards[m].mean(axis=1, keepdims=True)
        assert np.corrcoef(model.type_models_[m].reward(GRID).ravel(), truth.ravel())[0, 1] > 0.9
    assert model.em_converged_ and model.n_em_iter_ >= 2 and len(model.em_start_logliks_) == 3
    assert type_criteria(model, data)["bic"] < type_criteria(exact().fit(data), data)["bic"]


def test_loglik_and_information_criteria(two_types):
    data = two_types[0]
    model = exact(n_types=2, random_state=0).fit(data)
    _, codes = episode_codes(data.episode_ids)
    policies = [m.policy_ for m in model.type_models_]
    ell = type_loglik_terms(policies, data)
    per_episode = np.zeros((codes.max() + 1, 2))
    np.add.at(per_episode, codes, ell)
    loglik = logsumexp(per_episode + np.log(model.type_proportions_), axis=1).sum()
    assert loglik == pytest.approx(model.loglik_, abs=1e-6)
    k = sum(ccp_parameter_count(p, data) for p in policies) + 1
    assert model.n_params_ == k
    n_episodes = codes.max() + 1
    assert model.aic_ == pytest.approx(2 * k - 2 * model.loglik_)
    assert model.bic_ == pytest.approx(k * np.log(n_episodes) - 2 * model.loglik_)
    np.testing.assert_allclose(model.type_weights_.sum(axis=1), 1.0, atol=1e-12)
    # cell frequencies: (actions seen at s) - 1 per state with data
    seen = np.zeros((S, K), bool)
    seen[data.states[:, 0].astype(int), data.actions] = True
    assert ccp_parameter_count(policies[0], data) == int(np.sum(np.maximum(seen.sum(axis=1) - 1, 0)))
    one = exact(n_types=2, types=TypeOptions(specific_transitions=True), random_state=0).fit(data)
    assert one.n_params_ > model.n_params_ and np.isfinite(one.bic_)


def test_one_type_data_warn_and_bic_prefers_one_type():
    """Short episodes from one type: the posteriors stay near the prior and BIC prefers M = 1."""
    mdp = random_mdp(3, 2, n_next=2, gamma=GAMMA, random_state=2)
    policy = T.soft_optimal_solution(mdp.reward, mdp.kernel, GAMMA).policy
    data = simulate_tabular(mdp, policy, n_episodes=300, horizon=4, random_state=3)
    kw = dict(policy_model=FrequencyClassifier(3), n_states=3)
    with pytest.warns(LatentTypeWarning, match="barely separate the 2 latent types.*type_weights_"):
        two = GenPQR(N.mean_zero(), gamma=GAMMA, q_model="exact", n_types=2, random_state=0, **kw).fit(data)
    one = GenPQR(N.mean_zero(), gamma=GAMMA, q_model="exact", **kw).fit(data)
    assert type_criteria(one, data)["bic"] < type_criteria(two, data)["bic"]
    assert type_criteria(one, data)["loglik"] <= two.loglik_ + 1e-9


def test_type_warnings():
    q = np.column_stack([np.full(10, 0.95), np.full(10, 0.05)])
    q[0] = [0.5, 0.5]
    messages = type_warnings(np.column_stack([q, np.zeros(10)]), np.log([0.5, 0.4, 0.1]))
    assert any("latent type 2 is empty" in m for m in messages)
    assert type_warnings(np.eye(2)[np.arange(10) % 2], np.log([0.5, 0.5])) == []
    assert any("barely separate" in m for m in type_warnings(np.full((10, 2), 0.5), np.log([0.5, 0.5])))


def test_covariates_and_outputs(two_types, tmp_path):
    data = two_types[0]
    model = exact(n_types=2, types=TypeOptions(covariates="initial_state", n_starts=1), random_state=0).fit(data)
    assert model.type_mixing_coef_.shape == (2, 2)
    from genpqr.estimator._latent_types import _covariates  # the first state of each episode

    labels, codes = episode_codes(data.episode_ids)
    z = _covariates(model, data, labels, codes)
    for e in (0, 7, labels.size - 1):
        rows = np.flatnonzero(codes == e)
        assert z[e, 0] == data.states[rows[0], 0]  # (no timesteps: rows in time order)
    shuffled = dataclasses.replace(data.subset(np.arange(data.n)[::-1]), timesteps=np.arange(data.n)[::-1])
    z = _covariates(model, shuffled, *episode_codes(shuffled.episode_ids))  # rows reversed, time kept
    assert z[0, 0] == data.states[0, 0] and z[-1, 0] == data.states[np.flatnonzero(codes == labels.size - 1)[0], 0]
    assert model.n_params_ == sum(ccp_parameter_count(m.policy_, data) for m in model.type_models_) + 2
    with pytest.raises(TypeError, match="type_models_"):
        model.reward(GRID)
    model.save(tmp_path / "types.joblib")
    back = genpqr.load(tmp_path / "types.joblib")
    np.testing.assert_allclose(back.type_models_[1].reward(GRID), model.type_models_[1].reward(GRID), atol=0)
    np.testing.assert_allclose(back.type_weights_, model.type_weights_)
    assert not hasattr(back.type_models_[0], "training_data_")


def test_sample_path_types(two_types):
    """FQE per type (weighted tabular regression): the type's own weighted transitions, so it
    matches the exact path with type-specific transitions; the E-step reads stage 1 only."""
    data, types, _ = two_types
    fqe = GenPQR(N.mean_zero(), gamma=GAMMA,
                 q_model=FQE(TabularQModel(S), encoding="native", n_iterations=400, tol=1e-11),
                 policy_model=FrequencyClassifier(S), n_types=2, random_state=0, types=TypeOptions(n_starts=1))
    ref = exact(n_types=2, random_state=0, types=TypeOptions(n_starts=1)).fit(data)
    np.testing.assert_allclose(fqe.fit(data).type_weights_, ref.type_weights_, atol=1e-10)
    known = np.eye(2)[types]
    specific = exact(types=TypeOptions(specific_transitions=True))
    for a, b in zip(fit_type_models(fqe, data, known), fit_type_models(specific, data, known)):
        np.testing.assert_allclose(a.reward(GRID), b.reward(GRID), atol=1e-6)


@pytest.mark.parametrize("kw, match", [
    (dict(n_types=0), "n_types must be an int >= 1"),
    (dict(n_types=2, types=TypeOptions(max_iter=0)), "max_iter"),
    (dict(n_types=2, types=TypeOptions(covariates="last")), "covariates must be"),
    (dict(n_types=2, types=TypeOptions(covariates=np.zeros(3))), "covariates has 3 rows"),
    (dict(n_types=True), "n_types must be an int >= 1"),
    (dict(n_types=2.0), "n_types must be an int >= 1"),
])
def test_bad_parameters(two_types, kw, match):
    with pytest.raises(ValueError, match=match):
        exact(**kw).fit(two_types[0])


def test_prefit_and_sample_path_transitions_refused(two_types):
    data = two_types[0]
    with pytest.raises(ValueError, match="policy_prefit must be False"):
        GenPQR(N.mean_zero(), gamma=GAMMA, q_model="exact", policy_model=FrequencyClassifier(S).fit(
            data.states, data.actions), policy_prefit=True, n_types=2).fit(data)
    with pytest.raises(ValueError, match=r"specific_transitions=True\) needs tabular states"):
        GenPQR(q_model=TabularQModel(S), n_types=2, types=TypeOptions(specific_transitions=True)).fit(data)


def test_given_transition_estimator_is_shared_by_the_types(two_types):
    """A structured transition estimator (a callable) is evaluated once on all rows: every type
    has the same kernel, also when the estimator reads the row weights."""
    data, types, _ = two_types

    def counts(d, n_states, n_actions):
        return T.estimate_transitions(d.states, d.actions, d.next_states, n_states, n_actions,
                                      terminated=d.terminated, sample_weight=d.sample_weight)[0]

    models = fit_type_models(exact(transition_model=counts), data, np.eye(2)[types])
    pooled = counts(data, S, K).dense()
    for model in models:
        np.testing.assert_allclose(model.stage2_.kernel.dense(), pooled, atol=1e-12)
    with pytest.raises(ValueError, match="and no given transition_model"):
        exact(n_types=2, transition_model=counts, types=TypeOptions(specific_transitions=True)).fit(data)


@pytest.fixture
def every_update_drawn(monkeypatch):
    """Bars shown at once and redrawn at every update (no 2-second delay, no 0.1-second
    interval): what they print does not depend on how long a fit runs."""
    import functools

    from genpqr.stage1 import _stage1

    monkeypatch.setattr(_stage1, "PROGRESS_DELAY", 0.0)
    monkeypatch.setattr(_stage1, "tqdm", functools.partial(_stage1.tqdm, mininterval=0, miniters=1))


def test_em_progress_follows_the_estimator(two_types, capsys, every_update_drawn):
    """One bar per EM start on stderr with the log likelihood and its change, then one over the
    types' fits; nothing with ``progress=False``."""
    data = two_types[0]
    exact(n_types=2, random_state=0, progress=False, types=TypeOptions(n_starts=2)).fit(data)
    assert capsys.readouterr().err == ""
    exact(n_types=2, random_state=0, progress=True, types=TypeOptions(n_starts=2)).fit(data)
    err = capsys.readouterr().err
    for text in ("latent types EM (start 1/2): 2it", "latent types EM (start 2/2)", ", change ",
                 "latent types: each type's fit"):
        assert text in err, text
    assert re.search(r"loglik -\d+\.\d+, change \d\.\de-\d\d\]", err)

"""Count replicates: a bootstrap replicate of the exact tabular path computed from the episodes'
reweighted cell counts gives the numbers of the refit on the resampled episodes, replicate for
replicate, with the same seeds (genpqr.evaluation._count_replicates)."""

from dataclasses import replace

import numpy as np
import pytest

from genpqr import GenPQR, datasets, from_pandas, normalization as N, stage2 as T
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.evaluation import bootstrap, bootstrap_sources
from genpqr.evaluation._inference import resample_episodes
from genpqr.evaluation._count_replicates import count_plan, multiplicities, reads_tables
from genpqr.evaluation._inference import _default_statistic, refit_copy, replicate_template
from genpqr.stage1 import FrequencyClassifier

pytestmark = pytest.mark.filterwarnings("ignore::genpqr.exceptions.GenPQRWarning")

S, K, GAMMA = 8, 3, 0.9
TOL = 1e-10


def _ragged(data, rng):
    """``data`` with the last row of some episodes a choice without next state and of others
    terminated (both branches of the counts)."""
    ids = data.episode_ids
    last = np.r_[ids[1:] != ids[:-1], True]
    pick = rng.random(data.n) < 0.5
    terminated = np.asarray(data.terminated, dtype=bool) | (last & pick)
    next_observed = ~(last & ~pick)
    return replace(data, terminated=terminated, next_observed=next_observed)


@pytest.fixture(scope="module")
def sparse_data():
    """Few short episodes: empty cells (the auto clip binds), states and actions missing from
    some replicates."""
    mdp = random_mdp(S, K, n_next=2, gamma=GAMMA, random_state=4)
    policy = T.soft_optimal_policy(mdp.reward, mdp.kernel, GAMMA)
    data = simulate_tabular(mdp, policy, 14, 4, random_state=5)
    return _ragged(data, np.random.default_rng(0))


@pytest.fixture(scope="module")
def filled_data():
    mdp = random_mdp(S, K, n_next=3, gamma=GAMMA, random_state=0)
    policy = T.soft_optimal_policy(mdp.reward, mdp.kernel, GAMMA)
    return _ragged(simulate_tabular(mdp, policy, 60, 8, random_state=1), np.random.default_rng(1))


CASES = {
    "anchor, n_states, auto clip": dict(normalization=N.anchor_action(0), n_states=S,
                                        policy_model=FrequencyClassifier(n_states=S)),
    "mean zero, inferred states": dict(normalization=N.mean_zero(), policy_model=FrequencyClassifier()),
    "behavior, smoothing": dict(normalization=N.behavior(g=0.0), n_states=S,
                                policy_model=FrequencyClassifier(n_states=S, smoothing=0.5)),
    "state anchor, given clip": dict(normalization=N.state_anchor(np.arange(S) % K), n_states=S, clip=(0.02, 0.98),
                                     policy_model=FrequencyClassifier(n_states=S)),
    "no clip": dict(normalization=N.anchor_action(0), n_states=S, clip=None,
                    policy_model=FrequencyClassifier(n_states=S, smoothing=1.0)),
    "default first stage, unordered": dict(normalization=N.anchor_action(0)),
    "transitions auto": dict(normalization=N.anchor_action(0), n_states=S, transition_model="auto",
                             policy_model=FrequencyClassifier(n_states=S)),
}


def _estimator(case):
    return GenPQR(gamma=GAMMA, q_model="exact", random_state=0, **{"transition_model": "counts", **CASES[case]})


@pytest.mark.parametrize("which", ["sparse_data", "filled_data"])
@pytest.mark.parametrize("case", list(CASES))
def test_count_replicates_equal_the_refit(case, which, request):
    data = request.getfixturevalue(which)
    try:
        full = _estimator(case).fit(data)
    except ValueError:
        pytest.skip("the full sample itself cannot be fitted in this configuration")
    est = _estimator(case)
    plan = count_plan(replicate_template(est, full), full, data, _default_statistic)
    # served from counts unless "auto" chose a structured kernel (then every replicate refits it)
    assert (plan is None) == (full.transition_model_ is not None)
    kw = dict(n_boot=12, random_state=7, progress=False, fitted=full)
    try:
        refit = bootstrap(est, data, method="refit", **kw)
    except ValueError as exc:  # a replicate the refit cannot fit: the count path raises the same
        with pytest.raises(ValueError, match=str(exc)[:40].replace("(", r"\(").replace(")", r"\)")):
            bootstrap(est, data, **kw)
        return
    counted = bootstrap(est, data, **kw)
    np.testing.assert_allclose(counted.replicates, refit.replicates, rtol=0, atol=TOL)
    np.testing.assert_array_equal(counted.estimate, refit.estimate)


@pytest.mark.parametrize("case", ["anchor, n_states, auto clip", "behavior, smoothing"])
def test_count_sources_equal_the_refit(case, filled_data):
    est = _estimator(case)
    kw = dict(n_boot=10, random_state=3, progress=False)
    refit = bootstrap_sources(est, filled_data, method="refit", **kw)
    counted = bootstrap_sources(est, filled_data, **kw)
    for part in ("policy", "transitions", "both"):
        np.testing.assert_allclose(getattr(counted, part).replicates, getattr(refit, part).replicates,
                                   rtol=0, atol=TOL)


def test_count_replicate_fields_equal_the_refit(sparse_data):
    """Stage by stage: the first stage, the clip, the kernel, the counts and the reward of each
    count replicate are the refit's."""
    est = _estimator("anchor, n_states, auto clip")
    full = est.fit(sparse_data)
    template = replicate_template(est, full)
    plan = count_plan(template, full, sparse_data, _default_statistic)
    served = 0
    for seed in range(30):
        rep = plan.replicate(multiplicities(sparse_data.n_episodes, np.random.default_rng(seed)))
        try:
            refit = refit_copy(template).fit(resample_episodes(sparse_data, np.random.default_rng(seed)))
        except ValueError:
            assert rep is None  # the refit raises: the count path hands it to the refit
            continue
        if rep is None:
            continue
        served += 1
        assert rep.policy_.clip == refit.policy_.clip
        grid = np.arange(S, dtype=np.float64)[:, None]
        np.testing.assert_array_equal(rep.policy_.raw_proba(grid), refit.policy_.raw_proba(grid))
        np.testing.assert_array_equal(rep.stage2_.counts, refit.stage2_.counts)
        np.testing.assert_array_equal(rep.transition_counts_, refit.transition_counts_)
        np.testing.assert_array_equal(rep.stage2_.kernel.to_dense(), refit.stage2_.kernel.to_dense())
        np.testing.assert_array_equal(rep.visited_states_, refit.visited_states_)
        np.testing.assert_allclose(rep.stage2_.recovery.reward, refit.stage2_.recovery.reward, rtol=0, atol=TOL)
        np.testing.assert_allclose(rep.stage2_.recovery.q, refit.stage2_.recovery.q, rtol=0, atol=TOL)
    assert served >= 20


def test_draws_are_the_resampled_episodes(filled_data):
    """The multiplicities are the episodes :func:`resample_episodes` draws with the same generator."""
    ids = np.unique(filled_data.episode_ids)
    for seed in range(5):
        m = multiplicities(ids.size, np.random.default_rng(seed))
        sample = resample_episodes(filled_data, np.random.default_rng(seed))
        assert sample.n == int(m @ np.bincount(np.searchsorted(ids, filled_data.episode_ids), minlength=ids.size))


def test_plan_only_where_the_numbers_are_the_same(filled_data):
    """No count plan for a statistic that may read the rows, a prefit or a fitted (non-count)
    first stage, or a given kernel; the refit serves those."""
    from sklearn.linear_model import LogisticRegression

    def rows_statistic(model):
        return model.reward_table().to_numpy()

    est = _estimator("anchor, n_states, auto clip")
    full = est.fit(filled_data)
    assert count_plan(est, full, filled_data, _default_statistic) is not None
    assert not reads_tables(rows_statistic)
    assert count_plan(est, full, filled_data, rows_statistic) is None
    logit = GenPQR(N.anchor_action(0), gamma=GAMMA, q_model="exact", n_states=S, transition_model="counts",
                   policy_model=LogisticRegression(max_iter=500))
    assert count_plan(logit, logit.fit(filled_data), filled_data, _default_statistic) is None
    given = GenPQR(N.anchor_action(0), gamma=GAMMA, q_model="exact", n_states=S,
                   policy_model=FrequencyClassifier(n_states=S), transition_model=full.stage2_.kernel)
    assert count_plan(given, given.fit(filled_data), filled_data, _default_statistic) is None
    with pytest.raises(ValueError, match="method must be"):
        bootstrap(est, filled_data, n_boot=2, method="counts")


@pytest.mark.parametrize("start", [0.0, 1e9])
def test_parallel_count_replicates_in_order(filled_data, start, monkeypatch):
    """With workers (their start-up taken as free) or in process (workers that would not pay
    off: the default for replicates of milliseconds), the same replicates in the same order."""
    from genpqr.evaluation import _count_replicates

    monkeypatch.setattr(_count_replicates, "WORKER_START_SECONDS", start)
    est = _estimator("anchor, n_states, auto clip")
    one = bootstrap(est, filled_data, n_boot=9, random_state=11, progress=False)
    two = bootstrap(est, filled_data, n_boot=9, random_state=11, progress=False, n_jobs=2)
    np.testing.assert_array_equal(one.replicates, two.replicates)


def test_cli_example_bootstrap_equals_the_refit():
    """The README's example (examples/README.md): the reward table and the structural (NPL)
    parameters of every replicate, counts against refit, same seed."""
    from genpqr.app.structural import StructuralStatistic

    frame = datasets.load("choices")
    data = from_pandas(frame, episode="episode", time="time", state="state", action="action")
    n = int(frame["state"].max()) + 1
    est = GenPQR(N.anchor_action("a"), gamma=0.9, q_model="exact", n_states=n, random_state=0,
                 policy_model=FrequencyClassifier(n_states=n), transition_model="counts")
    full = est.fit(data)
    features = np.random.default_rng(0).normal(size=(n, 3, 2))
    features[:, 0] = 0.0
    stat = StructuralStatistic(features, ["x1", "x2"], "npl")
    kw = dict(n_boot=6, random_state=0, progress=False, fitted=full, both_statistic=stat)
    refit = bootstrap_sources(est, data, method="refit", **kw)
    counted = bootstrap_sources(est, data, **kw)
    for part in ("policy", "transitions", "both"):
        np.testing.assert_allclose(getattr(counted, part).replicates, getattr(refit, part).replicates,
                                   rtol=0, atol=TOL)


@pytest.mark.parametrize("resample", ["policy", "transitions"])
def test_one_stage_resampled_from_counts_equals_the_refit(resample, filled_data):
    est = _estimator("anchor, n_states, auto clip")
    kw = dict(n_boot=8, random_state=5, progress=False, resample=resample)
    np.testing.assert_allclose(bootstrap(est, filled_data, **kw).replicates,
                               bootstrap(est, filled_data, method="refit", **kw).replicates, rtol=0, atol=TOL)

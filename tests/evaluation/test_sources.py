"""The bootstrap split by source: the reward's variance from the policy and from the transitions."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from genpqr import GenPQR, normalization as N, stage2 as T
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.evaluation import bootstrap, bootstrap_sources
from genpqr.evaluation._sources import BootstrapSources

S, K, GAMMA = 6, 3, 0.9

pytestmark = pytest.mark.filterwarnings("ignore::genpqr.exceptions.GenPQRWarning")


@pytest.fixture(scope="module")
def problem():
    mdp = random_mdp(S, K, n_next=3, gamma=GAMMA, random_state=0)
    policy = T.soft_optimal_policy(mdp.reward, mdp.kernel, GAMMA)
    data = simulate_tabular(mdp, policy, 150, 10, random_state=1)
    return mdp, data


def test_given_kernel_leaves_no_transition_part(problem):
    mdp, data = problem
    est = GenPQR(N.anchor_action(0), gamma=GAMMA, q_model="exact", n_states=S, transition_model=mdp.kernel)
    parts = bootstrap_sources(est, data, n_boot=8, random_state=0, progress=False)
    assert isinstance(parts, BootstrapSources)
    np.testing.assert_allclose(parts.transitions.replicates, np.broadcast_to(parts.transitions.estimate,
                                                                             parts.transitions.replicates.shape),
                               rtol=0, atol=1e-10)
    assert np.all(parts.transitions.std_error < 1e-10)
    assert parts.policy.std_error[:, 1:].min() > 0  # the policy part is there
    # with the kernel known, "both" is the policy part
    np.testing.assert_allclose(parts.both.replicates, parts.policy.replicates, atol=1e-10)


def test_fixed_policy_leaves_no_policy_part(problem):
    mdp, data = problem
    clf = LogisticRegression(max_iter=2000).fit(data.states, data.actions)  # fitted once, not refitted
    est = GenPQR(N.anchor_action(0), gamma=GAMMA, q_model="exact", n_states=S, policy_model=clf,
                 policy_prefit=True)
    parts = bootstrap_sources(est, data, n_boot=8, random_state=0, progress=False)
    assert np.all(parts.policy.std_error < 1e-10)
    assert parts.transitions.std_error[:, 1:].min() > 0
    np.testing.assert_allclose(parts.both.replicates, parts.transitions.replicates, atol=1e-10)


def test_both_is_the_ordinary_bootstrap(problem):
    """Same seeds: ``both`` is :func:`bootstrap` replicate for replicate; ``resample=`` gives one part."""
    _, data = problem
    est = GenPQR(N.anchor_action(0), gamma=GAMMA, q_model="exact", n_states=S)
    parts = bootstrap_sources(est, data, n_boot=8, random_state=3, progress=False)
    plain = bootstrap(est, data, n_boot=8, random_state=3, progress=False)
    np.testing.assert_array_equal(parts.both.replicates, plain.replicates)
    only = bootstrap(est, data, n_boot=8, random_state=3, progress=False, resample="transitions")
    np.testing.assert_array_equal(only.replicates, parts.transitions.replicates)


def test_both_variance_is_about_the_sum_of_the_parts(problem):
    """The total variance with both stages resampled is the sum of the parts to first order; with
    150 replicates on this case they agree within 25% (the sampling error of a variance from B
    replicates is about sqrt(2/B) = 12% per cell, less summed over the 12 non-anchor cells)."""
    _, data = problem
    est = GenPQR(N.anchor_action(0), gamma=GAMMA, q_model="exact", n_states=S)
    v = bootstrap_sources(est, data, n_boot=150, random_state=3, progress=False).variances()
    total = v["policy"].sum() + v["transitions"].sum()
    assert v["policy"].sum() > 0.1 * total and v["transitions"].sum() > 0.1 * total  # both sources matter here
    assert abs(v["both"].sum() / total - 1) < 0.25


def test_frame_and_share(problem):
    mdp, data = problem
    est = GenPQR(N.anchor_action(0), gamma=GAMMA, q_model="exact", n_states=S)
    parts = bootstrap_sources(est, data, n_boot=6, random_state=0, progress=False)
    frame = parts.frame(labels=np.array(["x", "y", "z"]), transitions=np.ones((S, K)))
    assert list(frame.columns) == ["state_index", "action", "transitions", "reward", "se_policy", "se_transitions",
                                   "se_both", "transition_share"]
    assert len(frame) == S * K and list(frame["action"][:3]) == ["x", "y", "z"]
    anchor = frame["action"] == "x"
    assert frame.loc[anchor, "transition_share"].isna().all()  # the anchor's reward is 0 in every replicate
    share = frame.loc[~anchor, "transition_share"]
    assert ((share >= 0) & (share <= 1)).all()


def test_refuses_bad_arguments(problem):
    _, data = problem
    est = GenPQR(N.anchor_action(0), gamma=GAMMA, q_model="exact", n_states=S)
    with pytest.raises(ValueError, match="resample must be"):
        bootstrap(est, data, n_boot=2, resample="kernel")
    with pytest.raises(ValueError, match="exact tabular path"):
        bootstrap_sources(GenPQR(N.anchor_action(0), gamma=GAMMA, q_model="lstd"), data, n_boot=2, progress=False)

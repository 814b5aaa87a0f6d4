"""Where the uncertainty comes from (issue 34; ``InferenceResult.se_by_input``): the efficient
influence function is a sum of three terms, one per factor of the law ``rho pi P`` (first stage,
kernel, state law). Each term's population variance has a closed form, the three are orthogonal in
population, their episode-clustered variances and covariances add up to the total exactly, a
given kernel has no term, and the continuous route splits as the tabular one."""

import warnings

import numpy as np
import pytest

import genpqr
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.exceptions import InferenceWarning
from genpqr.inference import infer, policy_value, reward_at, reward_mean, reward_projection, softmax_value
from genpqr.inference import _algebra as alg
from genpqr.inference._result import INPUT_COLUMNS
from genpqr.normalization import anchor_action
from genpqr.stage1 import FrequencyClassifier
from genpqr.stage2 import soft_optimal_solution

from .designs import full_kernel, law_from, random_law
from .test_derivative import TARGETS

SHARES = [f"share_{k}" for k in INPUT_COLUMNS] + ["share_cross"]
SES = [f"se_{k}" for k in INPUT_COLUMNS]


def closed_forms(pieces, law):
    """Per component, the population variances of the three terms (first stage, kernel, state law),
    from the gradients alone: ``Var_rho g_rho``, ``E_rho Var_pi alpha`` and
    ``E_{rho pi} Var_P sum_k c_k lambda_k f_k(S')`` (0 at termination). (m, 3)."""
    rho, pi, dens = law.rho, law.policy, law.density
    P = full_kernel(law)  # (S, K, S + 1)
    g = pieces.grad_rho
    state = g ** 2 @ rho - (g @ rho) ** 2
    alpha = pieces.grad_u / dens[None]
    mean_a = np.sum(pi[None] * alpha, axis=2)
    first = np.einsum("s,sa,jsa->j", rho, pi, (alpha - mean_a[:, :, None]) ** 2)
    h = np.zeros(alpha.shape + (P.shape[2],))  # (m, S, K, S + 1): the kernel term's function of s'
    for eq in pieces.equations:
        f = np.append(eq.f, 0.0)
        h += eq.coef * (eq.omega / dens[None])[..., None] * f[None, None, None, :]
    mean_h = np.einsum("sat,jsat->jsa", P, h)
    kernel = np.einsum("sa,sat,jsat->j", dens, P, (h - mean_h[..., None]) ** 2)
    return np.stack([first, kernel, state], axis=1)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_each_term_has_its_closed_form_variance_and_they_are_orthogonal(name):
    law = random_law(seed=11, anchor=False)
    pieces = TARGETS[name](law)
    S, K = law.shape
    s, a, s2 = np.meshgrid(np.arange(S), np.arange(K), np.arange(S + 1), indexing="ij")
    terms = alg.influence_terms(pieces, law, s.ravel(), a.ravel(), np.minimum(s2, S - 1).ravel(),
                                (s2 < S).astype(float).ravel())
    prob = alg.population_influence(pieces, law)[1].ravel()
    stacked = np.stack([terms[1], terms[2], terms[0]], axis=2)  # first stage, kernel, state law
    moments = np.einsum("i,ijt,iju->jtu", prob, stacked, stacked)
    expected = closed_forms(pieces, law)
    for j in range(pieces.m):
        np.testing.assert_allclose(np.diag(moments[j]), expected[j], rtol=1e-10, atol=1e-13)
        off = moments[j] - np.diag(np.diag(moments[j]))
        assert np.max(np.abs(off)) < 1e-12 * max(1.0, moments[j].trace())  # orthogonal in population
    np.testing.assert_allclose(sum(terms), alg.population_influence(pieces, law)[0].reshape(-1, pieces.m),
                               rtol=0, atol=1e-13)


# ---------------------------------------------------------------------------- infer on an exact sample
S, K = 4, 3
SIGMA = np.random.default_rng(5).dirichlet(np.ones(K), size=S)
X = np.random.default_rng(6).normal(size=(S, K, 2))


@pytest.fixture(scope="module")
def sample():
    """Rows whose empirical law is a given law: each outcome ``(s, a, s')`` (or termination)
    ``count`` times, every row its own episode. Cell frequencies and the count kernel then are the
    law itself, and the clustered variance of each term is its population variance over n."""
    counts = np.random.default_rng(2).integers(1, 4, size=(S, K, S + 1))
    s, a, s2 = np.meshgrid(np.arange(S), np.arange(K), np.arange(S + 1), indexing="ij")
    reps = counts.ravel()
    s, a, s2 = (np.repeat(v.ravel(), reps) for v in (s, a, s2))
    terminated = s2 == S
    data = genpqr.from_arrays(s, a, np.where(terminated, 0, s2), terminated=terminated)
    p = counts / counts.sum()
    rho = p.sum(axis=(1, 2))
    pi = p.sum(axis=2) / rho[:, None]
    mu = np.zeros((S, K))
    mu[:, 0] = 1.0
    law = law_from(rho, pi, p / (rho[:, None, None] * pi[:, :, None]), 0.9, mu, np.zeros(S))
    return data, law


def exact_model(**kw):
    return genpqr.GenPQR(q_model="exact", normalization=anchor_action(0), gamma=0.9, n_states=S, clip=None,
                         policy_model=FrequencyClassifier(n_states=S), **kw)


SAMPLE_TARGETS = {
    "V_u": (policy_value(SIGMA, reward="log_policy", name="V_u"),
            lambda L: alg.log_policy_map(L, alg.policy_value_functional(SIGMA))),
    "V_rbar": (policy_value(SIGMA, gamma=0.7, name="V_rbar"),
               lambda L: alg.normalized_map(L, alg.policy_value_functional(SIGMA), 0.7)),
    "soft": (softmax_value([0, 2], 0.5, name="soft"),
             lambda L: alg.normalized_map(L, alg.softmax_value_functional(
                 np.broadcast_to(np.array([True, False, True]), (S, K)), 0.5), L.gamma)),
    "mean": (reward_mean(name="mean"), lambda L: alg.normalized_map(L, alg.data_mean_functional(np.ones((1, S, K))),
                                                                    L.gamma)),
    "x": (reward_projection(X, names=["x1", "x2"]), lambda L: alg.normalized_map(L, alg.projection_functional(X),
                                                                                   L.gamma)),
}


def api_targets():
    return [t for t, _ in SAMPLE_TARGETS.values()]


def expected_variances(law):
    return np.vstack([closed_forms(fn(law), law) for _, fn in SAMPLE_TARGETS.values()])


def test_infer_splits_the_variance_into_the_closed_forms(sample):
    data, law = sample
    res = infer(exact_model(transition_model="counts").fit(data), api_targets(), data, cross_fit=None, warn=False)
    split = res.se_by_input
    expected = expected_variances(law)
    n = data.n
    np.testing.assert_allclose(n * split[SES].to_numpy() ** 2, expected, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(n * res.std_error ** 2, expected.sum(axis=1), rtol=1e-8)
    np.testing.assert_allclose(split["share_cross"], 0.0, atol=1e-10)  # independent rows at their own law
    np.testing.assert_allclose(split[SHARES].sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert split.loc["V_u", "share_state_law"] > 0 and split.loc["V_rbar", "share_kernel"] > 0
    # the terms add up to the influence function row by row
    np.testing.assert_allclose(res.influence_by_input.sum(axis=2), res.influence, rtol=0, atol=1e-13)


def test_a_given_kernel_has_no_kernel_term(sample):
    data, law = sample
    known = exact_model(transition_model=law.kernel.to_dense()).fit(data)
    res = infer(known, api_targets(), data, cross_fit=None, warn=False)
    split = res.se_by_input
    assert np.all(split["se_kernel"] == 0.0) and np.all(split["share_kernel"] == 0.0)
    assert np.all(res.influence_by_input[:, :, 1] == 0.0)
    expected = expected_variances(law)
    np.testing.assert_allclose(n_var := data.n * split[["se_first_stage", "se_state_law"]].to_numpy() ** 2,
                               expected[:, [0, 2]], rtol=1e-8, atol=1e-12)
    # the efficient influence function of the smaller model: the first stage and the state law only
    np.testing.assert_allclose(data.n * res.std_error ** 2, n_var.sum(axis=1), rtol=1e-8)
    assert "kernel given" in res.route
    assert "kernel 0%" in str(res.summary())
    estimated = infer(exact_model(transition_model="counts").fit(data), api_targets(), data, cross_fit=None,
                      warn=False)
    assert np.all(res.std_error <= estimated.std_error * (1 + 1e-12))  # knowing the kernel never costs


# ---------------------------------------------------------------------------- the identity, cross-fitted
@pytest.fixture(scope="module")
def panel():
    mdp = random_mdp(6, 3, gamma=0.9, random_state=0)
    policy = soft_optimal_solution(mdp.reward, mdp.kernel, mdp.gamma).policy
    return simulate_tabular(mdp, policy, n_episodes=150, horizon=15, random_state=1)


def assert_adds_up(res):
    """The three variances plus twice the covariances are the total variance (1e-12 relative), and
    the covariance matrix they come from is the total's estimator (clustered by episode)."""
    blocks = res.cov_by_input
    np.testing.assert_allclose(np.einsum("jtu->j", blocks), res.std_error ** 2, rtol=1e-12, atol=0)
    split = res.se_by_input
    own = split[SES].to_numpy() ** 2
    cross = np.array([b.sum() - np.trace(b) for b in blocks])
    np.testing.assert_allclose(own.sum(axis=1) + cross, res.std_error ** 2, rtol=1e-12, atol=0)
    np.testing.assert_allclose(split[SHARES].sum(axis=1), 1.0, rtol=0, atol=1e-12)
    # each term's variance is the clustered estimator on that term alone
    from genpqr.inference._infer import clustered_cov

    for t, key in enumerate(INPUT_COLUMNS):
        cov, _ = clustered_cov(res.influence_by_input[:, :, t], res.episode_ids)
        np.testing.assert_allclose(np.diag(cov), split[f"se_{key}"] ** 2, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("cross_fit", [None, 3])
def test_variances_and_covariances_add_up_to_the_total(panel, cross_fit):
    model = genpqr.GenPQR(q_model="exact", normalization=anchor_action(0), gamma=0.9, n_states=6,
                          policy_model=FrequencyClassifier(n_states=6), transition_model="counts", clip=None)
    targets = [policy_value(np.full(3, 1 / 3), gamma=0.7, name="V"), reward_at([(0, 1)], name="cell"),
               reward_projection(np.random.default_rng(0).normal(size=(6, 3, 2)), names=["a", "b"])]
    res = infer(model, targets, panel, cross_fit=cross_fit, random_state=0, warn=False)
    assert_adds_up(res)
    frame = res.to_frame()
    for column in SES + SHARES:  # inference.csv carries them
        np.testing.assert_array_equal(frame[column], res.se_by_input[column])
    # a cell's reward has no state-law term; cross-fitted, that term carries the folds' plug-in spread
    assert res.se_by_input.loc["r(0, 1)", "share_state_law"] < (1e-12 if cross_fit is None else 0.01)
    lines = str(res.summary()).splitlines()
    assert max(map(len, lines)) <= 100
    line = next(ln for ln in lines if ln.startswith("V ") and "first stage" in ln)
    row = res.se_by_input.loc["V"]
    assert f"first stage {row.share_first_stage:.0%}, kernel {row.share_kernel:.0%}" in line


def test_a_fragile_component_names_its_dominant_input(panel):
    """The warning on thin overlap says which input the component's variance comes from."""
    rare = int(np.argmin(panel.action_counts()))
    greedy = np.zeros(3)
    greedy[rare] = 1.0
    thin = panel.subset((panel.actions != rare) | (np.cumsum(panel.actions == rare) <= 3))
    model = genpqr.GenPQR(q_model="exact", normalization=anchor_action(0), gamma=0.9, n_states=6,
                          policy_model=FrequencyClassifier(n_states=6), transition_model="counts", clip=(1e-3, 1.0))
    with pytest.warns(InferenceWarning, match="V_thin.*thin overlap") as caught:
        res = infer(model, policy_value(greedy, reward="log_policy", name="V_thin"), thin, cross_fit=None)
    shares = res.se_by_input.loc["V_thin", [f"share_{k}" for k in INPUT_COLUMNS]].to_numpy()
    label = ["first stage", "kernel", "state law"][int(np.argmax(shares))]
    message = next(str(w.message) for w in caught if issubclass(w.category, InferenceWarning))
    assert message.endswith(f"; the {label} carries {shares.max():.0%} of its variance")
    assert res.warnings == [message]

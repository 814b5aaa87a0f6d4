"""The efficient (optimal minimum-distance) reward projection, ``reward_projection(x,
weights="efficient")`` (issue 34; Chamberlain 1982): exact identities in a small tabular model
whose normalized reward is linear in the features, its overidentification statistic J, and the
option's wiring (the spec grammar, the result's diagnostics, the refusals)."""

import warnings

import numpy as np
import pytest
from scipy.stats import chi2

import genpqr
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.exceptions import InferenceWarning
from genpqr.inference import _algebra as alg
from genpqr.inference import infer, parse_target, reward_projection
from genpqr.inference._spec import target_kind
from genpqr.inference._targets import EFFICIENT, efficient_pieces
from genpqr.normalization import anchor_action, mean_zero
from genpqr.stage1 import FrequencyClassifier
from genpqr.stage2 import soft_optimal_solution

from .designs import joint, law_from, random_law, split
from .test_derivative import derivative_error

S, K, P_FEATURES = 5, 3, 2
THETA = np.array([0.8, -1.3])


def linear_design(seed=11, gamma=0.8, mean_zero_mu=False):
    """A law whose behaviour is soft-optimal for ``r = X theta`` and the normalization that ``r``
    satisfies: the normalized reward is exactly ``X theta`` (notes Thm 3)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(S, K, P_FEATURES))
    if mean_zero_mu:
        mu = np.full((S, K), 1.0 / K)
        X -= X.mean(axis=1, keepdims=True)
    else:
        mu = np.zeros((S, K))
        mu[:, 0] = 1.0
        X[:, 0, :] = 0.0
    reward = X @ THETA
    P = rng.dirichlet(np.ones(S + 1), size=(S, K))
    P[:, :, -1] *= 0.3
    P /= P.sum(axis=2, keepdims=True)
    rho = rng.dirichlet(5 * np.ones(S))
    start = law_from(rho, np.full((S, K), 1.0 / K), P, gamma, mu, np.zeros(S))
    _, pi = alg.soft_fixed_point(reward, start, gamma, np.ones((S, K), dtype=bool), 1.0)
    return law_from(rho, pi, P, gamma, mu, np.zeros(S)), X


def test_influence_covariance_is_the_population_second_moment():
    """The closed form of ``E[chi chi^T]`` against the sum over every outcome, for targets with a
    state-law gradient, a policy score and several kernel equations."""
    law = random_law(seed=4)
    rng = np.random.default_rng(0)
    for pieces in (alg.normalized_map(law, alg.projection_functional(rng.normal(size=(S, K, 2))), law.gamma),
                   alg.log_policy_map(law, alg.softmax_value_functional(np.ones((S, K), dtype=bool), 0.5)),
                   alg.normalized_map(law, alg.policy_value_functional(None), 0.7)):
        chi, prob = alg.population_influence(pieces, law)
        np.testing.assert_allclose(alg.influence_covariance(pieces, law),
                                   np.einsum("sat,satj,satk->jk", prob, chi, chi), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mean_zero_mu", [False, True], ids=["anchor", "mean zero"])
def test_minimum_distance_is_the_closed_form(mean_zero_mu):
    """At a linear truth the weights give theta exactly; H is ``(Phi' V^+ Phi)^{-1} Phi' V^+`` with
    ``V`` from the sum over outcomes and the pseudo-inverse on the full cell vector (no contrast
    basis); the estimator's variance is ``(Phi' V^+ Phi)^{-1}``."""
    law, X = linear_design(mean_zero_mu=mean_zero_mu)
    nr = alg.normalized_reward(law)
    np.testing.assert_allclose(nr.reward, X @ THETA, atol=1e-10)
    md = alg.minimum_distance(law, X)
    np.testing.assert_allclose(np.einsum("psa,sa->p", md.weights, nr.reward), THETA, rtol=1e-10)
    assert md.rank == S * (K - 1)
    cells = alg.normalized_map(law, alg.weighted_sum_functional(np.eye(S * K).reshape(S * K, S, K)), law.gamma)
    chi, prob = alg.population_influence(cells, law)
    V = np.einsum("sat,satj,satk->jk", prob, chi, chi)
    Vp = np.linalg.pinv(V, rcond=1e-10, hermitian=True)
    Phi = X.reshape(S * K, P_FEATURES)
    info = Phi.T @ Vp @ Phi
    np.testing.assert_allclose(md.weights.reshape(P_FEATURES, -1), np.linalg.solve(info, Phi.T @ Vp), atol=1e-9)
    var = alg.influence_covariance(efficient_pieces(law, X), law)
    np.testing.assert_allclose(var, np.linalg.inv(info), rtol=1e-8)


def choice_information(law, X):
    """Fisher information of theta from the choices, the kernel known: ``sum rho pi s s^T`` with
    the score ``s = d log pi(a|s) / d theta`` by central differences of the soft-optimal policy."""
    mask = np.ones(law.shape, dtype=bool)
    scores = []
    for j in range(P_FEATURES):
        step = np.zeros(P_FEATURES)
        step[j] = 1e-5
        logs = [np.log(alg.soft_fixed_point(X @ (THETA + t * step), law, law.gamma, mask, 1.0)[1]) for t in (1, -1)]
        scores.append((logs[0] - logs[1]) / 2e-5)
    score = np.stack(scores, axis=-1)
    return np.einsum("sa,saj,sak->jk", law.density, score, score)


def test_as_efficient_as_the_likelihood_when_the_kernel_is_known():
    """Chamberlain's equivalence: with the weights optimal for the choices' part of V alone, the
    minimum-distance variance is the inverse information of the choices (the MLE's, kernel known)
    to 1e-6; the weights optimal for the whole V (the kernel estimated too) are no better on the
    choices alone, their whole variance exceeds the MLE's by the kernel's estimation error, and the
    data-weighted projection is no more precise."""
    law, X = linear_design()
    md = alg.minimum_distance(law, X)
    own = efficient_pieces(law, X)
    choices_only = alg.Pieces(own.value, own.grad_u, own.grad_rho, [])
    mle = np.linalg.inv(choice_information(law, X))
    assert np.all(np.linalg.eigvalsh(alg.influence_covariance(choices_only, law) - mle) > -1e-12)
    # the weights that are optimal without the kernel's part: their variance is the MLE's exactly
    cells = alg.Pieces(md.cells.value, md.cells.grad_u, md.cells.grad_rho, [])
    Vc = md.basis.T @ alg.influence_covariance(cells, law) @ md.basis
    np.testing.assert_allclose(np.linalg.inv(md.design.T @ np.linalg.inv(Vc) @ md.design), mle, rtol=1e-6)
    full = alg.influence_covariance(own, law)
    assert np.all(np.linalg.eigvalsh(full - mle) > -1e-12)
    projection = alg.normalized_map(law, alg.projection_functional(X), law.gamma)
    assert np.all(np.linalg.eigvalsh(alg.influence_covariance(projection, law) - full) > -1e-12)


def test_pathwise_derivative_at_a_linear_truth():
    """With the weights held fixed the influence function is that of ``H rbar``; at a linear truth
    ``H``'s own movement drops out (``dH Phi theta = 0``), so the target with ``H`` recomputed along
    the path has the same derivative, to 1e-7. Off the linear form it does not: there the SE treats
    the weights as fixed (documented)."""
    law, X = linear_design()
    target = (lambda L: efficient_pieces(L, X))
    assert derivative_error(target, law) < 1e-7
    bent = random_law(seed=3, anchor=True)  # a reward not linear in X
    assert derivative_error(target, bent) > 1e-4


@pytest.mark.slow
def test_monte_carlo_sd_and_the_distribution_of_j():
    """The nuisances estimated by the saturated MLE (cell and transition frequencies) from n rows,
    the weights from the estimated law: the estimator's Monte Carlo SD matches
    ``sqrt(diag (Phi' V^+ Phi)^{-1} / n)`` and J is chi-square(rank - p) (its mean, its 5% rejection
    rate). R = 600 samples of n = 4,000 rows; tolerances stated with each assertion."""
    law, X = linear_design(seed=12)
    R, n = 600, 4000
    var = np.diag(alg.influence_covariance(efficient_pieces(law, X), law)) / n
    p0 = joint(law)
    rng = np.random.default_rng(1)
    thetas, Js = [], []
    dof = S * (K - 1) - P_FEATURES
    for _ in range(R):
        counts = rng.multinomial(n, p0.ravel()).reshape(p0.shape).astype(float)
        fitted = split(counts / n, law.gamma, law.mu, law.g)
        pieces = efficient_pieces(fitted, X)
        thetas.append(pieces.value)
        md = pieces.extras["min_distance"]
        z = md.basis.T @ alg.normalized_reward(fitted).reward.reshape(-1)[md.index]
        J, d = alg.distance_statistic(z, md.cov, md.design, n)
        assert d == dof
        Js.append(J)
    thetas, Js = np.array(thetas), np.array(Js)
    # unbiased to first order: within 4 Monte Carlo SEs (plus an O(1/n) allowance of 1 SE / sqrt(R))
    assert np.all(np.abs(thetas.mean(axis=0) - THETA) < 5 * np.sqrt(var / R)), thetas.mean(axis=0)
    # the variance ratio's sampling sd is sqrt(2 / R) ~ 0.058; allow 4 of them
    ratio = thetas.var(axis=0, ddof=1) / var
    assert np.all(np.abs(ratio - 1.0) < 4 * np.sqrt(2.0 / R)), ratio
    # J: mean dof (its MC sd sqrt(2 dof / R) ~ 0.16), 5% rejections (binomial sd ~ 0.009)
    assert abs(Js.mean() - dof) < 4 * np.sqrt(2 * dof / R), Js.mean()
    assert abs(np.mean(chi2.sf(Js, dof) < 0.05) - 0.05) < 4 * np.sqrt(0.05 * 0.95 / R)


# ---------------------------------------------------------------------------- through infer
N_STATES, N_ACTIONS = 6, 3


@pytest.fixture(scope="module")
def panel():
    mdp = random_mdp(N_STATES, N_ACTIONS, gamma=0.9, random_state=0)
    policy = soft_optimal_solution(mdp.reward, mdp.kernel, mdp.gamma).policy
    return simulate_tabular(mdp, policy, n_episodes=150, horizon=15, random_state=1)


def model_for(norm=None):
    return genpqr.GenPQR(q_model="exact", normalization=norm or anchor_action(0), gamma=0.9, n_states=N_STATES,
                         policy_model=FrequencyClassifier(n_states=N_STATES), transition_model="counts", clip=None)


FEATURES = np.random.default_rng(3).normal(size=(N_STATES, N_ACTIONS, 2))


def test_infer_reports_the_estimate_its_se_and_j(panel):
    """infer's estimate is ``H rbar`` at the fitted law, its SE the clustered influence-function SE
    of ``H chi``; the diagnostics carry J, its degrees of freedom and p-value, and the summary says
    them in lines of at most 100 characters. Without an efficient target no J columns appear."""
    model = model_for().fit(panel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InferenceWarning)
        res = infer(model, [reward_projection(FEATURES, names=["a", "b"], weights="efficient"),
                            reward_projection(FEATURES, names=["c", "d"])], panel, cross_fit=None)
    np.testing.assert_allclose(res.estimate[:2], res.plug_in[:2], rtol=1e-9)  # saturated: one-step = plug-in
    from genpqr.inference._nuisances import Rows, tabular_law

    law = tabular_law(model, Rows.of(panel, tabular=True), 0.0)
    md = alg.minimum_distance(law, FEATURES)
    np.testing.assert_allclose(res.plug_in[:2], np.einsum("psa,sa->p", md.weights, alg.normalized_reward(law).reward),
                               rtol=1e-10)
    z = md.basis.T @ alg.normalized_reward(law).reward.reshape(-1)[md.index]
    J, dof = alg.distance_statistic(z, md.cov, md.design, panel.n)
    diag = res.diagnostics
    assert diag.loc["a", "J"] == pytest.approx(J, rel=1e-8) and diag.loc["b", "J_dof"] == dof == md.rank - 2
    assert diag.loc["a", "J_p_value"] == pytest.approx(chi2.sf(J, dof))
    assert diag.loc[["c", "d"], "J"].isna().all()
    text = str(res.summary())
    assert "specification test of the linear form (a, b; efficient projection)" in text
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "J" in res.to_frame().columns
    plain = infer(model, reward_projection(FEATURES, names=["c", "d"]), panel, cross_fit=None, warn=False)
    assert "J" not in plain.diagnostics.columns and "specification" not in str(plain.summary())


def test_a_rejected_linear_form_warns_and_names_the_target(panel):
    """The panel's reward is not linear in random features: J rejects, and the warning says what
    the estimate then is."""
    with pytest.warns(InferenceWarning, match=r"a, b \(efficient projection\): the data reject the linear form"):
        res = infer(model_for(), reward_projection(FEATURES, names=["a", "b"], weights="efficient"), panel,
                    cross_fit=None)
    assert res.diagnostics.loc["a", "J_p_value"] < 0.01


def test_spec_grammar_and_refusals(panel):
    p = parse_target("projection;weights=efficient", features=FEATURES, feature_names=["a", "b"])
    assert p.kind == EFFICIENT and p.name == "projection (efficient)"
    assert p.components() == ["a (efficient)", "b (efficient)"]
    assert parse_target("projection;weights=data", features=FEATURES).kind == "projection"
    assert target_kind("projection;weights=efficient") == "projection"
    for spec in ("projection;weights=optimal",):
        with pytest.raises(ValueError, match="weights must be one of"):
            target_kind(spec)
        with pytest.raises(ValueError, match="weights must be one of"):
            parse_target(spec, features=FEATURES)
    with pytest.raises(ValueError, match="weights must be an"):
        reward_projection(FEATURES, weights="optimal")
    with pytest.raises(ValueError, match="tabular states: give the features as an"):
        reward_projection(lambda s: np.zeros((len(s), N_ACTIONS, 1)), names=["x"], weights="efficient")
    # a feature that does not vary across actions: mean-zero fixes each state's mean, no contrast informs it
    flat = np.concatenate([FEATURES[:, :, :1], np.repeat(np.arange(N_STATES, dtype=float)[:, None, None], N_ACTIONS,
                                                          axis=1)], axis=2)
    with pytest.raises(ValueError, match=r"cannot identify \['a', 'flat'\]"):
        infer(model_for(mean_zero()), reward_projection(flat, names=["a", "flat"], weights="efficient"), panel,
              cross_fit=None, warn=False)


def test_unvisited_states_are_left_out(panel):
    """A state no row visits carries no cells: the weights are zero there and the answer finite."""
    data = panel.subset(panel.states[:, 0] != N_STATES - 1)
    model = genpqr.GenPQR(q_model="exact", normalization=anchor_action(0), gamma=0.9, n_states=N_STATES)
    res = infer(model, reward_projection(FEATURES, names=["a", "b"], weights="efficient"), data, cross_fit=None,
                warn=False)
    assert np.all(np.isfinite(res.estimate)) and np.all(np.isfinite(res.std_error))
    assert res.diagnostics.loc["a", "J_dof"] == (N_STATES - 1) * (N_ACTIONS - 1) - 2


def test_cross_fitted_estimate_with_j_at_the_full_sample(panel):
    """Cross-fitted, the estimate is the folds' one-step and J is the full-sample one (the folds thin
    the cells); the estimate stays within a fraction of an SE of the unsplit one."""
    model = model_for().fit(panel)
    target = reward_projection(FEATURES, names=["a", "b"], weights="efficient")
    whole = infer(model, target, panel, cross_fit=None, warn=False)
    folds = infer(model, target, panel, cross_fit=3, random_state=0, warn=False)
    assert folds.cross_fit == 3 and len(folds.folds) == 6
    np.testing.assert_allclose(folds.diagnostics.J, whole.diagnostics.J, rtol=1e-12)
    assert np.all(np.abs(folds.estimate - whole.estimate) < whole.std_error)


def test_refused_on_continuous_states(panel):
    """Off the exact tabular path there are no cells to weight: refused before any fit, with the reason."""
    model = genpqr.GenPQR(q_model="linear", normalization=anchor_action(0), gamma=0.9)
    with pytest.raises(ValueError, match=r"tabular states only \(q_model='exact'\)"):
        infer(model, reward_projection(FEATURES, names=["a", "b"], weights="efficient"), panel, warn=False)


def test_a_given_kernel_gives_the_likelihood_variance():
    """With the kernel given (``law.kernel_given``: no Bellman-residual term varies) the weights use
    the choices' covariance alone and the variance of the efficient projection is the inverse
    information of the choices, the MLE's, to 1e-6 (Chamberlain's equivalence)."""
    from dataclasses import replace

    law, X = linear_design()
    given = replace(law, kernel_given=True)
    pieces = efficient_pieces(given, X)
    moving = alg.Pieces(pieces.value, pieces.grad_u, pieces.grad_rho, [])
    np.testing.assert_allclose(alg.influence_covariance(moving, given), np.linalg.inv(choice_information(law, X)),
                               rtol=1e-6)
    np.testing.assert_allclose(pieces.value, THETA, rtol=1e-10)

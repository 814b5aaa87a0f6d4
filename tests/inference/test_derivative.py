"""The decisive check of every influence function (issue 34; debiased-inference notes Sec. 9.2):
along random submodels ``p_t = p_0 (1 + t h)`` (``E_0 h = 0``) of a small exact MDP, the
derivative of the target equals ``E_0[chi h]``, to 1e-7 relative; and ``E_0 chi = 0``. The
printed formulas the notes found incomplete (the counterfactual softmax value, Thm 10; the
normalized-reward targets, Thm 6 / Lemma 7 / Thm 11) fail the same check: the library does not
ship them."""

import numpy as np
import pytest

from genpqr.inference import _algebra as alg

from .designs import S, K, joint, random_law, split

rng = np.random.default_rng(7)
SIGMA = rng.dirichlet(np.ones(K), size=S)
MASK = np.broadcast_to(np.array([True, False, True]), (S, K))
W = rng.normal(size=(2, S, K))
WEIGHTS = rng.normal(size=(2, S, K))
X = rng.normal(size=(S, K, 2))
OFFSET = rng.normal(size=(S, K))

TARGETS = {
    "policy value under u (1a)": lambda L: alg.log_policy_map(L, alg.policy_value_functional(SIGMA)),
    "behaviour value under u": lambda L: alg.log_policy_map(L, alg.policy_value_functional(None)),
    "policy value, fixed start": lambda L: alg.log_policy_map(L, alg.policy_value_functional(SIGMA, np.full(S, 1 / S))),
    "softmax value under u (1b)": lambda L: alg.log_policy_map(L, alg.softmax_value_functional(MASK, 0.5)),
    "policy value under rbar (2)": lambda L: alg.normalized_map(L, alg.policy_value_functional(SIGMA), 0.7),
    "behaviour value under rbar": lambda L: alg.normalized_map(L, alg.policy_value_functional(None), 0.7),
    "softmax value under rbar": lambda L: alg.normalized_map(L, alg.softmax_value_functional(MASK, 0.5), 0.7),
    "user measure of rbar (cells)": lambda L: alg.normalized_map(L, alg.weighted_sum_functional(W), L.gamma),
    "data mean of w rbar": lambda L: alg.normalized_map(L, alg.data_mean_functional(WEIGHTS), L.gamma),
    "projection of rbar": lambda L: alg.normalized_map(L, alg.projection_functional(X, OFFSET), L.gamma),
    "weighted projection of rbar": lambda L: alg.normalized_map(L, alg.projection_functional(X, OFFSET, WEIGHTS[0] ** 2),
                                                                L.gamma),
    "difference of values": lambda L: alg.log_policy_map(L, alg.policy_value_functional(SIGMA)).combine(
        alg.log_policy_map(L, alg.policy_value_functional(None)), -1.0),
}


def derivative_error(target, law, n_directions=4, eps=1e-5, chi=None):
    """Largest relative gap between the finite-difference derivative and ``E_0[chi h]``."""
    p0 = joint(law)
    if chi is None:
        chi = alg.population_influence(target(law), law)[0]
    worst = 0.0
    for d in range(n_directions):
        h = np.random.default_rng(100 + d).uniform(-1, 1, size=p0.shape)
        h -= np.sum(p0 * h)
        values = [target(split(p0 * (1 + t * h), law.gamma, law.mu, law.g)).value for t in (eps, -eps)]
        fd = (values[0] - values[1]) / (2 * eps)
        exact = np.einsum("sat,satm->m", p0 * h, chi)
        worst = max(worst, float(np.max(np.abs(fd - exact)) / max(np.max(np.abs(fd)), 1e-12)))
    return worst


@pytest.mark.parametrize("anchor", [False, True], ids=["mixed mu", "anchor mu"])
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_influence_function_is_the_pathwise_derivative(name, anchor):
    law = random_law(seed=3, anchor=anchor)
    pieces = TARGETS[name](law)
    chi, prob = alg.population_influence(pieces, law)
    np.testing.assert_allclose(prob, joint(law), atol=1e-15)
    assert np.max(np.abs(np.einsum("sat,satm->m", prob, chi))) < 1e-12  # mean zero (proves nothing alone)
    assert derivative_error(TARGETS[name], law) < 1e-7


def test_derivative_holds_without_termination_and_at_gamma_zero():
    for law in (random_law(seed=5, terminal=False), random_law(seed=6, gamma=0.0)):
        for name in ("softmax value under rbar", "projection of rbar", "behaviour value under u"):
            assert derivative_error(TARGETS[name], law) < 1e-7, name


# ---------------------------------------------------------------------------- the printed formulas fail
def printed_softmax(law):
    """Thm 10 as printed: ``d~`` where the corrected form has ``D~ = d~ + d* A*`` (notes Sec. 5.3)."""
    pieces = TARGETS["softmax value under u (1b)"](law)
    phi_eq = pieces.equations[1]
    eta_pi = pieces.equations[0].omega
    V = pieces.equations[0].f
    pi_star = eta_pi[0] / np.maximum(eta_pi[0].sum(axis=1, keepdims=True), 1e-300)
    q = law.u + law.gamma * law.expect(V)
    adv = np.where(MASK, q - V[:, None], 0.0)
    time0 = (law.gamma / 0.5) * eta_pi * adv  # the t = 0 part of Lambda, which the printed form drops
    wrong = alg.Pieces(pieces.value, pieces.grad_u - eta_pi * adv / 0.5,
                       pieces.grad_rho, [pieces.equations[0], alg.Equation(phi_eq.omega - time0, phi_eq.f, 1.0)])
    return alg.population_influence(wrong, law)[0]


def printed_normalized(law, functional, gamma_f):
    """Thm 6 as printed: ``alpha = c = W~ - (nu/pi0) sum_b W~`` (the propagation zeta dropped)."""
    nr = alg.normalized_reward(law)
    rg = functional(law, nr.reward, gamma_f)
    c = rg.grad_r - law.mu[None] * rg.grad_r.sum(axis=2, keepdims=True)
    wrong = alg.Pieces(rg.value, c + rg.grad_pi, rg.grad_rho,
                       list(rg.equations) + [alg.Equation(c, nr.w, law.gamma)])
    return alg.population_influence(wrong, law)[0]


def test_the_printed_formulas_fail_the_derivative_test():
    law = random_law(seed=3, anchor=True)
    assert derivative_error(TARGETS["softmax value under u (1b)"], law, chi=printed_softmax(law)) > 0.05
    for name, fn, gf in [("policy value under rbar (2)", alg.policy_value_functional(SIGMA), 0.7),
                         ("projection of rbar", alg.projection_functional(X, OFFSET), law.gamma)]:
        chi = printed_normalized(law, fn, gf)
        assert derivative_error(TARGETS[name], law, chi=chi) > 0.05, name


def test_printed_normalized_formula_is_right_when_transitions_ignore_the_action():
    """The notes' sanity check: with action-independent transitions the printed Example 2 is exact."""
    law = random_law(seed=4, anchor=True)
    P = law.kernel.to_dense()
    P[:] = P[:, :1]
    law = alg.TabularLaw.create(law.rho, law.policy, P.reshape(S * K, S), law.gamma, law.mu, law.g)
    fn = alg.policy_value_functional(SIGMA)
    chi = printed_normalized(law, fn, 0.7)
    assert derivative_error(TARGETS["policy value under rbar (2)"], law, chi=chi) < 1e-7


def test_example_2_at_the_agents_discount_is_a_value_difference():
    """Notes Sec. 5.5: with gamma' = gamma the corrected representer is ``d_pi - d_mu`` (a value
    difference, normalization-free: Thm 2)."""
    law = random_law(seed=8, anchor=True, terminal=False)
    ex2 = alg.normalized_map(law, alg.policy_value_functional(SIGMA), law.gamma)
    diff = alg.log_policy_map(law, alg.policy_value_functional(SIGMA)).combine(
        alg.log_policy_map(law, alg.policy_value_functional(law.mu)), -1.0)
    np.testing.assert_allclose(ex2.grad_u, diff.grad_u, atol=1e-12)
